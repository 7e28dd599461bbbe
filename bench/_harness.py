"""Reusable timing harness: alternate contenders, take medians, print ratios."""

from __future__ import annotations

import os
import platform
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

Command = Callable[[], None] | Sequence[str]


@dataclass(frozen=True, slots=True)
class BenchArgs:
    quick: bool
    runs: int
    attest: Path


@dataclass(frozen=True, slots=True)
class Row:
    """One figure: our median against theirs, with the largest acceptable ratio."""

    case: str
    figure: str
    ours: float
    theirs: float | None = None
    target: float | None = None
    note: str = ""

    @property
    def ratio(self) -> float | None:
        if self.theirs is None or self.theirs <= 0:
            return None
        return self.ours / self.theirs

    @property
    def met(self) -> bool | None:
        r = self.ratio
        if r is None or self.target is None:
            return None
        return r <= self.target


def shell(script: str, *args: str | os.PathLike[str]) -> list[str]:
    """An argv that runs ``script`` with ``sh -c``; ``args`` become ``$1``, ``$2``..."""
    return ["sh", "-c", script, "sh", *(os.fspath(a) for a in args)]


def _run_once(cmd: Command) -> float:
    if callable(cmd):
        t0 = time.perf_counter()
        cmd()
        return time.perf_counter() - t0
    argv = list(cmd)
    t0 = time.perf_counter()
    proc = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    elapsed = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"{argv!r} exited {proc.returncode}: {proc.stderr.decode(errors='replace')[-2000:]}")
    return elapsed


def measure_alternating(
    commands: Mapping[str, Command],
    runs: int,
    *,
    warmup: int = 1,
    samples: dict[str, list[float]] | None = None,
) -> dict[str, float]:
    """Median wall seconds of each command over ``runs`` alternating rounds.

    A command is a callable or an argv (run with stdout discarded; a non-zero exit raises).
    Round ``i`` runs the contenders rotated by ``i`` so none always runs first. ``warmup``
    untimed rounds come first (they also warm the page cache). Pass ``samples`` to receive
    every timing.
    """
    names = list(commands)
    if not names or runs < 1:
        raise ValueError("need at least one command and one run")
    for _ in range(warmup):
        for name in names:
            _run_once(commands[name])
    times: dict[str, list[float]] = {name: [] for name in names}
    for i in range(runs):
        k = i % len(names)
        for name in names[k:] + names[:k]:
            times[name].append(_run_once(commands[name]))
    if samples is not None:
        samples.update(times)
    return {name: statistics.median(ts) for name, ts in times.items()}


def write_pseudo_random(path: Path, size: int, seed: int, *, block: int = 1 << 20) -> None:
    """Write ``size`` deterministic, incompressible bytes (fast: one random block, varied per block)."""
    rng = random.Random(seed)
    base = rng.randbytes(min(size, block))
    with open(path, "wb") as f:
        written = 0
        n = 0
        while written < size:
            chunk = n.to_bytes(8, "little") + base[8:]
            take = min(len(chunk), size - written)
            f.write(chunk[:take])
            written += take
            n += 1


def machine_summary() -> str:
    model = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        load = "load {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())
    except OSError:
        load = ""
    return (
        f"machine: nproc={os.cpu_count()} ({len(os.sched_getaffinity(0))} usable) {model}; "
        f"{platform.system()} {platform.release()}; Python {platform.python_version()}; {load}"
    )


def _fmt_s(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x:.3f}" if x >= 0.1 else f"{x * 1000:.1f}ms"


def print_rows(rows: Sequence[Row], *, out=None) -> None:
    """Print ``rows`` as a table: case, figure, medians, ratio, target and whether it is met."""
    out = out or sys.stdout
    header = ("case", "figure", "attest s", "baseline s", "ratio", "target", "met")
    table = [header]
    for r in rows:
        ratio = r.ratio
        met = r.met
        table.append(
            (
                r.case,
                r.figure,
                _fmt_s(r.ours),
                _fmt_s(r.theirs),
                "-" if ratio is None else f"{ratio:.2f}",
                "-" if r.target is None else f"<= {r.target:.2f}",
                "-" if met is None else ("yes" if met else "NO"),
            )
        )
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    for j, row in enumerate(table):
        out.write("  ".join(cell.ljust(widths[i]) if i < 2 else cell.rjust(widths[i]) for i, cell in enumerate(row)).rstrip() + "\n")
        if j == 0:
            out.write("  ".join("-" * w for w in widths) + "\n")
    notes = [(r.case, r.figure, r.note) for r in rows if r.note]
    for case, figure, note in notes:
        out.write(f"  note [{case} / {figure}]: {note}\n")
    out.flush()
