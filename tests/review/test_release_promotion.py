"""`attest promote` proves the chain: k of n rebuilders, the fixture run, the log.

Real toolchain repositories, real builds in real stores (the promoter's and each rebuilder's own),
real keys and signed rebuild results, the real bootstrap and review start on the fixture consumer
shipped in builders/fixture-consumer. Step 6's managed check runs through :class:`HostCheck`, our
own fake of the :class:`PolicyCheckRunner` interface, and the base commit's ``attest policy
generate`` through :class:`HostGenerator`, a fake of :class:`PolicyGenerator` (the toy runtime has
no ``bin/attest``; tests/test_demo_chain.py runs both from a real runtime image).

Every refusal promotes release 2 over a deployment that pins release 1 (with its log entry) and
must leave the pins and the log byte-identical.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import io
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from support.build import make_toolchain_repo, site_rel
from support.deployment import make_project

from attest._json import canonical_bytes
from attest.attestation import (
    Envelope,
    EnvelopeSignature,
    generate_key,
    load_policy,
    load_signer,
    pae,
    parse_statement,
    sign_statement,
    statement,
    verify_attestation_file,
)
from attest.builder import (
    DISAGREEMENT_PREDICATE,
    REBUILD_PREDICATE,
    RELEASE_POLICY_EXTENSIONS,
    RebuildSubject,
    RebuiltArtifact,
    fetch,
    load_lock,
    load_recipe,
    verify_promotion_log,
)
from attest.builder._promolog import LogCheckpoint, read_checkpoint
from attest.builder._rebuilders import rebuild_release
from attest.errors import AttestError
from attest.inventory import Inventory
from attest.policy import check_policy, generate_policy
from attest.review.bootstrap import BaseSnapshot, CheckRun, RuntimeImage
from attest.review.release import load_fixture
from attest.review.release._fixture import _now
from attest.review.release._promote import _promote_release

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "builders" / "fixture-consumer"


class HostCheck:
    """A fake of the step-6 runner: the host's own managed check over the frozen base (tests only, never authority)."""

    def __call__(self, runtime: RuntimeImage, base: BaseSnapshot) -> CheckRun:
        try:
            report = check_policy(base.path)
        except AttestError as e:
            return CheckRun(e.exit_code, json.dumps(e.to_json()).encode())
        return CheckRun(0, json.dumps(report.to_json()).encode())


class HostGenerator:
    """A fake of the fixture's generator: the host's own `attest policy generate` (tests only)."""

    def __call__(self, runtime: Any, root: Path) -> None:
        generate_policy(root)


@dataclass
class Release:
    tmp: Path
    root: Path
    state: Path
    cache: Path
    keys: Path
    policy: Path
    ids: dict[str, str]          # rebuilder name -> signer id
    sha1: str
    sha2: str
    deployed: Path               # a deployment directory that pins release 1 (pins.toml and its log)

    def result(self, name: str) -> Path:
        """Rebuilder ``name[0]``'s signed result for release ``name[1]``, from its own store (reused when built already).

        Made when asked: the builder's identity covers attest's own code, so a result made
        minutes earlier names other inputs if attest/ was edited meanwhile.
        """
        from attest.builder import Sandbox

        who, rev = name[0], self.sha1 if name[1] == "1" else self.sha2
        out = self.tmp / "results" / f"{name}.json"
        rebuild_release(toolchain_rev=rev, runtime_recipe=load_recipe(self.root / "builders" / "runtime.toml"),  # type: ignore[arg-type]
                        skill_recipe=load_recipe(self.root / "builders" / "skill.toml"), state=str(self.tmp / f"rebuilder-{who}"),  # type: ignore[arg-type]
                        cache=str(self.cache), sandbox=Sandbox.establish(allow_unisolated_network=False),
                        signer=load_signer(str(self.keys / f"rebuilder-{who}.pem")), out=str(out))
        return out


def _key_policy(*, rebuilders: str | None) -> str:
    text = 'threshold = 1\n[[signers]]\nkind = "key"\npublic_key = "release.pub.pem"\n'
    for name in ("a", "b"):
        text += f'[[signers]]\nkind = "key"\npublic_key = "rebuilder-{name}.pub.pem"\npredicates = ["{REBUILD_PREDICATE}"]\n'
    return text + (rebuilders or "")


def _cli(args: list[str]) -> tuple[int, str]:
    from attest.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(args)
    return code, out.getvalue()


@pytest.fixture(scope="module")
def rel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Release]:
    tmp = tmp_path_factory.mktemp("release")
    root = tmp / "proj"
    sha1 = make_project(root)
    keys = tmp / "keys"
    keys.mkdir()
    generate_key("ed25519", keys / "release.pem")
    generate_key("ecdsa-p256", keys / "rebuilder-a.pem")  # ECDSA: two signatures by one key differ (the counted-once case)
    generate_key("ed25519", keys / "rebuilder-b.pem")
    generate_key("ed25519", keys / "evil.pem")
    ids = {n: "key:sha256:" + load_signer(str(keys / f"rebuilder-{n}.pem")).key_id for n in ("a", "b")}
    table = f'[rebuilders]\nthreshold = 2\nidentities = ["{ids["a"]}", "{ids["b"]}"]\n'
    policy = keys / "release-policy.toml"
    policy.write_text(_key_policy(rebuilders=table))
    cache = tmp / "cache"
    recipe = load_recipe(root / "builders" / "runtime.toml")
    fetch(load_lock(recipe.lock_path), cache, lock_path=recipe.lock_path)
    results = tmp / "results"
    results.mkdir()
    # Rebuilder a's result for release 1 through the command a rebuilder runs, in a store of its own.
    code, text = _cli(["rebuild-release", "--toolchain-rev", sha1, "--key", str(keys / "rebuilder-a.pem"), "-o", str(results / "a1.json"),
                       "--runtime-recipe", str(root / "builders" / "runtime.toml"), "--skill-recipe", str(root / "builders" / "skill.toml"),
                       "--state-dir", str(tmp / "rebuilder-a"), "--cache", str(cache), "--json"])
    assert code == 0, text
    assert json.loads(text)["signers"] == [ids["a"]]
    sha2 = make_toolchain_repo(root / "repo", message=b"release 2")
    release = Release(tmp, root, tmp / "state", cache, keys, policy, ids, sha1, sha2, tmp / "deployed")
    release.deployed.mkdir()
    yield release
    subprocess.run(["chattr", "-R", "-f", "-i", str(tmp)], check=False, capture_output=True)


def promote(rel: Release, pins: Path, rev: str, results: list[Path], **kw: Any) -> Any:
    """promote_release() with the fixture's generator and step-6 runner faked: through its private seam (the public one has none)."""
    args: dict[str, Any] = {"cache": str(rel.cache), "allow_unisolated_network": False, "python": None, "installer_rev": None,
                            "skill_rev": None, "fmt": "dsse", "unsafe_without_rebuilders": False, "repin": (), "backend": None,
                            "clock": _now, **kw}
    return _promote_release(rev, str(pins), str(args.pop("key", rel.keys / "release.pem")), str(args.pop("policy", rel.policy)),
                            runtime_recipe=str(rel.root / "builders" / "runtime.toml"),
                            skill_recipe=str(rel.root / "builders" / "skill.toml"), state=str(rel.state),
                            rebuild_results=[str(r) for r in results], fixture=str(args.pop("fixture", FIXTURE)), runner=HostCheck(),
                            generator=HostGenerator(), **args)


def snapshot(pins: Path) -> tuple[bytes | None, dict[str, bytes]]:
    log = Path(str(pins) + ".promotions")
    return (pins.read_bytes() if pins.exists() else None,
            {p.name: p.read_bytes() for p in sorted(log.iterdir())} if log.exists() else {})


def _policy(rel: Release) -> Any:
    return load_policy(rel.policy, extensions=RELEASE_POLICY_EXTENSIONS)


@pytest.fixture(scope="module")
def first(rel: Release) -> Any:
    """Release 1, promoted into the module's deployment: 2 of 2 rebuilders, the fixture run, log entry 1."""
    return promote(rel, rel.deployed / "pins.toml", rel.sha1, [rel.result("a1"), rel.result("b1")])


@pytest.fixture
def deployment(rel: Release, first: Any, tmp_path: Path) -> Path:
    """A copy of the deployment that pins release 1: the pins and their log."""
    shutil.copytree(rel.deployed, tmp_path / "deploy")
    return tmp_path / "deploy" / "pins.toml"


# -- success ----------------------------------------------------------------------------------------------------


def test_two_of_two_rebuilders_the_fixture_and_the_first_log_entry(rel: Release, first: Any) -> None:
    pins = rel.deployed / "pins.toml"
    assert [i for i, _ in first.rebuilders.agreed] == [rel.ids["a"], rel.ids["b"]]
    assert first.log_sequence == 1 and first.previous_rev is None
    checked = verify_promotion_log(str(pins), _policy(rel))
    (entry,) = checked.entries
    assert entry.pins_sha256 == "sha256:" + hashlib.sha256(pins.read_bytes()).hexdigest()
    # The promoter's state remembers the head it wrote: a later rollback or fork of this log is refused (test_promotion_log_checkpoint).
    assert read_checkpoint(rel.state, pins) == LogCheckpoint(1, entry.digest)
    pred = entry.predicate
    assert pred["previous"] is None and pred["toolchain"]["revision"] == rel.sha1
    assert [a["identity"] for a in pred["rebuilders"]["agreed"]] == [rel.ids["a"], rel.ids["b"]]
    fixture = pred["fixture"]
    assert fixture["handoff_digest"].startswith("sha256:") and len(fixture["review"]) == 32
    assert set(fixture["images"]) == {"bootstrap", "runtime", "base", "procedure"}
    assert fixture["images"]["runtime"] == first.runtime.inventory.identity
    # The fixture's temporary installation and review state are gone again.
    assert not list((rel.state / "installations").iterdir()) and not list((rel.state / "reviews").iterdir())
    lines = first.summary_lines()
    assert lines[0] == f"PROMOTED {rel.sha1} into {pins}"
    assert [ln.split()[0] for ln in lines[1:]] == ["toolchain", "runtime", "skill", "rebuilders", "fixture", "pins", "log"]
    assert "first promotion" in lines[1] and "2 of 2 agree (threshold 2)" in lines[4] and "review start passed" in lines[5]
    assert "None" not in "\n".join(lines) and "->" not in "\n".join(lines)


def test_the_same_promotion_again_writes_nothing_and_runs_no_fixture(rel: Release, deployment: Path) -> None:
    before = snapshot(deployment)
    again = promote(rel, deployment, rel.sha1, [rel.result("a1"), rel.result("b1")])
    assert snapshot(deployment) == before and again.changes == () and again.log_entry is None and again.fixture is None
    assert "no change" in "\n".join(again.summary_lines())
    assert again.summary_lines()[0].startswith(f"ALREADY PROMOTED {rel.sha1} in ") and "(no pin changed)" in again.summary_lines()[0]


def test_release_2_appends_entry_2_linked_to_entry_1(rel: Release, deployment: Path) -> None:
    entry1 = snapshot(deployment)[1]["000001.json"]
    result = promote(rel, deployment, rel.sha2, [rel.result("b2"), rel.result("a2")])
    assert result.previous_rev == rel.sha1 and result.log_sequence == 2 and result.repinned == ()
    checked = verify_promotion_log(str(deployment), _policy(rel))
    assert [e.sequence for e in checked.entries] == [1, 2]
    assert checked.entries[1].previous == "sha256:" + hashlib.sha256(entry1).hexdigest()
    assert checked.entries[1].pins_before == checked.entries[0].pins_sha256
    assert f"(was {rel.sha1})" in result.summary_lines()[1]
    # --verify-log through the CLI, both renderings.
    code, out = _cli(["promote", "--verify-log", "--pins", str(deployment), "--policy", str(rel.policy), "--state-dir", str(rel.state),
                      "--json"])
    assert code == 0 and json.loads(out)["entries"] == 2 and json.loads(out)["head"]["toolchain"] == rel.sha2
    code, out = _cli(["promote", "--verify-log", "--pins", str(deployment), "--policy", str(rel.policy), "--state-dir", str(rel.state)])
    assert code == 0 and out.startswith("VERIFIED the promotion log") and "2 entries, chain unbroken" in out


def test_the_cli_promotes_and_prints_a_summary(rel: Release, deployment: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI only parses, calls promote_release() and renders (step 6 through the fake runner here)."""
    import attest.review.bootstrap as bootstrap
    import attest.review.release._fixture as fixture

    monkeypatch.setattr(bootstrap, "ImageCheckRunner", lambda state: HostCheck())
    monkeypatch.setattr(fixture, "ImageGenerator", lambda state: HostGenerator())
    code, out = _cli(["promote", "--toolchain-rev", rel.sha2, "--pins", str(deployment), "--key", str(rel.keys / "release.pem"),
                      "--policy", str(rel.policy), "--rebuild-result", str(rel.result("a2")), "--rebuild-result", str(rel.result("b2")),
                      "--runtime-recipe", str(rel.root / "builders" / "runtime.toml"),
                      "--skill-recipe", str(rel.root / "builders" / "skill.toml"), "--state-dir", str(rel.state), "--cache", str(rel.cache),
                      "--fixture", str(FIXTURE)])
    assert code == 0, out
    lines = out.splitlines()
    assert lines[0] == f"PROMOTED {rel.sha2} into {deployment}" and len(lines) == 8, out
    assert "pins changed (runtime, skill, toolchain)" in out and "log         entry 2:" in out and " -> " not in out


def test_a_changed_interpreter_needs_repin_and_is_printed(rel: Release, deployment: Path) -> None:
    """Pins of another version are never moved to this interpreter's without a word."""
    import tomllib

    from attest.builder import dump_pins

    doc = tomllib.loads(deployment.read_text())
    pinned = doc["runtime"]["python"]
    old = "3.11.2" if pinned != "3.11.2" else "3.11.1"  # as an ordinary user this python3 may be Debian's 3.11.2
    doc["runtime"]["python"] = old
    deployment.write_bytes(dump_pins(doc))
    before = snapshot(deployment)
    with pytest.raises(AttestError) as caught:
        promote(rel, deployment, rel.sha2, [rel.result("a2"), rel.result("b2")])
    assert [(f.code, f.path) for f in caught.value.findings] == [("PINNED_IDENTITY_CHANGED", "runtime.python")]
    assert snapshot(deployment) == before
    result = promote(rel, deployment, rel.sha2, [rel.result("a2"), rel.result("b2")], repin=["interpreter"])
    assert result.repinned == (("runtime.python", old, pinned),)
    text = "\n".join(result.summary_lines())
    assert f"REPINNED    runtime.python: {old} -> {pinned}" in text and "changed outside `attest promote`" in text
    entry = verify_promotion_log(str(deployment), _policy(rel)).entries[-1]
    assert entry.predicate["repinned"] == [{"key": "runtime.python", "old": old, "new": pinned}]
    assert entry.pins_before == "sha256:" + hashlib.sha256(before[0] or b"").hexdigest()


# -- refusals: each leaves the pins and the log byte-identical --------------------------------------------------------


def _two_signatures_by_a(rel: Release, tmp: Path) -> Path:
    """Rebuilder a's result for release 2 with a second, different signature by the same key."""
    env = Envelope.from_json(json.loads(rel.result("a2").read_bytes()))
    again = load_signer(str(rel.keys / "rebuilder-a.pem")).sign(pae(env.payload_type, env.payload))
    assert again != env.signatures[0].sig
    out = tmp / "a2-twice.json"
    out.write_bytes(canonical_bytes(Envelope(env.payload_type, env.payload, (*env.signatures, EnvelopeSignature(again, ""))).to_json()))
    return out


def _lying_b(rel: Release, tmp: Path) -> Path:
    """Rebuilder b signs a rebuild of release 2 whose runtime has one file of other bytes."""
    doc = parse_statement(Envelope.from_json(json.loads(rel.result("b2").read_bytes())).payload)
    subject = RebuildSubject.from_statement(doc, "b2")
    entries = list(subject.runtime.inventory.entries)
    i = next(i for i, e in enumerate(entries) if e.path.endswith("toolchain/cli.py"))
    entries[i] = dataclasses.replace(entries[i], sha256="0" * 64)
    other = dataclasses.replace(subject, runtime=RebuiltArtifact(subject.runtime.name, subject.runtime.inputs_digest,
                                                                 Inventory.from_entries(entries)))
    out = tmp / "b2-lying.json"
    out.write_bytes(sign_statement(other.statement(), load_signer(str(rel.keys / "rebuilder-b.pem"))))
    return out


def _evil_b(rel: Release, tmp: Path) -> Path:
    doc = parse_statement(Envelope.from_json(json.loads(rel.result("b2").read_bytes())).payload)
    out = tmp / "b2-evil.json"
    out.write_bytes(sign_statement(doc, load_signer(str(rel.keys / "evil.pem"))))
    return out


def _malformed_b(rel: Release, tmp: Path) -> Path:
    doc = parse_statement(Envelope.from_json(json.loads(rel.result("b2").read_bytes())).payload)
    broken = statement(doc["subject"], REBUILD_PREDICATE, {k: v for k, v in doc["predicate"].items() if k != "skill"})
    out = tmp / "b2-malformed.json"
    out.write_bytes(sign_statement(broken, load_signer(str(rel.keys / "rebuilder-b.pem"))))
    return out


def _broken_fixture(rel: Release, tmp: Path) -> Path:
    """The shipped fixture with pr-review not enabled: the bootstrap must refuse it at step 4."""
    copy = tmp / "fixture"
    shutil.copytree(FIXTURE, copy)
    template = copy / "agent-policy.yml.in"
    template.write_text(template.read_text().replace("enabled: [pr-review]", "enabled: []"))
    return copy


def _policy_text(rel: Release, tmp: Path, rebuilders: str | None) -> Path:
    path = rel.keys / f"policy-{tmp.name}.toml"
    path.write_text(_key_policy(rebuilders=rebuilders))
    return path


REFUSALS: list[tuple[str, Any, str, int]] = [
    # (id, how the promotion of release 2 is given: f(rel, tmp) -> keywords (results as names or paths), first code, exit code)
    ("one-of-two-rebuilders", lambda rel, tmp: {"results": ["a2"]}, "REBUILDERS_THRESHOLD_NOT_MET", 1),
    ("two-signatures-by-one-identity", lambda rel, tmp: {"results": [_two_signatures_by_a(rel, tmp)]}, "REBUILDERS_THRESHOLD_NOT_MET", 1),
    ("two-results-by-one-identity", lambda rel, tmp: {"results": ["a2", _two_signatures_by_a(rel, tmp)]},
     "REBUILDERS_THRESHOLD_NOT_MET", 1),
    ("disagreeing-rebuilds", lambda rel, tmp: {"results": ["a2", _lying_b(rel, tmp)]}, "REBUILD_DISAGREEMENT", 1),
    ("fixture-bootstrap-failure", lambda rel, tmp: {"results": ["a2", "b2"], "fixture": _broken_fixture(rel, tmp)},
     "PROMOTION_FIXTURE_FAILED", 1),
    ("a-result-by-an-untrusted-key", lambda rel, tmp: {"results": ["a2", _evil_b(rel, tmp)]}, "REBUILD_RESULT_UNTRUSTED", 1),
    ("a-malformed-result", lambda rel, tmp: {"results": ["a2", _malformed_b(rel, tmp)]}, "REBUILD_RESULT_MALFORMED", 1),
    ("a-result-of-the-previous-release", lambda rel, tmp: {"results": ["a2", "b1"]}, "REBUILD_RESULT_OTHER_CANDIDATE", 1),
    ("no-rebuilders-table", lambda rel, tmp: {"results": [], "policy": _policy_text(rel, tmp, None)}, "REBUILDERS_NOT_CONFIGURED", 1),
    ("results-but-no-rebuilders-table", lambda rel, tmp: {"results": ["a2", "b2"], "policy": _policy_text(rel, tmp, None),
                                                          "unsafe_without_rebuilders": True}, "REBUILDERS_NOT_CONFIGURED", 1),
    ("a-rebuilders-table-naming-a-stranger", lambda rel, tmp: {
        "results": ["a2", "b2"], "policy": _policy_text(rel, tmp, '[rebuilders]\nthreshold = 1\nidentities = ["key:sha256:00"]\n')},
     "BAD_REBUILDERS", 2),
    ("unsafe-with-a-rebuilders-table", lambda rel, tmp: {"results": [], "unsafe_without_rebuilders": True}, "USAGE", 2),
    ("no-fixture", lambda rel, tmp: {"results": ["a2", "b2"], "fixture": tmp}, "FIXTURE_CONSUMER_BAD", 2),
]


@pytest.mark.parametrize(("given", "code", "exit_code"), [r[1:] for r in REFUSALS], ids=[r[0] for r in REFUSALS])
def test_a_refused_promotion_leaves_the_pins_and_the_log_byte_identical(rel: Release, deployment: Path, tmp_path: Path, given: Any,
                                                                        code: str, exit_code: int) -> None:
    kw = given(rel, tmp_path)
    results = [rel.result(r) if isinstance(r, str) else r for r in kw.pop("results")]
    before = snapshot(deployment)
    assert before[0] is not None and list(before[1]) == ["000001.json"]
    with pytest.raises(AttestError) as caught:
        promote(rel, deployment, rel.sha2, results, **kw)
    assert caught.value.code == code, [str(f) for f in caught.value.findings]
    assert caught.value.exit_code == exit_code
    assert snapshot(deployment) == before
    verify_promotion_log(str(deployment), _policy(rel))  # still the chain it was


def test_one_of_two_names_the_missing_rebuilder(rel: Release, deployment: Path) -> None:
    with pytest.raises(AttestError) as caught:
        promote(rel, deployment, rel.sha2, [rel.result("a2"), _two_signatures_by_a(rel, deployment.parent)])
    detail = caught.value.detail
    assert detail.startswith("1 of the 2 required") and detail.endswith(f"no agreeing result from {rel.ids['b']}")


def test_a_disagreement_writes_a_signed_negative_result_naming_the_first_differing_entry(rel: Release, deployment: Path) -> None:
    with pytest.raises(AttestError) as caught:
        promote(rel, deployment, rel.sha2, [rel.result("a2"), _lying_b(rel, deployment.parent)])
    first, *_, written = caught.value.findings
    assert first.code == "REBUILD_DISAGREEMENT" and first.path is not None and first.path.endswith("/" + site_rel().rsplit("/", 1)[1] + "/toolchain/cli.py")
    assert written.code == "REBUILD_DISAGREEMENT" and written.path is not None
    negative = Path(written.path)
    assert negative.parent == rel.state / "rebuild-disagreements" and negative.name.startswith(rel.sha2)
    verified = verify_attestation_file(negative, _policy(rel))
    assert verified.predicate_type == DISAGREEMENT_PREDICATE
    pred = verified.statement["predicate"]
    (d,) = pred["disagreements"]
    assert d["rebuilder"] == rel.ids["b"] and d["artifact"] == "runtime" and d["first_difference"]["code"] == "DIGEST_MISMATCH"
    assert d["first_difference"]["path"] == first.path and pred["toolchain"]["revision"] == rel.sha2
    assert [s["name"] for s in verified.statement["subject"]] == [pred["promoted"]["runtime"]["name"], pred["promoted"]["skill"]["name"]]


def test_a_fixture_failure_names_the_bootstrap_step(rel: Release, deployment: Path, tmp_path: Path) -> None:
    with pytest.raises(AttestError) as caught:
        promote(rel, deployment, rel.sha2, [rel.result("a2"), rel.result("b2")], fixture=_broken_fixture(rel, tmp_path))
    assert "at step 4 (config)" in caught.value.detail
    assert [f.code for f in caught.value.findings] == ["PROMOTION_FIXTURE_FAILED", "PR_REVIEW_NOT_ENABLED"]
    assert not list((rel.state / "installations").iterdir()) and not list((rel.state / "reviews").iterdir())


def test_a_tampered_log_is_never_appended_to(rel: Release, deployment: Path) -> None:
    entry = Path(str(deployment) + ".promotions") / "000001.json"
    os.chmod(entry, 0o644)
    entry.write_bytes(entry.read_bytes().replace(b'"sig":"', b'"sig":"AAAA', 1))
    before = snapshot(deployment)
    with pytest.raises(AttestError) as caught:
        promote(rel, deployment, rel.sha2, [rel.result("a2"), rel.result("b2")])
    assert caught.value.code == "PROMOTION_LOG_BAD_ENTRY" and snapshot(deployment) == before


def test_the_cli_refusal_and_usage(rel: Release, deployment: Path) -> None:
    before = snapshot(deployment)
    code, out = _cli(["promote", "--toolchain-rev", rel.sha2, "--pins", str(deployment), "--key", str(rel.keys / "release.pem"),
                      "--policy", str(rel.policy), "--rebuild-result", str(rel.result("a2")),
                      "--runtime-recipe", str(rel.root / "builders" / "runtime.toml"),
                      "--skill-recipe", str(rel.root / "builders" / "skill.toml"), "--state-dir", str(rel.state), "--cache", str(rel.cache),
                      "--json"])
    doc = json.loads(out)
    assert code == 1 and doc["ok"] is False and doc["errors"][0]["code"] == "REBUILDERS_THRESHOLD_NOT_MET"
    assert snapshot(deployment) == before
    code, out = _cli(["promote", "--pins", str(deployment), "--policy", str(rel.policy), "--json"])
    assert code == 2 and json.loads(out)["errors"][0]["code"] == "USAGE"
    code, out = _cli(["promote", "--verify-log", "--pins", str(deployment.parent / "none.toml"), "--policy", str(rel.policy),
                      "--state-dir", str(rel.state), "--json"])
    assert code == 1 and json.loads(out)["errors"][0]["code"] == "PROMOTION_LOG_MISSING"


def test_the_shipped_fixture_is_strict(tmp_path: Path) -> None:
    assert {p for p, _, _ in load_fixture(FIXTURE).base} >= {"policy/core/evidence.md", "src/app.txt"}
    for name, change in (("no-head", lambda c: shutil.rmtree(c / "head")),
                         ("placeholder-twice", lambda c: (c / "agent-policy.yml.in").write_text("@TOOLCHAIN_REVISION@ " * 2 +
                                                                                                "@TOOLCHAIN_REPOSITORY@")),
                         ("a-shipped-config", lambda c: (c / "base" / ".agent-policy.yml").write_text("schema: 2\n")),
                         ("a-symlink", lambda c: (c / "base" / "link").symlink_to("README.md"))):
        copy = tmp_path / name
        shutil.copytree(FIXTURE, copy)
        change(copy)
        with pytest.raises(AttestError) as caught:
            load_fixture(copy)
        assert caught.value.code == "FIXTURE_CONSUMER_BAD", name
