"""The ``erofs`` backend: the attested entries as one EROFS image file, read through a read-only mount.

The freeze materializes the attested entries into private staging (not sealed per entry: the
check through the mount below covers them), runs ``mkfs.erofs`` with pinned flags
(:data:`MKFS_FLAGS`: a fixed timestamp, every file owned by root, a fixed UUID, no extended
attributes) so the image is a pure function of the inventory, and keeps only the image file:
mode 0400, written back, the immutable flag set. Its SHA-256, size, inode, change time and the
``mkfs.erofs`` version are recorded (:class:`ErofsRecord`). The tree directory of the store
entry stays an empty, immutable mount point.

Every read of the image's content goes through a file-backed EROFS mount (read-only,
``nodev``, ``nosuid``) made by one thread in a private mount namespace and filesystem context
of its own: the process's own namespace never changes, and nothing outside that thread (and
what it starts) sees the mount. The checks (:func:`in_own_mount`) attach it nowhere and walk it
from the descriptor ``fsmount`` returns (the thread's root directory), never from a path;
:func:`in_mount` mounts it on a directory (the probe, and tests that copy a tree out). ``attest exec`` mounts the images in the command's own namespace
(:func:`wrap_command`), from the descriptor of the image file it checked.

The ``mkfs.erofs`` in use must reproduce :data:`GATE_SHA256`, the image of a small fixed tree
(:func:`write_gate_tree`); another output (a newer erofs-utils) is ``EROFS_NOT_REPRODUCIBLE``.
The gate runs once per process and ``mkfs.erofs`` binary (path, inode, size, modification and
change times).

    >>> version = gate(DEFAULT_MKFS, scratch_fd, scratch_path)
    >>> in_own_mount(image_fd, lambda root: os.listdir(root))   # root is "/": the image's own root
"""

from __future__ import annotations

import ctypes
import errno
import hashlib
import os
import re
import stat
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TypeVar

from .._fdio import write_all
from .._safefs import FS_IMMUTABLE_FL, O_DIR, O_FILE, O_NEW, get_flags, read_regular_fd
from ..errors import EnvironmentFailure, Finding, VerificationError
from ._codes import FreezeCode
from ._state import random_name, remove_tree

T = TypeVar("T")

#: The image file beside the (empty, immutable) tree directory of a store entry.
IMAGE_NAME = "image.erofs"
#: The staging directory the image is built from (removed once the image is built).
SOURCE_NAME = "src"
#: Pinned flags: no build time, every file root's, a fixed UUID, no extended attributes.
MKFS_FLAGS: tuple[str, ...] = ("-T0", "--all-root", "-U00000000-0000-0000-0000-000000000000", "-x-1", "--quiet")
#: SHA-256 of the image of :func:`write_gate_tree` built with :data:`MKFS_FLAGS` by erofs-utils 1.5 (Debian 1.5-1).
GATE_SHA256 = "cca5d064e5096f5c006044eaa8d5802c8eaccbb233ee44453ed9973e7afa4029"
GATE_VERSIONS = "erofs-utils 1.5"

_CLONE_NEWNS = 0x00020000
_MS_RDONLY = 1
_MS_NOSUID = 2
_MS_NODEV = 4
_MS_NOEXEC = 8
_MS_REC = 0x4000
_MS_PRIVATE = 1 << 18
_MNT_DETACH = 2
_VERSION = re.compile(rb"mkfs\.erofs ([0-9][0-9A-Za-z.+~-]{0,40})\s")
_HEX64 = re.compile(r"[0-9a-f]{64}\Z")
_DIGITS = re.compile(r"(0|[1-9][0-9]{0,19})\Z")

try:
    _libc: ctypes.CDLL | None = ctypes.CDLL(None, use_errno=True)
except OSError:  # pragma: no cover - no C library: the backend is unavailable
    _libc = None


@dataclass(frozen=True, slots=True)
class ErofsRecord:
    """What the store record says of an entry's image file: its bytes, its inode after the seal, its maker.

    Raises:
        Nothing: ``to_json`` encodes fields validated by :func:`record_from_json` or made here.
    """

    sha256: str
    size: int
    ino: int
    ctime_ns: int
    mkfs: str

    def to_json(self) -> dict[str, object]:
        return {"sha256": self.sha256, "size": str(self.size), "ino": str(self.ino), "ctime": str(self.ctime_ns), "mkfs": self.mkfs}


def record_from_json(doc: object, where: str) -> ErofsRecord:
    """The ``erofs`` part of a store record, read strictly.

    Raises:
        VerificationError: ``BAD_RECORD``.
    """
    if not isinstance(doc, dict) or set(doc) != {"sha256", "size", "ino", "ctime", "mkfs"}:
        raise VerificationError(FreezeCode.BAD_RECORD, "the erofs record does not have exactly its fields", where)
    numbers = [doc["size"], doc["ino"], doc["ctime"]]
    if not all(isinstance(n, str) and _DIGITS.match(n) for n in numbers):
        raise VerificationError(FreezeCode.BAD_RECORD, "the erofs record's size, inode or change time is malformed", where)
    if not isinstance(doc["sha256"], str) or not _HEX64.match(doc["sha256"]) or not isinstance(doc["mkfs"], str) or len(doc["mkfs"]) > 80:
        raise VerificationError(FreezeCode.BAD_RECORD, "the erofs record's digest or mkfs version is malformed", where)
    return ErofsRecord(doc["sha256"], int(doc["size"]), int(doc["ino"]), int(doc["ctime"]), doc["mkfs"])


def _unavailable(detail: str) -> EnvironmentFailure:
    return EnvironmentFailure(
        FreezeCode.BACKEND_UNAVAILABLE,
        f"the 'erofs' backend cannot be established here: {detail}; choose another backend explicitly (--backend or $ATTEST_BACKEND)",
    )


# -- building an image -----------------------------------------------------------------------


def _mkfs_env() -> dict[str, str]:
    return {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL": "C"}


def mkfs_version(mkfs: str) -> str:
    """The version ``mkfs`` prints on its first line (erofs-utils 1.5 has no ``--version``).

    Raises:
        EnvironmentFailure: ``BACKEND_UNAVAILABLE`` (missing, not runnable, no version line).
    """
    try:
        done = subprocess.run([mkfs], stdin=subprocess.DEVNULL, capture_output=True, env=_mkfs_env(), timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise _unavailable(f"cannot run {mkfs} ({e}); install erofs-utils") from e
    found = _VERSION.match(done.stdout + b"\n")
    if found is None:
        raise _unavailable(f"{mkfs} does not say which mkfs.erofs it is")
    return found.group(1).decode("ascii")


def build_image(mkfs: str, image: str, source: str) -> None:
    """Run ``mkfs`` with :data:`MKFS_FLAGS` to write ``image`` from the directory ``source``.

    Raises:
        EnvironmentFailure: ``STAGING_FAILED`` when it cannot run or fails.
    """
    try:
        done = subprocess.run([mkfs, *MKFS_FLAGS, image, source], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, env=_mkfs_env(), check=False)
    except OSError as e:
        raise EnvironmentFailure(FreezeCode.STAGING_FAILED, f"cannot run {mkfs}: {e.strerror}", image) from e
    if done.returncode != 0:
        why = done.stderr.decode(errors="replace").strip()[-400:]
        raise EnvironmentFailure(FreezeCode.STAGING_FAILED, f"{mkfs} failed (exit {done.returncode}): {why}", image)


#: The gate's fixed tree: (path, mode, content); content None for a directory. The root is 0755.
GATE_TREE: tuple[tuple[str, int, bytes | None], ...] = (
    ("README", 0o644, b"attest erofs reproducibility gate\n"),
    ("bin", 0o755, None),
    ("bin/tool", 0o755, b"#!/bin/sh\necho gate\n"),
    ("data", 0o700, None),
    ("data/empty", 0o600, b""),
    ("data/blocks", 0o640, bytes(range(256)) * 33),  # more than two 4 KiB blocks, not a multiple of one
    ("data/nested", 0o755, None),
    ("data/nested/z", 0o444, b"z" * 4096),
)


def write_gate_tree(dir_fd: int) -> None:
    """Create :data:`GATE_TREE` under ``dir_fd`` (modes set explicitly: no umask reaches them)."""
    os.fchmod(dir_fd, 0o755)
    for path, mode, content in GATE_TREE:
        parent, _, name = path.rpartition("/")
        pfd = os.open(parent, O_DIR, dir_fd=dir_fd) if parent else os.dup(dir_fd)
        try:
            if content is None:
                os.mkdir(name, 0o700, dir_fd=pfd)
                fd = os.open(name, O_DIR, dir_fd=pfd)
            else:
                fd = os.open(name, O_NEW, 0o600, dir_fd=pfd)
                write_all(fd, content)
            try:
                os.fchmod(fd, mode)
            finally:
                os.close(fd)
        finally:
            os.close(pfd)


def hash_fd(fd: int) -> str:
    """The SHA-256 (hex) of everything ``fd`` reads from offset 0."""
    h = hashlib.sha256()
    buf = bytearray(1 << 20)
    view = memoryview(buf)
    offset = 0
    while n := os.preadv(fd, [buf], offset):
        h.update(view[:n])
        offset += n
    return h.hexdigest()


@dataclass(frozen=True, slots=True)
class _Gated:
    version: str
    image: bytes  # the gate's image: a tiny image the mount probe reuses


_GATED: dict[tuple[str, int, int, int, int, int], _Gated] = {}
_MOUNTABLE: set[int] = set()  # st_dev of filesystems where a trial mount of an image file succeeded
_LOCK = threading.Lock()


def _tool_key(mkfs: str) -> tuple[str, int, int, int, int, int]:
    """The binary the verdict is kept for; with its change time: a rewrite in place can put the size and mtime back, not that."""
    try:
        st = os.stat(mkfs)
    except OSError as e:
        raise _unavailable(f"no mkfs.erofs at {mkfs!r} ({e.strerror}); install erofs-utils") from e
    return (mkfs, st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns, st.st_size)


def gate(mkfs: str, scratch_fd: int, scratch_path: str) -> _Gated:
    """Build the gate tree's image with ``mkfs`` in the scratch directory and compare it to :data:`GATE_SHA256`.

    Once per process and binary (its path, inode, size, modification and change times).

    Raises:
        EnvironmentFailure: ``BACKEND_UNAVAILABLE`` (no such program), ``EROFS_NOT_REPRODUCIBLE``
            (its image of the gate tree is not the checked-in one).
    """
    key = _tool_key(mkfs)
    with _LOCK:
        known = _GATED.get(key)
    if known is not None:
        return known
    version = mkfs_version(mkfs)
    with _scratch(scratch_fd, ".attest-erofs-gate") as (wfd, name):
        os.mkdir("tree", 0o700, dir_fd=wfd)
        tfd = os.open("tree", O_DIR, dir_fd=wfd)
        try:
            write_gate_tree(tfd)
        finally:
            os.close(tfd)
        build_image(mkfs, f"{scratch_path}/{name}/gate.img", f"{scratch_path}/{name}/tree")
        ifd = os.open("gate.img", O_FILE, dir_fd=wfd)
        try:
            data = b"".join(iter(lambda: os.read(ifd, 1 << 20), b""))
        finally:
            os.close(ifd)
    digest = hashlib.sha256(data).hexdigest()
    if digest != GATE_SHA256:
        raise EnvironmentFailure(
            FreezeCode.EROFS_NOT_REPRODUCIBLE,
            f"{mkfs} (mkfs.erofs {version}) builds the gate tree as sha256:{digest}, not the checked-in sha256:{GATE_SHA256} "
            f"({GATE_VERSIONS}): its images are not the pure function of the inventory the store relies on",
        )
    gated = _Gated(version, data)
    with _LOCK:
        _GATED[key] = gated
    return gated


# -- mounting --------------------------------------------------------------------------------


def _check(rc: int, what: str) -> None:
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


#: f_type of statfs(2) for the filesystems a file-backed erofs mount is known to refuse.
_FS_NAMES = {0x01021994: "tmpfs", 0x794C7630: "overlayfs", 0x858458F6: "ramfs", 0x65735546: "fuse"}


def filesystem_name(fd: int) -> str:
    """The name of the filesystem ``fd`` lives on, when it is one :func:`mount_problem` names ("" otherwise)."""
    buf = ctypes.create_string_buffer(256)
    if _libc is None or _libc.fstatfs(fd, buf) != 0:
        return ""
    return _FS_NAMES.get(ctypes.c_long.from_buffer(buf).value & 0xFFFFFFFF, "")


def mount_problem(err: OSError, image_fd: int) -> str:
    """Why a file-backed EROFS mount of ``image_fd`` failed, in words a deployer can act on."""
    if err.errno == errno.ENOTBLK:
        fs = filesystem_name(image_fd)
        return (f"the state directory's filesystem{f' ({fs})' if fs else ''} cannot back an erofs image file (the kernel "
                "mounts erofs from a file only on a block-backed filesystem); put the state directory on a disk filesystem")
    if err.errno == errno.EPERM:
        return "mounting needs CAP_SYS_ADMIN (root); rootless deployments keep 'readonly'"
    if err.errno == errno.ENODEV:
        return "the kernel has no erofs filesystem (CONFIG_EROFS_FS)"
    return f"cannot mount an erofs image file: {err.strerror}"


#: What the kernel answers a mount of an image it cannot decode (bad magic, checksum, layout,
#: an unknown feature, a read past its end): the image's fault, not the backend's.
_BAD_IMAGE_ERRNOS = frozenset({errno.EINVAL, errno.EBADMSG, errno.EUCLEAN, errno.EIO, errno.EFBIG, errno.EOVERFLOW, errno.EOPNOTSUPP})


class ImageRefused(OSError):
    """The kernel refused to mount an image file for a reason that lies in the image's bytes (:data:`_BAD_IMAGE_ERRNOS`)."""


class _Box:
    """What the mount thread hands back: a result or the exception it raised."""

    __slots__ = ("error", "mounted", "result")

    def __init__(self) -> None:
        self.result: object = None
        self.error: BaseException | None = None
        self.mounted = False


def in_mount(image_fd: int, target: str, fn: Callable[[str], T], *, noexec: bool = True) -> T:
    """Call ``fn(target)`` with the image behind ``image_fd`` mounted read-only on the directory ``target``.

    The mount exists only in a private mount namespace of one new thread (and of the threads
    and processes ``fn`` starts): the process's own namespace is never changed. The mount is
    ``ro,nodev,nosuid`` (and ``noexec`` unless asked otherwise), made from
    ``/proc/self/fd/<image_fd>``, so it is the very file the caller opened and checked.

    Raises:
        EnvironmentFailure: ``BACKEND_UNAVAILABLE`` when the mount cannot be made (with why:
            a tmpfs state directory, no privilege, no erofs in the kernel).
        ImageRefused: the kernel refused the image itself (a corrupted or foreign image).
        Whatever ``fn`` raises.
    """
    if _libc is None:  # pragma: no cover
        raise _unavailable("no C library to mount with")
    box = _Box()
    flags = _MS_RDONLY | _MS_NOSUID | _MS_NODEV | (_MS_NOEXEC if noexec else 0)

    def run() -> None:
        try:
            _check(_libc.unshare(_CLONE_NEWNS), "unshare")
            _check(_libc.mount(b"none", b"/", None, _MS_REC | _MS_PRIVATE, None), "make the namespace private")
            before = os.stat(target, follow_symlinks=False)
            if _libc.mount(f"/proc/self/fd/{image_fd}".encode(), os.fsencode(target), b"erofs", flags, None) != 0:
                err = ctypes.get_errno()
                if err in _BAD_IMAGE_ERRNOS:
                    raise ImageRefused(err, f"the kernel refuses to mount the image: {os.strerror(err)}")
                raise OSError(err, f"mount: {os.strerror(err)}")
            box.mounted = True
            if os.stat(target, follow_symlinks=False).st_dev == before.st_dev:
                raise OSError(errno.EINVAL, "the mount did not take effect")
            box.result = fn(target)
        except OSError as e:
            box.error = e if box.mounted or isinstance(e, ImageRefused) else _unavailable(mount_problem(e, image_fd))
        except BaseException as e:  # noqa: BLE001 - re-raised by the calling thread after the join
            box.error = e
        finally:
            if box.mounted:
                _libc.umount2(os.fsencode(target), _MNT_DETACH)

    thread = threading.Thread(target=run, name="attest-erofs-mount", daemon=True)
    thread.start()
    thread.join()
    if box.error is not None:
        raise box.error
    return box.result  # type: ignore[return-value]


_SYS_FSOPEN, _SYS_FSCONFIG, _SYS_FSMOUNT = 430, 431, 432  # the same number on every architecture (new syscalls, 5.2+)
_FSOPEN_CLOEXEC = 1
_FSCONFIG_SET_STRING = 1
_FSCONFIG_CMD_CREATE = 6
_FSMOUNT_CLOEXEC = 1
_MOUNT_ATTR_RDONLY, _MOUNT_ATTR_NOSUID, _MOUNT_ATTR_NODEV, _MOUNT_ATTR_NOEXEC = 1, 2, 4, 8


def in_own_mount(image_fd: int, fn: Callable[[str], T]) -> T:
    """Call ``fn("/")`` in a new thread whose root directory is a fresh, detached mount of the image behind ``image_fd``.

    The mount (read-only, ``nodev``, ``nosuid``, ``noexec``) is made with ``fsopen``/``fsmount``
    from ``/proc/self/fd/<image_fd>`` and attached nowhere: the thread enters it through the
    descriptor ``fsmount`` returns (``fchdir`` then ``chroot(".")``, in a filesystem context of
    its own), so what ``fn`` walks from ``/`` is this mount of this file and nothing a path
    could be made to resolve to instead (the store entry's directory is not sealed: whoever
    may rename it could otherwise put another tree where the walk looks, between the mount
    and the walk). Nothing outside the thread (and what ``fn`` starts) sees it; it goes away
    with the thread. ``fn`` can reach nothing outside the image by path.

    Raises:
        EnvironmentFailure: ``BACKEND_UNAVAILABLE`` when the mount cannot be made here.
        ImageRefused: the kernel refused the image itself (a corrupted or foreign image).
        Whatever ``fn`` raises.
    """
    if _libc is None:  # pragma: no cover
        raise _unavailable("no C library to mount with")
    box = _Box()
    syscall = _libc.syscall
    syscall.restype = ctypes.c_long

    def run() -> None:
        fds: list[int] = []
        try:
            _check(_libc.unshare(_CLONE_NEWNS), "unshare")  # implies CLONE_FS: the chroot below is this thread's alone
            fs = syscall(_SYS_FSOPEN, b"erofs", _FSOPEN_CLOEXEC)
            _check(0 if fs >= 0 else -1, "fsopen erofs")
            fds.append(fs)
            _check(0 if syscall(_SYS_FSCONFIG, fs, _FSCONFIG_SET_STRING, b"source", f"/proc/self/fd/{image_fd}".encode(), 0) == 0 else -1,
                   "fsconfig source")
            if syscall(_SYS_FSCONFIG, fs, _FSCONFIG_CMD_CREATE, None, None, 0) != 0:
                err = ctypes.get_errno()
                if err in _BAD_IMAGE_ERRNOS:
                    raise ImageRefused(err, f"the kernel refuses to mount the image: {os.strerror(err)}")
                raise OSError(err, f"mount: {os.strerror(err)}")
            attrs = _MOUNT_ATTR_RDONLY | _MOUNT_ATTR_NOSUID | _MOUNT_ATTR_NODEV | _MOUNT_ATTR_NOEXEC
            mnt = syscall(_SYS_FSMOUNT, fs, _FSMOUNT_CLOEXEC, attrs)
            _check(0 if mnt >= 0 else -1, "fsmount")
            fds.append(mnt)
            os.fchdir(mnt)
            os.chroot(".")
            box.mounted = True
            box.result = fn("/")
        except OSError as e:
            box.error = e if box.mounted or isinstance(e, ImageRefused) else _unavailable(mount_problem(e, image_fd))
        except BaseException as e:  # noqa: BLE001 - re-raised by the calling thread after the join
            box.error = e
        finally:
            for fd in fds:
                os.close(fd)

    thread = threading.Thread(target=run, name="attest-erofs-own-mount", daemon=True)
    thread.start()
    thread.join()
    if box.error is not None:
        raise box.error
    return box.result  # type: ignore[return-value]


def probe_mount(scratch_fd: int, scratch_path: str, image: bytes) -> None:
    """Mount the tiny image ``image`` from a file in the scratch directory once per filesystem.

    Raises:
        EnvironmentFailure: ``BACKEND_UNAVAILABLE`` with the reason (a tmpfs state directory
            cannot back an erofs image file, no privilege, no erofs in the kernel).
    """
    dev = os.fstat(scratch_fd).st_dev
    with _LOCK:
        if dev in _MOUNTABLE:
            return
    with _scratch(scratch_fd, ".attest-erofs-probe") as (wfd, name):
        os.mkdir("mnt", 0o700, dir_fd=wfd)
        fd = os.open("probe.img", O_NEW, 0o400, dir_fd=wfd)
        try:
            write_all(fd, image)
        finally:
            os.close(fd)
        ifd = os.open("probe.img", O_FILE, dir_fd=wfd)
        try:
            readme = in_mount(ifd, f"{scratch_path}/{name}/mnt", lambda root: _read_small(root, "README"))  # as exec mounts
            if readme == GATE_TREE[0][2]:
                readme = in_own_mount(ifd, lambda root: _read_small(root, "README"))  # as every check reads
        except OSError as e:  # the gate's image, which this mkfs.erofs built: the kernel, not the image, is at fault
            raise _unavailable(f"a trial mount of the gate image fails: {e.strerror}") from e
        finally:
            os.close(ifd)
    if readme != GATE_TREE[0][2]:
        raise _unavailable("a trial mount of the gate image does not read back its bytes")
    with _LOCK:
        _MOUNTABLE.add(dev)



@contextmanager
def _scratch(scratch_fd: int, prefix: str) -> Iterator[tuple[int, str]]:
    """A fresh private directory under ``scratch_fd``: ``(its descriptor, its name)``; removed with its contents after."""
    name = random_name(prefix)
    os.mkdir(name, 0o700, dir_fd=scratch_fd)
    try:
        wfd = os.open(name, O_DIR, dir_fd=scratch_fd)
        try:
            yield wfd, name
        finally:
            os.close(wfd)
    finally:
        remove_tree(scratch_fd, name)


def _read_small(root: str, name: str) -> bytes:
    dfd = os.open(root, O_DIR)
    try:
        fd = os.open(name, O_FILE, dir_fd=dfd)
    finally:
        os.close(dfd)
    try:
        return os.read(fd, 1 << 16)
    finally:
        os.close(fd)


# -- the image file of a store entry ---------------------------------------------------------


def image_file_problems(entry_fd: int, rec: ErofsRecord, where: str, *, flags: bool) -> list[Finding]:
    """Every way in which the image file under ``entry_fd`` is not the one recorded (no read of its bytes).

    Raises:
        Nothing: the problems are returned (``IMAGE_CHANGED``, ``IMAGE_NOT_IMMUTABLE``).
    """
    try:
        fd = os.open(IMAGE_NAME, O_FILE, dir_fd=entry_fd)
    except OSError as e:
        return [Finding(FreezeCode.IMAGE_CHANGED, where, f"the image file cannot be opened: {e.strerror}")]
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
            return [Finding(FreezeCode.IMAGE_CHANGED, where, "the image file is not a regular file with one name")]
        if flags:
            try:
                sealed = bool(get_flags(fd) & FS_IMMUTABLE_FL)
            except OSError as e:
                return [Finding(FreezeCode.IMAGE_NOT_IMMUTABLE, where, f"cannot read the image file's inode flags: {e.strerror}")]
            if not sealed:
                return [Finding(FreezeCode.IMAGE_NOT_IMMUTABLE, where, "the image file's immutable flag is not set")]
        if (st.st_ino, st.st_ctime_ns, st.st_size) != (rec.ino, rec.ctime_ns, rec.size):
            what = "replaced by another inode" if st.st_ino != rec.ino else "its size or inode change time moved since the seal"
            return [Finding(FreezeCode.IMAGE_CHANGED, where, f"the image file was {what}" if st.st_ino != rec.ino else f"the image file: {what}")]
        return []
    finally:
        os.close(fd)


def open_image_file(entry_fd: int, rec: ErofsRecord, where: str) -> int:
    """Open the entry's image file and confirm it is the recorded inode with the recorded bytes (one hash).

    Raises:
        VerificationError: ``IMAGE_CHANGED``.
    """
    try:
        fd = os.open(IMAGE_NAME, O_FILE, dir_fd=entry_fd)
    except OSError as e:
        raise VerificationError(FreezeCode.IMAGE_CHANGED, f"the image file cannot be opened: {e.strerror}", where) from e
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or (st.st_ino, st.st_ctime_ns, st.st_size) != (rec.ino, rec.ctime_ns, rec.size):
            raise VerificationError(FreezeCode.IMAGE_CHANGED, "the image file is not the inode sealed at freeze time", where)
        if hash_fd(fd) != rec.sha256:
            raise VerificationError(FreezeCode.IMAGE_CHANGED, "the image file's bytes are not the recorded ones", where)
    except BaseException:
        os.close(fd)
        raise
    return fd


_SB_OFFSET = 1024
_EROFS_MAGIC = 0xE0F5E1E2
#: What the pinned flags write (the gate's image): compat SB_CHKSUM | MTIME, no incompatible feature, 4 KiB blocks.
_PINNED_COMPAT = 0x1 | 0x2
_PINNED_BLKSZBITS = 12


def superblock_problem(image_fd: int) -> str | None:
    """Why the image's superblock is not one the pinned flags write (None when it is), read before any mount.

    An incompatible feature (compression, chunk-based files, a device table, ...) or another
    block size would have the kernel parse attacker-chosen structures as root; the freeze's
    images, like the gate's, have none, so such an image is refused before it is mounted.
    """
    head = os.pread(image_fd, _SB_OFFSET + 0x54, 0)
    if len(head) < _SB_OFFSET + 0x54:
        return "the image is shorter than an EROFS superblock"
    sb = head[_SB_OFFSET:]
    magic, _csum, compat = (int.from_bytes(sb[i:i + 4], "little") for i in (0, 4, 8))
    incompat = int.from_bytes(sb[0x50:0x54], "little")
    if magic != _EROFS_MAGIC:
        return "the image has no EROFS superblock"
    if sb[0x0C] != _PINNED_BLKSZBITS or sb[0x0D] != 0:
        return f"the image's block size (2^{sb[0x0C]}) or superblock extension is not the pinned flags' one"
    if incompat != 0 or compat & ~_PINNED_COMPAT:
        return (f"the image uses EROFS features the pinned flags never write (compat 0x{compat:x}, incompat 0x{incompat:x}: "
                "compression, chunks, devices, ...); refused before the kernel parses it")
    return None


def read_through_mount(image_fd: int, path: str, max_bytes: int) -> bytes:
    """The bytes of ``path`` (a file of the image, '/'-separated) read through a private mount, at most ``max_bytes + 1``.

    The mount is :func:`in_own_mount`'s: attached nowhere, so no path leads to it.

    Raises:
        OSError: a component or the file cannot be opened (no link is followed) or read.
        EnvironmentFailure: ``BACKEND_UNAVAILABLE`` (the mount).
    """

    def read(root: str) -> bytes:
        fd = os.open(root, O_DIR)
        try:
            for part in path.split("/")[:-1]:
                nfd = os.open(part, O_DIR, dir_fd=fd)
                os.close(fd)
                fd = nfd
            ffd = os.open(path.rsplit("/", 1)[-1], O_FILE, dir_fd=fd)
        finally:
            os.close(fd)
        try:
            return read_regular_fd(ffd, max_bytes)
        finally:
            os.close(ffd)

    return in_own_mount(image_fd, read)


# -- attest exec ----------------------------------------------------------------------------

# Run by attest's own interpreter (-I -S: no environment variable, no site directory reaches it)
# as the command's parent: a private mount namespace, every erofs image mounted read-only from
# the descriptor attest checked, every ro-bind image bound read-only onto itself, then the
# working directory and exec. A failure before exec is written to the status descriptor
# (closed on exec), so attest can tell it from the command's own exit status.
_WRAPPER = r"""
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
args = sys.argv[1:]
status = int(args.pop(0)); cwd = args.pop(0); n = int(args.pop(0))
mounts = [args[3 * i:3 * i + 3] for i in range(n)]; argv = args[3 * n:]
def check(rc, what):
    if rc != 0:
        e = ctypes.get_errno(); raise OSError(e, what + ": " + os.strerror(e))
try:
    check(libc.unshare(0x20000), "unshare")
    check(libc.mount(b"none", b"/", None, 0x4000 | (1 << 18), None), "make the namespace private")
    for kind, source, target in mounts:
        t = os.fsencode(target)
        if kind == "erofs":
            check(libc.mount(("/proc/self/fd/" + source).encode(), t, b"erofs", 1 | 2 | 4, None), "mount " + target)
            os.close(int(source))
        else:
            check(libc.mount(t, t, None, 4096, None), "bind " + target)
            check(libc.mount(None, t, None, 4096 | 32 | 1, None), "remount read-only " + target)
    if cwd:
        os.chdir(cwd)
    os.environ.pop("PWD", None); os.environ.pop("OLDPWD", None)
    os.set_inheritable(status, False)
except OSError as e:
    os.write(status, str(e).encode(errors="replace")[:1000]); os._exit(125)
try:
    os.execvp(argv[0], argv)
except OSError as e:
    sys.stderr.write("attest exec: %s: %s\n" % (argv[0], e.strerror))
    os._exit(127 if e.errno in (2, 20) else 126)
"""


def wrap_command(argv: Sequence[str], mounts: Sequence[tuple[str, str, str]], cwd: str | None, status_fd: int) -> list[str]:
    """The command line running ``argv`` after the ``mounts`` in its own private mount namespace.

    ``mounts``: ``("erofs", str(image_fd), target)`` or ``("bind", target, target)``.
    """
    flat = [part for m in mounts for part in m]
    return [sys.executable, "-I", "-S", "-c", _WRAPPER, str(status_fd), cwd or "", str(len(mounts)), *flat, *argv]
