"""The typer application, output helpers and the one top-level error handler."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import typer

from ..errors import AttestError, Finding


def new_app() -> typer.Typer:
    """A fresh top-level app with no commands; ``attest.cli.build_app`` registers them."""
    return typer.Typer(
        name="attest",
        help="Reproducible builds and signed attestations of closed trees. Exit codes: 0 ok, 1 verification failed, 2 bad usage or unreadable input.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
        rich_markup_mode=None,
    )


JsonOption = typer.Option(False, "--json", help="Print one JSON object (machine-readable) instead of text.")


def print_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, sort_keys=True, ensure_ascii=False) + "\n")


def print_findings(findings: tuple[Finding, ...] | list[Finding], *, stream: Any = None) -> None:
    out = stream or sys.stderr
    for f in findings:
        where = f" {f.path}" if f.path is not None else ""
        out.write(f"  {f.code}{where}: {f.detail}\n")


def render_error(err: AttestError, json_mode: bool) -> None:
    if json_mode:
        print_json(err.to_json())
        return
    verdict = "FAILED" if err.exit_code == 1 else "error"
    n = len(err.findings)
    sys.stderr.write(f"attest: {verdict}: {n} problem{'s' if n != 1 else ''}\n")
    print_findings(err.findings)


@contextmanager
def progress_bar(label: str, json_mode: bool) -> Iterator[Callable[[int, int], None] | None]:
    """A progress callback on a terminal; None (silent) with --json or when not a TTY."""
    if json_mode or not sys.stderr.isatty():
        yield None
        return
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), transient=True) as bar:
        task = bar.add_task(label)

        def update(files: int, size: int) -> None:
            bar.update(task, description=f"{label}: {files} files, {size / 1e6:.1f} MB")

        yield update
