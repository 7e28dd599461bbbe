"""Run the agent CLI once and turn its output into the provider-neutral result (docs/review-agent.md).

:func:`review_agent` reads the inputs (:func:`~._change.read_inputs`), renders the prompt
(:func:`~._prompt.render_prompt`), runs CMD with it (:func:`run_command`), parses its output
(:func:`~._parse.parse_output`) and decides the result (:func:`~._decide.decide_result`). A
failure anywhere raises; nothing partial is ever returned.

    >>> result = review_agent(["claude", "-p", "{prompt}"], environ=os.environ, timeout=900)
    >>> result_json(result)
"""

from __future__ import annotations

import errno
import math
import os
import select
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import IO

from ...errors import CommonCode, EnvironmentFailure, InputError, VerificationError
from ..evidence._wrap import MAX_OUTPUT_BYTES
from ..handoff._result import ReviewResult
from ._change import AgentInputs, head_line_count, read_inputs
from ._codes import AgentCode
from ._decide import decide_result
from ._parse import AgentOutput, parse_output
from ._prompt import render_prompt

DEFAULT_TIMEOUT = 900.0
MAX_TIMEOUT = 7 * 24 * 3600.0
PROMPT, PROMPT_FILE = "{prompt}", "{prompt_file}"
_CHUNK = 64 * 1024


def check_options(argv: Sequence[str], timeout: float) -> None:
    """Refuse, as bad usage, no command or a timeout that is not a positive number of seconds (pure).

    Raises:
        InputError: ``USAGE``.
    """
    if not argv or not argv[0]:
        raise InputError(CommonCode.USAGE, "no agent command: give it after --, e.g. `attest review agent -- claude -p {prompt}`")
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not math.isfinite(timeout) or \
            not 0 < timeout <= MAX_TIMEOUT:
        raise InputError(CommonCode.USAGE, f"--timeout must be a number of seconds in (0, {MAX_TIMEOUT:.0f}]")


def substitute(argv: Sequence[str], prompt: str, prompt_file: str) -> tuple[tuple[str, ...], bool]:
    """CMD's words, each ``{prompt}`` replaced by the prompt and each ``{prompt_file}`` by its file; whether stdin is the prompt (pure).

    Only whole words are replaced. With neither word, the prompt is CMD's standard input.
    """
    words = tuple(prompt if w == PROMPT else prompt_file if w == PROMPT_FILE else w for w in argv)
    return words, PROMPT not in argv and PROMPT_FILE not in argv


@contextmanager
def _prompt_source(argv: Sequence[str], prompt: str, tmpdir: str) -> Iterator[tuple[tuple[str, ...], int | IO[bytes]]]:
    """CMD's words and its standard input; the prompt file (in ``tmpdir``) exists for as long as this lasts."""
    data = prompt.encode("utf-8")
    path = ""
    stdin: int | IO[bytes] = subprocess.DEVNULL
    try:
        if PROMPT_FILE in argv:
            fd, path = tempfile.mkstemp(prefix="attest-agent-prompt-", suffix=".md", dir=tmpdir)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
        words, on_stdin = substitute(argv, prompt, path)
        if on_stdin:
            stdin = tempfile.TemporaryFile(dir=tmpdir)  # a file, not a pipe: CMD reads it at its pace, then EOF
            stdin.write(data)
            stdin.seek(0)
    except OSError as e:
        if path:
            os.unlink(path)
        raise InputError(AgentCode.AGENT_INPUT_MISSING, f"cannot write the prompt in $TMPDIR: {e.strerror}", tmpdir) from e
    try:
        yield words, stdin
    finally:
        if not isinstance(stdin, int):
            stdin.close()
        if path:
            os.unlink(path)


def _start(words: tuple[str, ...], stdin: int | IO[bytes], environ: Mapping[str, str]) -> subprocess.Popen[bytes]:
    try:
        return subprocess.Popen(words, stdin=stdin, stdout=subprocess.PIPE, stderr=None, env=dict(environ), process_group=0,
                                close_fds=True)
    except OSError as e:
        hint = " (a {prompt} word that long cannot be an argument: use {prompt_file} or standard input)" \
            if e.errno == errno.E2BIG else ""
        raise EnvironmentFailure(AgentCode.AGENT_FAILED, f"cannot run the agent command: {e.strerror}{hint}", words[0][:200]) from e


def _timed_out(timeout: float) -> EnvironmentFailure:
    return EnvironmentFailure(AgentCode.AGENT_TIMEOUT, f"the agent command ran longer than {timeout:g} seconds: its process "
                              "group was killed")


def _collect(proc: subprocess.Popen[bytes], deadline: float, timeout: float, max_output: int) -> bytes:
    """CMD's standard output up to EOF, at most ``max_output`` bytes, before ``deadline``."""
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)
    chunks: list[bytes] = []
    total = 0
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise _timed_out(timeout)
        if not poller.poll(max(1, math.ceil(remaining * 1000))):
            continue
        chunk = os.read(fd, _CHUNK)
        if not chunk:
            return b"".join(chunks)
        total += len(chunk)
        if total > max_output:
            raise VerificationError(AgentCode.AGENT_OUTPUT_TOO_LARGE, f"the agent command printed more than {max_output} bytes "
                                    "on standard output: reading stopped and its process group was killed")
        chunks.append(chunk)


def _wait_exited(proc: subprocess.Popen[bytes], deadline: float, timeout: float) -> None:
    """Wait until CMD has exited, leaving it unreaped (so its process group id stays its own until killed)."""
    pause = 0.001
    while os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise _timed_out(timeout)
        time.sleep(min(pause, remaining))
        pause = min(pause * 2, 0.05)


def _end_group(proc: subprocess.Popen[bytes]) -> int:
    """Kill whatever is left of CMD's process group, reap CMD, return its status."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    rc = proc.wait()
    if proc.stdout is not None:
        proc.stdout.close()
    return rc


def _status(rc: int) -> str:
    if rc < 0:
        try:
            return f"was killed by {signal.Signals(-rc).name}"
        except ValueError:
            return f"was killed by signal {-rc}"
    return f"exited {rc}"


def run_command(argv: Sequence[str], *, prompt: str, environ: Mapping[str, str], timeout: float = DEFAULT_TIMEOUT,
                max_output: int = MAX_OUTPUT_BYTES) -> bytes:
    """Run CMD once with ``prompt`` (see :func:`substitute`) and return its standard output.

    CMD runs with ``environ``, in a process group of its own; its standard error is the
    caller's. When it ends, or on any failure, whatever is left of its group is killed.

    Raises:
        EnvironmentFailure: ``AGENT_FAILED`` (it cannot start, exits non-zero or is killed by a
            signal); ``AGENT_TIMEOUT`` (still running, or its output still open, after ``timeout``).
        VerificationError: ``AGENT_OUTPUT_TOO_LARGE`` (more than ``max_output`` bytes).
        InputError: ``AGENT_INPUT_MISSING`` (the prompt cannot be written in ``$TMPDIR``).
    """
    check_options(argv, timeout)
    tmpdir = environ.get("TMPDIR") or tempfile.gettempdir()
    deadline = time.monotonic() + timeout
    with _prompt_source(argv, prompt, tmpdir) as (words, stdin):
        proc = _start(words, stdin, environ)
        try:
            out = _collect(proc, deadline, timeout, max_output)
            _wait_exited(proc, deadline, timeout)
        finally:
            rc = _end_group(proc)
    if rc != 0:
        raise EnvironmentFailure(AgentCode.AGENT_FAILED, f"the agent command {_status(rc)}; its output is not read", words[0][:200])
    return out


def result_of(output: AgentOutput, inputs: AgentInputs) -> ReviewResult:
    """The result of the agent's ``output`` for ``inputs``: the head files' lines counted for the paths its findings name.

    Raises:
        InputError: ``AGENT_INPUT_MISSING`` when the change image cannot be read.
    """
    changed = {p.path: p for p in inputs.surface.paths}
    named = {f.path for f in output.findings if f.line is not None and f.path in changed and changed[f.path].status != "deleted"}
    right_lines = {path: head_line_count(inputs.change_dir, path) for path in sorted(named)}
    return decide_result(output, inputs.surface, right_lines)


def review_agent(argv: Sequence[str], *, environ: Mapping[str, str], timeout: float = DEFAULT_TIMEOUT) -> ReviewResult:
    """Run the agent CLI ``argv`` on the review the confinement gives (``environ``) and return the checked result.

    Raises:
        InputError: ``USAGE``, ``AGENT_INPUT_MISSING``, ``AGENT_INPUT_MALFORMED``.
        EnvironmentFailure: ``AGENT_FAILED``, ``AGENT_TIMEOUT``.
        VerificationError: ``AGENT_OUTPUT_TOO_LARGE``, ``AGENT_OUTPUT_INVALID``.
    """
    check_options(argv, timeout)
    inputs = read_inputs(environ)
    raw = run_command(argv, prompt=render_prompt(inputs), environ=environ, timeout=timeout)
    return result_of(parse_output(raw), inputs)


__all__ = ["DEFAULT_TIMEOUT", "PROMPT", "PROMPT_FILE", "check_options", "result_of", "review_agent", "run_command", "substitute"]
