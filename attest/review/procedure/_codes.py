"""Reason codes of `attest review start` (stable wire strings; see docs/review.md "`attest review start`").

Failures of the layers below keep their own codes: the handoff's (``HANDOFF_MALFORMED``,
``HANDOFF_IMAGE_MISMATCH``, ``NO_TRUSTED_SIGNATURE``, ...), the git layer's (``NOT_FULL_SHA``,
``OBJECT_MISSING``, ``NO_MERGE_BASE``, ``MULTIPLE_MERGE_BASES``, ...), the bootstrap's
(``BASE_TREE_MISMATCH``, ``API_TREE_MISMATCH``, ``BAD_HOST_OPTIONS``, ...), the freeze layer's
(``IMAGE_CHANGED``, ``RETAINED_MISMATCH``, ...) and the policy layer's path codes, which follow a
``REVIEW_BINDING_UNSAFE`` finding.
"""

from __future__ import annotations

from ...errors import ReasonCode


class ReviewStartCode(ReasonCode):
    # Identities re-read from the host against the handoff's.
    REVIEW_REPOSITORY_CHANGED = "REVIEW_REPOSITORY_CHANGED"      # the host's repository id or full name is not the handoff's
    REVIEW_PULL_REQUEST_CHANGED = "REVIEW_PULL_REQUEST_CHANGED"  # the host's pull-request id or number is not the handoff's
    REVIEW_BASE_MOVED = "REVIEW_BASE_MOVED"                      # the host's base commit is not the handoff's (bootstrap again)
    REVIEW_BASE_TREE_MISMATCH = "REVIEW_BASE_TREE_MISMATCH"      # the base commit's tree in GITDIR's objects is not the handoff's base tree
    REVIEW_AUTHORITY_MISMATCH = "REVIEW_AUTHORITY_MISMATCH"      # the snapshot's config or lock is not the one the handoff records
    REVIEW_STATE_FAILED = "REVIEW_STATE_FAILED"                  # the review state could not be written under STATE/reviews/
    REVIEW_CHANGE_TOO_LARGE = "REVIEW_CHANGE_TOO_LARGE"          # the change (head tree or diff) is larger than the change image may hold


class RecheckCode(ReasonCode):
    """Why ``attest review recheck`` decided as it did, and why it could not read a review (docs/review.md)."""

    # The decision's reasons (fail and restart reuse the ReviewStartCode and git codes of the same facts).
    REVIEW_UNCHANGED = "REVIEW_UNCHANGED"                # proceed: every identity is the state's
    REVIEW_HEAD_MOVED = "REVIEW_HEAD_MOVED"              # refresh: the pull request's head is another commit
    REVIEW_MERGE_BASE_MOVED = "REVIEW_MERGE_BASE_MOVED"  # refresh: the one merge base is another commit
    REVIEW_ROOT_MISMATCH = "REVIEW_ROOT_MISMATCH"        # restart: a verified store image or retained projection is not the review's
    # The review state itself.
    REVIEW_ID_INVALID = "REVIEW_ID_INVALID"              # --review is not 32 lowercase hex digits
    REVIEW_STATE_MISSING = "REVIEW_STATE_MISSING"        # no STATE/reviews/<id>.json
    REVIEW_STATE_MALFORMED = "REVIEW_STATE_MALFORMED"    # not canonical JSON of the documented shape (or a malformed recheck record)
    REVIEW_STATE_TAMPERED = "REVIEW_STATE_TAMPERED"      # its content does not hash to its id, or the id is not the file's name
    REVIEW_SUPERSEDED = "REVIEW_SUPERSEDED"              # an earlier recheck refreshed it into another review
    REVIEW_DISCARDED = "REVIEW_DISCARDED"                # an earlier recheck restarted it: every result of its root is discarded
    REVIEW_FAILED = "REVIEW_FAILED"                      # an earlier recheck failed it


class BindingCode(ReasonCode):
    """Why an output binding (``--semantic`` / ``--adapter``) fails closed; one code per kind of failure."""

    REVIEW_BINDING_MISSING = "REVIEW_BINDING_MISSING"            # the path is not a configured output, not in the lock, or not in the base tree
    REVIEW_BINDING_UNSAFE = "REVIEW_BINDING_UNSAFE"              # absolute, '..', symlinked component, reserved namespace, ... (the path code follows)
    REVIEW_BINDING_INEXACT = "REVIEW_BINDING_INEXACT"            # equals a configured output only after case folding or normalization
    REVIEW_BINDING_DUPLICATE = "REVIEW_BINDING_DUPLICATE"        # both roles name one path, or the path is configured or locked twice
    REVIEW_BINDING_DISABLED = "REVIEW_BINDING_DISABLED"          # the configured output is not enabled
    REVIEW_BINDING_ROLE_SWAPPED = "REVIEW_BINDING_ROLE_SWAPPED"  # --semantic names an adapter output, or --adapter the semantic one
    REVIEW_BINDING_UNSUPPORTED = "REVIEW_BINDING_UNSUPPORTED"    # the output's renderer is neither policy-context-md nor a supported adapter
    REVIEW_BINDING_AMBIGUOUS = "REVIEW_BINDING_AMBIGUOUS"        # another output collides with the path, or config and lock disagree on it
    REVIEW_BINDING_CONTEXT_MISMATCH = "REVIEW_BINDING_CONTEXT_MISMATCH"  # the two outputs name different contexts
    REVIEW_BINDING_NOT_REPRODUCED = "REVIEW_BINDING_NOT_REPRODUCED"      # not among the handoff's reproduced outputs, or reproduced with other bytes


class SerializeCode(ReasonCode):
    """Why ``attest review serialize`` (and ``review exec --review``) refused (docs/review.md)."""

    REVIEW_RESULT_NOT_OF_REVIEW = "REVIEW_RESULT_NOT_OF_REVIEW"  # no run of this review, or the result is not the bytes its run kept
    REVIEW_NOT_PROCEED = "REVIEW_NOT_PROCEED"                    # the recheck before writing decided refresh, restart or fail
    REVIEW_ADAPTER_UNSUPPORTED = "REVIEW_ADAPTER_UNSUPPORTED"    # the retained adapter bytes are not the transport this serializer implements
    REVIEW_PAYLOAD_TOO_LARGE = "REVIEW_PAYLOAD_TOO_LARGE"        # the body or a comment passes the adapter's limit; nothing is dropped
    REVIEW_ALREADY_SERIALIZED = "REVIEW_ALREADY_SERIALIZED"      # the review has its record: no second run, no second record
    REVIEW_ALREADY_RUN = "REVIEW_ALREADY_RUN"                    # the review's one run was claimed already (finished, failed, running or interrupted)
    REVIEW_HEAD_BLOCKED = "REVIEW_HEAD_BLOCKED"                  # another analysis of the exact head commit (this repository, any pull request) had blocking findings or failed: a clean one is not serialized
    REVIEW_AUTHORITY_CHANGES_MISMATCH = "REVIEW_AUTHORITY_CHANGES_MISMATCH"  # the state's authority_changes are not what its surface and the frozen base's config and lock give


__all__ = ["BindingCode", "RecheckCode", "ReviewStartCode", "SerializeCode"]
