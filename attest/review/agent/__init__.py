"""``attest review agent``: the adapter from any agent CLI to the provider-neutral review result (docs/review-agent.md).

It runs inside the reviewer's confinement (``attest review exec --review ID``). It reads the
change image strictly (:func:`read_inputs`), renders a thin prompt that points at the procedure
bundle (:func:`render_prompt`), runs the agent CLI once with it (:func:`run_command`), parses
its output with one strict parser (:func:`parse_output`) and checks every anchor and the
coverage against the changed surface (:func:`decide_result`). Only a valid result is printed.

    >>> import os
    >>> from attest.review.agent import result_json, review_agent
    >>> print(result_json(review_agent(["claude", "-p", "{prompt}"], environ=os.environ)))
"""

from __future__ import annotations

from ._change import (
    CHANGE_FORMAT,
    AgentInputs,
    ChangeReview,
    NotMaterialized,
    Projection,
    check_consistent,
    head_line_count,
    parse_review,
    parse_surface,
    read_inputs,
)
from ._codes import AgentCode
from ._decide import BLOCKING, SEVERITY, anchor_problem, coverage_limitations, decide_result, result_finding, result_json
from ._parse import MAX_FINDINGS, AgentFinding, AgentOutput, extract_block, parse_document, parse_output, unfence
from ._prompt import render_prompt
from ._run import DEFAULT_TIMEOUT, PROMPT, PROMPT_FILE, check_options, result_of, review_agent, run_command, substitute

__all__ = [
    "BLOCKING",
    "CHANGE_FORMAT",
    "DEFAULT_TIMEOUT",
    "MAX_FINDINGS",
    "PROMPT",
    "PROMPT_FILE",
    "SEVERITY",
    "AgentCode",
    "AgentFinding",
    "AgentInputs",
    "AgentOutput",
    "ChangeReview",
    "NotMaterialized",
    "Projection",
    "anchor_problem",
    "check_consistent",
    "check_options",
    "coverage_limitations",
    "decide_result",
    "extract_block",
    "head_line_count",
    "parse_document",
    "parse_output",
    "parse_review",
    "parse_surface",
    "read_inputs",
    "render_prompt",
    "result_finding",
    "result_json",
    "result_of",
    "review_agent",
    "run_command",
    "substitute",
    "unfence",
]
