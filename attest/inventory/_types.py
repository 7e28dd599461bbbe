"""The inventory walker's shared types: its limits and result, the work items and their directory references.

One home for what the walker (:mod:`._walk`), its scheduler (:mod:`._sched`) and its second
process (:mod:`._fork`) all name, so the three import in one direction only:
``_types`` <- ``_sched`` <- ``_fork`` <- ``_walk``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from os import stat_result
from typing import Final, Literal

from ..errors import CommonCode, EnvironmentFailure, Finding
from ._model import Entry, Inventory

HANDOFF = 256 * 1024  # files at least this large are handed to a hashing thread
MAX_HANDOFFS = 32  # at most this many open file descriptors wait in the queue
SLICE = 64  # entries of one directory per work item
# Threads that list, stat and open; the other workers only hash files handed to them. Two
# threads walking small files contend for the GIL on every short system call and end up
# slower than one, so one thread walks and the others hash what is worth handing over.
# (A larger tree is split between two processes instead: see ._fork.)
WALK_THREADS = 1

# Work items (tuples: they are made per 64 entries):
#   (LIST, DirRef, prefix, depth)              list the directory, check names, queue slices
#   (SLICE_ITEM, DirRef, prefix, depth, items) classify, open and hash up to SLICE entries; an item
#                                              is (name, rel, listed kind, listed inode): see LISTED_*
#   (BIG, fd, rel, fstat)                      hash one large file opened by a slice
# Final, so mypy narrows an item by its kind (``item[0] == BIG``) to one of the tuples below.
LIST: Final = 0
SLICE_ITEM: Final = 1
BIG: Final = 2

# What the directory listing (``readdir``'s ``d_type`` and ``d_ino``) said an entry is. An entry
# listed as a regular file or a directory is opened without an ``lstat`` first and confirmed from
# ``fstat`` of the descriptor against the listed inode (``_walk``, rule 3); LISTED_UNKNOWN (any
# other type, a filesystem without ``d_type``, or a listing whose inodes did not agree with
# ``lstat``) takes the ``lstat`` first, as every entry did before.
LISTED_UNKNOWN: Final = 0
LISTED_FILE: Final = 1
LISTED_DIR: Final = 2


class DirRef:
    """A directory descriptor shared by the work items that open its children."""

    __slots__ = ("dev", "fd", "refs")

    def __init__(self, fd: int, dev: int) -> None:
        self.fd = fd
        self.dev = dev  # st_dev of the directory: an entry on another device is a mount point
        self.refs = 1  # the listing item's own reference


ListItem = tuple[Literal[0], DirRef, str, int]  # (LIST, directory, prefix, depth)
ListedName = tuple[str, str, int, int]  # (name, rel, LISTED_* kind, listed inode or 0)
SliceItem = tuple[Literal[1], DirRef, str, int, list[ListedName]]  # (SLICE_ITEM, directory, prefix, depth, names)
BigItem = tuple[Literal[2], int, str, stat_result]  # (BIG, fd, rel, fstat)
WalkItem = ListItem | SliceItem  # what a walker lists or classifies; what the two processes give each other
Item = WalkItem | BigItem


#: What a walk against expected entries compares an entry with, by path: a file's (mode, size,
#: sha256), a directory's mode.
Expected = dict[str, tuple[int, int, str] | int]


@dataclass(frozen=True, slots=True)
class Limits:
    """Caps on what one walk will accept, so a hostile tree cannot exhaust the walker.

    The defaults are the documented caps (docs/inventory.md "How the walker reads a tree").
    """

    max_depth: int = 256
    max_entries: int = 1_000_000
    max_file_size: int = 1 << 40
    max_findings: int = 1000

    def __post_init__(self) -> None:
        # A walk keeps at most max_findings findings and a check passes on none: a cap of 0
        # would drop every refusal (a symlink, a FIFO) and let the tree pass.
        if self.max_findings < 1:
            raise ValueError(f"max_findings must be at least 1, not {self.max_findings}")
        if min(self.max_depth, self.max_entries, self.max_file_size) < 0:
            raise ValueError("the walk's caps must not be negative")


DEFAULT_LIMITS = Limits()


@dataclass(slots=True)
class ScanResult:
    """What a walk saw: the admissible entries and every finding.

    Both lists are in the order the walk's threads produced them, which varies from run to
    run: sort them (``Inventory.from_entries`` and ``check_tree`` do).
    """

    entries: list[Entry] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    ignore: tuple[str, ...] = ()
    #: In a walk against expected entries (``_walk.scan_against``): the paths whose entry the
    #: walk found exactly as expected, which are then not in ``entries``.
    matched: list[str] = field(default_factory=list)

    def inventory(self) -> Inventory:
        """The entries as a sorted closed inventory.

        Raises:
            InputError: ``BAD_INVENTORY`` (a repeated entry, or a parent that is not a
                directory entry); a walk without findings never produces either.
            EnvironmentFailure: ``INTERNAL`` for a walk against expected entries, whose
                matched entries are not in ``entries``.
        """
        if self.matched:
            raise EnvironmentFailure(CommonCode.INTERNAL, "a walk against expected entries holds only the entries that differ")
        return Inventory.from_entries(self.entries, self.ignore)
