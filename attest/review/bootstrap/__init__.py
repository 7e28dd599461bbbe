"""Trusted review bootstrap (docs/bootstrap.md "attest bootstrap (steps 1-9)").

Each step takes frozen, verified objects and returns the next (steps 1-9 of docs/bootstrap.md, one
function each: :func:`establish_skill`, :func:`establish_identity`, :func:`establish_base`
(:func:`snapshot_base`), :func:`read_authority`, :func:`establish_runtime`,
:func:`run_managed_check`, :func:`check_procedure_paths`, :func:`freeze_procedure`,
:func:`write_handoff`); :func:`bootstrap` runs them in order and raises :class:`BootstrapError`
with the failed ``step``. Step 2's host adapters: :class:`IdentityFile` (offline) and
:class:`GitHubIdentity` (the REST API); :func:`host_adapter` selects one from the command's options.

    >>> from attest.git import GitRepo
    >>> from attest.review.bootstrap import snapshot_base
    >>> with GitRepo.open("repo") as repo:
    ...     base = snapshot_base(repo, base_sha, "/var/lib/attest", backend="immutable")
    >>> base.tree, base.image.path
"""

from __future__ import annotations

from ._base import (
    BaseSnapshot,
    RecomputedTree,
    base_tree_objects,
    diff_object_ids,
    encode_tree,
    recompute_tree,
    snapshot_base,
    verify_base_ids,
    verify_base_snapshot,
    verify_tree_ids,
)
from ._chain import (
    HANDOFF_PREDICATE,
    IMAGE_NAMES,
    STEP_NAMES,
    BootstrapDoc,
    BootstrapResult,
    CommitTreeDoc,
    Established,
    ImageDoc,
    StepTimingDoc,
    bootstrap,
    handoff_statement,
    write_handoff,
)
from ._codes import BootstrapCode
from ._deploy import DeploymentPins, RuntimePins, check_inputs_outside, verify_inputs_outside
from ._errors import BootstrapError
from ._github import DEFAULT_TOKEN_ENV, GitHubIdentity, host_adapter
from ._identity import (
    HostAdapter,
    HostIdentity,
    Identity,
    IdentityFile,
    PullRequestDoc,
    RepositoryDoc,
    establish_identity,
    load_identity,
)
from ._steps import (
    Authority,
    BootstrapImage,
    CheckRun,
    ImageCheckRunner,
    PolicyCheckRunner,
    ProcedureBundle,
    ProcedureFile,
    ReproducedOutput,
    RuntimeImage,
    check_procedure_paths,
    decide_authority,
    decide_check,
    decide_image,
    decide_lock_toolchain,
    decide_procedure_paths,
    decide_runtime_claim,
    establish_base,
    establish_runtime,
    establish_skill,
    freeze_procedure,
    procedure_inventory,
    read_authority,
    run_managed_check,
)

__all__ = [
    "DEFAULT_TOKEN_ENV",
    "HANDOFF_PREDICATE",
    "IMAGE_NAMES",
    "STEP_NAMES",
    "Authority",
    "BaseSnapshot",
    "BootstrapCode",
    "BootstrapDoc",
    "BootstrapError",
    "BootstrapImage",
    "BootstrapResult",
    "CheckRun",
    "CommitTreeDoc",
    "DeploymentPins",
    "Established",
    "GitHubIdentity",
    "HostAdapter",
    "HostIdentity",
    "Identity",
    "IdentityFile",
    "ImageCheckRunner",
    "ImageDoc",
    "PolicyCheckRunner",
    "ProcedureBundle",
    "ProcedureFile",
    "PullRequestDoc",
    "RecomputedTree",
    "RepositoryDoc",
    "ReproducedOutput",
    "RuntimeImage",
    "RuntimePins",
    "StepTimingDoc",
    "base_tree_objects",
    "bootstrap",
    "check_inputs_outside",
    "check_procedure_paths",
    "decide_authority",
    "decide_check",
    "decide_image",
    "decide_lock_toolchain",
    "decide_procedure_paths",
    "decide_runtime_claim",
    "diff_object_ids",
    "encode_tree",
    "establish_base",
    "establish_identity",
    "establish_runtime",
    "establish_skill",
    "freeze_procedure",
    "handoff_statement",
    "host_adapter",
    "load_identity",
    "procedure_inventory",
    "read_authority",
    "recompute_tree",
    "run_managed_check",
    "snapshot_base",
    "verify_base_ids",
    "verify_base_snapshot",
    "verify_inputs_outside",
    "verify_tree_ids",
    "write_handoff",
]
