"""Keyless signing finds the CI's ambient OIDC credential as sigstore-python does.

A local HTTP server on 127.0.0.1 stands in for GitHub Actions' token endpoint
(ACTIONS_ID_TOKEN_REQUEST_URL / ACTIONS_ID_TOKEN_REQUEST_TOKEN); only the detection is tested,
never a Fulcio call (there is no network here).
"""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest

from attest.attestation import KeylessSigner, closed_tree_statement, sign_statement
from attest.attestation._sigstore import ambient_identity_token
from attest.errors import InputError
from attest.inventory import inventory_tree

REQUEST_TOKEN = "request-token-for-this-job"
_CI_VARS = ("GITHUB_ACTIONS", "ACTIONS_ID_TOKEN_REQUEST_URL", "ACTIONS_ID_TOKEN_REQUEST_TOKEN", "GITLAB_CI", "BUILDKITE",
            "CIRCLECI", "GOOGLE_SERVICE_ACCOUNT_NAME", "SIGSTORE_ID_TOKEN", "SIGSTORE_IDENTITY_TOKEN")


def _jwt(claims: dict[str, Any]) -> str:
    def part(doc: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(doc).encode()).decode().rstrip("=")

    return f"{part({'alg': 'RS256', 'typ': 'JWT'})}.{part(claims)}.c2lnbmF0dXJl"


class TokenEndpoint:
    """The Actions ID-token service: GET ?audience=A with the job's bearer token -> {"value": JWT}."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, list[str]], str | None]] = []
        self.status = 200
        self.audience_claim: str | None = None  # None: the audience asked for
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                url = urlparse(self.path)
                query = parse_qs(url.query)
                auth = self.headers.get("Authorization")
                endpoint.requests.append((url.path, query, auth))
                if auth != f"bearer {REQUEST_TOKEN}":
                    self.send_response(401)
                    self.end_headers()
                    return
                audience = endpoint.audience_claim or query.get("audience", [""])[0]
                body = json.dumps({"value": _jwt({"aud": audience, "iss": "https://token.actions.githubusercontent.com",
                                                  "sub": "repo:org/repo:ref:refs/heads/main"})}).encode()
                self.send_response(endpoint.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/_apis/distributedtask/token?api-version=2.0"


@pytest.fixture
def endpoint() -> Iterator[TokenEndpoint]:
    ep = TokenEndpoint()
    thread = threading.Thread(target=ep.server.serve_forever, daemon=True)
    thread.start()
    try:
        yield ep
    finally:
        ep.server.shutdown()
        ep.server.server_close()
        thread.join()


@pytest.fixture
def clean_ci(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in _CI_VARS:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def _actions(env: pytest.MonkeyPatch, ep: TokenEndpoint, *, token: str | None = REQUEST_TOKEN) -> None:
    env.setenv("GITHUB_ACTIONS", "true")
    env.setenv("ACTIONS_ID_TOKEN_REQUEST_URL", ep.url)
    if token is not None:
        env.setenv("ACTIONS_ID_TOKEN_REQUEST_TOKEN", token)


def test_github_actions_credential_is_requested_for_sigstore(clean_ci: pytest.MonkeyPatch, endpoint: TokenEndpoint) -> None:
    _actions(clean_ci, endpoint)
    token = ambient_identity_token()
    claims = json.loads(base64.urlsafe_b64decode(token.split(".")[1] + "=="))
    assert claims["aud"] == "sigstore"
    [(path, query, auth)] = endpoint.requests
    # The request URL keeps its own query and gains the audience, with the job's bearer token.
    assert path == "/_apis/distributedtask/token" and query == {"api-version": ["2.0"], "audience": ["sigstore"]}
    assert auth == f"bearer {REQUEST_TOKEN}"


@pytest.mark.parametrize("name", ["SIGSTORE_ID_TOKEN", "SIGSTORE_IDENTITY_TOKEN"])
def test_an_explicit_token_wins_and_nothing_is_requested(clean_ci: pytest.MonkeyPatch, endpoint: TokenEndpoint, name: str) -> None:
    _actions(clean_ci, endpoint)
    clean_ci.setenv(name, "explicit.token.value")
    assert ambient_identity_token() == "explicit.token.value"
    assert endpoint.requests == []


def test_actions_without_id_token_permission(clean_ci: pytest.MonkeyPatch, endpoint: TokenEndpoint) -> None:
    _actions(clean_ci, endpoint, token=None)  # a workflow without `permissions: id-token: write`
    with pytest.raises(InputError) as caught:
        ambient_identity_token()
    assert caught.value.code == "SIGNING_FAILED" and "ACTIONS_ID_TOKEN_REQUEST_TOKEN" in caught.value.detail


@pytest.mark.parametrize("failure", ["status", "audience", "bearer"])
def test_a_failing_or_wrong_endpoint(clean_ci: pytest.MonkeyPatch, endpoint: TokenEndpoint, failure: str) -> None:
    _actions(clean_ci, endpoint, token="another job's token" if failure == "bearer" else REQUEST_TOKEN)
    if failure == "status":
        endpoint.status = 500
    if failure == "audience":
        endpoint.audience_claim = "not-sigstore"  # a token for another relying party is never used
    with pytest.raises(InputError) as caught:
        ambient_identity_token()
    assert caught.value.code == "SIGNING_FAILED"


def test_no_ci_and_no_token_is_a_usage_error_before_any_network(clean_ci: pytest.MonkeyPatch, sample_tree: Any) -> None:
    with pytest.raises(InputError) as caught:
        ambient_identity_token()
    assert caught.value.code == "USAGE"
    with pytest.raises(InputError) as caught:
        sign_statement(closed_tree_statement("tree", inventory_tree(sample_tree)), KeylessSigner(), fmt="bundle")
    assert caught.value.code == "USAGE"
