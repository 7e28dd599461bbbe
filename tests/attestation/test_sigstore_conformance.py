"""Every sigstore-conformance `bundle-verify` case, offline.

attest must accept each bundle a conforming Sigstore verifier accepts and refuse each one it
refuses. The cases and how they are run are described in tests/data/sigstore-conformance/README.md.
Every refusal is pinned to its reason code, so a bundle refused for the wrong reason (a media
type attest did not know, say) shows up here.
"""

from __future__ import annotations

import hashlib
import json
import socket
from pathlib import Path
from typing import Any

import pytest
from support.keys import BEACON, GHA_ISSUER, VECTORS

from attest.attestation import load_policy, verify_artifact_bundle, verify_attestation_bytes
from attest.errors import AttestError

CASES = Path(__file__).resolve().parent.parent / "data" / "sigstore-conformance" / "bundle-verify"
PRODUCTION = VECTORS / "production_trusted_root.json"

#: The reason each `_fail` case is refused with.
REFUSED = {
    "bundle-empty-certificate-chain_fail": "BAD_BUNDLE",
    "bundle-from-wrong-instance_fail": "NO_TRUSTED_SIGNATURE",
    "bundle-invalid-base64-signature_fail": "BAD_BUNDLE",
    "bundle-malformed-json_fail": "BAD_JSON",
    "bundle-negative-log-index_fail": "BAD_BUNDLE",
    "bundle-unknown-version_fail": "BAD_MEDIA_TYPE",
    "bundle-with-root-cert_fail": "BAD_BUNDLE",
    "checkpoint-bad-keyhint_fail": "NO_TRUSTED_SIGNATURE",
    "checkpoint-wrong-roothash_fail": "NO_TRUSTED_SIGNATURE",
    "dsse-invalid-sig_fail": "NO_TRUSTED_SIGNATURE",
    "dsse-mismatch-envelope_fail": "NO_TRUSTED_SIGNATURE",
    "dsse-mismatch-sig_fail": "NO_TRUSTED_SIGNATURE",
    "inclusion-proof-corrupted-hash_fail": "NO_TRUSTED_SIGNATURE",
    "incorrect-public-key_fail": "NO_TRUSTED_SIGNATURE",
    "integrated-time-in-future_fail": "NO_TRUSTED_SIGNATURE",
    "intoto-expired-certificate_fail": "NO_TRUSTED_SIGNATURE",
    "intoto-log-entry-mismatch_fail": "NO_TRUSTED_SIGNATURE",
    "intoto-missing-inclusion-proof_fail": "BAD_BUNDLE",
    "intoto-set-outside-signing-cert-validity_fail": "NO_TRUSTED_SIGNATURE",
    "intoto-tsa-timestamp-outside-cert-validity_fail": "NO_TRUSTED_SIGNATURE",
    "invalid-checkpoint-signature_fail": "NO_TRUSTED_SIGNATURE",
    "invalid-ct-key_fail": "NO_TRUSTED_SIGNATURE",
    "invalid-inclusion-proof_fail": "BAD_BUNDLE",
    "managed-key-no-key_fail": "NO_TRUSTED_SIGNATURE",  # a key-signed bundle with a log entry, and no key
    "managed-key-wrong-key_fail": "BAD_KEY",            # its key.pub is not a key: the policy does not load
    "message-digest-mismatch_fail": "NO_TRUSTED_SIGNATURE",
    "rekor2-checkpoint-missing-log-signature_fail": "NO_TRUSTED_SIGNATURE",
    "rekor2-checkpoint-missing-origin_fail": "NO_TRUSTED_SIGNATURE",
    "rekor2-checkpoint-missing-root-hash_fail": "NO_TRUSTED_SIGNATURE",
    "rekor2-checkpoint-missing-size_fail": "NO_TRUSTED_SIGNATURE",
    "rekor2-checkpoint-no-matching-signature_fail": "NO_TRUSTED_SIGNATURE",
    "rekor2-dsse-invalid-sig_fail": "NO_TRUSTED_SIGNATURE",
    "rekor2-dsse-mismatch-envelope_fail": "NO_TRUSTED_SIGNATURE",
    "rekor2-dsse-mismatch-sig_fail": "NO_TRUSTED_SIGNATURE",
    "rekor2-no-inclusion-proof_fail": "BAD_BUNDLE",
    "rekor2-no-timestamp_fail": "BAD_BUNDLE",
    "rekor2-timestamp-outside-trust-root-tsa-validity_fail": "NO_TRUSTED_SIGNATURE",
    "rekor2-timestamp-outside-tsa-cert-validity_fail": "NO_TRUSTED_SIGNATURE",
    "rekor2-timestamp-payload-mismatch_fail": "NO_TRUSTED_SIGNATURE",
    "rekor2-timestamp-untrusted-tsa-with-embedded-cert_fail": "BAD_BUNDLE",
    "rekor2-timestamp-untrusted-tsa-without-embedded-cert_fail": "NO_TRUSTED_SIGNATURE",
    "rekor2-timestamp-with-incorrect-time_fail": "NO_TRUSTED_SIGNATURE",
    "set-invalid-signature_fail": "NO_TRUSTED_SIGNATURE",
    "signature-mismatch_fail": "NO_TRUSTED_SIGNATURE",
    "trust-root-tlog-missing-validity-start_fail": "BAD_POLICY",
    "wrong-hashedrekord-artifact_fail": "NO_TRUSTED_SIGNATURE",
    "wrong-hashedrekord-cert-and-sig_fail": "NO_TRUSTED_SIGNATURE",
    "wrong-hashedrekord-entry_fail": "NO_TRUSTED_SIGNATURE",
    "wrong-material_fail": "NO_TRUSTED_SIGNATURE",
}

#: Cases a conforming verifier accepts and attest refuses, as sigstore-python's own conformance
#: run marks them (strict: the day one passes, this list must shrink).
KNOWN_REFUSALS = {
    "intoto-with-custom-trust-root": "sigstore-python 4.5 takes no integrated time from an intoto 0.0.2 log entry",
}


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError(f"network access during verification: {args!r}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


def _policy(case: Path, where: Path) -> Path:
    root = case / "trusted_root.json" if (case / "trusted_root.json").exists() else PRODUCTION
    if (case / "key.pub").exists():
        # A conformance verifier is always given a trusted root (the case's, else production):
        # the key signer pins it, so the bundle's log entries and timestamps are checked.
        text = (f'threshold = 1\n[[signers]]\nkind = "key"\npublic_key = {json.dumps(str(case / "key.pub"))}\n'
                f'trusted_root = {json.dumps(str(root))}\n')
    else:
        identity = (case / "identity").read_text().strip() if (case / "identity").exists() else BEACON
        issuer = (case / "issuer").read_text().strip() if (case / "issuer").exists() else GHA_ISSUER
        text = (f'threshold = 1\n[[signers]]\nkind = "sigstore"\nidentity = {json.dumps(identity)}\n'
                f'issuer = {json.dumps(issuer)}\ntrusted_root = {json.dumps(str(root))}\n')
    path = where / "policy.toml"
    path.write_text(text)
    return path


def _verify(case: Path, where: Path) -> None:
    bundle = (case / "bundle.sigstore.json").read_bytes()
    artifact = (case / "artifact" if (case / "artifact").exists() else CASES / "a.txt").read_bytes()
    policy = load_policy(_policy(case, where))
    try:
        doc = json.loads(bundle)
    except ValueError:
        doc = None
    if isinstance(doc, dict) and "dsseEnvelope" in doc:
        verified = verify_attestation_bytes(bundle, policy)
        # The conformance suite's artifact is the statement's subject: a step of the caller's
        # (attest verify does it for trees), checked here by digest.
        want = hashlib.sha256(artifact).hexdigest()
        assert any(s["digest"].get("sha256") == want for s in verified.statement["subject"]), "the artifact is not a subject"
    else:
        verify_artifact_bundle(bundle, artifact, policy)


def _cases() -> list[Any]:
    out = []
    for case in sorted(p for p in CASES.iterdir() if p.is_dir()):
        marks = [pytest.mark.xfail(reason=KNOWN_REFUSALS[case.name], strict=True, raises=AttestError)] \
            if case.name in KNOWN_REFUSALS else []
        out.append(pytest.param(case, id=case.name, marks=marks))
    return out


def test_every_case_has_a_verdict() -> None:
    names = {p.name for p in CASES.iterdir() if p.is_dir()}
    assert len(names) >= 70
    assert {n for n in names if n.endswith("_fail")} == set(REFUSED)
    assert set(KNOWN_REFUSALS) <= names - set(REFUSED)


@pytest.mark.parametrize("case", _cases())
def test_bundle_verify_case(case: Path, tmp_path: Path) -> None:
    if case.name.endswith("_fail"):
        with pytest.raises(AttestError) as caught:
            _verify(case, tmp_path)
        assert caught.value.code == REFUSED[case.name], caught.value
    else:
        _verify(case, tmp_path)
