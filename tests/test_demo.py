"""The README's first command runs the demo: it must pass end to end, and twice in a row."""

from __future__ import annotations

from pathlib import Path

import pytest

from attest.cli import main


def test_demo_runs_end_to_end_and_is_rerunnable(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    for _ in range(2):
        # --offline: the suite needs no network; the runtime build is covered by tests/build.
        assert main(["demo", "--state-dir", str(tmp_path / "state"), "--offline"]) == 0
        out = capfd.readouterr().out
        assert "refused, as it must be (one changed byte)" in out
        assert "refused, as it must be (a tampered tree)" in out
        assert "refused, as it must be (a tampered source)" in out and "hello from a frozen image" in out
        assert "rebuilt in another staging context: same name" in out
        assert "skipped (--offline" in out
        assert out.rstrip().endswith("demo complete: every check ended as it must.")
