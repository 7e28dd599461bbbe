"""Name and path rules of the closed inventory (the "strict-v1" name policy).

A name is one path component. It is rejected, never normalized, when it could mean
different things to different readers: not UTF-8, empty, ``.``/``..``, containing NUL,
``/`` or ``\\``, control or invisible (format) code points, over NAME_MAX bytes, or a
name git treats as ``.git`` (:func:`is_dotgit`: any case, trailing dots or spaces, an NTFS
alternate data stream such as ``.git::$INDEX_ALLOCATION``, the 8.3 alias ``git~1``, code
points HFS+ ignores such as ``.g\u200cit``). Paths are checked at parse time, before any
filesystem call.

    >>> is_dotgit(".GIT::$INDEX_ALLOCATION"), is_dotgit("git~1."), is_dotgit(".github")
    (True, True, False)
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Sequence
from typing import cast

from ._codes import InventoryCode

NAME_MAX = 255
PATH_MAX = 4096
NAME_POLICY = "strict-v1"

# Categories that are invisible or undefined in a name: control, format (zero-width joiners,
# bidi overrides, BOM), surrogates (undecodable bytes smuggled through surrogateescape),
# private use and unassigned code points.
_BAD_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})
# Invisible code points of other categories (combining grapheme joiner, Hangul fillers, variation
# selectors, Mongolian variation selectors, Khmer inherent vowels): a name with one looks exactly
# like the name without it, so two such names sit side by side and a reader sees one.
_INVISIBLE = frozenset(
    [0x034F, 0x115F, 0x1160, 0x17B4, 0x17B5, 0x3164, 0xFFA0, *range(0x180B, 0x1810), *range(0xFE00, 0xFE10),
     *range(0xE0100, 0xE01F0)]
)

# Code points HFS+ drops when it compares names (git utf8.c next_hfs_char), so ".g\u200cit"
# opens ".git" there.
_HFS_IGNORED = frozenset(
    chr(cp) for cp in (*range(0x200C, 0x2010), *range(0x202A, 0x202F), *range(0x206A, 0x2070), 0xFEFF)
)


def _ascii_lower(text: str) -> str:
    # git compares with its ASCII-only tolower(); str.lower() would also map non-ASCII letters.
    return text.lower() if text.isascii() else text


def _is_ntfs_dotgit(name: str) -> bool:
    """Port of git's ``is_ntfs_dotgit`` (path.c): ``.git`` or ``git~1`` on NTFS.

    NTFS ignores trailing dots and spaces, and ``NAME:STREAM[:TYPE]`` opens an alternate data
    stream of NAME (``.git::$INDEX_ALLOCATION`` is the directory ``.git``): after the prefix,
    only spaces and dots may follow up to the end, a directory separator or a ``:``.
    """
    if name[:1] == "." and _ascii_lower(name[1:4]) == "git":
        rest = name[4:]
    elif _ascii_lower(name[:3]) == "git" and name[3:5] == "~1":
        rest = name[5:]
    else:
        return False
    for c in rest:
        if c in "\0/\\:":  # git's C string ends at NUL
            return True
        if c != "." and c != " ":
            return False
    return True


def _is_hfs_dotgit(name: str) -> bool:
    """Port of git's ``is_hfs_dotgit`` (utf8.c): ``.git`` on HFS+, ignoring :data:`_HFS_IGNORED`.

    git reads the name as UTF-8 and takes an invalid sequence (here: a surrogate smuggled in
    by surrogateescape, U+FFFE, U+FFFF) like the end of the name, as it does NUL.
    """
    picked: list[str] = []
    for c in name:
        if c in _HFS_IGNORED:
            continue
        if c == "\0" or "\ud800" <= c <= "\udfff" or c in "\ufffe\uffff":
            break
        picked.append(c)
        if len(picked) == 5:
            break
    return (
        len(picked) >= 4
        and picked[0] == "."
        and _ascii_lower("".join(picked[1:4])) == "git"
        and (len(picked) == 4 or picked[4] == "/")
    )


def _fsck_dotgit(name: str) -> bool:
    """git's ``fsck_tree`` test: ``is_hfs_dotgit || is_ntfs_dotgit``, and ``is_ntfs_dotgit`` after every backslash."""
    if _is_hfs_dotgit(name) or _is_ntfs_dotgit(name):
        return True
    at = name.find("\\")
    while at >= 0:
        if _is_ntfs_dotgit(name[at + 1 :]):
            return True
        at = name.find("\\", at + 1)
    return False


# The same verdict for ASCII names in one call: HFS+ ignores no ASCII code point, so only the
# NTFS rule can match, at the start or after any backslash (a directory separator on Windows).
_DOTGIT_STARTS = frozenset(".gG")
_ASCII_DOTGIT = re.compile(r"(?:.*\\)?(?:\.git|git~1)[. ]*(?:[\0/\\:].*)?\Z", re.IGNORECASE | re.ASCII | re.DOTALL).match


def is_dotgit(name: str) -> bool:
    """Whether git refuses ``name`` as a spelling of ``.git`` (fsck, core.protectNTFS, core.protectHFS).

    The one place that decides it: :func:`check_name` and every walker use it. A faithful port
    of git's ``fsck_tree`` (:func:`_fsck_dotgit`); ASCII names take an equivalent expression.
    """
    if name.isascii():
        # Only a name starting like ".git" or "git~1", or holding a backslash, can match.
        if name[:1] not in _DOTGIT_STARTS and "\\" not in name:
            return False
        return _ASCII_DOTGIT(name) is not None
    return _fsck_dotgit(name)


class _DotgitSpellings:
    """``x in _RESERVED`` is :func:`is_dotgit` (x).

    The walker's fast path asks ``name.rstrip(". ").casefold() in _RESERVED`` for printable
    ASCII names; for those, dropping trailing dots and spaces and lowering case does not change
    the verdict of :func:`is_dotgit`, so that test stays the one rule instead of a second list.
    """

    __slots__ = ()

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and is_dotgit(name)


_RESERVED = _DotgitSpellings()


_ASCII_BAD = re.compile(rb"[\x00-\x1f\x7f/\\]").search


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
    if is_dotgit(name):
        # Before the character checks, so ".g\u200cit" is reported as the .git it is.
        return InventoryCode.RESERVED_NAME, f"the name {name!r} is a spelling of .git that git and NTFS / HFS+ refuse"
    if raw.isascii():
        # Fast path for the common case: only ASCII controls, DEL, slash and backslash matter.
        if _ASCII_BAD(raw) is not None:
            return InventoryCode.BAD_NAME, f"the name {name!r} contains a control character, '/' or '\\'"
    else:
        for ch in name:
            if ch in "/\\" or unicodedata.category(ch) in _BAD_CATEGORIES or ord(ch) in _INVISIBLE:
                return InventoryCode.BAD_NAME, f"the name {name!r} contains U+{ord(ch):04X}, which is not allowed"
    return None


# Printable ASCII without "/" and "\\", at most NAME_MAX bytes: check_name accepts such a
# name unless it is "." or ".." or a reserved spelling of .git, so a walker listing many
# names may skip check_name's byte-by-byte scan for it (and must still check those three).
PLAIN_NAME = re.compile(rf"[\x20-\x2e\x30-\x5b\x5d-\x7e]{{1,{NAME_MAX}}}").fullmatch


def is_plain(name: str) -> bool:
    """True only when :func:`check_name` accepts ``name``: the walker's per-entry fast path.

    Printable ASCII without ``/`` or ``\\`` (:data:`PLAIN_NAME`), not ``.`` or ``..`` and not a
    spelling of ``.git`` (:func:`is_dotgit`). False says nothing: ask :func:`check_name`.
    """
    return PLAIN_NAME(name) is not None and name != "." and name != ".." and not is_dotgit(name)


# A whole directory listing at once (the walker's per-directory fast path): names joined with "/"
# (which no name holds), each of PLAIN_NAME's characters; then one search for every name that
# could be ".", ".." or a spelling of .git (a superset: ".github" leaves the listing to the
# per-name checks too).
_PLAIN_CHAR = r"[\x20-\x2e\x30-\x5b\x5d-\x7e]"
_PLAIN_JOINED = re.compile(rf"{_PLAIN_CHAR}{{1,{NAME_MAX}}}(?:/{_PLAIN_CHAR}{{1,{NAME_MAX}}})*").fullmatch
_MAYBE_REFUSED = re.compile(r"(?:\A|/)(?:\.git|git~1|\.\.?(?:/|\Z))", re.IGNORECASE | re.ASCII).search


def plain_names(names: Sequence[str]) -> bool:
    """True only when :func:`is_plain` holds for every name and no two share a :func:`collision_key`.

    A few calls at C speed over the joined listing instead of two per name. False says
    nothing: check each name (:func:`check_name`, :func:`collision_key`).
    """
    if not names:
        return False
    joined = "/".join(names)
    return (
        joined.count("/") == len(names) - 1  # no name holds the separator
        and _PLAIN_JOINED(joined) is not None
        and _MAYBE_REFUSED(joined) is None
        # Printable ASCII: the collision key is the lower-case name.
        and len(set(joined.lower().split("/"))) == len(names)
    )


# Whole paths at once (a parsed inventory, the second walking process's answer): paths joined
# with "\n" (which no plain name holds), each one or more plain names joined with "/".
_PLAIN_PATH = rf"{_PLAIN_CHAR}{{1,{NAME_MAX}}}(?:/{_PLAIN_CHAR}{{1,{NAME_MAX}}})*"
_PLAIN_PATHS = re.compile(rf"{_PLAIN_PATH}(?:\n{_PLAIN_PATH})*").fullmatch
_MAYBE_REFUSED_IN_PATHS = re.compile(r"(?:\A|[/\n])(?:\.git|git~1|\.\.?(?:[/\n]|\Z))", re.IGNORECASE | re.ASCII).search


def plain_paths(values: Sequence[object]) -> bool:
    """True only when every value of ``values`` is a plain ASCII path :func:`check_path` accepts.

    A few calls at C speed over the joined paths instead of :func:`check_path` per path. False
    says nothing: check each path.
    """
    if not values or not all(type(p) is str for p in values):
        return False
    paths = cast("Sequence[str]", values)
    joined = "\n".join(paths)
    return (
        joined.count("\n") == len(paths) - 1  # no path holds the separator
        and _PLAIN_PATHS(joined) is not None
        and _MAYBE_REFUSED_IN_PATHS(joined) is None
        and max(map(len, paths)) <= PATH_MAX  # ASCII: one byte a character
    )


def display_name(name: str) -> str:
    """A name (or path) as a person can read it, even when it is not UTF-8 (bytes as ``\\xNN``)."""
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def entry_path(prefix: str, name: str) -> str:
    """The inventory path of ``name`` in the directory at ``prefix`` (``""`` for the root)."""
    rel = name if name.isascii() else display_name(name)
    return f"{prefix}/{rel}" if prefix else rel


def collision_key(name: str) -> str:
    """Key under which two sibling names are the same on a case-folding or normalizing filesystem."""
    if name.isascii():
        return name.lower()
    return unicodedata.normalize("NFC", unicodedata.normalize("NFC", name).casefold())


def check_path(path: str) -> tuple[InventoryCode, str] | None:
    """Validate a relative ``/``-separated path as written in an inventory, without normalizing it.

    Returns ``(code, detail)`` for the first problem (``BAD_PATH``, ``PATH_TOO_LONG``, a name
    code such as ``BAD_NAME`` or ``RESERVED_NAME``), or None.

    Raises:
        Nothing: a problem is returned, never raised.
    """
    if not isinstance(path, str) or path == "":
        return InventoryCode.BAD_PATH, "the path is empty"
    if path.startswith("/"):
        return InventoryCode.BAD_PATH, f"{path!r} is absolute"
    if len(path.encode("utf-8", "surrogatepass")) > PATH_MAX:
        return InventoryCode.PATH_TOO_LONG, f"the path is longer than {PATH_MAX} bytes"
    # The components left to right; a directory's own path is judged once, however many
    # entries lie below it (an inventory or a walk result names every parent again and again).
    parent, sep, name = path.rpartition("/")
    bad = (_bad_component(parent) if sep else None) or _bad_component_of(name)
    if bad is None:
        return None
    kind, component, problem = bad
    if kind == "empty":
        return InventoryCode.BAD_PATH, f"{path!r} has an empty component ('//' or a trailing '/')"
    if kind == "dot":
        return InventoryCode.BAD_PATH, f"{path!r} has a {component!r} component"
    assert problem is not None
    return problem


_Bad = tuple[str, str, "tuple[InventoryCode, str] | None"]


@functools.lru_cache(maxsize=65536)
def _bad_component(prefix: str) -> _Bad | None:
    """The first component of ``prefix`` (a ``/``-separated path) that no path may hold, or None."""
    for component in prefix.split("/"):  # a loop, not a recursion per component: a path may have 2,000
        bad = _bad_component_of(component)
        if bad is not None:
            return bad
    return None


def _bad_component_of(component: str) -> _Bad | None:
    if component == "":
        return "empty", component, None
    if component in (".", ".."):
        return "dot", component, None
    problem = check_name(component)
    return None if problem is None else ("name", component, problem)


def order_key(path: str) -> str:
    """A cheaper key with the order of :func:`sort_key`, for paths an inventory can hold.

    For paths of valid UTF-8 names without NUL (what :func:`check_path` and the walker let
    through): UTF-8 keeps the order of code points, and NUL, which stands for ``/`` here, sorts
    below every character a name may hold, so comparing these strings compares the components
    bytewise, shorter prefix first. One ``str.replace`` instead of encoding and splitting.
    """
    return path.replace("/", "\0")


def sort_key(path: str) -> tuple[bytes, ...]:
    """Order of the inventory: by path components, bytewise on their UTF-8 encoding.

    Raises:
        UnicodeEncodeError: for a path with lone surrogates (not valid UTF-8); paths that
            passed :func:`check_path` or the walker never have them.
    """
    # Splitting the encoded path gives the same components (UTF-8 never encodes another code
    # point with the byte of "/") and is twice as fast as encoding each component.
    return tuple(path.encode("utf-8").split(b"/"))
