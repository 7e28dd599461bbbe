"""The project's own runtime: a hermetic build with a warm cache vs pip installing the same wheels; a no-op rebuild."""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import sys
from pathlib import Path

from ._harness import BenchArgs, Row, measure_alternating

DESCRIPTION = (
    "`attest build runtime` of this repository's HEAD from lockfiles/pylock.toml with a warm cache (export the tree from "
    "git objects, build the wheel with the locked setuptools in an empty network namespace, install 36 wheels with "
    "installer, normalize, inventory, freeze: immutable flag + verification of the frozen copy) vs `pip install "
    "--no-index --no-deps --target` of the same locked wheels (no build, no freeze, no verification); and a no-op "
    "rebuild (already in the store: interpreter identity, input address, seal check) against its 0.3 s target"
)

ROOT = Path(__file__).resolve().parent.parent


def _remove(path: Path) -> None:
    if path.exists():
        subprocess.run(["chattr", "-R", "-f", "-i", str(path)], check=False, capture_output=True)
        shutil.rmtree(path)


def run(work: Path, args: BenchArgs) -> list[Row]:
    from attest.builder import Sandbox, build_runtime, fetch, load_lock, load_recipe
    from attest.errors import AttestError

    recipe = load_recipe(ROOT / "builders" / "runtime.toml")
    cache = work / "cache"
    try:
        fetch(load_lock(recipe.lock_path), cache, lock_path=recipe.lock_path)  # the networked step, untimed
    except AttestError as e:
        print(f"  skipped: cannot fetch the lock ({e})")
        return []
    sha = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    sandbox = Sandbox.establish(allow_unisolated_network=True)
    if not sandbox.network_isolated:
        print("  note: no network namespace here; builds run unisolated")
    wheels = sorted(str(p) for p in cache.rglob("*.whl") if not p.name.startswith("setuptools-"))
    counter = itertools.count()
    states: list[Path] = []

    def ours() -> None:
        state = work / f"state-{next(counter)}"
        states.append(state)
        build_runtime(recipe, sha, str(state), str(cache), sandbox)

    def theirs() -> None:
        target = work / f"pip-{next(counter)}"
        states.append(target)
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-index", "--no-deps", "--no-compile",
                        "--disable-pip-version-check", "--target", str(target), *wheels],
                       check=True, env={**os.environ, "PIP_CONFIG_FILE": os.devnull})

    runs = max(2, args.runs // 2) if args.quick else args.runs
    m = measure_alternating({"attest": ours, "pip": theirs}, runs)
    rows = [Row("project runtime", "attest build runtime, warm cache vs pip install --target of the same wheels",
                m["attest"], m["pip"], None, "attest also builds the toolchain wheel, freezes and verifies")]
    state = work / "state-noop"
    build_runtime(recipe, sha, str(state), str(cache), sandbox)
    noop = measure_alternating({"noop": lambda: build_runtime(recipe, sha, str(state), str(cache), sandbox)}, args.runs)
    rows.append(Row("project runtime", "no-op rebuild (already in the store), library call vs the 0.3 s target",
                    noop["noop"], 0.3, 1.0, "'theirs' is the target itself"))
    for p in [*states, state]:
        _remove(p)
    return rows
