"""A default recipe, fixture or lock path works from any directory: the current directory's when it has one, else this checkout's."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from attest.cli._build import _default_path

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("default", ["builders/runtime.toml", "builders/skill.toml", "builders/fixture-consumer", "lockfiles/pylock.toml"])
def test_a_default_missing_here_is_the_checkouts(default: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert _default_path(default, default) == str(ROOT / default)
    (tmp_path / default).parent.mkdir()
    (tmp_path / default).write_text("mine\n")
    assert _default_path(default, default) == default  # the current directory's own wins


def test_a_path_the_user_named_is_never_replaced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert _default_path("recipes/runtime.toml", "builders/runtime.toml") == "recipes/runtime.toml"
    assert not os.path.exists("recipes/runtime.toml")



@pytest.mark.parametrize("recipe", ["builders/runtime.toml", "builders/skill.toml"])
def test_rebuild_finds_the_recipes_its_help_names_from_any_directory(recipe: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                    capfd: pytest.CaptureFixture[str]) -> None:
    """`attest rebuild builders/runtime.toml` outside the checkout reads this checkout's recipe, as `build runtime` does."""
    from attest.cli import main

    monkeypatch.chdir(tmp_path)
    assert main(["rebuild", recipe, "--rev", "abc", "--state-dir", str(tmp_path / "state")]) == 2
    err = capfd.readouterr().err
    assert "NOT_FULL_SHA" in err and "UNREADABLE" not in err, err  # the recipe was read; the revision is what is wrong
    assert str(ROOT / recipe) in err
