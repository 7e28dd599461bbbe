"""The merge gate (docs/review.md "attest merge-gate check"): review evidence is not a merge.

:func:`merge_gate_check` (``attest merge-gate check``) authorizes only a complete review record
for the exact current head (re-read from the host), with no blocking finding, plus a signed
``success`` CI result of every required check for that head, and trusted-producer evidence where
the deployment asks; it explains every missing piece. :func:`decide_merge` is the decision, pure.
:func:`sign_ci_result` (``attest merge-gate ci-result``) is how a CI job signs its result.

    >>> gate = merge_gate_check(record="record.json", policy=load_policy("trust.toml"), host=IdentityFile("identity.json"),
    ...                         ci=["ci-test.json"], required_checks=("test",))
"""

from __future__ import annotations

from ._codes import MergeGateCode
from ._gate import (
    CI_RESULT_PREDICATE,
    CONCLUSIONS,
    CiResult,
    MergeDecision,
    MergeGate,
    ReviewRecord,
    TrustedProducer,
    ci_result_predicate,
    decide_merge,
    github_trusted_producer,
    merge_gate_check,
    parse_ci_result,
    parse_review_record,
    record_confined,
    sign_ci_result,
    verify_review_record,
)

__all__ = [
    "CI_RESULT_PREDICATE",
    "CONCLUSIONS",
    "CiResult",
    "MergeDecision",
    "MergeGate",
    "MergeGateCode",
    "ReviewRecord",
    "TrustedProducer",
    "ci_result_predicate",
    "decide_merge",
    "github_trusted_producer",
    "merge_gate_check",
    "parse_ci_result",
    "parse_review_record",
    "record_confined",
    "sign_ci_result",
    "verify_review_record",
]
