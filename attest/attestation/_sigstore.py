"""The only module that imports sigstore-python, and only when a function here is called.

Offline verification is always given the policy's pinned trusted root explicitly (never the
TUF cache under XDG_CACHE_HOME, never the network). Identities match exactly: the SAN must be
equal to the pinned identity (sigstore's ``Identity`` compares set membership, no patterns)
and the OIDC issuer extension equal to the pinned issuer.
"""

from __future__ import annotations

import datetime as _dt
from typing import Any

from ..errors import EnvironmentFailure, InputError, VerificationError
from ._codes import AttestationCode
from ._policy import SigstoreSignerSpec


def _sigstore() -> Any:
    try:
        import sigstore.errors
        import sigstore.models
        import sigstore.verify
        import sigstore.verify.policy
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


def inclusive_tsa_validity(root: Any) -> Any:
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


def _verifier_and_bundle(spec: SigstoreSignerSpec, bundle_bytes: bytes) -> tuple[Any, Any, Any]:
    sigstore = _sigstore()
    from sigstore_models.trustroot.v1 import TrustedRoot as TrustedRootModel

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


def sign_dsse_keyless(payload: bytes, identity_token: str, *, staging: bool = False) -> bytes:
    """Sign an in-toto payload with a Fulcio certificate and a Rekor entry (needs the network)."""
    sigstore = _sigstore()
    from sigstore.dsse import Statement
    from sigstore.models import ClientTrustConfig
    from sigstore.oidc import IdentityToken
    from sigstore.sign import SigningContext

    try:
        config = ClientTrustConfig.staging() if staging else ClientTrustConfig.production()
        context = SigningContext.from_trust_config(config)
        token = IdentityToken(identity_token)
        with context.signer(token, cache=True) as signer:
            bundle = signer.sign_dsse(Statement(payload))
    except (sigstore.errors.Error, ValueError, OSError) as e:
        raise EnvironmentFailure(AttestationCode.SIGNING_FAILED, f"keyless signing failed: {e}") from e
    return bundle.to_json().encode("utf-8")
