"""Command-line interface. Each command parses, calls one library function, renders.

``main`` is the console-script entry point and the one place that maps exceptions to exit
codes: 0 ok, 1 verification failed, 2 bad usage or unreadable input. No traceback reaches
the user for any input.
"""

from __future__ import annotations

import os
import sys

from .. import __version__

TYPE_CHECKING = False  # not typing's: `attest --help` does not import typing
if TYPE_CHECKING:
    import typer
    from typer._click import Command  # typer 0.29 vendors click: what typer.main.get_command returns

# The console script's first module: until it knows the command line it imports only what the interpreter's own
# start-up has loaded (sys, os, the attest package). `attest --version` then needs ._streams alone, `attest --help`
# ._streams and ._fasthelp (typer's help, cached), a command typer and one command module; every other import here
# is `# lazy` so that no path loads more than that: typer and the app cost 100-250 ms, signal and threading each
# ~9 ms on an interpreter whose site imported nothing else (python -S -X importtime). tests/cli/test_fasthelp.py
# checks that the help path imports neither typer nor typing.

__all__ = ["COMMAND_MODULES", "build_app", "main"]


# Every command module; a missing one is an error (ModuleNotFoundError), never a silent omission.
COMMAND_MODULES = ("_inventory", "_attestation", "_freeze", "_build", "_install", "_bootstrap", "_review", "_merge", "_evidence", "_policy", "_demo", "_init")

_APP: Command | None = None


def build_app(modules: tuple[str, ...] = COMMAND_MODULES) -> typer.Typer:
    """A new app with every command of ``modules`` registered once."""
    import importlib  # lazy

    from ._app import new_app  # lazy

    app = new_app()
    for module in modules:
        importlib.import_module(f"{__name__}.{module}").register(app)
    return app


def _process_app() -> Command:
    """The process's whole command, built on first use and then reused (in-process callers call main often).

    The click command, not the typer app: calling a typer app turns it into click's again on every
    call (every command's signature, a pydantic adapter for each parameter: ~0.1 s a call).
    """
    global _APP
    if _APP is None:
        import typer  # lazy

        from ._coerce import plain_coercion  # lazy: it imports typer

        _APP = plain_coercion(typer.main.get_command(build_app()))
    return _APP


def _console_app(args: list[str]) -> Command | None:
    """For the console script: the command of only the module of the command named first, or None.

    Turning every command into click's (40 commands, their signatures) is most of what building
    the whole app costs, and a command line runs one command. The module of each command is
    read from the generated help cache (``._fasthelp``), only while that cache is current.
    """
    if not args or args[0].startswith("-"):
        return None
    from ._fasthelp import command_module  # lazy

    module = command_module(args[0])
    if module is None:
        return None
    import typer  # lazy

    from ._coerce import plain_coercion  # lazy: it imports typer

    return plain_coercion(typer.main.get_command(build_app((module,))))


def _on_interrupt(came: list[bool]) -> object:
    """Note in ``came`` a SIGINT (Ctrl-C) before it is raised as ``KeyboardInterrupt``; return the handler it replaced.

    Only in the main thread with Python's own handler in place (elsewhere nothing is noted, and None returned).
    """
    import signal  # lazy
    import threading  # lazy

    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        return None

    def note(signum: int, frame: object) -> None:
        came.append(True)
        signal.default_int_handler(signum, frame)  # type: ignore[arg-type]

    return signal.signal(signal.SIGINT, note)


def _interrupted() -> int:
    """Say that the command was interrupted and what of its staging was cleaned (or is left, and how to remove it); 130."""
    from ..builder import INTERRUPTED_STAGING  # lazy: attest.builder, +0.3 s

    lines = ["attest: interrupted (SIGINT) before it finished"]
    for path, left in INTERRUPTED_STAGING:
        state = os.path.dirname(os.path.dirname(path))
        lines.append(f"attest: could not remove its staging {path}: `attest store gc --state-dir {state}` removes it" if left
                     else f"attest: removed its staging {path}")
    try:
        sys.stderr.write("".join(line + "\n" for line in lines))
    except OSError:
        pass
    return 130


def _fast_answer(words: list[str]) -> int | None:
    """The console script's ``--help`` and ``--version``, without importing typer; None when it is neither."""
    from ._streams import stdout_failure, write_stdout  # lazy

    if words[-1:] in (["--help"], ["-h"]):
        # typer's own help bytes, cached (._fasthelp).
        from ._fasthelp import cached_help  # lazy

        text = cached_help(words)
        if text is None:
            return None
        data = text.encode("utf-8", "surrogateescape")
    elif words == ["--version"]:
        # The same line the app's --version prints; it needs neither typer nor the app.
        data = f"attest {__version__}\n".encode()
    else:
        return None
    try:
        write_stdout(data)
    except OSError as e:
        return stdout_failure(e)
    return 0


def _usage_error(e: Exception, args: list[str], json_mode: bool) -> int:
    """A usage error: as typer renders it, and under ``--json`` as the error document too."""
    from ._app import render_error  # lazy
    from ._streams import stdout_failure  # lazy

    show = getattr(e, "show", None)
    if show is not None:
        show()
    else:
        sys.stderr.write(f"attest: error: {e}\n")
    if json_mode:
        from ..errors import CommonCode, InputError  # lazy

        message = getattr(e, "format_message", None)
        try:
            render_error(InputError(CommonCode.USAGE, message() if callable(message) else str(e)), True)
        except OSError as failed:
            stdout_failure(failed)
    # attest exec's own status is the command's: its own failures, bad usage too, are 125 (as env(1)).
    return 125 if args[:1] == ["exec"] else 2


def main(argv: list[str] | None = None) -> int:
    from ._streams import StdoutError, standard_streams, stdout_failure, stdout_unwritable  # lazy

    if argv is None:
        standard_streams()  # a closed descriptor: reserved, and the stream fails when written
        fast = _fast_answer(sys.argv[1:])
        if fast is not None:
            return fast
    import typer  # lazy
    from typer.exceptions import TyperException  # lazy

    from ..errors import AttestError, CommonCode, InputError  # lazy
    from ._app import error_text, line_buffered, render_error  # lazy

    line_buffered()
    args = list(sys.argv[1:] if argv is None else argv)
    # Only attest's own words: after "--" they are a command's (attest exec, review exec, review agent).
    json_mode = "--json" in (args[:args.index("--")] if "--" in args else args)
    app = _console_app(args) if argv is None else None
    if app is None:
        app = _process_app()

    def render(err: AttestError) -> int:
        """Render ``err``; its own exit status even when standard output cannot take the JSON."""
        try:
            render_error(err, json_mode)
        except OSError as e:
            sys.stderr.write(error_text(err))
            stdout_failure(e)
        return err.exit_code

    def internal(e: BaseException) -> int:
        render(InputError(CommonCode.INTERNAL, f"unexpected {type(e).__name__}: {e}"))
        return 2

    interrupted: list[bool] = []
    previous = _on_interrupt(interrupted)
    try:
        rv = app(args=args, prog_name="attest", standalone_mode=False)
        if interrupted:  # typer turns the KeyboardInterrupt into a silent return of 130
            return _interrupted()
    except AttestError as err:
        return render(err)
    except typer.Exit as e:
        return int(getattr(e, "exit_code", 1) or 0)
    except TyperException as e:  # usage errors: typer renders them itself, and under --json as the error document too
        return _usage_error(e, args, json_mode)
    except typer.Abort:
        sys.stderr.write("attest: aborted\n")
        return 2
    except KeyboardInterrupt:
        return _interrupted()
    except OSError as e:
        if isinstance(e, StdoutError) or stdout_unwritable():
            return stdout_failure(e)  # the result could not be delivered: never exit 0
        if isinstance(e, BrokenPipeError):
            return 1
        return internal(e)
    except Exception as e:  # noqa: BLE001 - last line of defence: never a traceback, never exit 0
        return internal(e)
    finally:
        if previous is not None:
            import signal  # lazy

            signal.signal(signal.SIGINT, previous)  # type: ignore[arg-type]
    # click returns the code of a typer.Exit in non-standalone mode; commands return None.
    return rv if isinstance(rv, int) else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
