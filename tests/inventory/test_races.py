"""THREATS B for the walker: entries swapped while the tree is walked, with real concurrent writers.

Whatever the timing, a walk either reports the genuine bytes or a finding; it never hashes
what a swapped-in link points to, and never blocks on a swapped-in FIFO.
"""

from __future__ import annotations

import hashlib
import os
import stat
import threading
import time
from pathlib import Path

import pytest
from support.trees import make_tree

from attest.inventory import InventoryCode, scan_tree
from attest.inventory._walk import _open_checked

GENUINE = b"genuine bytes\n"
SECRET = b"secret outside the tree\n"
ALLOWED = {InventoryCode.SYMLINK, InventoryCode.SPECIAL_FILE, InventoryCode.CHANGED_DURING_WALK}


@pytest.fixture(autouse=True)
def _both_walk_modes(walk_mode: str) -> str:
    return walk_mode


def _writer(stop: threading.Event, swap) -> threading.Thread:  # type: ignore[no-untyped-def]
    def loop() -> None:
        deadline = time.monotonic() + 20  # bounded even if the reader dies
        while not stop.is_set() and time.monotonic() < deadline:
            swap()

    t = threading.Thread(target=loop, daemon=True)
    t.start()
    return t


def _scan_many(root: Path, rounds: int):  # type: ignore[no-untyped-def]
    results = []
    done = threading.Event()

    def reader() -> None:
        for _ in range(rounds):
            results.append(scan_tree(root))
        done.set()

    t = threading.Thread(target=reader, daemon=True)
    t.start()
    t.join(60)
    assert done.is_set(), "a walk blocked (a FIFO was opened in blocking mode?)"
    return results


def _scan_while_writing(root: Path, write, rounds: int):  # type: ignore[no-untyped-def]
    """Walk ``root`` ``rounds`` times while a writer thread keeps calling ``write``."""
    stop = threading.Event()
    writer = _writer(stop, write)
    try:
        return _scan_many(root, rounds)
    finally:
        stop.set()
        writer.join()


def test_file_swapped_for_symlink_or_fifo_during_walk(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.write_bytes(SECRET)
    root = make_tree(tmp_path / "t", {"victim": GENUINE, "pad": {f"p{i}": b"x" for i in range(30)}})
    state = {"n": 0}

    def swap() -> None:
        state["n"] += 1
        staged = root / ".staged"
        kind = state["n"] % 3
        if kind == 0:
            staged.write_bytes(GENUINE)
            os.chmod(staged, 0o644)
        elif kind == 1:
            os.symlink(outside, staged)
        else:
            os.mkfifo(staged)
        os.rename(staged, root / "victim")

    results = _scan_while_writing(root, swap, 150)
    genuine = hashlib.sha256(GENUINE).hexdigest()
    saw = set()
    for result in results:
        for e in result.entries:
            assert e.sha256 != hashlib.sha256(SECRET).hexdigest()
            if e.path == "victim":
                assert e.sha256 == genuine
                saw.add("file")
        for f in result.findings:
            if f.path in ("victim", ".staged"):
                assert f.code in ALLOWED, f
                saw.add(f.code)
            else:
                assert f.code == InventoryCode.CHANGED_DURING_WALK, f
    assert state["n"] > 0 and saw  # the writer ran and the walker saw it


def test_directory_component_swapped_for_symlink_during_walk(tmp_path: Path) -> None:
    outside = make_tree(tmp_path / "outside", {"f": SECRET, "g": {"h": SECRET}})
    root = make_tree(tmp_path / "t", {"d": {"f": GENUINE, "g": {"h": GENUINE}}})

    def swap() -> None:
        os.rename(root / "d", root / "d.real")
        os.symlink(outside, root / "d")
        os.unlink(root / "d")
        os.rename(root / "d.real", root / "d")

    results = _scan_while_writing(root, swap, 150)
    secret = hashlib.sha256(SECRET).hexdigest()
    for result in results:
        assert all(e.sha256 != secret for e in result.entries)
        assert all(f.code in ALLOWED for f in result.findings), result.findings


def test_decision_comes_from_fstat_of_what_was_opened(tmp_path: Path) -> None:
    """Deterministic version of the race: the listing saw a file, the name now is something else."""
    root = make_tree(tmp_path / "t", {"a": GENUINE, "b": GENUINE, "c": GENUINE})
    listed = {n: os.lstat(root / n) for n in "abc"}
    os.unlink(root / "a")
    os.symlink(tmp_path / "t" / "b", root / "a")  # now a symlink
    os.unlink(root / "b")
    os.mkfifo(root / "b")  # now a FIFO
    (root / "c.new").write_bytes(GENUINE)
    os.rename(root / "c.new", root / "c")  # now another inode with the same bytes
    found: list[tuple[str, str]] = []
    dfd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK
        for name in "abc":
            assert _open_checked(dfd, name, flags, listed[name], name, lambda c, p, d: found.append((c, p))) is None
    finally:
        os.close(dfd)
    assert found == [
        (InventoryCode.SYMLINK, "a"),
        (InventoryCode.SPECIAL_FILE, "b"),
        (InventoryCode.CHANGED_DURING_WALK, "c"),
    ]
    assert stat.S_ISFIFO(os.lstat(root / "b").st_mode)


def test_file_rewritten_while_hashed(tmp_path: Path) -> None:
    root = make_tree(tmp_path / "t", {"big": b"\0" * (8 << 20)})
    def rewrite() -> None:
        with open(root / "big", "r+b") as f:
            f.write(os.urandom(4096))

    results = _scan_while_writing(root, rewrite, 30)
    changed = [f for r in results for f in r.findings]
    assert all(f.code == InventoryCode.CHANGED_DURING_WALK for f in changed)
    assert changed, "a file rewritten throughout the walk must be reported as changed at least once"
