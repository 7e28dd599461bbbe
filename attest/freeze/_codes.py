"""Reason codes of the freeze / store layer (stable wire strings; see docs/freeze.md).

Differences between a frozen image and its attested inventory, and refusals of links, hard
links and special files in a source, are reported with the inventory layer's codes
(``MISSING``, ``DIGEST_MISMATCH``, ``SYMLINK``, ``HARDLINK``, ...).
"""

from __future__ import annotations

from ..errors import ReasonCode


class FreezeCode(ReasonCode):
    # Backends.
    UNKNOWN_BACKEND = "UNKNOWN_BACKEND"
    BACKEND_UNAVAILABLE = "BACKEND_UNAVAILABLE"
    EROFS_NOT_REPRODUCIBLE = "EROFS_NOT_REPRODUCIBLE"  # mkfs.erofs does not reproduce the checked-in gate image
    # The state directory and private staging.
    STATE_INSECURE = "STATE_INSECURE"
    STATE_SYMLINK = "STATE_SYMLINK"
    STAGING_EXISTS = "STAGING_EXISTS"
    STAGING_FAILED = "STAGING_FAILED"
    REMOVAL_FAILED = "REMOVAL_FAILED"            # staging, a run directory or a discarded image could not be removed
    # Frozen images and the store.
    CHANGED_AFTER_FREEZE = "CHANGED_AFTER_FREEZE"
    STORE_CONFLICT = "STORE_CONFLICT"
    BAD_RECORD = "BAD_RECORD"
    NOT_IN_STORE = "NOT_IN_STORE"
    IMAGE_NOT_IMMUTABLE = "IMAGE_NOT_IMMUTABLE"
    IMAGE_CHANGED = "IMAGE_CHANGED"
    EROFS_MISMATCH = "EROFS_MISMATCH"            # what an erofs image decodes to through its mount is not its inventory
    EROFS_UNSUPPORTED = "EROFS_UNSUPPORTED"      # a consumer that cannot read an erofs image yet was given one
    # Running from frozen images.
    BAD_IMAGE_REF = "BAD_IMAGE_REF"
    BAD_EXEC_ENV = "BAD_EXEC_ENV"
    ENV_REFUSED = "ENV_REFUSED"
    EXEC_FAILED = "EXEC_FAILED"                  # the command could not be started, for another reason than the two below
    COMMAND_NOT_FOUND = "COMMAND_NOT_FOUND"      # the command does not exist (attest exec: exit 127, as env(1))
    COMMAND_NOT_EXECUTABLE = "COMMAND_NOT_EXECUTABLE"  # the command exists but cannot be executed (attest exec: exit 126)
    IMAGE_CHANGED_DURING_EXEC = "IMAGE_CHANGED_DURING_EXEC"
    HOST_LIBRARY_CHANGED = "HOST_LIBRARY_CHANGED"  # a host library a runtime image records is not the one it was built with
    # Retained bytes.
    RETAINED_MISMATCH = "RETAINED_MISMATCH"
    SEAL_FAILED = "SEAL_FAILED"
