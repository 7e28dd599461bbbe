"""What this machine lets the test process do, asked once; the markers that say so.

The suite must pass as root and as an ordinary user. As root every test runs. As an ordinary
user the tests that exercise a root-only guarantee (the immutable flag, a loop device, a
chown to another uid) are skipped with the capability they need, and everything else runs
with the backend this user can establish: ``readonly``, chosen explicitly through
``$ATTEST_BACKEND`` (see tests/conftest.py), never by a silent fallback in attest.
"""

from __future__ import annotations

import os
import shutil
import tempfile

import pytest

from attest.errors import EnvironmentFailure
from attest.freeze import ImmutableBackend

__all__ = ["BACKEND", "HAS_IMMUTABLE", "IS_ROOT", "SYSTEM_PATH", "needs_immutable", "needs_root", "require_tool", "system_tool"]


def _immutable_problem() -> str | None:
    """Why the immutable backend cannot be established in the temporary directory, or None."""
    scratch = tempfile.mkdtemp(prefix="attest-caps-")
    fd = os.open(scratch, os.O_RDONLY | os.O_DIRECTORY)
    try:
        ImmutableBackend().probe(fd, scratch)
    except EnvironmentFailure as e:
        return e.detail
    finally:
        os.close(fd)
        os.rmdir(scratch)
    return None


IS_ROOT = os.geteuid() == 0
IMMUTABLE_PROBLEM = _immutable_problem()
HAS_IMMUTABLE = IMMUTABLE_PROBLEM is None
#: The backend the suite's images are frozen with: the strongest this user can establish.
BACKEND = "immutable" if HAS_IMMUTABLE else "readonly"

needs_immutable = pytest.mark.skipif(not HAS_IMMUTABLE, reason=f"needs the immutable flag: {IMMUTABLE_PROBLEM}")
needs_root = pytest.mark.skipif(not IS_ROOT, reason="needs root (uid 0); the suite as an ordinary user skips it")

#: Where the system tools a test runs live, whatever $PATH says: an ordinary user's PATH (or a
#: CI runner's) may lack /usr/sbin, the home of losetup(8), mkfs.*(8), ip(8).
SYSTEM_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"


def system_tool(name: str) -> str | None:
    """The absolute path of the system tool ``name`` in :data:`SYSTEM_PATH` (never ``$PATH``), or None."""
    return shutil.which(name, path=SYSTEM_PATH)


def require_tool(name: str) -> str:
    """The absolute path of the system tool ``name``; skips the calling test, saying so, when there is none."""
    found = system_tool(name)
    if found is None:
        pytest.skip(f"needs {name}, which is in none of {SYSTEM_PATH}")
    return found
