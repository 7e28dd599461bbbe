"""Attack review: the source changed at the exact moment materialize opens or copies an
entry (deterministic hooks), and a published image whose entry changed mode or link count."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from support.caps import BACKEND
from support.erofs import needs_erofs
from test_freeze_store import frozen_view

from attest.errors import VerificationError
from attest.freeze import Store, _materialize, check_image, freeze_tree
from attest.inventory import Inventory, verify_tree

REAL_OPEN = _materialize.open_listed_at
REAL_COPY = _materialize._copy
BACKENDS = [BACKEND, pytest.param("erofs", marks=needs_erofs)]


def _hook_open(monkeypatch: pytest.MonkeyPatch, target: str, mutate) -> None:  # type: ignore[no-untyped-def]
    done = []

    def open_(dfd: int, name: str, listed: os.stat_result):  # type: ignore[no-untyped-def]
        if name == target and not done:
            done.append(1)
            mutate(dfd, name)
        return REAL_OPEN(dfd, name, listed)

    monkeypatch.setattr(_materialize, "open_listed_at", open_)


def _refused(src: Path, expected: Inventory, state: Path, backend: str) -> set[str]:
    with pytest.raises(VerificationError) as e:
        freeze_tree(src, expected, state, backend=backend, workers=1)
    assert os.listdir(state / "store") == []
    return {f.code for f in e.value.findings}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("what", ["symlink", "fifo", "hardlink", "setuid", "other-inode"])
def test_file_swapped_between_listing_and_open(src: Path, expected: Inventory, state: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, what: str,
                                               backend: str) -> None:
    twin = tmp_path / "twin"
    twin.write_bytes(b"hello\n")

    def mutate(dfd: int, name: str) -> None:
        if what == "symlink":
            os.unlink(name, dir_fd=dfd)
            os.symlink(str(twin), name, dir_fd=dfd)
        elif what == "fifo":
            os.unlink(name, dir_fd=dfd)
            os.mkfifo(name, dir_fd=dfd)
        elif what == "hardlink":
            os.link(name, str(tmp_path / "alias"), src_dir_fd=dfd)
        elif what == "setuid":
            os.chmod(name, 0o4644, dir_fd=dfd)
        else:
            os.unlink(name, dir_fd=dfd)
            os.link(str(twin), name, dst_dir_fd=dfd)
            os.unlink(twin)

    _hook_open(monkeypatch, "README", mutate)
    assert _refused(src, expected, state, backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_dir_swapped_for_symlink_between_listing_and_open(src: Path, expected: Inventory, state: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          backend: str) -> None:
    def mutate(dfd: int, name: str) -> None:
        os.rename(name, str(tmp_path / "lib-copy"), src_dir_fd=dfd)
        os.symlink(str(tmp_path / "lib-copy"), name, dir_fd=dfd)

    _hook_open(monkeypatch, "lib", mutate)
    assert _refused(src, expected, state, backend) >= {"SYMLINK"}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("how", ["rewrite", "truncate", "grow"])
def test_source_changed_mid_copy(src: Path, expected: Inventory, state: Path, monkeypatch: pytest.MonkeyPatch, how: str, backend: str) -> None:
    target = src / "big.bin"
    want = os.stat(target).st_ino
    done = []

    def copy_(s: int, d: int, size: int, use_cfr: bool) -> int:
        if os.fstat(s).st_ino == want and not done:
            done.append(1)
            half = size // 2
            n = REAL_COPY(s, d, half, use_cfr)
            if how == "rewrite":
                os.pwrite(os.open(target, os.O_WRONLY), b"\xff" * (size - half), half)
            elif how == "truncate":
                os.truncate(target, half + 10)
            else:
                with open(target, "ab") as f:
                    f.write(b"x" * 4096)
            return n + REAL_COPY(s, d, size - half, use_cfr)
        return REAL_COPY(s, d, size, use_cfr)

    monkeypatch.setattr(_materialize, "_copy", copy_)
    if how == "grow":
        # Only the attested size is copied: the published image must equal the attested bytes.
        try:
            image = freeze_tree(src, expected, state, backend=backend, workers=1)
        except VerificationError:
            return
        Store(state).get(image.identity)  # every byte, as every use reads them
        if image.erofs is None:
            verify_tree(image.path, frozen_view(expected))
        return
    assert _refused(src, expected, state, backend)


# -- check_image on a published image -----------------------------------------------------


@pytest.mark.parametrize("what", ["chmod-x", "setuid", "hardlink", "chmod-dir", "sticky-dir"])
def test_check_image_sees_mode_and_link_changes(src: Path, expected: Inventory, state: Path, tmp_path: Path, what: str) -> None:
    image = freeze_tree(src, expected, state, backend="readonly", workers=1)
    f = Path(image.path) / "README"
    d = Path(image.path) / "lib"
    # Immediately after the seal, no sleep: the change time must still move.
    if what == "chmod-x":
        os.chmod(f, 0o555)
    elif what == "setuid":
        os.chmod(f, 0o4444)
    elif what == "hardlink":
        os.link(f, tmp_path / "alias")
    elif what == "chmod-dir":
        os.chmod(d, 0o755)
    else:
        os.chmod(d, 0o1555)
    for flags in (True, False):
        assert check_image(image, flags=flags), (what, flags)
    if what == "hardlink":
        assert os.stat(f).st_nlink == 2
        assert stat.S_ISREG(os.stat(f).st_mode)
