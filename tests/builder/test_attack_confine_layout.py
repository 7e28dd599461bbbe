"""Attacks on the confinement's root as attest/builder/_confine.py lays it out (mount(2) through ctypes).

Each test builds a real confinement with ``confine_argv`` and runs it; the root-only ones first set up, in a private mount
namespace of their own (a child that unshares and then execs the confinement), the host-side mounts an attack needs.
A test of an attack the layout refuses asserts the refusal (exit 97 with ``attest-sandbox:``) or that the step sees
only what the docs promise. The two attacks that succeeded (a descriptor bound, and a synthesized file written, at a
target with `..`, outside the new root) are refused now, by ``confine_argv`` and by the layout itself.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest
from support.caps import IS_ROOT

from attest.builder._confine import unescape
from attest.builder._sandbox import _LAYOUT, confine_argv, rootless_problem

STEP_UID = 0x7F000123
ENV = {"PATH": "/usr/bin:/bin"}
needs_root = pytest.mark.skipif(not IS_ROOT, reason="needs root: mounts in a private mount namespace, a step uid of its own")

# Run by `python -I -c` as root: a private mount namespace, SETUP (python code using `mount` and `os`), then exec argv.
PRIVATE_NS = """\
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.mount.argtypes = (ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p)
def mount(src, tgt, fstype, flags, data):
    if libc.mount(src, tgt, fstype, flags, data) != 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()), tgt)
assert libc.unshare(0x00020000) == 0
mount(b'none', b'/', None, 0x4000 | (1 << 18), None)
"""
MS_BIND, MS_REC, MS_RDONLY, MS_REMOUNT = 0x1000, 0x4000, 0x1, 0x20


def _root_parent(tmp_path: Path, name: str = "run") -> Path:
    run = tmp_path / name
    run.mkdir()
    (run / ".sandbox-root").mkdir(mode=0o700)
    return run


def _in_private_ns(setup: str, argv: Sequence[str | bytes], *, pass_fds: Sequence[int] = (),
                   cwd: str | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
    script = PRIVATE_NS + setup + "\nos.execv(sys.argv[1], sys.argv[1:])\n"
    return subprocess.run([sys.executable, "-I", "-c", script, *argv], capture_output=True, check=False, pass_fds=pass_fds,
                          cwd=cwd, env=env or ENV, timeout=60)


def _mounts(mountinfo: bytes) -> list[tuple[str, set[str]]]:
    """(mount point, per-mount options) of each line of a step's /proc/self/mountinfo."""
    out = []
    for line in mountinfo.decode("utf-8", "surrogateescape").splitlines():
        fields = line.split(" ")
        if len(fields) >= 6 and fields[0].isdigit():
            out.append((unescape(fields[4]), set(fields[5].split(","))))
    return out


def _refused(done: subprocess.CompletedProcess[bytes]) -> bool:
    return done.returncode == 97 and b"attest-sandbox:" in done.stderr and b"RAN" not in done.stdout


# Names the kernel escapes in mountinfo, or that an unescaper could take for an escape, or that are no UTF-8.
ODD = [b"a b", b"nl\nx", b"tab\tx", b"back\\slash", b"lit\\040x", b"lit\\134y", b"\xff\xfe", "\u00e9t\u00e9".encode(),
       b"trail ", b"x (deleted)", b"-o rw"]

PROBE = rb"""
for d in "$@"; do ( : > "$d/probe" ) 2>/dev/null && printf 'WROTE %s\n' "$d"; done
echo RAN; cat /proc/self/mountinfo
"""


@pytest.mark.root
@needs_root
def test_every_submount_of_a_read_only_bind_is_read_only_whatever_its_name(tmp_path: Path) -> None:
    """Host rw mounts below a read-only path, named with spaces, newlines, tabs, backslashes, literal escapes and
    bytes that are no UTF-8, nested and stacked: in the step every one is ro, nosuid, nodev, and none can be written."""
    src = tmp_path / "src"
    src.mkdir()
    src_b = os.fsencode(src)
    setup = ""
    points = []
    for name in ODD:
        p = src_b + b"/" + name
        os.mkdir(p)
        setup += f"mount(b'odd', {p!r}, b'tmpfs', 0, b'mode=1777')\n"
        setup += f"os.mkdir({p + b'/inner'!r}); mount(b'odd', {p + b'/inner'!r}, b'tmpfs', 0, b'mode=1777')\n"
        points += [p, p + b"/inner"]
    # Stacked: a second rw tmpfs on top of the first at the same point, with a child of its own.
    stack = src_b + b"/stack"
    os.mkdir(stack)
    setup += f"mount(b'low', {stack!r}, b'tmpfs', 0, b'mode=1777')\n"
    setup += f"mount(b'high', {stack!r}, b'tmpfs', 0, b'mode=1777')\n"
    setup += f"os.mkdir({stack + b'/child'!r}); mount(b'odd', {stack + b'/child'!r}, b'tmpfs', 0, b'mode=1777')\n"
    points += [stack, stack + b"/child"]
    # A rw bind of a host directory outside the source (the step must not write through it either).
    outside = tmp_path / "outside"
    outside.mkdir(mode=0o777)
    os.chmod(outside, 0o777)
    os.mkdir(src_b + b"/bound")
    setup += f"mount({os.fsencode(outside)!r}, {src_b + b'/bound'!r}, None, {MS_BIND}, None)\n"
    points.append(src_b + b"/bound")
    run = _root_parent(tmp_path)
    argv = confine_argv(["/bin/sh", "-c", PROBE.decode("ascii"), "sh", *[os.fsdecode(p) for p in points]], root_parent=str(run),
                        cwd="/", readonly=[str(src)], writable=[], uid=STEP_UID)
    done = _in_private_ns(setup, argv)
    assert done.returncode == 0 and b"RAN" in done.stdout, done
    assert b"WROTE" not in done.stdout, done.stdout
    assert not list(outside.iterdir())
    under = [(p, o) for p, o in _mounts(done.stdout) if p == str(src) or p.startswith(f"{src}/")]
    assert len(under) >= len(points), under
    # A mount covered by another at the same point (the lower of the stack) is unreachable: only the top one must be ro.
    visible = {point: options for point, options in under}
    for point, options in visible.items():
        assert {"ro", "nosuid", "nodev"} <= options, (point, options)


@pytest.mark.root
@needs_root
def test_a_submount_of_a_descriptor_bind_is_read_only_and_noexec(tmp_path: Path) -> None:
    """fd: and fdnx: binds are recursive: a rw, exec submount below the image's directory is ro, nosuid, nodev in the step,
    and noexec under fdnx."""
    images = {}
    setup = ""
    for kind in ("fd", "fdnx"):
        image = tmp_path / kind
        (image / "sub").mkdir(parents=True)
        setup += f"mount(b'img', {os.fsencode(image / 'sub')!r}, b'tmpfs', 0, b'mode=1777')\n"
        images[kind] = image
    fds = {k: os.open(v, os.O_RDONLY | os.O_DIRECTORY) for k, v in images.items()}
    try:
        run = _root_parent(tmp_path)
        argv = confine_argv(["/bin/sh", "-c", PROBE.decode("ascii"), "sh", "/img/fd/sub", "/img/fdnx/sub"], root_parent=str(run),
                            cwd="/", readonly=[], writable=[], uid=STEP_UID, fd_binds=[(fds["fd"], "/img/fd")],
                            fd_binds_noexec=[(fds["fdnx"], "/img/fdnx")])
        done = _in_private_ns(setup, argv, pass_fds=tuple(fds.values()))
    finally:
        for fd in fds.values():
            os.close(fd)
    assert done.returncode == 0 and b"WROTE" not in done.stdout, done
    found = dict(_mounts(done.stdout))
    for point in ("/img/fd", "/img/fd/sub", "/img/fdnx", "/img/fdnx/sub"):
        assert {"ro", "nosuid", "nodev"} <= found[point], (point, found)
    assert "noexec" in found["/img/fdnx/sub"] and "noexec" in found["/img/fdnx"]


def _fd_bind_run(tmp_path: Path, fd: int, *, cwd: str | None = None, target: str = "/image",
                 argv: Sequence[str] = ("/bin/sh", "-c", "echo RAN; cat /image/content")) -> subprocess.CompletedProcess[bytes]:
    run = _root_parent(tmp_path)
    rootless = not IS_ROOT
    command = confine_argv(list(argv), root_parent=str(run), cwd="/", readonly=[], writable=[], uid=STEP_UID,
                           fd_binds=[(fd, target)], rootless=rootless)
    return subprocess.run(command, capture_output=True, check=False, pass_fds=(fd,), cwd=cwd, env=ENV, timeout=60)


def _skip_without_confinement() -> None:
    if not IS_ROOT and (why := rootless_problem()) is not None:
        pytest.skip(f"no rootless confinement here: {why}")


def test_a_descriptor_of_a_regular_file_is_never_bound(tmp_path: Path) -> None:
    """fd:N whose descriptor is a regular file: no bind of that file (nor of a directory of the same path)."""
    _skip_without_confinement()
    f = tmp_path / "content"
    f.write_text("secret\n")
    fd = os.open(f, os.O_RDONLY)
    try:
        done = _fd_bind_run(tmp_path, fd)
    finally:
        os.close(fd)
    assert _refused(done), done


def test_a_descriptor_of_a_symlink_is_not_bound_as_what_it_leads_to(tmp_path: Path) -> None:
    """An O_PATH descriptor of a symlink: /proc/self/fd/N names the link, mount(2) follows it; the inode check refuses."""
    _skip_without_confinement()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "content").write_text("planted\n")
    link = tmp_path / "link"
    link.symlink_to(elsewhere)
    fd = os.open(link, os.O_PATH | os.O_NOFOLLOW)
    try:
        done = _fd_bind_run(tmp_path, fd)
    finally:
        os.close(fd)
    assert _refused(done), done
    assert b"planted" not in done.stdout


def test_a_pipe_descriptor_with_a_look_alike_directory_named_like_it_in_cwd_is_refused(tmp_path: Path) -> None:
    """readlink(/proc/self/fd/N) of a pipe is `pipe:[INO]`, a relative path: bound relative to the caller's working directory,
    where a directory of that name holds a look-alike. The descriptor's inode is the pipe's: refused."""
    _skip_without_confinement()
    r, w = os.pipe()
    try:
        ino = os.fstat(r).st_ino
        cwd = tmp_path / "cwd"
        look = cwd / f"pipe:[{ino}]"
        look.mkdir(parents=True)
        (look / "content").write_text("planted\n")
        done = _fd_bind_run(tmp_path, r, cwd=str(cwd))
    finally:
        os.close(r)
        os.close(w)
    assert _refused(done) and b"is no directory with a path" in done.stderr, done  # refused before any bind
    assert b"planted" not in done.stdout


def test_a_descriptor_of_a_removed_directory_is_refused(tmp_path: Path) -> None:
    """A verified directory removed (and another created at its path) before the confinement: `PATH (deleted)` is no
    directory to bind, and the new one at PATH is not the descriptor's."""
    _skip_without_confinement()
    image = tmp_path / "image"
    image.mkdir()
    fd = os.open(image, os.O_RDONLY | os.O_DIRECTORY)
    try:
        image.rmdir()
        image.mkdir()
        (image / "content").write_text("planted\n")
        odd = tmp_path / "image (deleted)"  # what readlink says of the removed directory
        odd.mkdir()
        (odd / "content").write_text("planted\n")
        done = _fd_bind_run(tmp_path, fd)
    finally:
        os.close(fd)
    assert _refused(done), done
    assert b"planted" not in done.stdout


def test_a_renamed_directory_is_still_the_descriptors_own(tmp_path: Path) -> None:
    """The verified directory moved (same inode, another path): bound from where it is now, and the step reads it."""
    _skip_without_confinement()
    image = tmp_path / "image"
    image.mkdir()
    (image / "content").write_text("verified\n")
    fd = os.open(image, os.O_RDONLY | os.O_DIRECTORY)
    try:
        image.rename(tmp_path / "moved")
        image.mkdir()
        (image / "content").write_text("planted\n")
        done = _fd_bind_run(tmp_path, fd)
    finally:
        os.close(fd)
    assert done.returncode == 0 and done.stdout == b"RAN\nverified\n", done


@pytest.mark.parametrize("crash", ["1 / 0", "raise SystemExit(0)", "import os; os.kill(os.getpid(), 9)"])
def test_a_layout_that_crashes_is_a_refusal_and_nothing_runs(tmp_path: Path, crash: str) -> None:
    """A layout that dies with a traceback, is killed, or exits 0 having laid out nothing: the shell must exit 97 before
    the step (for the last: the chroot into a root that is no mount fails, and nothing runs either)."""
    _skip_without_confinement()
    run = _root_parent(tmp_path)
    layout = tmp_path / "crashing_layout.py"
    layout.write_text(crash + "\n")
    layout.chmod(0o644)
    argv = confine_argv(["/bin/echo", "RAN"], root_parent=str(run), cwd="/", readonly=[], writable=[], uid=STEP_UID,
                        rootless=not IS_ROOT)
    argv[argv.index(_LAYOUT)] = str(layout)
    done = subprocess.run(argv, capture_output=True, check=False, env=ENV, timeout=60)
    assert b"RAN" not in done.stdout, done
    assert done.returncode != 0, done
    if crash != "raise SystemExit(0)":
        assert _refused(done) and b"laying out the new root failed with exit" in done.stderr, done


def test_no_descriptor_of_a_bind_or_a_synthesized_file_reaches_the_step(tmp_path: Path) -> None:
    """Descriptors above 9 (bash closes them) for an fd bind, an fdnx bind and two synthesized /etc files: the step holds
    only its standard streams."""
    _skip_without_confinement()
    image = tmp_path / "image"
    image.mkdir()
    opened = []
    try:
        for _ in range(2):
            fd = os.open(image, os.O_RDONLY | os.O_DIRECTORY)
            opened.append(fcntl_dup_high(fd))
            os.close(fd)
        for name in ("a", "b"):
            mfd = os.memfd_create(name, 0)
            os.write(mfd, b"x\n")
            opened.append(fcntl_dup_high(mfd))
            os.close(mfd)
        run = _root_parent(tmp_path)
        argv = confine_argv(["/bin/ls", "/proc/self/fd"], root_parent=str(run), cwd="/", readonly=[], writable=[], uid=STEP_UID,
                            fd_binds=[(opened[0], "/img/a")], fd_binds_noexec=[(opened[1], "/img/b")],
                            etc=[(opened[2], "/etc/a"), (opened[3], "/etc/sub/b")], rootless=not IS_ROOT)
        done = subprocess.run(argv, capture_output=True, check=False, pass_fds=tuple(opened), env=ENV, timeout=60)
    finally:
        for fd in opened:
            os.close(fd)
    assert done.returncode == 0, done
    assert sorted(done.stdout.split()) == [b"0", b"1", b"2", b"3"], done.stdout  # 3: ls's own of /proc/self/fd


def fcntl_dup_high(fd: int) -> int:
    """A copy of ``fd`` numbered 20 or above (inheritable)."""
    import fcntl

    new = fcntl.fcntl(fd, fcntl.F_DUPFD, 20)
    os.set_inheritable(new, True)
    return new


def test_the_same_file_synthesized_twice_is_refused(tmp_path: Path) -> None:
    _skip_without_confinement()
    fds = []
    for data in (b"first\n", b"second\n"):
        fds.append(os.memfd_create("etc", 0))
        os.write(fds[-1], data)
    try:
        run = _root_parent(tmp_path)
        argv = confine_argv(["/bin/sh", "-c", "echo RAN; cat /etc/x"], root_parent=str(run), cwd="/", readonly=[], writable=[],
                            uid=STEP_UID, etc=[(fds[0], "/etc/x"), (fds[1], "/etc/x")], rootless=not IS_ROOT)
        done = subprocess.run(argv, capture_output=True, check=False, pass_fds=tuple(fds), env=ENV, timeout=60)
    finally:
        for fd in fds:
            os.close(fd)
    assert _refused(done) and b"synthesized twice" in done.stderr, done


@pytest.mark.parametrize("target", ["/etc/../escape", "/etc/./x", "/etc//x", "/tmp/x", "etc/x", "/etc/a:b", "/etc/a\nb", "/etc"])
def test_confine_argv_refuses_a_synthesized_file_outside_etc(tmp_path: Path, target: str) -> None:
    (tmp_path / ".sandbox-root").mkdir(mode=0o700)
    with pytest.raises(ValueError, match="normal path under /etc"):
        confine_argv(["/bin/true"], root_parent=str(tmp_path), cwd="/", readonly=[], writable=[], uid=STEP_UID, etc=[(5, target)])


@pytest.mark.root
@needs_root
def test_the_layout_itself_writes_no_synthesized_file_outside_the_new_root(tmp_path: Path) -> None:
    run = _root_parent(tmp_path)
    mfd = os.memfd_create("etc", 0)
    os.write(mfd, b"planted\n")
    try:
        done = subprocess.run(["unshare", "--mount", "--", sys.executable, "-I", "-S", "-B", _LAYOUT, str(run / ".sandbox-root"),
                               f"file:{mfd}:/etc/../../escaped", "--", "--"], capture_output=True, check=False, pass_fds=(mfd,),
                              env=ENV, timeout=60)
    finally:
        os.close(mfd)
    # The new root's tmpfs is gone with the namespace; anything left on the host was written outside it.
    assert not (run / "escaped").exists(), done
    assert done.returncode == 97 and b"attest-sandbox:" in done.stderr, done


@pytest.mark.parametrize("kind", ["symlink", "file", "symlink-to-file", "missing"])
def test_a_writable_path_that_is_no_directory_is_refused(tmp_path: Path, kind: str) -> None:
    _skip_without_confinement()
    target = tmp_path / "elsewhere"
    target.mkdir()
    w = tmp_path / "w"
    if kind == "symlink":
        w.symlink_to(target)
    elif kind == "file":
        w.write_text("")
    elif kind == "symlink-to-file":
        (tmp_path / "f").write_text("")
        w.symlink_to(tmp_path / "f")
    run = _root_parent(tmp_path)
    argv = confine_argv(["/bin/sh", "-c", "echo RAN; : > /w/probe"], root_parent=str(run), cwd="/", readonly=[], writable=[str(w)],
                        uid=STEP_UID, rootless=not IS_ROOT)
    done = subprocess.run(argv, capture_output=True, check=False, env=ENV, timeout=60)
    assert _refused(done) and b"is not a directory" in done.stderr, done
    assert not list(target.iterdir())


PLANT = "open(os.path.join(os.environ.get('MARK', '/nonexistent'), 'imported'), 'w').close()\n"


def test_the_layout_interpreter_ignores_the_environment_and_the_working_directory(tmp_path: Path) -> None:
    """PYTHONPATH, PYTHONHOME, PYTHONSTARTUP, PYTHONINSPECT, PYTHONWARNINGS and a working directory holding a planted
    ctypes.py, os.py and collections/: nothing of them runs in the interpreter that lays out the root."""
    _skip_without_confinement()
    plant = tmp_path / "plant"
    (plant / "collections").mkdir(parents=True)
    for name in ("ctypes.py", "os.py", "sitecustomize.py", "usercustomize.py", "collections/__init__.py", "_confine.py"):
        (plant / name).write_text(f"import os\n{PLANT}")
    (plant / "startup.py").write_text(f"import os\n{PLANT}")
    mark = tmp_path / "mark"
    mark.mkdir(mode=0o777)
    os.chmod(mark, 0o777)
    env = {**ENV, "MARK": str(mark), "PYTHONPATH": str(plant), "PYTHONSTARTUP": str(plant / "startup.py"), "PYTHONINSPECT": "1",
           "PYTHONWARNINGS": "error", "PYTHONSAFEPATH": "", "PYTHONUSERBASE": str(plant), "PYTHONPLATLIBDIR": "plant"}
    run = _root_parent(tmp_path)
    argv = confine_argv(["/bin/sh", "-c", "echo RAN"], root_parent=str(run), cwd="/", readonly=[], writable=[], uid=STEP_UID,
                        rootless=not IS_ROOT)
    done = subprocess.run(argv, capture_output=True, check=False, cwd=plant, env=env, stdin=subprocess.DEVNULL, timeout=60)
    assert done.returncode == 0 and done.stdout == b"RAN\n", done
    assert not (mark / "imported").exists()


@pytest.mark.root
@needs_root
def test_a_mount_appearing_below_a_bound_directory_after_the_unshare_is_not_in_the_step(tmp_path: Path) -> None:
    """A host mount made below a read-only path while the confinement lays out its root does not propagate into it (the
    layout makes every mount private first): the step sees the directory as it was, read-only."""
    src = tmp_path / "src"
    (src / "late").mkdir(parents=True)
    # A shared parent mount, so that a mount below it propagates to peers unless the layout made its copy private.
    setup = (f"mount({os.fsencode(src)!r}, {os.fsencode(src)!r}, None, {MS_BIND}, None)\n"
             f"mount(None, {os.fsencode(src)!r}, None, 1 << 20, None)\n"  # MS_SHARED
             "pid = os.fork()\n"
             "if pid == 0:\n"
             "    import time; time.sleep(0.4)\n"
             f"    mount(b'late', {os.fsencode(src / 'late')!r}, b'tmpfs', 0, b'mode=1777'); os._exit(0)\n")
    run = _root_parent(tmp_path)
    argv = confine_argv(["/bin/sh", "-c", f"sleep 1; {PROBE.decode('ascii')}", "sh", f"{src}/late"], root_parent=str(run), cwd="/",
                        readonly=[str(src)], writable=[], uid=STEP_UID)
    done = _in_private_ns(setup, argv)
    assert done.returncode == 0 and b"RAN" in done.stdout and b"WROTE" not in done.stdout, done
    assert f"{src}/late" not in [p for p, _ in _mounts(done.stdout)]


@pytest.mark.root
@needs_root
def test_a_read_only_bind_keeps_noexec_and_gains_nosuid_nodev_and_the_root_is_read_only(tmp_path: Path) -> None:
    """A host mount that is rw, suid, dev and exec, bound read-only: ro, nosuid, nodev in the step (exec kept, as
    documented); the new root, /dev, /proc, /tmp and /dev/shm as the docs list them; nothing outside the writable
    directories and the fresh tmpfs is writable."""
    src = tmp_path / "src"
    src.mkdir()
    setup = f"mount(b'suid', {os.fsencode(src)!r}, b'tmpfs', 0, b'mode=1777')\n"
    w = tmp_path / "w"
    w.mkdir()
    os.chown(w, STEP_UID, STEP_UID)
    run = _root_parent(tmp_path)
    script = "for d in / /src /usr /etc /dev /proc /var /w /tmp /var/tmp /run /dev/shm; do ( : > \"$d/probe\" ) 2>/dev/null " \
             "&& printf 'WROTE %s\\n' \"$d\"; done; echo RAN; cat /proc/self/mountinfo"
    argv = confine_argv(["/bin/sh", "-c", script.replace("/src", str(src)).replace("/w ", f"{w} ")], root_parent=str(run), cwd="/",
                        readonly=[str(src)], writable=[str(w)], uid=STEP_UID)
    done = _in_private_ns(setup, argv)
    assert done.returncode == 0 and b"RAN" in done.stdout, done
    wrote = sorted(line.split(b" ", 1)[1].decode() for line in done.stdout.splitlines() if line.startswith(b"WROTE "))
    assert wrote == sorted([str(w), "/tmp", "/var/tmp", "/run", "/dev/shm"]), done.stdout
    found = _mounts(done.stdout)
    for point, options in found:
        if point.startswith("/dev/") and point != "/dev/shm":
            assert point in {f"/dev/{n}" for n in ("null", "zero", "full", "random", "urandom")}, found  # the host's devices
            continue
        assert "nosuid" in options, (point, options)
        if not point.startswith("/dev/") or point == "/dev/shm":
            assert "nodev" in options or point == "/dev", (point, options)
        if point not in (str(w), "/tmp", "/var/tmp", "/run", "/dev/shm", "/dev") and not point.startswith("/dev/"):
            assert "ro" in options or point == "/proc", (point, options)


ROOTLESS_SCRIPT = r"""
import ctypes, os, subprocess, sys
sys.path[:0] = [sys.argv[1]]
from attest.builder._sandbox import confine_argv
base = sys.argv[2]
libc = ctypes.CDLL(None, use_errno=True)
libc.mount.argtypes = (ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p)
src = os.path.join(base, "src")
os.makedirs(os.path.join(src, "a b\\040"), exist_ok=True)
w = os.path.join(base, "w")
os.makedirs(w, exist_ok=True)
run = os.path.join(base, "run")
os.makedirs(os.path.join(run, ".sandbox-root"), mode=0o700, exist_ok=True)
# A mount of the caller's own user namespace below the read-only path: locked in the confinement's nested one.
uid, gid = os.getuid(), os.getgid()
assert libc.unshare(0x10000000 | 0x00020000) == 0, os.strerror(ctypes.get_errno())
open("/proc/self/uid_map", "w").write(f"{uid} {uid} 1")
open("/proc/self/setgroups", "w").write("deny")
open("/proc/self/gid_map", "w").write(f"{gid} {gid} 1")
assert libc.mount(b"none", b"/", None, 0x4000 | (1 << 18), None) == 0
assert libc.mount(b"t", os.path.join(src, "a b\\040").encode(), b"tmpfs", 0, b"mode=1777") == 0, os.strerror(ctypes.get_errno())
argv = confine_argv(["/bin/sh", "-c", "for d in \"$@\"; do ( : > \"$d/probe\" ) 2>/dev/null && echo \"WROTE $d\"; done; echo RAN",
                     "sh", src, os.path.join(src, "a b\\040"), w], root_parent=run, cwd="/", readonly=[src], writable=[w],
                    uid=0, rootless=True)
done = subprocess.run(argv, capture_output=True, env={"PATH": "/usr/bin:/bin"})
sys.stdout.buffer.write(done.stdout); sys.stderr.buffer.write(done.stderr); sys.exit(done.returncode)
"""


@pytest.mark.root
@needs_root
def test_rootless_as_nobody_a_submount_below_a_read_only_path_is_read_only(tmp_path: Path) -> None:
    """Run as uid nobody (rootless): a rw tmpfs of the caller's own user namespace below a read-only path, its name holding a
    space and a literal backslash escape, is read-only in the step; the writable directory is writable."""
    nobody = 65534
    base = Path("/var/tmp") / f"attest-attack-{os.getpid()}-{tmp_path.name}"
    base.mkdir(mode=0o700)
    os.chown(base, nobody, nobody)
    try:
        if shutil.which("setpriv") is None:
            pytest.skip("setpriv missing")
        done = subprocess.run(["setpriv", f"--reuid={nobody}", f"--regid={nobody}", "--clear-groups", "--", sys.executable, "-I", "-c",
                               ROOTLESS_SCRIPT, str(Path(__file__).resolve().parents[2]), str(base)], capture_output=True,
                              check=False, env=ENV, cwd="/", timeout=60)
        if done.returncode != 0 and b"RAN" not in done.stdout and b"attest-sandbox" not in done.stderr:
            pytest.skip(f"no rootless confinement for nobody here: {done.stderr[-300:]!r}")
        assert done.returncode == 0, done
        assert done.stdout.splitlines() == [f"WROTE {base}/w".encode(), b"RAN"], done.stdout
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.root
@needs_root
@pytest.mark.parametrize("name", [b"s\nrc", b"s rc\\040", b"s\\134rc", b"\xffsrc"])
def test_a_read_only_path_with_an_odd_name_keeps_its_submounts_read_only(tmp_path: Path, name: bytes) -> None:
    """The read-only path itself named with what mountinfo escapes (or bytes that are no UTF-8): found in mountinfo as the
    bind's top, and its rw submount remounted read-only."""
    src = os.fsencode(tmp_path) + b"/" + name
    os.makedirs(src + b"/m")
    setup = f"mount(b'odd', {src + b'/m'!r}, b'tmpfs', 0, b'mode=1777')\n"
    run = _root_parent(tmp_path)
    argv = confine_argv(["/bin/sh", "-c", PROBE.decode("ascii"), "sh", os.fsdecode(src), os.fsdecode(src + b"/m")],
                        root_parent=str(run), cwd="/", readonly=[os.fsdecode(src)], writable=[], uid=STEP_UID)
    done = _in_private_ns(setup, argv)
    assert done.returncode == 0 and b"RAN" in done.stdout and b"WROTE" not in done.stdout, done
    found = dict(_mounts(done.stdout))
    assert {"ro", "nosuid", "nodev"} <= found[os.fsdecode(src + b"/m")], found


def test_a_read_only_file_cannot_be_written_nor_replaced(tmp_path: Path) -> None:
    """A read-only path that is a file: bound read-only (the step may not write it, and the root around it is read-only)."""
    _skip_without_confinement()
    f = tmp_path / "input.txt"
    f.write_text("original\n")
    os.chmod(f, 0o666)
    os.chmod(tmp_path, 0o777)
    run = _root_parent(tmp_path)
    script = f"echo changed > {f} 2>/dev/null; rm -f {f} 2>/dev/null; cat {f}; echo RAN"
    argv = confine_argv(["/bin/sh", "-c", script], root_parent=str(run), cwd="/", readonly=[str(f)], writable=[], uid=STEP_UID,
                        rootless=not IS_ROOT)
    done = subprocess.run(argv, capture_output=True, check=False, env=ENV, timeout=60)
    assert done.returncode == 0 and done.stdout == b"original\nRAN\n", done
    assert f.read_text() == "original\n"


def test_a_descriptor_bind_target_outside_the_new_root_is_refused(tmp_path: Path) -> None:
    """Found by this file's attacks: `fd:N:/../X` was bound at ROOT/../X, outside the new root, and the step ran."""
    run = _root_parent(tmp_path)
    for target in ("/../escaped", "/image/..", "/", "image", "/a//b", "/a/./b"):
        with pytest.raises(ValueError, match="normal absolute path"):
            confine_argv(["/bin/true"], root_parent=str(run), cwd="/", readonly=[], writable=[], uid=STEP_UID, fd_binds=[(5, target)])
        with pytest.raises(ValueError, match="normal absolute path"):
            confine_argv(["/bin/true"], root_parent=str(run), cwd="/", readonly=[], writable=[], uid=STEP_UID,
                         fd_binds_noexec=[(5, target)])


@pytest.mark.root
@needs_root
@pytest.mark.parametrize("item", ["fd:{fd}:/../escaped", "fdnx:{fd}:/../escaped", "fd:{fd}:/image/../../escaped"])
def test_the_layout_itself_binds_no_descriptor_outside_the_new_root(tmp_path: Path, item: str) -> None:
    """The layout checks the target too, whoever built its command line."""
    run = _root_parent(tmp_path)
    image = tmp_path / "image"
    image.mkdir()
    fd = os.open(image, os.O_RDONLY | os.O_DIRECTORY)
    try:
        done = subprocess.run(["unshare", "--mount", "--", sys.executable, "-I", "-S", "-B", _LAYOUT, str(run / ".sandbox-root"),
                               item.format(fd=fd), "--", "--"], capture_output=True, check=False, pass_fds=(fd,), env=ENV, timeout=60)
    finally:
        os.close(fd)
    assert not (run / "escaped").exists() and not (tmp_path / "escaped").exists(), done
    assert done.returncode == 97 and b"attest-sandbox: a descriptor's target must be a normal absolute path" in done.stderr, done
