"""The documentation stays true: every reason code is documented, the README's commands exist."""

from __future__ import annotations

import re
from pathlib import Path

from attest.errors import all_reason_codes
from tests.test_reason_codes import _load_everything

ROOT = Path(__file__).parents[1]


def test_every_reason_code_is_documented() -> None:
    _load_everything()
    docs = "\n".join(p.read_text() for p in (ROOT / "docs").glob("*.md"))
    missing = sorted(code for code in all_reason_codes() if f"`{code}`" not in docs)
    assert missing == [], f"reason codes missing from docs/: {missing}"


def test_ci_runs_the_readme_test_command() -> None:
    ci = (ROOT / ".ci" / "run").read_text().strip().splitlines()
    command = ci[-1].strip()
    readme = (ROOT / "README.md").read_text()
    assert command in readme
    assert re.search(r"python3 bootstrap\.py demo", readme)


def test_test_module_basenames_are_unique() -> None:
    """tests/ has no __init__.py files: two test modules with one basename abort collection."""
    names = [p.name for p in (ROOT / "tests").rglob("*.py") if p.name != "__init__.py" and p.name != "conftest.py"]
    assert sorted(n for n in set(names) if names.count(n) > 1) == []


def test_cli_reference_is_current() -> None:
    import subprocess
    import sys

    out = subprocess.run([sys.executable, str(ROOT / "docs" / "gen_cli.py"), "--check"], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr


def test_the_docs_cite_no_issue_numbers() -> None:
    """Users have README.md and docs/, not the tracker: no "issue 12", "#431" or "github/docs#22501"."""
    pattern = re.compile(r"(?i)\bissues? #?\d+\b|(?<![\w])#\d+\b|\b[\w.-]+/[\w.-]+#\d+\b")
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    found = [f"{p.name}:{n}: {line.strip()}" for p in pages for n, line in enumerate(p.read_text().splitlines(), 1)
             if pattern.search(line)]
    assert found == []
