"""The thin invocation prompt (pure): where the review, the procedure and the change are, and what to print.

It is not normative: it points at the procedure bundle's ``SKILL.md`` and copies none of its
rules. Every value that comes from the change (a path, the repository's name) is written as a
JSON string, so a file name reads as data and never as a line of the request. The same inputs
give the same bytes.

    >>> render_prompt(inputs).startswith("# Review request")
    True
"""

from __future__ import annotations

import json

from ..evidence._wrap import CLOSE, MAX_DETAIL, MAX_TITLE, OPEN
from ._change import AgentInputs


def _q(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)


def _join(directory: str, rel: str) -> str:
    return directory.rstrip("/") + "/" + rel


def _identity(inputs: AgentInputs) -> list[str]:
    r = inputs.review
    return [
        "## The review",
        "",
        f"- review id: {r.review}",
        f"- repository: {_q(r.full_name)} (id {r.repository_id})",
        f"- pull request: number {r.pull_request_number} (id {r.pull_request_id})",
        f"- base commit: {r.base_commit} (the trusted base)",
        f"- merge base: {r.merge_base} (the LEFT side of the change)",
        f"- head commit: {r.head_commit} (the RIGHT side of the change)",
    ]


def _where(inputs: AgentInputs) -> list[str]:
    r, change = inputs.review, inputs.change_dir
    lines = [
        "## The procedure",
        "",
        f"The verified procedure bundle is {_q(inputs.procedure_dir)}. Read {_q(_join(inputs.procedure_dir, 'SKILL.md'))} and "
        "follow it: it is the review procedure, and this request adds no rule to it.",
        "",
        "## The projections",
        "",
        f"- semantic: {_q(inputs.semantic_file)} (the base's {_q(r.projection('semantic').path)})",
        f"- adapter: {_q(inputs.adapter_file)} (the base's {_q(r.projection('adapter').path)})",
        "",
        "## The change",
        "",
        f"- {_q(_join(change, 'head/'))}: the complete head tree (regular files and directories)",
        f"- {_q(_join(change, 'diff.patch'))}: git's unified diff from the merge base to the head",
        f"- {_q(_join(change, 'surface.json'))}: the changed surface (every changed path, its status and changed line ranges)",
        f"- {_q(_join(change, 'review.json'))}: this review's identities",
    ]
    if inputs.base_dir is not None:
        lines.append(f"- {_q(inputs.base_dir)}: the trusted base tree")
    lines += [f"- not in head/: {_q(x.path)} ({x.kind})" for x in r.not_materialized]
    return lines


def _paths(inputs: AgentInputs) -> list[str]:
    paths = inputs.surface.paths
    return [
        f"## Changed paths ({len(paths)})",
        "",
        "One JSON object a line:",
        "",
        *(json.dumps({"path": p.path, "status": p.status, "content": p.content}, ensure_ascii=False) for p in paths),
    ]


def _contract() -> list[str]:
    return [
        "## What to print",
        "",
        f"Print exactly one findings block on standard output: a line {OPEN}, one JSON object, a line {CLOSE}.",
        "Other text around the block is ignored. The two markers must appear nowhere else (not in other text, not",
        "inside a JSON string): a second marker fails the run, and so does an output without the block.",
        "",
        OPEN,
        '{"findings": [], "coverage": [], "limitations": []}',
        CLOSE,
        "",
        '- "findings": a list of objects with "path", "severity", "title" and optionally "line", "side", "detail":',
        '  - "path": a changed path, exactly as listed above;',
        '  - "severity": "blocker", "major", "minor" or "nit";',
        f'  - "title": one line of at most {MAX_TITLE} characters;',
        '  - "line": a line number of the file on "side";',
        '  - "side": "RIGHT" (the head file, the default) or "LEFT" (the merge-base file: only its changed lines;',
        '    a deleted file has only a LEFT side);',
        f'  - "detail": text of at most {MAX_DETAIL} characters.',
        '- "coverage": every changed path you reviewed, exactly as listed above. Every changed path must appear',
        "  in it, or the review is not complete.",
        '- "limitations": each thing you could not do, as a string; [] when there is none.',
        "",
        "No string may hold a control character other than tab and newline.",
    ]


def render_prompt(inputs: AgentInputs) -> str:
    """The invocation prompt for ``inputs`` (pure; the same inputs give the same text)."""
    head = ["# Review request", "", "This request says where the review's inputs are and what to print. How to review is the "
            "procedure's alone.", ""]
    sections = [_identity(inputs), _where(inputs), _paths(inputs), _contract()]
    return "\n".join(head + [line for s in sections for line in [*s, ""]]).rstrip("\n") + "\n"


__all__ = ["render_prompt"]
