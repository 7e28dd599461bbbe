"""Immutability backends: how a staged image is made unchangeable, and how that is re-checked.

A backend is chosen by name from :data:`BACKENDS` and recorded in the image's store record.
Each one states the guarantee it gives (``guarantee``); docs/freeze.md repeats them.

- ``immutable``: the Linux immutable inode flag (``FS_IMMUTABLE_FL`` through the
  ``FS_IOC_SETFLAGS`` ioctl) on every file and directory. Nobody, root included, can write,
  rename, link or unlink through any path or any descriptor opened later until the flag is
  cleared, and clearing it moves the inode change time, which reuse checks. Needs
  ``CAP_LINUX_IMMUTABLE`` and a filesystem that supports the flag.
- ``readonly``: write bits removed, owned by the deployment user. Holds only against processes
  of another user: the owner (and root) can still write, so reuse relies on inode change times.
- ``ro-bind``: at rest like ``readonly``; the consuming command of ``attest exec`` sees every
  image through a read-only bind mount in a private mount namespace, so nothing it runs (root
  included, short of remounting) can write the image. Holds only inside that namespace.
- ``erofs``: one EROFS image file built with pinned flags, sealed with the immutable flag, read
  only through a read-only file-backed mount in a private mount namespace
  (:mod:`attest.freeze._erofs`). Needs root, ``mkfs.erofs`` that reproduces the gate image, and a
  state directory on a block-backed filesystem.

A backend that cannot be established is refused (:class:`EnvironmentFailure`
``BACKEND_UNAVAILABLE``); there is no silent fallback.

    >>> backend = get_backend("immutable"); backend.probe(staging_dir_fd)
"""

from __future__ import annotations

import ctypes
import errno
import os
import shutil
import stat
import struct
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import ClassVar, Protocol

from .._safefs import FS_IMMUTABLE_FL, O_NEW, clear_immutable, get_flags, set_flags
from ..errors import EnvironmentFailure, InputError
from . import _erofs
from ._codes import FreezeCode

_WRITE_BITS = 0o222


_AT_SYMLINK_NOFOLLOW = 0x100
_STATX_BASIC_STATS = 0x7FF
STATX_ATTR_IMMUTABLE = 0x10
_STATX = struct.Struct("=IIQIIIHHQQQQ16x16x16x16xIIII")  # up to stx_dev_minor; the rest is padding
#: statx(dirfd, pathname, flags, mask, statxbuf) -> 0 or -1, as the C library's wrapper is called here.
_StatxFn = Callable[[int, bytes, int, int, ctypes.Array[ctypes.c_char]], int]


def _load_statx() -> _StatxFn | None:
    try:
        fn = ctypes.CDLL(None, use_errno=True).statx
    except (OSError, AttributeError):  # no glibc statx wrapper: callers fall back to open + ioctl
        return None
    fn.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_uint, ctypes.c_void_p)
    return fn


_statx_fn = _load_statx()


@dataclass(frozen=True, slots=True)
class Statx:
    mode: int
    ino: int
    ctime_ns: int
    attributes: int
    attributes_mask: int


def statx_nofollow(dir_fd: int, name: str) -> Statx | None:
    """statx(2) of ``name`` under ``dir_fd`` without following a link, or None if unavailable.

    One system call gives the inode, change time and the immutable attribute, so checking a
    sealed file needs no open.
    """
    if _statx_fn is None:
        return None
    buf = ctypes.create_string_buffer(256)
    if _statx_fn(dir_fd, os.fsencode(name), _AT_SYMLINK_NOFOLLOW, _STATX_BASIC_STATS, buf) != 0:
        return None
    f = _STATX.unpack_from(buf.raw)
    # f: mask, blksize, attributes, nlink, uid, gid, mode, spare, ino, size, blocks, attributes_mask
    ctime_sec, ctime_nsec = struct.unpack_from("=qI", buf.raw, 96)
    return Statx(f[6], f[8], ctime_sec * 1_000_000_000 + ctime_nsec, f[2], f[11])


# stx_attributes (8), stx_mode (28), stx_ino (32), stx_attributes_mask (56), stx_ctime sec/nsec (96).
_STATX_FEW = struct.Struct("=8xQ12xH2xQ16xQ32xqI")


class StatxReader:
    """statx(2) of many names, one reused buffer: (attributes, attributes_mask, mode, ino, ctime_ns).

    For checking thousands of sealed entries (store reuse): no allocation or dataclass per
    call. Not thread-safe (one buffer); None from :meth:`read` when the call fails.
    """

    __slots__ = ("_buf", "_fn", "_unpack")

    def __init__(self) -> None:
        self._buf = ctypes.create_string_buffer(256)
        self._fn = _statx_fn
        self._unpack = _STATX_FEW.unpack_from

    @staticmethod
    def available() -> bool:
        return _statx_fn is not None

    def read(self, dir_fd: int, name: bytes) -> tuple[int, int, int, int, int] | None:
        if self._fn is None or self._fn(dir_fd, name, _AT_SYMLINK_NOFOLLOW, _STATX_BASIC_STATS, self._buf) != 0:
            return None
        attrs, mode, ino, amask, csec, cnsec = self._unpack(self._buf)
        return attrs, amask, mode, ino, csec * 1_000_000_000 + cnsec


class Backend(Protocol):
    """How an image is sealed, how its seal is re-checked, and how a consumer is confined.

    Raises:
        EnvironmentFailure: ``BACKEND_UNAVAILABLE`` from :meth:`probe`.
        OSError: from :meth:`seal` (the caller reports it); :meth:`holds` returns why a seal
            does not hold instead of raising, and :meth:`wrap` raises nothing.
    """

    name: ClassVar[str]
    guarantee: ClassVar[str]
    #: Permission bits removed from every attested mode in the image (verified that way).
    mode_mask: ClassVar[int]
    #: Whether :meth:`holds` needs an open descriptor of the entry (else ``st`` is enough).
    needs_fd: ClassVar[bool]
    #: The statx(2) attribute that shows the seal without opening the entry (0: none).
    statx_attr: ClassVar[int]
    #: Whether sealing a file writes its dirty pages back and waits (so writeback is best started early).
    seal_writes_back: ClassVar[bool]

    def probe(self, scratch_fd: int, scratch_path: str) -> None:
        """Raise ``BACKEND_UNAVAILABLE`` unless the backend can be established in the scratch directory."""

    def seal(self, fd: int) -> None:
        """Make the entry behind ``fd`` unchangeable; its content and mode are final."""

    def holds(self, fd: int | None, st: os.stat_result) -> str | None:
        """None when the seal still holds for this entry, else why not."""

    def wrap(self, argv: Sequence[str], images: Sequence[str], cwd: str | None) -> list[str]:
        """The command line that runs ``argv`` confined by this backend."""


def _unavailable(name: str, detail: str) -> EnvironmentFailure:
    return EnvironmentFailure(
        FreezeCode.BACKEND_UNAVAILABLE,
        f"the {name!r} backend cannot be established here: {detail}; choose another backend explicitly (--backend or $ATTEST_BACKEND)",
    )


class ImmutableBackend:
    """The ``immutable`` backend: the Linux immutable inode flag on every entry.

    Raises:
        EnvironmentFailure: ``BACKEND_UNAVAILABLE`` from :meth:`probe` (no
            ``CAP_LINUX_IMMUTABLE``, or a filesystem without inode flags).
        OSError: from :meth:`seal` (the flag ioctls).
    """

    name: ClassVar[str] = "immutable"
    guarantee: ClassVar[str] = (
        "Linux immutable inode flag on every file and directory: no process, root included, can "
        "change, rename or unlink an entry until the flag is cleared (which needs CAP_LINUX_IMMUTABLE "
        "and moves the inode change time)"
    )
    mode_mask: ClassVar[int] = 0
    needs_fd: ClassVar[bool] = True
    statx_attr: ClassVar[int] = STATX_ATTR_IMMUTABLE
    # ext4 (fs/ext4/ioctl.c) runs filemap_write_and_wait when the flag is newly set on a file.
    seal_writes_back: ClassVar[bool] = True

    def probe(self, scratch_fd: int, scratch_path: str) -> None:
        name = ".attest-probe-immutable"
        try:
            fd = os.open(name, O_NEW, 0o600, dir_fd=scratch_fd)
        except OSError as e:
            raise _unavailable(self.name, f"cannot create a probe file: {e.strerror}") from e
        try:
            try:
                set_flags(fd, get_flags(fd) | FS_IMMUTABLE_FL)
            except OSError as e:
                why = "no CAP_LINUX_IMMUTABLE" if e.errno == errno.EPERM else f"the filesystem refuses inode flags ({e.strerror})"
                raise _unavailable(self.name, why) from e
            clear_immutable(fd)
        finally:
            os.close(fd)
            os.unlink(name, dir_fd=scratch_fd)

    def seal(self, fd: int) -> None:
        set_flags(fd, get_flags(fd) | FS_IMMUTABLE_FL)

    def holds(self, fd: int | None, st: os.stat_result) -> str | None:
        assert fd is not None
        try:
            flags = get_flags(fd)
        except OSError as e:
            return f"cannot read inode flags: {e.strerror}"
        return None if flags & FS_IMMUTABLE_FL else "the immutable flag is not set"

    def wrap(self, argv: Sequence[str], images: Sequence[str], cwd: str | None) -> list[str]:
        return list(argv)


class ReadonlyBackend:
    """The ``readonly`` backend: write bits removed, owned by the deployment user.

    Raises:
        OSError: from :meth:`seal` (``fstat``/``fchmod``); :meth:`probe` always succeeds.
    """

    name: ClassVar[str] = "readonly"
    guarantee: ClassVar[str] = (
        "write bits removed, owned by the deployment user: holds only against processes of another "
        "user; the owner and root can still write (detected later through inode change times)"
    )
    mode_mask: ClassVar[int] = _WRITE_BITS
    needs_fd: ClassVar[bool] = False
    statx_attr: ClassVar[int] = 0
    seal_writes_back: ClassVar[bool] = False

    def probe(self, scratch_fd: int, scratch_path: str) -> None:
        return None

    def seal(self, fd: int) -> None:
        st = os.fstat(fd)
        if st.st_mode & _WRITE_BITS:
            os.fchmod(fd, stat.S_IMODE(st.st_mode) & ~_WRITE_BITS)

    def holds(self, fd: int | None, st: os.stat_result) -> str | None:
        if st.st_mode & _WRITE_BITS:
            return f"mode {stat.S_IMODE(st.st_mode):04o} has write bits"
        if st.st_uid != os.geteuid():
            return f"owned by uid {st.st_uid}, not the deployment user {os.geteuid()}"
        return None

    def wrap(self, argv: Sequence[str], images: Sequence[str], cwd: str | None) -> list[str]:
        return list(argv)


#: Where the ro-bind wrapper finds unshare(1) and mount(8): fixed system directories, never a
#: PATH that the caller or the command's environment could point at a look-alike.
TOOL_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"


def system_tool(name: str) -> str | None:
    """The absolute path of the program ``name`` in :data:`TOOL_PATH`, or None."""
    found = shutil.which(name, path=TOOL_PATH)
    return found if found is not None and os.path.isabs(found) else None


# Run by /bin/sh inside a fresh private mount namespace: bind every image read-only onto itself
# with the mount(8) given by absolute path (the shell gets the command's environment, so a
# name looked up on its PATH could be anything), then enter the working directory (after the
# mounts, so it is on the read-only view) and exec.
# mount(8) itself runs with an empty environment: it reads LIBMOUNT_FSTAB, LIBMOUNT_MTAB and
# the like from the environment, which is the command's.
_RO_BIND_SCRIPT = """set -eu
mount=$1; cwd=$2; n=$3; shift 3
while [ "$n" -gt 0 ]; do
  /usr/bin/env -i "$mount" --bind -- "$1" "$1"
  /usr/bin/env -i "$mount" -o remount,bind,ro -- "$1"
  shift; n=$((n - 1))
done
if [ -n "$cwd" ]; then cd -- "$cwd"; fi
unset PWD OLDPWD  # the shell's own: the command's environment is the same under every backend
exec "$@"
"""


class RoBindBackend(ReadonlyBackend):
    """The ``ro-bind`` backend: ``readonly`` at rest, a read-only bind mount for ``attest exec``.

    Raises:
        EnvironmentFailure: ``BACKEND_UNAVAILABLE`` from :meth:`probe` (no ``unshare``/``mount``
            in :data:`TOOL_PATH`, or no private mount namespace).
        OSError: from :meth:`seal`, as for ``readonly``.
    """

    name: ClassVar[str] = "ro-bind"
    guarantee: ClassVar[str] = (
        "at rest like 'readonly'; the command of 'attest exec' sees every image through a read-only "
        "bind mount in a private mount namespace, so it cannot write the image; processes outside "
        "that namespace are held back only by the write bits"
    )

    def __init__(self, unshare: str | None = None, mount: str | None = None) -> None:
        self.unshare = unshare if unshare is not None else (system_tool("unshare") or "unshare")
        self.mount = mount if mount is not None else (system_tool("mount") or "mount")

    def probe(self, scratch_fd: int, scratch_path: str) -> None:
        for tool, path in (("unshare(1)", self.unshare), ("mount(8)", self.mount)):
            if not os.path.isabs(path) or not os.access(path, os.X_OK):
                raise _unavailable(self.name, f"no {tool} at {path!r} (looked in {TOOL_PATH})")
        try:
            done = subprocess.run(
                self.wrap(["true"], [scratch_path], None),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                timeout=30,
                env={"PATH": TOOL_PATH},
            )
        except (OSError, subprocess.TimeoutExpired) as e:
            raise _unavailable(self.name, f"cannot run unshare: {e}") from e
        if done.returncode != 0:
            raise _unavailable(self.name, f"cannot create a private mount namespace: {done.stderr.decode(errors='replace').strip()}")

    def wrap(self, argv: Sequence[str], images: Sequence[str], cwd: str | None) -> list[str]:
        return [
            self.unshare, "--mount", "--propagation", "private", "--",
            "/bin/sh", "-c", _RO_BIND_SCRIPT, "attest-ro-bind", self.mount, cwd or "", str(len(images)), *images, *argv,
        ]  # fmt: skip


class ErofsBackend(ImmutableBackend):
    """The ``erofs`` backend: one EROFS image file (immutable flag), read through a read-only mount.

    The image is built by ``mkfs.erofs`` with pinned flags (:mod:`attest.freeze._erofs`); the
    entry's tree directory is an empty immutable mount point, and its record, inventory and
    image file are sealed with the immutable flag (:meth:`seal`, :meth:`holds` as ``immutable``).

    Raises:
        EnvironmentFailure: ``BACKEND_UNAVAILABLE`` from :meth:`probe` (no ``CAP_LINUX_IMMUTABLE``,
            no ``mkfs.erofs``, no mount: not root, a tmpfs state directory, no erofs in the
            kernel), ``EROFS_NOT_REPRODUCIBLE`` (a ``mkfs.erofs`` that does not build the gate
            image).
        OSError: from :meth:`seal` (the flag ioctls).
    """

    name: ClassVar[str] = "erofs"
    guarantee: ClassVar[str] = (
        "one EROFS image file with the immutable flag, read only through a read-only, nodev, nosuid mount in a private "
        "mount namespace: nothing can write the image through the mount, and no process, root included, can change the "
        "file until the flag is cleared (CAP_LINUX_IMMUTABLE); a holder of CAP_SYS_ADMIN can mount something else in its "
        "own namespace, which every use detects by hashing the image and reading it through its own mount"
    )

    def __init__(self, mkfs: str | None = None) -> None:
        self.mkfs = mkfs if mkfs is not None else (system_tool("mkfs.erofs") or "mkfs.erofs")

    def probe(self, scratch_fd: int, scratch_path: str) -> None:
        super().probe(scratch_fd, scratch_path)
        if not os.path.isabs(self.mkfs):
            raise _unavailable(self.name, f"no mkfs.erofs in {TOOL_PATH}; install erofs-utils")
        gated = _erofs.gate(self.mkfs, scratch_fd, scratch_path)
        _erofs.probe_mount(scratch_fd, scratch_path, gated.image)

    def wrap(self, argv: Sequence[str], images: Sequence[str], cwd: str | None) -> list[str]:
        return list(argv)  # attest exec mounts erofs images itself (_exec._confined): it holds their descriptors


BACKENDS: dict[str, Backend] = {
    "immutable": ImmutableBackend(),
    "readonly": ReadonlyBackend(),
    "ro-bind": RoBindBackend(),
    "erofs": ErofsBackend(),
}
DEFAULT_BACKEND = "immutable"
BACKEND_ENV = "ATTEST_BACKEND"


def resolve_backend(name: str | None) -> str:
    """The backend to use: ``name`` when given, else ``$ATTEST_BACKEND``, else :data:`DEFAULT_BACKEND`.

    The choice is always explicit and always recorded with the image: an ordinary user whose
    kernel refuses the immutable flag sets ``ATTEST_BACKEND=readonly`` (or passes
    ``--backend``) once, and attest never falls back on its own.

    Raises:
        InputError: ``UNKNOWN_BACKEND`` for a name (or an ``$ATTEST_BACKEND``) not in :data:`BACKENDS`.
    """
    chosen = name if name is not None else os.environ.get(BACKEND_ENV) or DEFAULT_BACKEND
    if chosen not in BACKENDS:
        source = "" if name is not None else f" (from ${BACKEND_ENV})"
        raise InputError(FreezeCode.UNKNOWN_BACKEND, f"unknown backend {chosen!r}{source}; choose one of {', '.join(sorted(BACKENDS))}")
    return chosen


def get_backend(name: str | None = None) -> Backend:
    """The registered backend called ``name`` (None: :func:`resolve_backend`'s choice).

    Raises:
        InputError: ``UNKNOWN_BACKEND`` for a name not in :data:`BACKENDS`.
    """
    return BACKENDS[resolve_backend(name)]
