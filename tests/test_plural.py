"""Counts in messages take the noun's number: never "1 entries", "1 files" or "1 pins written"."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from attest._plural import count, plural

PACKAGE = Path(__file__).resolve().parents[1] / "attest"


@pytest.mark.parametrize(("n", "noun", "nouns", "said"), [
    (0, "entry", None, "0 entries"),
    (1, "entry", None, "1 entry"),
    (2, "entry", None, "2 entries"),
    (1, "file", None, "1 file"),
    (7, "file", None, "7 files"),
    (1, "byte", None, "1 byte"),
    (1024, "byte", None, "1024 bytes"),
    (1, "image", None, "1 image"),
    (0, "image", None, "0 images"),
    (1, "pin", None, "1 pin"),
    (19, "pin", None, "19 pins"),
    (1, "identity", None, "1 identity"),
    (2, "identity", None, "2 identities"),
    (2, "key", None, "2 keys"),  # a vowel before the y
    (2, "prefix", None, "2 prefixes"),
    (2, "patch", None, "2 patches"),
    (2, "child", "children", "2 children"),
    (1, "child", "children", "1 child"),
])
def test_a_count_takes_its_nouns_number(n: int, noun: str, nouns: str | None, said: str) -> None:
    assert count(n, noun, nouns) == said


@pytest.mark.parametrize(("noun", "nouns"), [("entry", "entries"), ("day", "days"), ("box", "boxes"), ("y", "ys")])
def test_the_regular_plural(noun: str, nouns: str) -> None:
    assert plural(noun) == nouns


# "{len(x)} entries": a count that can be 1 spelled with a fixed plural. Past a limit ("the limit is") it is never 1.
_FIXED = re.compile(r"\{len\([^{}]*\)\} (entries|files|images|pins|outputs|inputs|identities)\b")


def test_no_count_of_things_is_spelled_with_a_fixed_plural() -> None:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "_helptext.py":
            continue
        text = path.read_text()
        lines = text.encode().splitlines(keepends=True)
        for node in ast.walk(ast.parse(text, str(path))):
            if isinstance(node, ast.JoinedStr):
                source = _segment(lines, node)
                if "the limit is" in source:
                    continue
                found += [f"{path.relative_to(PACKAGE)}:{node.lineno}: {m.group(0)}" for m in _FIXED.finditer(source)]
    assert found == [], "use attest._plural.count:\n" + "\n".join(found)


def _segment(lines: list[bytes], node: ast.expr) -> str:
    """``ast.get_source_segment`` from lines split once (it splits the whole file again for every node it is asked)."""
    assert node.end_lineno is not None and node.end_col_offset is not None
    first, last = node.lineno - 1, node.end_lineno - 1
    if first == last:
        return lines[first][node.col_offset:node.end_col_offset].decode()
    return b"".join([lines[first][node.col_offset:], *lines[first + 1:last], lines[last][:node.end_col_offset]]).decode()
