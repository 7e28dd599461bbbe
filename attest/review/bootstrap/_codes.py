"""Reason codes of the trusted bootstrap (stable wire strings; see docs/bootstrap.md).

Failures of the layers below keep their own codes (``SHALLOW_REPOSITORY``, ``OBJECT_HASH_MISMATCH``,
``IMAGE_CHANGED``, ``DIGEST_MISMATCH``, ...); these name what only the bootstrap decides.
"""

from __future__ import annotations

from ...errors import ReasonCode


class BootstrapCode(ReasonCode):
    # Step 3: the trusted-base snapshot.
    BASE_SYMLINK = "BASE_SYMLINK"                # a symbolic link (mode 120000) anywhere in the base tree
    BASE_GITLINK = "BASE_GITLINK"                # a submodule (gitlink, mode 160000) anywhere in the base tree
    BASE_TREE_MISMATCH = "BASE_TREE_MISMATCH"    # the root tree recomputed from the frozen bytes is not the base commit's tree
    BASE_OBJECT_MISMATCH = "BASE_OBJECT_MISMATCH"  # a blob or tree recomputed from the frozen bytes differs from the base tree's at that path
