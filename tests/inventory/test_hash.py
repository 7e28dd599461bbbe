"""The inventory's one file-hashing helper: exact digests, bounded reads, and no second copy of it."""

from __future__ import annotations

import ast
import hashlib
import os
from pathlib import Path

import pytest

from attest.inventory import hash_fd
from attest.inventory._hash import CHUNK, SMALL, changed

PACKAGE = Path(__file__).resolve().parents[2] / "attest"


def _open(path: Path) -> int:
    return os.open(path, os.O_RDONLY)


@pytest.mark.parametrize(
    "size",
    [0, 1, 4095, SMALL - 1, SMALL, SMALL + 1, CHUNK - 1, CHUNK, CHUNK + 1, 3 * CHUNK + 17],
)
@pytest.mark.parametrize("with_buf", [True, False])
def test_hash_fd_is_sha256_of_the_whole_file(tmp_path: Path, size: int, with_buf: bool) -> None:
    data = os.urandom(size)
    (tmp_path / "f").write_bytes(data)
    fd = _open(tmp_path / "f")
    try:
        got = hash_fd(fd, size, bytearray(CHUNK) if with_buf else None)
    finally:
        os.close(fd)
    assert got == (hashlib.sha256(data).hexdigest(), size)


@pytest.mark.parametrize(("actual", "said"), [(10, 5), (SMALL + 10, SMALL), (5 * CHUNK, CHUNK + 1)])
def test_a_file_larger_than_its_stat_said_is_read_only_past_that_size(tmp_path: Path, actual: int, said: int) -> None:
    """A file that keeps growing cannot keep the walk busy: the count only shows it is too long."""
    (tmp_path / "f").write_bytes(b"a" * actual)
    fd = _open(tmp_path / "f")
    try:
        _, got = hash_fd(fd, said)
    finally:
        os.close(fd)
    assert said < got < actual


@pytest.mark.parametrize(("actual", "said"), [(0, 1), (10, 20), (SMALL, SMALL + 5000), (CHUNK, 2 * CHUNK)])
def test_a_file_shorter_than_its_stat_said_gives_its_real_count(tmp_path: Path, actual: int, said: int) -> None:
    data = b"b" * actual
    (tmp_path / "f").write_bytes(data)
    fd = _open(tmp_path / "f")
    try:
        assert hash_fd(fd, said) == (hashlib.sha256(data).hexdigest(), actual)
    finally:
        os.close(fd)


def _st(ino: int = 1, dev: int = 1, size: int = 5, mtime: int = 7, ctime: int = 9) -> os.stat_result:
    # Fields 13-15 of a full stat_result are st_atime_ns, st_mtime_ns, st_ctime_ns.
    return os.stat_result((0o100644, ino, dev, 1, 0, 0, size, 0, 0, 0, 0.0, 0.0, 0.0, 0, mtime, ctime))


@pytest.mark.parametrize(
    ("after", "want"),
    [
        (_st(), False),
        (_st(ino=2), True),
        (_st(dev=2), True),
        (_st(size=6), True),
        (_st(mtime=8), True),
        (_st(ctime=10), True),
    ],
)
def test_changed(after: os.stat_result, want: bool) -> None:
    assert changed(_st(), after) is want


def test_no_other_inventory_module_hashes_on_its_own() -> None:
    """One helper: besides _hash.py only the model hashes (its canonical bytes, not files)."""
    users = set()
    for path in sorted((PACKAGE / "inventory").glob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "hashlib":
                users.add(path.name)
            if isinstance(node, ast.Attribute) and node.attr == "readv":
                users.add(path.name)
    assert users == {"_hash.py", "_model.py"}
