"""Piped output arrives line by line, in order with stderr; a terminal gets a spinner, a pipe none."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

_PRINT_THEN_FAIL = """
import sys
from attest.cli import main
print("before the command")
rc = main(["inventory", sys.argv[1]])
print("after the command")
sys.exit(rc)
"""


def _buffered_env() -> dict[str, str]:
    """The environment of a CI job: no PYTHONUNBUFFERED, which would hide the buffering."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}


def test_stdout_and_stderr_interleave_in_order_when_piped(tmp_path: Path) -> None:
    """A CI log (stdout and stderr on one pipe) reads in the order things happened."""
    missing = tmp_path / "no-such-tree"
    done = subprocess.run([sys.executable, "-c", _PRINT_THEN_FAIL, str(missing)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, timeout=120, env=_buffered_env())
    lines = done.stdout.splitlines()
    assert done.returncode == 2, done.stdout
    first_error = next(i for i, line in enumerate(lines) if line.startswith("attest:"))
    # Block-buffered, "before the command" would reach the pipe only at exit, after the error.
    assert lines.index("before the command") < first_error < lines.index("after the command"), lines


def test_the_console_script_line_buffers_a_piped_stdout(tmp_path: Path) -> None:
    script = """
import sys
from attest.cli._app import line_buffered
line_buffered()
print(sys.stdout.line_buffering)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, env=_buffered_env())
    assert done.stdout.strip() == "True"


_SPIN = """
import time
from attest.cli._app import working
with working("building the runtime", False):
    time.sleep(1.5)
print("done")
"""


def _on_a_terminal(code: str) -> bytes:
    """Run ``code`` with stdout and stderr on a pseudo-terminal; everything it wrote there."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=follower, stdout=follower, stderr=follower,
                            env={**os.environ, "TERM": "xterm", "COLUMNS": "100"})
    os.close(follower)
    out = b""
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # EIO: the terminal's last writer is gone
            break
        if not chunk:
            break
        out += chunk
    os.close(leader)
    assert proc.wait(timeout=60) == 0, out
    return out


def test_a_long_step_shows_a_spinner_on_a_terminal_and_plain_lines_in_a_log() -> None:
    shown = _on_a_terminal(_SPIN)
    assert b"building the runtime" in shown and b"done" in shown
    piped = subprocess.run([sys.executable, "-c", _SPIN], capture_output=True, timeout=60)
    assert piped.returncode == 0 and piped.stdout == b"done\n"
    lines = piped.stderr.decode().splitlines()  # plain lines, no control sequences in a log
    assert lines[0] == "attest: building the runtime: started" and lines[-1].startswith("attest: building the runtime: done after ")
    assert "\x1b" not in piped.stderr.decode()
    assert subprocess.run([sys.executable, "-c", _SPIN.replace("False", "True")], capture_output=True, timeout=60).stderr == b""
