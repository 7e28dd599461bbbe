"""The provider-neutral review result (docs/review.md "attest review exec"), parsed strictly.

    {"complete": bool, "limitations": [str],
     "findings": [{"id", "severity", "blocking": bool, "message", "path"?, "line"?, "side"?}]}

A reviewer writes it; nothing downstream reads a field this parser did not check.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..._json import loads_strict
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


def _finding(i: int, doc: object) -> ResultFinding:
    where = f"findings[{i}]"
    if not isinstance(doc, dict) or not _REQUIRED <= set(doc) or set(doc) - _REQUIRED - _OPTIONAL:
        raise _bad(f"{where} must have {sorted(_REQUIRED)} and may have {sorted(_OPTIONAL)}, nothing else")
    if not isinstance(doc["id"], str) or not doc["id"] or not isinstance(doc["message"], str) or not doc["message"]:
        raise _bad(f"{where}: id and message must be non-empty strings")
    if doc["severity"] not in SEVERITIES:
        raise _bad(f"{where}: severity must be one of {list(SEVERITIES)}")
    if type(doc["blocking"]) is not bool:
        raise _bad(f"{where}: blocking must be true or false")
    path, line, side = doc.get("path"), doc.get("line"), doc.get("side")
    if path is not None:
        problem = check_path(path) if isinstance(path, str) else (None, "not a string")
        if problem is not None:  # the inventory's name rules: no '..', '.', empty component, control character ...
            raise _bad(f"{where}: path must be a repository-relative path ({problem[1]})")
    if line is not None and (type(line) is not int or line <= 0 or path is None):
        raise _bad(f"{where}: line must be a positive integer, with a path")
    if side is not None and (side not in SIDES or line is None):
        raise _bad(f"{where}: side must be LEFT or RIGHT, with a line")
    return ResultFinding(doc["id"], doc["severity"], doc["blocking"], doc["message"], path, line, side)


_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _control_character(value: object, where: str = "the result") -> str | None:
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
    if not isinstance(doc, dict) or set(doc) != {"complete", "limitations", "findings"}:
        raise _bad("the result must be an object of exactly complete, limitations, findings")
    where = _control_character(doc)
    if where is not None:
        raise _bad(f"{where} holds a control character (only tab and newline are text): the reviewer's words reach a "
                   "terminal and the review body as they are")
    if type(doc["complete"]) is not bool:
        raise _bad("complete must be true or false")
    limits, findings = doc["limitations"], doc["findings"]
    if not isinstance(limits, list) or not all(isinstance(x, str) and x for x in limits):
        raise _bad("limitations must be a list of non-empty strings")
    if not isinstance(findings, list) or len(findings) > MAX_FINDINGS:
        raise _bad(f"findings must be a list of at most {MAX_FINDINGS}")
    if doc["complete"] and limits:
        raise _bad("a complete review has no limitations")
    return ReviewResult(doc["complete"], tuple(limits), tuple(_finding(i, f) for i, f in enumerate(findings)))


__all__ = ["MAX_RESULT_BYTES", "SEVERITIES", "SIDES", "ResultFinding", "ReviewResult", "parse_result"]
