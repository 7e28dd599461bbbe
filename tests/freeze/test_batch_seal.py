"""The `immutable` backend seals as a batch (rule 5 of attest.freeze._materialize):
every file copied, then one syncfs, then every entry sealed through a reopened descriptor that
must be the inode materialize created. The hook is our own function (``write_back_all``)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from support.caps import BACKEND, needs_immutable

from attest._safefs import FS_IMMUTABLE_FL, O_DIR, get_flags
from attest.errors import EnvironmentFailure
from attest.freeze import FreezeCode, _materialize, check_image, freeze_tree, verify_image
from attest.inventory import EntryType, Inventory

REAL_WRITE_BACK = _materialize.write_back_all


def _hook(monkeypatch: pytest.MonkeyPatch, before) -> list[int]:  # type: ignore[no-untyped-def]
    calls: list[int] = []

    def write_back(fd: int) -> bool:
        calls.append(fd)
        before(fd)
        return REAL_WRITE_BACK(fd)

    monkeypatch.setattr(_materialize, "write_back_all", write_back)
    return calls


def _at(root_fd: int, rel: str) -> tuple[int, str]:
    """A descriptor of ``rel``'s directory (the caller closes it) and ``rel``'s name."""
    parent, _, name = rel.rpartition("/")
    fd = os.dup(root_fd)
    for part in parent.split("/") if parent else []:
        nfd = os.open(part, O_DIR, dir_fd=fd)
        os.close(fd)
        fd = nfd
    return fd, name


@pytest.mark.parametrize("backend", [pytest.param("immutable", marks=needs_immutable), "readonly"])
def test_one_write_back_after_every_copy_and_before_any_seal(src: Path, expected: Inventory, state: Path,
                                                             monkeypatch: pytest.MonkeyPatch, backend: str) -> None:
    seen: dict[str, tuple[int, bool]] = {}

    def before(root_fd: int) -> None:
        for e in expected.entries:
            fd, name = _at(root_fd, e.path)
            try:
                flags = O_DIR if e.type is EntryType.DIR else os.O_RDONLY | os.O_NOFOLLOW
                efd = os.open(name, flags, dir_fd=fd)
                try:
                    seen[e.path] = (os.fstat(efd).st_size, bool(get_flags(efd) & FS_IMMUTABLE_FL))
                finally:
                    os.close(efd)
            finally:
                os.close(fd)

    calls = _hook(monkeypatch, before)
    image = freeze_tree(src, expected, state, backend=backend)
    if backend == "readonly":
        assert calls == []  # no writeback wait to batch: sealed one directory behind the copy
    else:
        assert len(calls) == 1
        assert set(seen) == {e.path for e in expected.entries}  # every entry was there, copied in full
        assert all(seen[e.path][0] == e.size for e in expected.entries if e.type is EntryType.FILE)
        assert not any(sealed for _, sealed in seen.values())  # and nothing was sealed yet
    assert check_image(image) == []
    verify_image(image)  # every byte and mode, minus the backend's mask


@needs_immutable  # only a seal that writes back (immutable) seals as a batch
@pytest.mark.parametrize("what", ["file", "dir"])
def test_a_staged_entry_swapped_before_the_batch_seal_fails_and_publishes_nothing(
    src: Path, expected: Inventory, state: Path, monkeypatch: pytest.MonkeyPatch, what: str
) -> None:
    target = "bin/tool" if what == "file" else "lib/pkg"

    def before(root_fd: int) -> None:
        fd, name = _at(root_fd, target)
        try:
            os.rename(name, name + ".aside", src_dir_fd=fd, dst_dir_fd=fd)
            if what == "file":
                os.close(os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o755, dir_fd=fd))
            else:
                os.mkdir(name, 0o700, dir_fd=fd)
        finally:
            os.close(fd)

    _hook(monkeypatch, before)
    with pytest.raises(EnvironmentFailure) as e:
        freeze_tree(src, expected, state, backend="immutable")
    assert e.value.code == FreezeCode.STAGING_FAILED
    assert "not the inode that was created" in e.value.findings[0].detail
    assert e.value.findings[0].path == target
    assert os.listdir(state / "store") == [] and os.listdir(state / "staging") == []


def test_the_record_lists_every_entry_root_first(src: Path, expected: Inventory, state: Path) -> None:
    image = freeze_tree(src, expected, state, backend=BACKEND)
    assert [s.path for s in image.sealed] == ["", *sorted(e.path for e in expected.entries)]
    for s in image.sealed:
        st = os.lstat(os.path.join(image.path, s.path))
        assert (st.st_ino, st.st_ctime_ns, stat.S_ISDIR(st.st_mode)) == (s.ino, s.ctime_ns, s.is_dir)
