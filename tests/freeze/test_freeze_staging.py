"""Hostile state directories and staging (THREATS.md B: filelock CVE-2025-68146, Nix CVE-2026-39860)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from support.caps import BACKEND
from support.trees import all_paths
from test_freeze_store import frozen_view

from attest.errors import EnvironmentFailure, VerificationError
from attest.freeze import Store, check_image, freeze_tree
from attest.freeze._state import make_private_dir, open_state, remove_tree
from attest.inventory import Inventory, verify_tree


def test_a_pre_created_staging_path_is_never_reused(tmp_path: Path) -> None:
    parent = tmp_path / "staging"
    parent.mkdir(mode=0o700)
    (parent / "tmp-taken").mkdir()
    (parent / "tmp-linked").symlink_to(tmp_path / "elsewhere")
    fd = os.open(parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for name in ("tmp-taken", "tmp-linked"):
            with pytest.raises(VerificationError) as err:
                make_private_dir(fd, name, str(parent / name))
            assert err.value.code == "STAGING_EXISTS"
        new = make_private_dir(fd, "tmp-fresh", str(parent / "tmp-fresh"))
        os.close(new)
    finally:
        os.close(fd)
    assert not (tmp_path / "elsewhere").exists()


@pytest.mark.parametrize("sub", ["staging", "store", "uses"])
def test_a_symlink_planted_in_the_state_dir_is_refused(src: Path, expected: Inventory, state: Path, tmp_path: Path, sub: str) -> None:
    state.mkdir(mode=0o700)
    decoy = tmp_path / "decoy"
    decoy.mkdir(mode=0o700)
    (state / sub).symlink_to(decoy)
    with pytest.raises(VerificationError) as err:
        freeze_tree(src, expected, state, backend=BACKEND)
    assert err.value.code == "STATE_SYMLINK"
    assert os.listdir(decoy) == []


def test_a_state_dir_behind_a_symlink_is_refused(src: Path, expected: Inventory, tmp_path: Path) -> None:
    real = tmp_path / "real-state"
    real.mkdir(mode=0o700)
    (tmp_path / "link").symlink_to(real)
    with pytest.raises(VerificationError) as err:
        freeze_tree(src, expected, tmp_path / "link" / "state", backend=BACKEND)
    assert err.value.code == "STATE_SYMLINK"
    assert os.listdir(real) == []


def test_a_state_dir_other_users_can_enter_is_refused(src: Path, expected: Inventory, state: Path) -> None:
    state.mkdir(mode=0o755)
    os.chmod(state, 0o755)
    with pytest.raises(EnvironmentFailure) as err:
        freeze_tree(src, expected, state, backend=BACKEND)
    assert err.value.code == "STATE_INSECURE"


def test_a_state_dir_that_cannot_be_created_fails_closed(src: Path, expected: Inventory, tmp_path: Path) -> None:
    with pytest.raises(EnvironmentFailure) as err:
        freeze_tree(src, expected, tmp_path / "no" / "such" / "state", backend=BACKEND)
    assert err.value.code == "STAGING_FAILED"


def test_a_symlink_planted_at_the_store_name_is_removed_not_followed(
    src: Path, expected: Inventory, state: Path, tmp_path: Path
) -> None:
    """An attacker's directory at store/<hex> must neither be trusted nor written through."""
    decoy = tmp_path / "decoy"
    decoy.mkdir()
    (decoy / "tree").mkdir()
    (decoy / "keep").write_bytes(b"attacker's file")
    open_fd = open_state(state)
    os.close(open_fd)
    (state / "store").mkdir(mode=0o700)
    (state / "store" / expected.digest_hex).symlink_to(decoy)
    image = freeze_tree(src, expected, state, backend=BACKEND)
    assert not image.reused and not os.path.islink(Path(image.path).parent)
    verify_tree(image.path, frozen_view(expected))
    assert all_paths(decoy) == ["keep", "tree"]


def test_a_planted_directory_at_the_store_name_is_not_trusted(src: Path, expected: Inventory, state: Path) -> None:
    os.close(open_state(state))
    (state / "store").mkdir(mode=0o700)
    planted = state / "store" / expected.digest_hex
    (planted / "tree").mkdir(parents=True)
    (planted / "tree" / "README").write_bytes(b"evil\n")
    image = freeze_tree(src, expected, state, backend=BACKEND)
    assert not image.reused
    assert (Path(image.path) / "README").read_bytes() == b"hello\n"
    assert check_image(image) == []


def test_remove_tree_clears_flags_and_never_follows_links(src: Path, expected: Inventory, state: Path, tmp_path: Path) -> None:
    image = freeze_tree(src, expected, state, backend=BACKEND)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious").write_bytes(b"keep me")
    work = tmp_path / "work"
    work.mkdir()
    (work / "link").symlink_to(outside)
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        remove_tree(fd, "work")
    finally:
        os.close(fd)
    assert (outside / "precious").read_bytes() == b"keep me" and not work.exists()
    assert Store(state).gc(recent=0, now=1e12).removed == (image.identity,)
    assert not Path(image.path).exists()
