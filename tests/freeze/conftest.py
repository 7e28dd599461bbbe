"""Fixtures for the freeze tests: real trees, real immutable flags (cleared at the end of the run: tests/conftest.py)."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.trees import make_tree

from attest.inventory import Inventory, inventory_tree


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


@pytest.fixture(scope="session")
def _erofs_disk() -> Iterator[Path]:
    """The session's directory on disk for erofs state (a tmpfs cannot back an image file); removed at the end."""
    from support.erofs import disk_root, remove_disk_roots

    yield disk_root()
    remove_disk_roots()


@pytest.fixture
def erofs_state(_erofs_disk: Path) -> Path:
    """A fresh state directory path on disk, for a test of the erofs backend."""
    return Path(tempfile.mkdtemp(dir=_erofs_disk)) / "state"


@pytest.fixture
def state(tmp_path: Path, request: pytest.FixtureRequest) -> Path:
    """The test's state directory: under tmp_path, or on disk when the test runs for the erofs backend."""
    callspec = getattr(request.node, "callspec", None)
    if callspec is not None and callspec.params.get("backend") == "erofs":
        return Path(request.getfixturevalue("erofs_state"))
    return tmp_path / "state"
