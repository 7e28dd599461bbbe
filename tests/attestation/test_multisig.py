"""Several signatures on one DSSE envelope: `--key` repeated, `attest sign --add`, thresholds.

A repeated `--key` signed with the last key only, so a `threshold = 2`
policy could not be met. Each result is also checked without attest's verifier, by
securesystemslib's DSSE `Envelope.verify` with the public keys loaded independently.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519
from securesystemslib.dsse import Envelope as SslEnvelope
from securesystemslib.exceptions import VerificationError as SslVerificationError
from securesystemslib.signer import SSlibKey  # type: ignore[attr-defined]
from support.keys import Keys, b64, dumps, raw_envelope

from attest.attestation import (
    PemSigner,
    add_signatures,
    closed_tree_statement,
    load_policy,
    sign_statement,
    statement_payload,
    verify_attestation_bytes,
)
from attest.cli import main
from attest.errors import InputError, VerificationError
from attest.inventory import inventory_tree


def run(capsys: pytest.CaptureFixture[str], *args: object) -> tuple[int, dict]:
    code = main([str(a) for a in args] + ["--json"])
    out, _ = capsys.readouterr()
    return code, json.loads(out)


def sslib_verified(data: bytes, keys: Keys, names: list[str], threshold: int) -> set[str]:
    """Independent check: securesystemslib verifies the envelope with keys read from the PEM files."""
    ssl_keys = []
    for n in names:
        pub = serialization.load_pem_public_key(keys.pub(n).read_bytes())
        ssl_keys.append(SSlibKey.from_crypto(pub, keyid=keys.signers[n].key_id))  # type: ignore[arg-type]
    return set(SslEnvelope.from_dict(json.loads(data)).verify(ssl_keys, threshold))


def key_ref(keys: Keys, name: str) -> str:
    return "key:sha256:" + keys.signers[name].key_id


@pytest.fixture
def one_signed(capsys, sample_tree: Path, tmp_path: Path, keys: Keys) -> Path:
    att = tmp_path / "one.json"
    code, _ = run(capsys, "attest", sample_tree, "--key", keys.priv("ed"), "-o", att)
    assert code == 0
    return att


def test_two_keys_in_one_call_give_two_signatures_and_meet_threshold_2(capsys, sample_tree, tmp_path, keys, write_policy) -> None:
    att = tmp_path / "two.json"
    code, made = run(capsys, "attest", sample_tree, "--key", keys.priv("ed"), "--key", keys.priv("ec"), "-o", att)
    assert code == 0 and made["ok"] is True
    doc = json.loads(att.read_bytes())
    assert [s["keyid"] for s in doc["signatures"]] == [keys.signers["ed"].key_id, keys.signers["ec"].key_id]
    code, ok = run(capsys, "verify", sample_tree, "--attestation", att, "--policy", write_policy(["ed", "ec"], threshold=2))
    assert code == 0 and ok["signers"] == [key_ref(keys, "ed"), key_ref(keys, "ec")]
    assert sslib_verified(att.read_bytes(), keys, ["ed", "ec"], 2) == {keys.signers["ed"].key_id, keys.signers["ec"].key_id}


def test_the_last_key_alone_no_longer_signs(capsys, sample_tree, tmp_path, keys, write_policy) -> None:
    """The bug: `--key A --key B` signed with B only, so a policy trusting only A failed."""
    att = tmp_path / "two.json"
    assert run(capsys, "attest", sample_tree, "--key", keys.priv("ed"), "--key", keys.priv("ec"), "-o", att)[0] == 0
    code, ok = run(capsys, "verify-attestation", att, "--policy", write_policy(["ed"]))
    assert code == 0 and ok["signers"] == [key_ref(keys, "ed")]


def test_sequential_add_by_a_second_party_meets_threshold_2(capsys, sample_tree, tmp_path, keys, write_policy, one_signed) -> None:
    policy = write_policy(["ed", "ec"], threshold=2)
    code, failed = run(capsys, "verify", sample_tree, "--attestation", one_signed, "--policy", policy)
    assert code == 1 and failed["errors"][0]["code"] == "THRESHOLD_NOT_MET"
    both = tmp_path / "both.json"
    code, added = run(capsys, "sign", one_signed, "--add", keys.priv("ec"), "-o", both)
    assert code == 0 and added["added"] == [keys.signers["ec"].key_id] and added["signatures"] == 2
    code, ok = run(capsys, "verify", sample_tree, "--attestation", both, "--policy", policy)
    assert code == 0 and ok["signers"] == [key_ref(keys, "ed"), key_ref(keys, "ec")]
    assert ok["attestation_digest"] == added["attestation_digest"]
    assert len(sslib_verified(both.read_bytes(), keys, ["ed", "ec"], 2)) == 2


def test_payload_bytes_are_identical_after_add(capsys, tmp_path, keys, one_signed) -> None:
    before = json.loads(one_signed.read_bytes())
    both = tmp_path / "both.json"
    assert run(capsys, "sign", one_signed, "--add", keys.priv("ec"), "-o", both)[0] == 0
    after = json.loads(both.read_bytes())
    assert after["payload"] == before["payload"]
    assert base64.b64decode(after["payload"]) == base64.b64decode(before["payload"])
    assert after["payloadType"] == before["payloadType"]
    assert after["signatures"][0] == before["signatures"][0]  # the first party's signature, untouched


def test_add_keeps_a_payload_our_serializer_would_not_write(keys, write_policy, sample_tree) -> None:
    """Non-canonical but valid statement bytes survive --add byte for byte (never re-serialized)."""
    stmt = json.loads(statement_payload(closed_tree_statement("t", inventory_tree(sample_tree))))
    payload = json.dumps(stmt, indent=3).encode()  # not RFC 8785
    data = dumps(raw_envelope(payload, [keys.signers["ed"]]))
    out = add_signatures(data, keys.signers["ec2"])
    assert base64.b64decode(json.loads(out)["payload"]) == payload
    verified = verify_attestation_bytes(out, load_policy(write_policy(["ed", "ec2"], threshold=2)))
    assert verified.payload == payload


def test_in_place_add(capsys, tmp_path, keys, write_policy, one_signed) -> None:
    code, added = run(capsys, "sign", one_signed, "--add", keys.priv("ec"), "--add", keys.priv("ed2"), "-o", one_signed)
    assert code == 0 and added["signatures"] == 3
    policy = write_policy(["ed", "ec", "ed2"], threshold=3)
    assert run(capsys, "verify-attestation", one_signed, "--policy", policy)[0] == 0
    assert [p.name for p in one_signed.parent.iterdir() if p.name.startswith(".attest-")] == []


def test_adding_the_same_key_twice_is_refused(capsys, tmp_path, keys, one_signed) -> None:
    out = tmp_path / "out.json"
    code, err = run(capsys, "sign", one_signed, "--add", keys.priv("ed"), "-o", out)
    assert code == 2 and err["errors"][0]["code"] == "USAGE" and keys.signers["ed"].key_id in err["errors"][0]["detail"]
    assert not out.exists()
    code, err = run(capsys, "sign", one_signed, "--add", keys.priv("ec"), "--add", keys.priv("ec"), "-o", out)
    assert code == 2 and err["errors"][0]["code"] == "USAGE" and not out.exists()


def test_a_key_that_signed_without_a_key_id_is_still_refused(keys, sample_tree) -> None:
    """The key id is a hint; a signature that verifies under the key counts as the key's."""
    doc = json.loads(sign_statement(closed_tree_statement("t", inventory_tree(sample_tree)), keys.signers["ed"]))
    del doc["signatures"][0]["keyid"]
    with pytest.raises(InputError) as e:
        add_signatures(dumps(doc), keys.signers["ed"])
    assert e.value.code == "USAGE"


def test_the_same_key_twice_in_one_attest_call_is_refused(capsys, sample_tree, tmp_path, keys) -> None:
    out = tmp_path / "out.json"
    code, err = run(capsys, "attest", sample_tree, "--key", keys.priv("ed"), "--key", keys.priv("ed"), "-o", out)
    assert code == 2 and err["errors"][0]["code"] == "USAGE" and not out.exists()


def test_tampered_payload_after_signing_fails_verification(capsys, sample_tree, tmp_path, keys, write_policy) -> None:
    att = tmp_path / "two.json"
    assert run(capsys, "attest", sample_tree, "--key", keys.priv("ed"), "--key", keys.priv("ec"), "-o", att)[0] == 0
    doc = json.loads(att.read_bytes())
    stmt = json.loads(base64.b64decode(doc["payload"]))
    stmt["subject"][0]["name"] = "other"
    doc["payload"] = b64(dumps(stmt))
    att.write_bytes(dumps(doc))
    code, err = run(capsys, "verify-attestation", att, "--policy", write_policy(["ed", "ec"], threshold=2))
    assert code == 1 and err["errors"][0]["code"] == "NO_TRUSTED_SIGNATURE"
    with pytest.raises(SslVerificationError):
        sslib_verified(att.read_bytes(), keys, ["ed", "ec"], 1)
    # --add never blesses a tampered envelope into one that verifies: the old signatures stay invalid.
    out = tmp_path / "three.json"
    assert run(capsys, "sign", att, "--add", keys.priv("ed2"), "-o", out)[0] == 0
    code, err = run(capsys, "verify-attestation", out, "--policy", write_policy(["ed", "ec", "ed2"], threshold=2))
    assert code == 1 and err["errors"][0]["code"] == "THRESHOLD_NOT_MET"


def test_a_bundle_with_two_keys_is_a_usage_error(capsys, sample_tree, tmp_path, keys) -> None:
    out = tmp_path / "b.json"
    code, err = run(capsys, "attest", sample_tree, "--key", keys.priv("ed"), "--key", keys.priv("ec"), "--format", "bundle", "-o", out)
    assert code == 2 and err["errors"][0]["code"] == "USAGE" and "exactly one signature" in err["errors"][0]["detail"]
    assert not out.exists()


def test_add_to_a_bundle_is_a_usage_error(capsys, sample_tree, tmp_path, keys) -> None:
    bundle = tmp_path / "b.json"
    assert run(capsys, "attest", sample_tree, "--key", keys.priv("ed"), "--format", "bundle", "-o", bundle)[0] == 0
    code, err = run(capsys, "sign", bundle, "--add", keys.priv("ec"), "-o", tmp_path / "out.json")
    assert code == 2 and err["errors"][0]["code"] == "USAGE"


@pytest.mark.parametrize(
    ("mutate", "code"),
    [
        (lambda d: {**d, "extra": 1}, "BAD_ENVELOPE"),
        (lambda d: {**d, "payloadType": "application/json"}, "BAD_PAYLOAD_TYPE"),
        (lambda d: {**d, "payload": d["payload"].rstrip("=")}, "BAD_BASE64"),
        (lambda d: {**d, "signatures": []}, "NO_SIGNATURES"),
        (lambda d: {**d, "payload": b64(b"[1]")}, "BAD_STATEMENT"),
        (lambda d: {**d, "payload": b64(b"not json")}, "BAD_JSON"),
    ],
)
def test_add_refuses_what_is_not_a_strict_intoto_envelope(capsys, tmp_path, keys, one_signed, mutate, code) -> None:
    doc = json.loads(one_signed.read_bytes())
    bad = tmp_path / "bad.json"
    bad.write_bytes(dumps(mutate(doc)))
    out = tmp_path / "out.json"
    rc, err = run(capsys, "sign", bad, "--add", keys.priv("ec"), "-o", out)
    assert rc == 2 and err["errors"][0]["code"] == code and not out.exists()


def test_add_refuses_json_that_is_not_strict(capsys, tmp_path, keys) -> None:
    bad = tmp_path / "bad.json"
    bad.write_bytes(b'{"payload": "", "payload": ""}')
    rc, err = run(capsys, "sign", bad, "--add", keys.priv("ec"), "-o", tmp_path / "out.json")
    assert rc == 2 and err["errors"][0]["code"] == "DUPLICATE_KEY"


def test_the_cap_of_32_signatures_is_kept(keys, sample_tree) -> None:
    payload = statement_payload(closed_tree_statement("t", inventory_tree(sample_tree)))
    full = dumps(raw_envelope(payload, [keys.signers["ed"]] * 32))
    with pytest.raises(InputError) as e:
        add_signatures(full, keys.signers["ec"])
    assert e.value.code == "TOO_MANY_SIGNATURES"
    almost = dumps(raw_envelope(payload, [keys.signers["ed"]] * 31))
    assert len(json.loads(add_signatures(almost, keys.signers["ec"]))["signatures"]) == 32
    many = [PemSigner(ed25519.Ed25519PrivateKey.generate()) for _ in range(33)]
    with pytest.raises(InputError) as e:
        sign_statement(closed_tree_statement("t", inventory_tree(sample_tree)), many)
    assert e.value.code == "TOO_MANY_SIGNATURES"
    assert len(json.loads(sign_statement(closed_tree_statement("t", inventory_tree(sample_tree)), many[:32]))["signatures"]) == 32


def test_no_trusted_signature_names_the_key_ids_present_and_trusted(capsys, tmp_path, keys, sample_tree, write_policy) -> None:
    att = tmp_path / "evil.json"
    assert run(capsys, "attest", sample_tree, "--key", keys.priv("evil"), "--key", keys.priv("ec2"), "-o", att)[0] == 0
    code, err = run(capsys, "verify-attestation", att, "--policy", write_policy(["ed", "ec"]))
    assert code == 1
    (finding,) = err["errors"]
    assert finding["code"] == "NO_TRUSTED_SIGNATURE"
    detail = finding["detail"]
    assert keys.signers["evil"].key_id in detail and keys.signers["ec2"].key_id in detail
    assert "unauthenticated" in detail
    assert key_ref(keys, "ed") in detail and key_ref(keys, "ec") in detail


def test_threshold_not_met_names_the_key_ids_present_and_trusted(capsys, tmp_path, keys, one_signed, write_policy) -> None:
    code, err = run(capsys, "verify-attestation", one_signed, "--policy", write_policy(["ed", "ec"], threshold=2))
    assert code == 1
    (finding,) = err["errors"]
    assert finding["code"] == "THRESHOLD_NOT_MET"
    detail = finding["detail"]
    assert f"'{keys.signers['ed'].key_id}'" in detail and "unauthenticated" in detail
    assert key_ref(keys, "ed") in detail and key_ref(keys, "ec") in detail and "requires 2" in detail


def test_a_key_based_bundle_names_its_hint(capsys, sample_tree, tmp_path, keys, write_policy) -> None:
    bundle = tmp_path / "b.json"
    assert run(capsys, "attest", sample_tree, "--key", keys.priv("evil"), "--format", "bundle", "-o", bundle)[0] == 0
    code, err = run(capsys, "verify-attestation", bundle, "--policy", write_policy(["ed"]))
    assert code == 1 and err["errors"][0]["code"] == "NO_TRUSTED_SIGNATURE"
    assert keys.signers["evil"].key_id in err["errors"][0]["detail"] and key_ref(keys, "ed") in err["errors"][0]["detail"]


def test_key_id_hints_are_quoted_and_bounded(keys, sample_tree, write_policy) -> None:
    """Hints are attacker-chosen text: escaped (no terminal control characters) and cut short."""
    payload = statement_payload(closed_tree_statement("t", inventory_tree(sample_tree)))
    doc = raw_envelope(payload, [keys.signers["evil"]] * 12)
    doc["signatures"][0]["keyid"] = "\x1b[2Jtrusted" + "x" * 200
    del doc["signatures"][1]["keyid"]
    with pytest.raises(VerificationError) as e:
        verify_attestation_bytes(dumps(doc), load_policy(write_policy(["ed"])))
    detail = e.value.detail
    assert e.value.code == "NO_TRUSTED_SIGNATURE"
    assert "\x1b" not in detail and "\\x1b[2Jtrusted" in detail and "x" * 100 not in detail
    assert "(none)" in detail and "12 signature(s)" in detail and "and 4 more" in detail


def test_public_key_goes_with_one_key(capsys, sample_tree, tmp_path, keys, one_signed) -> None:
    out = tmp_path / "out.json"
    code, err = run(capsys, "attest", sample_tree, "--key", keys.priv("ed"), "--key", keys.priv("ec"),
                    "--public-key", keys.pub("ed"), "-o", out)
    assert code == 2 and err["errors"][0]["code"] == "USAGE"
    code, err = run(capsys, "sign", one_signed, "--add", keys.priv("ec"), "--add", keys.priv("ed2"),
                    "--public-key", keys.pub("ec"), "-o", out)
    assert code == 2 and err["errors"][0]["code"] == "USAGE" and not out.exists()


def test_a_summary_is_signed_by_one_key(capsys, sample_tree, tmp_path, keys, write_policy, one_signed) -> None:
    summary = tmp_path / "vsa.json"
    code, err = run(capsys, "verify", sample_tree, "--attestation", one_signed, "--policy", write_policy(["ed"]),
                    "--summary", summary, "--key", keys.priv("ec"), "--key", keys.priv("ed2"))
    assert code == 2 and err["errors"][0]["code"] == "USAGE" and not summary.exists()


def test_sign_with_a_missing_envelope_or_key_exits_2(capsys, tmp_path, keys, one_signed) -> None:
    code, err = run(capsys, "sign", tmp_path / "missing.json", "--add", keys.priv("ec"), "-o", tmp_path / "o.json")
    assert code == 2 and err["errors"][0]["code"] == "UNREADABLE"
    code, err = run(capsys, "sign", one_signed, "--add", tmp_path / "missing.pem", "-o", tmp_path / "o.json")
    assert code == 2 and err["errors"][0]["code"] == "UNREADABLE"
