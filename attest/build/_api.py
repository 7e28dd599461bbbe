"""One call per command: what the CLI (and `attest promote`'s callers) use.

Each function takes paths and flags as a person gives them, builds the library objects
and runs one operation. Defaults: the state directory ``$ATTEST_STATE_DIR`` or
``.attest-state``, the cache ``STATE/cache``.
"""

from __future__ import annotations

import os
from typing import Any

from ..errors import InputError
from ._cache import FetchResult, fetch
from ._codes import BuildCode
from ._lock import load_lock
from ._promote import PromotionResult, promote
from ._rebuild import RebuildReport, rebuild_check, sign_vsa
from ._recipe import RuntimeRecipe, SkillRecipe, load_recipe
from ._runtime import build_runtime
from ._sandbox import Sandbox
from ._skill import build_skill
from ._store import BuildResult


def default_state() -> str:
    return os.environ.get("ATTEST_STATE_DIR") or ".attest-state"


def default_cache(state: str) -> str:
    return os.path.join(state, "cache")


def run_fetch(lock_path: str, cache: str, *, python: str | None = None) -> FetchResult:
    return fetch(load_lock(lock_path), cache, lock_path=lock_path, python=python)


def _recipe(path: str, kind: str) -> Any:
    recipe = load_recipe(path)
    if recipe.kind != kind:
        raise InputError(BuildCode.BAD_RECIPE, f"this is a {recipe.kind} recipe, not a {kind} recipe", path)
    return recipe


def _signer(key: str | None) -> Any:
    if key is None:
        return None
    from ..attestation import load_signer

    return load_signer(key)


def run_build_runtime(recipe_path: str, rev: str, state: str, *, cache: str | None = None, key: str | None = None,
                      allow_unisolated_network: bool = False, python: str | None = None, fmt: str = "dsse",
                      freeze_backend: str = "immutable") -> BuildResult:
    from ._attest import attest_build

    recipe: RuntimeRecipe = _recipe(recipe_path, "runtime")
    signer = _signer(key)
    sandbox = Sandbox.establish(allow_unisolated_network=allow_unisolated_network)
    result = build_runtime(recipe, rev, state, cache or default_cache(state), sandbox, python=python, freeze_backend=freeze_backend)
    return attest_build(result, signer, state, fmt=fmt) if signer is not None else result


def run_build_skill(recipe_path: str, rev: str, state: str, *, installer_rev: str | None = None, key: str | None = None,
                    fmt: str = "dsse", freeze_backend: str = "immutable") -> BuildResult:
    from ._attest import attest_build

    recipe: SkillRecipe = _recipe(recipe_path, "skill")
    signer = _signer(key)
    result = build_skill(recipe, rev, state, installer_rev=installer_rev or rev, freeze_backend=freeze_backend)
    return attest_build(result, signer, state, fmt=fmt) if signer is not None else result


def run_rebuild(recipe_path: str, rev: str, state: str, *, cache: str | None = None, allow_unisolated_network: bool = False,
                python: str | None = None, installer_rev: str | None = None, key: str | None = None,
                vsa_out: str | None = None, fmt: str = "dsse") -> tuple[RebuildReport, str | None]:
    recipe = load_recipe(recipe_path)
    if vsa_out is not None and key is None:
        raise InputError(BuildCode.BAD_RECIPE, "--vsa needs --key to sign it")
    if isinstance(recipe, RuntimeRecipe):
        sandbox = Sandbox.establish(allow_unisolated_network=allow_unisolated_network)
        report = rebuild_check(recipe, rev, state, cache=cache or default_cache(state), sandbox=sandbox, python=python)
    else:
        report = rebuild_check(recipe, rev, state, installer_rev=installer_rev or rev)
    vsa = sign_vsa(report, _signer(key), vsa_out, fmt=fmt) if vsa_out is not None else None
    return report, vsa


def run_promote(toolchain_rev: str, pins: str, key: str, policy: str, *, runtime_recipe: str, skill_recipe: str, state: str,
                cache: str | None = None, allow_unisolated_network: bool = False, python: str | None = None,
                installer_rev: str | None = None, skill_rev: str | None = None, fmt: str = "dsse") -> PromotionResult:
    from ..git import verify_full_sha

    verify_full_sha(toolchain_rev, what="toolchain revision")  # before anything else is read
    return promote(
        toolchain_rev=toolchain_rev,
        pins_path=pins,
        signer=_signer(key),
        policy_path=policy,
        runtime_recipe=_recipe(runtime_recipe, "runtime"),
        skill_recipe=_recipe(skill_recipe, "skill"),
        state=state,
        cache=cache or default_cache(state),
        sandbox=Sandbox.establish(allow_unisolated_network=allow_unisolated_network),
        installer_rev=installer_rev,
        skill_rev=skill_rev,
        python=python,
        fmt=fmt,
    )
