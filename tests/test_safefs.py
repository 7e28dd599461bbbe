"""attest._safefs is the one home of the safe-open rules: its classifier, and no other module's own flags."""

from __future__ import annotations

import ast
import os
import stat
from pathlib import Path

import pytest

from attest._safefs import Kind, classify

PACKAGE = Path(__file__).resolve().parent.parent / "attest"


def _st(mode: int, nlink: int = 1) -> os.stat_result:
    return os.stat_result((mode, 1, 1, nlink, 0, 0, 0, 0, 0, 0))


@pytest.mark.parametrize(
    ("mode", "nlink", "kind"),
    [
        (stat.S_IFREG | 0o644, 1, Kind.FILE),
        (stat.S_IFREG | 0o755, 1, Kind.FILE),
        (stat.S_IFREG | 0o644, 2, Kind.HARDLINK),
        (stat.S_IFREG | 0o4755, 1, Kind.SPECIAL_MODE),
        (stat.S_IFREG | 0o2755, 2, Kind.SPECIAL_MODE),
        (stat.S_IFDIR | 0o755, 7, Kind.DIR),
        (stat.S_IFDIR | 0o1777, 2, Kind.SPECIAL_MODE),
        (stat.S_IFLNK | 0o777, 1, Kind.SYMLINK),
        (stat.S_IFIFO | 0o644, 1, Kind.SPECIAL),
        (stat.S_IFSOCK | 0o755, 1, Kind.SPECIAL),
        (stat.S_IFCHR | 0o666, 1, Kind.SPECIAL),
        (stat.S_IFBLK | 0o660, 1, Kind.SPECIAL),
    ],
)
def test_classify(mode: int, nlink: int, kind: Kind) -> None:
    assert classify(_st(mode, nlink)) is kind


def test_no_other_module_spells_its_own_nofollow_flags() -> None:
    """A second copy of the open flags drifts from the first; an attacker needs only the weaker one."""
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "_safefs.py" and path.parent == PACKAGE:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Attribute) and node.attr == "O_NOFOLLOW":
                offenders.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}")
    assert offenders == [], f"use the flags of attest._safefs instead: {offenders}"
