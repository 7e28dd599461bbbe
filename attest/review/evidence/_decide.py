"""The trusted-producer decision: a pure function from parsed evidence to a verdict.

No I/O, no clock. The steps follow docs/evidence.md "The decision, step by step" in order:
(1) the pull request, (2) the App's issue comments, (3) the App's reviews on the head and
their edit status, (4) the workflow runs, (5) the jobs of the latest attempt, (6) the
protected environment, (7) the final head read. The first step that fails decides: a known
failure is ``false``, incomplete evidence or a failed read is ``unknown``, and ``true`` is
reachable only through the last line.

    >>> decide(config, Evidence(pull_request=pr, issue_comments=(...), reviews=(...), review_edits=(...), runs=(...),
    ...                         jobs=(...), environment=env, final_pull_request=pr))
    Verdict(trusted=<Trust.TRUE: 'true'>, code=<EvidenceCode.TRUSTED: 'TRUSTED'>, ...)
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypeVar, cast

from ._codes import EvidenceCode as C
from ._markers import parse_markers
from ._model import (
    TRUSTED_EVENT,
    AbsentEnvironment,
    Environment,
    Evidence,
    IssueComment,
    Job,
    PullRequest,
    ReadFailure,
    Review,
    ReviewEdit,
    Run,
    TrustConfig,
    Verdict,
    false,
    true,
    unknown,
)

_T = TypeVar("_T", IssueComment, Review, ReviewEdit, Run, Job)
_S = TypeVar("_S")
COMPLETED = "completed"
SUCCESS = "success"
CLEAN_STATE = "COMMENTED"


class _Stop(Exception):
    """Carries the deciding verdict out of a step (internal control flow, never escapes)."""

    def __init__(self, verdict: Verdict) -> None:
        self.verdict = verdict


def _read(value: _S | ReadFailure | None, what: str) -> _S:
    if value is None:
        raise _Stop(unknown(C.NOT_READ, f"{what} not read"))
    if isinstance(value, ReadFailure):
        raise _Stop(unknown(value.code, f"reading {what} failed: {value.detail}"))
    return value


def _unique(items: Iterable[_T], what: str) -> tuple[_T, ...]:
    """Drop exact repeats (a listing that shifted between pages); conflicting copies stop."""
    seen: dict[int, _T] = {}
    for item in items:
        prior = seen.get(item.id)
        if prior is not None and prior != item:
            raise _Stop(unknown(C.LISTING_INCONSISTENT, f"{what} {item.id} changed while the listing was read"))
        seen[item.id] = item
    return tuple(seen.values())


def _check_pr(config: TrustConfig, pr: PullRequest, what: str) -> None:
    if pr.number != config.pr or pr.base_repo != config.repo:
        raise _Stop(unknown(C.PR_MISMATCH, f"{what} is #{pr.number} of {pr.base_repo}, not #{config.pr} of {config.repo}"))
    # Only a PR *explicitly known* same-repository qualifies; a missing head repo is not known
    # (docs/evidence.md "The decision, step by step", step 1).
    if pr.head_repo is None or pr.head_repo != pr.base_repo:
        raise _Stop(false(C.NOT_SAME_REPO, f"head repository {pr.head_repo or '(missing)'} is not the base repository {pr.base_repo}"))


def app_reviews(config: TrustConfig, reviews: Iterable[Review], head_sha: str) -> tuple[Review, ...]:
    """The reviews that count: by exactly the configured App login, on exactly this head, by id.

    Display names never count: only the raw login is compared, byte for byte.
    """
    return tuple(sorted((r for r in reviews if r.login == config.app_login and r.commit_id == head_sha), key=lambda r: r.id))


def blocking_comment(config: TrustConfig, comment: IssueComment, head_sha: str) -> str | None:
    """Why an issue comment keeps the evidence from being ``true`` on ``head_sha``, or None.

    Only a comment by exactly the configured App login counts (the raw login, byte for byte:
    display names never authenticate). It blocks when its body is actionable (the diagnostic
    marker; a findings marker, which makes it a fallback comment; or a malformed marker line)
    and it is not about another head. It is about another head only when it has exactly one head
    marker and that names another commit; with none, or several, it cannot be placed on
    another head and blocks (fail closed). A no-findings comment never blocks, and never
    counts as evidence either.

    Raises:
        Nothing.
    """
    if comment.login != config.app_login:
        return None
    m = parse_markers(comment.body)
    if not m.actionable:
        return None
    if len(m.heads) == 1 and m.heads[0] != head_sha:
        return None
    kind = "a diagnostic comment" if m.diagnostic else "a fallback (findings) comment" if m.findings else \
        f"a comment with {m.malformed} malformed opencode-review marker line(s)"
    if not m.heads:
        return f"{kind} that names no head (no head marker), so it cannot be placed on another head"
    if len(m.heads) > 1:
        return f"{kind} that names {len(m.heads)} heads, so it cannot be placed on another head"
    return f"{kind} for head {head_sha}: only a new head recovers"


def is_bound(config: TrustConfig, run: Run, head_sha: str) -> bool:
    """The run belongs to this pull request and exact head, by the API's association.

    A ``pull_requests[]`` entry with this number and head sha binds it. Its display title
    (the workflow's ``run-name``) binds it only when ``config.bind_by_run_name`` opts in: a
    title is text the run chose, not an association the API made.

    Raises:
        Nothing.
    """
    if any(ref.number == config.pr and ref.head_sha == head_sha for ref in run.pull_requests):
        return True
    return config.bind_by_run_name and run.display_title == config.run_name(head_sha)


def qualifying_runs(config: TrustConfig, runs: Iterable[Run], head_sha: str) -> tuple[Run, ...]:
    """Runs of the base-controlled workflow, pull_request_target, bound to this PR and head.

    Raises:
        Nothing.
    """
    return tuple(r for r in runs if r.event == TRUSTED_EVENT and r.path == config.workflow and is_bound(config, r, head_sha))


def latest_run(runs: Iterable[Run]) -> Run | None:
    """The latest generation, max (run_number, run_attempt, id); None if any attempt is missing.

    Raises:
        Nothing.
    """
    runs = tuple(runs)
    if not runs or any(r.run_attempt is None for r in runs):
        return None
    return max(runs, key=lambda r: (r.run_number, r.run_attempt or 0, r.id))


def _why_not_qualifying(config: TrustConfig, run: Run, head_sha: str) -> Verdict:
    if run.event != TRUSTED_EVENT:
        return false(C.RUN_WRONG_EVENT, f"run {run.id} named by the marker has event {run.event!r}, not {TRUSTED_EVENT!r}")
    if run.path != config.workflow:
        return false(C.RUN_WRONG_WORKFLOW, f"run {run.id} named by the marker has path {run.path!r}, not {config.workflow!r}")
    if config.bind_by_run_name:
        why = f", nor is its display title {config.run_name(head_sha)!r}"
    elif run.display_title == config.run_name(head_sha):
        why = " (only its display title names them, and the run-name binds only with --bind-by-run-name)"
    else:
        why = ""
    return false(C.RUN_NOT_BOUND, f"run {run.id} named by the marker is not bound to PR #{config.pr} head {head_sha}: "
                                  f"no pull_requests entry has this number and head{why}")


def _blocking_reason(review: Review) -> str | None:
    """Why a review by the App on the head is not clean, or None if it is clean."""
    if review.state != CLEAN_STATE:
        return f"state {review.state!r} is not {CLEAN_STATE!r}"
    m = parse_markers(review.body)
    if m.diagnostic:
        return "it carries the diagnostic marker"
    if m.findings:
        return "it carries a findings marker"
    if m.malformed:
        return f"it carries {m.malformed} malformed opencode-review marker line(s)"
    if m.clean != 1:
        return "it has no clean marker" if m.clean == 0 else "it has more than one clean marker"
    # A head marker is optional in a review (its commit_id binds it); one that contradicts it is not.
    if m.heads and m.heads != (review.commit_id,):
        return "its head marker does not name exactly its commit"
    return None


def decide(config: TrustConfig, evidence: Evidence) -> Verdict:
    """The canonical ``trusted_producer`` verdict for ``evidence`` under ``config``.

    Raises:
        Nothing: pure; every outcome, a missing or failed read included, is the returned
        verdict (``false`` or ``unknown`` with its reason code).
    """
    try:
        return _decide(config, evidence)
    except _Stop as stop:
        return stop.verdict


def _decide(config: TrustConfig, ev: Evidence) -> Verdict:
    """The steps in order; a step that decides raises :class:`_Stop` with its verdict."""
    # (1) The pull request, explicitly known same-repository.
    pr = _read(ev.pull_request, "the pull request")
    _check_pr(config, pr, "the pull request")
    head = pr.head_sha
    _check_comments(config, ev, head)
    latest_review, marker = _check_reviews(config, ev, pr)
    latest = _check_runs(config, ev, head, marker)
    _check_job(config, ev, latest)
    env = _check_environment(config, ev)
    _check_final(config, ev, pr)
    return true(
        f"clean, unedited review {latest_review.id} by {config.app_login} on head {head} and base {pr.base_sha}, "
        f"run {latest.id} attempt {latest.run_attempt} and job {config.job!r} succeeded, "
        f"environment {config.environment!r} restricts deployments ({env.branch_policy})"
    )


def _check_comments(config: TrustConfig, ev: Evidence, head: str) -> None:
    """(2) The issue comments: a diagnostic or fallback (findings) comment by exactly the App for
    this head is a known failure, even beside a clean review: the trusted job leaves such a
    comment when it could not post its review, so the comment is that run's outcome. Read
    before the reviews so the comment, not the missing review, is what is reported.
    No-findings comments and comments about another head are ignored (non-actionable)."""
    comments = _unique(_read(ev.issue_comments, "the issue comments"), "issue comment")
    for comment in sorted(comments, key=lambda c: c.id):
        why = blocking_comment(config, comment, head)
        if why is not None:
            raise _Stop(false(C.BLOCKING_COMMENT, f"issue comment {comment.id} by {config.app_login} is {why}"))


def _check_reviews(config: TrustConfig, ev: Evidence, pr: PullRequest) -> tuple[Review, tuple[int, int]]:
    """(3) Every review by exactly the configured App login on exactly the current head; the latest
    clean one and the workflow run (id, attempt) its marker names."""
    head = pr.head_sha
    reviews = _unique(_read(ev.reviews, "the reviews"), "review")
    mine = app_reviews(config, reviews, head)
    if not mine:
        raise _Stop(false(C.NO_TRUSTED_REVIEW, f"no review by {config.app_login} on head {head}"))
    # (3a) Any non-clean one blocks, even if a later clean review exists: only a new head recovers.
    for review in mine:
        why = _blocking_reason(review)
        if why is not None:
            raise _Stop(false(C.BLOCKING_REVIEW, f"review {review.id} by {config.app_login} on head {head} is not clean: {why}"))
    latest_review = mine[-1]
    marker = _run_marker(latest_review)
    _check_base_marker(latest_review, pr)
    _check_unedited(config, ev, mine, head)
    return latest_review, marker


def _run_marker(latest_review: Review) -> tuple[int, int]:
    """(3b) The latest clean review names exactly one workflow run and attempt."""
    run_markers = parse_markers(latest_review.body).runs
    if not run_markers:
        raise _Stop(false(C.RUN_MARKER_MISSING, f"review {latest_review.id} has no workflow-run marker"))
    if len(run_markers) > 1:
        raise _Stop(false(C.RUN_MARKER_AMBIGUOUS, f"review {latest_review.id} has {len(run_markers)} workflow-run markers"))
    return run_markers[0]


def _check_base_marker(latest_review: Review, pr: PullRequest) -> None:
    """(3c) The run reviewed BASE_SHA...HEAD_SHA: the head is the review's commit_id, the base
    is its base marker, and both must be the pull request's now. A PR retargeted after
    the run (say from a stacked branch to main) brings in commits the run never saw.
    The base *sha* is bound, not the ref name: the sha decides what BASE...HEAD covers,
    a ref name says nothing when its branch was reset or force-pushed, a retarget to
    another branch changes base.sha, and a retarget to a branch at the same commit
    changes nothing that was reviewed. A sha is also inert in a marker; a ref name may
    hold "-->" and other characters that could end the HTML comment early.
    A marker without a base (an older wrapper) never qualifies."""
    bases = parse_markers(latest_review.body).bases
    if not bases:
        raise _Stop(false(C.BASE_MARKER_MISSING, f"review {latest_review.id} has no base marker: it does not say which base it reviewed"))
    if len(bases) > 1:
        raise _Stop(false(C.BASE_MARKER_AMBIGUOUS, f"review {latest_review.id} has {len(bases)} base markers"))
    if bases[0] != pr.base_sha:
        raise _Stop(false(C.BASE_MISMATCH, f"review {latest_review.id} reviewed base {bases[0]}; the pull request's base is now {pr.base_sha} (retargeted or updated after the run)"))


def _check_unedited(config: TrustConfig, ev: Evidence, mine: tuple[Review, ...], head: str) -> None:
    """(3d) None of those reviews was ever edited. Anyone with write access to the repository
    can edit a review's body, the App's included, so an edited body proves nothing about
    what the App posted (a findings review turned clean, a marker rewritten). Checked
    after the body checks: an edit can only take `true` away, never give it."""
    edits = {e.id: e for e in _unique(_read(ev.review_edits, "the edit status of the reviews"), "review node")}
    for review in mine:
        edit = edits.get(review.id)
        if edit is None:
            raise _Stop(unknown(C.NOT_READ, f"the edit status of review {review.id} was not read"))
        if edit.edited:
            by = f" by {edit.editor}" if edit.editor else ""
            at = f" at {edit.last_edited_at}" if edit.last_edited_at else ""
            raise _Stop(false(C.REVIEW_EDITED, f"review {review.id} by {config.app_login} on head {head} was edited{by}{at}; an edited review is never evidence"))


def _check_runs(config: TrustConfig, ev: Evidence, head: str, marker: tuple[int, int]) -> Run:
    """(4) Runs of the configured workflow only: pull_request_target, base workflow path,
    bound to this PR and head (is_bound); the latest (run_number, run_attempt, id) generation,
    which must have succeeded and be the run and attempt the marker names."""
    marker_id, marker_attempt = marker
    runs = _unique(_read(ev.runs, "the workflow runs"), "workflow run")
    candidates = qualifying_runs(config, runs, head)
    named = next((r for r in runs if r.id == marker_id), None)
    if not candidates:
        if named is not None:
            raise _Stop(_why_not_qualifying(config, named, head))
        raise _Stop(false(C.NO_MATCHING_RUN, f"no {TRUSTED_EVENT} run of {config.workflow} is bound to PR #{config.pr} head {head}"))
    missing = [r.id for r in candidates if r.run_attempt is None]
    if missing:
        raise _Stop(unknown(C.MISSING_RUN_ATTEMPT, f"run {missing[0]} has no run_attempt; the latest generation cannot be known"))
    latest = latest_run(candidates)
    assert latest is not None and latest.run_attempt is not None  # every candidate has an attempt
    # (4a) Pending, cancelled, skipped, neutral or failed latest attempts invalidate old evidence.
    if latest.status != COMPLETED or latest.conclusion is None:
        raise _Stop(unknown(C.RUN_PENDING, f"latest run {latest.id} attempt {latest.run_attempt} is {latest.status or 'without status'}"))
    if latest.conclusion != SUCCESS:
        raise _Stop(false(C.RUN_NOT_SUCCESS, f"latest run {latest.id} attempt {latest.run_attempt} concluded {latest.conclusion!r}"))
    # (4b) The marker names exactly that run and attempt.
    if (marker_id, marker_attempt) != (latest.id, latest.run_attempt):
        if marker_id == latest.id and marker_attempt < latest.run_attempt:
            raise _Stop(false(C.STALE_ATTEMPT, f"marker names attempt {marker_attempt} of run {marker_id}; the latest attempt is {latest.run_attempt}"))
        if named is not None and named not in candidates:
            raise _Stop(_why_not_qualifying(config, named, head))
        raise _Stop(false(C.MARKER_MISMATCH, f"marker names run {marker_id} attempt {marker_attempt}; the latest is run {latest.id} attempt {latest.run_attempt}"))
    return latest


def _check_job(config: TrustConfig, ev: Evidence, latest: Run) -> None:
    """(5) The jobs of exactly that attempt: the configured job exactly once, completed/success."""
    jobs = _unique(_read(ev.jobs, f"the jobs of run {latest.id} attempt {latest.run_attempt}"), "job")
    for job in jobs:
        if job.run_attempt is None:
            raise _Stop(unknown(C.MISSING_RUN_ATTEMPT, f"job {job.id} has no run_attempt"))
        if (job.run_id, job.run_attempt) != (latest.id, latest.run_attempt):
            raise _Stop(unknown(C.LISTING_INCONSISTENT, f"job {job.id} belongs to run {job.run_id} attempt {job.run_attempt}, not the one asked for"))
    wanted = [j for j in jobs if j.name == config.job]
    if not wanted:
        raise _Stop(false(C.JOB_MISSING, f"run {latest.id} attempt {latest.run_attempt} has no job {config.job!r}"))
    if len(wanted) > 1:
        raise _Stop(false(C.JOB_AMBIGUOUS, f"run {latest.id} attempt {latest.run_attempt} has {len(wanted)} jobs named {config.job!r}"))
    job = wanted[0]
    if job.status != COMPLETED or job.conclusion is None:
        raise _Stop(unknown(C.JOB_PENDING, f"job {config.job!r} ({job.id}) is {job.status or 'without status'}"))
    if job.conclusion != SUCCESS:
        raise _Stop(false(C.JOB_NOT_SUCCESS, f"job {config.job!r} ({job.id}) concluded {job.conclusion!r}"))


def _check_environment(config: TrustConfig, ev: Evidence) -> Environment:
    """(6) The protected environment that holds the App's key must exist and restrict which
    branches may deploy to it. The API shows that much; it does not show where the
    secret lives (docs/evidence.md "What the environment check shows")."""
    # mypy infers `object` for a union of two results through _read's TypeVar; the value is one of the two.
    env = cast("Environment | AbsentEnvironment", _read(ev.environment, f"the environment {config.environment!r}"))
    if isinstance(env, AbsentEnvironment):
        raise _Stop(false(C.ENVIRONMENT_MISSING, f"the API answers 404 for environment {config.environment!r}: the protected environment that should hold the App's key does not exist"))
    if env.name != config.environment:
        raise _Stop(unknown(C.ENVIRONMENT_MISMATCH, f"the API answered for environment {env.name!r}, not {config.environment!r}"))
    if env.branch_policy is None:
        raise _Stop(false(C.ENVIRONMENT_UNPROTECTED, f"environment {config.environment!r} has no deployment branch policy: any branch may deploy to it"))
    return env


def _check_final(config: TrustConfig, ev: Evidence, pr: PullRequest) -> None:
    """(7) The authoritative final head read, made only after the Actions and environment reads."""
    final = _read(ev.final_pull_request, "the pull request (final re-read)")
    _check_pr(config, final, "the re-read pull request")
    if final.head_sha != pr.head_sha:
        raise _Stop(unknown(C.HEAD_MOVED, f"the head moved from {pr.head_sha} to {final.head_sha} during the evaluation"))
    if final.base_sha != pr.base_sha:
        raise _Stop(unknown(C.BASE_MOVED, f"the base moved from {pr.base_sha} to {final.base_sha} during the evaluation"))
