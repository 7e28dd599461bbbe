"""build layer: hermetic, input-addressed builders for the runtime and the skill.

Fixed-output fetch (the only networked step), interpreter identity, the sandboxed runner,
the runtime and skill builders, the rebuild check and promotion.

    >>> from attest.builder import Sandbox, build_runtime, fetch, load_lock, load_recipe
    >>> recipe = load_recipe("builders/runtime.toml")
    >>> fetch(load_lock(recipe.lock_path), "cache", lock_path=recipe.lock_path)
    >>> result = build_runtime(recipe, full_sha, "store", "cache", Sandbox.establish(allow_unisolated_network=False))
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

# The names below are loaded from their module on first use (PEP 562): importing a part of the layer
# (attest.builder._common's staging, _outputs' removal, _sandbox's tools: what the review commands use)
# runs this module, and importing every module of the layer here cost +60-85 ms (packaging's parsers,
# the promotion, the rebuilders) to each command that uses none of them.
if TYPE_CHECKING:
    from ._api import (
        default_cache,
        default_state,
        run_build_runtime,
        run_build_skill,
        run_fetch,
        run_promote,
        run_rebuild,
        run_rebuild_release,
        run_verify_log,
    )
    from ._cache import FetchResult, fetch
    from ._codes import BuildCode
    from ._common import INTERRUPTED_STAGING
    from ._identity import InterpreterIdentity, interpreter_identity, verify_same_interpreter
    from ._install import (
        InstallationClaim,
        InstallCode,
        InstallResult,
        SkillPins,
        VerifiedInstallation,
        install_skill,
        installed_root_of,
        verify_installation,
    )
    from ._lock import Lock, LockedPackage, LockedWheel, load_lock, parse_pylock, parse_requirements
    from ._outputs import BuildResult
    from ._promolog import (
        PROMOTION_PREDICATE,
        LogEntry,
        LogVerification,
        check_log_chain,
        check_log_pins,
        log_path,
        verify_log_checked,
        verify_promotion_log,
    )
    from ._promote import (
        REPIN_GROUPS,
        BeforeWrite,
        PromotionCandidate,
        PromotionFacts,
        PromotionPlan,
        PromotionResult,
        dump_pins,
        parse_pins,
        plan_promotion,
    )
    from ._promotion_codes import PromotionCode
    from ._rebuild import RebuildReport
    from ._rebuilders import (
        DISAGREEMENT_PREDICATE,
        REBUILD_PREDICATE,
        RELEASE_POLICY_EXTENSIONS,
        Disagreement,
        RebuildClaim,
        RebuildersRequirement,
        RebuildersVerdict,
        RebuildRelease,
        RebuildSubject,
        RebuiltArtifact,
        decide_before_build,
        decide_rebuilders,
        parse_rebuilders,
        rebuilders_of,
    )
    from ._recipe import RuntimeRecipe, SkillRecipe, load_recipe
    from ._runtime import build_runtime, select_wheels
    from ._sandbox import SYSTEM_PATHS, Sandbox, clean_env, confine_argv, give_to_uid, pick_step_uid, python_roots, readonly_roots
    from ._skill import build_skill

_WHERE = {
    "default_cache": "_api",
    "default_state": "_api",
    "run_build_runtime": "_api",
    "run_build_skill": "_api",
    "run_fetch": "_api",
    "run_promote": "_api",
    "run_rebuild": "_api",
    "run_rebuild_release": "_api",
    "run_verify_log": "_api",
    "FetchResult": "_cache",
    "fetch": "_cache",
    "BuildCode": "_codes",
    "INTERRUPTED_STAGING": "_common",
    "InterpreterIdentity": "_identity",
    "interpreter_identity": "_identity",
    "verify_same_interpreter": "_identity",
    "InstallCode": "_install",
    "InstallResult": "_install",
    "InstallationClaim": "_install",
    "SkillPins": "_install",
    "VerifiedInstallation": "_install",
    "install_skill": "_install",
    "installed_root_of": "_install",
    "verify_installation": "_install",
    "Lock": "_lock",
    "LockedPackage": "_lock",
    "LockedWheel": "_lock",
    "load_lock": "_lock",
    "parse_pylock": "_lock",
    "parse_requirements": "_lock",
    "BuildResult": "_outputs",
    "LogEntry": "_promolog",
    "LogVerification": "_promolog",
    "PROMOTION_PREDICATE": "_promolog",
    "check_log_chain": "_promolog",
    "check_log_pins": "_promolog",
    "log_path": "_promolog",
    "verify_log_checked": "_promolog",
    "verify_promotion_log": "_promolog",
    "BeforeWrite": "_promote",
    "PromotionCandidate": "_promote",
    "PromotionFacts": "_promote",
    "PromotionPlan": "_promote",
    "PromotionResult": "_promote",
    "REPIN_GROUPS": "_promote",
    "dump_pins": "_promote",
    "parse_pins": "_promote",
    "plan_promotion": "_promote",
    "PromotionCode": "_promotion_codes",
    "RebuildReport": "_rebuild",
    "DISAGREEMENT_PREDICATE": "_rebuilders",
    "Disagreement": "_rebuilders",
    "REBUILD_PREDICATE": "_rebuilders",
    "RELEASE_POLICY_EXTENSIONS": "_rebuilders",
    "RebuildClaim": "_rebuilders",
    "RebuildRelease": "_rebuilders",
    "RebuildSubject": "_rebuilders",
    "RebuildersRequirement": "_rebuilders",
    "RebuildersVerdict": "_rebuilders",
    "RebuiltArtifact": "_rebuilders",
    "decide_before_build": "_rebuilders",
    "decide_rebuilders": "_rebuilders",
    "parse_rebuilders": "_rebuilders",
    "rebuilders_of": "_rebuilders",
    "RuntimeRecipe": "_recipe",
    "SkillRecipe": "_recipe",
    "load_recipe": "_recipe",
    "build_runtime": "_runtime",
    "select_wheels": "_runtime",
    "SYSTEM_PATHS": "_sandbox",
    "Sandbox": "_sandbox",
    "clean_env": "_sandbox",
    "confine_argv": "_sandbox",
    "give_to_uid": "_sandbox",
    "pick_step_uid": "_sandbox",
    "python_roots": "_sandbox",
    "readonly_roots": "_sandbox",
    "build_skill": "_skill",
}


def __getattr__(name: str) -> object:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_WHERE})


__all__ = [
    "DISAGREEMENT_PREDICATE",
    "INTERRUPTED_STAGING",
    "PROMOTION_PREDICATE",
    "REBUILD_PREDICATE",
    "RELEASE_POLICY_EXTENSIONS",
    "REPIN_GROUPS",
    "SYSTEM_PATHS",
    "BeforeWrite",
    "BuildCode",
    "BuildResult",
    "Disagreement",
    "FetchResult",
    "InstallCode",
    "InstallResult",
    "InstallationClaim",
    "InterpreterIdentity",
    "Lock",
    "LockedPackage",
    "LockedWheel",
    "LogEntry",
    "LogVerification",
    "PromotionCandidate",
    "PromotionCode",
    "PromotionFacts",
    "PromotionPlan",
    "PromotionResult",
    "RebuildClaim",
    "RebuildRelease",
    "RebuildReport",
    "RebuildSubject",
    "RebuildersRequirement",
    "RebuildersVerdict",
    "RebuiltArtifact",
    "RuntimeRecipe",
    "Sandbox",
    "SkillPins",
    "SkillRecipe",
    "VerifiedInstallation",
    "build_runtime",
    "build_skill",
    "check_log_chain",
    "check_log_pins",
    "clean_env",
    "confine_argv",
    "decide_before_build",
    "decide_rebuilders",
    "default_cache",
    "default_state",
    "dump_pins",
    "fetch",
    "give_to_uid",
    "install_skill",
    "installed_root_of",
    "interpreter_identity",
    "load_lock",
    "load_recipe",
    "log_path",
    "parse_pins",
    "parse_pylock",
    "parse_rebuilders",
    "parse_requirements",
    "pick_step_uid",
    "plan_promotion",
    "python_roots",
    "readonly_roots",
    "rebuilders_of",
    "run_build_runtime",
    "run_build_skill",
    "run_fetch",
    "run_promote",
    "run_rebuild",
    "run_rebuild_release",
    "run_verify_log",
    "select_wheels",
    "verify_installation",
    "verify_log_checked",
    "verify_promotion_log",
    "verify_same_interpreter",
]
