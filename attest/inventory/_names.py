"""Name and path rules of the closed inventory (the "strict-v1" name policy).

A name is one path component. It is rejected, never normalized, when it could mean
different things to different readers: not UTF-8, empty, ``.``/``..``, containing NUL,
``/`` or ``\\``, control or invisible (format) code points, over NAME_MAX bytes, or a
reserved spelling of ``.git`` (any case, trailing dots or spaces, the 8.3 alias
``git~1``). Paths are checked at parse time, before any filesystem call.
"""

from __future__ import annotations

import functools
import unicodedata

from ._codes import InventoryCode

NAME_MAX = 255
PATH_MAX = 4096
NAME_POLICY = "strict-v1"

# Categories that are invisible or undefined in a name: control, format (zero-width joiners,
# bidi overrides, BOM), surrogates (undecodable bytes smuggled through surrogateescape),
# private use and unassigned code points.
_BAD_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn"})
_RESERVED = frozenset({".git", "git~1"})


@functools.lru_cache(maxsize=65536)
def check_name(name: str) -> tuple[InventoryCode, str] | None:
    """Return ``(code, detail)`` when ``name`` is not an acceptable component, else None."""
    if name in ("", ".", ".."):
        return InventoryCode.BAD_NAME, f"the name {name!r} is not a file name"
    try:
        raw = name.encode("utf-8")
    except UnicodeEncodeError:
        return InventoryCode.BAD_NAME, "the name is not valid UTF-8"
    if len(raw) > NAME_MAX:
        return InventoryCode.NAME_TOO_LONG, f"the name is {len(raw)} bytes; the limit is {NAME_MAX}"
    if raw.isascii():
        # Fast path for the common case: only ASCII controls, DEL, slash and backslash matter.
        if any(b < 0x20 or b == 0x7F for b in raw) or b"/" in raw or b"\\" in raw:
            return InventoryCode.BAD_NAME, f"the name {name!r} contains a control character, '/' or '\\'"
    else:
        for ch in name:
            if ch in "/\\" or unicodedata.category(ch) in _BAD_CATEGORIES:
                return InventoryCode.BAD_NAME, f"the name {name!r} contains U+{ord(ch):04X}, which is not allowed"
    if name.rstrip(". ").casefold() in _RESERVED:
        return InventoryCode.RESERVED_NAME, f"the name {name!r} is a reserved spelling of .git"
    return None


def collision_key(name: str) -> str:
    """Key under which two sibling names are the same on a case-folding or normalizing filesystem."""
    if name.isascii():
        return name.lower()
    return unicodedata.normalize("NFC", unicodedata.normalize("NFC", name).casefold())


def check_path(path: str) -> tuple[InventoryCode, str] | None:
    """Validate a relative ``/``-separated path as written in an inventory, without normalizing it."""
    if not isinstance(path, str) or path == "":
        return InventoryCode.BAD_PATH, "the path is empty"
    if path.startswith("/"):
        return InventoryCode.BAD_PATH, f"{path!r} is absolute"
    if len(path.encode("utf-8", "surrogatepass")) > PATH_MAX:
        return InventoryCode.PATH_TOO_LONG, f"the path is longer than {PATH_MAX} bytes"
    for component in path.split("/"):
        if component == "":
            return InventoryCode.BAD_PATH, f"{path!r} has an empty component ('//' or a trailing '/')"
        if component in (".", ".."):
            return InventoryCode.BAD_PATH, f"{path!r} has a {component!r} component"
        problem = check_name(component)
        if problem is not None:
            return problem
    return None


def sort_key(path: str) -> tuple[bytes, ...]:
    """Order of the inventory: by path components, bytewise on their UTF-8 encoding."""
    # Splitting the encoded path gives the same components (UTF-8 never encodes another code
    # point with the byte of "/") and is twice as fast as encoding each component.
    return tuple(path.encode("utf-8").split(b"/"))
