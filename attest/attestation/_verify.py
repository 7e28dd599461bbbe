"""Verifying a DSSE envelope or a Sigstore bundle against a trust policy.

    >>> v = verify_attestation_file("tree.intoto.json", load_policy("policy.toml"))
    >>> v.statement["predicateType"], v.signers

Procedure (each step fails closed with its own code):
 (1) read the file once, bounded; its SHA-256 is the attestation digest;
 (2) strict JSON (duplicate keys, depth, size), then the format: bundle or envelope;
 (3) strict envelope: exact fields, in-toto payload type, canonical base64, 1..32 signatures;
 (4) signatures: every trusted key is tried against every signature over PAE (key ids are
     unauthenticated hints and never select a key); certificate bundles go to sigstore-python
     offline, with the policy's pinned trusted root and exact identity + issuer; a key-signed
     bundle's log entries and timestamps are checked against the key signer's pinned trusted
     root (none pinned: refused, ``TRUSTED_ROOT_REQUIRED``);
 (5) each distinct trusted signer counts once; fewer than the threshold fails;
 (6) only then the statement is parsed, from the exact verified payload bytes;
 (7) a signer whose ``predicates`` (trust policy) do not name the statement's type does not
     count; fewer than the threshold that may sign it fails (``SIGNER_NOT_FOR_PREDICATE``).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from .._digest import sha256_of
from .._fs import read_bounded
from .._json import loads_strict
from ..errors import InputError, VerificationError
from ..inventory import Inventory
from ._codes import AttestationCode
from ._dsse import Envelope, b64decode_strict
from ._keys import verify_signature
from ._policy import KeySignerSpec, Policy, SigstoreSignerSpec
from ._sigstore import check_artifact_bundle, check_dsse_bundle, verify_key_bundle_evidence
from ._statement import CLOSED_TREE_PREDICATE, StatementDoc, parse_statement, tree_inventory

MAX_ATTESTATION_BYTES = 768 * 1024 * 1024
MAX_ATTESTATION_DEPTH = 16
# The Sigstore bundle media types sigstore-python 4.5 accepts (models.Bundle.BundleType), for
# DSSE and message-signature bundles alike. A v0.3 bundle (either spelling) carries its signing
# certificate as `certificate`; an older one as the first entry of `x509CertificateChain`.
BUNDLE_V03_MEDIA_TYPES = (
    "application/vnd.dev.sigstore.bundle.v0.3+json",
    "application/vnd.dev.sigstore.bundle+json;version=0.3",
)
BUNDLE_LEGACY_MEDIA_TYPES = (
    "application/vnd.dev.sigstore.bundle+json;version=0.2",
    "application/vnd.dev.sigstore.bundle+json;version=0.1",
)
BUNDLE_MEDIA_TYPES = (*BUNDLE_V03_MEDIA_TYPES, *BUNDLE_LEGACY_MEDIA_TYPES)
_BUNDLE_FIELDS = {"mediaType", "verificationMaterial", "dsseEnvelope", "messageSignature"}
_MATERIALS = ("publicKey", "certificate", "x509CertificateChain")
_MESSAGE_SIGNATURE_FIELDS = {"messageDigest", "signature"}


@dataclass(frozen=True, slots=True)
class VerifiedStatement:
    """A statement whose payload verified under the policy. ``payload`` is the exact signed bytes."""

    payload: bytes
    statement: StatementDoc
    predicate_type: str
    signers: tuple[str, ...]
    attestation_digest: str
    format: str

    def to_json(self) -> dict[str, object]:
        """What was verified, for ``--json`` output: type, signers, digest, format, subjects.

        Raises:
            Nothing: the statement was validated before this object was built.
        """
        return {
            "predicate_type": self.predicate_type,
            "signers": list(self.signers),
            "attestation_digest": self.attestation_digest,
            "format": self.format,
            "subjects": self.statement["subject"],
        }


def _strict_json(data: bytes, what: str) -> object:
    try:
        return loads_strict(data, what=what, max_bytes=MAX_ATTESTATION_BYTES, max_depth=MAX_ATTESTATION_DEPTH)
    except InputError as e:  # a malformed attestation does not verify: exit 1, not "bad usage"
        raise VerificationError(findings=e.findings) from e


def _key_signers(envelope: Envelope, policy: Policy) -> list[str]:
    to_verify = envelope.pae
    found = []
    for spec in policy.signers:
        if not isinstance(spec, KeySignerSpec):
            continue
        # Try every signature: an invalid signature listed first must not hide a valid one,
        # and a key id in the envelope never decides which key is tried.
        if any(verify_signature(spec.public_key, s.sig, to_verify) for s in envelope.signatures):
            found.append(spec.id)
    return found


def _decide_roles(signers: tuple[str, ...], policy: Policy, predicate_type: str | None) -> tuple[str, ...]:
    """Pure: only signers the policy lets sign ``predicate_type`` count; at least ``threshold`` of them."""
    allowed = tuple(s for s in signers if policy.signer(s).may_sign(predicate_type))
    if len(allowed) < policy.threshold:
        refused = [s for s in signers if s not in allowed]
        what = f"statements of {predicate_type}" if predicate_type is not None else "artifact signatures"
        raise VerificationError(AttestationCode.SIGNER_NOT_FOR_PREDICATE,
                                f"{', '.join(refused)} may not sign {what} (the policy's `predicates` of the signer); "
                                f"{len(allowed)} signer(s) that may, {policy.threshold} required")
    return allowed


_MAX_LISTED = 8


def _listing(items: Sequence[str]) -> str:
    shown = ", ".join(items[:_MAX_LISTED])
    return shown + (f" and {len(items) - _MAX_LISTED} more" if len(items) > _MAX_LISTED else "")


def _present_and_trusted(hints: Sequence[str] | None, policy: Policy) -> str:
    """What the attestation claims and what the policy trusts, so a user can see which key is missing."""
    parts = []
    if hints is not None:
        # Hints come from the attestation: unauthenticated, so quoted (repr escapes control
        # characters) and cut short; they never decided anything above.
        shown = [repr(h[:80]) if h else "(none)" for h in hints]
        parts.append(f"{len(hints)} signature(s) with key id hints (unauthenticated) {_listing(shown) or '(none)'}")
    parts.append(f"the policy trusts {_listing([s.id for s in policy.signers])}")
    return "; ".join(parts)


def _decide(verified: list[str], policy: Policy, tried: list[str], hints: Sequence[str] | None = None) -> tuple[str, ...]:
    """Pure threshold decision: distinct trusted signers, in policy order, at least ``threshold``.

    ``hints`` are the key ids the attestation names (one per signature; None where the format
    carries none): shown in the detail, never used to decide.
    """
    distinct = tuple(dict.fromkeys(verified))
    if not distinct:
        detail = "no signature verifies under any signer the policy trusts"
        if tried:
            detail += " (" + "; ".join(t[:300] for t in tried[:4]) + ")"
        raise VerificationError(AttestationCode.NO_TRUSTED_SIGNATURE, f"{detail}; {_present_and_trusted(hints, policy)}")
    if len(distinct) < policy.threshold:
        raise VerificationError(
            AttestationCode.THRESHOLD_NOT_MET,
            f"{len(distinct)} distinct trusted signer(s) ({', '.join(distinct)}); the policy requires {policy.threshold}; "
            + _present_and_trusted(hints, policy),
        )
    return distinct


def _key_id_hints(doc: Mapping[str, object], envelope: Envelope) -> tuple[str, ...]:
    """The key ids the attestation names: each DSSE ``keyid``, or a key-based bundle's ``hint``."""
    material = doc.get("verificationMaterial")
    if isinstance(material, dict) and isinstance(material.get("publicKey"), dict):
        hint = material["publicKey"].get("hint", "")
        return (hint if isinstance(hint, str) else "",)
    return tuple(s.keyid for s in envelope.signatures)


def bundle_material(doc: Mapping[str, object]) -> str:
    """The one kind of verification material a bundle carries, checked against its media type (pure).

    The rules are sigstore-python 4.5's (``models.Bundle._verify``): a v0.3 bundle (either
    spelling) carries ``certificate``, a v0.1 or v0.2 bundle ``x509CertificateChain``. A
    key-signed bundle (``publicKey``) is verified by attest itself, and only as v0.3 (the
    version cosign and sigstore-go write for keys; sigstore-python reads no key bundle at all).

    Raises:
        VerificationError: ``BAD_BUNDLE`` (unknown top-level fields, no or a non-object
            ``verificationMaterial``, not exactly one kind of material, a certificate kind
            the media type does not use); ``BAD_MEDIA_TYPE`` (not a Sigstore bundle media
            type, or a key-signed bundle older than v0.3).
    """
    unknown = set(doc) - _BUNDLE_FIELDS
    if unknown:
        raise VerificationError(AttestationCode.BAD_BUNDLE, f"the bundle has unknown fields {sorted(unknown)}")
    media_type = doc.get("mediaType")
    if media_type not in BUNDLE_MEDIA_TYPES:
        raise VerificationError(AttestationCode.BAD_MEDIA_TYPE, f"mediaType {str(media_type)[:100]!r} is not a Sigstore bundle "
                                "(v0.1, v0.2 or v0.3)")
    material = doc.get("verificationMaterial")
    if not isinstance(material, dict):
        raise VerificationError(AttestationCode.BAD_BUNDLE, "verificationMaterial is missing or not an object")
    kinds = [k for k in _MATERIALS if k in material]
    if len(kinds) != 1:
        raise VerificationError(AttestationCode.BAD_BUNDLE, f"verificationMaterial must hold exactly one of {list(_MATERIALS)}")
    kind = kinds[0]
    v03 = media_type in BUNDLE_V03_MEDIA_TYPES
    if kind == "publicKey" and not v03:
        raise VerificationError(AttestationCode.BAD_MEDIA_TYPE, f"a key-signed bundle must be v0.3, not {media_type!r} "
                                "(attest reads key-signed bundles as v0.3 only)")
    if kind == "certificate" and not v03:
        raise VerificationError(AttestationCode.BAD_BUNDLE, f"a {media_type!r} bundle carries x509CertificateChain, not certificate")
    if kind == "x509CertificateChain" and v03:
        raise VerificationError(AttestationCode.BAD_BUNDLE, "a v0.3 bundle carries certificate, not x509CertificateChain")
    return kind


def _check_key_material(material: object) -> tuple[str, bool]:
    """The (unauthenticated) key hint of key-based verification material, and whether it carries log entries or timestamps.

    Raises:
        VerificationError: ``BAD_BUNDLE`` (malformed material).
    """
    if not isinstance(material, dict):  # bundle_material refused it first; this says so to the type checker
        raise VerificationError(AttestationCode.BAD_BUNDLE, "verificationMaterial is missing or not an object")
    extra = set(material) - {"publicKey", "tlogEntries", "timestampVerificationData"}
    hint = material["publicKey"]
    if extra or not isinstance(hint, dict) or not set(hint) <= {"hint"} or not isinstance(hint.get("hint", ""), str):
        raise VerificationError(AttestationCode.BAD_BUNDLE, "the public-key verification material is malformed")
    evidence = material.get("tlogEntries", []) != [] or material.get("timestampVerificationData", {}) not in ({}, {"rfc3161Timestamps": []})
    return str(hint.get("hint", "")), evidence


def _check_key_evidence(spec: KeySignerSpec, data: bytes, signature: bytes, *, artifact: bytes | None = None,
                        envelope: Envelope | None = None) -> None:
    """A key-signed bundle's log entries and timestamps, for the key whose signature verified.

    Fail closed: evidence attest cannot check (no ``trusted_root`` on the key's signer) is
    refused, never accepted as if it had been checked.

    Raises:
        VerificationError: ``TRUSTED_ROOT_REQUIRED``; the codes of
            :func:`~attest.attestation._sigstore.verify_key_bundle_evidence`.
        InputError: ``BAD_POLICY`` (the trusted root is not usable).
    """
    if spec.trusted_root is None:
        raise VerificationError(AttestationCode.TRUSTED_ROOT_REQUIRED,
                                f"the bundle carries transparency-log entries or signed timestamps and the policy's signer {spec.id} "
                                f"({spec.source}) pins no trusted_root to check them against: add trusted_root to that signer")
    verify_key_bundle_evidence(spec.trusted_root, spec.trusted_root_source or spec.source, data, spec.public_key, signature,
                               artifact=artifact,
                               envelope=(envelope.payload_type, envelope.payload, envelope.pae) if envelope is not None else None)


def _verify_bundle(doc: Mapping[str, object], data: bytes, policy: Policy) -> tuple[Envelope, list[str], list[str]]:
    kind = bundle_material(doc)
    if "messageSignature" in doc:
        raise VerificationError(
            AttestationCode.UNSUPPORTED_BUNDLE, "a message-signature bundle signs an artifact, not a statement (verify it with --artifact)"
        )
    if "dsseEnvelope" not in doc:
        raise VerificationError(AttestationCode.BAD_BUNDLE, "the bundle lacks dsseEnvelope")
    envelope = Envelope.from_json(doc["dsseEnvelope"], what="bundle's DSSE envelope")
    if len(envelope.signatures) != 1:
        raise VerificationError(AttestationCode.BAD_BUNDLE, "a Sigstore bundle's envelope holds exactly one signature")
    if kind == "publicKey":
        # Key-based bundle: sigstore-python cannot verify these; we do, with our own PAE check,
        # and its log entries and timestamps with sigstore's checks (_check_key_evidence).
        _, evidence = _check_key_material(doc["verificationMaterial"])
        tried = [] if any(isinstance(s, KeySignerSpec) for s in policy.signers) else [
            "the bundle is signed by a key and the policy trusts no key"]
        by_key = _key_signers(envelope, policy)
        if evidence:
            for key_spec in policy.signers:
                if isinstance(key_spec, KeySignerSpec) and key_spec.id in by_key:
                    _check_key_evidence(key_spec, data, envelope.signatures[0].sig, envelope=envelope)
        return envelope, by_key, tried
    found: list[str] = []
    tried = []
    for spec in policy.signers:
        if not isinstance(spec, SigstoreSignerSpec):
            continue
        result = check_dsse_bundle(spec, data)
        if isinstance(result, str):
            tried.append(result)
            continue
        if result != (envelope.payload_type, envelope.payload):
            raise VerificationError(AttestationCode.BAD_BUNDLE, "sigstore and attest read different payloads from the bundle")
        found.append(spec.id)
    if not any(isinstance(s, SigstoreSignerSpec) for s in policy.signers):
        tried.append("the bundle is signed by a certificate and the policy trusts no Sigstore identity")
    return envelope, found, tried


def verify_attestation_bytes(data: bytes, policy: Policy) -> VerifiedStatement:
    """Verify a DSSE envelope or Sigstore bundle (bytes of the file) under ``policy``.

    Raises:
        VerificationError: step (2) the strict-JSON codes (``BAD_JSON``, ``DUPLICATE_KEY``,
            ``TOO_LARGE``, ``TOO_DEEP``) and ``UNKNOWN_FORMAT``; (3) the envelope's and
            bundle's codes (``BAD_ENVELOPE``, ``BAD_BASE64``, ``BAD_PAYLOAD_TYPE``,
            ``NO_SIGNATURES``, ``TOO_MANY_SIGNATURES``, ``BAD_BUNDLE``, ``BAD_MEDIA_TYPE``,
            ``UNSUPPORTED_BUNDLE``); (4) a key-signed bundle's evidence (``TRUSTED_ROOT_REQUIRED``,
            ``TLOG_ENTRY_INVALID``, ``TLOG_ENTRY_MISMATCH``, ``TIMESTAMP_INVALID``); (5) ``NO_TRUSTED_SIGNATURE``, ``THRESHOLD_NOT_MET``;
            (6) the statement's codes (see :func:`parse_statement`); (7) ``SIGNER_NOT_FOR_PREDICATE``.
        InputError: ``BAD_POLICY`` when a certificate bundle meets a pinned trusted root
            sigstore cannot use.
    """
    digest = sha256_of(data)  # (1)
    doc = _strict_json(data, "attestation")  # (2)
    if isinstance(doc, dict) and "mediaType" in doc:
        fmt = "bundle"
        envelope, found, tried = _verify_bundle(doc, data, policy)  # (3) (4)
    elif isinstance(doc, dict) and "payloadType" in doc:
        fmt = "dsse"
        envelope = Envelope.from_json(doc)  # (3)
        found, tried = _key_signers(envelope, policy), []  # (4)
    else:
        raise VerificationError(AttestationCode.UNKNOWN_FORMAT, "neither a DSSE envelope (payloadType) nor a Sigstore bundle (mediaType)")
    signers = _decide(found, policy, tried, _key_id_hints(doc, envelope))  # (5)
    statement = parse_statement(envelope.payload)  # (6)
    signers = _decide_roles(signers, policy, statement["predicateType"])  # (7)
    return VerifiedStatement(envelope.payload, statement, statement["predicateType"], signers, digest, fmt)


def read_attestation(path: str | os.PathLike[str]) -> bytes:
    return read_bounded(path, what="attestation", max_bytes=MAX_ATTESTATION_BYTES)


def verify_attestation_file(path: str | os.PathLike[str], policy: Policy) -> VerifiedStatement:
    """Read the attestation at ``path`` once (bounded) and verify those bytes under ``policy``.

    Raises:
        InputError: ``UNREADABLE`` (absent, not a regular file), ``TOO_LARGE``.
        VerificationError: every code of :func:`verify_attestation_bytes`.
    """
    return verify_attestation_bytes(read_attestation(path), policy)


def closed_tree_inventory(verified: VerifiedStatement, *,
                          predicate_type: str | Collection[str] = CLOSED_TREE_PREDICATE) -> Inventory:
    """The inventory of a verified tree statement (one subject, digest == inventory identity).

    ``predicate_type`` is the one type accepted, or several (:data:`INVENTORY_PREDICATES`:
    every predicate that carries a closed inventory).

    Raises:
        VerificationError: the codes of :func:`tree_inventory` (``BAD_PREDICATE_TYPE``,
            ``NO_SUBJECT``, ``EXTRA_SUBJECT``, ``BAD_DIGEST``, ``BAD_PREDICATE``,
            ``SUBJECT_MISMATCH``).
    """
    return tree_inventory(verified.statement, predicate_type)


def message_signature(doc: object, artifact: bytes) -> bytes:
    """The signature of a key-signed message-signature bundle over ``artifact`` (pure; the signature is not checked here).

    ``messageSignature`` is ``{"messageDigest": {"algorithm": "SHA2_256", "digest": b64}?,
    "signature": b64}``; a digest, when given, must be the artifact's SHA-256 (as
    sigstore-python requires of certificate bundles).

    Raises:
        VerificationError: ``BAD_BUNDLE`` (unknown fields, a digest algorithm other than
            SHA2_256), ``BAD_BASE64``, ``NO_TRUSTED_SIGNATURE`` (the digest is another artifact's).
    """
    if not isinstance(doc, dict) or set(doc) - _MESSAGE_SIGNATURE_FIELDS or "signature" not in doc:
        raise VerificationError(AttestationCode.BAD_BUNDLE, "messageSignature must be {messageDigest?, signature}")
    if "messageDigest" in doc:
        digest = doc["messageDigest"]
        if not isinstance(digest, dict) or set(digest) != {"algorithm", "digest"} or digest["algorithm"] != "SHA2_256":
            raise VerificationError(AttestationCode.BAD_BUNDLE, "messageDigest must be {algorithm: SHA2_256, digest}")
        if b64decode_strict(digest["digest"], "messageDigest.digest") != hashlib.sha256(artifact).digest():
            raise VerificationError(AttestationCode.NO_TRUSTED_SIGNATURE, "the bundle's messageDigest is not the artifact's SHA-256: "
                                    "it signs another artifact")
    return b64decode_strict(doc["signature"], "messageSignature.signature")


def verify_artifact_bundle(bundle: bytes, artifact: bytes, policy: Policy) -> tuple[str, ...]:
    """Verify a Sigstore message-signature bundle over ``artifact``; return the trusted signers.

    A certificate bundle is verified by sigstore-python offline against each Sigstore signer's
    pinned trusted root; a key-signed bundle (``publicKey``, v0.3) by attest, trying every
    trusted key over the artifact's bytes (the hint never selects a key), and its log entry
    and timestamps against that key signer's pinned trusted root (:func:`_check_key_evidence`).

    Raises:
        VerificationError: the strict-JSON codes, ``UNKNOWN_FORMAT`` (no ``mediaType``), the
            codes of :func:`bundle_material` (``BAD_MEDIA_TYPE``, ``BAD_BUNDLE``),
            ``UNSUPPORTED_BUNDLE`` (a DSSE bundle), the codes of :func:`_check_key_evidence`
            (``TRUSTED_ROOT_REQUIRED``, ``TLOG_ENTRY_INVALID``, ``TLOG_ENTRY_MISMATCH``,
            ``TIMESTAMP_INVALID``), the codes of :func:`message_signature`, ``NO_TRUSTED_SIGNATURE`` /
            ``THRESHOLD_NOT_MET`` from the threshold decision, ``SIGNER_NOT_FOR_PREDICATE``,
            and ``BAD_BUNDLE`` when sigstore cannot parse it.
        InputError: ``BAD_POLICY`` when a pinned trusted root is not usable.
    """
    doc = _strict_json(bundle, "bundle")
    if not isinstance(doc, dict) or "mediaType" not in doc:
        raise VerificationError(AttestationCode.UNKNOWN_FORMAT, "not a Sigstore bundle (no mediaType)")
    kind = bundle_material(doc)
    if "messageSignature" not in doc or "dsseEnvelope" in doc:
        raise VerificationError(AttestationCode.UNSUPPORTED_BUNDLE, "not a message-signature bundle (a DSSE bundle is verified as an attestation)")
    found: list[str] = []
    tried: list[str] = []
    hints: tuple[str, ...] | None = None
    if kind == "publicKey":
        hint, evidence = _check_key_material(doc["verificationMaterial"])
        hints = (hint,)
        signature = message_signature(doc["messageSignature"], artifact)
        keys = [spec for spec in policy.signers if isinstance(spec, KeySignerSpec)]
        # Every trusted key is tried: the hint is unauthenticated and never selects one.
        verified = [key_spec for key_spec in keys if verify_signature(key_spec.public_key, signature, artifact)]
        if evidence:
            for key_spec in verified:
                _check_key_evidence(key_spec, bundle, signature, artifact=artifact)
        found = [key_spec.id for key_spec in verified]
        if not keys:
            tried.append("the bundle is signed by a key and the policy trusts no key")
    else:
        for spec in policy.signers:
            if isinstance(spec, SigstoreSignerSpec):
                reason = check_artifact_bundle(spec, bundle, artifact)
                if reason is None:
                    found.append(spec.id)
                else:
                    tried.append(reason)
        if not any(isinstance(s, SigstoreSignerSpec) for s in policy.signers):
            tried.append("the bundle is signed by a certificate and the policy trusts no Sigstore identity")
    return _decide_roles(_decide(found, policy, tried, hints), policy, None)
