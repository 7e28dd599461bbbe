"""Small filesystem helpers shared by every layer: atomic writes and bounded reads."""

from __future__ import annotations

import os
import stat
import tempfile

from .errors import CommonCode, InputError


def write_atomic(path: str | os.PathLike[str], data: bytes, mode: int = 0o644) -> None:
    """Write ``data`` to ``path`` so a reader sees the old bytes or the new, never a mix.

    Temp file in the same directory, fsync, ``os.replace``, fsync of the directory.
    """
    target = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(target))
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".attest-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fchmod(f.fileno(), mode)
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    dfd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def read_bounded(path: str | os.PathLike[str], *, what: str, max_bytes: int) -> bytes:
    """Read a whole input file, refusing anything but a regular file of at most ``max_bytes``."""
    name = os.fspath(path)
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as e:
        raise InputError(CommonCode.UNREADABLE, f"cannot open the {what}: {e.strerror}", name) from e
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise InputError(CommonCode.UNREADABLE, f"the {what} is not a regular file", name)
        if st.st_size > max_bytes:
            raise InputError(CommonCode.TOO_LARGE, f"the {what} is {st.st_size} bytes; the limit is {max_bytes}", name)
        chunks = []
        total = 0
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            total += len(chunk)
            if total > max_bytes:
                raise InputError(CommonCode.TOO_LARGE, f"the {what} grew past {max_bytes} bytes", name)
            chunks.append(chunk)
        return b"".join(chunks)
    except OSError as e:
        raise InputError(CommonCode.UNREADABLE, f"cannot read the {what}: {e.strerror}", name) from e
    finally:
        os.close(fd)
