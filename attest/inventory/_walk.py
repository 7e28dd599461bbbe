"""The safe walker: inventory a tree without following links or trusting a path twice.

Rules (DESIGN.md "Closed inventory", THREATS.md A, B, C, G):

1. The root is opened one component at a time from ``/`` with ``O_NOFOLLOW``, so a root that
   is, or passes through, a symlink or a ``/proc/*/fd`` magic link is refused.
2. Directories are walked through directory descriptors (``dir_fd``), never by path; a
   component swapped for a symlink mid-walk fails ``O_NOFOLLOW|O_DIRECTORY`` instead of being
   followed.
3. Every entry is classified from ``lstat`` (``fstatat(AT_SYMLINK_NOFOLLOW)``) of its name; a
   regular file or directory is then opened with ``O_NOFOLLOW|O_NONBLOCK`` and the decision
   is re-made from ``fstat`` of the descriptor, cross-checked against the listing (same
   device and inode). FIFOs, sockets and devices are never opened.
4. A file is hashed from its descriptor; the byte count must equal ``st_size`` and the
   ``fstat`` before and after must agree, or the entry changed during the walk.
5. The walk is iterative (an explicit stack), so a deep tree meets the depth cap, not Python's
   recursion limit.

Large files are hashed in a small thread pool (hashlib and ``readv`` release the GIL).

    >>> inv = inventory_tree("some/tree")          # raises VerificationError on any rejection
    >>> result = scan_tree("some/tree")            # never raises for entries; collects findings
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from ..errors import Finding, InputError, VerificationError
from ._codes import InventoryCode
from ._model import Entry, EntryType, Inventory
from ._names import PATH_MAX, check_name, collision_key

Progress = Callable[[int, int], None]

_O_DIR = os.O_RDONLY | os.O_NOFOLLOW | os.O_DIRECTORY | os.O_CLOEXEC
_O_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_SPECIAL_BITS = stat.S_ISUID | stat.S_ISGID | stat.S_ISVTX
_SMALL = 256 * 1024
_CHUNK = 1024 * 1024


@dataclass(frozen=True, slots=True)
class Limits:
    """Caps on what one walk will accept (THREATS.md G)."""

    max_depth: int = 256
    max_entries: int = 1_000_000
    max_file_size: int = 1 << 40
    max_findings: int = 1000


DEFAULT_LIMITS = Limits()


@dataclass(slots=True)
class ScanResult:
    """What a walk saw: the admissible entries and every finding, in walk order."""

    entries: list[Entry] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    ignore: tuple[str, ...] = ()

    def inventory(self) -> Inventory:
        return Inventory.from_entries(self.entries, self.ignore)


def compile_ignore(patterns: Sequence[str]) -> Any:
    """Compile gitignore-style patterns with pathspec, or None when there are none."""
    if not patterns:
        return None
    for p in patterns:
        if not isinstance(p, str) or "\n" in p or "\r" in p or "\x00" in p:
            raise InputError(InventoryCode.BAD_IGNORE, f"ignore pattern {p!r} is not a single line")
    import pathspec

    try:
        return pathspec.GitIgnoreSpec.from_lines(list(patterns))
    except Exception as e:  # pathspec raises several types for malformed patterns
        raise InputError(InventoryCode.BAD_IGNORE, f"ignore patterns do not compile: {e}") from e


def _join(prefix: str, name: str) -> str:
    return f"{prefix}/{name}" if prefix else name


def _display(name: str) -> str:
    """A name as a person can read it, even when it is not UTF-8."""
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def open_root(root: str | os.PathLike[str]) -> int:
    """Open ``root`` as a directory, refusing symlinks in every component (rule 1)."""
    path = os.path.abspath(os.fspath(root))
    parts = [p for p in path.split("/") if p]
    if parts[:1] == ["proc"]:
        raise VerificationError(InventoryCode.ROOT_SYMLINK, "a /proc path is a magic link, not a tree", path)
    fd = os.open("/", _O_DIR)
    walked = ""
    try:
        for part in parts:
            walked += "/" + part
            try:
                nfd = os.open(part, _O_DIR, dir_fd=fd)
            except OSError as e:
                try:
                    st = os.lstat(part, dir_fd=fd)
                except OSError:
                    st = None
                if st is not None and stat.S_ISLNK(st.st_mode):
                    raise VerificationError(
                        InventoryCode.ROOT_SYMLINK,
                        f"{walked} is a symbolic link; pass the real directory {os.path.realpath(walked)!r}",
                        path,
                    ) from e
                if e.errno == errno.ENOENT:
                    raise InputError(InventoryCode.BAD_ROOT, f"{walked} does not exist", path) from e
                if e.errno == errno.ENOTDIR:
                    raise InputError(InventoryCode.BAD_ROOT, f"{walked} is not a directory", path) from e
                raise InputError(InventoryCode.BAD_ROOT, f"cannot open {walked}: {e.strerror}", path) from e
            os.close(fd)
            fd = nfd
        return fd
    except BaseException:
        os.close(fd)
        raise


def hash_fd(fd: int, size: int, buf: bytearray | None = None) -> tuple[str, int]:
    """SHA-256 of everything readable from ``fd``; returns ``(hex, bytes read)``."""
    h = hashlib.sha256()
    total = 0
    if size <= _SMALL:
        while True:
            data = os.read(fd, size + 1 - total if total <= size else _SMALL)
            if not data:
                break
            h.update(data)
            total += len(data)
            if total > size:
                break
        return h.hexdigest(), total
    if buf is None:
        buf = bytearray(_CHUNK)
    view = memoryview(buf)
    while True:
        n = os.readv(fd, [buf])
        if n == 0:
            break
        h.update(view[:n])
        total += n
    return h.hexdigest(), total


class _Hasher:
    """Hashes large files on worker threads; small ones inline (thread hand-off costs more)."""

    def __init__(self, workers: int) -> None:
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="attest-hash") if workers > 0 else None
        self._slots = threading.BoundedSemaphore(64)
        self._local = threading.local()
        self.pending: list[tuple[str, int, os.stat_result, Future[tuple[str, int, os.stat_result]]]] = []

    def _buf(self) -> bytearray:
        buf = getattr(self._local, "buf", None)
        if buf is None:
            buf = self._local.buf = bytearray(_CHUNK)
        return buf

    def _work(self, fd: int, size: int) -> tuple[str, int, os.stat_result]:
        try:
            digest, got = hash_fd(fd, size, self._buf())
            return digest, got, os.fstat(fd)
        finally:
            os.close(fd)
            self._slots.release()

    def submit(self, path: str, mode: int, fd: int, before: os.stat_result) -> None:
        assert self._pool is not None
        self._slots.acquire()
        self.pending.append((path, mode, before, self._pool.submit(self._work, fd, before.st_size)))

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)


def _stat_changed(a: os.stat_result, b: os.stat_result) -> bool:
    return (a.st_ino, a.st_dev, a.st_size, a.st_mtime_ns, a.st_ctime_ns) != (
        b.st_ino,
        b.st_dev,
        b.st_size,
        b.st_mtime_ns,
        b.st_ctime_ns,
    )


def scan_tree(
    root: str | os.PathLike[str],
    *,
    ignore: Sequence[str] = (),
    limits: Limits = DEFAULT_LIMITS,
    progress: Progress | None = None,
    workers: int = 2,
) -> ScanResult:
    """Walk ``root`` and return every admissible entry and every finding.

    Raises :class:`InputError` / :class:`VerificationError` only for the root itself;
    everything below the root becomes a finding so a check can report all of them.
    """
    spec = compile_ignore(tuple(ignore))
    result = ScanResult(ignore=tuple(ignore))
    findings = result.findings
    entries = result.entries
    count = 0
    files_done = 0
    bytes_done = 0

    def report(code: InventoryCode, path: str, detail: str) -> None:
        if len(findings) < limits.max_findings:
            findings.append(Finding(code, path, detail))

    root_fd = open_root(root)
    hasher = _Hasher(workers)
    # Each stack item: (directory fd, its relative path, its depth). The fd stays open until
    # every child has been listed, then it is closed; children are opened through it.
    stack: list[tuple[int, str, int]] = [(root_fd, "", 0)]
    try:
        while stack:
            dfd, prefix, depth = stack.pop()
            try:
                try:
                    with os.scandir(dfd) as it:
                        listing = sorted(it, key=lambda d: d.name)
                except OSError as e:
                    report(InventoryCode.UNREADABLE_ENTRY, prefix or ".", f"cannot list directory: {e.strerror}")
                    continue
                seen: dict[str, str] = {}
                for dent in listing:
                    name = dent.name
                    rel = _join(prefix, _display(name))
                    problem = check_name(name)
                    if problem is not None:
                        report(problem[0], rel, problem[1])
                        continue
                    key = collision_key(name)
                    if key in seen:
                        report(
                            InventoryCode.NAME_COLLISION,
                            rel,
                            f"equal to the sibling {seen[key]!r} under case folding or Unicode normalization",
                        )
                        continue
                    seen[key] = name
                    if len(rel.encode("utf-8")) > PATH_MAX:
                        report(InventoryCode.PATH_TOO_LONG, rel[:200] + "...", f"the path is longer than {PATH_MAX} bytes")
                        continue
                    try:
                        st = dent.stat(follow_symlinks=False)
                    except FileNotFoundError:
                        report(InventoryCode.CHANGED_DURING_WALK, rel, "the entry vanished while the tree was walked")
                        continue
                    except OSError as e:
                        report(InventoryCode.UNREADABLE_ENTRY, rel, f"cannot stat: {e.strerror}")
                        continue
                    fmt = stat.S_IFMT(st.st_mode)
                    is_dir = fmt == stat.S_IFDIR
                    if spec is not None and spec.match_file(rel + "/" if is_dir else rel):
                        continue
                    count += 1
                    if count > limits.max_entries:
                        report(InventoryCode.TOO_MANY_ENTRIES, rel, f"the tree has more than {limits.max_entries} entries")
                        stack.clear()
                        break
                    if fmt == stat.S_IFLNK:
                        report(InventoryCode.SYMLINK, rel, "symbolic links are not allowed in a closed tree")
                        continue
                    if fmt not in (stat.S_IFDIR, stat.S_IFREG):
                        report(InventoryCode.SPECIAL_FILE, rel, f"{_kind(fmt)} is not allowed in a closed tree")
                        continue
                    if st.st_mode & _SPECIAL_BITS:
                        report(InventoryCode.SPECIAL_MODE, rel, f"mode {stat.S_IMODE(st.st_mode):04o} has setuid, setgid or sticky bits")
                        continue
                    if is_dir:
                        if depth + 1 > limits.max_depth:
                            report(InventoryCode.DEPTH_EXCEEDED, rel, f"the tree is deeper than {limits.max_depth} levels")
                            continue
                        child = _open_checked(dfd, name, _O_DIR, st, rel, report)
                        if child is None:
                            continue
                        cst = os.fstat(child)
                        entries.append(Entry(rel, EntryType.DIR, stat.S_IMODE(cst.st_mode)))
                        stack.append((child, rel, depth + 1))
                        continue
                    # A regular file.
                    if st.st_nlink > 1:
                        report(InventoryCode.HARDLINK, rel, f"the file has {st.st_nlink} links (another name shares its inode)")
                        continue
                    if st.st_size > limits.max_file_size:
                        report(InventoryCode.FILE_TOO_LARGE, rel, f"the file is {st.st_size} bytes; the limit is {limits.max_file_size}")
                        continue
                    fd = _open_checked(dfd, name, _O_FILE, st, rel, report)
                    if fd is None:
                        continue
                    try:
                        fst = os.fstat(fd)
                        if fst.st_nlink > 1:
                            report(InventoryCode.HARDLINK, rel, "the file gained a second link while the tree was walked")
                            os.close(fd)
                            continue
                        if fst.st_size > limits.max_file_size:
                            report(InventoryCode.FILE_TOO_LARGE, rel, f"the file grew past {limits.max_file_size} bytes")
                            os.close(fd)
                            continue
                        mode = stat.S_IMODE(fst.st_mode)
                        if fst.st_size > _SMALL and workers > 0:
                            hasher.submit(rel, mode, fd, fst)
                            fd = -1
                            continue
                        digest, got = hash_fd(fd, fst.st_size)
                        after = os.fstat(fd)
                    finally:
                        if fd >= 0:
                            os.close(fd)
                    if got != fst.st_size or _stat_changed(fst, after):
                        report(InventoryCode.CHANGED_DURING_WALK, rel, "the file changed while it was hashed")
                        continue
                    entries.append(Entry(rel, EntryType.FILE, mode, got, digest))
                    files_done += 1
                    bytes_done += got
                    if progress is not None and files_done % 256 == 0:
                        progress(files_done, bytes_done)
            finally:
                os.close(dfd)
        for rel, mode, before, fut in hasher.pending:
            try:
                digest, got, after = fut.result()
            except OSError as e:
                report(InventoryCode.UNREADABLE_ENTRY, rel, f"cannot read: {e.strerror}")
                continue
            if got != before.st_size or _stat_changed(before, after):
                report(InventoryCode.CHANGED_DURING_WALK, rel, "the file changed while it was hashed")
                continue
            entries.append(Entry(rel, EntryType.FILE, mode, got, digest))
            files_done += 1
            bytes_done += got
            if progress is not None:
                progress(files_done, bytes_done)
    finally:
        for dfd, _, _ in stack:
            os.close(dfd)
        hasher.close()
    if progress is not None:
        progress(files_done, bytes_done)
    return result


def _kind(fmt: int) -> str:
    return {
        stat.S_IFIFO: "a FIFO",
        stat.S_IFSOCK: "a socket",
        stat.S_IFCHR: "a character device",
        stat.S_IFBLK: "a block device",
    }.get(fmt, "a special file")


def _open_checked(
    dfd: int,
    name: str,
    flags: int,
    listed: os.stat_result,
    rel: str,
    report: Callable[[InventoryCode, str, str], None],
) -> int | None:
    """Open ``name`` under ``dfd`` and confirm it is still the inode that was listed (rule 3)."""
    try:
        fd = os.open(name, flags, dir_fd=dfd)
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.ENOTDIR):
            report(InventoryCode.SYMLINK, rel, "the entry was replaced by a symbolic link while the tree was walked")
        elif e.errno == errno.ENOENT:
            report(InventoryCode.CHANGED_DURING_WALK, rel, "the entry vanished while the tree was walked")
        else:
            report(InventoryCode.UNREADABLE_ENTRY, rel, f"cannot open: {e.strerror}")
        return None
    try:
        st = os.fstat(fd)
    except OSError as e:
        os.close(fd)
        report(InventoryCode.UNREADABLE_ENTRY, rel, f"cannot stat: {e.strerror}")
        return None
    if stat.S_IFMT(st.st_mode) != stat.S_IFMT(listed.st_mode):
        os.close(fd)
        if stat.S_ISLNK(st.st_mode):
            report(InventoryCode.SYMLINK, rel, "the entry became a symbolic link while the tree was walked")
        elif not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
            report(InventoryCode.SPECIAL_FILE, rel, f"the entry became {_kind(stat.S_IFMT(st.st_mode))} while the tree was walked")
        else:
            report(InventoryCode.CHANGED_DURING_WALK, rel, "the entry changed type while the tree was walked")
        return None
    if (st.st_dev, st.st_ino) != (listed.st_dev, listed.st_ino):
        os.close(fd)
        report(InventoryCode.CHANGED_DURING_WALK, rel, "the entry was replaced while the tree was walked")
        return None
    if st.st_mode & _SPECIAL_BITS:
        os.close(fd)
        report(InventoryCode.SPECIAL_MODE, rel, "the entry gained setuid, setgid or sticky bits while the tree was walked")
        return None
    return fd


def inventory_tree(
    root: str | os.PathLike[str],
    *,
    ignore: Sequence[str] = (),
    limits: Limits = DEFAULT_LIMITS,
    progress: Progress | None = None,
) -> Inventory:
    """The closed inventory of ``root``; raises :class:`VerificationError` with every finding."""
    result = scan_tree(root, ignore=ignore, limits=limits, progress=progress)
    if result.findings:
        raise VerificationError(findings=sorted(result.findings, key=lambda f: (f.path or "", f.code)))
    return result.inventory()
