"""The hosting platform's adapter (GitHub): publishing the review, the gate's status, the head-pinned merge, the trusted workflow.

The review layer decides; this package only talks to the host about what was decided, through
the review layer's one HTTP client (:class:`~attest.review.evidence.GitHubClient`: no redirect
followed, one deadline and a size cap per answer, nothing retried, the token only in the
``Authorization`` header):

- :func:`publish_review` (``attest review publish``) posts a signed record's payload as the pull
  request's review, exactly once, and reads it back (docs/github.md "Publishing the review");
- :func:`github_gate_facts` adds to the merge gate what only the host knows (unresolved review
  threads, mergeability, the head on a final read), and :func:`publish_gate_status` posts the
  gate's decision as the ``attest/merge-gate`` commit status (docs/github.md "The merge gate on
  GitHub");
- :func:`merge_pull_request` (``attest merge-gate merge``) merges through the head-pinned merge
  call only and verifies the merge commit (docs/github.md "Merging");
- :func:`write_workflow` (``attest init github``) writes the consumer's trusted review workflow
  (docs/github.md "The generated workflow").
"""

from __future__ import annotations

from ._api import GitHubPlatform, PullRequestState
from ._codes import PlatformCode
from ._gate import STATUS_CONTEXT, GateStatus, decide_gate_facts, decide_status, github_gate_facts, publish_gate_status
from ._merge import MERGE_METHODS, Merged, decide_merge_commit, merge_pull_request
from ._publish import Published, decide_existing, publish_review, record_marker
from ._workflow import (
    WORKFLOW_PATH,
    WorkflowCode,
    WorkflowOptions,
    WrittenWorkflow,
    options_from,
    render_workflow,
    write_workflow,
)

__all__ = [
    "MERGE_METHODS",
    "STATUS_CONTEXT",
    "WORKFLOW_PATH",
    "GateStatus",
    "GitHubPlatform",
    "Merged",
    "PlatformCode",
    "Published",
    "PullRequestState",
    "WorkflowCode",
    "WorkflowOptions",
    "WrittenWorkflow",
    "decide_existing",
    "decide_gate_facts",
    "decide_merge_commit",
    "decide_status",
    "github_gate_facts",
    "merge_pull_request",
    "options_from",
    "publish_gate_status",
    "publish_review",
    "record_marker",
    "render_workflow",
    "write_workflow",
]
