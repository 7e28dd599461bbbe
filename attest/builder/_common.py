"""Pieces every builder shares: the builder's own identity and private staging."""

from __future__ import annotations

import fcntl
import hashlib
import os
import secrets
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .._safefs import O_DIR
from ..inventory import Inventory, inventory_tree

BUILDER_ID = "https://attest.dev/builders/hermetic/v1"

_FILE_MEMO: dict[tuple[str, int, int, int, int, int], str] = {}


def _file_sha256(path: str) -> str:
    """SHA-256 of a file, memoized in this process by its (inode, size, mtime, ctime)."""
    st = os.stat(path)
    key = (path, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    if key not in _FILE_MEMO:
        h = hashlib.sha256()
        with open(path, "rb", buffering=0) as f:
            while chunk := f.read(1 << 20):
                h.update(chunk)
        _FILE_MEMO[key] = h.hexdigest()
    return _FILE_MEMO[key]


def _loaded_libpython() -> list[str]:
    """The libpython files this process really mapped (none for a statically linked python)."""
    out: list[str] = []
    with open("/proc/self/maps", encoding="utf-8", errors="surrogateescape") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 6 and "/libpython" in parts[-1]:
                p = os.path.realpath(parts[-1])
                if p not in out:
                    out.append(p)
    return sorted(out)


def package_code_inventory(package: Path) -> Inventory:
    """The closed inventory of an installed package directory, bytecode caches left out."""
    return inventory_tree(package, ignore=("__pycache__/",))


def builder_identity() -> dict[str, object]:
    """Name and code digest of this builder: changing the builder renames every output.

    The code is the whole installed ``attest`` package (a closed inventory without
    ``__pycache__``: the build uses the inventory, freeze, git and attestation layers as well
    as its own), and the worker interpreter that runs the installer is its binary and the
    libpython it loaded, by digest.
    """
    from importlib.metadata import version  # lazy: ~5 ms measured on top of attest.builder; only a build reads the versions

    code = package_code_inventory(Path(__file__).resolve().parent.parent)
    exe = os.path.realpath(sys.executable)
    worker = {"executable_sha256": _file_sha256(exe),
              "libpython": [{"sha256": _file_sha256(p), "name": os.path.basename(p)} for p in _loaded_libpython()]}
    return {"id": BUILDER_ID, "code_sha256": code.digest_hex, "code_inventory": code.identity, "python": sys.version.split()[0],
            "worker_interpreter": worker, "installer": version("installer"), "packaging": version("packaging")}


#: The build staging directories an interrupted build (``KeyboardInterrupt``, Ctrl-C) held, each with
#: whether it is still there once the build's own cleanup ran: what ``attest`` reports as cleaned or left.
INTERRUPTED_STAGING: list[tuple[str, bool]] = []


@contextmanager
def make_staging(parent: str) -> Iterator[str]:
    """A new private (0700) staging directory under ``parent``, held while the context lasts.

    Never an existing path. The directory is ``flock``-ed exclusively for as long as the build
    runs, so ``attest store gc`` removes only staging that no live process holds (an
    interrupted build's).
    """
    os.makedirs(parent, mode=0o700, exist_ok=True)
    path = os.path.join(parent, "stage-" + secrets.token_hex(8))
    os.mkdir(path, 0o700)  # raises if it exists: a planted path is never reused
    fd = os.open(path, O_DIR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield path
    except KeyboardInterrupt:
        INTERRUPTED_STAGING.append((path, os.path.lexists(path)))  # after the caller's cleanup, which ran first
        raise
    finally:
        os.close(fd)


def ensure_state(state: str) -> str:
    """Create the state directory (0700) when absent; the freeze layer checks it is private."""
    path = os.path.abspath(state)
    if not os.path.lexists(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            pass
    return path
