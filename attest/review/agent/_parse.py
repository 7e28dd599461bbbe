"""The one parser of an agent's output: exactly one findings block, strictly (docs/review-agent.md "The output").

An agent CLI prints chatter around its answer, so text before and after the block is allowed;
the markers are not: the output must hold exactly one ``<findings>`` and one ``</findings>``,
in that order, and nothing else is read::

    Looking at the change...
    <findings>
    {"findings": [{"path": "src/a.py", "line": 3, "severity": "major", "title": "..."}],
     "coverage": ["src/a.py"], "limitations": []}
    </findings>

The block's trimmed content is one JSON object (optionally inside one ```json fence) of exactly
``findings``, ``coverage`` and ``limitations``. A finding is evidence wrap's finding
(docs/evidence.md) plus an optional ``side``.

    >>> parse_output(b'<findings>{"findings": [], "coverage": ["a"], "limitations": []}</findings>').coverage
    ('a',)
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..._json import loads_strict
from ...errors import AttestError, VerificationError
from ..evidence._wrap import CLOSE, FENCE, FENCE_OPEN, MAX_DETAIL, MAX_OUTPUT_BYTES, OPEN, ReviewFinding, _Diagnostic
from ._codes import AgentCode

MAX_FINDINGS = 1000
MAX_COVERAGE = 100_000
MAX_LIMITATIONS = 100
MAX_COVERAGE_ENTRY = 4096
MAX_LIMITATION = MAX_DETAIL
SIDES = ("LEFT", "RIGHT")
_KEYS = {"findings", "coverage", "limitations"}
_TRIM = " \t\r\n"
# C0 and C1 control characters and DEL, other than tab and newline: never text of the result.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


@dataclass(frozen=True, slots=True)
class AgentFinding:
    """One finding as the agent wrote it: evidence wrap's finding plus ``side`` (anchors not yet checked).

    Raises:
        Nothing: made by :func:`parse_output`.
    """

    path: str
    severity: str
    title: str
    line: int | None = None
    side: str | None = None
    detail: str = ""


@dataclass(frozen=True, slots=True)
class AgentOutput:
    """The agent's block: its findings, the changed paths it says it reviewed, its own limitations.

    Raises:
        Nothing: made by :func:`parse_output`.
    """

    findings: tuple[AgentFinding, ...]
    coverage: tuple[str, ...]
    limitations: tuple[str, ...]


def _invalid(detail: str) -> VerificationError:
    # A reason may quote the agent's words (a duplicate key, say): never a control character of theirs.
    return VerificationError(AgentCode.AGENT_OUTPUT_INVALID, _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", detail))


def extract_block(text: str) -> str:
    """The content between the one ``<findings>`` and the one ``</findings>`` of ``text`` (pure).

    Raises:
        VerificationError: ``AGENT_OUTPUT_INVALID``: no marker, a marker twice (a second block,
            a nested or forged marker, a marker in the chatter or inside a JSON string), a
            block that is not closed (truncated output), a closing marker before the opening one.
    """
    opens, closes = text.count(OPEN), text.count(CLOSE)
    if opens == 0 and closes == 0:
        raise _invalid(f"the output has no {OPEN} ... {CLOSE} block")
    if opens > 1 or closes > 1:
        raise _invalid(f"the output has {opens} {OPEN} and {closes} {CLOSE} markers; exactly one of each is allowed "
                       "(a second block, or a marker in the text around it or inside a string)")
    if closes == 0:
        raise _invalid(f"the {OPEN} block is not closed: the output is truncated")
    if opens == 0:
        raise _invalid(f"the output has a {CLOSE} marker without {OPEN}")
    start, end = text.index(OPEN), text.index(CLOSE)
    if end < start:
        raise _invalid(f"the {CLOSE} marker comes before {OPEN}")
    return text[start + len(OPEN) : end]


def unfence(content: str) -> str:
    """The block's trimmed content without its one optional ```json fence (pure; evidence wrap's rule).

    Raises:
        VerificationError: ``AGENT_OUTPUT_INVALID`` for a fence that does not wrap the whole object.
    """
    content = content.strip(_TRIM)
    if not content.startswith(FENCE):
        if FENCE in content:
            raise _invalid("a fence inside the block must wrap the whole JSON object")
        return content
    lines = content.split("\n")
    if len(lines) < 2 or lines[0].rstrip("\r") != FENCE_OPEN or lines[-1].rstrip("\r") != FENCE:
        raise _invalid(f"a fence inside the block must open with a {FENCE_OPEN} line and close with a {FENCE} line")
    inner = "\n".join(lines[1:-1])
    if FENCE in inner:
        raise _invalid("only one ```json fence is allowed inside the block")
    return inner


def control_character(value: object, where: str) -> str | None:
    """Where a key or string of ``value`` holds a control character other than tab and newline, or None (pure)."""
    if isinstance(value, str):
        return where if _CONTROL.search(value) else None
    if isinstance(value, dict):
        for k, v in value.items():
            found = control_character(k, f"{where} (a key)") or control_character(v, f"{where}.{k}")
            if found is not None:
                return found
    if isinstance(value, list):
        for i, v in enumerate(value):
            found = control_character(v, f"{where}[{i}]")
            if found is not None:
                return found
    return None


def _marker(value: object, where: str) -> str | None:
    """Where a key or string of ``value``, decoded, holds ``<findings>`` or ``</findings>``, or None (pure)."""
    if isinstance(value, str):
        return where if OPEN in value or CLOSE in value else None
    if isinstance(value, dict):
        return next((w for k, v in value.items() for w in (_marker(k, f"{where} (a key)"), _marker(v, f"{where}.{k}"))
                     if w is not None), None)
    if isinstance(value, list):
        return next((w for i, v in enumerate(value) if (w := _marker(v, f"{where}[{i}]")) is not None), None)
    return None


def _printable(text: str, *, lines: bool) -> bool:
    """No character but printable ones and spaces (and, with ``lines``, tab and newline): no bidi override, no zero-width."""
    if lines:
        text = text.replace("\n", "").replace("\t", "")
    return all(c.isprintable() or c == " " for c in text)


def _finding(value: object, index: int) -> AgentFinding:
    side = value.get("side") if isinstance(value, dict) else None
    rest = {k: v for k, v in value.items() if k != "side"} if isinstance(value, dict) else value
    try:
        base = ReviewFinding.from_json(rest, index)
    except _Diagnostic as d:  # evidence wrap's rules, word for word ("finding N ...", 1-based)
        raise _invalid(d.reason) from d
    if side is not None and side not in SIDES:
        raise _invalid(f"finding {index}: side must be LEFT or RIGHT")
    if side is not None and base.line is None:
        raise _invalid(f"finding {index}: side needs a line")
    return AgentFinding(base.path, base.severity, base.title, base.line, side, base.detail)


def _strings(value: object, what: str, *, limit: int, length: int, lines: bool) -> tuple[str, ...]:
    if not isinstance(value, list) or len(value) > limit:
        raise _invalid(f"{what} must be a list of at most {limit} strings")
    for i, item in enumerate(value):
        if not isinstance(item, str) or not item.strip() or len(item) > length or not _printable(item, lines=lines):
            raise _invalid(f"{what}[{i}] must be a non-empty string of at most {length} printable characters"
                           + (" (tab and newline allowed)" if lines else ""))
    return tuple(value)


def parse_document(value: object) -> AgentOutput:
    """The block's JSON value as :class:`AgentOutput`, every field checked (pure).

    Raises:
        VerificationError: ``AGENT_OUTPUT_INVALID``.
    """
    if not isinstance(value, dict) or set(value) != _KEYS:
        raise _invalid("the block must hold one JSON object of exactly findings, coverage, limitations")
    where = control_character(value, "the block")
    if where is not None:
        raise _invalid(f"{where} holds a control character (only tab and newline are text)")
    where = _marker(value, "the block")
    if where is not None:  # written with JSON escapes (<\/findings>, \u003c...): the decoded text holds a marker
        raise _invalid(f"{where} holds a findings marker (however it is escaped, a marker is never text of the block)")
    findings = value["findings"]
    if not isinstance(findings, list) or len(findings) > MAX_FINDINGS:
        raise _invalid(f"findings must be a list of at most {MAX_FINDINGS}")
    return AgentOutput(
        tuple(_finding(f, i) for i, f in enumerate(findings, 1)),
        _strings(value["coverage"], "coverage", limit=MAX_COVERAGE, length=MAX_COVERAGE_ENTRY, lines=False),
        tuple(s.strip(_TRIM) for s in _strings(value["limitations"], "limitations", limit=MAX_LIMITATIONS,
                                              length=MAX_LIMITATION, lines=True)),
    )


def parse_output(raw: bytes) -> AgentOutput:
    """CMD's whole standard output as the agent's one findings block, strictly (pure).

    Raises:
        VerificationError: ``AGENT_OUTPUT_TOO_LARGE`` beyond 1 MiB; ``AGENT_OUTPUT_INVALID`` for
            an output that is not UTF-8, empty, without exactly one block, whose block is not
            one strict JSON object of the documented shape, or holds a control character.
    """

    if len(raw) > MAX_OUTPUT_BYTES:
        raise VerificationError(AgentCode.AGENT_OUTPUT_TOO_LARGE, f"the output is {len(raw)} bytes; the limit is {MAX_OUTPUT_BYTES}")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise _invalid(f"the output is not UTF-8 (byte {e.start})") from e
    if not text.strip(_TRIM):
        raise _invalid("the output is empty")
    content = unfence(extract_block(text))
    try:
        value = loads_strict(content.encode("utf-8"), what="the findings block", max_bytes=MAX_OUTPUT_BYTES, max_depth=4)
    except AttestError as e:
        raise _invalid(f"the block is not one strict JSON object: {e.code}: {e.detail}") from e
    return parse_document(value)


__all__ = ["MAX_FINDINGS", "SIDES", "AgentFinding", "AgentOutput", "control_character", "extract_block", "parse_document",
           "parse_output", "unfence"]
