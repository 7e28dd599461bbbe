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

Speed (``python -m bench``): one thread walks (lists, checks names, stats, opens, hashes
small files) and ``workers - 1`` threads hash the files of 256 KiB or more that it hands
them (hashlib and ``readv`` release the GIL); the walking thread hashes handed-over files
too once it has nothing else to do, so several large files are hashed on two cores. (Two
threads walking small files contend for the GIL on every short system call and were
slower than one.) Work items are a directory to list, a slice of up to 64 entries of a
listed directory, or one handed-over file; a directory descriptor is closed when its last
slice is done. Small files are read with one ``read`` of ``st_size + 1`` bytes (rule 4
still holds: fewer bytes than asked means end of file, and the ``fstat`` after the read
must agree with the one before); larger ones with ``readv`` into one reused buffer per
thread.

Two processes (Linux): the per-entry Python work (about 20 us of CPU per small file) runs on
one core per process whatever the number of threads, so a tree that is not small is split
with a second process. The calling process walks alone, before starting any thread, until
it has counted ``_FORK_AFTER`` entries (a tree finished by then is walked in one process),
then forks. Both processes run the walk above, each with its own threads; the child starts
with nothing and asks the parent for work over a ``SOCK_SEQPACKET`` socketpair; whichever
side is asked gives its oldest walk item (the one nearest the root: a directory to list, or
a slice of already listed and checked names) with the directory descriptor attached
(``SCM_RIGHTS``), so the other side continues through that descriptor, never by a path, and
every rule above holds in both processes. When both sides are idle the walk is over. The
child then writes its entries (as columns), findings and counts through a pipe, in one
``marshal`` blob behind a magic and a length, and leaves with ``os._exit``; the parent reads
it to the end, reaps the child, and checks every column's types and ranges. A child that
died, exited non-zero, failed, or returned anything malformed fails the whole walk with
``INTERNAL`` (never a partial inventory); on any error or interruption the parent kills and
reaps the child. Caps hold for the whole walk: depth travels with each item, findings are
capped again after merging, and the entry count is published by each process to the other
through a shared anonymous mapping after every slice (so each may overshoot by a slice
before stopping), and the parent checks the exact sum.

    >>> inv = inventory_tree("some/tree")          # raises VerificationError on any rejection
    >>> result = scan_tree("some/tree")            # never raises for entries; collects findings
"""

from __future__ import annotations

import array
import errno
import gc
import hashlib
import itertools
import marshal
import mmap
import os
import re
import signal
import socket
import stat
import struct
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._safefs import O_DIR, O_FILE
from ..errors import CommonCode, EnvironmentFailure, Finding, InputError, VerificationError
from ._codes import InventoryCode
from ._model import Entry, EntryType, Inventory
from ._names import _RESERVED, NAME_MAX, PATH_MAX, check_name, collision_key

Progress = Callable[[int, int], None]

_O_DIR = O_DIR
_O_FILE = O_FILE
_SPECIAL_BITS = stat.S_ISUID | stat.S_ISGID | stat.S_ISVTX
_SMALL = 64 * 1024  # read in one call of st_size + 1 bytes (larger reads would allocate by mmap)
_CHUNK = 1024 * 1024  # larger files: readv into a reused buffer of this size
_HANDOFF = 256 * 1024  # files at least this large are handed to a hashing thread
_MAX_HANDOFFS = 32  # at most this many open file descriptors wait in the queue
_SLICE = 64  # entries of one directory per work item
# Threads that list, stat and open; the other workers only hash files handed to them. Two
# threads walking small files contend for the GIL on every short system call and end up
# slower than one, so one thread walks and the others hash what is worth handing over.
# (A larger tree is split between two processes instead: see the module docstring.)
_WALK_THREADS = 1
_FILE = EntryType.FILE  # enum attribute access is slow in 3.11; this is per entry
_DIR = EntryType.DIR
_S_IFMT = stat.S_IFMT
_S_IMODE = stat.S_IMODE
_S_IFDIR = stat.S_IFDIR
_S_IFREG = stat.S_IFREG
_S_IFLNK = stat.S_IFLNK
_NAME_CACHE_MAX = 1 << 16
# Printable ASCII without "/" and "\\", at most NAME_MAX bytes: check_name accepts such a
# name unless it is "." or ".." or a reserved spelling of .git (listing checks those);
# every other name goes through check_name itself.
_PLAIN_NAME = re.compile(rf"[\x20-\x2e\x30-\x5b\x5d-\x7e]{{1,{NAME_MAX}}}").fullmatch
# Two processes (see "Two processes" in the module docstring): the calling process walks
# this many entries alone first; a tree it finishes by then is never split.
_FORK_AFTER = 500
_LINK_BUF = 1 << 18  # largest work message: a slice of 64 names of at most 255 bytes, a path
_RESULT_MAGIC = b"attest-walk-1\n"


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
    """What a walk saw: the admissible entries and every finding.

    Both lists are in the order the walk's threads produced them, which varies from run to
    run: sort them (``Inventory.from_entries`` and ``check_tree`` do).
    """

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


def _recv(sock: socket.socket, flags: int) -> tuple[bytes, list[int], int]:
    """One message and the descriptor attached to it (``socket.recv_fds`` ignores its flags in 3.11)."""
    fds = array.array("i")
    msg, ancdata, mflags, _ = sock.recvmsg(_LINK_BUF, socket.CMSG_SPACE(fds.itemsize), flags)
    for level, kind, data in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(data[: len(data) - len(data) % fds.itemsize])
    return msg, list(fds), mflags


def _rel(prefix: str, name: str) -> str:
    """The inventory path of ``name`` in the directory at ``prefix``."""
    rel = name if name.isascii() else _display(name)
    return f"{prefix}/{rel}" if prefix else rel


def _received_item(data: bytes, fd: int) -> tuple[Any, ...]:
    """A walk item given by the other process: (kind, prefix, depth, names) and its directory."""
    try:
        kind, prefix, depth, names = marshal.loads(data)
        ok = (
            kind in (0, 1)
            and type(prefix) is str
            and type(depth) is int
            and (names is None if kind == 0 else type(names) is list and all(type(n) is str for n in names))
            and stat.S_ISDIR(os.fstat(fd).st_mode)
        )
    except (ValueError, TypeError, EOFError, OSError) as e:
        os.close(fd)
        raise EnvironmentFailure(CommonCode.INTERNAL, f"a malformed work item between the walking processes: {e}") from e
    if not ok:
        os.close(fd)
        raise EnvironmentFailure(CommonCode.INTERNAL, "a malformed work item between the walking processes")
    if kind == 0:
        return (_LIST, _Dir(fd), prefix, depth)
    return (_SLICE_ITEM, _Dir(fd), prefix, depth, [(n, _rel(prefix, n)) for n in names])


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


def _hash_small(fd: int, size: int) -> tuple[str, int]:
    """SHA-256 of a file of at most ``_SMALL`` bytes: usually one ``read`` of ``size + 1``.

    Stops at end of file (a read that returns nothing, or fewer bytes than asked, which for a
    regular file means end of file), or once more than ``size`` bytes arrived. The caller
    compares the count with ``st_size`` and the ``fstat`` after the read with the one before.
    """
    data = os.read(fd, size + 1)
    got = len(data)
    if got == size or got > size or not data:
        return hashlib.sha256(data).hexdigest(), got
    h = hashlib.sha256(data)
    while got <= size:
        more = os.read(fd, size + 1 - got)
        if not more:
            break
        h.update(more)
        got += len(more)
    return h.hexdigest(), got


def _hash_small_rest(data: bytes, fd: int, size: int) -> tuple[str, int]:
    """_hash_small after a first read that returned ``data`` (not exactly ``size`` bytes)."""
    got = len(data)
    h = hashlib.sha256(data)
    while data and got <= size:
        data = os.read(fd, size + 1 - got)
        h.update(data)
        got += len(data)
    return h.hexdigest(), got


def _hash_large(fd: int, buf: bytearray, size: int) -> tuple[str, int]:
    """SHA-256 read with ``readv`` into ``buf``; stops at end of file or once past ``size`` bytes.

    (A file that keeps growing while it is read cannot keep the walk busy forever; the caller
    reports any count other than ``size``.)
    """
    h = hashlib.sha256()
    view = memoryview(buf)
    total = 0
    readv = os.readv
    bufs = [buf]
    while total <= size:
        n = readv(fd, bufs)
        if n == 0:
            break
        h.update(view[:n])
        total += n
    return h.hexdigest(), total


def _stat_changed(a: os.stat_result, b: os.stat_result) -> bool:
    return (a.st_ino, a.st_dev, a.st_size, a.st_mtime_ns, a.st_ctime_ns) != (
        b.st_ino,
        b.st_dev,
        b.st_size,
        b.st_mtime_ns,
        b.st_ctime_ns,
    )


class _Dir:
    """A directory descriptor shared by the work items that open its children."""

    __slots__ = ("fd", "refs")

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.refs = 1  # the listing item's own reference


# Work items (tuples: they are made per 64 entries):
#   (_LIST, _Dir, prefix, depth)              list the directory, check names, queue slices
#   (_SLICE_ITEM, _Dir, prefix, depth, items) classify, open and hash up to _SLICE entries
#   (_BIG, fd, rel, fstat)                    hash one large file opened by a slice
_LIST, _SLICE_ITEM, _BIG = 0, 1, 2


class _Walk:
    """One walk, shared by worker threads through a LIFO queue of work items."""

    def __init__(self, spec: Any, limits: Limits, result: ScanResult, workers: int) -> None:
        self.spec = spec
        self.limits = limits
        self.entries = result.entries
        self.findings = result.findings
        self.workers = workers
        self.cond = threading.Condition(threading.Lock())
        self.queue: list[tuple[Any, ...]] = []  # _LIST and _SLICE_ITEM
        self.big: list[tuple[Any, ...]] = []  # _BIG
        self.outstanding = 0  # queued + running work items
        self.handoffs = 0  # _BIG items holding an open descriptor
        self.halted = False
        self.error: BaseException | None = None
        self.counter = itertools.count(1)
        self.names: dict[str, tuple[InventoryCode, str] | None] = {}
        self.stats: list[list[int]] = []  # per thread: [files, bytes]
        self.counted = 0  # entries counted by finished slices
        # Two processes (both None/False in a walk of one process). Only the walking thread
        # uses the link, always under the condition's lock.
        self.link: socket.socket | None = None  # to the other process; counts as outstanding work
        self.asked = False  # we asked the other process for work and wait for its answer
        self.peer_waiting = False  # the other process asked us and waits for our answer
        self.shm: memoryview | None = None  # shared int64s: [count, files, bytes] of parent, then child
        self.me = 0  # 0 in the parent, 1 in the child

    # -- bookkeeping (under the condition's lock) -------------------------------------------

    def report(self, code: InventoryCode, path: str, detail: str) -> None:
        with self.cond:
            if len(self.findings) < self.limits.max_findings:
                self.findings.append(Finding(code, path, detail))

    def push(self, items: list[tuple[Any, ...]]) -> None:
        with self.cond:
            wake = 0
            for item in items:
                if item[0] == _BIG:
                    self.big.append(item)
                    self.handoffs += 1
                    wake += 1
                else:
                    self.queue.append(item)
                    # Only walkers take walk items, and a lone walker is the one pushing them:
                    # waking an idle hasher for nothing costs a GIL hand-off each time.
                    wake += _WALK_THREADS > 1
            self.outstanding += len(items)
            if wake:
                self.cond.notify(wake)

    def take(self, walker: bool) -> tuple[Any, ...] | None:
        """The next item: a walker takes walk items first, then large files; a hasher only large files.

        With a link to the other process, the walker also answers its requests (giving away
        the oldest walk item, the one nearest the root) and, when it has no walk item left,
        asks for one, hashing large files while the answer is pending.
        """
        with self.cond:
            while True:
                if self.halted:
                    return None
                if walker and self.link is not None:
                    if self.me == 1:
                        self.shm[4], self.shm[5] = self.done_own()  # type: ignore[index]
                    self._link_poll(block=False)
                    if self.link is not None and self.peer_waiting:
                        if len(self.queue) >= 2:
                            self._link_give()
                        elif not self.queue:
                            # Both sides idle: the walk is over for both.
                            self._link_send(b"N")
                            self._link_close()
                if walker and self.queue:
                    return self.queue.pop()
                if walker and self.link is not None:
                    if not self.asked:
                        self.asked = True
                        self._link_send(b"R")
                    if self.big:
                        return self.big.pop()
                    if self.link is not None:
                        self._link_poll(block=True)
                    continue
                if self.big:
                    return self.big.pop()
                if self.outstanding == 0:
                    return None
                self.cond.wait()

    # -- the link between the two processes (walking thread, under the lock) ---------------
    #
    # Messages (SOCK_SEQPACKET, one per datagram): b"R" asks for work; b"W" + marshal of
    # (kind, prefix, depth, names) with the directory descriptor attached gives one walk item
    # (kind 0: list the directory; kind 1: the slice of its already listed and checked
    # ``names``); b"N" answers a request when the answering side is idle too. A side that
    # receives b"R" while its own request is pending knows both are idle. Either way both
    # sides then close the link; end of file (the other side stopped or died) closes it too.
    # Work is only given in answer to a request, so at most one message is in flight per side.

    def _link_close(self) -> None:
        if self.link is not None:
            self.link.close()
            self.link = None
            self.asked = self.peer_waiting = False
            self.outstanding -= 1
            if self.outstanding == 0:
                self.cond.notify_all()

    def _link_send(self, msg: bytes, fds: Sequence[int] = ()) -> bool:
        assert self.link is not None
        try:
            if fds:
                socket.send_fds(self.link, [msg], list(fds))
            else:
                self.link.send(msg)
        except OSError:
            self._link_close()  # the other side is gone: its result tells whether it failed
            return False
        return True

    def _link_give(self) -> None:
        item = self.queue[0]
        d = item[1]
        payload: tuple[int, Any, Any, list[Any] | None]
        if item[0] == _LIST:
            payload = (0, item[2], item[3], None)
        else:
            payload = (1, item[2], item[3], [name for name, _ in item[4]])
        if self._link_send(b"W" + marshal.dumps(payload), [d.fd]):
            del self.queue[0]
            self.peer_waiting = False
            self._release(d)
            self.outstanding -= 1

    def _link_poll(self, block: bool) -> None:
        """Handle one message from the other process, if one is there (or wait for it)."""
        link = self.link
        assert link is not None
        flags = socket.MSG_CMSG_CLOEXEC
        try:
            if block:
                self.cond.release()
                try:
                    msg, fds, mflags = _recv(link, flags)
                finally:
                    self.cond.acquire()
            else:
                msg, fds, mflags = _recv(link, flags | socket.MSG_DONTWAIT)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            msg, fds, mflags = b"", [], 0
        if self.link is not link:
            for fd in fds:
                os.close(fd)
            return
        try:
            if mflags & (socket.MSG_TRUNC | socket.MSG_CTRUNC):
                raise EnvironmentFailure(CommonCode.INTERNAL, "a truncated message between the walking processes")
            if not msg:
                self._link_close()
            elif msg == b"R":
                if self.asked:
                    self._link_close()  # both asked: both are idle
                else:
                    self.peer_waiting = True
            elif msg == b"N" and self.asked:
                self._link_close()
            elif msg[:1] == b"W" and self.asked and len(fds) == 1:
                self.queue.append(_received_item(msg[1:], fds.pop()))
                self.outstanding += 1
                self.asked = False
            else:
                raise EnvironmentFailure(CommonCode.INTERNAL, f"an unexpected message between the walking processes: {msg[:20]!r}")
        finally:
            for fd in fds:
                os.close(fd)

    def finish(self, item: tuple[Any, ...]) -> None:
        with self.cond:
            kind = item[0]
            if kind == _BIG:
                self.handoffs -= 1
            else:
                self._release(item[1])
            self.outstanding -= 1
            if self.outstanding == 0:
                self.cond.notify_all()

    def _release(self, d: _Dir) -> None:
        d.refs -= 1
        if d.refs == 0 and d.fd >= 0:
            os.close(d.fd)
            d.fd = -1

    def halt(self, error: BaseException | None = None) -> None:
        with self.cond:
            self.halted = True
            if error is not None and self.error is None:
                self.error = error
            self.cond.notify_all()

    def drain(self) -> None:
        """After every thread stopped: close what queued items still hold."""
        with self.cond:
            for item in self.big:
                os.close(item[1])
            self.big.clear()
            for item in self.queue:
                self._release(item[1])
            self.queue.clear()

    def done_own(self) -> tuple[int, int]:
        return sum(s[0] for s in self.stats), sum(s[1] for s in self.stats)

    def done(self) -> tuple[int, int]:
        files, size = self.done_own()
        if self.shm is not None and self.me == 0:
            files += self.shm[4]
            size += self.shm[5]
        return files, size

    def count(self, n: int) -> None:
        """Add ``n`` counted entries, and publish the total to the other process."""
        with self.cond:
            self.counted += n
            if self.shm is not None:
                self.shm[3 * self.me] = self.counted

    def peer_count(self) -> int:
        return 0 if self.shm is None else self.shm[3 * (1 - self.me)]

    # -- the work -------------------------------------------------------------------------

    def run(self, walker: bool = True) -> None:
        """A worker: take items until the queues are empty and nothing is running."""
        stats = [0, 0]
        self.stats.append(stats)
        buf = bytearray(_CHUNK)
        try:
            while True:
                item = self.take(walker)
                if item is None:
                    return
                self.do(item, buf, stats)
        except BaseException as e:  # noqa: BLE001 - halt() records it; the walk re-raises it
            self.halt(e)
        finally:
            if walker:
                with self.cond:
                    self._link_close()

    def do(self, item: tuple[Any, ...], buf: bytearray, stats: list[int]) -> None:
        try:
            kind = item[0]
            if kind == _SLICE_ITEM:
                self.slice(item[1].fd, item[2], item[3], item[4], buf, stats)
            elif kind == _LIST:
                self.listing(item[1], item[2], item[3])
            else:
                try:
                    self.hash_file(item[1], item[2], item[3], buf, stats)
                finally:
                    os.close(item[1])
        finally:
            self.finish(item)

    def prewalk(self, limit: int) -> bool:
        """Walk in the calling thread, no other thread started, until more than ``limit``
        entries were counted; whether walk items remain (large files may wait in any case)."""
        stats = [0, 0]
        self.stats.append(stats)
        buf = bytearray(_CHUNK)
        while self.queue and not self.halted and self.counted <= limit:
            self.do(self.queue.pop(), buf, stats)
        return bool(self.queue) and not self.halted

    def listing(self, d: _Dir, prefix: str, depth: int) -> None:
        try:
            names = sorted(os.listdir(d.fd))
        except OSError as e:
            self.report(InventoryCode.UNREADABLE_ENTRY, prefix or ".", f"cannot list directory: {e.strerror}")
            return
        cache = self.names
        seen: dict[str, str] = {}
        items: list[tuple[str, str]] = []
        plain = _PLAIN_NAME
        for name in names:
            rel = name if name.isascii() else _display(name)
            if prefix:
                rel = f"{prefix}/{rel}"
            try:
                problem = cache[name]
            except KeyError:
                # check_name's verdict, without its byte-by-byte scan, for the common name.
                if plain(name) and name not in (".", "..") and name.rstrip(". ").casefold() not in _RESERVED:
                    problem = None
                else:
                    problem = check_name(name)
                if len(cache) < _NAME_CACHE_MAX:
                    cache[name] = problem
            if problem is not None:
                self.report(problem[0], rel, problem[1])
                continue
            key = collision_key(name)
            if key in seen:
                self.report(
                    InventoryCode.NAME_COLLISION,
                    rel,
                    f"equal to the sibling {seen[key]!r} under case folding or Unicode normalization",
                )
                continue
            seen[key] = name
            # UTF-8 takes at most 4 bytes a code point: only long paths need encoding.
            if len(rel) * 4 > PATH_MAX and len(rel.encode("utf-8")) > PATH_MAX:
                self.report(InventoryCode.PATH_TOO_LONG, rel[:200] + "...", f"the path is longer than {PATH_MAX} bytes")
                continue
            items.append((name, rel))
        if not items:
            return
        slices = [(_SLICE_ITEM, d, prefix, depth, items[i : i + _SLICE]) for i in range(0, len(items), _SLICE)]
        with self.cond:
            d.refs += len(slices)
        # Pushed in reverse so the LIFO queue takes them in name order.
        self.push(slices[::-1])

    def slice(self, dfd: int, prefix: str, depth: int, items: list[tuple[str, str]], buf: bytearray, stats: list[int]) -> None:
        spec = self.spec
        limits = self.limits
        report = self.report
        entries = self.entries
        read = os.read
        fstat = os.fstat
        sha256 = hashlib.sha256
        nfiles = nbytes = 0
        budget = limits.max_entries - self.peer_count()  # the whole walk's cap, over both processes
        taken = 0
        for name, rel in items:
            if self.halted:
                break
            try:
                st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
            except FileNotFoundError:
                report(InventoryCode.CHANGED_DURING_WALK, rel, "the entry vanished while the tree was walked")
                continue
            except OSError as e:
                report(InventoryCode.UNREADABLE_ENTRY, rel, f"cannot stat: {e.strerror}")
                continue
            st_mode = st.st_mode
            fmt = _S_IFMT(st_mode)
            is_dir = fmt == _S_IFDIR
            if spec is not None and spec.match_file(rel + "/" if is_dir else rel):
                continue
            taken += 1
            if next(self.counter) > budget:
                report(InventoryCode.TOO_MANY_ENTRIES, rel, f"the tree has more than {limits.max_entries} entries")
                self.halt()
                break
            if fmt == _S_IFLNK:
                report(InventoryCode.SYMLINK, rel, "symbolic links are not allowed in a closed tree")
                continue
            if not is_dir and fmt != _S_IFREG:
                report(InventoryCode.SPECIAL_FILE, rel, f"{_kind(fmt)} is not allowed in a closed tree")
                continue
            if st_mode & _SPECIAL_BITS:
                report(InventoryCode.SPECIAL_MODE, rel, f"mode {_S_IMODE(st_mode):04o} has setuid, setgid or sticky bits")
                continue
            if is_dir:
                if depth + 1 > limits.max_depth:
                    report(InventoryCode.DEPTH_EXCEEDED, rel, f"the tree is deeper than {limits.max_depth} levels")
                    continue
                opened = _open_checked(dfd, name, _O_DIR, st, rel, report)
                if opened is None:
                    continue
                child, cst = opened
                entries.append(Entry(rel, _DIR, _S_IMODE(cst.st_mode)))
                self.push([(_LIST, _Dir(child), rel, depth + 1)])
                continue
            # A regular file.
            if st.st_nlink > 1:
                report(InventoryCode.HARDLINK, rel, f"the file has {st.st_nlink} links (another name shares its inode)")
                continue
            if st.st_size > limits.max_file_size:
                report(InventoryCode.FILE_TOO_LARGE, rel, f"the file is {st.st_size} bytes; the limit is {limits.max_file_size}")
                continue
            # _open_checked, inlined for the common case (the same inode, mode unchanged).
            try:
                fd = os.open(name, _O_FILE, dir_fd=dfd)
            except OSError as e:
                _report_open_error(e, rel, report)
                continue
            try:
                try:
                    fst = os.fstat(fd)
                except OSError as e:
                    report(InventoryCode.UNREADABLE_ENTRY, rel, f"cannot stat: {e.strerror}")
                    continue
                if (fst.st_ino != st.st_ino or fst.st_dev != st.st_dev or fst.st_mode != st_mode) and not _same_entry(
                    fst, st, rel, report
                ):
                    continue
                if fst.st_nlink > 1:
                    report(InventoryCode.HARDLINK, rel, "the file gained a second link while the tree was walked")
                    continue
                size = fst.st_size
                if size > limits.max_file_size:
                    report(InventoryCode.FILE_TOO_LARGE, rel, f"the file grew past {limits.max_file_size} bytes")
                    continue
                if size >= _HANDOFF and self.workers > 1 and self.handoffs < _MAX_HANDOFFS:
                    self.push([(_BIG, fd, rel, fst)])
                    fd = -1
                    continue
                if size > _SMALL:
                    self.hash_file(fd, rel, fst, buf, stats)
                    continue
                # hash_file inlined for small files: usually one read (see _hash_small).
                try:
                    data = read(fd, size + 1)
                    got = len(data)
                    if got == size:
                        digest = sha256(data).hexdigest()
                    else:
                        digest, got = _hash_small_rest(data, fd, size)
                    after = fstat(fd)
                except OSError as e:
                    report(InventoryCode.UNREADABLE_ENTRY, rel, f"cannot read: {e.strerror}")
                    continue
                if (
                    got != size
                    or after.st_ino != fst.st_ino
                    or after.st_dev != fst.st_dev
                    or after.st_size != size
                    or after.st_mtime_ns != fst.st_mtime_ns
                    or after.st_ctime_ns != fst.st_ctime_ns
                ):
                    report(InventoryCode.CHANGED_DURING_WALK, rel, "the file changed while it was hashed")
                    continue
                entries.append(Entry(rel, _FILE, _S_IMODE(fst.st_mode), got, digest))
                nfiles += 1
                nbytes += got
            finally:
                if fd >= 0:
                    os.close(fd)
        stats[0] += nfiles
        stats[1] += nbytes
        self.count(taken)

    def hash_file(self, fd: int, rel: str, before: os.stat_result, buf: bytearray, stats: list[int]) -> None:
        """Hash an opened regular file (rule 4) and record it; ``fd`` stays open."""
        size = before.st_size
        try:
            if size <= _SMALL:
                digest, got = _hash_small(fd, size)
            else:
                digest, got = _hash_large(fd, buf, size)
            after = os.fstat(fd)
        except OSError as e:
            self.report(InventoryCode.UNREADABLE_ENTRY, rel, f"cannot read: {e.strerror}")
            return
        if got != size or _stat_changed(before, after):
            self.report(InventoryCode.CHANGED_DURING_WALK, rel, "the file changed while it was hashed")
            return
        self.entries.append(Entry(rel, _FILE, _S_IMODE(before.st_mode), got, digest))
        stats[0] += 1
        stats[1] += got


class _GcPaused:
    """Pause the cyclic garbage collector while a walk allocates its entries.

    A walk allocates several objects per entry and none of them form reference cycles;
    the collector's repeated passes over the growing entry list cost 15-20 % of a walk of
    small files. Nesting is safe; the previous state is restored.
    """

    def __enter__(self) -> None:
        self.was = gc.isenabled()
        gc.disable()

    def __exit__(self, *exc: object) -> None:
        if self.was:
            gc.enable()


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
    ``workers`` threads share the walk; with ``workers <= 1`` and no ``progress`` it runs
    in the calling thread.
    """
    with _GcPaused():
        return _scan(root, ignore, limits, progress, workers)


def _scan(
    root: str | os.PathLike[str],
    ignore: Sequence[str],
    limits: Limits,
    progress: Progress | None,
    workers: int,
) -> ScanResult:
    spec = compile_ignore(tuple(ignore))
    result = ScanResult(ignore=tuple(ignore))
    root_fd = open_root(root)
    walk = _Walk(spec, limits, result, max(1, workers))
    walk.push([(_LIST, _Dir(root_fd), "", 0)])
    child: _Child | None = None
    try:
        if workers <= 1 and progress is None:
            walk.run()
        else:
            # Split the walk with a second process when the tree is not small: per-entry
            # Python work runs on one core per process (see "Two processes"). Only on Linux
            # (descriptor passing, SOCK_SEQPACKET, fork), and before this walk starts a
            # thread; a tree finished within _FORK_AFTER entries is walked in this process.
            if workers > 1 and _CAN_FORK and walk.prewalk(_FORK_AFTER):
                child = _fork(walk)
            threads = [
                threading.Thread(target=walk.run, args=(i < _WALK_THREADS,), name=f"attest-walk-{i}", daemon=True)
                for i in range(max(1, workers))
            ]
            for t in threads:
                t.start()
            try:
                for t in threads:
                    while t.is_alive():
                        t.join(0.2 if progress is not None else None)
                        if progress is not None:
                            progress(*walk.done())
            except BaseException:
                if child is not None:
                    child.kill()  # also ends a wait for its answer on the link
                walk.halt()
                for t in threads:
                    t.join()
                raise
        if child is not None:
            if walk.error is not None:
                child.kill()
            else:
                child.merge(walk, result)
    finally:
        if child is not None:
            child.kill()
        walk.drain()
    if walk.error is not None:
        raise walk.error
    if progress is not None:
        progress(*walk.done())
    return result


# -- Two processes ----------------------------------------------------------------------------

_CAN_FORK = (
    sys.platform == "linux"
    and hasattr(os, "fork")
    and hasattr(socket, "send_fds")
    and hasattr(socket, "SOCK_SEQPACKET")
    and hasattr(socket, "MSG_CMSG_CLOEXEC")
)


def _fork(walk: _Walk) -> _Child:
    """Fork the second walking process; in the parent, return its handle (the child never returns)."""
    parent_sock, child_sock = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        rfd, wfd = os.pipe()
    except BaseException:
        parent_sock.close()
        child_sock.close()
        raise
    shm = memoryview(mmap.mmap(-1, 64)).cast("q")  # anonymous memory stays shared across fork
    shm[0] = walk.counted
    try:
        pid = os.fork()
    except BaseException:
        for fd in (rfd, wfd):
            os.close(fd)
        parent_sock.close()
        child_sock.close()
        raise
    if pid == 0:  # pragma: no cover - runs in the child, which ends with os._exit
        status = 70
        try:
            os.close(rfd)
            parent_sock.close()
            _child_main(walk, child_sock, shm, wfd)
            status = 0
        finally:
            os._exit(status)
    os.close(wfd)
    child_sock.close()
    walk.link = parent_sock
    walk.shm = shm
    walk.outstanding += 1  # the link: work may come back from the child until it is closed
    return _Child(pid, rfd)


def _child_main(walk: _Walk, link: socket.socket, shm: memoryview, wfd: int) -> None:  # pragma: no cover
    """The child: forget the parent's share, walk what the parent gives, write the result."""
    # The parent keeps the entries, findings and work items it had; close our copies.
    seen: set[int] = set()
    for item in walk.queue:
        if id(item[1]) not in seen and item[1].fd >= 0:
            seen.add(id(item[1]))
            os.close(item[1].fd)
    for item in walk.big:
        os.close(item[1])
    walk.queue = []
    walk.big = []
    walk.entries = []
    walk.findings = []
    walk.stats = []
    walk.counter = itertools.count(1)
    walk.counted = 0
    walk.handoffs = 0
    walk.outstanding = 1  # the link
    walk.link = link
    walk.shm = shm
    walk.me = 1
    error: str | None = None
    try:
        threads = [
            threading.Thread(target=walk.run, args=(False,), name=f"attest-walk-child-{i}", daemon=True)
            for i in range(1, walk.workers)
        ]
        for t in threads:
            t.start()
        walk.run(True)
        for t in threads:
            t.join()
        walk.drain()
        if walk.error is not None:
            error = f"{type(walk.error).__name__}: {walk.error}"
    except BaseException as e:  # noqa: BLE001 - sent to the parent, which fails the walk with INTERNAL
        error = f"{type(e).__name__}: {e}"
    # Columns (paths, modes, sizes, digests of files; paths, modes of directories): the
    # parent checks each column's types at C speed instead of entry by entry.
    ents = walk.entries if error is None else []
    fe = [e for e in ents if e.type is _FILE]
    de = [e for e in ents if e.type is not _FILE]
    columns = (
        [e.path for e in fe],
        [e.mode for e in fe],
        [e.size for e in fe],
        [e.sha256 for e in fe],
        [e.path for e in de],
        [e.mode for e in de],
    )
    findings = [(str(f.code), f.path, f.detail) for f in walk.findings]
    files, size = walk.done_own()
    blob = marshal.dumps((walk.counted, files, size, columns, findings, error))
    data = memoryview(_RESULT_MAGIC + struct.pack("<Q", len(blob)) + blob)
    while data:
        data = data[os.write(wfd, data) :]
    os.close(wfd)


class _Child:
    """The forked walking process, from the parent's side."""

    def __init__(self, pid: int, rfd: int) -> None:
        self.pid = pid
        self.rfd = rfd

    def kill(self) -> None:
        """Stop and reap the child if it still runs (no zombie is left)."""
        if self.pid > 0:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            _reap(self.pid)
            self.pid = 0
        if self.rfd >= 0:
            os.close(self.rfd)
            self.rfd = -1

    def merge(self, walk: _Walk, result: ScanResult) -> None:
        """Read the child's result and add it to ``result``; any doubt about it is a failure."""
        limits = walk.limits
        # Bounded: every entry and finding the caps allow, at their largest.
        cap = len(_RESULT_MAGIC) + 8 + 64 + (limits.max_entries + 2) * (PATH_MAX + 160) + (limits.max_findings + 2) * (PATH_MAX + 4096)
        chunks = []
        total = 0
        while True:
            chunk = os.read(self.rfd, 1 << 20)
            if not chunk:
                break
            total += len(chunk)
            if total > cap:
                self.kill()
                raise EnvironmentFailure(CommonCode.INTERNAL, "the second walking process returned more than its caps allow")
            chunks.append(chunk)
        os.close(self.rfd)
        self.rfd = -1
        status = _reap(self.pid)
        self.pid = 0
        data = b"".join(chunks)
        if status != 0:
            raise EnvironmentFailure(CommonCode.INTERNAL, f"the second walking process failed (wait status {status})")
        head = len(_RESULT_MAGIC) + 8
        if data[: len(_RESULT_MAGIC)] != _RESULT_MAGIC or len(data) < head or struct.unpack("<Q", data[len(_RESULT_MAGIC) : head])[0] != len(data) - head:
            raise EnvironmentFailure(CommonCode.INTERNAL, "the second walking process returned a malformed result")
        try:
            counted, files, size, columns, findings, error = marshal.loads(memoryview(data)[head:])
            if error is not None:
                raise EnvironmentFailure(CommonCode.INTERNAL, f"the second walking process failed: {error}")
            if not (type(counted) is int and type(files) is int and type(size) is int and type(findings) is list):
                raise TypeError("bad header")
            fpaths, fmodes, fsizes, digests, dpaths, dmodes = columns
            if not (
                all(type(c) is list for c in columns)
                and len(fpaths) == len(fmodes) == len(fsizes) == len(digests)
                and len(dpaths) == len(dmodes)
                and set(map(type, fpaths + dpaths)) <= {str}
                and set(map(type, fmodes + dmodes + fsizes)) <= {int}
                and set(map(type, digests)) <= {str}
                and set(map(len, digests)) <= {64}
                and (not fmodes or 0 <= min(fmodes) <= max(fmodes) <= 0o7777)
                and (not dmodes or 0 <= min(dmodes) <= max(dmodes) <= 0o7777)
                and (not fsizes or min(fsizes) >= 0)
            ):
                raise TypeError("bad entry columns")
            result.entries.extend(map(Entry, fpaths, itertools.repeat(_FILE), fmodes, fsizes, digests))
            result.entries.extend(map(Entry, dpaths, itertools.repeat(_DIR), dmodes))
            for code, path, detail in findings:
                if not (path is None or type(path) is str) or type(detail) is not str:
                    raise TypeError("bad finding")
                if len(result.findings) < limits.max_findings:
                    result.findings.append(Finding(InventoryCode(code), path, detail))
        except (ValueError, TypeError, EOFError) as e:
            raise EnvironmentFailure(CommonCode.INTERNAL, f"the second walking process returned a malformed result: {e}") from e
        if walk.counted + counted > limits.max_entries and not any(f.code == InventoryCode.TOO_MANY_ENTRIES for f in result.findings):
            # Each process saw the other's count a little late; the sum decides.
            finding = Finding(InventoryCode.TOO_MANY_ENTRIES, ".", f"the tree has more than {limits.max_entries} entries")
            if len(result.findings) >= limits.max_findings:
                result.findings[-1] = finding
            else:
                result.findings.append(finding)
        walk.shm = None  # done() counts the child's final figures from here on
        walk.stats.append([files, size])


def _reap(pid: int) -> int:
    while True:
        try:
            return os.waitpid(pid, 0)[1]
        except InterruptedError:
            continue
        except ChildProcessError:
            return -1


def _kind(fmt: int) -> str:
    return {
        stat.S_IFIFO: "a FIFO",
        stat.S_IFSOCK: "a socket",
        stat.S_IFCHR: "a character device",
        stat.S_IFBLK: "a block device",
    }.get(fmt, "a special file")


def _report_open_error(e: OSError, rel: str, report: Callable[[InventoryCode, str, str], None]) -> None:
    if e.errno in (errno.ELOOP, errno.ENOTDIR):
        report(InventoryCode.SYMLINK, rel, "the entry was replaced by a symbolic link while the tree was walked")
    elif e.errno == errno.ENOENT:
        report(InventoryCode.CHANGED_DURING_WALK, rel, "the entry vanished while the tree was walked")
    else:
        report(InventoryCode.UNREADABLE_ENTRY, rel, f"cannot open: {e.strerror}")


def _same_entry(
    st: os.stat_result,
    listed: os.stat_result,
    rel: str,
    report: Callable[[InventoryCode, str, str], None],
) -> bool:
    """Whether the opened ``st`` is still the listed inode, of the listed type, without special bits."""
    if stat.S_IFMT(st.st_mode) != stat.S_IFMT(listed.st_mode):
        if stat.S_ISLNK(st.st_mode):
            report(InventoryCode.SYMLINK, rel, "the entry became a symbolic link while the tree was walked")
        elif not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
            report(InventoryCode.SPECIAL_FILE, rel, f"the entry became {_kind(stat.S_IFMT(st.st_mode))} while the tree was walked")
        else:
            report(InventoryCode.CHANGED_DURING_WALK, rel, "the entry changed type while the tree was walked")
        return False
    if (st.st_dev, st.st_ino) != (listed.st_dev, listed.st_ino):
        report(InventoryCode.CHANGED_DURING_WALK, rel, "the entry was replaced while the tree was walked")
        return False
    if st.st_mode & _SPECIAL_BITS:
        report(InventoryCode.SPECIAL_MODE, rel, "the entry gained setuid, setgid or sticky bits while the tree was walked")
        return False
    return True


def _open_checked(
    dfd: int,
    name: str,
    flags: int,
    listed: os.stat_result,
    rel: str,
    report: Callable[[InventoryCode, str, str], None],
) -> tuple[int, os.stat_result] | None:
    """Open ``name`` under ``dfd`` and confirm it is still the inode that was listed (rule 3).

    Returns the descriptor and its ``fstat``, from which every later decision is made.
    """
    try:
        fd = os.open(name, flags, dir_fd=dfd)
    except OSError as e:
        _report_open_error(e, rel, report)
        return None
    try:
        st = os.fstat(fd)
    except OSError as e:
        os.close(fd)
        report(InventoryCode.UNREADABLE_ENTRY, rel, f"cannot stat: {e.strerror}")
        return None
    if not _same_entry(st, listed, rel, report):
        os.close(fd)
        return None
    return fd, st


def inventory_tree(
    root: str | os.PathLike[str],
    *,
    ignore: Sequence[str] = (),
    limits: Limits = DEFAULT_LIMITS,
    progress: Progress | None = None,
) -> Inventory:
    """The closed inventory of ``root``; raises :class:`VerificationError` with every finding."""
    with _GcPaused():
        result = scan_tree(root, ignore=ignore, limits=limits, progress=progress)
        if result.findings:
            raise VerificationError(findings=sorted(result.findings, key=lambda f: (f.path or "", f.code)))
        return result.inventory()
