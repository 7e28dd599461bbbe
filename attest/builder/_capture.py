"""Bounded capture of a build step's output: a tail in memory, the rest in a capped host-only file.

A build step decides how much it prints; the host must not let that decide its own memory
(docs/build.md "The build", step 4, **limits**). :func:`run_captured` starts the command with
stdout and stderr on pipes and copies every byte it reads into two files it has just created
(``O_EXCL``, mode 0600) in a directory the caller names, which must be one no step can write
(the build's staging directory, never bound into a step). Only the last ``tail_bytes`` of each
stream stay in memory. Past ``max_bytes`` (both streams together) or the deadline the command's
process group is killed (``SIGKILL``) before its pipes are closed, so the step is stopped, not
merely cut off.

    >>> sfd = os.open(staging, O_DIR)
    >>> out = run_captured(["/bin/echo", "hi"], log_dir_fd=sfd, log_name=".step-1", max_bytes=1 << 20,
    ...                    tail_bytes=1 << 16, timeout=60, cwd=staging, env={}, umask=0o022)
    >>> out.stdout, out.stdout_size, out.killed
    (b'hi\\n', 3, None)
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .._fdio import write_all
from .._safefs import O_NEW
from .._session import child_setup, popen_error

_CHUNK = 1 << 16


@dataclass(frozen=True, slots=True)
class Captured:
    """What one command printed and how it ended.

    ``stdout`` / ``stderr``: each stream whole when it is at most ``tail_bytes`` long, else its
    last ``tail_bytes``; ``*_size``: how many bytes the stream had (at most ``max_bytes`` in
    all); ``*_log``: the names (in the log directory) of the files holding them whole.
    ``killed``: None when the command ended by itself, else ``"output"`` (over ``max_bytes``)
    or ``"timeout"``; ``returncode`` is then the killed process's.
    """

    returncode: int
    stdout: bytes
    stderr: bytes
    stdout_size: int
    stderr_size: int
    stdout_log: str
    stderr_log: str
    killed: str | None


class _Stream:
    """One pipe's bytes: all of them written to its log file, only the last ``keep`` held."""

    def __init__(self, log_fd: int, keep: int) -> None:
        self.log_fd = log_fd
        self.keep = keep
        self.chunks: deque[bytes] = deque()
        self.held = 0
        self.size = 0

    def add(self, chunk: bytes) -> None:
        write_all(self.log_fd, chunk)
        self.size += len(chunk)
        self.chunks.append(chunk)
        self.held += len(chunk)
        while self.held - len(self.chunks[0]) >= self.keep:
            self.held -= len(self.chunks.popleft())

    def tail(self) -> bytes:
        data = b"".join(self.chunks)
        return data[-self.keep:] if len(data) > self.keep else data


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    # Called only while the process is unreaped, so its pid (the group's id: start_new_session)
    # cannot have been reused. A confined step's whole PID namespace dies with it (--kill-child).
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()


def run_captured(argv: Sequence[str], *, log_dir_fd: int, log_name: str, max_bytes: int, tail_bytes: int, timeout: float,
                 cwd: str, env: Mapping[str, str], umask: int, deny_keyrings: bool = False) -> Captured:
    """Run ``argv`` in a new session, stdin ``/dev/null``, its output bounded as the module says.

    It starts in a new, empty session keyring, never the builder's; ``deny_keyrings`` (a confined
    step) also refuses it and all it starts the keyring system calls (:func:`attest._session.child_setup`).

    Raises:
        OSError: the log files cannot be created (one exists already: never reused) or written,
            or the command cannot be started (nor given its own keyring: it never runs then).
    """
    setup = child_setup(deny_keyrings=deny_keyrings)
    names = (f"{log_name}.stdout", f"{log_name}.stderr")
    out_log = os.open(names[0], O_NEW, 0o600, dir_fd=log_dir_fd)
    try:
        err_log = os.open(names[1], O_NEW, 0o600, dir_fd=log_dir_fd)
    except BaseException:
        os.close(out_log)
        raise
    try:
        try:
            proc = subprocess.Popen(list(argv), cwd=cwd, env=dict(env), umask=umask, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, close_fds=True, start_new_session=True,  # no controlling terminal
                                    preexec_fn=setup)
        except subprocess.SubprocessError as e:
            raise popen_error(e) from e
        assert proc.stdout is not None and proc.stderr is not None
        out, err = _Stream(out_log, tail_bytes), _Stream(err_log, tail_bytes)
        streams = {proc.stdout.fileno(): out, proc.stderr.fileno(): err}
        killed: str | None = None
        deadline = time.monotonic() + timeout
        total = 0
        try:
            with selectors.DefaultSelector() as sel:
                for fd in streams:
                    sel.register(fd, selectors.EVENT_READ)
                while killed is None and sel.get_map():
                    left = deadline - time.monotonic()
                    if left <= 0:
                        killed = "timeout"
                        break
                    for key, _ in sel.select(left):
                        chunk = os.read(key.fd, _CHUNK)
                        if not chunk:
                            sel.unregister(key.fd)
                            continue
                        room = max_bytes - total
                        if len(chunk) > room:
                            streams[key.fd].add(chunk[:room])
                            total = max_bytes
                            killed = "output"
                            break
                        streams[key.fd].add(chunk)
                        total += len(chunk)
            if killed is None:
                try:
                    proc.wait(max(0.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    killed = "timeout"
        finally:
            # Killed before its pipes close (over the cap, past the deadline, or an exception
            # here): the step is stopped, not left running with a broken pipe.
            if proc.returncode is None and (killed is not None or proc.poll() is None):
                _kill_group(proc)
            proc.stdout.close()
            proc.stderr.close()
            returncode = proc.wait()
    finally:
        os.close(out_log)
        os.close(err_log)
    return Captured(returncode, out.tail(), err.tail(), out.size, err.size, names[0], names[1], killed)
