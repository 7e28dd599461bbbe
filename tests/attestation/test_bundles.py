"""Sigstore bundles: key-based ones verified by attest, certificate ones by sigstore-python offline
against the policy's pinned trusted root, with the real vectors in tests/data/sigstore.
"""

from __future__ import annotations

import base64
import json
import socket
from pathlib import Path
from typing import Any

import pytest
from support.keys import BEACON, GHA_ISSUER, VECTORS, Keys, as_json, dumps

from attest.attestation import (
    SLSA_PROVENANCE_V1,
    closed_tree_inventory,
    closed_tree_statement,
    load_policy,
    sign_statement,
    verify_artifact_bundle,
    verify_attestation_bytes,
)
from attest.errors import VerificationError
from attest.inventory import inventory_tree

DSSE_VECTOR = VECTORS / "a.dsse.staging-rekor-v2.txt.sigstore.json"
STAGING = VECTORS / "staging_trusted_root.json"
PRODUCTION = VECTORS / "production_trusted_root.json"
WHL_IDENTITY = "https://github.com/trailofbits/rfc8785.py/.github/workflows/release.yml@refs/tags/v0.1.2"


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Verification must never reach the network: any connection attempt fails the test."""

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError(f"network access during verification: {args!r}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


@pytest.fixture(autouse=True)
def poisoned_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """A cached trusted root under XDG_CACHE_HOME must never be preferred over the pinned one."""
    cache = tmp_path_factory.mktemp("xdg-cache")
    for instance in ("tuf-repo-cdn.sigstore.dev", "tuf-repo-cdn.sigstage.dev"):
        d = cache / "sigstore-python" / "tuf" / instance
        d.mkdir(parents=True, exist_ok=True)
        (d / "trusted_root.json").write_text("{not json")
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    monkeypatch.setenv("XDG_DATA_HOME", str(cache))


def sigstore_policy(tmp_path: Path, identity: str, issuer: str, root: Path, *, extra: str = "") -> Any:
    p = tmp_path / "sigstore-policy.toml"
    p.write_text(
        "threshold = 1\n[[signers]]\nkind = \"sigstore\"\n"
        f"identity = {json.dumps(identity)}\nissuer = {json.dumps(issuer)}\ntrusted_root = {json.dumps(str(root))}\n" + extra
    )
    return load_policy(p)


def test_real_dsse_bundle_verifies_offline_with_the_right_identity(tmp_path: Path) -> None:
    verified = verify_attestation_bytes(DSSE_VECTOR.read_bytes(), sigstore_policy(tmp_path, BEACON, GHA_ISSUER, STAGING))
    assert verified.format == "bundle"
    assert verified.predicate_type == SLSA_PROVENANCE_V1
    assert verified.signers == (f"sigstore:{GHA_ISSUER}:{BEACON}",)
    assert verified.statement["subject"][0]["name"] == "a.txt"
    envelope = json.loads(DSSE_VECTOR.read_bytes())["dsseEnvelope"]
    assert verified.payload == base64.b64decode(envelope["payload"])
    # Not a tree statement: `attest verify` would refuse it.
    with pytest.raises(VerificationError) as caught:
        closed_tree_inventory(verified)
    assert caught.value.code == "BAD_PREDICATE_TYPE"


@pytest.mark.parametrize(
    ("identity", "issuer", "root"),
    [
        (BEACON[:-len("main")], GHA_ISSUER, STAGING),  # a prefix
        (BEACON + "-evil", GHA_ISSUER, STAGING),  # the identity as a prefix of a longer one
        (".*", GHA_ISSUER, STAGING),  # a pattern
        ("https://github.com/sigstore-conformance/.*", GHA_ISSUER, STAGING),
        (BEACON.upper(), GHA_ISSUER, STAGING),
        (BEACON, "https://github.com/login/oauth", STAGING),  # the wrong issuer
        (BEACON, GHA_ISSUER + "/", STAGING),
        (BEACON, GHA_ISSUER, PRODUCTION),  # the other instance's root
    ],
)
def test_real_dsse_bundle_fails_with_anything_else(tmp_path: Path, identity: str, issuer: str, root: Path) -> None:
    with pytest.raises(VerificationError) as caught:
        verify_attestation_bytes(DSSE_VECTOR.read_bytes(), sigstore_policy(tmp_path, identity, issuer, root))
    assert caught.value.code == "NO_TRUSTED_SIGNATURE"


def _tampered_payload(doc: dict[str, Any]) -> None:
    statement = json.loads(base64.b64decode(doc["dsseEnvelope"]["payload"]))
    statement["subject"][0]["digest"]["sha256"] = "0" * 64
    doc["dsseEnvelope"]["payload"] = base64.b64encode(json.dumps(statement).encode()).decode()


def test_real_dsse_bundle_with_a_changed_payload_fails(tmp_path: Path) -> None:
    doc = json.loads(DSSE_VECTOR.read_bytes())
    _tampered_payload(doc)
    with pytest.raises(VerificationError) as caught:
        verify_attestation_bytes(json.dumps(doc).encode(), sigstore_policy(tmp_path, BEACON, GHA_ISSUER, STAGING))
    assert caught.value.code == "NO_TRUSTED_SIGNATURE"


def test_real_dsse_bundle_with_a_changed_certificate_fails(tmp_path: Path) -> None:
    doc = json.loads(DSSE_VECTOR.read_bytes())
    raw = bytearray(base64.b64decode(doc["verificationMaterial"]["certificate"]["rawBytes"]))
    raw[-10] ^= 1  # inside the certificate's signature
    doc["verificationMaterial"]["certificate"]["rawBytes"] = base64.b64encode(bytes(raw)).decode()
    with pytest.raises(VerificationError) as caught:
        verify_attestation_bytes(json.dumps(doc).encode(), sigstore_policy(tmp_path, BEACON, GHA_ISSUER, STAGING))
    assert caught.value.code in {"NO_TRUSTED_SIGNATURE", "BAD_BUNDLE"}


def test_certificate_bundle_under_a_key_only_policy_fails(write_policy) -> None:
    with pytest.raises(VerificationError) as caught:
        verify_attestation_bytes(DSSE_VECTOR.read_bytes(), load_policy(write_policy(["ed"])))
    assert caught.value.code == "NO_TRUSTED_SIGNATURE"
    assert "trusts no Sigstore identity" in caught.value.detail


def test_key_bundle_under_a_sigstore_only_policy_fails(tmp_path: Path, sample_tree: Path, keys: Keys) -> None:
    data = sign_statement(closed_tree_statement("t", inventory_tree(sample_tree)), keys.signers["ed"], fmt="bundle")
    with pytest.raises(VerificationError) as caught:
        verify_attestation_bytes(data, sigstore_policy(tmp_path, BEACON, GHA_ISSUER, STAGING))
    assert caught.value.code == "NO_TRUSTED_SIGNATURE"


def test_mixed_policy_counts_a_key_and_an_identity_separately(tmp_path: Path, keys: Keys) -> None:
    extra = f'[[signers]]\nkind = "key"\npublic_key = "{keys.pub("ed")}"\n'
    policy = sigstore_policy(tmp_path, BEACON, GHA_ISSUER, STAGING, extra=extra)
    assert verify_attestation_bytes(DSSE_VECTOR.read_bytes(), policy).signers == (f"sigstore:{GHA_ISSUER}:{BEACON}",)


# --- message-signature bundles (artifact signatures) ------------------------------------------

@pytest.mark.parametrize(
    ("bundle", "artifact", "identity", "issuer", "root"),
    [
        ("bundle_v3.txt.sigstore", "bundle_v3.txt", "william@yossarian.net", "https://github.com/login/oauth", STAGING),
        ("bundle_v3_github.whl.sigstore", "bundle_v3_github.whl", WHL_IDENTITY, GHA_ISSUER, PRODUCTION),
    ],
)
def test_real_artifact_bundles(tmp_path: Path, bundle: str, artifact: str, identity: str, issuer: str, root: Path) -> None:
    data, art = (VECTORS / bundle).read_bytes(), (VECTORS / artifact).read_bytes()
    assert verify_artifact_bundle(data, art, sigstore_policy(tmp_path, identity, issuer, root)) == (f"sigstore:{issuer}:{identity}",)
    other_root = PRODUCTION if root == STAGING else STAGING
    failures = [
        (data, art + b"x", identity, issuer, root),  # a changed artifact
        (data, art, identity[:-1], issuer, root),  # a prefix of the identity
        (data, art, identity + "x", issuer, root),
        (data, art, identity, GHA_ISSUER if issuer != GHA_ISSUER else "https://github.com/login/oauth", root),
        (data, art, identity, issuer, other_root),
    ]
    for i, (d, a, ident, iss, r) in enumerate(failures):
        (tmp_path / str(i)).mkdir()
        with pytest.raises(VerificationError) as caught:
            verify_artifact_bundle(d, a, sigstore_policy(tmp_path / str(i), ident, iss, r))
        assert caught.value.code == "NO_TRUSTED_SIGNATURE", (i, caught.value)


def test_message_signature_bundle_is_not_an_attestation(tmp_path: Path) -> None:
    with pytest.raises(VerificationError) as caught:
        verify_attestation_bytes(
            (VECTORS / "bundle_v3.txt.sigstore").read_bytes(),
            sigstore_policy(tmp_path, "william@yossarian.net", "https://github.com/login/oauth", STAGING),
        )
    assert caught.value.code == "UNSUPPORTED_BUNDLE"


def test_dsse_bundle_is_not_an_artifact_signature(tmp_path: Path) -> None:
    with pytest.raises(VerificationError) as caught:
        verify_artifact_bundle(DSSE_VECTOR.read_bytes(), b"a", sigstore_policy(tmp_path, BEACON, GHA_ISSUER, STAGING))
    assert caught.value.code == "UNSUPPORTED_BUNDLE"


# --- strict bundle parsing ----------------------------------------------------------------------

@pytest.fixture
def key_bundle(sample_tree: Path, keys: Keys) -> dict[str, Any]:
    return as_json(sign_statement(closed_tree_statement("t", inventory_tree(sample_tree)), keys.signers["ed"], fmt="bundle"))


@pytest.mark.parametrize(
    ("mutate", "code"),
    [
        (lambda b: b.update({"mediaType": "application/vnd.dev.sigstore.bundle+json;version=0.2"}), "BAD_MEDIA_TYPE"),
        (lambda b: b.update({"mediaType": "application/json"}), "BAD_MEDIA_TYPE"),
        (lambda b: b.update({"extra": {}}), "BAD_BUNDLE"),
        (lambda b: b.pop("dsseEnvelope"), "BAD_BUNDLE"),
        (lambda b: b.update({"verificationMaterial": []}), "BAD_BUNDLE"),
        (lambda b: b["verificationMaterial"].update({"certificate": {"rawBytes": "AA=="}}), "BAD_BUNDLE"),
        (lambda b: b["verificationMaterial"].pop("publicKey"), "BAD_BUNDLE"),
        (lambda b: b["verificationMaterial"].update({"publicKey": {"hint": 1}}), "BAD_BUNDLE"),
        (lambda b: b["verificationMaterial"].update({"other": 1}), "BAD_BUNDLE"),
        (lambda b: b["dsseEnvelope"]["signatures"].append(dict(b["dsseEnvelope"]["signatures"][0])), "BAD_BUNDLE"),
        # Log entries and timestamps under a key signer without trusted_root (test_key_bundle_evidence.py checks them).
        (lambda b: b["verificationMaterial"].update({"tlogEntries": [{"logIndex": "1"}]}), "TRUSTED_ROOT_REQUIRED"),
        (lambda b: b["verificationMaterial"].update({"timestampVerificationData": {"rfc3161Timestamps": [{"signedTimestamp": "AA=="}]}}), "TRUSTED_ROOT_REQUIRED"),
        (lambda b: b.update({"messageSignature": {"signature": "AA=="}}), "UNSUPPORTED_BUNDLE"),
        (lambda b: b["dsseEnvelope"].update({"payloadType": "text/plain"}), "BAD_PAYLOAD_TYPE"),
    ],
)
def test_malformed_key_bundles_are_refused(key_bundle, write_policy, mutate, code) -> None:
    mutate(key_bundle)
    with pytest.raises(VerificationError) as caught:
        verify_attestation_bytes(dumps(key_bundle), load_policy(write_policy(["ed"])))
    assert caught.value.code == code


def test_key_bundle_hint_is_not_trusted(key_bundle, keys: Keys, write_policy) -> None:
    key_bundle["verificationMaterial"]["publicKey"]["hint"] = keys.signers["ec"].key_id
    verified = verify_attestation_bytes(dumps(key_bundle), load_policy(write_policy(["ed"])))
    assert verified.signers == ("key:sha256:" + keys.signers["ed"].key_id,)
    with pytest.raises(VerificationError) as caught:
        verify_attestation_bytes(dumps(key_bundle), load_policy(write_policy(["ec"])))
    assert caught.value.code == "NO_TRUSTED_SIGNATURE"


def test_bundle_with_duplicate_keys_is_refused(write_policy) -> None:
    text = DSSE_VECTOR.read_text().replace('"mediaType":', '"mediaType": "x", "mediaType":', 1)
    with pytest.raises(VerificationError) as caught:
        verify_attestation_bytes(text.encode(), load_policy(write_policy(["ed"])))
    assert caught.value.code == "DUPLICATE_KEY"
