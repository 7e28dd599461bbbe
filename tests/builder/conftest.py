"""Fixtures for the build tests (helpers live in build_helpers.py)."""

from __future__ import annotations

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

