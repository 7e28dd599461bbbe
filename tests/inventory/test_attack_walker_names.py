"""Attack review: odd names through the walker (its fast path must give check_name's verdict)."""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import pytest

from attest.inventory import InventoryCode, scan_tree
from attest.inventory._names import _RESERVED, PLAIN_NAME, check_name


def _fast_verdict_is_none(name: str) -> bool:
    # The walker's inline test (_walk._Walk.listing).
    return bool(PLAIN_NAME(name)) and name not in (".", "..") and name.rstrip(". ").casefold() not in _RESERVED


def test_fast_path_agrees_with_check_name_on_short_ascii_names() -> None:
    alphabet = ". gGiItT~1:$\\x"
    for n in range(1, 6):
        for chars in itertools.product(alphabet, repeat=n):
            name = "".join(chars)
            if _fast_verdict_is_none(name):
                assert check_name(name) is None, name


@pytest.fixture(autouse=True)
def _both_walk_modes(walk_mode: str) -> str:
    return walk_mode


REFUSED = [
    ".git", ".GIT", ".Git.", ".git ", ".git. .", "git~1", "GIT~1", ".git::$INDEX_ALLOCATION", "git~1:x",
    ".g\u200cit", ".git\u200d", "\ufeff.git", ".gi\u206at", "a\u202eb", "x\u0000"[:1] + "\u0085",
    "\udcff", "a\x7f", "a\\b",
]
ACCEPTED = [".github", ".gitignore", "git~2", ".git~1", "..git", ".gi t", "\u0130.git", ".g\u0131t", ".\uff47it", "...", " "]


def test_odd_names_through_the_walker(tmp_path: Path) -> None:
    root = tmp_path / "t"
    root.mkdir()
    for i, name in enumerate(REFUSED + ACCEPTED):
        sub = root / f"d{i:02d}"
        sub.mkdir()
        os.mkdir(os.path.join(os.fsencode(sub), os.fsencode(name)))
        with open(os.path.join(os.fsencode(sub), os.fsencode(name), b"hook"), "wb") as f:
            f.write(b"#!/bin/sh\n")
    r = scan_tree(root)
    refused = {f.path.split("/")[0] for f in r.findings}
    entries = {e.path for e in r.entries}
    for i, name in enumerate(REFUSED):
        assert f"d{i:02d}" in refused, name
        assert not any(p.startswith(f"d{i:02d}/") for p in entries), name
    for i, name in enumerate(ACCEPTED, len(REFUSED)):
        assert f"d{i:02d}" not in refused, (name, [f for f in r.findings if f.path.startswith(f"d{i:02d}")])


def test_collisions_under_folding(tmp_path: Path) -> None:
    root = tmp_path / "t"
    root.mkdir()
    pairs = [("K", "\u212a"), ("e\u0301", "\u00e9"), ("ss", "\u00df"), ("A", "a"), ("\u00c5", "\u212b")]
    for i, (a, b) in enumerate(pairs):
        d = root / f"p{i}"
        d.mkdir()
        (d / a).write_bytes(b"1")
        (d / b).write_bytes(b"2")
    r = scan_tree(root)
    got = {f.path.split("/")[0] for f in r.findings if f.code == InventoryCode.NAME_COLLISION}
    assert got == {f"p{i}" for i in range(len(pairs))}


# Default_Ignorable_Code_Point (or line-breaking) code points that are not in the refused
# categories (Cc, Cf, Cs, Co, Cn): "tool" and "tool\u034f" look the same and do not collide.
INVISIBLE = ["tool\u034f", "tool\ufe0f", "\u3164", "tool\u115f", "tool\u2028", "tool\u2029", "tool\u180b", "tool\uffa0"]


@pytest.mark.parametrize("name", INVISIBLE)
def test_invisible_code_points_are_refused(tmp_path: Path, name: str) -> None:
    root = tmp_path / "t"
    root.mkdir()
    (root / "tool").write_bytes(b"genuine")
    (root / name).write_bytes(b"lookalike")
    r = scan_tree(root)
    assert {e.path for e in r.entries} <= {"tool"}
    assert r.findings
