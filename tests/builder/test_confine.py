"""The confinement's new root, laid out by one process (attest/builder/_confine.py): its pure parts, table by table, and
real confinements where the layout must refuse (a descriptor's directory that is no longer at its path)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.caps import IS_ROOT

from attest.builder import _confine
from attest.builder._confine import remount_flags, submounts, unescape
from attest.builder._sandbox import _LAYOUT, confine_argv, rootless_problem

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT = 0x1, 0x2, 0x4, 0x8, 0x20  # mount(2)'s flags, from <sys/mount.h>
MS_NOATIME, MS_NODIRATIME, MS_BIND, MS_RELATIME = 0x400, 0x800, 0x1000, 1 << 21
BASE = MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NODEV


@pytest.mark.parametrize(("options", "readonly", "noexec", "flags"), [
    ("rw,relatime", True, False, BASE | MS_RDONLY | MS_RELATIME),
    ("rw,relatime", False, False, BASE | MS_RELATIME),
    ("ro,nosuid,nodev,noexec,relatime", True, False, BASE | MS_RDONLY | MS_NOEXEC | MS_RELATIME),  # kept: a user namespace may not clear it
    ("rw,noatime", True, True, BASE | MS_RDONLY | MS_NOEXEC | MS_NOATIME),
    ("rw,nodiratime,relatime", False, False, BASE | MS_NODIRATIME | MS_RELATIME),
    ("rw", True, False, BASE | MS_RDONLY),  # strictatime lists no atime flag, and none is passed
    ("rw,nosuid,nodev", False, True, BASE | MS_NOEXEC),  # nosuid and nodev are always set, never only kept
    ("rw,relatimeX,noexecute", True, False, BASE | MS_RDONLY),  # whole names only
])
def test_remount_flags_keep_what_a_user_namespace_may_not_clear(options: str, readonly: bool, noexec: bool, flags: int) -> None:
    assert remount_flags(options, readonly=readonly, noexec=noexec) == flags


@pytest.mark.parametrize(("field", "path"), [
    ("/plain/path", "/plain/path"),
    ("/with\\040space", "/with space"),
    ("/tab\\011and\\012newline", "/tab\tand\nnewline"),
    ("/back\\134slash", "/back\\slash"),
    ("/not\\8escape", "/not\\8escape"),  # 8 is no octal digit: left as it is
    ("/short\\04", "/short\\04"),  # three digits or nothing
    ("/\\303\\251t\\303\\251", "/été"),  # bytes, decoded as the file system's names are
])
def test_mountinfo_paths_are_unescaped(field: str, path: str) -> None:
    assert unescape(field) == path


MOUNTINFO = "\n".join([
    "20 1 8:1 / / rw,relatime shared:1 - ext4 /dev/vda rw",
    "30 20 0:40 / /r rw,nosuid,nodev - tmpfs attest-root rw",
    "31 30 8:1 /usr /r/usr rw,relatime - ext4 /dev/vda rw",
    "32 31 0:41 / /r/usr/local rw,noexec - tmpfs t rw",
    "33 20 0:42 / /r/usr2 rw - tmpfs t rw",  # a sibling whose path starts alike: not below /r/usr
    "34 30 8:1 /usr /r/usr ro,relatime - ext4 /dev/vda rw",  # stacked on /r/usr: the top one there
    "35 34 0:43 / /r/usr/share rw,noatime - tmpfs t rw",
    "36 32 0:44 / /r/usr/local/a\\040b rw - tmpfs t rw",
    "",
])


@pytest.mark.parametrize(("target", "found"), [
    ("/r/usr", [("/r/usr", "ro,relatime"), ("/r/usr/share", "rw,noatime")]),  # the top mount and only its own submounts
    ("/r", [("/r", "rw,nosuid,nodev"), ("/r/usr", "rw,relatime"), ("/r/usr/local", "rw,noexec"),
            ("/r/usr/local/a b", "rw"), ("/r/usr", "ro,relatime"), ("/r/usr/share", "rw,noatime")]),
    ("/r/usr/local/a b", [("/r/usr/local/a b", "rw")]),
    ("/nowhere", []),
])
def test_submounts_are_what_findmnt_R_lists(target: str, found: list[tuple[str, str]]) -> None:
    assert sorted(submounts(MOUNTINFO, target)) == sorted(found)
    assert submounts(MOUNTINFO, target)[:1] == found[:1]  # the mount at the target first


def test_submounts_listed_before_their_parent_are_found() -> None:
    lines = MOUNTINFO.splitlines()
    reordered = "\n".join([lines[0], lines[6], lines[5], lines[1]])  # 35 (child of 34) listed before 34
    assert submounts(reordered, "/r") == [("/r", "rw,nosuid,nodev"), ("/r/usr", "ro,relatime"), ("/r/usr/share", "rw,noatime")]


@pytest.mark.parametrize("argv", [[], ["/root-only"], ["/r", "x", "--"], ["/r", "--", "w"]])
def test_the_layout_without_its_two_separators_refuses_with_97(argv: list[str]) -> None:
    done = subprocess.run([sys.executable, "-I", "-S", "-B", _LAYOUT, *argv], capture_output=True, text=True, check=False)
    assert (done.returncode, done.stderr) == (97, "attest-sandbox: no command\n")


def test_the_layout_runs_isolated_on_the_standard_library_alone() -> None:
    # It is run as `python -I -S`: nothing of site-packages or of attest may be imported by it.
    source = Path(_confine.__file__).read_text()
    imports = {line.split()[1] for line in source.splitlines() if line.startswith(("import ", "from "))}
    assert imports <= {"__future__", "ctypes", "os", "stat", "sys", "collections.abc"}, imports


@pytest.mark.parametrize("item", ["fd:x:/work", "fd::/work", "fdnx:1x:/work", "file:-1:/etc/x", "fd:\u0661:/work"])
def test_a_bad_descriptor_number_is_refused(item: str) -> None:
    with pytest.raises(_confine.Failed, match="bad descriptor"):
        _confine._descriptor(item)


@pytest.mark.root
@pytest.mark.skipif(not IS_ROOT, reason="needs root: mounts over the descriptor's path in this test's own mount namespace")
@pytest.mark.parametrize("swapped", [False, True])
def test_a_descriptor_bind_is_of_the_descriptors_own_directory_or_nothing_runs(tmp_path: Path, swapped: bool) -> None:
    """A directory verified through a descriptor, then covered at its path by another holding a look-alike: the
    kernel binds no mount of the caller's namespace, so the layout binds the descriptor's path, and must then find
    the descriptor's own inode there, or refuse before the command runs."""
    image = tmp_path / "store" / "image"
    image.mkdir(parents=True)
    (image / "content").write_text("verified\n")
    fd = os.open(image, os.O_RDONLY | os.O_DIRECTORY)
    run = tmp_path / "run"
    run.mkdir()
    (run / ".sandbox-root").mkdir(mode=0o700)
    argv = confine_argv(["/bin/cat", "/image/content"], root_parent=str(run), cwd="/", readonly=[], writable=[], uid=os.getuid(),
                        fd_binds=[(fd, "/image")])
    # The confinement runs in a mount namespace of its own, copied from a child's that this test covers the path in.
    script = "import ctypes, os, sys\n" \
             "libc = ctypes.CDLL(None, use_errno=True)\n" \
             "assert libc.unshare(0x00020000) == 0 and libc.mount(b'none', b'/', None, 0x4000 | (1 << 18), None) == 0\n" \
             f"if {swapped}:\n" \
             f"    assert libc.mount(b'look-alike', {os.fsencode(image.parent)!r}, b'tmpfs', 0, None) == 0\n" \
             f"    os.mkdir({str(image)!r}); open({str(image / 'content')!r}, 'w').write('planted\\n')\n" \
             "os.execv(sys.argv[1], sys.argv[1:])\n"
    try:
        done = subprocess.run([sys.executable, "-I", "-c", script, *argv], capture_output=True, text=True, check=False,
                              pass_fds=(fd,), env={"PATH": "/usr/bin:/bin"})
    finally:
        os.close(fd)
    if swapped:
        assert done.returncode == 97 and "is no longer the directory of descriptor" in done.stderr, done
        assert "planted" not in done.stdout
    else:
        assert (done.returncode, done.stdout) == (0, "verified\n"), done


def test_one_process_lays_out_the_root(tmp_path: Path) -> None:
    """What made a step's root was about a hundred `mount`, `findmnt`, `mkdir` and `ln` processes (the step's pid in
    its new PID namespace was past 100); now one interpreter makes it, and the step's pid is a handful."""
    rootless = not IS_ROOT
    if rootless and (why := rootless_problem()) is not None:
        pytest.skip(f"no rootless confinement here: {why}")
    (tmp_path / ".sandbox-root").mkdir(mode=0o700)
    argv = confine_argv(["/bin/sh", "-c", "echo $$"], root_parent=str(tmp_path), cwd="/", readonly=[sys.prefix, sys.base_prefix],
                        writable=[], uid=os.getuid() if rootless else 0x7F000001, rootless=rootless)
    done = subprocess.run(argv, capture_output=True, text=True, check=False, env={"PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done
    assert int(done.stdout) < 10, done.stdout
