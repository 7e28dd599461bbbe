"""The console script's standard streams: closed, full or broken ones fail the command, never silently.

Imported before typer (the cached ``--help`` uses it too), so it imports nothing heavy.

- A standard descriptor the caller closed (``>&-``) is reserved with ``/dev/null`` (not
  inherited), so no file attest opens later becomes "standard output" by number; the Python
  stream stays closed: a write to it raises :class:`StdoutError` (``EBADF``).
- :func:`write_stdout` writes all of its bytes or raises: Python's buffered writer reports a
  short write to a pipe whose reader left as success, and ``--json`` output could be cut off
  with exit 0.
- :func:`stdout_failure` reports a standard output that cannot be written and discards
  what is still buffered, so the interpreter's own flush at exit cannot fail again.
"""

from __future__ import annotations

import errno
import io
import os
import sys

from .._fdio import write_all

TYPE_CHECKING = False  # not typing's: the cached `attest --help` imports neither typing nor typer
if TYPE_CHECKING:
    from _typeshed import ReadableBuffer  # what RawIOBase.write takes: bytes, bytearray, memoryview, ...


class StdoutError(OSError):
    """Standard output could not be written (closed, full, an I/O error, a reader that left)."""


class _Closed(io.TextIOBase):
    """A standard stream whose descriptor the caller closed: every read and write fails."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self._name = name

    def _fail(self) -> StdoutError:
        return StdoutError(errno.EBADF, f"standard {self._name} is closed")

    def write(self, s: str) -> int:
        raise self._fail()

    def read(self, size: int | None = -1) -> str:
        raise self._fail()

    def readline(self, size: int | None = -1) -> str:  # type: ignore[override]
        raise self._fail()

    def fileno(self) -> int:
        raise self._fail()

    @property
    def buffer(self) -> _Closed:
        return self

    def isatty(self) -> bool:
        return False

    def flush(self) -> None:  # nothing is ever pending
        return None


class _StdoutRaw(io.RawIOBase):
    """Descriptor 1 for Python's buffered stdout: a failed write is a :class:`StdoutError`.

    So the one handler can tell standard output failing (a full disk, a closed pipe) from
    anything else, wherever the write happened (print, click's help, a flush at exit).
    """

    def __init__(self, fd: int) -> None:
        super().__init__()
        self._fd = fd

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._fd

    def isatty(self) -> bool:
        return os.isatty(self._fd)

    def write(self, b: ReadableBuffer) -> int:
        try:
            return os.write(self._fd, b)
        except OSError as e:
            raise StdoutError(e.errno, e.strerror) from e

    def close(self) -> None:  # the descriptor stays open: it is the process's standard output
        super().close()


def _is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def standard_streams() -> None:
    """Reserve closed standard descriptors with /dev/null and give Python's streams a defined failure."""
    for fd in (0, 1, 2):
        if not _is_open(fd):
            new = os.open(os.devnull, os.O_RDWR)  # the lowest free descriptor: this one
            if new != fd:
                os.dup2(new, fd, inheritable=False)
                os.close(new)
    if sys.stdin is None:
        sys.stdin = _Closed("input")
    if sys.stdout is None:
        sys.stdout = _Closed("output")
    elif isinstance(sys.stdout, io.TextIOWrapper) and sys.stdout is sys.__stdout__:
        old = sys.stdout
        try:
            old.flush()
            fd = old.fileno()
        except (OSError, ValueError):
            return
        # Line-buffered on a terminal as on a pipe (line_buffered()'s reason): each line leaves when it ends.
        sys.stdout = io.TextIOWrapper(io.BufferedWriter(_StdoutRaw(fd)), encoding=old.encoding, errors="surrogateescape",
                                      line_buffering=True)
    if sys.stderr is None:  # nowhere to report to: the exit status still says what happened
        sys.stderr = open(os.devnull, "w", encoding="utf-8", errors="backslashreplace")


def write_stdout(data: bytes) -> None:
    """Write all of ``data`` to standard output, after whatever print() left buffered.

    Raises:
        StdoutError: the stream is closed, full or broken (``errno`` says which).
    """
    stream = sys.stdout
    try:
        if stream is None:
            raise StdoutError(errno.EBADF, "standard output is closed")
        stream.flush()
        try:
            fd = stream.fileno()
        except io.UnsupportedOperation:  # an in-memory stream (a caller's capture): no descriptor
            stream.write(data.decode("utf-8", "surrogateescape"))
            stream.flush()
            return
        write_all(fd, data)
    except StdoutError:
        raise
    except OSError as e:
        raise StdoutError(e.errno, e.strerror) from e


def stdout_unwritable() -> bool:
    """Whether standard output is what failed: closed, or its pending bytes cannot be flushed."""
    stream = sys.stdout
    if stream is None or isinstance(stream, _Closed):
        return True
    try:
        stream.flush()
    except OSError:
        return True
    return False


def stdout_failure(e: OSError) -> int:
    """Report an unwritable standard output on stderr; the exit status (1 for a reader that left, else 2).

    What is still buffered is dropped (the descriptor now points at /dev/null), so the
    interpreter's flush at exit neither fails nor prints a second report.
    """
    stream = sys.stdout
    try:
        fd = stream.fileno() if stream is not None else -1
    except (OSError, ValueError):
        fd = -1
    if fd >= 0:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, fd)
        os.close(devnull)
    if e.errno == errno.EPIPE:  # the reader left (`| head`): as click and the shell's tools do, say nothing
        return 1
    try:
        sys.stderr.write(f"attest: error: cannot write to standard output: {e.strerror or e}\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    return 2


__all__ = ["StdoutError", "standard_streams", "stdout_failure", "stdout_unwritable", "write_stdout"]
