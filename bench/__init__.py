"""Benchmarks: ``python -m bench`` (or ``just bench``) runs every ``bench/case_*.py`` module.

These are measurements, not tests: nothing here asserts a time. Each case builds its own
inputs in a temporary directory, times attest against standard tools *in the same run*,
alternating the contenders round by round, and prints medians and ratios with the target
next to each ratio. The machine is shared and noisy; compare ratios, not absolute seconds.

Writing a case
--------------
A case is a module ``bench/case_<name>.py`` that defines::

    DESCRIPTION = "one line saying what the case measures"

    def run(work: pathlib.Path, args: bench.BenchArgs) -> list[bench.Row]:
        ...

``work`` is an empty directory of its own (or, with ``--work DIR``, a kept directory the case
may reuse between invocations: check a marker before rebuilding). ``args`` carries
``quick`` (smaller inputs), ``runs`` (rounds per measurement: 3 with ``--quick``, else 5 or
more) and ``attest`` (the console script to time). ``run`` returns :class:`Row` objects; the
runner prints them as a table, so a case only prints what it wants to say about its inputs.

The helpers in :mod:`bench._harness`:

- ``measure_alternating({"name": argv_or_callable, ...}, runs)`` -> ``{"name": median_seconds}``:
  one untimed warm-up round, then ``runs`` rounds, each running every contender once in a
  rotated order so slow drifts of a shared machine hit all contenders alike.
- ``shell("find \\"$1\\" -type f ...", tree)`` -> an argv running a pipeline via ``sh -c`` with
  the tree as ``$1`` (no quoting bugs).
- ``Row(case, figure, ours, theirs, target=..., note=...)``; ``Row.ratio`` is ours/theirs.
  ``target`` is the largest acceptable ratio (None: informative only).
- ``print_rows(rows)`` prints the table; ``machine_summary()`` the machine line.
- ``write_pseudo_random(path, size, seed)`` fills a file with deterministic incompressible bytes.
"""

from __future__ import annotations

from ._harness import BenchArgs, Row, machine_summary, measure_alternating, print_rows, shell, write_pseudo_random

__all__ = ["BenchArgs", "Row", "machine_summary", "measure_alternating", "print_rows", "shell", "write_pseudo_random"]
