"""The one YAML reader: each construct that lets two readers disagree is refused with its own code."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from attest.errors import InputError
from attest.policy import load_strict_yaml

ROOT = Path(__file__).resolve().parents[2]

REFUSED = [
    # (id, document, code)
    ("duplicate key", b"a: 1\na: 2\n", "YAML_DUPLICATE_KEY"),
    ("duplicate key, nested flow", b"a: {b: 1, b: 1}\n", "YAML_DUPLICATE_KEY"),
    ("duplicate key, quoted spelling", b"a: 1\n'a': 1\n", "YAML_DUPLICATE_KEY"),
    ("anchor", b"a: &x 1\n", "YAML_ANCHOR"),
    ("anchor on a mapping", b"a: &x {b: 1}\n", "YAML_ANCHOR"),
    ("alias", b"a: *x\n", "YAML_ALIAS"),
    ("merge key with alias", b"base: &b {x: 1}\nc:\n  <<: *b\n", "YAML_ANCHOR"),
    ("standard tag", b"a: !!str 1\n", "YAML_TAG"),
    ("local tag", b"a: !foo x\n", "YAML_TAG"),
    ("non-specific tag", b"a: ! x\n", "YAML_TAG"),
    ("tag on a sequence", b"a: !!set [x]\n", "YAML_TAG"),
    ("python tag", b"a: !!python/object:os.system x\n", "YAML_TAG"),
    ("%YAML directive", b"%YAML 1.1\n---\na: 1\n", "YAML_DIRECTIVE"),
    ("%TAG directive", b"%TAG !e! tag:example.com,2000:\n---\na: 1\n", "YAML_DIRECTIVE"),
    ("a reserved directive ruamel ignores and libyaml refuses", b"%FOO bar\n---\na: 1\n", "YAML_DIRECTIVE"),
    ("a BOM after a document marker, read into the key by one reader", b"---\n\xef\xbb\xbfa: 1\n", "YAML_SYNTAX"),
    ("a BOM starting a later key", b"a: 1\n\xef\xbb\xbfb: 2\n", "YAML_SYNTAX"),
    ("two documents", b"a: 1\n---\nb: 2\n", "YAML_MULTIPLE_DOCUMENTS"),
    ("two documents after an explicit end", b"a: 1\n...\n---\na: 2\n", "YAML_MULTIPLE_DOCUMENTS"),
    ("integer key", b"1: a\n", "YAML_NON_STRING_KEY"),
    ("boolean key", b"true: a\n", "YAML_NON_STRING_KEY"),
    ("YAML 1.1 boolean key", b"on: a\n", "YAML_NON_STRING_KEY"),
    ("null key", b"~: a\n", "YAML_NON_STRING_KEY"),
    ("empty key", b": a\n", "YAML_NON_STRING_KEY"),
    ("merge key", b"<<: {a: 1}\n", "YAML_NON_STRING_KEY"),
    ("collection key", b"? [a]\n: b\n", "YAML_NON_STRING_KEY"),
    ("mapping key", b"? {a: 1}\n: b\n", "YAML_NON_STRING_KEY"),
    ("YAML 1.1 boolean", b"a: yes\n", "YAML_AMBIGUOUS_SCALAR"),
    ("capitalized boolean", b"a: True\n", "YAML_AMBIGUOUS_SCALAR"),
    ("one-letter YAML 1.1 boolean", b"a: y\n", "YAML_AMBIGUOUS_SCALAR"),
    ("null", b"a: null\n", "YAML_AMBIGUOUS_SCALAR"),
    ("tilde", b"a: ~\n", "YAML_AMBIGUOUS_SCALAR"),
    ("empty value", b"a:\n", "YAML_AMBIGUOUS_SCALAR"),
    ("float", b"a: 1.0\n", "YAML_AMBIGUOUS_SCALAR"),
    ("exponent that looks like a sha", b"a: 123e4567\n", "YAML_AMBIGUOUS_SCALAR"),
    ("octal in 1.1, decimal in 1.2", b"a: 017\n", "YAML_AMBIGUOUS_SCALAR"),
    ("octal in 1.2, string in 1.1", b"a: 0o17\n", "YAML_AMBIGUOUS_SCALAR"),
    ("sexagesimal", b"a: 12:30\n", "YAML_AMBIGUOUS_SCALAR"),
    ("hex", b"a: 0x1f\n", "YAML_AMBIGUOUS_SCALAR"),
    ("date", b"a: 2001-12-14\n", "YAML_AMBIGUOUS_SCALAR"),
    ("infinity", b"a: .inf\n", "YAML_AMBIGUOUS_SCALAR"),
    ("integer beyond 2^53", b"a: 9007199254740993\n", "YAML_AMBIGUOUS_SCALAR"),
    ("syntax error", b"a: [1, 2\n", "YAML_SYNTAX"),
    ("tab indentation", b"a:\n\tb: 1\n", "YAML_SYNTAX"),
    ("not UTF-8", b"a: \xff\n", "YAML_SYNTAX"),
    ("byte-order mark", b"\xef\xbb\xbfa: 1\n", "YAML_SYNTAX"),
    ("non-printable character", b"a: b\x07\n", "YAML_SYNTAX"),
    ("no document", b"", "YAML_SYNTAX"),
    ("only a comment", b"# nothing\n", "YAML_SYNTAX"),
    ("too deep", b"a: " + b"[" * 40 + b"]" * 40 + b"\n", "TOO_DEEP"),
    ("too large", b"a: '" + b"x" * (300 * 1024) + b"'\n", "TOO_LARGE"),
    ("too many nodes", b"a: [" + b"1, " * 30000 + b"1]\n", "TOO_LARGE"),
]


@pytest.mark.parametrize(("doc", "code"), [(d, c) for _, d, c in REFUSED], ids=[i for i, _, _ in REFUSED])
def test_every_refusal_has_its_own_code(doc: bytes, code: str) -> None:
    with pytest.raises(InputError) as e:
        load_strict_yaml(doc, what="test.yml")
    assert e.value.code == code, e.value
    assert e.value.exit_code == 2


ACCEPTED = [
    (b"schema: 2\n", {"schema": 2}),
    (b"a: true\nb: false\n", {"a": True, "b": False}),
    (b"a: -3\n", {"a": -3}),
    (b"a: 'yes'\nb: \"1.0\"\nc: '~'\n", {"a": "yes", "b": "1.0", "c": "~"}),
    (b"'1': x\n\"true\": v\n", {"1": "x", "true": "v"}),
    (b"r: https://github.com/attest-dev/attest\n", {"r": "https://github.com/attest-dev/attest"}),
    (b"rev: 452d81d4f6e6c25c9a162dd43d0dd4f81d5b583f\n", {"rev": "452d81d4f6e6c25c9a162dd43d0dd4f81d5b583f"}),
    (b"o:\n  - {path: a/b.md, enabled: true}\n  - [x, 'y']\n", {"o": [{"path": "a/b.md", "enabled": True}, ["x", "y"]]}),
    (b"---\na: |\n  line 1\n  line 2\n...\n", {"a": "line 1\nline 2\n"}),
    (b"# comment\na: b # trailing comment\n", {"a": "b"}),
    (b"[a, b]\n", ["a", "b"]),
]


@pytest.mark.parametrize(("doc", "value"), ACCEPTED)
def test_the_accepted_subset_reads_as_every_yaml_reader_reads_it(doc: bytes, value: object) -> None:
    assert load_strict_yaml(doc, what="test.yml") == value


def test_order_of_keys_is_kept() -> None:
    assert list(load_strict_yaml(b"z: 1\na: 2\nm: 3\n", what="t")) == ["z", "a", "m"]


def test_a_million_deep_document_is_a_clean_refusal() -> None:
    with pytest.raises(InputError) as e:
        load_strict_yaml(b"[" * 200_000, what="t", max_bytes=1 << 20)
    assert e.value.code in ("TOO_DEEP", "YAML_SYNTAX")


def test_bytes_only() -> None:
    with pytest.raises(TypeError):
        load_strict_yaml("a: 1", what="t")  # type: ignore[arg-type]


def test_only_one_module_of_the_package_reads_yaml() -> None:
    """Two parsers must never read the same bytes differently: ruamel is imported in one place only."""
    readers = sorted(
        str(p.relative_to(ROOT))
        for p in (ROOT / "attest").rglob("*.py")
        if re.search(r"^\s*(from|import)\s+(ruamel|yaml)\b", p.read_text(), re.MULTILINE)
    )
    assert readers == ["attest/policy/_yaml.py"]


@pytest.mark.parametrize(("doc", "says"), [(b"enabled: yes\n", "write true or false for a yes/no value"),
                                           (b"enabled: off\n", "write true or false for a yes/no value"),
                                           (b"name: ~\n", "quote it if a string is meant")])
def test_an_ambiguous_scalar_says_what_to_write(doc: bytes, says: str) -> None:
    with pytest.raises(InputError) as ei:
        load_strict_yaml(doc, what="test.yml")
    assert ei.value.findings[0].code == "YAML_AMBIGUOUS_SCALAR" and says in ei.value.findings[0].detail
