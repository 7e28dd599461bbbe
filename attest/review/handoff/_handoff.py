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
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..._shape import MAX_SAFE_INT, Shape
from ...errors import VerificationError
from ...inventory import check_path
from ._codes import HandoffCode

if TYPE_CHECKING:
    from ...attestation import Policy

HANDOFF_PREDICATE = "https://attest.dev/review-handoff/v1"
IMAGE_NAMES = ("bootstrap", "runtime", "base", "procedure")
_PREDICATE_KEYS = frozenset({"repository", "pull_request", "base", "images", "installation", "runtime", "config", "lock",
                             "toolchain", "outputs", "procedure", "time"})
_IDENTITY = re.compile(r"sha256:[0-9a-f]{64}\Z")
_HEX64 = re.compile(r"[0-9a-f]{64}\Z")
_SHA = re.compile(r"(?:[0-9a-f]{40}|[0-9a-f]{64})\Z")
# The pinned runtime's input-addressed build name (docs/formats.md "Pins"): one path component, never '..'.
_BUILD_NAME = re.compile(r"[0-9a-f]{32}-[A-Za-z0-9][A-Za-z0-9._-]{0,127}\Z")
# OWNER/NAME as the identity file has it (bootstrap._identity.FULL_NAME, not imported: this module stays light).
_FULL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}/(?!\.\.?\Z)[A-Za-z0-9_.-]{1,100}\Z")
_REPOSITORY = re.compile(r"https://[!-~]+\Z")  # an https:// URL of printable ASCII, no space
RENDERER_NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}\Z")
CONTEXT_NAME = re.compile(r"[a-z][a-z0-9_-]{0,63}\Z")  # the policy's context names
#: The freeze layer's immutability backends (attest.freeze.BACKENDS; a test keeps the two equal).
BACKEND_NAMES = ("immutable", "readonly", "ro-bind")
_SHA_EXPECTED = "a full lowercase 40- or 64-hex object id"


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

    def to_json(self) -> dict[str, object]:
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


def _relative(s: Shape, key: str) -> str:
    """A relative path by the inventory's name rules (no '..', '.', empty component, control character, ...)."""
    path = s.string(key)
    problem = check_path(path)
    if problem is not None:
        s.fail(f"a relative path ({problem[1]})", key)
    return path


def _check_recorded_inputs(pred: Shape) -> None:
    """The fields the handoff records but the review does not read: each of its documented shape, no field more."""
    for key, name in (("config", ".agent-policy.yml"), ("lock", ".agent-policy.lock")):
        recorded = pred.nested(key, ("path", "sha256"))
        recorded.one_of("path", (name,))
        recorded.string("sha256", pattern=_HEX64, expected="64 lowercase hex digits")
    installation = pred.nested("installation", ("attestation_digest", "installed_root", "installer", "source"))
    installation.string("attestation_digest", pattern=_IDENTITY, expected="sha256:<64 hex>")
    installation.absolute_path("installed_root")
    for key in ("installer", "source"):
        party = installation.nested(key, ("repository", "revision"))
        party.string("repository", pattern=_REPOSITORY, expected="an https:// URL")
        party.string("revision", pattern=_SHA, expected=_SHA_EXPECTED)
    for output in pred.list_of("outputs"):
        output.object(("context", "path", "renderer", "sha256"))
        output.optional_string("context", pattern=CONTEXT_NAME, expected="a context name or null", present=True)  # null: no context
        _relative(output, "path")
        output.string("renderer", pattern=RENDERER_NAME, expected="a renderer name")
        output.string("sha256", pattern=_HEX64, expected="64 lowercase hex digits")


def parse_handoff(statement: Mapping[str, object], *, attestation_digest: str, signers: tuple[str, ...]) -> Handoff:
    """Read a verified statement as a :class:`Handoff` (pure); raise ``VerificationError`` otherwise.

    Raises:
        VerificationError: ``HANDOFF_WRONG_PREDICATE`` (not a ``review-handoff/v1``
            statement), ``HANDOFF_MALFORMED`` (a predicate field missing, extra or of the wrong
            type; the detail names it: ``handoff.images.base.identity: expected ...``),
            ``HANDOFF_SUBJECT_MISMATCH`` (the subjects are not exactly the four images).
    """
    if statement.get("predicateType") != HANDOFF_PREDICATE:
        raise VerificationError(HandoffCode.HANDOFF_WRONG_PREDICATE,
                                f"the statement's predicate type is {str(statement.get('predicateType'))[:200]!r}, not {HANDOFF_PREDICATE}")
    pred = Shape(statement.get("predicate"), "handoff", _bad).object(_PREDICATE_KEYS)
    repo = pred.nested("repository", ("id", "full_name"))
    repo.string("full_name", pattern=_FULL_NAME, expected="OWNER/NAME")
    pr = pred.nested("pull_request", ("id", "number"))
    base = pred.nested("base", ("commit", "tree", "object_format"))
    base.one_of("object_format", ("sha1", "sha256"))
    toolchain = pred.nested("toolchain", ("repository", "revision"))
    toolchain.string("repository", pattern=_REPOSITORY, expected="an https:// URL")
    procedure = pred.nested("procedure", ("revision", "files"))
    procedure.check(procedure.get("revision") == toolchain.get("revision"), "the toolchain's revision", "revision")
    runtime = pred.nested("runtime", ("name", "attestation_digest"))
    _check_recorded_inputs(pred)
    raw_images = pred.nested("images", IMAGE_NAMES)
    images: dict[str, HandoffImage] = {}
    for name in IMAGE_NAMES:
        entry = raw_images.nested(name, ("identity", "path", "backend"))
        path = entry.absolute_path("path")
        images[name] = HandoffImage(entry.string("identity", pattern=_IDENTITY, expected="sha256:<64 hex>"), path,
                                    entry.one_of("backend", BACKEND_NAMES))
    # The subjects are what was signed over: exactly the four images, each once, by identity.
    subjects = statement.get("subject")
    named = {s.get("name"): s.get("digest") for s in subjects if isinstance(s, dict)} if isinstance(subjects, list) else {}
    want = {n: {"sha256": images[n].identity.removeprefix("sha256:")} for n in IMAGE_NAMES}
    if not isinstance(subjects, list) or len(subjects) != len(IMAGE_NAMES) or named != want:
        raise VerificationError(HandoffCode.HANDOFF_SUBJECT_MISMATCH,
                                "the statement's subjects are not exactly the four images of the predicate")
    parsed = [(_relative(f, "path"), f.string("sha256", pattern=_HEX64, expected="64 lowercase hex digits"))
              for f in (f.object(("path", "sha256")) for f in procedure.list_of("files", non_empty=True))]
    procedure.check(sorted(parsed) == parsed and len({p for p, _ in parsed}) == len(parsed), "sorted by path, each path once",
                    "files")
    return Handoff(
        attestation_digest=attestation_digest,
        signers=signers,
        repository_id=repo.positive_int("id", maximum=MAX_SAFE_INT),
        full_name=repo.string("full_name"),
        pull_request_id=pr.positive_int("id", maximum=MAX_SAFE_INT),
        number=pr.positive_int("number", maximum=MAX_SAFE_INT),
        base_commit=base.string("commit", pattern=_SHA, expected=_SHA_EXPECTED),
        base_tree=base.string("tree", pattern=_SHA, expected=_SHA_EXPECTED),
        toolchain_revision=toolchain.string("revision", pattern=_SHA, expected=_SHA_EXPECTED),
        runtime_name=runtime.string("name", pattern=_BUILD_NAME, expected="an input-addressed build name (<32 hex>-<recipe>)"),
        runtime_attestation_digest=runtime.string("attestation_digest", pattern=_IDENTITY, expected="sha256:<64 hex>"),
        images=images,
        procedure_files=tuple(parsed),
        time=pred.utc_time("time"),
    )


def verify_handoff(path: str | os.PathLike[str], policy: Policy) -> Handoff:
    """Verify the handoff file's signature under ``policy`` (TRUST), then parse it; raise otherwise.

    Raises:
        InputError: the file is unreadable or not an attestation (``UNREADABLE``, ``BAD_JSON``, ...).
        VerificationError: no trusted signature (the attestation layer's codes), or
            ``HANDOFF_WRONG_PREDICATE``, ``HANDOFF_MALFORMED``, ``HANDOFF_SUBJECT_MISMATCH``.
    """
    # lazy: attest.attestation, +33 ms to the confined reviewer's start-up (review agent imports review.handoff for the result's parser)
    from ...attestation import verify_attestation_file

    verified = verify_attestation_file(path, policy)
    return parse_handoff(verified.statement, attestation_digest=verified.attestation_digest, signers=verified.signers)


__all__ = ["HANDOFF_PREDICATE", "IMAGE_NAMES", "Handoff", "HandoffImage", "parse_handoff", "verify_handoff"]
