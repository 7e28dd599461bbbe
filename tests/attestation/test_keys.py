"""Keys and signers: generation, PEM and securesystemslib URIs, refusals."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from support.keys import Keys

from attest.attestation import (
    KeylessSigner,
    SslibSigner,
    closed_tree_statement,
    generate_key,
    load_signer,
    pae,
    sign_statement,
    verify_signature,
)
from attest.errors import InputError
from attest.inventory import Entry, EntryType, Inventory

INV = Inventory.from_entries([Entry("a", EntryType.DIR, 0o755)])


def err(fn, *args, **kwargs) -> InputError:
    with pytest.raises(InputError) as caught:
        fn(*args, **kwargs)
    return caught.value


def test_generate_refuses_to_overwrite(tmp_path: Path) -> None:
    generate_key("ed25519", tmp_path / "k.pem")
    assert err(generate_key, "ed25519", tmp_path / "k.pem").code == "KEY_EXISTS"
    (tmp_path / "j.pub.pem").write_text("mine")
    assert err(generate_key, "ed25519", tmp_path / "j.pem").code == "KEY_EXISTS"
    assert not (tmp_path / "j.pem").exists()
    os.symlink("/nonexistent/target", tmp_path / "s.pem")
    assert err(generate_key, "ed25519", tmp_path / "s.pem").code == "KEY_EXISTS"  # never follows a planted link


def test_generate_unknown_type(tmp_path: Path) -> None:
    assert err(generate_key, "rsa", tmp_path / "k.pem").code == "USAGE"


def test_file2_uri_signs_like_the_pem_path(keys: Keys) -> None:
    via_uri = load_signer(f"file2:{keys.priv('ec')}")
    assert isinstance(via_uri, SslibSigner)
    assert via_uri.key_id == keys.signers["ec"].key_id
    message = pae("application/vnd.in-toto+json", b"{}")
    assert verify_signature(keys.signers["ec"].public_key, via_uri.sign(message), message)


def test_uri_with_explicit_public_key(keys: Keys) -> None:
    signer = load_signer(f"file2:{keys.priv('ed')}", public_key=keys.pub("ed"))
    assert signer.key_id == keys.signers["ed"].key_id
    # The wrong public key for the private key: securesystemslib refuses the pair.
    assert err(load_signer, f"file2:{keys.priv('ed')}", public_key=keys.pub("ed2")).code == "BAD_KEY"


def test_kms_uri_needs_the_public_key() -> None:
    assert err(load_signer, "gcpkms:projects/p/locations/l/keyRings/r/cryptoKeys/k/cryptoKeyVersions/1").code == "USAGE"


def test_unknown_uri_scheme_and_bad_files(tmp_path: Path) -> None:
    assert err(load_signer, "nosuchscheme:abc").code == "BAD_KEY"
    assert err(load_signer, str(tmp_path / "missing.pem")).code == "UNREADABLE"
    (tmp_path / "junk.pem").write_text("not a key")
    assert err(load_signer, str(tmp_path / "junk.pem")).code == "BAD_KEY"
    rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = rsa_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    (tmp_path / "rsa.pem").write_bytes(pem)
    assert err(load_signer, str(tmp_path / "rsa.pem")).code == "BAD_KEY"
    p384 = ec.generate_private_key(ec.SECP384R1())
    (tmp_path / "p384.pem").write_bytes(
        p384.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    assert err(load_signer, str(tmp_path / "p384.pem")).code == "BAD_KEY"
    enc = ec.generate_private_key(ec.SECP256R1()).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.BestAvailableEncryption(b"pw")
    )
    (tmp_path / "enc.pem").write_bytes(enc)
    assert "encrypted" in err(load_signer, str(tmp_path / "enc.pem")).detail


@dataclass
class _Sig:
    signature: str


class WrongKeyBackend:
    """Our own fake of a securesystemslib signer backend that signs with some other key."""

    def __init__(self, keys: Keys) -> None:
        self.other = keys.signers["ed2"]

    def sign(self, payload: bytes) -> _Sig:
        return _Sig(self.other.sign(payload).hex())


class BrokenBackend:
    def sign(self, payload: bytes) -> _Sig:
        raise RuntimeError("HSM unplugged")


def test_a_backend_signature_that_does_not_verify_is_never_emitted(keys: Keys) -> None:
    signer = SslibSigner(WrongKeyBackend(keys), keys.signers["ed"].public_key)
    assert err(sign_statement, closed_tree_statement("t", INV), signer).code == "SIGNING_FAILED"
    broken = SslibSigner(BrokenBackend(), keys.signers["ed"].public_key)
    assert "HSM unplugged" in err(sign_statement, closed_tree_statement("t", INV), broken).detail


def test_sign_statement_usage_errors(keys: Keys) -> None:
    st = closed_tree_statement("t", INV)
    assert err(sign_statement, st, keys.signers["ed"], fmt="jws").code == "USAGE"
    assert err(sign_statement, st, [keys.signers["ed"], keys.signers["ec"]], fmt="bundle").code == "USAGE"
    assert err(sign_statement, st, [keys.signers["ed"], keys.signers["ed"]]).code == "USAGE"
    assert err(sign_statement, st, []).code == "USAGE"
    assert err(sign_statement, st, KeylessSigner("token"), fmt="dsse").code == "USAGE"
    bad = dict(st, _type="https://in-toto.io/Statement/v0.1")
    assert err(sign_statement, bad, keys.signers["ed"]).code == "BAD_STATEMENT_TYPE"


@pytest.mark.network
def test_keyless_signing_round_trip(tmp_path: Path) -> None:
    """Needs the network and an OIDC token (SIGSTORE_ID_TOKEN); skipped otherwise."""
    token = os.environ.get("SIGSTORE_ID_TOKEN")
    if not token:
        pytest.skip("no SIGSTORE_ID_TOKEN: keyless signing cannot run here")
    data = sign_statement(closed_tree_statement("t", INV), KeylessSigner(token, staging=True), fmt="bundle")
    from sigstore_models.bundle.v1 import Bundle

    bundle = Bundle.from_json(data)
    assert bundle.verification_material.certificate is not None
