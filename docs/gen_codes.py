"""Render the reason-code tables of docs/*.md from the code, so no table can drift from the codes.

The codes, their order and the enum that declares each come from the code (every
``attest.errors.ReasonCode`` enum of every layer); what each one means comes from
docs/reason-codes.toml, one entry per code, grouped into the tables the pages show. A table is
written between two markers in a page::

    <!-- codes:freeze -->
    | code | exit | cause |
    ...
    <!-- /codes -->

and this script rewrites everything between them. It refuses (and ``--check`` fails) when a
code has no entry, an entry names no code, a code is in two tables, a table has no marker or a
marker no table, or a page is not what it renders:

    python docs/gen_codes.py            # rewrite the tables in docs/*.md
    python docs/gen_codes.py --check    # exit 1 if one is stale (tests/cli/test_code_tables.py runs this)

``python docs/gen_cli.py`` runs it too.
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path
from typing import Any

DOCS = Path(__file__).parent
DATA = DOCS / "reason-codes.toml"
MARKER = re.compile(r"<!-- codes:([a-z0-9-]+) -->\n(.*?)<!-- /codes -->\n", re.S)
HEADINGS = {"code": "code", "exit": "exit", "step": "step", "verdict": "verdict", "cause": "cause", "missing": "what is missing",
            "what": "what"}


class StaleError(Exception):
    """The data, the code and the pages disagree; the message says how."""


def _codes() -> dict[str, tuple[type[Any], int]]:
    """Every reason code of every layer: its enum and its position in the enum."""
    import importlib
    import pkgutil

    import attest
    from attest.errors import all_reason_codes

    for mod in pkgutil.walk_packages(attest.__path__, "attest."):
        if not mod.name.endswith("__main__"):
            importlib.import_module(mod.name)
    out: dict[str, tuple[type[Any], int]] = {}
    for code, enum in all_reason_codes().items():
        out[code] = (enum, [m.value for m in enum].index(code))
    return out


def load() -> dict[str, dict[str, Any]]:
    """The tables of docs/reason-codes.toml, checked against the code: ``{id: {"columns", "rows"}}``."""
    data = tomllib.loads(DATA.read_text(encoding="utf-8"))
    codes = _codes()
    seen: dict[str, str] = {}
    problems: list[str] = []
    tables: dict[str, dict[str, Any]] = {}
    for table_id, table in data.items():
        columns = ["code", *table["columns"]]
        unknown = [c for c in columns if c not in HEADINGS]
        if unknown:
            problems.append(f"table {table_id}: unknown columns {unknown}")
        entries: dict[str, Any] = table["codes"]
        enums: list[type[Any]] = []
        for code, cells in entries.items():
            if code not in codes:
                problems.append(f"table {table_id}: {code} is not a reason code of any layer (removed or renamed?)")
                continue
            if code in seen:
                problems.append(f"{code} is in two tables: {seen[code]} and {table_id}")
            seen[code] = table_id
            cells = [cells] if isinstance(cells, str) else list(cells)
            if len(cells) != len(columns) - 1 or not all(isinstance(c, str) and c.strip() for c in cells):
                problems.append(f"table {table_id}: {code} needs {len(columns) - 1} non-empty cells ({', '.join(columns[1:])})")
            if codes[code][0] not in enums:
                enums.append(codes[code][0])
        # The code's order: enum by enum (as the table first names them), then declaration order.
        ordered = sorted((c for c in entries if c in codes), key=lambda c: (enums.index(codes[c][0]), codes[c][1]))
        tables[table_id] = {"columns": columns, "rows": [(c, entries[c]) for c in ordered]}
    for code, (enum, _) in sorted(codes.items()):
        if code not in seen:
            problems.append(f"{code} ({enum.__name__}) has no entry in docs/reason-codes.toml: describe it there")
    if problems:
        raise StaleError("\n".join(problems))
    return tables


def render_table(table: dict[str, Any]) -> str:
    columns = table["columns"]
    lines = ["| " + " | ".join(HEADINGS[c] for c in columns) + " |", "|" + "---|" * len(columns)]
    for code, cells in table["rows"]:
        cells = [cells] if isinstance(cells, str) else list(cells)
        lines.append("| " + " | ".join([f"`{code}`", *(" ".join(c.split()) for c in cells)]) + " |")
    return "\n".join(lines) + "\n"


def render_pages() -> dict[Path, str]:
    """Every page of docs/ with its tables rendered (pages without a marker are left out)."""
    tables = load()
    used: dict[str, Path] = {}
    out: dict[Path, str] = {}
    problems: list[str] = []
    for page in sorted(DOCS.glob("*.md")):
        text = page.read_text(encoding="utf-8")

        def fill(m: re.Match[str], page: Path = page) -> str:
            table_id = m.group(1)
            if table_id not in tables:
                problems.append(f"{page.name}: marker codes:{table_id} names no table of docs/reason-codes.toml")
                return m.group(0)
            if table_id in used:
                problems.append(f"codes:{table_id} is in both {used[table_id].name} and {page.name}")
            used[table_id] = page
            return f"<!-- codes:{table_id} -->\n{render_table(tables[table_id])}<!-- /codes -->\n"

        new = MARKER.sub(fill, text)
        if new != text or MARKER.search(text):
            out[page] = new
    problems += [f"table {t} has no <!-- codes:{t} --> marker in docs/*.md" for t in tables if t not in used]
    if problems:
        raise StaleError("\n".join(problems))
    return out


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    try:
        pages = render_pages()
    except StaleError as e:
        print(f"docs/reason-codes.toml and the code disagree:\n{e}", file=sys.stderr)
        return 1
    stale = [p for p, text in pages.items() if p.read_text(encoding="utf-8") != text]
    if "--check" in args:
        for p in stale:
            print(f"docs/{p.name}: a reason-code table is stale: run python docs/gen_codes.py", file=sys.stderr)
        return 1 if stale else 0
    for p in stale:
        p.write_text(pages[p], encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(DOCS.parent))
    sys.exit(main())
