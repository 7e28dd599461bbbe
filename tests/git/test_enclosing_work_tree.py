"""enclosing_work_tree: the nearest directory at or above a path that holds a `.git` entry, of any kind."""

from __future__ import annotations

from pathlib import Path

import pytest

from attest.git import enclosing_work_tree


def _layout(tmp: Path, case: str) -> tuple[Path, Path | None]:
    """(the path asked about, the work tree expected) for each case."""
    (tmp / "w" / "a" / "b").mkdir(parents=True)
    if case == "none":
        return tmp / "w" / "a", None
    if case == "dot-git-directory":
        (tmp / "w" / ".git").mkdir()
        return tmp / "w" / "a" / "b", tmp / "w"
    if case == "dot-git-file":  # a linked worktree or a submodule
        (tmp / "w" / "a" / ".git").write_text("gitdir: /elsewhere\n")
        return tmp / "w" / "a" / "b", tmp / "w" / "a"
    if case == "dot-git-link":
        (tmp / "w" / ".git").symlink_to(tmp / "nowhere")
        return tmp / "w" / "a", tmp / "w"
    if case == "missing-path-inside":
        (tmp / "w" / ".git").mkdir()
        return tmp / "w" / "a" / "not" / "yet", tmp / "w"
    if case == "the-work-tree-itself":
        (tmp / "w" / ".git").mkdir()
        return tmp / "w", tmp / "w"
    if case == "through-a-symlink":  # outside by its name, inside by what it resolves to
        (tmp / "w" / ".git").mkdir()
        (tmp / "link").symlink_to(tmp / "w" / "a")
        return tmp / "link" / "b", tmp / "w"
    raise AssertionError(case)


@pytest.mark.parametrize("case", ["none", "dot-git-directory", "dot-git-file", "dot-git-link", "missing-path-inside",
                                  "the-work-tree-itself", "through-a-symlink"])
def test_enclosing_work_tree(case: str, tmp_path: Path) -> None:
    path, expected = _layout(tmp_path, case)
    got = enclosing_work_tree(path)
    if expected is None:
        # tmp_path itself lies in no work tree on a machine that runs the suite from /tmp
        assert got is None or not str(got).startswith(str(tmp_path)), got
    else:
        assert got == str(expected.resolve()), (got, expected)
