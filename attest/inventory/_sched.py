"""The walk's scheduler: work items, the queues the worker threads share, the bookkeeping.

Speed (``python -m bench``): one thread walks (lists, checks names, stats, opens, hashes
small files) and ``workers - 1`` threads hash the files of 256 KiB or more that it hands
them (hashlib and ``readv`` release the GIL); the walking thread hashes handed-over files
too once it has nothing else to do, so several large files are hashed on two cores. (Two
threads walking small files contend for the GIL on every short system call and were
slower than one.) Work items are a directory to list, a slice of up to 64 entries of a
listed directory, or one handed-over file; a directory descriptor is closed when its last
slice is done.

With a second walking process (:mod:`._fork`) the walking thread also serves the link to
it from :meth:`Scheduler.take`, and the entry counts of both processes are published in a
shared mapping (``shm``). What a work item *does* is the walker's (:class:`._walk._Walk`
overrides :meth:`Scheduler.do`); this module only decides who does what, when, and when the
walk is over.

    >>> walk.push([(LIST, DirRef(root_fd), "", 0)])
    >>> walk.run()          # in each worker thread, until nothing is queued or running
"""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Sequence
from typing import Protocol

from ._hash import CHUNK
from ._types import BIG, WALK_THREADS, BigItem, DirRef, Item, WalkItem


class Peer(Protocol):
    """The walking thread's end of the link to the other process (:class:`._fork.Link`), as the scheduler uses it."""

    asked: bool
    peer_waiting: bool

    def close(self, s: Scheduler) -> None: ...

    def send(self, s: Scheduler, msg: bytes, fds: Sequence[int] = ()) -> bool: ...

    def give(self, s: Scheduler) -> None: ...

    def poll(self, s: Scheduler, block: bool) -> None: ...


class Scheduler:
    """Work items shared by worker threads through a LIFO queue (and one of handed-over files)."""

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self.cond = threading.Condition(threading.Lock())
        self.queue: list[WalkItem] = []  # LIST and SLICE_ITEM
        self.big: list[BigItem] = []  # BIG
        self.outstanding = 0  # queued + running work items
        self.handoffs = 0  # BIG items holding an open descriptor
        self.halted = False
        self.error: BaseException | None = None
        self.counter = itertools.count(1)
        self.stats: list[list[int]] = []  # per thread: [files, bytes]
        self.counted = 0  # entries counted by finished slices
        # Two processes (None in a walk of one process). Only the walking thread uses the
        # link, always under the condition's lock; the link counts as outstanding work.
        self.link: Peer | None = None
        self.shm: memoryview | None = None  # shared int64s: [count, files, bytes] of parent, then child
        self.me = 0  # 0 in the parent, 1 in the child

    # -- bookkeeping (under the condition's lock) -------------------------------------------

    def push(self, items: Sequence[Item]) -> None:
        with self.cond:
            wake = 0
            for item in items:
                if item[0] == BIG:
                    self.big.append(item)
                    self.handoffs += 1
                    wake += 1
                else:
                    self.queue.append(item)
                    # Only walkers take walk items, and a lone walker is the one pushing them:
                    # waking an idle hasher for nothing costs a GIL hand-off each time.
                    wake += WALK_THREADS > 1
            self.outstanding += len(items)
            if wake:
                self.cond.notify(wake)

    def take(self, walker: bool) -> Item | None:
        """The next item: a walker takes walk items first, then large files; a hasher only large files.

        With a link to the other process, the walker also answers its requests (giving away
        the oldest walk item, the one nearest the root) and, when it has no walk item left,
        asks for one, hashing large files while the answer is pending.
        """
        with self.cond:
            while True:
                if self.halted:
                    return None
                link = self.link if walker else None
                if link is not None:
                    if self.me == 1:
                        self.shm[4], self.shm[5] = self.done_own()  # type: ignore[index]
                    link.poll(self, block=False)
                    if self.link is link and link.peer_waiting:
                        if len(self.queue) >= 2:
                            link.give(self)
                        elif not self.queue:
                            # Both sides idle: the walk is over for both.
                            link.send(self, b"N")
                            link.close(self)
                if walker and self.queue:
                    return self.queue.pop()
                link = self.link if walker else None
                if link is not None:
                    if not link.asked:
                        link.asked = True
                        link.send(self, b"R")
                    if self.big:
                        return self.big.pop()
                    if self.link is link:
                        link.poll(self, block=True)
                    continue
                if self.big:
                    return self.big.pop()
                if self.outstanding == 0:
                    return None
                self.cond.wait()

    def finish(self, item: Item) -> None:
        with self.cond:
            if item[0] == BIG:
                self.handoffs -= 1
            else:
                self.release(item[1])
            self.outstanding -= 1
            if self.outstanding == 0:
                self.cond.notify_all()

    def release(self, d: DirRef) -> None:
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
            for big in self.big:
                os.close(big[1])
            self.big.clear()
            for item in self.queue:
                self.release(item[1])
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

    # -- the workers ----------------------------------------------------------------------

    def do(self, item: Item, buf: bytearray, stats: list[int]) -> None:
        """Carry out one work item, then :meth:`finish` it (the walker's part)."""
        raise NotImplementedError

    def run(self, walker: bool = True) -> None:
        """A worker: take items until the queues are empty and nothing is running."""
        stats = [0, 0]
        self.stats.append(stats)
        buf = bytearray(CHUNK)
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
                    if self.link is not None:
                        self.link.close(self)

    def prewalk(self, limit: int) -> bool:
        """Walk in the calling thread, no other thread started, until more than ``limit``
        entries were counted; whether walk items remain (large files may wait in any case)."""
        stats = [0, 0]
        self.stats.append(stats)
        buf = bytearray(CHUNK)
        while self.queue and not self.halted and self.counted <= limit:
            self.do(self.queue.pop(), buf, stats)
        return bool(self.queue) and not self.halted
