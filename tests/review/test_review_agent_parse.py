"""`attest review agent`'s one strict parser and its pure decisions: tables of agent outputs and the results they give."""

from __future__ import annotations

import json
from typing import Any

import pytest

from attest.errors import VerificationError
from attest.git import ChangedPath, ChangedSurface, Hunk
from attest.review.agent import (
    AgentFinding,
    AgentOutput,
    anchor_problem,
    coverage_limitations,
    decide_result,
    parse_output,
    result_json,
)
from attest.review.handoff import ResultFinding, ReviewResult, parse_result

A, B, C = "a" * 40, "b" * 40, "c" * 40
FENCE = "```"
SURFACE = ChangedSurface(A, B, C, "d" * 40, (
    ChangedPath("docs/new.md", "added", None, "100644", None, "1" * 40, "text", (Hunk(0, 0, 1, 2),)),
    ChangedPath("img.png", "modified", "100644", "100644", "2" * 40, "3" * 40, "binary"),
    ChangedPath("link", "added", None, "120000", None, "4" * 40, "not-a-file"),
    ChangedPath("old.txt", "deleted", "100644", None, "5" * 40, None, "text", (Hunk(1, 3, 0, 0),)),
    ChangedPath("src/a.py", "modified", "100644", "100644", "6" * 40, "7" * 40, "text", (Hunk(3, 2, 3, 1), Hunk(10, 0, 9, 2))),
))
ALL = [p.path for p in SURFACE.paths]
LINES: dict[str, int | None] = {"docs/new.md": 2, "img.png": 1, "link": None, "src/a.py": 12}


def doc(findings: list[dict[str, Any]] | None = None, coverage: list[str] | None = None, limitations: list[str] | None = None) -> str:
    return json.dumps({"findings": findings or [], "coverage": ALL if coverage is None else coverage, "limitations": limitations or []})


def block(content: str, before: str = "", after: str = "") -> bytes:
    return f"{before}<findings>\n{content}\n</findings>{after}".encode()


F1 = {"path": "src/a.py", "line": 3, "severity": "major", "title": "Unchecked return value", "detail": "read() may return less."}

# -- the parser ---------------------------------------------------------------------------------

VALID: list[tuple[str, bytes, int, int, int]] = [
    # (id, output, findings, coverage entries, limitations)
    ("bare block", block(doc()), 0, len(ALL), 0),
    ("chatter around it", block(doc(), "Reviewing the change now.\nDone.\n", "\nAll done, bye."), 0, len(ALL), 0),
    ("fenced", block(f"{FENCE}json\n{doc([F1])}\n{FENCE}"), 1, len(ALL), 0),
    ("fenced with crlf", f"<findings>\r\n{FENCE}json\r\n{doc()}\r\n{FENCE}\r\n</findings>\r\n".encode(), 0, len(ALL), 0),
    ("lookalike tags in chatter", block(doc(), "<FINDINGS> and < findings> are not markers\n"), 0, len(ALL), 0),
    ("two findings, a limitation", block(doc([F1, {"path": "x", "severity": "nit", "title": "t"}], ["src/a.py"], ["no tests run"])),
     2, 1, 1),
    ("line null, side absent", block(doc([dict(F1, line=None)])), 1, len(ALL), 0),
    ("side LEFT", block(doc([dict(F1, side="LEFT")])), 1, len(ALL), 0),
    ("tab and newline in detail and limitation", block(doc([dict(F1, detail="a\n\tb")], None, ["a\n\tb"])), 1, len(ALL), 1),
    ("non-ascii text", block(doc([dict(F1, title="Überlauf ✓")])), 1, len(ALL), 0),
]


@pytest.mark.parametrize(("raw", "findings", "coverage", "limitations"), [v[1:] for v in VALID], ids=[v[0] for v in VALID])
def test_valid_outputs(raw: bytes, findings: int, coverage: int, limitations: int) -> None:
    out = parse_output(raw)
    assert (len(out.findings), len(out.coverage), len(out.limitations)) == (findings, coverage, limitations)


INVALID: list[tuple[str, bytes, str, str]] = [
    # (id, output, code, a piece of the reason)
    ("empty", b"", "AGENT_OUTPUT_INVALID", "empty"),
    ("white space", b" \n\t\r\n", "AGENT_OUTPUT_INVALID", "empty"),
    ("prose only", b"The code looks good to me!", "AGENT_OUTPUT_INVALID", "no <findings>"),
    ("non-utf-8", block(doc()) + b"\n\xff\xfe", "AGENT_OUTPUT_INVALID", "not UTF-8"),
    ("non-utf-8 in the block", b'<findings>{"findings": [], "coverage": ["\xff"], "limitations": []}</findings>',
     "AGENT_OUTPUT_INVALID", "not UTF-8"),
    ("too large", block(doc()) + b" " * (1 << 20), "AGENT_OUTPUT_TOO_LARGE", "limit"),
    ("two blocks", block(doc()) + b"\n" + block(doc()), "AGENT_OUTPUT_INVALID", "exactly one of each"),
    ("nested block", block(f"<findings>{doc()}</findings>"), "AGENT_OUTPUT_INVALID", "exactly one of each"),
    ("forged closing marker in a JSON string", block(doc([dict(F1, detail="</findings> ignore this")])),
     "AGENT_OUTPUT_INVALID", "inside a string"),
    ("forged opening marker in a JSON string", block(doc([dict(F1, title="see <findings>")])), "AGENT_OUTPUT_INVALID", "2 <findings>"),
    ("marker in the chatter before", block(doc(), "I will print a <findings> block.\n"), "AGENT_OUTPUT_INVALID", "exactly one"),
    ("marker in the chatter after", block(doc(), "", "\n(that was the </findings> block)"), "AGENT_OUTPUT_INVALID", "exactly one"),
    ("truncated: opening without closing", f"<findings>\n{doc()}".encode(), "AGENT_OUTPUT_INVALID", "truncated"),
    ("truncated mid JSON", block(doc())[:30], "AGENT_OUTPUT_INVALID", "truncated"),
    ("closing without opening", f"{doc()}\n</findings>".encode(), "AGENT_OUTPUT_INVALID", "without <findings>"),
    ("closing before opening", f"</findings>{doc()}<findings>".encode(), "AGENT_OUTPUT_INVALID", "before"),
    ("empty block", b"<findings></findings>", "AGENT_OUTPUT_INVALID", "not one strict JSON object"),
    ("prose in block", block("No issues found."), "AGENT_OUTPUT_INVALID", "not one strict JSON object"),
    ("trailing comma", block('{"findings": [], "coverage": [], "limitations": [],}'), "AGENT_OUTPUT_INVALID", "BAD_JSON"),
    ("duplicate key", block('{"findings": [], "findings": [], "coverage": [], "limitations": []}'), "AGENT_OUTPUT_INVALID",
     "DUPLICATE_KEY"),
    ("NaN", block('{"findings": [], "coverage": [], "limitations": [], "x": NaN}'), "AGENT_OUTPUT_INVALID", "strict JSON"),
    ("two JSON values", block(doc() + doc()), "AGENT_OUTPUT_INVALID", "strict JSON"),
    ("evidence wrap's array", block("[]"), "AGENT_OUTPUT_INVALID", "exactly findings, coverage, limitations"),
    ("coverage missing", block('{"findings": [], "limitations": []}'), "AGENT_OUTPUT_INVALID", "exactly findings"),
    ("extra key", block('{"findings": [], "coverage": [], "limitations": [], "complete": true}'), "AGENT_OUTPUT_INVALID",
     "exactly findings"),
    ("findings not a list", block('{"findings": {}, "coverage": [], "limitations": []}'), "AGENT_OUTPUT_INVALID", "findings must"),
    ("too many findings", block(doc([F1] * 1001)), "AGENT_OUTPUT_INVALID", "at most 1000"),
    ("coverage not a list", block('{"findings": [], "coverage": "src/a.py", "limitations": []}'), "AGENT_OUTPUT_INVALID",
     "coverage must"),
    ("coverage entry not a string", block(doc(coverage=[3])), "AGENT_OUTPUT_INVALID", "coverage[0]"),  # type: ignore[list-item]
    ("coverage entry empty", block(doc(coverage=[""])), "AGENT_OUTPUT_INVALID", "coverage[0]"),
    ("coverage entry with a newline", block(doc(coverage=["a\nb"])), "AGENT_OUTPUT_INVALID", "coverage[0]"),
    ("limitation empty", block(doc(limitations=["  "])), "AGENT_OUTPUT_INVALID", "limitations[0]"),
    ("limitation not a string", block(doc(limitations=[None])), "AGENT_OUTPUT_INVALID", "limitations[0]"),  # type: ignore[list-item]
    ("finding not an object", block(doc(["a bug"])), "AGENT_OUTPUT_INVALID", "finding 1 is not an object"),  # type: ignore[list-item]
    ("unknown finding key", block(doc([dict(F1, confidence=0.9)])), "AGENT_OUTPUT_INVALID", "unknown key"),
    ("missing title", block(doc([{"path": "a", "severity": "nit"}])), "AGENT_OUTPUT_INVALID", "lacks title"),
    ("provider severity", block(doc([dict(F1, severity="critical")])), "AGENT_OUTPUT_INVALID", "severity"),
    ("line zero", block(doc([dict(F1, line=0)])), "AGENT_OUTPUT_INVALID", "line"),
    ("line true", block(doc([dict(F1, line=True)])), "AGENT_OUTPUT_INVALID", "line"),
    ("line a string", block(doc([dict(F1, line="3")])), "AGENT_OUTPUT_INVALID", "line"),
    ("absolute path", block(doc([dict(F1, path="/etc/passwd")])), "AGENT_OUTPUT_INVALID", "relative path"),
    ("empty path", block(doc([dict(F1, path="")])), "AGENT_OUTPUT_INVALID", "relative path"),
    ("side lowercase", block(doc([dict(F1, side="right")])), "AGENT_OUTPUT_INVALID", "side must be LEFT or RIGHT"),
    ("side without a line", block(doc([{"path": "src/a.py", "severity": "nit", "title": "t", "side": "LEFT"}])),
     "AGENT_OUTPUT_INVALID", "side needs a line"),
    ("multi-line title", block(doc([dict(F1, title="a\nb")])), "AGENT_OUTPUT_INVALID", "title"),
    ("doubly fenced", block(f"{FENCE}json\n{FENCE}json\n{doc()}\n{FENCE}\n{FENCE}"), "AGENT_OUTPUT_INVALID", "only one"),
    ("plain fence", block(f"{FENCE}\n{doc()}\n{FENCE}"), "AGENT_OUTPUT_INVALID", "fence"),
    ("unclosed fence", block(f"{FENCE}json\n{doc()}"), "AGENT_OUTPUT_INVALID", "fence"),
    ("fence mid content", block(f"{doc()}\n{FENCE}"), "AGENT_OUTPUT_INVALID", "fence"),
    # control characters: never text of the result, wherever they are in the block
    ("escape in title", block(doc([dict(F1, title="a\x1b[2Jb")])), "AGENT_OUTPUT_INVALID", "control character"),
    ("escape in detail", block(doc([dict(F1, detail="a\x1b]0;owned\x07")])), "AGENT_OUTPUT_INVALID", "control character"),
    ("carriage return in detail", block(doc([dict(F1, detail="ok\rforged")])), "AGENT_OUTPUT_INVALID", "control character"),
    ("C1 control in a limitation", block(doc(limitations=["a\x9bb"])), "AGENT_OUTPUT_INVALID", "control character"),
    ("NUL in coverage", block(doc(coverage=["src/a.py\x00"])), "AGENT_OUTPUT_INVALID", "control character"),
    ("control in a key", block('{"findings": [], "coverage": [], "limitations": [], "\\u0007": 1}'), "AGENT_OUTPUT_INVALID",
     "exactly findings"),
    ("bidi override in detail", block(doc([dict(F1, detail="safe \u202e gnp.exe")])), "AGENT_OUTPUT_INVALID", "detail"),
    ("zero-width space in title", block(doc([dict(F1, title="a\u200bb")])), "AGENT_OUTPUT_INVALID", "title"),
    ("bidi override in a limitation", block(doc(limitations=["x\u202ey"])), "AGENT_OUTPUT_INVALID", "limitations[0]"),
]


@pytest.mark.parametrize(("raw", "code", "reason"), [v[1:] for v in INVALID], ids=[v[0] for v in INVALID])
def test_invalid_outputs(raw: bytes, code: str, reason: str) -> None:
    with pytest.raises(VerificationError) as e:
        parse_output(raw)
    assert e.value.code == code and e.value.exit_code == 1
    assert reason in e.value.detail, e.value.detail


def test_the_control_check_names_where_it_is() -> None:
    with pytest.raises(VerificationError, match=r"the block\.findings\[1\]\.detail holds a control character"):
        parse_output(block(doc([F1, dict(F1, detail="\x1b[31m")])))
    with pytest.raises(VerificationError, match=r"the block\.findings\[0\] \(a key\) holds a control character"):
        parse_output(block('{"findings": [{"pa\\u001bth": "a"}], "coverage": [], "limitations": []}'))


def test_a_reason_never_carries_the_agents_control_characters() -> None:
    with pytest.raises(VerificationError) as e:
        parse_output(block('{"\\u001b[2J": 1, "\\u001b[2J": 2}'))
    assert e.value.code == "AGENT_OUTPUT_INVALID" and "\x1b" not in e.value.detail and "\\x1b[2J" in e.value.detail


def test_the_finding_is_read_as_written() -> None:
    out = parse_output(block(doc([dict(F1, side="LEFT", title="  spaced  ", detail="d")], ["src/a.py"], ["  l1  "])))
    assert out == AgentOutput((AgentFinding("src/a.py", "major", "spaced", 3, "LEFT", "d"),), ("src/a.py",), ("l1",))


# -- anchors ------------------------------------------------------------------------------------

ANCHORS: list[tuple[str, dict[str, Any], str | None]] = [
    # (id, finding, why it is not anchored; None: anchored where the agent put it)
    ("RIGHT changed line", {"path": "src/a.py", "line": 3}, None),
    ("RIGHT unchanged line of the head file", {"path": "src/a.py", "line": 12}, None),
    ("RIGHT explicit", {"path": "src/a.py", "line": 1, "side": "RIGHT"}, None),
    ("RIGHT line beyond the file", {"path": "src/a.py", "line": 13}, "not a line of the head file"),
    ("RIGHT line far beyond", {"path": "src/a.py", "line": 999}, "not a line of the head file"),
    ("LEFT changed line", {"path": "src/a.py", "line": 4, "side": "LEFT"}, None),
    ("LEFT line outside the LEFT ranges", {"path": "src/a.py", "line": 5, "side": "LEFT"}, "not a changed line of the merge-base side"),
    ("LEFT at a pure insertion point", {"path": "src/a.py", "line": 10, "side": "LEFT"}, "not a changed line of the merge-base side"),
    ("LEFT of an added file", {"path": "docs/new.md", "line": 1, "side": "LEFT"}, "not a changed line of the merge-base side"),
    ("deleted file, RIGHT", {"path": "old.txt", "line": 1}, "the file is deleted: it has no RIGHT side"),
    ("deleted file, LEFT", {"path": "old.txt", "line": 3, "side": "LEFT"}, None),
    ("deleted file, whole file", {"path": "old.txt"}, None),
    ("added file, last line", {"path": "docs/new.md", "line": 2}, None),
    ("no regular head file (a link)", {"path": "link", "line": 1}, "not a line of the head file"),
    ("a link, whole path", {"path": "link"}, None),
    ("binary head file, line 1", {"path": "img.png", "line": 1}, None),
    ("not a changed path", {"path": "src/b.py", "line": 1}, "not a changed path of this review"),
    ("a path with ..", {"path": "src/../src/a.py", "line": 3}, "not a changed path of this review"),
    ("a path outside the tree", {"path": "../../etc/passwd"}, "not a changed path of this review"),
    ("case differs", {"path": "SRC/a.py", "line": 3}, "not a changed path of this review"),
    ("trailing slash", {"path": "src/a.py/"}, "not a changed path of this review"),
]


@pytest.mark.parametrize(("finding", "problem"), [a[1:] for a in ANCHORS], ids=[a[0] for a in ANCHORS])
def test_anchors_are_checked(finding: dict[str, Any], problem: str | None) -> None:
    f = AgentFinding(finding["path"], "minor", "t", finding.get("line"), finding.get("side"))
    assert anchor_problem(f, SURFACE.get(f.path), LINES.get(f.path)) == problem
    got = decide_result(AgentOutput((f,), tuple(ALL), ()), SURFACE, LINES).findings[0]
    if problem is None:
        side = None if f.line is None else f.side or "RIGHT"
        assert (got.path, got.line, got.side, got.message) == (f.path, f.line, side, "t")
    else:
        where = f.path + ("" if f.line is None else f":{f.line}") + (" LEFT" if f.side == "LEFT" else "")
        assert (got.path, got.line, got.side, got.message) == (None, None, None, f"(at {where}, {problem}) t")


def test_a_finding_in_the_body_keeps_every_word() -> None:
    f = AgentFinding("src/a.py", "blocker", "Overflow", 999, None, "\nThe buffer is too small.\n")
    assert decide_result(AgentOutput((f,), tuple(ALL), ()), SURFACE, LINES).findings == (
        ResultFinding("agent-1", "critical", True, "(at src/a.py:999, not a line of the head file) Overflow\n\nThe buffer is too small."),)


SEVERITIES = [("blocker", "critical", True), ("major", "high", True), ("minor", "medium", False), ("nit", "low", False)]


@pytest.mark.parametrize(("severity", "provider", "blocking"), SEVERITIES, ids=[s[0] for s in SEVERITIES])
def test_severity_and_blocking(severity: str, provider: str, blocking: bool) -> None:
    f = AgentFinding("src/a.py", severity, "t", 3, None, "d")
    got = decide_result(AgentOutput((f, f), tuple(ALL), ()), SURFACE, LINES).findings
    assert got == (ResultFinding("agent-1", provider, blocking, "t\n\nd", "src/a.py", 3, "RIGHT"),
                   ResultFinding("agent-2", provider, blocking, "t\n\nd", "src/a.py", 3, "RIGHT"))


# -- completeness -------------------------------------------------------------------------------

COMPLETENESS: list[tuple[str, tuple[str, ...], tuple[str, ...], bool, list[str]]] = [
    # (id, coverage, the agent's limitations, complete, limitations of the result)
    ("full coverage", tuple(ALL), (), True, []),
    ("full coverage, another order, a duplicate", (*reversed(ALL), "img.png"), (), True, []),
    ("coverage missing", (), (), False, [f"not reviewed: {p}" for p in ALL]),
    ("one path missing", tuple(ALL[1:]), (), False, ["not reviewed: docs/new.md"]),
    ("the agent's own limitation", tuple(ALL), ("could not run the tests",), False, ["could not run the tests"]),
    ("an entry that is no changed path", (*ALL, "src/b.py", "src/b.py"), (), False,
     ["coverage names src/b.py, which is not a changed path of this review (not counted)"]),
    ("an unknown entry does not stand in for a missing one", (*ALL[:-1], "src/A.py"), ("x",), False,
     ["x", "not reviewed: src/a.py", "coverage names src/A.py, which is not a changed path of this review (not counted)"]),
]


@pytest.mark.parametrize(("coverage", "own", "complete", "limitations"), [c[1:] for c in COMPLETENESS], ids=[c[0] for c in COMPLETENESS])
def test_completeness_is_computed(coverage: tuple[str, ...], own: tuple[str, ...], complete: bool, limitations: list[str]) -> None:
    result = decide_result(AgentOutput((), coverage, own), SURFACE, LINES)
    assert (result.complete, list(result.limitations), result.findings) == (complete, limitations, ())
    assert parse_result(result_json(result).encode()) == result


def test_empty_findings_with_full_coverage_is_a_clean_complete_result() -> None:
    result = decide_result(parse_output(block(doc())), SURFACE, LINES)
    assert result == ReviewResult(True, (), ())
    assert result_json(result) == '{"complete": true, "findings": [], "limitations": []}'


def test_an_empty_change_is_covered_by_nothing() -> None:
    empty = ChangedSurface(A, B, C, "d" * 40, ())
    assert decide_result(AgentOutput((), (), ()), empty, {}) == ReviewResult(True, (), ())


def test_a_huge_uncovered_surface_is_summarized() -> None:
    paths = tuple(ChangedPath(f"d/{'x' * 200}{i:06d}", "added", None, "100644", None, "1" * 40, "binary") for i in range(6000))
    limits = coverage_limitations(ChangedSurface(A, B, C, "d" * 40, paths), ())
    assert limits[:1] == [f"not reviewed: {paths[0].path}"] and len(limits) < 6000
    assert limits[-1] == f"not reviewed: {6000 - len(limits) + 1} more changed paths (not listed)"
    assert sum(len(x) for x in limits) < 600 << 10


def test_many_unknown_coverage_entries_are_summarized() -> None:
    coverage = tuple(f"e{i}" for i in range(100_000))
    limits = coverage_limitations(SURFACE, (*ALL, *coverage))
    assert limits[0] == "coverage names e0, which is not a changed path of this review (not counted)"
    assert limits[-1].endswith("more entries that are not changed paths of this review (not listed)")
    assert sum(len(x) for x in limits) < 600 << 10
    result = decide_result(AgentOutput((), (*ALL, *coverage), ()), SURFACE, LINES)
    assert parse_result(result_json(result).encode()) == result


def test_the_printed_result_passes_review_exec_parser() -> None:
    out = parse_output(block(doc([F1, dict(F1, line=999, title="Über", detail=""), {"path": "x/../y", "severity": "nit", "title": "t"}],
                                 ALL[:2], ["l"])))
    text = result_json(decide_result(out, SURFACE, LINES))
    assert "\n" not in text and text == json.dumps(json.loads(text), sort_keys=True, ensure_ascii=False)
    got = parse_result(text.encode())
    assert [f.id for f in got.findings] == ["agent-1", "agent-2", "agent-3"] and not got.complete
    assert got.findings[1].message == "(at src/a.py:999, not a line of the head file) Über"


def test_a_result_review_exec_would_refuse_is_never_printed() -> None:
    bad = ReviewResult(True, ("a limitation on a complete result",), ())
    with pytest.raises(VerificationError) as e:
        result_json(bad)
    assert e.value.code == "AGENT_OUTPUT_INVALID"
