"""A local HTTP server replaying recorded GitHub REST API response sequences, and builders
for responses shaped like the public API (pull request, reviews, workflow runs, jobs).

Each request target (path?query, byte for byte) maps to a sequence of responses served in
order; the last one repeats. Every request is logged with its headers so tests can assert
the read order and what was sent (for example the token, which must reach only this server).
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
RUN_ID = 9_876_543_210
RUN_NUMBER = 318

PR_PATH = f"/repos/{REPO}/pulls/{PR}"
REVIEWS_PATH = f"{PR_PATH}/reviews?per_page=100"
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


class ReplayServer:
    def __init__(self) -> None:
        self.routes: dict[str, list[Response]] = {}
        self.log: list[Logged] = []
        self._lock = threading.Lock()
        replay = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                with replay._lock:
                    replay.log.append(Logged(self.path, {k: v for k, v in self.headers.items()}))
                    seq = replay.routes.get(self.path)
                    if seq:
                        resp = seq.pop(0) if len(seq) > 1 else seq[0]
                    else:
                        resp = error(404, "Not Found")
                if resp.hold is not None:
                    resp.hold.wait(30)
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

    @property
    def targets(self) -> list[str]:
        return [entry.target for entry in self.log]

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


# ----------------------------------------------------------------------------- API shapes

def repo_obj(full_name: str = REPO, fork: bool = False) -> dict[str, Any]:
    owner = full_name.split("/")[0]
    return {"id": 1296269, "name": full_name.split("/")[1], "full_name": full_name, "fork": fork, "private": False, "owner": {"login": owner, "type": "Organization"}}


def pull(head: str = HEAD, head_repo: str | None = REPO, *, number: int = PR, base_repo: str = REPO) -> dict[str, Any]:
    return {
        "url": f"https://api.github.com/repos/{REPO}/pulls/{number}",
        "id": 1_934_567,
        "number": number,
        "state": "open",
        "title": "Widget frobnication",
        "user": {"login": "alice", "type": "User"},
        "head": {"label": "octo:frob", "ref": "frob", "sha": head, "repo": None if head_repo is None else repo_obj(head_repo, fork=head_repo != base_repo)},
        "base": {"label": "octo:main", "ref": "main", "sha": BASE_SHA, "repo": repo_obj(base_repo)},
        "mergeable_state": "clean",
    }


def clean_body(run_id: int = RUN_ID, attempt: int = 1) -> str:
    return (
        f"**OpenCode review**: no findings for head `{HEAD[:12]}`.\n\n"
        "<!-- opencode-review: clean -->\n"
        f"<!-- opencode-review: workflow-run id={run_id} attempt={attempt} -->\n"
    )


def findings_body(run_id: int = RUN_ID, attempt: int = 1) -> str:
    return (
        "**OpenCode review**: 1 finding. Action required.\n\n1. **major** `a.py`:3: bug\n\n"
        "<!-- opencode-review: findings count=1 -->\n"
        f"<!-- opencode-review: workflow-run id={run_id} attempt={attempt} -->\n"
    )


_review_ids = iter(range(2_000_000_001, 2_100_000_000))


def review(body: str | None = None, *, login: str = APP, state: str = "COMMENTED", commit: str | None = HEAD, review_id: int | None = None, user_type: str = "Bot") -> dict[str, Any]:
    return {
        "id": review_id if review_id is not None else next(_review_ids),
        "node_id": "PRR_kwDOAAAB",
        "user": {"login": login, "id": 41898282, "type": user_type},
        "body": clean_body() if body is None else body,
        "state": state,
        "html_url": f"https://github.com/{REPO}/pull/{PR}#pullrequestreview-1",
        "commit_id": commit,
        "submitted_at": "2026-07-23T15:00:00Z",
        "author_association": "NONE",
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
        "pull_requests": [{"id": 1, "number": n, "head": {"ref": "frob", "sha": sha}, "base": {"ref": "main", "sha": BASE_SHA}} for n, sha in (pr_refs or [])],
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


def install_trusted(srv: ReplayServer, *, review_pages: list[list[dict[str, Any]]] | None = None, runs: list[dict[str, Any]] | None = None,
                    jobs: list[dict[str, Any]] | None = None, first_pr: dict[str, Any] | None = None, final_pr: dict[str, Any] | None = None,
                    attempt: int = 1) -> None:
    """The trusted case (two review pages, a human review, an unrelated run), overridable per stage."""
    if review_pages is None:
        review_pages = [
            [review("Looks fine to me.", login="alice", user_type="User", state="APPROVED")],
            [review()],
        ]
    if runs is None:
        runs = [run(RUN_ID + 5, 1, run_number=RUN_NUMBER + 1, title=f"OpenCode review PR #{PR + 1} head {NEW_HEAD}"), run()]
    if jobs is None:
        jobs = [job("opencode-review-fork", conclusion="skipped", attempt=attempt), job(attempt=attempt)]
    first = pull() if first_pr is None else first_pr
    srv.set(PR_PATH, ok(first), ok(first if final_pr is None else final_pr))
    for i, page in enumerate(review_pages):
        target = REVIEWS_PATH if i == 0 else f"{REVIEWS_PATH}&page={i + 1}"
        link = None
        if i + 1 < len(review_pages):
            link = f'<{srv.url}{REVIEWS_PATH}&page={i + 2}>; rel="next", <{srv.url}{REVIEWS_PATH}&page={len(review_pages)}>; rel="last"'
        srv.set(target, ok(page, link=link))
    srv.set(RUNS_PATH, ok(runs_page(*runs)))
    srv.set(jobs_path(RUN_ID, attempt), ok(jobs_page(*jobs)))
