"""Ctrl-C: an interrupted `attest build runtime` says so and what it cleaned, exits 130 and leaves no staging behind.

SIGINT goes to the whole foreground process group, as a terminal's Ctrl-C does: the builder and its
confined build step both receive it, mid-step.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from support.build import RUNTIME_RECIPE, SLEEPING_STEP, build_stages, make_toolchain_repo, wait_for_running_step, write_lock

from attest.builder import fetch, load_lock, load_recipe


def test_an_interrupted_build_says_so_removes_its_staging_and_exits_130(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    (root / "lockfiles" / "wheels").mkdir(parents=True)
    write_lock(root, root / "lockfiles" / "wheels")
    sha = make_toolchain_repo(root / "repo", build_hook=SLEEPING_STEP)
    (root / "builders").mkdir()
    recipe = root / "builders" / "runtime.toml"
    recipe.write_text(RUNTIME_RECIPE)
    loaded = load_recipe(recipe)
    cache = tmp_path / "cache"
    fetch(load_lock(loaded.lock_path), cache, lock_path=loaded.lock_path)
    state = tmp_path / "state"
    env = {k: v for k, v in os.environ.items() if not k.startswith("ATTEST_") or k == "ATTEST_BACKEND"}
    build = subprocess.Popen([sys.executable, "-m", "attest", "build", "runtime", str(recipe), "--toolchain-rev", sha,
                              "--state-dir", str(state), "--cache", str(cache)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True, env=env)
    try:
        stage = wait_for_running_step(build, state)
        os.killpg(build.pid, signal.SIGINT)  # Ctrl-C: the whole process group
        out, err = build.communicate(timeout=60)
    finally:
        if build.poll() is None:
            os.killpg(build.pid, signal.SIGKILL)
            build.wait()
    assert build.returncode == 130, (out, err)
    assert "Traceback" not in err, err
    assert "interrupted" in err and f"removed its staging {state / 'build-staging' / stage}" in err, err
    assert build_stages(state) == []
    for sub in ("staging", "runs"):
        assert not (state / sub).exists() or os.listdir(state / sub) == []
    # Nothing was published: no build record without its attestations.
    assert not (state / "builds").exists() or os.listdir(state / "builds") == []


def test_store_gc_lists_the_leftover_staging_it_removes(tmp_path: Path) -> None:
    """What a killed build and an interrupted freeze left is removed and listed, in text and --json; --dry-run only lists it."""
    import json

    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    build_stage = state / "build-staging" / "stage-0123456789abcdef"
    (state / "build-staging").mkdir(mode=0o700)  # as make_staging makes them: private
    build_stage.mkdir(mode=0o700)
    (build_stage / "src").mkdir(mode=0o700)
    (build_stage / "src" / "big").write_bytes(b"x" * 4096)
    (state / "staging").mkdir(mode=0o700)
    (state / "staging" / "freeze-left").mkdir(mode=0o700)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ATTEST_") or k == "ATTEST_BACKEND"}

    def gc(*extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "attest", "store", "gc", "--state-dir", str(state), *extra],
                              capture_output=True, text=True, env=env, timeout=60)

    expected = sorted([str(build_stage), str(state / "staging" / "freeze-left")])
    dry = gc("--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    assert sorted(json.loads(dry.stdout)["staging"]) == expected
    assert build_stage.exists() and (state / "staging" / "freeze-left").exists()
    done = gc()
    assert done.returncode == 0, done.stderr
    assert sorted(line.removeprefix("removed staging ") for line in done.stdout.splitlines() if line.startswith("removed staging ")) == expected
    assert "2 leftover staging" in done.stdout
    assert not build_stage.exists() and os.listdir(state / "staging") == []
    again = gc("--json")
    assert again.returncode == 0 and json.loads(again.stdout)["staging"] == []
