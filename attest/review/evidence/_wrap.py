"""The trusted review wrapper's output contract: model output in, exact-head review out.

The model's whole trimmed output must be exactly one findings block::

    <findings>
    [{"path": "src/app.py", "line": 12, "severity": "major", "title": "...", "detail": "..."}]
    </findings>

whose trimmed content is a JSON array, optionally inside one ```json fence. An empty array
gives a clean review, a valid non-empty array an action-required review listing every
finding, and anything else a diagnostic review (never clean) and a non-zero exit. Every
review is a ``COMMENT`` on the exact head and carries the workflow-run marker, the base
marker (the base commit of the ``BASE_SHA...HEAD_SHA`` range the run reviewed) and the head
marker, so that the same body, posted as an issue comment when the review cannot be posted
(a fallback comment), still names the head it is about.

    >>> wrap_output(b"<findings>[]</findings>", head_sha="a" * 40, base_sha="b" * 40, run_id=5, run_attempt=1).outcome
    'clean'
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from ..._json import loads_strict
from ...errors import InputError
from ._codes import EvidenceCode as C
from ._markers import CLEAN, DIAGNOSTIC, MARKER_TAG, Markers, base_marker, findings_marker, head_marker, parse_markers, run_marker

MAX_OUTPUT_BYTES = 1024 * 1024
MAX_FINDINGS = 100
MAX_PATH = 1024
MAX_TITLE = 200
MAX_DETAIL = 8000
SEVERITIES = ("blocker", "major", "minor", "nit")
OPEN, CLOSE = "<findings>", "</findings>"
FENCE_OPEN, FENCE = "```json", "```"
_TRIM = " \t\r\n"
_SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
_MAX_ID = 2**53 - 1
_KEYS = frozenset({"path", "line", "severity", "title", "detail"})
_REQUIRED = frozenset({"path", "severity", "title"})

Outcome = Literal["clean", "findings", "diagnostic"]


class _Diagnostic(Exception):
    def __init__(self, code: C, reason: str) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason


@dataclass(frozen=True, slots=True)
class ReviewFinding:
    """One review finding, as the model must emit it (see docs/evidence.md).

    Raises:
        _Diagnostic: (internal) from ``from_json`` with ``BAD_FINDING``; :func:`wrap_output`
            turns it into a diagnostic review, never an exception.
    """

    path: str
    severity: str
    title: str
    line: int | None = None
    detail: str = ""

    @classmethod
    def from_json(cls, value: object, index: int) -> ReviewFinding:
        where = f"finding {index}"
        if not isinstance(value, dict):
            raise _Diagnostic(C.BAD_FINDING, f"{where} is not an object")
        extra = sorted(set(value) - _KEYS)
        if extra:
            raise _Diagnostic(C.BAD_FINDING, f"{where} has unknown key(s) {', '.join(repr(_safe(k, 40)) for k in extra)}")
        missing = sorted(_REQUIRED - set(value))
        if missing:
            raise _Diagnostic(C.BAD_FINDING, f"{where} lacks {', '.join(missing)}")
        path, severity, title = value["path"], value["severity"], value["title"]
        line, detail = value.get("line"), value.get("detail", "")
        if not isinstance(path, str) or not 1 <= len(path) <= MAX_PATH or _has_control(path) or path.startswith("/"):
            raise _Diagnostic(C.BAD_FINDING, f"{where}: path must be a relative path of 1..{MAX_PATH} printable characters")
        if MARKER_TAG in path or "<!--" in path:
            raise _Diagnostic(C.BAD_FINDING, f"{where}: path must not contain marker syntax")
        if severity not in SEVERITIES:
            raise _Diagnostic(C.BAD_FINDING, f"{where}: severity must be one of {', '.join(SEVERITIES)}")
        if not isinstance(title, str) or not 1 <= len(title.strip()) <= MAX_TITLE or _has_control(title):
            raise _Diagnostic(C.BAD_FINDING, f"{where}: title must be one line of 1..{MAX_TITLE} characters")
        if line is not None and (isinstance(line, bool) or not isinstance(line, int) or not 1 <= line <= _MAX_ID):
            raise _Diagnostic(C.BAD_FINDING, f"{where}: line must be a positive integer or null")
        if not isinstance(detail, str) or len(detail) > MAX_DETAIL or _has_control(detail.replace("\n", "").replace("\t", "")):
            raise _Diagnostic(C.BAD_FINDING, f"{where}: detail must be text of at most {MAX_DETAIL} characters")
        return cls(path, severity, title.strip(), line, detail)


def _has_control(text: str) -> bool:
    return any(not c.isprintable() and c != " " for c in text)


def _safe(text: str, limit: int = 200) -> str:
    """Model-controlled text made inert in a review body: no HTML, no marker syntax."""
    text = text[:limit]
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace(MARKER_TAG, "opencode-review&#58;")


def _code_span(text: str) -> str:
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


@dataclass(frozen=True, slots=True)
class WrapResult:
    """The review to post (``review``) and what it says.

    Raises:
        Nothing.
    """

    outcome: Outcome
    code: C | None  # the diagnostic reason; None for clean and findings reviews
    reason: str
    findings: tuple[ReviewFinding, ...]
    review: dict[str, str]

    @property
    def ok(self) -> bool:
        return self.outcome != "diagnostic"

    def to_json(self) -> dict[str, object]:
        errors = [] if self.code is None else [{"code": str(self.code), "detail": self.reason}]
        return {
            "ok": self.ok,
            "outcome": self.outcome,
            "reason_code": None if self.code is None else str(self.code),
            "reason": self.reason,
            "findings": len(self.findings),
            "review": self.review,
            "errors": errors,
        }


def _check_identity(head_sha: str, base_sha: str, run_id: int, run_attempt: int) -> None:
    problems = []
    if not isinstance(head_sha, str) or not _SHA.fullmatch(head_sha):
        problems.append("--head-sha must be the exact lowercase hex head commit id (40 or 64 digits)")
    if not isinstance(base_sha, str) or not _SHA.fullmatch(base_sha):
        problems.append("--base-sha must be the exact lowercase hex base commit id the run reviewed (40 or 64 digits)")
    for name, value in (("--run-id", run_id), ("--run-attempt", run_attempt)):
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= _MAX_ID:
            problems.append(f"{name} must be a positive integer")
    if problems:
        raise InputError(C.BAD_CONFIG, "; ".join(problems))


def parse_output(raw: bytes) -> tuple[ReviewFinding, ...]:
    """The findings of one well-formed block, or :class:`_Diagnostic` naming what is wrong."""
    if len(raw) > MAX_OUTPUT_BYTES:
        raise _Diagnostic(C.OUTPUT_TOO_LARGE, f"the model output is {len(raw)} bytes; the limit is {MAX_OUTPUT_BYTES}")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise _Diagnostic(C.OUTPUT_NOT_UTF8, f"the model output is not UTF-8 (byte {e.start})") from e
    trimmed = text.strip(_TRIM)
    if not trimmed:
        raise _Diagnostic(C.OUTPUT_EMPTY, "the model output is empty")
    opens, closes = trimmed.count(OPEN), trimmed.count(CLOSE)
    if opens > 1 or closes > 1:
        raise _Diagnostic(C.MULTIPLE_FINDINGS_BLOCKS, f"the output has {opens} {OPEN} and {closes} {CLOSE} tags; exactly one block is allowed")
    if opens != 1 or closes != 1:
        raise _Diagnostic(C.NO_FINDINGS_BLOCK, f"the output has no complete {OPEN}...{CLOSE} block")
    if not trimmed.startswith(OPEN) or not trimmed.endswith(CLOSE):
        before = trimmed.index(OPEN)
        after = len(trimmed) - trimmed.index(CLOSE) - len(CLOSE)
        raise _Diagnostic(C.TEXT_OUTSIDE_BLOCK, f"the block does not cover the whole output ({before} characters before it, {after} after it)")
    content = trimmed[len(OPEN) : -len(CLOSE)].strip(_TRIM)
    if content.startswith(FENCE):
        lines = content.split("\n")
        first, last = lines[0].rstrip("\r"), lines[-1].rstrip("\r")
        if len(lines) < 2 or first != FENCE_OPEN or last != FENCE:
            raise _Diagnostic(C.BAD_FENCE, f"a fence inside the block must open with a {FENCE_OPEN} line and close with a {FENCE} line")
        content = "\n".join(lines[1:-1])
        if FENCE in content:
            raise _Diagnostic(C.BAD_FENCE, "only one ```json fence is allowed inside the block")
    elif FENCE in content:
        raise _Diagnostic(C.BAD_FENCE, "a fence inside the block must wrap the whole JSON array")
    try:
        value = loads_strict(content.encode("utf-8"), what="the findings", max_bytes=MAX_OUTPUT_BYTES, max_depth=4)
    except InputError as e:
        raise _Diagnostic(C.FINDINGS_NOT_JSON, f"{e.code}: {e.detail}") from e
    if not isinstance(value, list):
        raise _Diagnostic(C.FINDINGS_NOT_ARRAY, f"the findings are a JSON {type(value).__name__}, not an array")
    if len(value) > MAX_FINDINGS:
        raise _Diagnostic(C.TOO_MANY_FINDINGS, f"{len(value)} findings; at most {MAX_FINDINGS} are allowed")
    return tuple(ReviewFinding.from_json(item, i) for i, item in enumerate(value, 1))


def _render_finding(n: int, f: ReviewFinding) -> list[str]:
    where = _code_span(f.path) + (f":{f.line}" if f.line is not None else "")
    out = [f"{n}. **{f.severity}** {where}: {_safe(f.title, MAX_TITLE)}"]
    out.extend(f"   {_safe(line, MAX_DETAIL)}".rstrip() for line in f.detail.strip("\n").split("\n") if f.detail.strip())
    return out


def _result(outcome: Outcome, code: C | None, reason: str, findings: tuple[ReviewFinding, ...], head_sha: str, base_sha: str,
            run_id: int, run_attempt: int) -> WrapResult:
    short = head_sha[:12]
    run = ((run_id, run_attempt),)
    if outcome == "clean":
        lines = [f"**OpenCode review**: no findings for head `{short}` (base `{base_sha[:12]}`).", "", CLEAN]
        expected = Markers(1, 0, (), run, 0, (base_sha,), (head_sha,))
    elif outcome == "findings":
        n = len(findings)
        lines = [f"**OpenCode review**: {n} finding{'s' if n != 1 else ''} for head `{short}`. Action required.", ""]
        for i, f in enumerate(findings, 1):
            lines.extend(_render_finding(i, f))
        lines += ["", findings_marker(n)]
        expected = Markers(0, 0, (n,), run, 0, (base_sha,), (head_sha,))
    else:
        lines = [
            f"**OpenCode review**: diagnostic for head `{short}`: the model result was not one valid findings block "
            f"({code}: {_safe(reason, 500)}). This review is not clean; fix the cause and re-run the review.",
            "",
            DIAGNOSTIC,
        ]
        expected = Markers(0, 1, (), run, 0, (base_sha,), (head_sha,))
    lines.append(run_marker(run_id, run_attempt))
    # What was reviewed is BASE_SHA...HEAD_SHA: the head is the review's commit_id, the base this.
    lines.append(base_marker(base_sha))
    # The head is the review's commit_id; said again in the body for a fallback issue comment.
    lines.append(head_marker(head_sha))
    body = "\n".join(lines) + "\n"
    # The body is read back by the trust decision: it must say exactly what we mean, no more.
    if parse_markers(body) != expected:
        raise AssertionError("rendered review body does not carry exactly the intended markers")
    return WrapResult(outcome, code, reason, findings, {"commit_id": head_sha, "event": "COMMENT", "body": body})


def wrap_output(raw: bytes, *, head_sha: str, base_sha: str, run_id: int, run_attempt: int) -> WrapResult:
    """The review for the model's raw output; a diagnostic review for anything malformed.

    Raises:
        InputError: ``BAD_CONFIG`` for a malformed head or base sha, run id or attempt. A
            malformed model output is a diagnostic result (``OUTPUT_TOO_LARGE``,
            ``NO_FINDINGS_BLOCK``, ``BAD_FINDING``, ...), not an exception.
    """
    _check_identity(head_sha, base_sha, run_id, run_attempt)
    ident = (head_sha, base_sha, run_id, run_attempt)
    try:
        findings = parse_output(raw)
    except _Diagnostic as d:
        return _result("diagnostic", d.code, d.reason, (), *ident)
    if not findings:
        return _result("clean", None, "no findings", (), *ident)
    return _result("findings", None, f"{len(findings)} finding(s)", findings, *ident)


def wrap_failure(code: C, reason: str, *, head_sha: str, base_sha: str, run_id: int, run_attempt: int) -> WrapResult:
    """The diagnostic review for a model result that could not even be read.

    Raises:
        InputError: ``BAD_CONFIG`` for a malformed head or base sha, run id or attempt.
    """
    _check_identity(head_sha, base_sha, run_id, run_attempt)
    return _result("diagnostic", code, reason, (), head_sha, base_sha, run_id, run_attempt)
