"""The only module that imports sigstore-python, and only when a function here is called.

Offline verification is always given the policy's pinned trusted root explicitly (never the
TUF cache under XDG_CACHE_HOME, never the network). Identities match exactly: the SAN must be
equal to the pinned identity (sigstore's ``Identity`` compares set membership, no patterns)
and the OIDC issuer extension equal to the pinned issuer.
"""

from __future__ import annotations

import base64
import datetime as _dt
import hashlib
import os
from types import ModuleType
from typing import TYPE_CHECKING

from cryptography.hazmat.primitives import serialization

from ..errors import CommonCode, EnvironmentFailure, InputError, VerificationError
from ._codes import AttestationCode
from ._keys import PublicKey, public_key_der
from ._policy import SigstoreSignerSpec

if TYPE_CHECKING:
    from sigstore.models import Bundle, TransparencyLogEntry, TrustedRoot
    from sigstore.verify import Verifier
    from sigstore.verify.policy import Identity
    from sigstore_models.common.v1 import TimeRange
    from sigstore_models.rekor import v1 as rekor_v1
    from sigstore_models.trustroot.v1 import TransparencyLogInstance
    from sigstore_models.trustroot.v1 import TrustedRoot as TrustedRootModel


# Every import of sigstore-python, sigstore_models, rekor_types and urllib3 below is inside a function: with
# attest.attestation loaded, sigstore.verify adds about 200 ms, sigstore.sign 200 ms, sigstore.oidc 110 ms,
# rekor_types 100 ms, sigstore_models.trustroot.v1 70 ms, urllib3 30 ms (python -X importtime), and a key-signed
# attestation without log entries needs none of them (tests/attestation/test_attestation_cli.py checks it).
def _sigstore() -> ModuleType:
    try:
        import sigstore.errors  # lazy: sigstore, ~200 ms (see above)
        import sigstore.models  # lazy: sigstore, ~200 ms (see above)
        import sigstore.verify  # lazy: sigstore, ~200 ms (see above)
        import sigstore.verify.policy  # lazy: sigstore, ~200 ms (see above)
    except ImportError as e:  # pragma: no cover - sigstore is a declared dependency
        raise EnvironmentFailure(AttestationCode.UNSUPPORTED_BUNDLE, f"sigstore-python is not importable: {e}") from e
    return sigstore


# A trusted root's validity period (protobuf-specs TimeRange) is a closed interval: a time
# exactly at its `end` lies inside it. sigstore-python 4.5 accepts a timestamp authority's
# signed time only while `gen_time < validity_period_end` (sigstore/verify/verifier.py), so
# a timestamp made in the last instant of a TSA's validity would be refused where a
# conforming verifier accepts it (sigstore-conformance `trust-root-tsa-validity-end-inclusive`).
# Both sides of that comparison are datetimes, which have microsecond resolution: an end one
# microsecond later, compared exclusively, is exactly the closed interval. The other periods
# need nothing: transparency-log and CA periods are not compared with a signing time there.
CLOCK_RESOLUTION = _dt.timedelta(microseconds=1)


def inclusive_tsa_validity(root: TrustedRootModel) -> TrustedRootModel:
    """A copy of the parsed trusted root whose TSA periods, compared exclusively, are the closed ones (pure).

    Raises:
        Nothing: ``root`` is a parsed ``sigstore_models`` trusted root.
    """
    authorities = []
    for tsa in root.timestamp_authorities:
        period = tsa.valid_for
        if period.end is not None:
            tsa = tsa.model_copy(update={"valid_for": period.model_copy(update={"end": period.end + CLOCK_RESOLUTION})})
        authorities.append(tsa)
    return root.model_copy(update={"timestamp_authorities": authorities})


def _verifier_and_bundle(spec: SigstoreSignerSpec, bundle_bytes: bytes) -> tuple[Verifier, Bundle, Identity]:
    sigstore = _sigstore()
    from sigstore_models.trustroot.v1 import TrustedRoot as TrustedRootModel  # lazy: sigstore_models, ~70 ms

    try:
        root = sigstore.models.TrustedRoot(inclusive_tsa_validity(TrustedRootModel.from_json(spec.trusted_root)))
        verifier = sigstore.verify.Verifier(trusted_root=root)
    except (sigstore.errors.Error, ValueError) as e:
        raise InputError(AttestationCode.BAD_POLICY, f"the trusted root is not usable: {e}", spec.source) from e
    try:
        bundle = sigstore.models.Bundle.from_json(bundle_bytes)
    except (sigstore.errors.Error, ValueError) as e:
        raise VerificationError(AttestationCode.BAD_BUNDLE, f"sigstore rejects the bundle: {e}") from e
    identity = sigstore.verify.policy.Identity(identity=spec.identity, issuer=spec.issuer)
    return verifier, bundle, identity


def check_dsse_bundle(spec: SigstoreSignerSpec, bundle_bytes: bytes) -> tuple[str, bytes] | str:
    """(payload type, payload) when the certificate bundle verifies for ``spec``; else the reason.

    Raises:
        VerificationError: ``BAD_BUNDLE`` when sigstore cannot parse the bundle at all (a
            bundle that parses but does not verify for ``spec`` is the returned reason).
        InputError: ``BAD_POLICY`` when the policy's trusted root is not usable.
        EnvironmentFailure: ``UNSUPPORTED_BUNDLE`` when sigstore-python cannot be imported.
    """
    sigstore = _sigstore()
    verifier, bundle, identity = _verifier_and_bundle(spec, bundle_bytes)
    try:
        payload_type, payload = verifier.verify_dsse(bundle, identity)
    except (sigstore.errors.Error, ValueError) as e:
        return f"{spec.id}: {e}"
    return payload_type, payload


def check_artifact_bundle(spec: SigstoreSignerSpec, bundle_bytes: bytes, artifact: bytes) -> str | None:
    """None when a message-signature bundle verifies ``artifact`` for ``spec``; else the reason.

    Raises:
        VerificationError: ``BAD_BUNDLE`` when sigstore cannot parse the bundle at all.
        InputError: ``BAD_POLICY`` when the policy's trusted root is not usable.
        EnvironmentFailure: ``UNSUPPORTED_BUNDLE`` when sigstore-python cannot be imported.
    """
    sigstore = _sigstore()
    verifier, bundle, identity = _verifier_and_bundle(spec, bundle_bytes)
    try:
        verifier.verify_artifact(artifact, bundle, identity)
    except (sigstore.errors.Error, ValueError) as e:
        return f"{spec.id}: {e}"
    return None


#: Where an explicit OIDC identity token is read from, in order: attest's (and cosign's) name,
#: then sigstore-python's.
IDENTITY_TOKEN_ENV = ("SIGSTORE_ID_TOKEN", "SIGSTORE_IDENTITY_TOKEN")


def ambient_identity_token() -> str:
    """The OIDC identity token for keyless signing when none is given, found as sigstore-python finds it.

    In order: ``$SIGSTORE_ID_TOKEN``, ``$SIGSTORE_IDENTITY_TOKEN``, then the CI's ambient
    credential through ``sigstore.oidc.detect_credential()`` (the ``id`` package, audience
    ``sigstore``): on GitHub Actions (``GITHUB_ACTIONS``) a GET of
    ``$ACTIONS_ID_TOKEN_REQUEST_URL&audience=sigstore`` with ``$ACTIONS_ID_TOKEN_REQUEST_TOKEN``
    as bearer token (the workflow needs ``permissions: id-token: write``); also GitLab,
    Buildkite, CircleCI and Google Cloud, as ``id`` detects them.

    Raises:
        InputError: ``USAGE`` when no token is given and none is detected;
            ``SIGNING_FAILED`` when a CI environment is detected but its credential cannot be
            obtained (missing permission, the token endpoint fails or answers garbage, a request
            URL that does not parse, a token for another audience).
    """
    for name in IDENTITY_TOKEN_ENV:
        token = os.environ.get(name)
        if token:
            return token
    _sigstore()
    import urllib3  # lazy: ~30 ms, only for ambient credential detection
    from sigstore.errors import Error as SigstoreError  # lazy: sigstore (see _sigstore)
    from sigstore.oidc import detect_credential  # lazy: sigstore.oidc, ~110 ms

    try:
        found = detect_credential()
    except (SigstoreError, ValueError, OSError, urllib3.exceptions.HTTPError) as e:
        # sigstore wraps only the ``id`` package's own errors; a token endpoint answering an
        # error in bytes that are not UTF-8 (UnicodeDecodeError), a request URL urllib3 cannot
        # parse or does not speak (LocationValueError), or a CI helper that cannot be run
        # (OSError) escape it. The detail quotes the endpoint, so it is cut short.
        raise InputError(AttestationCode.SIGNING_FAILED, f"ambient OIDC credential detection failed: {type(e).__name__}: "
                         f"{str(e)[:300]}") from e
    if not found:
        raise InputError(CommonCode.USAGE, "keyless signing needs an identity token: --identity-token, SIGSTORE_ID_TOKEN, "
                         "or a CI that provides one (GitHub Actions with permissions id-token: write)")
    return str(found)


def sign_dsse_keyless(payload: bytes, identity_token: str, *, staging: bool = False) -> bytes:
    """Sign an in-toto payload with a Fulcio certificate and a Rekor entry (needs the network)."""
    sigstore = _sigstore()
    from sigstore.dsse import Statement  # lazy: sigstore (see _sigstore)
    from sigstore.models import ClientTrustConfig  # lazy: sigstore (see _sigstore)
    from sigstore.oidc import IdentityToken  # lazy: sigstore.oidc, ~110 ms
    from sigstore.sign import SigningContext  # lazy: sigstore.sign, ~200 ms

    try:
        config = ClientTrustConfig.staging() if staging else ClientTrustConfig.production()
        context = SigningContext.from_trust_config(config)
        token = IdentityToken(identity_token)
        with context.signer(token, cache=True) as signer:
            bundle = signer.sign_dsse(Statement(payload))
    except (sigstore.errors.Error, ValueError, OSError) as e:
        raise EnvironmentFailure(AttestationCode.SIGNING_FAILED, f"keyless signing failed: {e}") from e
    return bundle.to_json().encode("utf-8")


# --- Key-signed bundles with transparency-log entries and signed timestamps.
#
# sigstore-python 4.5 verifies only certificate bundles (``models.Bundle`` requires a
# certificate), but the checks a key-signed bundle needs are its own, applied to the parts:
# ``TransparencyLogEntry._verify`` (Merkle inclusion proof, signed checkpoint, signed entry
# timestamp, against the trusted root's log keys) and ``Verifier._verify_signed_timestamp``
# (an RFC 3161 response against the trusted root's timestamp authorities). They are private
# names of a release pinned exactly in pyproject.toml; a new release is checked against these
# tests before the pin moves. What is left to attest is the one step sigstore does only for
# certificates: that the log entry's body is this signature by this key over this artifact or
# payload (sigstore's step (8), CVE-2022-36056), compared on parsed values.

MAX_TLOG_ENTRIES = 1  # what sigstore-python accepts for a certificate bundle
_MAX_FUTURE = _dt.timedelta(minutes=5)  # clock skew allowed for a log's integrated time


def _fail(code: AttestationCode, detail: str) -> VerificationError:
    return VerificationError(code, detail)


def _entry_body_check(entry: rekor_v1.TransparencyLogEntry, public_key: PublicKey, signature: bytes, *, artifact: bytes | None,
                      payload_type: str | None, payload: bytes | None, pae: bytes | None) -> None:
    """(8) The entry's canonicalized body records ``signature`` by ``public_key`` over this artifact / envelope.

    Raises:
        VerificationError: ``TLOG_ENTRY_MISMATCH`` (another signature, key, artifact or
            payload); ``UNSUPPORTED_BUNDLE`` (an entry kind attest does not know).
    """
    import rekor_types  # lazy: ~100 ms, only for a log entry
    from sigstore_models.rekor import v2  # lazy: sigstore_models, ~70 ms

    der = public_key_der(public_key)
    kind, version = entry.kind_version.kind, entry.kind_version.version
    body = entry.canonicalized_body

    def same_key(pem_b64: str | None) -> bool:
        if pem_b64 is None:
            return False
        try:
            found = serialization.load_pem_public_key(base64.b64decode(pem_b64, validate=True))
        except (ValueError, TypeError):
            return False  # a certificate or junk is not this key
        return found.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo) == der

    def mismatch(what: str) -> VerificationError:
        return _fail(AttestationCode.TLOG_ENTRY_MISMATCH, f"the {kind} {version} log entry does not record this bundle: {what}")

    try:
        if artifact is not None and kind == "hashedrekord" and version == "0.0.1":
            v1 = rekor_types.Hashedrekord.model_validate_json(body).spec.root
            want = hashlib.sha256(artifact).hexdigest()
            if v1.data.hash is None or v1.data.hash.algorithm != rekor_types.hashedrekord.Algorithm.SHA256 or v1.data.hash.value != want:
                raise mismatch("another artifact digest")
            if v1.signature.content is None or base64.b64decode(v1.signature.content) != signature:
                raise mismatch("another signature")
            if v1.signature.public_key is None or not same_key(v1.signature.public_key.content):
                raise mismatch("another key")
            return
        if payload is not None and kind == "dsse" and version == "0.0.1":
            d1 = rekor_types.Dsse.model_validate_json(body).spec.root
            if d1.payload_hash is None or d1.payload_hash.algorithm != rekor_types.dsse.Algorithm.SHA256 \
                    or d1.payload_hash.value != hashlib.sha256(payload).hexdigest():
                raise mismatch("another payload")
            sigs = d1.signatures or []
            if len(sigs) != 1 or base64.b64decode(sigs[0].signature) != signature or not same_key(sigs[0].verifier):
                raise mismatch("another signature or key")
            return
        if kind == "hashedrekord" and version == "0.0.2":
            h2 = v2.entry.Entry.from_json(body).spec.hashed_rekord_v002
            if h2 is None:
                raise mismatch("not a hashedrekord body")
            # Rekor v2 logs a DSSE envelope as a hashedrekord over its PAE (rekor-v2-spec 6.1.4).
            signed = artifact if artifact is not None else pae
            if signed is None or h2.data.algorithm.name != "SHA2_256" or h2.data.digest != hashlib.sha256(signed).digest():
                raise mismatch("another artifact or envelope digest")
            if h2.signature.content != signature:
                raise mismatch("another signature")
            verifier = h2.signature.verifier
            if verifier.public_key is None or verifier.public_key.raw_bytes != der:
                raise mismatch("another key")
            return
    except (ValueError, TypeError, AttributeError) as e:  # pydantic's ValidationError is a ValueError
        raise mismatch(f"its body does not parse as {kind} {version}: {str(e)[:200]}") from e
    raise _fail(AttestationCode.UNSUPPORTED_BUNDLE, f"a {kind} {version} log entry is not checked by attest for a "
                f"{'message signature' if artifact is not None else 'DSSE envelope'} (hashedrekord 0.0.1/0.0.2, dsse 0.0.1 are)")



def _utc(seconds: int) -> _dt.datetime | None:
    """A log's integrated time (seconds since the epoch) as a UTC datetime; None outside any datetime (pure)."""
    try:
        return _dt.datetime.fromtimestamp(seconds, _dt.UTC)
    except (ValueError, OverflowError, OSError):
        return None


def _within(period: TimeRange | None, when: _dt.datetime) -> bool:
    """``when`` inside a trusted root's validity period, a closed interval; no period: always (pure)."""
    if period is None:
        return True
    return bool(period.start <= when and (period.end is None or when <= period.end))


def _verify_entry(sigstore: ModuleType, entry: TransparencyLogEntry, root: TrustedRoot, root_source: str,
                  clock: _dt.datetime) -> tuple[TransparencyLogInstance, _dt.datetime | None]:
    """(3) One log entry against the one log of the root its log id names; that log and the entry's signed integrated time.

    sigstore's own keyring tries every log key of the root when the entry's log id is no key's
    hash (a Rekor v2 log id never is), so a checkpoint of one log could verify under another
    (retired) log's key; here the entry is verified with the named log's key alone. A present
    inclusion promise is always verified (sigstore skips it without an integrated time), and a
    signed integrated time must lie inside that log key's validity.

    Raises:
        VerificationError: ``TLOG_ENTRY_INVALID``.
    """
    from sigstore._internal.trust import Keyring, RekorKeyring  # lazy: sigstore, ~150 ms

    inner = entry._inner
    if inner.inclusion_promise is not None and not inner.integrated_time:
        raise _fail(AttestationCode.TLOG_ENTRY_INVALID, "the log entry has an inclusion promise but no integrated time: its "
                    "signed entry timestamp cannot be checked")
    log_id = bytes(inner.log_id.key_id)
    logs = [t for t in root._inner.tlogs if bytes(t.log_id.key_id) == log_id
            and (t.public_key.valid_for is None or t.public_key.valid_for.start <= clock)]
    if not logs:
        raise _fail(AttestationCode.TLOG_ENTRY_INVALID, f"the log entry's log id {log_id.hex()[:64]} names no transparency log "
                    f"of the trusted root {root_source}")
    integrated = inner.integrated_time
    when = _utc(integrated) if integrated else None
    if integrated and (when is None or when > clock + _MAX_FUTURE):
        raise _fail(AttestationCode.TLOG_ENTRY_INVALID, f"the log entry's integrated time {integrated} is in the future")
    signed_time = when if inner.inclusion_promise is not None else None  # the SET covers it
    reasons = []
    for log in logs:
        try:
            entry._verify(RekorKeyring(Keyring([log.public_key])))
        except (sigstore.errors.Error, ValueError) as e:
            reasons.append(str(e))
            continue
        period = log.public_key.valid_for
        if signed_time is not None and period is not None and not _within(period, signed_time):  # no period: always within
            reasons.append(f"integrated at {signed_time.isoformat()}, outside its log key's validity "
                           f"({period.start.isoformat()} to {period.end.isoformat() if period.end else 'open'})")
            continue
        return log, signed_time
    raise _fail(AttestationCode.TLOG_ENTRY_INVALID, f"the log entry does not verify against the trusted root {root_source}: "
                + "; ".join(reasons)[:500])


class _TimestampAuthorities:
    """What ``Verifier._verify_signed_timestamp`` reads of its verifier: the trusted root, nothing else.

    A ``Verifier`` cannot be built from a trusted root without Fulcio certificates, which a
    deployment that signs with keys has no reason to pin; the timestamp check does not use them.
    """

    def __init__(self, root: TrustedRoot) -> None:
        self._trusted_root = root


def verify_key_bundle_evidence(
    trusted_root: bytes,
    root_source: str,
    bundle_bytes: bytes,
    public_key: PublicKey,
    signature: bytes,
    *,
    artifact: bytes | None = None,
    envelope: tuple[str, bytes, bytes] | None = None,
    now: _dt.datetime | None = None,
) -> int:
    """Verify offline the log entries and RFC 3161 timestamps of a key-signed bundle; return how many.

    ``signature`` (already verified under ``public_key`` by the caller) is what was logged and
    timestamped; ``artifact`` for a message signature, ``envelope = (payload type, payload,
    PAE)`` for a DSSE bundle. Steps: (1) the pinned trusted root (TSA periods closed, as for
    certificate bundles); (2) the bundle's parts as sigstore parses them; (3) each log entry:
    inclusion proof, signed checkpoint and, when present, the signed entry timestamp (never
    skipped: a promise needs an integrated time) against the key of the one log of the root
    its log id names, an integrated time not in the future and, when signed, inside that log
    key's validity (:func:`_verify_entry`); (4) its body is this signature by this key over
    this artifact or envelope; (5) every timestamp verifies against the root's timestamp
    authorities, over the signature, inside the authority's validity; (6) an entry without a
    signed integrated time under a log key whose validity has ended needs signed timestamps,
    all inside that validity.

    Raises:
        InputError: ``BAD_POLICY`` (the trusted root is not usable).
        VerificationError: ``BAD_BUNDLE`` (sigstore cannot parse the parts, an entry without
            an inclusion proof and checkpoint, too many or duplicate timestamps);
            ``UNSUPPORTED_BUNDLE`` (more than one log entry, an entry kind attest does not
            check); ``TLOG_ENTRY_INVALID``; ``TLOG_ENTRY_MISMATCH``; ``TIMESTAMP_INVALID``.
        EnvironmentFailure: ``UNSUPPORTED_BUNDLE`` when sigstore-python cannot be imported.
    """
    sigstore = _sigstore()
    from sigstore.models import TimestampVerificationData, TransparencyLogEntry  # lazy: sigstore (see _sigstore)
    from sigstore_models.bundle.v1 import Bundle as BundleModel  # lazy: sigstore_models, ~80 ms
    from sigstore_models.trustroot.v1 import TrustedRoot as TrustedRootModel  # lazy: sigstore_models, ~70 ms

    try:  # (1)
        root = sigstore.models.TrustedRoot(inclusive_tsa_validity(TrustedRootModel.from_json(trusted_root)))
    except (sigstore.errors.Error, ValueError) as e:
        raise InputError(AttestationCode.BAD_POLICY, f"the trusted root is not usable: {e}", root_source) from e
    try:  # (2)
        inner = BundleModel.from_json(bundle_bytes)
        material = inner.verification_material
        entries = [TransparencyLogEntry(e) for e in material.tlog_entries]
        stamps = TimestampVerificationData(material.timestamp_verification_data).rfc3161_timestamps \
            if material.timestamp_verification_data is not None else []
    except (sigstore.errors.Error, ValueError) as e:
        raise _fail(AttestationCode.BAD_BUNDLE, f"sigstore rejects the bundle's log entries or timestamps: {e}") from e
    if len(entries) > MAX_TLOG_ENTRIES:
        raise _fail(AttestationCode.UNSUPPORTED_BUNDLE, f"{len(entries)} log entries; attest checks at most {MAX_TLOG_ENTRIES}")
    from sigstore.verify.verifier import MAX_ALLOWED_TIMESTAMP  # lazy: sigstore.verify, ~200 ms

    if len(stamps) > MAX_ALLOWED_TIMESTAMP or len(set(stamps)) != len(stamps):
        raise _fail(AttestationCode.BAD_BUNDLE, f"more than {MAX_ALLOWED_TIMESTAMP} or duplicate signed timestamps")
    clock = now or _dt.datetime.now(_dt.UTC)
    untimed: list[TransparencyLogInstance] = []  # the log instances of entries no signed integrated time places in time
    for entry in entries:
        log, signed_time = _verify_entry(sigstore, entry, root, root_source, clock)  # (3)
        if signed_time is None:
            untimed.append(log)
        payload_type, payload, pae = envelope if envelope is not None else (None, None, None)  # (4)
        _entry_body_check(entry._inner, public_key, signature, artifact=artifact, payload_type=payload_type, payload=payload, pae=pae)
    if stamps and not root.get_timestamp_authorities():
        raise _fail(AttestationCode.TIMESTAMP_INVALID, f"the bundle carries signed timestamps and the trusted root {root_source} "
                    "names no timestamp authority")
    times: list[_dt.datetime] = []
    for i, stamp in enumerate(stamps):  # (5)
        # Every timestamp must verify (sigstore needs one verified time for a certificate; a
        # key has no validity to check it against, so an unverifiable one is refused, never ignored).
        result = sigstore.verify.Verifier._verify_signed_timestamp(_TimestampAuthorities(root), stamp, signature)
        if result is None:
            raise _fail(AttestationCode.TIMESTAMP_INVALID, f"signed timestamp {i} does not verify against the timestamp "
                        f"authorities of {root_source} (another message, an untrusted authority, or outside its validity)")
        times.append(result.time)
    for log in untimed:  # (6)
        # An entry without a signed integrated time (Rekor v2, or no inclusion promise) under a
        # log key whose validity has ended: only signed times inside that validity place it there.
        period = log.public_key.valid_for
        if period is not None and period.end is not None and period.end < clock \
                and (not times or not all(_within(period, t) for t in times)):
            raise _fail(AttestationCode.TLOG_ENTRY_INVALID, f"the log entry has no signed integrated time and its log key's validity "
                        f"ended {period.end.isoformat()}: nothing shows it was logged while the key was valid")
    return len(entries) + len(stamps)
