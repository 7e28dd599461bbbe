"""The typer application, output helpers, and how the one top-level handler (``attest.cli.main``) renders a failure."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import typer

from ..errors import AttestError, Finding


def _version(value: bool) -> None:
    if value:
        from .. import __version__

        print(f"attest {__version__}")
        raise typer.Exit(0)


def _root(
    version: bool = typer.Option(False, "--version", is_eager=True, callback=_version, help="Print the version and exit."),
) -> None:
    """Reproducible builds and signed attestations of closed trees.

    Exit codes: 0 ok, 1 verification failed, 2 bad usage or unreadable input (attest exec: the
    command's own, or 125/126/127 for its own failures).
    """


def new_app() -> typer.Typer:
    """A fresh top-level app with no commands; ``attest.cli.build_app`` registers them."""
    app = typer.Typer(
        name="attest",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
        rich_markup_mode=None,
        context_settings={"help_option_names": ["-h", "--help"]},
    )
    app.callback()(_root)
    return app


JsonOption = typer.Option(False, "--json", help="Print one JSON object (machine-readable) instead of text.")


def print_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, sort_keys=True, ensure_ascii=False) + "\n")


def _finding_line(f: Finding) -> str:
    where = f" {f.path}" if f.path is not None else ""
    return f"  {f.code}{where}: {f.detail}\n"


def print_findings(findings: tuple[Finding, ...] | list[Finding], *, stream: Any = None) -> None:
    out = stream or sys.stderr
    for f in findings:
        out.write(_finding_line(f))


class ReportedFailure(AttestError):
    """A command's decided failure, rendered by the one handler (``attest.cli.main``).

    A command never exits on its own: it raises this (or any :class:`AttestError`) and the
    handler prints it and returns the exit code. ``error`` decides the exit code and the
    findings (InputError 2; VerificationError, EnvironmentFailure 1). ``document`` is the
    command's own ``--json`` object when its documented shape adds fields to
    ``{"ok": false, "errors": [...]}``; ``text`` replaces the generic stderr summary.
    """

    def __init__(self, error: AttestError, *, document: dict[str, Any] | None = None, text: str | None = None,
                 exit_code: int | None = None) -> None:
        super().__init__(findings=error.findings)
        # ``exit_code``: a command whose own exit status is another program's (attest exec) says its failures apart.
        self.exit_code = error.exit_code if exit_code is None else exit_code
        self.error = error
        self.document = document
        self.text = text

    def to_json(self) -> dict[str, Any]:
        return self.document if self.document is not None else self.error.to_json()


def error_text(err: AttestError) -> str:
    """The generic stderr summary of a failure: a verdict line, then one line per finding."""
    verdict = "FAILED" if err.exit_code == 1 else "error"
    n = len(err.findings)
    return f"attest: {verdict}: {n} problem{'s' if n != 1 else ''}\n" + "".join(_finding_line(f) for f in err.findings)


def render_error(err: AttestError, json_mode: bool) -> None:
    """Print ``err`` as the one handler does: its JSON object on stdout, or text on stderr."""
    if json_mode:
        print_json(err.to_json())
        return
    text = err.text if isinstance(err, ReportedFailure) and err.text is not None else error_text(err)
    sys.stderr.write(text)


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
