"""`attest --help` from the cached texts (attest.cli._fasthelp): typer's own bytes, without typer."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from attest.cli import _fasthelp, _helptext

_NO_TYPER = (
    "import sys\n"
    "sys.argv = ['attest', *sys.argv[1:]]\n"
    "from attest.cli import main\n"
    "rc = main()\n"
    "sys.stdout.flush()\n"
    "assert 'typer' not in sys.modules and 'typing' not in sys.modules, 'the help path imported typer or typing'\n"
    "sys.exit(rc)\n"
)


def test_the_cache_is_typers_output_for_every_command_path() -> None:
    assert _helptext.FINGERPRINT == _fasthelp.fingerprint(), "stale: run python docs/gen_cli.py"
    assert _helptext.MODULES == _fasthelp.command_modules()
    assert {path[0] for path in _helptext.TEXTS if len(path) == 1} == set(_helptext.MODULES)
    rendered = _fasthelp.render_all()
    assert set(rendered) == set(_helptext.TEXTS)
    assert {(), ("freeze",), ("store", "gc"), ("review", "exec"), ("build", "runtime")} <= set(rendered)
    for path, text in rendered.items():
        assert _helptext.TEXTS[path] == text, path


@pytest.mark.parametrize(
    ("args", "hit"),
    [
        (["--help"], ()),
        (["-h"], ()),
        (["freeze", "--help"], ("freeze",)),
        (["store", "gc", "-h"], ("store", "gc")),
        (["review", "exec", "--help"], ("review", "exec")),
        ([], None),
        (["freeze"], None),
        (["--help", "--help"], None),
        (["-h", "freeze", "--help"], None),
        (["", "--help"], None),
        (["store gc", "--help"], None),
        (["no-such-command", "--help"], None),
        (["freeze", "--json", "--help"], None),
        (["freeze", "src", "--help"], None),
        (["--version", "-h"], None),
    ],
)
def test_which_command_lines_the_cache_answers(args: list[str], hit: tuple[str, ...] | None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    got = _fasthelp.cached_help(args)
    assert got == (None if hit is None else _helptext.TEXTS[hit])


@pytest.mark.parametrize(("columns", "answered"), [("80", True), ("200", True), ("79", False), ("40", False), ("0", True), ("x", True)])
def test_a_narrow_terminal_goes_to_typer(columns: str, answered: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    # "0" and "x" are not a width: click then asks the terminal, and without one assumes 80 (pytest captures stdout).
    monkeypatch.setenv("COLUMNS", columns)
    assert (_fasthelp.cached_help(["--help"]) is not None) is answered


def test_stale_sources_go_to_typer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    assert _fasthelp.cached_help(["--help"]) is not None
    monkeypatch.setattr(_helptext, "FINGERPRINT", "00000000-0")
    assert _fasthelp.cached_help(["--help"]) is None


@pytest.mark.parametrize("args", [["--help"], ["-h"], ["freeze", "--help"], ["store", "gc", "-h"], ["review", "exec", "--help"]])
def test_the_console_script_prints_the_cache_without_importing_typer(args: list[str]) -> None:
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    out = subprocess.run([sys.executable, "-c", _NO_TYPER, *args], capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL)
    assert out.returncode == 0, out.stderr
    assert out.stdout == _helptext.TEXTS[tuple(a for a in args if a not in ("--help", "-h"))]


def test_a_narrow_terminal_still_prints_typers_help() -> None:
    """Through typer (so typer is imported): a narrow terminal stands in for any reason not to use the cache."""
    script = _NO_TYPER.replace("assert 'typer' not in", "assert 'typer' in").replace(" and 'typing' not in sys.modules", "")
    env = {**os.environ, "COLUMNS": "60"}
    out = subprocess.run([sys.executable, "-c", script, "store", "--help"], capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("Usage: attest store [OPTIONS] COMMAND [ARGS]...") and out.stdout != _helptext.TEXTS[("store",)]


def test_in_process_callers_always_get_typer(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """main(argv) (tests, docs/gen_cli.py) never takes the cache: it is the console script's start-up only."""
    import attest.cli as cli

    monkeypatch.setenv("COLUMNS", "80")
    assert cli.main(["--help"]) == 0
    assert cli._APP is not None
    assert capsys.readouterr().out == _helptext.TEXTS[()]


_ONE_MODULE = (
    "import sys\n"
    "sys.argv = ['attest', *sys.argv[1:]]\n"
    "from attest.cli import COMMAND_MODULES, main\n"
    "rc = main()\n"
    "sys.stdout.flush()\n"
    "loaded = sorted(m for m in COMMAND_MODULES if 'attest.cli.' + m in sys.modules)\n"
    "sys.stderr.write('LOADED ' + ','.join(loaded) + '\\n')\n"
    "sys.exit(rc)\n"
)


@pytest.mark.parametrize(
    ("args", "module"),
    [(["inventory", "{tree}", "--digest"], "_inventory"), (["inventory"], "_inventory"), (["store", "lss"], "_freeze"),
     (["inventory", "{tree}/missing", "--json"], "_inventory")],
)
def test_the_console_script_builds_only_the_named_commands_module(args: list[str], module: str, tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "f").write_bytes(b"x\n")
    argv = [a.replace("{tree}", str(tmp_path)) for a in args]
    out = subprocess.run([sys.executable, "-c", _ONE_MODULE, *argv], capture_output=True, text=True, stdin=subprocess.DEVNULL,
                         env={k: v for k, v in os.environ.items() if k != "COLUMNS"})
    *stderr, loaded = out.stderr.rstrip("\n").split("\n")
    assert loaded == f"LOADED {module}"
    # The same exit code and the same output as the whole app (in-process callers always get it).
    from attest.cli import main

    assert main(argv) == out.returncode
    got = capsys.readouterr()
    assert (got.out, got.err.rstrip("\n")) == (out.stdout, "\n".join(stderr))


def test_an_unknown_command_gets_the_whole_app() -> None:
    from attest.cli import COMMAND_MODULES

    out = subprocess.run([sys.executable, "-c", _ONE_MODULE, "nosuch"], capture_output=True, text=True, stdin=subprocess.DEVNULL)
    assert out.returncode == 2 and "No such command 'nosuch'" in out.stderr
    assert out.stderr.rstrip("\n").split("\n")[-1] == "LOADED " + ",".join(sorted(COMMAND_MODULES))


def test_the_console_scripts_version_imports_no_typer() -> None:
    from attest import __version__

    proc = subprocess.run([sys.executable, "-c", _NO_TYPER, "--version"], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"attest {__version__}\n"
