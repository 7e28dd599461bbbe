"""Attack review: entries swapped at the exact moment between listing and open, and files
changed at the exact moment between the first fstat and the hash (deterministic, through a
proxy of the walker's ``os``), in the one-process and the forked walk."""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
import types
from collections.abc import Callable
from pathlib import Path

import pytest
from support.trees import make_tree

from attest.inventory import InventoryCode, _walk, scan_tree
from attest.inventory._hash import hash_fd

SECRET = b"secret outside the tree\n"


@pytest.fixture(autouse=True)
def _both_walk_modes(walk_mode: str) -> str:
    return walk_mode


def _proxy(monkeypatch: pytest.MonkeyPatch, **overrides: Callable[..., object]) -> None:
    real = os
    ns = types.SimpleNamespace(**overrides)

    class P:
        def __getattr__(self, name: str) -> object:
            if hasattr(ns, name):
                return getattr(ns, name)
            return getattr(real, name)

    monkeypatch.setattr(_walk, "os", P())


def _tree(tmp_path: Path) -> Path:
    # Enough entries that the forked walk has work to give away.
    spec: dict[str, object] = {f"d{i}": {f"f{j}": b"x" * j for j in range(8)} for i in range(8)}
    spec["target"] = b"genuine\n"
    spec["tdir"] = {"inner": b"genuine dir content\n"}
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret").write_bytes(SECRET)
    return make_tree(tmp_path / "t", spec)


@pytest.fixture(params=["after-listing", "after-lstat"])
def swap_point(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Where the entry is swapped: after the directory was listed (the walk opens an entry the
    listing gives as a file or directory without an lstat first), or after the lstat of the
    lstat-first path (every entry of a listing whose inodes are not trusted)."""
    if request.param == "after-lstat":
        monkeypatch.setattr(_walk, "_TRUST_LISTING", False)
    return str(request.param)


def _after_lstat(monkeypatch: pytest.MonkeyPatch, target: str, mutate: Callable[[int, str], None]) -> None:
    """Swap ``target`` once, right after the walk listed its directory or took its lstat."""
    done = []

    def stat_(name, *a, dir_fd=None, follow_symlinks=True):  # type: ignore[no-untyped-def]
        st = os.stat(name, *a, dir_fd=dir_fd, follow_symlinks=follow_symlinks)
        if name == target and dir_fd is not None and not done:
            done.append(1)
            mutate(dir_fd, name)
        return st

    def scandir_(fd):  # type: ignore[no-untyped-def]
        with os.scandir(fd) as it:
            listed = list(it)
        if _walk._TRUST_LISTING and not done and any(e.name == target for e in listed):
            done.append(1)
            mutate(fd, target)
        return contextlib.nullcontext(listed)

    _proxy(monkeypatch, stat=stat_, scandir=scandir_)


def _codes(result, path: str) -> set[str]:  # type: ignore[no-untyped-def]
    return {f.code for f in result.findings if f.path == path}


def _paths(result) -> set[str]:  # type: ignore[no-untyped-def]
    return {e.path for e in result.entries}


def test_file_to_symlink(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, swap_point: str) -> None:
    root = _tree(tmp_path)
    secret = str(tmp_path / "outside" / "secret")

    def mutate(dfd: int, name: str) -> None:
        os.unlink(name, dir_fd=dfd)
        os.symlink(secret, name, dir_fd=dfd)

    _after_lstat(monkeypatch, "target", mutate)
    r = scan_tree(root)
    assert "target" not in _paths(r)
    assert _codes(r, "target") == {InventoryCode.SYMLINK}


def test_file_to_fifo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, swap_point: str) -> None:
    root = _tree(tmp_path)

    def mutate(dfd: int, name: str) -> None:
        os.unlink(name, dir_fd=dfd)
        os.mkfifo(name, dir_fd=dfd)

    _after_lstat(monkeypatch, "target", mutate)
    r = scan_tree(root)  # must not block
    assert "target" not in _paths(r)
    assert _codes(r, "target") == {InventoryCode.SPECIAL_FILE}


def test_dir_to_symlink(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, swap_point: str) -> None:
    root = _tree(tmp_path)
    outside = str(tmp_path / "outside")

    def mutate(dfd: int, name: str) -> None:
        os.rename(name, "tdir.old", src_dir_fd=dfd, dst_dir_fd=dfd)
        os.symlink(outside, name, dir_fd=dfd)

    _after_lstat(monkeypatch, "tdir", mutate)
    r = scan_tree(root)
    assert not any(p.startswith("tdir/") for p in _paths(r))
    assert "tdir" not in _paths(r)
    assert InventoryCode.SYMLINK in _codes(r, "tdir")


def test_dir_to_other_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, swap_point: str) -> None:
    root = _tree(tmp_path)

    def mutate(dfd: int, name: str) -> None:
        os.rename(name, "tdir.old", src_dir_fd=dfd, dst_dir_fd=dfd)
        os.mkdir(name, dir_fd=dfd)

    _after_lstat(monkeypatch, "tdir", mutate)
    r = scan_tree(root)
    assert "tdir" not in _paths(r)
    assert _codes(r, "tdir") == {InventoryCode.CHANGED_DURING_WALK}


def test_file_gains_hard_link(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, swap_point: str) -> None:
    root = _tree(tmp_path)
    other = str(tmp_path / "outside" / "alias")

    def mutate(dfd: int, name: str) -> None:
        os.link(name, other, src_dir_fd=dfd)

    _after_lstat(monkeypatch, "target", mutate)
    r = scan_tree(root)
    assert "target" not in _paths(r)
    assert _codes(r, "target") == {InventoryCode.HARDLINK}


@pytest.mark.parametrize("bits", [stat.S_ISUID, stat.S_ISGID, stat.S_ISVTX])
def test_file_gains_special_bit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, swap_point: str, bits: int) -> None:
    root = _tree(tmp_path)

    def mutate(dfd: int, name: str) -> None:
        os.chmod(name, 0o755 | bits, dir_fd=dfd, follow_symlinks=False)

    _after_lstat(monkeypatch, "target", mutate)
    r = scan_tree(root)
    assert "target" not in _paths(r)
    assert _codes(r, "target") == {InventoryCode.SPECIAL_MODE}


def test_dir_gains_sticky_bit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, swap_point: str) -> None:
    root = _tree(tmp_path)

    def mutate(dfd: int, name: str) -> None:
        os.chmod(name, 0o1777, dir_fd=dfd, follow_symlinks=False)

    _after_lstat(monkeypatch, "tdir", mutate)
    r = scan_tree(root)
    assert "tdir" not in _paths(r)
    assert _codes(r, "tdir") == {InventoryCode.SPECIAL_MODE}


def test_file_replaced_by_other_regular_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, swap_point: str) -> None:
    root = _tree(tmp_path)

    def mutate(dfd: int, name: str) -> None:
        fd = os.open("new", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644, dir_fd=dfd)
        os.write(fd, SECRET)
        os.close(fd)
        os.rename("new", name, src_dir_fd=dfd, dst_dir_fd=dfd)

    _after_lstat(monkeypatch, "target", mutate)
    r = scan_tree(root)
    assert "target" not in _paths(r)
    assert _codes(r, "target") == {InventoryCode.CHANGED_DURING_WALK}


# -- changes after the first fstat, while the file is hashed ------------------------------


def _after_fstat(monkeypatch: pytest.MonkeyPatch, target: Path, mutate: Callable[[int], None]) -> None:
    done = []
    want = os.stat(target).st_ino

    def fstat_(fd: int) -> os.stat_result:
        st = os.fstat(fd)
        if st.st_ino == want and not done and stat.S_ISREG(st.st_mode):
            done.append(1)
            mutate(fd)
        return st

    _proxy(monkeypatch, fstat=fstat_)


@pytest.mark.parametrize("size", [100, 300 * 1024])  # inline hash, and handed to the hashing thread
@pytest.mark.parametrize("how", ["grow", "shrink", "rewrite-same-size", "chmod-setuid", "hard-link"])
def test_file_changed_while_hashed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, size: int, how: str) -> None:
    root = _tree(tmp_path)
    target = root / "target"
    target.write_bytes(b"a" * size)
    alias = tmp_path / "outside" / "alias"

    def mutate(fd: int) -> None:
        if how == "grow":
            with open(target, "ab") as f:
                f.write(b"more")
        elif how == "shrink":
            os.truncate(target, size - 1)
        elif how == "rewrite-same-size":
            with open(target, "r+b") as f:
                f.write(b"b")
        elif how == "chmod-setuid":
            os.chmod(target, 0o4755)
        else:
            os.link(target, alias)

    _after_fstat(monkeypatch, target, mutate)
    r = scan_tree(root)
    assert "target" not in _paths(r)
    assert _codes(r, "target") == {InventoryCode.CHANGED_DURING_WALK}


def test_hash_fd_stops_past_size_on_endless_source() -> None:
    fd = os.open("/dev/zero", os.O_RDONLY)
    try:
        for size in (0, 10, 64 * 1024, 64 * 1024 + 1, 2 * 1024 * 1024):
            _, got = hash_fd(fd, size)
            assert size < got <= size + 1024 * 1024 + 1
    finally:
        os.close(fd)


# -- the listing's inodes, trusted only when one lstat per directory agrees ----------------


@pytest.mark.parametrize("swapped", ["a", "b"])
def test_a_listing_is_trusted_only_when_its_first_inode_agrees_with_lstat(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, swapped: str
) -> None:
    """The first listed file is the probe: swapped just after the listing, its lstat disagrees and
    the whole directory is walked lstat-first (which sees the new file as listed, as a swap before
    the listing would); a later entry swapped then is opened as listed and refused as replaced."""
    root = make_tree(tmp_path / "t", {"a": b"old a\n", "b": b"old b\n", "c": b"c\n"})

    def mutate(dfd: int, name: str) -> None:
        fd = os.open("new", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644, dir_fd=dfd)
        os.write(fd, b"new\n")
        os.close(fd)
        os.rename("new", name, src_dir_fd=dfd, dst_dir_fd=dfd)

    _after_lstat(monkeypatch, swapped, mutate)
    r = scan_tree(root)
    if swapped == "a":
        # The proxy swaps inside the listing call: the directory's times moved while it was
        # listed, which the walker reports on the directory (and on nothing else).
        assert [(f.path, f.code) for f in r.findings] in ([], [(".", InventoryCode.CHANGED_DURING_WALK)])
        assert {e.path: e.sha256 for e in r.entries}["a"] == hashlib.sha256(b"new\n").hexdigest()
    else:
        assert _codes(r, "b") == {InventoryCode.CHANGED_DURING_WALK}
        assert _paths(r) == {"a", "c"}
