"""Best common ancestors of two commits, computed from re-hashed commit objects.

``git merge-base --all`` answers from whatever git consults (a commit-graph file, grafts, a
``shallow`` file, replace refs); this module answers from the commit objects alone, each read
through :meth:`GitRepo.read_object` (so re-hashed) and parsed here for its parents. The walk is
bounded (``max_commits``): a longer history is an error (``HISTORY_TOO_LONG``), never a guess.

    >>> with GitRepo.open("repo") as repo:
    ...     bases = best_common_ancestors(repo, base_sha, head_sha)    # like merge-base --all
    ...     merge_base = require_single_merge_base(bases)              # none or several: raises

The review procedure needs exactly one best common ancestor: unrelated histories
(``NO_MERGE_BASE``) and criss-cross histories (``MULTIPLE_MERGE_BASES``) fail closed; one base
is never picked from several and no virtual base is synthesized (docs/git-ancestry.md "Best common ancestors").
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import VerificationError
from ._codes import GitCode
from ._objects import ObjectFormat, is_full_sha, parse_commit_tree, verify_full_sha
from ._repo import GitRepo, verify_not_shallow

DEFAULT_MAX_COMMITS = 100_000

# Paint flags (git's commit-reach.c names): reachable from a, from b, and "a proper ancestor of
# a common ancestor" (so never a best one).
_FROM_A = 1
_FROM_B = 2
_STALE = 4
_BOTH = _FROM_A | _FROM_B


@dataclass(frozen=True, slots=True)
class CommitHeader:
    """What the ancestry walk needs of a commit object: its tree, parents and committer time."""

    oid: str
    tree: str
    parents: tuple[str, ...]
    committer_time: int  # seconds since the epoch; 0 when absent or unparsable (ordering only)


def parse_commit_header(oid: str, data: bytes, fmt: ObjectFormat) -> CommitHeader:
    """Parse the header of a raw commit object: ``tree``, then its ``parent`` lines, then the rest.

    git reads parents only from the ``parent`` lines that directly follow ``tree``; a ``parent``
    header anywhere else is ignored by git, so it is refused here rather than interpreted
    (``MALFORMED_OBJECT``): two readers must never disagree about a commit's parents.
    """
    tree = parse_commit_tree(data, fmt)
    head, sep, _ = data.partition(b"\n\n")
    if not sep:
        raise VerificationError(GitCode.MALFORMED_OBJECT, f"commit {oid} has no blank line after its header")
    lines = head.split(b"\n")[1:]
    parents: list[str] = []
    i = 0
    while i < len(lines) and lines[i].startswith(b"parent "):
        parent = lines[i][7:].decode("ascii", "replace")
        if not is_full_sha(parent, fmt):
            raise VerificationError(GitCode.MALFORMED_OBJECT, f"commit {oid} names a malformed parent {parent[:80]!r}")
        if parent not in parents:  # git records a repeated parent once in its parent list
            parents.append(parent)
        i += 1
    committer_time = 0
    for line in lines[i:]:
        if line.startswith((b"parent ", b"tree ")):
            raise VerificationError(GitCode.MALFORMED_OBJECT, f"commit {oid} has a {line.split(b' ')[0].decode()!r} line out of place")
        if line.startswith(b"committer ") and not committer_time:
            committer_time = _timestamp(line)
    return CommitHeader(oid, tree, tuple(parents), committer_time)


def _timestamp(line: bytes) -> int:
    # "committer Name <email> 1577836800 +0000"; the time only orders the walk, never decides.
    _, _, tail = line.rpartition(b">")
    fields = tail.split()
    return int(fields[0]) if fields and fields[0].isdigit() and len(fields[0]) <= 18 else 0


class _Walk:
    """The commits read so far, each at most once, with the ``max_commits`` bound."""

    def __init__(self, repo: GitRepo, max_commits: int) -> None:
        self.repo = repo
        self.max_commits = max_commits
        self.commits: dict[str, CommitHeader] = {}

    def read(self, oid: str, child: str | None) -> CommitHeader:
        known = self.commits.get(oid)
        if known is not None:
            return known
        if len(self.commits) >= self.max_commits:
            raise VerificationError(GitCode.HISTORY_TOO_LONG, f"finding the merge bases needs more than {self.max_commits} "
                                    "commits; raise the bound (max_commits) if this history is expected")
        try:
            _, data = self.repo.read_object(oid, "commit")
        except VerificationError as e:
            if child is None or e.code != GitCode.OBJECT_MISSING:
                raise
            # A parent that is absent: a shallow clone cuts history exactly so. Say which it is.
            verify_not_shallow(self.repo)
            raise VerificationError(GitCode.OBJECT_MISSING, f"parent {oid} of commit {child} is not in the repository "
                                    "(a corrupt or incomplete object database)") from e
        header = parse_commit_header(oid, data, self.repo.object_format)
        self.commits[oid] = header
        return header


def best_common_ancestors(repo: GitRepo, a: str, b: str, *, max_commits: int = DEFAULT_MAX_COMMITS) -> tuple[str, ...]:
    """Every best common ancestor of commits ``a`` and ``b`` (``git merge-base --all``), sorted.

    A common ancestor is *best* when no other common ancestor reaches it. Empty for unrelated
    histories; ``(a,)`` when ``a == b`` or ``a`` is an ancestor of ``b``. Raises
    ``HISTORY_TOO_LONG`` when the walk would read more than ``max_commits`` commits,
    ``SHALLOW_REPOSITORY`` when it reaches the cut of a shallow clone, ``OBJECT_MISSING`` for any
    other absent commit.
    """
    if isinstance(max_commits, bool) or not isinstance(max_commits, int) or max_commits < 1:
        raise ValueError(f"max_commits must be a positive integer, not {max_commits!r}")
    for rev in (a, b):
        verify_full_sha(rev, repo.object_format, what="commit")
    walk = _Walk(repo, max_commits)
    flags: dict[str, int] = {}
    pending: set[str] = set()            # commits whose flags grew since they were last processed
    queue: list[tuple[int, str]] = []    # (-committer time, oid): newest first, like git; one entry per pending commit
    live = 0                             # pending commits that are not stale
    children: dict[str, str] = {}        # an unread stale commit -> the child that named it

    def mark(oid: str, add: int, child: str | None) -> None:
        nonlocal live
        old = flags.get(oid, 0)
        new = old | add
        if new == old:
            return
        flags[oid] = new
        if oid in pending:
            if not old & _STALE and new & _STALE:
                live -= 1
            return
        # A stale commit is read only if step (3) reaches it (ordered by its child's time until
        # then): below the newest common ancestors a shallow clone's cut does not matter.
        if new & _STALE and oid not in walk.commits:
            assert child is not None
            children.setdefault(oid, child)
            when = walk.commits[child].committer_time
        else:
            when = walk.read(oid, child).committer_time
            if not new & _STALE:
                live += 1
        pending.add(oid)
        heapq.heappush(queue, (-when, oid))

    def step() -> None:
        nonlocal live
        _, oid = heapq.heappop(queue)
        pending.remove(oid)
        f = flags[oid]
        if not f & _STALE:
            live -= 1
        if f & _BOTH == _BOTH:
            f |= _STALE  # the parents of a common ancestor are not best
        for parent in walk.read(oid, children.get(oid)).parents:
            mark(parent, f, oid)

    # (1) Paint down from both tips. Flags only grow and a commit is re-processed whenever they
    # do, so the result does not depend on the order (the time order only makes it short).
    mark(a, _FROM_A, None)
    mark(b, _FROM_B, None)
    # (2) Stop once every pending commit is stale: what lies below them is an ancestor of a
    # common ancestor already found. Every best common ancestor is now a candidate (reachable
    # from both, not stale); a candidate may still be an ancestor of another one.
    while live:
        step()
    candidates = [c for c, f in flags.items() if f & _BOTH == _BOTH and not f & _STALE]
    # (3) With several candidates, paint the stale frontier on until at most one is left
    # unstale or nothing is pending: staleness is then exact for every candidate. A history
    # criss-crossed for real is walked to its roots here, within max_commits.
    while pending and sum(1 for c in candidates if not flags[c] & _STALE) > 1:
        step()
    return tuple(sorted(c for c in candidates if not flags[c] & _STALE))


def require_single_merge_base(bases: Sequence[str]) -> str:
    """The one best common ancestor, or raise: none (``NO_MERGE_BASE``) or several
    (``MULTIPLE_MERGE_BASES``) fail closed; one of several is never chosen."""
    if isinstance(bases, str):
        raise TypeError("require_single_merge_base takes a sequence of commit ids, not one string")
    if not bases:
        raise VerificationError(GitCode.NO_MERGE_BASE, "the two commits have unrelated histories: no common ancestor")
    unique = sorted(set(bases))
    if len(unique) > 1:
        raise VerificationError(GitCode.MULTIPLE_MERGE_BASES, f"{len(unique)} best common ancestors (a criss-cross history): "
                                f"{', '.join(unique)}; merge or rebase so that exactly one remains")
    base = unique[0]
    verify_full_sha(base, None, what="merge base")
    return base


__all__ = ["DEFAULT_MAX_COMMITS", "CommitHeader", "best_common_ancestors", "parse_commit_header", "require_single_merge_base"]
