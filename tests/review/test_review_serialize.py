"""`attest review exec --review` and `attest review serialize` over real bootstraps, reviewers and git histories.

A pull request that renames a file (a deleted path and an added one), a reviewer process that
prints findings anchored on each side, unanchorable ones and hostile Markdown; the payload checked
against the changed surface with independent code (git's own ``diff -U0``); the record verified
under the deployment's trust; the recheck before writing refusing a moved head or base; tables for
the pure pieces (status, anchors, adapter, limits, the frozen root).
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import test_bootstrap
import test_review_start
from support.gitrepo import git

from attest._json import canonical_bytes
from attest.attestation import load_policy, load_signer, verify_attestation_file
from attest.errors import AttestError, VerificationError
from attest.policy import render_github_review_json_adapter_v1
from attest.review.handoff import ReviewResult, parse_result
from attest.review.procedure import (
    REVIEW_RECORD_PREDICATE,
    RecheckCode,
    ReviewFacts,
    SerializeCode,
    anchor,
    check_adapter,
    decide_root,
    recheck_review,
    render_github_review,
    review_id,
    review_status,
    run_review,
    serialize_review,
)

Consumer = test_bootstrap.Consumer
Started = test_review_start.Started
fails = test_review_start.fails
PY = sys.executable
ROOT = Path(__file__).resolve().parents[2]
HOST_PYTHON = (sys.prefix, sys.base_prefix, str(ROOT))
SEM, ADA = test_review_start.SEM, test_review_start.ADA


def codes(err: AttestError) -> list[str]:
    return [f.code for f in err.findings]


def commit(path: Path, msg: str) -> str:
    git(path, "add", "-A")
    git(path, "commit", "-qm", msg)
    return git(path, "rev-parse", "HEAD")


def renaming_pr(dep: Any, skill: Any, tmp: Path) -> Started:
    """A pull request that renames src.txt to moved.txt (and edits it) and adds notes.txt of three lines."""
    c = test_bootstrap.make_consumer(tmp / "consumer", dep.sha)
    git(c.path, "checkout", "-qb", "pr")
    git(c.path, "mv", "src.txt", "moved.txt")
    (c.path / "moved.txt").write_text("code\nedited\n")
    (c.path / "notes.txt").write_text("one\ntwo\nthree\n")
    c = Consumer(c.path, c.base, commit(c.path, f"rename ({tmp})"))  # one head per test: the state keeps every head's history
    handoff = Path(test_bootstrap.run(dep, skill, c, tmp).handoff)
    return Started(c, handoff, test_bootstrap.identity_file(tmp / "identity.json", c))


def editing_pr(dep: Any, skill: Any, tmp: Path) -> Started:
    """A pull request that rewrites the one line of src.txt and adds notes.txt of three lines (nothing deleted)."""
    c = test_bootstrap.make_consumer(tmp / "consumer", dep.sha)
    git(c.path, "checkout", "-qb", "pr")
    (c.path / "src.txt").write_text("edited\n")
    (c.path / "notes.txt").write_text("one\ntwo\nthree\n")
    c = Consumer(c.path, c.base, commit(c.path, f"edit ({tmp})"))
    handoff = Path(test_bootstrap.run(dep, skill, c, tmp).handoff)
    return Started(c, handoff, test_bootstrap.identity_file(tmp / "identity.json", c))


HOSTILE = "closes the fence ```` and hides the rest <!-- and <b>this</b> &amp;\nsecond line"
FINDINGS = [
    {"id": "F1", "severity": "high", "blocking": True, "message": "the new line", "path": "src.txt", "line": 1, "side": "RIGHT"},
    {"id": "F2", "severity": "medium", "blocking": True, "message": "the old line", "path": "src.txt", "line": 1, "side": "LEFT"},
    {"id": "F3", "severity": "low", "blocking": False, "message": "not a line of the file", "path": "src.txt", "line": 2, "side": "RIGHT"},
    {"id": "F4", "severity": "info", "blocking": False, "message": "no path at all"},
    {"id": "F5", "severity": "high", "blocking": True, "message": "an unchanged file", "path": ".agent-policy.yml", "line": 1},
    {"id": "F6", "severity": "critical", "blocking": True, "message": HOSTILE, "path": "notes.txt", "line": 9},
    {"id": "F7", "severity": "low", "blocking": False, "message": "no side: the head's line", "path": "notes.txt", "line": 3},
    {"id": "F8", "severity": "low", "blocking": False, "message": "a path, no line", "path": "notes.txt"},
]
RESULT = {"complete": True, "limitations": [], "findings": FINDINGS}


def printing(doc: Any) -> list[str]:
    return [PY, "-I", "-c", f"import sys; sys.stdout.write({json.dumps(json.dumps(doc))})"]


def exec_for(dep: Any, s: Started, review: str, tmp: Path, doc: Any = RESULT, argv: list[str] | None = None) -> Path:
    out = tmp / "result.json"
    run_review(state_dir=dep.state, review=review, handoff=s.handoff, policy=load_policy(dep.trust), argv=argv or printing(doc),
               out=out, readonly=HOST_PYTHON)
    return out


def serialize(dep: Any, review: str, result: Path, tmp: Path, **kw: Any) -> Any:
    return serialize_review(state_dir=dep.state, review=review, result=result, out=tmp / "payload.json",
                            signer=load_signer(str(dep.key)), **kw)


def git_changed_lines(repo: Path, base: str, head: str) -> dict[tuple[str, str], set[int]]:
    """Independent of attest: (path, side) -> changed line numbers, from `git diff -U0 --no-renames`."""
    out = subprocess.run(["git", "-C", str(repo), "diff", "-U0", "--no-renames", base, head], capture_output=True, text=True,
                         check=True).stdout
    lines: dict[tuple[str, str], set[int]] = {}
    old = new = ""
    for line in out.splitlines():
        if line.startswith("--- "):
            old = line[6:] if line != "--- /dev/null" else ""
        elif line.startswith("+++ "):
            new = line[6:] if line != "+++ /dev/null" else ""
        elif m := re.match(r"@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@", line):
            ls, lc, rs, rc = int(m[1]), int(m[2] or 1), int(m[3]), int(m[4] or 1)
            lines.setdefault((old, "LEFT"), set()).update(range(ls, ls + lc))
            lines.setdefault((new, "RIGHT"), set()).update(range(rs, rs + rc))
    return lines


def fenced_findings(body: str) -> list[dict[str, Any]]:
    return [json.loads(m[2]) for m in re.finditer(r"(?m)^(`{3,})json\n(.*?)\n\1$", body, re.S)]


# -- the whole path --------------------------------------------------------------------------------------------


def test_serialize_places_every_finding_and_signs_the_record(dep: Any, skill: Any, tmp_path: Path) -> None:
    s = editing_pr(dep, skill, tmp_path)
    review = test_review_start.start(dep, s).review
    result = exec_for(dep, s, review, tmp_path)
    run = json.loads((dep.state / "results" / f"{review}.json").read_bytes())
    assert run["result"] == "sha256:" + hashlib.sha256(result.read_bytes()).hexdigest() and run["failure"] is None
    assert run["confinement"]["confined"] is True
    done = serialize(dep, review, result, tmp_path, record=tmp_path / "record.json")
    payload_bytes = (tmp_path / "payload.json").read_bytes()
    payload = json.loads(payload_bytes)
    assert done.status == "complete" and done.recheck.outcome.outcome == "proceed"
    assert payload["commit_id"] == s.c.head and payload["event"] == "REQUEST_CHANGES"
    # Inline exactly where git itself says a line changed on that side; everything else in the body.
    changed = git_changed_lines(s.c.path, s.c.base, s.c.head)
    inline = {(c["path"], c["side"], c["line"]) for c in payload["comments"]}
    assert inline == {("src.txt", "RIGHT", 1), ("src.txt", "LEFT", 1), ("notes.txt", "RIGHT", 3)}
    for path, side, line in inline:
        assert line in changed[(path, side)]
    by_id = {f["id"]: f for f in FINDINGS}
    assert [c["body"] for c in payload["comments"]] == ["[high, blocking] F1: the new line", "[medium, blocking] F2: the old line",
                                                        "[low] F7: no side\\: the head\\'s line"]
    # Lossless: every finding not inline is in the body as its exact JSON, in result order.
    in_body = fenced_findings(payload["body"])
    assert in_body == [by_id[i] for i in ("F3", "F4", "F5", "F6", "F8")]
    # Hostile Markdown cannot hide what follows it, nor close the fence of its own JSON.
    text = re.sub(r"(?m)^(`{3,})json\n.*?\n\1$", "", payload["body"], flags=re.S)  # Markdown outside the code fences
    assert "<!--" not in text and "<b>" not in text and "&lt;\\!\\-\\- and &lt;b&gt;this&lt;\\/b&gt; &amp;amp" in text, text
    assert "`````json" in payload["body"]
    # The record: signed, verifiable under TRUST, its subject the payload, every identity of the review.
    verified = verify_attestation_file(str(tmp_path / "record.json"), load_policy(dep.trust))
    st = verified.statement
    assert st["predicateType"] == REVIEW_RECORD_PREDICATE
    assert st["subject"] == [{"name": "review-payload", "digest": {"sha256": hashlib.sha256(payload_bytes).hexdigest()}}]
    p = st["predicate"]
    state = json.loads((dep.state / "reviews" / f"{review}.json").read_bytes())
    assert (p["status"], p["head"], p["merge_base"], p["review"]) == ("complete", s.c.head, s.c.base, review)
    assert p["images"] == {n: i["identity"] for n, i in state["images"].items()}
    assert p["projections"]["adapter"] == {"path": ADA, "sha256": "sha256:" + state["projections"]["adapter"]["sha256"]}
    assert p["result"] == {"sha256": run["result"]} and p["findings"] == {"total": 8, "blocking": 4, "inline": 3, "in_body": 5}
    assert (dep.state / "records" / f"{review}.json").read_bytes() == (tmp_path / "record.json").read_bytes()


def test_a_renamed_file_is_never_anchored_inline(dep: Any, skill: Any, tmp_path: Path) -> None:
    # The surface adds and deletes a path: a host's diff may show them as one renamed file, so neither anchors.
    s = renaming_pr(dep, skill, tmp_path)
    review = test_review_start.start(dep, s).review
    result = exec_for(dep, s, review, tmp_path)
    serialize(dep, review, result, tmp_path)
    payload = json.loads((tmp_path / "payload.json").read_bytes())
    assert payload["comments"] == [] and fenced_findings(payload["body"]) == FINDINGS


def test_a_moved_head_before_serialize_refreshes_and_writes_nothing(dep: Any, skill: Any, tmp_path: Path) -> None:
    s = renaming_pr(dep, skill, tmp_path)
    review = test_review_start.start(dep, s).review
    result = exec_for(dep, s, review, tmp_path)
    (s.c.path / "later.txt").write_text("later\n")
    head = commit(s.c.path, "later")
    test_bootstrap.identity_file(s.ident, Consumer(s.c.path, s.c.base, head))
    err = fails(lambda: serialize(dep, review, result, tmp_path))
    assert codes(err) == ["REVIEW_NOT_PROCEED", "REVIEW_HEAD_MOVED"]
    assert not (tmp_path / "payload.json").exists() and not (dep.state / "records" / f"{review}.json").exists()
    # The refreshed review has no analysis yet: the old result is never serialized for the new head.
    new = recheck_review(state_dir=dep.state, review=json.loads((dep.state / "rechecks" / f"{review}.json").read_bytes())
                         ["superseded_by"]).state.review
    err = fails(lambda: serialize(dep, new, result, tmp_path))
    assert codes(err) == ["REVIEW_RESULT_NOT_OF_REVIEW"]
    err = fails(lambda: serialize(dep, review, result, tmp_path))
    assert codes(err) == ["REVIEW_SUPERSEDED"]


def test_a_moved_base_before_serialize_restarts(dep: Any, skill: Any, tmp_path: Path) -> None:
    s = renaming_pr(dep, skill, tmp_path)
    review = test_review_start.start(dep, s).review
    result = exec_for(dep, s, review, tmp_path)
    git(s.c.path, "checkout", "-qB", "main2", s.c.base)
    git(s.c.path, "commit", "-q", "--allow-empty", "-m", "same tree")
    test_bootstrap.identity_file(s.ident, Consumer(s.c.path, git(s.c.path, "rev-parse", "HEAD"), s.c.head))
    err = fails(lambda: serialize(dep, review, result, tmp_path))
    assert codes(err) == ["REVIEW_NOT_PROCEED", "REVIEW_BASE_MOVED"] and not (tmp_path / "payload.json").exists()


def test_only_the_exact_result_of_this_reviews_run_serializes(dep: Any, skill: Any, tmp_path: Path) -> None:
    s = renaming_pr(dep, skill, tmp_path)
    review = test_review_start.start(dep, s).review
    # No run yet.
    other = tmp_path / "other.json"
    other.write_bytes(canonical_bytes(RESULT))
    assert codes(fails(lambda: serialize(dep, review, other, tmp_path))) == ["REVIEW_RESULT_NOT_OF_REVIEW"]
    result = exec_for(dep, s, review, tmp_path, {"complete": True, "limitations": [], "findings": []})
    # The result edited after the run: a blocking finding removed, say.
    result.write_bytes(canonical_bytes(RESULT))
    assert codes(fails(lambda: serialize(dep, review, result, tmp_path))) == ["REVIEW_RESULT_NOT_OF_REVIEW"]
    assert not (tmp_path / "payload.json").exists()


def test_exec_for_a_review_of_another_handoff_is_refused(dep: Any, skill: Any, tmp_path: Path) -> None:
    s = renaming_pr(dep, skill, tmp_path)
    review = test_review_start.start(dep, s).review
    (tmp_path / "b").mkdir()
    c2 = test_bootstrap.make_consumer(tmp_path / "b" / "consumer", dep.sha)
    (c2.path / "x.txt").write_text("another base\n")
    base2 = commit(c2.path, "x")
    c2 = Consumer(c2.path, base2, base2)
    other = Path(test_bootstrap.run(dep, skill, c2, tmp_path / "b").handoff)
    ran = tmp_path / "ran"
    err = fails(lambda: run_review(state_dir=dep.state, review=review, handoff=other, policy=load_policy(dep.trust),
                                   argv=["/bin/touch", str(ran)], out=tmp_path / "r.json"))
    assert codes(err) == ["REVIEW_RESULT_NOT_OF_REVIEW"] and not ran.exists()


def test_a_failed_run_serializes_as_failed_and_exits_1(dep: Any, skill: Any, tmp_path: Path) -> None:
    s = renaming_pr(dep, skill, tmp_path)
    review = test_review_start.start(dep, s).review
    err = fails(lambda: exec_for(dep, s, review, tmp_path, argv=[PY, "-I", "-c", "import sys; sys.exit(3)"]), AttestError)
    assert codes(err) == ["REVIEWER_FAILED"]
    run = json.loads((dep.state / "results" / f"{review}.json").read_bytes())
    assert run["result"] is None and run["failure"]["code"] == "REVIEWER_FAILED"
    cli = subprocess.run([PY, "-m", "attest", "review", "serialize", "--state-dir", str(dep.state), "--review", review,
                          "--result", str(tmp_path / "absent.json"), "-o", str(tmp_path / "payload.json"), "--key", str(dep.key),
                          "--json"], capture_output=True, text=True, check=False, cwd=ROOT)
    assert cli.returncode == 1, cli.stderr
    doc = json.loads(cli.stdout)
    assert doc["ok"] is False and doc["status"] == "failed" and doc["errors"][0]["code"] == "REVIEWER_FAILED"
    payload = json.loads((tmp_path / "payload.json").read_bytes())
    assert payload["event"] == "COMMENT" and "The review **failed**: REVIEWER\\_FAILED" in payload["body"]
    record = verify_attestation_file(doc["record"], load_policy(dep.trust)).statement["predicate"]
    assert record["status"] == "failed" and record["failure"]["code"] == "REVIEWER_FAILED" and record["result"] is None


def test_cli_exec_review_then_serialize(dep: Any, skill: Any, tmp_path: Path) -> None:
    s = renaming_pr(dep, skill, tmp_path)
    review = test_review_start.start(dep, s).review
    body = {"complete": False, "limitations": ["the stand-in analysed nothing"], "findings": []}
    base = [PY, "-m", "attest", "review"]
    ro = [a for p in HOST_PYTHON for a in ("--readonly", p)]
    cli = subprocess.run([*base, "exec", "--handoff", str(s.handoff), "--policy", str(dep.trust), "--state-dir", str(dep.state),
                          "-o", str(tmp_path / "result.json"), "--review", review, *ro, "--", *printing(body)],
                         capture_output=True, text=True, check=False, cwd=ROOT)
    assert cli.returncode == 0, cli.stderr
    cli = subprocess.run([*base, "serialize", "--state-dir", str(dep.state), "--review", review, "--result",
                          str(tmp_path / "result.json"), "-o", str(tmp_path / "payload.json"), "--key", str(dep.key)],
                         capture_output=True, text=True, check=False, cwd=ROOT)
    assert cli.returncode == 0, cli.stderr
    assert f"SERIALIZED review {review}: LIMITED for head {s.c.head}" in cli.stdout
    assert "Limitations:\n- the stand\\-in analysed nothing" in json.loads((tmp_path / "payload.json").read_bytes())["body"]


def test_a_state_naming_another_image_restarts_with_root_mismatch(dep: Any, skill: Any, tmp_path: Path) -> None:
    s = renaming_pr(dep, skill, tmp_path)
    review = test_review_start.start(dep, s).review
    doc = json.loads((dep.state / "reviews" / f"{review}.json").read_bytes())
    del doc["review"]
    doc["images"]["runtime"]["path"] = doc["images"]["runtime"]["path"] + "-elsewhere"
    forged = review_id(doc)
    (dep.state / "reviews" / f"{forged}.json").write_bytes(canonical_bytes({"review": forged, **doc}))
    got = recheck_review(state_dir=dep.state, review=forged)
    assert got.outcome.outcome == "restart" and got.outcome.reason == RecheckCode.REVIEW_ROOT_MISMATCH


# -- the pure pieces ---------------------------------------------------------------------------------------------


def _result(complete: bool, limitations: tuple[str, ...] = ()) -> ReviewResult:
    return ReviewResult(complete, limitations, ())


@pytest.mark.parametrize(("result", "status"), [
    (_result(True), "complete"),
    (_result(False, ("no network",)), "limited"),
    (_result(False), "partial"),
    (None, "failed"),
])
def test_review_status(result: ReviewResult | None, status: str) -> None:
    assert review_status(result) == status


SURFACE = {"paths": [
    {"path": "a.txt", "status": "modified", "old_mode": "100644", "new_mode": "100644", "old_oid": "1" * 40, "new_oid": "2" * 40,
     "content": "text", "hunks": [{"left": {"start": 3, "count": 2}, "right": {"start": 3, "count": 1}},
                                  {"left": {"start": 9, "count": 0}, "right": {"start": 9, "count": 2}}]},
    {"path": "gone.txt", "status": "deleted", "old_mode": "100644", "new_mode": None, "old_oid": "3" * 40, "new_oid": None,
     "content": "text", "hunks": [{"left": {"start": 1, "count": 4}, "right": {"start": 0, "count": 0}}]},
    {"path": "bin", "status": "modified", "old_mode": "100644", "new_mode": "100644", "old_oid": "4" * 40, "new_oid": "5" * 40,
     "content": "binary", "hunks": []},
]}
ANCHORS: list[tuple[dict[str, Any], tuple[str, str, int] | None]] = [
    ({"path": "a.txt", "line": 3, "side": "RIGHT"}, ("a.txt", "RIGHT", 3)),
    ({"path": "a.txt", "line": 4, "side": "LEFT"}, ("a.txt", "LEFT", 4)),
    ({"path": "a.txt", "line": 4, "side": "RIGHT"}, None),            # not a changed line on the head side
    ({"path": "a.txt", "line": 10}, ("a.txt", "RIGHT", 10)),          # no side: RIGHT
    ({"path": "a.txt", "line": 9, "side": "LEFT"}, None),             # the left side only gains lines there
    ({"path": "gone.txt", "line": 2, "side": "LEFT"}, ("gone.txt", "LEFT", 2)),
    ({"path": "gone.txt", "line": 2, "side": "RIGHT"}, None),
    ({"path": "gone.txt", "line": 2}, None),                          # a deleted file has no head lines
    ({"path": "bin", "line": 1}, None),                               # binary: no hunks, never inline
    ({"path": "other.txt", "line": 1}, None),                         # not in the changed surface
    ({"path": "a.txt"}, None),                                        # no line
    ({}, None),                                                       # no path
]


@pytest.mark.parametrize(("where", "want"), ANCHORS)
def test_anchor(where: dict[str, Any], want: tuple[str, str, int] | None) -> None:
    from attest.review.procedure._serialize import _changed_lines

    finding = parse_result(json.dumps({"complete": True, "limitations": [], "findings": [
        {"id": "X", "severity": "low", "blocking": False, "message": "m", **where}]}).encode()).findings[0]
    assert anchor(finding, _changed_lines(SURFACE)) == want


def _adapter() -> bytes:
    return render_github_review_json_adapter_v1("review", SEM, "a" * 64)


@pytest.mark.parametrize("change", [
    lambda b: b.replace(b"REQUEST_CHANGES", b"APPROVE"),
    lambda b: b.replace(b'"review"', b'"other"'),
    lambda b: b + b" ",
    lambda b: render_github_review_json_adapter_v1("review", SEM, "b" * 64),
    lambda b: b"{}",
])
def test_only_the_exact_bound_adapter_is_used(change: Any) -> None:
    assert check_adapter(_adapter(), context="review", semantic_path=SEM, semantic_sha256="a" * 64)["events"]["never"] == ["APPROVE"]
    with pytest.raises(VerificationError) as ei:
        check_adapter(change(_adapter()), context="review", semantic_path=SEM, semantic_sha256="a" * 64)
    assert codes(ei.value) == ["REVIEW_ADAPTER_UNSUPPORTED"]


FACTS = ReviewFacts("0" * 32, "c" * 40, "a" * 40, "a" * 40, "complete")


def test_nothing_is_dropped_or_truncated_to_fit() -> None:
    adapter = json.loads(_adapter())
    big = parse_result(canonical_bytes({"complete": True, "limitations": [], "findings": [
        {"id": f"F{i}", "severity": "low", "blocking": False, "message": "x" * 1000} for i in range(70)]}))
    with pytest.raises(VerificationError) as ei:
        render_github_review(big, FACTS, SURFACE, adapter)
    assert codes(ei.value) == [SerializeCode.REVIEW_PAYLOAD_TOO_LARGE]
    inline = parse_result(canonical_bytes({"complete": True, "limitations": [], "findings": [
        {"id": "F", "severity": "low", "blocking": False, "message": "x" * 70000, "path": "a.txt", "line": 3}]}))
    with pytest.raises(VerificationError) as ei:
        render_github_review(inline, FACTS, SURFACE, adapter)
    assert codes(ei.value) == [SerializeCode.REVIEW_PAYLOAD_TOO_LARGE]


def test_no_blocking_finding_comments_and_never_approves() -> None:
    adapter = json.loads(_adapter())
    clean = parse_result(canonical_bytes({"complete": True, "limitations": [], "findings": []}))
    assert render_github_review(clean, FACTS, SURFACE, adapter)["event"] == "COMMENT"


def test_decide_root() -> None:
    class Img:
        def __init__(self, identity: str, path: str, backend: str) -> None:
            self.identity, self.path, self.backend = identity, path, backend

    want = {n: {"identity": f"sha256:{n}", "path": f"/s/{n}", "backend": "immutable"} for n in ("bootstrap", "runtime", "base", "procedure")}
    same = {n: Img(**w) for n, w in want.items()}
    assert decide_root(want, same) == []
    moved = {**same, "base": Img("sha256:base", "/s/other", "immutable")}
    assert [f.code for f in decide_root(want, moved)] == ["REVIEW_ROOT_MISMATCH"]
    gone = {k: v for k, v in same.items() if k != "runtime"}
    assert [f.code for f in decide_root(want, gone)] == ["REVIEW_ROOT_MISMATCH"]
