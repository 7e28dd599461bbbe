"""The real ``codex`` CLI as the deployment's reviewer, end to end through ``just verify``.

A real deployment whose runtime is this repository's own toolchain (the runtime image's
``bin/attest`` runs bootstrap's managed check and ``attest review agent``), a reviewer image the
deployment attested and froze (``bin/codex``: the pinned native binary, ``fake_model.py``, canned
answers, ``bin/review``), a consumer repository with a pull request, and the Justfile's ``verify``
recipe with ``ATTEST_REVIEWER_IMAGE``/``ATTEST_REVIEWER_ATTESTATION``. Inside the confinement
(its own network namespace, its loopback up: ``"network": "loopback"``) ``bin/review`` starts the
fake model on 127.0.0.1 with the runtime's interpreter and execs ``attest review agent -- codex exec
... -- {prompt}``; codex makes its one ``POST /v1/responses`` there, prints the canned answer, and
the adapter turns it into the result.

The test_bootstrap ``dep`` deployment cannot serve here: its runtime is the test toolchain of
support.build (``bin/tool``, ``bin/python``), which has no ``bin/attest``, so ``attest bootstrap``
fails at step 6 (``COMMAND_NOT_FOUND .../bin/attest``). The deployment of this module is the same
shape (promote with ``unsafe_without_rebuilders``) over builders/runtime.toml and skill.toml at
this checkout's HEAD: the project's lock, hence the package registry (marked ``registry``; a warm
wheel cache needs no network). codex comes from support.agent_cli.fetch_codex (its cache, or the
npm registry); where neither is reachable the module is skipped, saying so.
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import socket
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from support.agent_cli import CodexUnavailable, fetch_codex, review_script
from support.caps import BACKEND
from support.deployment import DEPLOY_ROLES, RELEASE_ROLES
from support.fake_model import parse_request_lines
from support.gitrepo import git
from support.project_runtime import project_runtime
from test_bootstrap import Consumer, config_text, identity_file, make_consumer

from attest.attestation import CLOSED_TREE_PREDICATE, generate_key, load_policy, load_signer, verify_attestation_file
from attest.builder._sandbox import loopback_tool
from attest.review.procedure import REVIEW_RECORD_PREDICATE

pytestmark = [
    pytest.mark.registry,
    pytest.mark.skipif(loopback_tool() is None, reason="no ip (iproute2): the confinement's loopback stays down, so a "
                       "reviewer cannot serve its own fake model on 127.0.0.1"),
]

ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = ROOT / ".venv" / "bin"
TOOLCHAIN_REPOSITORY = "https://github.com/attest-dev/attest"  # builders/runtime.toml's toolchain.repository
# The line the pull request plants and the canned answer points at: src.txt is "code\n" at the base (make_consumer).
PLANTED_PATH, PLANTED_LINE = "src.txt", 2
PLANTED = "api_token = 'ghp_planted0123456789'  # planted by the pull request"
FINDING = {"path": PLANTED_PATH, "line": PLANTED_LINE, "side": "RIGHT", "severity": "major",
           "title": "A token is committed in src.txt", "detail": "The pull request adds a literal API token.\nRemove it."}
ANSWER = ("I read the procedure and the change.\n<findings>\n"
          + json.dumps({"findings": [FINDING], "coverage": [PLANTED_PATH], "limitations": []}) + "\n</findings>\nDone.\n")
PLAIN_ANSWER = "I reviewed the change and everything looks fine to me.\n"  # no findings block: AGENT_OUTPUT_INVALID


@dataclass(frozen=True)
class RealDeployment:
    tmp: Path
    state: Path
    pins: Path
    trust: Path  # the deployment's and the release's roles, and the deployment key's closed-tree role (the reviewer image)
    key: Path
    sha: str
    skill: Path  # the installed skill
    installation: Path  # its installation attestation


@dataclass(frozen=True)
class Reviewer:
    identity: str
    attestation: Path
    path: str  # the frozen image in the store


def _trust(path: Path, deploy: Path, release: Path) -> Path:
    """TRUST: test_bootstrap's deployment roles plus ``closed-tree`` for the deployment key (it attests the reviewer image)."""
    def signer(key: Path, roles: tuple[str, ...]) -> str:
        return f'[[signers]]\nkind = "key"\npublic_key = "{key}"\npredicates = {json.dumps(list(roles))}\n'
    path.write_text("threshold = 1\n" + signer(deploy, (*DEPLOY_ROLES, CLOSED_TREE_PREDICATE)) + signer(release, RELEASE_ROLES))
    return path


def _unmake(path: Path) -> None:
    subprocess.run(["chattr", "-R", "-f", "-i", str(path)], check=False, capture_output=True)


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealDeployment]:
    """A deployment of this checkout's HEAD: the real runtime (with bin/attest) and skill, promoted, one installation."""
    from attest.builder import Sandbox, SkillRecipe, install_skill, load_recipe
    from attest.builder._promote import promote

    tmp = tmp_path_factory.mktemp("real-agent")
    # The session's one build of HEAD's runtime (support.project_runtime): the promotion below finds it in the shared
    # state, verifies and reuses it, then builds the skill and rebuild-checks both as every promotion does.
    shared = project_runtime(tmp_path_factory)
    sha, recipe, skill_recipe = shared.sha, shared.recipe, load_recipe(ROOT / "builders" / "skill.toml")
    assert isinstance(skill_recipe, SkillRecipe)
    sandbox = Sandbox.establish(allow_unisolated_network=False)
    keys = tmp / "keys"
    keys.mkdir()
    for name in ("release", "deploy"):
        generate_key("ed25519", keys / f"{name}.pem")
    release_policy = keys / "release-policy.toml"
    release_policy.write_text(f'threshold = 1\n[[signers]]\nkind = "key"\npublic_key = "{keys / "release.pub.pem"}"\n')
    deploy = tmp / "deploy"
    deploy.mkdir()
    pins, state = deploy / "pins.toml", shared.state
    promote(toolchain_rev=sha, pins_path=str(pins), signer=load_signer(str(keys / "release.pem")),
            policy_path=str(release_policy), runtime_recipe=recipe, skill_recipe=skill_recipe, state=str(state),
            cache=str(shared.cache), sandbox=sandbox, freeze_backend=BACKEND,
            unsafe_without_rebuilders=True)  # one builder, as test_bootstrap's dep (test_release_promotion.py: k of n)
    trust = _trust(deploy / "trust.toml", keys / "deploy.pub.pem", keys / "release.pub.pem")
    (tmp / "skills").mkdir()
    installed = install_skill(pins, state, tmp / "skills" / "agent-policy", load_signer(str(keys / "deploy.pem")),
                              policy=load_policy(trust))
    yield RealDeployment(tmp, state, pins, trust, keys / "deploy.pem", sha, Path(installed.installed_root),
                         Path(installed.attestation))
    _unmake(tmp)


@pytest.fixture(scope="module")
def codex() -> str:
    try:
        return fetch_codex()
    except CodexUnavailable as e:
        pytest.skip(f"the pinned codex CLI is not cached and cannot be fetched: {e}")


def _attest_cli(*args: str) -> dict[str, Any]:
    proc = subprocess.run([str(VENV_BIN / "attest"), *args, "--json"], capture_output=True, text=True, check=False, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc: dict[str, Any] = json.loads(proc.stdout)
    return doc


@pytest.fixture(scope="module")
def reviewer(codex: str, deployment: RealDeployment) -> Iterator[Reviewer]:  # codex first: its skip is quick
    """The deployment's reviewer image: bin/codex, fake_model.py, the answers and bin/review; attested, then frozen."""
    src = deployment.tmp / "reviewer"
    (src / "bin").mkdir(parents=True)
    shutil.copyfile(codex, src / "bin" / "codex")  # codex-resources/bwrap is not needed: --sandbox danger-full-access
    shutil.copyfile(ROOT / "tests" / "support" / "fake_model.py", src / "fake_model.py")
    (src / "answer.txt").write_text(ANSWER)
    (src / "answer-plain.txt").write_text(PLAIN_ANSWER)
    (src / "bin" / "review").write_text(review_script(timeout=120))
    for p in (src / "bin" / "codex", src / "bin" / "review"):
        os.chmod(p, 0o755)
    for p in (src / "fake_model.py", src / "answer.txt", src / "answer-plain.txt"):
        os.chmod(p, 0o644)
    attestation = deployment.tmp / "reviewer.att.json"
    _attest_cli("attest", str(src), "--key", str(deployment.key), "-o", str(attestation))
    frozen = _attest_cli("freeze", str(src), "--attestation", str(attestation), "--policy", str(deployment.trust),
                         "--state-dir", str(deployment.state), "--backend", BACKEND)
    shutil.rmtree(src)  # the store holds the image; the 300 MB candidate is not needed again
    yield Reviewer(frozen["identity"], attestation, frozen["image"])
    image = Path(frozen["image"])
    _unmake(image)
    shutil.rmtree(image.parent, ignore_errors=True)  # 300 MB; nothing reads this state again


# -- the pull request -----------------------------------------------------------------------------------------------


def pull_request(dep: RealDeployment, path: Path, planted: str) -> Consumer:
    """A consumer of the deployment's toolchain whose pull request head appends ``planted`` to src.txt (line 2)."""
    c = make_consumer(path, dep.sha, config=config_text(dep.sha, repository=TOOLCHAIN_REPOSITORY))
    git(path, "checkout", "-qb", "pr")
    (path / PLANTED_PATH).write_text(f"code\n{planted}\n")
    git(path, "commit", "-qam", "pull request: one line")
    return Consumer(path, c.base, git(path, "rev-parse", "HEAD"))


def changed_right_lines(repo: Path, merge_base: str, head: str, path: str) -> set[int]:
    """The head-side lines ``git diff -U0 MERGE_BASE HEAD -- PATH`` changes, from its hunk headers."""
    lines: set[int] = set()
    diff = git(repo, "diff", "-U0", merge_base, head, "--", path)
    for m in re.finditer(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@", diff, re.M):
        start, count = int(m.group(1)), int(m.group(2) or 1)
        lines.update(range(start, start + count))
    return lines


def just_verify(dep: RealDeployment, rev: Reviewer, c: Consumer, tmp: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """``just verify REPO --identity FILE`` as a consumer's CI runs it, with the deployment's reviewer image."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("ATTEST_")}
    full = {**base, "PATH": f"{VENV_BIN}:{os.environ.get('PATH', '/usr/bin:/bin')}", "ATTEST_PINS": str(dep.pins),
            "ATTEST_TRUST": str(dep.trust), "ATTEST_SKILL": str(dep.skill), "ATTEST_INSTALLATION": str(dep.installation),
            "ATTEST_KEY": str(dep.key), "ATTEST_STATE_DIR": str(dep.state), "ATTEST_REVIEW_DIR": str(tmp / "out"),
            "ATTEST_BACKEND": BACKEND, "ATTEST_REVIEWER_IMAGE": rev.identity, "ATTEST_REVIEWER_ATTESTATION": str(rev.attestation),
            **env}
    ident = identity_file(tmp / "identity.json", c)
    argv = [str(VENV_BIN / "just"), "--justfile", str(ROOT / "Justfile"), "verify", str(c.path), "--identity", str(ident)]
    return subprocess.run(argv, capture_output=True, text=True, check=False, env=full, cwd=tmp, timeout=600)


def prompt_text(request: dict[str, Any]) -> str:
    """Every text the request's ``input`` holds (the prompt codex sent as the user's message, among its own)."""
    out: list[str] = []

    def walk(v: Any) -> None:
        if isinstance(v, str):
            out.append(v)
        elif isinstance(v, list):
            for x in v:
                walk(x)
        elif isinstance(v, dict):
            for x in v.values():
                walk(x)

    walk(request["json"]["input"])
    return "\n".join(out)


def review_id(tmp: Path) -> str:
    review: str = json.loads((tmp / "out" / "start.json").read_bytes())["review"]
    return review


# -- the tests ------------------------------------------------------------------------------------------------------


def test_codex_reviews_a_pull_request_through_just_verify(reviewer: Reviewer, deployment: RealDeployment, tmp_path: Path) -> None:
    """codex's canned answer becomes a complete result, an inline comment on the planted line and a signed record."""
    from attest.freeze import Store
    from attest.review.handoff import verify_handoff

    c = pull_request(deployment, tmp_path / "consumer", PLANTED)
    proc = just_verify(deployment, reviewer, c, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = tmp_path / "out"
    review = review_id(tmp_path)
    reviewed = r"^REVIEWED \S+ pull request \d+ at base [0-9a-f]{40}: complete, 1 finding\(s\), 1 blocking$"
    assert re.search(reviewed, proc.stdout, re.M), proc.stdout

    # The result: complete, the agent's one finding, anchored where it put it.
    result = json.loads((out / "result.json").read_bytes())
    assert result == {"complete": True, "limitations": [], "findings": [
        {"id": "agent-1", "severity": "high", "blocking": True, "path": PLANTED_PATH, "line": PLANTED_LINE, "side": "RIGHT",
         "message": f"{FINDING['title']}\n\n{FINDING['detail']}"}]}

    # The payload's inline comment is on the planted line, a changed RIGHT line of git's own diff.
    payload = json.loads((out / "payload.json").read_bytes())
    assert [(x["path"], x["line"], x["side"]) for x in payload["comments"]] == [(PLANTED_PATH, PLANTED_LINE, "RIGHT")], payload
    merge_base = git(c.path, "merge-base", c.base, c.head)
    assert PLANTED_LINE in changed_right_lines(c.path, merge_base, c.head, PLANTED_PATH)
    assert git(c.path, "show", f"{c.head}:{PLANTED_PATH}").splitlines()[PLANTED_LINE - 1] == PLANTED
    assert payload["event"] == "REQUEST_CHANGES"

    # The record: signed by the deployment, complete, the reviewer image, confined on its own loopback.
    policy = load_policy(deployment.trust)
    verified = verify_attestation_file(out / "record.json", policy)
    assert verified.predicate_type == REVIEW_RECORD_PREDICATE
    assert (deployment.state / "records" / f"{review}.json").read_bytes() == (out / "record.json").read_bytes()
    predicate = verified.statement["predicate"]
    assert predicate["review"] == review and predicate["status"] == "complete" and predicate["head"] == c.head
    assert predicate["findings"] == {"total": 1, "blocking": 1, "inline": 1, "in_body": 0}
    confinement = predicate["confinement"]
    assert confinement["confined"] is True and confinement["network"] == "loopback" and "net" in confinement["namespaces"]
    assert confinement["mode"] == ("rootful" if os.geteuid() == 0 else "rootless")
    assert confinement["reviewer"]["identity"] == reviewer.identity
    assert confinement["reviewer"]["attestation"] == str(reviewer.attestation)
    assert reviewer.path in confinement["images"]
    run = json.loads((deployment.state / "results" / f"{review}.json").read_bytes())
    assert run["outcome"] == "result" and run["failure"] is None and run["blocking"] == 1 and run["confinement"] == confinement

    # The fake saw exactly what codex asked: one turn, whose prompt names the procedure's SKILL.md and the change image.
    requests = parse_request_lines(proc.stderr)
    assert [(r["method"], r["path"]) for r in requests] == [("POST", "/v1/responses")], proc.stderr[-4000:]
    assert "authorization" not in requests[0]["headers"] and requests[0]["json"]["stream"] is True
    text = prompt_text(requests[0])
    procedure = verify_handoff(out / "handoff.json", policy).images["procedure"].path
    change = Store(deployment.state).get(predicate["change"]["identity"]).path
    assert json.dumps(f"{procedure}/SKILL.md") in text, text[-3000:]
    assert json.dumps(f"{change}/diff.patch") in text and json.dumps(f"{change}/head/") in text
    assert f"- review id: {review}" in text
    assert json.dumps({"path": PLANTED_PATH, "status": "modified", "content": "text"}) in text


def test_an_answer_without_a_findings_block_fails_the_run(reviewer: Reviewer, deployment: RealDeployment, tmp_path: Path) -> None:
    """codex answers plain text: the adapter refuses it, the run is recorded failed, nothing authorizes."""
    c = pull_request(deployment, tmp_path / "consumer", "print('another planted line')")
    plain = 'exec "$ATTEST_IMAGE_REVIEWER/bin/review" answer-plain.txt'  # the same image, its other answer
    proc = just_verify(deployment, reviewer, c, tmp_path, ATTEST_REVIEWER=plain)
    assert proc.returncode != 0, proc.stdout + proc.stderr
    # codex ran and answered: its one turn reached the fake, and the adapter refused what it printed.
    requests = parse_request_lines(proc.stderr)
    assert [(r["method"], r["path"]) for r in requests] == [("POST", "/v1/responses")], proc.stderr[-4000:]
    assert "AGENT_OUTPUT_INVALID" in proc.stderr, proc.stderr[-4000:]
    assert "REVIEWER_FAILED" in proc.stderr, proc.stderr[-4000:]
    review = review_id(tmp_path)
    run = json.loads((deployment.state / "results" / f"{review}.json").read_bytes())
    assert run["outcome"] == "failed" and run["result"] is None and run["confinement"] is None
    assert run["failure"]["code"] == "REVIEWER_FAILED" and "exited 1" in run["failure"]["detail"], run
    # Nothing authorizes: no result, no payload, no record (the recipe stopped at review exec) ...
    out = tmp_path / "out"
    assert not any((out / name).exists() for name in ("result.json", "payload.json", "record.json"))
    assert not (deployment.state / "records" / f"{review}.json").exists()
    # ... and serializing the failed run (the head's diagnostic record) says failed, exits 1 and never approves.
    serialize = [str(VENV_BIN / "attest"), "review", "serialize", "--state-dir", str(deployment.state), "--review", review,
                 "--result", str(out / "result.json"), "--key", str(deployment.key), "-o", str(out / "payload.json"),
                 "--record", str(out / "record.json")]
    proc = subprocess.run(serialize, capture_output=True, text=True, check=False, timeout=300)
    assert proc.returncode == 1 and re.search(rf"^SERIALIZED review {review}: FAILED for head {c.head} ", proc.stderr, re.M), \
        proc.stdout + proc.stderr
    predicate = verify_attestation_file(out / "record.json", load_policy(deployment.trust)).statement["predicate"]
    assert predicate["status"] == "failed" and predicate["result"] is None and predicate["failure"] == run["failure"]
    assert predicate["confinement"] is None and predicate["event"] == "COMMENT"
    payload = json.loads((out / "payload.json").read_bytes())
    assert payload["event"] == "COMMENT" and payload["comments"] == []


def test_the_confinement_loopback_is_its_own(deployment: RealDeployment, tmp_path: Path) -> None:
    """The reviewer serves and reaches its own 127.0.0.1; the host's listener on 127.0.0.1 is refused to it."""
    from attest.review.bootstrap import IdentityFile, bootstrap
    from attest.review.handoff import run_review_step

    c = pull_request(deployment, tmp_path / "consumer", "loopback probe")
    handoff = tmp_path / "handoff.json"
    ident = identity_file(tmp_path / "identity.json", c)
    bootstrap(pins=deployment.pins, trust=deployment.trust, state_dir=deployment.state, skill_dir=deployment.skill,
              installation=deployment.installation, repo=c.path, host=IdentityFile(str(ident)), key=str(deployment.key),
              out=handoff, backend=BACKEND)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as host:
        host.bind(("127.0.0.1", 0))
        host.listen(1)
        host.setblocking(False)
        port = host.getsockname()[1]
        probe = f"""
import errno, json, socket, sys
seen = {{}}
try:
    socket.create_connection(("127.0.0.1", {port}), timeout=5).close()
    seen["host"] = "connected"
except OSError as e:
    seen["host"] = errno.errorcode.get(e.errno, str(e))
with socket.socket() as srv:
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    with socket.create_connection(srv.getsockname(), timeout=5) as c:
        a, _ = srv.accept()
        c.sendall(b"ping")
        seen["own"] = a.recv(4).decode()
        a.close()
with socket.socket() as t:
    t.bind(("127.0.0.1", {port}))  # the host's port is free in its own namespace
    seen["bound_host_port"] = True
sys.stdout.write(json.dumps({{"complete": False, "findings": [], "limitations": [json.dumps(seen)]}}))
"""
        argv = ["/bin/sh", "-c", 'exec "$ATTEST_IMAGE_RUNTIME/bin/python" -I -B -c "$1"', "probe", probe]
        ran = run_review_step(handoff, load_policy(deployment.trust), deployment.state, argv, out=tmp_path / "result.json")
        with pytest.raises(BlockingIOError):
            host.accept()  # nothing of the confinement reached the host's listener
    seen = json.loads(ran.result.limitations[0])
    assert seen == {"host": errno.errorcode[errno.ECONNREFUSED], "own": "ping", "bound_host_port": True}, seen
    assert ran.confinement.network == "loopback" and ran.to_json()["confinement"]["namespaces"][-1] == "net"
