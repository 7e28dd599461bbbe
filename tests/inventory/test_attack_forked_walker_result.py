"""Attack review: the forked walker's result, crafted or garbled.

``Child.merge`` checks the columns' types and ranges. The question: is anything the walker
itself could never produce (a setuid mode, a ``..`` or ``.git`` path, an entry that is not on
disk) accepted into the inventory?
"""

from __future__ import annotations

import marshal
import os
import struct
from pathlib import Path

import pytest
from support.trees import make_tree

from attest.errors import AttestError, EnvironmentFailure
from attest.inventory import _walk, check_tree, inventory_tree, scan_tree
from attest.inventory._fork import _RESULT_MAGIC

DIGEST = "0" * 64


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(_walk, "_FORK_AFTER", 0)
    return make_tree(tmp_path / "t", {f"d{i}": {f"f{j}": b"x" * j for j in range(20)} for i in range(20)})


def _child_says(monkeypatch: pytest.MonkeyPatch, blob_of) -> None:  # type: ignore[no-untyped-def]
    def child(walk: object, link: object, shm: object, wfd: int) -> None:
        blob = blob_of()
        data = _RESULT_MAGIC + struct.pack("<Q", len(blob)) + blob
        while data:
            data = data[os.write(wfd, data) :]
        os.close(wfd)

    monkeypatch.setattr(_walk, "_child_main", child)


def _result(files: list[tuple[str, int, int, str]], dirs: list[tuple[str, int]], findings=(), matched=()) -> bytes:  # type: ignore[no-untyped-def]
    columns = (
        [f[0] for f in files],
        [f[1] for f in files],
        [f[2] for f in files],
        [f[3] for f in files],
        [d[0] for d in dirs],
        [d[1] for d in dirs],
    )
    counted = len(files) + len(dirs) + len(matched)
    return marshal.dumps((counted, len(files), sum(f[2] for f in files), columns, list(findings), None, list(matched)))


def _refused(tree: Path) -> bool:
    try:
        inventory_tree(tree)
    except AttestError:
        return True
    return False


def test_child_result_with_setuid_mode_is_refused(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _child_says(monkeypatch, lambda: _result([("zz/evil", 0o4755, 0, DIGEST)], [("zz", 0o755)]))
    assert _refused(tree)


@pytest.mark.parametrize("bad", [".git", "..", "a\\b", "x\u200by"])
def test_child_result_with_bad_name_is_refused(tree: Path, monkeypatch: pytest.MonkeyPatch, bad: str) -> None:
    _child_says(monkeypatch, lambda: _result([(f"{bad}/hooks", 0o755, 0, DIGEST)], [(bad, 0o755)]))
    assert _refused(tree)


def test_child_result_with_non_hex_digest_is_refused(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _child_says(monkeypatch, lambda: _result([("zz", 0o644, 0, "Z" * 64)], []))
    assert _refused(tree)


def test_child_result_with_unknown_finding_code_fails(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _child_says(monkeypatch, lambda: _result([], [], findings=[("NOT_A_CODE", "x", "y")]))
    with pytest.raises(EnvironmentFailure):
        scan_tree(tree)


@pytest.mark.parametrize(
    "blob",
    [
        marshal.dumps((0, 0, 0, ([], [], [], [], [], []), [("SYMLINK", 1, "d")], None)),
        marshal.dumps((0, 0, 0, ([], [], [], [], [], [1]), [], None)),
        marshal.dumps((0, 0, 0, (["a"], [0o644], [-1], [DIGEST], [], []), [], None)),
        marshal.dumps((0, 0, 0, (["a"], [True], [0], [DIGEST], [], []), [], None)),
        marshal.dumps((0, 0, 0, (["a"], [0o644], [0], [DIGEST], [], []), [], "boom")),
        marshal.dumps((0, 0, 0, ([], [], [], [], [], []), [], None))[:-3],
    ],
)
def test_garbled_child_result_fails(tree: Path, monkeypatch: pytest.MonkeyPatch, blob: bytes) -> None:
    _child_says(monkeypatch, lambda: blob)
    with pytest.raises(EnvironmentFailure):
        scan_tree(tree)


# -- a walk against expected entries (check_tree, verify_tree): the paths the child says matched


@pytest.mark.parametrize(
    "matched",
    [
        ["nowhere/else"],  # a path the parent does not expect
        ["d0/f1", "d0/f1"],  # one path twice
        ["d0/f1", 7],  # not a path
        ["d0/f2", "d0/f2x"],
    ],
)
def test_child_claims_matched_paths_the_parent_does_not_expect(tree: Path, monkeypatch: pytest.MonkeyPatch, matched: list[object]) -> None:
    expected = inventory_tree(tree)
    _child_says(monkeypatch, lambda: _result([], [], matched=matched))
    with pytest.raises(EnvironmentFailure):
        check_tree(tree, expected)


def test_child_claims_a_path_both_matched_and_an_entry(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    expected = inventory_tree(tree)
    _child_says(monkeypatch, lambda: _result([("d0/f1", 0o644, 1, DIGEST)], [], matched=["d0/f1"]))
    with pytest.raises(EnvironmentFailure):
        check_tree(tree, expected)


def test_child_claims_matched_paths_in_a_plain_walk(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _child_says(monkeypatch, lambda: _result([], [], matched=["d0/f1"]))
    with pytest.raises(EnvironmentFailure):
        scan_tree(tree)


def test_a_matched_path_the_parent_also_matched_is_refused(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The parent walks the root's first entries itself before it forks: the child cannot claim them too."""
    expected = inventory_tree(tree)
    _child_says(monkeypatch, lambda: _result([], [], matched=["d0"]))
    with pytest.raises(EnvironmentFailure):
        check_tree(tree, expected)
