"""Every option and argument of the whole app reads like the docs: `--state-dir DIR`, `PATH`, never `<str>` or `{path}`.

The app is enumerated from typer itself, so a new command or option is checked without being
listed here; `attest.cli._app.option` / `flag` / `argument` make it hard to get wrong.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer

from attest.cli import build_app, main
from attest.cli._app import Command

# NAME, FILE, NAME=REF, OWNER/NAME, NAME[=VALUE], CMD...: upper-case words joined by = or /.
METAVAR = re.compile(r"[A-Z][A-Z0-9_]*(?:[=/][A-Z][A-Z0-9_]*)*(?:\[=[A-Z][A-Z0-9_]*\])?(?:\.\.\.)?")
TYPE_LABEL = re.compile(r"<(?:str|int|float|bool|path|file|list\[[^\]]*\]|[a-z_]+ range)>|\{[a-z_]+\}")


def _commands() -> Iterator[tuple[str, Any, Any]]:
    root = typer.main.get_command(build_app())
    ctx_cls = type(root.make_context("attest", ["--help"], resilient_parsing=True))

    def walk(cmd: Any, path: list[str], parent: Any) -> Iterator[tuple[str, Any, Any]]:
        ctx = ctx_cls(cmd, info_name=path[-1] if path else "attest", parent=parent)
        subs = getattr(cmd, "commands", None)
        if subs:
            for name in cmd.list_commands(ctx):
                yield from walk(cmd.get_command(ctx, name), [*path, name], ctx)
        else:
            yield " ".join(path), cmd, ctx

    yield from walk(root, [], None)


COMMANDS = list(_commands())


def test_the_app_has_its_commands() -> None:
    names = {name for name, _, _ in COMMANDS}
    assert {"inventory", "verify", "exec", "store gc", "build runtime", "rebuild", "review exec", "merge-gate check"} <= names


@pytest.mark.parametrize(("name", "cmd", "ctx"), COMMANDS, ids=[c[0] for c in COMMANDS])
def test_every_value_takes_a_docs_style_metavar(name: str, cmd: Any, ctx: Any) -> None:
    assert isinstance(cmd, Command), f"attest {name} is not registered through attest.cli._app.Typer"
    for param in cmd.params:
        if param.hidden:
            continue
        if param.param_type_name == "option" and (param.is_flag or param.is_bool_flag):
            assert param.metavar is None, f"attest {name} {param.opts[0]} is a flag: it takes no value"
            continue
        where = param.opts[0] if param.param_type_name == "option" else param.name
        assert param.metavar is not None, f"attest {name} {where} has no metavar (declare it with option()/argument())"
        assert METAVAR.fullmatch(param.metavar), f"attest {name} {where}: metavar {param.metavar!r} does not read like the docs"


@pytest.mark.parametrize(("name", "cmd", "ctx"), COMMANDS, ids=[c[0] for c in COMMANDS])
def test_the_rendered_help_shows_no_type_labels(name: str, cmd: Any, ctx: Any) -> None:
    text = cmd.get_help(ctx)
    usage = text.splitlines()[0]
    assert not TYPE_LABEL.search(usage), usage
    for line in text.splitlines():
        # The first column (the option or argument and its metavar) never shows typer's type labels.
        if len(line) - len(line.lstrip()) > 4:
            continue  # a wrapped line of help text: no first column (its words may name a {placeholder})
        head = line.strip().split("  ")[0]
        assert not TYPE_LABEL.search(head), f"attest {name}: {line!r}"


def test_the_usage_line_and_the_argument_list_use_the_metavar() -> None:
    by_name = {name: (cmd, ctx) for name, cmd, ctx in COMMANDS}
    cmd, ctx = by_name["rebuild"]
    text = cmd.get_help(ctx)
    assert text.startswith("Usage: attest rebuild [OPTIONS] RECIPE\n") and "\n  RECIPE  " in text
    cmd, ctx = by_name["build runtime"]
    assert cmd.get_help(ctx).startswith("Usage: attest build runtime [OPTIONS] [RECIPE]\n")
    cmd, ctx = by_name["exec"]
    assert cmd.get_help(ctx).startswith("Usage: attest exec [OPTIONS] CMD...\n")


# One name per concept: these spellings are gone from every command.
RETIRED = {"--store", "--into", "--source-rev", "--recipe", "--out"}


def test_one_name_per_concept() -> None:
    seen: dict[str, set[str]] = {}
    for name, cmd, _ in COMMANDS:
        for param in cmd.params:
            if param.param_type_name != "option":
                continue
            assert not (set(param.opts) & RETIRED) or param.hidden, f"attest {name} still has {param.opts}"
            if not param.hidden:
                seen.setdefault(param.name, set()).update(o for o in param.opts if o.startswith("--"))
    assert seen["state_dir"] == {"--state-dir"} and seen["cache"] == {"--cache"}
    revs = {o for opts in seen.values() for o in opts if o.endswith("-rev")}
    assert revs == {"--rev", "--toolchain-rev", "--skill-rev", "--installer-rev"}


def test_the_old_rebuild_spelling_still_reads(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # `--check` is a hidden no-op: `attest rebuild --check RECIPE` names the positional RECIPE.
    missing = str(tmp_path / "missing.toml")
    for argv in (["rebuild", missing], ["rebuild", "--check", missing]):
        assert main([*argv, "--rev", "0" * 40, "--state-dir", str(tmp_path / "s"), "--json"]) == 2
        doc = json.loads(capsys.readouterr().out)
        assert doc["errors"][0]["code"] == "UNREADABLE" and doc["errors"][0]["path"] == missing


def test_one_option_name_takes_one_metavar_everywhere() -> None:
    metavars: dict[str, set[str]] = {}
    for _, cmd, _ in COMMANDS:
        for param in cmd.params:
            if param.param_type_name == "option" and param.metavar is not None and not param.hidden:
                for opt in param.opts:
                    metavars.setdefault(opt, set()).add(param.metavar)
    # --repo is a git directory where a review reads objects, OWNER/NAME for the hosting API (evidence).
    assert {opt: m for opt, m in metavars.items() if len(m) > 1 and opt != "--repo"} == {}
    assert metavars["--state-dir"] == {"DIR"} and metavars["--output"] == {"FILE"} and metavars["--key"] == {"KEY"}
