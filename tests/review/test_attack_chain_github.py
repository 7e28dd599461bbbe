"""Attack review of the `--github` host adapter against the local replay server (real HTTP on 127.0.0.1).

Refused attempts, kept as regression tests: the token never follows a redirect or a Link to another
origin, and a base commit the API names but GITDIR's objects lack never becomes the base.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from support.github_replay import ReplayServer, ok, raw
from test_bootstrap_github import (
    NUMBER,
    PR_PATH,
    REPO_PATH,
    REQUESTED,
    TOKEN,
    Repo,
    adapter,
    assert_no_token,
    docs,
    make,
    rendered,
    resolve_in,
    serve,
)

from attest.errors import AttestError
from attest.review.bootstrap import GitHubIdentity


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    return make(tmp_path)


@pytest.fixture
def evil() -> Any:
    srv = ReplayServer()
    try:
        yield srv
    finally:
        srv.close()


@pytest.mark.parametrize("status", [301, 302, 307, 308])
def test_refused_a_redirect_to_another_origin_carries_no_token(api: ReplayServer, evil: ReplayServer, repo: Repo,
                                                              status: int) -> None:
    serve(api, repo, repo=raw(b"{}", status=status, Location=f"{evil.url}{REPO_PATH}"))
    evil.set(REPO_PATH, ok(docs(repo)["repo"]))
    with pytest.raises(AttestError) as ei:
        resolve_in(repo, adapter(api))
    assert ei.value.code == "HOST_READ_FAILED" and evil.log == []
    assert_no_token(rendered(ei.value), json.dumps(ei.value.to_json()))


def test_refused_a_link_header_to_another_origin_is_never_followed(api: ReplayServer, evil: ReplayServer, repo: Repo) -> None:
    d = docs(repo)
    serve(api, repo, repo=ok(d["repo"], link=f'<{evil.url}{REPO_PATH}?page=2>; rel="next"'),
          pull=ok(d["pull"], link=f'<{evil.url}{PR_PATH}>; rel="next"'))
    ident = resolve_in(repo, adapter(api))
    assert ident.host.base_sha == repo.base and evil.log == []


def test_refused_a_base_the_api_names_but_the_objects_lack(api: ReplayServer, repo: Repo) -> None:
    ghost = "0123456789abcdef0123456789abcdef01234567"

    def change(d: dict[str, Any]) -> None:
        d["pull"]["base"]["sha"] = ghost
        d["commit"]["sha"] = ghost

    d = copy.deepcopy(docs(repo))
    change(d)
    serve(api, repo, change=change)
    api.set(f"{REPO_PATH}/git/commits/{ghost}", ok(d["commit"]))
    with pytest.raises(AttestError) as ei:
        resolve_in(repo, adapter(api))
    assert ei.value.code == "OBJECT_MISSING"
    assert_no_token(rendered(ei.value))


def test_refused_a_pull_request_of_another_repository_with_the_same_name(api: ReplayServer, repo: Repo) -> None:
    """The PR's base repository spelled like the requested one but with another id (a deleted-and-recreated name)."""
    def change(d: dict[str, Any]) -> None:
        d["pull"]["base"]["repo"]["id"] = d["repo"]["id"] + 1

    serve(api, repo, change=change)
    with pytest.raises(AttestError) as ei:
        resolve_in(repo, adapter(api))
    assert ei.value.code == "HOST_MISMATCH"


def test_refused_an_implicit_token_is_not_sent_to_a_named_api_url(api: ReplayServer, repo: Repo) -> None:
    from attest.review.bootstrap import host_adapter

    serve(api, repo)
    host = host_adapter(identity=None, github=REQUESTED, pr=NUMBER, token_env=None, api_url=api.url,
                        environ={"GITHUB_TOKEN": TOKEN})
    assert isinstance(host, GitHubIdentity) and host.token is None
    resolve_in(repo, host)
    assert all("Authorization" not in e.headers for e in api.log)
