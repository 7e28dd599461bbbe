"""Reason codes of a release promotion: independent rebuilders, pinned identities, the promotion log (docs/build.md)."""

from __future__ import annotations

from ..errors import ReasonCode


class PromotionCode(ReasonCode):
    # The release policy's [rebuilders] table and the rebuild results (k of n independent rebuilds).
    BAD_REBUILDERS = "BAD_REBUILDERS"                        # the [rebuilders] table is malformed or names no signer of the policy
    REBUILDERS_NOT_CONFIGURED = "REBUILDERS_NOT_CONFIGURED"  # no [rebuilders] table, and no --unsafe-without-rebuilders
    REBUILD_RESULT_UNTRUSTED = "REBUILD_RESULT_UNTRUSTED"    # a rebuild result no rebuilder identity signed
    REBUILD_RESULT_MALFORMED = "REBUILD_RESULT_MALFORMED"    # a signed rebuild result that is not a rebuild/v1 statement
    REBUILD_RESULT_OTHER_CANDIDATE = "REBUILD_RESULT_OTHER_CANDIDATE"  # a rebuild of other revisions or repositories
    REBUILD_DISAGREEMENT = "REBUILD_DISAGREEMENT"            # a trusted rebuilder rebuilt other bytes (a negative result is written)
    REBUILDERS_THRESHOLD_NOT_MET = "REBUILDERS_THRESHOLD_NOT_MET"  # fewer distinct agreeing rebuilders than the threshold
    # Pinned identities other than the toolchain SHA.
    PINNED_IDENTITY_CHANGED = "PINNED_IDENTITY_CHANGED"      # the interpreter, lock, a repository or the skill root would change
    # The append-only promotion log beside the pins.
    PROMOTION_LOG_MISSING = "PROMOTION_LOG_MISSING"          # no log (or no entry) where one is verified
    PROMOTION_LOG_BAD_ENTRY = "PROMOTION_LOG_BAD_ENTRY"      # an entry that does not verify under the release policy or parse
    PROMOTION_LOG_UNEXPECTED_FILE = "PROMOTION_LOG_UNEXPECTED_FILE"  # a name in the log directory that is not an entry
    PROMOTION_LOG_GAP = "PROMOTION_LOG_GAP"                  # an entry number is missing (removed entry)
    PROMOTION_LOG_OUT_OF_ORDER = "PROMOTION_LOG_OUT_OF_ORDER"  # an entry's sequence number is not its place
    PROMOTION_LOG_BROKEN_LINK = "PROMOTION_LOG_BROKEN_LINK"  # an entry does not name the previous entry's digest
    PROMOTION_LOG_PINS_MISMATCH = "PROMOTION_LOG_PINS_MISMATCH"  # the pins file is not what the last entry wrote
    PROMOTION_LOG_CONFLICT = "PROMOTION_LOG_CONFLICT"        # the log changed during the promotion
    # The consumer's remembered checkpoint (rollback and fork protection, as TUF clients keep).
    PROMOTION_LOG_ROLLBACK = "PROMOTION_LOG_ROLLBACK"        # the log ends below a sequence this consumer accepted (or was given)
    PROMOTION_LOG_FORK = "PROMOTION_LOG_FORK"                # another entry at a sequence this consumer accepted (or was given)
    PROMOTION_LOG_CHECKPOINT_INVALID = "PROMOTION_LOG_CHECKPOINT_INVALID"  # the remembered checkpoint file is unsafe or malformed
