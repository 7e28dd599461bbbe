"""This checkout's own runtime (builders/runtime.toml at HEAD), built once per test session for every xdist worker.

A real build of the project's runtime costs 14-21 s of one core (the lock's wheels installed in the
sandbox, checked-hash bytecode of the standard library and site-packages, the freeze), and four test
modules need one (the bootstrap's managed check, the interpreter closure, the registry's end-to-end
build, the real agent CLI's deployment). The first worker to ask builds it into a state directory
beside the workers' own temporary directories, holding an flock; the others wait on the lock, then
find it built. Each consumer still calls :func:`attest.builder.build_runtime` itself on that state,
so what it gets is a result attest established (the build record found, the image verified and
reused: docs/build.md), only not a second build of the same inputs.

The consumers write into the shared state too (base snapshots, a promotion's skill and checkpoint,
an installation, a reviewer image): distinct store entries, which the store's own lock makes safe
for concurrent processes, as for two reviews on one CI runner. No test may collect garbage in it or
change an entry of it; a test that tampers works on its own state.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from attest.builder import BuildResult, RuntimeRecipe, Sandbox, build_runtime, fetch, load_lock, load_recipe
from attest.errors import EnvironmentFailure

from .agent_cli import cache_root
from .caps import BACKEND

__all__ = ["ProjectRuntime", "shared_root"]

ROOT = Path(__file__).resolve().parents[2]
_NAME = "project-runtime"


@dataclass(frozen=True)
class ProjectRuntime:
    """Where the shared build is: this checkout's HEAD, its runtime recipe, the state holding the image, the wheel cache."""

    sha: str
    recipe: RuntimeRecipe
    state: Path
    cache: Path

    def build(self, sandbox: Sandbox | None = None) -> BuildResult:
        """``build_runtime`` of the recipe at HEAD on the shared state: a verified reuse of the session's one build."""
        sandbox = sandbox or Sandbox.establish(allow_unisolated_network=False)
        return build_runtime(self.recipe, self.sha, str(self.state), str(self.cache), sandbox, freeze_backend=BACKEND)


def shared_root(factory: pytest.TempPathFactory) -> Path:
    """The directory every worker of this session shares: the parent of a worker's base temporary directory
    (xdist gives each worker ``BASETEMP/popen-gwN``), the base temporary directory itself without xdist."""
    base = factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def project_runtime(factory: pytest.TempPathFactory) -> ProjectRuntime:
    """The session's one build of this checkout's runtime, made by whichever worker asks first."""
    root = shared_root(factory) / _NAME
    root.mkdir(exist_ok=True)
    sha = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    recipe = load_recipe(ROOT / "builders" / "runtime.toml")
    assert isinstance(recipe, RuntimeRecipe)
    shared = ProjectRuntime(sha, recipe, root / "state", cache_root() / "wheels")  # content-addressed, re-hashed on use
    fd = os.open(root / "lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # held for the build: the other workers wait here, then find it built
        done = root / "built"
        if not done.exists():
            try:
                sandbox = Sandbox.establish(allow_unisolated_network=False)
            except EnvironmentFailure as e:
                pytest.skip(f"the project's runtime cannot be built here: {e}")
            fetch(load_lock(recipe.lock_path), shared.cache, lock_path=recipe.lock_path)
            result = shared.build(sandbox)
            done.write_text(result.inventory.identity + "\n")
    finally:
        os.close(fd)
    return shared

