"""Fixtures of the review-evidence tests: a real HTTP server on 127.0.0.1 replaying API responses."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from github_replay import ReplayServer


@pytest.fixture
def api() -> Iterator[ReplayServer]:
    srv = ReplayServer()
    try:
        yield srv
    finally:
        srv.close()
