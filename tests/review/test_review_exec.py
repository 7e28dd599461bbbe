"""`attest review exec`: the review step runs from the handoff's four frozen images only.

Real bootstraps (test_bootstrap's deployment: a real promotion, installation, git repositories and
frozen images), real signed handoffs, re-signed ones with one field changed, real reviewer
processes (a shell or Python command), and a real image tampered with after the bootstrap.
"""

# The bootstrap fixtures (dep, skill) are imported from test_bootstrap, so their parameters shadow the imports.

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support.gitrepo import git
from test_bootstrap import Consumer, Deployment, make_consumer, run

from attest.attestation import Envelope, load_policy, load_signer, parse_statement, sign_statement
from attest.builder._sandbox import loopback_tool
from attest.errors import AttestError, EnvironmentFailure, InputError, VerificationError
from attest.review.handoff import (
    HandoffCode,
    decide_images,
    parse_handoff,
    parse_result,
    run_review_step,
    stand_in_review,
    verify_can_confine,
    verify_handoff,
)

PY = sys.executable
# The reviewer's own network namespace: its loopback up where `ip` is there to bring it up.
ISOLATED = "loopback" if loopback_tool() is not None else "none"
ROOT = Path(__file__).resolve().parents[2]
# What the tests' reviewers (this interpreter, its venv, this checkout's attest) need inside the confinement.
HOST_PYTHON = (sys.prefix, sys.base_prefix, str(ROOT))
GOOD = {"complete": True, "limitations": [], "findings": [
    {"id": "F1", "severity": "high", "blocking": True, "message": "secret in config", "path": "src.txt", "line": 1, "side": "RIGHT"}]}


def codes(err: AttestError) -> set[str]:
    return {f.code for f in err.findings}


def unique_consumer(dep: Deployment, tmp: Path, tag: str) -> Consumer:
    """A consumer whose base snapshot no other test shares (so tampering with it harms no one)."""
    c = make_consumer(tmp / "consumer", dep.sha)
    (c.path / f"unique-{tag}.txt").write_text(f"{tmp}\n")
    git(c.path, "add", "-A")
    git(c.path, "commit", "-qm", "unique")
    base = git(c.path, "rev-parse", "HEAD")
    return Consumer(c.path, base, base)


@pytest.fixture
def handoff(dep: Deployment, skill: tuple[Path, Path], tmp_path: Path) -> Path:
    c = make_consumer(tmp_path / "consumer", dep.sha)
    return Path(run(dep, skill, c, tmp_path).handoff)


def reviewer(body: str) -> list[str]:
    """A real reviewer process: Python, with the exec environment's images."""
    return [PY, "-I", "-c", body]


def printing(doc: Any) -> list[str]:
    return reviewer(f"import sys; sys.stdout.write({json.dumps(json.dumps(doc))})")


def resign(dep: Deployment, path: Path, out: Path, change: Any) -> Path:
    envelope = Envelope.from_json(json.loads(path.read_bytes()))
    st = parse_statement(envelope.payload)
    change(st)
    out.write_bytes(sign_statement(st, load_signer(str(dep.key))))
    return out


# -- success ---------------------------------------------------------------------------------------


def test_the_reviewer_sees_the_four_images_and_its_result_is_kept(dep: Deployment, handoff: Path, tmp_path: Path) -> None:
    body = ("import json, os, sys\n"
            "skill = open(os.environ['ATTEST_IMAGE_PROCEDURE'] + '/SKILL.md', 'rb').read()\n"
            f"doc = {json.dumps(GOOD)!r}\n"
            "doc = json.loads(doc); doc['complete'] = False\n"
            "doc['limitations'] = [json.dumps({'env': dict(os.environ), 'cwd': os.getcwd(), 'uid': os.getuid()})]\n"
            "sys.stdout.write(json.dumps(doc))\n")
    out = tmp_path / "result.json"
    done = run_review_step(handoff, load_policy(dep.trust), dep.state, reviewer(body), out=out, readonly=HOST_PYTHON)
    verified = verify_handoff(handoff, load_policy(dep.trust))
    assert json.loads(out.read_bytes()) == done.result.to_json() and done.result.findings[0].to_json() == GOOD["findings"][0]
    assert done.result_digest == "sha256:" + hashlib.sha256(out.read_bytes()).hexdigest()
    seen = json.loads(done.result.limitations[0])
    env = seen["env"]
    for name in ("bootstrap", "runtime", "base", "procedure"):
        assert env[f"ATTEST_IMAGE_{name.upper()}"] == verified.images[name].path
    assert seen["cwd"] == verified.images["base"].path
    # Its own uid, not root: and nothing of the caller's environment but what exec fixes.
    assert seen["uid"] == done.confinement.uid and seen["uid"] != 0
    if done.confinement.mode == "rootful":
        assert seen["uid"] != os.getuid()
    else:  # rootless: a user namespace mapping only the caller (docs/review.md)
        assert done.confinement.mode == "rootless" and seen["uid"] == os.getuid()
    assert env["HOME"].startswith(f"{dep.state}/runs/") and "agent-policy" not in json.dumps(env)
    doc = done.to_json()
    assert doc["ok"] is True and doc["complete"] is False and doc["findings"] == 1 and doc["blocking"] == 1
    assert doc["confinement"]["confined"] is True and doc["confinement"]["network"] == ISOLATED


def test_the_stand_in_reads_the_skill_from_the_bundle_through_the_cli(dep: Deployment, handoff: Path, tmp_path: Path) -> None:
    out = tmp_path / "result.json"
    proc = subprocess.run([PY, "-m", "attest", "review", "exec", "--handoff", str(handoff), "--policy", str(dep.trust),
                           "--state-dir", str(dep.state), "-o", str(out), "--json",
                           *(a for p in HOST_PYTHON for a in ("--readonly", p)), "--",
                           PY, "-I", "-m", "attest", "review", "stand-in"], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["ok"] is True and doc["complete"] is False and doc["findings"] == 0
    result = json.loads(out.read_bytes())
    bundle = Path(verify_handoff(handoff, load_policy(dep.trust)).images["procedure"].path)
    digest = hashlib.sha256((bundle / "SKILL.md").read_bytes()).hexdigest()
    assert result["complete"] is False and f"SKILL.md sha256:{digest}" in result["limitations"][0]


def test_the_stand_in_without_a_bundle_fails(tmp_path: Path) -> None:
    with pytest.raises(InputError) as ei:
        stand_in_review({})
    assert codes(ei.value) == {HandoffCode.REVIEWER_FAILED}
    with pytest.raises(InputError) as ei:
        stand_in_review({"ATTEST_IMAGE_PROCEDURE": str(tmp_path)})  # no SKILL.md there
    assert codes(ei.value) == {HandoffCode.REVIEWER_FAILED}


# -- the handoff must verify ------------------------------------------------------------------------


def test_a_handoff_signed_by_an_untrusted_key(dep: Deployment, handoff: Path, tmp_path: Path) -> None:
    envelope = Envelope.from_json(json.loads(handoff.read_bytes()))
    forged = tmp_path / "forged.json"
    forged.write_bytes(sign_statement(parse_statement(envelope.payload), load_signer(str(dep.evil_key))))
    ran = tmp_path / "ran"
    with pytest.raises(VerificationError) as ei:
        run_review_step(forged, load_policy(dep.trust), dep.state, ["/bin/touch", str(ran)], out=tmp_path / "r.json")
    assert "NO_TRUSTED_SIGNATURE" in codes(ei.value) and not ran.exists()


def _drop_time(st: dict[str, Any]) -> None:
    del st["predicate"]["time"]


def _swap_subject(st: dict[str, Any]) -> None:
    st["subject"][0]["digest"]["sha256"] = "0" * 64


def _other_predicate(st: dict[str, Any]) -> None:
    st["predicateType"] = "https://attest.dev/installation/v1"


def _bad_image_identity(st: dict[str, Any]) -> None:
    st["predicate"]["images"]["base"]["identity"] = "sha256:xyz"


@pytest.mark.parametrize(("change", "code"), [
    (_other_predicate, HandoffCode.HANDOFF_WRONG_PREDICATE),
    (_drop_time, HandoffCode.HANDOFF_MALFORMED),
    (_bad_image_identity, HandoffCode.HANDOFF_MALFORMED),
    (_swap_subject, HandoffCode.HANDOFF_SUBJECT_MISMATCH),
])
def test_a_re_signed_handoff_with_a_field_changed(dep: Deployment, handoff: Path, tmp_path: Path, change: Any, code: str) -> None:
    bad = resign(dep, handoff, tmp_path / "bad.json", change)
    ran = tmp_path / "ran"
    with pytest.raises(VerificationError) as ei:
        run_review_step(bad, load_policy(dep.trust), dep.state, ["/bin/touch", str(ran)], out=tmp_path / "r.json")
    assert code in codes(ei.value) and not ran.exists()


def _backend(st: dict[str, Any]) -> None:
    image = st["predicate"]["images"]["base"]
    image["backend"] = "immutable" if image["backend"] == "readonly" else "readonly"  # another one than it has


def _path(st: dict[str, Any]) -> None:
    st["predicate"]["images"]["runtime"]["path"] = "/tmp/elsewhere/tree"


def _files(st: dict[str, Any]) -> None:
    st["predicate"]["procedure"]["files"] = st["predicate"]["procedure"]["files"][:1]


@pytest.mark.parametrize("change", [_backend, _path, _files])
def test_the_stored_images_must_be_exactly_the_handoffs(dep: Deployment, handoff: Path, tmp_path: Path, change: Any) -> None:
    bad = resign(dep, handoff, tmp_path / "bad.json", change)
    ran = tmp_path / "ran"
    with pytest.raises(VerificationError) as ei:
        run_review_step(bad, load_policy(dep.trust), dep.state, ["/bin/touch", str(ran)], out=tmp_path / "r.json")
    assert codes(ei.value) == {HandoffCode.HANDOFF_IMAGE_MISMATCH} and not ran.exists()


def test_an_image_tampered_with_after_the_bootstrap_is_refused_before_the_reviewer_runs(
        dep: Deployment, skill: tuple[Path, Path], tmp_path: Path) -> None:
    c = unique_consumer(dep, tmp_path, "tamper")
    handoff = Path(run(dep, skill, c, tmp_path).handoff)
    base = Path(verify_handoff(handoff, load_policy(dep.trust)).images["base"].path)
    victim = base / "unique-tamper.txt"
    subprocess.run(["chattr", "-i", str(victim)], check=False, capture_output=True)
    os.chmod(victim, 0o644)
    victim.write_text("tampered\n")
    ran = tmp_path / "ran"
    with pytest.raises(VerificationError) as ei:
        run_review_step(handoff, load_policy(dep.trust), dep.state, ["/bin/touch", str(ran)], out=tmp_path / "r.json")
    assert codes(ei.value) and not ran.exists() and not (tmp_path / "r.json").exists()


# -- the reviewer's part ---------------------------------------------------------------------------------


def test_a_failing_reviewer_writes_no_result(dep: Deployment, handoff: Path, tmp_path: Path) -> None:
    out = tmp_path / "result.json"
    with pytest.raises(EnvironmentFailure) as ei:
        run_review_step(handoff, load_policy(dep.trust), dep.state, reviewer("import sys; print('{}'); sys.exit(3)"), out=out,
                        readonly=HOST_PYTHON)
    assert codes(ei.value) == {HandoffCode.REVIEWER_FAILED} and "exited 3" in str(ei.value) and not out.exists()


def test_a_reviewer_that_prints_no_result_writes_none(dep: Deployment, handoff: Path, tmp_path: Path) -> None:
    out = tmp_path / "result.json"
    with pytest.raises(VerificationError) as ei:
        run_review_step(handoff, load_policy(dep.trust), dep.state, printing({"complete": True}), out=out, readonly=HOST_PYTHON)
    assert codes(ei.value) == {HandoffCode.REVIEW_RESULT_INVALID} and not out.exists()


def test_the_reviewer_may_not_be_handed_a_loader_variable(dep: Deployment, handoff: Path, tmp_path: Path) -> None:
    with pytest.raises(InputError) as ei:
        run_review_step(handoff, load_policy(dep.trust), dep.state, printing(GOOD), out=tmp_path / "r.json",
                        set_env={"LD_PRELOAD": "/tmp/evil.so"})
    assert codes(ei.value) == {"ENV_REFUSED"}


# -- the pure parts, table-driven -------------------------------------------------------------------------


def _finding(**kw: Any) -> dict[str, Any]:
    return {"id": "F", "severity": "low", "blocking": False, "message": "m", **kw}


@pytest.mark.parametrize("doc", [
    [],
    {"complete": True, "limitations": []},
    {"complete": True, "limitations": [], "findings": [], "extra": 1},
    {"complete": 1, "limitations": [], "findings": []},
    {"complete": True, "limitations": ["partial"], "findings": []},
    {"complete": False, "limitations": [""], "findings": []},
    {"complete": False, "limitations": [], "findings": {}},
    {"complete": False, "limitations": [], "findings": [_finding(severity="urgent")]},
    {"complete": False, "limitations": [], "findings": [_finding(blocking=1)]},
    {"complete": False, "limitations": [], "findings": [_finding(id="")]},
    {"complete": False, "limitations": [], "findings": [_finding(line=3)]},
    {"complete": False, "limitations": [], "findings": [_finding(path="/etc/passwd")]},
    {"complete": False, "limitations": [], "findings": [_finding(path="a", line=0)]},
    {"complete": False, "limitations": [], "findings": [_finding(path="a", line=True)]},
    {"complete": False, "limitations": [], "findings": [_finding(path="a", side="LEFT")]},
    {"complete": False, "limitations": [], "findings": [_finding(path="a", line=2, side="left")]},
    {"complete": False, "limitations": [], "findings": [_finding(anchor="x")]},
])
def test_parse_result_refuses(doc: Any) -> None:
    with pytest.raises(VerificationError) as ei:
        parse_result(json.dumps(doc).encode())
    assert codes(ei.value) == {HandoffCode.REVIEW_RESULT_INVALID}


@pytest.mark.parametrize("data", [b"", b"not json", b'{"complete": true, "complete": true, "limitations": [], "findings": []}'])
def test_parse_result_refuses_non_strict_json(data: bytes) -> None:
    with pytest.raises(VerificationError) as ei:
        parse_result(data)
    assert codes(ei.value) == {HandoffCode.REVIEW_RESULT_INVALID}


def test_parse_result_accepts_the_documented_shape() -> None:
    doc = {"complete": False, "limitations": ["no tests ran"], "findings": [_finding(path="a", line=2, side="LEFT"), _finding()]}
    assert parse_result(json.dumps(doc).encode()).to_json() == doc


def test_parse_handoff_and_decide_images_are_pure(dep: Deployment, handoff: Path) -> None:
    st = parse_statement(Envelope.from_json(json.loads(handoff.read_bytes())).payload)
    h = parse_handoff(st, attestation_digest="sha256:" + "a" * 64, signers=("k",))
    assert h.to_json()["handoff_digest"] == "sha256:" + "a" * 64
    assert decide_images(h, {}) and all(f.code == HandoffCode.HANDOFF_IMAGE_MISMATCH for f in decide_images(h, {}))


@pytest.mark.parametrize(("euid", "unsafe", "refused"), [(0, False, False), (0, True, False), (1000, False, True), (1000, True, False)])
def test_the_reviewer_is_confined_or_the_caller_said_unsafe(euid: int, unsafe: bool, refused: bool) -> None:
    if refused:
        with pytest.raises(EnvironmentFailure) as ei:
            verify_can_confine(euid, unsafe_unconfined=unsafe, rootless=lambda: "no user namespaces")
        assert codes(ei.value) == {HandoffCode.REVIEWER_NOT_CONFINED} and "--unsafe-unconfined" in str(ei.value)
    else:
        verify_can_confine(euid, unsafe_unconfined=unsafe, rootless=lambda: "no user namespaces")


def test_unconfined_on_request_is_recorded(dep: Deployment, handoff: Path, tmp_path: Path) -> None:
    done = run_review_step(handoff, load_policy(dep.trust), dep.state, printing(GOOD), out=tmp_path / "r.json", unsafe_unconfined=True)
    assert done.to_json()["confinement"]["confined"] is False
