"""What the shipped files cite exists: no document outside the repository, every docs/ page and section named.

Users of attest have its docs/ pages and README.md, nothing else: a comment, a docstring, a help
text or a page that points at a design note, a threat list, a style guide or an ADR points at
nothing. Every citation names a page that exists (docs/<name>.md, README.md), and a quoted section
after it (``docs/bootstrap.md "The identity file"``) names a heading of that page, exactly (case
included; #'s and backticks aside). Pure file reading.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: What is shipped: the package, the docs, the README, the recipes users run, the examples and
#: the bootstrap Skill. tests/ is not shipped and keeps its own references.
SCANNED = ("attest", "docs", "README.md", "Justfile", "bootstrap.py", "examples", "skills")
TEXT_SUFFIXES = {".py", ".md", ".toml", ".sh"}

#: Documents that are not in the repository, and ADR numbers (ADR-0008, ADR-2026-07-23) or the
#: bare word ("the ADR"). Bare ``THREATS A`` style references too.
FORBIDDEN = re.compile(r"\b(?:DESIGN|BOOTSTRAP|THREATS|STYLE)\.md\b|\bTHREATS\b|\bADRs?\b")

#: ``docs/<name>.md``, an optional ``#anchor``, then optional quoted sections (after a comma or
#: not): ``"A"``, or ``"A", "B"`` / ``"A" and "B"``. A quoted name may continue on the next line
#: (wrapped text; a comment's ``#`` there is not part of it); a quote may be backslash-escaped (a
#: Python string, or two literals Python joins: ``"... docs/x.md, "`` then ``"\\"A\\" ..."`` on the
#: next line). In a docs/ page, a relative link ``[text](<name>.md)`` names ``docs/<name>.md``.
#: ``README.md "Section"`` is checked the same way.
_JOIN = r'"[ \t]*\n[ \t]*"'  # the end of one string literal and the start of the next
_WRAP = r"\n[ \t]*(?:#[ \t]*)?"  # a line break of wrapped text (in a comment: and its #)
_QUOTED = rf'\\?"((?:[^"\\\s]|\\[^n\s])(?:{_JOIN}|[^"\\\n]|\\[^\n]|{_WRAP}){{0,200}}?)\\?"(?![ \t]*\n[ \t]*")'
_SEP = rf"(?:[ \t]+|[ \t]*{_WRAP}|[ \t]*{_JOIN})"
_SECTIONS = rf"(?P<sections>,?{_SEP}{_QUOTED}(?:(?:[ \t]*,|[ \t]+and){_SEP}{_QUOTED})*)?"
REFERENCE = re.compile(r"(?<![\w./-])(?P<path>docs/[\w.-]+(?:/[\w.-]+)*\.md|README\.md)(?:#(?P<anchor>[\w-]+))?" + _SECTIONS)
RELATIVE_LINK = re.compile(r"\]\((?P<path>[\w.-]+\.md)(?:#(?P<anchor>[\w-]+))?\)" + _SECTIONS)
#: One quoted section of a matched ``sections`` group, with what precedes it.
SECTION = re.compile(rf"(?:,?|[ \t]*,|[ \t]+and){_SEP}{_QUOTED}")


def _is_text(path: Path) -> bool:
    if path.suffix in TEXT_SUFFIXES:
        return True
    if path.suffix:
        return False
    head = path.read_bytes()[:4096]  # a script without an extension (Justfile, bin/review)
    return b"\0" not in head


def shipped_files() -> Iterator[Path]:
    for name in SCANNED:
        top = ROOT / name
        if top.is_file():
            yield top
            continue
        for path in sorted(top.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and _is_text(path):
                yield path


FILES = [p.relative_to(ROOT).as_posix() for p in shipped_files()]


def _read(rel: str) -> str:
    return (ROOT / rel).read_text(encoding="utf-8")


def _section_name(raw: str) -> str:
    """A quoted name as written: wrapping and comment markers folded, escapes undone, no backticks."""
    name = re.sub(_JOIN, "", raw)
    name = re.sub(r"[ \t]*\n[ \t]*(?:#[ \t]*)?", " ", name)
    name = re.sub(r"\\n[ \t]*", " ", name)  # a line break inside a string literal (generated help texts)
    name = re.sub(r"\\(.)", r"\1", name)
    return name.replace("`", "").strip()


def _sections(group: str) -> list[str]:
    names: list[str] = []
    pos = 0
    while (m := SECTION.match(group, pos)) is not None:
        names.append(_section_name(m.group(1)))
        pos = m.end()
    return names


def _heading_text(line: str) -> str:
    return line.lstrip("#").replace("`", "").strip()


def _slug(text: str) -> str:
    """GitHub's anchor for a heading: lowercase, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")


@cache
def headings(rel: str) -> frozenset[str]:
    """Every heading of a Markdown page, outside fenced code blocks, without #'s and backticks."""
    out: set[str] = set()
    fence: str | None = None
    for line in _read(rel).splitlines():
        stripped = line.lstrip()
        marker = re.match(r"(`{3,}|~{3,})", stripped)
        if marker:
            if fence is None:
                fence = marker.group(1)
            elif stripped.startswith(fence) and not stripped[len(fence):].strip():
                fence = None
            continue
        if fence is None and re.match(r"#{1,6}[ \t]", line):
            out.add(_heading_text(line))
    return frozenset(out)


def references(text: str, *, in_docs: bool = False) -> Iterator[tuple[int, str, str | None, list[str]]]:
    """``(line, path, anchor, [section, ...])`` for every docs/ page named in ``text`` (a docs/ page's if ``in_docs``)."""
    found = [(m, m.group("path")) for m in REFERENCE.finditer(text)]
    if in_docs:
        found += [(m, "docs/" + m.group("path")) for m in RELATIVE_LINK.finditer(text)]
    for m, path in sorted(found, key=lambda f: f[0].start()):
        line = text.count("\n", 0, m.start()) + 1
        yield line, path, m.group("anchor"), _sections(m.group("sections") or "")


def test_the_files_are_found() -> None:
    assert "README.md" in FILES and "attest/__init__.py" in FILES and "docs/bootstrap.md" in FILES
    assert "examples/reviewer/bin/review" in FILES and "Justfile" in FILES and "skills/agent-policy/SKILL.md" in FILES
    assert "attest/cli/_helptext.py" in FILES and "docs/cli.md" in FILES  # generated, shipped: checked too


@pytest.mark.parametrize("rel", FILES)
def test_no_document_outside_the_repository_is_cited(rel: str) -> None:
    found = [f"{rel}:{n}: {line.strip()}" for n, line in enumerate(_read(rel).splitlines(), 1) if FORBIDDEN.search(line)]
    assert found == [], "cite docs/<page>.md \"Section\" (or state the rule) instead of:\n" + "\n".join(found)


@pytest.mark.parametrize("rel", FILES)
def test_every_docs_page_and_section_named_exists(rel: str) -> None:
    problems: list[str] = []
    for line, path, anchor, sections in references(_read(rel), in_docs=rel.startswith("docs/")):
        where = f"{rel}:{line}: {path}"
        if not (ROOT / path).is_file():
            problems.append(f"{where}: no such file")
            continue
        known = headings(path)
        if anchor is not None and anchor not in {_slug(h) for h in known}:
            problems.append(f"{where}#{anchor}: no heading has this anchor")
        problems.extend(f'{where} "{s}": no such heading (headings: {sorted(known)})' for s in sections if s not in known)
    assert problems == [], "\n".join(problems)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('see docs/bootstrap.md "The identity file".', [("docs/bootstrap.md", None, ["The identity file"])]),
        ('docs/review.md "Step 2: identity", "Step 4: config"', [("docs/review.md", None, ["Step 2: identity", "Step 4: config"])]),
        ('docs/evidence.md "attest evidence trusted-producer" and "attest evidence wrap"',
         [("docs/evidence.md", None, ["attest evidence trusted-producer", "attest evidence wrap"])]),
        ('(docs/review.md \\"The reviewer\'s inputs\\")', [("docs/review.md", None, ["The reviewer's inputs"])]),
        ("(docs/review.md \"The reviewer\\'s inputs\")", [("docs/review.md", None, ["The reviewer's inputs"])]),
        ('docs/freeze.md "What `freeze` does,\n    step by step"', [("docs/freeze.md", None, ["What freeze does, step by step"])]),
        ('# as docs/build.md\n# "The build" says', [("docs/build.md", None, ["The build"])]),
        ("docs/json.md#exit-codes", [("docs/json.md", "exit-codes", [])]),
        ('"path": "docs/review/policy-context.md", "file"', [("docs/review/policy-context.md", None, [])]),
        ('see docs/build.md, "Promotion".', [("docs/build.md", None, ["Promotion"])]),
        ('help="Its format: docs/bootstrap.md, "\n        "\\"The identity file\\"; exactly one."',
         [("docs/bootstrap.md", None, ["The identity file"])]),
        ('help="(docs/bootstrap.md \\"The identity "\n        "file\\")."', [("docs/bootstrap.md", None, ["The identity file"])]),
        ("'(its format: docs/bootstrap.md, \"The identity\\n        file\"; exactly'",
         [("docs/bootstrap.md", None, ["The identity file"])]),
        ('See README.md "Layout" and docs/.', [("README.md", None, ["Layout"])]),
        ("a/docs/x.md and https://example.com/docs/y.md", []),
    ],
)
def test_references_are_parsed(text: str, expected: list[tuple[str, str | None, list[str]]]) -> None:
    assert [(p, a, s) for _, p, a, s in references(text)] == expected


def test_relative_links_of_a_docs_page_are_references() -> None:
    text = 'See [build.md](build.md), "The promotion log", [json.md](json.md#exit-codes) and [Formats](#formats).'
    assert [(p, a, s) for _, p, a, s in references(text, in_docs=True)] == [
        ("docs/build.md", None, ["The promotion log"]), ("docs/json.md", "exit-codes", [])]
    assert list(references(text)) == []


def test_headings_ignore_code_blocks_and_backticks() -> None:
    found = headings("docs/freeze.md")
    assert "What freeze does, step by step" in found and "exec: running from frozen images only" in found
    assert not any(h.startswith("frozen sha256") for h in found)  # a shell comment inside a fence
    assert _slug("Exit codes") == "exit-codes" and _slug("`attest review start`") == "attest-review-start"


def test_the_forbidden_names_are_recognized() -> None:
    for bad in ("see DESIGN.md", "BOOTSTRAP.md step 3", "THREATS.md G", "(THREATS G)", "STYLE.md", "ADR-0008",
                "ADR-2026-07-23", "the ADR's order", "ADR: only"):
        assert FORBIDDEN.search(bad), bad
    for fine in ("BOOTSTRAP_IO", "ATTEST_IMAGE_BOOTSTRAP", "BOOTSTRAPPED", "docs/bootstrap.md", "threat model", "ADDR"):
        assert not FORBIDDEN.search(fine), fine
