"""Attack review of the signing additions: key-bundle evidence, ambient OIDC detection.

Each test performs one attack with real keys and files (a Rekor-like log signed with a real
P-256 key, the sigstore-conformance bundles, a local HTTP server on 127.0.0.1) and pins the
refusal attest must give: a reason code, never an acceptance and never an unexpected exception.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from support.keys import Keys
from test_key_bundle_evidence import (
    ARTIFACT,
    HAPPY,
    PRODUCTION,
    LocalLog,
    _bundle,
    _code,
    _dsse_bundle,
    _dsse_v001,
    _hashedrekord_v002,
    _policy,
)

from attest._json import canonical_bytes
from attest.attestation import verify_artifact_bundle, verify_attestation_bytes
from attest.attestation._sigstore import ambient_identity_token
from attest.errors import InputError

RETIRED = {"start": "2020-01-01T00:00:00Z", "end": "2021-01-01T00:00:00Z"}  # before LocalLog.TIME (2025-12-29)
CURRENT = {"start": "2020-01-01T00:00:00Z", "end": "2030-01-01T00:00:00Z"}


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "tree"
    root.mkdir()
    (root / "README").write_text("hello\n")
    return root


def _root_with(log: LocalLog, valid_for: dict[str, str]) -> dict[str, Any]:
    root = log.trusted_root()
    root["tlogs"][0]["publicKey"]["validFor"] = valid_for
    return root


# --- 1. a signed entry timestamp that is present but never checked -------------------------------


@pytest.mark.parametrize("integrated", ["0", None])
def test_a_forged_inclusion_promise_without_integrated_time_is_refused(tmp_path: Path, integrated: str | None) -> None:
    # A real production Rekor entry (valid inclusion proof and checkpoint) whose SET is replaced
    # by junk and whose integrated time is zeroed or removed: sigstore checks the SET only when
    # both are present, so the forged promise was accepted as if it had been verified.
    doc = _bundle(HAPPY)
    entry = doc["verificationMaterial"]["tlogEntries"][0]
    if integrated is None:
        del entry["integratedTime"]
    else:
        entry["integratedTime"] = integrated
    entry["inclusionPromise"]["signedEntryTimestamp"] = base64.b64encode(b"not a signature of this log").decode()
    policy = _policy(tmp_path, HAPPY / "key.pub", PRODUCTION)
    assert _code(verify_artifact_bundle, canonical_bytes(doc), ARTIFACT, policy) == "TLOG_ENTRY_INVALID"


# --- 2. a log key outside its validity period ---------------------------------------------------


def test_an_entry_integrated_after_its_log_key_was_retired_is_refused(tmp_path: Path, keys: Keys, tree: Path) -> None:
    # The root keeps a retired log key (validFor ended 2021) so that old entries still verify;
    # whoever holds that key later must not be able to log new entries (integrated 2025).
    log = LocalLog()
    doc, payload, sig, _ = _dsse_bundle(keys, tree)
    doc["verificationMaterial"]["tlogEntries"] = [log.entry(_dsse_v001(keys, payload, sig), "dsse", "0.0.1")]
    ok = _policy(tmp_path, keys.pub("ec"), _root_with(log, CURRENT), "current.toml")
    assert verify_attestation_bytes(canonical_bytes(doc), ok).signers == (ok.signers[0].id,)
    retired = _policy(tmp_path, keys.pub("ec"), _root_with(log, RETIRED), "retired.toml")
    assert _code(verify_attestation_bytes, canonical_bytes(doc), retired) == "TLOG_ENTRY_INVALID"
    # ... nor before the key's validity began.
    early = _policy(tmp_path, keys.pub("ec"), _root_with(log, {"start": "2026-06-01T00:00:00Z"}), "early.toml")
    assert _code(verify_attestation_bytes, canonical_bytes(doc), early) == "TLOG_ENTRY_INVALID"


def test_a_timeless_entry_of_a_retired_log_key_is_refused(tmp_path: Path, keys: Keys, tree: Path) -> None:
    # A Rekor v2 entry carries no integrated time: with a retired log key and no signed time
    # to show the entry was made while the key was valid, nothing shows it was.
    log = LocalLog()
    doc, _, sig, signed_pae = _dsse_bundle(keys, tree)
    doc["verificationMaterial"]["tlogEntries"] = [log.entry(_hashedrekord_v002(keys, signed_pae, sig), "hashedrekord", "0.0.2",
                                                            index=4, size=5)]
    ok = _policy(tmp_path, keys.pub("ec"), _root_with(log, {"start": "2020-01-01T00:00:00Z"}), "current.toml")
    assert verify_attestation_bytes(canonical_bytes(doc), ok).signers == (ok.signers[0].id,)
    retired = _policy(tmp_path, keys.pub("ec"), _root_with(log, RETIRED), "retired.toml")
    assert _code(verify_attestation_bytes, canonical_bytes(doc), retired) == "TLOG_ENTRY_INVALID"


def test_an_entry_naming_one_log_signed_by_another_logs_key_is_refused(tmp_path: Path, keys: Keys, tree: Path) -> None:
    # Two logs in the root: a current one whose log id is not the hash of its key (as Rekor v2
    # log ids are not), and a retired one. An entry naming the current log, its checkpoint
    # signed by the retired key: sigstore's keyring finds no key under that id and tries every
    # key, so the retired one "verified" a checkpoint of the current log.
    current, retired = LocalLog(), LocalLog()
    current_id = hashlib.sha256(b"log2026 checkpoint key id").digest()
    root = _root_with(current, {"start": "2020-01-01T00:00:00Z"})
    root["tlogs"][0]["logId"]["keyId"] = base64.b64encode(current_id).decode()
    root["tlogs"].append(_root_with(retired, RETIRED)["tlogs"][0])
    retired.log_id = current_id  # the forger writes the current log's id on the entry it signs
    doc, _, sig, signed_pae = _dsse_bundle(keys, tree)
    doc["verificationMaterial"]["tlogEntries"] = [retired.entry(_hashedrekord_v002(keys, signed_pae, sig), "hashedrekord", "0.0.2")]
    policy = _policy(tmp_path, keys.pub("ec"), root)
    assert _code(verify_attestation_bytes, canonical_bytes(doc), policy) == "TLOG_ENTRY_INVALID"


# --- 3. an integrated time outside any clock ----------------------------------------------------


@pytest.mark.parametrize("integrated", ["99999999999999", str(2**64 - 1)])
def test_an_out_of_range_integrated_time_is_a_reason_code(tmp_path: Path, integrated: str) -> None:
    # No inclusion promise (so the integrated time is not signed), an integrated time past
    # year 9999: the future check raised ValueError / OverflowError instead of refusing.
    doc = _bundle(HAPPY)
    entry = doc["verificationMaterial"]["tlogEntries"][0]
    del entry["inclusionPromise"]
    entry["integratedTime"] = integrated
    policy = _policy(tmp_path, HAPPY / "key.pub", PRODUCTION)
    assert _code(verify_artifact_bundle, canonical_bytes(doc), ARTIFACT, policy) == "TLOG_ENTRY_INVALID"


# --- 4. a hostile ambient-credential endpoint ---------------------------------------------------

_CI_VARS = ("GITHUB_ACTIONS", "ACTIONS_ID_TOKEN_REQUEST_URL", "ACTIONS_ID_TOKEN_REQUEST_TOKEN", "GITLAB_CI", "BUILDKITE",
            "CIRCLECI", "GOOGLE_SERVICE_ACCOUNT_NAME", "SIGSTORE_ID_TOKEN", "SIGSTORE_IDENTITY_TOKEN")


@pytest.fixture
def hostile() -> Iterator[str]:
    """A token endpoint that fails with a body that is not UTF-8."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = b"\xff\xfe\x00 not utf-8"
            self.send_response(500)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/token?api-version=2.0"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.mark.parametrize("url", ["hostile", "not a url", "http://[::1", "ftp://127.0.0.1/token"])
def test_a_hostile_token_endpoint_or_url_is_signing_failed(monkeypatch: pytest.MonkeyPatch, hostile: str, url: str) -> None:
    for name in _CI_VARS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("ACTIONS_ID_TOKEN_REQUEST_TOKEN", "request-token")
    monkeypatch.setenv("ACTIONS_ID_TOKEN_REQUEST_URL", hostile if url == "hostile" else url)
    with pytest.raises(InputError) as caught:
        ambient_identity_token()
    assert caught.value.code == "SIGNING_FAILED"


def test_the_cli_reports_a_hostile_endpoint_as_signing_failed(tmp_path: Path, hostile: str, tree: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in _CI_VARS}
    env.update(GITHUB_ACTIONS="true", ACTIONS_ID_TOKEN_REQUEST_TOKEN="request-token", ACTIONS_ID_TOKEN_REQUEST_URL=hostile)
    out = subprocess.run([sys.executable, "-m", "attest", "attest", str(tree), "-o", str(tmp_path / "a.json"), "--sigstore",
                          "--format", "bundle", "--json"], capture_output=True, text=True, env=env, check=False, timeout=120)
    assert out.returncode == 2, out
    assert "Traceback" not in out.stderr
    doc = json.loads(out.stdout)
    assert [f["code"] for f in doc["errors"]] == ["SIGNING_FAILED"], doc
    assert not (tmp_path / "a.json").exists()


def test_unchanged_bundles_still_verify(tmp_path: Path) -> None:
    # The fixes refuse forged or retired evidence, not the real thing: the production entry
    # (SET verified, integrated time inside the log key's validity) and TSA timestamp verify.
    policy = _policy(tmp_path, HAPPY / "key.pub", PRODUCTION)
    assert verify_artifact_bundle((HAPPY / "bundle.sigstore.json").read_bytes(), ARTIFACT, policy) == (policy.signers[0].id,)
    # And a production entry with its promise removed (inclusion proof only) still verifies.
    bare = _bundle(HAPPY)
    del bare["verificationMaterial"]["tlogEntries"][0]["inclusionPromise"]
    assert verify_artifact_bundle(canonical_bytes(bare), ARTIFACT, policy) == (policy.signers[0].id,)
