"""Fixtures of the review tests: the shared deployment (a real promotion) and a real HTTP server replaying API responses."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from support.deployment import Deployment, install, make_deployment, unfreeze
from support.github_replay import ReplayServer


@pytest.fixture
def api() -> Iterator[ReplayServer]:
    srv = ReplayServer()
    try:
        yield srv
    finally:
        srv.close()


@pytest.fixture(scope="session")
def dep(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    """One real promotion per test session (per xdist worker), shared read-only by every review test module."""
    tmp = tmp_path_factory.mktemp("bootstrap")
    yield make_deployment(tmp)
    unfreeze(tmp)


@pytest.fixture
def skill(dep: Deployment, tmp_path: Path) -> tuple[Path, Path]:
    """A fresh installation of the pinned skill: (installed root, installation attestation)."""
    return install(dep, tmp_path)
