"""The `--github` host adapter of `attest bootstrap` step 2 (BOOTSTRAP.md; docs/bootstrap.md "Host adapters").

Every read goes over real HTTP to the local replay server (127.0.0.1, no network); every
repository is a real git repository whose objects decide the base tree.
"""

from __future__ import annotations

import copy
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import test_bootstrap
from support.caps import BACKEND
from support.github_replay import ReplayServer, Response, error, ok, raw
from support.gitrepo import git, make_repo
from test_bootstrap import T0, HostCheck, fails, make_consumer

from attest.cli import main
from attest.errors import AttestError, InputError, VerificationError
from attest.git import GitRepo
from attest.review.bootstrap import (
    DEFAULT_TOKEN_ENV,
    GitHubIdentity,
    HostIdentity,
    IdentityFile,
    establish_identity,
    host_adapter,
)
from attest.review.evidence import HttpLimits

# test_bootstrap's module-scoped deployment and a fresh installed Skill, which pytest injects by name.

TOKEN = "ghs_Sup3rSecretT0kenValue0123456789"
REQUESTED = "acme/widgets"
CANONICAL = "Acme/Widgets"  # GitHub's own spelling: names compare case-insensitively
REPO_ID = 4242
PR_ID = 99001
NUMBER = 7
REPO_PATH = f"/repos/{REQUESTED}"
PR_PATH = f"{REPO_PATH}/pulls/{NUMBER}"


@dataclass
class Repo:
    path: Path
    base: str
    head: str
    tree: str
    fmt: str

    @property
    def commit_path(self) -> str:
        return f"{REPO_PATH}/git/commits/{self.base}"


def make(tmp: Path, fmt: str = "sha1") -> Repo:
    path = tmp / f"repo-{fmt}"
    base = make_repo(path, {"README": b"base\n", "src/a.py": b"A = 1\n"}, fmt=fmt)
    (path / "src" / "a.py").write_bytes(b"A = 2\n")
    git(path, "commit", "-qam", "head")
    return Repo(path, base, git(path, "rev-parse", "HEAD"), git(path, "rev-parse", f"{base}^{{tree}}"), fmt)


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    return make(tmp_path)


def docs(r: Repo) -> dict[str, dict[str, Any]]:
    """The three answers, shaped like the public API's (with fields the adapter does not read)."""
    repo = {"id": REPO_ID, "node_id": "R_kgDOAAA", "name": "Widgets", "full_name": CANONICAL, "private": False,
            "owner": {"login": "Acme", "id": 1, "type": "Organization"}, "default_branch": "main"}
    pull = {"id": PR_ID, "node_id": "PR_kwDOAAA", "number": NUMBER, "state": "open", "title": "frob",
            "head": {"label": "acme:frob", "ref": "frob", "sha": r.head, "repo": None},
            "base": {"label": "acme:main", "ref": "main", "sha": r.base, "repo": {"id": REPO_ID, "full_name": CANONICAL, "fork": False}}}
    commit = {"sha": r.base, "node_id": "C_kwDOAAA", "tree": {"sha": r.tree, "url": f"https://api.github.com/repos/{CANONICAL}/git/trees/{r.tree}"},
              "message": "init", "parents": []}
    return {"repo": repo, "pull": pull, "commit": commit}


def serve(api: ReplayServer, r: Repo, *, change: Callable[[dict[str, dict[str, Any]]], None] | None = None,
          **responses: Response) -> None:
    """Route the three reads; ``change`` edits the answers, ``responses`` (repo=, pull=, commit=) replace one."""
    d = copy.deepcopy(docs(r))
    if change is not None:
        change(d)
    api.set(REPO_PATH, responses.get("repo", ok(d["repo"])))
    api.set(PR_PATH, responses.get("pull", ok(d["pull"])))
    api.set(r.commit_path, responses.get("commit", ok(d["commit"])))


def adapter(api: ReplayServer, *, token: str | None = TOKEN, **limits: Any) -> GitHubIdentity:
    return GitHubIdentity(REQUESTED, NUMBER, api.url, token, HttpLimits(**limits))


def resolve_in(r: Repo, host: Any) -> Any:
    with GitRepo.open(r.path) as g:
        return establish_identity(host, g)


def assert_no_token(*texts: str) -> None:
    for text in texts:
        assert TOKEN not in text


def rendered(err: AttestError) -> str:
    return str(err) + json.dumps(err.to_json()) + "".join(f"{f.path}{f.detail}" for f in err.findings)


# -- success ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["sha1", "sha256"])
def test_the_identities_are_what_the_api_served_and_the_tree_agrees_with_the_objects(
        api: ReplayServer, tmp_path: Path, fmt: str) -> None:
    r = make(tmp_path, fmt)
    serve(api, r)
    ident = resolve_in(r, adapter(api))
    assert ident.host == HostIdentity(REPO_ID, CANONICAL, PR_ID, NUMBER, r.base, r.head) and ident.host.api_base_tree == r.tree
    assert ident.base_tree == r.tree and ident.object_format == fmt
    assert ident.host.repository_json() == {"id": REPO_ID, "full_name": CANONICAL}
    assert ident.host.pull_request_json() == {"id": PR_ID, "number": NUMBER}
    # The documented order, one read each, nothing retried.
    assert api.targets == [REPO_PATH, PR_PATH, r.commit_path]


def test_the_token_reaches_only_the_server_and_only_as_a_bearer_header(api: ReplayServer, repo: Repo) -> None:
    serve(api, repo)
    host = adapter(api)
    resolve_in(repo, host)
    assert TOKEN not in repr(host)
    for entry in api.log:
        assert entry.headers["Authorization"] == f"Bearer {TOKEN}"
        assert_no_token(entry.target, *(v for k, v in entry.headers.items() if k != "Authorization"))


def test_anonymous_reads_send_no_authorization(api: ReplayServer, repo: Repo) -> None:
    serve(api, repo)
    resolve_in(repo, adapter(api, token=None))
    assert [e for e in api.log if "Authorization" in e.headers] == []


def test_every_resolution_reads_afresh(api: ReplayServer, repo: Repo) -> None:
    """The adapter keeps nothing: a second resolution sees the pull request's new head."""
    first = docs(repo)["pull"]
    moved = copy.deepcopy(first)
    moved["head"]["sha"] = repo.base
    serve(api, repo, pull=ok(first))
    api.set(PR_PATH, ok(first), ok(moved))
    host = adapter(api)
    assert host.resolve().head_sha == repo.head
    assert host.resolve().head_sha == repo.base
    assert api.targets == [REPO_PATH, PR_PATH, repo.commit_path] * 2


# -- every failure of the reads -------------------------------------------------------------------------------


def _set(dotted: str, value: Any) -> Callable[[dict[str, dict[str, Any]]], None]:
    def change(d: dict[str, dict[str, Any]]) -> None:
        doc_name, _, rest = dotted.partition(".")
        node = d[doc_name]
        *parents, last = rest.split(".")
        for key in parents:
            node = node[key]
        if value is _DELETE:
            del node[last]
        else:
            node[last] = value
    return change


_DELETE = object()
OTHER_SHA = "0123456789abcdef0123456789abcdef01234567"

# (id, answers changed, replaced response (which, response), code, reads made before the failure stopped them)
READ_CASES: list[tuple[str, Any, tuple[str, Response] | None, str, int]] = [
    ("repo-404", None, ("repo", error(404, "Not Found")), "HOST_READ_FAILED", 1),
    ("repo-301-not-followed", None, ("repo", Response(301, b"", {"Location": "https://evil.example/x", "Content-Type": "application/json"})), "HOST_READ_FAILED", 1),
    ("pull-500", None, ("pull", error(500)), "HOST_READ_FAILED", 2),
    ("pull-403-rate-limit", None, ("pull", error(403, "API rate limit exceeded")), "HOST_READ_FAILED", 2),
    ("commit-404", None, ("commit", error(404, "Not Found")), "HOST_READ_FAILED", 3),
    ("malformed-json", None, ("repo", raw(b'{"id": 4242, "full_name": ')), "HOST_READ_FAILED", 1),
    ("duplicate-key", None, ("pull", raw(b'{"id": 1, "id": 2}')), "HOST_READ_FAILED", 2),
    ("not-json-content-type", None, ("commit", raw(b"{}", content_type="text/html")), "HOST_READ_FAILED", 3),
    ("repo-not-an-object", None, ("repo", ok([{"id": REPO_ID}])), "BAD_IDENTITY", 1),
    ("repo-id-string", _set("repo.id", "4242"), None, "BAD_IDENTITY", 1),
    ("repo-id-bool", _set("repo.id", True), None, "BAD_IDENTITY", 1),
    ("repo-id-zero", _set("repo.id", 0), None, "BAD_IDENTITY", 1),
    ("repo-id-negative", _set("repo.id", -4242), None, "BAD_IDENTITY", 1),
    ("repo-id-not-json-safe", _set("repo.id", 2**53), None, "HOST_READ_FAILED", 1),  # the strict JSON parser's refusal
    ("repo-full-name-missing", _set("repo.full_name", _DELETE), None, "BAD_IDENTITY", 1),
    ("repo-full-name-not-owner-name", _set("repo.full_name", "widgets"), None, "BAD_IDENTITY", 1),
    ("pull-id-float", _set("pull.id", 99001.0), None, "BAD_IDENTITY", 2),
    ("pull-number-string", _set("pull.number", "7"), None, "BAD_IDENTITY", 2),
    ("pull-base-repo-null", _set("pull.base.repo", None), None, "BAD_IDENTITY", 2),
    ("pull-head-missing", _set("pull.head", _DELETE), None, "BAD_IDENTITY", 2),
    ("commit-tree-not-object", _set("commit.tree", "abc"), None, "BAD_IDENTITY", 3),
    ("pull-base-short-sha", _set("pull.base.sha", "d670460"), None, "NOT_FULL_SHA", 2),
    ("pull-head-uppercase", _set("pull.head.sha", "3F786850E387550FDAB836ED7E6DC881DE23001B"), None, "NOT_FULL_SHA", 2),
    ("pull-head-int", _set("pull.head.sha", 12345), None, "NOT_FULL_SHA", 2),
    ("commit-tree-short-sha", _set("commit.tree.sha", "abc123"), None, "NOT_FULL_SHA", 3),
    ("repo-another-name", _set("repo.full_name", "acme/gadgets"), None, "HOST_MISMATCH", 1),
    ("pull-number-mismatch", _set("pull.number", NUMBER + 1), None, "HOST_MISMATCH", 2),
    ("pull-base-repo-id-mismatch", _set("pull.base.repo.id", REPO_ID + 1), None, "HOST_MISMATCH", 2),
    ("pull-base-repo-name-mismatch", _set("pull.base.repo.full_name", "acme/widgets-fork"), None, "HOST_MISMATCH", 2),
    ("commit-sha-mismatch", _set("commit.sha", OTHER_SHA), None, "HOST_MISMATCH", 3),
]


@pytest.mark.parametrize(("change", "replace", "code", "reads"), [c[1:] for c in READ_CASES], ids=[c[0] for c in READ_CASES])
def test_a_failed_or_malformed_read_fails_with_its_code_and_stops(
        api: ReplayServer, repo: Repo, change: Any, replace: tuple[str, Response] | None, code: str, reads: int) -> None:
    serve(api, repo, change=change, **dict([replace] if replace else []))
    with pytest.raises(AttestError) as ei:
        resolve_in(repo, adapter(api))
    err = ei.value
    assert [f.code for f in err.findings] == [code]
    assert err.exit_code == (1 if code == "HOST_MISMATCH" else 2)
    assert isinstance(err, VerificationError if code == "HOST_MISMATCH" else InputError)
    assert err.path == [REPO_PATH, PR_PATH, repo.commit_path][reads - 1]
    assert api.targets == [REPO_PATH, PR_PATH, repo.commit_path][:reads]  # nothing after the failed read, nothing retried
    assert_no_token(rendered(err))


def test_the_api_tree_must_be_the_objects_tree(api: ReplayServer, repo: Repo) -> None:
    head_tree = git(repo.path, "rev-parse", f"{repo.head}^{{tree}}")
    serve(api, repo, change=_set("commit.tree.sha", head_tree))
    with pytest.raises(VerificationError) as ei:
        resolve_in(repo, adapter(api))
    assert [f.code for f in ei.value.findings] == ["API_TREE_MISMATCH"] and ei.value.exit_code == 1
    assert head_tree in ei.value.detail and repo.tree in ei.value.detail


def test_an_api_tree_of_the_other_object_format_is_not_a_tree_id(api: ReplayServer, repo: Repo) -> None:
    serve(api, repo, change=_set("commit.tree.sha", "ab" * 32))  # well-formed, but SHA-256 for a SHA-1 repository
    with pytest.raises(InputError) as ei:
        resolve_in(repo, adapter(api))
    assert ei.value.code == "NOT_FULL_SHA"


def test_a_timeout_is_a_failed_read_and_not_retried(api: ReplayServer, repo: Repo) -> None:
    release = threading.Event()
    serve(api, repo, pull=Response(200, b"{}", {"Content-Type": "application/json"}, hold=release))
    try:
        with pytest.raises(InputError) as ei:
            resolve_in(repo, adapter(api, timeout=0.2, deadline=0.5))
    finally:
        release.set()
    assert ei.value.code == "HOST_READ_FAILED" and "HTTP_ERROR" in ei.value.detail
    assert api.targets == [REPO_PATH, PR_PATH]


def test_a_slow_loris_answer_hits_the_deadline(api: ReplayServer, repo: Repo) -> None:
    d = docs(repo)
    serve(api, repo, repo=Response(200, json.dumps(d["repo"]).encode(), {"Content-Type": "application/json"}, trickle=0.05))
    with pytest.raises(InputError) as ei:
        resolve_in(repo, adapter(api, timeout=0.5, deadline=0.4))
    assert ei.value.code == "HOST_READ_FAILED" and "within 0.4s" in ei.value.detail


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_an_oversized_answer_is_a_failed_read(api: ReplayServer, repo: Repo, chunked: bool) -> None:
    d = docs(repo)
    d["repo"]["description"] = "x" * 4096
    serve(api, repo, repo=Response(200, json.dumps(d["repo"]).encode(), {"Content-Type": "application/json"}, chunked=chunked))
    with pytest.raises(InputError) as ei:
        resolve_in(repo, adapter(api, max_page_bytes=1024))
    assert ei.value.code == "HOST_READ_FAILED" and "RESPONSE_TOO_LARGE" in ei.value.detail


@pytest.mark.parametrize("field", ["repo.full_name", "pull.head.sha", "commit.sha"])
def test_an_answer_that_echoes_the_token_is_refused_without_showing_it(api: ReplayServer, repo: Repo, field: str) -> None:
    token = "0123456789abcdef0123456789abcdef01234567" if field != "repo.full_name" else TOKEN  # an old-style 40-hex token
    value = token if field != "repo.full_name" else f"acme/{token}"
    serve(api, repo, change=_set(field, value))
    with pytest.raises(InputError) as ei:
        resolve_in(repo, GitHubIdentity(REQUESTED, NUMBER, api.url, token))
    assert ei.value.code == "BAD_IDENTITY" and "holds the token" in ei.value.detail
    assert token not in rendered(ei.value)


# -- the host options -------------------------------------------------------------------------------------------

OPTION_CASES: list[tuple[str, dict[str, Any], str]] = [
    ("both-adapters", {"identity": "id.json", "github": REQUESTED, "pr": NUMBER}, "exactly one host adapter"),
    ("neither-adapter", {}, "exactly one host adapter"),
    ("github-without-pr", {"github": REQUESTED}, "needs --pr N"),
    ("pr-with-identity", {"identity": "id.json", "pr": NUMBER}, "belong to --github"),
    ("api-url-with-identity", {"identity": "id.json", "api_url": "https://api.github.com"}, "belong to --github"),
    ("not-owner-name", {"github": "widgets", "pr": NUMBER}, "OWNER/NAME"),
    ("dot-dot-name", {"github": "acme/..", "pr": NUMBER}, "OWNER/NAME"),
    ("pr-zero", {"github": REQUESTED, "pr": 0}, "positive"),
    ("pr-unsafe", {"github": REQUESTED, "pr": 2**53}, "positive"),
    ("api-url-ftp", {"github": REQUESTED, "pr": NUMBER, "api_url": "ftp://api.github.com"}, "http(s)"),
    ("api-url-cleartext", {"github": REQUESTED, "pr": NUMBER, "api_url": "http://api.example.org"}, "loopback"),
    ("token-env-unset", {"github": REQUESTED, "pr": NUMBER, "token_env": "ATTEST_TEST_UNSET"}, "'ATTEST_TEST_UNSET' named by --token-env is unset"),
    ("token-env-empty", {"github": REQUESTED, "pr": NUMBER, "token_env": "ATTEST_TEST_EMPTY"}, "is unset or empty"),
    ("token-env-not-a-name", {"github": REQUESTED, "pr": NUMBER, "token_env": TOKEN + "-x"}, "NAME of an environment variable"),
    ("token-unsendable", {"github": REQUESTED, "pr": NUMBER, "token_env": "ATTEST_TEST_BAD"}, "not shown"),
]
ENVIRON = {"ATTEST_TEST_EMPTY": "", "ATTEST_TEST_BAD": TOKEN + "\n", DEFAULT_TOKEN_ENV: TOKEN, "ATTEST_TEST_TOKEN": "other-token"}


@pytest.mark.parametrize(("options", "message"), [c[1:] for c in OPTION_CASES], ids=[c[0] for c in OPTION_CASES])
def test_bad_host_options_are_refused_before_anything_runs(options: dict[str, Any], message: str) -> None:
    kw: dict[str, Any] = {"identity": None, "github": None, "pr": None, "token_env": None, "api_url": None, **options}
    with pytest.raises(InputError) as ei:
        host_adapter(**kw, environ=ENVIRON)
    assert {f.code for f in ei.value.findings} == {"BAD_HOST_OPTIONS"} and ei.value.exit_code == 2
    assert message in str(ei.value)
    assert_no_token(rendered(ei.value))


def test_the_options_select_the_adapter_and_the_token() -> None:
    none: dict[str, Any] = {"identity": None, "github": None, "pr": None, "token_env": None, "api_url": None}
    assert host_adapter(**{**none, "identity": Path("id.json")}, environ=ENVIRON) == IdentityFile("id.json")
    # GITHUB_TOKEN, implicitly, for the default API URL only ...
    implicit = host_adapter(**{**none, "github": REQUESTED, "pr": NUMBER}, environ=ENVIRON)
    assert implicit == GitHubIdentity(REQUESTED, NUMBER, "https://api.github.com", TOKEN)
    assert host_adapter(**{**none, "github": REQUESTED, "pr": NUMBER}, environ={}) == GitHubIdentity(REQUESTED, NUMBER)
    # ... never to a URL the operator named without naming the token too.
    elsewhere = host_adapter(**{**none, "github": REQUESTED, "pr": NUMBER, "api_url": "http://127.0.0.1:9"}, environ=ENVIRON)
    assert isinstance(elsewhere, GitHubIdentity) and elsewhere.token is None
    named = host_adapter(**{**none, "github": REQUESTED, "pr": NUMBER, "api_url": "http://127.0.0.1:9", "token_env": "ATTEST_TEST_TOKEN"},
                         environ=ENVIRON)
    assert isinstance(named, GitHubIdentity) and named.token == "other-token"


# -- the command ----------------------------------------------------------------------------------------------------


def _command(tmp: Path, *host: str) -> list[str]:
    return ["bootstrap", "--pins", str(tmp / "pins.toml"), "--policy", str(tmp / "trust.toml"), "--state-dir", str(tmp / "state"),
            "--skill", str(tmp / "skill"), "--installation", str(tmp / "att.json"), "--repo", str(tmp / "repo"),
            "--key", str(tmp / "k.pem"), "-o", str(tmp / "h.json"), *host]


CLI_CASES = [
    ("both", ["--identity", "id.json", "--github", REQUESTED, "--pr", "7"], "exactly one host adapter"),
    ("neither", [], "exactly one host adapter"),
    ("github-without-pr", ["--github", REQUESTED], "needs --pr N"),
    ("token-env-unset", ["--github", REQUESTED, "--pr", "7", "--token-env", "ATTEST_TEST_UNSET"], "is unset or empty"),
]


@pytest.mark.parametrize("json_mode", [False, True], ids=["text", "json"])
@pytest.mark.parametrize(("host", "message"), [c[1:] for c in CLI_CASES], ids=[c[0] for c in CLI_CASES])
def test_the_command_refuses_bad_host_options_with_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                          monkeypatch: pytest.MonkeyPatch, host: list[str], message: str,
                                                          json_mode: bool) -> None:
    monkeypatch.delenv("ATTEST_TEST_UNSET", raising=False)
    rc = main(_command(tmp_path, *host, *(["--json"] if json_mode else [])))
    out, err = capsys.readouterr()
    assert rc == 2
    assert "Traceback" not in out + err
    if json_mode:
        doc = json.loads(out)
        assert doc["ok"] is False and [e["code"] for e in doc["errors"]] == ["BAD_HOST_OPTIONS"]
        assert message in doc["errors"][0]["detail"]
    else:
        assert "BAD_HOST_OPTIONS" in err and message in err
    assert not (tmp_path / "state").exists() and not (tmp_path / "h.json").exists()


def test_a_pr_that_is_not_a_number_is_typers_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(_command(tmp_path, "--github", REQUESTED, "--pr", "seven"))
    out, err = capsys.readouterr()
    assert rc == 2 and "--pr" in err and "Traceback" not in out + err


# -- the whole chain ------------------------------------------------------------------------------------------------


def _chain(dep: Any, skill: tuple[Path, Path], c: Any, tmp: Path, host: Any) -> Any:
    return test_bootstrap.bootstrap(pins=dep.pins, trust=dep.trust, state_dir=dep.state, skill_dir=skill[0], installation=skill[1],
                                    repo=c.path, host=host, key=str(dep.key), out=tmp / "handoff.json", backend=BACKEND,
                                    runner=HostCheck(), clock=lambda: T0)


def _consumer_repo(c: Any) -> Repo:
    return Repo(c.path, c.base, c.head, git(c.path, "rev-parse", f"{c.base}^{{tree}}"), "sha1")


def test_step2_an_api_tree_other_than_the_objects_fails_the_chain_at_step_2(
        dep: Any, skill: tuple[Path, Path], tmp_path: Path, api: ReplayServer) -> None:
    c = make_consumer(tmp_path / "consumer", dep.sha)
    r = _consumer_repo(c)
    serve(api, r, change=_set("commit.tree.sha", OTHER_SHA))
    err = fails(2, lambda: _chain(dep, skill, c, tmp_path, adapter(api)))
    assert [f.code for f in err.findings] == ["API_TREE_MISMATCH"] and err.exit_code == 1
    assert not (tmp_path / "handoff.json").exists()
    assert_no_token(json.dumps(err.to_json()))


def test_step2_an_unreachable_api_fails_the_chain_at_step_2(dep: Any, skill: tuple[Path, Path], tmp_path: Path) -> None:
    c = make_consumer(tmp_path / "consumer", dep.sha)
    dead = ReplayServer()
    url = dead.url
    dead.close()
    err = fails(2, lambda: _chain(dep, skill, c, tmp_path, GitHubIdentity(REQUESTED, NUMBER, url, TOKEN)))
    assert [f.code for f in err.findings] == ["HOST_READ_FAILED"] and err.exit_code == 2
    assert_no_token(json.dumps(err.to_json()))


def test_the_command_hands_off_what_the_api_served(dep: Any, skill: tuple[Path, Path], tmp_path: Path, api: ReplayServer,
                                                  capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    import attest.review.bootstrap._chain as chain

    monkeypatch.setattr(chain, "ImageCheckRunner", lambda state: HostCheck())
    monkeypatch.setenv("ATTEST_TEST_TOKEN", TOKEN)
    c = make_consumer(tmp_path / "consumer", dep.sha)
    r = _consumer_repo(c)
    serve(api, r)
    rc = main(["bootstrap", "--pins", str(dep.pins), "--policy", str(dep.trust), "--state-dir", str(dep.state),
               "--skill", str(skill[0]), "--installation", str(skill[1]), "--repo", str(c.path),
               "--github", REQUESTED, "--pr", str(NUMBER), "--api-url", api.url, "--token-env", "ATTEST_TEST_TOKEN",
               "--key", str(dep.key), "-o", str(tmp_path / "h.json"), "--json"])
    out, err = capsys.readouterr()
    assert rc == 0, out + err
    doc = json.loads(out)
    assert doc["repository"] == {"id": REPO_ID, "full_name": CANONICAL} and doc["pull_request"] == {"id": PR_ID, "number": NUMBER}
    assert doc["base"] == {"commit": r.base, "tree": r.tree}
    assert api.targets == [REPO_PATH, PR_PATH, r.commit_path]
    assert all(e.headers["Authorization"] == f"Bearer {TOKEN}" for e in api.log)
    assert_no_token(out, err, (tmp_path / "h.json").read_text())
