"""Reason codes of the git layer (stable wire strings; see docs/build.md)."""

from __future__ import annotations

from ..errors import ReasonCode


class GitCode(ReasonCode):
    NOT_FULL_SHA = "NOT_FULL_SHA"            # a revision that is not a full 40/64-hex object id
    NOT_A_REPOSITORY = "NOT_A_REPOSITORY"    # git cannot open the repository
    OBJECT_MISSING = "OBJECT_MISSING"        # the object database has no such object
    WRONG_OBJECT_TYPE = "WRONG_OBJECT_TYPE"  # a commit was expected and a blob was found, ...
    OBJECT_HASH_MISMATCH = "OBJECT_HASH_MISMATCH"  # the bytes git returned do not hash to their id
    MALFORMED_OBJECT = "MALFORMED_OBJECT"    # a commit or tree object that does not parse
    BAD_TREE_ORDER = "BAD_TREE_ORDER"        # unsorted or duplicate tree entries (git fsck)
    BAD_TREE_NAME = "BAD_TREE_NAME"          # '.', '..', '.git' spellings, control characters, ...
    BAD_TREE_MODE = "BAD_TREE_MODE"          # a mode git itself would not write
    GITLINK = "GITLINK"                      # a submodule (mode 160000) in an installed subtree
    TREE_SYMLINK = "TREE_SYMLINK"            # a symbolic link (mode 120000) in an installed subtree
    PATH_NOT_IN_TREE = "PATH_NOT_IN_TREE"    # the subtree path does not exist or is not a directory
    GIT_FAILED = "GIT_FAILED"                # the git subprocess failed or is unavailable
    TREE_TOO_LARGE = "TREE_TOO_LARGE"        # entry count / depth / blob size caps
    NO_MERGE_BASE = "NO_MERGE_BASE"          # unrelated histories: no common ancestor
    MULTIPLE_MERGE_BASES = "MULTIPLE_MERGE_BASES"  # criss-cross history: several best common ancestors
    PARTIAL_CLONE = "PARTIAL_CLONE"          # a promisor remote: reading a missing object would run its command
    SHALLOW_REPOSITORY = "SHALLOW_REPOSITORY"  # merge bases asked of a shallow clone (history cut locally)
    HISTORY_TOO_LONG = "HISTORY_TOO_LONG"    # finding the merge bases would read more commits than the bound
