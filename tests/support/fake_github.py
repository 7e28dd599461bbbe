"""A stateful fake GitHub over a real git repository, validated against GitHub's published OpenAPI description.

Unlike :mod:`support.github_replay` (recorded answers), this fake *computes* its answers: the pull
request's base and head are read live from ``refs/heads/<base_ref>`` / ``refs/heads/<head_ref>`` of
a real repository on every request, its mergeability is a real ``git merge-tree`` of them, a merge
is made for real (``git commit-tree`` and a compare-and-swap ``git update-ref``), reviews,
comments, threads and statuses are held in memory under one lock. Every JSON body it accepts or
sends for an operation is validated against GitHub's description (:mod:`support.github_openapi`);
a mismatch lands in :attr:`FakeGitHub.schema_errors` and the fake still answers.

Quick reference::

    with serving(repo_dir) as gh:  # FakeGitHub(repo_dir, ...), closed after, and schema_errors == [] required
                                   # defaults: full_name="octo/widgets", repository_id=1296269,
        gh.open_pull(42, base_ref="main", head_ref="feature")   # tokens={"ghs_app": "attest-review[bot]", ...}
        gh.pulls[42].mergeable_override = [None, None, True]   # GitHub "still computing", then computed
        gh.add_issue_comment(42, "hi", "alice")
        gh.add_review(42, login="alice", state="APPROVED")      # a review without going through the API
        gh.edit_review(review_id, "new body", login="octocat")  # GraphQL then reports the edit
        tid = gh.add_thread(42, "a.py", 3, login="alice"); gh.resolve_thread(tid)
        gh.set_environment("review", {"protection_rules": []})  # None removes it
        run = gh.add_run(pull_requests=[42]); gh.add_job(run, "opencode-review-same-repo")
        gh.fault("POST", r"/reviews$", "lose_answer")           # see FakeGitHub.fault
        ... GitHubClient(gh.url, token="ghs_app", limits=HttpLimits()) ...
        assert gh.schema_errors == []                             # or gh.assert_schema_clean()

Constructor options: ``page_size`` (100: REST pages and GraphQL thread pages are at most this
long), ``required_status`` (None: a context whose latest status on the head must be ``success``
for a merge, as branch protection does), ``hunk_lines`` (False: an inline comment's line must be a
line of the file on its side; True: a line of a hunk of the diff, as GitHub itself requires),
``default_branch`` ("main").

Deliberate simplifications (documented, not hidden): one repository (plus its forks as names
only); pull requests are opened by the hook, not the API; a comment ``position`` (the deprecated
diff offset) is refused with 422; a thread is "outdated" when its file's blob on its side changed
since the comment; rebase merges are refused as by a repository that disallows them. GraphQL names
a bot ``slug`` where REST says ``slug[bot]``, as GitHub does.
"""

from __future__ import annotations

import base64
import copy
import json
import math
import os
import re
import socket
import struct
import subprocess
import threading
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit

from attest.review.evidence._model import REVIEW_EDIT_SELECTION

from .github_openapi import GitHubOpenAPI, check_graphql

DOCS = "https://docs.github.com/rest"
WEB = "https://github.com"
API_VERSIONS = frozenset({"2022-11-28", "2026-03-10"})
#: The review-threads query attest sends verbatim (attest.review.platform._api.THREADS_QUERY).
THREADS_QUERY = (
    "query($owner: String!, $name: String!, $number: Int!, $cursor: String) { repository(owner: $owner, name: $name) { "
    "pullRequest(number: $number) { reviewThreads(first: 100, after: $cursor) { pageInfo { hasNextPage endCursor } "
    "nodes { id isResolved isOutdated path line comments(first: 1) { nodes { author { login } url } } } } } } }"
)
#: The ``nodes(ids:)`` query of attest.review.evidence._http.GitHubClient.get_nodes with the review-edit selection.
NODES_QUERY = f"query($ids: [ID!]!) {{ nodes(ids: $ids) {{ __typename id {REVIEW_EDIT_SELECTION} }} }}"
DEFAULT_TOKENS: Mapping[str, str] = {"ghs_app": "attest-review[bot]", "ghs_actions": "github-actions[bot]", "ghs_admin": "octocat"}
FAULT_KINDS = ("lose_answer", "status", "redirect", "huge", "rewrite", "hold")
MAX_BODY_CHARS = 65536  # GitHub's limit on a review or comment body
STATUS_STATES = ("error", "failure", "pending", "success")
_EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
_GIT_ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/nonexistent", "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": "/dev/null", "LC_ALL": "C", "GIT_TERMINAL_PROMPT": "0"}
#: Who GitHub's test merges are by (fixed, so the same base and head always give the same commit).
TEST_MERGE_ENV = {"GIT_AUTHOR_NAME": "GitHub", "GIT_AUTHOR_EMAIL": "noreply@github.com", "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
                  "GIT_COMMITTER_NAME": "GitHub", "GIT_COMMITTER_EMAIL": "noreply@github.com",
                  "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z"}
_HEX = re.compile(r"(?:[0-9a-fA-F]{40}|[0-9a-fA-F]{64})\Z")
_REF = re.compile(r"(?!-)(?!.*\.\.)[A-Za-z0-9._/+-]{1,250}\Z")
_KNOWN_IDS = {"octocat": 583231, "github-actions[bot]": 41898282, "attest-review[bot]": 190736412}
_STATES = {"APPROVE": "APPROVED", "REQUEST_CHANGES": "CHANGES_REQUESTED", "COMMENT": "COMMENTED"}


class FakeGitHubError(RuntimeError):
    """A hook used wrongly (an unknown pull request, a branch that does not exist, ...)."""


@dataclass
class Logged:
    """One request as the fake received it."""

    method: str
    target: str  # path?query, byte for byte
    headers: dict[str, str]
    body: bytes = b""

    def json(self) -> Any:
        return json.loads(self.body) if self.body else None


@dataclass
class Fault:
    """One injected misbehaviour (see :meth:`FakeGitHub.fault`); ``hits`` counts the requests it took."""

    method: str
    pattern: re.Pattern[str]
    kind: str
    remaining: int | None
    params: dict[str, Any]
    hits: int = 0
    entered: threading.Event = field(default_factory=threading.Event)  # hold: a request is being held

    @property
    def event(self) -> threading.Event:
        """hold: the event that releases the held requests."""
        ev = self.params["event"]
        assert isinstance(ev, threading.Event)
        return ev

    def release(self) -> None:
        if self.kind == "hold":
            self.event.set()


@dataclass
class Pull:
    """A pull request's state; ``mergeable_override`` (a sequence, consumed one per read of the pull request, the
    last value repeating) replaces the computed ``mergeable``: None is GitHub's "still computing"."""

    number: int
    id: int
    base_ref: str
    head_ref: str
    head_full_name: str | None  # None: the base repository
    title: str
    body: str | None
    author: str
    created_at: str
    state: str = "open"
    merged: bool = False
    merged_at: str | None = None
    merged_by: str | None = None
    closed_at: str | None = None
    merge_commit: str | None = None  # after the merge: the merge commit
    frozen: tuple[str, str] | None = None  # (base, head) when it was closed or merged
    mergeable_override: Sequence[bool | None] | None = None
    head_repo_deleted: bool = False  # the head repository (a fork) is gone: head.repo is null
    last_test_merge: str | None = None
    heads_seen: set[str] = field(default_factory=set)
    last_shas: tuple[str, str] | None = None
    updated_at: str = ""


@dataclass
class _Review:
    id: int
    number: int
    login: str
    state: str
    body: str
    commit_id: str
    submitted_at: str | None
    edited_at: str | None = None
    editor: str | None = None


@dataclass
class _Comment:
    id: int
    number: int
    review_id: int | None
    path: str
    line: int
    side: str
    body: str
    commit_id: str
    login: str
    blob: str | None  # the file's blob on its side when commented (outdated when it changes)
    start_line: int | None = None
    start_side: str | None = None


@dataclass
class _Thread:
    db_id: int
    number: int
    comment: _Comment
    resolved: bool = False


@dataclass
class _IssueComment:
    id: int
    number: int
    body: str
    login: str
    created_at: str


@dataclass
class _Status:
    id: int
    sha: str
    state: str
    description: str | None
    target_url: str | None
    context: str
    login: str
    created_at: str


@dataclass
class _Answer:
    status: int
    body: Any = None  # JSON value, or bytes sent verbatim
    headers: dict[str, str] = field(default_factory=dict)
    op: str | None = None  # the operationId it answers (validated), "graphql:<kind>", or None
    ids: list[str] | None = None  # GraphQL nodes(ids:): what was asked
    close: bool = False  # lose_answer: close the connection without answering


def _error(status: int, message: str, **extra: Any) -> _Answer:
    return _Answer(status, {"message": message, "documentation_url": DOCS, **extra})


def _not_found() -> _Answer:
    return _error(404, "Not Found")


def _b64(*numbers: int) -> str:
    return base64.urlsafe_b64encode(struct.pack(f">{len(numbers)}Q", *numbers)).decode().rstrip("=")


class FakeGitHub:
    """The fake; see the module docstring. Started on construction (127.0.0.1, port 0), stopped by :meth:`close`."""

    def __init__(self, repo_dir: str | os.PathLike[str], *, full_name: str = "octo/widgets", repository_id: int = 1296269,
                 tokens: Mapping[str, str] | None = None, page_size: int = 100, required_status: str | None = None,
                 hunk_lines: bool = False, default_branch: str = "main", spec: GitHubOpenAPI | None = None) -> None:
        if page_size < 1:
            raise ValueError("page_size must be positive")
        self.repo_dir = Path(repo_dir)
        self.full_name = full_name
        self.owner, self.name = full_name.split("/", 1)
        self.repository_id = repository_id
        self.tokens = dict(DEFAULT_TOKENS if tokens is None else tokens)
        self.page_size = page_size
        self.required_status = required_status
        self.hunk_lines = hunk_lines
        self.default_branch = default_branch
        self.spec = spec if spec is not None else GitHubOpenAPI.vendored()
        self.log: list[Logged] = []
        self.schema_errors: list[str] = []
        self.pulls: dict[int, Pull] = {}
        self.faults: list[Fault] = []
        self.environments: dict[str, dict[str, Any]] = {}
        self._reviews: dict[int, _Review] = {}
        self._comments: dict[int, _Comment] = {}
        self._threads: dict[int, _Thread] = {}
        self._issue_comments: dict[int, _IssueComment] = {}
        self._statuses: list[_Status] = []
        self._runs: dict[int, dict[str, Any]] = {}
        self._jobs: dict[tuple[int, int], list[dict[str, Any]]] = {}
        self._workflows: dict[str, int] = {}
        self._ticks = 0
        self._ids = {"review": 80_000_000, "comment": 1_500_000_000, "thread": 60_000_000, "issue_comment": 2_000_000_000,
                     "status": 30_000_000_000, "run": 9_000_000_000, "job": 25_000_000_000, "env": 7_000_000, "request": 0}
        self._cache: dict[tuple[Any, ...], Any] = {}
        self._lock = threading.RLock()
        self._closed = False
        common = self._git("rev-parse", "--git-common-dir").stdout.decode().strip()
        self._common_dir = (self.repo_dir / common).resolve()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                fake._serve(self, "GET")

            def do_POST(self) -> None:
                fake._serve(self, "POST")

            def do_PUT(self) -> None:
                fake._serve(self, "PUT")

            def do_PATCH(self) -> None:
                fake._serve(self, "PATCH")

            def do_DELETE(self) -> None:
                fake._serve(self, "DELETE")

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.005}, daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------ lifecycle
    def __enter__(self) -> FakeGitHub:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for f in self.faults:
            f.release()
        self.httpd.shutdown()
        self.httpd.server_close()

    @property
    def targets(self) -> list[str]:
        """Every request, in order: ``path?query`` for a GET, ``METHOD path?query`` otherwise."""
        return [e.target if e.method == "GET" else f"{e.method} {e.target}" for e in self.log]

    def take_schema_errors(self) -> list[str]:
        """The schema errors so far, and none after (for a test that provoked them on purpose)."""
        with self._lock:
            out, self.schema_errors[:] = list(self.schema_errors), []
        return out

    def assert_schema_clean(self) -> None:
        """Fail (AssertionError) when anything the fake accepted or sent did not match GitHub's description."""
        if self.schema_errors:
            raise AssertionError("the fake GitHub saw bodies that are not GitHub's shapes:\n  " + "\n  ".join(self.schema_errors))

    # ------------------------------------------------------------------ git
    def _git(self, *args: str, input: bytes | None = None, env: Mapping[str, str] | None = None,
             ok: Sequence[int] = (0,)) -> subprocess.CompletedProcess[bytes]:
        out = subprocess.run(["git", "-C", str(self.repo_dir), *args], input=input, capture_output=True,
                             env={**_GIT_ENV, **(env or {})}, check=False)
        if out.returncode not in ok:
            raise FakeGitHubError(f"git {' '.join(args)} failed ({out.returncode}): {out.stderr.decode(errors='replace')[-500:]}")
        return out

    def _rev(self, ref: str) -> str | None:
        out = self._git("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", ok=(0, 1, 128))
        return (out.stdout.decode().strip() or None) if out.returncode == 0 else None

    def _read_ref(self, full: str) -> str | None:
        """The object id of ``refs/...``, read from the ref files (a loose ref, else packed-refs), git when unsure.

        Reading the files is what git itself does, and a subprocess fewer per pull request read;
        git writes a loose ref by renaming a lock file over it, so a read never sees half of one.
        """
        try:
            text: str | None = (self._common_dir / full).read_text().strip()
        except FileNotFoundError:
            text = None
        except OSError:
            return self._rev(full)
        if text is not None:
            return text if _HEX.match(text) else self._rev(full)  # a symbolic ref: ask git
        try:
            packed = (self._common_dir / "packed-refs").read_text()
        except FileNotFoundError:
            return None
        for line in packed.splitlines():
            sha, _, name = line.partition(" ")
            if name == full and not line.startswith(("#", "^")):
                return sha
        return None

    def _object_type(self, sha: str) -> str | None:
        out = self._git("cat-file", "-t", sha, ok=(0, 1, 128))
        return out.stdout.decode().strip() if out.returncode == 0 else None

    def _is_commit(self, sha: str) -> bool:
        return bool(_HEX.match(sha)) and self._object_type(sha.lower()) == "commit"

    def _cached(self, key: tuple[Any, ...], compute: Callable[[], Any]) -> Any:
        if key not in self._cache:
            self._cache[key] = compute()
        return self._cache[key]

    def _merge_base(self, a: str, b: str) -> str | None:
        def compute() -> str | None:
            out = self._git("merge-base", a, b, ok=(0, 1))
            return out.stdout.decode().strip() or None
        return self._cached(("merge-base", a, b), compute)  # type: ignore[no-any-return]

    def _test_merge(self, base: str, head: str) -> tuple[str, str] | None:
        """(tree, test-merge commit) of head into base, or None on a conflict (``git merge-tree --write-tree``)."""
        def compute() -> tuple[str, str] | None:
            out = self._git("merge-tree", "--write-tree", "--no-messages", base, head, ok=(0, 1, 128))
            if out.returncode != 0:
                return None  # 1: a conflict; 128: e.g. unrelated histories
            tree = out.stdout.decode().split("\n", 1)[0].strip()
            commit = self._git("commit-tree", tree, "-p", base, "-p", head, input=f"Merge {head} into {base}\n".encode(),
                               env=TEST_MERGE_ENV).stdout.decode().strip()
            return tree, commit
        return self._cached(("merge", base, head), compute)  # type: ignore[no-any-return]

    def _changes(self, base: str, head: str) -> dict[str, str | None]:
        """The changed paths of base...head: new path -> the path on the merge-base side (None: added)."""
        def compute() -> dict[str, str | None]:
            mb = self._merge_base(base, head) or base
            raw = self._git("diff", "--name-status", "-z", "-M", "--no-color", mb, head).stdout.decode("utf-8", "surrogateescape")
            parts = raw.split("\0")
            out: dict[str, str | None] = {}
            i = 0
            while i < len(parts) and parts[i]:
                status = parts[i]
                if status[0] in "RC":
                    out[parts[i + 2]] = parts[i + 1]
                    i += 3
                else:
                    out[parts[i + 1]] = None if status[0] == "A" else parts[i + 1]
                    i += 2
            return out
        return self._cached(("changes", base, head), compute)  # type: ignore[no-any-return]

    def _stats(self, base: str, head: str) -> tuple[int, int, int, int]:
        """(commits, additions, deletions, changed files) of the pull request."""
        def compute() -> tuple[int, int, int, int]:
            mb = self._merge_base(base, head) or base
            commits = int(self._git("rev-list", "--count", f"{base}..{head}").stdout.decode().strip() or 0)
            add = dele = files = 0
            parts = self._git("diff", "--numstat", "-z", "-M", mb, head).stdout.decode("utf-8", "surrogateescape").split("\0")
            i = 0
            while i < len(parts) and parts[i]:
                a, d, p = parts[i].split("\t", 2)
                add += int(a) if a.isdigit() else 0
                dele += int(d) if d.isdigit() else 0
                files += 1
                i += 3 if p == "" else 1
            return commits, add, dele, files
        return self._cached(("stats", base, head), compute)  # type: ignore[no-any-return]

    def _blobs(self, commit: str) -> dict[str, str]:
        def compute() -> dict[str, str]:
            raw = self._git("ls-tree", "-r", "-z", commit).stdout.decode("utf-8", "surrogateescape")
            out = {}
            for entry in filter(None, raw.split("\0")):
                meta, path = entry.split("\t", 1)
                out[path] = meta.split()[2]
            return out
        return self._cached(("blobs", commit), compute)  # type: ignore[no-any-return]

    def _line_count(self, blob: str) -> int:
        def compute() -> int:
            data = self._git("cat-file", "blob", blob).stdout
            return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)
        return self._cached(("lines", blob), compute)  # type: ignore[no-any-return]

    def _hunk_lines(self, mb: str, commit: str, old: str | None, new: str) -> tuple[set[int], set[int]]:
        """(LEFT lines, RIGHT lines) inside the hunks of the diff of one file (3 lines of context)."""
        def compute() -> tuple[set[int], set[int]]:
            paths = [p for p in {old, new} if p is not None]
            text = self._git("diff", "-U3", "-M", "--no-color", mb, commit, "--", *paths).stdout.decode("utf-8", "replace")
            left: set[int] = set()
            right: set[int] = set()
            for m in re.finditer(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@", text, re.M):
                a, b, c, d = int(m[1]), int(m[2] or 1), int(m[3]), int(m[4] or 1)
                left.update(range(a, a + b))
                right.update(range(c, c + d))
            return left, right
        return self._cached(("hunks", mb, commit, old, new), compute)  # type: ignore[no-any-return]

    def _commit_doc(self, sha: str) -> dict[str, Any]:
        def compute() -> dict[str, Any]:
            raw = self._git("cat-file", "commit", sha).stdout.decode("utf-8", "replace")
            head, _, message = raw.partition("\n\n")
            headers: list[tuple[str, str]] = []
            for line in head.split("\n"):
                if line.startswith(" ") and headers:
                    headers[-1] = (headers[-1][0], headers[-1][1] + "\n" + line[1:])
                else:
                    k, _, v = line.partition(" ")
                    headers.append((k, v))
            return {"headers": headers, "message": message, "raw": raw}
        return self._cached(("commit", sha), compute)  # type: ignore[no-any-return]

    # ------------------------------------------------------------------ helpers
    def _now(self) -> str:
        self._ticks += 1
        return (_EPOCH + timedelta(seconds=self._ticks)).strftime("%Y-%m-%dT%H:%M:%SZ")

    def _next(self, kind: str) -> int:
        self._ids[kind] += 1
        return self._ids[kind]

    def _node(self, prefix: str, number: int) -> str:
        return f"{prefix}_kwDO{_b64(self.repository_id, number)}"

    def _api(self, path: str = "") -> str:
        return f"{self.url}/repos/{self.full_name}{path}"

    def _web(self, path: str = "") -> str:
        return f"{WEB}/{self.full_name}{path}"

    def _pull(self, number: int) -> Pull:
        pull = self.pulls.get(number)
        if pull is None:
            raise FakeGitHubError(f"no pull request {number}")
        return pull

    def _shas(self, pull: Pull) -> tuple[str, str]:
        """(base, head) now: live from the branches while open, as they were when closed."""
        if pull.frozen is not None:
            return pull.frozen
        base, head = self._read_ref(f"refs/heads/{pull.base_ref}"), self._read_ref(f"refs/heads/{pull.head_ref}")
        if base is None or head is None:  # a branch was deleted: GitHub closes the pull request
            if pull.last_shas is None:
                raise FakeGitHubError(f"pull request {pull.number}: refs/heads/{pull.base_ref} or refs/heads/{pull.head_ref} is gone")
            pull.frozen = pull.last_shas
            pull.state, pull.closed_at = "closed", self._now()
            pull.updated_at = pull.closed_at
            return pull.frozen
        pull.heads_seen.add(head)
        pull.last_shas = (base, head)
        return base, head

    def user(self, login: str) -> dict[str, Any]:
        """The ``simple-user`` object of ``login`` (a ``[bot]`` login is a Bot; ``octo``, the owner, an Organization)."""
        uid = _KNOWN_IDS.get(login, 10_000_000 + zlib.crc32(login.encode()) % 90_000_000)
        bot = login.endswith("[bot]")
        kind = "Bot" if bot else "Organization" if login == self.owner else "User"
        u = f"{self.url}/users/{quote(login)}"
        return {
            "login": login, "id": uid, "node_id": f"{'BOT' if bot else 'U'}_kgDO{_b64(uid)}",
            "avatar_url": f"https://avatars.githubusercontent.com/{'in' if bot else 'u'}/{uid}?v=4", "gravatar_id": "",
            "url": u, "html_url": f"{WEB}/apps/{login.removesuffix('[bot]')}" if bot else f"{WEB}/{login}",
            "followers_url": f"{u}/followers", "following_url": f"{u}/following{{/other_user}}", "gists_url": f"{u}/gists{{/gist_id}}",
            "starred_url": f"{u}/starred{{/owner}}{{/repo}}", "subscriptions_url": f"{u}/subscriptions",
            "organizations_url": f"{u}/orgs", "repos_url": f"{u}/repos", "events_url": f"{u}/events{{/privacy}}",
            "received_events_url": f"{u}/received_events", "type": kind, "site_admin": False, "user_view_type": "public",
        }

    def _association(self, login: str, number: int | None = None) -> str:
        if login == self.owner:
            return "OWNER"
        if login.endswith("[bot]"):
            return "NONE"
        if login in self.tokens.values():
            return "MEMBER"
        return "CONTRIBUTOR"

    def repository(self, schema: str = "full-repository", full_name: str | None = None, *, fork: bool = False) -> dict[str, Any]:
        """The repository as ``schema`` (``full-repository``, ``repository``, ``minimal-repository``) describes it."""
        full = full_name or self.full_name
        owner, name = full.split("/", 1)
        rid = self.repository_id if full == self.full_name else 100_000_000 + zlib.crc32(full.encode()) % 100_000_000
        a = f"{self.url}/repos/{full}"
        when = "2020-01-01T00:00:00Z"
        doc: dict[str, Any] = {
            "id": rid, "node_id": f"R_kgDO{_b64(rid)}", "name": name, "full_name": full, "owner": self.user(owner),
            "private": False, "html_url": f"{WEB}/{full}", "description": "A repository of the fake GitHub", "fork": fork,
            "url": a, "archive_url": f"{a}/{{archive_format}}{{/ref}}", "assignees_url": f"{a}/assignees{{/user}}",
            "blobs_url": f"{a}/git/blobs{{/sha}}", "branches_url": f"{a}/branches{{/branch}}",
            "collaborators_url": f"{a}/collaborators{{/collaborator}}", "comments_url": f"{a}/comments{{/number}}",
            "commits_url": f"{a}/commits{{/sha}}", "compare_url": f"{a}/compare/{{base}}...{{head}}",
            "contents_url": f"{a}/contents/{{+path}}", "contributors_url": f"{a}/contributors", "deployments_url": f"{a}/deployments",
            "downloads_url": f"{a}/downloads", "events_url": f"{a}/events", "forks_url": f"{a}/forks",
            "git_commits_url": f"{a}/git/commits{{/sha}}", "git_refs_url": f"{a}/git/refs{{/sha}}", "git_tags_url": f"{a}/git/tags{{/sha}}",
            "git_url": f"git://github.com/{full}.git", "issue_comment_url": f"{a}/issues/comments{{/number}}",
            "issue_events_url": f"{a}/issues/events{{/number}}", "issues_url": f"{a}/issues{{/number}}", "keys_url": f"{a}/keys{{/key_id}}",
            "labels_url": f"{a}/labels{{/name}}", "languages_url": f"{a}/languages", "merges_url": f"{a}/merges",
            "milestones_url": f"{a}/milestones{{/number}}", "notifications_url": f"{a}/notifications{{?since,all,participating}}",
            "pulls_url": f"{a}/pulls{{/number}}", "releases_url": f"{a}/releases{{/id}}", "ssh_url": f"git@github.com:{full}.git",
            "stargazers_url": f"{a}/stargazers", "statuses_url": f"{a}/statuses/{{sha}}", "subscribers_url": f"{a}/subscribers",
            "subscription_url": f"{a}/subscription", "tags_url": f"{a}/tags", "teams_url": f"{a}/teams",
            "trees_url": f"{a}/git/trees{{/sha}}", "clone_url": f"{WEB}/{full}.git", "mirror_url": None, "hooks_url": f"{a}/hooks",
            "svn_url": f"{WEB}/{full}", "homepage": None, "language": "Python", "forks_count": 0, "forks": 0,
            "stargazers_count": 0, "watchers_count": 0, "watchers": 0, "size": 1, "default_branch": self.default_branch,
            "open_issues_count": sum(p.state == "open" for p in self.pulls.values()),
            "open_issues": sum(p.state == "open" for p in self.pulls.values()), "is_template": False, "topics": [],
            "has_issues": True, "has_projects": True, "has_wiki": True, "has_pages": False, "has_downloads": True,
            "has_discussions": False, "archived": False, "disabled": False, "visibility": "public", "pushed_at": when,
            "created_at": when, "updated_at": when, "allow_rebase_merge": False, "allow_squash_merge": True,
            "allow_merge_commit": True, "allow_auto_merge": False, "delete_branch_on_merge": False, "allow_update_branch": False,
            "use_squash_pr_title_as_default": False, "squash_merge_commit_title": "COMMIT_OR_PR_TITLE",
            "squash_merge_commit_message": "COMMIT_MESSAGES", "merge_commit_title": "MERGE_MESSAGE",
            "merge_commit_message": "PR_TITLE", "allow_forking": True, "web_commit_signoff_required": False, "license": None,
            "network_count": 0, "subscribers_count": 0, "custom_properties": {},
        }
        described = self.spec.doc["components"]["schemas"][schema]["properties"]
        return {k: v for k, v in doc.items() if k in described}

    # ------------------------------------------------------------------ hooks
    def open_pull(self, number: int = 42, *, base_ref: str = "main", head_ref: str = "feature", head_full_name: str | None = None,
                  title: str = "Widget frobnication", body: str | None = "Frobnicates the widgets.", author: str = "alice") -> None:
        """Open pull request ``number`` of ``head_ref`` into ``base_ref`` (both branches of the repository; a fork is a name)."""
        with self._lock:
            if number in self.pulls:
                raise FakeGitHubError(f"pull request {number} exists")
            for ref in (base_ref, head_ref):
                if self._read_ref(f"refs/heads/{ref}") is None:
                    raise FakeGitHubError(f"the repository has no branch {ref!r}")
            pull = Pull(number, 1_934_560_000 + number, base_ref, head_ref, head_full_name, title, body, author, self._now())
            pull.updated_at = pull.created_at
            self.pulls[number] = pull
            self._shas(pull)

    def close_pull(self, number: int) -> None:
        with self._lock:
            pull = self._pull(number)
            pull.frozen = self._shas(pull)
            pull.state, pull.closed_at = "closed", self._now()
            pull.updated_at = pull.closed_at

    def add_issue_comment(self, number: int, body: str, login: str) -> int:
        """A comment on the pull request's conversation; its id."""
        with self._lock:
            self._pull(number)
            cid = self._next("issue_comment")
            self._issue_comments[cid] = _IssueComment(cid, number, body, login, self._now())
            return cid

    def add_review(self, number: int, *, login: str, state: str = "COMMENTED", body: str = "", commit_id: str | None = None) -> int:
        """A submitted review (no API call, no validation of the state); its id."""
        with self._lock:
            pull = self._pull(number)
            commit = commit_id or self._shas(pull)[1]
            rid = self._next("review")
            self._reviews[rid] = _Review(rid, number, login, state, body, commit, None if state == "PENDING" else self._now())
            return rid

    def edit_review(self, review_id: int, body: str, *, login: str) -> None:
        """Edit a review's body as ``login`` (GitHub lets anyone with write access do so): REST shows the new body,
        GraphQL ``lastEditedAt``/``editor``/``includesCreatedEdit``."""
        with self._lock:
            review = self._reviews[review_id]
            review.body, review.edited_at, review.editor = body, self._now(), login

    def add_thread(self, number: int, path: str, line: int, *, login: str, resolved: bool = False, side: str = "RIGHT") -> str:
        """A review thread of one comment on ``path``:``line`` of the current head; its GraphQL id."""
        with self._lock:
            pull = self._pull(number)
            base, head = self._shas(pull)
            blob = self._side_blob(base, head, path, side)
            comment = _Comment(self._next("comment"), number, None, path, line, side, "", head, login, blob)
            self._comments[comment.id] = comment
            thread = _Thread(self._next("thread"), number, comment, resolved)
            self._threads[thread.db_id] = thread
            return self._node("PRRT", thread.db_id)

    def resolve_thread(self, thread_id: str, resolved: bool = True) -> None:
        with self._lock:
            for t in self._threads.values():
                if self._node("PRRT", t.db_id) == thread_id:
                    t.resolved = resolved
                    return
            raise FakeGitHubError(f"no thread {thread_id}")

    def threads(self, number: int) -> list[str]:
        """The GraphQL ids of the pull request's review threads, oldest first."""
        with self._lock:
            return [self._node("PRRT", t.db_id) for t in sorted(self._threads.values(), key=lambda t: t.db_id) if t.number == number]

    def set_environment(self, name: str, doc: Mapping[str, Any] | None) -> None:
        """Create or replace the deployment environment ``name`` (``doc`` over the defaults), or remove it (None)."""
        with self._lock:
            key = name.lower()
            if doc is None:
                self.environments.pop(key, None)
                return
            old = self.environments.get(key)
            eid = old["id"] if old else self._next("env")
            when = old["created_at"] if old else self._now()
            self.environments[key] = {
                "id": eid, "node_id": f"EN_kwDO{_b64(self.repository_id, eid)}", "name": name,
                "url": self._api(f"/environments/{quote(name, safe='')}"),
                "html_url": self._web(f"/deployments/activity_log?environments_filter={quote(name, safe='')}"),
                "created_at": when, "updated_at": self._now(), "protection_rules": [], "deployment_branch_policy": None,
                **copy.deepcopy(dict(doc)),
            }

    def add_run(self, *, workflow: str = ".github/workflows/opencode-code-review.yml", event: str = "pull_request_target",
                head_sha: str | None = None, head_branch: str | None = None, status: str | None = "completed",
                conclusion: str | None = "success", run_attempt: int | None = 1, display_title: str | None = None,
                name: str = "OpenCode code review", pull_requests: Sequence[int | Mapping[str, Any]] = (),
                run_id: int | None = None, run_number: int | None = None, **fields: Any) -> int:
        """A workflow run (newest first in listings); its id. ``pull_requests``: numbers (their state now) or objects.

        ``run_attempt=None`` leaves the field out; ``fields`` override or add any field of the run object.
        """
        with self._lock:
            rid = run_id if run_id is not None else self._next("run")
            wid = self._workflows.setdefault(workflow, 161_335 + len(self._workflows))
            sha = head_sha or self._read_ref(f"refs/heads/{head_branch or self.default_branch}")
            assert sha is not None
            when = self._now()
            prs = []
            for item in pull_requests:
                if isinstance(item, Mapping):
                    prs.append(dict(item))
                    continue
                pull = self._pull(item)
                base, head = self._shas(pull)
                repo_min = {"id": self.repository_id, "url": self._api(), "name": self.name}
                head_repo = repo_min if pull.head_full_name is None else {
                    "id": self.repository(full_name=pull.head_full_name)["id"], "url": f"{self.url}/repos/{pull.head_full_name}",
                    "name": pull.head_full_name.split("/")[1]}
                prs.append({"id": pull.id, "number": pull.number, "url": self._api(f"/pulls/{pull.number}"),
                            "head": {"ref": pull.head_ref, "sha": head, "repo": head_repo},
                            "base": {"ref": pull.base_ref, "sha": base, "repo": repo_min}})
            a = self._api(f"/actions/runs/{rid}")
            run: dict[str, Any] = {
                "id": rid, "name": name, "node_id": f"WFR_kwLO{_b64(self.repository_id, rid)}", "check_suite_id": rid + 1,
                "check_suite_node_id": f"CS_kwDO{_b64(self.repository_id, rid + 1)}", "head_branch": head_branch or self.default_branch,
                "head_sha": sha, "path": workflow, "display_title": display_title if display_title is not None else name,
                "run_number": run_number if run_number is not None else len(self._runs) + 1, "event": event, "status": status,
                "conclusion": conclusion, "workflow_id": wid, "url": a, "html_url": self._web(f"/actions/runs/{rid}"),
                "pull_requests": prs, "created_at": when, "updated_at": when, "run_started_at": when,
                "actor": self.user(self.owner), "triggering_actor": self.user(self.owner), "jobs_url": f"{a}/jobs",
                "logs_url": f"{a}/logs", "check_suite_url": self._api(f"/check-suites/{rid + 1}"), "artifacts_url": f"{a}/artifacts",
                "cancel_url": f"{a}/cancel", "rerun_url": f"{a}/rerun",
                "previous_attempt_url": f"{a}/attempts/{run_attempt - 1}" if run_attempt and run_attempt > 1 else None,
                "workflow_url": self._api(f"/actions/workflows/{wid}"), "head_commit": self._simple_commit(sha),
                "repository": self.repository("minimal-repository"), "head_repository": self.repository("minimal-repository"),
                "referenced_workflows": [],
            }
            if run_attempt is not None:
                run["run_attempt"] = run_attempt
            run.update(fields)
            self._runs[rid] = run
            return rid

    def add_job(self, run_id: int, name: str, *, attempt: int | None = None, status: str = "completed",
                conclusion: str | None = "success", job_id: int | None = None, **fields: Any) -> int:
        """A job of attempt ``attempt`` (default: the run's) of run ``run_id``; its id. ``fields`` override any field."""
        with self._lock:
            run = self._runs[run_id]
            att = attempt if attempt is not None else int(run.get("run_attempt") or 1)
            jid = job_id if job_id is not None else self._next("job")
            when = self._now()
            job: dict[str, Any] = {
                "id": jid, "run_id": run_id, "run_url": run["url"], "run_attempt": att,
                "node_id": f"CR_kwDO{_b64(self.repository_id, jid)}", "head_sha": run["head_sha"], "url": self._api(f"/actions/jobs/{jid}"),
                "html_url": self._web(f"/actions/runs/{run_id}/job/{jid}"), "status": status, "conclusion": conclusion,
                "created_at": when, "started_at": when, "completed_at": when if status == "completed" else None, "name": name,
                "steps": [], "check_run_url": self._api(f"/check-runs/{jid}"), "labels": ["ubuntu-latest"], "runner_id": 1,
                "runner_name": "GitHub Actions 1", "runner_group_id": 2, "runner_group_name": "GitHub Actions",
                "workflow_name": run.get("name"), "head_branch": run.get("head_branch"),
            }
            job.update(fields)
            self._jobs.setdefault((run_id, att), []).append(job)
            return jid

    def fault(self, method: str, path_regex: str, kind: str, *, times: int | None = 1, **params: Any) -> Fault:
        """Misbehave on the next ``times`` requests (None: every one) whose method is ``method`` ("*": any) and whose
        ``path?query`` matches ``path_regex`` (``re.search``). Faults are tried in the order they were added. Kinds:

        - ``lose_answer``: process the request fully (the review IS created, the merge IS done), then close the
          connection without a byte of answer;
        - ``status``: answer ``status`` (default 500) with ``body`` (JSON value, or bytes; default GitHub's error
          object) and ``headers`` instead; ``process=True`` processes the request first;
        - ``redirect``: answer ``status`` (default 301; 302, 307, 308) with ``Location: location``; ``process`` as above;
        - ``huge``: answer 200 with a JSON body of ``size`` bytes (``chunked=True``: no Content-Length); ``process`` as above;
        - ``rewrite``: ``fn(json) -> json`` (or None after editing in place) edits the answer the fake was about
          to send; ``status`` replaces its status;
        - ``hold``: block the request until ``event`` (a threading.Event; one is made, :attr:`Fault.event`) is set,
          at most ``timeout`` seconds (30); ``when="before"`` (default) processing, or ``"after"`` it (done, not
          yet answered). :attr:`Fault.entered` is set once a request is held.

        What a fault sends is not schema-checked (it is hostile on purpose); the honest answer it replaces is.
        """
        if kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault kind {kind!r}: one of {', '.join(FAULT_KINDS)}")
        allowed = {"lose_answer": set(), "status": {"status", "body", "headers", "process"},
                   "redirect": {"status", "location", "process"}, "huge": {"size", "chunked", "process"},
                   "rewrite": {"fn", "status"}, "hold": {"event", "timeout", "when"}}[kind]
        if set(params) - allowed:
            raise ValueError(f"fault {kind} takes {sorted(allowed)}, not {sorted(set(params) - allowed)}")
        if kind == "redirect" and "location" not in params:
            raise ValueError("a redirect needs location=")
        if kind == "huge" and "size" not in params:
            raise ValueError("huge needs size=")
        if kind == "rewrite" and not callable(params.get("fn")):
            raise ValueError("rewrite needs fn=")
        if kind == "hold":
            params.setdefault("event", threading.Event())
            params.setdefault("timeout", 30.0)
            if params.setdefault("when", "before") not in ("before", "after"):
                raise ValueError("hold when= is 'before' or 'after'")
        if times is not None and times < 1:
            raise ValueError("times must be positive (or None: always)")
        f = Fault(method.upper(), re.compile(path_regex), kind, times, params)
        with self._lock:
            self.faults.append(f)
        return f

    def clear_faults(self) -> None:
        with self._lock:
            for f in self.faults:
                f.release()
            self.faults.clear()

    def _take_fault(self, method: str, target: str) -> Fault | None:
        with self._lock:
            for f in self.faults:
                if (f.remaining is None or f.remaining > 0) and f.method in ("*", method) and f.pattern.search(target):
                    f.hits += 1
                    if f.remaining is not None:
                        f.remaining -= 1
                    return f
        return None

    # ------------------------------------------------------------------ serving
    def _serve(self, h: BaseHTTPRequestHandler, method: str) -> None:
        body = self._read_body(h)
        target = h.path
        headers = {k: v for k, v in h.headers.items()}
        with self._lock:
            self.log.append(Logged(method, target, headers, body))
        fault = self._take_fault(method, target)
        if fault is not None and fault.kind == "hold" and fault.params["when"] == "before":
            fault.entered.set()
            fault.event.wait(fault.params["timeout"])
        if fault is not None and fault.kind in ("status", "redirect", "huge") and not fault.params.get("process"):
            self._send(h, self._fault_answer(fault))
            return
        with self._lock:
            try:
                answer = self._handle(method, target, headers, body)
            except Exception as e:  # noqa: BLE001 - a bug of the fake must fail the test, not hang the client
                answer = _error(500, f"the fake GitHub failed: {type(e).__name__}: {e}")
                self.schema_errors.append(f"{method} {target}: the fake failed: {type(e).__name__}: {e}")
            self._check(method, target, answer)
        if fault is not None:
            if fault.kind == "lose_answer":
                h.close_connection = True
                try:
                    h.connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                return
            if fault.kind == "rewrite":
                doc = copy.deepcopy(answer.body)
                new = fault.params["fn"](doc)
                answer = _Answer(fault.params.get("status", answer.status), doc if new is None else new, answer.headers)
            elif fault.kind == "hold":
                fault.entered.set()
                fault.event.wait(fault.params["timeout"])
            else:
                answer = self._fault_answer(fault)
        self._send(h, answer)

    @staticmethod
    def _read_body(h: BaseHTTPRequestHandler) -> bytes:
        if "chunked" in (h.headers.get("Transfer-Encoding") or "").lower():
            out = b""
            while True:
                size = int(h.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    h.rfile.readline()
                    return out
                out += h.rfile.read(size)
                h.rfile.readline()
        length = int(h.headers.get("Content-Length") or 0)
        return h.rfile.read(length) if length > 0 else b""

    def _fault_answer(self, fault: Fault) -> _Answer:
        p = fault.params
        if fault.kind == "status":
            status = int(p.get("status", 500))
            body = p.get("body", {"message": BaseHTTPRequestHandler.responses.get(status, ("Error",))[0], "documentation_url": DOCS})
            return _Answer(status, body, dict(p.get("headers") or {}))
        if fault.kind == "redirect":
            status = int(p.get("status", 301))
            return _Answer(status, {"message": "Moved Permanently", "url": p["location"], "documentation_url": DOCS},
                           {"Location": p["location"]})
        size = int(p["size"])
        pad = max(0, size - len(b'{"huge":""}'))
        data = b'{"huge":"' + b"x" * pad + b'"}'
        answer = _Answer(200, data[:size] if size < len(b'{"huge":""}') else data)
        if p.get("chunked"):
            answer.headers["Transfer-Encoding"] = "chunked"
        return answer

    def _send(self, h: BaseHTTPRequestHandler, answer: _Answer) -> None:
        data = answer.body if isinstance(answer.body, bytes) else json.dumps(answer.body).encode()
        chunked = answer.headers.get("Transfer-Encoding") == "chunked"
        try:
            h.send_response(answer.status)
            headers = {"Content-Type": "application/json; charset=utf-8", "X-GitHub-Media-Type": "github.v3; format=json",
                       "X-GitHub-Api-Version-Selected": "2022-11-28", **answer.headers}
            for k, v in headers.items():
                h.send_header(k, v)
            if not chunked:
                h.send_header("Content-Length", str(len(data)))
            h.send_header("Connection", "close")
            h.end_headers()
            if chunked:
                for i in range(0, len(data), 65536):
                    piece = data[i : i + 65536]
                    h.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                h.wfile.write(b"0\r\n\r\n")
            else:
                for i in range(0, len(data), 1 << 20):
                    h.wfile.write(data[i : i + (1 << 20)])
        except OSError:
            pass  # the client gave up (a size cap, a deadline): what the test wants
        h.close_connection = True

    def _check(self, method: str, target: str, answer: _Answer) -> None:
        """Validate the honest answer against the description (REST) or the hand-written GraphQL shapes."""
        if answer.op is None or isinstance(answer.body, bytes):
            return
        if answer.op.startswith("graphql:"):
            problems = check_graphql(answer.op.split(":", 1)[1], answer.body, ids=answer.ids)
        else:
            problems = self.spec.check_response(answer.op, answer.status, answer.body)
        self.schema_errors.extend(f"{method} {target} -> {answer.status} ({answer.op}): {p}" for p in problems)

    # ------------------------------------------------------------------ routing
    _R = r"/repos/(?P<owner>[^/]+)/(?P<repo>[^/]+)"
    ROUTES: tuple[tuple[str, re.Pattern[str], str, str], ...] = tuple((m, re.compile(p + r"\Z"), op, fn) for m, p, op, fn in (
        ("GET", _R, "repos/get", "_get_repo"),
        ("GET", _R + r"/pulls/(?P<n>\d+)", "pulls/get", "_get_pull"),
        ("PUT", _R + r"/pulls/(?P<n>\d+)/merge", "pulls/merge", "_merge"),
        ("GET", _R + r"/pulls/(?P<n>\d+)/reviews", "pulls/list-reviews", "_list_reviews"),
        ("POST", _R + r"/pulls/(?P<n>\d+)/reviews", "pulls/create-review", "_create_review"),
        ("GET", _R + r"/pulls/(?P<n>\d+)/reviews/(?P<id>\d+)", "pulls/get-review", "_get_review"),
        ("GET", _R + r"/git/commits/(?P<sha>[^/]+)", "git/get-commit", "_get_commit"),
        ("GET", _R + r"/git/ref/(?P<ref>.+)", "git/get-ref", "_get_ref"),
        ("GET", _R + r"/issues/(?P<n>\d+)/comments", "issues/list-comments", "_list_issue_comments"),
        ("POST", _R + r"/statuses/(?P<sha>[^/]+)", "repos/create-commit-status", "_create_status"),
        ("GET", _R + r"/commits/(?P<ref>.+)/statuses", "repos/list-commit-statuses-for-ref", "_list_statuses"),
        ("GET", _R + r"/commits/(?P<ref>.+)/status", "repos/get-combined-status-for-ref", "_combined_status"),
        ("GET", _R + r"/environments/(?P<env>[^/]+)", "repos/get-environment", "_get_environment"),
        ("GET", _R + r"/actions/workflows/(?P<wf>[^/]+)/runs", "actions/list-workflow-runs", "_list_runs"),
        ("GET", _R + r"/actions/runs/(?P<run>\d+)/attempts/(?P<att>\d+)/jobs", "actions/list-jobs-for-workflow-run-attempt",
         "_list_jobs"),
    ))
    WRITES = frozenset({"pulls/merge", "pulls/create-review", "repos/create-commit-status"})

    def _handle(self, method: str, target: str, headers: Mapping[str, str], body: bytes) -> _Answer:
        self._next("request")
        parts = urlsplit(target)
        path, query = parts.path, parse_qsl(parts.query, keep_blank_values=True)
        lower = {k.lower(): v for k, v in headers.items()}
        version = lower.get("x-github-api-version")
        if version is not None and version not in API_VERSIONS:
            return _error(400, f"Unsupported 'X-GitHub-Api-Version' header: {version}")
        login: str | None = None
        auth = lower.get("authorization")
        if auth is not None:
            scheme, _, token = auth.partition(" ")
            login = self.tokens.get(token.strip()) if scheme.lower() in ("bearer", "token") else None
            if login is None:
                return _error(401, "Bad credentials")
        if method == "POST" and path == "/graphql":
            return self._graphql(login, body)
        for m, pattern, op, fn in self.ROUTES:
            match = pattern.match(path)
            if match is None or m != method:
                continue
            args = {k: unquote(v) for k, v in match.groupdict().items()}
            if f"{args.pop('owner')}/{args.pop('repo')}".lower() != self.full_name.lower():
                return _Answer(404, _not_found().body, op=op)
            if op in self.WRITES and login is None:
                return _Answer(401, _error(401, "Requires authentication").body, op=op)
            payload: Any = None
            if method in ("POST", "PUT", "PATCH") and body.strip():
                try:
                    payload = json.loads(body)
                except ValueError:
                    return _Answer(400, _error(400, "Problems parsing JSON").body, op=op)
                strict = self.spec.check_request(op, payload, strict=True)
                self.schema_errors.extend(f"request {method} {target} ({op}): {p}" for p in strict)
                lenient = self.spec.check_request(op, payload, strict=False)
                if lenient:
                    return _Answer(422, _error(422, "Invalid request.\n\n" + "\n".join(lenient)).body, op=op)
            answer: _Answer = getattr(self, fn)(login=login, query=dict(query), path=path, payload=payload, **args)
            answer.op = op
            return answer
        return _not_found()

    # ------------------------------------------------------------------ pagination
    def _paginate(self, items: Sequence[Any], query: Mapping[str, str], path: str) -> tuple[list[Any], dict[str, str]]:
        try:
            per_page = min(100, max(1, int(query.get("per_page", "30"))))
        except ValueError:
            per_page = 30
        try:
            page = max(1, int(query.get("page", "1")))
        except ValueError:
            page = 1
        size = min(per_page, self.page_size)
        last = max(1, math.ceil(len(items) / size))
        chunk = list(items[(page - 1) * size : page * size])

        def link(n: int) -> str:
            q = [(k, v) for k, v in query.items() if k != "page"] + [("page", str(n))]
            return f"<{self.url}{path}?{urlencode(q)}>"

        rels = []
        if page > 1:
            rels += [f'{link(min(page - 1, last))}; rel="prev"']
        if page < last:
            rels += [f'{link(page + 1)}; rel="next"', f'{link(last)}; rel="last"']
        if page > 1:
            rels += [f'{link(1)}; rel="first"']
        return chunk, ({"Link": ", ".join(rels)} if rels else {})

    # ------------------------------------------------------------------ REST: repository, commits, refs
    def _get_repo(self, **_: Any) -> _Answer:
        return _Answer(200, self.repository())

    def _get_commit(self, *, sha: str, **_: Any) -> _Answer:
        if not _HEX.match(sha):
            return _error(422, "The sha parameter must be exactly 40 characters and contain only [0-9a-f].")
        sha = sha.lower()
        if self._object_type(sha) != "commit":
            return _not_found()
        return _Answer(200, self._git_commit(sha))

    def _person(self, value: str) -> dict[str, str]:
        m = re.match(r"(.*) <(.*)> (\d+) ([+-]\d{4})\Z", value)
        if m is None:
            return {"name": value, "email": "", "date": "1970-01-01T00:00:00Z"}
        when = datetime.fromtimestamp(int(m[3]), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        return {"name": m[1], "email": m[2], "date": when}

    def _git_commit(self, sha: str) -> dict[str, Any]:
        c = self._commit_doc(sha)
        h = c["headers"]
        first = {k: v for k, v in reversed(h)}
        sig = first.get("gpgsig") or first.get("gpgsig-sha256")
        payload = None
        if sig is not None:
            payload = "\n".join(line for line in c["raw"].split("\n\n", 1)[0].split("\n")
                                if not line.startswith(("gpgsig", " "))) + "\n\n" + c["message"]
        return {
            "sha": sha, "node_id": f"C_kwDO{_b64(self.repository_id)}{sha[:20]}", "url": self._api(f"/git/commits/{sha}"),
            "html_url": self._web(f"/commit/{sha}"), "author": self._person(first["author"]), "committer": self._person(first["committer"]),
            "tree": {"sha": first["tree"], "url": self._api(f"/git/trees/{first['tree']}")}, "message": c["message"].removesuffix("\n"),
            "parents": [{"sha": v, "url": self._api(f"/git/commits/{v}"), "html_url": self._web(f"/commit/{v}")}
                        for k, v in h if k == "parent"],
            "verification": {"verified": False, "reason": "unsigned" if sig is None else "unknown_key", "signature": sig,
                             "payload": payload, "verified_at": None},
        }

    def _simple_commit(self, sha: str) -> dict[str, Any] | None:
        if not self._is_commit(sha):
            return None
        c = self._git_commit(sha)
        return {"id": sha, "tree_id": c["tree"]["sha"], "message": c["message"], "timestamp": c["committer"]["date"],
                "author": {"name": c["author"]["name"], "email": c["author"]["email"]},
                "committer": {"name": c["committer"]["name"], "email": c["committer"]["email"]}}

    def _get_ref(self, *, ref: str, **_: Any) -> _Answer:
        if not _REF.match(ref) or not ref.startswith(("heads/", "tags/")):
            return _not_found()
        out = self._git("rev-parse", "--verify", "--quiet", f"refs/{ref}", ok=(0, 1, 128))
        sha = out.stdout.decode().strip()
        if out.returncode != 0 or not sha:
            return _not_found()
        kind = self._object_type(sha) or "commit"
        return _Answer(200, {"ref": f"refs/{ref}", "node_id": f"REF_kwDO{_b64(self.repository_id, zlib.crc32(ref.encode()))}",
                             "url": self._api(f"/git/refs/{ref}"),
                             "object": {"sha": sha, "type": kind, "url": self._api(f"/git/{kind}s/{sha}")}})

    def _resolve(self, ref: str) -> str | None:
        """A commit-ref (a SHA, ``heads/B``, ``tags/T``, a branch or tag name) as a commit, or None."""
        if _HEX.match(ref):
            return ref.lower() if self._is_commit(ref) else None
        if not _REF.match(ref):
            return None
        for full in ((f"refs/{ref}",) if ref.startswith(("heads/", "tags/")) else (f"refs/heads/{ref}", f"refs/tags/{ref}")):
            sha = self._read_ref(full) if full.startswith("refs/heads/") else self._rev(full)  # a tag may need peeling
            if sha is not None:
                return sha
        return None

    # ------------------------------------------------------------------ REST: pull requests
    def _mergeability(self, pull: Pull, base: str, head: str, *, consume: bool) -> tuple[bool | None, str, str | None]:
        """(mergeable, mergeable_state, merge_commit_sha) as GitHub reports them now."""
        if pull.merged:
            return None, "unknown", pull.merge_commit
        override: Any = "computed"
        seq = pull.mergeable_override
        if consume and seq is not None and len(seq) > 0:
            override = seq[0]
            if len(seq) > 1:
                pull.mergeable_override = list(seq[1:])
        if override is None or pull.state != "open":
            return None, "unknown", pull.last_test_merge
        trial = self._test_merge(base, head)
        if trial is not None:
            pull.last_test_merge = trial[1]
        mergeable = trial is not None if override == "computed" else bool(override)
        if not mergeable:
            return False, "dirty", None
        state = "blocked" if self.required_status and not self._required_ok(head) else "clean"
        return True, state, trial[1] if trial is not None else pull.last_test_merge

    def _required_ok(self, head: str) -> bool:
        latest = [s for s in self._statuses if s.sha == head and s.context == self.required_status]
        return bool(latest) and max(latest, key=lambda s: s.id).state == "success"

    def pull_json(self, number: int, *, consume: bool = False) -> dict[str, Any]:
        """The ``pull-request`` object of ``number`` now (``consume``: a read that takes a ``mergeable_override`` value)."""
        with self._lock:
            pull = self._pull(number)
            base, head = self._shas(pull)
            mergeable, mstate, merge_commit = self._mergeability(pull, base, head, consume=consume)
            commits, additions, deletions, files = self._stats(base, head)
            n = pull.number
            head_full = pull.head_full_name or self.full_name
            head_repo = None if pull.head_repo_deleted else self.repository("repository", head_full, fork=pull.head_full_name is not None)
            links = {"self": self._api(f"/pulls/{n}"), "html": self._web(f"/pull/{n}"), "issue": self._api(f"/issues/{n}"),
                     "comments": self._api(f"/issues/{n}/comments"), "review_comments": self._api(f"/pulls/{n}/comments"),
                     "review_comment": self._api("/pulls/comments{/number}"), "commits": self._api(f"/pulls/{n}/commits"),
                     "statuses": self._api(f"/statuses/{head}")}
            return {
                "url": links["self"], "id": pull.id, "node_id": self._node("PR", pull.id), "html_url": links["html"],
                "diff_url": self._web(f"/pull/{n}.diff"), "patch_url": self._web(f"/pull/{n}.patch"), "issue_url": links["issue"],
                "commits_url": links["commits"], "review_comments_url": links["review_comments"],
                "review_comment_url": links["review_comment"], "comments_url": links["comments"], "statuses_url": links["statuses"],
                "number": n, "state": pull.state, "locked": False, "title": pull.title, "user": self.user(pull.author),
                "body": pull.body, "labels": [], "milestone": None, "active_lock_reason": None, "created_at": pull.created_at,
                "updated_at": pull.updated_at, "closed_at": pull.closed_at, "merged_at": pull.merged_at,
                "merge_commit_sha": merge_commit, "assignee": None, "assignees": [], "requested_reviewers": [],
                "requested_teams": [],
                "head": {"label": f"{head_full.split('/')[0]}:{pull.head_ref}", "ref": pull.head_ref, "sha": head,
                         "user": self.user(head_full.split("/")[0]), "repo": head_repo},
                "base": {"label": f"{self.owner}:{pull.base_ref}", "ref": pull.base_ref, "sha": base, "user": self.user(self.owner),
                         "repo": self.repository("repository")},
                "_links": {k: {"href": v} for k, v in links.items()},
                "author_association": self._association(pull.author), "auto_merge": None, "draft": False, "merged": pull.merged,
                "mergeable": mergeable, "rebaseable": mergeable, "mergeable_state": mstate,
                "merged_by": None if pull.merged_by is None else self.user(pull.merged_by),
                "comments": sum(c.number == n for c in self._issue_comments.values()),
                "review_comments": sum(c.number == n and c.review_id is not None and self._reviews[c.review_id].state != "PENDING"
                                       for c in self._comments.values()),
                "maintainer_can_modify": False, "commits": commits, "additions": additions, "deletions": deletions,
                "changed_files": files,
            }

    def _get_pull(self, *, n: str, **_: Any) -> _Answer:
        if int(n) not in self.pulls:
            return _not_found()
        return _Answer(200, self.pull_json(int(n), consume=True))

    # reviews
    def _review_json(self, r: _Review) -> dict[str, Any]:
        html = self._web(f"/pull/{r.number}#pullrequestreview-{r.id}")
        doc: dict[str, Any] = {
            "id": r.id, "node_id": self._node("PRR", r.id), "user": self.user(r.login), "body": r.body, "state": r.state,
            "html_url": html, "pull_request_url": self._api(f"/pulls/{r.number}"),
            "_links": {"html": {"href": html}, "pull_request": {"href": self._api(f"/pulls/{r.number}")}},
            "commit_id": r.commit_id, "author_association": self._association(r.login),
        }
        if r.submitted_at is not None:
            doc["submitted_at"] = r.submitted_at
        return doc

    def _visible(self, r: _Review, login: str | None) -> bool:
        return r.state != "PENDING" or r.login == login  # a pending review is its author's alone

    def _list_reviews(self, *, n: str, login: str | None, query: Mapping[str, str], path: str, **_: Any) -> _Answer:
        if int(n) not in self.pulls:
            return _not_found()
        items = [self._review_json(r) for r in sorted(self._reviews.values(), key=lambda r: r.id)
                 if r.number == int(n) and self._visible(r, login)]
        page, headers = self._paginate(items, query, path)
        return _Answer(200, page, headers)

    def _get_review(self, *, n: str, id: str, login: str | None, **_: Any) -> _Answer:
        r = self._reviews.get(int(id))
        if r is None or r.number != int(n) or not self._visible(r, login):
            return _not_found()
        return _Answer(200, self._review_json(r))

    def _side_blob(self, base: str, commit: str, path: str, side: str) -> str | None:
        if side == "LEFT":
            mb = self._merge_base(base, commit) or base
            old = self._changes(base, commit).get(path, path)
            return None if old is None else self._blobs(mb).get(old)
        return self._blobs(commit).get(path)

    def _create_review(self, *, n: str, login: str, payload: Any, **_: Any) -> _Answer:
        number = int(n)
        if number not in self.pulls:
            return _not_found()
        pull = self.pulls[number]
        doc = payload or {}
        event = doc.get("event")
        text = doc.get("body") or ""
        errors: list[str] = []
        base, head = self._shas(pull)
        commit = (doc.get("commit_id") or head).lower()
        if doc.get("commit_id") is not None:
            if not self._is_commit(commit):
                return _error(422, "Unprocessable Entity", errors=[f"No commit found for SHA: {doc['commit_id']}"])
            if not any(commit == h or self._git("merge-base", "--is-ancestor", commit, h, ok=(0, 1)).returncode == 0
                       for h in pull.heads_seen):
                return _error(422, "Unprocessable Entity", errors=["Commit is not part of the pull request"])
        if event in ("REQUEST_CHANGES", "COMMENT") and not text:
            errors.append(f"Body is required when using {event}")
        if event in ("APPROVE", "REQUEST_CHANGES") and login == pull.author:
            errors.append("Can not approve your own pull request" if event == "APPROVE"
                          else "Can not request changes on your own pull request")
        if event is None and any(r.state == "PENDING" and r.login == login and r.number == number for r in self._reviews.values()):
            errors.append("User can only have one pending review per pull request")
        if len(text) > MAX_BODY_CHARS:
            errors.append(f"Body is too long (maximum is {MAX_BODY_CHARS} characters)")
        mb = self._merge_base(base, commit) or base
        changes = self._changes(base, commit)
        inline = doc.get("comments") or []
        for i, c in enumerate(inline):
            errors += [f"comments[{i}]: {e}" for e in self._comment_problems(c, base, mb, commit, changes)]
        if errors:
            return _error(422, "Unprocessable Entity", errors=errors)
        rid = self._next("review")
        state = _STATES.get(event, "PENDING") if event is not None else "PENDING"
        review = _Review(rid, number, login, state, text, commit, None if state == "PENDING" else self._now())
        self._reviews[rid] = review
        for c in inline:
            side = c.get("side") or "RIGHT"
            comment = _Comment(self._next("comment"), number, rid, c["path"], c["line"], side, c["body"], commit, login,
                               self._side_blob(base, commit, c["path"], side), c.get("start_line"),
                               c.get("start_side") or (side if c.get("start_line") is not None else None))
            self._comments[comment.id] = comment
            if state != "PENDING":
                thread = _Thread(self._next("thread"), number, comment)
                self._threads[thread.db_id] = thread
        return _Answer(200, self._review_json(review))

    def _comment_problems(self, c: Mapping[str, Any], base: str, mb: str, commit: str, changes: Mapping[str, str | None]) -> list[str]:
        path = str(c.get("path"))
        if c.get("line") is None:
            return ["a comment needs line (the fake does not map the deprecated position)" if "position" in c
                    else "Line could not be resolved"]
        if path not in changes:
            return ["Path could not be resolved"]
        if len(c.get("body") or "") > MAX_BODY_CHARS:
            return [f"Body is too long (maximum is {MAX_BODY_CHARS} characters)"]
        problems = []
        side = c.get("side") or "RIGHT"
        start_side = c.get("start_side") or side
        for what, line, s in (("line", c["line"], side), ("start_line", c.get("start_line"), start_side)):
            if line is None:
                continue
            if s not in ("LEFT", "RIGHT"):
                problems.append(f"{what.replace('line', 'side')} must be LEFT or RIGHT")
                continue
            blob = self._side_blob(base, commit, path, s)
            if blob is None or not 1 <= line <= self._line_count(blob):
                problems.append("Line could not be resolved" if what == "line" else "Start line could not be resolved")
            elif self.hunk_lines and line not in self._hunk_lines(mb, commit, changes[path], path)[0 if s == "LEFT" else 1]:
                problems.append("Pull request review thread line must be part of the diff")
        if c.get("start_line") is not None and start_side == side and c["start_line"] >= c["line"]:
            problems.append("start_line must precede line")
        return problems

    # merge
    def _merge(self, *, n: str, login: str, payload: Any, **_: Any) -> _Answer:
        number = int(n)
        if number not in self.pulls:
            return _not_found()
        pull = self.pulls[number]
        doc = payload or {}
        if pull.state != "open" or pull.merged:
            return _error(405, "Pull Request is not mergeable")
        base, head = self._shas(pull)
        if doc.get("sha") is not None and doc["sha"] != head:
            return _error(409, "Head branch was modified. Review and try the merge again.")
        method = doc.get("merge_method") or "merge"
        if method == "rebase":
            return _error(405, "Rebase merges are not allowed on this repository")
        if self.required_status is not None and not self._required_ok(head):
            return _error(405, f'Required status check "{self.required_status}" is expected.')
        trial = self._test_merge(base, head)
        if trial is None:
            return _error(405, "Pull Request is not mergeable")
        tree = trial[0]
        when = self._now()
        if method == "merge":
            source = f"{(pull.head_full_name or self.full_name).split('/')[0]}/{pull.head_ref}"
            title = doc.get("commit_title") or f"Merge pull request #{number} from {source}"
            message = doc.get("commit_message") if doc.get("commit_message") is not None else pull.title
            parents = ["-p", base, "-p", head]
            author = login
        else:  # squash
            title = doc.get("commit_title") or f"{pull.title} (#{number})"
            subjects = self._git("log", "--format=%s", "--reverse", f"{base}..{head}").stdout.decode().split("\n")
            message = doc.get("commit_message") if doc.get("commit_message") is not None else "\n\n".join(
                f"* {s}" for s in subjects if s)
            parents = ["-p", base]
            author = pull.author
        uid = self.user(author)["id"]
        env = {"GIT_AUTHOR_NAME": author, "GIT_AUTHOR_EMAIL": f"{uid}+{author}@users.noreply.github.com", "GIT_AUTHOR_DATE": when,
               "GIT_COMMITTER_NAME": "GitHub", "GIT_COMMITTER_EMAIL": "noreply@github.com", "GIT_COMMITTER_DATE": when}
        text = title + (f"\n\n{message}" if message else "") + "\n"
        sha = self._git("commit-tree", tree, *parents, input=text.encode(), env=env).stdout.decode().strip()
        moved = self._git("update-ref", "-m", f"merge pull request #{number}", f"refs/heads/{pull.base_ref}", sha, base, ok=(0, 1, 128))
        if moved.returncode != 0:
            return _error(405, "Base branch was modified. Review and try the merge again.")
        pull.frozen = (base, head)
        pull.state, pull.merged, pull.merged_at, pull.closed_at = "closed", True, when, when
        pull.merged_by, pull.merge_commit, pull.updated_at = login, sha, when
        return _Answer(200, {"sha": sha, "merged": True, "message": "Pull Request successfully merged"})

    # ------------------------------------------------------------------ REST: issue comments, statuses, environments
    def _list_issue_comments(self, *, n: str, query: Mapping[str, str], path: str, **_: Any) -> _Answer:
        if int(n) not in self.pulls:
            return _not_found()
        items = []
        for c in sorted(self._issue_comments.values(), key=lambda c: c.id):
            if c.number != int(n):
                continue
            items.append({"id": c.id, "node_id": self._node("IC", c.id), "url": self._api(f"/issues/comments/{c.id}"),
                          "body": c.body, "html_url": self._web(f"/pull/{c.number}#issuecomment-{c.id}"), "user": self.user(c.login),
                          "created_at": c.created_at, "updated_at": c.created_at, "issue_url": self._api(f"/issues/{c.number}"),
                          "author_association": self._association(c.login)})
        page, headers = self._paginate(items, query, path)
        return _Answer(200, page, headers)

    def _status_json(self, s: _Status) -> dict[str, Any]:
        creator = self.user(s.login)
        return {"url": self._api(f"/statuses/{s.sha}"), "avatar_url": creator["avatar_url"], "id": s.id,
                "node_id": self._node("SC", s.id), "state": s.state, "description": s.description, "target_url": s.target_url,
                "context": s.context, "created_at": s.created_at, "updated_at": s.created_at, "creator": creator}

    def _create_status(self, *, sha: str, login: str, payload: Any, **_: Any) -> _Answer:
        doc = payload or {}
        if not self._is_commit(sha):
            return _error(422, f"No commit found for SHA: {sha}")
        state = doc.get("state")
        if state not in STATUS_STATES:
            return _error(422, "Validation Failed", errors=[{"resource": "Status", "code": "custom", "field": "state",
                                                             "message": "state is not included in the list"}])
        description = doc.get("description")
        if description is not None and len(description) > 140:
            return _error(422, "Validation Failed", errors=[{"resource": "Status", "code": "custom", "field": "description",
                                                             "message": "description is too long (maximum is 140 characters)"}])
        s = _Status(self._next("status"), sha.lower(), state, description, doc.get("target_url"), doc.get("context") or "default",
                    login, self._now())
        self._statuses.append(s)
        return _Answer(201, self._status_json(s))

    def _list_statuses(self, *, ref: str, query: Mapping[str, str], path: str, **_: Any) -> _Answer:
        sha = self._resolve(ref)
        if sha is None:
            return _not_found()
        items = [self._status_json(s) for s in sorted(self._statuses, key=lambda s: -s.id) if s.sha == sha]
        page, headers = self._paginate(items, query, path)
        return _Answer(200, page, headers)

    def _combined_status(self, *, ref: str, **_: Any) -> _Answer:
        sha = self._resolve(ref)
        if sha is None:
            return _not_found()
        latest: dict[str, _Status] = {}
        for s in sorted(self._statuses, key=lambda s: s.id):
            if s.sha == sha:
                latest[s.context] = s
        states = {s.state for s in latest.values()}
        state = "failure" if states & {"error", "failure"} else "pending" if "pending" in states or not states else "success"
        statuses = [{k: v for k, v in self._status_json(s).items() if k != "creator"} for s in latest.values()]
        for item in statuses:
            item["required"] = item["context"] == self.required_status if self.required_status else None
        return _Answer(200, {"state": state, "statuses": statuses, "sha": sha, "total_count": len(statuses),
                             "repository": self.repository("minimal-repository"), "commit_url": self._api(f"/commits/{sha}"),
                             "url": self._api(f"/commits/{sha}/status")})

    def _get_environment(self, *, env: str, **_: Any) -> _Answer:
        doc = self.environments.get(env.lower())
        return _not_found() if doc is None else _Answer(200, copy.deepcopy(doc))

    # ------------------------------------------------------------------ REST: Actions
    def _list_runs(self, *, wf: str, query: Mapping[str, str], path: str, **_: Any) -> _Answer:
        default = self._read_ref(f"refs/heads/{self.default_branch}")
        if default is not None:  # a workflow file of the default branch is a workflow, runs or not
            for p in self._blobs(default):
                if re.fullmatch(r"\.github/workflows/[^/]+\.ya?ml", p):
                    self._workflows.setdefault(p, 161_335 + len(self._workflows))
        known = {p.rsplit("/", 1)[-1]: i for p, i in self._workflows.items()}
        if wf not in known and wf not in {str(i) for i in known.values()}:
            return _not_found()
        wid = known.get(wf, int(wf) if wf.isdigit() else -1)
        runs = [r for r in sorted(self._runs.values(), key=lambda r: -r["id"]) if r.get("workflow_id") == wid]
        for key, fieldname in (("event", "event"), ("branch", "head_branch"), ("head_sha", "head_sha")):
            if key in query:
                runs = [r for r in runs if r.get(fieldname) == query[key]]
        if "status" in query:
            runs = [r for r in runs if query["status"] in (r.get("status"), r.get("conclusion"))]
        page, headers = self._paginate(runs, query, path)
        return _Answer(200, {"total_count": len(runs), "workflow_runs": copy.deepcopy(page)}, headers)

    def _list_jobs(self, *, run: str, att: str, query: Mapping[str, str], path: str, **_: Any) -> _Answer:
        r = self._runs.get(int(run))
        if r is None or not 1 <= int(att) <= int(r.get("run_attempt") or 1):
            return _not_found()
        jobs = self._jobs.get((int(run), int(att)), [])
        page, headers = self._paginate(jobs, query, path)
        return _Answer(200, {"total_count": len(jobs), "jobs": copy.deepcopy(page)}, headers)

    # ------------------------------------------------------------------ GraphQL
    @staticmethod
    def _slug(login: str) -> str:
        return login.removesuffix("[bot]")  # GraphQL names a bot by its slug

    def _graphql(self, login: str | None, body: bytes) -> _Answer:
        if login is None:
            return _error(401, "This endpoint requires you to be authenticated.")
        try:
            doc = json.loads(body)
        except ValueError:
            return _Answer(200, {"errors": [{"message": "Problems parsing JSON"}]}, op="graphql:errors")
        query = doc.get("query") if isinstance(doc, dict) else None
        variables = (doc.get("variables") if isinstance(doc, dict) else None) or {}
        norm = " ".join(query.split()) if isinstance(query, str) else ""
        if norm == " ".join(NODES_QUERY.split()):
            return self._graphql_nodes(variables)
        if norm == " ".join(THREADS_QUERY.split()):
            return self._graphql_threads(variables)
        return _Answer(200, {"errors": [{"message": "the fake GitHub answers exactly two queries: nodes(ids:) of reviews and "
                                                    "a pull request's reviewThreads"}]}, op="graphql:errors")

    def _graphql_nodes(self, variables: Mapping[str, Any]) -> _Answer:
        ids = variables.get("ids")
        if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
            return _Answer(200, {"errors": [{"message": "Variable $ids of type [ID!]! was provided invalid value",
                                             "locations": [{"line": 1, "column": 7}]}]}, op="graphql:errors")
        if len(ids) > 100:
            return _Answer(200, {"errors": [{"type": "EXCESSIVE_PAGINATION",
                                             "message": "You may not request more than 100 nodes at once."}]}, op="graphql:errors")
        index: dict[str, dict[str, Any]] = {}
        for r in self._reviews.values():
            index[self._node("PRR", r.id)] = {
                "__typename": "PullRequestReview", "id": self._node("PRR", r.id), "fullDatabaseId": str(r.id),
                "lastEditedAt": r.edited_at, "editor": None if r.editor is None else {"login": self._slug(r.editor)},
                "includesCreatedEdit": r.edited_at is not None}
        for t in self._threads.values():
            index[self._node("PRRT", t.db_id)] = {"__typename": "PullRequestReviewThread", "id": self._node("PRRT", t.db_id)}
        for c in self._comments.values():
            index[self._node("PRRC", c.id)] = {"__typename": "PullRequestReviewComment", "id": self._node("PRRC", c.id)}
        for p in self.pulls.values():
            index[self._node("PR", p.id)] = {"__typename": "PullRequest", "id": self._node("PR", p.id)}
        for ic in self._issue_comments.values():
            index[self._node("IC", ic.id)] = {"__typename": "IssueComment", "id": self._node("IC", ic.id)}
        nodes = [copy.deepcopy(index.get(i)) for i in ids]
        errors = [{"type": "NOT_FOUND", "path": ["nodes", k], "locations": [{"line": 1, "column": 23}],
                   "message": f"Could not resolve to a node with the global id of '{i}'."} for k, i in enumerate(ids) if i not in index]
        return _Answer(200, {"data": {"nodes": nodes}, **({"errors": errors} if errors else {})}, op="graphql:nodes", ids=list(ids))

    @staticmethod
    def _cursor(i: int) -> str:
        return base64.b64encode(f"cursor:v2:{i}".encode()).decode()

    def _graphql_threads(self, v: Mapping[str, Any]) -> _Answer:
        owner, name, number, cursor = v.get("owner"), v.get("name"), v.get("number"), v.get("cursor")
        for var, value, ok in (("owner", owner, isinstance(owner, str)), ("name", name, isinstance(name, str)),
                               ("number", number, type(number) is int), ("cursor", cursor, cursor is None or isinstance(cursor, str))):
            if not ok:
                kind = {"number": "Int!", "cursor": "String"}.get(var, "String!")
                return _Answer(200, {"errors": [{"message": f"Variable ${var} of type {kind} was provided invalid value {value!r}"}]},
                               op="graphql:errors")
        if f"{owner}/{name}".lower() != self.full_name.lower():
            return _Answer(200, {"data": {"repository": None}, "errors": [{
                "type": "NOT_FOUND", "path": ["repository"], "locations": [{"line": 1, "column": 90}],
                "message": f"Could not resolve to a Repository with the name '{owner}/{name}'."}]}, op="graphql:threads")
        pull = self.pulls.get(number)  # type: ignore[arg-type]
        if pull is None:
            return _Answer(200, {"data": {"repository": {"pullRequest": None}}, "errors": [{
                "type": "NOT_FOUND", "path": ["repository", "pullRequest"], "locations": [{"line": 1, "column": 129}],
                "message": f"Could not resolve to a PullRequest with the number of {number}."}]}, op="graphql:threads")
        start = 0
        if cursor is not None:
            try:
                raw = base64.b64decode(cursor, validate=True).decode()
                if not raw.startswith("cursor:v2:"):
                    raise ValueError(raw)
                start = int(raw.removeprefix("cursor:v2:")) + 1
            except ValueError:
                return _Answer(200, {"data": {"repository": {"pullRequest": None}}, "errors": [{
                    "path": ["repository", "pullRequest", "reviewThreads"], "locations": [{"line": 1, "column": 160}],
                    "message": f"`{cursor}` does not appear to be a valid cursor."}]}, op="graphql:threads")
        base, head = self._shas(pull)
        threads = sorted((t for t in self._threads.values() if t.number == pull.number), key=lambda t: t.db_id)
        size = min(100, self.page_size)
        page = threads[start : start + size]
        nodes = []
        for t in page:
            c = t.comment
            outdated = self._side_blob(base, head, c.path, c.side) != c.blob
            nodes.append({"id": self._node("PRRT", t.db_id), "isResolved": t.resolved, "isOutdated": outdated, "path": c.path,
                          "line": None if outdated else c.line,
                          "comments": {"nodes": [{"author": {"login": self._slug(c.login)},
                                                  "url": self._web(f"/pull/{pull.number}#discussion_r{c.id}")}]}})
        info = {"hasNextPage": start + size < len(threads), "endCursor": self._cursor(start + len(page) - 1) if page else None}
        return _Answer(200, {"data": {"repository": {"pullRequest": {"reviewThreads": {"pageInfo": info, "nodes": nodes}}}}},
                       op="graphql:threads")


@contextmanager
def serving(repo_dir: str | os.PathLike[str], **options: Any) -> Iterator[FakeGitHub]:
    """A started fake, closed afterwards; on a clean exit its :attr:`~FakeGitHub.schema_errors` must be empty.

    A fixture: ``with serving(repo) as gh: yield gh``.
    """
    with FakeGitHub(repo_dir, **options) as fake:
        yield fake
        fake.assert_schema_clean()


__all__ = ["DEFAULT_TOKENS", "FAULT_KINDS", "NODES_QUERY", "THREADS_QUERY", "FakeGitHub", "FakeGitHubError", "Fault", "Logged",
           "Pull", "serving"]
