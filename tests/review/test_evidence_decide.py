"""The pure trust decision, table-driven: one row per way evidence can fail, plus properties.

No I/O here: evidence is built from the parsed types directly.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from attest.errors import InputError
from attest.review.evidence import (
    DEFAULT_ENVIRONMENT,
    DEFAULT_JOB,
    DEFAULT_WORKFLOW,
    AbsentEnvironment,
    Environment,
    Evidence,
    EvidenceCode,
    IssueComment,
    Job,
    PullRequest,
    ReadFailure,
    Review,
    ReviewEdit,
    Run,
    Trust,
    TrustConfig,
    decide,
    latest_run,
    parse_markers,
)
from attest.review.evidence._model import PullRef

REPO, PR, APP = "octo/widgets", 42, "opencode-review[bot]"
HEAD = "3f786850e387550fdab836ed7e6dc881de23001b"
OTHER = "89e6c98d92887913cadf06b2adb97f26cde4849b"
BASE = "d670460b4b4aece5915caf5c68d12f560a9fe3e4"
RETARGETED = "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"
RID = 5000
CFG = TrustConfig(REPO, PR, APP, DEFAULT_WORKFLOW, DEFAULT_JOB)
# The opt-in weaker binding: a run's display title (run-name) binds it too.
BY_NAME = TrustConfig(REPO, PR, APP, DEFAULT_WORKFLOW, DEFAULT_JOB, bind_by_run_name=True)
CLEAN = "<!-- opencode-review: clean -->"
DIAG = "<!-- opencode-review: diagnostic -->"
FINDINGS = "<!-- opencode-review: findings count=2 -->"


def body(*lines: str, run_id: int = RID, attempt: int = 1, base: str | None = BASE) -> str:
    base_line = [] if base is None else [f"<!-- opencode-review: base sha={base} -->"]
    return "\n".join(["summary", "", *lines, f"<!-- opencode-review: workflow-run id={run_id} attempt={attempt} -->", *base_line, ""])


def head_line(sha: str) -> str:
    return f"<!-- opencode-review: head sha={sha} -->"


def cbody(*lines: str, head: str | None = HEAD) -> str:
    """A wrapper body as an issue comment: its markers, then the head marker (``head=None``: none)."""
    return body(*lines, *([] if head is None else [head_line(head)]))


def cm(text: str, *, cid: int = 900, login: str | None = APP) -> IssueComment:
    return IssueComment(cid, login, text)


def pr(head: str = HEAD, head_repo: str | None = REPO, number: int = PR, base: str = REPO, base_sha: str = BASE) -> PullRequest:
    return PullRequest(number, head, head_repo, base, base_sha)


def rv(text: str | None = None, *, rid: int = 10, login: str | None = APP, state: str = "COMMENTED", commit: str | None = HEAD) -> Review:
    return Review(rid, login, state, commit, body(CLEAN) if text is None else text, f"PRR_{rid}")


def ed(rid: int = 10, *, at: str | None = None, editor: str | None = None, created: bool = False) -> ReviewEdit:
    return ReviewEdit(rid, f"PRR_{rid}", at, editor, created)


UNEDITED = tuple(ed(i) for i in range(1, 21))
EDITED_AT = "2026-07-24T09:00:00Z"


def rn(rid: int = RID, attempt: int | None = 1, *, number: int = 7, status: str | None = "completed", conclusion: str | None = "success",
       event: str = "pull_request_target", path: str = DEFAULT_WORKFLOW, title: str | None = None,
       refs: tuple[PullRef, ...] = (PullRef(PR, HEAD),)) -> Run:
    """A run titled by the run-name and, by default, bound by a ``pull_requests`` entry for PR and HEAD."""
    return Run(rid, f"OpenCode review PR #{PR} head {HEAD}" if title is None else title, event, path, number, attempt, status, conclusion, refs)


def jb(name: str = DEFAULT_JOB, *, jid: int = 1, run_id: int = RID, attempt: int | None = 1, status: str | None = "completed", conclusion: str | None = "success") -> Job:
    return Job(jid, name, run_id, attempt, status, conclusion)


ENV = Environment(DEFAULT_ENVIRONMENT, "protected_branches")
# The trusted case, with comments the decision ignores: a person's, the App's no-findings
# comment for this head and its diagnostic comment for an older head.
GOOD = Evidence(pull_request=pr(), issue_comments=(cm("thanks", cid=1, login="alice"), cm(cbody(CLEAN), cid=2), cm(cbody(DIAG, head=OTHER), cid=3)),
                reviews=(rv(),), review_edits=UNEDITED, runs=(rn(),), jobs=(jb(), jb("other", jid=2, conclusion="skipped")),
                environment=ENV, final_pull_request=pr())
FAIL = ReadFailure(EvidenceCode.HTTP_STATUS, "GET /x: HTTP 500")


def ev(**changes: Any) -> Evidence:
    return replace(GOOD, **changes)


def test_good_evidence_is_true() -> None:
    v = decide(CFG, GOOD)
    assert (v.trusted, v.code, v.ok) == (Trust.TRUE, EvidenceCode.TRUSTED, True)
    assert v.to_json()["trusted_producer"] == "true"


TABLE: list[tuple[str, Evidence, Trust, str]] = [
    # (1) pull request
    ("pr not read", Evidence(), Trust.UNKNOWN, "NOT_READ"),
    ("pr read failed", ev(pull_request=FAIL), Trust.UNKNOWN, "HTTP_STATUS"),
    ("pr is another number", ev(pull_request=pr(number=43)), Trust.UNKNOWN, "PR_MISMATCH"),
    ("pr of another base repo", ev(pull_request=pr(base="octo/other", head_repo="octo/other")), Trust.UNKNOWN, "PR_MISMATCH"),
    ("fork", ev(pull_request=pr(head_repo="mallory/widgets")), Trust.FALSE, "NOT_SAME_REPO"),
    ("head repo deleted", ev(pull_request=pr(head_repo=None)), Trust.FALSE, "NOT_SAME_REPO"),
    ("head repo differs only by case", ev(pull_request=pr(head_repo="Octo/widgets")), Trust.FALSE, "NOT_SAME_REPO"),
    # (2) issue comments: a diagnostic or fallback comment by the App for this head is a known failure
    ("comments not read", ev(issue_comments=None), Trust.UNKNOWN, "NOT_READ"),
    ("comments read failed", ev(issue_comments=ReadFailure(EvidenceCode.TOO_MANY_PAGES, "20 pages")), Trust.UNKNOWN, "TOO_MANY_PAGES"),
    ("diagnostic comment for the head", ev(issue_comments=(cm(cbody(DIAG)),)), Trust.FALSE, "BLOCKING_COMMENT"),
    ("fallback (findings) comment for the head", ev(issue_comments=(cm(cbody(FINDINGS)),)), Trust.FALSE, "BLOCKING_COMMENT"),
    ("fallback comment and no review at all", ev(issue_comments=(cm(cbody(FINDINGS)),), reviews=()), Trust.FALSE, "BLOCKING_COMMENT"),
    ("diagnostic comment beside the clean review", ev(issue_comments=(cm(cbody(CLEAN), cid=1), cm(cbody(DIAG), cid=2))), Trust.FALSE, "BLOCKING_COMMENT"),
    ("comment with clean and diagnostic markers", ev(issue_comments=(cm(cbody(CLEAN, DIAG)),)), Trust.FALSE, "BLOCKING_COMMENT"),
    ("comment with a malformed marker for the head", ev(issue_comments=(cm(cbody(CLEAN, "<!-- opencode-review: clean  -->")),)), Trust.FALSE, "BLOCKING_COMMENT"),
    ("diagnostic comment naming no head", ev(issue_comments=(cm(cbody(DIAG, head=None)),)), Trust.FALSE, "BLOCKING_COMMENT"),
    ("diagnostic comment naming another head and this one", ev(issue_comments=(cm(cbody(DIAG, head_line(OTHER))),)), Trust.FALSE, "BLOCKING_COMMENT"),
    ("diagnostic comment naming two other heads", ev(issue_comments=(cm(cbody(DIAG, head_line(RETARGETED), head=OTHER)),)), Trust.FALSE, "BLOCKING_COMMENT"),
    ("diagnostic comment with a malformed head marker", ev(issue_comments=(cm(cbody(DIAG, f"<!-- opencode-review: head sha={OTHER.upper()} -->", head=None)),)),
     Trust.FALSE, "BLOCKING_COMMENT"),
    ("diagnostic comment with crlf line ends", ev(issue_comments=(cm(cbody(DIAG).replace("\n", "\r\n")),)), Trust.FALSE, "BLOCKING_COMMENT"),
    ("conflicting copies of a comment", ev(issue_comments=(cm(cbody(CLEAN)), cm(cbody(DIAG)))), Trust.UNKNOWN, "LISTING_INCONSISTENT"),
    # (3) reviews
    ("reviews not read", ev(reviews=None), Trust.UNKNOWN, "NOT_READ"),
    ("reviews read failed", ev(reviews=ReadFailure(EvidenceCode.TOO_MANY_PAGES, "20 pages")), Trust.UNKNOWN, "TOO_MANY_PAGES"),
    ("no reviews", ev(reviews=()), Trust.FALSE, "NO_TRUSTED_REVIEW"),
    ("review on another head", ev(reviews=(rv(commit=OTHER),)), Trust.FALSE, "NO_TRUSTED_REVIEW"),
    ("review without commit", ev(reviews=(rv(commit=None),)), Trust.FALSE, "NO_TRUSTED_REVIEW"),
    ("ghost author", ev(reviews=(rv(login=None),)), Trust.FALSE, "NO_TRUSTED_REVIEW"),
    ("shared actions login", ev(reviews=(rv(login="github-actions[bot]"),)), Trust.FALSE, "NO_TRUSTED_REVIEW"),
    ("confusable login", ev(reviews=(rv(login="opencode-reviеw[bot]"),)), Trust.FALSE, "NO_TRUSTED_REVIEW"),
    ("approved with clean marker", ev(reviews=(rv(state="APPROVED"),)), Trust.FALSE, "BLOCKING_REVIEW"),
    ("changes requested", ev(reviews=(rv(state="CHANGES_REQUESTED"),)), Trust.FALSE, "BLOCKING_REVIEW"),
    ("dismissed", ev(reviews=(rv(state="DISMISSED"),)), Trust.FALSE, "BLOCKING_REVIEW"),
    ("commented lowercase", ev(reviews=(rv(state="commented"),)), Trust.FALSE, "BLOCKING_REVIEW"),
    ("no clean marker", ev(reviews=(rv(body()),)), Trust.FALSE, "BLOCKING_REVIEW"),
    ("two clean markers", ev(reviews=(rv(body(CLEAN, CLEAN)),)), Trust.FALSE, "BLOCKING_REVIEW"),
    ("clean plus findings", ev(reviews=(rv(body(CLEAN, "<!-- opencode-review: findings count=0 -->")),)), Trust.FALSE, "BLOCKING_REVIEW"),
    ("clean plus diagnostic", ev(reviews=(rv(body(CLEAN, "<!-- opencode-review: diagnostic -->")),)), Trust.FALSE, "BLOCKING_REVIEW"),
    ("indented clean marker", ev(reviews=(rv(body(" " + CLEAN)),)), Trust.FALSE, "BLOCKING_REVIEW"),
    ("clean marker with extra space", ev(reviews=(rv(body("<!--  opencode-review: clean -->")),)), Trust.FALSE, "BLOCKING_REVIEW"),
    ("clean then blocking same head", ev(reviews=(rv(rid=10), rv(body("<!-- opencode-review: diagnostic -->"), rid=11))), Trust.FALSE, "BLOCKING_REVIEW"),
    ("blocking then clean same head", ev(reviews=(rv(body("<!-- opencode-review: findings count=2 -->"), rid=10), rv(rid=11))), Trust.FALSE, "BLOCKING_REVIEW"),
    ("clean marker but no run marker", ev(reviews=(rv(CLEAN),)), Trust.FALSE, "RUN_MARKER_MISSING"),
    ("two run markers", ev(reviews=(rv(body(CLEAN, f"<!-- opencode-review: workflow-run id={RID} attempt=2 -->")),)), Trust.FALSE, "RUN_MARKER_AMBIGUOUS"),
    ("run marker with leading zero", ev(reviews=(rv(CLEAN + f"\n<!-- opencode-review: workflow-run id=0{RID} attempt=1 -->"),)), Trust.FALSE, "BLOCKING_REVIEW"),
    ("run marker attempt zero", ev(reviews=(rv(CLEAN + f"\n<!-- opencode-review: workflow-run id={RID} attempt=0 -->"),)), Trust.FALSE, "BLOCKING_REVIEW"),
    ("conflicting copies of a review", ev(reviews=(rv(rid=10), rv(body(CLEAN, run_id=1), rid=10))), Trust.UNKNOWN, "LISTING_INCONSISTENT"),
    ("review head marker names another head", ev(reviews=(rv(cbody(CLEAN, head=OTHER)),)), Trust.FALSE, "BLOCKING_REVIEW"),
    ("review with two head markers", ev(reviews=(rv(cbody(CLEAN, head_line(HEAD))),)), Trust.FALSE, "BLOCKING_REVIEW"),
    # (3c) the base the run reviewed (BASE_SHA...HEAD_SHA) is the PR's base now
    ("old marker without a base", ev(reviews=(rv(body(CLEAN, base=None)),)), Trust.FALSE, "BASE_MARKER_MISSING"),
    ("two base markers", ev(reviews=(rv(body(CLEAN, f"<!-- opencode-review: base sha={RETARGETED} -->")),)), Trust.FALSE, "BASE_MARKER_AMBIGUOUS"),
    ("base marker not lowercase hex", ev(reviews=(rv(body(CLEAN, base=BASE.upper())),)), Trust.FALSE, "BLOCKING_REVIEW"),
    ("base marker naming a ref", ev(reviews=(rv(body(CLEAN, "<!-- opencode-review: base sha=main -->", base=None)),)), Trust.FALSE, "BLOCKING_REVIEW"),
    ("retargeted after the run", ev(pull_request=pr(base_sha=RETARGETED), final_pull_request=pr(base_sha=RETARGETED)), Trust.FALSE, "BASE_MISMATCH"),
    ("latest review for an old base", ev(reviews=(rv(rid=1, text=body(CLEAN, base=RETARGETED)), rv(rid=2, text=body(CLEAN, base=OTHER)))),
     Trust.FALSE, "BASE_MISMATCH"),
    # (3d) no review by the App on the head was ever edited (REST has no edit marker; GraphQL does)
    ("edit status not read", ev(review_edits=None), Trust.UNKNOWN, "NOT_READ"),
    ("edit status read failed", ev(review_edits=ReadFailure(EvidenceCode.GRAPHQL_ERROR, "Resource not accessible by integration")), Trust.UNKNOWN, "GRAPHQL_ERROR"),
    ("edit status of the review missing", ev(review_edits=(ed(11),)), Trust.UNKNOWN, "NOT_READ"),
    ("edited by a maintainer", ev(review_edits=(ed(10, at=EDITED_AT, editor="mallory"),)), Trust.FALSE, "REVIEW_EDITED"),
    ("edited by the app itself", ev(review_edits=(ed(10, at=EDITED_AT, editor="opencode-review"),)), Trust.FALSE, "REVIEW_EDITED"),
    ("edited by a deleted account", ev(review_edits=(ed(10, at=EDITED_AT),)), Trust.FALSE, "REVIEW_EDITED"),
    ("editor without a time", ev(review_edits=(ed(10, editor="mallory"),)), Trust.FALSE, "REVIEW_EDITED"),
    ("only includesCreatedEdit", ev(review_edits=(ed(10, created=True),)), Trust.FALSE, "REVIEW_EDITED"),
    ("an earlier review on the head edited (findings turned clean)", ev(reviews=(rv(rid=1), rv(rid=2)), review_edits=(ed(1, at=EDITED_AT, editor="mallory"), ed(2))),
     Trust.FALSE, "REVIEW_EDITED"),
    ("conflicting edit records", ev(review_edits=(ed(10), ed(10, at=EDITED_AT))), Trust.UNKNOWN, "LISTING_INCONSISTENT"),
    # (4) runs
    ("runs not read", ev(runs=None), Trust.UNKNOWN, "NOT_READ"),
    ("runs read failed", ev(runs=ReadFailure(EvidenceCode.FOREIGN_LINK, "next page elsewhere")), Trust.UNKNOWN, "FOREIGN_LINK"),
    ("no runs", ev(runs=()), Trust.FALSE, "NO_MATCHING_RUN"),
    ("only runs for other prs", ev(runs=(rn(999, title="OpenCode review PR #41 head " + HEAD, refs=(PullRef(41, HEAD),)),)), Trust.FALSE, "NO_MATCHING_RUN"),
    ("marker run has wrong event", ev(runs=(rn(event="pull_request"),)), Trust.FALSE, "RUN_WRONG_EVENT"),
    ("marker run has wrong path", ev(runs=(rn(path=DEFAULT_WORKFLOW + "@refs/heads/main"),)), Trust.FALSE, "RUN_WRONG_WORKFLOW"),
    ("marker run not bound", ev(runs=(rn(title="Widget frobnication", refs=()),)), Trust.FALSE, "RUN_NOT_BOUND"),
    ("marker run bound to other head", ev(runs=(rn(title=f"OpenCode review PR #{PR} head {OTHER}", refs=(PullRef(PR, OTHER),)),)), Trust.FALSE, "RUN_NOT_BOUND"),
    ("marker run bound to another pr with this head", ev(runs=(rn(refs=(PullRef(PR + 1, HEAD),)),)), Trust.FALSE, "RUN_NOT_BOUND"),
    # A display title is text the run chose, not the API's association: by default it binds nothing.
    ("marker run bound only by its run-name", ev(runs=(rn(refs=()),)), Trust.FALSE, "RUN_NOT_BOUND"),
    ("only a run-name-bound run, not the marker's", ev(runs=(rn(RID + 1, refs=()),)), Trust.FALSE, "NO_MATCHING_RUN"),
    ("missing attempt", ev(runs=(rn(attempt=None),)), Trust.UNKNOWN, "MISSING_RUN_ATTEMPT"),
    ("missing attempt on another candidate", ev(runs=(rn(), rn(RID + 1, None, number=6))), Trust.UNKNOWN, "MISSING_RUN_ATTEMPT"),
    ("latest queued", ev(runs=(rn(status="queued", conclusion=None),)), Trust.UNKNOWN, "RUN_PENDING"),
    ("latest completed without conclusion", ev(runs=(rn(conclusion=None),)), Trust.UNKNOWN, "RUN_PENDING"),
    ("newer attempt running", ev(runs=(rn(attempt=2, status="in_progress", conclusion=None),)), Trust.UNKNOWN, "RUN_PENDING"),
    ("latest cancelled", ev(runs=(rn(conclusion="cancelled"),)), Trust.FALSE, "RUN_NOT_SUCCESS"),
    ("latest neutral", ev(runs=(rn(conclusion="neutral"),)), Trust.FALSE, "RUN_NOT_SUCCESS"),
    ("newer attempt failed", ev(runs=(rn(attempt=2, conclusion="failure"),)), Trust.FALSE, "RUN_NOT_SUCCESS"),
    ("marker names older attempt", ev(runs=(rn(attempt=2),)), Trust.FALSE, "STALE_ATTEMPT"),
    ("marker names a future attempt", ev(reviews=(rv(body(CLEAN, attempt=3)),)), Trust.FALSE, "MARKER_MISMATCH"),
    ("newer run supersedes", ev(runs=(rn(), rn(RID + 1, number=8))), Trust.FALSE, "MARKER_MISMATCH"),
    ("marker names unknown run", ev(reviews=(rv(body(CLEAN, run_id=1234)),)), Trust.FALSE, "MARKER_MISMATCH"),
    ("marker names wrong-event run beside real", ev(runs=(rn(number=8), rn(RID - 1, number=9, event="push")), reviews=(rv(body(CLEAN, run_id=RID - 1)),)), Trust.FALSE, "RUN_WRONG_EVENT"),
    ("conflicting copies of a run", ev(runs=(rn(), rn(attempt=2))), Trust.UNKNOWN, "LISTING_INCONSISTENT"),
    # (5) jobs
    ("jobs not read", ev(jobs=None), Trust.UNKNOWN, "NOT_READ"),
    ("jobs read failed", ev(jobs=ReadFailure(EvidenceCode.RESPONSE_SHAPE, "jobs is not an array")), Trust.UNKNOWN, "RESPONSE_SHAPE"),
    ("no jobs", ev(jobs=()), Trust.FALSE, "JOB_MISSING"),
    ("job name differs by case", ev(jobs=(jb("OpenCode-Review-Same-Repo"),)), Trust.FALSE, "JOB_MISSING"),
    ("job twice", ev(jobs=(jb(jid=1), jb(jid=2))), Trust.FALSE, "JOB_AMBIGUOUS"),
    ("job skipped", ev(jobs=(jb(conclusion="skipped"),)), Trust.FALSE, "JOB_NOT_SUCCESS"),
    ("job cancelled", ev(jobs=(jb(conclusion="cancelled"),)), Trust.FALSE, "JOB_NOT_SUCCESS"),
    ("job running", ev(jobs=(jb(status="in_progress", conclusion=None),)), Trust.UNKNOWN, "JOB_PENDING"),
    ("job of another attempt", ev(jobs=(jb(attempt=2),)), Trust.UNKNOWN, "LISTING_INCONSISTENT"),
    ("job of another run", ev(jobs=(jb(run_id=RID + 1),)), Trust.UNKNOWN, "LISTING_INCONSISTENT"),
    ("job without attempt", ev(jobs=(jb(attempt=None),)), Trust.UNKNOWN, "MISSING_RUN_ATTEMPT"),
    # (6) the protected environment
    ("environment not read", ev(environment=None), Trust.UNKNOWN, "NOT_READ"),
    ("environment unreadable to the token", ev(environment=ReadFailure(EvidenceCode.HTTP_STATUS, "GET /x: HTTP 403: Resource not accessible by integration")),
     Trust.UNKNOWN, "HTTP_STATUS"),
    ("environment read failed", ev(environment=ReadFailure(EvidenceCode.HTTP_STATUS, "GET /x: HTTP 502")), Trust.UNKNOWN, "HTTP_STATUS"),
    ("environment absent", ev(environment=AbsentEnvironment(DEFAULT_ENVIRONMENT)), Trust.FALSE, "ENVIRONMENT_MISSING"),
    ("environment without a deployment branch policy", ev(environment=Environment(DEFAULT_ENVIRONMENT, None)), Trust.FALSE, "ENVIRONMENT_UNPROTECTED"),
    ("environment answered for another name", ev(environment=Environment("production", "protected_branches")), Trust.UNKNOWN, "ENVIRONMENT_MISMATCH"),
    ("environment name differs by case", ev(environment=Environment(DEFAULT_ENVIRONMENT.upper(), "protected_branches")), Trust.UNKNOWN, "ENVIRONMENT_MISMATCH"),
    # (7) final re-read
    ("final not read", ev(final_pull_request=None), Trust.UNKNOWN, "NOT_READ"),
    ("final read failed", ev(final_pull_request=ReadFailure(EvidenceCode.HTTP_ERROR, "timed out")), Trust.UNKNOWN, "HTTP_ERROR"),
    ("head moved", ev(final_pull_request=pr(head=OTHER)), Trust.UNKNOWN, "HEAD_MOVED"),
    ("base moved during the evaluation", ev(final_pull_request=pr(base_sha=RETARGETED)), Trust.UNKNOWN, "BASE_MOVED"),
    ("head and base moved", ev(final_pull_request=pr(head=OTHER, base_sha=RETARGETED)), Trust.UNKNOWN, "HEAD_MOVED"),
    ("became a fork", ev(final_pull_request=pr(head_repo="mallory/widgets")), Trust.FALSE, "NOT_SAME_REPO"),
    ("final read answers another pr", ev(final_pull_request=pr(number=1)), Trust.UNKNOWN, "PR_MISMATCH"),
]


@pytest.mark.parametrize(("evidence", "trusted", "code"), [row[1:] for row in TABLE], ids=[row[0] for row in TABLE])
def test_decision_table(evidence: Evidence, trusted: Trust, code: str) -> None:
    v = decide(CFG, evidence)
    assert (v.trusted, str(v.code)) == (trusted, code), v.reason
    out = v.to_json()
    assert out["ok"] is False and out["errors"][0]["code"] == code and out["reason_code"] == code


TRUE_TABLE: list[tuple[str, Evidence]] = [
    ("bound by pull_requests entry only", ev(runs=(rn(title="x", refs=(PullRef(PR, HEAD),)),))),
    ("bound by one of several pull_requests entries", ev(runs=(rn(title="OpenCode code review", refs=(PullRef(PR + 1, OTHER), PullRef(PR, HEAD))),))),
    ("a newer run bound only by its run-name is not a candidate", ev(runs=(rn(), rn(RID + 1, number=8, refs=(), conclusion="failure")))),
    ("no comments", ev(issue_comments=())),
    ("no-findings comment for the head", ev(issue_comments=(cm(cbody(CLEAN)),))),
    ("diagnostic comment for another head", ev(issue_comments=(cm(cbody(DIAG, head=OTHER)),))),
    ("fallback comment for another head", ev(issue_comments=(cm(cbody(FINDINGS, head=OTHER)),))),
    ("diagnostic comment by a person", ev(issue_comments=(cm(cbody(DIAG), login="alice"),))),
    ("diagnostic comment by the shared actions login", ev(issue_comments=(cm(cbody(DIAG), login="github-actions[bot]"),))),
    ("diagnostic comment by a confusable login", ev(issue_comments=(cm(cbody(DIAG), login="opencode-reviеw[bot]"),))),
    ("diagnostic comment by a deleted account", ev(issue_comments=(cm(cbody(DIAG), login=None),))),
    ("app comment without markers", ev(issue_comments=(cm("Review started for this head."),))),
    ("app comment with only a head marker", ev(issue_comments=(cm(head_line(HEAD)),))),
    ("exact repeats of a comment are merged", ev(issue_comments=(cm(cbody(CLEAN)), cm(cbody(CLEAN))))),
    ("review head marker names its commit", ev(reviews=(rv(cbody(CLEAN)),))),
    ("environment restricted by custom branch policies", ev(environment=Environment(DEFAULT_ENVIRONMENT, "custom_branch_policies"))),
    ("blocking review on an older head", ev(reviews=(rv(body("<!-- opencode-review: diagnostic -->"), rid=5, commit=OTHER), rv(rid=6)))),
    ("human and other-bot reviews are ignored", ev(reviews=(rv(body(), rid=1, login="alice", state="CHANGES_REQUESTED"), rv(rid=2, login="github-actions[bot]", state="APPROVED"), rv(rid=3)))),
    ("crlf body", ev(reviews=(rv(body(CLEAN).replace("\n", "\r\n")),))),
    ("two clean reviews, latest names the latest attempt", ev(reviews=(rv(rid=1), rv(body(CLEAN, attempt=2), rid=2)), runs=(rn(attempt=2),), jobs=(jb(attempt=2),))),
    ("exact repeats across pages are merged", ev(reviews=(rv(), rv()), runs=(rn(), rn()))),
    ("older runs of other generations", ev(runs=(rn(RID - 3, number=5, conclusion="failure"), rn(RID - 2, number=6, status="in_progress", conclusion=None), rn()))),
    ("edited reviews by others are ignored", ev(reviews=(rv(body(), rid=1, login="alice"), rv(rid=2, commit=OTHER), rv(rid=3)),
                                                review_edits=(ed(1, at=EDITED_AT, editor="alice"), ed(2, at=EDITED_AT), ed(3)))),
    ("an older clean review for another base", ev(reviews=(rv(rid=1, text=body(CLEAN, base=RETARGETED)), rv(rid=2)))),
    ("sha-256 repository base", ev(reviews=(rv(body(CLEAN, base="ab" * 32)),), pull_request=pr(base_sha="ab" * 32), final_pull_request=pr(base_sha="ab" * 32))),
]


@pytest.mark.parametrize("evidence", [row[1] for row in TRUE_TABLE], ids=[row[0] for row in TRUE_TABLE])
def test_true_table(evidence: Evidence) -> None:
    v = decide(CFG, evidence)
    assert v.trusted is Trust.TRUE, v.reason


def test_server_strings_in_reasons_are_inert() -> None:
    v = decide(CFG, ev(pull_request=pr(head_repo="evil/\x1b[2Jrepo\nX")))
    assert v.code == EvidenceCode.NOT_SAME_REPO
    assert "\x1b" not in v.reason and "\n" not in v.reason and "\\x1b" in v.reason


def test_latest_generation_is_max_of_number_attempt_id() -> None:
    a = rn(10, 1, number=5)
    b = rn(11, 3, number=5)
    c = rn(9, 1, number=6)
    assert latest_run((a, b, c)) == c
    assert latest_run((a, b)) == b
    assert latest_run((rn(12, 2, number=5), rn(13, 2, number=5))).id == 13
    assert latest_run(()) is None
    assert latest_run((a, rn(14, None))) is None


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"repo": "octo"}, "--repo"),
        ({"repo": "octo/.."}, "--repo"),
        ({"pr": 0}, "--pr"),
        ({"pr": True}, "--pr"),
        ({"app_login": "github-actions[bot]"}, "shared Actions identity"),
        ({"app_login": "OpenCode-Review[bot]"}, "--app-login"),
        ({"app_login": "opencode-review"}, "--app-login"),
        ({"app_login": "opencode-reviеw[bot]"}, "--app-login"),
        ({"workflow": "opencode-code-review.yml"}, "--workflow"),
        ({"workflow": ".github/workflows/a/b.yml"}, "--workflow"),
        ({"job": ""}, "--job"),
        ({"environment": ""}, "--environment"),
        ({"environment": ".."}, "--environment"),
        ({"environment": "a/b"}, "--environment"),
        ({"environment": "x" * 256}, "--environment"),
        ({"bind_by_run_name": 1}, "bind_by_run_name"),
    ],
)
def test_config_is_validated(kwargs: dict[str, Any], needle: str) -> None:
    args = {"repo": REPO, "pr": PR, "app_login": APP, "workflow": DEFAULT_WORKFLOW, "job": DEFAULT_JOB, **kwargs}
    with pytest.raises(InputError) as e:
        TrustConfig(**args)
    assert e.value.code == "BAD_CONFIG" and needle in e.value.detail


def test_marker_parser() -> None:
    m = parse_markers(
        "text\n<!-- opencode-review: clean -->\r\n<!-- opencode-review: findings count=3 -->\n"
        "<!-- opencode-review: workflow-run id=12 attempt=2 -->\n<!-- opencode-review: diagnostic -->\n"
        "see opencode-review: docs\n<!-- opencode-review: workflow-run id=١٢ attempt=1 -->"
    )
    assert (m.clean, m.findings, m.runs, m.diagnostic, m.malformed) == (1, (3,), ((12, 2),), 1, 2)
    assert not m.is_clean
    assert parse_markers(CLEAN).is_clean
    b = parse_markers(f"<!-- opencode-review: base sha={BASE} -->\n<!-- opencode-review: base sha={BASE[:39]} -->\n<!-- opencode-review: base ref=main -->")
    assert (b.bases, b.malformed) == ((BASE,), 2)
    h = parse_markers(f"{head_line(HEAD)}\n{head_line(OTHER)}\n<!-- opencode-review: head sha={HEAD[:39]} -->\n<!-- opencode-review: head ref=main -->")
    assert (h.heads, h.malformed, h.actionable) == ((HEAD, OTHER), 2, True)
    assert not parse_markers(cbody(CLEAN)).actionable and parse_markers(cbody(FINDINGS)).actionable and parse_markers(cbody(DIAG)).actionable


# ------------------------------------------------------------------ binding a run by its run-name (opt-in)

BY_NAME_TABLE: list[tuple[str, Evidence, Trust, str]] = [
    ("bound only by its run-name", ev(runs=(rn(refs=()),)), Trust.TRUE, "TRUSTED"),
    ("bound by both", ev(), Trust.TRUE, "TRUSTED"),
    ("run-name of another head", ev(runs=(rn(title=f"OpenCode review PR #{PR} head {OTHER}", refs=()),)), Trust.FALSE, "RUN_NOT_BOUND"),
    ("run-name of another pr", ev(runs=(rn(title=f"OpenCode review PR #{PR + 1} head {HEAD}", refs=()),)), Trust.FALSE, "RUN_NOT_BOUND"),
    ("run-name with a trailing space", ev(runs=(rn(title=f"OpenCode review PR #{PR} head {HEAD} ", refs=()),)), Trust.FALSE, "RUN_NOT_BOUND"),
    # What the opt-in costs: anyone who can start a run titled like this PR's run-name makes it the
    # latest candidate, and the App's marker names another run: false, never true.
    ("a newer run titled like this pr's run-name", ev(runs=(rn(), rn(RID + 1, number=8, refs=()))), Trust.FALSE, "MARKER_MISMATCH"),
]


@pytest.mark.parametrize(("evidence", "trusted", "code"), [row[1:] for row in BY_NAME_TABLE], ids=[row[0] for row in BY_NAME_TABLE])
def test_run_name_binding_only_when_opted_in(evidence: Evidence, trusted: Trust, code: str) -> None:
    v = decide(BY_NAME, evidence)
    assert (v.trusted, str(v.code)) == (trusted, code), v.reason


def test_a_run_bound_only_by_its_title_is_not_bound_by_default() -> None:
    title_only = ev(runs=(rn(refs=()),))
    strict = decide(CFG, title_only)
    assert (strict.trusted, strict.code) == (Trust.FALSE, EvidenceCode.RUN_NOT_BOUND)
    assert "--bind-by-run-name" in strict.reason
    assert decide(BY_NAME, title_only).trusted is Trust.TRUE
    # Without the opt-in the newer title-only run is no candidate, so it cannot take true away.
    assert decide(CFG, ev(runs=(rn(), rn(RID + 1, number=8, refs=())))).trusted is Trust.TRUE


# ------------------------------------------------------------------ properties over the table

STAGES = ("pull_request", "issue_comments", "reviews", "review_edits", "runs", "jobs", "environment", "final_pull_request")


def test_the_stages_are_the_fetchers_and_the_evidences() -> None:
    from dataclasses import fields

    from attest.review.evidence._fetch import STAGES as FETCHED

    assert FETCHED == STAGES == tuple(f.name for f in fields(Evidence))


@given(stage=st.sampled_from(STAGES), code=st.sampled_from([EvidenceCode.HTTP_ERROR, EvidenceCode.HTTP_STATUS, EvidenceCode.RESPONSE_SHAPE]), missing=st.booleans())
@settings(max_examples=60, deadline=None)
def test_a_failed_or_missing_read_is_never_true(stage: str, code: EvidenceCode, missing: bool) -> None:
    v = decide(CFG, replace(GOOD, **{stage: None if missing else ReadFailure(code, "x")}))
    assert v.trusted is Trust.UNKNOWN
    assert v.code == (EvidenceCode.NOT_READ if missing else code)


@given(
    login=st.sampled_from([APP, "opencode-review", "OpenCode-Review[bot]", "github-actions[bot]", "alice"]) | st.text(min_size=1, max_size=25),
    state=st.sampled_from(["COMMENTED", "APPROVED", "CHANGES_REQUESTED", "DISMISSED", "PENDING", "commented"]),
    event=st.sampled_from(["pull_request_target", "pull_request", "push", "workflow_run"]),
    status=st.sampled_from(["completed", "in_progress", "queued", None]),
    conclusion=st.sampled_from(["success", "failure", "cancelled", "skipped", "neutral", None]),
    job_conclusion=st.sampled_from(["success", "skipped", "failure"]),
    final_head=st.sampled_from([HEAD, OTHER]),
    policy=st.sampled_from(["protected_branches", "custom_branch_policies", None, "absent"]),
)
@example(login=APP, state="COMMENTED", event="pull_request_target", status="completed", conclusion="success", job_conclusion="success", final_head=HEAD,
         policy="protected_branches")
@example(login="OpenCode-Review[bot]", state="COMMENTED", event="pull_request_target", status="completed", conclusion="success", job_conclusion="success",
         final_head=HEAD, policy="protected_branches")
@settings(max_examples=300, deadline=None)
def test_true_only_when_every_predicate_holds(login: str, state: str, event: str, status: str | None, conclusion: str | None, job_conclusion: str,
                                              final_head: str, policy: str | None) -> None:
    evidence = ev(
        reviews=(rv(login=login, state=state),),
        runs=(rn(event=event, status=status, conclusion=conclusion),),
        jobs=(jb(conclusion=job_conclusion),),
        environment=AbsentEnvironment(DEFAULT_ENVIRONMENT) if policy == "absent" else Environment(DEFAULT_ENVIRONMENT, policy),
        final_pull_request=pr(head=final_head),
    )
    expect = (login == APP and state == "COMMENTED" and event == "pull_request_target" and status == "completed"
              and conclusion == "success" and job_conclusion == "success" and final_head == HEAD
              and policy in ("protected_branches", "custom_branch_policies"))
    assert (decide(CFG, evidence).trusted is Trust.TRUE) == expect


@pytest.mark.parametrize("evidence", [row[1] for row in TABLE + [(n, e, Trust.TRUE, "TRUSTED") for n, e in TRUE_TABLE]] + [GOOD],
                         ids=[row[0] for row in TABLE] + [n for n, _ in TRUE_TABLE] + ["good"])
def test_an_edit_can_only_take_true_away(evidence: Evidence) -> None:
    """Marking every review edited never yields true; on evidence that was true it yields REVIEW_EDITED."""
    before = decide(CFG, evidence)
    if not isinstance(evidence.reviews, tuple):
        return
    edited = replace(evidence, review_edits=tuple(ed(r.id, at=EDITED_AT, editor="mallory") for r in evidence.reviews))
    after = decide(CFG, edited)
    assert after.trusted is not Trust.TRUE
    if before.trusted is Trust.TRUE:
        assert after.code is EvidenceCode.REVIEW_EDITED


@pytest.mark.parametrize("evidence", [row[1] for row in TABLE + [(n, e, Trust.TRUE, "TRUSTED") for n, e in TRUE_TABLE]] + [GOOD],
                         ids=[row[0] for row in TABLE] + [n for n, _ in TRUE_TABLE] + ["good"])
def test_a_blocking_comment_can_only_take_true_away(evidence: Evidence) -> None:
    """Adding the App's diagnostic comment for the head never yields true; on evidence that was true it yields BLOCKING_COMMENT."""
    before = decide(CFG, evidence)
    if not isinstance(evidence.issue_comments, tuple):
        return
    blocked = replace(evidence, issue_comments=(*evidence.issue_comments, cm(cbody(DIAG), cid=10**6)))
    after = decide(CFG, blocked)
    assert after.trusted is not Trust.TRUE
    if before.trusted is Trust.TRUE:
        assert after.code is EvidenceCode.BLOCKING_COMMENT


MARKER_LINES = {"clean": [CLEAN], "diagnostic": [DIAG], "findings": [FINDINGS], "malformed": ["<!-- opencode-review: clean -- >"], "none": [],
                "clean+diagnostic": [CLEAN, DIAG]}


@given(
    login=st.sampled_from([APP, "alice", "github-actions[bot]", "OpenCode-Review[bot]", "opencode-review", None]),
    kind=st.sampled_from(sorted(MARKER_LINES)),
    heads=st.lists(st.sampled_from([HEAD, OTHER, RETARGETED]), max_size=3),
)
@settings(max_examples=300, deadline=None)
def test_a_comment_blocks_exactly_when_it_is_the_apps_actionable_comment_not_about_another_head(login: str | None, kind: str, heads: list[str]) -> None:
    text = "\n".join(["note", *MARKER_LINES[kind], *(head_line(h) for h in heads), ""])
    v = decide(CFG, ev(issue_comments=(cm(text, login=login),)))
    about_another_head = len(heads) == 1 and heads[0] != HEAD
    blocks = login == APP and kind not in ("clean", "none") and not about_another_head
    assert (v.code is EvidenceCode.BLOCKING_COMMENT) == blocks, v.reason
    assert (v.trusted is Trust.TRUE) == (not blocks)
