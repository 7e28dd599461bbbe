"""Signing a statement into a DSSE envelope or a Sigstore bundle v0.3 (file bytes to write).

    >>> data = sign_statement(closed_tree_statement("tree", inv), [load_signer("a.pem"), load_signer("b.pem")])
    >>> data = add_signatures(data, load_signer("c.pem"))   # a third party signs the same payload

A DSSE envelope holds one signature per key over one PAE, so a ``threshold = 2`` policy can be
met in one call (several signers) or by parties signing in turn (:func:`add_signatures`). A
Sigstore bundle holds exactly one signature: sigstore-python refuses an envelope with more
("exactly 1 signature allowed"), so several signers for a bundle is a usage error.

Key-based bundles carry a public-key hint (unauthenticated) and no log entry. Keyless
bundles (:class:`KeylessSigner`) are produced by sigstore-python and need the network; the
statement and payload bytes are the same as on the key path.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from .._json import canonical_bytes, loads_strict
from ..errors import CommonCode, InputError, VerificationError
from ._codes import AttestationCode
from ._dsse import INTOTO_PAYLOAD_TYPE, MAX_SIGNATURES, Envelope, EnvelopeSignature, pae
from ._keys import Signer, verify_signature
from ._sigstore import ambient_identity_token, sign_dsse_keyless
from ._statement import parse_statement, verify_statement
from ._verify import MAX_ATTESTATION_BYTES, MAX_ATTESTATION_DEPTH

BUNDLE_MEDIA_TYPE = "application/vnd.dev.sigstore.bundle.v0.3+json"
FORMATS = ("dsse", "bundle")


@dataclass(frozen=True, slots=True)
class KeylessSigner:
    """Sign with Sigstore (OIDC identity -> Fulcio certificate -> Rekor entry). Online only."""

    identity_token: str | None = field(default=None, repr=False)  # None: the ambient credential (ambient_identity_token)
    staging: bool = False


def statement_payload(statement: Mapping[str, object]) -> bytes:
    """The exact bytes that get signed: RFC 8785 of a validated statement.

    Raises:
        InputError: the statement checks' codes (``BAD_STATEMENT``, ``BAD_DIGEST``, ...).
    """
    try:
        verify_statement(dict(statement))
    except VerificationError as e:
        raise InputError(findings=e.findings) from e
    return canonical_bytes(dict(statement))


def _signatures(payload_type: str, payload: bytes, signers: Sequence[Signer]) -> tuple[EnvelopeSignature, ...]:
    to_sign = pae(payload_type, payload)
    sigs = []
    for s in signers:
        sig = s.sign(to_sign)
        # Never write a signature we cannot verify ourselves (a wrong key behind a backend).
        if not verify_signature(s.public_key, sig, to_sign):
            raise InputError(AttestationCode.SIGNING_FAILED, f"the signature by key {s.key_id} does not verify")
        sigs.append(EnvelopeSignature(sig, s.key_id))
    return tuple(sigs)


def signing_keys(signer: Signer | Sequence[Signer], fmt: str) -> tuple[Signer, ...]:
    """The signers of one key-signed output in ``fmt``, checked before anything is hashed or signed.

    The one place for the rules: at least one key, no key twice (by key id), at most
    ``MAX_SIGNATURES``, and exactly one for a Sigstore bundle.

    Raises:
        InputError: ``USAGE`` (unknown format, no signer, the same key twice, several signers
            for a bundle); ``TOO_MANY_SIGNATURES`` (more than 32).
    """
    if fmt not in FORMATS:
        raise InputError(CommonCode.USAGE, f"format {fmt!r} is not one of {', '.join(FORMATS)}")
    signers = tuple(signer) if isinstance(signer, Sequence) else (signer,)
    if not signers:
        raise InputError(CommonCode.USAGE, "no signer given")
    ids = [s.key_id for s in signers]
    twice = sorted({k for k in ids if ids.count(k) > 1})
    if twice:
        raise InputError(CommonCode.USAGE, f"the same key is given twice: {', '.join(twice)}")
    if len(signers) > MAX_SIGNATURES:
        raise InputError(AttestationCode.TOO_MANY_SIGNATURES, f"{len(signers)} keys; an envelope holds at most {MAX_SIGNATURES} signatures")
    if fmt == "bundle" and len(signers) != 1:
        # sigstore-python refuses a DSSE envelope with more than one signature.
        raise InputError(
            CommonCode.USAGE,
            f"a Sigstore bundle holds exactly one signature ({len(signers)} keys given): "
            "use --format dsse for several keys",
        )
    return signers


def sign_statement(
    statement: Mapping[str, object],
    signer: Signer | KeylessSigner | Sequence[Signer],
    *,
    fmt: str = "dsse",
) -> bytes:
    """Sign ``statement``; return the file bytes (canonical JSON and a newline).

    ``fmt="dsse"`` accepts several signers (one envelope, one signature each over the same
    PAE); ``fmt="bundle"`` takes exactly one signer, as a Sigstore bundle holds one signature.

    Raises:
        InputError: ``USAGE`` (unknown format, no signer, the same key twice, several signers
            for a bundle, keyless without a bundle or an identity token); ``TOO_MANY_SIGNATURES``
            (more than 32 signers); ``SIGNING_FAILED`` (a signature that does not verify, a
            failed OIDC detection); the statement checks' codes for a malformed ``statement``.
        EnvironmentFailure: ``SIGNING_FAILED`` when keyless signing (Fulcio, Rekor) fails.
    """
    if isinstance(signer, KeylessSigner):
        if fmt not in FORMATS:
            raise InputError(CommonCode.USAGE, f"format {fmt!r} is not one of {', '.join(FORMATS)}")
        if fmt != "bundle":
            raise InputError(CommonCode.USAGE, "keyless (Sigstore) signing produces a bundle: use --format bundle")
        payload = statement_payload(statement)
        token = signer.identity_token or ambient_identity_token()
        return sign_dsse_keyless(payload, token, staging=signer.staging)
    signers = signing_keys(signer, fmt)
    payload = statement_payload(statement)
    envelope = Envelope(INTOTO_PAYLOAD_TYPE, payload, _signatures(INTOTO_PAYLOAD_TYPE, payload, signers))
    if fmt == "dsse":
        return canonical_bytes(envelope.to_json()) + b"\n"
    bundle = {
        "mediaType": BUNDLE_MEDIA_TYPE,
        "verificationMaterial": {"publicKey": {"hint": signers[0].key_id}, "tlogEntries": []},
        # Sigstore bundles leave the DSSE key id empty; the hint above names the key.
        "dsseEnvelope": envelope.to_json(with_keyid=False),
    }
    return canonical_bytes(bundle) + b"\n"


def add_signatures(data: bytes, signer: Signer | Sequence[Signer]) -> bytes:
    """Append signatures by ``signer`` to the DSSE envelope ``data``; return the new file bytes.

    Nothing about trust is checked (the existing signatures are kept as they are, unverified:
    the verifier decides). What is checked is what is signed: (1) strict JSON, (2) a strict
    DSSE envelope of the in-toto payload type, not a Sigstore bundle, (3) a valid statement in
    the payload, (4) no new key has signed already, by key id hint or by a signature that
    verifies under it, (5) at most 32 signatures in all. (6) The new signatures are over PAE of
    the exact payload bytes, which are written back unchanged (never re-serialized).

    Raises:
        InputError: the strict-JSON codes; ``USAGE`` (a bundle, a key that already signed, the
            same key twice, no signer); the envelope codes (``BAD_ENVELOPE``, ``BAD_BASE64``,
            ``BAD_PAYLOAD_TYPE``, ``NO_SIGNATURES``, ``TOO_MANY_SIGNATURES``); the statement
            codes for a payload that is not a valid statement; ``SIGNING_FAILED``.
    """
    signers = signing_keys(signer, "dsse")
    doc = loads_strict(data, what="envelope", max_bytes=MAX_ATTESTATION_BYTES, max_depth=MAX_ATTESTATION_DEPTH)  # (1)
    if isinstance(doc, dict) and "mediaType" in doc:
        raise InputError(CommonCode.USAGE, "a Sigstore bundle holds exactly one signature: --add works on DSSE envelopes")
    try:
        envelope = Envelope.from_json(doc)  # (2)
        parse_statement(envelope.payload)  # (3)
    except VerificationError as e:  # here the envelope is input to a command, not evidence
        raise InputError(findings=e.findings) from e
    for s in signers:  # (4)
        if any(old.keyid == s.key_id or verify_signature(s.public_key, old.sig, envelope.pae) for old in envelope.signatures):
            raise InputError(CommonCode.USAGE, f"key {s.key_id} has already signed this envelope")
    total = len(envelope.signatures) + len(signers)
    if total > MAX_SIGNATURES:  # (5)
        raise InputError(
            AttestationCode.TOO_MANY_SIGNATURES,
            f"the envelope would carry {total} signatures; the limit is {MAX_SIGNATURES}",
        )
    added = _signatures(envelope.payload_type, envelope.payload, signers)  # (6)
    out = Envelope(envelope.payload_type, envelope.payload, envelope.signatures + added)
    return canonical_bytes(out.to_json()) + b"\n"
