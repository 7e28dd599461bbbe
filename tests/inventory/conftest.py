"""Run the walker tests both ways: in one process, and with the walk split across a forked child."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from attest.inventory import _walk


@pytest.fixture(params=["one-process", "forked"])
def walk_mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    # forked: fork as soon as there is anything to share, so even small test trees take that path.
    monkeypatch.setattr(_walk, "_FORK_AFTER", 0 if request.param == "forked" else 10**9)
    yield request.param
