"""`attest --help`, `attest -h` and `attest CMD... --help` without importing typer; one command's module.

Importing typer (and, for a command's help, the pydantic it builds its parameter coercion
with) costs 100-250 ms, several times the interpreter's own start-up; the help itself is a
pure function of the command modules' source. So the help of every command is rendered once,
by typer itself, into :mod:`._helptext` (``python docs/gen_cli.py`` regenerates it together
with docs/cli.md), and the console script prints it from there when all of this holds:

1. the command line is exactly ``[CMD...] --help`` or ``[CMD...] -h`` for a known command path;
2. click would format it at the width it was rendered at (a terminal of at least 80 columns,
   or no terminal: click then assumes 80);
3. the fingerprint of the sources it was rendered from (every ``attest/cli/*.py`` but the
   generated module, and typer's ``__init__.py``, which carries its version) still matches.

Anything else, a stale cache included, goes through typer as before: this only ever answers
with typer's own bytes (tests/cli/test_fasthelp.py renders every entry again and compares).
The cache also names the module of every top-level command (:func:`command_module`), so the
console script builds an app of that module only instead of all of them.

    >>> text = cached_help(["store", "gc", "-h"])   # None: let typer answer
"""

from __future__ import annotations

import io
import os
import sys
import zlib
from importlib.machinery import PathFinder

from . import COMMAND_MODULES, build_app, main

TYPE_CHECKING = False  # not typing's: the help path does not import typing (about 5 ms)
if TYPE_CHECKING:
    from collections.abc import Sequence

    from typer._click import Command, Context  # typer's vendored click, for annotations only

#: The width the cache is rendered at: click formats help at min(columns, 80) - 2.
RENDER_COLUMNS = 80
_HELP_FLAGS = ("--help", "-h")
_HERE = os.path.dirname(os.path.abspath(__file__))
_GENERATED = "_helptext.py"


def _columns() -> int:
    """The terminal width as ``shutil.get_terminal_size`` gives it to click (without importing shutil)."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns if columns > 0 else RENDER_COLUMNS


def _typer_init() -> str | None:
    """The path of typer's ``__init__.py``, found on ``sys.path`` without importing typer."""
    spec = PathFinder.find_spec("typer")
    return spec.origin if spec is not None and spec.origin else None


def fingerprint() -> str:
    """CRC-32 and length of the sources the help is rendered from (staleness, not security)."""
    try:
        names = os.listdir(_HERE)
    except OSError:  # not a directory of files (a zip import): never current
        return "unreadable"
    paths = sorted(os.path.join(_HERE, n) for n in names if n.endswith(".py") and n != _GENERATED)
    typer_init = _typer_init()
    crc = 0
    size = 0
    for path in [*paths, typer_init or ""]:
        crc = zlib.crc32(os.path.basename(path).encode() + b"\0", crc)
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError:
            data = b"\xff-missing"
        crc = zlib.crc32(data, crc)
        size += len(data)
    return f"{crc:08x}-{size}"


def cached_help(args: Sequence[str]) -> str | None:
    """The help text typer would print for ``args``, or None when typer must answer itself."""
    if not args or args[-1] not in _HELP_FLAGS:
        return None
    try:
        # lazy: the generated cache may be missing (typer answers then), and docs/gen_cli.py imports this module to write it
        from . import _helptext
    except ImportError:
        return None
    text = _helptext.TEXTS.get(tuple(args[:-1]))
    if text is None:
        return None
    if _columns() < RENDER_COLUMNS or _helptext.FINGERPRINT != fingerprint():
        return None
    return text


def command_module(name: str) -> str | None:
    """The command module that registers the top-level command ``name``, while the cache is current."""
    try:
        from . import _helptext  # lazy: as in cached_help
    except ImportError:
        return None
    module = _helptext.MODULES.get(name)
    if module is None or _helptext.FINGERPRINT != fingerprint():
        return None
    return module


# -- rendering the cache (by typer itself) ----------------------------------------------------


def command_modules() -> dict[str, str]:
    """Each top-level command (or group) name and the one command module that registers it."""
    import typer  # lazy: typer (100-250 ms) only renders the cache, which exists so that the help path never imports it

    owner: dict[str, str] = {}
    for module in COMMAND_MODULES:
        group = typer.main.get_command(build_app((module,)))
        ctx = group.make_context("attest", ["--help"], resilient_parsing=True)
        for name in group.list_commands(ctx):  # type: ignore[attr-defined]
            if name in owner:
                raise RuntimeError(f"attest {name} is registered by both {owner[name]} and {module}")
            owner[name] = module
    return owner


def render_all() -> dict[tuple[str, ...], str]:
    """Every command path's ``--help`` output, as typer prints it at :data:`RENDER_COLUMNS` columns."""
    import contextlib  # lazy: ~8 ms where site loaded nothing else (python -S -X importtime); only rendering needs it

    import typer  # lazy: as in command_modules
    from typer.core import TyperGroup  # lazy: as in command_modules

    root = typer.main.get_command(build_app())
    ctx_cls = type(root.make_context("attest", ["--help"], resilient_parsing=True))
    paths: list[list[str]] = []

    def walk(cmd: Command, path: list[str], parent: Context | None) -> None:
        paths.append(path)
        if not isinstance(cmd, TyperGroup):
            return
        ctx = ctx_cls(cmd, info_name=path[-1] if path else "attest", parent=parent)
        for name in cmd.list_commands(ctx):
            sub = cmd.get_command(ctx, name)
            if sub is None:
                raise RuntimeError(f"attest {' '.join([*path, name])}: listed but not found")
            walk(sub, [*path, name], ctx)

    walk(root, [], None)
    saved = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = str(RENDER_COLUMNS)
    texts: dict[tuple[str, ...], str] = {}
    try:
        for path in paths:
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                code = main([*path, "--help"])
            if code != 0:
                raise RuntimeError(f"attest {' '.join(path)} --help exited {code}")
            texts[tuple(path)] = out.getvalue()
    finally:
        if saved is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = saved
    return texts


def generated_source() -> str:
    """The text of :mod:`._helptext` for the current sources."""
    lines = [
        '"""Generated by `python docs/gen_cli.py` (attest.cli._fasthelp): every command\'s --help, as typer prints it."""',
        "",
        "# fmt: off",
        f"FINGERPRINT = {fingerprint()!r}",
        "MODULES: dict[str, str] = {",
    ]
    lines += [f"    {name!r}: {module!r}," for name, module in sorted(command_modules().items())]
    lines += ["}", "TEXTS: dict[tuple[str, ...], str] = {"]
    lines += [f"    {path!r}: {text!r}," for path, text in sorted(render_all().items())]
    lines += ["}", ""]
    return "\n".join(lines)


def write_cache(check: bool = False) -> bool:
    """Rewrite ``attest/cli/_helptext.py`` (or, with ``check``, say whether it is current)."""
    target = os.path.join(_HERE, _GENERATED)
    text = generated_source()
    try:
        with open(target, encoding="utf-8") as f:
            current = f.read() == text
    except FileNotFoundError:
        current = False
    if check or current:
        return current
    tmp = f"{target}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, target)
    return True
