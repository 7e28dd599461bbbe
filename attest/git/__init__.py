"""git layer: object ids, reading and verifying trees from the object database.

Knows nothing of signing or review. Every object read is re-hashed; revisions are full
object ids only; gitlinks and symlinks are refused in anything installed; a merge base
must be unique.

    >>> from attest.git import GitRepo
    >>> with GitRepo.open("repo") as repo:
    ...     tree = repo.commit_tree(full_sha)
    ...     inv = repo.tree_inventory(repo.subtree(tree, "skills/agent-policy"))
"""

from __future__ import annotations

from ._codes import GitCode
from ._objects import TreeEntry, is_full_sha, object_id, parse_commit_tree, parse_tree, verify_full_sha
from ._repo import (
    GitRepo,
    git_env,
    merge_bases,
    repository_locations,
    resolve_full_sha,
    unique_merge_base,
    verify_export,
    verify_not_shallow,
)

__all__ = [
    "GitCode",
    "GitRepo",
    "TreeEntry",
    "git_env",
    "is_full_sha",
    "merge_bases",
    "object_id",
    "parse_commit_tree",
    "parse_tree",
    "repository_locations",
    "resolve_full_sha",
    "unique_merge_base",
    "verify_export",
    "verify_full_sha",
    "verify_not_shallow",
]
