"""The provider-neutral review result (docs/review.md "attest review exec"), parsed strictly.

    {"complete": bool, "limitations": [str],
     "findings": [{"id", "severity", "blocking": bool, "message", "path"?, "line"?, "side"?}]}

A reviewer writes it; nothing downstream reads a field this parser did not check.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..._json import loads_strict
from ..._shape import Shape
from ...errors import AttestError, VerificationError
from ...inventory import check_path
from ._codes import HandoffCode

MAX_RESULT_BYTES = 4 << 20
MAX_FINDINGS = 10_000
SEVERITIES = ("info", "low", "medium", "high", "critical")
SIDES = ("LEFT", "RIGHT")
_REQUIRED = {"id", "severity", "blocking", "message"}
_OPTIONAL = {"path", "line", "side"}


@dataclass(frozen=True, slots=True)
class ResultFinding:
    """One finding of the provider-neutral review result (see :func:`parse_result`).

    Raises:
        Nothing: made by :func:`parse_result`, which validates every field.
    """

    id: str
    severity: str
    blocking: bool
    message: str
    path: str | None = None
    line: int | None = None
    side: str | None = None

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {"id": self.id, "severity": self.severity, "blocking": self.blocking, "message": self.message}
        for key in ("path", "line", "side"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        return out


@dataclass(frozen=True, slots=True)
class ReviewResult:
    """The provider-neutral review result: whether it is complete, its limitations and findings.

    Raises:
        Nothing: made by :func:`parse_result`, which validates every field.
    """

    complete: bool
    limitations: tuple[str, ...]
    findings: tuple[ResultFinding, ...]

    def to_json(self) -> dict[str, object]:
        return {"complete": self.complete, "limitations": list(self.limitations), "findings": [f.to_json() for f in self.findings]}


def _bad(detail: str) -> VerificationError:
    return VerificationError(HandoffCode.REVIEW_RESULT_INVALID, detail)


def _finding(f: Shape) -> ResultFinding:
    """One finding: its required fields, and each optional one either left out or of a value (never null)."""
    f.object(allowed=_REQUIRED | _OPTIONAL, required=_REQUIRED)
    for key in sorted(_OPTIONAL):
        f.check(f.get(key) is not None or not f.has(key), "left out or of a value, never null", key)
    path: str | None = None
    line: int | None = None
    side: str | None = None
    if f.has("path"):
        path = f.string("path", expected="a repository-relative path")
        problem = check_path(path)
        if problem is not None:  # the inventory's name rules: no '..', '.', empty component, control character ...
            f.fail(f"a repository-relative path ({problem[1]})", "path")
    if f.has("line"):
        f.check(path is not None, "only with a path", "line")
        line = f.positive_int("line")
    if f.has("side"):
        f.check(line is not None, "only with a line", "side")
        side = f.one_of("side", SIDES)
    return ResultFinding(f.string("id"), f.one_of("severity", SEVERITIES), f.boolean("blocking"), f.string("message"),
                         path, line, side)


_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _control_character(value: object, where: str = "result") -> str | None:
    """Where a string of ``value`` holds a C0/C1 control character other than tab and newline, or None (pure)."""
    if isinstance(value, str):
        return where if _CONTROL.search(value) else None
    if isinstance(value, dict):
        return next((w for k, v in value.items() for w in (_control_character(k, where), _control_character(v, f"{where}.{k}"))
                     if w is not None), None)
    if isinstance(value, list):
        return next((w for i, v in enumerate(value) if (w := _control_character(v, f"{where}[{i}]")) is not None), None)
    return None


def parse_result(data: bytes) -> ReviewResult:
    """Parse a reviewer's output strictly (one JSON object, no duplicate keys, no extra fields).

    Raises:
        VerificationError: ``REVIEW_RESULT_INVALID`` for output that is not strict JSON (too
            large, a duplicate key, too deep, ...) or not exactly the result's shape.
    """

    try:
        doc = loads_strict(data, what="the review result", max_bytes=MAX_RESULT_BYTES, max_depth=6)
    except AttestError as e:
        raise _bad(f"the reviewer's output is not one strict JSON object: {e.findings[0].detail}") from e
    result = Shape(doc, "result", _bad).object(("complete", "limitations", "findings"))
    where = _control_character(doc)
    if where is not None:
        raise _bad(f"{where} holds a control character (only tab and newline are text): the reviewer's words reach a "
                   "terminal and the review body as they are")
    complete = result.boolean("complete")
    limits = result.strings("limitations")
    findings = result.list_of("findings", maximum=MAX_FINDINGS)
    result.check(not (complete and limits), "empty: a complete review has no limitations", "limitations")
    return ReviewResult(complete, limits, tuple(_finding(f) for f in findings))


__all__ = ["MAX_RESULT_BYTES", "SEVERITIES", "SIDES", "ResultFinding", "ReviewResult", "parse_result"]
