"""Strict JSON on the verification path (found by an independent review): I-JSON only.

DESIGN.md: "Parsers are strict"; attest/_json.py promises "no NaN/Infinity". RFC 8785 (the
encoding the statements use) is defined over I-JSON (RFC 7493), which forbids lone surrogates
and numbers outside IEEE double range: a validly signed payload carrying either is refused.
"""

from __future__ import annotations

import base64

import pytest
from support.keys import Keys, dumps

from attest.attestation import load_policy, pae, verify_attestation_bytes
from attest.errors import VerificationError

SHA = "a" * 64


def _signed(payload: bytes, keys: Keys) -> bytes:
    sig = keys.signers["ed"].sign(pae("application/vnd.in-toto+json", payload))
    return dumps({"payload": base64.b64encode(payload).decode(), "payloadType": "application/vnd.in-toto+json",
                  "signatures": [{"sig": base64.b64encode(sig).decode()}]})


def _statement(subject_name: str, predicate: str) -> bytes:
    return ('{"_type":"https://in-toto.io/Statement/v1","subject":[{"name":"%s","digest":{"sha256":"%s"}}],'
            '"predicateType":"https://example.com/p","predicate":%s}' % (subject_name, SHA, predicate)).encode()


@pytest.mark.parametrize(
    "payload",
    [
        pytest.param(_statement("t", '{"n":1e400}'), id="float-overflows-to-infinity"),
        pytest.param(_statement("\\ud800", "{}"), id="lone-surrogate-escape"),
    ],
)
def test_non_i_json_signed_payload_is_refused(keys: Keys, write_policy, payload: bytes) -> None:
    with pytest.raises(VerificationError) as caught:
        verify_attestation_bytes(_signed(payload, keys), load_policy(write_policy(["ed"])))
    assert caught.value.code == "BAD_JSON"
