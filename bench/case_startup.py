"""`attest --help`, `attest -h` and `attest freeze --help` over the bare interpreter, against the +50 ms target."""

from __future__ import annotations

import sys
from pathlib import Path

from ._harness import BenchArgs, Row, measure_alternating
from .case_inventory import _base_python

DESCRIPTION = (
    "`attest --help`, `attest -h`, `attest freeze --help` (the console script) vs `python3 -c pass` (the real "
    "interpreter, not the venv's): what each costs over the interpreter's own start-up, against the +50 ms target"
)

TARGET_S = 0.050


def run(work: Path, args: BenchArgs) -> list[Row]:
    """The console script answers these from the cached help texts (attest.cli._fasthelp) when they are
    current; a stale cache (a command module edited without `python docs/gen_cli.py`) falls back to
    typer and shows up here as a missed target."""
    attest = str(args.attest)
    py = _base_python()
    helps = {"attest --help": [attest, "--help"], "attest -h": [attest, "-h"], "attest freeze --help": [attest, "freeze", "--help"]}
    # The venv's interpreter too: it runs the same site (the editable install's finder) as the console script.
    m = measure_alternating({**helps, "python": [py, "-c", "pass"], "venv": [sys.executable, "-c", "pass"]}, max(args.runs, 10))
    rows = []
    for label in helps:
        over = m[label] - m["python"]
        rows.append(
            Row(
                "start-up",
                f"{label}: seconds over python3 -c pass, vs the +50 ms target",
                over,
                TARGET_S,
                1.0,
                note=f"{label} {1000 * m[label]:.0f} ms, {py} -c pass {1000 * m['python']:.0f} ms: {1000 * over:+.0f} ms "
                f"('baseline' is the target itself); over the venv's {sys.executable} -c pass ({1000 * m['venv']:.0f} ms): "
                f"{1000 * (m[label] - m['venv']):+.0f} ms",
            )
        )
    return rows
