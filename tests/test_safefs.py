"""attest._safefs is the one home of the safe-open rules: its classifier, and no other module's own flags."""

from __future__ import annotations

import ast
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from attest._safefs import Drift, Kind, UnsafeEntry, classify, drift, open_listed_at

PACKAGE = Path(__file__).resolve().parent.parent / "attest"


def _st(mode: int, nlink: int = 1) -> os.stat_result:
    return os.stat_result((mode, 1, 1, nlink, 0, 0, 0, 0, 0, 0))


@pytest.mark.parametrize(
    ("mode", "nlink", "kind"),
    [
        (stat.S_IFREG | 0o644, 1, Kind.FILE),
        (stat.S_IFREG | 0o755, 1, Kind.FILE),
        (stat.S_IFREG | 0o644, 2, Kind.HARDLINK),
        (stat.S_IFREG | 0o4755, 1, Kind.SPECIAL_MODE),
        (stat.S_IFREG | 0o2755, 2, Kind.SPECIAL_MODE),
        (stat.S_IFDIR | 0o755, 7, Kind.DIR),
        (stat.S_IFDIR | 0o1777, 2, Kind.SPECIAL_MODE),
        (stat.S_IFLNK | 0o777, 1, Kind.SYMLINK),
        (stat.S_IFIFO | 0o644, 1, Kind.SPECIAL),
        (stat.S_IFSOCK | 0o755, 1, Kind.SPECIAL),
        (stat.S_IFCHR | 0o666, 1, Kind.SPECIAL),
        (stat.S_IFBLK | 0o660, 1, Kind.SPECIAL),
    ],
)
def test_classify(mode: int, nlink: int, kind: Kind) -> None:
    assert classify(_st(mode, nlink)) is kind


def test_no_other_module_spells_its_own_nofollow_flags() -> None:
    """A second copy of the open flags drifts from the first; an attacker needs only the weaker one."""
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "_safefs.py" and path.parent == PACKAGE:
            continue
        if path == PACKAGE / "builder" / "_confine.py":
            continue  # run as `python -I -S` in the confinement, it may import nothing of attest (its own test says so)
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Attribute) and node.attr == "O_NOFOLLOW":
                offenders.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}")
    assert offenders == [], f"use the flags of attest._safefs instead: {offenders}"


def _st2(mode: int, nlink: int = 1, ino: int = 1, dev: int = 1) -> os.stat_result:
    return os.stat_result((mode, ino, dev, nlink, 0, 0, 0, 0, 0, 0))


@pytest.mark.parametrize("bits", [0o1000, 0o2000, 0o4000, 0o3000, 0o5000, 0o6000, 0o7000])
@pytest.mark.parametrize("fmt", [stat.S_IFREG, stat.S_IFDIR])
def test_classify_every_special_bit_on_files_and_directories(fmt: int, bits: int) -> None:
    assert classify(_st(fmt | bits | 0o755, 3)) is Kind.SPECIAL_MODE


@pytest.mark.parametrize("fmt", [stat.S_IFIFO, stat.S_IFSOCK, stat.S_IFCHR, stat.S_IFBLK, stat.S_IFLNK])
def test_classify_links_and_special_files_whatever_their_bits(fmt: int) -> None:
    want = Kind.SYMLINK if fmt == stat.S_IFLNK else Kind.SPECIAL
    assert classify(_st(fmt | 0o7777, 2)) is want


FILE, DIR = stat.S_IFREG | 0o644, stat.S_IFDIR | 0o755


@pytest.mark.parametrize(
    ("listed", "opened", "want"),
    [
        (_st2(FILE), _st2(FILE), None),
        (_st2(FILE), _st2(stat.S_IFREG | 0o600), None),  # chmod keeps the verdict
        (_st2(DIR, 2), _st2(DIR, 5), None),  # a directory's link count moves with its subdirectories
        (_st2(DIR), _st2(stat.S_IFDIR | 0o700), None),
        (_st2(FILE), _st2(FILE, ino=2), Drift.REPLACED),
        (_st2(FILE), _st2(FILE, dev=2), Drift.REPLACED),
        (_st2(DIR), _st2(DIR, ino=2), Drift.REPLACED),
        (_st2(FILE), _st2(stat.S_IFIFO | 0o644, ino=2), Drift.TYPE),
        (_st2(FILE), _st2(DIR, ino=2), Drift.TYPE),
        (_st2(FILE), _st2(stat.S_IFCHR | 0o666, ino=2), Drift.TYPE),
        (_st2(FILE), _st2(DIR), Drift.TYPE),  # the inode number was freed and reused
        (_st2(FILE), _st2(FILE, 2), Drift.LINKS),
        (_st2(FILE), _st2(stat.S_IFREG | 0o4755), Drift.MODE),
        (_st2(FILE), _st2(stat.S_IFREG | 0o4755, 2), Drift.MODE),  # special bits outrank the link
        (_st2(DIR), _st2(stat.S_IFDIR | 0o1777), Drift.MODE),
        (_st2(stat.S_IFREG | 0o2755), _st2(FILE), Drift.MODE),
        (_st2(FILE, 2), _st2(FILE, 3), None),  # still a hard link: the verdict holds
    ],
)
def test_drift(listed: os.stat_result, opened: os.stat_result, want: Drift | None) -> None:
    assert drift(listed, opened) is want


@pytest.fixture
def listed_dir(tmp_path: Path) -> Iterator[tuple[int, Path]]:
    root = tmp_path / "t"
    root.mkdir()
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        yield fd, root
    finally:
        os.close(fd)


def _lstat(fd: int, name: str) -> os.stat_result:
    return os.stat(name, dir_fd=fd, follow_symlinks=False)


def test_open_listed_at_returns_the_listed_file_and_directory(listed_dir: tuple[int, Path]) -> None:
    fd, root = listed_dir
    (root / "f").write_bytes(b"x")
    (root / "d").mkdir()
    for name in ("f", "d"):
        listed = _lstat(fd, name)
        got, st = open_listed_at(fd, name, listed)
        try:
            assert (st.st_ino, stat.S_IFMT(st.st_mode)) == (listed.st_ino, stat.S_IFMT(listed.st_mode))
            assert os.get_inheritable(got) is False
        finally:
            os.close(got)


def _swap_symlink(root: Path, name: str) -> None:
    os.rename(root / name, root / f"{name}.old")
    os.symlink(root / f"{name}.old", root / name)


def _swap_fifo(root: Path, name: str) -> None:
    os.rename(root / name, root / f"{name}.old")
    os.mkfifo(root / name)


def _swap_inode(root: Path, name: str) -> None:
    os.rename(root / name, root / f"{name}.old")
    (root / name).write_bytes(b"other")


def _add_link(root: Path, name: str) -> None:
    os.link(root / name, root / f"{name}.link")


def _setuid(root: Path, name: str) -> None:
    os.chmod(root / name, 0o4755)


def _swap_dir_for_file(root: Path, name: str) -> None:
    os.rename(root / name, root / f"{name}.old")
    (root / name).write_bytes(b"")


@pytest.mark.parametrize(
    ("listed_as", "swap", "kind", "want"),
    [
        ("file", _swap_symlink, Kind.SYMLINK, None),
        ("file", _swap_fifo, Kind.SPECIAL, Drift.TYPE),  # opened without blocking, refused from fstat
        ("file", _swap_inode, Kind.FILE, Drift.REPLACED),
        ("file", _add_link, Kind.HARDLINK, Drift.LINKS),
        ("file", _setuid, Kind.SPECIAL_MODE, Drift.MODE),
        ("dir", _swap_symlink, None, None),
        ("dir", _swap_dir_for_file, None, None),
    ],
)
def test_open_listed_at_refuses_what_changed_since_the_listing(
    listed_dir: tuple[int, Path], listed_as: str, swap: Callable[[Path, str], None], kind: Kind | None, want: Drift | None
) -> None:
    fd, root = listed_dir
    if listed_as == "file":
        (root / "e").write_bytes(b"genuine")
    else:
        (root / "e").mkdir()
    listed = _lstat(fd, "e")
    swap(root, "e")
    before = len(os.listdir("/proc/self/fd"))
    with pytest.raises(UnsafeEntry) as info:
        open_listed_at(fd, "e", listed)
    assert len(os.listdir("/proc/self/fd")) == before  # nothing left open
    assert info.value.drift is want
    if listed_as == "file" or kind is not None:
        assert info.value.kind is kind
    assert (info.value.st is None) == (want is None)


def test_open_listed_at_lets_a_vanished_entry_say_so(listed_dir: tuple[int, Path]) -> None:
    fd, root = listed_dir
    (root / "e").write_bytes(b"x")
    listed = _lstat(fd, "e")
    os.unlink(root / "e")
    with pytest.raises(FileNotFoundError):
        open_listed_at(fd, "e", listed)


def test_create_at_writes_whole_once_and_never_over_what_is_there(tmp_path: Path) -> None:
    from attest._safefs import O_DIR, create_at

    dfd = os.open(tmp_path, O_DIR)
    try:
        create_at(dfd, "claim.json", b'{"outcome": "running"}', mode=0o600)
        assert (tmp_path / "claim.json").read_bytes() == b'{"outcome": "running"}'
        assert (tmp_path / "claim.json").stat().st_mode & 0o777 == 0o600
        with pytest.raises(FileExistsError):
            create_at(dfd, "claim.json", b"other")
        assert (tmp_path / "claim.json").read_bytes() == b'{"outcome": "running"}'
        (tmp_path / "link").symlink_to(tmp_path / "elsewhere")
        with pytest.raises(FileExistsError):  # a planted link is something that is there: never followed
            create_at(dfd, "link", b"x")
        assert not (tmp_path / "elsewhere").exists()
        assert sorted(p.name for p in tmp_path.iterdir()) == ["claim.json", "link"]  # no temp file left
    finally:
        os.close(dfd)
