"""What a command or reviewer leaves in its run directory never breaks removal, exec or gc (THREATS G).

A reviewer made a 30,000-level directory tree in its home (``STATE/runs/<run>/home``). Removal
held one descriptor per level, so it hit EMFILE: the run ended ``INTERNAL``, the tree stayed
under ``STATE/runs/`` and every later ``attest store gc`` failed on it. Removal now holds a
bounded number of descriptors (a directory deeper than that is moved up between two held
descriptors, never resolved by path), and gc collects everything it can, reporting what it
cannot with ``REMOVAL_FAILED``.

Each test runs the host side in a child process with a low descriptor limit (256, or 64).
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
from support.caps import BACKEND, needs_immutable

from attest._safefs import FS_IMMUTABLE_FL, O_DIR, clear_immutable, get_flags, remove_tree, set_flags
from attest.freeze import freeze_tree
from attest.freeze._state import open_state, open_sub
from attest.inventory import inventory_tree

DEPTH = 30_000
NOFILE = 256
# Runs argv[2:] (attest's CLI, or -c CODE) with at most argv[1] descriptors.
_LIMITED = textwrap.dedent(
    """
    import os, resource, sys
    n = int(sys.argv[1])
    resource.setrlimit(resource.RLIMIT_NOFILE, (n, n))
    os.execv(sys.executable, [sys.executable, *sys.argv[2:]])
    """
)


def limited(*args: str, nofile: int = NOFILE) -> subprocess.CompletedProcess[str]:
    """Run ``python ARGS...`` with at most ``nofile`` descriptors (attest's CLI: ``limited("-m", "attest", ...)``)."""
    return subprocess.run([sys.executable, "-c", _LIMITED, str(nofile), *args], capture_output=True, text=True, timeout=900)


def make_deep(parent: Path, name: str, depth: int = DEPTH, *, outside: Path | None = None) -> None:
    """``parent/name/d/d/.../d`` ``depth`` levels deep, made through descriptors (the path is far over PATH_MAX).

    Every 997 levels: a FIFO, a plain file, a symlink to ``outside`` (never to be followed) and
    a 0000-mode directory holding a file.
    """
    os.mkdir(parent / name, 0o700)
    fd = os.open(parent / name, O_DIR)
    try:
        for level in range(depth):
            if level % 997 == 5:
                os.mkfifo("fifo", dir_fd=fd)
                os.close(os.open("file", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600, dir_fd=fd))
                if outside is not None:
                    os.symlink(outside, "link", dir_fd=fd)
                os.mkdir("locked", 0o700, dir_fd=fd)
                os.close(os.open("locked/f", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600, dir_fd=fd))
                os.chmod("locked", 0o000, dir_fd=fd)
            os.mkdir("d", 0o700, dir_fd=fd)
            nfd = os.open("d", O_DIR, dir_fd=fd)
            os.close(fd)
            fd = nfd
    finally:
        os.close(fd)


@pytest.fixture
def state(tmp_path: Path) -> Iterator[Path]:
    """A real state directory (store, staging, uses, runs); whatever a failing test leaves is removed after it."""
    path = tmp_path / "state"
    fd = open_state(path)
    for sub in ("store", "staging", "uses", "runs"):
        os.close(open_sub(fd, sub, str(path / sub)))
    os.close(fd)
    yield path
    pfd = os.open(tmp_path, O_DIR)
    try:
        remove_tree(pfd, "state")  # with this process's descriptors: pytest's rmtree recurses
    finally:
        os.close(pfd)


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A file and a directory outside the state directory, which a planted link points at."""
    d = tmp_path / "outside"
    d.mkdir()
    (d / "precious").write_bytes(b"keep me\n")
    return d


@pytest.fixture
def scratch(tmp_path: Path) -> Iterator[Path]:
    """An empty directory; whatever a failing test leaves in it is removed after it."""
    path = tmp_path / "scratch"
    path.mkdir()
    yield path
    pfd = os.open(tmp_path, O_DIR)
    try:
        remove_tree(pfd, "scratch")
    finally:
        os.close(pfd)


def test_a_tree_far_deeper_than_the_descriptor_limit_is_removed(scratch: Path, outside: Path) -> None:
    make_deep(scratch, "deep", 3_000, outside=outside)
    code = "import os, sys; from attest._safefs import O_DIR, remove_tree\nremove_tree(os.open(sys.argv[1], O_DIR), 'deep')"
    done = limited("-c", code, str(scratch), nofile=64)
    assert done.returncode == 0, done.stderr[-2000:]
    assert os.listdir(scratch) == []
    assert (outside / "precious").read_bytes() == b"keep me\n"  # no link was followed


def test_gc_removes_a_30000_level_tree_a_reviewer_left_in_its_home(state: Path, outside: Path) -> None:
    run = state / "runs" / "run-0123456789abcdef0123456789abcdef"
    run.mkdir(mode=0o700)
    make_deep(run, "home", outside=outside)
    other = state / "runs" / "run-fedcba9876543210fedcba9876543210"
    other.mkdir(mode=0o700)
    os.mkfifo(other / "fifo")
    (other / "locked").mkdir()
    (other / "locked" / "f").write_bytes(b"x")
    os.chmod(other / "locked", 0o000)
    make_deep(state / "staging", "tmp-0123456789abcdef0123456789abcdef", 600)
    done = limited("-m", "attest", "store", "gc", "--state-dir", str(state), "--json")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert json.loads(done.stdout)["ok"] is True
    assert os.listdir(state / "runs") == [] and os.listdir(state / "staging") == []
    assert (outside / "precious").read_bytes() == b"keep me\n"


def test_exec_whose_command_leaves_a_30000_level_tree_in_home_ends_cleanly(tmp_path: Path, state: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "f").write_bytes(b"x\n")
    image = freeze_tree(src, inventory_tree(src), state, backend=BACKEND)
    # The command digs from $HOME through descriptors (two at a time), then exits 0.
    dig = ("import os\nfd = os.open(os.environ['HOME'], os.O_RDONLY | os.O_DIRECTORY)\n"
           f"for _ in range({DEPTH}):\n"
           "    os.mkdir('d', dir_fd=fd); n = os.open('d', os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd); os.close(fd); fd = n\n"
           "os.mkfifo('fifo', dir_fd=fd)\n")
    done = limited("-m", "attest", "exec", "--state-dir", str(state), "--image", f"t={image.identity}", "--",
                   "/usr/bin/python3", "-I", "-c", dig)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "INTERNAL" not in done.stderr
    assert os.listdir(state / "runs") == []  # the run directory is gone
    gc = limited("-m", "attest", "store", "gc", "--state-dir", str(state), "--json")
    assert gc.returncode == 0, gc.stdout[-2000:] + gc.stderr[-2000:]


@needs_immutable
def test_gc_reports_what_cannot_be_removed_and_removes_everything_else(tmp_path: Path, state: Path) -> None:
    """An immutable file with a second name outside: its flag is never cleared (that would unseal the other name too)."""
    sealed = tmp_path / "sealed"
    sealed.write_bytes(b"sealed elsewhere\n")
    run = state / "runs" / "run-0123456789abcdef0123456789abcdef"
    (run / "home" / "sub").mkdir(parents=True, mode=0o700)
    os.link(sealed, run / "home" / "sub" / "second-name")
    make_deep(run / "home", "deep", 600)
    other = state / "runs" / "run-fedcba9876543210fedcba9876543210"
    make_deep(state / "runs", other.name, 600)
    fd = os.open(sealed, os.O_RDONLY)
    try:
        set_flags(fd, get_flags(fd) | FS_IMMUTABLE_FL)
        done = limited("-m", "attest", "store", "gc", "--state-dir", str(state), "--json")
        assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
        doc = json.loads(done.stdout)
        assert doc["ok"] is False
        assert [(e["code"], e["path"]) for e in doc["errors"]] == [("REMOVAL_FAILED", str(run))], doc["errors"]
        assert "second-name" in doc["errors"][0]["detail"]
        # Everything else is gone: the other run, and all of this one but the path to the sealed name.
        assert os.listdir(state / "runs") == [run.name]
        assert [(d, sorted(f)) for d, _, f in os.walk(run)] == [(str(run), []), (str(run / "home"), []),
                                                                 (str(run / "home" / "sub"), ["second-name"])]
        assert get_flags(fd) & FS_IMMUTABLE_FL  # the outside name stays sealed
    finally:
        clear_immutable(fd)
        os.close(fd)
    again = limited("-m", "attest", "store", "gc", "--state-dir", str(state), "--json")
    assert again.returncode == 0, again.stdout[-2000:] + again.stderr[-2000:]
    assert os.listdir(state / "runs") == []
    assert sealed.read_bytes() == b"sealed elsewhere\n"


def test_in_this_process_what_cannot_be_removed_is_removal_failed() -> None:
    """procfs refuses every unlink and rmdir, to root too: remove_tree of /proc/self/fdinfo removes nothing, and says so."""
    from attest._safefs import O_DIR
    from attest.errors import EnvironmentFailure
    from attest.freeze._codes import FreezeCode
    from attest.freeze._state import remove_tree

    fd = os.open(f"/proc/{os.getpid()}", O_DIR)  # /proc/self is a link
    try:
        with pytest.raises(EnvironmentFailure) as ei:
            remove_tree(fd, "fdinfo")
    finally:
        os.close(fd)
    assert ei.value.code == FreezeCode.REMOVAL_FAILED and os.path.isdir("/proc/self/fdinfo")
