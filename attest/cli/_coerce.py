"""The command line's plain values coerced without pydantic, exactly as typer would coerce them.

typer 0.29 coerces every parameter's value through a pydantic ``TypeAdapter`` it builds on first
use: importing pydantic and building one adapter per parameter cost an ``attest`` process about
0.1 s of CPU, more than most commands' own work. attest's parameters are plain: ``str``,
``bool``, ``int``, ``float``, ``Path``, and lists of ``str`` or ``Path``, with no parser, choices,
range or file mode. :func:`plain_coercion` gives each such parameter a coercion that returns, for
the values a command line gives (a string, a default), what typer's adapter returns; any value it
does not take (a string with a lone surrogate, an int written ``+3``, a string where a bool is
wanted) goes to typer's own coercion, so that an error is typer's own error and message.
tests/cli/test_coerce.py holds both to the same result over a table of values, for every parameter
of the app, and tests/cli/test_attack_coerce.py over real command lines (non-UTF-8 argv, environment
variables) through both of attest's builds of the app.

It uses typer's coercion classes (``typer._coercion``, ``typer.core._TyperParameter``): typer is
pinned in pyproject.toml, and that test fails if the classes move.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from typer._click import Context
from typer._coercion import RuntimeParam, TypeDescriptor, build_runtime_param
from typer._param_types import coerce_cli_path
from typer.core import _TyperParameter

from ._app import HELP_OPTION_NAMES

if TYPE_CHECKING:
    from collections.abc import Callable

    from typer._click import Command

__all__ = ["plain_coercion", "plain_leaf"]

#: Not taken here: typer's own coercion decides.
_TYPERS = object()

# What pydantic's lax int and float read from these strings is exactly int(s) and float(s).
_INT = re.compile(r"[0-9]{1,18}")
_FLOAT = re.compile(r"[0-9]{1,15}(?:\.[0-9]{1,15})?")


def _text(value: object) -> str | None:
    """``value`` if it is a string pydantic takes as it is (no lone surrogate, no NUL), else None."""
    if type(value) is not str or "\0" in value:
        return None
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return None
    return value


def _str(value: object) -> object:
    text = _text(value)
    return _TYPERS if text is None else text


def _int(value: object) -> object:
    if type(value) is int:
        return value
    text = _text(value)
    return int(text) if text is not None and _INT.fullmatch(text) else _TYPERS


def _float(value: object) -> object:
    if type(value) is float:
        return value
    text = _text(value)
    return float(text) if text is not None and _FLOAT.fullmatch(text) else _TYPERS


def _bool(value: object) -> object:
    return value if type(value) is bool else _TYPERS


def _path(value: object) -> object:
    """A path as given (its text or a Path), taken; the checks come after every item is taken (:func:`_checked_path`)."""
    if isinstance(value, Path):
        return value
    return _TYPERS if not _text(value) else value  # '' or a string pydantic may refuse: typer's


def _checked_path(value: str | Path, descriptor: TypeDescriptor, param: _TyperParameter, ctx: Context) -> object:
    """typer's own checks of a path (exists, file_okay, dir_okay, readable, writable, resolve_path); what typer returns.

    A string is checked as given (so an error names ``./x`` as the user wrote it, as typer's does); neither needs pydantic.
    """
    if isinstance(value, Path):
        return coerce_cli_path(value, descriptor.parameter_info, path_type=Path, param=param, ctx=ctx)
    checked = coerce_cli_path(value, descriptor.parameter_info, path_type=None, param=param, ctx=ctx)
    return Path(os.fsdecode(checked))  # as typer's Path(str): a str given, a str checked (resolve_path: its realpath)


_LEAVES: dict[object, Callable[[object], object]] = {
    str: _str, int: _int, float: _float, bool: _bool, Path: _path, list[str]: _str, list[Path]: _path,
}


def plain_leaf(descriptor: TypeDescriptor) -> Callable[[object], object] | None:
    """What takes one value of a parameter of this type (or returns ``_TYPERS``); None when typer's own does it all."""
    info = descriptor.parameter_info
    if (descriptor.file_annotation is not None or info.parser is not None or descriptor.is_choice
            or descriptor.is_ranged or info.path_type is not None or info.allow_dash):
        return None
    return _LEAVES.get(descriptor.annotation)


@dataclass(frozen=True)
class _PlainRuntimeParam(RuntimeParam):
    """typer's runtime coercion of one parameter, done by ``leaf`` where it takes the value, else by typer's own."""

    descriptor: TypeDescriptor
    leaf: Callable[[object], object]
    is_list: bool
    is_path: bool

    def _coerce_value(self, value: Any, param: _TyperParameter, ctx: Context) -> Any:
        if not self.is_list:
            taken = self.leaf(value)
            if taken is _TYPERS:
                return self._typers(value, param, ctx)
            return _checked_path(taken, self.descriptor, param, ctx) if self.is_path else taken  # type: ignore[arg-type]
        if not isinstance(value, (list, tuple)):
            return self._typers(value, param, ctx)
        # Every item is taken before any is checked: typer refuses a list at its first bad item, which may be one it must read.
        items = [self.leaf(v) for v in value]
        if any(item is _TYPERS for item in items):
            return self._typers(value, param, ctx)
        return [_checked_path(item, self.descriptor, param, ctx) for item in items] if self.is_path else items  # type: ignore[arg-type]

    def _typers(self, value: Any, param: _TyperParameter, ctx: Context) -> Any:
        """typer's own coercion of ``value`` (built now: it imports pydantic)."""
        return build_runtime_param(self.descriptor)._coerce_value(value, param=param, ctx=ctx)


def plain_coercion(command: Command) -> Command:
    """Give every plain parameter of ``command`` and its subcommands the coercion above; return ``command``.

    The help option too, which click makes on first use and keeps (made here as a context with the app's names would).
    """
    help_option = command.get_help_option(Context(command, help_option_names=list(HELP_OPTION_NAMES)))
    for param in [*command.params, *([help_option] if help_option is not None else [])]:
        if isinstance(param, _TyperParameter) and param._runtime_param is None:
            descriptor = param.type_descriptor
            leaf = plain_leaf(descriptor)
            if leaf is not None:
                param._runtime_param = _PlainRuntimeParam(descriptor.parameter_info, descriptor.annotation, descriptor, leaf,
                                                          descriptor.is_list, leaf is _path)
    for sub in getattr(command, "commands", {}).values():
        plain_coercion(sub)
    return command
