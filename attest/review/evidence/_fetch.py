"""The thin fetcher: hosting-API reads in the order the decision requires, fed to :func:`decide`.

Order (docs/evidence.md "The decision, step by step"): (1) the pull request, (2) every page of
its issue comments, (3) every page of its reviews, then, through GraphQL, whether any of the
App's reviews on the head was edited (REST has no edit marker), (4) the runs of the configured
workflow, (5) the jobs of exactly the latest attempt, (6) the protected environment (a 404 is
an answer: it does not exist), and only then (7) the authoritative final re-read of the pull
request. Before each read the decision is taken on what was read so far; once an earlier step
decides, later reads cannot change the verdict and are skipped. A read that fails becomes a
:class:`ReadFailure`, hence ``unknown``.

    >>> client = GitHubClient(DEFAULT_API_URL, token=os.environ["GH_TOKEN"], limits=HttpLimits())
    >>> evaluate(TrustConfig("octo/repo", 7, "opencode-review[bot]", DEFAULT_WORKFLOW, DEFAULT_JOB), client)  # doctest: +SKIP
"""

from __future__ import annotations

from dataclasses import replace
from urllib.parse import quote

from ._codes import EvidenceCode as C
from ._decide import app_reviews, decide, latest_run, qualifying_runs
from ._http import FetchFailed, GitHubClient
from ._model import (
    REVIEW_EDIT_SELECTION,
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
)

_PAGE = "per_page=100"


def _pr_path(config: TrustConfig) -> str:
    return f"/repos/{config.repo}/pulls/{config.pr}"


def _read_stage(config: TrustConfig, client: GitHubClient, stage: str, ev: Evidence) -> Evidence:
    """``ev`` with the field ``stage`` read (each stage's own type: the keyword names the field)."""
    repo = config.repo
    if stage == "pull_request":
        return replace(ev, pull_request=client.get_object(_pr_path(config), PullRequest.from_json))
    if stage == "final_pull_request":
        return replace(ev, final_pull_request=client.get_object(_pr_path(config), PullRequest.from_json))
    if stage == "issue_comments":
        # A pull request is an issue: its conversation comments are the issue's.
        return replace(ev, issue_comments=client.get_list(f"/repos/{repo}/issues/{config.pr}/comments?{_PAGE}", None,
                                                          IssueComment.from_json))
    if stage == "reviews":
        return replace(ev, reviews=client.get_list(f"{_pr_path(config)}/reviews?{_PAGE}", None, Review.from_json))
    if stage == "review_edits":
        # decide() asked for the edit status, so the reviews read passed: ask for exactly the
        # App's reviews on this head, each node id once.
        assert isinstance(ev.pull_request, PullRequest) and isinstance(ev.reviews, tuple)
        ids = dict.fromkeys(r.node_id for r in app_reviews(config, ev.reviews, ev.pull_request.head_sha))
        return replace(ev, review_edits=client.get_nodes(tuple(ids), REVIEW_EDIT_SELECTION, ReviewEdit.from_json))
    if stage == "runs":
        workflow = quote(config.workflow_file, safe="")
        return replace(ev, runs=client.get_list(f"/repos/{repo}/actions/workflows/{workflow}/runs?event=pull_request_target&{_PAGE}",
                                                "workflow_runs", Run.from_json))
    if stage == "jobs":
        # decide() asked for the jobs, so the runs read passed and named this exact latest run.
        assert isinstance(ev.pull_request, PullRequest) and isinstance(ev.runs, tuple)
        run = latest_run(qualifying_runs(config, ev.runs, ev.pull_request.head_sha))
        assert run is not None and run.run_attempt is not None
        return replace(ev, jobs=client.get_list(f"/repos/{repo}/actions/runs/{run.id}/attempts/{run.run_attempt}/jobs?{_PAGE}",
                                                "jobs", Job.from_json))
    if stage == "environment":
        name = quote(config.environment, safe="")
        found = client.get_object_or_absent(f"/repos/{repo}/environments/{name}", Environment.from_json)
        return replace(ev, environment=AbsentEnvironment(config.environment) if found is None else found)
    raise AssertionError(stage)


STAGES = ("pull_request", "issue_comments", "reviews", "review_edits", "runs", "jobs", "environment", "final_pull_request")


def collect(config: TrustConfig, client: GitHubClient) -> tuple[Evidence, Verdict]:
    """Read the evidence stage by stage; return what was read and the verdict over it.

    Raises:
        Nothing on purpose: a failed read becomes a :class:`ReadFailure` and so an ``unknown``
        verdict (``HTTP_ERROR``, ``RESPONSE_SHAPE``, ...).
    """
    ev = Evidence()
    for stage in STAGES:
        verdict = decide(config, ev)
        if verdict.code is not C.NOT_READ:
            return ev, verdict
        try:
            ev = _read_stage(config, client, stage, ev)
        except FetchFailed as e:
            ev = replace(ev, **{stage: ReadFailure(e.code, e.detail)})  # every stage's field takes a ReadFailure
    return ev, decide(config, ev)


def evaluate(config: TrustConfig, client: GitHubClient) -> Verdict:
    """The ``trusted_producer`` verdict for ``config``'s pull request, read through ``client``.

    Raises:
        Nothing on purpose: every failure is the returned verdict's code (see :func:`collect`).
    """
    return collect(config, client)[1]
