"""Reason codes of the review step after the handoff (stable wire strings; see docs/review.md).

Failures of the layers below keep their own codes (``SIGNATURE_INVALID``, ``NOT_IN_STORE``,
``IMAGE_CHANGED``, ``IMAGE_CHANGED_DURING_EXEC``, ``ENV_REFUSED``, ...).
"""

from __future__ import annotations

from ...errors import ReasonCode


class HandoffCode(ReasonCode):
    HANDOFF_WRONG_PREDICATE = "HANDOFF_WRONG_PREDICATE"  # the verified statement is not a review-handoff/v1 statement
    HANDOFF_MALFORMED = "HANDOFF_MALFORMED"              # a field of the handoff predicate is missing, extra or of the wrong type
    HANDOFF_SUBJECT_MISMATCH = "HANDOFF_SUBJECT_MISMATCH"  # the statement's subjects are not exactly the predicate's four images
    HANDOFF_IMAGE_MISMATCH = "HANDOFF_IMAGE_MISMATCH"    # a stored image's path or backend, or the bundle's files, differ from the handoff
    REVIEWER_FAILED = "REVIEWER_FAILED"                  # the reviewer command exited non-zero (or was killed)
    REVIEWER_NOT_CONFINED = "REVIEWER_NOT_CONFINED"      # the reviewer cannot be confined here (and --unsafe-unconfined was not given)
    REVIEW_RESULT_INVALID = "REVIEW_RESULT_INVALID"      # the reviewer's output is not the provider-neutral result
    REVIEW_CHANGE_MISMATCH = "REVIEW_CHANGE_MISMATCH"    # the change image is not the review's (its review.json, surface or projections)
    REVIEWER_IMAGE_MISMATCH = "REVIEWER_IMAGE_MISMATCH"  # --reviewer is not the image its verified attestation names, or needs one


__all__ = ["HandoffCode"]
