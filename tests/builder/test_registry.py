"""End to end on the project's own lock: fetch from the registry, build, run, rebuild-check."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from support.build import registry_reachable
from support.project_runtime import project_runtime

from attest.builder import Sandbox, fetch, load_lock, load_recipe
from attest.builder._rebuild import rebuild_check

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.registry
@pytest.mark.skipif(not registry_reachable(), reason="the package registry is unreachable")
def test_project_runtime_from_its_own_lock(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    recipe = load_recipe(ROOT / "builders" / "runtime.toml")
    cache = tmp_path / "cache"
    first = fetch(load_lock(recipe.lock_path), cache, lock_path=recipe.lock_path)
    assert first.network_used and len(first.fetched) == len(load_lock(recipe.lock_path).packages)
    # The session's one build of HEAD (support.project_runtime), verified and reused; the rebuild check below builds
    # again, from the wheels just fetched, and must reproduce it.
    shared = project_runtime(tmp_path_factory)
    sha, state, sandbox = shared.sha, shared.state, Sandbox.establish(allow_unisolated_network=False)
    result = shared.build(sandbox)
    assert {d["name"] for d in result.details["distributions"]} >= {"attest", "sigstore", "typer"}
    out = subprocess.run([Path(result.store_path) / "bin" / "attest", "--help"], capture_output=True,
                         env={"PATH": "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1"})
    assert out.returncode == 0 and b"Usage: attest" in out.stdout
    report = rebuild_check(recipe, sha, str(state), cache=str(cache), sandbox=sandbox, first=result)
    assert report.ok, [str(f) for f in report.findings]
