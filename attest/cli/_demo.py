"""`attest demo`: the end-to-end demonstration on embedded defaults."""

from __future__ import annotations

import re
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Optional

import typer

from ._app import flag, option

# The library modules are imported in the command that needs them (each `# lazy`): building the whole app (`attest`
# alone, a usage error, a stale help cache, every in-process main) imports every command module, and would import them
# too: attest.demo +0.48 s, attest._fs (its tempfile) +3 ms, over the app's own 60 ms (-X importtime after
# build_app(), median of 5).


def register(app: typer.Typer) -> None:
    app.command("demo")(demo)


def demo(
    state_dir: Optional[Path] = option(None, "--state-dir", metavar="DIR", help="Where the demo keeps its key, store and trees "
                                       "[default: .attest-state, unless that lies inside another git repository]."),
    offline: bool = flag("--offline", help="Skip the steps that need the package registry (fetch, runtime, promotion)."),
) -> None:
    """Show what attest does, end to end, on a sample tree (a local key, a store under --state-dir)."""
    from .._fs import check_directory_path  # lazy
    from ..demo import check_default_state, run_demo  # lazy

    if state_dir is None:
        state_dir = check_default_state(Path(".attest-state"))
    check_directory_path(state_dir, what="--state-dir")

    with heartbeat(say_wrapped) as say:
        run_demo(state_dir, say, offline=offline)


@contextmanager
def heartbeat(say: Callable[[str], None], *, every: float = 10.0) -> Iterator[Callable[[str], None]]:
    """``say``, and a line on stderr whenever the demo has said nothing for ``every`` seconds (a build, a rebuilder, a
    promotion's rebuild check: each a minute at most, each silent on stdout while it runs).

    The line names the step the demo is in and how long it has run: ``attest: demo step 11: still running (20 s)``.
    Plain lines on a terminal and in a CI log alike; stdout keeps only the demo's own lines.
    """
    started = last = time.monotonic()
    step = ""
    stop = threading.Event()

    def said(text: str) -> None:
        nonlocal started, last, step
        number = re.match(r"(\d+)\. ", text)
        if number is not None:
            step, started = number.group(1), time.monotonic()
        say(text)
        last = time.monotonic()

    def beat() -> None:
        nonlocal last
        while not stop.wait(min(1.0, every / 2)):
            now = time.monotonic()
            if now - last >= every:
                try:
                    sys.stderr.write(f"attest: demo step {step or 'set-up'}: still running ({now - started:.0f} s)\n")
                    sys.stderr.flush()
                except (OSError, ValueError):  # a closed stderr: the demo goes on without these lines
                    pass
                last = now

    thread = threading.Thread(target=beat, name="attest-demo-heartbeat", daemon=True)
    thread.start()
    try:
        yield said
    finally:
        stop.set()
        thread.join()


WIDTH = 100


def say_wrapped(text: str) -> None:
    """Print a demo line, wrapped at word boundaries to WIDTH columns; a continuation is indented 4 more than its line.

    A word longer than the width (a path, an identity) is never cut: it goes on a line of its own.
    """
    for line in text.split("\n"):
        if len(line) <= WIDTH:
            print(line)
            continue
        indent = " " * (len(line) - len(line.lstrip(" ")) + 4)
        print("\n".join(textwrap.wrap(line, WIDTH, subsequent_indent=indent, break_long_words=False, break_on_hyphens=False)))
