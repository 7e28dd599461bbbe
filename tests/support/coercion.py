"""What the tests of attest's plain coercion (attest.cli._coerce) walk and compare: every parameter of an app, and an outcome."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from typer._click import Context
from typer.core import _TyperParameter

from attest.cli._app import HELP_OPTION_NAMES

__all__ = ["outcome", "parameters"]


def parameters(root: Any) -> list[tuple[str, Any, _TyperParameter]]:
    """(command path, command, parameter) for every typer parameter of ``root``, help options included."""
    found: list[tuple[str, Any, _TyperParameter]] = []

    def walk(command: Any, path: str) -> None:
        help_option = command.get_help_option(Context(command, help_option_names=list(HELP_OPTION_NAMES)))
        for p in [*command.params, help_option]:
            if isinstance(p, _TyperParameter):
                found.append((path, command, p))
        for name, sub in sorted(getattr(command, "commands", {}).items()):
            walk(sub, f"{path} {name}")

    walk(root, "attest")
    return found


def outcome(run: Callable[[], object]) -> tuple[str, str]:
    """What ``run()`` gives, to compare: its value's type and repr (nan is not equal to itself), or the error and its message."""
    try:
        value = run()
    except Exception as e:  # noqa: BLE001 - the outcome compared is the error itself
        return (f"raises {type(e).__name__}", e.format_message() if hasattr(e, "format_message") else str(e))
    return (type(value).__name__, repr(value))
