"""THREATS group D: envelopes and statements. Every case fails closed with its own code."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from support.keys import Keys, as_json, b64, dumps, raw_envelope

from attest._json import canonical_bytes
from attest.attestation import (
    CLOSED_TREE_PREDICATE,
    AttestationCode,
    closed_tree_inventory,
    closed_tree_statement,
    load_policy,
    sign_statement,
    statement,
    verify_attestation_bytes,
    verify_attestation_file,
)
from attest.attestation._dsse import b64decode_strict
from attest.errors import AttestError, InputError, VerificationError
from attest.inventory import inventory_tree


@pytest.fixture
def policy(write_policy):
    return load_policy(write_policy(["ed"]))


@pytest.fixture
def good(sample_tree: Path) -> dict[str, Any]:
    return closed_tree_statement("tree", inventory_tree(sample_tree))


def code_of(data: bytes, policy) -> str:
    with pytest.raises(AttestError) as caught:
        verify_attestation_bytes(data, policy)
    assert isinstance(caught.value, VerificationError), caught.value  # a bad attestation is exit 1
    return caught.value.code


def signed(payload: bytes, keys: Keys, names=("ed",), **kw: Any) -> bytes:
    return dumps(raw_envelope(payload, [keys.signers[n] for n in names], **kw))


# --- what is signed ---------------------------------------------------------------------------

def test_signature_over_raw_payload_not_pae_is_refused(good, keys, policy) -> None:
    data = signed(canonical_bytes(good), keys, sign_over=lambda p: p)
    assert code_of(data, policy) == "NO_TRUSTED_SIGNATURE"


def test_signature_over_pae_of_another_payload_type_is_refused(good, keys, policy) -> None:
    payload = canonical_bytes(good)
    env = raw_envelope(payload, [keys.signers["ed"]], sign_over=lambda p: b"DSSEv1 16 application/json %d %s" % (len(p), p))
    assert code_of(dumps(env), policy) == "NO_TRUSTED_SIGNATURE"


def test_wrong_payload_type_is_refused(good, keys, policy) -> None:
    data = signed(canonical_bytes(good), keys, payload_type="application/json")
    assert code_of(data, policy) == AttestationCode.BAD_PAYLOAD_TYPE


def test_changed_payload_after_signing_is_refused(good, keys, policy) -> None:
    env = as_json(sign_statement(good, keys.signers["ed"]))
    tampered = copy.deepcopy(good)
    tampered["subject"][0]["name"] = "other"
    env["payload"] = b64(canonical_bytes(tampered))
    assert code_of(dumps(env), policy) == "NO_TRUSTED_SIGNATURE"


@pytest.mark.parametrize(
    ("mutate", "code"),
    [
        (lambda s: s.update({"_type": "https://in-toto.io/Statement/v0.1"}), "BAD_STATEMENT_TYPE"),
        (lambda s: s.pop("_type"), "BAD_STATEMENT_TYPE"),
        (lambda s: s.update({"predicateType": "not a uri"}), "BAD_PREDICATE_TYPE"),
        (lambda s: s.update({"predicate": [1]}), "BAD_PREDICATE"),
        (lambda s: s.update({"subject": []}), "NO_SUBJECT"),
        (lambda s: s.update({"extra": 1}), "BAD_STATEMENT"),
        (lambda s: s["subject"][0].update({"digest": {"sha512": "ab" * 64}}), "BAD_DIGEST"),
        (lambda s: s["subject"][0].update({"digest": {"sha256": "AB" * 32}}), "BAD_DIGEST"),
        (lambda s: s["subject"][0].update({"digest": {}}), "BAD_DIGEST"),
        (lambda s: s["subject"][0].update({"evil": True}), "BAD_STATEMENT"),
        (lambda s: s.update({"subject": [{"name": "x", "digest": {"sha256": "0" * 64}}] * 1025}), "EXTRA_SUBJECT"),
    ],
)
def test_signed_but_malformed_statements_are_refused(good, keys, policy, mutate, code) -> None:
    doc = copy.deepcopy(good)
    mutate(doc)
    assert code_of(signed(canonical_bytes(doc), keys), policy) == code


def test_signed_payload_that_is_not_json_is_refused(keys, policy) -> None:
    assert code_of(signed(b"\xff not json", keys), policy) == "BAD_JSON"


def test_statement_is_parsed_from_the_signed_bytes_not_a_reserialization(good, keys, policy) -> None:
    # Whitespace and key order differ from canonical form; the verified payload is exactly these bytes.
    payload = json.dumps(good, indent=1).encode()
    verified = verify_attestation_bytes(signed(payload, keys), policy)
    assert verified.payload == payload and verified.statement == good


# --- which tree ---------------------------------------------------------------------------------

def _tree_statement_code(doc: dict[str, Any], keys: Keys, policy) -> str:
    verified = verify_attestation_bytes(signed(canonical_bytes(doc), keys), policy)
    with pytest.raises(VerificationError) as caught:
        closed_tree_inventory(verified)
    return caught.value.code


def test_decoy_subjects_are_refused(good, keys, policy) -> None:
    doc = copy.deepcopy(good)
    doc["subject"].append({"name": "decoy", "digest": {"sha256": "1" * 64}})
    assert _tree_statement_code(doc, keys, policy) == "EXTRA_SUBJECT"


def test_subject_not_matching_the_inventory_is_refused(good, keys, policy) -> None:
    doc = copy.deepcopy(good)
    doc["subject"][0]["digest"]["sha256"] = "2" * 64
    assert _tree_statement_code(doc, keys, policy) == "SUBJECT_MISMATCH"


def test_tree_subject_with_extra_digest_algorithms_is_refused(good, keys, policy) -> None:
    doc = copy.deepcopy(good)
    doc["subject"][0]["digest"]["sha512"] = "ab" * 64
    assert _tree_statement_code(doc, keys, policy) == "BAD_DIGEST"


def test_other_predicate_type_is_not_a_tree(good, keys, policy) -> None:
    doc = copy.deepcopy(good)
    doc["predicateType"] = "https://slsa.dev/provenance/v1"
    assert _tree_statement_code(doc, keys, policy) == "BAD_PREDICATE_TYPE"


@pytest.mark.parametrize(
    "predicate",
    [{}, {"inventory": {"format": "nope"}}, {"inventory": None}, "EXTRA_FIELD"],
)
def test_malformed_closed_tree_predicate_is_refused(good, keys, policy, predicate) -> None:
    doc = copy.deepcopy(good)
    doc["predicate"] = {**good["predicate"], "note": "x"} if predicate == "EXTRA_FIELD" else predicate
    assert _tree_statement_code(doc, keys, policy) == "BAD_PREDICATE"


# --- signatures and threshold -----------------------------------------------------------------

def test_zero_signatures(good, keys, policy) -> None:
    env = as_json(sign_statement(good, keys.signers["ed"]))
    env["signatures"] = []
    assert code_of(dumps(env), policy) == "NO_SIGNATURES"


def test_too_many_signatures(good, keys, policy) -> None:
    env = as_json(sign_statement(good, keys.signers["ed"]))
    env["signatures"] = env["signatures"] * 33
    assert code_of(dumps(env), policy) == "TOO_MANY_SIGNATURES"


def test_duplicate_signature_counts_once(good, keys, write_policy) -> None:
    env = as_json(sign_statement(good, keys.signers["ed"]))
    env["signatures"] = env["signatures"] * 2
    with pytest.raises(VerificationError) as caught:
        verify_attestation_bytes(dumps(env), load_policy(write_policy(["ed", "ec"], threshold=2)))
    assert caught.value.code == "THRESHOLD_NOT_MET"


def test_same_key_twice_with_different_key_ids_counts_once(good, keys, write_policy) -> None:
    payload = canonical_bytes(good)
    env = raw_envelope(payload, [keys.signers["ed"], keys.signers["ed"]])
    env["signatures"][1]["keyid"] = keys.signers["ec"].key_id  # claims to be the other trusted key
    with pytest.raises(VerificationError) as caught:
        verify_attestation_bytes(dumps(env), load_policy(write_policy(["ed", "ec"], threshold=2)))
    assert caught.value.code == "THRESHOLD_NOT_MET"


def test_a_key_id_never_selects_the_key(good, keys, policy) -> None:
    # An untrusted key's signature labelled with the trusted key's id is still untrusted ...
    env = raw_envelope(canonical_bytes(good), [keys.signers["evil"]])
    env["signatures"][0]["keyid"] = keys.signers["ed"].key_id
    assert code_of(dumps(env), policy) == "NO_TRUSTED_SIGNATURE"
    # ... and a trusted signature with a wrong or empty key id still verifies.
    env = raw_envelope(canonical_bytes(good), [keys.signers["ed"]])
    env["signatures"][0]["keyid"] = "whatever"
    assert verify_attestation_bytes(dumps(env), policy).signers
    del env["signatures"][0]["keyid"]
    assert verify_attestation_bytes(dumps(env), policy).signers


def test_invalid_signature_listed_first_does_not_hide_a_valid_one(good, keys, policy) -> None:
    env = raw_envelope(canonical_bytes(good), [keys.signers["evil"], keys.signers["ed"]])
    env["signatures"].insert(0, {"keyid": keys.signers["ed"].key_id, "sig": b64(b"\x00" * 64)})
    verified = verify_attestation_bytes(dumps(env), policy)
    assert verified.signers == ("key:sha256:" + keys.signers["ed"].key_id,)


def test_untrusted_key_alone_is_refused(good, keys, policy) -> None:
    assert code_of(sign_statement(good, keys.signers["evil"]), policy) == "NO_TRUSTED_SIGNATURE"


# --- lenient encodings, duplicate keys, caps ----------------------------------------------------

@pytest.mark.parametrize(
    "spell",
    [
        lambda s: s.rstrip("="),  # missing padding
        lambda s: s.replace("+", "-").replace("/", "_") if ("+" in s or "/" in s) else s[:-4] + "-___",  # URL-safe alphabet
        lambda s: s[:8] + "\n" + s[8:],  # embedded newline
        lambda s: s + "====",  # extra padding
    ],
)
def test_lenient_base64_is_refused(good, keys, policy, spell) -> None:
    env = as_json(sign_statement(good, keys.signers["ed"]))
    env["payload"] = spell(env["payload"])
    assert code_of(dumps(env), policy) == "BAD_BASE64"


def test_base64_with_nonzero_trailing_bits_is_refused() -> None:
    assert b64decode_strict("QQ==", "x") == b"A"
    with pytest.raises(VerificationError) as caught:
        b64decode_strict("QR==", "x")  # decodes to b"A" too under a lenient decoder
    assert caught.value.code == "BAD_BASE64"


@given(st.binary(max_size=200))
def test_strict_base64_round_trips(data: bytes) -> None:
    assert b64decode_strict(b64(data), "x") == data


def test_signature_base64_is_strict(good, keys, policy) -> None:
    env = as_json(sign_statement(good, keys.signers["ed"]))
    env["signatures"][0]["sig"] = env["signatures"][0]["sig"].rstrip("=")
    assert code_of(dumps(env), policy) == "BAD_BASE64"


@pytest.mark.parametrize(
    "text",
    [
        b'{"payload": "e30=", "payload": "e30=", "payloadType": "application/vnd.in-toto+json", "signatures": []}',
        b'{"payload": "e30=", "payloadType": "application/vnd.in-toto+json", "signatures": [{"sig": "AA==", "sig": "AA=="}]}',
    ],
)
def test_duplicate_keys_in_the_envelope_are_refused(policy, text) -> None:
    assert code_of(text, policy) == "DUPLICATE_KEY"


def test_duplicate_keys_deep_inside_the_signed_payload_are_refused(good, keys, policy) -> None:
    text = canonical_bytes(good).decode()
    # Repeat a key deep in the inventory: {"mode":493,"mode":420,...}
    assert '"mode":' in text
    doubled = text.replace('"mode":', '"mode":420,"mode":', 1).encode()
    assert code_of(signed(doubled, keys), policy) == "DUPLICATE_KEY"


def test_deep_nesting_is_refused(policy) -> None:
    assert code_of(b"[" * 5000 + b"]" * 5000, policy) in {"TOO_DEEP"}


def test_deep_nesting_inside_the_payload_is_refused(good, keys, policy) -> None:
    doc = copy.deepcopy(good)
    deep: Any = "x"
    for _ in range(100):
        deep = {"a": deep}
    doc["predicate"]["deep"] = deep
    assert code_of(signed(canonical_bytes(doc), keys), policy) == "TOO_DEEP"


def test_oversized_attestation_is_refused_before_parsing(tmp_path, policy, monkeypatch) -> None:
    import attest.attestation._verify as verify_module

    monkeypatch.setattr(verify_module, "MAX_ATTESTATION_BYTES", 1000)
    big = tmp_path / "big.json"
    big.write_bytes(b" " * 1001)
    with pytest.raises(InputError) as caught:
        verify_attestation_file(big, policy)
    assert caught.value.code == "TOO_LARGE"


@pytest.mark.parametrize("text", [b"[]", b'{"signatures": []}', b"null", b'"x"'])
def test_unknown_formats_are_refused(policy, text) -> None:
    assert code_of(text, policy) == "UNKNOWN_FORMAT"


@pytest.mark.parametrize(
    "mutate",
    [
        lambda e: e.update({"extra": 1}),
        lambda e: e.pop("signatures"),
        lambda e: e.update({"signatures": {"sig": "AA=="}}),
        lambda e: e["signatures"][0].update({"cert": "x"}),
        lambda e: e["signatures"][0].update({"keyid": 5}),
        lambda e: e["signatures"][0].update({"sig": ""}),
    ],
)
def test_malformed_envelopes_are_refused(good, keys, policy, mutate) -> None:
    env = as_json(sign_statement(good, keys.signers["ed"]))
    mutate(env)
    assert code_of(dumps(env), policy) == "BAD_ENVELOPE"


def test_building_a_bad_statement_is_an_input_error() -> None:
    with pytest.raises(InputError) as caught:
        statement([], CLOSED_TREE_PREDICATE, {})
    assert caught.value.code == "NO_SUBJECT"
