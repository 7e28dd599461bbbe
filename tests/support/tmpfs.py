"""The suite's temporary files on a private tmpfs, where this process may make one.

The suite writes hundreds of thousands of small files (every build copies an interpreter prefix,
every freeze materializes and seals a tree) and removes them again. On an ext4 disk shared by two
workers that metadata work, not attest's, dominates: a 10,000-file tree took 26 times longer to
write and remove there than on a tmpfs, measured side by side on a 2-core machine. As root, the
controller process moves into its own mount namespace (made private, so nothing propagates back to
the host) and mounts a tmpfs (mode 1777 as /tmp's: tests run steps as other uids) on a fresh,
short-named directory; ``TMPDIR`` names it, so both xdist workers (which inherit the namespace)
and every ``tempfile`` and ``tmp_path`` of the run live there. The mount disappears with the run's
last process, immutable images included. A tmpfs is a real filesystem with the immutable flag,
``statx`` attributes and hard links, but not every one: the kernel mounts no EROFS image from a
file on it ("Block device required"), so a test of an image backend that mounts a file must keep
its state on disk.

An ordinary user cannot mount (the run stays on disk, as it does with ``ATTEST_TEST_TMPFS=0``);
the run's header says which it got and why.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import tempfile
from pathlib import Path

__all__ = ["release_private_tmpfs", "unseal", "use_private_tmpfs"]

_CLONE_NEWNS = 0x00020000
_MS_REC = 0x4000
_MS_PRIVATE = 1 << 18
_MNT_DETACH = 2
_MOUNTED: list[str] = []


def _fail(what: str) -> str:
    return f"{what}: {os.strerror(ctypes.get_errno())}"


def use_private_tmpfs() -> str:
    """Put this run's temporary files on a private tmpfs if possible; return a line saying where they are."""
    if os.environ.get("ATTEST_TEST_TMPFS", "1") == "0":
        return "temporary files on disk (ATTEST_TEST_TMPFS=0)"
    if os.geteuid() != 0:
        return "temporary files on disk (an ordinary user cannot mount a tmpfs)"
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(_CLONE_NEWNS) != 0:
        return "temporary files on disk (" + _fail("unshare(CLONE_NEWNS)") + ")"
    # From here on this process is in its own mount namespace; private, so no mount leaks out.
    if libc.mount(b"none", b"/", None, _MS_REC | _MS_PRIVATE, None) != 0:
        return "temporary files on disk (" + _fail("making / private") + ")"
    path = tempfile.mkdtemp(prefix="at-")  # short: an AF_UNIX socket path under a test's tmp_path must stay < 108 bytes
    if libc.mount(b"attest-tests", path.encode(), b"tmpfs", 0, b"mode=1777,size=75%") != 0:
        os.rmdir(path)
        return "temporary files on disk (" + _fail(f"mounting a tmpfs on {path}") + ")"
    _MOUNTED.append(path)
    os.environ["TMPDIR"] = path
    tempfile.tempdir = None  # gettempdir() reads TMPDIR again
    return f"temporary files on a private tmpfs at {path} (ATTEST_TEST_TMPFS=0: on disk)"


def release_private_tmpfs() -> bool:
    """Unmount the run's tmpfs (its files go with it) and remove the empty directory it was mounted on.

    Returns whether there was one: without it, the run's files are on disk.
    """
    libc = ctypes.CDLL(None, use_errno=True)
    released = bool(_MOUNTED)
    while _MOUNTED:
        path = _MOUNTED.pop()
        if libc.umount2(path.encode(), _MNT_DETACH) != 0:
            raise OSError(ctypes.get_errno(), f"unmounting the suite's tmpfs at {path}")
        os.rmdir(path)
    return released


def unseal(base: Path) -> None:
    """Make ``base`` removable by the next run's pytest: clear the immutable flags under it (only root can have set
    them), and give back the write bit of every directory of this user's (the readonly backend takes it away)."""
    if not base.exists():
        return
    if os.geteuid() == 0:
        subprocess.run(["chattr", "-R", "-f", "-i", str(base)], check=False, capture_output=True)
    for dirpath, _, _ in os.walk(base):  # never follows a link to a directory
        try:
            st = os.lstat(dirpath)
            if st.st_uid == os.geteuid() and st.st_mode & 0o700 != 0o700:
                os.chmod(dirpath, st.st_mode | 0o700)
        except OSError:
            continue  # another uid's (a build step's) or gone: not this run's to give back
