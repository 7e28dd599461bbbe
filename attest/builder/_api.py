"""One call per command: what the CLI (and `attest promote`'s callers) use.

Each function takes paths and flags as a person gives them, builds the library objects
and runs one operation. Defaults: the state directory ``$ATTEST_STATE_DIR`` or
``.attest-state``, the cache ``STATE/cache``.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Sequence
from typing import Literal, overload

from ..attestation import Signer, load_policy, load_signer, signing_keys
from ..errors import CommonCode, InputError
from ..freeze import resolve_backend
from ..git import verify_full_sha
from ._attest import attest_build
from ._cache import FetchResult, fetch
from ._codes import BuildCode
from ._lock import load_lock
from ._outputs import BuildResult
from ._promolog import LogVerification, verify_promotion_log
from ._promote import BeforeWrite, PromotionResult, promote
from ._rebuild import RebuildReport, rebuild_check, sign_vsa
from ._rebuilders import RELEASE_POLICY_EXTENSIONS, RebuildRelease, rebuild_release, rebuilders_of
from ._recipe import RuntimeRecipe, SkillRecipe, load_recipe
from ._runtime import build_runtime
from ._sandbox import Sandbox
from ._skill import build_skill


def default_state() -> str:
    """The state directory when ``--state-dir`` is not given: ``$ATTEST_STATE_DIR`` or ``.attest-state``.

    Raises:
        Nothing: nothing is created or checked here.
    """
    return os.environ.get("ATTEST_STATE_DIR") or ".attest-state"


def default_cache(state: str) -> str:
    """The fetched-input cache of ``state``: ``STATE/cache``.

    Raises:
        Nothing: a path join.
    """
    return os.path.join(state, "cache")


def run_fetch(lock_path: str, cache: str, *, python: str | None = None) -> FetchResult:
    """`attest fetch`: load the lock at ``lock_path`` and :func:`fetch` it into ``cache``.

    Raises:
        InputError: the lock's ``UNREADABLE`` / ``TOO_LARGE`` and parse codes (``BAD_LOCK``,
            ``LOCK_NOT_WHEEL``, ``LOCK_UNHASHED``, ``LOCK_NOT_PINNED``, ``LOCK_DUPLICATE``);
            ``FETCH_FAILED`` for a local wheel that cannot be read.
        VerificationError: ``HASH_MISMATCH``.
        EnvironmentFailure: ``FETCH_FAILED`` when the registry cannot be reached.
    """
    return fetch(load_lock(lock_path), cache, lock_path=lock_path, python=python)


@overload
def _recipe(path: str, kind: Literal["runtime"]) -> RuntimeRecipe: ...
@overload
def _recipe(path: str, kind: Literal["skill"]) -> SkillRecipe: ...
def _recipe(path: str, kind: Literal["runtime", "skill"]) -> RuntimeRecipe | SkillRecipe:
    recipe = load_recipe(path)
    if recipe.kind != kind:
        raise InputError(BuildCode.BAD_RECIPE, f"this is a {recipe.kind} recipe, not a {kind} recipe", path)
    return recipe


def _signers(keys: str | Sequence[str] | None, fmt: str) -> tuple[Signer, ...] | None:
    """Every key given, opened and checked (no key twice, one for a bundle) before anything is built; None for none.

    Raises:
        InputError: the keys' ``BAD_KEY`` / ``UNREADABLE``; ``USAGE`` (the same key twice,
            several keys for a bundle, an unknown format); ``TOO_MANY_SIGNATURES``.
    """
    names = [keys] if isinstance(keys, str) else list(keys or ())
    if not names:
        return None
    return signing_keys([load_signer(k) for k in names], fmt)


def _backend(name: str | None) -> str:
    return resolve_backend(name)


def run_build_runtime(recipe_path: str, rev: str, state: str, *, cache: str | None = None,
                      key: str | Sequence[str] | None = None, allow_unisolated_network: bool = False,
                      python: str | None = None, fmt: str = "dsse", freeze_backend: str | None = None) -> BuildResult:
    """`attest build runtime`: load the recipe, open the keys, build (or reuse) and, with ``key``, sign.

    ``key`` is one key or several: each statement is then one DSSE envelope with one
    signature per key (a ``threshold = 2`` policy is met by one build).

    Raises:
        InputError: ``BAD_RECIPE`` (also for a skill recipe), ``NOT_FULL_SHA``, the keys'
            ``BAD_KEY`` / ``UNREADABLE``, ``USAGE`` / ``TOO_MANY_SIGNATURES`` (see
            :func:`attest.attestation.signing_keys`), and every input code of :func:`build_runtime`.
        VerificationError: the codes of :func:`build_runtime`.
        EnvironmentFailure: ``NETWORK_NOT_ISOLATED`` without ``allow_unisolated_network``,
            and the codes of :func:`build_runtime`.
    """
    freeze_backend = _backend(freeze_backend)  # an unknown backend is bad usage before anything is built
    recipe: RuntimeRecipe = _recipe(recipe_path, "runtime")
    signer = _signers(key, fmt)
    sandbox = Sandbox.establish(allow_unisolated_network=allow_unisolated_network)
    result = build_runtime(recipe, rev, state, cache or default_cache(state), sandbox, python=python, freeze_backend=freeze_backend)
    return attest_build(result, signer, state, fmt=fmt) if signer is not None else result


def run_build_skill(recipe_path: str, rev: str, state: str, *, installer_rev: str | None = None,
                    key: str | Sequence[str] | None = None, fmt: str = "dsse", freeze_backend: str | None = None) -> BuildResult:
    """`attest build skill`: load the recipe, open the keys, build (or reuse) and, with ``key``, sign (one signature per key).

    Raises:
        InputError: ``BAD_RECIPE`` (also for a runtime recipe), the keys' ``BAD_KEY`` /
            ``UNREADABLE``, ``USAGE`` / ``TOO_MANY_SIGNATURES`` (see
            :func:`attest.attestation.signing_keys`), and every input code of :func:`build_skill`.
        VerificationError: the codes of :func:`build_skill`.
        EnvironmentFailure: the codes of :func:`build_skill`.
    """
    freeze_backend = _backend(freeze_backend)
    recipe: SkillRecipe = _recipe(recipe_path, "skill")
    signer = _signers(key, fmt)
    result = build_skill(recipe, rev, state, installer_rev=installer_rev or rev, freeze_backend=freeze_backend)
    return attest_build(result, signer, state, fmt=fmt) if signer is not None else result


def run_rebuild(recipe_path: str, rev: str, state: str, *, cache: str | None = None, allow_unisolated_network: bool = False,
                python: str | None = None, installer_rev: str | None = None, key: str | None = None,
                vsa_out: str | None = None, fmt: str = "dsse", freeze_backend: str | None = None) -> tuple[RebuildReport, str | None]:
    """`attest rebuild RECIPE`: the rebuild report, and the path of the signed VSA when ``vsa_out`` is given.

    A difference is not raised: it is in the report's ``findings`` (``NOT_REPRODUCIBLE`` and
    the inventory diff's codes), so the caller can still sign a FAILED verdict.

    Raises:
        InputError: ``BAD_RECIPE`` (a bad recipe), ``USAGE`` (``vsa_out`` without ``key``), and the
            input codes of the builds (``NOT_FULL_SHA``, ``NOT_IN_CACHE``, ...).
        VerificationError: a build that fails on its own (see :func:`build_runtime`).
        EnvironmentFailure: ``NETWORK_NOT_ISOLATED`` and the builds' environment codes.
    """
    recipe = load_recipe(recipe_path)
    if vsa_out is not None and key is None:
        raise InputError(CommonCode.USAGE, "--vsa needs --key to sign it")
    if isinstance(recipe, RuntimeRecipe):
        sandbox = Sandbox.establish(allow_unisolated_network=allow_unisolated_network)
        report = rebuild_check(recipe, rev, state, cache=cache or default_cache(state), sandbox=sandbox, python=python,
                               freeze_backend=freeze_backend)
    else:
        report = rebuild_check(recipe, rev, state, installer_rev=installer_rev or rev, freeze_backend=freeze_backend)
    vsa = sign_vsa(report, load_signer(key), vsa_out, fmt=fmt) if vsa_out is not None and key is not None else None  # key: checked above
    return report, vsa


def run_promote(toolchain_rev: str, pins: str, key: str, policy: str, *, runtime_recipe: str, skill_recipe: str, state: str,
                cache: str | None = None, allow_unisolated_network: bool = False, python: str | None = None,
                installer_rev: str | None = None, skill_rev: str | None = None, fmt: str = "dsse",
                rebuild_results: Sequence[str] = (), unsafe_without_rebuilders: bool = False, repin: Collection[str] = (),
                before_write: BeforeWrite | None = None, freeze_backend: str | None = None) -> PromotionResult:
    """:func:`promote` from paths; the revision is checked before anything is read.

    `attest promote` reaches this through :func:`attest.review.release.promote_release`, which
    passes the fixture consumer run as ``before_write``.

    Raises:
        InputError: ``NOT_FULL_SHA``, ``BAD_RECIPE``, the key's ``BAD_KEY`` / ``UNREADABLE``,
            and every input code of :func:`promote` (``BAD_PINS``, the policy's codes, ...).
        VerificationError: every code of :func:`promote` (``PROMOTION_REFUSED``, ...).
        EnvironmentFailure: ``NETWORK_NOT_ISOLATED`` without ``allow_unisolated_network``
            (with it, promotion refuses the unisolated sandbox: ``PROMOTION_REFUSED``).
    """
    verify_full_sha(toolchain_rev, what="toolchain revision")  # before anything else is read
    freeze_backend = _backend(freeze_backend)
    return promote(
        toolchain_rev=toolchain_rev,
        pins_path=pins,
        signer=load_signer(key),
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
        rebuild_results=rebuild_results,
        unsafe_without_rebuilders=unsafe_without_rebuilders,
        repin=repin,
        before_write=before_write,
        freeze_backend=freeze_backend,
    )


def run_rebuild_release(toolchain_rev: str, key: str, out: str, *, runtime_recipe: str, skill_recipe: str, state: str,
                        cache: str | None = None, python: str | None = None, installer_rev: str | None = None,
                        skill_rev: str | None = None, fmt: str = "dsse", freeze_backend: str | None = None) -> RebuildRelease:
    """`attest rebuild-release`: :func:`rebuild_release` from paths (always in the confined, network-isolated sandbox).

    Raises:
        InputError: ``NOT_FULL_SHA``, ``BAD_RECIPE``, the key's ``BAD_KEY`` / ``UNREADABLE``, the
            builders' input codes, ``BAD_OUTPUT_PATH``.
        VerificationError: the builders' codes, ``PROMOTION_REFUSED`` (an unconfined runtime record).
        EnvironmentFailure: ``NETWORK_NOT_ISOLATED``.
    """
    verify_full_sha(toolchain_rev, what="toolchain revision")
    freeze_backend = _backend(freeze_backend)
    return rebuild_release(toolchain_rev=toolchain_rev, runtime_recipe=_recipe(runtime_recipe, "runtime"),
                           skill_recipe=_recipe(skill_recipe, "skill"), state=state, cache=cache or default_cache(state),
                           sandbox=Sandbox.establish(allow_unisolated_network=False), signer=load_signer(key), out=out,
                           skill_rev=skill_rev, installer_rev=installer_rev, python=python, fmt=fmt, freeze_backend=freeze_backend)


def run_verify_log(pins: str, policy: str) -> LogVerification:
    """`attest promote --verify-log`: the whole promotion log of ``pins`` under the release policy at ``policy``.

    Raises:
        InputError: the policy's codes, ``BAD_REBUILDERS``, ``UNREADABLE`` / ``TOO_LARGE``.
        VerificationError: the log's codes (``PROMOTION_LOG_*``).
    """
    loaded = load_policy(policy, extensions=RELEASE_POLICY_EXTENSIONS)
    rebuilders_of(loaded)  # a malformed [rebuilders] table is reported here too
    return verify_promotion_log(pins, loaded)
