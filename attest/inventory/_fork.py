"""The two-process walk (Linux): a forked second walker, its link, and its checked result.

The per-entry Python work (about 20 us of CPU per small file) runs on one core per process
whatever the number of threads, so a tree that is not small is split with a second process.
The calling process walks alone, before starting any thread, until it has counted
``_walk._FORK_AFTER`` entries (a tree finished by then is walked in one process), then forks
(:func:`fork_walker`). Both processes run the same walk, each with its own threads; the child
starts with nothing and asks the parent for work over a ``SOCK_SEQPACKET`` socketpair
(:class:`Link`); whichever side is asked gives its oldest walk item (the one nearest the
root: a directory to list, or a slice of already listed and checked names) with the
directory descriptor attached (``SCM_RIGHTS``), so the other side continues through that
descriptor, never by a path, and every rule of the walker holds in both processes. When
both sides are idle the walk is over. The child then writes its entries (as columns),
findings and counts through a pipe, in one ``marshal`` blob behind a magic and a length, and
leaves with ``os._exit`` (:func:`child_main`); the parent reads it to the end, reaps the
child, and checks every column's types and ranges (:meth:`Child.merge`). A child that died,
exited non-zero, failed, or returned anything malformed fails the whole walk with
``INTERNAL`` (never a partial inventory); on any error or interruption the parent kills and
reaps the child. Caps hold for the whole walk: depth travels with each item, findings are
capped again after merging, and the entry count is published by each process to the other
through a shared anonymous mapping after every slice (so each may overshoot by a slice
before stopping), and the parent checks the exact sum.

    >>> child = fork_walker(walk, child_main)   # in the parent; the child never returns
    >>> ...                                     # both walk until both are idle
    >>> child.merge(walk, result)               # raises EnvironmentFailure(INTERNAL) on any doubt
"""

from __future__ import annotations

import array
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

from .._fdio import write_all
from ..errors import CommonCode, EnvironmentFailure, Finding
from ._codes import InventoryCode
from ._model import Entry, EntryType
from ._names import PATH_MAX, check_path, entry_path, plain_paths
from ._sched import Scheduler
from ._types import LIST, LISTED_UNKNOWN, SLICE_ITEM, DirRef, Expected, Limits, ScanResult, WalkItem

CAN_FORK = (
    sys.platform == "linux"
    and hasattr(os, "fork")
    and hasattr(socket, "send_fds")
    and hasattr(socket, "SOCK_SEQPACKET")
    and hasattr(socket, "MSG_CMSG_CLOEXEC")
)
_LINK_BUF = 1 << 18  # largest work message: a slice of 64 names of at most 255 bytes, a path
_RESULT_MAGIC = b"attest-walk-1\n"
_FILE = EntryType.FILE
_DIR = EntryType.DIR



class SplitWalk(Scheduler):
    """A walk that can be split with a second process: the scheduler, the walk's limits and the lists it fills.

    :class:`._walk._Walk` is the one kind; this is what of it the two-process walk touches.
    """

    limits: Limits
    entries: list[Entry]
    findings: list[Finding]
    matched: list[str]
    want: Expected | None


ChildMain = Callable[[SplitWalk, socket.socket, memoryview, int], None]


# -- the link between the two processes -------------------------------------------------------
#
# Messages (SOCK_SEQPACKET, one per datagram): b"R" asks for work; b"W" + marshal of
# (kind, prefix, depth, names) with the directory descriptor attached gives one walk item
# (kind 0: list the directory; kind 1: the slice of its already listed and checked
# ``names``); b"N" answers a request when the answering side is idle too. A side that
# receives b"R" while its own request is pending knows both are idle. Either way both
# sides then close the link; end of file (the other side stopped or died) closes it too.
# Work is only given in answer to a request, so at most one message is in flight per side.


class Link:
    """The walking thread's end of the link to the other process.

    Every method runs in the walking thread under the scheduler's lock (``s.cond``); the
    scheduler's ``link`` is this object until :meth:`close` clears it.
    """

    __slots__ = ("asked", "peer_waiting", "sock")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.asked = False  # we asked the other process for work and wait for its answer
        self.peer_waiting = False  # the other process asked us and waits for our answer

    def close(self, s: Scheduler) -> None:
        if s.link is self:
            self.sock.close()
            s.link = None
            self.asked = self.peer_waiting = False
            s.outstanding -= 1
            if s.outstanding == 0:
                s.cond.notify_all()

    def send(self, s: Scheduler, msg: bytes, fds: Sequence[int] = ()) -> bool:
        try:
            if fds:
                socket.send_fds(self.sock, [msg], list(fds))
            else:
                self.sock.send(msg)
        except OSError:
            self.close(s)  # the other side is gone: its result tells whether it failed
            return False
        return True

    def give(self, s: Scheduler) -> None:
        """Answer the other side's request with our oldest walk item (the one nearest the root)."""
        item = s.queue[0]
        d = item[1]
        payload: tuple[int, str, int, list[str] | None]
        if item[0] == LIST:
            payload = (0, item[2], item[3], None)
        else:
            payload = (1, item[2], item[3], [listed[0] for listed in item[4]])
        if self.send(s, b"W" + marshal.dumps(payload), [d.fd]):
            del s.queue[0]
            self.peer_waiting = False
            s.release(d)
            s.outstanding -= 1

    def poll(self, s: Scheduler, block: bool) -> None:
        """Handle one message from the other process, if one is there (or wait for it)."""
        flags = socket.MSG_CMSG_CLOEXEC
        try:
            if block:
                s.cond.release()
                try:
                    msg, fds, mflags = _recv(self.sock, flags)
                finally:
                    s.cond.acquire()
            else:
                msg, fds, mflags = _recv(self.sock, flags | socket.MSG_DONTWAIT)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            msg, fds, mflags = b"", [], 0
        if s.link is not self:
            for fd in fds:
                os.close(fd)
            return
        try:
            if mflags & (socket.MSG_TRUNC | socket.MSG_CTRUNC):
                raise EnvironmentFailure(CommonCode.INTERNAL, "a truncated message between the walking processes")
            if not msg:
                self.close(s)
            elif msg == b"R":
                if self.asked:
                    self.close(s)  # both asked: both are idle
                else:
                    self.peer_waiting = True
            elif msg == b"N" and self.asked:
                self.close(s)
            elif msg[:1] == b"W" and self.asked and len(fds) == 1:
                s.queue.append(_received_item(msg[1:], fds.pop()))
                s.outstanding += 1
                self.asked = False
            else:
                raise EnvironmentFailure(CommonCode.INTERNAL, f"an unexpected message between the walking processes: {msg[:20]!r}")
        finally:
            for fd in fds:
                os.close(fd)


def _recv(sock: socket.socket, flags: int) -> tuple[bytes, list[int], int]:
    """One message and the descriptor attached to it (``socket.recv_fds`` ignores its flags in 3.11)."""
    fds = array.array("i")
    msg, ancdata, mflags, _ = sock.recvmsg(_LINK_BUF, socket.CMSG_SPACE(fds.itemsize), flags)
    for level, kind, data in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(data[: len(data) - len(data) % fds.itemsize])
    return msg, list(fds), mflags


def _received_item(data: bytes, fd: int) -> WalkItem:
    """A walk item given by the other process: (kind, prefix, depth, names) and its directory."""
    try:
        kind, prefix, depth, names = marshal.loads(data)
        st = os.fstat(fd)
        ok = (
            kind in (0, 1)
            and type(prefix) is str
            and type(depth) is int
            and (names is None if kind == 0 else type(names) is list and all(type(n) is str for n in names))
            and stat.S_ISDIR(st.st_mode)
        )
    except (ValueError, TypeError, EOFError, OSError) as e:
        os.close(fd)
        raise EnvironmentFailure(CommonCode.INTERNAL, f"a malformed work item between the walking processes: {e}") from e
    if not ok:
        os.close(fd)
        raise EnvironmentFailure(CommonCode.INTERNAL, "a malformed work item between the walking processes")
    if kind == 0:
        return (LIST, DirRef(fd, st.st_dev), prefix, depth)
    # Only the names travel: each is taken with an lstat first on this side (LISTED_UNKNOWN).
    return (SLICE_ITEM, DirRef(fd, st.st_dev), prefix, depth, [(n, entry_path(prefix, n), LISTED_UNKNOWN, 0) for n in names])


# -- the processes ----------------------------------------------------------------------------


def fork_walker(walk: SplitWalk, child_main: ChildMain) -> Child:
    """Fork the second walking process; in the parent, return its handle (the child never returns).

    The child runs ``child_main(walk, link socket, shared counters, result pipe)`` and exits
    with status 0 after it returned, 70 if it raised.
    """
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
            child_main(walk, child_sock, shm, wfd)
            status = 0
        finally:
            os._exit(status)
    os.close(wfd)
    child_sock.close()
    walk.link = Link(parent_sock)
    walk.shm = shm
    walk.outstanding += 1  # the link: work may come back from the child until it is closed
    return Child(pid, rfd)


def child_main(walk: SplitWalk, link: socket.socket, shm: memoryview, wfd: int) -> None:  # pragma: no cover
    """The child: forget the parent's share, walk what the parent gives, write the result."""
    # The parent keeps the entries, findings and work items it had; close our copies.
    seen: set[int] = set()
    for item in walk.queue:
        if id(item[1]) not in seen and item[1].fd >= 0:
            seen.add(id(item[1]))
            os.close(item[1].fd)
    for big in walk.big:
        os.close(big[1])
    walk.queue = []
    walk.big = []
    walk.entries = []
    walk.findings = []
    walk.matched = []
    walk.stats = []
    walk.counter = itertools.count(1)
    walk.counted = 0
    walk.handoffs = 0
    walk.outstanding = 1  # the link
    walk.link = Link(link)
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
    matched = walk.matched if error is None else []
    blob = marshal.dumps((walk.counted, files, size, columns, findings, error, matched))
    write_all(wfd, _RESULT_MAGIC + struct.pack("<Q", len(blob)) + blob)
    os.close(wfd)


class Child:
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

    def merge(self, walk: SplitWalk, result: ScanResult) -> None:
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
            counted, files, size, columns, findings, error, matched = marshal.loads(memoryview(data)[head:])
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
                and _HEX.fullmatch("".join(digests)) is not None
                # an entry never carries setuid, setgid or sticky bits (the walker reports SPECIAL_MODE)
                and (not fmodes or 0 <= min(fmodes) <= max(fmodes) <= 0o777)
                and (not dmodes or 0 <= min(dmodes) <= max(dmodes) <= 0o777)
                and (not fsizes or min(fsizes) >= 0)
            ):
                raise TypeError("bad entry columns")
            # Every path as the walker would have let it through (the one name rule): the child
            # is this program, but its answer is bytes read from a pipe.
            paths = fpaths + dpaths
            bad = None if plain_paths(paths) else next((p for p in paths if check_path(p) is not None), None)
            if bad is not None:
                raise ValueError(f"a path the walker never produces: {bad[:200]!r}")
            # Matched paths: each one the parent expects, none twice, none also an entry.
            if type(matched) is not list or (matched and walk.want is None):
                raise TypeError("bad matched paths")
            if matched:
                want = walk.want
                assert want is not None
                seen = set(matched)
                if (
                    not set(map(type, matched)) <= {str}
                    or len(seen) != len(matched)
                    or not seen <= want.keys()
                    or not seen.isdisjoint(paths)
                    or not seen.isdisjoint(walk.matched)
                ):
                    raise ValueError("matched paths that are not the expected entries, or repeated")
                result.matched.extend(matched)
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


_HEX = re.compile(r"[0-9a-f]*")


def _reap(pid: int) -> int:
    while True:
        try:
            return os.waitpid(pid, 0)[1]
        except InterruptedError:
            continue
        except ChildProcessError:
            return -1
