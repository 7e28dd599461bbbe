"""`_names.order_key` sorts every path an inventory can hold exactly as `sort_key` does."""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st

from attest.inventory import Entry, EntryType, Inventory, check_path
from attest.inventory._names import check_name, order_key, sort_key

# Characters on both sides of "/" (0x2f) and "\0", multi-byte UTF-8 of every length.
_CHARS = " !#-.0/9AZ_az~\u00e9\u00ff\u0100\u4e2d\uffef\U0001f600"
_NAMES = st.text(alphabet=_CHARS.replace("/", ""), min_size=1, max_size=4).filter(lambda n: check_name(n) is None)
_PATHS = st.lists(_NAMES, min_size=1, max_size=4).map("/".join)


@given(st.lists(_PATHS, min_size=2, max_size=30, unique=True))
def test_order_key_sorts_like_sort_key(paths: list[str]) -> None:
    assert all(check_path(p) is None for p in paths)
    assert sorted(paths, key=order_key) == sorted(paths, key=sort_key)


def test_the_prefix_and_separator_cases() -> None:
    paths = ["a", "a/b", "a-b", "a b", "a.b", "a/b/c", "ab", "a/\u00e9", "a\u00e9", "a/ ", "\U0001f600", "\uffef"]
    for _ in range(20):
        random.shuffle(paths)
        assert sorted(paths, key=order_key) == sorted(paths, key=sort_key)


def test_an_inventory_is_in_sort_key_order_and_round_trips() -> None:
    names = ["a", "a-b", "a b", "ab", "a.b", "\u00e9"]
    entries = [Entry(n, EntryType.DIR, 0o755) for n in names] + [Entry(f"{n}/f", EntryType.FILE, 0o644, 0, "0" * 64) for n in names]
    random.Random(14).shuffle(entries)
    inv = Inventory.from_entries(entries)
    assert [e.path for e in inv.entries] == sorted((e.path for e in entries), key=sort_key)
    assert Inventory.from_bytes(inv.canonical) == inv
