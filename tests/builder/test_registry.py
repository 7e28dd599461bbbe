"""End to end on the project's own lock: fetch from the registry, build, run, rebuild-check."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from support.build import registry_reachable

from attest.builder import Sandbox, build_runtime, fetch, load_lock, load_recipe
from attest.builder._rebuild import rebuild_check

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.registry
@pytest.mark.skipif(not registry_reachable(), reason="the package registry is unreachable")
def test_project_runtime_from_its_own_lock(tmp_path: Path) -> None:
    recipe = load_recipe(ROOT / "builders" / "runtime.toml")
    cache = tmp_path / "cache"
    first = fetch(load_lock(recipe.lock_path), cache, lock_path=recipe.lock_path)
    assert first.network_used and len(first.fetched) == len(load_lock(recipe.lock_path).packages)
    sha = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    sandbox = Sandbox.establish(allow_unisolated_network=False)
    state = tmp_path / "state"
    result = build_runtime(recipe, sha, str(state), str(cache), sandbox)
    assert {d["name"] for d in result.details["distributions"]} >= {"attest", "sigstore", "typer"}
    out = subprocess.run([Path(result.store_path) / "bin" / "attest", "--help"], capture_output=True,
                         env={"PATH": "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1"})
    assert out.returncode == 0 and b"Usage: attest" in out.stdout
    report = rebuild_check(recipe, sha, str(state), cache=str(cache), sandbox=sandbox, first=result)
    assert report.ok, [str(f) for f in report.findings]
