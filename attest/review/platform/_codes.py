"""Reason codes of the GitHub adapter (stable wire strings; see docs/github.md)."""

from __future__ import annotations

from ...errors import ReasonCode


class PlatformCode(ReasonCode):
    PLATFORM_REQUEST_FAILED = "PLATFORM_REQUEST_FAILED"      # a read or write of the hosting API got no complete, well-formed answer (nothing retried)
    PLATFORM_RESPONSE_SHAPE = "PLATFORM_RESPONSE_SHAPE"      # the API answered with JSON that is not the documented shape
    PUBLISH_PAYLOAD_MISMATCH = "PUBLISH_PAYLOAD_MISMATCH"    # the payload's bytes are not the ones the verified record names (or not a review payload of its head)
    PUBLISH_OTHER_PULL_REQUEST = "PUBLISH_OTHER_PULL_REQUEST"  # the record is of another repository or pull request than --github/--pr
    PUBLISH_HEAD_MOVED = "PUBLISH_HEAD_MOVED"                # the pull request's head or base is no longer the record's: review the new head
    PUBLISH_DUPLICATE = "PUBLISH_DUPLICATE"                  # more than one review on the pull request carries this record's marker (also: another publisher's, read right after posting)
    PUBLISH_EXISTING_MISMATCH = "PUBLISH_EXISTING_MISMATCH"  # a review carrying this record's marker is not the record's review (commit, event or body)
    PUBLISH_UNCONFIRMED = "PUBLISH_UNCONFIRMED"              # the create call got no answer and no review with the marker is there (yet): run publish again, it reads first
    PUBLISH_READBACK_MISMATCH = "PUBLISH_READBACK_MISMATCH"  # the created review, read back, is not what was posted (another commit, event or body; with --app-login, another author)
    STATUS_READBACK_MISMATCH = "STATUS_READBACK_MISMATCH"    # the posted commit status came back for another commit, context or state
    MERGE_UNRESOLVED_THREADS = "MERGE_UNRESOLVED_THREADS"    # the pull request has unresolved review threads
    MERGE_NOT_MERGEABLE = "MERGE_NOT_MERGEABLE"              # the host says the pull request cannot be merged (a conflict, closed or already merged)
    MERGE_MERGEABILITY_UNKNOWN = "MERGE_MERGEABILITY_UNKNOWN"  # the host has not computed mergeability (or the test merge) yet: ask again
    MERGE_HEAD_MOVED = "MERGE_HEAD_MOVED"                    # the head or base moved between the gate's reads, or the host refused the head-pinned merge (409)
    MERGE_REFUSED = "MERGE_REFUSED"                          # the host refused the merge (405: not mergeable, a required status, a protection rule)
    MERGE_UNCONFIRMED = "MERGE_UNCONFIRMED"                  # the merge call got no answer and the pull request, read back, is not merged
    MERGE_COMMIT_MISMATCH = "MERGE_COMMIT_MISMATCH"          # merged, but the merge commit is not the reviewed head merged into the base (parents, tree, the pull request's merge commit, the base branch), or that cannot be read back: investigate
    MERGE_BAD_METHOD = "MERGE_BAD_METHOD"                    # --method is not merge or squash


__all__ = ["PlatformCode"]
