"""Attack review of run_from_images taking an Image (96ad1a2): only the seal is checked against its snapshot."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from support.caps import needs_immutable
from support.trees import make_tree

from attest.errors import AttestError
from attest.freeze import FreezeCode, Store, freeze_tree, run_from_images
from attest.freeze._image import RECORD_NAME, Image, Sealed
from attest.inventory import inventory_tree


@pytest.fixture(autouse=True)
def _clear_flags(tmp_path: Path):  # type: ignore[no-untyped-def]
    yield
    subprocess.run(["chattr", "-R", "-f", "-i", str(tmp_path)], check=False, capture_output=True)


def _tree(tmp_path: Path) -> Path:
    return make_tree(tmp_path / "src", {"bin": {"tool": (b"#!/bin/sh\necho locked bytes\n", 0o755)}, "lib": {"m.py": b"X = 1\n"}})


def _reseal(entry: Path, backend: str, rel: str, data: bytes) -> None:
    """Break the seal, change one file, seal again, refresh record.json (whoever can break it can)."""
    target = entry / "tree" / rel
    if backend == "immutable":
        subprocess.run(["chattr", "-i", str(target), str(entry / RECORD_NAME)], check=True)
    else:
        os.chmod(target, 0o755)
        os.chmod(entry / RECORD_NAME, 0o600)
    target.write_bytes(data)
    if backend == "immutable":
        subprocess.run(["chattr", "+i", str(target)], check=True)
    else:
        os.chmod(target, 0o555)
    fd = os.open(entry.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        old = Store(entry.parent.parent)._load(fd, entry.name)
    finally:
        os.close(fd)
    assert old is not None
    fresh = []
    for s in old.sealed:
        st = os.lstat(entry / "tree" / s.path) if s.path else os.lstat(entry / "tree")
        fresh.append(Sealed(s.path, s.is_dir, st.st_ino, st.st_ctime_ns))
    import dataclasses

    (entry / RECORD_NAME).write_bytes(dataclasses.replace(old, sealed=tuple(fresh)).record_bytes())
    if backend == "immutable":
        subprocess.run(["chattr", "+i", str(entry / RECORD_NAME)], check=True)


@pytest.mark.parametrize("backend", [pytest.param("immutable", marks=needs_immutable), "readonly"])
def test_an_image_read_from_a_forged_record_is_not_taken_as_verified(tmp_path: Path, backend: str) -> None:
    """The contract ("an Image the caller took with Store.get") is not enforced: any Image whose path is
    the store's and whose snapshot matches the disk is run without a byte being read. An Image built from
    the on-disk record (Store._load, image_from_record: what Store.ls/gc and freeze's reuse use internally)
    after a reseal runs the changed bytes; Store.get on the same entry refuses them."""
    src = _tree(tmp_path)
    inv = inventory_tree(src)
    state = tmp_path / "state"
    image = freeze_tree(src, inv, state, backend=backend)
    entry = Path(image.path).parent
    _reseal(entry, backend, "bin/tool", b"#!/bin/sh\necho CHANGED BYTES RAN\n")
    with pytest.raises(AttestError):
        Store(state).get(inv.identity)  # the path that reads every byte refuses it
    fd = os.open(entry.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        unverified = Store(state)._load(fd, entry.name)
    finally:
        os.close(fd)
    assert isinstance(unverified, Image)
    out = tmp_path / "out"
    with open(out, "wb") as f:
        try:
            rc = run_from_images(state, {"T": unverified}, ["$ATTEST_IMAGE_T/bin/tool"], stdout=f.fileno())
        except AttestError:
            return
    pytest.fail(f"exec ran bytes no verification ever read (rc {rc}): {out.read_bytes()!r}")


@pytest.mark.parametrize("backend", [pytest.param("immutable", marks=needs_immutable), "readonly"])
def test_held_a_verified_image_after_gc_and_refreeze_of_the_same_identity(tmp_path: Path, backend: str) -> None:
    """Held: the entry removed (gc) and frozen again under the same identity has new inodes and change times."""
    src = _tree(tmp_path)
    inv = inventory_tree(src)
    state = tmp_path / "state"
    freeze_tree(src, inv, state, backend=backend)
    image = Store(state).get(inv.identity)
    Store(state).gc(recent=0, now=2**40)
    freeze_tree(src, inv, state, backend=backend)
    with pytest.raises(AttestError) as ei:
        run_from_images(state, {"T": image}, ["/bin/true"])
    assert ei.value.code in (FreezeCode.IMAGE_CHANGED, FreezeCode.IMAGE_NOT_IMMUTABLE)


@pytest.mark.parametrize("backend", [pytest.param("immutable", marks=needs_immutable), "readonly"])
def test_held_the_tree_swapped_by_renaming_its_unsealed_parent(tmp_path: Path, backend: str) -> None:
    """Held: STORE/store/<hex> (the entry directory) is not sealed; renaming it aside and putting a
    tree with other bytes (the same names) at the path is a new root inode."""
    src = _tree(tmp_path)
    inv = inventory_tree(src)
    state = tmp_path / "state"
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
