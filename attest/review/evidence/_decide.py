"""The trusted-producer decision: a pure function from parsed evidence to a verdict.

No I/O, no clock. The steps follow ADR-2026-07-23 (opencode-review-evidence-trust) in order
and the first step that fails decides: a known failure is ``false``, incomplete evidence or
a failed read is ``unknown``, and ``true`` is reachable only through the last line.

    >>> decide(config, Evidence(pull_request=pr, reviews=(...), runs=(...), jobs=(...), final_pull_request=pr))
    Verdict(trusted=<Trust.TRUE: 'true'>, code=<EvidenceCode.TRUSTED: 'TRUSTED'>, ...)
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypeVar

from ._codes import EvidenceCode as C
from ._markers import parse_markers
from ._model import (
    TRUSTED_EVENT,
    Evidence,
    Job,
    PullRequest,
    ReadFailure,
    Review,
    Run,
    TrustConfig,
    Verdict,
    false,
    true,
    unknown,
)

_T = TypeVar("_T", Review, Run, Job)
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
    # ADR: only a PR *explicitly known* same-repository qualifies; a missing head repo is not known.
    if pr.head_repo is None or pr.head_repo != pr.base_repo:
        raise _Stop(false(C.NOT_SAME_REPO, f"head repository {pr.head_repo or '(missing)'} is not the base repository {pr.base_repo}"))


def is_bound(config: TrustConfig, run: Run, head_sha: str) -> bool:
    """The run belongs to this pull request and exact head: by run-name or a PR entry."""
    if run.display_title == config.run_name(head_sha):
        return True
    return any(ref.number == config.pr and ref.head_sha == head_sha for ref in run.pull_requests)


def qualifying_runs(config: TrustConfig, runs: Iterable[Run], head_sha: str) -> tuple[Run, ...]:
    """Runs of the base-controlled workflow, pull_request_target, bound to this PR and head."""
    return tuple(r for r in runs if r.event == TRUSTED_EVENT and r.path == config.workflow and is_bound(config, r, head_sha))


def latest_run(runs: Iterable[Run]) -> Run | None:
    """The latest generation, max (run_number, run_attempt, id); None if any attempt is missing."""
    runs = tuple(runs)
    if not runs or any(r.run_attempt is None for r in runs):
        return None
    return max(runs, key=lambda r: (r.run_number, r.run_attempt or 0, r.id))


def _why_not_qualifying(config: TrustConfig, run: Run, head_sha: str) -> Verdict:
    if run.event != TRUSTED_EVENT:
        return false(C.RUN_WRONG_EVENT, f"run {run.id} named by the marker has event {run.event!r}, not {TRUSTED_EVENT!r}")
    if run.path != config.workflow:
        return false(C.RUN_WRONG_WORKFLOW, f"run {run.id} named by the marker has path {run.path!r}, not {config.workflow!r}")
    return false(C.RUN_NOT_BOUND, f"run {run.id} named by the marker is not bound to PR #{config.pr} head {head_sha}")


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
    return None


def decide(config: TrustConfig, evidence: Evidence) -> Verdict:
    """The canonical ``trusted_producer`` verdict for ``evidence`` under ``config``."""
    try:
        return _decide(config, evidence)
    except _Stop as stop:
        return stop.verdict


def _decide(config: TrustConfig, ev: Evidence) -> Verdict:
    # (1) The pull request, explicitly known same-repository.
    pr = _read(ev.pull_request, "the pull request")
    _check_pr(config, pr, "the pull request")
    head = pr.head_sha

    # (2) Every review by exactly the configured App login on exactly the current head.
    #     Display names never count: only the raw login is compared, byte for byte.
    reviews = _unique(_read(ev.reviews, "the reviews"), "review")
    mine = sorted((r for r in reviews if r.login == config.app_login and r.commit_id == head), key=lambda r: r.id)
    if not mine:
        return false(C.NO_TRUSTED_REVIEW, f"no review by {config.app_login} on head {head}")
    # (2a) Any non-clean one blocks, even if a later clean review exists: only a new head recovers.
    for review in mine:
        why = _blocking_reason(review)
        if why is not None:
            return false(C.BLOCKING_REVIEW, f"review {review.id} by {config.app_login} on head {head} is not clean: {why}")
    # (2b) The latest clean review names exactly one workflow run and attempt.
    latest_review = mine[-1]
    run_markers = parse_markers(latest_review.body).runs
    if not run_markers:
        return false(C.RUN_MARKER_MISSING, f"review {latest_review.id} has no workflow-run marker")
    if len(run_markers) > 1:
        return false(C.RUN_MARKER_AMBIGUOUS, f"review {latest_review.id} has {len(run_markers)} workflow-run markers")
    marker_id, marker_attempt = run_markers[0]

    # (3) Runs of the configured workflow only: pull_request_target, base workflow path,
    #     bound to this PR and head; the latest (run_number, run_attempt, id) generation.
    runs = _unique(_read(ev.runs, "the workflow runs"), "workflow run")
    candidates = qualifying_runs(config, runs, head)
    named = next((r for r in runs if r.id == marker_id), None)
    if not candidates:
        if named is not None:
            return _why_not_qualifying(config, named, head)
        return false(C.NO_MATCHING_RUN, f"no {TRUSTED_EVENT} run of {config.workflow} is bound to PR #{config.pr} head {head}")
    missing = [r.id for r in candidates if r.run_attempt is None]
    if missing:
        return unknown(C.MISSING_RUN_ATTEMPT, f"run {missing[0]} has no run_attempt; the latest generation cannot be known")
    latest = latest_run(candidates)
    assert latest is not None and latest.run_attempt is not None  # every candidate has an attempt
    # (3a) Pending, cancelled, skipped, neutral or failed latest attempts invalidate old evidence.
    if latest.status != COMPLETED or latest.conclusion is None:
        return unknown(C.RUN_PENDING, f"latest run {latest.id} attempt {latest.run_attempt} is {latest.status or 'without status'}")
    if latest.conclusion != SUCCESS:
        return false(C.RUN_NOT_SUCCESS, f"latest run {latest.id} attempt {latest.run_attempt} concluded {latest.conclusion!r}")
    # (3b) The marker names exactly that run and attempt.
    if (marker_id, marker_attempt) != (latest.id, latest.run_attempt):
        if marker_id == latest.id and marker_attempt < latest.run_attempt:
            return false(C.STALE_ATTEMPT, f"marker names attempt {marker_attempt} of run {marker_id}; the latest attempt is {latest.run_attempt}")
        if named is not None and named not in candidates:
            return _why_not_qualifying(config, named, head)
        return false(C.MARKER_MISMATCH, f"marker names run {marker_id} attempt {marker_attempt}; the latest is run {latest.id} attempt {latest.run_attempt}")

    # (4) The jobs of exactly that attempt: the configured job exactly once, completed/success.
    jobs = _unique(_read(ev.jobs, f"the jobs of run {latest.id} attempt {latest.run_attempt}"), "job")
    for job in jobs:
        if job.run_attempt is None:
            return unknown(C.MISSING_RUN_ATTEMPT, f"job {job.id} has no run_attempt")
        if (job.run_id, job.run_attempt) != (latest.id, latest.run_attempt):
            return unknown(C.LISTING_INCONSISTENT, f"job {job.id} belongs to run {job.run_id} attempt {job.run_attempt}, not the one asked for")
    wanted = [j for j in jobs if j.name == config.job]
    if not wanted:
        return false(C.JOB_MISSING, f"run {latest.id} attempt {latest.run_attempt} has no job {config.job!r}")
    if len(wanted) > 1:
        return false(C.JOB_AMBIGUOUS, f"run {latest.id} attempt {latest.run_attempt} has {len(wanted)} jobs named {config.job!r}")
    job = wanted[0]
    if job.status != COMPLETED or job.conclusion is None:
        return unknown(C.JOB_PENDING, f"job {config.job!r} ({job.id}) is {job.status or 'without status'}")
    if job.conclusion != SUCCESS:
        return false(C.JOB_NOT_SUCCESS, f"job {config.job!r} ({job.id}) concluded {job.conclusion!r}")

    # (5) The authoritative final head read, made only after the Actions reads.
    final = _read(ev.final_pull_request, "the pull request (final re-read)")
    _check_pr(config, final, "the re-read pull request")
    if final.head_sha != head:
        return unknown(C.HEAD_MOVED, f"the head moved from {head} to {final.head_sha} during the evaluation")

    return true(
        f"clean review {latest_review.id} by {config.app_login} on head {head}, "
        f"run {latest.id} attempt {latest.run_attempt} and job {config.job!r} succeeded"
    )
