"""`bootstrap()` measures each step's wall time: the nine steps of BOOTSTRAP.md, in order (no timed assertion).

Runs the chain of test_bootstrap.py (its promotion, installation and consumer repository, step 6
through its :class:`HostCheck` fake of the runner).
"""

from __future__ import annotations

import math
from pathlib import Path

from test_bootstrap import Deployment, HostCheck, make_consumer, run

from attest.review.bootstrap._chain import STEP_NAMES

NAMES = ["skill", "identity", "base", "config", "runtime", "check", "paths", "bundle", "evidence"]


def test_a_successful_bootstrap_lists_the_nine_steps_in_order_with_their_seconds(
        dep: Deployment, skill: tuple[Path, Path], tmp_path: Path) -> None:
    c = make_consumer(tmp_path / "consumer", dep.sha)
    result = run(dep, skill, c, tmp_path, runner=HostCheck())
    assert list(STEP_NAMES) == NAMES
    assert [(n, name) for n, name, _ in result.timings] == list(enumerate(NAMES, start=1))
    assert all(isinstance(s, float) and math.isfinite(s) and s >= 0 for _, _, s in result.timings)
    doc = result.to_json(timings=True)
    assert doc["timings"] == [{"step": n, "name": name, "seconds": s} for n, name, s in result.timings]
    # The documented --json shape is unchanged unless timings are asked for.
    assert "timings" not in result.to_json()
    assert {k: v for k, v in doc.items() if k != "timings"} == result.to_json()
