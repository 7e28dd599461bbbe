"""From the agent's block to the provider-neutral result: anchors checked, completeness computed (pure).

Nothing the agent claims is taken on its word. A finding keeps its path, line and side only
when they are a line of the change (RIGHT: a line of the head file; LEFT: a changed line of
the merge-base side); otherwise its words go to the review body, prefixed by where the agent
put it. The result is complete only when the agent states no limitation and its coverage
names every changed path and nothing else.

    >>> decide_result(AgentOutput((), ("a.py",), ()), surface, {}).complete
    True
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from ...errors import AttestError, VerificationError
from ...git._surface import ChangedPath, ChangedSurface
from ..handoff._result import ResultFinding, ReviewResult, parse_result
from ._codes import AgentCode
from ._parse import AgentFinding, AgentOutput

SEVERITY = {"blocker": "critical", "major": "high", "minor": "medium", "nit": "low"}
BLOCKING = ("blocker", "major")
#: At most this many bytes of each kind of coverage limitation are listed one by one; the rest are counted in one.
MAX_LISTED_BYTES = 512 << 10


def anchor_problem(finding: AgentFinding, changed: ChangedPath | None, right_lines: int | None) -> str | None:
    """Why ``finding`` cannot be anchored where the agent put it, or None when it can (pure).

    ``changed`` is the surface's entry for the finding's path (None: not a changed path);
    ``right_lines`` the number of lines of ``head/<path>`` (None: no regular head file).
    """
    if changed is None:
        return "not a changed path of this review"
    if finding.line is None:
        return None
    if finding.side == "LEFT":
        if not changed.is_changed_line("LEFT", finding.line):
            return "not a changed line of the merge-base side"
        return None
    if changed.status == "deleted":
        return "the file is deleted: it has no RIGHT side"
    if right_lines is None or not 1 <= finding.line <= right_lines:
        return "not a line of the head file"
    return None


def _where(finding: AgentFinding) -> str:
    if finding.line is None:
        return finding.path
    return f"{finding.path}:{finding.line}" + (" LEFT" if finding.side == "LEFT" else "")


def result_finding(n: int, finding: AgentFinding, problem: str | None) -> ResultFinding:
    """The ``n``-th finding of the result (pure): anchored, or in the body with where the agent put it."""
    message = finding.title + (f"\n\n{finding.detail.strip()}" if finding.detail.strip() else "")
    blocking = finding.severity in BLOCKING
    severity = SEVERITY[finding.severity]
    if problem is not None:
        return ResultFinding(f"agent-{n}", severity, blocking, f"(at {_where(finding)}, {problem}) {message}")
    side = None if finding.line is None else finding.side or "RIGHT"
    return ResultFinding(f"agent-{n}", severity, blocking, message, finding.path, finding.line, side)


def _listed(lines: list[str], rest: str) -> list[str]:
    """``lines`` while they add up to at most :data:`MAX_LISTED_BYTES`; the others counted in one line (``rest`` formats N)."""
    out: list[str] = []
    total = 0
    for i, line in enumerate(lines):
        total += len(line.encode("utf-8"))
        if total > MAX_LISTED_BYTES:
            return [*out, rest.format(len(lines) - i)]
        out.append(line)
    return out


def coverage_limitations(surface: ChangedSurface, coverage: tuple[str, ...]) -> list[str]:
    """The limitations the coverage gives (pure): each changed path it does not name, each entry that is no changed path.

    Each kind is listed one by one up to :data:`MAX_LISTED_BYTES`, and the rest counted in one line.
    """
    named, changed = set(coverage), {p.path for p in surface.paths}
    uncovered = [f"not reviewed: {p.path}" for p in surface.paths if p.path not in named]
    others = [f"coverage names {entry}, which is not a changed path of this review (not counted)"
              for entry in dict.fromkeys(coverage) if entry not in changed]
    return [*_listed(uncovered, "not reviewed: {} more changed paths (not listed)"),
            *_listed(others, "coverage names {} more entries that are not changed paths of this review (not listed)")]


def decide_result(output: AgentOutput, surface: ChangedSurface, right_lines: Mapping[str, int | None]) -> ReviewResult:
    """The provider-neutral result of the agent's ``output`` for the changed ``surface`` (pure).

    ``right_lines`` maps a changed path to the number of lines of its head file (None or
    absent: no regular head file); only the paths the findings name need an entry.
    """
    by_path = {p.path: p for p in surface.paths}
    findings = tuple(
        result_finding(n, f, anchor_problem(f, by_path.get(f.path), right_lines.get(f.path)))
        for n, f in enumerate(output.findings, 1)
    )
    limitations = (*output.limitations, *coverage_limitations(surface, output.coverage))
    return ReviewResult(not limitations, tuple(limitations), findings)


def result_json(result: ReviewResult) -> str:
    """The one line ``attest review agent`` prints: the result as JSON, read back by ``attest review exec``'s own parser (pure).

    Raises:
        VerificationError: ``AGENT_OUTPUT_INVALID`` when :func:`attest.review.handoff.parse_result`
            would refuse it: the agent's words could not make a valid result.
    """
    text = json.dumps(result.to_json(), sort_keys=True, ensure_ascii=False)
    try:
        parse_result(text.encode("utf-8"))
    except AttestError as e:
        raise VerificationError(AgentCode.AGENT_OUTPUT_INVALID, f"the result would not be a valid review result: {e.detail}") from e
    return text


__all__ = ["BLOCKING", "SEVERITY", "anchor_problem", "coverage_limitations", "decide_result", "result_finding", "result_json"]
