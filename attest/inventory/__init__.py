"""Inventory layer: the closed-tree model, the safe walker, canonical bytes, typed diffs.

Knows nothing of crypto, git or review. The smallest real use:

    >>> from attest.inventory import inventory_tree, verify_tree
    >>> inv = inventory_tree("tree")
    >>> verify_tree("copy-of-tree", inv)     # raises VerificationError listing every difference
"""

from __future__ import annotations

from ._codes import InventoryCode
from ._diff import check_tree, diff_inventories, verify_tree
from ._hash import hash_fd
from ._model import FORMAT, MAX_INVENTORY_BYTES, Entry, EntryType, Inventory
from ._names import NAME_POLICY, check_name, check_path, sort_key
from ._types import DEFAULT_LIMITS, Limits, ScanResult
from ._walk import Progress, inventory_tree, open_root, scan_tree

__all__ = [
    "DEFAULT_LIMITS",
    "FORMAT",
    "MAX_INVENTORY_BYTES",
    "NAME_POLICY",
    "Entry",
    "EntryType",
    "Inventory",
    "InventoryCode",
    "Limits",
    "Progress",
    "ScanResult",
    "check_name",
    "check_path",
    "check_tree",
    "diff_inventories",
    "hash_fd",
    "inventory_tree",
    "open_root",
    "scan_tree",
    "sort_key",
    "verify_tree",
]
