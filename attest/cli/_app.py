"""The typer application, output helpers, and how the one top-level handler (``attest.cli.main``) renders a failure."""

from __future__ import annotations

import json
import os
import re
import stat
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO, TypeVar

import typer
from typer.core import TyperCommand

from .. import __version__
from .._json import loads_strict
from ..errors import AttestError, CommonCode, Finding, InputError, VerificationError
from ._streams import write_stdout

if TYPE_CHECKING:
    # typer vendors click (pinned in pyproject.toml); its classes are named here for annotations only.
    from typer._click import Context, HelpFormatter, Parameter

# Lazy imports here (each `# lazy`): every command module imports this one, so its top-level imports are part of
# building the app. rich (+51 ms) only draws progress on a terminal; attest._fs (its tempfile, +3 ms),
# attest.git (+36 ms), attest.builder (+0.3 s) and attest.review.bootstrap (+0.29 s) are needed only by the
# commands that call the helpers below (-X importtime after build_app(), median of 5).

#: The version of the ``--json`` conventions (docs/json.md): every object a command prints carries
#: it as ``"schema"``. Renaming or removing a key, or changing its meaning, increments it; adding a
#: key does not.
JSON_SCHEMA = 1

# -- options that read like the docs ----------------------------------------------------------
#
# Every option that takes a value is declared with :func:`option` (a metavar is required: PATH,
# FILE, DIR, SHA, NAME=REF, SECONDS, KEY, N, ...), every on/off switch with :func:`flag`, every
# positional with :func:`argument`; tests/cli/test_metavars.py checks the whole app.


# typer declares a parameter's default as Any (what the command's signature sees is the parsed value), and its
# Option/Argument take a dozen typed keywords these helpers pass through: the module's one use of Any.
TyperParam = Any


def option(default: TyperParam, *names: str, metavar: str, help: str, **kwargs: TyperParam) -> TyperParam:
    """An option that takes a value, shown in the help as ``--name METAVAR``."""
    return typer.Option(default, *names, metavar=metavar, help=help, **kwargs)


def flag(*names: str, help: str, **kwargs: TyperParam) -> TyperParam:
    """An on/off option (default off)."""
    return typer.Option(False, *names, help=help, **kwargs)


def argument(default: TyperParam = ..., *, metavar: str, help: str, **kwargs: TyperParam) -> TyperParam:
    """A positional argument, shown in the usage line as ``METAVAR`` (``[METAVAR]`` when optional)."""
    return typer.Argument(default, metavar=metavar, help=help, **kwargs)


class Command(TyperCommand):
    """typer's command with the usage line and argument list written as the docs write them.

    typer shows a required argument as ``{path}`` and its type as ``<path>``; here the usage
    reads ``attest verify [OPTIONS] PATH`` and the argument list ``PATH  Root of the tree...``.
    """

    @staticmethod
    def _argument_name(param: Parameter) -> str:
        name = str(param.metavar or (param.name or "").upper())
        return name if param.nargs == 1 or name.endswith("...") else name + "..."

    def collect_usage_pieces(self, ctx: Context) -> list[str]:
        pieces = [self.options_metavar] if self.options_metavar else []
        for param in self.get_params(ctx):
            if param.param_type_name == "argument":
                name = self._argument_name(param)
                pieces.append(name if param.required else f"[{name}]")
            else:
                pieces.extend(param.get_usage_pieces(ctx))
        return pieces

    def format_options(self, ctx: Context, formatter: HelpFormatter) -> None:
        args: list[tuple[str, str]] = []
        opts: list[tuple[str, str]] = []
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is None:
                continue
            if param.param_type_name == "argument":
                args.append((self._argument_name(param), record[1]))
            else:
                opts.append(record)
        if args:
            with formatter.section("Arguments"):
                formatter.write_dl(args)
        if opts:
            with formatter.section("Options"):
                formatter.write_dl(opts)


class Typer(typer.Typer):
    """A typer app whose commands are :class:`Command` unless told otherwise."""

    def command(self, *args: TyperParam, **kwargs: TyperParam) -> TyperParam:
        kwargs.setdefault("cls", Command)
        return super().command(*args, **kwargs)


def new_group(name: str, help: str) -> Typer:
    """A command group (``attest store``, ``attest build``, ...) with the top-level app's settings."""
    return Typer(name=name, help=help, no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
                 rich_markup_mode=None)


def _version(value: bool) -> None:
    if value:
        print(f"attest {__version__}")
        raise typer.Exit(0)


def _root(
    version: bool = typer.Option(False, "--version", is_eager=True, callback=_version, help="Print the version and exit."),
) -> None:
    """Reproducible builds and signed attestations of closed trees.

    Exit codes: 0 ok, 1 verification failed, 2 bad usage or unreadable input (attest exec: the
    command's own, or 125/126/127 for its own failures).
    """


#: The names of every command's help option.
HELP_OPTION_NAMES = ("-h", "--help")


def new_app() -> Typer:
    """A fresh top-level app with no commands; ``attest.cli.build_app`` registers them."""
    app = Typer(
        name="attest",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
        rich_markup_mode=None,
        context_settings={"help_option_names": list(HELP_OPTION_NAMES)},
    )
    app.callback()(_root)
    return app


BackendOption = option(None, "--backend", metavar="BACKEND",
                       help="Immutability backend of every image this run freezes: immutable, readonly, ro-bind or erofs "
                            "(root; freeze and exec only: builds and the review chain refuse it) "
                            "[default: $ATTEST_BACKEND, else immutable]; recorded with each image, never a silent fallback.")
JsonOption = flag("--json", help="Print one JSON object (machine-readable; docs/json.md) instead of text.")
STATE_DIR_HELP = ("The deployment's state directory (mode 0700: the store, builds, installations, reviews) "
                  "[default: $ATTEST_STATE_DIR, else .attest-state in the current directory]. A command that writes "
                  "into it creates it; one that only reads from it refuses a missing one (UNREADABLE).")
StateDirOption = option(None, "--state-dir", metavar="DIR", help=STATE_DIR_HELP)


def print_json(obj: Mapping[str, object]) -> None:
    """Print a command's ``--json`` object, with ``"schema"`` (:data:`JSON_SCHEMA`)."""
    if obj.get("schema", JSON_SCHEMA) != JSON_SCHEMA:
        raise ValueError(f"a --json object names another schema: {obj['schema']!r}")

    # Valid UTF-8 always: a name that is not UTF-8 (decoded with surrogateescape) becomes a \\uDCxx
    # escape, never a raw byte that makes the whole line unparseable (or a UnicodeEncodeError).
    text = json.dumps({**obj, "schema": JSON_SCHEMA}, sort_keys=True, ensure_ascii=False) + "\n"
    write_stdout(text.encode("utf-8", "backslashreplace"))


def _finding_line(f: Finding) -> str:
    where = f" {f.path}" if f.path is not None else ""
    return f"  {f.code}{where}: {f.detail}\n"


def print_findings(findings: tuple[Finding, ...] | list[Finding], *, stream: TextIO | None = None) -> None:
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

    def __init__(self, error: AttestError, *, document: dict[str, object] | None = None, text: str | None = None,
                 exit_code: int | None = None) -> None:
        super().__init__(findings=error.findings)
        # ``exit_code``: a command whose own exit status is another program's (attest exec) says its failures apart.
        self.exit_code = error.exit_code if exit_code is None else exit_code
        self.error = error
        self.document = document
        self.text = text

    def to_json(self) -> dict[str, object]:
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
    from rich.console import Console  # lazy
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn  # lazy

    # On stderr, the terminal it checked: rich's default console is stdout, where a piped
    # `attest inventory --digest` got the bar's closing newline ahead of the identity.
    with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=Console(stderr=True),
                  transient=True) as bar:
        task = bar.add_task(label)

        def update(files: int, size: int) -> None:
            bar.update(task, description=f"{label}: {files} files, {size / 1e6:.1f} MB")

        yield update


@contextmanager
def working(label: str, json_mode: bool, *, every: float = 10.0) -> Iterator[None]:
    """Progress on stderr while a long step runs: a spinner on a terminal, plain lines when piped.

    Piped (a CI log), a line when the step starts, one at least every ``every`` seconds while it
    runs, and one when it ends (done, failed, or interrupted), with the elapsed time and no
    control sequences. With --json nothing is printed: stdout is the one JSON object and
    stderr stays quiet.
    """
    if json_mode:
        yield
        return
    if not sys.stderr.isatty():
        yield from _progress_lines(label, every)
        return
    from rich.console import Console  # lazy
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn  # lazy

    with Progress(SpinnerColumn(), TextColumn(label), TimeElapsedColumn(), console=Console(stderr=True), transient=True) as bar:
        bar.add_task(label)
        yield


def _progress_lines(label: str, every: float) -> Iterator[None]:
    started = time.monotonic()
    stop = threading.Event()

    def say(text: str) -> None:
        try:
            sys.stderr.write(f"attest: {label}: {text}\n")
            sys.stderr.flush()
        except (OSError, ValueError):  # a closed stderr: the work goes on without progress lines
            pass

    def beat() -> None:
        while not stop.wait(every):
            say(f"still running ({time.monotonic() - started:.0f} s)")

    say("started")
    thread = threading.Thread(target=beat, name="attest-progress", daemon=True)
    thread.start()
    outcome = "failed"
    try:
        yield
        outcome = "done"
    except KeyboardInterrupt:
        outcome = "interrupted"
        raise
    finally:
        stop.set()
        thread.join()
        say(f"{outcome} after {time.monotonic() - started:.1f} s")


def line_buffered() -> None:
    """Make stdout line-buffered when it is not a terminal (a pipe, ``tee``, a CI log).

    Python buffers a piped stdout in blocks but writes stderr line by line, so a reader of both
    saw the errors before the lines printed ahead of them. Each line now leaves when it ends.
    """
    stream = sys.stdout
    reconfigure = getattr(stream, "reconfigure", None)
    if reconfigure is None:
        return
    try:
        # A file name that is not UTF-8 is printed as its own bytes, not a UnicodeEncodeError after the work is done.
        reconfigure(errors="surrogateescape")
        if not stream.isatty():
            reconfigure(line_buffering=True)
    except (OSError, ValueError):  # a closed or detached stream: nothing to configure
        pass


# -- checks of what the command line names (bad usage or unreadable input: exit 2) -------------


def state_to_write(given: str | os.PathLike[str] | None) -> str:
    """The state directory of a command that writes into it: ``--state-dir``, else $ATTEST_STATE_DIR, else .attest-state.

    Nothing is created here: the command's library call creates a missing one (mode 0700).

    Raises:
        InputError: ``UNREADABLE`` for a path that names no directory a state could be (a file, an empty name).
    """
    from .._fs import check_directory_path  # lazy

    if given is not None:
        state = os.fspath(given)
    else:
        from ..builder import default_state  # lazy: attest.builder, +65 ms to every command given --state-dir

        state = default_state()
    check_directory_path(state, what="--state-dir")
    return state


def state_to_read(given: str | os.PathLike[str] | None, *, made_by: str, decides_review: bool = False) -> str:
    """The state directory of a command that only reads from it: as :func:`state_to_write`, and it must exist.

    ``made_by`` says what writes that state (``attest promote``, ``attest review start``, ...): the
    message of a missing directory names it and the option, instead of a staging failure later.
    ``decides_review``: the command decides on a review from that state (review exec, recheck,
    serialize, the merge gate), so the *default* state (neither ``--state-dir`` nor
    $ATTEST_STATE_DIR) is refused inside a git work tree: run in a pull request's checkout, the
    default .attest-state would be one its author could have committed (without the runs that block
    a head).

    Raises:
        InputError: ``UNREADABLE`` when the directory does not exist.
        VerificationError: ``BOOTSTRAP_INPUT_IN_TREE``: a default state inside a git work tree.
    """
    state = state_to_write(given)
    if decides_review and given is None and not os.environ.get("ATTEST_STATE_DIR"):
        _default_state_outside_work_trees(state)
    if not os.path.isdir(state):
        how = "--state-dir DIR" if given is not None else "--state-dir DIR or set $ATTEST_STATE_DIR (the default is .attest-state here)"
        raise InputError(CommonCode.UNREADABLE, f"the state directory does not exist, and this command reads what {made_by} "
                         f"put there: run that with this state directory first, or pass {how}", os.path.abspath(state))
    return state


def _default_state_outside_work_trees(state: str) -> None:
    from ..git import enclosing_work_tree  # lazy
    from ..review.bootstrap import BootstrapCode  # lazy

    tree = enclosing_work_tree(state)
    if tree is not None:
        raise VerificationError(BootstrapCode.BOOTSTRAP_INPUT_IN_TREE,
                                f"the default state directory lies in the git work tree {tree}, which a pull request's checkout "
                                "could be: pass the deployment's --state-dir (or set $ATTEST_STATE_DIR)", os.path.abspath(state))


def state_outside_repository(state: str, repo: str | os.PathLike[str]) -> None:
    """Refuse a state directory inside the repository under review (its work tree, git directory or object stores).

    What the pull request's checkout holds is the author's: a state there (the default .attest-state of a
    command run in the checkout, or one named) could be theirs. A missing state is judged where it would be made.

    Raises:
        VerificationError: ``BOOTSTRAP_INPUT_IN_TREE``.
    """
    from ..git import repository_locations  # lazy
    from ..review.bootstrap import verify_inputs_outside  # lazy

    where = os.path.abspath(state)
    while not os.path.lexists(where) and os.path.dirname(where) != where:
        where = os.path.dirname(where)
    roots = {f"the repository under review ({w})": w for w in repository_locations(repo)}
    verify_inputs_outside({f"the state directory {os.path.abspath(state)}": where}, roots)


def existing_directory(path: str | os.PathLike[str], *, what: str = "--state-dir") -> None:
    """Refuse, as bad usage, a directory option naming state the command reads but never creates."""
    from .._fs import check_directory_path  # lazy

    check_directory_path(path, what=what)
    if not os.path.isdir(path):
        raise InputError(CommonCode.UNREADABLE, f"the {what} directory does not exist", os.fspath(path))


_OutputPath = TypeVar("_OutputPath", Path, Path | None)


def checked_output(value: _OutputPath) -> _OutputPath:
    """An output option's value, refused as bad usage when it names something a write would destroy.

    Outputs are written atomically (a new file renamed over the path), so an existing FIFO,
    device, socket or symbolic link there would be replaced by a regular file: ``-o
    /dev/stdout`` run as root swapped the system's /dev/stdout link for a file, ``-o
    /dev/full`` "succeeded" with exit 0 and left /dev/full a regular file. A missing path, a
    regular file and a directory (refused by the writer with its own message) pass.

    Raises:
        InputError: ``BAD_OUTPUT_PATH``.
    """
    if value is None:
        return value
    path = os.fspath(value)
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return value
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return value
    kind = ("a symbolic link" if stat.S_ISLNK(mode) else "a FIFO" if stat.S_ISFIFO(mode)
            else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "a socket")
    raise InputError(CommonCode.BAD_OUTPUT_PATH, f"cannot write the output there: it is {kind}, which the atomic write "
                     "would replace with a regular file; name a regular file", path)


_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


def digest_option(value: str | None, *, what: str) -> str | None:
    """A ``sha256:<64 lowercase hex>`` option value, or bad usage (a pin that can match nothing is a mistake)."""
    if value is not None and not _DIGEST.fullmatch(value):
        raise InputError(CommonCode.USAGE, f"{what} takes sha256:<64 lowercase hex>", value)
    return value


def json_input(path: str | os.PathLike[str], *, what: str, max_bytes: int) -> None:
    """Refuse, as unreadable input (exit 2), a file given as a JSON document that is not one.

    Only the outer document: its content is then verified by the library from its own read,
    so a signed but malformed payload inside stays a verification failure (exit 1).
    """
    from .._fs import read_bounded  # lazy

    loads_strict(read_bounded(path, what=what, max_bytes=max_bytes), what=what, max_bytes=max_bytes)
