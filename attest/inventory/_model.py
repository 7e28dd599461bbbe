"""The closed-inventory model: entries, canonical bytes, identity, strict parsing.

    >>> inv = Inventory.from_entries([Entry("bin", EntryType.DIR, 0o755)])
    >>> Inventory.from_bytes(inv.canonical).identity == inv.identity
    True
"""

from __future__ import annotations

import enum
import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from .._digest import sha256_of
from .._json import MAX_SAFE_INT, loads_strict
from ..errors import CommonCode, InputError
from ._codes import InventoryCode
from ._gc import GcPaused
from ._ignore import compile_ignore
from ._names import NAME_POLICY, check_path, order_key, plain_paths

FORMAT = "https://attest.dev/inventory/v1"
_HEX64 = re.compile(r"[0-9a-f]{64}\Z")
MAX_INVENTORY_BYTES = 512 * 1024 * 1024
_SPECIAL_BITS = 0o7000


class EntryType(enum.StrEnum):
    FILE = "file"
    DIR = "dir"


@dataclass(frozen=True, slots=True)
class Entry:
    """One path below the root. Files carry size and SHA-256; directories carry neither.

    Raises:
        Nothing: the constructor and ``to_json`` do not validate; an inventory validates
        its entries (:meth:`Inventory.from_entries`, :meth:`Inventory.from_json`).
    """

    path: str
    type: EntryType
    mode: int
    size: int | None = None
    sha256: str | None = None

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {"path": self.path, "type": self.type.value, "mode": self.mode}
        if self.type is EntryType.FILE:
            out["size"] = self.size
            out["digest"] = {"sha256": self.sha256}
        return out


def _entry_order(e: Entry) -> str:
    """The inventory's order (:func:`._names.sort_key`) of an entry, by :func:`._names.order_key`."""
    return order_key(e.path)


_FILE_KEYS = frozenset({"path", "type", "mode", "size", "digest"})
_DIR_KEYS = frozenset({"path", "type", "mode"})
_DIGEST_KEYS = frozenset({"sha256"})
_E_FILE = EntryType.FILE  # enum attribute access is slow in 3.11; these are per entry of a parse
_E_DIR = EntryType.DIR


def _bad(detail: str, path: str | None = None, code: InventoryCode = InventoryCode.BAD_INVENTORY) -> InputError:
    return InputError(code, detail, path)


def _entry_from_json(raw: object, index: int, path_checked: bool = False) -> Entry:
    """One validated entry; ``path_checked`` when :func:`._names.plain_paths` vouched for every path already."""
    if not isinstance(raw, dict):
        raise _bad(f"entries[{index}] is not an object")
    path = raw.get("path")
    if not isinstance(path, str):
        raise _bad(f"entries[{index}]: the path is not a string", None, InventoryCode.BAD_PATH)
    if not path_checked:
        problem = check_path(path)
        if problem is not None:
            raise _bad(f"entries[{index}]: {problem[1]}", path, problem[0])
    kind = raw.get("type")
    if kind == "file":
        expected_keys = _FILE_KEYS
    elif kind == "dir":
        expected_keys = _DIR_KEYS
    else:
        raise _bad(f"type {kind!r} is not 'file' or 'dir'", path)
    if raw.keys() != expected_keys:
        raise _bad(f"fields {sorted(raw)} differ from the required {sorted(expected_keys)}", path)
    mode = raw["mode"]
    if type(mode) is not int or not 0 <= mode <= 0o7777:
        raise _bad(f"mode {mode!r} is not an integer permission mask", path)
    if mode & _SPECIAL_BITS:
        raise _bad(f"mode {mode:o} has setuid, setgid or sticky bits", path, InventoryCode.SPECIAL_MODE)
    if kind == "dir":
        return Entry(path, _E_DIR, mode)
    size = raw["size"]
    if type(size) is not int or not 0 <= size <= MAX_SAFE_INT:
        raise _bad(f"size {size!r} is not a non-negative integer", path)
    digest = raw["digest"]
    if not isinstance(digest, dict) or digest.keys() != _DIGEST_KEYS:
        raise _bad("digest must be exactly {'sha256': <hex>}", path)
    value = digest["sha256"]
    if not isinstance(value, str) or not _HEX64.match(value):
        raise _bad("sha256 digest is not 64 lowercase hex digits", path)
    return Entry(path, _E_FILE, mode, size, value)


@dataclass(frozen=True)
class Inventory:
    """A closed inventory. Construct with :meth:`from_entries` or :meth:`from_bytes`.

    Raises:
        InputError: from the ``from_*`` constructors: ``BAD_INVENTORY`` (unknown or missing
            fields, wrong format or name policy, unsorted or repeated entries, a parent that
            is not a directory entry, a bad mode, size or digest), ``BAD_PATH`` and the name
            codes (``BAD_NAME``, ``PATH_TOO_LONG``, ...), ``SPECIAL_MODE``, ``BAD_IGNORE``;
            ``from_bytes`` also ``NOT_CANONICAL`` and the strict-JSON codes (``BAD_JSON``,
            ``DUPLICATE_KEY``, ``TOO_LARGE``, ``TOO_DEEP``). ``to_json`` and ``by_path``
            raise nothing.
    """

    entries: tuple[Entry, ...]
    ignore: tuple[str, ...] = ()
    canonical: bytes = field(default=b"", repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "canonical", _encode(self.entries, self.ignore))

    @property
    def identity(self) -> str:
        """``sha256:<hex>`` over the canonical bytes: the tree's name everywhere else."""
        return sha256_of(self.canonical)

    @property
    def digest_hex(self) -> str:
        return hashlib.sha256(self.canonical).hexdigest()

    def to_json(self) -> dict[str, object]:
        return {
            "format": FORMAT,
            "name_policy": NAME_POLICY,
            "ignore": list(self.ignore),
            "entries": [e.to_json() for e in self.entries],
        }

    def by_path(self) -> Mapping[str, Entry]:
        return {e.path: e for e in self.entries}

    @property
    def file_count(self) -> int:
        return sum(1 for e in self.entries if e.type is EntryType.FILE)

    @property
    def total_size(self) -> int:
        return sum(e.size or 0 for e in self.entries)

    @classmethod
    def from_entries(cls, entries: Iterable[Entry], ignore: Iterable[str] = ()) -> Inventory:
        """Sort and validate entries produced by our own walker or a test."""
        ordered = tuple(sorted(entries, key=_entry_order))
        _check_closed(ordered)
        return cls(ordered, tuple(ignore))

    @classmethod
    def from_json(cls, doc: object) -> Inventory:
        if not isinstance(doc, dict):
            raise _bad("the inventory is not a JSON object")
        required = {"format", "name_policy", "ignore", "entries"}
        if set(doc) != required:
            raise _bad(f"top-level fields {sorted(doc)} differ from the required {sorted(required)}")
        if doc["format"] != FORMAT:
            raise _bad(f"format {doc['format']!r} is not {FORMAT!r}")
        if doc["name_policy"] != NAME_POLICY:
            raise _bad(f"name policy {doc['name_policy']!r} is not {NAME_POLICY!r}")
        ignore = doc["ignore"]
        if not isinstance(ignore, list) or not all(isinstance(p, str) for p in ignore):
            raise _bad("ignore must be a list of strings")
        for pattern in ignore:
            try:
                pattern.encode("utf-8")
            except UnicodeEncodeError as e:
                raise _bad(f"ignore pattern {pattern!r} is not valid Unicode", None, InventoryCode.BAD_IGNORE) from e
        raw_entries = doc["entries"]
        if not isinstance(raw_entries, list):
            raise _bad("entries must be a list")
        # Every path at once when all are plain ASCII (the common inventory), else one by one.
        checked = plain_paths([raw.get("path") if type(raw) is dict else None for raw in raw_entries])
        entries = tuple(_entry_from_json(raw, i, checked) for i, raw in enumerate(raw_entries))
        keys = [order_key(e.path) for e in entries]  # every path passed check_path: sort_key's order
        for i in range(1, len(keys)):
            if keys[i - 1] >= keys[i]:
                what = "repeated" if keys[i - 1] == keys[i] else "out of order"
                raise _bad(f"entry is {what} (entries must be sorted by path components)", entries[i].path)
        _check_closed(entries)
        compile_ignore(tuple(ignore))
        return cls(entries, tuple(ignore))

    @classmethod
    def from_bytes(cls, data: bytes, *, what: str = "inventory") -> Inventory:
        """Parse exactly canonical bytes (optionally followed by one newline)."""
        body = bytes(data[:-1] if data.endswith(b"\n") else data)
        known = _PARSED.get(body)
        if known is not None:
            return known
        with GcPaused():  # a dict and an entry per entry, none in a cycle
            inventory = _from_canonical(body)
            if inventory is None:
                # The strict parser decides, and names the problem.
                inventory = cls.from_json(loads_strict(body, what=what, max_bytes=MAX_INVENTORY_BYTES))
                if inventory.canonical != body:
                    raise InputError(CommonCode.NOT_CANONICAL, f"the {what} is not in RFC 8785 canonical form")
        if len(_PARSED) >= _PARSED_MAX:
            _PARSED.clear()
        _PARSED[body] = inventory
        return inventory


# Parsed inventories by their exact canonical bytes. A parse is a pure function of the bytes and
# an Inventory is immutable, so the same bytes read again (a store entry checked by every step of
# a review run: 28 parses of the same few inventories in the demo's second run) are not parsed
# again. Only successful parses are kept; a few entries, as a store holds few images in use.
_PARSED: dict[bytes, Inventory] = {}
_PARSED_MAX = 16


def _from_canonical(body: bytes) -> Inventory | None:
    """The inventory of ``body`` when it is exactly canonical; None when the strict parser must decide.

    The C parser without the strict parser's per-object hooks, then every check of
    :meth:`Inventory.from_json`, then the canonical bytes compared with ``body``. That last
    comparison is what makes the hooks unnecessary on success: canonical bytes have no
    repeated key, no constant, float or out-of-range integer, no byte-order mark, no lone
    surrogate (it would not encode) and no depth beyond the format's. Any failure here only
    sends ``body`` to the strict path, which fails closed with the precise code.
    """
    if len(body) > MAX_INVENTORY_BYTES:
        return None
    try:
        inventory = Inventory.from_json(json.loads(body.decode("utf-8")))
    except (ValueError, RecursionError, TypeError, InputError):  # UnicodeError is a ValueError
        return None
    return inventory if inventory.canonical == body else None


_quote = json.encoder.encode_basestring  # C-accelerated, no ASCII escaping


def _encode(entries: tuple[Entry, ...], ignore: tuple[str, ...]) -> bytes:
    """RFC 8785 bytes of the inventory, written directly in the canonical key order.

    Every value was validated on the way in (strings, integers <= 2**53, fixed ASCII keys), so
    this is byte-for-byte what ``rfc8785.dumps(self.to_json())`` gives (a test checks it) at a
    fraction of the cost: keys sorted once here instead of per entry.
    """
    parts = []
    for e in entries:
        if e.type is EntryType.FILE:
            parts.append(
                f'{{"digest":{{"sha256":"{e.sha256}"}},"mode":{e.mode},"path":{_quote(e.path)},"size":{e.size},"type":"file"}}'
            )
        else:
            parts.append(f'{{"mode":{e.mode},"path":{_quote(e.path)},"type":"dir"}}')
    head = '{"entries":[' + ",".join(parts) + "]"
    tail = f',"format":{_quote(FORMAT)},"ignore":[{",".join(_quote(p) for p in ignore)}],"name_policy":{_quote(NAME_POLICY)}}}'
    return (head + tail).encode("utf-8")


def _check_closed(entries: tuple[Entry, ...]) -> None:
    """Every entry's parent is a directory entry of the same inventory (or the root)."""
    kinds = {e.path: e.type for e in entries}
    if len(kinds) != len(entries):
        raise _bad("an entry is repeated")
    for e in entries:
        parent, sep, _ = e.path.rpartition("/")
        if sep and kinds.get(parent) is not EntryType.DIR:
            raise _bad(f"the parent {parent!r} is not a directory entry of the inventory", e.path)
