"""A build step's 30,000-level tree never breaks the removal of its staging, nor ``store gc`` (THREATS G).

Build staging was removed holding one descriptor per level: a step that dug 30,000 levels deep
in its own directory made the removal fail with EMFILE, which left the staging behind for gc,
which failed on it the same way, every time. Each test runs the host side in a child process
with a low descriptor limit.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from attest._safefs import O_DIR, remove_tree
from attest.freeze._state import open_state, open_sub
from attest.freeze._store import HELD_STAGING

DEPTH = 30_000
# Digs DEPTH levels below the current directory through descriptors (two at a time), leaving a
# FIFO, a file and a 0000-mode directory at the bottom.
DIG = textwrap.dedent(
    f"""
    import os
    fd = os.open(".", os.O_RDONLY | os.O_DIRECTORY)
    for _ in range({DEPTH}):
        os.mkdir("d", 0o700, dir_fd=fd)
        n = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = n
    os.mkfifo("fifo", dir_fd=fd)
    os.close(os.open("file", os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=fd))
    os.mkdir("locked", 0o000, dir_fd=fd)
    """
)
# The host side of one build step, with at most 256 descriptors: the step digs, the host removes its staging.
_HOST = textwrap.dedent(
    """
    import os, resource, sys
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))
    from attest.builder import Sandbox
    from attest.builder._outputs import remove_tree
    from attest.builder._sandbox import pick_step_uid
    staging, dig = sys.argv[1], sys.argv[2]
    sandbox = Sandbox.establish(allow_unisolated_network=False)
    work = os.path.join(staging, "work")
    os.mkdir(work, 0o700)
    sandbox.run(["/usr/bin/python3", "-I", "-c", dig], cwd=work, home=work, staging=staging, writable=[work], uid=pick_step_uid())
    print("DUG", os.path.isdir(os.path.join(work, "d", "d", "d")))
    remove_tree(staging)
    print("REMOVED", not os.path.lexists(staging))
    """
)
_LIMITED = textwrap.dedent(
    """
    import os, resource, sys
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))
    os.execv(sys.executable, [sys.executable, *sys.argv[1:]])
    """
)


@pytest.fixture
def scratch(tmp_path: Path) -> Iterator[Path]:
    """An empty private directory; whatever a failing test leaves in it is removed after it."""
    path = tmp_path / "scratch"
    path.mkdir(mode=0o700)
    yield path
    pfd = os.open(tmp_path, O_DIR)
    try:
        remove_tree(pfd, "scratch")  # pytest's rmtree recurses once per level
    finally:
        os.close(pfd)


def test_staging_a_confined_step_dug_30000_levels_deep_in_is_removed(scratch: Path) -> None:
    staging = scratch / "stage-0123456789abcdef"
    staging.mkdir(mode=0o700)
    done = subprocess.run([sys.executable, "-c", _HOST, str(staging), DIG], capture_output=True, text=True, timeout=900)
    assert done.returncode == 0 and done.stdout.split() == ["DUG", "True", "REMOVED", "True"], done.stdout + done.stderr[-2000:]
    assert os.listdir(scratch) == []


def test_gc_removes_abandoned_build_staging_holding_a_30000_level_tree(scratch: Path) -> None:
    state = scratch / "state"
    fd = open_state(state)
    try:
        os.close(open_sub(fd, HELD_STAGING, str(state / HELD_STAGING)))
    finally:
        os.close(fd)
    stage = state / HELD_STAGING / "stage-0123456789abcdef"
    (stage / "out").mkdir(parents=True, mode=0o700)
    subprocess.run([sys.executable, "-I", "-c", DIG], cwd=stage / "out", check=True, timeout=900)  # a killed build's step left it
    done = subprocess.run([sys.executable, "-c", _LIMITED, "-m", "attest", "store", "gc", "--state-dir", str(state), "--json"],
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert json.loads(done.stdout)["ok"] is True
    assert os.listdir(state / HELD_STAGING) == []
