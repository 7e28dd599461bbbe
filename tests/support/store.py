"""The store attacks of whoever can break a seal: root with CAP_LINUX_IMMUTABLE for ``immutable``,
the owner for ``readonly``. Real files, real flags."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from attest.freeze import Store
from attest.freeze._image import RECORD_NAME, Image, Sealed
from support.trees import chattr


def load_record(image_dir: Path) -> Image:
    """The image as its record on disk describes it (``Store.load_record``: no byte read, no mark of verification)."""
    fd = os.open(image_dir.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        image = Store(image_dir.parent.parent).load_record(fd, image_dir.name)
    finally:
        os.close(fd)
    assert image is not None
    return image


def rewrite_record(image_dir: Path) -> None:
    """What whoever can break the seal does last: index the tree as it now is (added entries included)."""
    tree = image_dir / "tree"
    fresh = []
    for dirpath, dirnames, filenames in os.walk(tree):
        dirnames.sort()
        rel = os.path.relpath(dirpath, tree)
        rel = "" if rel == "." else rel
        st = os.lstat(dirpath)
        fresh.append(Sealed(rel, True, st.st_ino, st.st_ctime_ns))
        for fn in sorted(filenames):
            st = os.lstat(os.path.join(dirpath, fn))
            fresh.append(Sealed(f"{rel}/{fn}" if rel else fn, False, st.st_ino, st.st_ctime_ns))
    record = dataclasses.replace(load_record(image_dir), sealed=tuple(fresh)).record_bytes()
    (image_dir / RECORD_NAME).write_bytes(record)


def reseal(image_dir: Path, backend: str, rel: str, data: bytes) -> None:
    """The attacker's whole procedure for one file of a stored image: break the seal, change the
    file (keeping its mode), seal it again, refresh the record."""
    if backend == "erofs":
        from support.erofs import reseal_erofs

        reseal_erofs(image_dir, rel, data)
        return
    target = image_dir / "tree" / rel
    mode = target.stat().st_mode & 0o777
    if backend == "immutable":
        chattr("-i", target, image_dir / RECORD_NAME)
    else:
        os.chmod(target, mode | 0o200)
        os.chmod(image_dir / RECORD_NAME, 0o600)
    target.write_bytes(data)
    if backend == "immutable":
        chattr("+i", target)
    else:
        os.chmod(target, mode)
    rewrite_record(image_dir)
    if backend == "immutable":
        chattr("+i", image_dir / RECORD_NAME)
    else:
        os.chmod(image_dir / RECORD_NAME, 0o400)


def image_bytes(image_path: str | os.PathLike[str], rel: str) -> bytes:
    """The bytes of ``rel`` in the stored image at ``image_path`` (an erofs image: read through a private mount)."""
    entry = Path(image_path).parent
    if not (entry / "image.erofs").exists():
        return (Path(image_path) / rel).read_bytes()
    from attest.freeze._erofs import read_through_mount

    fd = os.open(entry / "image.erofs", os.O_RDONLY)
    try:
        return read_through_mount(fd, rel, 1 << 30)
    finally:
        os.close(fd)
