"""Every test file in the tree is collected by the suite's own configuration.

pytest's default ``norecursedirs`` skips folders named ``build``, which once hid tests/builder/
from every run while the suite was called green. This requires the configured collection to reach
every ``tests/**/test_*.py``: the running session's own when it is the configured one (no paths
given, nothing ignored), else one run in a fresh process.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from support import collected

ROOT = Path(__file__).resolve().parent.parent


def _collected_files(config: pytest.Config) -> set[str]:
    if collected.whole_configured_collection(config):  # this very session ran the configured collection: its files
        return set(collected.FILES)
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "-p", "no:xdist"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    return {line.split("::", 1)[0] for line in out.stdout.splitlines() if "::" in line}


def test_every_test_file_is_collected(request: pytest.FixtureRequest) -> None:
    on_disk = {str(p.relative_to(ROOT)) for p in (ROOT / "tests").rglob("test_*.py")}
    assert "tests/builder/test_build.py" in on_disk
    missing = sorted(on_disk - _collected_files(request.config))
    assert missing == [], f"test files the configured collection never reaches: {missing}"
