"""Round trips for both key types and both formats, and independent checks of the formats.

The independent checks do not use attest's verifier: the DSSE signature is checked with
`cryptography` alone over PAE written out here from the DSSE spec, and bundles are parsed
by the Sigstore protobuf models (sigstore_models, shipped with sigstore 4.5).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import stat
from pathlib import Path

import pytest
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519
from support.keys import Keys

from attest.attestation import (
    BUNDLE_MEDIA_TYPE,
    CLOSED_TREE_PREDICATE,
    closed_tree_inventory,
    closed_tree_statement,
    load_policy,
    sign_statement,
    verify_attestation_bytes,
)
from attest.inventory import inventory_tree


def spec_pae(payload_type: str, payload: bytes) -> bytes:
    # DSSE v1: "DSSEv1" SP LEN(type) SP type SP LEN(body) SP body, lengths as ASCII decimal byte counts.
    t = payload_type.encode()
    return b"DSSEv1 " + str(len(t)).encode() + b" " + t + b" " + str(len(payload)).encode() + b" " + payload


@pytest.mark.parametrize("key", ["ed", "ec"])
@pytest.mark.parametrize("fmt", ["dsse", "bundle"])
def test_round_trip(sample_tree: Path, keys: Keys, write_policy, key: str, fmt: str) -> None:
    inv = inventory_tree(sample_tree)
    data = sign_statement(closed_tree_statement("tree", inv), keys.signers[key], fmt=fmt)
    verified = verify_attestation_bytes(data, load_policy(write_policy([key])))
    assert verified.format == fmt
    assert verified.predicate_type == CLOSED_TREE_PREDICATE
    assert verified.signers == ("key:sha256:" + keys.signers[key].key_id,)
    assert verified.attestation_digest == "sha256:" + hashlib.sha256(data).hexdigest()
    assert json.loads(verified.payload) == verified.statement
    assert closed_tree_inventory(verified) == inv
    assert verified.statement["subject"] == [{"name": "tree", "digest": {"sha256": inv.digest_hex}}]


@pytest.mark.parametrize("key", ["ed", "ec"])
def test_envelope_verifies_with_cryptography_alone(sample_tree: Path, keys: Keys, key: str) -> None:
    inv = inventory_tree(sample_tree)
    envelope = json.loads(sign_statement(closed_tree_statement("tree", inv), keys.signers[key], fmt="dsse"))
    assert envelope["payloadType"] == "application/vnd.in-toto+json"
    payload = base64.b64decode(envelope["payload"], validate=True)
    public = serialization.load_pem_public_key(keys.pub(key).read_bytes())
    (signature,) = envelope["signatures"]
    sig = base64.b64decode(signature["sig"], validate=True)
    message = spec_pae(envelope["payloadType"], payload)
    if isinstance(public, ed25519.Ed25519PublicKey):
        public.verify(sig, message)
    else:
        assert isinstance(public, ec.EllipticCurvePublicKey)
        public.verify(sig, message, ec.ECDSA(hashes.SHA256()))
    statement = json.loads(payload)
    assert statement["_type"] == "https://in-toto.io/Statement/v1"
    assert statement["predicate"]["inventory"] == inv.to_json()
    # The signature is over PAE, not over the raw payload.
    with pytest.raises(InvalidSignature):
        if isinstance(public, ed25519.Ed25519PublicKey):
            public.verify(sig, payload)
        else:
            public.verify(sig, payload, ec.ECDSA(hashes.SHA256()))


@pytest.mark.parametrize("key", ["ed", "ec"])
def test_bundle_is_valid_under_the_sigstore_protobuf_models(sample_tree: Path, keys: Keys, key: str) -> None:
    from sigstore_models.bundle.v1 import Bundle

    data = sign_statement(closed_tree_statement("tree", inventory_tree(sample_tree)), keys.signers[key], fmt="bundle")
    bundle = Bundle.from_json(data)  # strict pydantic models: extra fields forbidden
    assert bundle.media_type == BUNDLE_MEDIA_TYPE == "application/vnd.dev.sigstore.bundle.v0.3+json"
    assert bundle.verification_material.public_key is not None
    assert bundle.verification_material.public_key.hint == keys.signers[key].key_id
    assert bundle.verification_material.tlog_entries == []
    envelope = bundle.dsse_envelope
    assert envelope is not None and envelope.payload_type == "application/vnd.in-toto+json"
    assert len(envelope.signatures) == 1 and not envelope.signatures[0].keyid
    public = serialization.load_pem_public_key(keys.pub(key).read_bytes())
    message = spec_pae(envelope.payload_type, envelope.payload)
    if isinstance(public, ed25519.Ed25519PublicKey):
        public.verify(envelope.signatures[0].sig, message)
    else:
        public.verify(envelope.signatures[0].sig, message, ec.ECDSA(hashes.SHA256()))
    # Round trip through the models keeps the document.
    assert json.loads(bundle.to_json()) == json.loads(data)


def test_payload_is_rfc8785_and_output_is_deterministic_for_ed25519(sample_tree: Path, keys: Keys) -> None:
    import rfc8785

    statement = closed_tree_statement("tree", inventory_tree(sample_tree))
    one = sign_statement(statement, keys.signers["ed"], fmt="dsse")
    two = sign_statement(statement, keys.signers["ed"], fmt="dsse")
    assert one == two  # ed25519 signatures are deterministic
    payload = base64.b64decode(json.loads(one)["payload"])
    assert payload == rfc8785.dumps(statement)


def test_multi_signature_envelope_meets_threshold(sample_tree: Path, keys: Keys, write_policy) -> None:
    data = sign_statement(closed_tree_statement("t", inventory_tree(sample_tree)), [keys.signers["ed"], keys.signers["ec"]])
    verified = verify_attestation_bytes(data, load_policy(write_policy(["ed", "ec", "ed2"], threshold=2)))
    assert set(verified.signers) == {"key:sha256:" + keys.signers[k].key_id for k in ("ed", "ec")}


def test_generated_keys_are_pkcs8_0600_with_public_key_beside(keys: Keys) -> None:
    for name in ("ed", "ec"):
        priv, pub = keys.paths[name]
        assert stat.S_IMODE(os.stat(priv).st_mode) == 0o600
        assert priv.read_bytes().startswith(b"-----BEGIN PRIVATE KEY-----")  # PKCS#8, unencrypted
        assert pub.name == f"{name}.pub.pem"
        loaded = serialization.load_pem_private_key(priv.read_bytes(), None)
        assert loaded.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        ) == pub.read_bytes()
