"""`store gc` removes the staging of an interrupted build, never that of a running one."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from support.build import SLEEPING_STEP, Project, build_stages, make_toolchain_repo, wait_for_running_step

from attest.builder import fetch, load_lock, load_recipe
from attest.freeze import Store


def test_gc_spares_a_live_build_and_removes_a_killed_ones_staging(project: Project, tmp_path: Path) -> None:
    # The build code sleeps inside its step: a long build, then an interrupted one.
    # It marks when it runs: as the step's uid, after the confinement dropped root (a review found
    # that a step killed only before that point died, and one killed later outlived the builder).
    sha = make_toolchain_repo(project.repo, build_hook=SLEEPING_STEP)
    recipe = load_recipe(project.recipe)
    fetch(load_lock(recipe.lock_path), project.cache, lock_path=recipe.lock_path)
    state = tmp_path / "state"
    build = subprocess.Popen([sys.executable, "-m", "attest", "build", "runtime", str(project.recipe),
                              "--toolchain-rev", sha, "--state-dir", str(state), "--cache", str(project.cache), "--json"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        stage = wait_for_running_step(build, state)
        Store(state).gc(recent=0)
        assert build_stages(state) == [stage], "gc removed the staging of a running build"
    finally:
        os.killpg(build.pid, signal.SIGKILL)  # interrupted: no cleanup runs
        build.wait()
    assert build_stages(state) == [stage]
    # The confined step died with the builder: no process is left in the staging directory.
    deadline = time.monotonic() + 10
    while subprocess.run(["pgrep", "-f", stage], capture_output=True).returncode == 0:
        assert time.monotonic() < deadline, "a build step outlived the interrupted build"
        time.sleep(0.1)
    Store(state).gc(recent=0)
    assert build_stages(state) == []
