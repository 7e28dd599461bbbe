"""`attest exec` never passes variables that load code from outside the images (security review)."""

from __future__ import annotations

from pathlib import Path

import pytest

from attest.errors import InputError
from attest.freeze import run_from_images


@pytest.mark.parametrize("var", ["LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "PYTHONPATH", "PYTHONSTARTUP", "PYTHONHOME", "BASH_ENV", "NODE_OPTIONS", "PERL5OPT"])
def test_code_injecting_variables_are_refused(tmp_path: Path, var: str) -> None:
    with pytest.raises(InputError) as info:
        run_from_images(tmp_path / "state", {"T": "sha256:" + "0" * 64}, ["true"], set_env={var: "/tmp/evil"})
    assert info.value.code == "BAD_EXEC_ENV" and info.value.path == var


def test_code_injecting_variables_are_not_passed_through_either(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LD_PRELOAD", "/tmp/evil.so")
    with pytest.raises(InputError) as info:
        run_from_images(tmp_path / "state", {"T": "sha256:" + "0" * 64}, ["true"], pass_env=["LD_PRELOAD"])
    assert info.value.code == "BAD_EXEC_ENV"
