"""Attack review of run_from_images taking a marked Image (only its seal checked again): what held."""

from __future__ import annotations

import copy
import dataclasses
import os
import pickle
import subprocess
from pathlib import Path

import pytest
from support.erofs import needs_erofs
from support.store import reseal
from support.trees import make_tree

from attest.errors import AttestError
from attest.freeze import FreezeCode, Store, freeze_tree, run_from_images
from attest.freeze._image import VERIFIED
from attest.inventory import inventory_tree

BACKEND = "readonly"
BACKENDS = [BACKEND, pytest.param("erofs", marks=needs_erofs)]


def _tree(root: Path, line: bytes = b"locked bytes") -> Path:
    return make_tree(root, {"bin": {"tool": (b"#!/bin/sh\necho " + line + b"\n", 0o755)}, "lib": {"m.py": b"X = 1\n"}})


def _run(state: Path, image: object, out: Path) -> tuple[int, bytes]:
    with open(out, "wb") as f:
        rc = run_from_images(state, {"T": image}, ["$ATTEST_IMAGE_T/bin/tool"], stdout=f.fileno())  # type: ignore[dict-item]
    return rc, out.read_bytes()


@pytest.mark.parametrize("backend", BACKENDS)
def test_held_a_marked_image_resealed_after_get_is_refused(tmp_path: Path, state: Path, backend: str) -> None:
    src = _tree(tmp_path / "src")
    inv = inventory_tree(src)
    freeze_tree(src, inv, state, backend=backend)
    image = Store(state).get(inv.identity)
    assert image.verified is VERIFIED
    reseal(Path(image.path).parent, backend, "bin/tool", b"#!/bin/sh\necho CHANGED\n")
    with pytest.raises(AttestError) as ei:
        _run(state, image, tmp_path / "out")
    assert ei.value.code in (FreezeCode.IMAGE_CHANGED, FreezeCode.IMAGE_NOT_IMMUTABLE)


@pytest.mark.parametrize("backend", BACKENDS)
def test_held_a_marked_image_is_refused_by_another_state_dir_holding_the_same_identity(tmp_path: Path, state: Path, backend: str) -> None:
    """The same identity frozen into state B, then B's copy tampered (resealed): A's mark never vouches for B."""
    src = _tree(tmp_path / "src")
    inv = inventory_tree(src)
    a, b = state.parent / "a", state.parent / "b"
    marked = freeze_tree(src, inv, a, backend=backend)
    other = freeze_tree(src, inv, b, backend=backend)
    reseal(Path(other.path).parent, backend, "bin/tool", b"#!/bin/sh\necho CHANGED\n")
    with pytest.raises(AttestError) as ei:
        _run(b, marked, tmp_path / "out")
    assert ei.value.code == FreezeCode.NOT_IN_STORE
    # replace() keeps the mark; pointed at B's entry, the snapshot is still A's inodes and change times.
    moved = dataclasses.replace(marked, path=Store(b).tree_path(marked.hex))
    assert moved.verified is VERIFIED
    with pytest.raises(AttestError) as ei:
        _run(b, moved, tmp_path / "out")
    assert ei.value.code in (FreezeCode.IMAGE_CHANGED, FreezeCode.IMAGE_NOT_IMMUTABLE)


@pytest.mark.parametrize("backend", BACKENDS)
def test_held_a_marked_image_whose_path_is_replaced_within_the_store(tmp_path: Path, state: Path, backend: str) -> None:
    s1, s2 = _tree(tmp_path / "s1"), _tree(tmp_path / "s2", b"OTHER")
    i1, i2 = inventory_tree(s1), inventory_tree(s2)
    marked = freeze_tree(s1, i1, state, backend=backend)
    freeze_tree(s2, i2, state, backend=backend)
    elsewhere = dataclasses.replace(marked, path=Store(state).tree_path(i2.digest_hex))
    with pytest.raises(AttestError) as ei:
        _run(state, elsewhere, tmp_path / "out")
    assert ei.value.code == FreezeCode.NOT_IN_STORE  # the path is not its identity's entry
    renamed = dataclasses.replace(elsewhere, identity=i2.identity)
    with pytest.raises(AttestError) as ei:
        _run(state, renamed, tmp_path / "out")
    assert ei.value.code == FreezeCode.IMAGE_CHANGED  # the snapshot is the other entry's inodes


@pytest.mark.parametrize("backend", BACKENDS)
def test_held_copies_and_pickles(tmp_path: Path, state: Path, backend: str) -> None:
    """copy.copy keeps the mark (same snapshot, same checks); pickle and deepcopy drop it (full verification)."""
    src = _tree(tmp_path / "src")
    inv = inventory_tree(src)
    freeze_tree(src, inv, state, backend=backend)
    marked = Store(state).get(inv.identity)
    assert copy.copy(marked).verified is VERIFIED
    assert copy.deepcopy(marked).verified is not VERIFIED
    assert pickle.loads(pickle.dumps(marked)).verified is not VERIFIED
    # An unmarked copy after a reseal goes through Store.get, which reads the changed bytes and refuses them.
    reseal(Path(marked.path).parent, backend, "bin/tool", b"#!/bin/sh\necho CHANGED\n")
    with pytest.raises(AttestError) as ei:
        _run(state, pickle.loads(pickle.dumps(marked)), tmp_path / "out")
    assert ei.value.code == FreezeCode.IMAGE_CHANGED


def test_held_gc_and_refreeze_with_the_entry_renamed_back(tmp_path: Path) -> None:
    """The entry moved aside (same inodes, same ctimes of everything under tree/), a new one put at the path
    and the old one renamed back: rename of store/<hex> does not move tree/'s ctime, and the bytes are the
    verified ones, so accepting it is right; a changed copy put there instead is refused."""
    src = _tree(tmp_path / "src")
    inv = inventory_tree(src)
    state = tmp_path / "state"
    marked = freeze_tree(src, inv, state, backend=BACKEND)
    entry = Path(marked.path).parent
    aside = entry.with_name("aside")
    os.rename(entry, aside)
    os.rename(aside, entry)
    rc, out = _run(state, marked, tmp_path / "out")
    assert (rc, out) == (0, b"locked bytes\n")
    subprocess.run(["cp", "-a", str(entry), str(aside)], check=True)
    os.chmod(aside, 0o700)
    subprocess.run(["chmod", "-R", "u+w", str(entry)], check=True)
    subprocess.run(["rm", "-rf", str(entry)], check=True)
    os.rename(aside, entry)
    with pytest.raises(AttestError) as ei:
        _run(state, marked, tmp_path / "out")
    assert ei.value.code == FreezeCode.IMAGE_CHANGED
