"""The README's first command runs the demo: it must pass end to end, and twice in a row."""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path

import pytest

from attest.cli import main
from attest.cli._demo import heartbeat


def test_demo_runs_end_to_end_and_is_rerunnable(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    for _ in range(2):
        # --offline: the suite needs no network; the runtime build is covered by tests/builder.
        assert main(["demo", "--state-dir", str(tmp_path / "state"), "--offline"]) == 0
        out = capfd.readouterr().out
        assert "refused, as it must be (one changed byte)" in out
        assert "refused, as it must be (a tampered tree)" in out
        assert "refused, as it must be (a tampered source)" in out and "hello from a frozen image" in out
        assert "rebuilt in another staging context: same name" in out
        assert "skipped (--offline" in out
        assert out.rstrip().endswith("demo complete: every check ended as it must.")
        # Wrapped at word boundaries to 100 columns: only a single word longer than that (a path) may overflow.
        assert all(len(line) <= 100 or len(line.split()) == 1 for line in out.splitlines()), out
        assert f"to remove {tmp_path / 'state'}, run `attest store gc --state-dir {tmp_path / 'state'} --recent 0`" in " ".join(out.split())


def test_the_default_state_inside_another_repository_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                  capfd: pytest.CaptureFixture[str]) -> None:
    import subprocess

    other = tmp_path / "someones-repo"
    (other / "sub").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(other)], check=True)
    monkeypatch.chdir(other / "sub")
    assert main(["demo", "--offline"]) == 2
    err = capfd.readouterr().err
    assert "USAGE" in err and f"inside the git repository {other}" in err and "--state-dir" in err
    assert not (other / "sub" / ".attest-state").exists()
    # Given explicitly, the choice is the caller's.
    from attest.demo import check_default_state

    assert check_default_state(tmp_path / "elsewhere" / ".attest-state") == tmp_path / "elsewhere" / ".attest-state"


def test_a_silent_step_says_on_stderr_that_it_is_still_running(capsys: pytest.CaptureFixture[str]) -> None:
    """Between two lines of the demo, a line on stderr at least every ``every`` seconds names the step and its time;
    stdout holds the demo's own lines only, and the heartbeat stops with the demo."""
    said: list[str] = []
    err = ""
    with heartbeat(said.append, every=0.2) as say:
        say("11. promote the runtime")
        deadline = time.monotonic() + 30  # the heartbeat thread may be slow to run on a loaded machine: wait for it
        while "still running" not in err and time.monotonic() < deadline:
            time.sleep(0.05)
            err += capsys.readouterr().err
        say("   promoted")
    assert said == ["11. promote the runtime", "   promoted"]
    lines = err.splitlines()
    assert lines and all(re.fullmatch(r"attest: demo step 11: still running \(\d+ s\)", line) for line in lines), lines
    assert not any(t.name == "attest-demo-heartbeat" for t in threading.enumerate())
