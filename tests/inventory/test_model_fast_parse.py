"""Inventory.from_bytes takes a fast path for canonical bytes: it must give the strict parser's verdict on every input.

The strict parser (strict JSON with its per-object hooks, then the model's checks, then the
canonical comparison) is the reference; ``from_bytes`` must accept exactly what it accepts, as
the same inventory, and refuse everything else with the same code.
"""

from __future__ import annotations

import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from attest._json import loads_strict
from attest.errors import CommonCode, InputError
from attest.inventory import FORMAT, Inventory
from attest.inventory._model import MAX_INVENTORY_BYTES

DIGEST = "ab" * 32


def _canonical() -> bytes:
    entries = [{"path": "a", "type": "dir", "mode": 493},
               {"path": "a/b", "type": "file", "mode": 420, "size": 3, "digest": {"sha256": DIGEST}},
               {"path": "a/\u00e9t\u00e9", "type": "file", "mode": 493, "size": 0, "digest": {"sha256": "cd" * 32}}]
    return rfc8785.dumps({"format": FORMAT, "name_policy": "strict-v1", "ignore": ["*.pyc"], "entries": entries})


def _strict(data: bytes) -> Inventory:
    body = data[:-1] if data.endswith(b"\n") else data
    inventory = Inventory.from_json(loads_strict(body, what="inventory", max_bytes=MAX_INVENTORY_BYTES))
    if inventory.canonical != body:
        raise InputError(CommonCode.NOT_CANONICAL, "not canonical")
    return inventory


def _verdict(parse: object, data: bytes) -> tuple[str, object]:
    try:
        inventory = parse(data)  # type: ignore[operator]
    except InputError as e:
        return "refused", e.code
    return "accepted", inventory.canonical


GOOD = _canonical()
CASES = {
    "canonical": GOOD,
    "canonical + newline": GOOD + b"\n",
    "two newlines": GOOD + b"\n\n",
    "duplicate key": GOOD.replace(b'"mode":420', b'"mode":420,"mode":420', 1),
    "duplicate top-level key": GOOD.replace(b'"ignore":', b'"ignore":[],"ignore":', 1),
    "byte-order mark": b"\xef\xbb\xbf" + GOOD,
    "UTF-16": GOOD.decode().encode("utf-16"),
    "lone surrogate escape": GOOD.replace(b"a/b", b"a/\\ud800", 1),
    "escaped ASCII": GOOD.replace(b'"a/b"', b'"a/\\u0062"', 1),
    "float mode": GOOD.replace(b'"mode":420', b'"mode":420.0', 1),
    "exponent size": GOOD.replace(b'"size":3', b'"size":3e0', 1),
    "NaN size": GOOD.replace(b'"size":3', b'"size":NaN', 1),
    "huge size": GOOD.replace(b'"size":3', b'"size":' + b"9" * 40, 1),
    "unsafe integer size": GOOD.replace(b'"size":3', b'"size":9007199254740993', 1),
    "negative zero": GOOD.replace(b'"size":3', b'"size":-0', 1),
    "space": GOOD.replace(b",", b", ", 1),
    "truncated": GOOD[:-1],
    "not JSON": b"\x00" * 8,
    "empty": b"",
    "deep": b"[" * 100_000 + b"]" * 100_000,
    "out of order": GOOD.replace(b'"a/b"', b'"a/z"', 1),
    "setuid": GOOD.replace(b'"mode":420', b'"mode":2468', 1),
    "bad name": GOOD.replace(b'"a/b"', b'"a/.git"', 1),
    "invalid UTF-8": GOOD.replace("\u00e9".encode(), b"\xe9", 1),
}


@pytest.mark.parametrize("name", list(CASES))
def test_from_bytes_gives_the_strict_verdict(name: str) -> None:
    data = CASES[name]
    assert _verdict(Inventory.from_bytes, data) == _verdict(_strict, data)
    # A second parse of the same bytes (the memo) gives the same verdict again.
    assert _verdict(Inventory.from_bytes, data) == _verdict(_strict, data)


def test_the_memo_answers_only_for_the_same_bytes() -> None:
    first = Inventory.from_bytes(GOOD)
    assert Inventory.from_bytes(bytearray(GOOD)) is first  # the same bytes, another object
    other = GOOD.replace(b'"size":3', b'"size":4', 1)
    assert Inventory.from_bytes(other).canonical == other != GOOD
    with pytest.raises(InputError) as info:
        Inventory.from_bytes(GOOD.replace(b'"mode":420', b'"mode":420,"mode":420', 1))
    assert info.value.code == CommonCode.DUPLICATE_KEY


@settings(max_examples=300, deadline=None)
@given(st.integers(0, len(GOOD) - 1), st.integers(0, 255), st.booleans())
def test_any_one_byte_edit_gets_the_strict_verdict(at: int, value: int, insert: bool) -> None:
    data = GOOD[:at] + bytes([value]) + GOOD[at + (0 if insert else 1):]
    assert _verdict(Inventory.from_bytes, data) == _verdict(_strict, data)
