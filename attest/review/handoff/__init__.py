"""After the handoff: verify it, run the review step from its four frozen images (docs/review.md).

:func:`verify_handoff` checks the signed handoff of ``attest bootstrap`` under the deployment's
trust policy and reads it as a :class:`Handoff`; :func:`run_review_step` runs the deployment's
reviewer from the bootstrap, runtime, base and procedure images only and keeps its
provider-neutral result (:func:`parse_result`) when it parses; :func:`stand_in_review` is the
demo's reviewer, which reads the Skill from the procedure bundle and reviews nothing.

    >>> from attest.attestation import load_policy
    >>> from attest.review.handoff import run_review_step
    >>> run = run_review_step("handoff.json", load_policy("trust.toml"), "/var/lib/attest",
    ...                       ["/usr/local/bin/reviewer"], out="result.json")
    >>> run.result.complete
"""

from __future__ import annotations

from ._codes import HandoffCode
from ._handoff import HANDOFF_PREDICATE, IMAGE_NAMES, Handoff, HandoffImage, parse_handoff, verify_handoff
from ._result import MAX_RESULT_BYTES, SEVERITIES, SIDES, ResultFinding, ReviewResult, parse_result
from ._run import (
    Confinement,
    ReviewerImage,
    ReviewRun,
    confine_reviewer,
    decide_images,
    reviewer_command,
    run_review_step,
    verify_can_confine,
    verify_reviewer_image,
)
from ._standin import STAND_IN_COMMAND, stand_in_review

__all__ = [
    "HANDOFF_PREDICATE",
    "IMAGE_NAMES",
    "MAX_RESULT_BYTES",
    "SEVERITIES",
    "SIDES",
    "STAND_IN_COMMAND",
    "Confinement",
    "Handoff",
    "HandoffCode",
    "HandoffImage",
    "ResultFinding",
    "ReviewResult",
    "ReviewRun",
    "ReviewerImage",
    "confine_reviewer",
    "decide_images",
    "parse_handoff",
    "parse_result",
    "reviewer_command",
    "run_review_step",
    "stand_in_review",
    "verify_can_confine",
    "verify_handoff",
    "verify_reviewer_image",
]
