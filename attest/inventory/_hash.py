"""The one file-hashing helper of the inventory: SHA-256 from an opened descriptor, bounded.

Every regular file the walker records is hashed here (rule 4 of :mod:`._walk`): the caller
opened it, took its ``fstat``, and after :func:`hash_fd` compares the byte count with
``st_size`` and a second ``fstat`` with the first (:func:`changed`). A file that keeps growing
while it is read cannot keep the reader busy: reading stops once more than ``size`` bytes came.

    >>> digest, got = hash_fd(fd, st.st_size)
    >>> ok = got == st.st_size and not changed(st, os.fstat(fd))
"""

from __future__ import annotations

import hashlib
import os

#: Files up to this size are read with one ``read`` of ``size + 1`` bytes (larger single reads
#: would allocate by mmap); larger ones with ``readv`` into a reused buffer of :data:`CHUNK`.
SMALL = 64 * 1024
CHUNK = 1024 * 1024


def hash_fd(fd: int, size: int, buf: bytearray | None = None) -> tuple[str, int]:
    """SHA-256 (hex) of what ``fd`` holds, read until end of file or past ``size`` bytes.

    Returns ``(hex, bytes read)``; a count other than ``size`` means the file is not the size
    its ``fstat`` said (it grew or shrank while it was read). A small file is usually one
    ``read`` of ``size + 1`` bytes: fewer bytes than asked means end of file for a regular
    file. ``buf`` (at least :data:`CHUNK` bytes, reused per thread) serves larger files.

    Raises:
        OSError: from the reads (no attest error: the caller turns it into a finding).
    """
    if size <= SMALL:
        data = os.read(fd, size + 1)
        got = len(data)
        if got == size:
            return hashlib.sha256(data).hexdigest(), got
        h = hashlib.sha256(data)
        while data and got <= size:
            data = os.read(fd, size + 1 - got)
            h.update(data)
            got += len(data)
        return h.hexdigest(), got
    if buf is None:
        buf = bytearray(CHUNK)
    h = hashlib.sha256()
    view = memoryview(buf)
    readv = os.readv
    bufs = [buf]
    total = 0
    while total <= size:
        n = readv(fd, bufs)
        if n == 0:
            break
        h.update(view[:n])
        total += n
    return h.hexdigest(), total


def changed(before: os.stat_result, after: os.stat_result) -> bool:
    """Whether the ``fstat`` taken after hashing shows another inode, size or modification."""
    return (
        after.st_ino != before.st_ino
        or after.st_dev != before.st_dev
        or after.st_size != before.st_size
        or after.st_mtime_ns != before.st_mtime_ns
        or after.st_ctime_ns != before.st_ctime_ns
    )
