"""`just --list` is what a newcomer reads first: every recipe's line is one whole sentence saying what it does.

just shows only the comment line directly above a recipe, so a multi-line comment that ends mid-sentence lists
as a fragment ("with the slowest durations."); explanations go above, separated by a blank line.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
JUST = Path(sys.executable).parent / "just"
# A sentence that starts with one of these continues an earlier line.
FRAGMENT_STARTS = {"with", "and", "or", "but", "then", "than", "of", "to", "in", "on", "for", "by", "as", "which",
                   "that", "where", "when", "while", "so", "because"}


def _described(line: str) -> str:
    """The problem with one recipe description, or "" when it is a whole sentence."""
    words = line.split()
    if not words:
        return "no description"
    if not line[0].isupper():
        return "does not start with a capital letter"
    if not line.endswith("."):
        return "does not end with a period"
    if words[0].lower() in FRAGMENT_STARTS:
        return f"starts like the tail of a sentence ({words[0]!r})"
    if "{{" in line:
        return "shows a just expression unexpanded"
    return ""


@pytest.mark.parametrize(("line", "problem"), [
    ("List the recipes.", ""),
    ("The static checks, then the whole test suite.", ""),
    ("with the slowest durations.", "does not start with a capital letter"),
    ("With the slowest durations.", "starts like the tail of a sentence ('With')"),
    ("Run the demo", "does not end with a period"),
    ("", "no description"),
    ("A store under {{state}}.", "shows a just expression unexpanded"),
])
def test_the_description_rule(line: str, problem: str) -> None:
    assert _described(line) == problem


def test_every_recipe_lists_a_whole_sentence() -> None:
    assert JUST.exists(), f"{JUST}: the venv has no just (python3 bootstrap.py --list makes it)"
    out = subprocess.run([str(JUST), "-f", str(ROOT / "Justfile"), "--list", "--unsorted"], cwd=ROOT,
                         capture_output=True, text=True, check=True, timeout=60).stdout
    names = subprocess.run([str(JUST), "-f", str(ROOT / "Justfile"), "--summary"], cwd=ROOT,
                           capture_output=True, text=True, check=True, timeout=60).stdout.split()
    listed: dict[str, str] = {}
    for line in out.splitlines()[1:]:  # "Available recipes:"
        recipe, _, doc = line.partition(" # ")
        listed[recipe.split()[0]] = doc.strip()
    assert sorted(listed) == sorted(names) and len(names) >= 7
    problems = {name: f"{_described(doc)}: {doc!r}" for name, doc in listed.items() if _described(doc)}
    assert problems == {}
