"""`attest merge-gate merge`: merge an authorized pull request through the head-pinned merge call only, then check the merge commit.

1. **authorized**: the caller passes the merge gate's decision; nothing else merges;
2. **before**: the pull request is read: still the gate's pull request by GitHub's ids
   (``PLATFORM_RESPONSE_SHAPE``, as every read of it here), the decided head and base (``MERGE_HEAD_MOVED``),
   and GitHub's test merge (``merge_commit_sha``) is of exactly that base and head
   (``MERGE_MERGEABILITY_UNKNOWN`` while GitHub has not recomputed it); its tree is what the merge
   must produce;
3. **merge**: ``PUT /repos/{repo}/pulls/{n}/merge`` with ``sha`` = the decided head, so GitHub
   refuses if the head moved (409: ``MERGE_HEAD_MOVED``; 405 or 422: ``MERGE_REFUSED``). A lost
   answer (none in time, a server error, one too large or not JSON, or a 200 without
   ``merged: true`` and the commit) is resolved by reading the pull request back
   (``MERGE_UNCONFIRMED`` when not merged); the merge is never sent twice;
4. **after**: the merge commit, read from the API, must be the reviewed head merged into the
   decided base (:func:`decide_merge_commit`: parents ``[base, head]`` for a merge, ``[base]`` for
   a squash, and the test merge's tree), the pull request must say merged by that commit, and the
   base branch must be at it (``MERGE_COMMIT_MISMATCH`` otherwise, and when these cannot be read
   back: it is merged, but not known to be as reviewed).

GitHub's merge call pins the head, not the base: a push to the base between step 2 and step 3
is merged under; step 4 reports it (the first parent is not the decided base).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ...errors import EnvironmentFailure, InputError, VerificationError
from ..evidence._model import _printable
from ._api import GitCommit, GitHubPlatform, NoAnswer, PullRequestState
from ._codes import PlatformCode as C

if TYPE_CHECKING:
    from ..merge import MergeGate

MERGE_METHODS = ("merge", "squash")
_SHA = re.compile(r"(?:[0-9a-f]{40}|[0-9a-f]{64})\Z")


def decide_merge_commit(method: str, commit: GitCommit, *, base: str, head: str, tree: str) -> list[str]:
    """What is wrong with ``commit`` as the ``method`` merge of ``head`` into ``base`` with ``tree`` (pure; empty: nothing).

    Raises:
        Nothing.
    """
    parents = (base, head) if method == "merge" else (base,)
    wrong = []
    if commit.parents != parents:
        wrong.append(f"its parents are {', '.join(commit.parents) or 'none'}, not {', '.join(parents)}")
    if commit.tree != tree:
        wrong.append(f"its tree is {commit.tree}, not {tree} (GitHub's merge of the reviewed head into the base)")
    return wrong


@dataclass(frozen=True, slots=True)
class Merged:
    """The merge that :func:`merge_pull_request` made and checked.

    Raises:
        Nothing.
    """

    sha: str
    method: str
    head: str
    base: str
    tree: str

    def to_json(self) -> dict[str, object]:
        return {"ok": True, "merged": True, "merge_commit": self.sha, "method": self.method, "head": self.head, "base": self.base,
                "tree": self.tree, "post_merge": {"parents": "ok", "tree": "ok", "pull_request": "merged"}}


def _merge_sha(answer: object) -> str | None:
    if not (isinstance(answer, dict) and answer.get("merged") is True and isinstance(answer.get("sha"), str)
            and _SHA.match(answer["sha"])):
        return None
    return str(answer["sha"])


def _pull(gh: GitHubPlatform, gate: MergeGate, when: str) -> PullRequestState:
    """The pull request read now, which must be the gate's by GitHub's ids (not only by number and name)."""
    pr = gh.pull()
    want = (gate.record.pull_request_id, gate.record.repository_id)
    if (pr.id, pr.base_repository_id) != want:
        raise EnvironmentFailure(C.PLATFORM_RESPONSE_SHAPE, f"{when}, GET {gh.pr_path} answered pull request id {pr.id} of "
                                 f"repository id {pr.base_repository_id}; the gate decided on pull request id {want[0]} of "
                                 f"repository id {want[1]}")
    return pr


def _merged_by(gh: GitHubPlatform, gate: MergeGate, why: str) -> str:
    """The merge commit of a merge call without a usable answer, read back (``MERGE_UNCONFIRMED``: not merged)."""
    after = _pull(gh, gate, "after the merge call")
    if not after.merged or after.merge_commit_sha is None:
        raise VerificationError(C.MERGE_UNCONFIRMED, f"{why} and the pull request is not merged: nothing is sent again; look "
                                "at the pull request, then run the gate again")
    return after.merge_commit_sha


def merge_pull_request(gate: MergeGate, gh: GitHubPlatform, *, base: str, method: str = "merge") -> Merged:
    """Run steps 2-4 of the module docstring for an authorized ``gate`` whose decided base is ``base``.

    Raises:
        InputError: ``MERGE_BAD_METHOD``.
        VerificationError: ``MERGE_HEAD_MOVED``, ``MERGE_MERGEABILITY_UNKNOWN``, ``MERGE_REFUSED``,
            ``MERGE_UNCONFIRMED``, ``MERGE_COMMIT_MISMATCH``; an unauthorized ``gate`` is refused with
            ``MERGE_REFUSED`` before anything is read or sent.
        EnvironmentFailure: ``PLATFORM_REQUEST_FAILED``, ``PLATFORM_RESPONSE_SHAPE``.
    """
    if method not in MERGE_METHODS:
        raise InputError(C.MERGE_BAD_METHOD, f"--method must be one of {', '.join(MERGE_METHODS)}, not {_printable(method, 40)!r} "
                         "(a rebase merge makes new commits nobody reviewed)")
    if not gate.authorized:
        raise VerificationError(C.MERGE_REFUSED, "the merge gate did not authorize this merge")
    head = gate.head
    # 2. Before: the decided head and base, and GitHub's test merge of exactly them.
    pr = _pull(gh, gate, "before the merge")
    if (pr.head_sha, pr.base_sha) != (head, base):
        raise VerificationError(C.MERGE_HEAD_MOVED, f"the pull request is now head {pr.head_sha} on base {pr.base_sha}; the gate "
                                f"authorized head {head} on base {base}: run the gate again")
    if pr.merge_commit_sha is None:
        raise VerificationError(C.MERGE_MERGEABILITY_UNKNOWN, "GitHub reports no test merge for the pull request yet: run again")
    trial = gh.commit(pr.merge_commit_sha)
    if trial.parents != (base, head):
        raise VerificationError(C.MERGE_MERGEABILITY_UNKNOWN, f"GitHub's test merge {trial.sha} is of {', '.join(trial.parents)}, "
                                f"not of the base {base} and the head {head} (not recomputed yet): run again")
    # 3. The head-pinned merge, once.
    try:
        status, answer = gh.merge(head, method)
    except NoAnswer as e:
        sha = _merged_by(gh, gate, f"the merge call got no answer ({e.detail})")
    else:
        message = answer.get("message") if isinstance(answer, dict) else None
        why = f": {_printable(message, 200)}" if isinstance(message, str) else ""
        if status == 409:
            raise VerificationError(C.MERGE_HEAD_MOVED, f"GitHub refused the merge pinned to head {head} (409{why}): the head "
                                    "moved; nothing was merged")
        if status != 200:
            raise VerificationError(C.MERGE_REFUSED, f"GitHub refused the merge ({status}{why}): nothing was merged")
        sha = _merge_sha(answer) or _merged_by(gh, gate, "GitHub answered the merge (200) without `merged: true` and a full "
                                                         "commit id")
    # 4. After: the merge commit is the reviewed head merged into the decided base, the pull request says so, and the
    # base branch is at it (an API that says merged, by a commit that is nowhere on the base, is not believed).
    try:
        commit = gh.commit(sha)
        after = _pull(gh, gate, "after the merge")
        branch = gh.branch(pr.base_ref)
    except EnvironmentFailure as e:
        raise VerificationError(C.MERGE_COMMIT_MISMATCH, f"MERGED (GitHub says by {sha}), but the post-merge check could not "
                                f"read it back ({e.code}: {e.detail}): it is not known to be the reviewed head merged into the "
                                "base. Investigate the base branch now") from e
    wrong = decide_merge_commit(method, commit, base=base, head=head, tree=trial.tree)
    if not after.merged or after.merge_commit_sha != sha:
        wrong.append(f"the pull request says merged={after.merged} by {after.merge_commit_sha}, not by {sha}")
    if branch != sha:
        wrong.append(f"the base branch {_printable(pr.base_ref, 100)} is at {branch}, not at it")
    if wrong:
        raise VerificationError(C.MERGE_COMMIT_MISMATCH, f"MERGED, but not as reviewed: the merge commit {sha} " + "; ".join(wrong)
                                + ". Investigate the base branch now")
    return Merged(sha, method, head, base, trial.tree)


__all__ = ["MERGE_METHODS", "Merged", "decide_merge_commit", "merge_pull_request"]
