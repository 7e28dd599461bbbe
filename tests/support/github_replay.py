"""A local HTTP server replaying recorded GitHub REST API response sequences, and builders
for responses shaped like the public API (pull request, issue comments, reviews, workflow runs,
jobs, environments).

Each request target (path?query, byte for byte; ``"POST /graphql"`` for a POST) maps to a
sequence of responses served in order; the last one repeats. A GraphQL ``nodes(ids:)`` POST
with no route set is answered from :attr:`ReplayServer.nodes` the way GitHub answers it
(``null`` plus a ``NOT_FOUND`` error for an unknown id); a review served over REST becomes an
unedited node unless the test put another node under its id, as on GitHub, where both APIs
read one store. Every request is logged with its
headers and body so tests can assert the read order and what was sent (for example the token,
which must reach only this server).
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

REPO = "octo/widgets"
PR = 42
HEAD = "3f786850e387550fdab836ed7e6dc881de23001b"
NEW_HEAD = "89e6c98d92887913cadf06b2adb97f26cde4849b"
OLD_HEAD = "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"
BASE_SHA = "d670460b4b4aece5915caf5c68d12f560a9fe3e4"
APP = "opencode-review[bot]"
WORKFLOW = ".github/workflows/opencode-code-review.yml"
JOB = "opencode-review-same-repo"
ENVIRONMENT = "attest-review-trusted"
RUN_ID = 9_876_543_210
RUN_NUMBER = 318

PR_PATH = f"/repos/{REPO}/pulls/{PR}"
REVIEWS_PATH = f"{PR_PATH}/reviews?per_page=100"
COMMENTS_PATH = f"/repos/{REPO}/issues/{PR}/comments?per_page=100"
ENV_PATH = f"/repos/{REPO}/environments/{ENVIRONMENT}"
RUNS_PATH = f"/repos/{REPO}/actions/workflows/opencode-code-review.yml/runs?event=pull_request_target&per_page=100"


def jobs_path(run_id: int = RUN_ID, attempt: int = 1) -> str:
    return f"/repos/{REPO}/actions/runs/{run_id}/attempts/{attempt}/jobs?per_page=100"


@dataclass
class Response:
    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    hold: threading.Event | None = None  # block the handler until set (timeouts)
    chunked: bool = False  # Transfer-Encoding: chunked, so no Content-Length announces the size
    trickle: float = 0.0  # send one byte every `trickle` seconds (a slow-loris server) ...
    trickle_part: str = "head"  # ... of the status line and headers ("head") or of the body ("body")


def ok(value: Any, *, link: str | None = None) -> Response:
    headers = {"Content-Type": "application/json; charset=utf-8"}
    if link is not None:
        headers["Link"] = link
    return Response(200, json.dumps(value).encode(), headers)


def raw(body: bytes, status: int = 200, content_type: str = "application/json; charset=utf-8", **headers: str) -> Response:
    return Response(status, body, {"Content-Type": content_type, **headers})


def error(status: int, message: str = "Server Error") -> Response:
    return Response(status, json.dumps({"message": message, "documentation_url": "https://docs.github.com/rest"}).encode(), {"Content-Type": "application/json; charset=utf-8"})


@dataclass
class Logged:
    target: str
    headers: dict[str, str]
    method: str = "GET"
    body: bytes = b""


class ReplayServer:
    def __init__(self) -> None:
        self.routes: dict[str, list[Response]] = {}
        self.nodes: dict[str, dict[str, Any]] = {}  # GraphQL node id -> node, for nodes(ids:)
        self.log: list[Logged] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()  # ends every trickle when the server closes
        replay = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                self._serve("GET", b"")

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                self._serve("POST", self.rfile.read(length))

            def _serve(self, method: str, body: bytes) -> None:
                key = self.path if method == "GET" else f"{method} {self.path}"
                with replay._lock:
                    replay.log.append(Logged(self.path, {k: v for k, v in self.headers.items()}, method, body))
                    seq = replay.routes.get(key)
                    if seq:
                        resp = seq.pop(0) if len(seq) > 1 else seq[0]
                    elif key == "POST /graphql":
                        resp = replay._answer_nodes(body)
                    else:
                        resp = error(404, "Not Found")
                    replay._learn_reviews(resp)
                if resp.hold is not None:
                    resp.hold.wait(30)
                if resp.trickle:
                    self._trickle(resp)
                    return
                self.send_response(resp.status)
                for k, v in resp.headers.items():
                    self.send_header(k, v)
                if resp.chunked:
                    self.send_header("Transfer-Encoding", "chunked")
                else:
                    self.send_header("Content-Length", str(len(resp.body)))
                self.send_header("Connection", "close")
                self.end_headers()
                try:
                    if resp.chunked:
                        for i in range(0, len(resp.body), 1000):
                            piece = resp.body[i : i + 1000]
                            self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                        self.wfile.write(b"0\r\n\r\n")
                    else:
                        self.wfile.write(resp.body)
                except OSError:
                    pass

            def _trickle(self, resp: Response) -> None:
                """Write the response by hand, one byte at a time for the chosen part."""
                head = f"HTTP/1.1 {resp.status} {self.responses.get(resp.status, ('',))[0]}\r\n"
                for k, v in {**resp.headers, "Content-Length": str(len(resp.body)), "Connection": "close"}.items():
                    head += f"{k}: {v}\r\n"
                slow, fast = (head.encode("latin-1") + b"\r\n", resp.body) if resp.trickle_part == "head" else (resp.body, b"")
                try:
                    if resp.trickle_part == "body":
                        self.wfile.write(head.encode("latin-1") + b"\r\n")
                    for i in range(len(slow)):
                        if replay._stopping.wait(resp.trickle):
                            return
                        self.wfile.write(slow[i : i + 1])
                    self.wfile.write(fast)
                except OSError:
                    pass  # the client gave up: that is what the test wants

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
        self._thread.start()

    def set(self, target: str, *responses: Response) -> None:
        self.routes[target] = list(responses)

    def _learn_reviews(self, resp: Response) -> None:
        if resp.status != 200 or not resp.body.startswith(b"["):
            return
        for item in json.loads(resp.body):
            if isinstance(item, dict) and isinstance(item.get("node_id"), str) and "commit_id" in item:
                self.nodes.setdefault(item["node_id"], review_node(item))

    def _answer_nodes(self, body: bytes) -> Response:
        """GitHub's answer to ``query($ids: [ID!]!) { nodes(ids: $ids) { ... } }``."""
        ids = json.loads(body)["variables"]["ids"]
        nodes = [self.nodes.get(i) for i in ids]
        errors = [{"type": "NOT_FOUND", "path": ["nodes", n], "message": f"Could not resolve to a node with the global id of '{i}'."}
                  for n, i in enumerate(ids) if i not in self.nodes]
        return ok({"data": {"nodes": nodes}, **({"errors": errors} if errors else {})})

    @property
    def targets(self) -> list[str]:
        return [entry.target if entry.method == "GET" else f"{entry.method} {entry.target}" for entry in self.log]

    def close(self) -> None:
        self._stopping.set()
        self.httpd.shutdown()
        self.httpd.server_close()


# ----------------------------------------------------------------------------- API shapes

def repo_obj(full_name: str = REPO, fork: bool = False) -> dict[str, Any]:
    owner = full_name.split("/")[0]
    return {"id": 1296269, "name": full_name.split("/")[1], "full_name": full_name, "fork": fork, "private": False, "owner": {"login": owner, "type": "Organization"}}


def pull(head: str = HEAD, head_repo: str | None = REPO, *, number: int = PR, base_repo: str = REPO, base_ref: str = "main",
         base_sha: str = BASE_SHA) -> dict[str, Any]:
    return {
        "url": f"https://api.github.com/repos/{REPO}/pulls/{number}",
        "id": 1_934_567,
        "number": number,
        "state": "open",
        "title": "Widget frobnication",
        "user": {"login": "alice", "type": "User"},
        "head": {"label": "octo:frob", "ref": "frob", "sha": head, "repo": None if head_repo is None else repo_obj(head_repo, fork=head_repo != base_repo)},
        "base": {"label": f"octo:{base_ref}", "ref": base_ref, "sha": base_sha, "repo": repo_obj(base_repo)},
        "mergeable_state": "clean",
    }


def _base_line(base: str | None) -> str:
    return "" if base is None else f"<!-- opencode-review: base sha={base} -->\n"


def _head_line(head: str | None) -> str:
    return "" if head is None else f"<!-- opencode-review: head sha={head} -->\n"


def clean_body(run_id: int = RUN_ID, attempt: int = 1, base: str | None = BASE_SHA, head: str | None = HEAD) -> str:
    """The wrapper's clean body; ``base=None`` (``head=None``) is a body from before the base (head) marker."""
    return (
        f"**OpenCode review**: no findings for head `{(head or HEAD)[:12]}`.\n\n"
        "<!-- opencode-review: clean -->\n"
        f"<!-- opencode-review: workflow-run id={run_id} attempt={attempt} -->\n"
        + _base_line(base) + _head_line(head)
    )


def findings_body(run_id: int = RUN_ID, attempt: int = 1, base: str | None = BASE_SHA, head: str | None = HEAD) -> str:
    """The wrapper's findings body; posted as an issue comment it is a fallback comment."""
    return (
        "**OpenCode review**: 1 finding. Action required.\n\n1. **major** `a.py`:3: bug\n\n"
        "<!-- opencode-review: findings count=1 -->\n"
        f"<!-- opencode-review: workflow-run id={run_id} attempt={attempt} -->\n"
        + _base_line(base) + _head_line(head)
    )


def diagnostic_body(run_id: int = RUN_ID, attempt: int = 1, base: str | None = BASE_SHA, head: str | None = HEAD) -> str:
    """The wrapper's diagnostic body (the model result was not one valid findings block)."""
    return (
        f"**OpenCode review**: diagnostic for head `{(head or HEAD)[:12]}`: the model result was not one valid findings block.\n\n"
        "<!-- opencode-review: diagnostic -->\n"
        f"<!-- opencode-review: workflow-run id={run_id} attempt={attempt} -->\n"
        + _base_line(base) + _head_line(head)
    )


_review_ids = iter(range(2_000_000_001, 2_100_000_000))


def review(body: str | None = None, *, login: str = APP, state: str = "COMMENTED", commit: str | None = HEAD, review_id: int | None = None, user_type: str = "Bot") -> dict[str, Any]:
    rid = review_id if review_id is not None else next(_review_ids)
    return {
        "id": rid,
        "node_id": f"PRR_kwDOAAAB{rid}",
        "user": {"login": login, "id": 41898282, "type": user_type},
        "body": clean_body() if body is None else body,
        "state": state,
        "html_url": f"https://github.com/{REPO}/pull/{PR}#pullrequestreview-1",
        "commit_id": commit,
        "submitted_at": "2026-07-23T15:00:00Z",
        "author_association": "NONE",
    }


_comment_ids = iter(range(3_000_000_001, 3_100_000_000))


def comment(body: str, *, login: str = APP, comment_id: int | None = None, user_type: str = "Bot") -> dict[str, Any]:
    """An issue comment of the pull request, as ``GET /repos/{repo}/issues/{n}/comments`` lists it."""
    cid = comment_id if comment_id is not None else next(_comment_ids)
    return {
        "id": cid,
        "node_id": f"IC_kwDOAAAB{cid}",
        "url": f"https://api.github.com/repos/{REPO}/issues/comments/{cid}",
        "html_url": f"https://github.com/{REPO}/pull/{PR}#issuecomment-{cid}",
        "issue_url": f"https://api.github.com/repos/{REPO}/issues/{PR}",
        "user": {"login": login, "id": 41898283, "type": user_type},
        "body": body,
        "created_at": "2026-07-23T15:01:00Z",
        "updated_at": "2026-07-23T15:01:00Z",
        "author_association": "NONE",
        "performed_via_github_app": None,
    }


def environment(name: str = ENVIRONMENT, *, protected_branches: bool = True, custom_branch_policies: bool = False,
                unrestricted: bool = False) -> dict[str, Any]:
    """A deployment environment as ``GET /repos/{repo}/environments/{name}`` answers it;
    ``unrestricted`` gives ``deployment_branch_policy: null`` (any branch may deploy)."""
    policy = None if unrestricted else {"protected_branches": protected_branches, "custom_branch_policies": custom_branch_policies}
    return {
        "id": 161088068,
        "node_id": "EN_kwDOAAAB",
        "name": name,
        "url": f"https://api.github.com/repos/{REPO}/environments/{name}",
        "html_url": f"https://github.com/{REPO}/deployments/activity_log?environments_filter={name}",
        "created_at": "2026-07-01T10:00:00Z",
        "updated_at": "2026-07-01T10:00:00Z",
        "protection_rules": [{"id": 3736, "node_id": "GA_kwDOAAAB", "type": "branch_policy"}],
        "deployment_branch_policy": policy,
    }


def review_node(rev: dict[str, Any], *, edited_at: str | None = None, editor: str | None = None) -> dict[str, Any]:
    """The GraphQL PullRequestReview node of a REST review, as ``nodes(ids:)`` returns it.

    GraphQL names a bot by its slug, without the ``[bot]`` suffix REST uses.
    """
    return {
        "__typename": "PullRequestReview",
        "id": rev["node_id"],
        "fullDatabaseId": str(rev["id"]),
        "lastEditedAt": edited_at,
        "editor": None if editor is None else {"login": editor},
        "includesCreatedEdit": edited_at is not None,
    }


def run(
    run_id: int = RUN_ID,
    attempt: int | None = 1,
    *,
    run_number: int = RUN_NUMBER,
    status: str = "completed",
    conclusion: str | None = "success",
    event: str = "pull_request_target",
    path: str = WORKFLOW,
    title: str | None = None,
    pr_refs: list[tuple[int, str]] | None = None,
) -> dict[str, Any]:
    """A workflow run; by default bound to PR #42 head HEAD through ``pull_requests`` (pass
    ``pr_refs=[]`` for a run the API associates with no pull request) and titled by the run-name."""
    refs = [(PR, HEAD)] if pr_refs is None else pr_refs
    obj: dict[str, Any] = {
        "id": run_id,
        "name": "OpenCode code review",
        "display_title": f"OpenCode review PR #{PR} head {HEAD}" if title is None else title,
        "head_branch": "main",
        "head_sha": BASE_SHA,  # pull_request_target runs on the base commit
        "path": path,
        "run_number": run_number,
        "event": event,
        "status": status,
        "conclusion": conclusion,
        "workflow_id": 161335,
        "pull_requests": [{"id": 1, "number": n, "head": {"ref": "frob", "sha": sha}, "base": {"ref": "main", "sha": BASE_SHA}} for n, sha in refs],
        "created_at": "2026-07-23T14:58:00Z",
    }
    if attempt is not None:
        obj["run_attempt"] = attempt
    return obj


def runs_page(*runs: dict[str, Any]) -> dict[str, Any]:
    return {"total_count": len(runs), "workflow_runs": list(runs)}


def job(name: str = JOB, *, run_id: int = RUN_ID, attempt: int | None = 1, status: str = "completed", conclusion: str | None = "success", job_id: int | None = None) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "id": job_id if job_id is not None else abs(hash((name, run_id, attempt))) % 10**10,
        "run_id": run_id,
        "name": name,
        "status": status,
        "conclusion": conclusion,
        "workflow_name": "OpenCode code review",
        "head_sha": BASE_SHA,
        "steps": [],
    }
    if attempt is not None:
        obj["run_attempt"] = attempt
    return obj


def jobs_page(*jobs: dict[str, Any]) -> dict[str, Any]:
    return {"total_count": len(jobs), "jobs": list(jobs)}


def _install_pages(srv: ReplayServer, path: str, pages: list[list[dict[str, Any]]]) -> None:
    for i, page in enumerate(pages):
        target = path if i == 0 else f"{path}&page={i + 1}"
        link = None
        if i + 1 < len(pages):
            link = f'<{srv.url}{path}&page={i + 2}>; rel="next", <{srv.url}{path}&page={len(pages)}>; rel="last"'
        srv.set(target, ok(page, link=link))


def install_trusted(srv: ReplayServer, *, review_pages: list[list[dict[str, Any]]] | None = None, runs: list[dict[str, Any]] | None = None,
                    jobs: list[dict[str, Any]] | None = None, first_pr: dict[str, Any] | None = None, final_pr: dict[str, Any] | None = None,
                    attempt: int = 1, comment_pages: list[list[dict[str, Any]]] | None = None, env: Response | None = None) -> None:
    """The trusted case (two review pages, a human review, an unrelated run, non-actionable
    comments, the protected environment), overridable per stage.

    Every review is also a GraphQL node, unedited; edit one with ``srv.nodes[id] = review_node(..., edited_at=...)``.
    The default comments are all ignored by the decision: a person's, the App's no-findings
    comment for this head, and the App's diagnostic comment for an older head.
    """
    if comment_pages is None:
        comment_pages = [[comment("Thanks, looks good.", login="alice", user_type="User"), comment(clean_body()),
                          comment(diagnostic_body(head=OLD_HEAD))]]
    if review_pages is None:
        review_pages = [
            [review("Looks fine to me.", login="alice", user_type="User", state="APPROVED")],
            [review()],
        ]
    if runs is None:
        runs = [run(RUN_ID + 5, 1, run_number=RUN_NUMBER + 1, title=f"OpenCode review PR #{PR + 1} head {NEW_HEAD}", pr_refs=[(PR + 1, NEW_HEAD)]), run()]
    if jobs is None:
        jobs = [job("opencode-review-fork", conclusion="skipped", attempt=attempt), job(attempt=attempt)]
    first = pull() if first_pr is None else first_pr
    srv.set(PR_PATH, ok(first), ok(first if final_pr is None else final_pr))
    _install_pages(srv, COMMENTS_PATH, comment_pages)
    _install_pages(srv, REVIEWS_PATH, review_pages)
    srv.set(RUNS_PATH, ok(runs_page(*runs)))
    srv.set(jobs_path(RUN_ID, attempt), ok(jobs_page(*jobs)))
    srv.set(ENV_PATH, ok(environment()) if env is None else env)
