"""Trusted review evidence from the hosting API, and the review wrapper's output contract.

Implements docs/evidence.md "attest evidence trusted-producer" and "attest evidence wrap".
:func:`decide` is the pure trust decision over parsed evidence, in the steps of docs/evidence.md
"The decision, step by step"; :func:`evaluate` reads that evidence from the GitHub REST API (the
pull request, its issue comments and reviews, the workflow's runs, the latest attempt's jobs,
the protected environment, the pull request again; through GraphQL, whether a review was
edited) in the required order and decides;
:func:`wrap_output` turns a model's raw output into the exact-head review the trusted wrapper
posts.

    >>> from attest.review.evidence import TrustConfig, GitHubClient, HttpLimits, evaluate
    >>> config = TrustConfig("octo/repo", 7, "opencode-review[bot]", DEFAULT_WORKFLOW, DEFAULT_JOB)
    >>> evaluate(config, GitHubClient(DEFAULT_API_URL, token=None, limits=HttpLimits())).trusted  # doctest: +SKIP
    <Trust.TRUE: 'true'>
"""

from __future__ import annotations

from ._codes import EvidenceCode
from ._decide import blocking_comment, decide, is_bound, latest_run, qualifying_runs
from ._fetch import collect, evaluate
from ._http import DEFAULT_API_URL, GitHubClient, HttpLimits
from ._markers import Markers, parse_markers
from ._model import (
    DEFAULT_ENVIRONMENT,
    DEFAULT_JOB,
    DEFAULT_WORKFLOW,
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
    Trust,
    TrustConfig,
    Verdict,
)
from ._wrap import MAX_OUTPUT_BYTES, ReviewFinding, WrapResult, wrap_failure, wrap_output

__all__ = [
    "DEFAULT_API_URL",
    "DEFAULT_ENVIRONMENT",
    "DEFAULT_JOB",
    "DEFAULT_WORKFLOW",
    "MAX_OUTPUT_BYTES",
    "AbsentEnvironment",
    "Environment",
    "Evidence",
    "EvidenceCode",
    "GitHubClient",
    "HttpLimits",
    "IssueComment",
    "Job",
    "Markers",
    "PullRequest",
    "ReadFailure",
    "Review",
    "ReviewEdit",
    "ReviewFinding",
    "Run",
    "Trust",
    "TrustConfig",
    "Verdict",
    "WrapResult",
    "blocking_comment",
    "collect",
    "decide",
    "evaluate",
    "is_bound",
    "latest_run",
    "parse_markers",
    "qualifying_runs",
    "wrap_failure",
    "wrap_output",
]
