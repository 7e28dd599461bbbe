"""Reason codes of the release checks the review layer runs for `attest promote` (docs/build.md, "Promotion")."""

from __future__ import annotations

from ...errors import ReasonCode


class ReleaseCode(ReasonCode):
    FIXTURE_CONSUMER_BAD = "FIXTURE_CONSUMER_BAD"          # the shipped fixture consumer files are missing or malformed
    PROMOTION_FIXTURE_FAILED = "PROMOTION_FIXTURE_FAILED"  # the candidate failed the fixture bootstrap or review start
