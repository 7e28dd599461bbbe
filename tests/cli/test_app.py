"""The command-line app: built once per process, every command registered exactly once."""

from __future__ import annotations

import pytest
import typer
from typer.core import TyperGroup

import attest.cli as cli
from attest.cli import COMMAND_MODULES, build_app, main


def _names(app: typer.Typer) -> list[str]:
    names = [c.name or (c.callback.__name__ if c.callback else "") for c in app.registered_commands]
    names += [g.name or "" for g in app.registered_groups]
    return names


def test_main_called_fifty_times_registers_each_command_once(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    command = cli._APP
    assert isinstance(command, TyperGroup)
    for _ in range(49):
        assert main(["--help"]) == 0
    capsys.readouterr()
    assert cli._APP is command, "the process's command was built again"
    names = list(command.commands)
    assert len(names) == len(set(names)), names
    assert {"inventory", "check", "freeze", "exec", "store", "build", "evidence", "demo"} <= set(names)
    assert sorted(names) == sorted(_names(build_app())), "the process's command is not of the app build_app makes"
    out = main(["store", "--help"])
    help_text = capsys.readouterr().out
    assert out == 0 and help_text.count(" ls ") == 1 and help_text.count(" gc ") == 1


def test_a_missing_command_module_is_an_error_not_an_omission() -> None:
    with pytest.raises(ModuleNotFoundError):
        build_app((*COMMAND_MODULES, "_no_such_commands"))


def test_version_and_short_help(capsys: pytest.CaptureFixture[str]) -> None:
    """`attest --version` and `-h` everywhere."""
    from attest import __version__
    from attest.cli import main

    assert main(["--version"]) == 0 and capsys.readouterr().out == f"attest {__version__}\n"
    for args in (["-h"], ["inventory", "-h"], ["review", "exec", "-h"], ["store", "gc", "-h"]):
        assert main(args) == 0, args
        assert capsys.readouterr().out.startswith("Usage: attest"), args
