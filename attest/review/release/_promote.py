"""`attest promote`: the build layer's promotion with the fixture consumer run before the pins are written.

    >>> result = promote_release(sha, "pins.toml", "release.pem", "release-policy.toml", runtime_recipe="builders/runtime.toml",
    ...                          skill_recipe="builders/skill.toml", state=".attest-state",
    ...                          rebuild_results=["rebuild-a.json", "rebuild-b.json"])
    >>> print("\\n".join(result.summary_lines()))
"""

from __future__ import annotations

import datetime as _dt
import os
from collections.abc import Callable, Collection, Sequence
from typing import TYPE_CHECKING

from ...builder import run_promote
from ...git import verify_full_sha
from ._fixture import FixtureRun, _FixtureRunWith, _now, load_fixture

if TYPE_CHECKING:
    from ...builder import BeforeWrite, PromotionResult
    from ..bootstrap import PolicyCheckRunner
    from ._fixture import PolicyGenerator

DEFAULT_FIXTURE = os.path.join("builders", "fixture-consumer")


def promote_release(toolchain_rev: str, pins: str, key: str, policy: str, *, runtime_recipe: str, skill_recipe: str, state: str,
                    cache: str | None = None, allow_unisolated_network: bool = False, python: str | None = None,
                    installer_rev: str | None = None, skill_rev: str | None = None, fmt: str = "dsse",
                    rebuild_results: Sequence[str] = (), unsafe_without_rebuilders: bool = False, repin: Collection[str] = (),
                    fixture: str = DEFAULT_FIXTURE, backend: str | None = None,
                    clock: Callable[[], _dt.datetime] = _now) -> PromotionResult:
    """Promote ``toolchain_rev`` (:func:`attest.builder.run_promote`), running the fixture consumer's bootstrap and review start
    with the candidate before the pins and the log are written.

    The fixture is read (and refused if malformed) before anything is built. The fixture's
    ``attest policy generate`` and managed check run the candidate runtime image's own
    ``bin/attest``; no caller replaces them.

    Raises:
        InputError: ``FIXTURE_CONSUMER_BAD``, and every input code of :func:`attest.builder.run_promote`.
        VerificationError: ``PROMOTION_FIXTURE_FAILED``, and every code of :func:`attest.builder.run_promote`.
        EnvironmentFailure: the codes of :func:`attest.builder.run_promote`.
    """
    return _promote_release(toolchain_rev, pins, key, policy, runtime_recipe=runtime_recipe, skill_recipe=skill_recipe, state=state,
                            cache=cache, allow_unisolated_network=allow_unisolated_network, python=python,
                            installer_rev=installer_rev, skill_rev=skill_rev, fmt=fmt, rebuild_results=rebuild_results,
                            unsafe_without_rebuilders=unsafe_without_rebuilders, repin=repin, fixture=fixture, backend=backend,
                            clock=clock, runner=None, generator=None)


def _promote_release(toolchain_rev: str, pins: str, key: str, policy: str, *, runtime_recipe: str, skill_recipe: str, state: str,
                     cache: str | None, allow_unisolated_network: bool, python: str | None, installer_rev: str | None,
                     skill_rev: str | None, fmt: str, rebuild_results: Sequence[str], unsafe_without_rebuilders: bool,
                     repin: Collection[str], fixture: str, backend: str | None, clock: Callable[[], _dt.datetime],
                     runner: PolicyCheckRunner | None, generator: PolicyGenerator | None) -> PromotionResult:
    """:func:`promote_release` with the fixture's generator and step-6 runner given: private, for tests (never a caller's authority)."""

    verify_full_sha(toolchain_rev, what="toolchain revision")  # before anything else is read
    run = FixtureRun(load_fixture(fixture), backend=backend, clock=clock)
    hook: BeforeWrite = run if runner is None and generator is None else _FixtureRunWith(run, runner, generator)
    return run_promote(toolchain_rev, pins, key, policy, runtime_recipe=runtime_recipe, skill_recipe=skill_recipe, state=state,
                       cache=cache, allow_unisolated_network=allow_unisolated_network, python=python, installer_rev=installer_rev,
                       skill_rev=skill_rev, fmt=fmt, rebuild_results=rebuild_results,
                       unsafe_without_rebuilders=unsafe_without_rebuilders, repin=repin, before_write=hook,
                       freeze_backend=backend)
