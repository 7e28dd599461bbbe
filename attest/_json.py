"""Strict JSON in, canonical JSON (RFC 8785) out.

Everything attest reads from outside goes through :func:`loads_strict`: bounded size and
nesting, UTF-8 only (no BOM), no duplicate keys at any depth, no NaN/Infinity or numbers
that overflow a double, no lone surrogates, and integers bounded to the interoperable
range (|n| <= 2**53 - 1): I-JSON (RFC 7493), which RFC 8785 is defined over.

:func:`canonical_bytes` produces RFC 8785 (JCS) bytes. For the documents attest writes
(string keys, strings, integers within 2**53, booleans, null, lists and objects; no
floats) JCS is exactly ``json.dumps`` with sorted keys, no whitespace and no ASCII
escaping, which is several times faster than the general ``rfc8785`` serializer; any
other document falls back to ``rfc8785`` itself. The test suite checks the two agree.

    >>> canonical_bytes(loads_strict(b'{"b": 1, "a": [true, null]}'))
    b'{"a":[true,null],"b":1}'
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, NoReturn

from .errors import CommonCode, InputError, ReasonCode

MAX_SAFE_INT = 2**53 - 1
DEFAULT_MAX_BYTES = 64 * 1024 * 1024
DEFAULT_MAX_DEPTH = 64


def _reject_constant(name: str) -> NoReturn:
    raise ValueError(f"non-standard JSON constant {name}")


def _parse_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"number {text[:30]} is outside the range of a double")
    return value


# Lone surrogates can only come from \uD800-\uDFFF escapes (strict UTF-8 decoding refuses them
# as bytes), so the slow per-string check runs only when such an escape is present.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89abcdefABCDEF]")


def _check_strings(value: object) -> None:
    """Refuse strings (and keys) that are not valid Unicode: RFC 8785 is defined over I-JSON."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            item.encode("utf-8")
        elif isinstance(item, dict):
            for key, child in item.items():
                key.encode("utf-8")
                stack.append(child)
        elif isinstance(item, list):
            stack.extend(item)


def _parse_int(text: str) -> int:
    value = int(text)
    if abs(value) > MAX_SAFE_INT:
        raise ValueError(f"integer {text[:30]} is outside the interoperable range")
    return value


class _DuplicateKey(ValueError):
    pass


def _pairs(pairs: list[tuple[str, object]]) -> dict[str, object]:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKey(key)
            seen.add(key)
    return out


def _depth(value: object, limit: int) -> int:
    """Nesting depth of a parsed value, level by level (no recursion a hostile input can exhaust)."""
    depth = 0
    level = [value] if isinstance(value, (dict, list)) else []
    while level:
        depth += 1
        if depth > limit:
            return depth
        level = [
            child
            for item in level
            for child in (item.values() if isinstance(item, dict) else item)
            if isinstance(child, (dict, list))
        ]
    return depth


def strict_text(data: bytes | bytearray | memoryview, *, what: str, max_bytes: int, code: ReasonCode) -> str:
    """The text of a document read from outside: at most ``max_bytes``, strict UTF-8, no byte-order mark.

    The one prelude of the strict readers (:func:`loads_strict`, the strict YAML reader).

    Raises:
        InputError: ``TOO_LARGE``; ``code`` (the reader's own syntax code) for bytes that are not
            UTF-8 or that start with a byte-order mark.
    """
    if len(data) > max_bytes:
        raise InputError(CommonCode.TOO_LARGE, f"{what} is {len(data)} bytes; the limit is {max_bytes}")
    try:
        text = bytes(data).decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(code, f"{what} is not valid UTF-8: {e.reason} at byte {e.start}") from e
    if text.startswith("\ufeff"):
        raise InputError(code, f"{what} starts with a byte-order mark")
    return text


def loads_strict(
    data: bytes,
    *,
    what: str = "JSON document",
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_depth: int = DEFAULT_MAX_DEPTH,
) -> Any:  # Any: json.loads's value, which every caller narrows with a Shape or isinstance
    """Parse ``data`` as strict JSON or raise :class:`InputError` with a precise code."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError("loads_strict takes bytes")
    text = strict_text(data, what=what, max_bytes=max_bytes, code=CommonCode.BAD_JSON)
    try:
        value = json.loads(
            text,
            object_pairs_hook=_pairs,
            parse_constant=_reject_constant,
            parse_int=_parse_int,
            parse_float=_parse_float,
        )
        if _SURROGATE_ESCAPE.search(text):
            _check_strings(value)
    except _DuplicateKey as e:
        raise InputError(CommonCode.DUPLICATE_KEY, f"{what} has the key {str(e)!r} twice in one object") from e
    except RecursionError as e:
        raise InputError(CommonCode.TOO_DEEP, f"{what} nests too deeply") from e
    except UnicodeEncodeError as e:
        raise InputError(CommonCode.BAD_JSON, f"{what} holds a lone UTF-16 surrogate (not I-JSON)") from e
    except ValueError as e:
        raise InputError(CommonCode.BAD_JSON, f"{what} is not valid JSON: {e}") from e
    if _depth(value, max_depth) > max_depth:
        raise InputError(CommonCode.TOO_DEEP, f"{what} nests deeper than {max_depth} levels")
    return value


def _is_simple(value: object) -> bool:
    """True when json.dumps output is already RFC 8785 for this value."""
    stack = [value]
    while stack:
        item = stack.pop()
        if item is None or isinstance(item, (bool, str)):
            continue
        if isinstance(item, int):
            if abs(item) > MAX_SAFE_INT:
                return False
            continue
        if isinstance(item, list):
            stack.extend(item)
            continue
        if isinstance(item, dict):
            for key in item:
                # Key order: JCS sorts by UTF-16 code units, Python by code points; they agree
                # on the Basic Multilingual Plane only.
                if not isinstance(key, str) or (not key.isascii() and max(key) > "\uffff"):
                    return False
            stack.extend(item.values())
            continue
        return False
    return True


def canonical_bytes(value: object) -> bytes:
    """RFC 8785 canonical bytes of ``value``."""
    if _is_simple(value):
        text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        try:
            return text.encode("utf-8")
        except UnicodeEncodeError as e:  # a lone surrogate: not representable in any JSON text
            raise InputError(CommonCode.BAD_JSON, "value holds a string that is not valid Unicode") from e
    import rfc8785  # lazy: rfc8785, +0.9 ms; only canonical output needs it, and the CLI's app imports this module for loads_strict

    document: Any = value  # Any: rfc8785 types its input with a private alias and checks it itself (TypeError, caught below)
    try:
        return rfc8785.dumps(document)
    except (rfc8785.CanonicalizationError, TypeError) as e:
        raise InputError(CommonCode.BAD_JSON, f"value cannot be canonicalized: {e}") from e
