"""Retained bytes: verified bytes that later steps consume without ever reopening a path.

:func:`retain_file` reads one file of a frozen image through descriptors (no link followed),
confirms the entry is still the sealed inode with its recorded change time and seal, reads it
once, and checks the SHA-256 of exactly the bytes read against the expected digest. The
result holds an immutable ``bytes`` object; :meth:`RetainedBytes.memfd` (or
:func:`sealed_memfd`) puts the same bytes in a ``memfd`` sealed against writing, growing,
shrinking and further sealing, which a child process can read (``pass_fds``) but nobody can
change.

    >>> kept = retain_file(image, "SKILL.md", entry.sha256)
    >>> fd = kept.memfd(); subprocess.run([...], pass_fds=[fd])
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import stat
from dataclasses import dataclass

from .._fdio import write_all
from .._safefs import O_DIR, O_FILE
from ..errors import EnvironmentFailure, InputError, VerificationError
from ..inventory import EntryType, check_path, open_root
from ._backends import BACKENDS
from ._codes import FreezeCode
from ._erofs_image import read_image_file
from ._image import Image, check_image

_O_DIR = O_DIR
_O_FILE = O_FILE
ALL_SEALS = fcntl.F_SEAL_WRITE | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_SEAL
DEFAULT_MAX_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class RetainedBytes:
    """Verified bytes of ``path`` in the image ``identity``; ``data`` is never re-read from disk.

    Raises:
        EnvironmentFailure: ``SEAL_FAILED`` from :meth:`memfd` (see :func:`sealed_memfd`).
    """

    identity: str
    path: str
    sha256: str
    data: bytes

    def memfd(self, name: str = "attest-retained") -> int:
        """A new sealed memfd holding ``data`` (the caller closes it).

        Raises:
            EnvironmentFailure: ``SEAL_FAILED``.
        """
        return sealed_memfd(self.data, name)


def sealed_memfd(data: bytes, name: str = "attest-retained") -> int:
    """A memfd holding ``data``, sealed so no process can write, resize or unseal it.

    Raises:
        EnvironmentFailure: ``SEAL_FAILED`` (the kernel refuses or drops a seal).
        OSError: from ``memfd_create`` or the writes.
    """
    fd = os.memfd_create(name, os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    try:
        write_all(fd, data)
        os.lseek(fd, 0, os.SEEK_SET)
        seal_memfd(fd)
        return fd
    except BaseException:
        os.close(fd)
        raise


def seal_memfd(fd: int) -> None:
    """Add every seal to the memfd ``fd`` (no write mapping may exist) and confirm they hold.

    Raises:
        EnvironmentFailure: ``SEAL_FAILED``.
    """
    try:
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, ALL_SEALS)
        seals = fcntl.fcntl(fd, fcntl.F_GET_SEALS)
    except OSError as e:
        raise EnvironmentFailure(FreezeCode.SEAL_FAILED, f"cannot seal the memfd: {e.strerror}") from e
    if seals & ALL_SEALS != ALL_SEALS:
        raise EnvironmentFailure(FreezeCode.SEAL_FAILED, "the kernel did not keep every memfd seal")


def retain_file(image: Image, path: str, sha256: str, *, max_bytes: int = DEFAULT_MAX_BYTES) -> RetainedBytes:
    """Read ``path`` of the frozen ``image`` once and return its bytes if they hash to ``sha256``.

    Raises:
        InputError: ``BAD_PATH`` and the name codes for a malformed ``path``;
            ``RETAINED_MISMATCH`` for a file over ``max_bytes``; ``BAD_ROOT`` when the image
            root is missing.
        VerificationError: ``RETAINED_MISMATCH`` (not a sealed file of the image, or the bytes
            read do not hash to ``sha256``), ``IMAGE_CHANGED`` (a component cannot be opened,
            or the file is not the sealed inode), ``IMAGE_NOT_IMMUTABLE``, ``ROOT_SYMLINK``.
    """
    problem = check_path(path)
    if problem is not None:
        raise InputError(problem[0], problem[1], path)
    if image.erofs is not None:
        data = _read_erofs(image, path, max_bytes)
    else:
        data = _read_sealed(image, path, max_bytes)
    got = hashlib.sha256(data).hexdigest()
    if got != sha256.removeprefix("sha256:"):
        raise VerificationError(FreezeCode.RETAINED_MISMATCH, f"expected sha256 {sha256}, read {got}", path)
    return RetainedBytes(image.identity, path, got, data)


def _read_erofs(image: Image, path: str, max_bytes: int) -> bytes:
    """A file of an erofs image, read through a private mount of the image file whose seal is confirmed first."""
    entry = image.inventory.by_path().get(path) if image.inventory is not None else None
    if entry is None or entry.type is not EntryType.FILE:
        raise VerificationError(FreezeCode.RETAINED_MISMATCH, "not a file of the image's inventory", path)
    problems = check_image(image)
    if problems:
        raise VerificationError(findings=problems)
    data = read_image_file(image, path, max_bytes)
    if len(data) > max_bytes:
        raise InputError(FreezeCode.RETAINED_MISMATCH, f"the file is over the limit of {max_bytes} bytes", path)
    return data


def _read_sealed(image: Image, path: str, max_bytes: int) -> bytes:
    """A sealed file of a tree image, through descriptors, confirmed to be the sealed inode."""
    sealed = {s.path: s for s in image.sealed}.get(path)
    if sealed is None or sealed.is_dir:
        raise VerificationError(FreezeCode.RETAINED_MISMATCH, "not a sealed file of the image", path)
    backend = BACKENDS[image.backend]
    fd = open_root(image.path)
    try:
        for part in path.split("/")[:-1]:
            try:
                nfd = os.open(part, _O_DIR, dir_fd=fd)
            except OSError as e:
                raise VerificationError(FreezeCode.IMAGE_CHANGED, f"cannot open a directory of the path: {e.strerror}", path) from e
            os.close(fd)
            fd = nfd
        try:
            ffd = os.open(path.rsplit("/", 1)[-1], _O_FILE, dir_fd=fd)
        except OSError as e:
            raise VerificationError(FreezeCode.IMAGE_CHANGED, f"cannot open the file: {e.strerror}", path) from e
    finally:
        os.close(fd)
    try:
        st = os.fstat(ffd)
        why = backend.holds(ffd, st) if stat.S_ISREG(st.st_mode) else "not a regular file"
        if why is not None:
            raise VerificationError(FreezeCode.IMAGE_NOT_IMMUTABLE, why, path)
        if (st.st_dev, st.st_ino, st.st_ctime_ns) != (image.dev, sealed.ino, sealed.ctime_ns):
            raise VerificationError(FreezeCode.IMAGE_CHANGED, "the file is not the inode sealed at freeze time", path)
        if st.st_size > max_bytes:
            raise InputError(FreezeCode.RETAINED_MISMATCH, f"the file is {st.st_size} bytes; the limit is {max_bytes}", path)
        chunks: list[bytes] = []
        total = 0
        while True:
            chunk = os.read(ffd, min(1 << 20, max_bytes + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > max_bytes:
                raise InputError(FreezeCode.RETAINED_MISMATCH, f"the file grew past {max_bytes} bytes", path)
        return b"".join(chunks)
    finally:
        os.close(ffd)
