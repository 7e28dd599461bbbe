"""Git object ids and the raw object formats, pure functions (no I/O).

    >>> object_id("blob", b"hello\\n", "sha1")
    'ce013625030ba8dba906f756967f9e9ca394464a'
    >>> parse_tree(raw_tree_bytes, "sha1")          # -> tuple[TreeEntry, ...], fsck-checked
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Literal

from ..errors import InputError, VerificationError
from ..inventory import check_name
from ._codes import GitCode

ObjectFormat = Literal["sha1", "sha256"]
_HEX = {"sha1": re.compile(r"[0-9a-f]{40}\Z"), "sha256": re.compile(r"[0-9a-f]{64}\Z")}
_RAW_LEN = {"sha1": 20, "sha256": 32}
# Modes git writes today. Legacy 100664 and friends are refused rather than guessed at.
MODE_FILE = "100644"
MODE_EXEC = "100755"
MODE_TREE = "40000"
MODE_SYMLINK = "120000"
MODE_GITLINK = "160000"
_KIND_OF_MODE = {MODE_FILE: "blob", MODE_EXEC: "blob", MODE_TREE: "tree", MODE_SYMLINK: "blob", MODE_GITLINK: "commit"}


def is_full_sha(rev: str, fmt: ObjectFormat | None = None) -> bool:
    """True when ``rev`` is a full lowercase object id (of ``fmt`` when given).

    Raises:
        Nothing: any other value (a branch, an abbreviation, a non-string) is ``False``.
    """
    if not isinstance(rev, str):
        return False
    formats = (fmt,) if fmt else ("sha1", "sha256")
    return any(_HEX[f].match(rev) for f in formats)


def verify_full_sha(rev: str, fmt: ObjectFormat | None = None, *, what: str = "revision") -> str:
    """Return ``rev`` if it is a full object id, else raise ``NOT_FULL_SHA``.

    Branches, tags, abbreviations, ``HEAD~1`` and uppercase spellings are all refused: a
    name that can move, or that git may expand differently tomorrow, never selects authority.

    Raises:
        InputError: ``NOT_FULL_SHA`` for anything that is not a full lowercase id of ``fmt``
            (40 hex for sha1, 64 for sha256, either when ``fmt`` is None).
    """
    if is_full_sha(rev, fmt):
        return rev
    want = {"sha1": "40", "sha256": "64", None: "40 or 64"}[fmt]
    raise InputError(GitCode.NOT_FULL_SHA, f"the {what} {rev!r} is not a full {want}-hex lowercase object id", None)


def object_id(kind: str, data: bytes, fmt: ObjectFormat) -> str:
    """The git object id of ``data`` stored as ``kind`` (blob, tree, commit, tag).

    Raises:
        Nothing: a pure hash of its arguments.
    """
    h = hashlib.sha1() if fmt == "sha1" else hashlib.sha256()
    h.update(f"{kind} {len(data)}\0".encode())
    h.update(data)
    return h.hexdigest()


@dataclass(frozen=True, slots=True)
class TreeEntry:
    """One entry of a tree object: mode as git spells it, object kind, id and name."""

    mode: str
    kind: str
    oid: str
    name: str

    @property
    def is_tree(self) -> bool:
        return self.mode == MODE_TREE


def _tree_sort_key(e: TreeEntry) -> bytes:
    # git orders trees as if a directory name had a trailing '/'.
    raw = e.name.encode("utf-8", "surrogateescape")
    return raw + b"/" if e.is_tree else raw


def parse_tree(data: bytes, fmt: ObjectFormat, *, where: str = "") -> tuple[TreeEntry, ...]:
    """Parse a raw tree object with git fsck's strictness; raise on anything odd.

    Raises:
        VerificationError: ``MALFORMED_OBJECT`` for a truncated entry; ``BAD_TREE_NAME`` for
            a name that is not UTF-8 or that the inventory's name rules refuse (``.``, ``..``,
            ``.git`` spellings, ``/``, control characters); ``BAD_TREE_MODE`` for a mode git
            does not write; ``BAD_TREE_ORDER`` for unsorted or duplicate entries.
    """
    n = _RAW_LEN[fmt]
    out: list[TreeEntry] = []
    i = 0
    while i < len(data):
        sp = data.find(b" ", i)
        nul = data.find(b"\0", sp + 1) if sp >= 0 else -1
        if sp < 0 or nul < 0 or nul + 1 + n > len(data):
            raise VerificationError(GitCode.MALFORMED_OBJECT, "truncated tree entry", where or None)
        mode = data[i:sp].decode("ascii", "replace")
        raw_name = data[sp + 1 : nul]
        oid = data[nul + 1 : nul + 1 + n].hex()
        i = nul + 1 + n
        try:
            name = raw_name.decode("utf-8")
        except UnicodeDecodeError as e:
            raise VerificationError(GitCode.BAD_TREE_NAME, "a tree entry name is not UTF-8", where or None) from e
        path = f"{where}/{name}" if where else name
        if mode not in _KIND_OF_MODE:
            raise VerificationError(GitCode.BAD_TREE_MODE, f"mode {mode!r} is not one git writes", path)
        problem = check_name(name)
        if problem is not None:
            raise VerificationError(GitCode.BAD_TREE_NAME, problem[1], path)
        out.append(TreeEntry(mode, _KIND_OF_MODE[mode], oid, name))
    keys = [_tree_sort_key(t) for t in out]
    for a, b, later in zip(keys, keys[1:], out[1:], strict=False):
        if a >= b:
            what = "duplicate" if a == b else "out of order"
            raise VerificationError(GitCode.BAD_TREE_ORDER, f"tree entry is {what}", f"{where}/{later.name}" if where else later.name)
    names = [t.name for t in out]
    if len(set(names)) != len(names):
        raise VerificationError(GitCode.BAD_TREE_ORDER, "tree has a duplicate name", where or None)
    return tuple(out)


def parse_commit_tree(data: bytes, fmt: ObjectFormat) -> str:
    """The tree id named by the first header line of a raw commit object.

    Raises:
        VerificationError: ``MALFORMED_OBJECT`` when the first line is not ``tree <full id>``.
    """
    first, _, _ = data.partition(b"\n")
    if not first.startswith(b"tree "):
        raise VerificationError(GitCode.MALFORMED_OBJECT, "the commit does not start with a tree line")
    tree = first[5:].decode("ascii", "replace")
    if not is_full_sha(tree, fmt):
        raise VerificationError(GitCode.MALFORMED_OBJECT, f"the commit's tree id {tree!r} is malformed")
    return tree
