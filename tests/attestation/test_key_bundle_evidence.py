"""Key-signed Sigstore bundles with transparency-log entries and RFC 3161 timestamps.

A key signer that pins a `trusted_root` gets its bundles' log entries (inclusion proof, signed
checkpoint, signed entry timestamp) and timestamps checked offline by sigstore-python's own
checks; one that pins none refuses such a bundle (`TRUSTED_ROOT_REQUIRED`): evidence attest did
not check is never accepted as if it had been.

Two sources of real bundles: the sigstore-conformance `managed-key-*` cases (a production
Rekor entry and a production TSA timestamp; a staging Rekor entry with the case's trusted
root), altered in the ways an attacker would; and a Rekor-like log built here (an RFC 6962
Merkle tree, a signed checkpoint note, a signed entry timestamp, all with a real P-256 key)
whose trusted root names it, for DSSE bundles, which no conformance case signs with a key.
"""

from __future__ import annotations

import base64
import copy
import datetime as dt
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from support.keys import VECTORS, Keys

from attest._json import canonical_bytes
from attest.attestation import (
    closed_tree_statement,
    load_policy,
    pae,
    sign_statement,
    verify_artifact_bundle,
    verify_attestation_bytes,
)
from attest.attestation._keys import public_key_der
from attest.attestation._sigstore import verify_key_bundle_evidence
from attest.errors import AttestError
from attest.inventory import inventory_tree

CASES = Path(__file__).resolve().parent.parent / "data" / "sigstore-conformance" / "bundle-verify"
HAPPY = CASES / "managed-key-happy-path"  # production Rekor entry + production TSA timestamp
STAGING = CASES / "managed-key-and-trusted-root"  # staging Rekor entry, the case's trusted root
ARTIFACT = (CASES / "a.txt").read_bytes()
PRODUCTION = VECTORS / "production_trusted_root.json"
GEN_TIME = "2025-12-18T17:04:39Z"  # the genTime of HAPPY's timestamp


def _bundle(case: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((case / "bundle.sigstore.json").read_bytes())
    return doc


def _policy(tmp_path: Path, key: Path, root: Path | dict[str, Any] | None, name: str = "policy.toml") -> Any:
    if isinstance(root, dict):
        path = tmp_path / f"root-{name}.json"
        path.write_text(json.dumps(root))
        root = path
    text = f'threshold = 1\n[[signers]]\nkind = "key"\npublic_key = {json.dumps(str(key))}\n'
    if root is not None:
        text += f"trusted_root = {json.dumps(str(root))}\n"
    (tmp_path / name).write_text(text)
    return load_policy(tmp_path / name)


def _code(fn: Any, *args: Any) -> str:
    with pytest.raises(AttestError) as caught:
        fn(*args)
    return str(caught.value.code)


def _production() -> dict[str, Any]:
    root: dict[str, Any] = json.loads(PRODUCTION.read_bytes())
    return root


# --- the conformance bundles, as they are and altered -------------------------------------------


def test_log_entry_and_timestamp_verify_against_the_pinned_root(tmp_path: Path) -> None:
    policy = _policy(tmp_path, HAPPY / "key.pub", PRODUCTION)
    assert verify_artifact_bundle((HAPPY / "bundle.sigstore.json").read_bytes(), ARTIFACT, policy) == (policy.signers[0].id,)
    staging = _policy(tmp_path, STAGING / "key.pub", STAGING / "trusted_root.json", "staging.toml")
    assert verify_artifact_bundle((STAGING / "bundle.sigstore.json").read_bytes(), ARTIFACT, staging) == (staging.signers[0].id,)


def test_evidence_without_a_pinned_root_is_refused(tmp_path: Path) -> None:
    # Fail closed: a key signer without trusted_root never accepts a log entry it cannot check.
    policy = _policy(tmp_path, HAPPY / "key.pub", None)
    assert _code(verify_artifact_bundle, (HAPPY / "bundle.sigstore.json").read_bytes(), ARTIFACT, policy) == "TRUSTED_ROOT_REQUIRED"
    # Only the timestamp, or only the entry: the same.
    only_stamp = _bundle(HAPPY)
    only_stamp["verificationMaterial"]["tlogEntries"] = []
    assert _code(verify_artifact_bundle, canonical_bytes(only_stamp), ARTIFACT, policy) == "TRUSTED_ROOT_REQUIRED"
    # The same bundle without evidence is a plain key signature, which needs no root.
    bare = _bundle(HAPPY)
    bare["verificationMaterial"]["tlogEntries"] = []
    del bare["verificationMaterial"]["timestampVerificationData"]
    assert verify_artifact_bundle(canonical_bytes(bare), ARTIFACT, policy) == (policy.signers[0].id,)


def test_a_wrong_key_is_no_signature_whatever_the_evidence(tmp_path: Path, keys: Keys) -> None:
    policy = _policy(tmp_path, keys.pub("ec"), PRODUCTION)
    assert _code(verify_artifact_bundle, (HAPPY / "bundle.sigstore.json").read_bytes(), ARTIFACT, policy) == "NO_TRUSTED_SIGNATURE"


def test_entry_of_another_log_is_refused(tmp_path: Path) -> None:
    # A production entry against a root that names only staging's log.
    policy = _policy(tmp_path, HAPPY / "key.pub", STAGING / "trusted_root.json")
    assert _code(verify_artifact_bundle, (HAPPY / "bundle.sigstore.json").read_bytes(), ARTIFACT, policy) == "TLOG_ENTRY_INVALID"


def test_corrupted_inclusion_proof_and_entry_timestamp_are_refused(tmp_path: Path) -> None:
    policy = _policy(tmp_path, HAPPY / "key.pub", PRODUCTION)
    proof = _bundle(HAPPY)
    hashes_ = proof["verificationMaterial"]["tlogEntries"][0]["inclusionProof"]["hashes"]
    hashes_[0] = base64.b64encode(bytes(32)).decode()
    assert _code(verify_artifact_bundle, canonical_bytes(proof), ARTIFACT, policy) == "TLOG_ENTRY_INVALID"
    promise = _bundle(HAPPY)
    other = _bundle(STAGING)["verificationMaterial"]["tlogEntries"][0]["inclusionPromise"]
    promise["verificationMaterial"]["tlogEntries"][0]["inclusionPromise"] = other  # a valid SET, of another entry
    assert _code(verify_artifact_bundle, canonical_bytes(promise), ARTIFACT, policy) == "TLOG_ENTRY_INVALID"
    checkpoint = _bundle(HAPPY)
    proof_ = checkpoint["verificationMaterial"]["tlogEntries"][0]["inclusionProof"]
    proof_["checkpoint"]["envelope"] = proof_["checkpoint"]["envelope"].replace("649584076\n", "649584077\n")
    assert _code(verify_artifact_bundle, canonical_bytes(checkpoint), ARTIFACT, policy) == "TLOG_ENTRY_INVALID"


def test_entry_of_another_signature_is_refused(tmp_path: Path) -> None:
    # STAGING's valid entry logs another signature (by the same key, over the same artifact);
    # HAPPY's signature is valid too. Each part verifies; together they are not one event.
    mixed = _bundle(STAGING)
    mixed["messageSignature"] = _bundle(HAPPY)["messageSignature"]
    policy = _policy(tmp_path, STAGING / "key.pub", STAGING / "trusted_root.json")
    assert _code(verify_artifact_bundle, canonical_bytes(mixed), ARTIFACT, policy) == "TLOG_ENTRY_MISMATCH"


def test_timestamp_needs_a_trusted_authority(tmp_path: Path) -> None:
    no_tsa = _production()
    no_tsa["timestampAuthorities"] = []
    policy = _policy(tmp_path, HAPPY / "key.pub", no_tsa)
    assert _code(verify_artifact_bundle, (HAPPY / "bundle.sigstore.json").read_bytes(), ARTIFACT, policy) == "TIMESTAMP_INVALID"
    # A timestamp over another message (STAGING's signature carries none: graft HAPPY's).
    grafted = _bundle(HAPPY)
    grafted["messageSignature"] = _bundle(STAGING)["messageSignature"]
    grafted["verificationMaterial"]["tlogEntries"] = []
    policy = _policy(tmp_path, HAPPY / "key.pub", PRODUCTION, "other.toml")
    assert _code(verify_artifact_bundle, canonical_bytes(grafted), ARTIFACT, policy) == "TIMESTAMP_INVALID"


@pytest.mark.parametrize(("end", "ok"), [(GEN_TIME, True), ("2025-12-18T17:04:38Z", False)])
def test_timestamp_authority_validity_is_a_closed_interval(tmp_path: Path, end: str, ok: bool) -> None:
    root = _production()
    root["timestampAuthorities"][0]["validFor"]["end"] = end
    policy = _policy(tmp_path, HAPPY / "key.pub", root)
    data = (HAPPY / "bundle.sigstore.json").read_bytes()
    if ok:
        assert verify_artifact_bundle(data, ARTIFACT, policy)
    else:
        assert _code(verify_artifact_bundle, data, ARTIFACT, policy) == "TIMESTAMP_INVALID"


def test_malformed_evidence(tmp_path: Path) -> None:
    policy = _policy(tmp_path, HAPPY / "key.pub", PRODUCTION)
    twice = _bundle(HAPPY)
    stamps = twice["verificationMaterial"]["timestampVerificationData"]["rfc3161Timestamps"]
    stamps.append(copy.deepcopy(stamps[0]))
    assert _code(verify_artifact_bundle, canonical_bytes(twice), ARTIFACT, policy) == "BAD_BUNDLE"  # duplicate timestamps
    two = _bundle(HAPPY)
    entries = two["verificationMaterial"]["tlogEntries"]
    entries.append(copy.deepcopy(entries[0]))
    assert _code(verify_artifact_bundle, canonical_bytes(two), ARTIFACT, policy) == "UNSUPPORTED_BUNDLE"  # more than one entry
    no_proof = _bundle(HAPPY)
    del no_proof["verificationMaterial"]["tlogEntries"][0]["inclusionProof"]
    assert _code(verify_artifact_bundle, canonical_bytes(no_proof), ARTIFACT, policy) == "BAD_BUNDLE"


def test_integrated_time_in_the_future_is_refused() -> None:
    bundle = (HAPPY / "bundle.sigstore.json").read_bytes()
    key = serialization.load_pem_public_key((HAPPY / "key.pub").read_bytes())
    signature = base64.b64decode(_bundle(HAPPY)["messageSignature"]["signature"])
    now = dt.datetime(2025, 12, 18, 17, 4, 39, tzinfo=dt.UTC)
    assert verify_key_bundle_evidence(PRODUCTION.read_bytes(), "root", bundle, key, signature, artifact=ARTIFACT, now=now) == 2
    with pytest.raises(AttestError) as caught:
        verify_key_bundle_evidence(PRODUCTION.read_bytes(), "root", bundle, key, signature, artifact=ARTIFACT,
                                   now=now - dt.timedelta(days=1))
    assert caught.value.code == "TLOG_ENTRY_INVALID"


def test_an_unusable_root_is_a_policy_error(tmp_path: Path) -> None:
    broken = _production()
    broken["tlogs"][0]["publicKey"]["validFor"] = {}  # no start: sigstore refuses the root
    policy = _policy(tmp_path, HAPPY / "key.pub", broken)
    assert _code(verify_artifact_bundle, (HAPPY / "bundle.sigstore.json").read_bytes(), ARTIFACT, policy) == "BAD_POLICY"


# --- a Rekor-like log built here, for DSSE bundles ----------------------------------------------


def _leaf(body: bytes) -> bytes:
    return hashlib.sha256(b"\x00" + body).digest()


def _node(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


def _split(n: int) -> int:
    k = 1
    while k * 2 < n:
        k *= 2
    return k


def _root(leaves: list[bytes]) -> bytes:
    if len(leaves) == 1:
        return leaves[0]
    k = _split(len(leaves))
    return _node(_root(leaves[:k]), _root(leaves[k:]))


def _path(index: int, leaves: list[bytes]) -> list[bytes]:
    """The RFC 6962 inclusion proof of leaf ``index``, from the leaf up."""
    if len(leaves) == 1:
        return []
    k = _split(len(leaves))
    if index < k:
        return [*_path(index, leaves[:k]), _root(leaves[k:])]
    return [*_path(index - k, leaves[k:]), _root(leaves[:k])]


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


class LocalLog:
    """A transparency log of a few entries, signed with a real P-256 key; its trusted root names it."""

    ORIGIN = "rekor.test.invalid - 42"
    TIME = 1_767_000_000

    def __init__(self) -> None:
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.der = public_key_der(self.key.public_key())
        self.log_id = hashlib.sha256(self.der).digest()

    def trusted_root(self) -> dict[str, Any]:
        return {
            "mediaType": "application/vnd.dev.sigstore.trustedroot+json;version=0.1",
            "tlogs": [{"baseUrl": "https://rekor.test.invalid", "hashAlgorithm": "SHA2_256",
                       "publicKey": {"rawBytes": _b64(self.der), "keyDetails": "PKIX_ECDSA_P256_SHA_256",
                                     "validFor": {"start": "2020-01-01T00:00:00Z"}},
                       "logId": {"keyId": _b64(self.log_id)}}],
            "certificateAuthorities": [], "ctlogs": [], "timestampAuthorities": [],
        }

    def sign(self, data: bytes) -> bytes:
        return self.key.sign(data, ec.ECDSA(hashes.SHA256()))

    def entry(self, body: bytes, kind: str, version: str, *, index: int = 3, size: int = 6) -> dict[str, Any]:
        """A tlog entry with ``body`` at ``index`` of a log of ``size`` entries (the others are filler)."""
        leaves = [_leaf(body if i == index else f"filler {i}".encode()) for i in range(size)]
        root = _root(leaves)
        note = f"{self.ORIGIN}\n{size}\n{_b64(root)}\n"
        signed = note + "\n" + f"\u2014 {self.ORIGIN.split()[0]} {_b64(self.log_id[:4] + self.sign(note.encode()))}\n"
        out: dict[str, Any] = {
            "logIndex": str(1000 + index), "logId": {"keyId": _b64(self.log_id)},
            "kindVersion": {"kind": kind, "version": version},
            "inclusionProof": {"logIndex": str(index), "rootHash": _b64(root), "treeSize": str(size),
                               "hashes": [_b64(h) for h in _path(index, leaves)], "checkpoint": {"envelope": signed}},
            "canonicalizedBody": _b64(body),
        }
        if version == "0.0.1":  # Rekor v1: an integrated time under a signed entry timestamp
            out["integratedTime"] = str(self.TIME)
            promise = canonical_bytes({"body": _b64(body), "integratedTime": self.TIME, "logID": self.log_id.hex(),
                                       "logIndex": 1000 + index})
            out["inclusionPromise"] = {"signedEntryTimestamp": _b64(self.sign(promise))}
        return out


def _dsse_bundle(keys: Keys, tree: Path) -> tuple[dict[str, Any], bytes, bytes, bytes]:
    data = sign_statement(closed_tree_statement("tree", inventory_tree(tree)), keys.signers["ec"], fmt="bundle")
    doc: dict[str, Any] = json.loads(data)
    env = doc["dsseEnvelope"]
    payload = base64.b64decode(env["payload"])
    sig = base64.b64decode(env["signatures"][0]["sig"])
    return doc, payload, sig, pae(env["payloadType"], payload)


def _dsse_v001(keys: Keys, payload: bytes, sig: bytes, *, key: str = "ec") -> bytes:
    pem = keys.pub(key).read_bytes()
    return canonical_bytes({"apiVersion": "0.0.1", "kind": "dsse", "spec": {
        "payloadHash": {"algorithm": "sha256", "value": hashlib.sha256(payload).hexdigest()},
        "envelopeHash": {"algorithm": "sha256", "value": "00" * 32},
        "signatures": [{"signature": _b64(sig), "verifier": _b64(pem)}]}})


def _hashedrekord_v002(keys: Keys, signed: bytes, sig: bytes) -> bytes:
    der = public_key_der(keys.signers["ec"].public_key)
    return canonical_bytes({"apiVersion": "0.0.2", "kind": "hashedrekord", "spec": {"hashedRekordV002": {
        "data": {"algorithm": "SHA2_256", "digest": _b64(hashlib.sha256(signed).digest())},
        "signature": {"content": _b64(sig), "verifier": {"publicKey": {"rawBytes": _b64(der)},
                                                         "keyDetails": "PKIX_ECDSA_P256_SHA_256"}}}}})


@pytest.fixture(scope="module")
def log() -> LocalLog:
    return LocalLog()


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "tree"
    root.mkdir()
    (root / "README").write_text("hello\n")
    return root


def test_dsse_bundle_with_a_rekor_v1_dsse_entry(tmp_path: Path, keys: Keys, log: LocalLog, tree: Path) -> None:
    doc, payload, sig, _ = _dsse_bundle(keys, tree)
    doc["verificationMaterial"]["tlogEntries"] = [log.entry(_dsse_v001(keys, payload, sig), "dsse", "0.0.1")]
    policy = _policy(tmp_path, keys.pub("ec"), log.trusted_root())
    verified = verify_attestation_bytes(canonical_bytes(doc), policy)
    assert verified.signers == (policy.signers[0].id,) and verified.format == "bundle"
    # The same bundle under a key signer without a root, and under another log's root.
    assert _code(verify_attestation_bytes, canonical_bytes(doc), _policy(tmp_path, keys.pub("ec"), None, "bare.toml")) \
        == "TRUSTED_ROOT_REQUIRED"
    assert _code(verify_attestation_bytes, canonical_bytes(doc), _policy(tmp_path, keys.pub("ec"), LocalLog().trusted_root(),
                                                                          "other.toml")) == "TLOG_ENTRY_INVALID"


def test_dsse_bundle_with_a_rekor_v2_hashedrekord_entry(tmp_path: Path, keys: Keys, log: LocalLog, tree: Path) -> None:
    doc, _, sig, signed_pae = _dsse_bundle(keys, tree)
    doc["verificationMaterial"]["tlogEntries"] = [log.entry(_hashedrekord_v002(keys, signed_pae, sig), "hashedrekord", "0.0.2",
                                                            index=4, size=5)]
    policy = _policy(tmp_path, keys.pub("ec"), log.trusted_root())
    assert verify_attestation_bytes(canonical_bytes(doc), policy).signers == (policy.signers[0].id,)
    # A v2 entry over the payload instead of PAE(payloadType, payload) is another event.
    wrong = copy.deepcopy(doc)
    wrong["verificationMaterial"]["tlogEntries"] = [log.entry(_hashedrekord_v002(keys, b"other", sig), "hashedrekord", "0.0.2")]
    assert _code(verify_attestation_bytes, canonical_bytes(wrong), policy) == "TLOG_ENTRY_MISMATCH"


@pytest.mark.parametrize("what", ["payload", "signature", "key"])
def test_dsse_entry_that_records_another_event(tmp_path: Path, keys: Keys, log: LocalLog, tree: Path, what: str) -> None:
    doc, payload, sig, _ = _dsse_bundle(keys, tree)
    body = _dsse_v001(keys, b"another payload" if what == "payload" else payload,
                      keys.signers["ec"].sign(b"x") if what == "signature" else sig, key="ec2" if what == "key" else "ec")
    doc["verificationMaterial"]["tlogEntries"] = [log.entry(body, "dsse", "0.0.1")]
    policy = _policy(tmp_path, keys.pub("ec"), log.trusted_root())
    assert _code(verify_attestation_bytes, canonical_bytes(doc), policy) == "TLOG_ENTRY_MISMATCH"


def test_entry_kinds_attest_does_not_check(tmp_path: Path, keys: Keys, log: LocalLog, tree: Path) -> None:
    doc, *_ = _dsse_bundle(keys, tree)
    body = canonical_bytes({"apiVersion": "0.0.2", "kind": "intoto", "spec": {}})
    doc["verificationMaterial"]["tlogEntries"] = [log.entry(body, "intoto", "0.0.2")]
    policy = _policy(tmp_path, keys.pub("ec"), log.trusted_root())
    assert _code(verify_attestation_bytes, canonical_bytes(doc), policy) == "UNSUPPORTED_BUNDLE"


def test_a_policy_pins_a_root_per_key_signer(tmp_path: Path, keys: Keys, log: LocalLog) -> None:
    root = tmp_path / "root.json"
    root.write_text(json.dumps(log.trusted_root()))
    (tmp_path / "p.toml").write_text(f'threshold = 1\n[[signers]]\nkind = "key"\npublic_key = "{keys.pub("ec")}"\n'
                                     f'trusted_root = "root.json"\n')
    policy = load_policy(tmp_path / "p.toml")
    assert policy.signers[0].trusted_root == root.read_bytes()
    assert str(root.resolve()) in policy.sources  # refused inside a tree under review, like every policy file
    (tmp_path / "bad.toml").write_text(f'threshold = 1\n[[signers]]\nkind = "key"\npublic_key = "{keys.pub("ec")}"\n'
                                       f'trusted_root = "{keys.pub("ec")}"\n')
    assert _code(load_policy, tmp_path / "bad.toml") == "BAD_POLICY"  # a PEM key is not a trusted root
