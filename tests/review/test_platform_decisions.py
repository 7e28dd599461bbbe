"""The GitHub adapter's decisions, pure and table-driven: which posted review is a record's, what the
host's facts add to the merge gate, the status a decision posts, and whether a merge commit is the
reviewed head merged into the base."""

from __future__ import annotations

import pytest

from attest.errors import Finding, VerificationError
from attest.review.bootstrap import HostIdentity
from attest.review.merge import MergeGateCode
from attest.review.platform import PlatformCode as C
from attest.review.platform import decide_existing, decide_gate_facts, decide_merge_commit, decide_status, record_marker
from attest.review.platform._api import GitCommit, PostedReview, PullRequestState, ReviewThread
from attest.review.platform._gate import STATUS_DESCRIPTION_LIMIT, GateFacts
from attest.review.platform._publish import Expected

HEAD, BASE, OTHER = "a" * 40, "b" * 40, "c" * 40
DIGEST = "sha256:" + "d" * 64
MARKER = record_marker(DIGEST)
BODY = "**attest review: complete**\n" + MARKER + "\n"
EXPECTED = Expected(HEAD, "COMMENTED", BODY, MARKER)


def review(id: int = 1, *, login: str | None = "attest-review[bot]", commit: str | None = HEAD, state: str = "COMMENTED",
           body: str = BODY) -> PostedReview:
    return PostedReview(id, login, commit, state, body)


@pytest.mark.parametrize(("reviews", "app_login", "want"), [
    ((), None, None),
    ((review(body="no marker"),), None, None),
    ((review(),), None, 1),
    ((review(body="x"), review(2)), None, 2),
    ((review(login="mallory"),), "attest-review[bot]", None),  # another author's copy of the marker is not ours
    ((review(login="mallory", body=MARKER), review(2)), "attest-review[bot]", 2),
])
def test_existing_review_found_by_its_marker(reviews, app_login, want) -> None:
    got = decide_existing(reviews, EXPECTED, app_login=app_login)
    assert (got.id if got is not None else None) == want


@pytest.mark.parametrize(("reviews", "code"), [
    ((review(), review(2)), C.PUBLISH_DUPLICATE),
    ((review(commit=OTHER),), C.PUBLISH_EXISTING_MISMATCH),
    ((review(commit=None),), C.PUBLISH_EXISTING_MISMATCH),
    ((review(state="CHANGES_REQUESTED"),), C.PUBLISH_EXISTING_MISMATCH),
    ((review(body=BODY.replace("complete", "COMPLETE")),), C.PUBLISH_EXISTING_MISMATCH),  # edited
    ((review(body=BODY + "appended"),), C.PUBLISH_EXISTING_MISMATCH),
])
def test_existing_review_that_is_not_the_records_is_refused(reviews, code) -> None:
    with pytest.raises(VerificationError) as e:
        decide_existing(reviews, EXPECTED, app_login=None)
    assert e.value.code == code


def test_marker_names_a_record_digest_only() -> None:
    assert record_marker(DIGEST) == f"<!-- attest-review-record: {DIGEST} -->"
    with pytest.raises(ValueError):
        record_marker("sha256:-->")


NOW = HostIdentity(1, "octo/widgets", 7, 42, BASE, HEAD)


def pull(*, head: str = HEAD, base: str = BASE, state: str = "open", merged: bool = False, mergeable: bool | None = True,
         mergeable_state: str | None = "clean") -> PullRequestState:
    return PullRequestState(7, 42, state, merged, 1, "octo/widgets", "octo/widgets", "main", base, head, mergeable, mergeable_state,
                            "e" * 40)


def thread(resolved: bool, outdated: bool = False) -> ReviewThread:
    return ReviewThread("PRRT_1", resolved, outdated, "src/app.py", 6, "octocat", None)


@pytest.mark.parametrize(("first", "threads", "final", "codes"), [
    (pull(), (), pull(), []),
    (pull(), (thread(True),), pull(), []),
    (pull(), (thread(False),), pull(), [C.MERGE_UNRESOLVED_THREADS]),
    (pull(), (thread(True), thread(False, outdated=True)), pull(), [C.MERGE_UNRESOLVED_THREADS]),  # outdated still unresolved
    (pull(mergeable=None, mergeable_state="unknown"), (), pull(), [C.MERGE_MERGEABILITY_UNKNOWN]),
    (pull(mergeable=False, mergeable_state="dirty"), (), pull(), [C.MERGE_NOT_MERGEABLE]),
    (pull(state="closed"), (), pull(), [C.MERGE_NOT_MERGEABLE]),
    (pull(state="closed", merged=True), (), pull(), [C.MERGE_NOT_MERGEABLE]),
    (pull(), (), pull(head=OTHER), [C.MERGE_HEAD_MOVED]),
    (pull(), (), pull(base=OTHER), [C.MERGE_HEAD_MOVED]),
    (pull(head=OTHER), (), pull(head=OTHER), [C.MERGE_HEAD_MOVED, C.MERGE_HEAD_MOVED]),
    (pull(mergeable=False), (thread(False),), pull(head=OTHER), [C.MERGE_UNRESOLVED_THREADS, C.MERGE_NOT_MERGEABLE, C.MERGE_HEAD_MOVED]),
])
def test_host_facts_become_gate_findings(first, threads, final, codes) -> None:
    assert [f.code for f in decide_gate_facts(NOW, GateFacts(first, threads, final))] == codes


def f(code: str, detail: str = "why") -> Finding:
    return Finding(code, None, detail)


@pytest.mark.parametrize(("authorized", "findings", "state", "starts"), [
    (True, [f(MergeGateCode.MERGE_AUTHORIZED, "a complete review")], "success", "a complete review"),
    (False, [f(MergeGateCode.MERGE_CI_MISSING)], "pending", "MERGE_CI_MISSING: why"),
    (False, [f(MergeGateCode.MERGE_ANALYSIS_UNFINISHED), f(C.MERGE_MERGEABILITY_UNKNOWN)], "pending", "MERGE_ANALYSIS_UNFINISHED"),
    (False, [f(MergeGateCode.MERGE_CI_MISSING), f(MergeGateCode.MERGE_BLOCKING_FINDINGS)], "failure", "MERGE_BLOCKING_FINDINGS"),
    (False, [f(C.MERGE_UNRESOLVED_THREADS)], "failure", "MERGE_UNRESOLVED_THREADS"),
    (False, [f(MergeGateCode.MERGE_REVIEW_STALE_HEAD, "x" * 500)], "failure", "MERGE_REVIEW_STALE_HEAD"),
    (False, [], "failure", "not authorized"),
])
def test_status_of_a_decision(authorized, findings, state, starts) -> None:
    got_state, description = decide_status(authorized, findings)
    assert got_state == state
    assert description.startswith(starts)
    assert len(description) <= STATUS_DESCRIPTION_LIMIT and "\n" not in description


TREE = "f" * 40


@pytest.mark.parametrize(("method", "commit", "wrong"), [
    ("merge", GitCommit("1" * 40, TREE, (BASE, HEAD)), 0),
    ("squash", GitCommit("1" * 40, TREE, (BASE,)), 0),
    ("merge", GitCommit("1" * 40, TREE, (HEAD, BASE)), 1),          # parents swapped: the base is not first
    ("merge", GitCommit("1" * 40, TREE, (OTHER, HEAD)), 1),         # merged into another base
    ("merge", GitCommit("1" * 40, TREE, (BASE, OTHER)), 1),         # another head
    ("squash", GitCommit("1" * 40, TREE, (BASE, HEAD)), 1),         # a squash with two parents
    ("squash", GitCommit("1" * 40, "0" * 40, (BASE,)), 1),          # another tree
    ("merge", GitCommit("1" * 40, "0" * 40, (OTHER,)), 2),
])
def test_merge_commit_is_the_reviewed_head_merged_into_the_base(method, commit, wrong) -> None:
    assert len(decide_merge_commit(method, commit, base=BASE, head=HEAD, tree=TREE)) == wrong
