"""The demo's second run (everything stored) against its 5 s target, with a per-step breakdown."""

from __future__ import annotations

import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

from ._harness import BenchArgs, Row, measure_alternating

DESCRIPTION = (
    "`attest demo --state-dir DIR` run once to fill the store (fetch, builds, rebuilders, promotion), then timed again "
    "with everything stored: the total against the 5 s target, and the median seconds of each numbered step (an "
    "in-process run with a timestamp per line)"
)

TARGET_S = 5.0
_STEP = re.compile(r"^(\d+)\. ")

# One in-process run whose every printed line carries the seconds since the previous line; the parent sums them per step.
_TIMED = """
import sys, time
from pathlib import Path
from attest.demo import run_demo
last = time.perf_counter()
def say(line):
    global last
    now = time.perf_counter()
    sys.stdout.write(f"{now - last:.6f}\\t{line}\\n")
    sys.stdout.flush()
    last = now
run_demo(Path(sys.argv[1]), say)
sys.stdout.write(f"{time.perf_counter() - last:.6f}\\tend\\n")
"""


def _per_step(python: str, state: Path) -> dict[int, float]:
    """Seconds per numbered step of one run: each line's time goes to the step whose heading came before it."""
    out = subprocess.run([python, "-c", _TIMED, str(state)], capture_output=True, text=True, check=False,
                         env={**os.environ, "PYTHONDONTWRITEBYTECODE": ""})
    if out.returncode != 0:
        raise RuntimeError(f"the timed demo run failed: {out.stderr[-2000:]}")
    steps: dict[int, float] = {}
    step = 0
    for line in out.stdout.splitlines():
        sec, _, text = line.partition("\t")
        try:
            dt = float(sec)
        except ValueError:
            continue  # the child command of step 7 writes to the same stdout
        # A line's delay is the work done since the line before it, so a heading's delay belongs to the step before it.
        steps[step] = steps.get(step, 0.0) + dt
        m = _STEP.match(text)
        if m:
            step = int(m.group(1))
    return steps


def run(work: Path, args: BenchArgs) -> list[Row]:
    state = work / "state"
    if not state.exists():
        state.mkdir(mode=0o700)
    argv = [str(args.attest), "demo", "--state-dir", str(state)]
    t0 = time.perf_counter()
    first = subprocess.run(argv, capture_output=True, text=True, check=False)
    first_s = time.perf_counter() - t0
    if first.returncode != 0:
        print(f"  skipped: the first demo run failed:\n{first.stdout[-1500:]}{first.stderr[-1500:]}")
        return []
    if "skipped" in first.stdout and "trusted review chain" in first.stdout:
        print("  note: this demo stopped before the trusted review chain (no sandbox or registry); the figure covers less")
    print(f"  first run (fills the store, or finds it filled by an earlier bench run): {first_s:.1f} s")
    python = str(Path(args.attest).parent / "python")
    if not os.path.exists(python):
        python = sys.executable
    runs: list[dict[int, float]] = []
    # The CLI and the timed in-process run alternate round by round, so the breakdown is of the same moments.
    m = measure_alternating({"demo": argv, "steps": lambda: runs.append(_per_step(python, state))}, args.runs)
    runs = runs[1:]  # the first was the untimed warm-up round
    rows = [Row("demo, everything stored", "`attest demo` second run vs the 5 s target", m["demo"], TARGET_S, 1.0,
                "'baseline' is the target itself")]
    names = sorted(set().union(*runs))
    for n in names:
        sec = statistics.median(r.get(n, 0.0) for r in runs)
        if sec >= 0.05:
            rows.append(Row("demo step breakdown", f"step {n}" if n else "start", sec))
    rows.append(Row("demo step breakdown", "every step (the in-process run's total)", statistics.median(sum(r.values()) for r in runs)))
    return rows
