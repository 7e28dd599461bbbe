"""`attest demo`: the end-to-end demonstration on embedded defaults."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from ._app import flag, option


def register(app: typer.Typer) -> None:
    app.command("demo")(demo)


def demo(
    state_dir: Optional[Path] = option(None, "--state-dir", metavar="DIR", help="Where the demo keeps its key, store and trees "
                                       "[default: .attest-state, unless that lies inside another git repository]."),
    offline: bool = flag("--offline", help="Skip the steps that need the package registry (fetch, runtime, promotion)."),
) -> None:
    """Show what attest does, end to end, on a sample tree (a local key, a store under --state-dir)."""
    from .._fs import check_directory_path
    from ..demo import check_default_state, run_demo

    if state_dir is None:
        state_dir = check_default_state(Path(".attest-state"))
    check_directory_path(state_dir, what="--state-dir")

    run_demo(state_dir, print, offline=offline)
