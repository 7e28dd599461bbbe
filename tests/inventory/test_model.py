"""The inventory format as a contract: canonical bytes, identity, strict parsing (THREATS C, D, G)."""

from __future__ import annotations

import hashlib
import json

import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from attest._json import MAX_SAFE_INT, canonical_bytes, loads_strict
from attest.errors import CommonCode, InputError
from attest.inventory import FORMAT, Entry, EntryType, Inventory, InventoryCode, check_name, check_path

DIGEST = "ab" * 32


def doc(entries: list[dict], **top: object) -> dict:
    base = {"format": FORMAT, "name_policy": "strict-v1", "ignore": [], "entries": entries}
    base.update(top)
    return base


def file(path: str, mode: int = 0o644, size: int = 1, digest: str = DIGEST) -> dict:
    return {"path": path, "type": "file", "mode": mode, "size": size, "digest": {"sha256": digest}}


def dir_(path: str, mode: int = 0o755) -> dict:
    return {"path": path, "type": "dir", "mode": mode}


def parse(d: dict) -> Inventory:
    return Inventory.from_bytes(rfc8785.dumps(d))


def test_identity_is_sha256_of_independent_jcs_bytes() -> None:
    d = doc([dir_("a"), file("a/b"), file("a/c", mode=0o755, size=0)])
    inv = parse(d)
    independent = rfc8785.dumps(d)
    assert inv.canonical == independent
    assert inv.identity == "sha256:" + hashlib.sha256(independent).hexdigest()


def test_round_trip_through_bytes_keeps_identity() -> None:
    inv = Inventory.from_entries([Entry("x", EntryType.DIR, 0o700), Entry("x/y", EntryType.FILE, 0o600, 3, DIGEST)])
    again = Inventory.from_bytes(inv.canonical + b"\n")
    assert again == inv and again.identity == inv.identity


def test_order_is_by_components_bytewise() -> None:
    # "a/b" sorts before "a-b" by components ("a" < "a-b"), unlike a plain string sort.
    inv = Inventory.from_entries([Entry("a-b", EntryType.DIR, 0o755), Entry("a", EntryType.DIR, 0o755), Entry("a/b", EntryType.DIR, 0o755)])
    assert [e.path for e in inv.entries] == ["a", "a/b", "a-b"]
    assert sorted(["a/b", "a-b"]) == ["a-b", "a/b"]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-MAX_SAFE_INT, MAX_SAFE_INT) | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(), children, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(json_values)
def test_fast_canonical_encoder_agrees_with_rfc8785(value: object) -> None:
    try:
        expected = rfc8785.dumps(value)
    except Exception:  # noqa: BLE001 - any refusal by the reference must be a refusal by ours
        with pytest.raises(InputError):
            canonical_bytes(value)
        return
    assert canonical_bytes(value) == expected


def test_non_bmp_keys_fall_back_to_utf16_order() -> None:
    value = {"\U0001f600": 1, "\uffff": 2}
    assert canonical_bytes(value) == rfc8785.dumps(value)


@pytest.mark.parametrize(
    ("raw", "code"),
    [
        (b'{"a":1,"a":2}', CommonCode.DUPLICATE_KEY),
        (b'{"a":{"b":1,"b":1}}', CommonCode.DUPLICATE_KEY),
        (b'[NaN]', CommonCode.BAD_JSON),
        (b'[Infinity]', CommonCode.BAD_JSON),
        (b'[9007199254740993]', CommonCode.BAD_JSON),
        (b'\xef\xbb\xbf{}', CommonCode.BAD_JSON),
        (b'{"a":"\xff"}', CommonCode.BAD_JSON),
        (b"[" * 100 + b"]" * 100, CommonCode.TOO_DEEP),
        (b"[" * 100000 + b"]" * 100000, CommonCode.TOO_DEEP),
        (b'{"a":', CommonCode.BAD_JSON),
        (b'[1e400]', CommonCode.BAD_JSON),
        (b'["\\ud800"]', CommonCode.BAD_JSON),
        (b'{"\\udfff":1}', CommonCode.BAD_JSON),
    ],
)
def test_strict_json_rejections(raw: bytes, code: CommonCode) -> None:
    with pytest.raises(InputError) as info:
        loads_strict(raw)
    assert info.value.code == code


def test_paired_surrogate_escapes_are_fine() -> None:
    assert loads_strict(b'["\\ud83d\\ude00", 1.5]') == ["\U0001f600", 1.5]


def test_strict_json_size_cap() -> None:
    with pytest.raises(InputError) as info:
        loads_strict(b"[" + b"1," * 1000 + b"1]", max_bytes=100)
    assert info.value.code == CommonCode.TOO_LARGE


@pytest.mark.parametrize(
    ("path", "code"),
    [
        ("../x", InventoryCode.BAD_PATH),
        ("/abs", InventoryCode.BAD_PATH),
        ("a//b", InventoryCode.BAD_PATH),
        ("./a", InventoryCode.BAD_PATH),
        ("a/.", InventoryCode.BAD_PATH),
        ("a/..", InventoryCode.BAD_PATH),
        ("a/", InventoryCode.BAD_PATH),
        ("", InventoryCode.BAD_PATH),
        ("a\\b", InventoryCode.BAD_NAME),
        ("a\x00b", InventoryCode.BAD_NAME),
        ("a\nb", InventoryCode.BAD_NAME),
        ("a\x7fb", InventoryCode.BAD_NAME),
        ("a\u200bb", InventoryCode.BAD_NAME),
        ("a\u202eb", InventoryCode.BAD_NAME),
        ("x/.git", InventoryCode.RESERVED_NAME),
        (".GIT", InventoryCode.RESERVED_NAME),
        (".git.", InventoryCode.RESERVED_NAME),
        (".git ", InventoryCode.RESERVED_NAME),
        ("GIT~1", InventoryCode.RESERVED_NAME),
        ("n" * 256, InventoryCode.NAME_TOO_LONG),
        ("/".join(["d" * 200] * 21), InventoryCode.PATH_TOO_LONG),
    ],
)
def test_bad_paths_rejected_at_parse_time(path: str, code: InventoryCode) -> None:
    problem = check_path(path)
    assert problem is not None and problem[0] == code
    with pytest.raises(InputError) as info:
        parse(doc([file(path)]))
    assert info.value.code == code


@pytest.mark.parametrize("name", ["a", ".gitignore", ".github", "git", "é", "日本語.txt", "a b", ".git-x"])
def test_ordinary_names_accepted(name: str) -> None:
    assert check_name(name) is None


@pytest.mark.parametrize(
    ("mutate", "code"),
    [
        (lambda d: d.update(extra=1), InventoryCode.BAD_INVENTORY),
        (lambda d: d.update(format="https://example.com/other"), InventoryCode.BAD_INVENTORY),
        (lambda d: d.update(name_policy="lenient"), InventoryCode.BAD_INVENTORY),
        (lambda d: d.update(entries=[file("b"), file("a")]), InventoryCode.BAD_INVENTORY),
        (lambda d: d.update(entries=[file("a"), file("a")]), InventoryCode.BAD_INVENTORY),
        (lambda d: d.update(entries=[file("d/a")]), InventoryCode.BAD_INVENTORY),
        (lambda d: d.update(entries=[file("d"), file("d/a")]), InventoryCode.BAD_INVENTORY),
        (lambda d: d.update(entries=[file("a", mode=0o4755)]), InventoryCode.SPECIAL_MODE),
        (lambda d: d.update(entries=[dir_("a", mode=0o1777)]), InventoryCode.SPECIAL_MODE),
        (lambda d: d.update(entries=[file("a", mode=True)]), InventoryCode.BAD_INVENTORY),
        (lambda d: d.update(entries=[file("a", size=-1)]), InventoryCode.BAD_INVENTORY),
        (lambda d: d.update(entries=[file("a", digest="AB" * 32)]), InventoryCode.BAD_INVENTORY),
        (lambda d: d.update(entries=[{**file("a"), "digest": {"sha256": DIGEST, "sha512": DIGEST}}]), InventoryCode.BAD_INVENTORY),
        (lambda d: d.update(entries=[{**dir_("a"), "size": 0}]), InventoryCode.BAD_INVENTORY),
        (lambda d: d.update(entries=[{**file("a"), "type": "symlink"}]), InventoryCode.BAD_INVENTORY),
        (lambda d: d.update(ignore=["a\nb"]), InventoryCode.BAD_IGNORE),
    ],
)
def test_malformed_inventories_rejected(mutate, code) -> None:  # type: ignore[no-untyped-def]
    d = doc([file("a")])
    mutate(d)
    with pytest.raises(InputError) as info:
        parse(d)
    assert info.value.code == code


def test_non_canonical_bytes_rejected() -> None:
    d = doc([file("a")])
    pretty = json.dumps(d, indent=1).encode()
    with pytest.raises(InputError) as info:
        Inventory.from_bytes(pretty)
    assert info.value.code == CommonCode.NOT_CANONICAL


def test_duplicate_key_inside_entry_rejected() -> None:
    raw = rfc8785.dumps(doc([file("a")])).replace(b'"mode":420', b'"mode":420,"mode":493')
    with pytest.raises(InputError) as info:
        Inventory.from_bytes(raw)
    assert info.value.code == CommonCode.DUPLICATE_KEY


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.text(st.characters(blacklist_categories=("Cc", "Cf", "Cs", "Co", "Cn"), blacklist_characters="/\\\\"), min_size=1, max_size=12),
            st.booleans(),
            st.integers(0, 0o777),
            st.integers(0, MAX_SAFE_INT),
        ),
        max_size=8,
        unique_by=lambda t: t[0],
    ),
    st.lists(st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\\n\\r\\x00"), max_size=10), max_size=3),
)
def test_direct_encoder_is_rfc8785(items: list[tuple[str, bool, int, int]], ignore: list[str]) -> None:
    entries = [
        Entry(name, EntryType.FILE, mode, size, DIGEST) if is_file else Entry(name, EntryType.DIR, mode)
        for name, is_file, mode, size in items
        if check_name(name) is None
    ]
    inv = Inventory.from_entries(entries, ignore)
    assert inv.canonical == rfc8785.dumps(inv.to_json())
