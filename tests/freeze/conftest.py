"""Fixtures for the freeze tests: real trees, real immutable flags, cleaned up after each test."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.trees import make_tree

from attest.inventory import Inventory, inventory_tree


@pytest.fixture(autouse=True)
def _clear_immutable_flags(tmp_path: Path) -> Iterator[None]:
    """Images are immutable; pytest could not remove tmp_path without clearing the flags."""
    yield
    subprocess.run(["chattr", "-R", "-f", "-i", str(tmp_path)], check=False, capture_output=True)


@pytest.fixture
def src(tmp_path: Path) -> Path:
    return make_tree(
        tmp_path / "src",
        {
            "README": b"hello\n",
            "bin": {"tool": (b"#!/bin/sh\necho tool ran\n", 0o755)},
            "lib": {"pkg": {"__init__.py": b"", "mod.py": b"VALUE = 41 + 1\n"}},
            "big.bin": bytes(range(256)) * 2048,
            "empty": None,
        },
    )


@pytest.fixture
def expected(src: Path) -> Inventory:
    return inventory_tree(src)


@pytest.fixture
def state(tmp_path: Path) -> Path:
    return tmp_path / "state"
