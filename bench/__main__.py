"""Run every bench/case_*.py module: ``python -m bench [--quick] [--only NAME] [--runs N] [--work DIR]``."""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
import tempfile
import time
from pathlib import Path

from ._harness import BenchArgs, Row, machine_summary, print_rows


def _cases() -> list[str]:
    pkg = Path(__file__).resolve().parent
    return sorted(m.name[len("case_") :] for m in pkgutil.iter_modules([str(pkg)]) if m.name.startswith("case_"))


def main(argv: list[str] | None = None) -> int:
    names = _cases()
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    p.add_argument("--quick", action="store_true", help="smaller inputs and 3 runs (a smoke run; ratios are less telling)")
    p.add_argument("--only", action="append", choices=names, metavar="NAME", help=f"run only this case (repeatable): {', '.join(names)}")
    p.add_argument("--runs", type=int, default=None, help="timed rounds per measurement (default 5, 3 with --quick)")
    p.add_argument("--work", type=Path, default=None, help="build inputs here and keep them for the next run (default: a temp dir, removed)")
    p.add_argument("--attest", type=Path, default=Path(sys.executable).parent / "attest", help="the attest console script to time")
    ns = p.parse_args(argv)
    runs = ns.runs if ns.runs is not None else (3 if ns.quick else 5)
    args = BenchArgs(quick=ns.quick, runs=runs, attest=ns.attest)
    if not ns.attest.exists():
        p.error(f"{ns.attest} does not exist (run inside the project's .venv, or pass --attest)")
    print(machine_summary())
    print(
        f"every figure is the median wall time of {runs} timed rounds after one untimed warm-up round; "
        "contenders alternate within each round. The warm-up also warms the page cache "
        "(dropping caches needs root and disturbs other users, so all figures are warm-cache). "
        "ratio = attest / baseline; lower is better."
    )
    all_rows: list[Row] = []
    for name in ns.only or names:
        mod = importlib.import_module(f"{__package__}.case_{name}")
        print(f"\n== {name}: {getattr(mod, 'DESCRIPTION', '')}", flush=True)
        t0 = time.perf_counter()
        if ns.work is not None:
            work = ns.work / name
            work.mkdir(parents=True, exist_ok=True)
            rows = mod.run(work, args)
        else:
            with tempfile.TemporaryDirectory(prefix=f"attest-bench-{name}-") as tmp:
                rows = mod.run(Path(tmp), args)
        print_rows(rows)
        print(f"({name} took {time.perf_counter() - t0:.0f} s including building its inputs)")
        all_rows.extend(rows)
    if len(ns.only or names) > 1:
        print("\n== summary")
        print_rows(all_rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
