"""Attack review of run_from_images taking an Image (96ad1a2): only a verified Image's seal is checked again."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from support.caps import needs_immutable
from support.erofs import needs_erofs
from support.store import load_record, reseal
from support.trees import make_tree

from attest.errors import AttestError
from attest.freeze import FreezeCode, Store, freeze_tree, run_from_images
from attest.freeze._image import Image
from attest.inventory import inventory_tree


def _tree(tmp_path: Path) -> Path:
    return make_tree(tmp_path / "src", {"bin": {"tool": (b"#!/bin/sh\necho locked bytes\n", 0o755)}, "lib": {"m.py": b"X = 1\n"}})


@pytest.mark.parametrize("backend", [pytest.param("immutable", marks=needs_immutable), "readonly", pytest.param("erofs", marks=needs_erofs)])
def test_an_image_read_from_a_forged_record_is_not_taken_as_verified(tmp_path: Path, state: Path, backend: str) -> None:
    """An Image built from the record on disk (Store.load_record, image_from_record: what Store.ls, gc and
    freeze's reuse use internally) carries no mark of verification: exec verifies it in full, as it
    does a reference. Before the fix, after a reseal with a refreshed record, exec ran the changed
    bytes without reading one of them."""
    src = _tree(tmp_path)
    inv = inventory_tree(src)
    image = freeze_tree(src, inv, state, backend=backend)
    entry = Path(image.path).parent
    marker = tmp_path / "ran"
    reseal(entry, backend, "bin/tool", f"#!/bin/sh\n: > {marker}\n".encode())
    unverified = load_record(entry)
    assert isinstance(unverified, Image) and unverified.verified is None
    with pytest.raises(AttestError) as ei:
        run_from_images(state, {"T": unverified}, ["$ATTEST_IMAGE_T/bin/tool"])
    assert ei.value.code == FreezeCode.IMAGE_CHANGED and not marker.exists()
    assert any(f.code == "DIGEST_MISMATCH" and f.path == "bin/tool" for f in ei.value.findings)


@pytest.mark.parametrize("backend", [pytest.param("immutable", marks=needs_immutable), "readonly", pytest.param("erofs", marks=needs_erofs)])
def test_held_a_verified_image_after_gc_and_refreeze_of_the_same_identity(tmp_path: Path, state: Path, backend: str) -> None:
    """Held: the entry removed (gc) and frozen again under the same identity has new inodes and change times."""
    src = _tree(tmp_path)
    inv = inventory_tree(src)
    freeze_tree(src, inv, state, backend=backend)
    image = Store(state).get(inv.identity)
    Store(state).gc(recent=0, now=2**40)
    freeze_tree(src, inv, state, backend=backend)
    with pytest.raises(AttestError) as ei:
        run_from_images(state, {"T": image}, ["/bin/true"])
    assert ei.value.code in (FreezeCode.IMAGE_CHANGED, FreezeCode.IMAGE_NOT_IMMUTABLE)


@pytest.mark.parametrize("backend", [pytest.param("immutable", marks=needs_immutable), "readonly", pytest.param("erofs", marks=needs_erofs)])
def test_held_the_tree_swapped_by_renaming_its_unsealed_parent(tmp_path: Path, state: Path, backend: str) -> None:
    """Held: STORE/store/<hex> (the entry directory) is not sealed; renaming it aside and putting a
    tree with other bytes (the same names) at the path is a new root inode."""
    src = _tree(tmp_path)
    inv = inventory_tree(src)
    image = Store(state).get(freeze_tree(src, inv, state, backend=backend).identity)
    entry = Path(image.path).parent
    os.rename(entry, entry.with_name("aside"))
    (entry / "tree" / "bin").mkdir(parents=True)
    (entry / "tree" / "lib").mkdir()
    (entry / "tree" / "bin" / "tool").write_bytes(b"#!/bin/sh\necho CHANGED\n")
    (entry / "tree" / "lib" / "m.py").write_bytes(b"X = 1\n")
    with pytest.raises(AttestError) as ei:
        run_from_images(state, {"T": image}, ["$ATTEST_IMAGE_T/bin/tool"])
    assert ei.value.code in (FreezeCode.IMAGE_CHANGED, FreezeCode.IMAGE_NOT_IMMUTABLE)
