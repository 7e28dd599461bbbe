"""Typed differences between an expected inventory and a tree (or another inventory).

``check_*``/``diff_*`` return findings; ``verify_*`` raises. Every differing path is
reported, each with a stable code, sorted by path.

    >>> findings = check_tree("tree", Inventory.from_bytes(open("inv.json", "rb").read()))
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from collections.abc import Set as AbstractSet

from .._plural import count
from ..errors import CommonCode, EnvironmentFailure, Finding, VerificationError
from ._codes import InventoryCode
from ._gc import GcPaused
from ._model import Entry, EntryType, Inventory
from ._names import sort_key
from ._types import DEFAULT_LIMITS, Limits, ScanResult
from ._walk import Progress, scan_against


def _describe(e: Entry) -> str:
    if e.type is EntryType.DIR:
        return f"directory, mode {e.mode:04o}"
    return f"file, mode {e.mode:04o}, {count(e.size or 0, 'byte')}"


def diff_entries(expected: Inventory, actual: list[Entry], suppressed: AbstractSet[str] = frozenset()) -> list[Finding]:
    """Findings for every path whose presence, type, mode or content differs."""
    return _diff(expected.by_path(), actual, suppressed)


def _diff(want: Mapping[str, Entry], actual: list[Entry], suppressed: AbstractSet[str]) -> list[Finding]:
    have = {e.path: e for e in actual}
    if len(have) != len(actual):
        # Never from a walk or an inventory: a later entry of a path would replace an earlier,
        # differing one (a second walking process's answer repeating a path the first walked).
        raise EnvironmentFailure(CommonCode.INTERNAL, "the observed entries list a path twice")
    out: list[Finding] = []
    for path, e in want.items():
        got = have.get(path)
        if got is None:
            if path not in suppressed:
                out.append(Finding(InventoryCode.MISSING, path, f"expected {_describe(e)}; it is absent"))
            continue
        if got.type is not e.type:
            out.append(Finding(InventoryCode.TYPE_CHANGED, path, f"expected a {e.type.value}, found a {got.type.value}"))
            continue
        if got.mode != e.mode:
            out.append(Finding(InventoryCode.MODE_CHANGED, path, f"expected mode {e.mode:04o}, found {got.mode:04o}"))
        if e.type is EntryType.FILE and (got.sha256 != e.sha256 or got.size != e.size):
            detail = f"expected sha256 {e.sha256} ({count(e.size or 0, 'byte')}), found {got.sha256} ({count(got.size or 0, 'byte')})"
            out.append(Finding(InventoryCode.DIGEST_MISMATCH, path, detail))
    for path, got in have.items():
        if path not in want:
            out.append(Finding(InventoryCode.EXTRA, path, f"unexpected {_describe(got)}"))
    return out


def diff_inventories(expected: Inventory, actual: Inventory) -> list[Finding]:
    """Every difference between two inventories, sorted by path (``MISSING``, ``EXTRA``, ...).

    Raises:
        Nothing: differences are returned as findings.
    """
    findings = diff_entries(expected, list(actual.entries))
    return sorted(findings, key=_order)


def _order(f: Finding) -> tuple[tuple[bytes, ...], str]:
    return (sort_key(f.path) if f.path else (), f.code)


def _differences(expected: Inventory, scan: ScanResult) -> list[Finding]:
    """Every finding of a walk against ``expected`` (:func:`scan_against`), and every difference, sorted by path."""
    # A path the walk already refused (a symlink where a file was expected, ...) is reported
    # under its own code, not a second time as MISSING.
    suppressed = {f.path for f in scan.findings if f.path is not None}
    matched = set(scan.matched)
    if len(matched) == len(expected.entries) and not scan.entries and not scan.findings:
        return []  # every expected path matched (scan_against records only expected paths, each once)
    want = {e.path: e for e in expected.entries if e.path not in matched}
    return sorted([*scan.findings, *_diff(want, scan.entries, suppressed)], key=_order)


def check_tree(
    root: str | os.PathLike[str],
    expected: Inventory,
    *,
    limits: Limits = DEFAULT_LIMITS,
    progress: Progress | None = None,
) -> list[Finding]:
    """Every difference between the tree at ``root`` and ``expected``, walk findings included.

    The walk applies exactly the ignore patterns recorded in ``expected``.

    Raises:
        InputError: ``BAD_ROOT`` (the root is missing or not a directory), ``BAD_IGNORE``.
        VerificationError: ``ROOT_SYMLINK`` (the root is or passes through a symlink, or is
            under ``/proc``). Everything below the root is a returned finding.
        EnvironmentFailure: ``INTERNAL`` when the second walking process fails.
    """
    with GcPaused():
        return _differences(expected, scan_against(root, expected, limits=limits, progress=progress))


def verify_tree(
    root: str | os.PathLike[str],
    expected: Inventory,
    *,
    limits: Limits = DEFAULT_LIMITS,
    progress: Progress | None = None,
    exact: bool = False,
) -> Inventory:
    """Raise :class:`VerificationError` unless ``root`` matches ``expected`` exactly.

    Returns the inventory that was observed, whose identity then equals ``expected``'s.
    With ``exact`` no ignore pattern of ``expected`` is applied: a frozen image, copied from
    the listed entries only, must hold exactly those (an ignored path there is ``EXTRA``).

    Raises:
        InputError: ``BAD_ROOT``, ``BAD_IGNORE``.
        VerificationError: with every finding: the differences (``MISSING``, ``EXTRA``,
            ``TYPE_CHANGED``, ``MODE_CHANGED``, ``DIGEST_MISMATCH``), the walk's refusals
            (``SYMLINK``, ``HARDLINK``, ``SPECIAL_FILE``, ``BAD_NAME``, ...), and
            ``ROOT_SYMLINK`` for the root itself.
        EnvironmentFailure: ``INTERNAL`` when the second walking process fails.
    """
    with GcPaused():
        scan = scan_against(root, expected, exact=exact, limits=limits, progress=progress)
        findings = _differences(expected, scan)
        if findings:
            raise VerificationError(findings=findings)
        # Unreachable when _differences is complete; kept so success needs both to agree: the
        # observed entries (matched by path, or walked in full) are exactly the expected ones.
        if not _same_entries(expected, scan):
            raise VerificationError(InventoryCode.DIGEST_MISMATCH, "the tree's inventory differs from the expected one")
    return expected if not exact or not expected.ignore else Inventory(expected.entries)


def _same_entries(expected: Inventory, scan: ScanResult) -> bool:
    """Whether the walk's matched paths and its other entries are, together, exactly ``expected``'s entries."""
    matched = set(scan.matched)
    if len(matched) != len(scan.matched) or len(matched) + len(scan.entries) != len(expected.entries):
        return False
    by_path = expected.by_path()
    return matched <= by_path.keys() and all(e.path not in matched and by_path.get(e.path) == e for e in scan.entries)
