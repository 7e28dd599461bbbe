"""Long steps say so when piped: a line at the start, one at least every interval, one at the end with how it ended."""

from __future__ import annotations

import re
import time

import pytest

from attest.cli._app import working


def test_piped_progress_has_a_start_heartbeats_and_an_end(capsys: pytest.CaptureFixture[str]) -> None:
    with working("building the runtime", False, every=0.05):
        time.sleep(0.3)
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "attest: building the runtime: started"
    assert any(re.fullmatch(r"attest: building the runtime: still running \(\d+ s\)", line) for line in err[1:-1]), err
    assert re.fullmatch(r"attest: building the runtime: done after \d+\.\d s", err[-1]), err


@pytest.mark.parametrize(("error", "word"), [(KeyboardInterrupt, "interrupted"), (RuntimeError, "failed")])
def test_the_last_line_says_how_it_ended(error: type[BaseException], word: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(error), working("promoting", False, every=10):
        raise error()
    assert capsys.readouterr().err.splitlines()[-1].startswith(f"attest: promoting: {word} after ")


def test_json_mode_prints_no_progress(capsys: pytest.CaptureFixture[str]) -> None:
    with working("fetching", True, every=0.01):
        time.sleep(0.05)
    assert capsys.readouterr().err == ""
