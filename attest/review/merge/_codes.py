"""Reason codes of `attest merge-gate` (stable wire strings; see docs/review.md "`attest merge-gate check`")."""

from __future__ import annotations

from ...errors import ReasonCode


class MergeGateCode(ReasonCode):
    MERGE_AUTHORIZED = "MERGE_AUTHORIZED"                    # every piece holds: a complete review and CI for the exact head
    MERGE_RECORD_MALFORMED = "MERGE_RECORD_MALFORMED"        # a verified review record or CI result whose predicate is not the documented shape
    MERGE_REVIEW_OTHER_PULL_REQUEST = "MERGE_REVIEW_OTHER_PULL_REQUEST"  # the record is of another repository or pull request
    MERGE_REVIEW_STALE_HEAD = "MERGE_REVIEW_STALE_HEAD"      # the record is of another head than the host's current one
    MERGE_REVIEW_STALE_BASE = "MERGE_REVIEW_STALE_BASE"      # the record is of another base commit than the host's current one
    MERGE_REVIEW_NOT_COMPLETE = "MERGE_REVIEW_NOT_COMPLETE"  # the review was limited, partial or failed: it never authorizes
    MERGE_BLOCKING_FINDINGS = "MERGE_BLOCKING_FINDINGS"      # the review (or another analysis of this head commit in this repository, any pull request) has blocking findings
    MERGE_REVIEW_UNCONFINED = "MERGE_REVIEW_UNCONFINED"      # the reviewer ran with --unsafe-unconfined
    MERGE_HEAD_FAILED_ANALYSIS = "MERGE_HEAD_FAILED_ANALYSIS"  # another analysis of the exact head failed (no valid result): only a new head recovers
    MERGE_ANALYSIS_UNFINISHED = "MERGE_ANALYSIS_UNFINISHED"  # a run of the exact head has no outcome yet (running, or interrupted)
    MERGE_CI_MISSING = "MERGE_CI_MISSING"                    # no signed result of a required check for the exact head
    MERGE_CI_STALE_BASE = "MERGE_CI_STALE_BASE"              # a required check's results for the exact head ran against another base, or name none
    MERGE_CI_FAILED = "MERGE_CI_FAILED"                      # a required check's result for the exact head is not success
    MERGE_TRUSTED_PRODUCER_MISSING = "MERGE_TRUSTED_PRODUCER_MISSING"  # the deployment asks for trusted-producer evidence; it is not true
    MERGE_NO_REQUIRED_CHECK = "MERGE_NO_REQUIRED_CHECK"      # no --require-check: a gate with no CI requirement is refused


__all__ = ["MergeGateCode"]
