"""Reason codes of the inventory layer (stable wire strings; see docs/reason-codes.md)."""

from __future__ import annotations

from ..errors import ReasonCode


class InventoryCode(ReasonCode):
    # Differences between an expected inventory and a tree.
    MISSING = "MISSING"
    EXTRA = "EXTRA"
    TYPE_CHANGED = "TYPE_CHANGED"
    MODE_CHANGED = "MODE_CHANGED"
    DIGEST_MISMATCH = "DIGEST_MISMATCH"
    # Entries the closed inventory never admits.
    HARDLINK = "HARDLINK"
    SYMLINK = "SYMLINK"
    SPECIAL_FILE = "SPECIAL_FILE"
    SPECIAL_MODE = "SPECIAL_MODE"
    # Names and paths.
    BAD_NAME = "BAD_NAME"
    RESERVED_NAME = "RESERVED_NAME"
    NAME_COLLISION = "NAME_COLLISION"
    NAME_TOO_LONG = "NAME_TOO_LONG"
    PATH_TOO_LONG = "PATH_TOO_LONG"
    BAD_PATH = "BAD_PATH"
    # Exhaustion caps.
    DEPTH_EXCEEDED = "DEPTH_EXCEEDED"
    TOO_MANY_ENTRIES = "TOO_MANY_ENTRIES"
    FILE_TOO_LARGE = "FILE_TOO_LARGE"
    # The walk itself.
    CHANGED_DURING_WALK = "CHANGED_DURING_WALK"
    ROOT_SYMLINK = "ROOT_SYMLINK"
    BAD_ROOT = "BAD_ROOT"
    UNREADABLE_ENTRY = "UNREADABLE_ENTRY"
    # Inventory documents.
    BAD_INVENTORY = "BAD_INVENTORY"
    BAD_IGNORE = "BAD_IGNORE"
