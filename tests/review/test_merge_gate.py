"""`attest merge-gate check`: only a complete signed review of the exact current head, plus exact-head CI, authorizes.

Real review records from real reviews (bootstrap, start, a confined reviewer, serialize), CI
results signed by a real CI key, the host re-read from the identity file; a table for the pure
decision with every code.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import test_bootstrap
import test_review_serialize as ts
import test_review_start

from attest.attestation import STATEMENT_TYPE, generate_key, load_policy, load_signer, sign_statement
from attest.errors import AttestError, InputError, VerificationError
from attest.review.bootstrap import HostIdentity, IdentityFile
from attest.review.merge import (
    CI_RESULT_PREDICATE,
    CiResult,
    ReviewRecord,
    ci_result_predicate,
    decide_merge,
    merge_gate_check,
    parse_ci_result,
    parse_review_record,
    sign_ci_result,
    verify_review_record,
)
from attest.review.procedure import REVIEW_RECORD_PREDICATE

Consumer = test_bootstrap.Consumer
PY = sys.executable
ROOT = Path(__file__).resolve().parents[2]
CLEAN = {"complete": True, "limitations": [], "findings": [
    {"id": "N1", "severity": "info", "blocking": False, "message": "a note", "path": "notes.txt", "line": 1}]}


def codes(err: AttestError) -> list[str]:
    return [f.code for f in err.findings]


def gate_trust(dep: Any, tmp: Path) -> tuple[Path, Path]:
    """TRUST of the gate: the deployment key signs review records, a CI key CI results; neither the other."""
    generate_key("ed25519", tmp / "ci.pem")
    policy = tmp / "gate-trust.toml"
    policy.write_text("threshold = 1\n"
                      f'[[signers]]\nkind = "key"\npublic_key = "{dep.key.with_name("deploy.pub.pem")}"\n'
                      f'predicates = ["{REVIEW_RECORD_PREDICATE}"]\n'
                      f'[[signers]]\nkind = "key"\npublic_key = "{tmp / "ci.pub.pem"}"\npredicates = ["{CI_RESULT_PREDICATE}"]\n')
    return policy, tmp / "ci.pem"


def reviewed(dep: Any, skill: Any, tmp: Path, result: Any = CLEAN) -> tuple[Any, Path]:
    s = ts.renaming_pr(dep, skill, tmp)
    review = test_review_start.start(dep, s).review
    res = ts.exec_for(dep, s, review, tmp, result)
    ts.serialize(dep, review, res, tmp, record=tmp / "record.json")
    return s, tmp / "record.json"


def ci(tmp: Path, key: Path, head: str, base: str, check: str = "test", conclusion: str = "success",
       name: str = "acme/widgets") -> Path:
    out = tmp / f"ci-{check}-{conclusion}-{head[:8]}-{base[:8]}.json"
    sign_ci_result(ci_result_predicate(repository_id=4242, full_name=name, head=head, base=base, check=check, conclusion=conclusion,
                                       run="r1"), load_signer(str(key)), out)
    return out


def check(dep: Any, policy: Path, s: Any, record: Path, ci_files: list[Path], required: tuple[str, ...] = ("test",)) -> Any:
    return merge_gate_check(record=record, policy=load_policy(policy), host=IdentityFile(str(s.ident)), ci=ci_files,
                            required_checks=required, state_dir=dep.state)


def test_a_complete_review_of_the_exact_head_with_ci_authorizes_and_nothing_less(dep: Any, skill: Any, tmp_path: Path) -> None:
    s, record = reviewed(dep, skill, tmp_path)
    policy, ci_key = gate_trust(dep, tmp_path)
    ok = ci(tmp_path, ci_key, s.c.head, s.c.base)
    gate = check(dep, policy, s, record, [ok])
    assert gate.authorized and [f.code for f in gate.findings] == ["MERGE_AUTHORIZED"]
    # Through the CLI: exit 0, then every missing piece at once with exit 1.
    base = [PY, "-m", "attest", "merge-gate", "check", "--record", str(record), "--policy", str(policy), "--identity", str(s.ident),
            "--state-dir", str(dep.state), "--json"]
    cli = subprocess.run([*base, "--ci", str(ok), "--require-check", "test"], capture_output=True, text=True, check=False, cwd=ROOT)
    assert cli.returncode == 0, cli.stderr
    assert json.loads(cli.stdout)["authorized"] is True
    cli = subprocess.run([*base, "--ci", str(ok), "--require-check", "test", "--require-check", "lint"], capture_output=True,
                         text=True, check=False, cwd=ROOT)
    assert cli.returncode == 1 and [e["code"] for e in json.loads(cli.stdout)["errors"]] == ["MERGE_CI_MISSING"]
    # A new commit on the pull request: the review and the CI are of the old head.
    (s.c.path / "late.txt").write_text("late\n")
    head = ts.commit(s.c.path, "late")
    test_bootstrap.identity_file(s.ident, Consumer(s.c.path, s.c.base, head))
    gate = check(dep, policy, s, record, [ok])
    assert not gate.authorized and [f.code for f in gate.findings] == ["MERGE_REVIEW_STALE_HEAD", "MERGE_CI_MISSING"]


def test_a_limited_review_never_authorizes(dep: Any, skill: Any, tmp_path: Path) -> None:
    s, record = reviewed(dep, skill, tmp_path, {"complete": False, "limitations": ["analysed nothing"], "findings": []})
    policy, ci_key = gate_trust(dep, tmp_path)
    gate = check(dep, policy, s, record, [ci(tmp_path, ci_key, s.c.head, s.c.base)])
    assert [f.code for f in gate.findings] == ["MERGE_REVIEW_NOT_COMPLETE"] and "limited" in gate.findings[0].detail


def test_blocking_findings_and_failed_ci_each_say_so(dep: Any, skill: Any, tmp_path: Path) -> None:
    s, record = reviewed(dep, skill, tmp_path, ts.RESULT)
    policy, ci_key = gate_trust(dep, tmp_path)
    gate = check(dep, policy, s, record, [ci(tmp_path, ci_key, s.c.head, s.c.base),
                                          ci(tmp_path, ci_key, s.c.head, s.c.base, conclusion="failure")])
    assert [f.code for f in gate.findings] == ["MERGE_BLOCKING_FINDINGS", "MERGE_CI_FAILED"]


def test_only_signers_with_the_role_count(dep: Any, skill: Any, tmp_path: Path) -> None:
    s, record = reviewed(dep, skill, tmp_path)
    policy, ci_key = gate_trust(dep, tmp_path)
    # A "review record" signed by the CI key: a signer not for that predicate.
    st = json.loads(load_envelope_payload(record))
    forged = tmp_path / "forged.json"
    forged.write_bytes(sign_statement(st, load_signer(str(ci_key))))
    with pytest.raises(VerificationError) as ei:
        check(dep, policy, s, forged, [])
    assert codes(ei.value) == ["SIGNER_NOT_FOR_PREDICATE"]
    # A CI result given as the record.
    with pytest.raises(VerificationError) as ei:
        check(dep, policy, s, ci(tmp_path, ci_key, s.c.head, s.c.base), [])
    assert codes(ei.value) == ["BAD_PREDICATE_TYPE"]
    # CI results signed by the deployment key are not CI evidence.
    fake = tmp_path / "fake-ci.json"
    sign_ci_result(ci_result_predicate(repository_id=4242, full_name="acme/widgets", head=s.c.head, base=s.c.base, check="test",
                                       conclusion="success", run="r"), load_signer(str(dep.key)), fake)
    with pytest.raises(VerificationError) as ei:
        check(dep, policy, s, record, [fake])
    assert codes(ei.value) == ["SIGNER_NOT_FOR_PREDICATE"]


def load_envelope_payload(path: Path) -> bytes:
    from attest.attestation import Envelope

    return Envelope.from_json(json.loads(path.read_bytes())).payload


def test_a_gate_without_a_required_check_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError) as ei:
        merge_gate_check(record=tmp_path / "r.json", policy=None, host=None, ci=[], required_checks=(), state_dir=tmp_path)
    assert codes(ei.value) == ["MERGE_NO_REQUIRED_CHECK"]


# -- the pure decision ---------------------------------------------------------------------------------------------

A, B, C, D = "a" * 40, "b" * 40, "c" * 40, "d" * 40
REC = ReviewRecord("0" * 32, "complete", 4242, "acme/widgets", 99001, 7, A, C, 0, "sha256:" + "0" * 64)
NOW = HostIdentity(4242, "acme/widgets", 99001, 7, A, C)
OK = CiResult("test", 4242, "acme/widgets", C, A, "success", "r1", "sha256:" + "1" * 64)
CASES: list[tuple[str, dict[str, Any], dict[str, Any], list[CiResult], tuple[str, str | None] | None, list[str]]] = [
    ("everything holds", {}, {}, [OK], None, ["MERGE_AUTHORIZED"]),
    ("trusted producer true", {}, {}, [OK], ("true", C), ["MERGE_AUTHORIZED"]),
    ("trusted producer unknown", {}, {}, [OK], ("unknown", C), ["MERGE_TRUSTED_PRODUCER_MISSING"]),
    ("trusted producer false", {}, {}, [OK], ("false", C), ["MERGE_TRUSTED_PRODUCER_MISSING"]),
    ("trusted producer of another head", {}, {}, [OK], ("true", D), ["MERGE_TRUSTED_PRODUCER_MISSING"]),
    ("trusted producer of no head", {}, {}, [OK], ("true", None), ["MERGE_TRUSTED_PRODUCER_MISSING"]),
    ("unconfined reviewer", {"confined": False}, {}, [OK], None, ["MERGE_REVIEW_UNCONFINED"]),
    ("partial", {"status": "partial"}, {}, [OK], None, ["MERGE_REVIEW_NOT_COMPLETE"]),
    ("failed", {"status": "failed"}, {}, [OK], None, ["MERGE_REVIEW_NOT_COMPLETE"]),
    ("limited", {"status": "limited"}, {}, [OK], None, ["MERGE_REVIEW_NOT_COMPLETE"]),
    ("blocking", {"blocking": 2}, {}, [OK], None, ["MERGE_BLOCKING_FINDINGS"]),
    ("stale head", {}, {"head_sha": D}, [OK], None, ["MERGE_REVIEW_STALE_HEAD", "MERGE_CI_MISSING"]),
    ("stale base", {}, {"base_sha": B}, [OK], None, ["MERGE_REVIEW_STALE_BASE"]),
    ("pull request renumbered", {}, {"number": 8}, [OK], None, ["MERGE_REVIEW_OTHER_PULL_REQUEST"]),
    ("repository replaced", {}, {"repository_id": 1}, [OK], None, ["MERGE_REVIEW_OTHER_PULL_REQUEST", "MERGE_CI_MISSING"]),
    ("no CI", {}, {}, [], None, ["MERGE_CI_MISSING"]),
    ("CI of another head", {}, {}, [replace(OK, head=D)], None, ["MERGE_CI_MISSING"]),
    ("CI of another repository", {}, {}, [replace(OK, full_name="evil/widgets")], None, ["MERGE_CI_MISSING"]),
    ("CI of another check", {}, {}, [replace(OK, check="lint")], None, ["MERGE_CI_MISSING"]),
    ("CI failed", {}, {}, [replace(OK, conclusion="failure")], None, ["MERGE_CI_FAILED"]),
    ("a success and a cancelled", {}, {}, [OK, replace(OK, conclusion="cancelled")], None, ["MERGE_CI_FAILED"]),
    ("CI of another base", {}, {}, [replace(OK, base=B)], None, ["MERGE_CI_STALE_BASE"]),
    ("CI naming no base", {}, {}, [replace(OK, base=None)], None, ["MERGE_CI_STALE_BASE"]),
    ("CI of the old base failed, of this base succeeded", {}, {}, [replace(OK, base=B, conclusion="failure"), OK], None,
     ["MERGE_AUTHORIZED"]),
    ("CI of this base failed, of the old base succeeded", {}, {}, [replace(OK, base=B), replace(OK, conclusion="failure")], None,
     ["MERGE_CI_FAILED"]),
    ("base moved: the record and its CI are of the old base", {}, {"base_sha": B}, [OK], None, ["MERGE_REVIEW_STALE_BASE"]),
    ("base moved: CI of the new base, record of the old", {}, {"base_sha": B}, [replace(OK, base=B)], None,
     ["MERGE_REVIEW_STALE_BASE", "MERGE_CI_STALE_BASE"]),
    ("everything wrong", {"status": "partial", "blocking": 1}, {"head_sha": D, "base_sha": B, "number": 9}, [], ("unknown", D),
     ["MERGE_REVIEW_OTHER_PULL_REQUEST", "MERGE_REVIEW_STALE_BASE", "MERGE_REVIEW_STALE_HEAD", "MERGE_REVIEW_NOT_COMPLETE",
      "MERGE_BLOCKING_FINDINGS", "MERGE_CI_MISSING", "MERGE_TRUSTED_PRODUCER_MISSING"]),
]


@pytest.mark.parametrize(("name", "rec", "now", "ci_results", "producer", "want"), CASES, ids=[c[0] for c in CASES])
def test_decide_merge(name: str, rec: dict[str, Any], now: dict[str, Any], ci_results: list[CiResult],
                      producer: tuple[str, str | None] | None, want: list[str]) -> None:
    got = decide_merge(replace(REC, **rec), replace(NOW, **now), ci_results, ("test",), same_head=(), runs=(),
                       trusted_producer=producer)
    assert [f.code for f in got.findings] == want and got.authorized == (want == ["MERGE_AUTHORIZED"])


def test_a_blocking_review_of_the_same_head_stays_blocking() -> None:
    earlier = replace(REC, review="1" * 32, blocking=2, digest="sha256:" + "2" * 64)
    got = decide_merge(REC, NOW, [OK], ("test",), same_head=[earlier, REC], runs=())
    assert [f.code for f in got.findings] == ["MERGE_BLOCKING_FINDINGS"] and "1" * 32 in got.findings[0].detail
    other_head = replace(earlier, head=D)
    assert decide_merge(REC, NOW, [OK], ("test",), same_head=[other_head], runs=()).authorized


SAME_HEAD: list[tuple[str, dict[str, Any], list[str]]] = [
    # The head is the commit of the repository, whatever pull request carries it: a record of another pull request of
    # the same head commit keeps it blocked; one of another repository (same commit id) never counts.
    ("a blocking record of another pull request, same head", {"pull_request_id": 99002, "number": 8, "blocking": 1},
     ["MERGE_BLOCKING_FINDINGS"]),
    ("a failed record of another pull request, same head", {"pull_request_id": 99002, "number": 8, "status": "failed"},
     ["MERGE_HEAD_FAILED_ANALYSIS"]),
    ("a blocking record of another pull request, another head", {"pull_request_id": 99002, "number": 8, "blocking": 1,
                                                                 "head": D}, ["MERGE_AUTHORIZED"]),
    ("a blocking record of another repository, same head", {"repository_id": 1, "full_name": "evil/widgets", "blocking": 1},
     ["MERGE_AUTHORIZED"]),
    ("a failed record of another repository, same head", {"repository_id": 1, "full_name": "evil/widgets", "status": "failed"},
     ["MERGE_AUTHORIZED"]),
    ("a clean record of another pull request, same head", {"pull_request_id": 99002, "number": 8}, ["MERGE_AUTHORIZED"]),
]


@pytest.mark.parametrize(("name", "other", "want"), SAME_HEAD, ids=[c[0] for c in SAME_HEAD])
def test_the_head_history_is_the_commit_of_the_repository(name: str, other: dict[str, Any], want: list[str]) -> None:
    earlier = replace(REC, review="1" * 32, digest="sha256:" + "2" * 64, **other)
    got = decide_merge(REC, NOW, [OK], ("test",), same_head=[earlier, REC], runs=())
    assert [f.code for f in got.findings] == want


def test_a_failed_review_of_the_same_head_stays_blocking_and_a_limited_one_does_not() -> None:
    failed = replace(REC, review="1" * 32, status="failed", digest="sha256:" + "2" * 64)
    got = decide_merge(REC, NOW, [OK], ("test",), same_head=[failed, REC], runs=())
    assert [f.code for f in got.findings] == ["MERGE_HEAD_FAILED_ANALYSIS"] and "1" * 32 in got.findings[0].detail
    assert decide_merge(REC, NOW, [OK], ("test",), same_head=[replace(failed, head=D)], runs=()).authorized
    for status in ("limited", "partial"):
        assert decide_merge(REC, NOW, [OK], ("test",), same_head=[replace(failed, status=status)], runs=()).authorized, status


def test_decide_merge_needs_a_required_check() -> None:
    with pytest.raises(InputError) as ei:
        decide_merge(REC, NOW, [OK], (), same_head=(), runs=())
    assert codes(ei.value) == ["MERGE_NO_REQUIRED_CHECK"]


CFG = {"path": ".agent-policy.yml", "status": "modified", "kind": "config"}
LCK = {"path": ".agent-policy.lock", "status": "modified", "kind": "lock"}
GOOD_RECORD: dict[str, Any] = {
    "review": "0" * 32, "state_digest": "sha256:" + "0" * 64, "generation": 0, "status": "complete",
    "repository": {"id": 1, "full_name": "a/b"}, "pull_request": {"id": 2, "number": 3}, "base": {"commit": A, "tree": B}, "head": C,
    "merge_base": A, "handoff_digest": "sha256:" + "1" * 64,
    "images": {n: "sha256:" + "2" * 64 for n in ("bootstrap", "runtime", "base", "procedure")},
    "change": {"identity": "sha256:" + "3" * 64},
    "projections": {r: {"path": f"docs/{r}", "sha256": "sha256:" + "3" * 64} for r in ("semantic", "adapter")}, "result": {"sha256": "sha256:" + "3" * 64}, "failure": None, "limitations": [], "authority_changes": [],
    "findings": {"total": 1, "blocking": 0, "inline": 1, "in_body": 0}, "event": "COMMENT",
    "confinement": {"confined": True}, "time": "2026-12-01T00:00:00Z"}


@pytest.mark.parametrize("change", [
    lambda d: d.pop("head"),
    lambda d: d.pop("time"),
    lambda d: d.update(extra=1),
    lambda d: d.update(status="approved"),
    lambda d: d.update(head="main"),
    lambda d: d["repository"].update(id=0),
    lambda d: d["findings"].update(blocking=-1),
    lambda d: d.update(findings=[]),
    lambda d: d.update(failure={"code": "REVIEWER_FAILED", "detail": "x"}, result=None),   # complete and failed
    lambda d: d.update(limitations=["analysed nothing"]),                                  # complete with limitations
    lambda d: d["findings"].update(blocking=1),                                            # blocking, yet COMMENT
    lambda d: d["findings"].update(inline=5),                                              # counts do not add up
    lambda d: d.update(status="limited"),                                                  # limited, no limitation
    lambda d: d.update(status="failed"),                                                   # failed with a result
    lambda d: d["images"].pop("runtime"),
    lambda d: d.update(change={"identity": "sha256:" + "3" * 63}),
    lambda d: d.update(change={"identity": "sha256:" + "3" * 64, "path": "/x"}),
    lambda d: d.update(change=None),
    # authority_changes: the key, its shape, and its findings counted as blocking, in the body
    lambda d: d.pop("authority_changes"),                                                  # missing
    lambda d: d.update(authority_changes=None),
    lambda d: d.update(authority_changes={}),
    lambda d: d.update(authority_changes=[[".agent-policy.yml", "modified", "config"]]),
    lambda d: d.update(authority_changes=[{**CFG, "kind": "policy"}]),                     # bad kind
    lambda d: d.update(authority_changes=[{**CFG, "status": "renamed"}]),                  # bad status
    lambda d: d.update(authority_changes=[{**CFG, "status": "M"}]),
    lambda d: d.update(authority_changes=[{**CFG, "path": ""}]),
    lambda d: d.update(authority_changes=[{**CFG, "path": 1}]),
    lambda d: d.update(authority_changes=[{k: v for k, v in CFG.items() if k != "kind"}]),
    lambda d: d.update(authority_changes=[{**CFG, "source": "attest"}]),
    lambda d: d.update(authority_changes=[CFG, CFG], findings={"total": 3, "blocking": 2, "inline": 1, "in_body": 2},
                       event="REQUEST_CHANGES"),                                           # a path twice
    lambda d: d.update(authority_changes=[CFG]),                                           # blocking 0, in_body 0 < 1
    lambda d: d.update(authority_changes=[CFG], findings={"total": 1, "blocking": 0, "inline": 0, "in_body": 1}),  # blocking < n
    lambda d: d.update(authority_changes=[CFG], findings={"total": 1, "blocking": 1, "inline": 1, "in_body": 0},
                       event="REQUEST_CHANGES"),                                           # in_body < n
    lambda d: d.update(authority_changes=[CFG, LCK], findings={"total": 2, "blocking": 1, "inline": 0, "in_body": 2},
                       event="REQUEST_CHANGES"),                                           # blocking 1 < 2
    lambda d: d.update(status="failed", result=None, failure={"code": "REVIEWER_FAILED", "detail": "x"}, authority_changes=[CFG],
                       findings={"total": 0, "blocking": 0, "inline": 0, "in_body": 0}),  # failed, its authority finding missing
    lambda d: d.update(status="failed", result=None, failure={"code": "REVIEWER_FAILED", "detail": "x"}, authority_changes=[CFG],
                       findings={"total": 2, "blocking": 2, "inline": 0, "in_body": 2},
                       event="REQUEST_CHANGES"),                                           # failed, with a reviewer finding
])
def test_parse_review_record_refuses(change: Any) -> None:
    assert parse_review_record(json.loads(json.dumps(GOOD_RECORD)), "d").status == "complete"
    doc = json.loads(json.dumps(GOOD_RECORD))
    change(doc)
    with pytest.raises(VerificationError) as ei:
        parse_review_record(doc, "d")
    assert codes(ei.value) == ["MERGE_RECORD_MALFORMED"]


def test_a_signed_record_of_no_predicate_is_malformed_not_a_crash(tmp_path: Path) -> None:
    """A statement may carry no predicate; a review record of none was a KeyError ('predicate'), now refused by name."""
    generate_key("ed25519", tmp_path / "deploy.pem")
    trust = tmp_path / "trust.toml"
    trust.write_text(f'threshold = 1\n[[signers]]\nkind = "key"\npublic_key = "{tmp_path / "deploy.pub.pem"}"\n'
                     f'predicates = ["{REVIEW_RECORD_PREDICATE}"]\n')
    st = {"_type": STATEMENT_TYPE, "subject": [{"name": "review-payload", "digest": {"sha256": "0" * 64}}],
          "predicateType": REVIEW_RECORD_PREDICATE}
    record = tmp_path / "record.json"
    record.write_bytes(sign_statement(st, load_signer(str(tmp_path / "deploy.pem"))))
    with pytest.raises(VerificationError) as ei:
        verify_review_record(record, load_policy(trust))
    assert codes(ei.value) == ["MERGE_RECORD_MALFORMED"] and "record: expected an object" in ei.value.findings[0].detail


@pytest.mark.parametrize("status, result, failure, findings", [
    ("complete", {"sha256": "sha256:" + "3" * 64}, None, {"total": 3, "blocking": 2, "inline": 1, "in_body": 2}),
    ("failed", None, {"code": "REVIEWER_FAILED", "detail": "exit 3"}, {"total": 2, "blocking": 2, "inline": 0, "in_body": 2}),
])
def test_a_record_with_authority_changes_parses_and_never_authorizes(status: str, result: Any, failure: Any,
                                                                     findings: dict[str, int]) -> None:
    doc = json.loads(json.dumps(GOOD_RECORD))
    doc.update(status=status, result=result, failure=failure, authority_changes=[CFG, LCK], findings=findings, event="REQUEST_CHANGES")
    if status == "failed":
        doc["confinement"] = None  # no reviewer ran to a result (as serialize writes a failed record)
    rec = parse_review_record(doc, "d")
    assert rec.authority == ((".agent-policy.yml", "modified", "config"), (".agent-policy.lock", "modified", "lock"))
    assert parse_review_record(json.loads(json.dumps(GOOD_RECORD)), "d").authority == ()
    rec = replace(rec, repository_id=REC.repository_id, full_name=REC.full_name, pull_request_id=REC.pull_request_id,
                  number=REC.number, base_commit=REC.base_commit, head=REC.head, status="complete")
    decision = decide_merge(rec, NOW, [OK], ("test",), same_head=(), runs=())
    assert not decision.authorized and [f.code for f in decision.findings] == ["MERGE_BLOCKING_FINDINGS"]
    message = decision.findings[0].detail
    assert "config modified .agent-policy.yml" in message and "lock modified .agent-policy.lock" in message, message


@pytest.mark.parametrize("change", [
    {"conclusion": "passed"}, {"head": "HEAD"}, {"check": ""}, {"run": ""}, {"extra": 1}, {"repository": {"id": 1}},
    {"base": "main"}, {"base": None}, {"base": A[:12]},
])
def test_parse_ci_result_refuses(change: dict[str, Any]) -> None:
    good = ci_result_predicate(repository_id=1, full_name="a/b", head=C, base=A, check="test", conclusion="success", run="r")
    assert parse_ci_result(good, "d").conclusion == "success" and parse_ci_result(good, "d").base == A
    # The shape before the base was recorded is read (base None) for the decision to refuse with its own code.
    assert parse_ci_result({k: v for k, v in good.items() if k != "base"}, "d").base is None
    with pytest.raises(VerificationError) as ei:
        parse_ci_result({**good, **change}, "d")
    assert codes(ei.value) == ["MERGE_RECORD_MALFORMED"]
    with pytest.raises(InputError):
        ci_result_predicate(repository_id=1, full_name="a/b", head="HEAD", base=A, check="test", conclusion="success", run="r")


def test_the_ci_statement_is_in_toto_with_the_head_as_subject(tmp_path: Path) -> None:
    generate_key("ed25519", tmp_path / "k.pem")
    out = tmp_path / "ci.json"
    sign_ci_result(ci_result_predicate(repository_id=1, full_name="a/b", head=C, base=A, check="test", conclusion="success",
                                       run="r"), load_signer(str(tmp_path / "k.pem")), out)
    st = json.loads(load_envelope_payload(out))
    assert st["_type"] == "https://in-toto.io/Statement/v1" and st["predicateType"] == CI_RESULT_PREDICATE
    assert st["subject"][0]["digest"]["gitCommit"] == C and st["predicate"]["base"] == A


def test_a_clean_review_after_a_blocking_one_of_the_same_head_does_not_clear_it(dep: Any, skill: Any, tmp_path: Path) -> None:
    import datetime as dt

    s, record = reviewed(dep, skill, tmp_path, ts.RESULT)  # blocking findings
    policy, ci_key = gate_trust(dep, tmp_path)
    ok = ci(tmp_path, ci_key, s.c.head, s.c.base)
    # The same review cannot run again ...
    review = json.loads(load_envelope_payload(record))["predicate"]["review"]
    with pytest.raises(VerificationError) as ei:
        ts.exec_for(dep, s, review, tmp_path, CLEAN)
    assert codes(ei.value) == ["REVIEW_ALREADY_SERIALIZED"]
    # ... but a new bootstrap of the same head is a new review; its clean analysis is not serialized.
    (tmp_path / "again").mkdir()
    later = lambda: test_bootstrap.T0 + dt.timedelta(seconds=1)  # noqa: E731
    handoff = Path(test_bootstrap.run(dep, skill, s.c, tmp_path / "again", clock=later, ident=s.ident).handoff)
    s2 = test_review_start.Started(s.c, handoff, s.ident)
    review2 = test_review_start.start(dep, s2).review
    assert review2 != review
    res = ts.exec_for(dep, s2, review2, tmp_path / "again", CLEAN)
    with pytest.raises(VerificationError) as ei:
        ts.serialize(dep, review2, res, tmp_path / "again", record=tmp_path / "again" / "record.json")
    assert codes(ei.value) == ["REVIEW_HEAD_BLOCKED"] and review in ei.value.findings[0].detail
    assert not (tmp_path / "again" / "record.json").exists() and not (dep.state / "records" / f"{review2}.json").exists()
    gate = check(dep, policy, s, record, [ok])
    assert [f.code for f in gate.findings] == ["MERGE_BLOCKING_FINDINGS"]
