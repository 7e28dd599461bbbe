"""DSSE envelopes: PAE, strict base64, strict parsing of the envelope object.

The signature covers PAE(payloadType, payload) and nothing else; verification reads the
payload bytes once and everything after it parses those exact bytes.

    >>> pae("application/vnd.in-toto+json", b"{}")
    b'DSSEv1 28 application/vnd.in-toto+json 2 {}'
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass

from ..errors import VerificationError
from ._codes import AttestationCode

INTOTO_PAYLOAD_TYPE = "application/vnd.in-toto+json"
MAX_SIGNATURES = 32
MAX_KEYID_CHARS = 256


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE v1 pre-authentication encoding (lengths are byte counts, ASCII decimal).

    Raises:
        Nothing: a pure encoding of its arguments.
    """
    t = payload_type.encode("utf-8")
    return b"DSSEv1 %d %s %d %s" % (len(t), t, len(payload), payload)


def b64encode(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def b64decode_strict(value: object, what: str) -> bytes:
    """Standard-alphabet, padded base64 whose re-encoding is the input, or raise.

    Lenient decoders accept several spellings of one byte string (missing padding,
    URL-safe letters, non-zero trailing bits, embedded newlines); accepting one spelling
    only keeps two parsers from reading the same document differently.
    """
    if not isinstance(value, str):
        raise VerificationError(AttestationCode.BAD_BASE64, f"{what} is not a base64 string")
    try:
        raw = base64.b64decode(value.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError) as e:
        raise VerificationError(AttestationCode.BAD_BASE64, f"{what} is not valid base64: {e}") from e
    if b64encode(raw) != value:
        raise VerificationError(AttestationCode.BAD_BASE64, f"{what} is not in canonical base64 (padding or trailing bits)")
    return raw


@dataclass(frozen=True, slots=True)
class EnvelopeSignature:
    sig: bytes
    keyid: str


@dataclass(frozen=True, slots=True)
class Envelope:
    """A parsed DSSE envelope. ``payload`` is the exact signed byte string."""

    payload_type: str
    payload: bytes
    signatures: tuple[EnvelopeSignature, ...]

    @property
    def pae(self) -> bytes:
        return pae(self.payload_type, self.payload)

    def to_json(self, *, with_keyid: bool = True) -> dict[str, object]:
        """The envelope object (standard padded base64); ``with_keyid=False`` leaves key ids out.

        Raises:
            Nothing: the fields were validated when the envelope was built.
        """
        sigs = []
        for s in self.signatures:
            item = {"sig": b64encode(s.sig)}
            if with_keyid and s.keyid:
                item["keyid"] = s.keyid
            sigs.append(item)
        return {"payload": b64encode(self.payload), "payloadType": self.payload_type, "signatures": sigs}

    @classmethod
    def from_json(cls, doc: object, *, what: str = "DSSE envelope") -> Envelope:
        """Validate the envelope object: exact fields, in-toto payload type, canonical base64.

        Raises:
            VerificationError: ``BAD_ENVELOPE`` (not an object, other fields, a malformed
                signature entry), ``BAD_PAYLOAD_TYPE``, ``BAD_BASE64`` (not canonical
                base64), ``NO_SIGNATURES``, ``TOO_MANY_SIGNATURES`` (over 32).
        """
        if not isinstance(doc, dict):
            raise VerificationError(AttestationCode.BAD_ENVELOPE, f"the {what} is not a JSON object")
        required = {"payload", "payloadType", "signatures"}
        if set(doc) != required:
            raise VerificationError(
                AttestationCode.BAD_ENVELOPE, f"the {what} has fields {sorted(doc)}; exactly {sorted(required)} are required"
            )
        payload_type = doc["payloadType"]
        if payload_type != INTOTO_PAYLOAD_TYPE:
            raise VerificationError(
                AttestationCode.BAD_PAYLOAD_TYPE, f"payloadType {str(payload_type)[:100]!r} is not {INTOTO_PAYLOAD_TYPE!r}"
            )
        payload = b64decode_strict(doc["payload"], f"the {what} payload")
        raw_sigs = doc["signatures"]
        if not isinstance(raw_sigs, list):
            raise VerificationError(AttestationCode.BAD_ENVELOPE, f"the {what} signatures are not a list")
        if not raw_sigs:
            raise VerificationError(AttestationCode.NO_SIGNATURES, f"the {what} carries no signature")
        if len(raw_sigs) > MAX_SIGNATURES:
            raise VerificationError(
                AttestationCode.TOO_MANY_SIGNATURES, f"the {what} carries {len(raw_sigs)} signatures; the limit is {MAX_SIGNATURES}"
            )
        sigs = []
        for i, raw in enumerate(raw_sigs):
            if not isinstance(raw, dict) or "sig" not in raw or not set(raw) <= {"sig", "keyid"}:
                raise VerificationError(AttestationCode.BAD_ENVELOPE, f"signatures[{i}] must be an object with 'sig' and optional 'keyid'")
            keyid = raw.get("keyid", "")
            if not isinstance(keyid, str) or len(keyid) > MAX_KEYID_CHARS:
                raise VerificationError(AttestationCode.BAD_ENVELOPE, f"signatures[{i}].keyid is not a short string")
            sig = b64decode_strict(raw["sig"], f"signatures[{i}].sig")
            if not sig:
                raise VerificationError(AttestationCode.BAD_ENVELOPE, f"signatures[{i}].sig is empty")
            sigs.append(EnvelopeSignature(sig, keyid))
        return cls(payload_type, payload, tuple(sigs))
