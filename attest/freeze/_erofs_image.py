"""Freezing into, verifying and reading an ``erofs`` image (the store side of :mod:`attest.freeze._erofs`).

The freeze (:func:`freeze_erofs`), in the order of every authority input:

1. private materialization of the attested entries into ``STAGING/src`` (the same copier as the
   other backends, entries not sealed one by one: the check in step 3 reads every one of them);
2. ``mkfs.erofs`` with pinned flags writes ``STAGING/image.erofs`` (created 0400 first); the
   staging tree is removed; the image file is written back (``fsync``), sealed with the
   immutable flag, then hashed, and its inode and change time recorded; the empty ``tree``
   directory, its mount point, is sealed too;
3. the image is mounted read-only in a private namespace from that descriptor and every entry
   read through the mount is compared with the attested inventory (``EROFS_MISMATCH``).

Every later use (:func:`verify_erofs`) hashes the image file against its record **and** reads
every entry through a fresh mount: a record can be rewritten together with a resealed image,
so the hash alone decides nothing (docs/freeze.md, the ``erofs`` row).

    >>> image = freeze_erofs(wrap_fd, wrap_path, source=..., expected=..., backend=..., created=0)
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from typing import ClassVar

from .._safefs import O_FILE, O_NEW
from ..errors import AttestError, EnvironmentFailure, Finding, VerificationError
from ..inventory import Inventory, open_root, verify_tree
from ..inventory._names import sort_key
from ._backends import ErofsBackend
from ._codes import FreezeCode
from ._erofs import (
    IMAGE_NAME,
    SOURCE_NAME,
    ErofsRecord,
    build_image,
    gate,
    hash_fd,
    in_own_mount,
    open_image_file,
    read_through_mount,
    superblock_problem,
)
from ._image import TREE_NAME, Image, check_image, snapshot
from ._materialize import Progress, materialize
from ._state import make_private_dir, remove_tree


class _StagingOnly:
    """The copier's backend for an erofs freeze: nothing is sealed per entry (the image is, as a whole).

    Raises:
        Nothing.
    """

    name: ClassVar[str] = "erofs"
    guarantee: ClassVar[str] = "private staging only: the image built from it is sealed and checked through its mount"
    mode_mask: ClassVar[int] = 0
    needs_fd: ClassVar[bool] = False
    statx_attr: ClassVar[int] = 0
    seal_writes_back: ClassVar[bool] = False

    def probe(self, scratch_fd: int, scratch_path: str) -> None:
        return None

    def seal(self, fd: int) -> None:
        return None

    def holds(self, fd: int | None, st: os.stat_result) -> str | None:
        return "staging is never a sealed image"

    def wrap(self, argv: Sequence[str], images: Sequence[str], cwd: str | None) -> list[str]:
        return list(argv)


def _mismatch(e: VerificationError) -> VerificationError:
    return VerificationError(findings=[Finding(FreezeCode.EROFS_MISMATCH, None, "the image read through its read-only mount is not its inventory"),
                                       *e.findings])


def foreign_metadata(root: str, expected: Inventory, max_findings: int = 100) -> list[Finding]:
    """Every entry of the mounted image (already verified to be exactly ``expected``) that the pinned flags never write.

    ``--all-root`` makes every inode root's, ``-x-1`` writes no extended attribute and ``-T0``
    gives every inode the time 0, so an entry owned by another user or group, with any extended
    attribute (a file capability, an ACL, a security label) or another modification time (which
    decides, for one, whether Python runs a listed .pyc or its listed .py) was not built from
    the inventory by the freeze: ``EROFS_MISMATCH``.
    The paths are walked by name inside the private read-only mount, where :func:`verify_tree`
    just found no link.

    Raises:
        Nothing: the findings are returned.
    """
    findings: list[Finding] = []
    for rel in ("", *(e.path for e in expected.entries)):
        path = f"{root}/{rel}" if rel else root
        try:
            st = os.lstat(path)
            names = os.listxattr(path, follow_symlinks=False)
        except OSError as e:
            findings.append(Finding(FreezeCode.EROFS_MISMATCH, rel or None, f"cannot read its owner or extended attributes: {e.strerror}"))
            continue
        if st.st_uid != 0 or st.st_gid != 0:
            findings.append(Finding(FreezeCode.EROFS_MISMATCH, rel or None,
                                    f"owned by uid {st.st_uid} gid {st.st_gid}: the freeze's images are root's (--all-root)"))
        if names:
            findings.append(Finding(FreezeCode.EROFS_MISMATCH, rel or None,
                                    f"has extended attributes ({', '.join(sorted(names))[:200]}): the freeze writes none (-x-1)"))
        if st.st_mtime_ns != 0:  # a time tells programs which of two files is newer (Python: a .pyc against its .py)
            findings.append(Finding(FreezeCode.EROFS_MISMATCH, rel or None,
                                    f"has modification time {st.st_mtime_ns} ns: the freeze's images have none (-T0)"))
        if len(findings) >= max_findings:
            break
    return findings


def check_through_mount(image_fd: int, target: str, expected: Inventory, progress: Progress | None = None) -> None:
    """Mount the image behind ``image_fd`` privately and verify every entry against ``expected``.

    The walk starts at the root of that very mount (:func:`attest.freeze._erofs.in_own_mount`),
    never at a path: ``target`` (the entry's mount point) is not used for it.

    Raises:
        VerificationError: ``EROFS_MISMATCH`` followed by the inventory's codes (``EXTRA``,
            ``MISSING``, ``TYPE_CHANGED``, ``MODE_CHANGED``, ``DIGEST_MISMATCH``, ``SYMLINK``, ...),
            or by ``EROFS_MISMATCH`` per entry with an owner or extended attribute the pinned
            flags never write (:func:`foreign_metadata`).
        EnvironmentFailure: ``BACKEND_UNAVAILABLE`` (the mount cannot be made here: the
            environment's fault; a mount the kernel refuses for the image's bytes is
            ``EROFS_MISMATCH``).
    """
    def check(root: str) -> None:
        # exact: the image holds the listed entries only, so no ignore pattern applies.
        verify_tree(root, expected, exact=True, progress=progress)
        foreign = foreign_metadata(root, expected)
        if foreign:
            raise VerificationError(findings=foreign)

    try:
        problem = superblock_problem(image_fd)
    except OSError as e:
        raise VerificationError(FreezeCode.EROFS_MISMATCH, f"the image's superblock cannot be read: {e.strerror}") from e
    if problem is not None:
        raise VerificationError(findings=[Finding(FreezeCode.EROFS_MISMATCH, None, problem)])
    try:
        in_own_mount(image_fd, check)  # walked from the mount's own root, never from a path (target is not used)
    except VerificationError as e:
        raise _mismatch(e) from e
    except OSError as e:  # the kernel refused the image (ImageRefused), or the mount did not take effect
        raise VerificationError(findings=[Finding(FreezeCode.EROFS_MISMATCH, None,
                                                  f"the image cannot be read through a mount: {e.strerror}")]) from e
    except AttestError as e:  # BAD_ROOT and the like from the walk: what the mount shows is not a tree of this inventory
        if isinstance(e, VerificationError | EnvironmentFailure):
            raise
        raise VerificationError(findings=[Finding(FreezeCode.EROFS_MISMATCH, None, f"the image's root cannot be walked: {e}")]) from e


def freeze_erofs(
    wrap_fd: int,
    wrap_path: str,
    *,
    source: str | os.PathLike[str],
    expected: Inventory,
    backend: ErofsBackend,
    created: int,
    progress: Progress | None,
    workers: int,
) -> Image:
    """Steps 1-3 of the module docstring in the private staging directory ``wrap_fd``; the unpublished image.

    Raises:
        VerificationError: the materialization's findings, ``EROFS_MISMATCH``, ``CHANGED_AFTER_FREEZE``.
        EnvironmentFailure: ``BACKEND_UNAVAILABLE``, ``EROFS_NOT_REPRODUCIBLE``, ``STAGING_FAILED``.
    """
    src_fd = make_private_dir(wrap_fd, SOURCE_NAME, f"{wrap_path}/{SOURCE_NAME}")
    try:
        findings, _ = materialize(source, expected, src_fd, _StagingOnly(), workers=workers)
    finally:
        os.close(src_fd)
    if findings:
        raise VerificationError(findings=sorted(findings, key=lambda f: (sort_key(f.path) if f.path else (), f.code)))
    version = gate(backend.mkfs, wrap_fd, wrap_path).version  # probed already: the cached verdict of this binary
    os.close(os.open(IMAGE_NAME, O_NEW, 0o400, dir_fd=wrap_fd))
    build_image(backend.mkfs, f"{wrap_path}/{IMAGE_NAME}", f"{wrap_path}/{SOURCE_NAME}")
    remove_tree(wrap_fd, SOURCE_NAME, f"{wrap_path}/{SOURCE_NAME}")
    try:
        ifd = os.open(IMAGE_NAME, O_FILE, dir_fd=wrap_fd)
    except OSError as e:  # gone, or replaced by a link (O_NOFOLLOW): not the private file staging holds
        raise VerificationError(FreezeCode.STAGING_EXISTS, f"the image file mkfs.erofs wrote cannot be opened as a file: {e.strerror}",
                                f"{wrap_path}/{IMAGE_NAME}") from e
    try:
        record = _seal_image_file(ifd, backend, version, f"{wrap_path}/{IMAGE_NAME}")
        tfd = make_private_dir(wrap_fd, TREE_NAME, f"{wrap_path}/{TREE_NAME}")
        try:
            backend.seal(tfd)
            root = snapshot(tfd, "", True)
            dev = os.fstat(tfd).st_dev
        finally:
            os.close(tfd)
        image = Image(f"{wrap_path}/{TREE_NAME}", expected.identity, backend.name, dev, created, (root,), inventory=expected, erofs=record)
        check_through_mount(ifd, image.path, expected, progress)
    finally:
        os.close(ifd)
    moved = check_image(image, flags=False)
    if moved:
        raise VerificationError(
            findings=[Finding(FreezeCode.CHANGED_AFTER_FREEZE, f.path, f"changed while it was verified: {f.detail}") for f in moved]
        )
    return image


def _seal_image_file(ifd: int, backend: ErofsBackend, version: str, where: str) -> ErofsRecord:
    """Mode 0400, written back, immutable; then hashed: the record of the sealed file."""
    st = os.fstat(ifd)
    if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1 or st.st_uid != os.geteuid():
        raise VerificationError(FreezeCode.STAGING_EXISTS, "the image file mkfs.erofs wrote is not a private regular file with one name", where)
    os.fchmod(ifd, 0o400)
    os.fsync(ifd)
    backend.seal(ifd)
    digest = hash_fd(ifd)
    st = os.fstat(ifd)
    return ErofsRecord(digest, st.st_size, st.st_ino, st.st_ctime_ns, version)


def _open_entry(image: Image) -> int:
    try:
        return open_root(image.entry_path)
    except AttestError as e:
        raise VerificationError(FreezeCode.IMAGE_CHANGED, f"the store entry cannot be opened safely: {e.detail}", image.entry_path) from e


def verify_erofs(image: Image, expected: Inventory, progress: Progress | None = None) -> None:
    """The bytes of a stored erofs image: its file hashes to the record, and every entry read through a mount is ``expected``.

    Raises:
        VerificationError: ``IMAGE_CHANGED`` (the file is not the recorded inode or bytes),
            ``EROFS_MISMATCH`` and the inventory's codes.
        EnvironmentFailure: ``BACKEND_UNAVAILABLE`` (the mount).
    """
    assert image.erofs is not None
    efd = _open_entry(image)
    try:
        ifd = open_image_file(efd, image.erofs, f"{image.entry_path}/{IMAGE_NAME}")
    finally:
        os.close(efd)
    try:
        check_through_mount(ifd, image.path, expected, progress)
    finally:
        os.close(ifd)


def open_checked_image_file(image: Image) -> int:
    """A descriptor of the image file, confirmed to be the recorded inode, change time and size (not hashed).

    For a use right after the image verified (exec mounts it; retained bytes and a runtime
    manifest are read through it and checked against their own digests).

    Raises:
        VerificationError: ``IMAGE_CHANGED``.
    """
    assert image.erofs is not None
    rec = image.erofs
    efd = _open_entry(image)
    try:
        try:
            fd = os.open(IMAGE_NAME, O_FILE, dir_fd=efd)
        except OSError as e:
            raise VerificationError(FreezeCode.IMAGE_CHANGED, f"the image file cannot be opened: {e.strerror}", image.entry_path) from e
    finally:
        os.close(efd)
    st = os.fstat(fd)
    if (st.st_ino, st.st_ctime_ns, st.st_size) != (rec.ino, rec.ctime_ns, rec.size):
        os.close(fd)
        raise VerificationError(FreezeCode.IMAGE_CHANGED, "the image file is not the inode sealed at freeze time", image.entry_path)
    return fd


def read_image_file(image: Image, path: str, max_bytes: int) -> bytes:
    """The bytes of the file ``path`` of an erofs image, read through a private read-only mount (at most ``max_bytes + 1``).

    Raises:
        VerificationError: ``IMAGE_CHANGED`` (the image file, or the path cannot be opened without following a link).
        EnvironmentFailure: ``BACKEND_UNAVAILABLE`` (the mount).
    """
    fd = open_checked_image_file(image)
    try:
        problem = superblock_problem(fd)
        if problem is not None:
            raise VerificationError(FreezeCode.IMAGE_CHANGED, problem, image.entry_path)
        return read_through_mount(fd, path, max_bytes)
    except OSError as e:
        raise VerificationError(FreezeCode.IMAGE_CHANGED, f"cannot read it through the image's mount: {e.strerror}", path) from e
    finally:
        os.close(fd)


__all__ = ["check_through_mount", "freeze_erofs", "open_checked_image_file", "read_image_file", "verify_erofs"]
