"""The handoff after the bootstrap: verify it, then read it as a typed value (docs/bootstrap.md, step 9).

:func:`verify_handoff` checks the signature under the deployment's trust policy, then
:func:`parse_handoff` (pure) reads the exact signed payload: a ``review-handoff/v1`` statement
whose subjects are exactly its four images, each ``sha256:<hex>`` identity equal to its subject.
Nothing of the handoff is trusted before the signature verified.

    >>> handoff = verify_handoff("handoff.json", load_policy("/etc/attest/trust.toml"))
    >>> handoff.images["procedure"].identity
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any

from ...errors import VerificationError
from ._codes import HandoffCode

HANDOFF_PREDICATE = "https://attest.dev/review-handoff/v1"
IMAGE_NAMES = ("bootstrap", "runtime", "base", "procedure")
_PREDICATE_KEYS = frozenset({"repository", "pull_request", "base", "images", "installation", "runtime", "config", "lock",
                             "toolchain", "outputs", "procedure", "time"})
_IDENTITY = re.compile(r"sha256:[0-9a-f]{64}\Z")
_HEX64 = re.compile(r"[0-9a-f]{64}\Z")
_SHA = re.compile(r"(?:[0-9a-f]{40}|[0-9a-f]{64})\Z")
_SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,199}\Z")  # one path component, never '..'
_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\Z")


@dataclass(frozen=True, slots=True)
class HandoffImage:
    """One of the four images as the handoff names it."""

    identity: str
    path: str
    backend: str


@dataclass(frozen=True, slots=True)
class Handoff:
    """A verified handoff: who it is for, what was established, and the four images.

    Raises:
        Nothing: made by :func:`parse_handoff`, which validates every field; ``to_json``
        only encodes them.
    """

    attestation_digest: str
    signers: tuple[str, ...]
    repository_id: int
    full_name: str
    pull_request_id: int
    number: int
    base_commit: str
    base_tree: str
    toolchain_revision: str
    runtime_name: str
    runtime_attestation_digest: str
    images: dict[str, HandoffImage]
    procedure_files: tuple[tuple[str, str], ...]  # (path inside the bundle, sha256 hex), sorted
    time: str

    def to_json(self) -> dict[str, Any]:
        return {
            "handoff_digest": self.attestation_digest,
            "signers": list(self.signers),
            "repository": {"id": self.repository_id, "full_name": self.full_name},
            "pull_request": {"id": self.pull_request_id, "number": self.number},
            "base": {"commit": self.base_commit, "tree": self.base_tree},
            "images": {n: {"identity": i.identity, "path": i.path, "backend": i.backend} for n, i in self.images.items()},
            "time": self.time,
        }


def _bad(detail: str) -> VerificationError:
    return VerificationError(HandoffCode.HANDOFF_MALFORMED, detail)


def _obj(doc: Any, key: str, fields: set[str]) -> dict[str, Any]:
    value = doc.get(key) if isinstance(doc, dict) else None
    if not isinstance(value, dict) or not fields <= set(value):
        raise _bad(f"{key} must be an object with {sorted(fields)}")
    return value


def _int(value: Any, what: str) -> int:
    if type(value) is not int or value <= 0:
        raise _bad(f"{what} must be a positive integer")
    return value


def _str(value: Any, what: str, pattern: re.Pattern[str] | None = None) -> str:
    if not isinstance(value, str) or not value or (pattern is not None and not pattern.match(value)):
        raise _bad(f"{what} is not a valid value")
    return value


def parse_handoff(statement: dict[str, Any], *, attestation_digest: str, signers: tuple[str, ...]) -> Handoff:
    """Read a verified statement as a :class:`Handoff` (pure); raise ``VerificationError`` otherwise.

    Raises:
        VerificationError: ``HANDOFF_WRONG_PREDICATE`` (not a ``review-handoff/v1``
            statement), ``HANDOFF_MALFORMED`` (a predicate field missing, extra or of the wrong
            type), ``HANDOFF_SUBJECT_MISMATCH`` (the subjects are not exactly the four images).
    """
    if statement.get("predicateType") != HANDOFF_PREDICATE:
        raise VerificationError(HandoffCode.HANDOFF_WRONG_PREDICATE,
                                f"the statement's predicate type is {str(statement.get('predicateType'))[:200]!r}, not {HANDOFF_PREDICATE}")
    pred = statement.get("predicate")
    if not isinstance(pred, dict) or set(pred) != _PREDICATE_KEYS:
        raise _bad(f"the predicate must have exactly the fields {sorted(_PREDICATE_KEYS)}")
    repo = _obj(pred, "repository", {"id", "full_name"})
    pr = _obj(pred, "pull_request", {"id", "number"})
    base = _obj(pred, "base", {"commit", "tree"})
    toolchain = _obj(pred, "toolchain", {"revision"})
    procedure = _obj(pred, "procedure", {"files"})
    runtime = _obj(pred, "runtime", {"name", "attestation_digest"})
    raw_images = pred["images"]
    if not isinstance(raw_images, dict) or set(raw_images) != set(IMAGE_NAMES):
        raise _bad(f"images must name exactly {list(IMAGE_NAMES)}")
    images: dict[str, HandoffImage] = {}
    for name in IMAGE_NAMES:
        entry = _obj(raw_images, name, {"identity", "path", "backend"})
        path = _str(entry["path"], f"images.{name}.path")
        if not os.path.isabs(path):
            raise _bad(f"images.{name}.path must be absolute")
        images[name] = HandoffImage(_str(entry["identity"], f"images.{name}.identity", _IDENTITY), path,
                                    _str(entry["backend"], f"images.{name}.backend"))
    # The subjects are what was signed over: exactly the four images, each once, by identity.
    subjects = statement.get("subject")
    named = {s.get("name"): s.get("digest") for s in subjects if isinstance(s, dict)} if isinstance(subjects, list) else {}
    want = {n: {"sha256": images[n].identity.removeprefix("sha256:")} for n in IMAGE_NAMES}
    if not isinstance(subjects, list) or len(subjects) != len(IMAGE_NAMES) or named != want:
        raise VerificationError(HandoffCode.HANDOFF_SUBJECT_MISMATCH,
                                "the statement's subjects are not exactly the four images of the predicate")
    files = procedure["files"]
    if not isinstance(files, list) or not files:
        raise _bad("procedure.files must be a non-empty list")
    parsed: list[tuple[str, str]] = []
    for f in files:
        if not isinstance(f, dict) or set(f) != {"path", "sha256"}:
            raise _bad("each procedure file must be {path, sha256}")
        parsed.append((_str(f["path"], "procedure file path"), _str(f["sha256"], "procedure file sha256", _HEX64)))
    if sorted(parsed) != parsed or len({p for p, _ in parsed}) != len(parsed):
        raise _bad("procedure.files must be sorted by path, each path once")
    return Handoff(
        attestation_digest=attestation_digest,
        signers=signers,
        repository_id=_int(repo["id"], "repository.id"),
        full_name=_str(repo["full_name"], "repository.full_name"),
        pull_request_id=_int(pr["id"], "pull_request.id"),
        number=_int(pr["number"], "pull_request.number"),
        base_commit=_str(base["commit"], "base.commit", _SHA),
        base_tree=_str(base["tree"], "base.tree", _SHA),
        toolchain_revision=_str(toolchain["revision"], "toolchain.revision", _SHA),
        runtime_name=_str(runtime["name"], "runtime.name", _SAFE_NAME),
        runtime_attestation_digest=_str(runtime["attestation_digest"], "runtime.attestation_digest", _IDENTITY),
        images=images,
        procedure_files=tuple(parsed),
        time=_str(pred["time"], "time", _TIME),
    )


def verify_handoff(path: str | os.PathLike[str], policy: Any) -> Handoff:
    """Verify the handoff file's signature under ``policy`` (TRUST), then parse it; raise otherwise.

    Raises:
        InputError: the file is unreadable or not an attestation (``UNREADABLE``, ``BAD_JSON``, ...).
        VerificationError: no trusted signature (the attestation layer's codes), or
            ``HANDOFF_WRONG_PREDICATE``, ``HANDOFF_MALFORMED``, ``HANDOFF_SUBJECT_MISMATCH``.
    """
    from ...attestation import verify_attestation_file

    verified = verify_attestation_file(path, policy)
    return parse_handoff(verified.statement, attestation_digest=verified.attestation_digest, signers=verified.signers)


__all__ = ["HANDOFF_PREDICATE", "IMAGE_NAMES", "Handoff", "HandoffImage", "parse_handoff", "verify_handoff"]
