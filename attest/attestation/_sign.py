"""Signing a statement into a DSSE envelope or a Sigstore bundle v0.3 (file bytes to write).

    >>> data = sign_statement(closed_tree_statement("tree", inv), load_signer("k.pem"), fmt="bundle")

Key-based bundles carry a public-key hint (unauthenticated) and no log entry. Keyless
bundles (:class:`KeylessSigner`) are produced by sigstore-python and need the network; the
statement and payload bytes are the same as on the key path.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._json import canonical_bytes
from ..errors import CommonCode, InputError, VerificationError
from ._codes import AttestationCode
from ._dsse import INTOTO_PAYLOAD_TYPE, Envelope, EnvelopeSignature, pae
from ._keys import Signer, verify_signature
from ._statement import verify_statement

BUNDLE_MEDIA_TYPE = "application/vnd.dev.sigstore.bundle.v0.3+json"
FORMATS = ("dsse", "bundle")


@dataclass(frozen=True, slots=True)
class KeylessSigner:
    """Sign with Sigstore (OIDC identity -> Fulcio certificate -> Rekor entry). Online only."""

    identity_token: str | None = field(default=None, repr=False)
    staging: bool = False


def statement_payload(statement: Mapping[str, Any]) -> bytes:
    """The exact bytes that get signed: RFC 8785 of a validated statement.

    Raises:
        InputError: the statement checks' codes (``BAD_STATEMENT``, ``BAD_DIGEST``, ...).
    """
    try:
        verify_statement(dict(statement))
    except VerificationError as e:
        raise InputError(findings=e.findings) from e
    return canonical_bytes(dict(statement))


def _envelope(payload: bytes, signers: Sequence[Signer]) -> Envelope:
    to_sign = pae(INTOTO_PAYLOAD_TYPE, payload)
    sigs = []
    for s in signers:
        sig = s.sign(to_sign)
        if not verify_signature(s.public_key, sig, to_sign):
            raise InputError(AttestationCode.SIGNING_FAILED, f"the signature by key {s.key_id} does not verify")
        sigs.append(EnvelopeSignature(sig, s.key_id))
    return Envelope(INTOTO_PAYLOAD_TYPE, payload, tuple(sigs))


def sign_statement(
    statement: Mapping[str, Any],
    signer: Signer | KeylessSigner | Sequence[Signer],
    *,
    fmt: str = "dsse",
) -> bytes:
    """Sign ``statement``; return the file bytes (canonical JSON and a newline).

    ``fmt="dsse"`` accepts several signers (one envelope, one signature each);
    ``fmt="bundle"`` takes exactly one signer, as a Sigstore bundle holds one signature.

    Raises:
        InputError: ``USAGE`` (unknown format, no signer, the same key twice, several signers
            for a bundle, keyless without a bundle or an identity token); ``SIGNING_FAILED``
            (a signature that does not verify, a failed OIDC detection); the statement
            checks' codes for a malformed ``statement``.
        EnvironmentFailure: ``SIGNING_FAILED`` when keyless signing (Fulcio, Rekor) fails.
    """
    if fmt not in FORMATS:
        raise InputError(CommonCode.USAGE, f"format {fmt!r} is not one of {', '.join(FORMATS)}")
    payload = statement_payload(statement)
    if isinstance(signer, KeylessSigner):
        if fmt != "bundle":
            raise InputError(CommonCode.USAGE, "keyless (Sigstore) signing produces a bundle: use --format bundle")
        from ._sigstore import sign_dsse_keyless

        token = signer.identity_token or _ambient_token()
        return sign_dsse_keyless(payload, token, staging=signer.staging)
    signers: list[Signer] = list(signer) if isinstance(signer, Sequence) else [signer]
    if not signers:
        raise InputError(CommonCode.USAGE, "no signer given")
    if len({s.key_id for s in signers}) != len(signers):
        raise InputError(CommonCode.USAGE, "the same key is given twice")
    if fmt == "bundle" and len(signers) != 1:
        raise InputError(CommonCode.USAGE, "a Sigstore bundle holds exactly one signature")
    envelope = _envelope(payload, signers)
    if fmt == "dsse":
        return canonical_bytes(envelope.to_json()) + b"\n"
    bundle = {
        "mediaType": BUNDLE_MEDIA_TYPE,
        "verificationMaterial": {"publicKey": {"hint": signers[0].key_id}, "tlogEntries": []},
        # Sigstore bundles leave the DSSE key id empty; the hint above names the key.
        "dsseEnvelope": envelope.to_json(with_keyid=False),
    }
    return canonical_bytes(bundle) + b"\n"


def _ambient_token() -> str:
    import os

    token = os.environ.get("SIGSTORE_ID_TOKEN")
    if token:
        return token
    from sigstore.oidc import detect_credential

    try:
        found = detect_credential()
    except Exception as e:
        raise InputError(AttestationCode.SIGNING_FAILED, f"ambient OIDC credential detection failed: {e}") from e
    if not found:
        raise InputError(CommonCode.USAGE, "keyless signing needs an identity token: --identity-token or SIGSTORE_ID_TOKEN")
    return str(found)
