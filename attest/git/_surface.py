"""The changed surface between two commits (merge base -> head), computed from objects.

Every path whose entry differs between the two root trees, found by recursing into the trees
that differ, each with its status, modes and blob ids; for regular text files the changed line
ranges on each side (LEFT: the merge-base side, RIGHT: the head side), from a deterministic
minimal line diff. Trees and blobs are read through :meth:`GitRepo.read_object` (re-hashed);
symbolic links and gitlinks are reported, never read or followed.

    >>> with GitRepo.open("repo") as repo:
    ...     surface = changed_surface(repo, merge_base, head)
    ...     [(p.path, p.status) for p in surface.paths]        # [("src/a.py", "modified"), ...]
    ...     surface.get("src/a.py").is_changed_line("RIGHT", 12)

Renames are not detected: a renamed file is a ``deleted`` path plus an ``added`` one (what
``git diff --no-renames`` shows). See docs/git-ancestry.md.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from ..errors import VerificationError
from ._codes import GitCode
from ._objects import MODE_EXEC, MODE_FILE, MODE_GITLINK, MODE_SYMLINK, TreeEntry, verify_full_sha
from ._repo import MAX_DEPTH, MAX_ENTRIES, GitRepo

Status = Literal["added", "deleted", "modified", "type-changed"]
# Why a changed path has (or lacks) line ranges:
#   text         both present sides are UTF-8 without NUL and within the size cap: hunks are exact
#   binary       a side holds a NUL byte
#   non-utf8     a side is not valid UTF-8
#   oversized    a side is larger than max_text_bytes
#   too-complex  the line diff needs more work than max_diff_cost
#   not-a-file   a side is a symbolic link or a gitlink (never read)
Content = Literal["text", "binary", "non-utf8", "oversized", "too-complex", "not-a-file"]
Side = Literal["LEFT", "RIGHT"]

DEFAULT_MAX_TEXT_BYTES = 1024 * 1024
DEFAULT_MAX_DIFF_COST = 1_000_000          # per file: about half a second of work
DEFAULT_MAX_TOTAL_DIFF_COST = 20_000_000   # per surface: every file's line diff together

_STATUSES = ("added", "deleted", "modified", "type-changed")
_CONTENTS = ("text", "binary", "non-utf8", "oversized", "too-complex", "not-a-file")
_REGULAR = (MODE_FILE, MODE_EXEC)


@dataclass(frozen=True, slots=True)
class Hunk:
    """One changed region, numbered as a ``git diff -U0`` hunk header ``@@ -l,s +r,t @@``.

    Lines are 1-based. A side with a count of 0 changes no line there, and its start is the
    line *before* the change (0 at the top of the file), as in git.
    """

    left_start: int
    left_count: int
    right_start: int
    right_count: int

    def __post_init__(self) -> None:
        if min(self.left_start, self.left_count, self.right_start, self.right_count) < 0 or \
                not (self.left_count or self.right_count) or \
                (self.left_count and not self.left_start) or (self.right_count and not self.right_start):
            raise ValueError(f"not a hunk: {self!r}")

    def lines(self, side: Side) -> range:
        """The changed line numbers on ``side`` (empty when that side only gains or loses lines)."""
        start, count = (self.left_start, self.left_count) if side == "LEFT" else (self.right_start, self.right_count)
        return range(start, start + count) if count else range(0)

    def to_json(self) -> dict[str, object]:
        return {"left": {"start": self.left_start, "count": self.left_count},
                "right": {"start": self.right_start, "count": self.right_count}}


@dataclass(frozen=True, slots=True)
class ChangedPath:
    """One changed path: status, both sides' mode and object id (``None`` where absent), hunks."""

    path: str
    status: Status
    old_mode: str | None
    new_mode: str | None
    old_oid: str | None
    new_oid: str | None
    content: Content
    hunks: tuple[Hunk, ...] = ()

    def __post_init__(self) -> None:
        old, new = self.old_mode is not None, self.new_mode is not None
        ok = (self.status in _STATUSES and self.content in _CONTENTS and old == (self.old_oid is not None)
              and new == (self.new_oid is not None)
              and (old, new) == {"added": (False, True), "deleted": (True, False)}.get(self.status, (True, True))
              and (self.content == "text" or not self.hunks))
        if not ok:
            raise ValueError(f"inconsistent changed path: {self!r}")

    def changed_ranges(self, side: Side) -> tuple[tuple[int, int], ...]:
        """The changed lines on ``side`` as inclusive ``(first, last)`` pairs, in order."""
        return tuple((r.start, r.stop - 1) for r in (h.lines(side) for h in self.hunks) if r)

    def is_changed_line(self, side: Side, line: int) -> bool:
        """Whether ``line`` (1-based) on ``side`` is a changed line: one a finding can anchor to."""
        return any(line in h.lines(side) for h in self.hunks)

    def to_json(self) -> dict[str, object]:
        return {"path": self.path, "status": self.status, "old_mode": self.old_mode, "new_mode": self.new_mode,
                "old_oid": self.old_oid, "new_oid": self.new_oid, "content": self.content,
                "hunks": [h.to_json() for h in self.hunks]}


@dataclass(frozen=True, slots=True)
class ChangedSurface:
    """The changed surface ``base`` -> ``head``: every changed path, sorted by path."""

    base: str
    head: str
    base_tree: str
    head_tree: str
    paths: tuple[ChangedPath, ...]

    def get(self, path: str) -> ChangedPath | None:
        for p in self.paths:
            if p.path == path:
                return p
        return None

    def to_json(self) -> dict[str, object]:
        return {"base": self.base, "head": self.head, "base_tree": self.base_tree, "head_tree": self.head_tree,
                "paths": [p.to_json() for p in self.paths]}


def changed_surface(repo: GitRepo, base: str, head: str, *, max_text_bytes: int = DEFAULT_MAX_TEXT_BYTES,
                    max_diff_cost: int = DEFAULT_MAX_DIFF_COST, max_total_diff_cost: int = DEFAULT_MAX_TOTAL_DIFF_COST,
                    max_entries: int = MAX_ENTRIES) -> ChangedSurface:
    """Every changed path from commit ``base`` (the merge base) to commit ``head``."""
    for rev in (base, head):
        verify_full_sha(rev, repo.object_format, what="commit")
    base_tree, head_tree = repo.commit_tree(base), repo.commit_tree(head)
    paths = diff_trees(repo, base_tree, head_tree, max_text_bytes=max_text_bytes, max_diff_cost=max_diff_cost,
                       max_total_diff_cost=max_total_diff_cost, max_entries=max_entries)
    return ChangedSurface(base, head, base_tree, head_tree, paths)


def diff_trees(repo: GitRepo, old_tree: str, new_tree: str, *, max_text_bytes: int = DEFAULT_MAX_TEXT_BYTES,
               max_diff_cost: int = DEFAULT_MAX_DIFF_COST, max_total_diff_cost: int = DEFAULT_MAX_TOTAL_DIFF_COST,
               max_entries: int = MAX_ENTRIES) -> tuple[ChangedPath, ...]:
    """Every path whose entry differs between two tree objects, sorted by path.

    Only subtrees whose ids differ are read. A file replaced by a directory (or the reverse) is
    the file ``deleted`` or ``added`` plus every path below the directory, as in git.
    Raises ``TREE_TOO_LARGE`` past ``max_entries`` tree entries read or ``MAX_DEPTH`` levels.
    A file whose line diff would pass ``max_diff_cost``, or what is left of
    ``max_total_diff_cost`` after the files before it (in walk order), is ``too-complex``.
    """
    for name, value in (("max_text_bytes", max_text_bytes), ("max_diff_cost", max_diff_cost),
                        ("max_total_diff_cost", max_total_diff_cost), ("max_entries", max_entries)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{name} must be a non-negative integer, not {value!r}")
    out: list[ChangedPath] = []
    read = 0
    budget = [max_total_diff_cost]

    def entries(tree: str | None, where: str) -> dict[str, TreeEntry]:
        nonlocal read
        if tree is None:
            return {}
        found = repo.read_tree(tree, where=where)
        read += len(found)
        if read > max_entries:
            raise VerificationError(GitCode.TREE_TOO_LARGE, f"the two trees have more than {max_entries} entries to compare",
                                    where or None)
        return {e.name: e for e in found}

    def walk(old: str | None, new: str | None, prefix: str, depth: int) -> None:
        if depth > MAX_DEPTH:
            raise VerificationError(GitCode.TREE_TOO_LARGE, f"the tree is deeper than {MAX_DEPTH}", prefix)
        left, right = entries(old, prefix), entries(new, prefix)
        for name in sorted(left.keys() | right.keys()):
            o, n = left.get(name), right.get(name)
            if o is not None and n is not None and o.mode == n.mode and o.oid == n.oid:
                continue
            path = f"{prefix}/{name}" if prefix else name
            o_tree, n_tree = o is not None and o.is_tree, n is not None and n.is_tree
            if o_tree or n_tree:
                # A directory on either side: its paths are compared one by one; a file (or link)
                # on the other side is deleted or added on its own, as git reports it.
                walk(o.oid if o is not None and o_tree else None, n.oid if n is not None and n_tree else None, path, depth + 1)
                o, n = (None if o_tree else o), (None if n_tree else n)
                if o is None and n is None:
                    continue
            out.append(_changed_entry(repo, path, o, n, max_text_bytes, max_diff_cost, budget))

    walk(old_tree, new_tree, "", 0)
    # Tree order equals byte order of the full paths (names are UTF-8; a directory's children
    # follow it), so this is the order git diff lists them in.
    out.sort(key=lambda p: p.path.encode("utf-8"))
    return tuple(out)


def _kind(mode: str) -> str:
    return "file" if mode in _REGULAR else mode  # 100644 and 100755 are one kind: a mode change is "modified"


def _changed_entry(repo: GitRepo, path: str, old: TreeEntry | None, new: TreeEntry | None, max_text_bytes: int,
                   max_diff_cost: int, budget: list[int]) -> ChangedPath:
    status: Status
    if old is None:
        status = "added"
    elif new is None:
        status = "deleted"
    else:
        status = "modified" if _kind(old.mode) == _kind(new.mode) else "type-changed"
    sides = [e for e in (old, new) if e is not None]

    def result(content: Content, hunks: tuple[Hunk, ...] = ()) -> ChangedPath:
        return ChangedPath(path, status, old.mode if old else None, new.mode if new else None,
                           old.oid if old else None, new.oid if new else None, content, hunks)

    if any(e.mode in (MODE_SYMLINK, MODE_GITLINK) for e in sides):
        return result("not-a-file")
    # Both present sides are regular files: read them (LEFT first; the first that is not text
    # names the reason and the other side is not read).
    texts: dict[str, list[bytes]] = {}
    for e in sides:
        if e.oid in texts:
            continue
        content, lines = _text_lines(repo, e.oid, path, max_text_bytes)
        if lines is None:
            return result(content)
        texts[e.oid] = lines
    before = texts[old.oid] if old else []
    after = texts[new.oid] if new else []
    hunks, cost = _diff(before, after, min(max_diff_cost, budget[0]))
    budget[0] -= cost
    if hunks is None:
        return result("too-complex")
    return result("text", hunks)


def _text_lines(repo: GitRepo, oid: str, path: str, max_text_bytes: int) -> tuple[Content, list[bytes] | None]:
    try:
        _, data = repo.read_object(oid, "blob", path=path)
    except VerificationError as e:
        if e.code != GitCode.TREE_TOO_LARGE:
            raise
        return "oversized", None  # larger than any object the git layer reads: no bytes are used
    if len(data) > max_text_bytes:
        return "oversized", None
    if b"\0" in data:
        return "binary", None
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return "non-utf8", None
    return "text", split_lines(data)


def split_lines(data: bytes) -> list[bytes]:
    """The lines of ``data`` as git counts them: split after each ``\\n`` only; a last line
    without one is a line of its own (so ``b"a"`` and ``b"a\\n"`` differ, as in git)."""
    if not data:
        return []
    lines = [line + b"\n" for line in data.split(b"\n")]
    if data.endswith(b"\n"):
        lines.pop()
    else:
        lines[-1] = lines[-1][:-1]
    return lines


def diff_lines(old: Sequence[bytes], new: Sequence[bytes], *, max_cost: int = DEFAULT_MAX_DIFF_COST) -> tuple[Hunk, ...] | None:
    """The hunks of a minimal line diff of ``old`` -> ``new``, or ``None`` past ``max_cost``.

    Minimal: the fewest deleted plus added lines (a longest common subsequence is kept), like
    ``git diff --minimal``. Where several minimal diffs exist the choice is deterministic but may
    place a hunk differently from git (which slides hunks by heuristics of its own).
    """
    return _diff(old, new, max_cost)[0]


def _diff(old: Sequence[bytes], new: Sequence[bytes], max_cost: int) -> tuple[tuple[Hunk, ...] | None, int]:
    """``diff_lines`` and the work it took (at most ``max_cost`` plus one step)."""
    pairs, cost = _matching_lines(old, new, max_cost)
    if pairs is None:
        return None, cost
    hunks: list[Hunk] = []
    pi = pj = -1
    for i, j in [*pairs, (len(old), len(new))]:
        lc, rc = i - pi - 1, j - pj - 1
        if lc or rc:
            hunks.append(Hunk(pi + 2 if lc else pi + 1, lc, pj + 2 if rc else pj + 1, rc))
        pi, pj = i, j
    return tuple(hunks), cost


def _matching_lines(a: Sequence[bytes], b: Sequence[bytes], max_cost: int) -> tuple[list[tuple[int, int]] | None, int]:
    """Index pairs ``(i, j)`` with ``a[i] == b[j]`` of one longest common subsequence, in order."""
    n, m = len(a), len(b)
    pre = 0
    while pre < n and pre < m and a[pre] == b[pre]:
        pre += 1
    suf = 0
    while suf < n - pre and suf < m - pre and a[n - 1 - suf] == b[m - 1 - suf]:
        suf += 1
    # A common prefix and suffix belong to some longest common subsequence, and a line that
    # does not occur on the other side belongs to none (git's xdl_cleanup_records drops them
    # too): what remains is small unless lines moved, so the search below stays cheap.
    in_a, in_b = set(a[pre:n - suf]), set(b[pre:m - suf])
    ia = [i for i in range(pre, n - suf) if a[i] in in_b]
    ib = [j for j in range(pre, m - suf) if b[j] in in_a]
    ids: dict[bytes, int] = {}
    xa = [ids.setdefault(a[i], len(ids)) for i in ia]
    xb = [ids.setdefault(b[j], len(ids)) for j in ib]
    core, cost = _myers(xa, xb, max_cost)
    if core is None:
        return None, cost
    return [*((i, i) for i in range(pre)), *((ia[x], ib[y]) for x, y in core),
            *((n - suf + k, m - suf + k) for k in range(suf))], cost


def _myers(a: list[int], b: list[int], max_cost: int) -> tuple[list[tuple[int, int]] | None, int]:
    """Myers' O(ND) search for a shortest edit script, kept inside the edit grid.

    ``v[k]`` is the furthest x reached on diagonal ``k = x - y`` with ``d`` non-diagonal moves
    (-1: unreachable); a move is only taken if it stays within the grid. ``trace[d]`` holds the
    values for ``d - 1`` so the path is recovered backwards. The work (one unit per diagonal
    tried and per matching step) is bounded by ``max_cost``.
    """
    n, m = len(a), len(b)
    if n == 0 or m == 0:
        return [], 0
    off = n + m + 1
    v = array("q", [-1]) * (2 * off + 1)
    trace: list[array[int]] = [array("q")]
    x = 0
    while x < n and x < m and a[x] == b[x]:
        x += 1
    cost = 1 + x
    v[off] = x
    if x == n and x == m:
        return [(i, i) for i in range(x)], cost
    d = 0
    while True:
        d += 1
        prev = v[off - d + 1: off + d]  # diagonals -(d-1) .. d-1 after d-1 moves
        trace.append(prev)
        for k in range(-d, d + 1, 2):
            start = _step(prev, d, k, n, m)
            if start is None:
                v[off + k] = -1
                continue
            x = start[0]
            y = x - k
            while x < n and y < m and a[x] == b[y]:
                x += 1
                y += 1
            cost += 1 + x - start[0]
            v[off + k] = x
            if x == n and y == m:
                return _backtrack(trace, d, n, m), cost
            if cost > max_cost:
                return None, cost


def _step(prev: array[int], d: int, k: int, n: int, m: int) -> tuple[int, int] | None:
    """Where the ``d``-th move onto diagonal ``k`` lands: ``(x, from_k)``, or None if it cannot.

    Down (an added line, from ``k + 1``) is preferred to right (a deleted line, from ``k - 1``)
    when both reach the same x, as in Myers' paper.
    """
    best: tuple[int, int] | None = None
    if k + 1 <= d - 1:
        x = prev[k + 1 + d - 1]
        if x >= 0 and x - (k + 1) + 1 <= m:
            best = (x, k + 1)
    if k - 1 >= -(d - 1):
        x = prev[k - 1 + d - 1]
        if x >= 0 and x + 1 <= n and (best is None or x + 1 > best[0]):
            best = (x + 1, k - 1)
    return best


def _backtrack(trace: list[array[int]], d: int, n: int, m: int) -> list[tuple[int, int]]:
    pairs: list[tuple[int, int]] = []
    x, y = n, m
    while d > 0:
        prev = trace[d]
        k = x - y
        step = _step(prev, d, k, n, m)
        assert step is not None
        xs, from_k = step
        while x > xs:  # the snake after the move: matching lines
            x -= 1
            y -= 1
            pairs.append((x, y))
        x = prev[from_k + d - 1]
        y = x - from_k
        d -= 1
    while x > 0:
        x -= 1
        y -= 1
        pairs.append((x, y))
    assert y == 0
    pairs.reverse()
    return pairs


__all__ = ["DEFAULT_MAX_DIFF_COST", "DEFAULT_MAX_TEXT_BYTES", "DEFAULT_MAX_TOTAL_DIFF_COST", "ChangedPath", "ChangedSurface", "Content", "Hunk", "Side",
           "Status", "changed_surface", "diff_lines", "diff_trees", "split_lines"]
