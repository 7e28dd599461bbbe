"""Reason codes of review evidence (stable wire strings; see docs/evidence.md).

Each trusted-producer verdict carries exactly one of these codes; the wrapper's diagnostic
reviews carry one of the ``OUTPUT_*`` / ``*_BLOCK`` / ``*FINDING*`` codes.
"""

from __future__ import annotations

from ...errors import ReasonCode


class EvidenceCode(ReasonCode):
    # The only code of a `true` verdict.
    TRUSTED = "TRUSTED"
    # Configuration (exit 2).
    BAD_CONFIG = "BAD_CONFIG"
    TOKEN_MISSING = "TOKEN_MISSING"
    # Pull request: it must be explicitly known same-repository (docs/evidence.md "The decision, step by step").
    NOT_SAME_REPO = "NOT_SAME_REPO"
    PR_MISMATCH = "PR_MISMATCH"
    # Issue comments by the configured App login: a diagnostic or fallback (findings) comment for the head.
    BLOCKING_COMMENT = "BLOCKING_COMMENT"
    # Reviews by the configured App login on the exact head.
    NO_TRUSTED_REVIEW = "NO_TRUSTED_REVIEW"
    BLOCKING_REVIEW = "BLOCKING_REVIEW"
    RUN_MARKER_MISSING = "RUN_MARKER_MISSING"
    RUN_MARKER_AMBIGUOUS = "RUN_MARKER_AMBIGUOUS"
    # The base the run reviewed (BASE_SHA...HEAD_SHA) against the pull request's base.
    BASE_MARKER_MISSING = "BASE_MARKER_MISSING"
    BASE_MARKER_AMBIGUOUS = "BASE_MARKER_AMBIGUOUS"
    BASE_MISMATCH = "BASE_MISMATCH"
    # A person with write access edited an App review's body (GraphQL lastEditedAt / editor).
    REVIEW_EDITED = "REVIEW_EDITED"
    # Workflow runs.
    NO_MATCHING_RUN = "NO_MATCHING_RUN"
    RUN_WRONG_EVENT = "RUN_WRONG_EVENT"
    RUN_WRONG_WORKFLOW = "RUN_WRONG_WORKFLOW"
    RUN_NOT_BOUND = "RUN_NOT_BOUND"
    MISSING_RUN_ATTEMPT = "MISSING_RUN_ATTEMPT"
    RUN_PENDING = "RUN_PENDING"
    RUN_NOT_SUCCESS = "RUN_NOT_SUCCESS"
    STALE_ATTEMPT = "STALE_ATTEMPT"
    MARKER_MISMATCH = "MARKER_MISMATCH"
    # Jobs of the exact attempt.
    JOB_MISSING = "JOB_MISSING"
    JOB_AMBIGUOUS = "JOB_AMBIGUOUS"
    JOB_PENDING = "JOB_PENDING"
    JOB_NOT_SUCCESS = "JOB_NOT_SUCCESS"
    # The protected environment that holds the App's key (GET .../environments/{name}).
    ENVIRONMENT_MISSING = "ENVIRONMENT_MISSING"
    ENVIRONMENT_UNPROTECTED = "ENVIRONMENT_UNPROTECTED"
    ENVIRONMENT_MISMATCH = "ENVIRONMENT_MISMATCH"
    # Final authoritative head read.
    HEAD_MOVED = "HEAD_MOVED"
    BASE_MOVED = "BASE_MOVED"
    # Incomplete evidence and failed reads (always `unknown`).
    NOT_READ = "NOT_READ"
    LISTING_INCONSISTENT = "LISTING_INCONSISTENT"
    HTTP_ERROR = "HTTP_ERROR"
    HTTP_STATUS = "HTTP_STATUS"
    GRAPHQL_ERROR = "GRAPHQL_ERROR"
    RESPONSE_TOO_LARGE = "RESPONSE_TOO_LARGE"
    RESPONSE_NOT_JSON = "RESPONSE_NOT_JSON"
    RESPONSE_SHAPE = "RESPONSE_SHAPE"
    TOO_MANY_PAGES = "TOO_MANY_PAGES"
    BAD_LINK = "BAD_LINK"
    FOREIGN_LINK = "FOREIGN_LINK"
    # The review wrapper's diagnostics (the model output is not one valid findings block).
    OUTPUT_UNREADABLE = "OUTPUT_UNREADABLE"
    OUTPUT_TOO_LARGE = "OUTPUT_TOO_LARGE"
    OUTPUT_NOT_UTF8 = "OUTPUT_NOT_UTF8"
    OUTPUT_EMPTY = "OUTPUT_EMPTY"
    NO_FINDINGS_BLOCK = "NO_FINDINGS_BLOCK"
    MULTIPLE_FINDINGS_BLOCKS = "MULTIPLE_FINDINGS_BLOCKS"
    TEXT_OUTSIDE_BLOCK = "TEXT_OUTSIDE_BLOCK"
    BAD_FENCE = "BAD_FENCE"
    FINDINGS_NOT_JSON = "FINDINGS_NOT_JSON"
    FINDINGS_NOT_ARRAY = "FINDINGS_NOT_ARRAY"
    BAD_FINDING = "BAD_FINDING"
    TOO_MANY_FINDINGS = "TOO_MANY_FINDINGS"
