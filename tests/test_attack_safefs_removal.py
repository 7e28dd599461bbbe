"""Attack review: attest._safefs.remove_tree (and _unlink_plain, _unlink_entry, _open_dir_for_removal, _move_up).

Every attack is made of real filesystem objects under tmp_path: symlinks, hard links, FIFOs,
sockets, a device node, immutable and append-only flags, 0000 directories, trees deeper than
REMOVE_HELD_DIRS, mounts in a private mount namespace (a child process under ``unshare -m``),
and directories swapped for symlinks between two steps (deterministically, by wrapping one
call, and by a second thread racing with ``renameat2(RENAME_EXCHANGE)``).

Each test states what remove_tree must do; the mount-point tests are the holes this review found
(a mount point entered and emptied, an outside file's flag cleared through a mount over an
immutable name, one descriptor held per level where a directory could not be moved up).
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from attest import _safefs
from attest._safefs import FS_IMMUTABLE_FL, O_DIR, REMOVE_HELD_DIRS, get_flags, remove_tree, set_flags

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (immutable and append-only flags, mounts)")

FS_APPEND_FL = 0x20
REPO = Path(__file__).resolve().parents[1]
_libc = ctypes.CDLL(None, use_errno=True)
_RENAME_EXCHANGE = 2


# -- helpers ------------------------------------------------------------------------------


def _fd_count() -> int:
    return len(os.listdir("/proc/self/fd"))


def _flags(p: Path) -> int:
    fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    try:
        return get_flags(fd)
    finally:
        os.close(fd)


def _set_flag(p: Path, flag: int, on: bool) -> None:
    fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    try:
        f = get_flags(fd)
        set_flags(fd, (f | flag) if on else (f & ~flag))
    finally:
        os.close(fd)


def _unflag_all(root: Path) -> None:
    """Clear immutable and append-only flags on every directory and regular file under ``root`` (never following a link)."""
    if not os.path.lexists(root):
        return
    todo = [root]
    while todo:
        p = todo.pop()
        try:
            st = os.lstat(p)
        except FileNotFoundError:
            continue
        if stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode):
            try:
                _set_flag(p, FS_IMMUTABLE_FL | FS_APPEND_FL, False)
            except OSError:
                pass
        if stat.S_ISDIR(st.st_mode):
            os.chmod(p, 0o700)
            todo.extend(p / n for n in os.listdir(p))


@pytest.fixture
def base(tmp_path: Path) -> Iterator[Path]:
    """tmp_path, after checking the filesystem takes both flags; every flag set under it is cleared afterwards."""
    probe = tmp_path / ".probe"
    probe.write_bytes(b"")
    try:
        _set_flag(probe, FS_IMMUTABLE_FL | FS_APPEND_FL, True)
        _set_flag(probe, FS_IMMUTABLE_FL | FS_APPEND_FL, False)
    except OSError as e:
        pytest.skip(f"no immutable/append-only flags on {tmp_path}: {e}")
    probe.unlink()
    try:
        yield tmp_path
    finally:
        _unflag_all(tmp_path)


@pytest.fixture
def outside(base: Path) -> Path:
    d = base / "outside"
    (d / "vdir" / "deeper").mkdir(parents=True)
    (d / "victim").write_bytes(b"host file\n")
    (d / "vdir" / "keep").write_bytes(b"keep\n")
    (d / "vdir" / "deeper" / "keep2").write_bytes(b"keep2\n")
    os.chmod(d / "vdir", 0o751)
    return d


def _outside_intact(outside: Path) -> None:
    assert (outside / "victim").read_bytes() == b"host file\n"
    assert (outside / "vdir" / "keep").read_bytes() == b"keep\n"
    assert (outside / "vdir" / "deeper" / "keep2").read_bytes() == b"keep2\n"
    assert stat.S_IMODE(os.stat(outside / "vdir").st_mode) == 0o751


def _remove(parent: Path, name: str) -> OSError | None:
    """remove_tree(parent, name); the OSError it raised, or None. No descriptor may leak either way."""
    before = _fd_count()
    pfd = os.open(parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        remove_tree(pfd, name)
        err = None
    except OSError as e:
        err = e
    finally:
        os.close(pfd)
    assert _fd_count() == before, "remove_tree leaked a descriptor"
    return err


def _chain(top: Path, depth: int, each: Callable[[Path, int], None] | None = None) -> Path:
    """``top/d/d/.../d`` ``depth`` levels below top; ``each(dir, level)`` runs in every level; the deepest dir."""
    p = top
    p.mkdir(parents=True, exist_ok=True)
    for level in range(depth):
        if each is not None:
            each(p, level)
        p = p / "d"
        p.mkdir()
    return p


def _walk_all(root: Path) -> list[str]:
    out = []
    for d, dirs, files in os.walk(root):
        out += [os.path.relpath(os.path.join(d, n), root) for n in dirs + files]
    return sorted(out)


@pytest.fixture
def count_held(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The most descriptors this process holds right after any directory is opened for removal, minus the baseline."""
    seen = [0]
    baseline = _fd_count()
    real = _safefs._open_dir_for_removal

    def wrapped(parent_fd: int, name: str, mount: int | None = None) -> int:
        fd = real(parent_fd, name, mount)
        seen[0] = max(seen[0], _fd_count() - baseline)
        return fd

    monkeypatch.setattr(_safefs, "_open_dir_for_removal", wrapped)
    return seen


# -- links are unlinked, never followed -------------------------------------------------------


def test_symlinks_everywhere_are_unlinked_never_followed(base: Path, outside: Path) -> None:
    tree = base / "tree"
    (tree / "sub").mkdir(parents=True)
    os.symlink(outside / "victim", tree / "flink")
    os.symlink(outside / "vdir", tree / "dlink")
    os.symlink(outside / "vdir", tree / "sub" / "zz-dlink")  # popped first (reverse sorted)
    os.symlink("/", tree / "sub" / "root")
    os.symlink("loop", tree / "sub" / "loop")
    os.symlink("nowhere", tree / "sub" / "dangling")
    os.symlink("..", tree / "sub" / "up")
    assert _remove(base, "tree") is None
    assert not os.path.lexists(tree)
    _outside_intact(outside)


def test_top_name_a_symlink_to_a_directory_is_unlinked(base: Path, outside: Path) -> None:
    os.symlink(outside / "vdir", base / "top")
    assert _remove(base, "top") is None
    assert not os.path.lexists(base / "top")
    _outside_intact(outside)


def test_symlinks_below_the_held_depth_are_unlinked_never_followed(base: Path, outside: Path, count_held: list[int]) -> None:
    """60 levels (moved up in the top directory past REMOVE_HELD_DIRS), a link to outside at each."""

    def each(d: Path, level: int) -> None:
        os.symlink(outside / "vdir", d / "link")
        (d / "f").write_bytes(b"x")
        if level % 7 == 3:
            (d / "locked").mkdir()
            (d / "locked" / "g").write_bytes(b"g")
            os.chmod(d / "locked", 0)

    _chain(base / "tree", 60, each)
    assert _remove(base, "tree") is None
    assert not os.path.lexists(base / "tree")
    _outside_intact(outside)
    assert count_held[0] <= REMOVE_HELD_DIRS + 2


def test_special_files_are_unlinked_without_opening_or_hanging(base: Path) -> None:
    tree = base / "tree"
    (tree / "sub").mkdir(parents=True)
    os.mkfifo(tree / "fifo")
    os.mkfifo(tree / "sub" / "fifo")
    os.mknod(tree / "sub" / "null", stat.S_IFCHR | 0o600, os.makedev(1, 3))
    s = socket.socket(socket.AF_UNIX)
    try:
        s.bind(str(tree / "sock"))
    finally:
        s.close()
    (tree / os.fsdecode(b"bad-\xff-name")).write_bytes(b"")
    t0 = time.monotonic()
    assert _remove(base, "tree") is None
    assert time.monotonic() - t0 < 2
    assert not os.path.lexists(tree)


# -- hard links and the immutable flag ------------------------------------------------------


def test_inside_name_of_an_outside_immutable_file_keeps_the_flag_and_raises(base: Path, outside: Path) -> None:
    """The flag is set through the outside name after the link; the inside name is what remove_tree meets."""
    tree = base / "tree"
    (tree / "sub").mkdir(parents=True)
    (tree / "sub" / "own").write_bytes(b"own")
    (tree / "zz").write_bytes(b"zz")
    os.link(outside / "victim", tree / "sub" / "alias")
    _set_flag(outside / "victim", FS_IMMUTABLE_FL, True)
    err = _remove(base, "tree")
    assert err is not None  # never a silent success while alias is left
    assert _flags(outside / "victim") & FS_IMMUTABLE_FL
    assert _walk_all(tree) == ["sub", "sub/alias"]  # everything else was removed


def test_top_name_a_hard_link_of_an_immutable_file_keeps_the_flag(base: Path, outside: Path) -> None:
    os.link(outside / "victim", base / "alias")
    _set_flag(outside / "victim", FS_IMMUTABLE_FL, True)
    assert isinstance(_remove(base, "alias"), PermissionError)
    assert _flags(outside / "victim") & FS_IMMUTABLE_FL
    assert os.path.lexists(base / "alias")


def test_immutable_and_append_only_hard_link_keeps_both_flags(base: Path, outside: Path) -> None:
    tree = base / "tree"
    tree.mkdir()
    os.link(outside / "victim", tree / "alias")
    _set_flag(outside / "victim", FS_IMMUTABLE_FL | FS_APPEND_FL, True)
    assert _remove(base, "tree") is not None
    assert _flags(outside / "victim") & (FS_IMMUTABLE_FL | FS_APPEND_FL) == FS_IMMUTABLE_FL | FS_APPEND_FL


def test_two_inside_names_of_one_immutable_file_are_both_refused(base: Path) -> None:
    tree = base / "tree"
    tree.mkdir()
    (tree / "a").write_bytes(b"a")
    os.link(tree / "a", tree / "b")
    _set_flag(tree / "a", FS_IMMUTABLE_FL, True)
    assert _remove(base, "tree") is not None
    assert _flags(tree / "a") & FS_IMMUTABLE_FL
    assert _walk_all(tree) == ["a", "b"]


def test_a_plain_hard_link_is_unlinked_and_the_outside_name_untouched(base: Path, outside: Path) -> None:
    tree = base / "tree"
    tree.mkdir()
    os.link(outside / "victim", tree / "alias")
    assert _remove(base, "tree") is None
    assert not tree.exists()
    _outside_intact(outside)
    assert os.stat(outside / "victim").st_nlink == 1


def test_hard_linked_immutable_file_deep_in_a_moved_up_directory_raises_and_keeps_the_flag(
    base: Path, outside: Path, count_held: list[int]
) -> None:
    deepest = _chain(base / "tree", 40, lambda d, lvl: (d / "f").write_bytes(b"f"))
    os.link(outside / "victim", deepest / "alias")
    _set_flag(outside / "victim", FS_IMMUTABLE_FL, True)
    err = _remove(base, "tree")
    assert err is not None
    assert _flags(outside / "victim") & FS_IMMUTABLE_FL
    left = _walk_all(base / "tree")
    assert [p for p in left if p.endswith("/f") or p == "f"] == []  # every removable file went
    assert sum(p.endswith("alias") for p in left) == 1
    assert count_held[0] <= REMOVE_HELD_DIRS + 2


def test_sealed_tree_with_single_link_immutable_files_and_dirs_is_removed(base: Path) -> None:
    """A sealed store image: immutable files (one link) in immutable 0555 directories, a 0000 one among them."""
    tree = base / "tree"
    (tree / "a" / "b").mkdir(parents=True)
    (tree / "locked").mkdir()
    for p in (tree / "f", tree / "a" / "g", tree / "a" / "b" / "h", tree / "locked" / "i"):
        p.write_bytes(b"sealed")
        _set_flag(p, FS_IMMUTABLE_FL, True)
    os.symlink("f", tree / "a" / "lnk")
    os.chmod(tree / "locked", 0)
    for d in (tree / "a" / "b", tree / "a", tree / "locked", tree):
        if d != tree / "locked":
            os.chmod(d, 0o555)
        _set_flag(d, FS_IMMUTABLE_FL, True)
    assert _remove(base, "tree") is None
    assert not os.path.lexists(tree)


def test_immutable_single_link_top_file_is_removed(base: Path) -> None:
    (base / "top").write_bytes(b"x")
    _set_flag(base / "top", FS_IMMUTABLE_FL, True)
    assert _remove(base, "top") is None
    assert not os.path.lexists(base / "top")


# -- never a silent success while entries remain ----------------------------------------------


def test_append_only_file_is_reported_not_silently_left(base: Path) -> None:
    tree = base / "tree"
    (tree / "sub").mkdir(parents=True)
    (tree / "sub" / "log").write_bytes(b"log")
    (tree / "sub" / "other").write_bytes(b"o")
    _set_flag(tree / "sub" / "log", FS_APPEND_FL, True)
    assert isinstance(_remove(base, "tree"), PermissionError)
    assert _walk_all(tree) == ["sub", "sub/log"]


def test_an_append_only_directory_is_cleared_and_removed(base: Path) -> None:
    """A directory has no second name an append-only flag could protect: cleared like the immutable flag, then emptied."""
    tree = base / "tree"
    (tree / "ad" / "inner").mkdir(parents=True)
    (tree / "ad" / "f").write_bytes(b"f")
    (tree / "ad" / "inner" / "g").write_bytes(b"g")
    (tree / "z").write_bytes(b"z")
    _set_flag(tree / "ad", FS_APPEND_FL, True)
    assert _remove(base, "tree") is None
    assert not os.path.lexists(tree)


def test_entry_created_after_listing_is_reported(base: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tree = base / "tree"
    tree.mkdir()
    (tree / "a").write_bytes(b"a")
    real = os.unlink
    done: list[int] = []

    def unlink_(name, *a, dir_fd=None):  # type: ignore[no-untyped-def]
        if not done:
            done.append(1)
            (tree / "late").write_bytes(b"late")
        return real(name, *a, dir_fd=dir_fd)

    monkeypatch.setattr(_safefs.os, "unlink", unlink_)
    err = _remove(base, "tree")
    monkeypatch.undo()
    assert done and err is not None and err.errno == errno.ENOTEMPTY
    assert os.listdir(tree) == ["late"]


def test_directory_renamed_while_being_emptied_is_reported(base: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """rmdir of the old name meets ENOENT (ignored), but the renamed directory keeps its parent non-empty."""
    tree = base / "tree"
    (tree / "a").mkdir(parents=True)
    (tree / "a" / "f").write_bytes(b"f")
    real = os.unlink
    done: list[int] = []

    def unlink_(name, *a, dir_fd=None):  # type: ignore[no-untyped-def]
        if name == "f" and not done:
            done.append(1)
            os.rename(tree / "a", tree / "a-moved")
            (tree / "a-moved" / "new").write_bytes(b"new")
        return real(name, *a, dir_fd=dir_fd)

    monkeypatch.setattr(_safefs.os, "unlink", unlink_)
    err = _remove(base, "tree")
    monkeypatch.undo()
    assert done and err is not None
    assert os.path.lexists(tree / "a-moved")


# -- directories swapped for symlinks ------------------------------------------------------------


def _swap_to_link(dir_fd: int, name: str, target: Path) -> None:
    os.rename(name, name + ".old", src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    os.symlink(str(target), name, dir_fd=dir_fd)


def test_swap_between_move_up_check_and_rename_moves_the_link_not_its_target(
    base: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past the held depth, _move_up opens (and closes) the directory, then renames it: the swap lands in between."""
    deepest = _chain(base / "tree", REMOVE_HELD_DIRS + 3)
    (deepest / "x").write_bytes(b"x")
    real = _safefs._open_dir_for_removal
    done: list[int] = []

    def open_(parent_fd: int, name: str, mount: int | None = None) -> int:
        fd = real(parent_fd, name, mount)
        if not done and sys._getframe(1).f_code.co_name == "_move_up":
            done.append(1)
            _swap_to_link(parent_fd, name, outside / "vdir")
        return fd

    monkeypatch.setattr(_safefs, "_open_dir_for_removal", open_)
    _remove(base, "tree")
    monkeypatch.undo()
    assert done
    _outside_intact(outside)
    assert not any(os.path.islink(base / "tree" / p) for p in os.listdir(base / "tree") if os.path.lexists(base / "tree" / p))


def test_swap_after_eisdir_past_the_held_depth_is_refused(base: Path, outside: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _chain(base / "tree", REMOVE_HELD_DIRS + 3)
    real = os.unlink
    done: list[int] = []

    def unlink_(name, *a, dir_fd=None):  # type: ignore[no-untyped-def]
        try:
            return real(name, *a, dir_fd=dir_fd)
        except IsADirectoryError:
            if not done and dir_fd is not None and _depth_of(dir_fd) + 1 >= REMOVE_HELD_DIRS:
                done.append(1)
                _swap_to_link(dir_fd, name, outside / "vdir")
            raise

    monkeypatch.setattr(_safefs.os, "unlink", unlink_)
    err = _remove(base, "tree")
    monkeypatch.undo()
    assert done and err is not None
    _outside_intact(outside)


def _depth_of(dir_fd: int) -> int:
    """How many levels below ``tree`` the directory ``dir_fd`` is (its stack holds one more: ``tree`` itself)."""
    return os.readlink(f"/proc/self/fd/{dir_fd}").rsplit("/tree", 1)[-1].count("/d")


def test_swap_after_eperm_of_an_immutable_dir_is_refused(base: Path, outside: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An immutable directory: unlink says EPERM, the stat finds a directory; the swap lands before the open."""
    tree = base / "tree"
    (tree / "sub").mkdir(parents=True)
    (tree / "sub" / "f").write_bytes(b"f")
    _set_flag(tree / "sub", FS_IMMUTABLE_FL, True)
    real = os.stat
    done: list[int] = []

    def stat_(name, *a, dir_fd=None, follow_symlinks=True):  # type: ignore[no-untyped-def]
        st = real(name, *a, dir_fd=dir_fd, follow_symlinks=follow_symlinks)
        if name == "sub" and dir_fd is not None and not done:
            done.append(1)
            _set_flag(tree / "sub", FS_IMMUTABLE_FL, False)  # (the attacker cannot move it while sealed)
            _swap_to_link(dir_fd, "sub", outside / "vdir")
        return st

    monkeypatch.setattr(_safefs.os, "stat", stat_)
    err = _remove(base, "tree")
    monkeypatch.undo()
    assert done and err is not None
    _outside_intact(outside)
    assert not _flags(outside / "vdir") & FS_IMMUTABLE_FL


def _exchange(dfd: int, a: str, b: str) -> int:
    if _libc.renameat2(dfd, a.encode(), dfd, b.encode(), _RENAME_EXCHANGE) != 0:
        return ctypes.get_errno()
    return 0


def test_racing_thread_exchanging_directories_and_links(base: Path, outside: Path) -> None:
    """A second thread flips ``sub`` (a directory) and ``lnk`` (a link to outside) with RENAME_EXCHANGE, at depth 2 and 19."""
    if _exchange(os.open(base, O_DIR), "nonexistent-a", "nonexistent-b") == errno.ENOSYS:
        pytest.skip("no renameat2")
    deadline = time.monotonic() + 1.0
    rounds = 0
    while time.monotonic() < deadline or rounds < 5:
        rounds += 1
        tree = base / f"tree{rounds}"
        spots = [tree / "a", _chain(tree / "b", REMOVE_HELD_DIRS + 2)]
        for s in spots:
            s.mkdir(parents=True, exist_ok=True)
            (s / "sub" / "inner").mkdir(parents=True)
            (s / "sub" / "inner" / "f").write_bytes(b"f")
            (s / "sub" / "g").write_bytes(b"g")
            os.symlink(outside / "vdir", s / "lnk")
        fds = [os.open(s, O_DIR) for s in spots]
        stop = threading.Event()

        def racer(fds: list[int] = fds, stop: threading.Event = stop) -> None:
            live = list(fds)
            while live and not stop.is_set():
                for fd in list(live):
                    if _exchange(fd, "sub", "lnk") == errno.ENOENT:
                        live.remove(fd)

        t = threading.Thread(target=racer)
        t.start()
        try:
            _remove(base, tree.name)
        finally:
            stop.set()
            t.join()
            for fd in fds:
                os.close(fd)
        _outside_intact(outside)
        if os.path.lexists(tree):
            _remove(base, tree.name)  # what the race left is ours to remove now
        assert not os.path.lexists(tree)


# -- descriptors --------------------------------------------------------------------------------


def test_deep_plain_tree_holds_a_bounded_number_of_descriptors(base: Path, count_held: list[int]) -> None:
    _chain(base / "tree", 200, lambda d, lvl: (d / "f").write_bytes(b"f"))
    assert _remove(base, "tree") is None
    assert not os.path.lexists(base / "tree")
    assert count_held[0] <= REMOVE_HELD_DIRS + 2


def test_a_deep_append_only_chain_is_removed_holding_a_bounded_number_of_descriptors(base: Path, count_held: list[int]) -> None:
    """Past REMOVE_HELD_DIRS a directory is moved up, never entered in place (one more descriptor per level would exhaust
    them): an append-only chain once made every move fail (EPERM) and each level was entered where it stood. The flag
    is cleared now (a directory has no second name), and a move that fails is reported and the directory left
    (the bind-mount tests below)."""
    depth = 40
    _chain(base / "tree", depth)
    p = base / "tree"
    dirs = []
    for _ in range(depth):
        p = p / "d"
        dirs.append(p)
    for d in reversed(dirs):
        _set_flag(d, FS_APPEND_FL, True)
    assert _remove(base, "tree") is None
    assert not os.path.lexists(base / "tree")
    assert count_held[0] <= REMOVE_HELD_DIRS + 2, f"{count_held[0]} descriptors held for a {depth}-level tree"


# -- mount points (a child process in its own mount namespace) ------------------------------------

_MOUNT_SCRIPT = textwrap.dedent(
    """
    import ctypes, json, os, sys
    from attest._safefs import O_DIR, remove_tree
    libc = ctypes.CDLL(None, use_errno=True)
    def mount(src, dst, fstype, flags):
        if libc.mount(src.encode(), dst.encode(), fstype.encode() if fstype else None, flags, None) != 0:
            raise OSError(ctypes.get_errno(), "mount " + dst)
    MS_BIND, MS_REC, MS_PRIVATE = 4096, 16384, 1 << 18
    mount("none", "/", None, MS_REC | MS_PRIVATE)
    base, kind, target = sys.argv[1], sys.argv[2], sys.argv[3]
    if kind == "tmpfs":
        mount("t", target, "tmpfs", 0)
        os.makedirs(os.path.join(target, "in", "deeper"))
        open(os.path.join(target, "in", "deeper", "f"), "w").close()
    else:
        mount(os.path.join(base, "outside", kind), target, None, MS_BIND)
    pfd = os.open(base, O_DIR)
    try:
        remove_tree(pfd, "tree")
        out = {"error": None}
    except OSError as e:
        out = {"error": e.errno}
    out["mounted_left"] = sorted(os.listdir(target)) if os.path.isdir(target) else None
    print(json.dumps(out))
    """
)


def _in_own_namespace(base: Path, kind: str, target: Path) -> dict:
    if shutil.which("unshare") is None:
        pytest.skip("no unshare")
    env = dict(os.environ, PYTHONPATH=str(REPO))
    done = subprocess.run(
        ["unshare", "-m", "--propagation", "private", sys.executable, "-c", _MOUNT_SCRIPT, str(base), kind, str(target)],
        capture_output=True,
        text=True,
        timeout=30,
        env=env,
    )
    if done.returncode != 0 and "mount" in done.stderr and "Operation not permitted" in done.stderr:
        pytest.skip(f"cannot mount here: {done.stderr[-300:]}")
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_mount_point_in_the_tree_is_reported_not_silently_left(base: Path) -> None:
    tree = base / "tree"
    (tree / "mnt").mkdir(parents=True)
    (tree / "f").write_bytes(b"f")
    out = _in_own_namespace(base, "tmpfs", tree / "mnt")
    assert out["error"] == errno.EBUSY


def test_a_bind_mounted_outside_directory_is_not_entered(base: Path, outside: Path) -> None:
    """A mount point in the tree (a leftover bind of an outside directory) is never entered, emptied, chmodded or
    unflagged: its mount id is not the tree's, and it is reported (EBUSY)."""
    tree = base / "tree"
    (tree / "sub" / "mnt").mkdir(parents=True)
    out = _in_own_namespace(base, "vdir", tree / "sub" / "mnt")
    assert out["error"] is not None
    _outside_intact(outside)


def test_a_bind_mounted_outside_directory_past_the_held_depth_is_not_entered(base: Path, outside: Path) -> None:
    """As above, past the held depth: the mount point cannot be moved up, and is reported, not entered where it stands."""
    deepest = _chain(base / "tree", REMOVE_HELD_DIRS + 2)
    (deepest / "mnt").mkdir()
    out = _in_own_namespace(base, "vdir", deepest / "mnt")
    assert out["error"] is not None
    _outside_intact(outside)


_FILE_BIND_SCRIPT = textwrap.dedent(
    """
    import ctypes, json, os, sys
    from attest._safefs import O_DIR, remove_tree, get_flags, FS_IMMUTABLE_FL
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.mount(b"none", b"/", None, 16384 | (1 << 18), None) != 0:
        raise OSError(ctypes.get_errno(), "private")
    base, src, dst = sys.argv[1:4]
    if libc.mount(src.encode(), dst.encode(), None, 4096, None) != 0:
        raise OSError(ctypes.get_errno(), "bind")
    pfd = os.open(base, O_DIR)
    try:
        remove_tree(pfd, "tree")
        err = None
    except OSError as e:
        err = e.errno
    print(json.dumps({"error": err}))
    """
)


def _file_bind_case(base: Path, outside: Path, underlying_immutable: bool) -> None:
    """A sealed outside file (one link) bind-mounted over the file ``tree/mp``; remove_tree must report, not unseal."""
    if shutil.which("unshare") is None:
        pytest.skip("no unshare")
    tree = base / "tree"
    tree.mkdir()
    (tree / "mp").write_bytes(b"")
    if underlying_immutable:
        _set_flag(tree / "mp", FS_IMMUTABLE_FL, True)
    _set_flag(outside / "victim", FS_IMMUTABLE_FL, True)
    env = dict(os.environ, PYTHONPATH=str(REPO))
    done = subprocess.run(
        [
            "unshare",
            "-m",
            "--propagation",
            "private",
            sys.executable,
            "-c",
            _FILE_BIND_SCRIPT,
            str(base),
            str(outside / "victim"),
            str(tree / "mp"),
        ],
        capture_output=True,
        text=True,
        timeout=30,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1])["error"] is not None
    assert _flags(outside / "victim") & FS_IMMUTABLE_FL, "the outside file was unsealed through the mount"


def test_bind_mounted_outside_immutable_file_keeps_its_flag(base: Path, outside: Path) -> None:
    """unlinkat of a file mount point says EBUSY at once: nothing is opened, the outside flag is kept."""
    _file_bind_case(base, outside, underlying_immutable=False)


def test_a_bind_mounted_outside_immutable_file_over_an_immutable_name_keeps_its_flag(base: Path, outside: Path) -> None:
    """The name the mount covers is itself immutable, so unlinkat says EPERM and the flag-clearing path runs: the file
    it opens is on another mount than the tree, and its flag is kept."""
    _file_bind_case(base, outside, underlying_immutable=True)


# -- _unlink_entry: the stat and the open are two lookups ------------------------------------------


def test_unlink_entry_rechecks_the_opened_inode_before_clearing(
    base: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stat and the open are two lookups: what the open finds is unflagged only if it is the one-link inode the stat saw
    (the swap below needs CAP_LINUX_IMMUTABLE, which an untrusted writer lacks: hardening)."""
    tree = base / "tree"
    tree.mkdir()
    (tree / "plain").write_bytes(b"p")
    _set_flag(tree / "plain", FS_IMMUTABLE_FL, True)  # unlink refused: the stat-then-open path runs
    os.link(outside / "victim", tree / ".alias")
    real = os.stat
    done: list[int] = []

    def stat_(name, *a, dir_fd=None, follow_symlinks=True):  # type: ignore[no-untyped-def]
        st = real(name, *a, dir_fd=dir_fd, follow_symlinks=follow_symlinks)
        if name == "plain" and dir_fd is not None and not done:
            done.append(1)  # a privileged swap: the hard link of the outside file now answers to "plain"
            _set_flag(tree / "plain", FS_IMMUTABLE_FL, False)
            os.rename(".alias", "plain", src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            _set_flag(outside / "victim", FS_IMMUTABLE_FL, True)
        return st

    monkeypatch.setattr(_safefs.os, "stat", stat_)
    _remove(base, "tree")
    monkeypatch.undo()
    assert done
    assert _flags(outside / "victim") & FS_IMMUTABLE_FL


# -- a non-root owner (the readonly backend's deployment user) -----------------------------------

_NONROOT_SCRIPT = textwrap.dedent(
    """
    import os, sys
    from attest._safefs import O_DIR, remove_tree
    pfd = os.open(sys.argv[1], O_DIR)
    os.setgroups([]); os.setgid(65534); os.setuid(65534)
    try:
        remove_tree(pfd, "tree")
        print("OK")
    except OSError as e:
        print("ERR", e.errno, e.filename)
    """
)


def test_non_root_owner_removes_its_0000_and_0555_tree_without_following_links(base: Path, outside: Path) -> None:
    home = base / "home"
    tree = home / "tree"
    (tree / "ro" / "locked" / "deep").mkdir(parents=True)
    (tree / "ro" / "locked" / "deep" / "f").write_bytes(b"f")
    (tree / "ro" / "g").write_bytes(b"g")
    os.symlink(outside / "vdir", tree / "ro" / "locked" / "lnk")
    for p in [home, *sorted(home.rglob("*"), reverse=True)]:
        os.chown(p, 65534, 65534, follow_symlinks=False)
    os.chmod(tree / "ro" / "locked" / "deep", 0)
    os.chmod(tree / "ro" / "locked", 0)
    os.chmod(tree / "ro", 0o555)
    os.chmod(tree, 0o555)
    env = dict(os.environ, PYTHONPATH=str(REPO))
    done = subprocess.run(
        [sys.executable, "-c", _NONROOT_SCRIPT, str(home)], capture_output=True, text=True, timeout=30, env=env, cwd="/"
    )
    assert done.stdout.strip() == "OK", done.stdout + done.stderr[-2000:]
    assert not os.path.lexists(tree)
    _outside_intact(outside)
