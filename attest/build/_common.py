"""Pieces every builder shares: the builder's own identity and private staging."""

from __future__ import annotations

import hashlib
import os
import secrets
from pathlib import Path
from typing import Any

BUILDER_ID = "https://attest.dev/builders/hermetic/v1"


def builder_identity() -> dict[str, Any]:
    """Name and code digest of this builder: changing the builder renames every output."""
    here = Path(__file__).resolve().parent
    h = hashlib.sha256()
    for pkg in (here, here.parent / "git"):
        for f in sorted(pkg.glob("*.py")):
            h.update(f"{pkg.name}/{f.name}\0".encode())
            h.update(hashlib.sha256(f.read_bytes()).digest())
    # The worker installs with this process's interpreter and these libraries: their versions
    # are part of the builder too.
    import sys
    from importlib.metadata import version

    return {"id": BUILDER_ID, "code_sha256": h.hexdigest(), "python": sys.version.split()[0],
            "installer": version("installer"), "packaging": version("packaging")}


def make_staging(parent: str) -> str:
    """A new private (0700) staging directory under ``parent``; never an existing path."""
    os.makedirs(parent, mode=0o700, exist_ok=True)
    path = os.path.join(parent, "stage-" + secrets.token_hex(8))
    os.mkdir(path, 0o700)  # raises if it exists: a planted path is never reused
    return path


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
