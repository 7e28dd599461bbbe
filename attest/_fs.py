"""Small filesystem helpers shared by every layer: atomic writes, bounded reads, and the one
judgement of an output path the user named (``-o``, ``--state-dir``, ``--cache``, ...).

    >>> write_atomic("out/inventory.json", b"{}")   # InputError BAD_OUTPUT_PATH if out/ is missing
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile

from .errors import CommonCode, InputError

# What the user asked for cannot be written there: their path, not a failing disk (ENOSPC,
# EIO and the like still escape as themselves).
_PATH_ERRNOS = {
    errno.ENOENT: "its directory does not exist",
    errno.ENOTDIR: "a component of the path is not a directory",
    errno.EISDIR: "it is a directory",
    errno.EACCES: "permission denied",
    errno.EPERM: "permission denied",
    errno.EROFS: "the file system is read-only",
    errno.ENAMETOOLONG: "the name is too long",
    errno.ELOOP: "too many levels of symbolic links",
    errno.EBUSY: "it is in use (a mount point?)",
}


def _bad_output(e: OSError, target: str, what: str) -> InputError | None:
    why = _PATH_ERRNOS.get(e.errno or 0)
    if why is None:
        return None
    return InputError(CommonCode.BAD_OUTPUT_PATH, f"cannot write the {what} there: {why}", target)


def write_atomic(path: str | os.PathLike[str], data: bytes, mode: int = 0o644, *, what: str = "output") -> None:
    """Write ``data`` to ``path`` so a reader sees the old bytes or the new, never a mix.

    Temp file in the same directory, fsync, ``os.replace``, fsync of the directory. A path
    that cannot be written as asked (a directory, a missing or non-directory parent, no
    permission) is bad usage: :class:`InputError` ``BAD_OUTPUT_PATH``, for every command.
    """
    target = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(target))
    try:
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".attest-", suffix=".tmp")
    except OSError as e:
        bad = _bad_output(e, target, what)
        if bad is None:
            raise
        raise bad from e
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fchmod(f.fileno(), mode)
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException as e:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        bad = _bad_output(e, target, what) if isinstance(e, OSError) else None
        if bad is not None:
            raise bad from e
        raise
    dfd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def check_output_path(path: str | os.PathLike[str], *, what: str) -> None:
    """Refuse, as bad usage, a path for a new file that is a directory or whose directory is
    missing or not a directory; for writers that create the file themselves (``O_EXCL``)."""
    target = os.fspath(path)
    if os.path.isdir(target):
        raise InputError(CommonCode.BAD_OUTPUT_PATH, f"cannot write the {what} there: it is a directory", target)
    parent = os.path.dirname(os.path.abspath(target))
    if not os.path.isdir(parent):
        why = "a component of the path is not a directory" if os.path.lexists(parent) else "its directory does not exist"
        raise InputError(CommonCode.BAD_OUTPUT_PATH, f"cannot write the {what} there: {why}", target)


def check_directory_path(path: str | os.PathLike[str], *, what: str) -> None:
    """Refuse, as bad usage, a directory option (``--state-dir``, ``--cache``) that names, or
    lies below, something that is not a directory. A missing path is fine (it is created); a
    symlink, permissions and privacy are the owning layer's to judge, with its own codes."""
    given = os.fspath(path)
    probe = os.path.abspath(given)
    while True:
        try:
            st = os.stat(probe)
        except (FileNotFoundError, NotADirectoryError):
            parent = os.path.dirname(probe)
            if parent == probe:
                return
            probe = parent
            continue
        except OSError:
            return
        if not stat.S_ISDIR(st.st_mode):
            where = "it is" if probe == os.path.abspath(given) else f"{probe} is"
            raise InputError(CommonCode.BAD_OUTPUT_PATH, f"the {what} must be a directory: {where} not a directory", given)
        return


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
