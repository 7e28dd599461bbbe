"""attest's coercion of plain parameters (attest.cli._coerce) gives what typer's own gives, value for value.

typer 0.29 coerces through pydantic adapters; attest installs a coercion without pydantic on every
plain parameter. For every parameter of the app (the help options too) and a table of values of
its type, both give an equal value of the same type, or both refuse with the same error and message.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer
from support.coercion import outcome, parameters
from typer._click import Context
from typer._coercion import build_runtime_param

from attest.cli import _process_app
from attest.cli._app import HELP_OPTION_NAMES
from attest.cli._coerce import _PlainRuntimeParam, plain_coercion, plain_leaf

ROOT = Path(__file__).resolve().parents[2]


PARAMETERS = parameters(_process_app())


def _flagged_paths() -> Any:
    """A command whose path parameters carry typer's checks (the app's own carry none today)."""
    app = typer.Typer(context_settings={"help_option_names": list(HELP_OPTION_NAMES)})

    @app.command()
    def paths(existing: Path = typer.Option(None, exists=True), no_file: Path = typer.Option(None, file_okay=False),
              no_dir: Path = typer.Option(None, dir_okay=False), resolved: Path = typer.Option(None, resolve_path=True),
              many: list[Path] = typer.Option(None, exists=True), dash: Path = typer.Option(None, allow_dash=True)) -> None:
        """Paths with checks."""

    return plain_coercion(typer.main.get_command(app))


def _values(annotation: Any, tmp: Path) -> list[Any]:
    strings = ["abc", "", " x ", "-", "123", "0123", "+3", " 3", "3.0", "1e3", ".5", "nan", "-1", "1_000", "99999999999999999999",
               "ünï", "a\udcffb", "a\0b", "yes", "0", "true", str(tmp / "file"), str(tmp / "dir"), str(tmp / "missing"), "rel/x"]
    scalars = [*strings, 5, 2.5, True, False, Path("/x"), tmp / "file", tmp / "dir", b"bytes"]
    if annotation in (list[str], list[Path]):
        return [[], ["a", "b"], ("a",), (str(tmp / "file"), str(tmp / "dir")), ["a", "a\udcffb"], ["a", ""], [Path("/x")], "a"]
    return scalars


@pytest.mark.parametrize("which", ["the app", "flagged paths"])
def test_every_plain_parameter_coerces_as_typer_does(tmp_path: Path, which: str) -> None:
    (tmp_path / "file").write_text("x")
    (tmp_path / "dir").mkdir()
    checked = 0
    for path, command, param in (PARAMETERS if which == "the app" else parameters(_flagged_paths())):
        plain = param._runtime_param
        descriptor = param.type_descriptor
        if plain_leaf(descriptor) is None:
            assert plain is None or not isinstance(plain, _PlainRuntimeParam), (path, param.name)
            continue
        assert isinstance(plain, _PlainRuntimeParam), f"{path} {param.name}: no plain coercion installed"
        typers = build_runtime_param(descriptor)
        ctx = Context(command, info_name=path)
        for value in [None, *_values(descriptor.annotation, tmp_path)]:
            ours = outcome(lambda: plain.coerce(value, param=param, ctx=ctx))  # noqa: B023 - called at once
            theirs = outcome(lambda: typers.coerce(value, param=param, ctx=ctx))  # noqa: B023 - called at once
            assert ours == theirs, f"{path} {param.name} ({descriptor.annotation}) of {value!r}: {ours} != typer's {theirs}"
            checked += 1
    assert checked > (5000 if which == "the app" else 100)


def test_only_a_ranged_or_choice_parameter_keeps_typers_coercion() -> None:
    kept = [(path, p.name) for path, _, p in PARAMETERS if not isinstance(p._runtime_param, _PlainRuntimeParam)]
    assert kept == [("attest store gc", "recent")]  # a float with a minimum: typer's own


def test_a_command_line_imports_no_pydantic() -> None:
    """Neither the in-process app nor the console script's one-module app imports pydantic to read a command line."""
    code = ("import sys\nfrom attest.cli import main\n"
            "rc = main(['inventory', '--ignore', 'x', sys.argv[1]])\n"
            "assert 'pydantic' not in sys.modules, 'pydantic imported'\nsys.exit(rc)")
    proc = subprocess.run([sys.executable, "-c", code, str(ROOT / "docs")], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith('{"entries":')
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "attest", "inventory", "--ignore", "x", str(ROOT / "docs")],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0 and proc.stdout.startswith('{"entries":'), proc.stderr[-2000:]
    assert "| typer" in proc.stderr  # the console script did import typer: the check below looks at the right imports
    assert "pydantic" not in proc.stderr


@pytest.mark.parametrize("value", ["+x", "3.5"])
def test_a_value_it_does_not_take_gets_typers_own_error(value: str) -> None:
    proc = subprocess.run([sys.executable, "-m", "attest", "merge-gate", "ci-result", "--repository-id", value], capture_output=True,
                          text=True, check=False)
    assert proc.returncode == 2 and "Invalid value for '--repository-id'" in proc.stderr, proc.stderr
    assert "unable to parse string as an integer" in proc.stderr, proc.stderr  # pydantic's words: typer's own coercion ran
