"""An entry the walker cannot open or list is UNREADABLE_ENTRY, never skipped or hashed as empty."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from support.trees import make_tree

from attest.errors import AttestError
from attest.inventory import InventoryCode, inventory_tree


@contextmanager
def _unprivileged() -> Iterator[None]:
    """Root reads mode-000 files: as root, act as uid 65534 for the walk (the saved uid restores root)."""
    if os.geteuid() != 0:
        yield
        return
    os.setegid(65534)
    os.seteuid(65534)
    try:
        yield
    finally:
        os.seteuid(0)
        os.setegid(0)


@pytest.fixture
def world_reachable() -> Iterator[Path]:
    # tmp_path lives under a 0700 directory of root's; uid 65534 must be able to reach the tree.
    d = Path(tempfile.mkdtemp(prefix="attest-unreadable-"))
    os.chmod(d, 0o755)
    try:
        yield d
    finally:
        shutil.rmtree(d)


@pytest.mark.parametrize("what", ["file", "directory"])
def test_an_unreadable_entry_is_reported(world_reachable: Path, what: str) -> None:
    tree = make_tree(world_reachable / "tree", {"ok": b"fine\n", "sub": {"inner": b"x"}, "secret": b"hidden\n"})
    hidden = tree / ("secret" if what == "file" else "sub")
    os.chmod(hidden, 0)
    try:
        with _unprivileged(), pytest.raises(AttestError) as caught:
            inventory_tree(tree)
    finally:
        os.chmod(hidden, 0o755)  # an ordinary user cannot remove a mode-000 directory's entries
    codes = {(f.code, f.path) for f in caught.value.findings}
    assert (InventoryCode.UNREADABLE_ENTRY, "secret" if what == "file" else "sub") in codes, codes
