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
        # The README: the clean-up commands come just before the last line.
        tail = " ".join(out[out.rindex("(the store's images are immutable"):].split())
        assert tail.endswith("then remove the directory) demo complete: every check ended as it must."), tail


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


@pytest.mark.parametrize(("rc", "log", "codes"), [
    (2, '{"ok": false, "errors": [{"code": "NOT_IN_CACHE", "path": "/c", "detail": "fetch first"}]}\n', ["NOT_IN_CACHE"]),
    (1, "Traceback (most recent call last):\n  boom\n", ["INTERNAL"]),  # no document: what it printed, as INTERNAL
    (0, '{"ok": false, "errors": []}\n', ["INTERNAL"]),  # exit 0 but not ok: still a failure
    (0, "", ["INTERNAL"]),
    (0, '{"ok": true, "output": \n', ["INTERNAL"]),  # a cut document
])
def test_a_failing_rebuilder_fails_the_demo_with_its_own_errors(tmp_path: Path, rc: int, log: str, codes: list[str]) -> None:
    from attest.demo import _rebuilt
    from attest.errors import VerificationError

    path = tmp_path / "rebuilder-a.log"
    path.write_text(log)
    said: list[str] = []
    with pytest.raises(VerificationError) as ei:
        _rebuilt("rebuilder-a", rc, path, said.append)
    assert [f.code for f in ei.value.findings] == codes and said == []


def test_a_rebuilder_that_signed_says_what_it_built(tmp_path: Path) -> None:
    from attest.demo import _rebuilt

    path = tmp_path / "rebuilder-b.log"
    path.write_text('{"ok": true, "output": "/r/b.json", "runtime": {"identity": "sha256:' + "a" * 64 + '", "reused": false}, '
                    '"skill": {"identity": "sha256:' + "b" * 64 + '", "reused": false}}\n')
    said: list[str] = []
    assert _rebuilt("rebuilder-b", 0, path, said.append) == "/r/b.json"
    assert said == ["   rebuilder-b rebuilt: runtime sha256:aaaaaaaaaaaa…, skill sha256:bbbbbbbbbbbb…; signed /r/b.json"]
