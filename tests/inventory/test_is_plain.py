"""The walker's per-name fast path (`_names.is_plain`) never accepts a name check_name refuses."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from attest.inventory._names import NAME_MAX, check_name, is_plain


def test_is_plain_is_check_name_on_short_ascii_names() -> None:
    # Exact on printable ASCII without "/" and "\\": the only refusals there are ".", ".." and .git spellings.
    alphabet = ". gGiItT~1:$x"
    for n in range(1, 6):
        for chars in itertools.product(alphabet, repeat=n):
            name = "".join(chars)
            assert is_plain(name) == (check_name(name) is None), name


def test_names_is_plain_leaves_to_check_name() -> None:
    for name in ["a\\b", "a/b", "", "a\x00", "a\x7f", "\u00e9", ".g\u200cit", "x" * (NAME_MAX + 1), "."]:
        assert not is_plain(name), name
    assert is_plain("x" * NAME_MAX) and check_name("x" * NAME_MAX) is None


@given(st.text(min_size=0, max_size=12))
def test_is_plain_implies_check_name_accepts(name: str) -> None:
    if is_plain(name):
        assert check_name(name) is None, name
