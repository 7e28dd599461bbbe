"""`attest review recheck`: proceed / refresh / restart / fail over real bootstraps and real git histories.

Started reviews from test_review_start's set-up (real handoffs, frozen images, SHA-1 and SHA-256
repositories); the host's answer changed by rewriting the identity file; a table for the pure
decision (:func:`decide_recheck`), including its precedence fail > restart > refresh > proceed.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import test_bootstrap
import test_review_start
from support import deployment
from support.gitrepo import git

from attest._json import canonical_bytes
from attest.errors import AttestError, InputError
from attest.review.bootstrap import GitHubIdentity
from attest.review.procedure import (
    RecheckCode,
    RecheckFacts,
    ReviewState,
    decide_recheck,
    host_from_state,
    recheck_review,
    review_id,
)

Consumer = test_bootstrap.Consumer
Deployment = deployment.Deployment
Started = test_review_start.Started
identity_file = test_bootstrap.identity_file
codes = test_review_start.codes
fails = test_review_start.fails


def started_review(dep: Any, skill: Any, tmp: Path, *, fmt: str = "sha1") -> tuple[Any, str]:
    s = test_review_start.bootstrapped(dep, skill, tmp, fmt=fmt)
    return s, test_review_start.start(dep, s).review


def recheck(dep: Any, review: str, **kw: Any) -> Any:
    return recheck_review(state_dir=dep.state, review=review, **kw)


def answer(s: Any, *, base: str | None = None, head: str | None = None, **override: Any) -> None:
    """The host's answer changes: the identity file the state records is rewritten."""
    identity_file(s.ident, Consumer(s.c.path, base or s.c.base, head or s.c.head), **override)


def commit(path: Path, name: str, text: str) -> str:
    (path / name).write_text(text)
    git(path, "add", name)
    git(path, "commit", "-qm", name)
    return git(path, "rev-parse", "HEAD")


def state_doc(dep: Any, review: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((dep.state / "reviews" / f"{review}.json").read_bytes())
    return doc


# -- proceed and refresh ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["sha1", "sha256"])
def test_nothing_moved_proceeds_then_a_moved_head_refreshes(dep: Any, skill: Any, tmp_path: Path, fmt: str) -> None:
    s, review = started_review(dep, skill, tmp_path, fmt=fmt)
    before = (dep.state / "reviews" / f"{review}.json").read_bytes()
    got = recheck(dep, review)
    assert (got.outcome.outcome, got.outcome.reason) == ("proceed", RecheckCode.REVIEW_UNCHANGED)
    assert got.current_review == review and got.record is None and not (dep.state / "rechecks" / f"{review}.json").exists()
    assert (dep.state / "reviews" / f"{review}.json").read_bytes() == before
    # A new commit on the pull request's branch: the head moved, the merge base did not.
    new_head = commit(s.c.path, "later.txt", "later\n")
    answer(s, head=new_head)
    got = recheck(dep, review)
    assert (got.outcome.outcome, got.outcome.reason) == ("refresh", RecheckCode.REVIEW_HEAD_MOVED)
    assert [f.code for f in got.outcome.findings] == ["REVIEW_HEAD_MOVED"]
    new = state_doc(dep, got.current_review)
    assert new.pop("review") == got.current_review == review_id(new) != review
    assert new["head"] == new_head and new["merge_base"] == s.c.base and new["refresh"] == {"previous": review, "generation": 1}
    assert {p["path"] for p in new["surface"]["paths"]} == {"src.txt", "new.txt", "later.txt"}
    assert new["base"]["object_format"] == fmt
    # The refreshed surface is exactly the one a start at the new head computes, from objects.
    assert new["surface"] == test_review_start.start(dep, s).surface.to_json()
    old = state_doc(dep, review)
    assert {k: v for k, v in new.items() if k not in ("head", "surface", "refresh", "change", "change_content")} == \
        {k: v for k, v in old.items() if k not in ("review", "head", "surface", "change", "change_content")}
    # A change image of its own: the new head, the new id.
    assert new["change"]["identity"] != old["change"]["identity"]
    assert json.loads((Path(new["change"]["path"]) / "review.json").read_bytes())["review"] == got.current_review
    # The old review is superseded: every analysis of it is stale.
    err = fails(lambda: recheck(dep, review))
    assert codes(err) == [RecheckCode.REVIEW_SUPERSEDED] and got.current_review in err.detail
    again = recheck(dep, got.current_review)
    assert again.outcome.outcome == "proceed" and again.state.generation == 1


def test_a_force_pushed_head_moves_the_merge_base(dep: Any, skill: Any, tmp_path: Path) -> None:
    c = test_bootstrap.make_consumer(tmp_path / "consumer", dep.sha)
    first = c.base
    base = commit(c.path, "main.txt", "main moved on\n")
    git(c.path, "checkout", "-qb", "pr")
    head = commit(c.path, "pr.txt", "pull request\n")
    c = Consumer(c.path, base, head)
    s = Started(c, Path(test_bootstrap.run(dep, skill, c, tmp_path).handoff), identity_file(tmp_path / "identity.json", c))
    review = test_review_start.start(dep, s).review
    # The head is force-pushed: rebuilt on the base's parent, so the merge base is that parent.
    git(c.path, "checkout", "-qB", "pr", first)
    pushed = commit(c.path, "pr.txt", "pull request, again\n")
    answer(s, head=pushed)
    got = recheck(dep, review)
    assert got.outcome.outcome == "refresh" and got.outcome.reason == RecheckCode.REVIEW_HEAD_MOVED
    assert [f.code for f in got.outcome.findings] == ["REVIEW_HEAD_MOVED", "REVIEW_MERGE_BASE_MOVED"]
    assert state_doc(dep, got.current_review)["merge_base"] == first


# -- restart and fail ---------------------------------------------------------------------------------------------


def test_a_moved_base_restarts_and_discards_the_review(dep: Any, skill: Any, tmp_path: Path) -> None:
    s, review = started_review(dep, skill, tmp_path)
    # The base moves to a commit of the very same tree: the procedure bytes a new bootstrap would
    # reproduce are identical, and still nothing of the old root is reused.
    git(s.c.path, "checkout", "-qB", "main2", s.c.base)
    git(s.c.path, "commit", "-q", "--allow-empty", "-m", "same tree")
    answer(s, base=git(s.c.path, "rev-parse", "HEAD"))
    got = recheck(dep, review)
    assert (got.outcome.outcome, got.outcome.reason, got.current_review) == ("restart", "REVIEW_BASE_MOVED", None)
    assert [f.code for f in got.outcome.findings] == ["REVIEW_BASE_MOVED"]
    record = json.loads(Path(got.record).read_bytes())
    assert record == {"review": review, "outcome": "restart", "reason": "REVIEW_BASE_MOVED", "superseded_by": None,
                      "state": got.state.digest}
    # Discarded for good: even with the old base answered again, the old root's results are never reused.
    answer(s)
    assert codes(fails(lambda: recheck(dep, review))) == [RecheckCode.REVIEW_DISCARDED]


@pytest.mark.parametrize(("override", "code"), [
    ({"pull_request": {"id": 99001, "number": 8}}, "REVIEW_PULL_REQUEST_CHANGED"),
    ({"pull_request": {"id": 99002, "number": 7}}, "REVIEW_PULL_REQUEST_CHANGED"),
    ({"repository": {"id": 4343, "full_name": "acme/widgets"}}, "REVIEW_REPOSITORY_CHANGED"),
    ({"repository": {"id": 4242, "full_name": "acme/gadgets"}}, "REVIEW_REPOSITORY_CHANGED"),
])
def test_a_changed_pull_request_or_repository_fails(dep: Any, skill: Any, tmp_path: Path, override: dict[str, Any],
                                                    code: str) -> None:
    s, review = started_review(dep, skill, tmp_path)
    answer(s, **override)
    got = recheck(dep, review)
    assert (got.outcome.outcome, got.outcome.reason) == ("fail", code) and not got.outcome.ok
    assert codes(fails(lambda: recheck(dep, review))) == [RecheckCode.REVIEW_FAILED]


def test_fail_outranks_restart_and_refresh_end_to_end(dep: Any, skill: Any, tmp_path: Path) -> None:
    s, review = started_review(dep, skill, tmp_path)
    head = commit(s.c.path, "later.txt", "later\n")
    git(s.c.path, "checkout", "-qB", "main2", s.c.base)
    answer(s, base=commit(s.c.path, "other.txt", "moved\n"), head=head, pull_request={"id": 99001, "number": 8})
    got = recheck(dep, review)
    assert (got.outcome.outcome, got.outcome.reason) == ("fail", "REVIEW_PULL_REQUEST_CHANGED")
    assert [f.code for f in got.outcome.findings] == ["REVIEW_PULL_REQUEST_CHANGED", "REVIEW_BASE_MOVED",
                                                 "REVIEW_BASE_TREE_MISMATCH", "REVIEW_HEAD_MOVED"]


def test_a_head_rewritten_to_an_unrelated_orphan_fails(dep: Any, skill: Any, tmp_path: Path) -> None:
    s, review = started_review(dep, skill, tmp_path)
    git(s.c.path, "checkout", "-q", "--orphan", "unrelated")
    git(s.c.path, "rm", "-rqf", ".")
    answer(s, head=commit(s.c.path, "x.txt", "another history\n"))
    got = recheck(dep, review)
    assert (got.outcome.outcome, got.outcome.reason) == ("fail", "NO_MERGE_BASE")
    assert [f.code for f in got.outcome.findings] == ["NO_MERGE_BASE", "REVIEW_HEAD_MOVED"]
    assert not (dep.state / "reviews").exists() or all(
        json.loads(p.read_bytes())["head"] != got.now.head for p in (dep.state / "reviews").iterdir())


def test_a_head_moved_into_a_criss_cross_history_fails(dep: Any, skill: Any, tmp_path: Path) -> None:
    c = test_bootstrap.make_consumer(tmp_path / "consumer", dep.sha)
    root = c.base
    git(c.path, "checkout", "-qb", "a")
    a1 = commit(c.path, "a.txt", "a\n")
    git(c.path, "checkout", "-qb", "b", root)
    b1 = commit(c.path, "b.txt", "b\n")
    git(c.path, "merge", "-q", "--no-edit", a1)
    b2 = git(c.path, "rev-parse", "HEAD")
    git(c.path, "checkout", "-q", "a")
    git(c.path, "merge", "-q", "--no-edit", b1)
    a2 = git(c.path, "rev-parse", "HEAD")
    git(c.path, "checkout", "-qb", "pr")
    c = Consumer(c.path, a2, commit(c.path, "pr.txt", "pr\n"))
    s = Started(c, Path(test_bootstrap.run(dep, skill, c, tmp_path).handoff), identity_file(tmp_path / "identity.json", c))
    review = test_review_start.start(dep, s).review
    answer(s, head=b2)
    got = recheck(dep, review)
    assert (got.outcome.outcome, got.outcome.reason) == ("fail", "MULTIPLE_MERGE_BASES")
    assert a1 in got.outcome.findings[0].detail and b1 in got.outcome.findings[0].detail


# -- the state ----------------------------------------------------------------------------------------------------


def test_a_tampered_or_malformed_state_fails_with_its_code(dep: Any, skill: Any, tmp_path: Path) -> None:
    s, review = started_review(dep, skill, tmp_path)
    path = dep.state / "reviews" / f"{review}.json"
    good = path.read_bytes()
    doc = json.loads(good)
    try:
        # The head edited: the content no longer hashes to its id.
        path.write_bytes(canonical_bytes({**doc, "head": s.c.base}))
        assert codes(fails(lambda: recheck(dep, review))) == [RecheckCode.REVIEW_STATE_TAMPERED]
        # Not canonical.
        path.write_bytes(good + b"\n")
        assert codes(fails(lambda: recheck(dep, review))) == [RecheckCode.REVIEW_STATE_MALFORMED]
        path.write_bytes(b"{\"review\": 1,")
        assert codes(fails(lambda: recheck(dep, review))) == [RecheckCode.REVIEW_STATE_MALFORMED]
        # A consistent id over a state without its surface: the shape is still judged.
        rest = {k: v for k, v in doc.items() if k not in ("review", "surface")}
        path.write_bytes(canonical_bytes({"review": review_id(rest), **rest}))
        assert codes(fails(lambda: recheck(dep, review))) == [RecheckCode.REVIEW_STATE_TAMPERED]
        other = dep.state / "reviews" / f"{review_id(rest)}.json"
        other.write_bytes(canonical_bytes({"review": review_id(rest), **rest}))
        assert codes(fails(lambda: recheck(dep, review_id(rest)))) == [RecheckCode.REVIEW_STATE_MALFORMED]
        other.unlink()
    finally:
        path.write_bytes(good)
    assert codes(fails(lambda: recheck(dep, review.upper()), InputError)) == [RecheckCode.REVIEW_ID_INVALID]
    assert codes(fails(lambda: recheck(dep, "0" * 32), InputError)) == [RecheckCode.REVIEW_STATE_MISSING]
    # A recheck record that is not of this state is refused, not obeyed.
    (dep.state / "rechecks").mkdir(mode=0o700, exist_ok=True)
    record = dep.state / "rechecks" / f"{review}.json"
    record.write_bytes(canonical_bytes({"review": review, "state": "sha256:" + "0" * 64, "outcome": "refresh", "reason": "X",
                                        "superseded_by": None}))
    try:
        assert codes(fails(lambda: recheck(dep, review))) == [RecheckCode.REVIEW_STATE_MALFORMED]
    finally:
        record.unlink()
    assert recheck(dep, review).outcome.outcome == "proceed"


def test_the_host_is_made_again_from_the_state() -> None:
    host = host_from_state({"adapter": "github", "repository": "acme/widgets", "pr": 7, "api_url": "https://api.github.com"},
                           token_env="MY_TOKEN", environ={"MY_TOKEN": "s3cret"})
    assert isinstance(host, GitHubIdentity) and (host.full_name, host.number, host.token) == ("acme/widgets", 7, "s3cret")
    for bad, token_env in (({"adapter": "ApiHost"}, None), ({"adapter": "identity", "path": "/x.json"}, "MY_TOKEN")):
        with pytest.raises(InputError) as ei:
            host_from_state(bad, token_env=token_env, environ={"MY_TOKEN": "s3cret"})
        assert ei.value.code == "BAD_HOST_OPTIONS"


# -- the CLI ------------------------------------------------------------------------------------------------------


def test_cli_recheck(dep: Any, skill: Any, tmp_path: Path) -> None:
    s, review = started_review(dep, skill, tmp_path)
    args = ["review", "recheck", "--state-dir", str(dep.state), "--review", review]
    code, out = test_review_start._cli([*args, "--json"])
    doc = json.loads(out)
    assert code == 0 and (doc["ok"], doc["outcome"], doc["reason"]) == (True, "proceed", "REVIEW_UNCHANGED")
    assert doc["current"] == {"review": review, "state": doc["state"], "generation": 0}
    code, out = test_review_start._cli(args)
    assert code == 0 and f"PROCEED review {review}: REVIEW_UNCHANGED" in out
    code, out = test_review_start._cli([*args, "--token-env", "GITHUB_TOKEN", "--json"])
    assert code == 2 and [e["code"] for e in json.loads(out)["errors"]] == ["BAD_HOST_OPTIONS"]
    answer(s, head=commit(s.c.path, "later.txt", "later\n"))
    code, out = test_review_start._cli([*args, "--json"])
    doc = json.loads(out)
    assert code == 0 and (doc["outcome"], doc["reason"], doc["changed_paths"]) == ("refresh", "REVIEW_HEAD_MOVED", 3)
    fresh = doc["current"]["review"]
    answer(s, head=commit(s.c.path, "later2.txt", "later\n"), pull_request={"id": 99001, "number": 8})
    code, out = test_review_start._cli([*args[:-1], fresh, "--json"])
    doc = json.loads(out)
    assert code == 1 and (doc["ok"], doc["outcome"], doc["reason"]) == (False, "fail", "REVIEW_PULL_REQUEST_CHANGED")
    assert [e["code"] for e in doc["errors"]] == ["REVIEW_PULL_REQUEST_CHANGED", "REVIEW_HEAD_MOVED"]
    code, out = test_review_start._cli([*args[:-1], fresh, "--json"])
    assert code == 1 and [e["code"] for e in json.loads(out)["errors"]] == ["REVIEW_FAILED"]


# -- decide_recheck, the table ------------------------------------------------------------------------------------

A, B, C, D, E, F = ("a" * 40, "b" * 40, "c" * 40, "d" * 40, "e" * 40, "f" * 40)
STATE = ReviewState("0" * 32, "sha256:" + "0" * 64, {}, 4242, "acme/widgets", 99001, 7, A, B, "sha1", C, A, "/repo", {}, 0)
NOW = RecheckFacts(4242, "acme/widgets", 99001, 7, A, B, C, (A,))
DECISIONS: list[tuple[str, dict[str, Any], str, list[str]]] = [
    ("nothing moved", {}, "proceed", ["REVIEW_UNCHANGED"]),
    ("head moved", {"head": D}, "refresh", ["REVIEW_HEAD_MOVED"]),
    ("merge base moved", {"merge_bases": (E,)}, "refresh", ["REVIEW_MERGE_BASE_MOVED"]),
    ("head and merge base moved", {"head": D, "merge_bases": (E,)}, "refresh", ["REVIEW_HEAD_MOVED", "REVIEW_MERGE_BASE_MOVED"]),
    ("the merge base set is given twice", {"merge_bases": (A, A)}, "proceed", ["REVIEW_UNCHANGED"]),
    ("base commit moved", {"base_commit": D}, "restart", ["REVIEW_BASE_MOVED"]),
    ("base tree moved", {"base_tree": D}, "restart", ["REVIEW_BASE_TREE_MISMATCH"]),
    ("base moved and head moved: restart", {"base_commit": D, "base_tree": E, "head": F}, "restart",
     ["REVIEW_BASE_MOVED", "REVIEW_BASE_TREE_MISMATCH", "REVIEW_HEAD_MOVED"]),
    ("repository id", {"repository_id": 4343}, "fail", ["REVIEW_REPOSITORY_CHANGED"]),
    ("repository renamed", {"full_name": "acme/gadgets"}, "fail", ["REVIEW_REPOSITORY_CHANGED"]),
    ("pull request renumbered", {"number": 8}, "fail", ["REVIEW_PULL_REQUEST_CHANGED"]),
    ("pull request replaced", {"pull_request_id": 1}, "fail", ["REVIEW_PULL_REQUEST_CHANGED"]),
    ("unrelated histories", {"merge_bases": ()}, "fail", ["NO_MERGE_BASE"]),
    ("criss-cross", {"merge_bases": (D, E)}, "fail", ["MULTIPLE_MERGE_BASES"]),
    ("everything: fail outranks all", {"repository_id": 1, "number": 8, "merge_bases": (), "base_commit": D, "head": F}, "fail",
     ["REVIEW_REPOSITORY_CHANGED", "REVIEW_PULL_REQUEST_CHANGED", "NO_MERGE_BASE", "REVIEW_BASE_MOVED", "REVIEW_HEAD_MOVED"]),
    ("criss-cross after a base move: fail", {"base_commit": D, "merge_bases": (D, E)}, "fail",
     ["MULTIPLE_MERGE_BASES", "REVIEW_BASE_MOVED"]),
    ("base moved, merge base moved: restart", {"base_commit": D, "merge_bases": (D,)}, "restart",
     ["REVIEW_BASE_MOVED", "REVIEW_MERGE_BASE_MOVED"]),
]


@pytest.mark.parametrize(("name", "change", "outcome", "want"), DECISIONS, ids=[d[0] for d in DECISIONS])
def test_decide_recheck(name: str, change: dict[str, Any], outcome: str, want: list[str]) -> None:
    got = decide_recheck(STATE, replace(NOW, **change))
    assert got.outcome == outcome and [f.code for f in got.findings] == want
    assert got.reason == want[0] and got.ok == (outcome in ("proceed", "refresh"))


def test_the_decision_is_pure(tmp_path: Path) -> None:
    assert decide_recheck(STATE, NOW) == decide_recheck(STATE, NOW)
    assert isinstance(fails(lambda: recheck_review(state_dir=tmp_path, review="x"), AttestError), InputError)
