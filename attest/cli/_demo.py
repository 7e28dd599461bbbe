"""`attest demo`: the end-to-end demonstration on embedded defaults."""

from __future__ import annotations

import textwrap
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

    run_demo(state_dir, say_wrapped, offline=offline)


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
