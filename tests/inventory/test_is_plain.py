"""The walker's fast paths (`_names.is_plain` per name, `_names.plain_names` per listing) never accept a name check_name refuses."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from attest.inventory._names import NAME_MAX, check_name, check_path, collision_key, is_plain, plain_names, plain_paths


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


def _one_by_one(names: list[str]) -> bool:
    keys = [collision_key(n) for n in names]
    return bool(names) and all(is_plain(n) for n in names) and len(set(keys)) == len(keys)


@pytest.mark.parametrize(
    ("names", "plain"),
    [
        (["a", "b", "c.txt"], True),
        (["x" * NAME_MAX, "y"], True),
        ([], False),  # nothing to vouch for
        (["a", "A"], False),  # a case collision
        (["Makefile", "makefile"], False),
        (["a", "."], False),
        (["..", "a"], False),
        ([".git"], False),
        (["src", ".GIT"], False),
        (["git~1"], False),
        ([".git::$INDEX_ALLOCATION"], False),
        ([".github", "a"], False),  # not refused, but left to the per-name checks
        (["a/b", "A"], False),  # a separator inside a name never passes as two names
        (["a\\b"], False),
        (["caf\u00e9"], False),
        (["a\x00"], False),
        (["a\x7f"], False),
        (["x" * (NAME_MAX + 1)], False),
        ([""], False),
        (["a", ""], False),
    ],
)
def test_plain_names_vouches_only_for_listings_whose_every_name_passes(names: list[str], plain: bool) -> None:
    assert plain_names(names) is plain
    if plain:
        assert _one_by_one(names)


@given(st.lists(st.text(alphabet=". gGiItT~1:$xX/\\\u00e9", min_size=0, max_size=6), max_size=5))
def test_plain_names_implies_every_name_passes_one_by_one(names: list[str]) -> None:
    if plain_names(names):
        assert _one_by_one(names), names


@pytest.mark.parametrize(
    ("paths", "plain"),
    [
        (["a", "a/b", "a/b/c.txt", "x y/z~1"], True),
        (["x/" + "y" * NAME_MAX], True),
        (["a/" * 2047 + "b"], True),  # 4,095 bytes
        (["a/" * 2048 + "b"], False),  # 4,097 bytes: PATH_TOO_LONG
        ([], False),
        (["a//b"], False),
        (["/a"], False),
        (["a/"], False),
        ([""], False),
        (["a/./b"], False),
        (["a/.."], False),
        (["..", "a"], False),
        (["a/.git/x"], False),
        (["a/.GIT"], False),
        (["git~1/a"], False),
        (["x/.github"], False),  # accepted by check_path, left to it
        (["a\nb"], False),
        (["a\\b"], False),
        (["caf\u00e9"], False),
        (["a\x00b"], False),
        (["x/" + "y" * (NAME_MAX + 1)], False),
    ],
)
def test_plain_paths_vouches_only_for_paths_check_path_accepts(paths: list[str], plain: bool) -> None:
    assert plain_paths(paths) is plain
    if plain:
        assert all(check_path(p) is None for p in paths)


def test_plain_paths_refuses_what_is_not_a_string() -> None:
    assert not plain_paths(["a", None])
    assert not plain_paths(["a", 1])


@given(st.lists(st.text(alphabet="./ gGiItT~1:$x\n\\\u00e9", min_size=0, max_size=8), max_size=4))
def test_plain_paths_implies_check_path_accepts_each(paths: list[str]) -> None:
    if plain_paths(paths):
        assert all(check_path(p) is None for p in paths), paths
