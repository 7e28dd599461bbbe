"""Bundle media types, key-signed message signatures, closed validity periods.

- DSSE and message-signature bundles of every media type sigstore-python accepts (v0.1, v0.2,
  both v0.3 spellings) are verified, with the verification material each version uses;
- a key-signed message-signature bundle is verified by `verify-attestation --artifact` with
  the policy's keys (offline), not refused with NO_TRUSTED_SIGNATURE;
- a trusted root's validity periods are closed intervals (a timestamp exactly at the end of
  a TSA's validity is valid).
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from support.keys import BEACON, GHA_ISSUER, VECTORS, Keys, dumps

from attest.attestation import load_policy, verify_artifact_bundle, verify_attestation_bytes
from attest.attestation._sigstore import CLOCK_RESOLUTION, inclusive_tsa_validity
from attest.attestation._verify import BUNDLE_MEDIA_TYPES, bundle_material
from attest.cli import main
from attest.errors import VerificationError

V01, V02 = "application/vnd.dev.sigstore.bundle+json;version=0.1", "application/vnd.dev.sigstore.bundle+json;version=0.2"
V03, V03_ALT = "application/vnd.dev.sigstore.bundle.v0.3+json", "application/vnd.dev.sigstore.bundle+json;version=0.3"
CONFORMANCE = Path(__file__).resolve().parent.parent / "data" / "sigstore-conformance" / "bundle-verify"
ARTIFACT = b"the release artifact\n"


# --- the media type decides the verification material (pure) -----------------------------------

@pytest.mark.parametrize(
    ("media_type", "material", "outcome"),
    [
        (V03, "certificate", "certificate"),
        (V03_ALT, "certificate", "certificate"),
        (V02, "x509CertificateChain", "x509CertificateChain"),
        (V01, "x509CertificateChain", "x509CertificateChain"),
        (V03, "publicKey", "publicKey"),
        (V03_ALT, "publicKey", "publicKey"),
        (V03, "x509CertificateChain", "BAD_BUNDLE"),       # sigstore-python: "expected certificate in bundle"
        (V02, "certificate", "BAD_BUNDLE"),                # sigstore-python: "expected certificate chain in bundle"
        (V01, "certificate", "BAD_BUNDLE"),
        (V02, "publicKey", "BAD_MEDIA_TYPE"),              # attest reads key-signed bundles as v0.3 only
        (V01, "publicKey", "BAD_MEDIA_TYPE"),
        ("application/vnd.dev.sigstore.bundle+json;version=99.9", "certificate", "BAD_MEDIA_TYPE"),
        ("application/vnd.dev.sigstore.bundle.v0.4+json", "certificate", "BAD_MEDIA_TYPE"),
        ("application/json", "publicKey", "BAD_MEDIA_TYPE"),
        (None, "publicKey", "BAD_MEDIA_TYPE"),
        (V03, None, "BAD_BUNDLE"),
        (V03, ("certificate", "publicKey"), "BAD_BUNDLE"),
    ],
)
def test_bundle_material_follows_the_media_type(media_type: Any, material: Any, outcome: str) -> None:
    kinds = material if isinstance(material, tuple) else (material,) if material else ()
    doc: dict[str, Any] = {"mediaType": media_type, "verificationMaterial": {k: {} for k in kinds}, "dsseEnvelope": {}}
    if outcome in ("BAD_BUNDLE", "BAD_MEDIA_TYPE"):
        with pytest.raises(VerificationError) as caught:
            bundle_material(doc)
        assert caught.value.code == outcome
    else:
        assert bundle_material(doc) == outcome


def test_the_media_types_are_sigstore_pythons() -> None:
    from sigstore.models import Bundle

    assert set(BUNDLE_MEDIA_TYPES) == {t.value for t in Bundle.BundleType}


@pytest.mark.parametrize(
    ("case", "media_type"),
    [("intoto-expired-certificate_fail", V02), ("happy-path-intoto-in-dsse-v3", V03), ("rekor2-dsse-happy-path", V03)],
)
def test_dsse_bundles_of_every_version_reach_sigstore(tmp_path: Path, case: str, media_type: str) -> None:
    """A v0.2 DSSE bundle is no longer refused for its media type: sigstore-python verifies it (and refuses this one)."""
    data = (CONFORMANCE / case / "bundle.sigstore.json").read_bytes()
    assert json.loads(data)["mediaType"] == media_type
    root = CONFORMANCE / case / "trusted_root.json"
    policy = tmp_path / "p.toml"
    policy.write_text(f'threshold = 1\n[[signers]]\nkind = "sigstore"\nidentity = "{BEACON}"\nissuer = "{GHA_ISSUER}"\n'
                      f'trusted_root = "{root if root.exists() else VECTORS / "production_trusted_root.json"}"\n')
    if case.endswith("_fail"):
        with pytest.raises(VerificationError) as caught:
            verify_attestation_bytes(data, load_policy(policy))
        assert caught.value.code == "NO_TRUSTED_SIGNATURE" and f"sigstore:{GHA_ISSUER}:{BEACON}: " in caught.value.findings[0].detail
    else:
        assert verify_attestation_bytes(data, load_policy(policy)).format == "bundle"


# --- key-signed message-signature bundles -------------------------------------------------------

def key_message_bundle(keys: Keys, name: str, artifact: bytes = ARTIFACT, *, media_type: str = V03,
                       digest: bool = True, hint: str | None = None) -> dict[str, Any]:
    """A v0.3 key-signed message-signature bundle as cosign / sigstore-js write them (without a log entry)."""
    signer = keys.signers[name]
    sig: dict[str, Any] = {"signature": base64.b64encode(signer.sign(artifact)).decode()}
    if digest:
        sig["messageDigest"] = {"algorithm": "SHA2_256", "digest": base64.b64encode(hashlib.sha256(artifact).digest()).decode()}
    return {"mediaType": media_type, "verificationMaterial": {"publicKey": {"hint": hint if hint is not None else signer.key_id},
                                                              "tlogEntries": []},
            "messageSignature": sig}


@pytest.mark.parametrize("name", ["ed", "ec"])
@pytest.mark.parametrize("digest", [True, False], ids=["with-digest", "signature-only"])
def test_key_signed_message_signature_bundle_verifies(keys: Keys, write_policy, name: str, digest: bool) -> None:
    bundle = dumps(key_message_bundle(keys, name, digest=digest))
    assert verify_artifact_bundle(bundle, ARTIFACT, load_policy(write_policy(["ed", "ec"]))) == (
        "key:sha256:" + keys.signers[name].key_id,)


def test_the_hint_never_selects_the_key(keys: Keys, write_policy) -> None:
    bundle = dumps(key_message_bundle(keys, "ed", hint=keys.signers["ec"].key_id))
    assert verify_artifact_bundle(bundle, ARTIFACT, load_policy(write_policy(["ed"]))) == ("key:sha256:" + keys.signers["ed"].key_id,)


@pytest.mark.parametrize(
    ("mutate", "artifact", "policy_keys", "code"),
    [
        (None, ARTIFACT + b"x", ("ed",), "NO_TRUSTED_SIGNATURE"),                      # another artifact (the digest says so)
        (lambda b: b["messageSignature"].pop("messageDigest"), ARTIFACT + b"x", ("ed",), "NO_TRUSTED_SIGNATURE"),  # the signature says so
        (None, ARTIFACT, ("ec",), "NO_TRUSTED_SIGNATURE"),                              # an untrusted key
        (None, ARTIFACT, ("ed", "ec"), "THRESHOLD_NOT_MET"),                            # threshold 2, one key
        (lambda b: b["messageSignature"]["messageDigest"].update({"algorithm": "SHA2_384"}), ARTIFACT, ("ed",), "BAD_BUNDLE"),
        (lambda b: b["messageSignature"].update({"extra": 1}), ARTIFACT, ("ed",), "BAD_BUNDLE"),
        (lambda b: b["messageSignature"].pop("signature"), ARTIFACT, ("ed",), "BAD_BUNDLE"),
        (lambda b: b.update({"messageSignature": "AA=="}), ARTIFACT, ("ed",), "BAD_BUNDLE"),
        (lambda b: b["messageSignature"].update({"signature": b["messageSignature"]["signature"].rstrip("=")}),
         ARTIFACT, ("ed",), "BAD_BASE64"),
        # Log entries and timestamps under a key signer without trusted_root: refused, never unchecked.
        (lambda b: b["verificationMaterial"].update({"tlogEntries": [{"logIndex": "1"}]}), ARTIFACT, ("ed",), "TRUSTED_ROOT_REQUIRED"),
        (lambda b: b["verificationMaterial"].update({"timestampVerificationData": {"rfc3161Timestamps": [{"signedTimestamp": "AA=="}]}}),
         ARTIFACT, ("ed",), "TRUSTED_ROOT_REQUIRED"),
        (lambda b: b.update({"mediaType": V02}), ARTIFACT, ("ed",), "BAD_MEDIA_TYPE"),
        (lambda b: b.update({"dsseEnvelope": {}}), ARTIFACT, ("ed",), "UNSUPPORTED_BUNDLE"),
        (lambda b: b["verificationMaterial"]["publicKey"].update({"rawBytes": "AA=="}), ARTIFACT, ("ed",), "BAD_BUNDLE"),
    ],
)
def test_key_signed_message_signature_bundle_refusals(keys: Keys, write_policy, mutate: Any, artifact: bytes,
                                                      policy_keys: tuple[str, ...], code: str) -> None:
    doc = key_message_bundle(keys, "ed")
    if mutate is not None:
        mutate(doc)
    policy = load_policy(write_policy(policy_keys, threshold=len(policy_keys) if code == "THRESHOLD_NOT_MET" else 1))
    with pytest.raises(VerificationError) as caught:
        verify_artifact_bundle(dumps(doc), artifact, policy)
    assert caught.value.code == code
    if code == "NO_TRUSTED_SIGNATURE" and mutate is None and policy_keys == ("ec",):
        assert keys.signers["ed"].key_id in str(caught.value)  # the hint present is named, and the key trusted
        assert keys.signers["ec"].key_id in str(caught.value)


def test_a_key_bundle_under_a_policy_of_identities_says_so(tmp_path: Path, keys: Keys) -> None:
    policy = tmp_path / "p.toml"
    policy.write_text(f'threshold = 1\n[[signers]]\nkind = "sigstore"\nidentity = "{BEACON}"\nissuer = "{GHA_ISSUER}"\n'
                      f'trusted_root = "{VECTORS / "production_trusted_root.json"}"\n')
    with pytest.raises(VerificationError) as caught:
        verify_artifact_bundle(dumps(key_message_bundle(keys, "ed")), ARTIFACT, load_policy(policy))
    assert caught.value.code == "NO_TRUSTED_SIGNATURE" and "the policy trusts no key" in str(caught.value)


def test_an_artifact_signature_never_counts_for_a_signer_limited_to_predicates(keys: Keys, write_policy) -> None:
    policy = write_policy(["ed"], extra='predicates = ["https://attest.dev/runtime/v1"]\n')
    with pytest.raises(VerificationError) as caught:
        verify_artifact_bundle(dumps(key_message_bundle(keys, "ed")), ARTIFACT, load_policy(policy))
    assert caught.value.code == "SIGNER_NOT_FOR_PREDICATE"


def test_verify_attestation_artifact_cli_with_a_key(capsys: pytest.CaptureFixture[str], tmp_path: Path, keys: Keys,
                                                   write_policy) -> None:
    bundle, artifact = tmp_path / "release.tar.sigstore.json", tmp_path / "release.tar"
    bundle.write_bytes(dumps(key_message_bundle(keys, "ec")))
    artifact.write_bytes(ARTIFACT)
    policy = write_policy(["ec"])
    code = main(["verify-attestation", str(bundle), "--artifact", str(artifact), "--policy", str(policy), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["ok"] is True and out["signers"] == ["key:sha256:" + keys.signers["ec"].key_id]
    artifact.write_bytes(ARTIFACT + b"tampered")
    code = main(["verify-attestation", str(bundle), "--artifact", str(artifact), "--policy", str(policy), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 1 and out["errors"][0]["code"] == "NO_TRUSTED_SIGNATURE"


# --- validity periods are closed intervals ------------------------------------------------------

END = dt.datetime(2025, 6, 12, 12, 2, 20, tzinfo=dt.UTC)


@pytest.mark.parametrize(
    ("signed_at", "inside"),
    [(END - CLOCK_RESOLUTION, True), (END, True), (END + CLOCK_RESOLUTION, False), (END + dt.timedelta(seconds=1), False)],
    ids=["just-before-end", "exactly-at-end", "just-after-end", "a-second-after"],
)
def test_a_tsa_period_compared_as_sigstore_does_is_the_closed_interval(signed_at: dt.datetime, inside: bool) -> None:
    """sigstore-python accepts a TSA time while `gen_time < end`: after the rewrite that is `gen_time <= end`."""
    from sigstore_models.trustroot.v1 import TrustedRoot

    doc = json.loads((CONFORMANCE / "trust-root-tsa-validity-end-inclusive" / "trusted_root.json").read_bytes())
    root = TrustedRoot.from_json(json.dumps(doc))
    assert root.timestamp_authorities[0].valid_for.end == END
    widened = inclusive_tsa_validity(root)
    end = widened.timestamp_authorities[0].valid_for.end
    assert (signed_at < end) is inside
    # Pure: the parsed root is not changed, and nothing else is.
    assert root.timestamp_authorities[0].valid_for.end == END
    assert widened.tlogs == root.tlogs and widened.certificate_authorities == root.certificate_authorities


@pytest.mark.parametrize(
    ("case", "ok"),
    [("trust-root-tsa-validity-end-inclusive", True), ("trust-root-tlog-validity-end-inclusive", True),
     ("rekor2-timestamp-outside-trust-root-tsa-validity_fail", False)],
)
def test_a_timestamp_at_the_end_of_validity_is_valid(tmp_path: Path, case: str, ok: bool) -> None:
    d = CONFORMANCE / case
    data = (d / "bundle.sigstore.json").read_bytes()
    policy = tmp_path / "p.toml"
    policy.write_text(f'threshold = 1\n[[signers]]\nkind = "sigstore"\nidentity = "{BEACON}"\nissuer = "{GHA_ISSUER}"\n'
                      f'trusted_root = "{d / "trusted_root.json"}"\n')
    artifact = (CONFORMANCE / "a.txt").read_bytes()
    if ok:
        assert verify_artifact_bundle(data, artifact, load_policy(policy)) == (f"sigstore:{GHA_ISSUER}:{BEACON}",)
    else:
        with pytest.raises(VerificationError) as caught:
            verify_artifact_bundle(data, artifact, load_policy(policy))
        assert caught.value.code == "NO_TRUSTED_SIGNATURE"
