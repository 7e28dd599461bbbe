"""build layer: hermetic, input-addressed builders for the runtime and the skill.

Fixed-output fetch (the only networked step), interpreter identity, the sandboxed runner,
the runtime and skill builders, the rebuild check and promotion.

    >>> from attest.builder import Sandbox, build_runtime, fetch, load_lock, load_recipe
    >>> recipe = load_recipe("builders/runtime.toml")
    >>> fetch(load_lock(recipe.lock_path), "cache", lock_path=recipe.lock_path)
    >>> result = build_runtime(recipe, full_sha, "store", "cache", Sandbox.establish(allow_unisolated_network=False))
"""

from __future__ import annotations

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
