"""The ``erofs`` backend in tests: whether it can run here, where its state lives, and its attacker's tools.

The kernel mounts no EROFS image from a file on a tmpfs ("Block device required"), and as root
the suite keeps its temporary files on a private tmpfs (support/tmpfs.py). So the erofs tests
keep their state directories on disk: under :func:`disk_root` (below ``/var/tmp``), one private
directory per test, removed (immutable flags cleared first) at the end of the session.

:func:`rebuild` is the attack of whoever may break the seal of an erofs image: read the image's
tree out through a private mount, change it, build a new image of it with the same pinned flags,
put it in place of the old one, seal it again and rewrite the record to describe it.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest

from attest._json import canonical_bytes
from attest.errors import EnvironmentFailure
from attest.freeze import ErofsBackend
from attest.freeze._erofs import IMAGE_NAME, MKFS_FLAGS, in_mount
from attest.freeze._image import RECORD_NAME

__all__ = ["DISK_BASE", "EROFS_PROBLEM", "disk_root", "needs_erofs", "rebuild", "reseal_erofs", "tree_of"]

#: A disk filesystem for the erofs tests' state (the suite's tmpfs cannot back an image file).
DISK_BASE = "/var/tmp"


def _problem() -> str | None:
    """Why the erofs backend cannot be established here (None: it can)."""
    if os.geteuid() != 0:
        return "the erofs backend needs root (mount, CAP_LINUX_IMMUTABLE); an ordinary user keeps 'readonly'"
    backend = ErofsBackend()
    if not os.path.isabs(backend.mkfs):
        return "mkfs.erofs (erofs-utils) is not installed"
    scratch = tempfile.mkdtemp(prefix="attest-erofs-caps-", dir=DISK_BASE)
    fd = os.open(scratch, os.O_RDONLY | os.O_DIRECTORY)
    try:
        backend.probe(fd, scratch)
    except EnvironmentFailure as e:
        return f"{e.code}: {e.detail}"
    finally:
        os.close(fd)
        shutil.rmtree(scratch, ignore_errors=True)
    return None


EROFS_PROBLEM = _problem()
needs_erofs = pytest.mark.skipif(EROFS_PROBLEM is not None, reason=f"the erofs backend is not available here: {EROFS_PROBLEM}")

_ROOTS: list[str] = []


def disk_root() -> Path:
    """This process's private directory on disk for erofs state (made once; :func:`remove_disk_roots` removes it)."""
    if not _ROOTS:
        _ROOTS.append(tempfile.mkdtemp(prefix="attest-erofs-tests-", dir=DISK_BASE))
    return Path(_ROOTS[0])


def remove_disk_roots() -> None:
    for root in _ROOTS:
        subprocess.run(["chattr", "-R", "-f", "-i", root], check=False, capture_output=True)
        shutil.rmtree(root, ignore_errors=True)
    _ROOTS.clear()


def tree_of(image_dir: Path, dest: Path) -> Path:
    """Copy what the stored image at ``image_dir`` holds (read through a private mount) to ``dest``."""
    fd = os.open(image_dir / IMAGE_NAME, os.O_RDONLY)
    try:
        in_mount(fd, str(image_dir / "tree"), lambda root: shutil.copytree(root, dest, symlinks=True))
    finally:
        os.close(fd)
    return dest


def build(tree: Path, image: Path) -> None:
    """An image of ``tree`` with the product's pinned flags (what a careful forger would use)."""
    subprocess.run(["mkfs.erofs", *MKFS_FLAGS, str(image), str(tree)], check=True, env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"})


def rebuild(image_dir: Path, change: Callable[[Path], None], *, record: bool = True) -> None:
    """Replace the image of ``image_dir`` by one of its tree after ``change``; reseal; with ``record``, rewrite the record."""
    work = Path(tempfile.mkdtemp(dir=image_dir.parent.parent))  # the state directory's own disk
    try:
        tree = tree_of(image_dir, work / "tree")
        change(tree)
        build(tree, work / "new.img")
        data = (work / "new.img").read_bytes()
    finally:
        shutil.rmtree(work)
    target = image_dir / IMAGE_NAME
    subprocess.run(["chattr", "-i", str(target), str(image_dir / RECORD_NAME)], check=True)
    os.chmod(target, 0o600)
    with open(target, "r+b") as f:  # the same inode: only its change time, size and bytes move
        f.truncate(0)
        f.write(data)
    os.chmod(target, 0o400)
    subprocess.run(["chattr", "+i", str(target)], check=True)
    if record:
        st = os.stat(target)
        doc = json.loads((image_dir / RECORD_NAME).read_bytes())
        doc["erofs"].update(sha256=hashlib.sha256(data).hexdigest(), size=str(st.st_size), ino=str(st.st_ino), ctime=str(st.st_ctime_ns))
        (image_dir / RECORD_NAME).write_bytes(canonical_bytes(doc))
    subprocess.run(["chattr", "+i", str(image_dir / RECORD_NAME)], check=True)


def reseal_erofs(image_dir: Path, rel: str, data: bytes) -> None:
    """:func:`support.store.reseal` for erofs: one file of the image changed, its mode kept, everything resealed."""

    def change(tree: Path) -> None:
        target = tree / rel
        mode = target.stat().st_mode & 0o777
        os.chmod(target, mode | 0o200)
        target.write_bytes(data)
        os.chmod(target, mode)

    rebuild(image_dir, change)
