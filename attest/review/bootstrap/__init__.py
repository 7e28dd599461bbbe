"""Trusted review bootstrap (ADR-0008 "Repository-bound bootstrap"; BOOTSTRAP.md "`attest bootstrap`").

Each step takes frozen, verified objects and returns the next. Present so far: step 3, the
trusted-base snapshot, the only repository-policy root later steps may read.

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
    verify_base_snapshot,
    verify_tree_ids,
)
from ._codes import BootstrapCode

__all__ = [
    "BaseSnapshot",
    "BootstrapCode",
    "RecomputedTree",
    "base_tree_objects",
    "diff_object_ids",
    "encode_tree",
    "recompute_tree",
    "snapshot_base",
    "verify_base_snapshot",
    "verify_tree_ids",
]
