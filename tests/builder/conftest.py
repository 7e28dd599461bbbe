"""Fixtures for the build tests (helpers live in build_helpers.py)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from support.build import RUNTIME_RECIPE, SKILL_RECIPE, Project, make_toolchain_repo, write_lock


@pytest.fixture
def project(tmp_path: Path) -> Project:
    root = tmp_path / "proj"
    root.mkdir()
    wheels = root / "lockfiles" / "wheels"
    wheels.mkdir(parents=True)
    lock = write_lock(root, wheels)
    sha = make_toolchain_repo(root / "repo")
    builders = root / "builders"
    builders.mkdir()
    (builders / "runtime.toml").write_text(RUNTIME_RECIPE)
    (builders / "skill.toml").write_text(SKILL_RECIPE)
    return Project(root, root / "repo", sha, wheels, lock, builders / "runtime.toml", builders / "skill.toml",
                   tmp_path / "cache", tmp_path / "store")


def clear_immutable(path: Path) -> None:
    if path.exists():
        subprocess.run(["chattr", "-R", "-i", str(path)], capture_output=True)


@pytest.fixture(autouse=True)
def _unfreeze(tmp_path: Path):  # type: ignore[no-untyped-def]
    yield
    clear_immutable(tmp_path)
    for dirpath, dirnames, _ in os.walk(tmp_path):
        for d in dirnames:
            p = os.path.join(dirpath, d)
            if not os.path.islink(p):
                os.chmod(p, 0o755)
