"""The two-process walk fails closed: a child that dies or answers garbage is never a partial inventory."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from support.trees import make_tree

from attest.errors import EnvironmentFailure
from attest.inventory import _walk, inventory_tree, scan_tree


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(_walk, "_FORK_AFTER", 0)
    return make_tree(tmp_path / "t", {f"d{i}": {f"f{j}": b"x" * j for j in range(20)} for i in range(20)})


def test_forked_walk_equals_one_process_walk(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    forked = inventory_tree(tree)
    monkeypatch.setattr(_walk, "_FORK_AFTER", 10**9)
    assert inventory_tree(tree).canonical == forked.canonical


def test_child_that_fails_fails_the_walk(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def crash(*args: object) -> None:
        raise RuntimeError("the child crashed")

    monkeypatch.setattr(_walk, "_child_main", crash)
    with pytest.raises(EnvironmentFailure) as info:
        scan_tree(tree)
    assert info.value.code == "INTERNAL" and "second walking process" in info.value.detail


def test_child_that_answers_garbage_fails_the_walk(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def garbage(walk: object, link: object, shm: object, wfd: int) -> None:
        os.write(wfd, b"not a result")

    monkeypatch.setattr(_walk, "_child_main", garbage)
    with pytest.raises(EnvironmentFailure) as info:
        scan_tree(tree)
    assert info.value.code == "INTERNAL"


def test_entry_cap_spans_both_processes(tree: Path) -> None:
    result = scan_tree(tree, limits=_walk.Limits(max_entries=300))
    assert {f.code for f in result.findings} == {"TOO_MANY_ENTRIES"}
