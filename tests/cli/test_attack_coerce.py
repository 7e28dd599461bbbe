"""Attacks on attest's plain coercion of command-line values (attest.cli._coerce) against typer's own.

The claim attacked: for every value the plain coercion takes it returns exactly what typer 0.29's
own coercion (``typer._coercion.build_runtime_param``, pydantic adapters) returns, and every value
it does not take goes to typer's own, so that errors are typer's own errors and messages.

The oracle is the same app turned into click's by typer with no plain coercion installed. Values
reach the commands as a real command line gives them: argv bytes (``os.fsencode``d, so a non-UTF-8
byte is a lone surrogate) and environment variables of a real subprocess, through both of attest's
builds of the app: the console script's one-module app (``_console_app``) and the in-process whole
app (``_process_app``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
import typer
from support.coercion import outcome, parameters
from typer._click import Context
from typer._coercion import build_runtime_param

from attest.cli import COMMAND_MODULES, _console_app, _process_app, build_app
from attest.cli._app import HELP_OPTION_NAMES
from attest.cli._coerce import _PlainRuntimeParam, plain_coercion, plain_leaf

ROOT = Path(__file__).resolve().parents[2]
PYTHON = sys.executable

# Parses one command line with one build of the app and prints the values click's context holds (or
# the error raised): "console" is the console script's one-module app, "process" the in-process
# whole app (both with the plain coercion), "typer" the whole app with typer's own coercion.
_PARSE = r"""
import ast, os, sys
import typer
from attest.cli import _console_app, _process_app, build_app

mode = sys.argv[1]
for path, args in ast.literal_eval(sys.stdin.read()):  # bytes: argv as the kernel gives it
    path, args = os.fsdecode(path).split(), [os.fsdecode(a) for a in args]
    if mode == "console":
        root = _console_app([path[0]])
        assert root is not None, "no console app"
    elif mode == "process":
        root = _process_app()
    else:
        root = typer.main.get_command(build_app())
    command = root
    for name in path:
        command = command.commands[name]
    try:
        ctx = command.make_context("attest " + " ".join(path), list(args))
        out = sorted((k, type(v).__name__, v) for k, v in ctx.params.items())
    except Exception as e:
        out = (type(e).__name__, e.format_message() if hasattr(e, "format_message") else str(e))
    print(ascii(out))
"""

# attest's command line (attest.cli.main, its error rendering) with typer's own coercion in place of the plain one.
_TYPERS_CLI = r"""
import sys
import typer
import attest.cli as cli

cli._APP = typer.main.get_command(cli.build_app())
sys.exit(cli.main(sys.argv[1:]))
"""


def _argv(words: list[str | bytes]) -> list[bytes]:
    return [os.fsencode(w) if isinstance(w, str) else w for w in words]


Case = tuple[str, list[str | bytes]]


def _parse(mode: str, cases: list[Case], env: dict[str, str | bytes] | None = None) -> list[str]:
    """What one build of the app makes of each ``attest PATH ARGS`` of ``cases``, one process for all."""
    environ = os.environb.copy()
    for k, v in (env or {}).items():
        environ[os.fsencode(k)] = os.fsencode(v) if isinstance(v, str) else v
    given = repr([(os.fsencode(path), _argv(args)) for path, args in cases]).encode()
    proc = subprocess.run([PYTHON, "-c", _PARSE, mode], input=given, capture_output=True, env=environ, check=False, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    lines = proc.stdout.decode().splitlines()
    assert len(lines) == len(cases), lines
    return lines


def _all_builds_agree(cases: list[Case], env: dict[str, str | bytes] | None = None) -> list[str]:
    """What typer's own coercion makes of each case, checked equal to what both of attest's builds make of it."""
    theirs = _parse("typer", cases, env)
    for mode in ("console", "process"):
        for case, ours, typers in zip(cases, _parse(mode, cases, env), theirs, strict=True):
            assert ours == typers, f"{mode}: attest {case[0]} {case[1]!r}: {ours} != typer's {typers}"
    return theirs


def _as_reader(args: list[str | bytes], cwd: Path, typers: bool) -> tuple[int, str]:
    """``attest ARGS`` (the console script) run where a mode-000 file is unreadable: as root, without the capabilities that read it anyway.

    ``typers``: the same command line with typer's own coercion.
    """
    command = [PYTHON, "-c", _TYPERS_CLI] if typers else [PYTHON, "-m", "attest"]
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("root reads every file, and setpriv (util-linux) is not here to drop that")
        command = [setpriv, "--bounding-set=-dac_override,-dac_read_search", *command]
    proc = subprocess.run(_argv([*command, *args]), capture_output=True, cwd=cwd, env={**os.environ, "PYTHONPATH": str(ROOT)},
                          check=False)
    return proc.returncode, proc.stderr.decode("utf-8", "backslashreplace")


def _unreadable(path: Path) -> None:
    path.write_text("{}")
    path.chmod(0)


# -- attacks that find a difference ------------------------------------------------------------------------------------


@pytest.mark.parametrize("given", ["./secret.json", "secret.json"])
def test_an_unreadable_path_is_named_as_given(tmp_path: Path, given: str) -> None:
    """typer's error names the path as typed ('./secret.json'); the plain coercion checked Path('./secret.json') and named
    'secret.json'. The path in Path's own form is the control."""
    _unreadable(tmp_path / "secret.json")
    args: list[str | bytes] = ["verify-attestation", given, "--policy", "policy.toml"]
    ours, theirs = _as_reader(args, tmp_path, typers=False), _as_reader(args, tmp_path, typers=True)
    assert f"path '{given}' is not readable" in theirs[1], theirs
    assert ours == theirs


def test_list_of_paths_is_refused_at_its_first_bad_item(tmp_path: Path) -> None:
    """typer stops at the first unreadable --ci (a non-UTF-8 name, which the plain coercion leaves to typer); the plain one checks
    every item it takes before handing the list over, and reports the second."""
    _unreadable(Path(os.fsdecode(os.fsencode(tmp_path) + b"/\xff.json")))
    _unreadable(tmp_path / "second.json")
    args: list[str | bytes] = ["merge-gate", "check", "--ci", b"\xff.json", "--ci", "second.json"]
    ours, theirs = _as_reader(args, tmp_path, typers=False), _as_reader(args, tmp_path, typers=True)
    assert "not readable" in theirs[1], theirs
    assert ours == theirs


def test_path_with_typers_exists_check_names_the_value_as_given() -> None:
    """A Path option with typer's exists=True (the module takes it, as its own test's flagged paths do): './missing'."""
    app = typer.Typer(context_settings={"help_option_names": list(HELP_OPTION_NAMES)})

    @app.command()
    def paths(existing: Path = typer.Option(None, exists=True)) -> None:
        """A path that must exist."""

    command = plain_coercion(typer.main.get_command(app))
    param = next(p for p in command.params if p.name == "existing")
    assert isinstance(param._runtime_param, _PlainRuntimeParam)
    ctx = Context(command, info_name="paths")
    ours = outcome(lambda: param._runtime_param.coerce("./missing", param=param, ctx=ctx))
    theirs = outcome(lambda: build_runtime_param(param.type_descriptor).coerce("./missing", param=param, ctx=ctx))
    assert ours == theirs


# -- attacks it withstands ---------------------------------------------------------------------------------------------


def test_non_utf8_and_odd_strings_for_str_path_and_list_parameters() -> None:
    values: list[str | bytes] = [b"\xff", b"a\xffb", b"\xed\xa0\x80", b"", b" x ", b"-", b"./x/", "\u0663", "\uff11\uff12", "caf\u00e9",
                                 "a\tb\n"]
    outs = _all_builds_agree([("review exec", ["--review", v, "--handoff", v, "--policy", v, "-o", "no-such-out.json", "--readonly", "a",
                                                "--readonly", v, "--env", v, "--", v, "x"]) for v in values])
    assert all("'handoff'" in out for out in outs), outs  # parsed: the values themselves were compared


def test_int_strings() -> None:
    values: list[str | bytes] = ["007", "0", "000000000000000000", "999999999999999999", "9999999999999999999",
                                 "123456789012345678901234567890", "+3", "-3", " 3", "3 ", "1_000", "3.0", "3.5", "\u0663", "\uff13",
                                 "\u00b2", "", "0x10", b"\xff"]
    _all_builds_agree([("evidence trusted-producer", ["--repo", "o/r", "--pr", v, "--app-login", "x", "--max-pages", v]) for v in values])


def test_float_strings() -> None:
    values: list[str | bytes] = ["1.", ".5", "1e5", "1E-3", "inf", "-inf", "nan", "-0.0", "0001.5000", "123456789012345.123456789012345",
                                 "0.1000000000000000055511151231257827", "9007199254740993", "1_0.5", " 2.5", "\u0663.5", "", "1,5"]
    _all_builds_agree([("review agent", ["--timeout", v, "--", "x"]) for v in values])


@pytest.mark.parametrize("token", ["", " ", "tok en", "007", "\u0663", b"\xff\xfe"])
def test_str_option_read_from_its_envvar(token: str | bytes) -> None:
    out = _all_builds_agree([("attest", ["some/path", "-o", "no-such-out.json", "--key", "k"])], env={"SIGSTORE_ID_TOKEN": token})
    assert "'identity_token'" in out[0], out


def test_list_options_given_never_once_or_many_times() -> None:
    given: list[list[str | bytes]] = [[], ["--ci", "a"], ["--ci", "a", "--ci", "a", "--ci", ""], ["--ci", b"\xff", "--ci", "b"],
                                      ["--require-check", "", "--require-check", "x y"]]
    outs = _all_builds_agree([("merge-gate check", ["--record", "r", "--policy", "p", *args]) for args in given])
    assert all("'ci'" in out for out in outs), outs


def test_variadic_argument_with_no_words_and_with_dashes() -> None:
    _all_builds_agree([("exec", ["--image", "i", "--"]), ("exec", ["--image", "i", "--", "-", "--", "-x", ""])])


def test_help_option_prints_typers_help() -> None:
    """-h through the in-process app (the help option has the plain coercion) prints what typer's own app prints."""
    def run(script: str) -> tuple[int, str, str]:
        proc = subprocess.run([PYTHON, "-c", script], capture_output=True, text=True, check=False, cwd=ROOT)
        return proc.returncode, proc.stdout, proc.stderr

    ours = run("import sys\nfrom attest.cli import main\nsys.exit(main(['verify', '-h']))")
    assert ours == run(_TYPERS_CLI.replace("sys.argv[1:]", "['verify', '-h']"))
    assert ours[1].startswith("Usage: attest verify")


def test_values_of_other_types_in_process() -> None:
    """Values an in-process caller or a default can give (str, int, float and Path subclasses, bytes, PathLike) are left to typer."""
    class Text(str):
        def __str__(self) -> str:
            return "changed"

    class Number(int):
        pass

    class Real(float):
        pass

    class Like:
        def __fspath__(self) -> str:
            return "like"

    class Local(type(Path())):  # type: ignore[misc]
        pass

    values = [Text("x"), Text("3"), Number(3), Real(2.5), b"x", bytearray(b"3"), Like(), PurePosixPath("p"), Local("q"), True, 3.0]
    checked = 0
    for path, command, param in parameters(_process_app()):
        if not isinstance(param._runtime_param, _PlainRuntimeParam):
            continue
        ctx = Context(command, info_name=path)
        typers = build_runtime_param(param.type_descriptor)
        for value in ([values, tuple(values), *[[v] for v in values]] if param.type_descriptor.is_list else values):
            ours = outcome(lambda: param._runtime_param.coerce(value, param=param, ctx=ctx))  # noqa: B023 - called at once
            theirs = outcome(lambda: typers.coerce(value, param=param, ctx=ctx))  # noqa: B023 - called at once
            assert ours == theirs, f"{path} {param.name} of {value!r}: {ours} != typer's {theirs}"
            checked += 1
    assert checked > 1000


def test_each_parameters_own_default() -> None:
    """Every plain parameter's own default (PosixPath('.'), [], 'dsse', 15.0, ...) coerced as typer coerces it."""
    for path, command, param in parameters(_process_app()):
        if isinstance(param._runtime_param, _PlainRuntimeParam):
            ctx = Context(command, info_name=path)
            default = param.get_default(ctx)
            ours = outcome(lambda: param._runtime_param.coerce(default, param=param, ctx=ctx))  # noqa: B023 - called at once
            theirs = outcome(lambda: build_runtime_param(param.type_descriptor).coerce(default, param=param, ctx=ctx))  # noqa: B023
            assert ours == theirs, f"{path} {param.name} of its default {default!r}: {ours} != typer's {theirs}"


def test_every_console_app_gives_plain_coercion_to_the_same_parameters() -> None:
    """Each one-module console app installs the plain coercion exactly where plain_leaf allows it, as the whole app does."""
    def plain(root: Any) -> dict[tuple[str, str], bool]:
        found = {}
        for path, _, p in parameters(root):
            found[(path, p.name)] = isinstance(p._runtime_param, _PlainRuntimeParam)
            assert found[(path, p.name)] == (plain_leaf(p.type_descriptor) is not None), (path, p.name)
        return found

    whole = {k: v for k, v in plain(_process_app()).items() if k[0] != "attest"}
    console: dict[tuple[str, str], bool] = {}
    for module in COMMAND_MODULES:
        for name in typer.main.get_command(build_app((module,))).commands:  # type: ignore[attr-defined]
            app = _console_app([name])
            assert app is not None, name
            console.update({k: v for k, v in plain(app).items() if k[0] == f"attest {name}" or k[0].startswith(f"attest {name} ")})
    assert console == whole


def test_no_parameter_with_choices_range_parser_file_or_path_checks_gets_plain_coercion() -> None:
    """The audit: a parameter typer coerces with more than its type (choices, a range, a parser, a file, a path_type, path checks
    other than typer's defaults) keeps typer's own coercion."""
    for path, _, p in parameters(_process_app()):
        d, info = p.type_descriptor, p.type_descriptor.parameter_info
        if isinstance(p._runtime_param, _PlainRuntimeParam):
            assert d.annotation in (str, int, float, bool, Path, list[str], list[Path]), (path, p.name)
            assert not (d.is_choice or d.is_ranged or d.is_file or info.parser or info.path_type or info.formats), (path, p.name)
            assert not (info.exists or info.writable or info.resolve_path or info.allow_dash), (path, p.name)
            assert info.file_okay and info.dir_okay and info.readable, (path, p.name)
