"""The merge gate on GitHub: what only the host knows, and the gate's decision as a commit status (docs/github.md).

:func:`github_gate_facts` is the merge gate's ``host_facts``: after the record, the CI results
and the host's identities were read, it reads the pull request (its state and mergeability),
every review thread (GraphQL ``reviewThreads``), and the pull request once more, last, and
:func:`decide_gate_facts` (pure) turns them into findings:

- ``MERGE_UNRESOLVED_THREADS``: any unresolved thread, outdated or not (a person resolves it);
- ``MERGE_NOT_MERGEABLE``: closed, already merged, or a conflict with the base;
- ``MERGE_MERGEABILITY_UNKNOWN``: GitHub has not computed mergeability yet (ask again);
- ``MERGE_HEAD_MOVED``: the head or base on any of these reads is not the one decided on.

:func:`publish_gate_status` posts the decision on the exact head as the ``attest/merge-gate``
status: ``success`` only when authorized; else ``pending`` when every reason is one that time
can clear (:data:`PENDING_CODES`), otherwise ``failure``; the description is the first reason.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from ...errors import EnvironmentFailure, Finding, VerificationError
from ..evidence._model import _printable
from ..merge import MergeGateCode
from ._api import GitHubPlatform, NoAnswer, PostedStatus, PullRequestState, ReviewThread
from ._codes import PlatformCode as C

if TYPE_CHECKING:
    from ..bootstrap import HostIdentity

STATUS_CONTEXT = "attest/merge-gate"
STATUS_DESCRIPTION_LIMIT = 140  # GitHub cuts a commit status's description at 140 characters
#: Reasons that a later run of the gate can find gone without anyone acting on the pull request.
PENDING_CODES = frozenset({MergeGateCode.MERGE_CI_MISSING, MergeGateCode.MERGE_ANALYSIS_UNFINISHED,
                           C.MERGE_MERGEABILITY_UNKNOWN})


@dataclass(frozen=True, slots=True)
class GateFacts:
    """The host's reads, in order: the pull request, its review threads, the pull request again."""

    pull: PullRequestState
    threads: tuple[ReviewThread, ...]
    final: PullRequestState


def decide_gate_facts(now: HostIdentity, facts: GateFacts) -> list[Finding]:
    """The host-only findings of the merge gate for the decided-on identity ``now`` (pure).

    Raises:
        Nothing.
    """
    found: list[Finding] = []
    unresolved = [t for t in facts.threads if not t.resolved]
    if unresolved:
        where = ", ".join(f"{t.path}{':' + str(t.line) if t.line else ''}{' (outdated)' if t.outdated else ''}" for t in unresolved[:5])
        more = f" and {len(unresolved) - 5} more" if len(unresolved) > 5 else ""
        found.append(Finding(C.MERGE_UNRESOLVED_THREADS, None, f"{len(unresolved)} review thread(s) unresolved ({where}{more}): "
                             "a person resolves each before the merge"))
    pr = facts.pull
    if pr.merged or pr.state != "open":
        found.append(Finding(C.MERGE_NOT_MERGEABLE, None, "the pull request is already merged" if pr.merged
                             else f"the pull request is {pr.state}"))
    elif pr.mergeable is None:
        found.append(Finding(C.MERGE_MERGEABILITY_UNKNOWN, None, "GitHub has not computed whether the pull request can be "
                             "merged yet: run the gate again"))
    elif not pr.mergeable:
        found.append(Finding(C.MERGE_NOT_MERGEABLE, None, f"GitHub says the head does not merge into the base "
                             f"(mergeable_state {pr.mergeable_state!r}): resolve the conflict; the new head is reviewed again"))
    moved = [(what, read) for what, read in (("on the gate's read", pr), ("on the final read", facts.final))
             if (read.head_sha, read.base_sha) != (now.head_sha, now.base_sha)]
    for what, read in moved:
        found.append(Finding(C.MERGE_HEAD_MOVED, None, f"{what} the pull request is head {read.head_sha} on base "
                             f"{read.base_sha}; the gate decided on head {now.head_sha} on base {now.base_sha}: run it again"))
    return found


def github_gate_facts(gh: GitHubPlatform) -> Callable[[HostIdentity], list[Finding]]:
    """The merge gate's ``host_facts`` for GitHub: read (pull request, threads, pull request again), then decide.

    Raises:
        Nothing itself; the callable raises ``PLATFORM_REQUEST_FAILED`` / ``PLATFORM_RESPONSE_SHAPE``.
    """
    def facts(now: HostIdentity) -> list[Finding]:
        pull = gh.pull()
        threads = gh.threads()
        final = gh.pull()  # last: the head the gate decides on is the head GitHub still has
        return decide_gate_facts(now, GateFacts(pull, threads, final))

    return facts


@dataclass(frozen=True, slots=True)
class GateStatus:
    """The commit status posted for a decision."""

    sha: str
    state: str
    description: str
    status_id: int

    def to_json(self) -> dict[str, object]:
        return {"context": STATUS_CONTEXT, "sha": self.sha, "state": self.state, "description": self.description,
                "id": self.status_id}


def _short(text: str) -> str:
    one = " ".join(text.split())
    return one if len(one) <= STATUS_DESCRIPTION_LIMIT else one[: STATUS_DESCRIPTION_LIMIT - 3] + "..."


def decide_status(authorized: bool, findings: Sequence[Finding]) -> tuple[str, str]:
    """The status (state, description) of a gate decision (pure).

    ``success`` only when authorized; ``pending`` when every finding is of :data:`PENDING_CODES`;
    else ``failure`` with the first finding that is not.

    Raises:
        Nothing.
    """
    if authorized:
        return "success", _short(findings[0].detail if findings else "authorized")
    if not findings:
        return "failure", "not authorized"
    hard = [f for f in findings if f.code not in PENDING_CODES]
    first = hard[0] if hard else findings[0]
    return ("failure" if hard else "pending"), _short(f"{first.code}: {first.detail}")


def publish_gate_status(gh: GitHubPlatform, sha: str, authorized: bool, findings: Sequence[Finding], *,
                        target_url: str | None = None) -> GateStatus:
    """Post the decision as the ``attest/merge-gate`` status on ``sha``; the answer must be that status, on ``sha``.

    Raises:
        VerificationError: ``STATUS_READBACK_MISMATCH``.
        EnvironmentFailure: ``PLATFORM_REQUEST_FAILED`` (a lost answer too: a status is posted
            again harmlessly by the next run, but this one is not known to be there).
    """
    state, description = decide_status(authorized, findings)
    try:
        posted: PostedStatus = gh.post_status(sha, state=state, description=description, context=STATUS_CONTEXT,
                                              target_url=target_url)
    except NoAnswer as e:
        raise EnvironmentFailure(C.PLATFORM_REQUEST_FAILED, f"posting the {STATUS_CONTEXT} status got no answer ({e.detail}); "
                                 "it may or may not be there: run the gate again") from e
    if (posted.state, posted.context) != (state, STATUS_CONTEXT):
        raise VerificationError(C.STATUS_READBACK_MISMATCH, f"GitHub answered the {state!r} {STATUS_CONTEXT} status with a "
                                f"{_printable(posted.state, 40)!r} status of context {_printable(posted.context, 100)!r}")
    on = urlsplit(posted.url or "").path
    if on.lower() != gh.statuses_path(sha).lower():
        raise VerificationError(C.STATUS_READBACK_MISMATCH, f"GitHub answered the {state!r} {STATUS_CONTEXT} status of {sha} "
                                f"with status {posted.id} at {_printable(on, 200)!r}: on another commit")
    return GateStatus(sha, state, description, posted.id)


__all__ = ["PENDING_CODES", "STATUS_CONTEXT", "GateFacts", "GateStatus", "decide_gate_facts", "decide_status",
           "github_gate_facts", "publish_gate_status"]
