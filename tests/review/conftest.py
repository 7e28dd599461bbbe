"""Fixtures of the review-evidence tests: a real HTTP server on 127.0.0.1 replaying API responses."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from support.github_replay import ReplayServer


@pytest.fixture
def api() -> Iterator[ReplayServer]:
    srv = ReplayServer()
    try:
        yield srv
    finally:
        srv.close()
