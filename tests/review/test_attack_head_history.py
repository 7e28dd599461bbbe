"""Attack review of a head's review history and of CI evidence (findings 3 to 7).

Each test performs the attack end to end (real bootstraps, a confined reviewer, real keys, real
git histories, the deployment's state directory) and asserts what the product must do; each fails
against the code it was written for (the comment above it says how):

3. one analysis per review: a second ``review exec --review ID`` is refused (``REVIEW_ALREADY_RUN``),
   whether the first run succeeded, failed or is still running, and the run is claimed before
   the reviewer starts; a blocking analysis of a head keeps that head blocked, in ``review
   serialize`` (``REVIEW_HEAD_BLOCKED``) and in the merge gate;
4. the merge gate always reads the deployment's state (``--state-dir``, a missing one UNREADABLE): every record
   and every run of the head counts (``MERGE_BLOCKING_FINDINGS``, ``MERGE_ANALYSIS_UNFINISHED``);
5. a CI result records the base it ran against, and counts only for the record's base
   (``MERGE_CI_STALE_BASE``);
6. a failed analysis of a head keeps that head blocked, in ``review serialize`` (``REVIEW_HEAD_BLOCKED``)
   and in the merge gate (``MERGE_HEAD_FAILED_ANALYSIS``); a limited one does not;
7. a refused option (environment, output path, command, images) is refused before the run is
   claimed: the review stays unclaimed and re-runnable.

Tables for the pure pieces: :func:`decide_head_history`, :func:`parse_run_record` and the gate's
reading of the history in :func:`decide_merge`.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import test_attack_serialize as ta
import test_bootstrap
import test_merge_gate as tm
import test_review_serialize as ts
import test_review_start
from support.gitrepo import git

from attest._json import canonical_bytes
from attest.attestation import generate_key, load_policy, load_signer, sign_statement, statement
from attest.errors import AttestError, VerificationError
from attest.review.bootstrap import IdentityFile
from attest.review.merge import CI_RESULT_PREDICATE, decide_merge, merge_gate_check
from attest.review.procedure import RunRecord, decide_head_history, parse_run_record, run_review

Consumer = test_bootstrap.Consumer
Started = test_review_start.Started
fails = test_review_start.fails
PY = sys.executable
ROOT = Path(__file__).resolve().parents[2]
CLEAN = tm.CLEAN


def codes(err: AttestError) -> list[str]:
    return [f.code for f in err.findings]


def later(seconds: int) -> Any:
    return lambda: test_bootstrap.T0 + dt.timedelta(seconds=seconds)


def another_review(dep: Any, skill: Any, s: Started, tmp: Path, seconds: int = 1) -> tuple[Started, str]:
    """A new bootstrap of the same pull request at the same head and base (a later clock): a new review of that head."""
    tmp.mkdir()
    handoff = Path(test_bootstrap.run(dep, skill, s.c, tmp, clock=later(seconds), ident=s.ident).handoff)
    again = Started(s.c, handoff, s.ident)
    return again, test_review_start.start(dep, again).review


def run_of(dep: Any, review: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((dep.state / "results" / f"{review}.json").read_bytes())
    return doc


def cli(*args: str, stdin: Any = None, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PY, "-m", "attest", *args], capture_output=True, text=True, check=False, cwd=cwd, stdin=stdin)


def refused_without_the_state(base: list[str], elsewhere: Path) -> None:
    """The gate asked without the deployment's state: a missing default is usage (exit 2), and in a git work tree
    (this checkout, as a pull request's could be) the default is never read at all (exit 1)."""
    without = cli(*base, cwd=elsewhere)
    assert without.returncode == 2 and "--state-dir" in without.stdout + without.stderr, without.stdout + without.stderr
    in_checkout = cli(*base)
    assert in_checkout.returncode == 1, in_checkout.stdout
    assert [e["code"] for e in json.loads(in_checkout.stdout)["errors"]] == ["BOOTSTRAP_INPUT_IN_TREE"], in_checkout.stdout


def exec_argv(dep: Any, s: Started, review: str, out: Path) -> list[str]:
    ro = [a for p in ts.HOST_PYTHON for a in ("--readonly", p)]
    return ["review", "exec", "--handoff", str(s.handoff), "--policy", str(dep.trust), "--state-dir", str(dep.state), "-o", str(out),
            "--review", review, *ro, "--json", "--"]


# -- finding 3: one analysis per review --------------------------------------------------------------------------

# ATTACK: the reviewer's first run of a review found blocking findings (a critical one among them);
# the operator (or a pipeline retrying until green) runs `review exec --review ID` again, the
# nondeterministic, PR-steered reviewer says "clean" this time, and the second run record replaced
# the first: serialize signed a clean, complete record and the gate authorized. Expected: the
# second run is refused before its reviewer starts, and the first outcome is the review's.
def test_attack_a_second_run_of_a_review_replaces_its_blocking_result(dep: Any, skill: Any, tmp_path: Path) -> None:
    s = ts.renaming_pr(dep, skill, tmp_path)
    review = test_review_start.start(dep, s).review
    first = ts.exec_for(dep, s, review, tmp_path, ts.RESULT)
    kept = "sha256:" + hashlib.sha256(first.read_bytes()).hexdigest()
    (tmp_path / "again").mkdir()
    ran = tmp_path / "again" / "ran"
    again = cli(*exec_argv(dep, s, review, tmp_path / "again" / "result.json"), PY, "-I", "-c", f"open({str(ran)!r}, 'w')")
    assert again.returncode == 1, again.stderr
    assert [e["code"] for e in json.loads(again.stdout)["errors"]] == ["REVIEW_ALREADY_RUN"]
    assert not ran.exists() and not (tmp_path / "again" / "result.json").exists()
    err = fails(lambda: ts.exec_for(dep, s, review, tmp_path / "again", CLEAN))
    assert codes(err) == ["REVIEW_ALREADY_RUN"]
    run = run_of(dep, review)
    assert (run["outcome"], run["result"], run["blocking"], run["head"]) == ("result", kept, 4, s.c.head)
    done = ts.serialize(dep, review, first, tmp_path, record=tmp_path / "record.json")
    assert done.blocking == 4 and done.event == "REQUEST_CHANGES"
    policy, ci_key = tm.gate_trust(dep, tmp_path)
    gate = tm.check(dep, policy, s, tmp_path / "record.json", [tm.ci(tmp_path, ci_key, s.c.head, s.c.base)])
    assert [f.code for f in gate.findings] == ["MERGE_BLOCKING_FINDINGS"]


# ATTACK: the same after a failed run (the reviewer crashed, or was made to crash on its first try):
# a run record that says "failed" was replaced by a second, clean run. A failed analysis is the
# review's one analysis too; only a new review (a new bootstrap) analyses again.
def test_attack_a_second_run_after_a_failed_run(dep: Any, skill: Any, tmp_path: Path) -> None:
    s = ts.renaming_pr(dep, skill, tmp_path)
    review = test_review_start.start(dep, s).review
    err = fails(lambda: ts.exec_for(dep, s, review, tmp_path, argv=[PY, "-I", "-c", "import sys; sys.exit(3)"]), AttestError)
    assert codes(err) == ["REVIEWER_FAILED"]
    err = fails(lambda: ts.exec_for(dep, s, review, tmp_path, CLEAN))
    assert codes(err) == ["REVIEW_ALREADY_RUN"] and not (tmp_path / "result.json").exists()
    run = run_of(dep, review)
    assert run["outcome"] == "failed" and run["failure"]["code"] == "REVIEWER_FAILED" and run["result"] is None
    assert ts.serialize(dep, review, tmp_path / "absent.json", tmp_path).status == "failed"


# ATTACK (the race, and the head's history in the gate): the run is claimed before its reviewer
# starts. While a run of review A is still analysing head H (its reviewer waits on its standard
# input here), (a) a second run of A is refused at once, before its command runs; (b) A cannot be
# serialized; (c) a clean record of another review B of H does not authorize: A's outcome is not
# known yet. Once A finishes with blocking findings, B's clean record stays blocked, although A was
# never serialized, and the gate cannot be run without the deployment's state. Before: no claim
# existed until the run ended, two runs could both run, and the gate (without --state-dir, or with
# it: only records) authorized B.
def test_attack_a_clean_record_authorizes_while_another_analysis_of_the_head_runs_and_blocks(
        dep: Any, skill: Any, tmp_path: Path) -> None:
    s = ts.renaming_pr(dep, skill, tmp_path)
    a = test_review_start.start(dep, s).review
    sb, b = another_review(dep, skill, s, tmp_path / "b")
    assert a != b
    policy, ci_key = tm.gate_trust(dep, tmp_path)
    ok = tm.ci(tmp_path, ci_key, s.c.head, s.c.base)
    (tmp_path / "a").mkdir()
    # The reviewer's stdin is /dev/null: it waits for a file the test puts in its run directory's home.
    waits = ("import os, sys, time\nwhile not os.path.exists(os.path.join(os.environ['HOME'], 'go')): time.sleep(0.05)\n"
             f"sys.stdout.write({json.dumps(json.dumps(ts.RESULT))})")
    runs_before = set((dep.state / "runs").iterdir()) if (dep.state / "runs").exists() else set()
    proc = subprocess.Popen([PY, "-m", "attest", *exec_argv(dep, s, a, tmp_path / "a" / "result.json"), PY, "-I", "-c", waits],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)

    def release() -> None:  # the first run's reviewer may finish now
        for run_dir in set((dep.state / "runs").iterdir()) - runs_before:
            if (run_dir / "home").is_dir():
                (run_dir / "home" / "go").write_text("")
    try:
        claim = dep.state / "results" / f"{a}.json"
        deadline = time.monotonic() + 120
        while not claim.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert claim.exists() and proc.poll() is None, "no claim while the first run's reviewer runs"
        assert run_of(dep, a)["outcome"] == "running"
        # (a) a second run of A, while the first runs: refused before its command starts.
        ran = tmp_path / "ran"
        err = fails(lambda: run_review(state_dir=dep.state, review=a, handoff=s.handoff, policy=load_policy(dep.trust),
                                       argv=["/bin/touch", str(ran)], out=tmp_path / "second.json"))
        assert codes(err) == ["REVIEW_ALREADY_RUN"] and not ran.exists()
        # (b) A has no outcome: nothing to serialize.
        (tmp_path / "a" / "other.json").write_bytes(canonical_bytes(CLEAN))
        err = fails(lambda: ts.serialize(dep, a, tmp_path / "a" / "other.json", tmp_path / "a"))
        assert codes(err) == ["REVIEW_RESULT_NOT_OF_REVIEW"] and "not finished" in err.findings[0].detail
        # (c) B runs clean and is serialized meanwhile; its record does not authorize while A runs.
        res_b = ts.exec_for(dep, sb, b, tmp_path / "b", CLEAN)
        record_b = tmp_path / "b" / "record.json"
        ts.serialize(dep, b, res_b, tmp_path / "b", record=record_b)
        gate = tm.check(dep, policy, s, record_b, [ok])
        assert [f.code for f in gate.findings] == ["MERGE_ANALYSIS_UNFINISHED"] and a in gate.findings[0].detail
    finally:
        try:
            release()
            out, errtext = proc.communicate(timeout=600)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            raise
    assert proc.returncode == 0, errtext
    assert json.loads(out)["blocking"] == 4 and run_of(dep, a)["outcome"] == "result" and run_of(dep, a)["blocking"] == 4
    # A finished blocking and was never serialized: B's clean record stays blocked.
    gate = tm.check(dep, policy, s, record_b, [ok])
    assert [f.code for f in gate.findings] == ["MERGE_BLOCKING_FINDINGS"] and a in gate.findings[0].detail
    # The gate cannot be asked without the deployment's history (usage, exit 2); with it, it refuses.
    base = ["merge-gate", "check", "--record", str(record_b), "--policy", str(policy), "--identity", str(s.ident), "--ci", str(ok),
            "--require-check", "test", "--json"]
    refused_without_the_state(base, dep.tmp)
    with_state = cli(*base, "--state-dir", str(dep.state))
    assert with_state.returncode == 1 and [e["code"] for e in json.loads(with_state.stdout)["errors"]] == ["MERGE_BLOCKING_FINDINGS"]
    with pytest.raises(TypeError):
        merge_gate_check(record=record_b, policy=load_policy(policy), host=IdentityFile(str(s.ident)), ci=[ok],  # type: ignore[call-arg]
                         required_checks=("test",))
    # A itself serializes (it blocks: the history never refuses a blocking record); its record blocks too.
    kept = tmp_path / "a" / "result.json"
    assert "sha256:" + hashlib.sha256(kept.read_bytes()).hexdigest() == run_of(dep, a)["result"]
    done = ts.serialize(dep, a, kept, tmp_path / "a", record=tmp_path / "a" / "record.json")
    assert done.blocking == 4
    assert [f.code for f in tm.check(dep, policy, s, tmp_path / "a" / "record.json", [ok]).findings] == ["MERGE_BLOCKING_FINDINGS"]


# ATTACK (serialize): review A of head H ran and found blocking findings, and was never serialized
# (its findings would block); a new bootstrap of the same head gives review B, whose reviewer says
# "clean". B serialized into a clean, complete, signed record for H. Expected: B is not serialized
# while an analysis of H had blocking findings.
def test_attack_a_clean_review_is_serialized_after_an_unserialized_blocking_analysis(dep: Any, skill: Any, tmp_path: Path) -> None:
    s = ts.renaming_pr(dep, skill, tmp_path)
    a = test_review_start.start(dep, s).review
    ts.exec_for(dep, s, a, tmp_path, ts.RESULT)
    sb, b = another_review(dep, skill, s, tmp_path / "b")
    res_b = ts.exec_for(dep, sb, b, tmp_path / "b", CLEAN)
    err = fails(lambda: ts.serialize(dep, b, res_b, tmp_path / "b", record=tmp_path / "b" / "record.json"))
    assert codes(err) == ["REVIEW_HEAD_BLOCKED"] and a in err.findings[0].detail
    assert not (tmp_path / "b" / "payload.json").exists() and not (dep.state / "records" / f"{b}.json").exists()


# -- finding 4: the gate always reads the deployment's history ---------------------------------------------------

# ATTACK: the deployment's state holds a signed record of head H with blocking findings; the gate is
# handed another, clean record of H (from a second state directory, a copy, a re-run elsewhere) and
# simply not given --state-dir. Before, the option was optional and the gate authorized. Expected:
# the gate cannot run without the deployment's state, and with it the blocking record counts.
def test_attack_the_gate_without_the_state_clears_a_blocking_record(tmp_path: Path) -> None:
    policy, deploy, ci_key = ta.trust(tmp_path, ci_roles=[CI_RESULT_PREDICATE])
    state = ta.empty_state(tmp_path)
    (state / "records").mkdir(mode=0o700)
    blocking = ta.record_predicate(ta.H_NEW, review="1" * 32, findings={"total": 1, "blocking": 1, "inline": 0, "in_body": 1},
                                   event="REQUEST_CHANGES")
    ta.sign_record(deploy, blocking, state / "records" / f"{'1' * 32}.json")
    clean = ta.sign_record(deploy, ta.record_predicate(ta.H_NEW, review="2" * 32), tmp_path / "clean.json")
    ci = ta.sign_ci(ci_key, ta.H_NEW, tmp_path / "ci.json")
    ident = ta.identity(tmp_path / "id.json", ta.H_NEW)
    base = ["merge-gate", "check", "--record", str(clean), "--policy", str(policy), "--identity", str(ident), "--ci", str(ci),
            "--require-check", "test", "--json"]
    refused_without_the_state(base, tmp_path)
    got = cli(*base, "--state-dir", str(state))
    assert got.returncode == 1 and [e["code"] for e in json.loads(got.stdout)["errors"]] == ["MERGE_BLOCKING_FINDINGS"]
    # Every record there must verify, and every run record parse: the history is never skipped.
    generate_key("ed25519", tmp_path / "evil.pem")
    ta.sign_record(tmp_path / "evil.pem", ta.record_predicate(ta.H_OLD, review="3" * 32), state / "records" / f"{'3' * 32}.json")
    with pytest.raises(VerificationError) as ei:
        merge_gate_check(record=clean, policy=load_policy(policy), host=IdentityFile(str(ident)), ci=[ci], required_checks=("test",),
                         state_dir=state)
    assert codes(ei.value) == ["NO_TRUSTED_SIGNATURE"]
    (state / "records" / f"{'3' * 32}.json").unlink()
    (state / "results").mkdir(mode=0o700)
    (state / "results" / f"{'4' * 32}.json").write_text('{"review": "4444"}')
    with pytest.raises(VerificationError) as ei:
        merge_gate_check(record=clean, policy=load_policy(policy), host=IdentityFile(str(ident)), ci=[ci], required_checks=("test",),
                         state_dir=state)
    assert codes(ei.value) == ["REVIEW_STATE_MALFORMED"]


# -- finding 5: CI evidence bound to the base ---------------------------------------------------------------------

# ATTACK: CI signed its result for head H while the target branch was at BASE. The base then moved
# (another pull request merged) and the pull request was re-reviewed against the new base; the old
# CI result, which never tested H merged into the new base, authorized the merge. Expected: a CI
# result records its base and counts only for the record's base; one of another base, or one that
# names none (the shape before the base was recorded), is refused with its own code.
def test_attack_ci_of_the_old_base_authorizes_after_the_base_moved(dep: Any, skill: Any, tmp_path: Path) -> None:
    s, record = tm.reviewed(dep, skill, tmp_path)
    policy, ci_key = tm.gate_trust(dep, tmp_path)
    old_ci = tm.ci(tmp_path, ci_key, s.c.head, s.c.base)
    assert tm.check(dep, policy, s, record, [old_ci]).authorized
    # The target branch moves; the pull request (the same head) is reviewed again against it.
    git(s.c.path, "checkout", "-qB", "main2", s.c.base)
    git(s.c.path, "commit", "-q", "--allow-empty", "-m", f"another change lands ({tmp_path})")
    moved = Consumer(s.c.path, git(s.c.path, "rev-parse", "HEAD"), s.c.head)
    test_bootstrap.identity_file(s.ident, moved)
    assert [f.code for f in tm.check(dep, policy, s, record, [old_ci]).findings] == ["MERGE_REVIEW_STALE_BASE"]
    (tmp_path / "rebased").mkdir()
    handoff = Path(test_bootstrap.run(dep, skill, moved, tmp_path / "rebased", ident=s.ident).handoff)
    s2 = Started(moved, handoff, s.ident)
    review2 = test_review_start.start(dep, s2).review
    res = ts.exec_for(dep, s2, review2, tmp_path / "rebased", CLEAN)
    record2 = tmp_path / "rebased" / "record.json"
    ts.serialize(dep, review2, res, tmp_path / "rebased", record=record2)
    gate = tm.check(dep, policy, s2, record2, [old_ci])
    assert [f.code for f in gate.findings] == ["MERGE_CI_STALE_BASE"] and s.c.base in gate.findings[0].detail
    # A result that names no base at all (signed by the CI key, the predicate without `base`).
    legacy_pred = {"repository": {"id": 4242, "full_name": "acme/widgets"}, "head": s.c.head, "check": "test",
                   "conclusion": "success", "run": "r0"}
    subj = {"name": f"git-commit:{s.c.head}", "digest": {"sha256": hashlib.sha256(s.c.head.encode()).hexdigest(),
                                                         "gitCommit": s.c.head}}
    legacy = tmp_path / "ci-legacy.json"
    legacy.write_bytes(sign_statement(statement([subj], CI_RESULT_PREDICATE, legacy_pred), load_signer(str(ci_key))))
    gate = tm.check(dep, policy, s2, record2, [legacy])
    assert [f.code for f in gate.findings] == ["MERGE_CI_STALE_BASE"] and "none" in gate.findings[0].detail
    # CI of the new base, signed through the CLI (--base is required): authorized.
    no_base = cli("merge-gate", "ci-result", "--repository-id", "4242", "--full-name", "acme/widgets", "--head", s.c.head,
                  "--check", "test", "--conclusion", "success", "--run", "r2", "--key", str(ci_key), "-o", str(tmp_path / "x.json"))
    assert no_base.returncode == 2 and not (tmp_path / "x.json").exists()
    signed = cli("merge-gate", "ci-result", "--repository-id", "4242", "--full-name", "acme/widgets", "--head", s.c.head,
                 "--base", moved.base, "--check", "test", "--conclusion", "success", "--run", "r2", "--key", str(ci_key),
                 "-o", str(tmp_path / "ci-new.json"), "--json")
    assert signed.returncode == 0 and json.loads(signed.stdout)["base"] == moved.base, signed.stderr
    gate = tm.check(dep, policy, s2, record2, [old_ci, legacy, tmp_path / "ci-new.json"])
    assert gate.authorized and [c["base"] for c in gate.to_json()["ci"]] == [s.c.base, None, moved.base]


# -- finding 6: a failed analysis keeps its head blocked ----------------------------------------------------------

# ATTACK: the pull request steers the reviewer into failing on its head (it crashes, exits 1, prints
# no result), and the pipeline starts a new review of the same head until one comes back clean. A
# failed analysis is one whose findings are unknown, yet before only blocking findings (and
# unfinished runs) kept a head blocked: review C serialized clean, and review A's clean record,
# made before the failure, authorized. Expected: a failed run of the exact head blocks it in
# serialize (REVIEW_HEAD_BLOCKED) and in the gate (MERGE_HEAD_FAILED_ANALYSIS), whichever came
# first; a limited review is no failure (it never authorizes itself and blocks nothing); only a new
# head recovers.
def test_attack_a_failed_analysis_of_the_head_is_forgotten_by_the_next_review(dep: Any, skill: Any, tmp_path: Path) -> None:
    s = ts.renaming_pr(dep, skill, tmp_path)
    policy, ci_key = tm.gate_trust(dep, tmp_path)
    ok = tm.ci(tmp_path, ci_key, s.c.head, s.c.base)
    # L: an honest, limited review of the head: it never authorizes, and it blocks nothing.
    lim = test_review_start.start(dep, s).review
    (tmp_path / "l").mkdir()
    res_l = ts.exec_for(dep, s, lim, tmp_path / "l", {"complete": False, "limitations": ["the diff was too large"], "findings": []})
    assert ts.serialize(dep, lim, res_l, tmp_path / "l", record=tmp_path / "l" / "record.json").status == "limited"
    assert [f.code for f in tm.check(dep, policy, s, tmp_path / "l" / "record.json", [ok]).findings] == ["MERGE_REVIEW_NOT_COMPLETE"]
    # A: a complete, clean review of the head after L: serialized, and it authorizes.
    sa, a = another_review(dep, skill, s, tmp_path / "a", 1)
    res_a = ts.exec_for(dep, sa, a, tmp_path / "a", CLEAN)
    record_a = tmp_path / "a" / "record.json"
    ts.serialize(dep, a, res_a, tmp_path / "a", record=record_a)
    assert tm.check(dep, policy, s, record_a, [ok]).authorized
    # B: the reviewer of a new review of the same head exits 1.
    sb, b = another_review(dep, skill, s, tmp_path / "b", 2)
    failed = cli(*exec_argv(dep, sb, b, tmp_path / "b" / "result.json"), PY, "-I", "-c", "import sys; sys.exit(1)")
    assert failed.returncode == 1 and [e["code"] for e in json.loads(failed.stdout)["errors"]] == ["REVIEWER_FAILED"], failed.stderr
    assert run_of(dep, b)["outcome"] == "failed"
    # A's clean record, made before the failure, no longer authorizes.
    gate = tm.check(dep, policy, s, record_a, [ok])
    assert [f.code for f in gate.findings] == ["MERGE_HEAD_FAILED_ANALYSIS"] and b in gate.findings[0].detail
    # C: a later review of the same head whose reviewer is clean: not serialized.
    sc, c = another_review(dep, skill, s, tmp_path / "c", 3)
    res_c = ts.exec_for(dep, sc, c, tmp_path / "c", CLEAN)
    err = fails(lambda: ts.serialize(dep, c, res_c, tmp_path / "c", record=tmp_path / "c" / "record.json"))
    assert codes(err) == ["REVIEW_HEAD_BLOCKED"] and b in err.findings[0].detail and "failed" in err.findings[0].detail
    assert lim not in err.findings[0].detail and a not in err.findings[0].detail
    assert not (tmp_path / "c" / "payload.json").exists() and not (dep.state / "records" / f"{c}.json").exists()
    # B itself serializes (the head's diagnostic: failed, exit 1); the gate names it once (record and run).
    diag = cli("review", "serialize", "--state-dir", str(dep.state), "--review", b, "--result", str(tmp_path / "b" / "absent.json"),
               "-o", str(tmp_path / "b" / "payload.json"), "--key", str(dep.key), "--json")
    assert diag.returncode == 1 and json.loads(diag.stdout)["status"] == "failed", diag.stderr
    gated = cli("merge-gate", "check", "--record", str(record_a), "--policy", str(policy), "--identity", str(s.ident), "--ci", str(ok),
                "--require-check", "test", "--state-dir", str(dep.state), "--json")
    errors = json.loads(gated.stdout)["errors"]
    assert gated.returncode == 1 and [e["code"] for e in errors] == ["MERGE_HEAD_FAILED_ANALYSIS"], gated.stdout
    assert errors[0]["detail"].count(b) == 1
    # Only a new head recovers.
    (s.c.path / "fix.txt").write_text("fixed\n")
    moved = Consumer(s.c.path, s.c.base, ts.commit(s.c.path, f"fix ({tmp_path})"))
    test_bootstrap.identity_file(s.ident, moved)
    (tmp_path / "d").mkdir()
    sd = Started(moved, Path(test_bootstrap.run(dep, skill, moved, tmp_path / "d", ident=s.ident).handoff), s.ident)
    d = test_review_start.start(dep, sd).review
    ts.serialize(dep, d, ts.exec_for(dep, sd, d, tmp_path / "d", CLEAN), tmp_path / "d", record=tmp_path / "d" / "record.json")
    gate = tm.check(dep, policy, sd, tmp_path / "d" / "record.json", [tm.ci(tmp_path, ci_key, moved.head, moved.base)])
    assert gate.authorized, gate.findings


# -- finding 7: a refused option does not burn the review ---------------------------------------------------------

# ATTACK (on the operator, and through the head's history on the pull request): the run was claimed
# before its options were checked, so a refused option (an --env the exec refuses, an -o into a
# missing directory, an image gone from the store) became the review's one failed run: the review
# could never run again and, a failed analysis blocking its head, a usage error blocked the head.
# Expected: everything that can be checked without running the reviewer is checked before the
# claim; the review stays unclaimed, and the corrected run is its one analysis.
def test_attack_a_refused_option_burns_the_review(dep: Any, skill: Any, tmp_path: Path) -> None:
    s = ts.renaming_pr(dep, skill, tmp_path)
    review = test_review_start.start(dep, s).review
    claim = dep.state / "results" / f"{review}.json"
    out = tmp_path / "result.json"
    # Through the CLI: a refused variable; a result path in a missing directory.
    argv = exec_argv(dep, s, review, out)[:-1]
    refused = cli(*argv, "--env", "LD_PRELOAD=/tmp/evil.so", "--", *ts.printing(CLEAN))
    assert refused.returncode == 2 and [e["code"] for e in json.loads(refused.stdout)["errors"]] == ["ENV_REFUSED"], refused.stderr
    assert not claim.exists()
    nowhere = cli(*exec_argv(dep, s, review, tmp_path / "missing" / "result.json"), *ts.printing(CLEAN))
    assert nowhere.returncode == 2 and [e["code"] for e in json.loads(nowhere.stdout)["errors"]] == ["BAD_OUTPUT_PATH"], nowhere.stderr
    assert not claim.exists()

    def run(**change: Any) -> Any:
        kw: dict[str, Any] = {"argv": ts.printing(CLEAN), "out": out, "readonly": ts.HOST_PYTHON, **change}
        return run_review(state_dir=dep.state, review=review, handoff=s.handoff, policy=load_policy(dep.trust), **kw)

    for change, code in [({"set_env": {"PYTHONPATH": "/tmp"}}, "ENV_REFUSED"), ({"pass_env": ["GIT_DIR"]}, "ENV_REFUSED"),
                         ({"set_env": {"ATTEST_RUN_DIR": "/tmp"}}, "BAD_EXEC_ENV"), ({"set_env": {"NOTE": "a\0b"}}, "BAD_EXEC_ENV"),
                         ({"argv": []}, "BAD_EXEC_ENV"), ({"argv": ["$ATTEST_IMAGE_NOPE/bin/reviewer"]}, "BAD_IMAGE_REF"),
                         ({"out": tmp_path}, "BAD_OUTPUT_PATH")]:
        err = fails(lambda change=change: run(**change), AttestError)
        assert codes(err) == [code], (change, codes(err))
        assert not claim.exists(), change
    # The base image is gone from the store (moved aside): nothing resolves, nothing is claimed.
    hexid = json.loads((dep.state / "reviews" / f"{review}.json").read_bytes())["images"]["base"]["identity"].removeprefix("sha256:")
    entry, aside = dep.state / "store" / hexid, dep.state / "store" / f"aside-{hexid[:12]}"
    entry.rename(aside)
    try:
        err = fails(lambda: run(), AttestError)
    finally:
        aside.rename(entry)
    assert codes(err) == ["NOT_IN_STORE"] and not claim.exists()
    # Corrected, the review runs: its one analysis, which authorizes; a second run is refused as ever.
    ran = run()
    assert ran.result.complete and run_of(dep, review)["outcome"] == "result"
    assert codes(fails(lambda: run(out=tmp_path / "again.json"))) == ["REVIEW_ALREADY_RUN"]
    ts.serialize(dep, review, out, tmp_path, record=tmp_path / "record.json")
    policy, ci_key = tm.gate_trust(dep, tmp_path)
    assert tm.check(dep, policy, s, tmp_path / "record.json", [tm.ci(tmp_path, ci_key, s.c.head, s.c.base)]).authorized


# -- the pure pieces -------------------------------------------------------------------------------------------------

H, H2 = "c" * 40, "d" * 40
RUN = RunRecord("a" * 32, "sha256:" + "0" * 64, "sha256:" + "1" * 64, 4242, 99001, H, "result", "sha256:" + "2" * 64, None, 0,
                {"confined": True})
HISTORY: list[tuple[str, dict[str, Any], list[dict[str, Any]], list[str]]] = [
    ("nothing else", {}, [], []),
    ("another clean run of the head", {}, [{"review": "b" * 32}], []),
    ("another blocking run of the head", {}, [{"review": "b" * 32, "blocking": 1}], ["REVIEW_HEAD_BLOCKED"]),
    ("this run blocks too", {"blocking": 2}, [{"review": "b" * 32, "blocking": 1}], []),
    ("a failed run of the head", {}, [{"review": "b" * 32, "outcome": "failed", "result": None,
                                       "failure": {"code": "REVIEWER_FAILED", "detail": "x"}}], ["REVIEW_HEAD_BLOCKED"]),
    ("a failed and a blocking run of the head: one finding", {},
     [{"review": "b" * 32, "blocking": 1}, {"review": "e" * 32, "outcome": "failed", "result": None,
                                             "failure": {"code": "REVIEW_RESULT_INVALID", "detail": "x"}}], ["REVIEW_HEAD_BLOCKED"]),
    ("a failed run of another head", {}, [{"review": "b" * 32, "outcome": "failed", "result": None, "head": H2,
                                           "failure": {"code": "REVIEWER_FAILED", "detail": "x"}}], []),
    # The head is the commit of the repository, whatever pull request carries it: another pull request of the same
    # head commit shares its history; another repository's runs never count.
    ("a failed run of another pull request, same head", {}, [{"review": "b" * 32, "outcome": "failed", "result": None,
                                                              "pull_request_id": 1,
                                                              "failure": {"code": "REVIEWER_FAILED", "detail": "x"}}],
     ["REVIEW_HEAD_BLOCKED"]),
    ("a failed run of another repository, same head", {}, [{"review": "b" * 32, "outcome": "failed", "result": None,
                                                            "repository_id": 1,
                                                            "failure": {"code": "REVIEWER_FAILED", "detail": "x"}}], []),
    ("a running run of the head", {}, [{"review": "b" * 32, "outcome": "running", "result": None, "confinement": None}], []),
    ("a blocking run of another head", {}, [{"review": "b" * 32, "blocking": 1, "head": H2}], []),
    ("a blocking run of another pull request, same head", {}, [{"review": "b" * 32, "blocking": 1, "pull_request_id": 1}],
     ["REVIEW_HEAD_BLOCKED"]),
    ("a blocking run of another pull request, another head", {},
     [{"review": "b" * 32, "blocking": 1, "pull_request_id": 1, "head": H2}], []),
    ("a blocking run of another repository, same head", {}, [{"review": "b" * 32, "blocking": 1, "repository_id": 1}], []),
    ("a blocking run of another repository and pull request, same head", {},
     [{"review": "b" * 32, "blocking": 1, "repository_id": 1, "pull_request_id": 1}], []),
    ("its own record in the history", {}, [{}], []),
    # A non-clean run itself (failed, or blocking) is the head's diagnostic: never refused, its record never authorizes.
    ("this run failed, another blocked", {"outcome": "failed", "result": None, "failure": {"code": "X", "detail": "x"}},
     [{"review": "b" * 32, "blocking": 3}], []),
    ("this run failed, another failed", {"outcome": "failed", "result": None, "failure": {"code": "X", "detail": "x"}},
     [{"review": "b" * 32, "outcome": "failed", "result": None, "failure": {"code": "X", "detail": "x"}}], []),
    ("this run blocks, another failed", {"blocking": 1},
     [{"review": "b" * 32, "outcome": "failed", "result": None, "failure": {"code": "X", "detail": "x"}}], []),
]


@pytest.mark.parametrize(("name", "mine", "others", "want"), HISTORY, ids=[c[0] for c in HISTORY])
def test_decide_head_history(name: str, mine: dict[str, Any], others: list[dict[str, Any]], want: list[str]) -> None:
    run = replace(RUN, **mine)
    got = decide_head_history(run, [run, *(replace(RUN, **o) for o in others)])
    assert [f.code for f in got] == want


GATE_HISTORY: list[tuple[str, list[dict[str, Any]], list[str]]] = [
    ("no other analysis", [], ["MERGE_AUTHORIZED"]),
    ("the record's own run", [{"review": "0" * 32, "blocking": 0}], ["MERGE_AUTHORIZED"]),
    ("a clean run of the head", [{}], ["MERGE_AUTHORIZED"]),
    ("a failed run of the head", [{"outcome": "failed", "result": None, "failure": {"code": "X", "detail": "x"}}],
     ["MERGE_HEAD_FAILED_ANALYSIS"]),
    ("the record's own failed run", [{"review": "0" * 32, "outcome": "failed", "result": None,
                                      "failure": {"code": "X", "detail": "x"}}], ["MERGE_AUTHORIZED"]),
    ("a failed run of another head", [{"outcome": "failed", "result": None, "failure": {"code": "X", "detail": "x"}, "head": H2}],
     ["MERGE_AUTHORIZED"]),
    ("a failed run of another repository", [{"outcome": "failed", "result": None, "failure": {"code": "X", "detail": "x"},
                                             "repository_id": 1}], ["MERGE_AUTHORIZED"]),
    ("blocking, failed and running", [{"blocking": 1}, {"review": "e" * 32, "outcome": "running", "result": None},
                                      {"review": "f" * 32, "outcome": "failed", "result": None,
                                       "failure": {"code": "X", "detail": "x"}}],
     ["MERGE_BLOCKING_FINDINGS", "MERGE_HEAD_FAILED_ANALYSIS", "MERGE_ANALYSIS_UNFINISHED"]),
    ("a blocking run of the head", [{"blocking": 1}], ["MERGE_BLOCKING_FINDINGS"]),
    ("a running run of the head", [{"outcome": "running", "result": None}], ["MERGE_ANALYSIS_UNFINISHED"]),
    ("blocking and running", [{"blocking": 1}, {"review": "e" * 32, "outcome": "running", "result": None}],
     ["MERGE_BLOCKING_FINDINGS", "MERGE_ANALYSIS_UNFINISHED"]),
    ("a blocking run of another head", [{"blocking": 1, "head": H2}], ["MERGE_AUTHORIZED"]),
    ("a running run of another head", [{"outcome": "running", "result": None, "head": H2}], ["MERGE_AUTHORIZED"]),
    ("a blocking run of another pull request, same head", [{"blocking": 1, "pull_request_id": 1}], ["MERGE_BLOCKING_FINDINGS"]),
    ("a failed run of another pull request, same head", [{"outcome": "failed", "result": None, "pull_request_id": 1,
                                                          "failure": {"code": "X", "detail": "x"}}], ["MERGE_HEAD_FAILED_ANALYSIS"]),
    ("a running run of another pull request, same head", [{"outcome": "running", "result": None, "pull_request_id": 1}],
     ["MERGE_ANALYSIS_UNFINISHED"]),
    ("a blocking run of another pull request, another head", [{"blocking": 1, "pull_request_id": 1, "head": H2}],
     ["MERGE_AUTHORIZED"]),
    ("a blocking run of another repository, same head", [{"blocking": 1, "repository_id": 1}], ["MERGE_AUTHORIZED"]),
    ("a running run of another repository, same head", [{"outcome": "running", "result": None, "repository_id": 1}],
     ["MERGE_AUTHORIZED"]),
]


@pytest.mark.parametrize(("name", "runs", "want"), GATE_HISTORY, ids=[c[0] for c in GATE_HISTORY])
def test_decide_merge_reads_every_run_of_the_head(name: str, runs: list[dict[str, Any]], want: list[str]) -> None:
    rec, now, ok = replace(tm.REC, head=H), replace(tm.NOW, head_sha=H), replace(tm.OK, head=H)
    got = decide_merge(rec, now, [ok], ("test",), same_head=(), runs=[replace(RUN, **r) for r in runs])
    assert [f.code for f in got.findings] == want


def test_a_blocking_record_and_run_of_one_review_are_one_finding() -> None:
    rec, now, ok = replace(tm.REC, head=H), replace(tm.NOW, head_sha=H), replace(tm.OK, head=H)
    other = replace(rec, review="b" * 32, blocking=1, digest="sha256:" + "9" * 64)
    got = decide_merge(rec, now, [ok], ("test",), same_head=[other], runs=[replace(RUN, review="b" * 32, blocking=1)])
    assert [f.code for f in got.findings] == ["MERGE_BLOCKING_FINDINGS"] and got.findings[0].detail.count("b" * 32) == 1


def test_a_failed_record_and_run_of_one_review_are_one_finding() -> None:
    rec, now, ok = replace(tm.REC, head=H), replace(tm.NOW, head_sha=H), replace(tm.OK, head=H)
    failed = replace(rec, review="b" * 32, status="failed", digest="sha256:" + "9" * 64)
    run = replace(RUN, review="b" * 32, outcome="failed", result=None, failure={"code": "REVIEWER_FAILED", "detail": "x"})
    got = decide_merge(rec, now, [ok], ("test",), same_head=[failed], runs=[run])
    assert [f.code for f in got.findings] == ["MERGE_HEAD_FAILED_ANALYSIS"] and got.findings[0].detail.count("b" * 32) == 1
    # A failed record alone (its run record gone) blocks the head too; one of another head does not.
    assert [f.code for f in decide_merge(rec, now, [ok], ("test",), same_head=[failed], runs=[]).findings] == \
        ["MERGE_HEAD_FAILED_ANALYSIS"]
    assert decide_merge(rec, now, [ok], ("test",), same_head=[replace(failed, head=H2)], runs=[]).authorized
    # The record's own failure is its status (MERGE_REVIEW_NOT_COMPLETE), not another analysis.
    own = replace(rec, status="failed")
    assert [f.code for f in decide_merge(own, now, [ok], ("test",), same_head=[own], runs=[replace(run, review=own.review)]).findings] \
        == ["MERGE_REVIEW_NOT_COMPLETE"]


def _run_doc(**change: Any) -> bytes:
    doc = {**RUN.to_json(), **change}
    return canonical_bytes(doc)


@pytest.mark.parametrize("data", [
    pytest.param(_run_doc(outcome="running"), id="running-with-a-result"),
    pytest.param(_run_doc(outcome="done"), id="unknown-outcome"),
    pytest.param(_run_doc(result=None), id="result-without-digest"),
    pytest.param(_run_doc(failure={"code": "X", "detail": "x"}), id="result-and-failure"),
    pytest.param(_run_doc(outcome="failed", result=None, failure={"code": "X", "detail": "x"}, blocking=1), id="failed-blocking"),
    pytest.param(_run_doc(blocking=-1), id="negative-blocking"),
    pytest.param(_run_doc(blocking=True), id="boolean-blocking"),
    pytest.param(_run_doc(head="main"), id="head-not-a-commit"),
    pytest.param(_run_doc(review="x"), id="review-not-an-id"),
    pytest.param(_run_doc(repository_id=0), id="repository-id-zero"),
    pytest.param(_run_doc(extra=1), id="extra-field"),
    pytest.param(canonical_bytes({k: v for k, v in RUN.to_json().items() if k != "head"}), id="no-head"),
    pytest.param(json.dumps(RUN.to_json(), indent=1).encode(), id="not-canonical"),
])
def test_parse_run_record_refuses(data: bytes) -> None:
    assert parse_run_record(_run_doc(), "r") == RUN
    with pytest.raises(VerificationError) as ei:
        parse_run_record(data, "r")
    assert codes(ei.value) == ["REVIEW_STATE_MALFORMED"]

