"""The documentation is executable: every format example parses, every README command runs.

1. Every fenced block of docs/*.md marked ``<!-- example: NAME -->`` is fed to the strict parser
   attest itself uses for that format (the identity file, the trust and release policies, the
   pins, a promotion-log entry and checkpoint, a rebuild result, ``.agent-policy.yml`` and its lock, the handoff,
   a review state, a review result, a review record, a CI result, the publication note). Blocks
   marked ``<!-- example-file: PATH -->`` are files the examples name (public keys); they are
   written to PATH first. A marked example of a format this module does not know fails, and so
   does a known format with no example.
2. Every ``sh`` / ``console`` / ``bash`` block of README.md is either run here for real, command
   line by command line, in a temporary directory (the cheap ones), or mapped to the test that
   runs it (the demo and the whole suite). A block this module does not know fails the test.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"

_MARKED = re.compile(r"<!-- (example|example-file): ([\w./-]+) -->\n```(\w*)\n(.*?)\n```", re.S)


def _marked(kind: str) -> dict[str, tuple[str, str]]:
    """``{name: (page, block text)}`` of every block marked ``kind`` in docs/*.md; a name twice fails."""
    found: dict[str, tuple[str, str]] = {}
    for page in sorted(DOCS.glob("*.md")):
        for m in _MARKED.finditer(page.read_text(encoding="utf-8")):
            if m.group(1) != kind:
                continue
            assert m.group(2) not in found, f"{kind} {m.group(2)} is marked twice ({found[m.group(2)][0]}, {page.name})"
            found[m.group(2)] = (page.name, m.group(4) + "\n")
    return found


def _example(name: str) -> str:
    return _marked("example")[name][1]


def _write_files(tmp_path: Path) -> None:
    for rel, (_, text) in _marked("example-file").items():
        target = tmp_path / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)


def _statement(name: str) -> dict:
    doc = json.loads(_example(name))
    assert doc["_type"] == "https://in-toto.io/Statement/v1"
    return doc


# -- 1. the format examples ------------------------------------------------------------------------


def check_identity(tmp_path: Path) -> None:
    from attest.review.bootstrap import load_identity

    path = tmp_path / "identity.json"
    path.write_text(_example("identity"))
    host = load_identity(path)
    assert (host.full_name, host.number) == ("acme/widgets", 7)


def check_trust_policy(tmp_path: Path) -> None:
    from attest.attestation import load_policy

    _write_files(tmp_path)
    path = tmp_path / "trust.toml"
    path.write_text(_example("trust-policy"))
    policy = load_policy(path)
    assert policy.threshold == 1 and len(policy.signers) == 2


def check_release_policy(tmp_path: Path) -> None:
    from attest.attestation import load_policy
    from attest.builder._rebuilders import RELEASE_POLICY_EXTENSIONS, rebuilders_of

    _write_files(tmp_path)
    path = tmp_path / "release-policy.toml"
    path.write_text(_example("release-policy"))
    policy = load_policy(path, extensions=RELEASE_POLICY_EXTENSIONS)
    rebuilders = rebuilders_of(policy)
    assert rebuilders is not None and rebuilders.threshold == 2
    assert set(rebuilders.identities) == set(policy.signer_ids[1:])  # the two rebuilder keys, by their real ids


def check_pins(tmp_path: Path) -> None:
    from attest.review.bootstrap._deploy import DeploymentPins

    path = tmp_path / "pins.toml"
    path.write_text(_example("pins"))
    pins = DeploymentPins.from_file(path)
    assert pins.runtime.name.endswith("-attest-runtime") and pins.skill.root == "agent-policy"


def check_promotion_log_entry(tmp_path: Path) -> None:
    from attest.builder._promolog import parse_entry

    entry = parse_entry(_statement("promotion-log-entry"), number=1, path="000001.json", digest="sha256:" + "0" * 64, signers=())
    assert entry.sequence == 1 and entry.previous is None


def check_promotion_log_checkpoint(tmp_path: Path) -> None:
    from attest.builder._promolog import checkpoint_path, read_checkpoint

    text = _example("promotion-log-checkpoint")
    doc = json.loads(text)
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    path = Path(checkpoint_path(state, doc["pins"]))
    path.parent.mkdir(mode=0o700)
    path.write_text(text.rstrip("\n"))
    path.chmod(0o600)
    checkpoint = read_checkpoint(state, doc["pins"])
    assert checkpoint is not None and (checkpoint.sequence, checkpoint.digest) == (doc["sequence"], doc["digest"])


def check_rebuild_result(tmp_path: Path) -> None:
    from attest.builder._rebuilders import RebuildSubject

    subject = RebuildSubject.from_statement(_statement("rebuild-result"), "rebuild.json")
    assert subject.runtime.name.endswith("-attest-runtime")
    assert subject.runtime.inputs_digest.startswith(subject.runtime.name.split("-")[0])


def check_agent_policy_yml(tmp_path: Path) -> None:
    from attest.policy import PolicyConfig

    config = PolicyConfig.from_bytes(_example("agent-policy-yml").encode())
    assert config.skills == ("pr-review",)


def check_agent_policy_lock(tmp_path: Path) -> None:
    from attest._json import canonical_bytes
    from attest.policy import PolicyConfig, PolicyLock
    from attest.policy._lock import check_agreement

    yml = _example("agent-policy-yml").encode()
    # The file is the canonical bytes of the object the page shows indented.
    lock = PolicyLock.from_bytes(canonical_bytes(json.loads(_example("agent-policy-lock"))))
    config = PolicyConfig.from_bytes(yml)
    assert lock.config_sha256 == hashlib.sha256(yml).hexdigest()  # the lock of the configuration shown above it
    expected = [(o.path, o.renderer, o.context) for o in lock.outputs]
    assert check_agreement(config, lock, expected) == []


def check_handoff(tmp_path: Path) -> None:
    from attest.review.handoff import parse_handoff

    handoff = parse_handoff(_statement("handoff"), attestation_digest="sha256:" + "0" * 64, signers=())
    assert handoff.number == 7 and set(handoff.images) == {"bootstrap", "runtime", "base", "procedure"}


def check_review_state(tmp_path: Path) -> None:
    from attest._json import canonical_bytes
    from attest.review.procedure._recheck import parse_review_state

    doc = json.loads(_example("review-state"))
    state = parse_review_state(canonical_bytes(doc), doc["review"], "state.json")  # the id is the content's
    assert state.generation == 0 and state.head == doc["head"]


def check_review_result(tmp_path: Path) -> None:
    from attest.review.handoff._result import parse_result

    result = parse_result(_example("review-result").encode())
    assert result.complete and any(f.blocking for f in result.findings)


def check_review_record(tmp_path: Path) -> None:
    from attest.review.merge import parse_review_record
    from attest.review.merge._gate import record_confined

    statement = _statement("review-record")
    assert statement["predicateType"] == "https://attest.dev/review-record/v1"
    record = parse_review_record(statement["predicate"], "sha256:" + "0" * 64)
    assert record.status == "complete" and record_confined(statement["predicate"])
    # The record is of the review state shown above.
    assert record.review == json.loads(_example("review-state"))["review"]


def check_ci_result(tmp_path: Path) -> None:
    from attest.review.merge import parse_ci_result

    statement = _statement("ci-result")
    assert statement["predicateType"] == "https://attest.dev/ci-result/v1"
    ci = parse_ci_result(statement["predicate"], "sha256:" + "0" * 64)
    head = ci.head
    # The subject attest signs: the head commit, by the SHA-256 of its id and as gitCommit.
    assert statement["subject"] == [{"name": f"git-commit:{head}",
                                     "digest": {"sha256": hashlib.sha256(head.encode()).hexdigest(), "gitCommit": head}}]


def check_publication_note(tmp_path: Path) -> None:
    from attest.review.platform._publish import Published

    text = _example("publication-note")
    doc = json.loads(text)
    note = Published(doc["review_id"], doc["posted"], doc["commit_id"], doc["state"], doc["login"], doc["record_digest"],
                     doc["payload_digest"], doc["repository"], doc["pull_request"], doc["note"])
    assert json.dumps(note.to_json(), sort_keys=True, indent=2) + "\n" == text  # exactly what publish writes


FORMATS: dict[str, Callable[[Path], None]] = {
    "identity": check_identity,
    "trust-policy": check_trust_policy,
    "release-policy": check_release_policy,
    "pins": check_pins,
    "promotion-log-entry": check_promotion_log_entry,
    "promotion-log-checkpoint": check_promotion_log_checkpoint,
    "rebuild-result": check_rebuild_result,
    "agent-policy-yml": check_agent_policy_yml,
    "agent-policy-lock": check_agent_policy_lock,
    "handoff": check_handoff,
    "review-state": check_review_state,
    "review-result": check_review_result,
    "review-record": check_review_record,
    "ci-result": check_ci_result,
    "publication-note": check_publication_note,
}


def test_every_marked_example_is_a_known_format_and_every_format_has_one() -> None:
    assert sorted(_marked("example")) == sorted(FORMATS)


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_the_documented_example_parses(name: str, tmp_path: Path) -> None:
    FORMATS[name](tmp_path)


# -- 2. README.md's command blocks -----------------------------------------------------------------

README = ROOT / "README.md"
_BLOCK = re.compile(r"^```(sh|console|bash)\n(.*?)^```", re.S | re.M)
_HEREDOC = re.compile(r"<<-?\s*'?(\w+)'?")


def readme_blocks() -> list[list[str]]:
    """README.md's shell blocks, each a list of commands (continuation lines and here-documents joined)."""
    blocks = []
    for m in _BLOCK.finditer(README.read_text(encoding="utf-8")):
        lines = m.group(2).splitlines()
        commands: list[str] = []
        i = 0
        while i < len(lines):
            command = lines[i]
            i += 1
            while command.rstrip().endswith("\\") and i < len(lines):
                command += "\n" + lines[i]
                i += 1
            heredoc = _HEREDOC.search(command.split("#")[0])
            if heredoc:
                while i < len(lines):
                    command += "\n" + lines[i]
                    i += 1
                    if lines[i - 1].strip() == heredoc.group(1):
                        break
            if command.strip():
                commands.append(command)
        blocks.append(commands)
    return blocks


def _comment_at(line: str) -> int:
    """Where a line's trailing comment starts (a ``#`` after whitespace, outside quotes), or its length."""
    quote = ""
    for i, ch in enumerate(line):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and i > 0 and line[i - 1] in " \t":
            return i
    return len(line)


def _code(command: str) -> str:
    """The command without the trailing comment of its first line."""
    first, nl, rest = command.partition("\n")
    return first[:_comment_at(first)].rstrip() + nl + rest


def _comment(command: str) -> str:
    first = command.partition("\n")[0]
    return first[_comment_at(first) + 1:]


def _subcommand(command: str) -> tuple[str, ...]:
    """The attest (sub)command a command line runs, as the CLI names it (``("review", "start")``)."""
    from attest.cli._helptext import TEXTS

    words = shlex.split(_code(command).replace("\\\n", " "))
    assert words[0] == "attest", f"not an attest command: {command!r}"
    longest: tuple[str, ...] = ()
    for n in range(1, len(words)):
        if tuple(words[1:n + 1]) in TEXTS:
            longest = tuple(words[1:n + 1])
    assert longest, f"{command!r} names no attest command"
    return longest


#: The two expensive commands: what runs them.
TWO_COMMANDS = ["python3 bootstrap.py demo", "python3 bootstrap.py test"]

#: Each attest command a mapped README block shows, and the test module that runs it for real.
MAPPED: dict[tuple[str, ...], str] = {
    ("fetch",): "tests/builder/test_build_cli.py",
    ("build", "runtime"): "tests/builder/test_build_cli.py",
    ("build", "skill"): "tests/builder/test_build_cli.py",
    ("rebuild",): "tests/builder/test_build_cli.py",
    ("promote",): "tests/review/test_release_promotion.py",
    ("rebuild-release",): "tests/review/test_release_promotion.py",
    ("policy", "check"): "tests/policy/test_self_hosting.py",
    ("install", "skill"): "tests/review/test_install_skill.py",
    ("bootstrap",): "tests/review/test_bootstrap.py",
    ("review", "start"): "tests/review/test_review_start.py",
    ("review", "exec"): "tests/review/test_review_exec.py",
    ("review", "recheck"): "tests/review/test_review_recheck.py",
    ("review", "serialize"): "tests/review/test_review_serialize.py",
    ("merge-gate", "check"): "tests/review/test_merge_gate.py",
    ("init", "github"): "tests/review/test_github_workflow.py",
    ("review", "publish"): "tests/review/test_github_flow.py",
}

#: Every README block, by its first command: run here ("run"), the two expensive commands
#: ("two-commands"), or mapped command by command to MAPPED ("mapped").
BLOCKS = {
    "python3 bootstrap.py demo": "two-commands",
    "mkdir -p tree && printf 'hello\\n' > tree/README": "run",
    "attest keygen --type ed25519 -o release.pem": "run",
    "attest freeze tampered --attestation tree.intoto.json --policy policy.toml --state-dir state": "run",
    "attest fetch": "mapped",
    "attest policy check --root path/to/repo": "mapped",
    "attest init github --repo path/to/consumer --require-check test --state-dir /var/lib/attest \\": "mapped",
}


def _kind(block: list[str]) -> str:
    first = _code(block[0]).partition("\n")[0].rstrip()
    assert first in BLOCKS, (f"README.md has a command block this test does not know (first line {first!r}): run it in "
                             "test_readme_commands_run or map it in BLOCKS")
    return BLOCKS[first]


def test_every_readme_block_is_known() -> None:
    kinds = [_kind(b) for b in readme_blocks()]
    assert sorted(set(kinds)) == ["mapped", "run", "two-commands"] and len(kinds) == len(BLOCKS)


def test_the_two_commands_are_what_ci_and_the_demo_test_run() -> None:
    [block] = [b for b in readme_blocks() if _kind(b) == "two-commands"]
    assert [_code(c).strip() for c in block] == TWO_COMMANDS
    # The test command is exactly .ci/run's (a fresh clone runs it there).
    assert (ROOT / ".ci" / "run").read_text().strip().splitlines()[-1].strip() == "python3 bootstrap.py test"
    # bootstrap.py RECIPE runs `just RECIPE`; the demo recipe is `attest demo`, which tests/test_demo.py runs
    # in-process (twice, --offline) rather than a second time here.
    assert '[os.fspath(VENV / "bin" / "just"), *recipe]' in (ROOT / "bootstrap.py").read_text()
    justfile = (ROOT / "Justfile").read_text()
    assert re.search(r"^demo:\n    attest demo --state-dir \{\{state\}\}\n", justfile, re.M)
    assert re.search(r"^test \*ARGS: check-and-collect\n    python -m pytest -n 3 --dist loadfile --no-loadscope-reorder --durations=10 "
                     r"\{\{ARGS\}\}\n", justfile, re.M)
    # The static checks run before the tests, and a failing check fails the recipe with its own status.
    assert re.search(r"^check-and-collect:\n.*\n    \{\{quote\(just_executable\(\)\)\}\} -f \{\{quote\(justfile\(\)\)\}\} check "
                     r"\|\| \{ status=\$\?;", justfile, re.M)
    assert 'main(["demo", "--state-dir"' in (ROOT / "tests" / "test_demo.py").read_text()


def test_every_mapped_command_is_run_by_its_test() -> None:
    shown = {_subcommand(c) for b in readme_blocks() if _kind(b) == "mapped" for c in b}
    assert shown - set(MAPPED) == set(), "a README command with no test that runs it"
    for command in shown:
        text = (ROOT / MAPPED[command]).read_text()
        assert ", ".join(f'"{w}"' for w in command) in text, f"{MAPPED[command]} does not run attest {' '.join(command)}"


def test_readme_commands_run(tmp_path: Path) -> None:
    """The cheap blocks, in order, in one directory: each command's exit status and reason codes as its comment says."""
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    if os.geteuid() != 0:
        env["ATTEST_BACKEND"] = "readonly"  # as the README tells an ordinary user
    ran = 0
    for block in readme_blocks():
        if _kind(block) != "run":
            continue
        for command in block:
            comment = _comment(command)
            m = re.search(r"\bexit (\d+)", comment)
            want = int(m.group(1)) if m else 0
            done = subprocess.run(["bash", "-c", _code(command)], cwd=tmp_path, env=env, capture_output=True, text=True,
                                  timeout=120)
            out = done.stdout + done.stderr
            assert done.returncode == want, f"{command!r} exited {done.returncode}, README says {want}:\n{out}"
            for code in re.findall(r"\b[A-Z][A-Z0-9]*_[A-Z0-9_]+\b", comment):
                assert code in out, f"{command!r} did not report {code}:\n{out}"
            if "OK" in comment.split():
                assert "OK" in out
            ran += 1
    assert ran >= 12
