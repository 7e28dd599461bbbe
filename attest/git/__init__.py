"""git layer: object ids, reading and verifying trees from the object database.

Knows nothing of signing or review. Every object read is re-hashed; revisions are full
object ids only; gitlinks and symlinks are refused in anything installed; a merge base
must be unique.

    >>> from attest.git import GitRepo
    >>> with GitRepo.open("repo") as repo:
    ...     tree = repo.commit_tree(full_sha)
    ...     inv = repo.tree_inventory(repo.subtree(tree, "skills/agent-policy"))
    ...     base = require_single_merge_base(best_common_ancestors(repo, base_sha, head_sha))
    ...     surface = changed_surface(repo, base, head_sha)   # every changed path, LEFT/RIGHT line ranges

:func:`best_common_ancestors` and :func:`changed_surface` read commits and trees from objects
only (docs/git-ancestry.md); :func:`merge_bases` / :func:`unique_merge_base` ask ``git
merge-base`` and refuse shallow repositories.
"""

from __future__ import annotations

from ._ancestry import DEFAULT_MAX_COMMITS, CommitHeader, best_common_ancestors, parse_commit_header, require_single_merge_base
from ._codes import GitCode
from ._objects import TreeEntry, is_full_sha, object_id, parse_commit_tree, parse_tree, verify_full_sha
from ._repo import (
    GitRepo,
    enclosing_work_tree,
    git_env,
    merge_bases,
    repository_locations,
    resolve_full_sha,
    unique_merge_base,
    verify_export,
    verify_not_shallow,
)
from ._surface import (
    DEFAULT_MAX_DIFF_COST,
    DEFAULT_MAX_TEXT_BYTES,
    DEFAULT_MAX_TOTAL_DIFF_COST,
    ChangedPath,
    ChangedSurface,
    Hunk,
    changed_surface,
    diff_lines,
    diff_trees,
    split_lines,
)
from ._url import is_repository_url

__all__ = [
    "DEFAULT_MAX_COMMITS",
    "DEFAULT_MAX_DIFF_COST",
    "DEFAULT_MAX_TEXT_BYTES",
    "DEFAULT_MAX_TOTAL_DIFF_COST",
    "ChangedPath",
    "ChangedSurface",
    "CommitHeader",
    "GitCode",
    "GitRepo",
    "Hunk",
    "TreeEntry",
    "best_common_ancestors",
    "changed_surface",
    "diff_lines",
    "diff_trees",
    "enclosing_work_tree",
    "git_env",
    "is_full_sha",
    "is_repository_url",
    "merge_bases",
    "object_id",
    "parse_commit_header",
    "parse_commit_tree",
    "parse_tree",
    "repository_locations",
    "require_single_merge_base",
    "resolve_full_sha",
    "split_lines",
    "unique_merge_base",
    "verify_export",
    "verify_full_sha",
    "verify_not_shallow",
]
