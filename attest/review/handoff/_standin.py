"""The demo's stand-in reviewer: reads the Skill from the procedure bundle, reviews nothing, says so.

It runs inside ``attest review exec`` (normally as the runtime image's own
``$ATTEST_IMAGE_RUNTIME/bin/attest review stand-in``) and reads only the procedure bundle:
``SKILL.md`` and every reference its front matter declares, each a regular file. Its result is
honest: ``complete`` is false and the limitation names the exact Skill bytes it read.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from ..._digest import sha256_of
from ..._safefs import read_regular
from ...errors import InputError
from ._codes import HandoffCode
from ._result import ReviewResult

MAX_SKILL_FILE = 1 << 20
#: How ``attest review exec`` runs the stand-in: the runtime image's own ``attest``, never the caller's.
STAND_IN_COMMAND = ("/bin/sh", "-c", 'exec "$ATTEST_IMAGE_RUNTIME/bin/attest" review stand-in')


def stand_in_review(environ: Mapping[str, str]) -> ReviewResult:
    """Read ``SKILL.md`` and its references from ``$ATTEST_IMAGE_PROCEDURE``; return an honest 'no analysis' result.

    Raises:
        InputError: ``REVIEWER_FAILED`` when there is no procedure bundle or a Skill file is
            missing, not a regular file or too large; ``SKILL_FRONT_MATTER`` for a bad SKILL.md.
    """
    # lazy: attest.policy, +28 ms to the confined reviewer's start-up (review agent imports review.handoff for the result's parser)
    from ...policy import SkillFrontMatter

    bundle = environ.get("ATTEST_IMAGE_PROCEDURE")
    if not bundle or not os.path.isabs(bundle):
        raise InputError(HandoffCode.REVIEWER_FAILED, "no procedure bundle: run me through `attest review exec`")

    def read(rel: str) -> bytes:
        try:
            data = read_regular(os.path.join(bundle, rel), MAX_SKILL_FILE)
        except OSError as e:
            raise InputError(HandoffCode.REVIEWER_FAILED, f"cannot read the Skill file: {e.strerror}", rel) from e
        if len(data) > MAX_SKILL_FILE:
            raise InputError(HandoffCode.REVIEWER_FAILED, f"over {MAX_SKILL_FILE} bytes", rel)
        return data

    skill = read("SKILL.md")
    front = SkillFrontMatter.from_bytes(skill)
    digests = [f"SKILL.md {sha256_of(skill)}"]
    digests += [f"{ref} {sha256_of(read(ref))}" for ref in front.references]
    note = (f"stand-in reviewer: no analysis was performed; it read the '{front.name}' Skill from the procedure bundle only ("
            + "; ".join(digests) + ")")
    return ReviewResult(False, (note,), ())


__all__ = ["STAND_IN_COMMAND", "stand_in_review"]
