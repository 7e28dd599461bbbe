"""The changed surface from objects, against ``git diff --raw --no-renames`` and ``git diff -U0``.

Line ranges: ours come from a minimal line diff (a longest common subsequence is kept). Where
an edit is unambiguous they equal git's ``-U0`` hunks exactly (the table below). Where several
minimal diffs exist git may slide a hunk elsewhere (its compaction and indent heuristics), so
the random-edit test compares what is defined for any minimal diff: the unchanged lines of both
sides are the same sequence, every hunk changes something, and the number of deleted and added
lines equals ``git diff --minimal``'s.
"""

from __future__ import annotations

import itertools
import re
import subprocess
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from support.gitrepo import GIT_ENV, git

from attest.errors import InputError, VerificationError
from attest.git import GitCode, GitRepo
from attest.git._surface import (
    DEFAULT_MAX_TEXT_BYTES,
    ChangedPath,
    Hunk,
    changed_surface,
    diff_lines,
    diff_trees,
    split_lines,
)

FORMATS = ["sha1", "sha256"]
Spec = dict[str, "bytes | tuple[str, bytes]"]  # path -> bytes (mode 100644) or (mode, bytes)


class Repo:
    """Commits whose trees are written straight into the index (any mode, gitlinks included)."""

    def __init__(self, path: Path, fmt: str) -> None:
        self.path = path
        path.mkdir(parents=True, exist_ok=True)
        git(path, "init", "-q", f"--object-format={fmt}")
        self.zero = "0" * (40 if fmt == "sha1" else 64)

    def commit(self, files: Spec, parent: str | None = None) -> str:
        git(self.path, "read-tree", "--empty")
        rows = []
        for rel, spec in files.items():
            mode, data = spec if isinstance(spec, tuple) else ("100644", spec)
            oid = data.decode() if mode == "160000" else git(self.path, "hash-object", "-w", "--stdin", input=data)
            rows.append(f"{mode} {oid}\t{rel}\n")
        git(self.path, "update-index", "--index-info", input="".join(rows).encode())
        tree = git(self.path, "write-tree")
        return git(self.path, "commit-tree", tree, "-m", "c", *(["-p", parent] if parent else []))


def git_raw(path: Path, a: str, b: str) -> list[tuple[str, str, str, str, str, str]]:
    """``(path, status letter, old mode, new mode, old id, new id)`` in git's order."""
    out = subprocess.run(["git", "-C", str(path), "diff", "--raw", "-z", "--no-renames", "--no-abbrev", a, b],
                         env=GIT_ENV, capture_output=True, check=True).stdout.split(b"\0")
    rows = []
    for meta, name in zip(out[0::2], out[1::2], strict=False):
        om, nm, oo, no, st_ = meta.decode().lstrip(":").split(" ")
        rows.append((name.decode(), st_, om, nm, oo, no))
    return rows


_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def parse_u0(out: str) -> dict[str, list[tuple[int, int, int, int]]]:
    """The hunks of each file of a ``-U0`` patch (simple names: no quoting)."""
    files: dict[str, list[tuple[int, int, int, int]]] = {}
    current: list[tuple[int, int, int, int]] = []
    for line in out.splitlines():
        if line.startswith("diff --git "):
            current = files.setdefault(line.split(" b/", 1)[1], [])
        elif (m := _HUNK.match(line)) is not None:
            ls, lc, rs, rc = m.groups()
            current.append((int(ls), int(lc or 1), int(rs), int(rc or 1)))
    return files


def git_u0(path: Path, a: str, b: str, *extra: str) -> dict[str, list[tuple[int, int, int, int]]]:
    out = subprocess.run(["git", "-C", str(path), "diff", "-U0", "--no-renames", "--no-color", *extra, a, b],
                         env=GIT_ENV, capture_output=True, check=True).stdout.decode("utf-8", "replace")
    return parse_u0(out)


def as_tuples(p: ChangedPath) -> list[tuple[int, int, int, int]]:
    return [(h.left_start, h.left_count, h.right_start, h.right_count) for h in p.hunks]


LETTER = {"added": "A", "deleted": "D", "modified": "M", "type-changed": "T"}


def assert_matches_git(repo: Repo, base: str, head: str, **limits: int) -> tuple[ChangedPath, ...]:
    with GitRepo.open(repo.path) as r:
        surface = changed_surface(r, base, head, **limits)
    mine = [(p.path, LETTER[p.status], p.old_mode or "000000", p.new_mode or "000000", p.old_oid or repo.zero,
             p.new_oid or repo.zero) for p in surface.paths]
    assert mine == git_raw(repo.path, base, head)
    hunks = git_u0(repo.path, base, head, "--minimal")
    for p in surface.paths:
        if p.content == "text":
            assert as_tuples(p) == hunks.get(p.path, []), p.path
    return surface.paths


# -- the surface: statuses, modes, ids --------------------------------------------------------

@pytest.mark.parametrize("fmt", FORMATS)
def test_every_kind_of_change_matches_git(tmp_path: Path, fmt: str) -> None:
    repo = Repo(tmp_path / "r", fmt)
    sub = Repo(tmp_path / "sub", fmt)
    other, other2 = sub.commit({"x": b"x"}), sub.commit({"y": b"y"})
    base_files: Spec = {
        "keep.txt": b"same\n",
        "gone.txt": b"bye\n",
        "edit.txt": b"a\nb\nc\nd\n",
        "chmod.sh": b"#!/bin/sh\n",
        "chmod-edit.sh": b"echo 1\n",
        "to-link": b"target\n",
        "link": ("120000", b"keep.txt"),
        "link-to-file": ("120000", b"keep.txt"),
        "to-dir": b"file\n",
        "from-dir/inner.txt": b"inner\n",
        "deep/a/b/c/d.txt": b"1\n2\n3\n",
        "deep/a/b/same.txt": b"same\n",
        "untouched/x.txt": b"x\n",
        "module": ("160000", other.encode()),
        "to-module": b"was a file\n",
    }
    head_files: Spec = {
        "keep.txt": b"same\n",
        "new.txt": b"hello\nworld\n",
        "empty-new": b"",
        "edit.txt": b"a\nB\nc\nd\ne\n",
        "chmod.sh": ("100755", b"#!/bin/sh\n"),
        "chmod-edit.sh": ("100755", b"echo 2\n"),
        "to-link": ("120000", b"keep.txt"),
        "link": ("120000", b"new.txt"),
        "link-to-file": b"now a file\n",
        "to-dir/child.txt": b"child\n",
        "from-dir": b"now a file\n",
        "deep/a/b/c/d.txt": b"1\n3\n",
        "deep/a/b/same.txt": b"same\n",
        "deep/a/new/e.txt": b"e\n",
        "untouched/x.txt": b"x\n",
        "module": ("160000", other2.encode()),
        "to-module": ("160000", other.encode()),
    }
    base = repo.commit(base_files)
    head = repo.commit(head_files, base)
    paths = {p.path: p for p in assert_matches_git(repo, base, head)}
    expect = {
        "gone.txt": ("deleted", "text"), "new.txt": ("added", "text"), "empty-new": ("added", "text"),
        "edit.txt": ("modified", "text"), "chmod.sh": ("modified", "text"), "chmod-edit.sh": ("modified", "text"),
        "to-link": ("type-changed", "not-a-file"), "link": ("modified", "not-a-file"),
        "link-to-file": ("type-changed", "not-a-file"), "to-dir": ("deleted", "text"),
        "to-dir/child.txt": ("added", "text"), "from-dir": ("added", "text"), "from-dir/inner.txt": ("deleted", "text"),
        "deep/a/b/c/d.txt": ("modified", "text"), "deep/a/new/e.txt": ("added", "text"),
        "module": ("modified", "not-a-file"), "to-module": ("type-changed", "not-a-file"),
    }
    assert {k: (p.status, p.content) for k, p in paths.items()} == expect
    # A mode change alone is "modified" with one blob on both sides and no changed line (git's M).
    chmod = paths["chmod.sh"]
    assert (chmod.old_mode, chmod.new_mode, chmod.old_oid == chmod.new_oid, chmod.hunks) == ("100644", "100755", True, ())
    assert as_tuples(paths["new.txt"]) == [(0, 0, 1, 2)]
    assert as_tuples(paths["gone.txt"]) == [(1, 1, 0, 0)]
    assert paths["empty-new"].hunks == ()
    assert as_tuples(paths["edit.txt"]) == [(2, 1, 2, 1), (4, 0, 5, 1)]
    assert paths["deep/a/b/c/d.txt"].changed_ranges("LEFT") == ((2, 2),)
    assert paths["deep/a/b/c/d.txt"].changed_ranges("RIGHT") == ()


@pytest.mark.parametrize("fmt", FORMATS)
def test_no_change_and_rename(tmp_path: Path, fmt: str) -> None:
    repo = Repo(tmp_path / "r", fmt)
    base = repo.commit({"a/old.txt": b"content\n", "b": b"b\n"})
    same = repo.commit({"a/old.txt": b"content\n", "b": b"b\n"}, base)
    assert assert_matches_git(repo, base, same) == ()
    assert assert_matches_git(repo, base, base) == ()
    # A rename is a deleted path and an added one: renames are never detected.
    moved = repo.commit({"a/new.txt": b"content\n", "b": b"b\n"}, base)
    paths = assert_matches_git(repo, base, moved)
    assert [(p.path, p.status) for p in paths] == [("a/new.txt", "added"), ("a/old.txt", "deleted")]


@pytest.mark.parametrize("fmt", FORMATS)
def test_content_classes(tmp_path: Path, fmt: str) -> None:
    repo = Repo(tmp_path / "r", fmt)
    cap = 64
    base = repo.commit({"bin": b"a\0b\n", "latin1": b"caf\xe9\n", "at-cap": b"x" * (cap - 1) + b"\n",
                        "over-cap": b"y" * cap + b"\n", "utf8": "café\n".encode(), "to-bin": b"text\n"})
    head = repo.commit({"bin": b"a\0c\n", "latin1": b"caf\xe8\n", "at-cap": b"z" * (cap - 1) + b"\n",
                        "over-cap": b"w" * cap + b"\n", "utf8": "cafè\n".encode(), "to-bin": b"text\0\n"}, base)
    paths = {p.path: p for p in assert_matches_git(repo, base, head, max_text_bytes=cap)}
    assert {k: p.content for k, p in paths.items()} == {"bin": "binary", "latin1": "non-utf8", "at-cap": "text",
                                                        "over-cap": "oversized", "utf8": "text", "to-bin": "binary"}
    assert all(p.hunks == () for k, p in paths.items() if k not in ("at-cap", "utf8"))
    assert as_tuples(paths["at-cap"]) == [(1, 1, 1, 1)]


def test_the_default_size_cap(tmp_path: Path) -> None:
    repo = Repo(tmp_path / "r", "sha1")
    line = b"l" * 1023 + b"\n"
    at_cap = line * (DEFAULT_MAX_TEXT_BYTES // 1024)
    assert len(at_cap) == DEFAULT_MAX_TEXT_BYTES
    base = repo.commit({"at": at_cap, "over": at_cap})
    head = repo.commit({"at": b"!" + at_cap[1:], "over": at_cap + b"+"}, base)
    with GitRepo.open(repo.path) as r:
        paths = {p.path: p for p in changed_surface(r, base, head).paths}
    assert paths["at"].content == "text" and paths["over"].content == "oversized"


def test_an_object_too_large_for_the_git_layer_is_oversized(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from attest.git import _repo

    repo = Repo(tmp_path / "r", "sha1")
    base = repo.commit({"big": b"1\n" * 200})
    head = repo.commit({"big": b"2\n" * 200}, base)
    monkeypatch.setattr(_repo, "MAX_BLOB", 300)  # above the commit and trees, below the blob
    with GitRepo.open(repo.path) as r:
        [big] = changed_surface(r, base, head).paths
    assert (big.status, big.content, big.hunks) == ("modified", "oversized", ())


@pytest.mark.parametrize("fmt", FORMATS)
def test_line_endings_as_git_counts_them(tmp_path: Path, fmt: str) -> None:
    repo = Repo(tmp_path / "r", fmt)
    base = repo.commit({"eol": b"a\nb", "crlf": b"a\r\nb\r\n", "cr": b"a\rb\n"})
    head = repo.commit({"eol": b"a\nb\n", "crlf": b"a\nb\r\n", "cr": b"a\rc\n"}, base)
    paths = {p.path: p for p in assert_matches_git(repo, base, head)}
    assert as_tuples(paths["eol"]) == [(2, 1, 2, 1)]
    assert as_tuples(paths["crlf"]) == [(1, 1, 1, 1)]
    assert as_tuples(paths["cr"]) == [(1, 1, 1, 1)]  # a lone CR does not end a line


# -- bounds --------------------------------------------------------------------------------------

def test_entry_and_depth_bounds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from attest.git import _surface

    repo = Repo(tmp_path / "r", "sha1")
    base = repo.commit({f"d/f{i}": b"%d\n" % i for i in range(10)})
    head = repo.commit({f"d/f{i}": b"%d!\n" % i for i in range(10)}, base)
    with GitRepo.open(repo.path) as r:
        assert len(changed_surface(r, base, head, max_entries=22).paths) == 10  # 1 + 1 + 10 + 10
        with pytest.raises(VerificationError) as ei:
            changed_surface(r, base, head, max_entries=21)
        assert ei.value.code == GitCode.TREE_TOO_LARGE
        monkeypatch.setattr(_surface, "MAX_DEPTH", 0)
        with pytest.raises(VerificationError) as ei:
            changed_surface(r, base, head)
        assert ei.value.code == GitCode.TREE_TOO_LARGE
        with pytest.raises(ValueError):
            changed_surface(r, base, head, max_text_bytes=-1)


def test_diff_cost_bounds(tmp_path: Path) -> None:
    repo = Repo(tmp_path / "r", "sha1")
    moved = [b"%d\n" % i for i in range(60)]
    base = repo.commit({"a": b"".join(moved), "b": b"".join(moved)})
    head = repo.commit({"a": b"".join(moved[30:] + moved[:30]), "b": b"".join(moved[30:] + moved[:30])}, base)
    with GitRepo.open(repo.path) as r:
        plenty = changed_surface(r, base, head).paths
        assert [p.content for p in plenty] == ["text", "text"]
        assert [p.content for p in changed_surface(r, base, head, max_diff_cost=100).paths] == ["too-complex"] * 2
        # The surface-wide budget: what the first file used is not there for the second.
        _, cost = _diff_cost(moved, moved[30:] + moved[:30])
        total = [p.content for p in changed_surface(r, base, head, max_total_diff_cost=cost + 1).paths]
        assert total == ["text", "too-complex"]


def _diff_cost(a: list[bytes], b: list[bytes]) -> tuple[object, int]:
    from attest.git._surface import _diff

    return _diff(a, b, 10**9)


def test_commits_are_checked(tmp_path: Path) -> None:
    repo = Repo(tmp_path / "r", "sha1")
    base = repo.commit({"a": b"1"})
    with GitRepo.open(repo.path) as r:
        with pytest.raises(VerificationError) as ei:
            changed_surface(r, base, git(repo.path, "rev-parse", f"{base}^{{tree}}"))
        assert ei.value.code == GitCode.WRONG_OBJECT_TYPE
        with pytest.raises(InputError) as ai:
            changed_surface(r, "HEAD", base)
        assert ai.value.code == GitCode.NOT_FULL_SHA
        tree = r.commit_tree(base)
        assert diff_trees(r, tree, tree) == ()


# -- line ranges -------------------------------------------------------------------------------

EDITS = [  # (name, old lines, new lines): unambiguous edits, where any minimal diff is git's
    ("insert-top", "b c", "a b c"),
    ("insert-middle", "a c", "a b c"),
    ("append", "a b", "a b c"),
    ("delete-top", "a b c", "b c"),
    ("delete-middle", "a b c", "a c"),
    ("delete-end", "a b c", "a b"),
    ("replace-one", "a b c", "a X c"),
    ("replace-many", "a b c d e", "a X Y e"),
    ("two-hunks", "a b c d e f g", "a B c d e F g"),
    ("grow", "a b c", "a X Y Z c"),
    ("shrink", "a X Y Z c", "a b c"),
    ("empty-to-text", "", "a b"),
    ("text-to-empty", "a b", ""),
    ("all-new", "a b c", "x y z"),
    ("swap-halves", "a b c d", "c d a b"),
]


def _text(words: str) -> bytes:
    return b"".join(w.encode() + b"\n" for w in words.split())


def git_no_index(tmp_path: Path, old: bytes, new: bytes, *extra: str) -> list[tuple[int, int, int, int]]:
    (tmp_path / "old").write_bytes(old)
    (tmp_path / "new").write_bytes(new)
    out = subprocess.run(["git", "diff", "--no-index", "-U0", "--no-color", *extra, "old", "new"], cwd=tmp_path, env=GIT_ENV,
                         capture_output=True)
    assert out.returncode in (0, 1), out.stderr
    hunks = parse_u0(out.stdout.decode("utf-8", "replace"))
    return next(iter(hunks.values()), [])


@pytest.mark.parametrize(("name", "old", "new"), EDITS, ids=[e[0] for e in EDITS])
def test_hunks_equal_git_u0(tmp_path: Path, name: str, old: str, new: str) -> None:
    a, b = _text(old), _text(new)
    got = diff_lines(split_lines(a), split_lines(b))
    assert got is not None
    mine = [(h.left_start, h.left_count, h.right_start, h.right_count) for h in got]
    assert mine == git_no_index(tmp_path, a, b)
    assert mine == git_no_index(tmp_path, a, b, "--diff-algorithm=myers")


def _check_minimal_diff(old: list[bytes], new: list[bytes], hunks: tuple[Hunk, ...]) -> None:
    left = {n for h in hunks for n in h.lines("LEFT")}
    right = {n for h in hunks for n in h.lines("RIGHT")}
    # The unchanged lines of both sides are one sequence: the hunks are an exact edit script.
    assert [x for i, x in enumerate(old, 1) if i not in left] == [x for j, x in enumerate(new, 1) if j not in right]
    for h in hunks:
        assert h.left_count or h.right_count
    for h1, h2 in itertools.pairwise(hunks):  # in order, an unchanged line between on each side
        for side in ("LEFT", "RIGHT"):
            assert _before(h2, side) >= _after(h1, side)


def _after(h: Hunk, side: str) -> int:
    """The first line after the hunk on ``side`` (a 0-count start names the line before)."""
    start, count = (h.left_start, h.left_count) if side == "LEFT" else (h.right_start, h.right_count)
    return start + count if count else start + 1


def _before(h: Hunk, side: str) -> int:
    """The last line before the hunk on ``side``."""
    start, count = (h.left_start, h.left_count) if side == "LEFT" else (h.right_start, h.right_count)
    return start - 1 if count else start


_lines = st.lists(st.sampled_from([b"a\n", b"b\n", b"c\n", b"\n", b"  d\n", b"}\n"]), max_size=25)


def _unterminated(lines: list[bytes], cut: bool) -> list[bytes]:
    """``lines`` with the newline of the last one removed when ``cut`` (a file without a final newline)."""
    return [*lines[:-1], lines[-1][:-1]] if cut and lines and lines[-1] != b"\n" else lines


@settings(max_examples=60, deadline=None)
@example(old=[b"b\n"] * 4, edits=[(0, 1, [b"b\n", b"a\n"]), (0, 0, [b"a\n"] * 3), (0, 0, [b"a\n"] * 3)], cut=(False, False))
@given(old=_lines, edits=st.lists(st.tuples(st.integers(0, 30), st.integers(0, 3), _lines.map(lambda x: x[:3])),
                                  max_size=4), cut=st.tuples(st.booleans(), st.booleans()))
def test_random_edits_against_git_minimal(tmp_path_factory: pytest.TempPathFactory, old: list[bytes],
                                          edits: list[tuple[int, int, list[bytes]]], cut: tuple[bool, bool]) -> None:
    new = list(old)
    for at, count, insert in edits:
        at = min(at, len(new))
        new[at:at + count] = insert
    old, new = _unterminated(old, cut[0]), _unterminated(new, cut[1])
    a, b = b"".join(old), b"".join(new)
    assert split_lines(a) == old and split_lines(b) == new
    hunks = diff_lines(old, new)
    assert hunks is not None
    _check_minimal_diff(old, new, hunks)
    # Minimal: as many unchanged lines as the longest common subsequence has, computed here independently.
    deleted, inserted = sum(h.left_count for h in hunks), sum(h.right_count for h in hunks)
    assert len(old) - deleted == len(new) - inserted == _lcs_length(old, new)
    # git's --minimal is no shorter (its heuristics may give a longer script: git deletes one line of
    # old = 4 x "b" for new = 6 x "a", "b", "a", 3 x "b", which needs no deletion).
    theirs = git_no_index(tmp_path_factory.mktemp("d"), a, b, "--minimal")
    assert deleted <= sum(t[1] for t in theirs) and inserted <= sum(t[3] for t in theirs)


def _lcs_length(old: list[bytes], new: list[bytes]) -> int:
    """The length of a longest common subsequence of ``old`` and ``new`` (the textbook dynamic programme)."""
    row = [0] * (len(new) + 1)
    for x in old:
        prev_diag, row[0] = 0, 0
        for j, y in enumerate(new, 1):
            prev_diag, row[j] = row[j], prev_diag + 1 if x == y else max(row[j], row[j - 1])
    return row[-1]


def test_split_lines() -> None:
    assert split_lines(b"") == []
    assert split_lines(b"a") == [b"a"]
    assert split_lines(b"a\n") == [b"a\n"]
    assert split_lines(b"a\n\nb") == [b"a\n", b"\n", b"b"]
    assert split_lines(b"\n") == [b"\n"]


def test_value_objects() -> None:
    h = Hunk(3, 2, 4, 0)
    assert list(h.lines("LEFT")) == [3, 4] and list(h.lines("RIGHT")) == []
    assert h.to_json() == {"left": {"start": 3, "count": 2}, "right": {"start": 4, "count": 0}}
    for bad in ((1, 0, 1, 0), (0, 1, 1, 1), (1, 1, 0, 1), (-1, 0, 1, 1)):
        with pytest.raises(ValueError):
            Hunk(*bad)
    p = ChangedPath("f", "modified", "100644", "100644", "1" * 40, "2" * 40, "text", (Hunk(2, 1, 2, 3), Hunk(9, 1, 11, 0)))
    assert p.changed_ranges("LEFT") == ((2, 2), (9, 9)) and p.changed_ranges("RIGHT") == ((2, 4),)
    assert p.is_changed_line("RIGHT", 4) and not p.is_changed_line("RIGHT", 5) and not p.is_changed_line("LEFT", 3)
    assert p.to_json()["hunks"][1] == {"left": {"start": 9, "count": 1}, "right": {"start": 11, "count": 0}}
    assert set(p.to_json()) == {"path", "status", "old_mode", "new_mode", "old_oid", "new_oid", "content", "hunks"}
    for args in (("f", "added", "100644", "100644", "1" * 40, "2" * 40, "text"),
                 ("f", "deleted", None, "100644", None, "2" * 40, "text"),
                 ("f", "modified", "100644", "100644", "1" * 40, "2" * 40, "binary", (h,)),
                 ("f", "renamed", "100644", "100644", "1" * 40, "2" * 40, "text")):
        with pytest.raises(ValueError):
            ChangedPath(*args)  # type: ignore[arg-type]
