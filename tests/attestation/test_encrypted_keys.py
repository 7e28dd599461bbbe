"""Encrypted PEM private keys: the passphrase from ATTEST_KEY_PASSPHRASE or a terminal prompt.

Real keys encrypted by `cryptography` in tmp_path; the CLI in a real subprocess, with the
variable, without it (stdin not a terminal: refused, never blocking), and on a pseudo-terminal
(the getpass prompt).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

from attest.attestation import PASSPHRASE_ENV, load_signer, verify_signature
from attest.errors import InputError

PASSPHRASE = "correct horse battery staple"


def _write(path: Path, key: ed25519.Ed25519PrivateKey | ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey, *,
           fmt: serialization.PrivateFormat = serialization.PrivateFormat.PKCS8, passphrase: str = PASSPHRASE) -> Path:
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM, fmt, serialization.BestAvailableEncryption(passphrase.encode())))
    path.chmod(0o600)
    return path


def _code(monkeypatch: pytest.MonkeyPatch, key: Path, passphrase: str | None) -> str:
    if passphrase is None:
        monkeypatch.delenv(PASSPHRASE_ENV, raising=False)
    else:
        monkeypatch.setenv(PASSPHRASE_ENV, passphrase)
    with pytest.raises(InputError) as caught:
        load_signer(str(key))
    return str(caught.value.code)


@pytest.mark.parametrize("kind", ["ed25519", "ecdsa-p256", "ecdsa-p256-traditional"])
def test_encrypted_keys_load_with_the_passphrase(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    private: ed25519.Ed25519PrivateKey | ec.EllipticCurvePrivateKey = (
        ed25519.Ed25519PrivateKey.generate() if kind == "ed25519" else ec.generate_private_key(ec.SECP256R1()))
    fmt = serialization.PrivateFormat.TraditionalOpenSSL if kind.endswith("traditional") else serialization.PrivateFormat.PKCS8
    key = _write(tmp_path / "key.pem", private, fmt=fmt)
    monkeypatch.setenv(PASSPHRASE_ENV, PASSPHRASE)
    signer = load_signer(str(key))
    assert verify_signature(private.public_key(), signer.sign(b"data"), b"data")
    assert _code(monkeypatch, key, "wrong passphrase") == "BAD_PASSPHRASE"
    assert _code(monkeypatch, key, "") == "BAD_PASSPHRASE"
    # pytest's stdin is not a terminal: no prompt, no blocking, a reason code.
    assert _code(monkeypatch, key, None) == "KEY_PASSPHRASE_REQUIRED"


def test_unencrypted_keys_ignore_the_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    private = ed25519.Ed25519PrivateKey.generate()
    key = tmp_path / "plain.pem"
    key.write_bytes(private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    monkeypatch.setenv(PASSPHRASE_ENV, "unused")
    assert load_signer(str(key)).key_id


def test_an_encrypted_key_of_another_type_is_still_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # RSA (and P-384) keys are not signers here, encrypted or not: decrypted, then refused.
    key = _write(tmp_path / "rsa.pem", rsa.generate_private_key(public_exponent=65537, key_size=2048))
    assert _code(monkeypatch, key, PASSPHRASE) == "BAD_KEY"
    assert _code(monkeypatch, key, "wrong") == "BAD_PASSPHRASE"


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != PASSPHRASE_ENV}
    env.update(extra)
    return env


def _cli(args: list[str], env: dict[str, str], **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "attest", *args], capture_output=True, text=True, env=env, check=False,
                          timeout=120, **kw)  # type: ignore[call-overload]


def test_cli_signs_and_verifies_with_an_encrypted_key(tmp_path: Path, sample_tree: Path) -> None:
    private = ec.generate_private_key(ec.SECP256R1())
    key = _write(tmp_path / "release.pem", private)
    pub = tmp_path / "release.pub.pem"
    pub.write_bytes(private.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    policy = tmp_path / "policy.toml"
    policy.write_text('threshold = 1\n[[signers]]\nkind = "key"\npublic_key = "release.pub.pem"\n')
    att = tmp_path / "tree.intoto.json"
    sign = ["attest", str(sample_tree), "--key", str(key), "-o", str(att), "--json"]
    done = _cli(sign, _env(**{PASSPHRASE_ENV: PASSPHRASE}), stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stdout + done.stderr
    verified = _cli(["verify", str(sample_tree), "--attestation", str(att), "--policy", str(policy), "--json"], _env())
    assert verified.returncode == 0 and json.loads(verified.stdout)["ok"] is True
    for env, code in ((_env(**{PASSPHRASE_ENV: "wrong"}), "BAD_PASSPHRASE"), (_env(), "KEY_PASSPHRASE_REQUIRED")):
        refused = _cli(sign, env, stdin=subprocess.DEVNULL)
        assert refused.returncode == 2, refused.stdout + refused.stderr
        assert json.loads(refused.stdout)["errors"][0]["code"] == code
        assert "Traceback" not in refused.stderr


def test_cli_prompts_on_a_terminal(tmp_path: Path, sample_tree: Path) -> None:
    key = _write(tmp_path / "release.pem", ed25519.Ed25519PrivateKey.generate())
    att = tmp_path / "tree.intoto.json"
    master, slave = os.openpty()
    try:
        # A new session: no controlling terminal, so getpass reads the pseudo-terminal on stdin
        # (never the terminal this test runs in).
        proc = subprocess.Popen([sys.executable, "-m", "attest", "attest", str(sample_tree), "--key", str(key), "-o", str(att)],
                                stdin=slave, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env(), start_new_session=True)
        os.close(slave)
        # getpass turns echo off with TCSAFLUSH, which drops typed-ahead input: answer the prompt
        # only once it is shown (on stderr, as there is no /dev/tty).
        assert proc.stderr is not None
        shown = b""
        while b"Passphrase for" not in shown:
            chunk = os.read(proc.stderr.fileno(), 4096)
            assert chunk, f"no prompt: {shown!r}"
            shown += chunk
        os.write(master, PASSPHRASE.encode() + b"\n")
        out, err = proc.communicate(timeout=120)
    finally:
        os.close(master)
    assert proc.returncode == 0, out.decode() + (shown + err).decode()
    assert att.exists()
