"""Self-tests of the stateful fake GitHub (tests/support/fake_github.py) and of its OpenAPI validation.

Real git repositories under tmp_path, real HTTP over loopback: attest's own client
(:class:`~attest.review.evidence.GitHubClient`, :class:`~attest.review.platform.GitHubPlatform`)
where it fits, ``http.client`` where a status or a header is the point. Every fake is made by
``serving``, which fails the test when anything the fake accepted or sent is not GitHub's shape;
a test that provokes a mismatch on purpose takes it with ``take_schema_errors``.
"""

from __future__ import annotations

import http.client
import json
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.fake_github import NODES_QUERY, THREADS_QUERY, FakeGitHub, serving
from support.github_openapi import (
    INTEGRITY,
    OPERATIONS,
    SUBSET_DIR,
    SUBSET_FILE,
    VERSION,
    GitHubOpenAPI,
    check_graphql,
    map_schema,
    pointer_get,
    refs_in,
    to_json_schema,
)
from support.gitrepo import GIT_ENV, git, make_repo

from attest.review.bootstrap import GitHubIdentity
from attest.review.evidence import GitHubClient, HttpLimits
from attest.review.evidence._codes import EvidenceCode
from attest.review.evidence._http import FetchFailed
from attest.review.evidence._model import REVIEW_EDIT_SELECTION, Job, PullRequest, Review, ReviewEdit, Run
from attest.review.platform._api import THREADS_QUERY as ATTEST_THREADS_QUERY
from attest.review.platform._api import GitHubPlatform, NoAnswer

REPO = "octo/widgets"
PR_PATH = f"/repos/{REPO}/pulls/42"
LIMITS = HttpLimits(timeout=5, deadline=10)


# ----------------------------------------------------------------------------- fixtures

@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """main: a.py, b.txt and the review workflow; feature: a.py changed (line 2, a line 4), c.py added, b.txt deleted."""
    path = tmp_path_factory.mktemp("template") / "widgets"
    make_repo(path, {"a.py": b"one\ntwo\nthree\n", "b.txt": b"bee\n", ".github/workflows/opencode-code-review.yml": b"on: push\n"})
    git(path, "branch", "-M", "main")
    git(path, "checkout", "-q", "-b", "feature")
    (path / "a.py").write_bytes(b"one\nTWO\nthree\nfour\n")
    (path / "c.py").write_bytes(b"print('c')\n")
    (path / "b.txt").unlink()
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "frobnicate")
    git(path, "checkout", "-q", "main")
    return path


@pytest.fixture
def repo(template: Path, tmp_path: Path) -> Path:
    """A fresh bare repository of the template's branches, borrowing its objects (``objects/info/alternates``).

    Written by hand, without a subprocess: what tests write (commits, the fake's merges) goes to
    its own objects and refs; the template stays as it was.
    """
    path = tmp_path / "widgets.git"
    for d in ("objects/info", "objects/pack", "refs/heads", "refs/tags"):
        (path / d).mkdir(parents=True)
    (path / "HEAD").write_text("ref: refs/heads/main\n")
    (path / "config").write_text("[core]\n\trepositoryformatversion = 0\n\tbare = true\n")
    (path / "objects/info/alternates").write_text(str(template / ".git" / "objects") + "\n")
    for branch in ("main", "feature"):
        (path / "refs/heads" / branch).write_text((template / ".git/refs/heads" / branch).read_text())
    return path


@pytest.fixture
def gh(repo: Path) -> Iterator[FakeGitHub]:
    with serving(repo) as fake:
        fake.open_pull(42)
        yield fake


def client(fake: FakeGitHub, token: str | None = "ghs_app", **limits: Any) -> GitHubClient:
    return GitHubClient(fake.url, token=token, limits=HttpLimits(**{"timeout": 5, "deadline": 10, **limits}))


def platform(fake: FakeGitHub, token: str | None = "ghs_app") -> GitHubPlatform:
    return GitHubPlatform(client(fake, token), REPO, 42)


def call(fake: FakeGitHub, method: str, path: str, body: Any = None, *, token: str | None = "ghs_app",
         headers: dict[str, str] | None = None) -> tuple[int, http.client.HTTPMessage, Any]:
    """One raw request: (status, headers, parsed JSON body or None)."""
    conn = http.client.HTTPConnection("127.0.0.1", fake.port, timeout=5)
    try:
        h = {"Accept": "application/vnd.github+json", "X-GitHub-Api-Version": "2022-11-28", **(headers or {})}
        if token is not None:
            h["Authorization"] = f"Bearer {token}"
        data = None if body is None else json.dumps(body).encode()
        if data is not None:
            h["Content-Type"] = "application/json"
        conn.request(method, path, body=data, headers=h)
        resp = conn.getresponse()
        raw = resp.read()
        return resp.status, resp.headers, json.loads(raw) if raw else None
    finally:
        conn.close()


def rev(repo: Path, ref: str) -> str:
    return git(repo, "rev-parse", ref)


def commit_on(repo: Path, branch: str, files: dict[str, bytes], message: str = "more") -> str:
    """Commit ``files`` onto ``branch`` with git's plumbing (the repository is bare): the new tip."""
    env = {**GIT_ENV, "GIT_INDEX_FILE": str(repo / f"index-{branch}")}

    def run(*args: str, data: bytes | None = None) -> str:
        return subprocess.run(["git", "-C", str(repo), *args], input=data, env=env, check=True, capture_output=True).stdout.decode().strip()

    run("read-tree", branch)
    for name, data in files.items():
        run("update-index", "--add", "--cacheinfo", f"100644,{run('hash-object', '-w', '--stdin', data=data)},{name}")
    tip = run("commit-tree", run("write-tree"), "-p", branch, data=message.encode())
    run("update-ref", f"refs/heads/{branch}", tip)
    return tip


# ----------------------------------------------------------------------------- repository, pull request, commits, refs

def test_repository_is_found_case_insensitively_and_an_unknown_one_is_404(gh: FakeGitHub) -> None:
    status, _, doc = call(gh, "GET", f"/repos/{REPO}")
    assert status == 200 and (doc["id"], doc["full_name"], doc["default_branch"]) == (1296269, REPO, "main")
    status, _, doc = call(gh, "GET", "/repos/OCTO/Widgets")
    assert status == 200 and doc["full_name"] == REPO  # the API's spelling, whatever was asked
    status, _, doc = call(gh, "GET", "/repos/octo/gadgets")
    assert status == 404 and doc["message"] == "Not Found" and doc["documentation_url"].startswith("https://docs.github.com")


def test_pull_request_reads_base_and_head_live_from_the_branches(gh: FakeGitHub, repo: Path) -> None:
    pr = platform(gh).pull()
    assert (pr.base_sha, pr.head_sha, pr.state, pr.merged) == (rev(repo, "main"), rev(repo, "feature"), "open", False)
    assert (pr.base_ref, pr.head_full_name, pr.base_repository_id) == ("main", REPO, 1296269)
    assert (pr.mergeable, pr.mergeable_state) == (True, "clean")
    # GitHub's test merge is a real commit: parents [base, head], the merge-tree's tree.
    assert git(repo, "rev-parse", f"{pr.merge_commit_sha}^@").split() == [pr.base_sha, pr.head_sha]
    tree = git(repo, "merge-tree", "--write-tree", pr.base_sha, pr.head_sha).split()[0]
    assert git(repo, "rev-parse", f"{pr.merge_commit_sha}^{{tree}}") == tree
    _, _, doc = call(gh, "GET", PR_PATH)
    assert (doc["commits"], doc["additions"], doc["deletions"], doc["changed_files"]) == (1, 3, 2, 3)
    assert PullRequest.from_json(doc).base_repo == REPO
    new_head = commit_on(repo, "feature", {"d.py": b"d\n"})
    new_base = commit_on(repo, "main", {"e.txt": b"e\n"})
    pr2 = platform(gh).pull()
    assert (pr2.head_sha, pr2.base_sha) == (new_head, new_base)
    assert pr2.merge_commit_sha != pr.merge_commit_sha


def test_a_fork_head_and_a_deleted_fork(gh: FakeGitHub) -> None:
    gh.open_pull(7, head_full_name="fork/widgets")
    _, _, doc = call(gh, "GET", f"/repos/{REPO}/pulls/7")
    assert doc["head"]["repo"]["full_name"] == "fork/widgets" and doc["head"]["repo"]["fork"] is True
    assert doc["head"]["repo"]["id"] != doc["base"]["repo"]["id"] and doc["head"]["label"] == "fork:feature"
    gh.pulls[7].head_repo_deleted = True
    _, _, doc = call(gh, "GET", f"/repos/{REPO}/pulls/7")
    assert doc["head"]["repo"] is None and PullRequest.from_json(doc).head_repo is None
    assert call(gh, "GET", f"/repos/{REPO}/pulls/8")[0] == 404


def test_deleting_the_head_branch_closes_the_pull_request(gh: FakeGitHub, repo: Path) -> None:
    head = rev(repo, "feature")
    git(repo, "update-ref", "-d", "refs/heads/feature")
    pr = platform(gh).pull()
    assert (pr.state, pr.merged, pr.head_sha) == ("closed", False, head)
    assert platform(gh).merge(head, "merge")[0] == 405


def test_commit_is_read_from_the_repository(gh: FakeGitHub, repo: Path) -> None:
    head = rev(repo, "feature")
    got = platform(gh).commit(head)
    assert (got.tree, got.parents) == (rev(repo, "feature^{tree}"), (rev(repo, "main"),))
    _, _, doc = call(gh, "GET", f"/repos/{REPO}/git/commits/{head}")
    assert doc["message"] == "frobnicate" and doc["author"] == {"name": "t", "email": "t@example.org", "date": "2020-01-01T00:00:00Z"}
    assert doc["verification"]["verified"] is False and doc["parents"][0]["html_url"].endswith(rev(repo, "main"))
    assert call(gh, "GET", f"/repos/{REPO}/git/commits/{'0' * 40}")[0] == 404
    assert call(gh, "GET", f"/repos/{REPO}/git/commits/{rev(repo, 'feature^{tree}')}")[0] == 404  # a tree is not a commit
    assert call(gh, "GET", f"/repos/{REPO}/git/commits/xyz")[0] == 422


def test_ref(gh: FakeGitHub, repo: Path) -> None:
    status, _, doc = call(gh, "GET", f"/repos/{REPO}/git/ref/heads/feature")
    assert status == 200 and doc["ref"] == "refs/heads/feature"
    assert doc["object"] == {"sha": rev(repo, "feature"), "type": "commit", "url": f"{gh.url}/repos/{REPO}/git/commits/{rev(repo, 'feature')}"}
    assert call(gh, "GET", f"/repos/{REPO}/git/ref/heads/nope")[0] == 404


def test_bootstrap_identity_reads_the_fake(gh: FakeGitHub, repo: Path) -> None:
    ident = GitHubIdentity(REPO, 42, gh.url, "ghs_app", LIMITS).resolve()
    assert (ident.repository_id, ident.full_name, ident.number) == (1296269, REPO, 42)
    assert (ident.base_sha, ident.head_sha, ident.api_base_tree) == (rev(repo, "main"), rev(repo, "feature"), rev(repo, "main^{tree}"))
    assert gh.targets == [f"/repos/{REPO}", PR_PATH, f"/repos/{REPO}/git/commits/{rev(repo, 'main')}"]
    assert all(e.headers["Authorization"] == "Bearer ghs_app" for e in gh.log)


# ----------------------------------------------------------------------------- reviews

def test_create_review_answers_200_and_is_listed_read_and_threaded(gh: FakeGitHub, repo: Path) -> None:
    payload = {"event": "COMMENT", "body": "two findings", "comments": [
        {"path": "a.py", "line": 2, "side": "RIGHT", "body": "why upper case?"},
        {"path": "b.txt", "line": 1, "side": "LEFT", "body": "deleted?"},
        {"path": "a.py", "start_line": 1, "line": 4, "body": "a range"}]}
    status, _, doc = call(gh, "POST", f"{PR_PATH}/reviews", payload)
    assert status == 200  # GitHub answers 200 here, not 201
    assert (doc["state"], doc["user"]["login"], doc["commit_id"], doc["body"]) == ("COMMENTED", "attest-review[bot]",
                                                                                   rev(repo, "feature"), "two findings")
    assert doc["node_id"].startswith("PRR_kwDO") and doc["id"] > 0 and doc["user"]["type"] == "Bot"
    gp = platform(gh)
    assert gp.review(doc["id"]).body == "two findings"
    approved = platform(gh, "ghs_admin").create_review({"event": "APPROVE"})
    assert (approved.state, approved.login, approved.body) == ("APPROVED", "octocat", "")
    assert [(r.id, r.state) for r in gp.reviews()] == [(doc["id"], "COMMENTED"), (approved.id, "APPROVED")]
    assert Review.from_json(doc).node_id == doc["node_id"]
    threads = gp.threads()
    assert [(t.path, t.line, t.resolved, t.outdated, t.author) for t in threads] == [
        ("a.py", 2, False, False, "attest-review"), ("b.txt", 1, False, False, "attest-review"),
        ("a.py", 4, False, False, "attest-review")]  # GraphQL names a bot by its slug
    assert call(gh, "GET", f"{PR_PATH}/reviews/999")[0] == 404


def test_a_pending_review_is_its_authors_alone(gh: FakeGitHub) -> None:
    pending = platform(gh, "ghs_admin").create_review({"body": "draft"})
    assert pending.state == "PENDING"
    assert [r.id for r in platform(gh, "ghs_admin").reviews()] == [pending.id]
    assert platform(gh).reviews() == ()
    status, _, doc = call(gh, "POST", f"{PR_PATH}/reviews", {}, token="ghs_admin")
    assert status == 422 and doc["errors"] == ["User can only have one pending review per pull request"]


def test_commit_id_is_any_head_the_pull_request_had(gh: FakeGitHub, repo: Path) -> None:
    old = rev(repo, "feature")
    commit_on(repo, "feature", {"d.py": b"d\n"})
    assert platform(gh).create_review({"commit_id": old, "event": "COMMENT", "body": "on the old head"}).commit_id == old
    status, _, doc = call(gh, "POST", f"{PR_PATH}/reviews", {"commit_id": "1" * 40, "event": "COMMENT", "body": "x"})
    assert status == 422 and "No commit found" in doc["errors"][0]


@pytest.mark.parametrize(("payload", "error"), [
    ({"event": "COMMENT", "body": "x", "comments": [{"path": "zzz.py", "line": 1, "body": "b"}]}, "Path could not be resolved"),
    ({"event": "COMMENT", "body": "x", "comments": [{"path": "a.py", "line": 5, "body": "b"}]}, "Line could not be resolved"),
    ({"event": "COMMENT", "body": "x", "comments": [{"path": "c.py", "line": 1, "side": "LEFT", "body": "b"}]},
     "Line could not be resolved"),  # an added file has no LEFT side
    ({"event": "COMMENT", "body": "x", "comments": [{"path": "b.txt", "line": 1, "body": "b"}]},
     "Line could not be resolved"),  # a deleted file has no RIGHT side
    ({"event": "COMMENT", "body": "x", "comments": [{"path": "a.py", "start_line": 3, "line": 2, "body": "b"}]},
     "start_line must precede line"),
    ({"event": "REQUEST_CHANGES"}, "Body is required when using REQUEST_CHANGES"),
    ({"event": "COMMENT", "body": ""}, "Body is required when using COMMENT"),
    ({"event": "COMMENT", "body": "x" * 65537}, "Body is too long (maximum is 65536 characters)"),
])
def test_create_review_422(gh: FakeGitHub, payload: dict[str, Any], error: str) -> None:
    status, _, doc = call(gh, "POST", f"{PR_PATH}/reviews", payload)
    assert status == 422 and doc["message"] == "Unprocessable Entity"
    assert any(error in e for e in doc["errors"]), doc["errors"]
    assert platform(gh).reviews() == ()


def test_hunk_lines_is_githubs_stricter_rule(repo: Path) -> None:
    path = repo.parent / "long"  # a repository with a work tree, this time
    make_repo(path, {"a.py": b"".join(b"%d\n" % i for i in range(1, 21))})
    git(path, "branch", "-M", "main")
    git(path, "checkout", "-q", "-b", "feature")
    (path / "a.py").write_bytes(b"".join(b"%d\n" % i for i in range(1, 20)) + b"TWENTY\n")
    git(path, "commit", "-qam", "end")
    with serving(path, hunk_lines=True) as fake:
        fake.open_pull(42)
        far = call(fake, "POST", f"{PR_PATH}/reviews", {"event": "COMMENT", "body": "x", "comments": [{"path": "a.py", "line": 2, "body": "b"}]})
        near = call(fake, "POST", f"{PR_PATH}/reviews", {"event": "COMMENT", "body": "x", "comments": [{"path": "a.py", "line": 18, "body": "b"}]})
    assert far[0] == 422 and far[2]["errors"] == ["comments[0]: Pull request review thread line must be part of the diff"]
    assert near[0] == 200


def test_a_body_that_is_not_githubs_shape_is_422_and_recorded(gh: FakeGitHub) -> None:
    status, _, doc = call(gh, "POST", f"{PR_PATH}/reviews", {"event": "LGTM", "body": "x"})
    assert status == 422 and doc["message"].startswith("Invalid request.")
    errors = gh.take_schema_errors()
    assert len(errors) == 1 and "request POST" in errors[0] and "'LGTM' is not one of" in errors[0]
    # An unknown field: GitHub ignores it (the review is made), the strict check records it.
    assert call(gh, "POST", f"{PR_PATH}/reviews", {"event": "COMMENT", "body": "x", "colour": "red"})[0] == 200
    assert ["colour" in e for e in gh.take_schema_errors()] == [True]


def test_reviews_are_paginated(repo: Path) -> None:
    with serving(repo, page_size=2) as fake:
        fake.open_pull(42)
        ids = [fake.add_review(42, login=f"user{i}", body=f"r{i}") for i in range(5)]
        assert [r.id for r in platform(fake).reviews()] == ids
        assert fake.targets == [f"{PR_PATH}/reviews?per_page=100", f"{PR_PATH}/reviews?per_page=100&page=2",
                                f"{PR_PATH}/reviews?per_page=100&page=3"]
        _, headers, page = call(fake, "GET", f"{PR_PATH}/reviews?per_page=100&page=2")
        assert [r["id"] for r in page] == ids[2:4]
        link = headers["Link"]
        assert f'<{fake.url}{PR_PATH}/reviews?per_page=100&page=3>; rel="next"' in link and 'rel="last"' in link
        assert 'rel="prev"' in link and 'rel="first"' in link
        _, headers, page = call(fake, "GET", f"{PR_PATH}/reviews?per_page=100&page=3")
        assert len(page) == 1 and 'rel="next"' not in headers["Link"]


def test_issue_comments_are_paginated(repo: Path) -> None:
    with serving(repo, page_size=2) as fake:
        fake.open_pull(42)
        ids = [fake.add_issue_comment(42, f"c{i}", "alice") for i in range(3)]
        got = client(fake).get_list(f"/repos/{REPO}/issues/42/comments?per_page=100", None, lambda c: (c["id"], c["body"], c["user"]["login"]))
        assert got == tuple((i, f"c{n}", "alice") for n, i in enumerate(ids))
        assert call(fake, "GET", f"/repos/{REPO}/pulls/42")[2]["comments"] == 3


# ----------------------------------------------------------------------------- tokens

def test_writes_and_graphql_need_a_token_and_a_bad_one_is_refused(gh: FakeGitHub, repo: Path) -> None:
    head = rev(repo, "feature")
    for method, path, body in (("POST", f"{PR_PATH}/reviews", {"event": "COMMENT", "body": "x"}),
                               ("POST", f"/repos/{REPO}/statuses/{head}", {"state": "success"}),
                               ("PUT", f"{PR_PATH}/merge", {"sha": head})):
        status, _, doc = call(gh, method, path, body, token=None)
        assert (status, doc["message"]) == (401, "Requires authentication"), path
    status, _, doc = call(gh, "POST", "/graphql", {"query": THREADS_QUERY, "variables": {}}, token=None)
    assert status == 401
    assert call(gh, "GET", PR_PATH, token=None)[0] == 200  # reads of a public repository need none
    status, _, doc = call(gh, "GET", PR_PATH, token="ghs_stolen")
    assert (status, doc["message"]) == (401, "Bad credentials")
    assert platform(gh).reviews() == () and not platform(gh).pull().merged


# ----------------------------------------------------------------------------- statuses

def test_statuses_create_list_and_combine(gh: FakeGitHub, repo: Path) -> None:
    head = rev(repo, "feature")
    gp = platform(gh)
    first = gp.post_status(head, state="pending", description="wait", context="attest/merge-gate", target_url=None)
    second = gp.post_status(head, state="success", description="ok", context="attest/merge-gate", target_url="https://example.org/r")
    gp.post_status(head, state="failure", description="no", context="ci/other", target_url=None)
    assert (first.state, second.state, second.context) == ("pending", "success", "attest/merge-gate") and second.id > first.id
    status, _, doc = call(gh, "POST", f"/repos/{REPO}/statuses/{head}", {"state": "error"})
    assert status == 201 and doc["context"] == "default" and doc["creator"]["login"] == "attest-review[bot]"
    listed = client(gh).get_list(f"/repos/{REPO}/commits/feature/statuses", None, lambda s: (s["context"], s["state"]))
    assert listed == (("default", "error"), ("ci/other", "failure"), ("attest/merge-gate", "success"), ("attest/merge-gate", "pending"))
    _, _, combined = call(gh, "GET", f"/repos/{REPO}/commits/{head}/status")
    assert combined["state"] == "failure" and combined["total_count"] == 3 and combined["sha"] == head
    assert {s["context"]: s["state"] for s in combined["statuses"]} == {"attest/merge-gate": "success", "ci/other": "failure",
                                                                        "default": "error"}
    _, _, empty = call(gh, "GET", f"/repos/{REPO}/commits/main/status")
    assert (empty["state"], empty["total_count"]) == ("pending", 0)
    assert call(gh, "GET", f"/repos/{REPO}/commits/nope/status")[0] == 404


def test_status_422(gh: FakeGitHub, repo: Path) -> None:
    status, _, doc = call(gh, "POST", f"/repos/{REPO}/statuses/{'2' * 40}", {"state": "success"})
    assert status == 422 and "No commit found" in doc["message"]
    status, _, _ = call(gh, "POST", f"/repos/{REPO}/statuses/{rev(repo, 'feature')}", {"state": "green"})
    assert status == 422
    assert any("'green' is not one of" in e for e in gh.take_schema_errors())
    status, _, doc = call(gh, "POST", f"/repos/{REPO}/statuses/{rev(repo, 'feature')}", {"state": "success", "description": "d" * 141})
    assert status == 422 and doc["errors"][0]["field"] == "description"


# ----------------------------------------------------------------------------- merge

def test_a_real_merge(gh: FakeGitHub, repo: Path) -> None:
    base, head = rev(repo, "main"), rev(repo, "feature")
    trial = platform(gh).pull().merge_commit_sha
    status, answer = platform(gh).merge(head, "merge")
    assert status == 200 and answer["merged"] is True and answer["message"] == "Pull Request successfully merged"
    sha = answer["sha"]
    assert rev(repo, "main") == sha  # the base branch moved, for real
    assert git(repo, "rev-parse", f"{sha}^@").split() == [base, head]
    assert rev(repo, f"{sha}^{{tree}}") == rev(repo, f"{trial}^{{tree}}")
    # Authored by whoever merged (the token's login), committed by GitHub.
    assert git(repo, "log", "-1", "--format=%s%n%an%n%cn", sha).split("\n") == ["Merge pull request #42 from octo/feature",
                                                                                 "attest-review[bot]", "GitHub"]
    after = platform(gh).pull()
    assert (after.state, after.merged, after.merge_commit_sha, after.base_sha, after.head_sha) == ("closed", True, sha, base, head)
    assert platform(gh).commit(sha).parents == (base, head)
    status, again = platform(gh).merge(head, "merge")  # merged already
    assert (status, again["message"]) == (405, "Pull Request is not mergeable")


def test_a_real_squash(gh: FakeGitHub, repo: Path) -> None:
    base, head = rev(repo, "main"), rev(repo, "feature")
    status, answer = call(gh, "PUT", f"{PR_PATH}/merge", {"sha": head, "merge_method": "squash", "commit_title": "Squashed"})[::2]
    assert status == 200
    sha = answer["sha"]
    assert git(repo, "rev-parse", f"{sha}^@").split() == [base]
    assert rev(repo, f"{sha}^{{tree}}") == rev(repo, "feature^{tree}")  # nothing else on main: the head's tree
    assert git(repo, "log", "-1", "--format=%s%n%b%n%an", sha).split("\n") == ["Squashed", "* frobnicate", "", "alice"]


def test_merge_with_a_stale_sha_is_409_and_merges_nothing(gh: FakeGitHub, repo: Path) -> None:
    old = rev(repo, "feature")
    commit_on(repo, "feature", {"d.py": b"d\n"})
    status, answer = platform(gh).merge(old, "merge")
    assert (status, answer["message"]) == (409, "Head branch was modified. Review and try the merge again.")
    assert rev(repo, "main") == rev(repo, "feature~2") and not platform(gh).pull().merged


def test_a_conflict_is_dirty_and_405(gh: FakeGitHub, repo: Path) -> None:
    commit_on(repo, "main", {"a.py": b"one\ndeux\nthree\n"})
    pr = platform(gh).pull()
    assert (pr.mergeable, pr.mergeable_state, pr.merge_commit_sha) == (False, "dirty", None)
    before = rev(repo, "main")
    status, answer = platform(gh).merge(pr.head_sha, "merge")
    assert (status, answer["message"]) == (405, "Pull Request is not mergeable") and rev(repo, "main") == before


def test_rebase_is_refused_and_a_bad_method_is_422(gh: FakeGitHub, repo: Path) -> None:
    head = rev(repo, "feature")
    status, answer = platform(gh).merge(head, "rebase")
    assert (status, answer["message"]) == (405, "Rebase merges are not allowed on this repository")
    status, answer = platform(gh).merge(head, "fast-forward")
    assert status == 422 and "'fast-forward' is not one of" in answer["message"]
    assert len(gh.take_schema_errors()) == 1
    assert call(gh, "PUT", f"{PR_PATH}/merge", {"sha": head, "merge_method": "merge"}, token="ghs_admin")[0] == 200


def test_a_required_status_blocks_the_merge_until_success(repo: Path) -> None:
    with serving(repo, required_status="attest/merge-gate") as fake:
        fake.open_pull(42)
        head = rev(repo, "feature")
        assert platform(fake).pull().mergeable_state == "blocked"
        status, answer = platform(fake).merge(head, "merge")
        assert (status, answer["message"]) == (405, 'Required status check "attest/merge-gate" is expected.')
        platform(fake).post_status(head, state="failure", description="no", context="attest/merge-gate", target_url=None)
        assert platform(fake).merge(head, "merge")[0] == 405
        platform(fake).post_status(head, state="success", description="ok", context="attest/merge-gate", target_url=None)
        assert platform(fake).pull().mergeable_state == "clean"
        assert platform(fake).merge(head, "merge")[0] == 200


def test_mergeable_null_while_github_computes(gh: FakeGitHub) -> None:
    gh.pulls[42].mergeable_override = [None, None, True]
    reads = [platform(gh).pull() for _ in range(4)]
    assert [(p.mergeable, p.mergeable_state) for p in reads] == [(None, "unknown"), (None, "unknown"), (True, "clean"), (True, "clean")]
    assert reads[0].merge_commit_sha is None and reads[2].merge_commit_sha is not None
    gh.pulls[42].mergeable_override = [None]
    assert platform(gh).pull().merge_commit_sha == reads[2].merge_commit_sha  # the last test merge, possibly stale


# ----------------------------------------------------------------------------- environments, Actions

def test_environment(gh: FakeGitHub) -> None:
    assert call(gh, "GET", f"/repos/{REPO}/environments/review")[0] == 404
    gh.set_environment("review", {"deployment_branch_policy": {"protected_branches": True, "custom_branch_policies": False},
                                  "protection_rules": [{"id": 3, "node_id": "GA_kwDOAA", "type": "branch_policy"}]})
    status, _, doc = call(gh, "GET", f"/repos/{REPO}/environments/Review")
    assert status == 200 and doc["name"] == "review" and doc["deployment_branch_policy"]["protected_branches"] is True
    gh.set_environment("review", None)
    assert call(gh, "GET", f"/repos/{REPO}/environments/review")[0] == 404


def test_actions_runs_and_jobs(gh: FakeGitHub, repo: Path) -> None:
    head = rev(repo, "feature")
    old = gh.add_run(event="pull_request", pull_requests=[42])
    run_id = gh.add_run(pull_requests=[42], run_attempt=2, display_title=f"OpenCode review PR #42 head {head}")
    gh.add_job(run_id, "opencode-review-same-repo")
    gh.add_job(run_id, "opencode-review-fork", conclusion="skipped")
    gh.add_job(run_id, "opencode-review-same-repo", attempt=1, conclusion="failure")
    c = client(gh)
    runs = c.get_list(f"/repos/{REPO}/actions/workflows/opencode-code-review.yml/runs?event=pull_request_target&per_page=100",
                      "workflow_runs", Run.from_json)
    assert [(r.id, r.run_attempt, r.event, r.path) for r in runs] == [(run_id, 2, "pull_request_target",
                                                                       ".github/workflows/opencode-code-review.yml")]
    assert runs[0].pull_requests[0].number == 42 and runs[0].pull_requests[0].head_sha == head
    everything = c.get_list(f"/repos/{REPO}/actions/workflows/opencode-code-review.yml/runs?per_page=100", "workflow_runs",
                            lambda r: r["id"])
    assert everything == (run_id, old)  # newest first
    jobs = c.get_list(f"/repos/{REPO}/actions/runs/{run_id}/attempts/2/jobs?per_page=100", "jobs", Job.from_json)
    assert [(j.name, j.run_attempt, j.conclusion) for j in jobs] == [("opencode-review-same-repo", 2, "success"),
                                                                      ("opencode-review-fork", 2, "skipped")]
    assert [j.conclusion for j in c.get_list(f"/repos/{REPO}/actions/runs/{run_id}/attempts/1/jobs", "jobs", Job.from_json)] == ["failure"]
    assert call(gh, "GET", f"/repos/{REPO}/actions/runs/{run_id}/attempts/3/jobs")[0] == 404
    assert call(gh, "GET", f"/repos/{REPO}/actions/runs/1/attempts/1/jobs")[0] == 404
    assert call(gh, "GET", f"/repos/{REPO}/actions/workflows/nope.yml/runs")[0] == 404
    _, _, doc = call(gh, "GET", f"/repos/{REPO}/actions/workflows/opencode-code-review.yml/runs?status=skipped")
    assert doc == {"total_count": 0, "workflow_runs": []}


# ----------------------------------------------------------------------------- GraphQL

def test_graphql_review_nodes_and_edits(gh: FakeGitHub) -> None:
    review = platform(gh).create_review({"event": "COMMENT", "body": "clean"})
    node_id = call(gh, "GET", f"{PR_PATH}/reviews/{review.id}")[2]["node_id"]
    (edit,) = client(gh).get_nodes([node_id], REVIEW_EDIT_SELECTION, ReviewEdit.from_json)
    assert (edit.id, edit.edited, edit.editor) == (review.id, False, None)
    gh.edit_review(review.id, "findings, now clean", login="attest-review[bot]")
    (edit,) = client(gh).get_nodes([node_id], REVIEW_EDIT_SELECTION, ReviewEdit.from_json)
    assert (edit.edited, edit.editor, edit.includes_created_edit) == (True, "attest-review", True)
    assert platform(gh).review(review.id).body == "findings, now clean"  # REST shows the new body, and no marker
    status, _, doc = call(gh, "POST", "/graphql", {"query": NODES_QUERY, "variables": {"ids": [node_id, "PRR_nope"]}})
    assert status == 200 and doc["data"]["nodes"][1] is None
    assert doc["errors"] == [{"type": "NOT_FOUND", "path": ["nodes", 1], "locations": [{"line": 1, "column": 23}],
                              "message": "Could not resolve to a node with the global id of 'PRR_nope'."}]
    with pytest.raises(FetchFailed) as e:
        client(gh).get_nodes([node_id, "PRR_nope"], REVIEW_EDIT_SELECTION, ReviewEdit.from_json)
    assert e.value.code is EvidenceCode.GRAPHQL_ERROR


def test_graphql_threads_paginate_resolve_and_outdate(repo: Path) -> None:
    assert THREADS_QUERY == ATTEST_THREADS_QUERY  # attest sends it verbatim
    with serving(repo, page_size=2) as fake:
        fake.open_pull(42)
        ids = [fake.add_thread(42, "a.py", line, login="alice") for line in (1, 2, 3)] + [fake.add_thread(42, "c.py", 1, login="bob")]
        fake.resolve_thread(ids[1])
        threads = platform(fake).threads()
        assert [(t.id, t.resolved, t.path, t.line, t.author) for t in threads] == [
            (ids[0], False, "a.py", 1, "alice"), (ids[1], True, "a.py", 2, "alice"), (ids[2], False, "a.py", 3, "alice"),
            (ids[3], False, "c.py", 1, "bob")]
        assert [json.loads(e.body)["variables"]["cursor"] is None for e in fake.log] == [True, False]
        commit_on(repo, "feature", {"a.py": b"ONE\nTWO\nthree\nfour\n"})
        after = {t.id: t for t in platform(fake).threads()}
        assert (after[ids[0]].outdated, after[ids[0]].line) == (True, None)  # its file changed since
        assert (after[ids[3]].outdated, after[ids[3]].line) == (False, 1)


def test_graphql_answers_anything_else_with_errors_and_http_200(gh: FakeGitHub) -> None:
    status, _, doc = call(gh, "POST", "/graphql", {"query": "{ viewer { login } }"})
    assert status == 200 and set(doc) == {"errors"} and doc["errors"][0]["message"]
    variables = {"owner": "octo", "name": "gadgets", "number": 42, "cursor": None}
    status, _, doc = call(gh, "POST", "/graphql", {"query": THREADS_QUERY, "variables": variables})
    assert status == 200 and doc["data"] == {"repository": None} and doc["errors"][0]["type"] == "NOT_FOUND"
    status, _, doc = call(gh, "POST", "/graphql", {"query": THREADS_QUERY, "variables": {**variables, "name": "widgets", "cursor": "bad"}})
    assert status == 200 and "valid cursor" in doc["errors"][0]["message"]


def test_anything_not_implemented_is_404(gh: FakeGitHub) -> None:
    for method, path in (("GET", "/user"), ("GET", f"/repos/{REPO}/pulls"), ("DELETE", f"{PR_PATH}/reviews/1"), ("PATCH", PR_PATH)):
        status, _, doc = call(gh, method, path, {} if method == "PATCH" else None)
        assert (status, doc["message"]) == (404, "Not Found"), path


# ----------------------------------------------------------------------------- faults

def test_lose_answer_after_the_review_is_created(gh: FakeGitHub) -> None:
    fault = gh.fault("POST", r"/pulls/42/reviews$", "lose_answer")
    with pytest.raises(NoAnswer):
        platform(gh).create_review({"event": "COMMENT", "body": "posted"})
    assert [r.body for r in platform(gh).reviews()] == ["posted"] and fault.hits == 1
    assert platform(gh).create_review({"event": "COMMENT", "body": "again"}).body == "again"  # times=1: spent


def test_lose_answer_after_the_merge_is_done(gh: FakeGitHub, repo: Path) -> None:
    gh.fault("PUT", r"/merge$", "lose_answer")
    with pytest.raises(NoAnswer):
        platform(gh).merge(rev(repo, "feature"), "merge")
    pr = platform(gh).pull()
    assert pr.merged and rev(repo, "main") == pr.merge_commit_sha


def test_status_fault_and_process(gh: FakeGitHub) -> None:
    gh.fault("GET", r"/pulls/42$", "status", status=503, body={"message": "Service Unavailable"}, times=2)
    for _ in range(2):
        with pytest.raises(FetchFailed) as e:
            client(gh).get_object(PR_PATH, PullRequest.from_json)
        assert e.value.code is EvidenceCode.HTTP_STATUS and "503: Service Unavailable" in e.value.detail
    assert client(gh).get_object(PR_PATH, PullRequest.from_json).number == 42
    gh.fault("POST", r"/reviews$", "status", status=502, process=True)
    assert call(gh, "POST", f"{PR_PATH}/reviews", {"event": "COMMENT", "body": "made"})[0] == 502
    assert [r.body for r in platform(gh).reviews()] == ["made"]


def test_redirect_is_not_followed(gh: FakeGitHub) -> None:
    gh.fault("GET", r"/pulls/42$", "redirect", status=307, location="https://evil.example/repos/octo/widgets/pulls/42")
    status, headers, _ = call(gh, "GET", PR_PATH)
    assert status == 307 and headers["Location"] == "https://evil.example/repos/octo/widgets/pulls/42"
    gh.fault("GET", r"/pulls/42$", "redirect", location="https://evil.example/")
    with pytest.raises(FetchFailed) as e:
        client(gh).get_object(PR_PATH, PullRequest.from_json)
    assert e.value.code is EvidenceCode.HTTP_STATUS and "HTTP 301" in e.value.detail
    assert gh.targets == [PR_PATH, PR_PATH]  # the client asked once, and never the Location


@pytest.mark.parametrize("chunked", [False, True])
def test_huge_answer(gh: FakeGitHub, chunked: bool) -> None:
    gh.fault("GET", r"/pulls/42$", "huge", size=200_000, chunked=chunked)
    with pytest.raises(FetchFailed) as e:
        client(gh, max_page_bytes=100_000).get_object(PR_PATH, PullRequest.from_json)
    assert e.value.code is EvidenceCode.RESPONSE_TOO_LARGE
    gh.fault("GET", r"/pulls/42$", "huge", size=5000)
    assert len(json.dumps(call(gh, "GET", PR_PATH)[2], separators=(",", ":"))) == 5000


def test_rewrite_edits_what_the_fake_was_about_to_send(gh: FakeGitHub, repo: Path) -> None:
    gh.fault("POST", r"/reviews$", "rewrite", fn=lambda doc: {**doc, "commit_id": "f" * 40})
    assert platform(gh).create_review({"event": "COMMENT", "body": "x"}).commit_id == "f" * 40
    assert [r.commit_id for r in platform(gh).reviews()] == [rev(repo, "feature")]  # the fake holds the truth

    def other_sha(doc: dict[str, Any]) -> None:
        doc["sha"] = "e" * 40

    gh.fault("PUT", r"/merge$", "rewrite", fn=other_sha)
    status, answer = platform(gh).merge(rev(repo, "feature"), "merge")
    assert (status, answer["sha"]) == (200, "e" * 40) and platform(gh).pull().merge_commit_sha == rev(repo, "main")
    gh.fault("GET", r"/pulls/42$", "rewrite", fn=lambda doc: {**doc, "merged": "yes"})
    call(gh, "GET", PR_PATH)
    assert gh.schema_errors == []  # a fault's answer is hostile on purpose: not checked


def test_hold_blocks_until_released(gh: FakeGitHub) -> None:
    fault = gh.fault("GET", r"/pulls/42$", "hold")
    with pytest.raises(FetchFailed) as e:
        client(gh, timeout=0.3, deadline=0.5).get_object(PR_PATH, PullRequest.from_json)
    assert e.value.code is EvidenceCode.HTTP_ERROR and fault.entered.is_set()
    fault.release()
    after = gh.fault("POST", r"/reviews$", "hold", when="after")
    done: list[Any] = []
    t = threading.Thread(target=lambda: done.append(call(gh, "POST", f"{PR_PATH}/reviews", {"event": "COMMENT", "body": "x"})[0]))
    t.start()
    assert after.entered.wait(5)
    assert [r.body for r in platform(gh).reviews()] == ["x"] and done == []  # made, not yet answered
    after.release()
    t.join(5)
    assert done == [200]


def test_faults_count_down_and_match_method_and_path(gh: FakeGitHub) -> None:
    always = gh.fault("*", r"/repos/octo/widgets$", "status", status=500, times=None)
    for _ in range(3):
        assert call(gh, "GET", f"/repos/{REPO}")[0] == 500
    assert always.hits == 3 and call(gh, "GET", PR_PATH)[0] == 200
    gh.clear_faults()
    assert call(gh, "GET", f"/repos/{REPO}")[0] == 200
    with pytest.raises(ValueError, match="unknown fault kind"):
        gh.fault("GET", "x", "explode")
    with pytest.raises(ValueError, match="location"):
        gh.fault("GET", "x", "redirect")


# ----------------------------------------------------------------------------- the validator itself

def test_the_validator_catches_a_wrong_answer_of_the_fake(gh: FakeGitHub) -> None:
    gh.add_run(run_number="seven", surprise=True)  # the fake now holds a run that is not GitHub's shape
    call(gh, "GET", f"/repos/{REPO}/actions/workflows/opencode-code-review.yml/runs")
    errors = gh.take_schema_errors()
    assert any("run_number: 'seven' is not of type 'integer'" in e for e in errors), errors
    assert any("'surprise' was unexpected" in e for e in errors), errors
    assert all("actions/list-workflow-runs" in e for e in errors)
    with pytest.raises(AssertionError, match="not GitHub's shapes"):
        gh.schema_errors.append("x")
        gh.assert_schema_clean()
    gh.take_schema_errors()


def test_the_validator_reads_openapi_30_idioms() -> None:
    api = GitHubOpenAPI.vendored()
    ok = {"sha": "a" * 40, "merged": True, "message": "Pull Request successfully merged"}
    assert api.check_response("pulls/merge", 200, ok) == []
    assert api.check_response("pulls/merge", 200, {**ok, "merged": None}) == ["$.merged: None is not of type 'boolean'"]
    assert api.check_response("pulls/merge", 201, ok)[0].startswith("status 201 is not a documented answer of pulls/merge")
    assert api.check_response("pulls/merge", 401, {"anything": 1}) == []  # no schema for it: unchecked
    assert api.check_request("pulls/merge", None) == []  # the merge body is `nullable: true`
    nullable = map_schema({"type": "object", "properties": {
        "nullable": {"type": "string", "nullable": True},  # a property named like the keyword
        "c": {"type": "string", "nullable": True, "enum": ["success", "failure"]},
        "r": {"nullable": True, "allOf": [{"type": "integer"}]}}}, to_json_schema)
    assert nullable["properties"]["nullable"] == {"type": ["string", "null"]}
    assert nullable["properties"]["c"]["enum"] == ["success", "failure", None]
    assert nullable["properties"]["r"] == {"anyOf": [{"allOf": [{"type": "integer"}]}, {"type": "null"}]}
    assert to_json_schema({"$ref": "#/x", "description": "ignored", "nullable": True}) == {"$ref": "#/x"}
    assert to_json_schema({"type": "integer", "minimum": 1, "exclusiveMinimum": True}) == {"type": "integer", "exclusiveMinimum": 1}
    # A job's conclusion is a nullable enum; a date-time format is asserted.
    job_errors = api.check_response("actions/list-jobs-for-workflow-run-attempt", 200, {"total_count": 0, "jobs": [{"conclusion": None}]})
    assert not any("conclusion" in e for e in job_errors) and job_errors
    review = {"id": 1, "node_id": "PRR_x", "user": None, "body": "", "state": "COMMENTED", "html_url": "https://github.com/x",
              "pull_request_url": "https://api.github.com/x", "_links": {"html": {"href": "h"}, "pull_request": {"href": "p"}},
              "commit_id": None, "author_association": "NONE", "submitted_at": "yesterday"}
    assert api.check_response("pulls/get-review", 200, review) == ["$.submitted_at: 'yesterday' is not a 'date-time'"]


def test_graphql_shapes_are_checked_by_hand() -> None:
    good = {"data": {"nodes": [{"__typename": "PullRequestReview", "id": "PRR_1", "fullDatabaseId": "1", "lastEditedAt": None,
                                "editor": None, "includesCreatedEdit": False}]}}
    assert check_graphql("nodes", good, ids=["PRR_1"]) == []
    assert check_graphql("nodes", good, ids=["PRR_2"]) == ["$.data.nodes[0]: the node of 'PRR_1', asked 'PRR_2'"]
    assert check_graphql("nodes", {"data": {"nodes": [None]}}, ids=["PRR_1"]) == ["$.data.nodes[0]: null without a NOT_FOUND error"]
    bad = {"data": {"nodes": [{**good["data"]["nodes"][0], "fullDatabaseId": 1}]}}
    assert check_graphql("nodes", bad, ids=["PRR_1"])
    thread = {"id": "T", "isResolved": False, "isOutdated": False, "path": "a", "line": 0, "comments": {"nodes": []}}
    page = {"data": {"repository": {"pullRequest": {"reviewThreads": {"pageInfo": {"hasNextPage": False, "endCursor": None},
                                                                      "nodes": [thread]}}}}}
    assert any("0 is less than the minimum of 1" in e for e in check_graphql("threads", page))
    assert check_graphql("errors", {"errors": [{"message": "x"}]}) == []
    assert check_graphql("errors", {"errors": []})


def test_the_vendored_subset_is_exactly_the_fakes_operations() -> None:
    doc = json.loads(SUBSET_FILE.read_bytes())
    api = GitHubOpenAPI(doc)
    assert sorted(api.operations) == sorted(OPERATIONS)
    assert sorted({op for _, _, op, _ in FakeGitHub.ROUTES}) == sorted(OPERATIONS)
    text = SUBSET_FILE.read_text()
    assert '"example"' not in text and '"examples"' not in text
    for ref in refs_in(doc):
        pointer_get(doc, ref)  # every reference resolves inside the subset
    assert SUBSET_FILE.read_bytes() == (json.dumps(doc, sort_keys=True, indent=1, ensure_ascii=True) + "\n").encode()
    readme = (SUBSET_DIR / "README.md").read_text()
    assert f"@octokit/openapi@{VERSION}" in readme and INTEGRITY in readme


@pytest.mark.registry
def test_the_vendored_subset_is_a_fresh_extraction_of_the_pinned_tarball() -> None:
    from support.make_github_openapi_subset import OpenAPIUnavailable, build, fetch_tarball

    try:
        tarball = fetch_tarball()
    except OpenAPIUnavailable as e:
        pytest.skip(f"@octokit/openapi@{VERSION} is not cached and the npm registry cannot be reached: {e}")
    assert build(tarball) == SUBSET_FILE.read_bytes(), "regenerate: python tests/support/make_github_openapi_subset.py"
