"""The attestation commands as a user runs them: exit codes 0/1/2, --json, no tracebacks."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.keys import BEACON, GHA_ISSUER, VECTORS, Keys

from attest.cli import main


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def test_readme_flow_keygen_attest_verify_tamper(capsys, sample_tree: Path, tmp_path: Path) -> None:
    key = tmp_path / "release.pem"
    code, out, _ = run(capsys, "keygen", "--type", "ecdsa-p256", "-o", key, "--json")
    assert code == 0 and json.loads(out)["public_key"] == str(tmp_path / "release.pub.pem")
    # The signer id policies and [rebuilders] name the key by: the SHA-256 of its SubjectPublicKeyInfo, computed here independently.
    from cryptography.hazmat.primitives import serialization

    spki = serialization.load_pem_public_key((tmp_path / "release.pub.pem").read_bytes()).public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    assert json.loads(out)["signer_id"] == "key:sha256:" + hashlib.sha256(spki).hexdigest()
    policy = tmp_path / "policy.toml"
    policy.write_text('threshold = 1\n[[signers]]\nkind = "key"\npublic_key = "release.pub.pem"\n')
    att = tmp_path / "tree.intoto.json"
    code, out, _ = run(capsys, "attest", sample_tree, "--key", key, "-o", att, "--format", "bundle", "--json")
    assert code == 0
    made = json.loads(out)
    assert made["ok"] is True and made["identity"].startswith("sha256:")
    code, out, _ = run(capsys, "verify", sample_tree, "--attestation", att, "--policy", policy, "--json")
    assert code == 0
    ok = json.loads(out)
    assert ok["ok"] is True and ok["identity"] == made["identity"] and ok["attestation_digest"] == made["attestation_digest"]
    code, out, _ = run(capsys, "verify", sample_tree, "--attestation", att, "--policy", policy)
    assert code == 0 and out.startswith("OK: ")
    (sample_tree / "bin" / "tool").write_bytes(b"#!/bin/sh\necho pwned\n")
    code, out, _ = run(capsys, "verify", sample_tree, "--attestation", att, "--policy", policy, "--json")
    assert code == 1
    failed = json.loads(out)
    assert failed["ok"] is False and failed["errors"][0]["code"] == "DIGEST_MISMATCH" and failed["errors"][0]["path"] == "bin/tool"
    code, out, err = run(capsys, "verify", sample_tree, "--attestation", att, "--policy", policy)
    assert code == 1 and out == "" and "DIGEST_MISMATCH bin/tool" in err


def test_verify_attestation_prints_the_statement(capsys, sample_tree: Path, tmp_path: Path, keys: Keys, write_policy) -> None:
    att = tmp_path / "a.json"
    assert run(capsys, "attest", sample_tree, "--key", keys.priv("ed"), "-o", att, "--name", "skill")[0] == 0
    policy = write_policy(["ed"])
    code, out, err = run(capsys, "verify-attestation", att, "--policy", policy)
    assert code == 0 and "verified by key:sha256:" in err
    assert json.loads(out)["subject"][0]["name"] == "skill"
    code, out, _ = run(capsys, "verify-attestation", att, "--policy", policy, "--json")
    doc = json.loads(out)
    assert code == 0 and doc["ok"] is True and doc["predicate_type"] == "https://attest.dev/closed-tree/v1"
    code, out, _ = run(capsys, "verify-attestation", att, "--policy", write_policy(["ec"]), "--json")
    assert code == 1 and json.loads(out)["errors"][0]["code"] == "NO_TRUSTED_SIGNATURE"


def test_verify_attestation_with_the_real_dsse_vector(capsys, tmp_path: Path) -> None:
    policy = tmp_path / "p.toml"
    policy.write_text(
        f'threshold = 1\n[[signers]]\nkind = "sigstore"\nidentity = "{BEACON}"\nissuer = "{GHA_ISSUER}"\n'
        f'trusted_root = "{VECTORS / "staging_trusted_root.json"}"\n'
    )
    code, out, _ = run(capsys, "verify-attestation", VECTORS / "a.dsse.staging-rekor-v2.txt.sigstore.json", "--policy", policy, "--json")
    doc = json.loads(out)
    assert code == 0 and doc["predicate_type"] == "https://slsa.dev/provenance/v1"
    # Not a closed-tree statement: `attest verify` refuses it whatever the tree.
    tree = tmp_path / "tree"
    tree.mkdir()
    code, out, _ = run(capsys, "verify", tree, "--attestation", VECTORS / "a.dsse.staging-rekor-v2.txt.sigstore.json",
                       "--policy", policy, "--json")
    assert code == 1 and json.loads(out)["errors"][0]["code"] == "BAD_PREDICATE_TYPE"


def test_verify_attestation_of_an_artifact_bundle(capsys, tmp_path: Path) -> None:
    policy = tmp_path / "p.toml"
    policy.write_text(
        'threshold = 1\n[[signers]]\nkind = "sigstore"\nidentity = "william@yossarian.net"\n'
        f'issuer = "https://github.com/login/oauth"\ntrusted_root = "{VECTORS / "staging_trusted_root.json"}"\n'
    )
    bundle = VECTORS / "bundle_v3.txt.sigstore"
    code, out, _ = run(capsys, "verify-attestation", bundle, "--policy", policy, "--artifact", VECTORS / "bundle_v3.txt", "--json")
    assert code == 0 and json.loads(out)["ok"] is True
    changed = tmp_path / "changed.txt"
    changed.write_bytes((VECTORS / "bundle_v3.txt").read_bytes() + b"!")
    code, out, _ = run(capsys, "verify-attestation", bundle, "--policy", policy, "--artifact", changed, "--json")
    assert code == 1 and json.loads(out)["errors"][0]["code"] == "NO_TRUSTED_SIGNATURE"


def test_verify_with_summary(capsys, sample_tree: Path, tmp_path: Path, keys: Keys, write_policy) -> None:
    att = tmp_path / "a.json"
    run(capsys, "attest", sample_tree, "--key", keys.priv("ed"), "-o", att)
    summary = tmp_path / "vsa.json"
    code, out, _ = run(capsys, "verify", sample_tree, "--attestation", att, "--policy", write_policy(["ed"]),
                       "--summary", summary, "--key", keys.priv("ec"), "--json")
    assert code == 0 and json.loads(out)["summary"] == str(summary)
    code, out, _ = run(capsys, "verify-attestation", summary, "--policy", write_policy(["ec"]), "--json")
    doc = json.loads(out)
    assert code == 0 and doc["statement"]["predicate"]["verificationResult"] == "PASSED"
    code, _, _ = run(capsys, "verify", sample_tree, "--attestation", att, "--policy", write_policy(["ed"]), "--summary", summary)
    assert code == 2  # --summary without --key


@pytest.mark.parametrize(
    "args",
    [
        ("verify-attestation", "{missing}", "--policy", "{policy}"),
        ("verify-attestation", "{att}", "--policy", "{missing}"),
        ("verify", "{tree}", "--attestation", "{missing}", "--policy", "{policy}"),
        ("attest", "{tree}", "--key", "{missing}", "-o", "{out}"),
        ("attest", "{tree}", "-o", "{out}"),  # neither --key nor --sigstore
        ("attest", "{tree}", "--key", "{key}", "--sigstore", "-o", "{out}"),
        ("keygen", "--type", "dsa", "-o", "{out}"),
        ("verify", "{tree}", "--attestation", "{att}"),  # --policy is required: never discovered
    ],
)
def test_unreadable_input_and_bad_usage_exit_2(capsys, sample_tree, tmp_path, keys, write_policy, args) -> None:
    att = tmp_path / "a.json"
    main(["attest", str(sample_tree), "--key", str(keys.priv("ed")), "-o", str(att)])
    subst = {"{missing}": str(tmp_path / "missing"), "{policy}": str(write_policy(["ed"])), "{att}": str(att),
             "{tree}": str(sample_tree), "{out}": str(tmp_path / "out.json"), "{key}": str(keys.priv("ed"))}
    capsys.readouterr()
    code, out, err = run(capsys, *[subst.get(a, a) for a in args], "--json")
    assert code == 2
    assert "Traceback" not in out + err


def test_policy_in_cwd_is_never_used(capsys, sample_tree: Path, tmp_path: Path, keys: Keys, monkeypatch) -> None:
    att = tmp_path / "a.json"
    run(capsys, "attest", sample_tree, "--key", keys.priv("evil"), "-o", att)
    monkeypatch.chdir(sample_tree)
    (sample_tree / "policy.toml").write_text(f'threshold = 1\n[[signers]]\nkind = "key"\npublic_key = "{keys.pub("evil")}"\n')
    code, out, _ = run(capsys, "verify", sample_tree, "--attestation", att, "--policy", sample_tree / "policy.toml", "--json")
    assert code == 1 and json.loads(out)["errors"][0]["code"] == "POLICY_IN_TREE"


def test_help_does_not_import_sigstore() -> None:
    probe = "import sys; from attest.cli import main; main(['verify', '--help']); print('sigstore' in sys.modules)"
    res = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env={**os.environ}, check=False)
    assert res.stdout.strip().splitlines()[-1] == "False", res.stdout + res.stderr


def test_verifying_a_key_attestation_does_not_import_sigstore(tmp_path: Path, sample_tree: Path, keys: Keys, write_policy) -> None:
    att = tmp_path / "a.json"
    main(["attest", str(sample_tree), "--key", str(keys.priv("ed")), "-o", str(att), "--format", "bundle"])
    policy = write_policy(["ed"])
    probe = (
        "import sys; from attest.cli import main; "
        f"rc = main(['verify', {str(sample_tree)!r}, '--attestation', {str(att)!r}, '--policy', {str(policy)!r}, '--json']); "
        "print(rc, 'sigstore' in sys.modules)"
    )
    res = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=False)
    assert res.stdout.strip().splitlines()[-1] == "0 False", res.stdout + res.stderr
