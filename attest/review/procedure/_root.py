"""The frozen root a review state names, established again (docs/review.md "attest review recheck", repeated by serialize).

A review's analysis used four frozen images and two retained projections. Before a recheck can
say ``proceed`` (and so before anything is serialized) :func:`reestablish_root` takes each image
from the store again, verified (seal, every byte, seal) under the store's shared lock, requires it
to be the state's exactly (identity, store path, backend), and retains the semantic and adapter
bytes again from the frozen base image, checked against the digests the state recorded: the same
retained identities the analysis used, never a mutable projection path.

What cannot be established is returned as findings, each with the code of the layer that refused
(``NOT_IN_STORE``, ``IMAGE_CHANGED``, ``RETAINED_MISMATCH``, ...) or
``REVIEW_ROOT_MISMATCH``; :func:`~attest.review.procedure.decide_recheck` makes them a
``restart``: the trusted root must be bootstrapped again.

    >>> problems, root = reestablish_root("/var/lib/attest", state.doc)
    >>> root.adapter.data if root else problems
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ...errors import AttestError, EnvironmentFailure, Finding
from ...freeze import Store, retain_file
from ...freeze._state import open_state, state_lock
from ..handoff import IMAGE_NAMES
from ._change import CheckedDoc, decide_change, read_image_file
from ._codes import RecheckCode

if TYPE_CHECKING:
    from ...freeze import Image, RetainedBytes

MAX_PROJECTION_BYTES = 16 << 20


@dataclass(frozen=True, slots=True)
class ReviewRoot:
    """The re-established root: the four verified images (by name) and the retained projections.

    Raises:
        Nothing.
    """

    images: Mapping[str, Image]  # by name
    semantic: RetainedBytes
    adapter: RetainedBytes

    def to_json(self) -> dict[str, object]:
        return {"images": {n: i.identity for n, i in self.images.items()},
                "projections": {"semantic": "sha256:" + self.semantic.sha256, "adapter": "sha256:" + self.adapter.sha256}}


def decide_root(state_images: CheckedDoc, images: Mapping[str, Image]) -> list[Finding]:
    """Whether the verified store images are exactly the ones the review state records (pure).

    Raises:
        Nothing: every difference is a ``REVIEW_ROOT_MISMATCH`` finding.
    """
    found: list[Finding] = []
    for name in IMAGE_NAMES:
        want, got = state_images.get(name), images.get(name)
        if not isinstance(want, Mapping) or got is None:
            found.append(Finding(RecheckCode.REVIEW_ROOT_MISMATCH, None, f"the {name} image is not established"))
            continue
        for field in ("identity", "path", "backend"):
            if getattr(got, field) != want.get(field):
                found.append(Finding(RecheckCode.REVIEW_ROOT_MISMATCH, got.path, f"the {name} image's {field} is "
                                     f"{getattr(got, field)!r}; the review's is {want.get(field)!r}"))
    return found


def _change_holds(store: Store, doc: CheckedDoc) -> list[Finding]:
    """The change image of the state ``doc``, taken from ``store`` (verified) and checked against the state; what is wrong."""

    change = doc.get("change")
    if not isinstance(change, Mapping):
        return [Finding(RecheckCode.REVIEW_ROOT_MISMATCH, None, "the review state records no change image")]
    try:
        image = store.get(change["identity"])
    except EnvironmentFailure:
        raise
    except AttestError as e:
        return [Finding(f.code, f.path, f"the change image: {f.detail}") for f in e.findings]
    return [Finding(RecheckCode.REVIEW_ROOT_MISMATCH, f.path, f.detail)
            for f in decide_change(doc, doc["review"], image, lambda rel: read_image_file(image, rel))]


def reestablish_root(state_dir: str, doc: CheckedDoc) -> tuple[list[Finding], ReviewRoot | None]:
    """Take the state's four images from the store (verified) and retain its two projections again.

    Raises:
        Nothing for what the store, an image or a projection refuses: those are the returned
        findings (with their layer's codes). ``EnvironmentFailure`` from the state directory
        itself (``STATE_INSECURE``, ...) propagates: that is not a fact about this review.
    """

    state_fd = open_state(state_dir, create=False)
    try:
        with state_lock(state_fd, exclusive=False):
            store = Store(state_dir)
            images: dict[str, Image] = {}
            found: list[Finding] = []
            for name in IMAGE_NAMES:
                try:
                    images[name] = store.get(doc["images"][name]["identity"])
                except EnvironmentFailure:
                    raise
                except AttestError as e:
                    found += [Finding(f.code, f.path, f"the {name} image: {f.detail}") for f in e.findings]
            found += decide_root(doc["images"], images) if not found else []
            if found:
                return found, None
            base = images["base"]
            kept = {}
            for role in ("semantic", "adapter"):
                proj = doc["projections"][role]
                if proj.get("image") != base.identity or proj.get("retained") != "sha256:" + str(proj.get("sha256")):
                    found.append(Finding(RecheckCode.REVIEW_ROOT_MISMATCH, proj.get("path"), f"the {role} projection was not "
                                         "retained from the base image with its locked digest"))
                    continue
                try:
                    kept[role] = retain_file(base, proj["path"], proj["sha256"], max_bytes=MAX_PROJECTION_BYTES)
                except EnvironmentFailure:
                    raise
                except AttestError as e:
                    found += [Finding(f.code, f.path, f"the {role} projection: {f.detail}") for f in e.findings]
            if found:
                return found, None
            found += _change_holds(store, doc)
            if found:
                return found, None
            return [], ReviewRoot(images, kept["semantic"], kept["adapter"])
    finally:
        os.close(state_fd)


__all__ = ["MAX_PROJECTION_BYTES", "ReviewRoot", "decide_root", "reestablish_root"]
