"""Shared fixtures: real filesystems under tmp_path, no mocks of os."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from support.caps import HAS_IMMUTABLE
from support.trees import make_tree

pytest_plugins = ["support.reason_record"]

# An ordinary user cannot set the immutable flag: the suite's images use the readonly backend,
# chosen explicitly the way such a user would ($ATTEST_BACKEND), never by a fallback in attest.
if not HAS_IMMUTABLE:
    os.environ.setdefault("ATTEST_BACKEND", "readonly")


@pytest.fixture
def sample_tree(tmp_path: Path) -> Path:
    return make_tree(
        tmp_path / "tree",
        {
            "README": b"hello\n",
            "bin": {"tool": b"#!/bin/sh\necho hi\n"},
            "lib": {"pkg": {"__init__.py": b"", "mod.py": b"X = 1\n"}},
            "empty": None,
        },
    )


@pytest.fixture(autouse=True)
def _clear_immutable_flags(request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    """Frozen images are immutable; clear the flags so pytest can remove tmp_path afterwards."""
    # Asking for tmp_path here (not after the yield) orders its teardown after this one's.
    tmp = request.getfixturevalue("tmp_path") if "tmp_path" in request.fixturenames else None
    yield
    if tmp is not None:
        import subprocess

        subprocess.run(["chattr", "-R", "-f", "-i", str(tmp)], check=False, capture_output=True)
