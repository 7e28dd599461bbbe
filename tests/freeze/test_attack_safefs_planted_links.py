"""Attack review: attest._safefs's tree operations on a tree something else planted links in."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from attest import _safefs
from attest._safefs import (
    FS_IMMUTABLE_FL,
    O_DIR,
    Drift,
    UnsafeEntry,
    chown_tree,
    copy_regular_at,
    drift,
    get_flags,
    open_listed_at,
    remove_tree,
    set_flags,
)

UID = 54321

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (chown, immutable flag)")


def _dirfd(p: Path) -> int:
    return os.open(p, O_DIR)


@pytest.fixture
def layout(tmp_path: Path) -> tuple[Path, Path]:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "victim").write_bytes(b"host file\n")
    (outside / "vdir").mkdir()
    (outside / "vdir" / "keep").write_bytes(b"keep\n")
    tree = tmp_path / "tree"
    (tree / "sub").mkdir(parents=True)
    (tree / "sub" / "own").write_bytes(b"own\n")
    return tree, outside


# -- chown_tree -------------------------------------------------------------------------


def test_chown_tree_does_not_chown_a_hard_linked_outside_file(layout: tuple[Path, Path]) -> None:
    tree, outside = layout
    os.link(outside / "victim", tree / "sub" / "alias")
    before = os.stat(outside / "victim").st_uid
    pfd = _dirfd(tree.parent)
    try:
        try:
            chown_tree(pfd, tree.name, UID)
        except OSError:
            pass  # refusing is fine too
    finally:
        os.close(pfd)
    assert os.stat(outside / "victim").st_uid == before


def test_chown_tree_does_not_follow_symlinks(layout: tuple[Path, Path]) -> None:
    tree, outside = layout
    os.symlink(outside / "victim", tree / "sub" / "flink")
    os.symlink(outside / "vdir", tree / "dlink")
    pfd = _dirfd(tree.parent)
    try:
        chown_tree(pfd, tree.name, UID)
    finally:
        os.close(pfd)
    assert os.stat(outside / "victim").st_uid == 0
    assert os.stat(outside / "vdir").st_uid == 0
    assert os.stat(outside / "vdir" / "keep").st_uid == 0
    assert os.lstat(tree / "dlink").st_uid == UID


def test_chown_tree_dir_swapped_for_symlink_after_stat(layout: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    tree, outside = layout
    real_stat = os.stat
    done = []

    def stat_(name, *a, dir_fd=None, follow_symlinks=True):  # type: ignore[no-untyped-def]
        st = real_stat(name, *a, dir_fd=dir_fd, follow_symlinks=follow_symlinks)
        if name == "sub" and dir_fd is not None and not done:
            done.append(1)
            os.rename("sub", "sub.old", src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            os.symlink(str(outside / "vdir"), "sub", dir_fd=dir_fd)
        return st

    monkeypatch.setattr(_safefs.os, "stat", stat_)
    pfd = _dirfd(tree.parent)
    try:
        with pytest.raises(UnsafeEntry):
            chown_tree(pfd, tree.name, UID)
    finally:
        os.close(pfd)
        monkeypatch.undo()
    assert os.stat(outside / "vdir" / "keep").st_uid == 0


# -- remove_tree ------------------------------------------------------------------------


def test_remove_tree_unlinks_planted_symlinks(layout: tuple[Path, Path]) -> None:
    tree, outside = layout
    os.symlink(outside / "victim", tree / "sub" / "flink")
    os.symlink(outside / "vdir", tree / "dlink")
    os.symlink(outside, tree / "sub" / "zz")
    pfd = _dirfd(tree.parent)
    try:
        remove_tree(pfd, tree.name)
    finally:
        os.close(pfd)
    assert not tree.exists()
    assert (outside / "victim").read_bytes() == b"host file\n"
    assert (outside / "vdir" / "keep").exists()


def test_remove_tree_root_symlink_is_unlinked_not_entered(layout: tuple[Path, Path]) -> None:
    tree, outside = layout
    os.symlink(outside / "vdir", tree / "top")
    dfd = _dirfd(tree)
    try:
        remove_tree(dfd, "top")
    finally:
        os.close(dfd)
    assert not os.path.lexists(tree / "top")
    assert (outside / "vdir" / "keep").exists()


def test_remove_tree_dir_swapped_for_symlink_after_it_was_found_a_directory(layout: tuple[Path, Path],
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The swap lands between the unlink that found ``sub`` a directory and the open that enters it."""
    tree, outside = layout
    real_unlink = os.unlink
    done = []

    def unlink_(name, *a, dir_fd=None):  # type: ignore[no-untyped-def]
        try:
            real_unlink(name, *a, dir_fd=dir_fd)
        except IsADirectoryError:
            if name == "sub" and dir_fd is not None and not done:
                done.append(1)
                os.rename("sub", "sub.old", src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
                os.symlink(str(outside / "vdir"), "sub", dir_fd=dir_fd)
            raise

    monkeypatch.setattr(_safefs.os, "unlink", unlink_)
    pfd = _dirfd(tree.parent)
    try:
        with pytest.raises(OSError):
            remove_tree(pfd, tree.name)
    finally:
        os.close(pfd)
        monkeypatch.undo()
    assert done
    assert (outside / "vdir" / "keep").exists()
    assert stat.S_IMODE(os.stat(outside / "vdir").st_mode) == 0o755


def _immutable(p: Path, on: bool) -> None:
    fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK)
    try:
        flags = get_flags(fd)
        set_flags(fd, flags | FS_IMMUTABLE_FL if on else flags & ~FS_IMMUTABLE_FL)
    finally:
        os.close(fd)


def _is_immutable(p: Path) -> bool:
    fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK)
    try:
        return bool(get_flags(fd) & FS_IMMUTABLE_FL)
    finally:
        os.close(fd)


def test_remove_tree_leaves_an_outside_immutable_file_immutable(layout: tuple[Path, Path]) -> None:
    tree, outside = layout
    os.link(outside / "victim", tree / "sub" / "alias")  # linked before the host made it immutable
    try:
        _immutable(outside / "victim", True)
    except OSError as e:
        pytest.skip(f"no immutable flag here: {e}")
    try:
        pfd = _dirfd(tree.parent)
        try:
            try:
                remove_tree(pfd, tree.name)
            except OSError:
                pass  # refusing is fine
        finally:
            os.close(pfd)
        assert _is_immutable(outside / "victim")
    finally:
        _immutable(outside / "victim", False)
        for p in (tree / "sub" / "alias",):
            if os.path.lexists(p):
                _immutable(p, False)


# -- copy_regular_at / open_listed_at / drift ---------------------------------------------


@pytest.mark.parametrize("what", ["symlink", "fifo", "hardlink", "setuid"])
def test_copy_regular_at_refuses(layout: tuple[Path, Path], tmp_path: Path, what: str) -> None:
    tree, outside = layout
    p = tree / "x"
    if what == "symlink":
        os.symlink(outside / "victim", p)
    elif what == "fifo":
        os.mkfifo(p)
    elif what == "hardlink":
        os.link(outside / "victim", p)
    else:
        p.write_bytes(b"x")
        os.chmod(p, 0o4755)
    dst = tmp_path / "dst"
    dst.mkdir()
    s, d = _dirfd(tree), _dirfd(dst)
    try:
        with pytest.raises(UnsafeEntry):
            copy_regular_at(s, "x", d, "x", max_bytes=1 << 20)
    finally:
        os.close(s)
        os.close(d)
    assert not (dst / "x").exists()


def test_open_listed_at_after_swaps(layout: tuple[Path, Path]) -> None:
    tree, outside = layout
    p = tree / "f"
    p.write_bytes(b"a")
    dfd = _dirfd(tree)
    try:
        listed = os.stat("f", dir_fd=dfd, follow_symlinks=False)
        os.link(p, outside / "alias")
        with pytest.raises(UnsafeEntry) as e:
            open_listed_at(dfd, "f", listed)
        assert e.value.drift is Drift.LINKS
        os.unlink(outside / "alias")
        listed = os.stat("f", dir_fd=dfd, follow_symlinks=False)
        os.chmod(p, 0o2644)
        with pytest.raises(UnsafeEntry) as e:
            open_listed_at(dfd, "f", listed)
        assert e.value.drift is Drift.MODE
        os.chmod(p, 0o644)
        listed = os.stat("f", dir_fd=dfd, follow_symlinks=False)
        os.unlink(p)
        os.mkfifo(p)
        with pytest.raises(UnsafeEntry) as e:
            open_listed_at(dfd, "f", listed)
        assert e.value.drift is Drift.TYPE
        os.unlink(p)
        os.symlink(outside / "victim", p)
        with pytest.raises(UnsafeEntry) as e:
            open_listed_at(dfd, "f", listed)
        assert e.value.drift is None
    finally:
        os.close(dfd)


def test_drift_inode_reuse_keeping_type() -> None:
    # A listed hard link (nlink 2) that loses its second name is still refused by the caller
    # (classify on the listing); drift only says the verdict changed.
    base = os.stat_result((stat.S_IFREG | 0o644, 7, 1, 2, 0, 0, 1, 0, 0, 0))
    now = os.stat_result((stat.S_IFREG | 0o644, 7, 1, 1, 0, 0, 1, 0, 0, 0))
    assert drift(base, now) is Drift.LINKS
