"""The backend is chosen explicitly: --backend, else $ATTEST_BACKEND, else immutable; never a silent fallback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from support.trees import make_tree

from attest.errors import InputError
from attest.freeze import BACKEND_ENV, FreezeCode, freeze_tree, resolve_backend
from attest.inventory import inventory_tree


@pytest.mark.parametrize(
    ("given", "env", "chosen"),
    [
        (None, None, "immutable"),
        (None, "", "immutable"),  # an empty variable is unset
        (None, "readonly", "readonly"),
        (None, "ro-bind", "ro-bind"),
        ("immutable", "readonly", "immutable"),  # the option wins over the environment
        ("readonly", None, "readonly"),
        ("ro-bind", "immutable", "ro-bind"),
    ],
)
def test_which_backend_is_chosen(monkeypatch: pytest.MonkeyPatch, given: str | None, env: str | None, chosen: str) -> None:
    if env is None:
        monkeypatch.delenv(BACKEND_ENV, raising=False)
    else:
        monkeypatch.setenv(BACKEND_ENV, env)
    assert resolve_backend(given) == chosen


@pytest.mark.parametrize(("given", "env", "named"), [("tmpfs", None, "'tmpfs'"), (None, "Immutable", "'Immutable' (from $ATTEST_BACKEND)")])
def test_an_unknown_backend_is_bad_usage(monkeypatch: pytest.MonkeyPatch, given: str | None, env: str | None, named: str) -> None:
    if env is None:
        monkeypatch.delenv(BACKEND_ENV, raising=False)
    else:
        monkeypatch.setenv(BACKEND_ENV, env)
    with pytest.raises(InputError) as ei:
        resolve_backend(given)
    assert ei.value.code == FreezeCode.UNKNOWN_BACKEND and named in ei.value.detail


def test_the_environment_choice_is_recorded_with_the_image(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    src = make_tree(tmp_path / "src", {"README": b"hello\n"})
    monkeypatch.setenv(BACKEND_ENV, "readonly")
    image = freeze_tree(src, inventory_tree(src), tmp_path / "state")
    assert image.backend == "readonly"


def test_a_build_with_an_unknown_backend_stops_before_it_builds(tmp_path: Path) -> None:
    state = tmp_path / "state"
    done = subprocess.run([sys.executable, "-m", "attest", "build", "skill", "builders/skill.toml", "--skill-rev", "0" * 40,
                           "--state-dir", str(state), "--backend", "tmpfs", "--json"], capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 2 and '"UNKNOWN_BACKEND"' in done.stdout, done.stdout + done.stderr
    assert not (state / "store").exists()
