"""Running the review step from the four frozen images of a verified handoff (issue 12, item 4).

1. The handoff verifies under TRUST (:func:`~attest.review.handoff.verify_handoff`).
2. Each of the four images is taken from the store and verified (seal, every byte, seal) by
   :func:`attest.freeze.run_from_images`, under the store's shared lock; then, before anything
   runs, each must be the handoff's image exactly: identity, store path and backend, and the
   procedure bundle's files exactly the handoff's (:func:`decide_images`, pure).
3. The reviewer runs with ``attest exec``'s clean environment: ``ATTEST_IMAGE_BOOTSTRAP``,
   ``ATTEST_IMAGE_RUNTIME``, ``ATTEST_IMAGE_BASE`` and ``ATTEST_IMAGE_PROCEDURE``, working
   directory the base snapshot. After the handoff the procedure bundle is the only source of
   Skill bytes: the installed Skill, the worktree and the head are not given to it.
4. Its standard output must be the provider-neutral result (:func:`parse_result`); it is written
   atomically to the result file only when it parses, and every image is re-checked after the
   command (a change while it ran fails closed, whatever it printed).

    >>> run = run_review_step("handoff.json", load_policy("trust.toml"), "/var/lib/attest",
    ...                       ["/bin/sh", "-c", 'exec "$ATTEST_IMAGE_RUNTIME/bin/attest" review stand-in'], out="result.json")
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ...errors import EnvironmentFailure, Finding, VerificationError
from ._codes import HandoffCode
from ._handoff import IMAGE_NAMES, Handoff, verify_handoff
from ._result import MAX_RESULT_BYTES, ReviewResult, parse_result


def decide_images(handoff: Handoff, images: Mapping[str, Any]) -> list[Finding]:
    """Whether the verified store images are exactly the handoff's (pure: identity, path, backend, bundle files)."""
    found: list[Finding] = []
    for name in IMAGE_NAMES:
        want, got = handoff.images[name], images.get(name.upper())
        if got is None:
            found.append(Finding(HandoffCode.HANDOFF_IMAGE_MISMATCH, None, f"the {name} image was not resolved"))
            continue
        for field in ("identity", "path", "backend"):
            if getattr(got, field) != getattr(want, field):
                found.append(Finding(HandoffCode.HANDOFF_IMAGE_MISMATCH, got.path,
                                     f"the {name} image's {field} is {getattr(got, field)!r}, the handoff's {getattr(want, field)!r}"))
    bundle = images.get("PROCEDURE")
    inventory = getattr(bundle, "inventory", None)
    if bundle is not None and inventory is not None:
        files = tuple(sorted((e.path, e.sha256) for e in inventory.entries if e.sha256 is not None))
        if files != handoff.procedure_files:
            found.append(Finding(HandoffCode.HANDOFF_IMAGE_MISMATCH, bundle.path,
                                 "the procedure bundle's files are not exactly the handoff's procedure files"))
    elif bundle is not None:
        found.append(Finding(HandoffCode.HANDOFF_IMAGE_MISMATCH, bundle.path, "the procedure bundle has no inventory to compare"))
    return found


@dataclass(frozen=True, slots=True)
class ReviewRun:
    handoff: Handoff
    result: ReviewResult
    result_path: str
    result_digest: str

    def to_json(self) -> dict[str, Any]:
        return {"ok": True, "handoff_digest": self.handoff.attestation_digest, "result": self.result_path,
                "result_digest": self.result_digest, "complete": self.result.complete,
                "findings": len(self.result.findings), "blocking": sum(f.blocking for f in self.result.findings),
                "images": {n: i.identity for n, i in self.handoff.images.items()}}


def run_review_step(
    handoff_path: str | os.PathLike[str],
    policy: Any,
    state_dir: str | os.PathLike[str],
    argv: Sequence[str],
    *,
    out: str | os.PathLike[str],
    pass_env: Sequence[str] = (),
    set_env: Mapping[str, str] | None = None,
) -> ReviewRun:
    """Verify the handoff, run ``argv`` from its four frozen images, write the parsed result to ``out``.

    Raises:
        InputError: unreadable handoff, bad command or environment (``BAD_EXEC_ENV``,
            ``ENV_REFUSED``), an unwritable ``out`` (``BAD_OUTPUT_PATH``).
        VerificationError: the handoff does not verify (``HANDOFF_*``, the attestation codes), an
            image is missing or changed (``NOT_IN_STORE``, ``IMAGE_*``, ``HANDOFF_IMAGE_MISMATCH``,
            ``IMAGE_CHANGED_DURING_EXEC``), or the output is not a result (``REVIEW_RESULT_INVALID``).
        EnvironmentFailure: the reviewer exited non-zero (``REVIEWER_FAILED``).
    """
    from ..._fs import write_atomic
    from ...freeze import run_from_images

    handoff = verify_handoff(handoff_path, policy)  # (1)

    def require(images: Mapping[str, Any]) -> None:  # (2), under the store lock, before the reviewer runs
        problems = decide_images(handoff, images)
        if problems:
            raise VerificationError(findings=problems)

    fd = os.memfd_create("attest-review-result", os.MFD_CLOEXEC)
    try:
        refs = {name.upper(): handoff.images[name].identity for name in IMAGE_NAMES}
        rc = run_from_images(state_dir, refs, argv, cwd_image="BASE", pass_env=pass_env, set_env=set_env, stdout=fd,
                             before=require)  # (3)
        if rc != 0:
            raise EnvironmentFailure(HandoffCode.REVIEWER_FAILED, f"the reviewer exited {rc}; no result was written", argv[0])
        size = os.fstat(fd).st_size
        if size > MAX_RESULT_BYTES:
            raise VerificationError(HandoffCode.REVIEW_RESULT_INVALID, f"the reviewer printed {size} bytes (at most {MAX_RESULT_BYTES})")
        data = os.pread(fd, size, 0) if size else b""
    finally:
        os.close(fd)
    result = parse_result(data)  # (4)
    path = os.path.abspath(os.fspath(out))
    canonical = _canonical(result.to_json())
    write_atomic(path, canonical, mode=0o644, what="review result")
    return ReviewRun(handoff, result, path, "sha256:" + hashlib.sha256(canonical).hexdigest())


def _canonical(doc: Any) -> bytes:
    from ..._json import canonical_bytes

    return canonical_bytes(doc)


__all__ = ["ReviewRun", "decide_images", "run_review_step"]
