"""End to end over a real local HTTP server replaying GitHub-shaped responses.

Covers every documented case plus the transport failures; each verdict is checked for its
value and reason code, and the read order for the cases where it matters.
"""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
from support.github_replay import (
    APP,
    BASE_SHA,
    COMMENTS_PATH,
    ENV_PATH,
    HEAD,
    NEW_HEAD,
    OLD_HEAD,
    PR,
    PR_PATH,
    REPO,
    REVIEWS_PATH,
    RUN_ID,
    RUN_NUMBER,
    RUNS_PATH,
    ReplayServer,
    Response,
    clean_body,
    comment,
    diagnostic_body,
    environment,
    error,
    findings_body,
    install_trusted,
    job,
    jobs_path,
    ok,
    pull,
    raw,
    review,
    review_node,
    run,
)

from attest.cli import main
from attest.review.evidence import (
    DEFAULT_JOB,
    DEFAULT_WORKFLOW,
    GitHubClient,
    HttpLimits,
    Trust,
    TrustConfig,
    Verdict,
    evaluate,
)

CONFIG = TrustConfig(REPO, PR, APP, DEFAULT_WORKFLOW, DEFAULT_JOB)
GRAPHQL = "POST /graphql"
# docs/evidence.md "The decision, step by step": the pull request, its issue comments, its
# reviews (two pages) and their edit status, the runs, the jobs, the environment, and last the
# authoritative final head read.
FULL_ORDER = [PR_PATH, COMMENTS_PATH, REVIEWS_PATH, f"{REVIEWS_PATH}&page=2", GRAPHQL, RUNS_PATH, jobs_path(), ENV_PATH, PR_PATH]
UPTO_REVIEWS = FULL_ORDER[:4]  # through the last review page
UPTO_GRAPHQL = FULL_ORDER[:5]  # through the edit status


def verdict_of(api: ReplayServer, *, token: str | None = None, **limits: Any) -> Verdict:
    client = GitHubClient(api.url, token=token, limits=HttpLimits(**limits))
    return evaluate(CONFIG, client)


def cli(api_url: str, capsys: pytest.CaptureFixture[str], *extra: str, app: str = APP) -> tuple[int, dict[str, Any], str]:
    rc = main(["evidence", "trusted-producer", "--repo", REPO, "--pr", str(PR), "--app-login", app, "--api-url", api_url, "--json", *extra])
    out, err = capsys.readouterr()
    return rc, json.loads(out), err


def assert_verdict(v: Verdict, trusted: Trust, code: str) -> None:
    assert (v.trusted, str(v.code)) == (trusted, code), v.reason


# --------------------------------------------------------------------------- the trusted case

def test_trusted_case_reads_in_adr_order_and_exits_zero(api: ReplayServer, capsys: pytest.CaptureFixture[str]) -> None:
    install_trusted(api)
    rc, out, _ = cli(api.url, capsys)
    assert rc == 0
    assert out["trusted_producer"] == "true" and out["reason_code"] == "TRUSTED" and out["ok"] is True
    assert set(out) == {"schema", "ok", "trusted_producer", "reason_code", "reason", "errors"} and out["errors"] == []
    # The authoritative final head read comes only after both Actions reads.
    assert api.targets == FULL_ORDER
    sent = api.log[0].headers
    assert sent["Accept"] == "application/vnd.github+json" and "Authorization" not in sent


def test_text_mode_true_and_false(api: ReplayServer, capsys: pytest.CaptureFixture[str]) -> None:
    install_trusted(api)
    rc = main(["evidence", "trusted-producer", "--repo", REPO, "--pr", str(PR), "--app-login", APP, "--api-url", api.url])
    assert rc == 0 and capsys.readouterr().out.startswith("trusted_producer=true TRUSTED")
    rc = main(["evidence", "trusted-producer", "--repo", REPO, "--pr", str(PR), "--app-login", "other-app[bot]", "--api-url", api.url])
    assert rc == 1 and "trusted_producer=false NO_TRUSTED_REVIEW" in capsys.readouterr().err


def test_token_is_sent_only_as_bearer_and_never_printed(api: ReplayServer, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "ghs_s3cr3tT0kenValue0123456789"
    install_trusted(api)
    api.set(RUNS_PATH, error(500))
    monkeypatch.setenv("REVIEW_TOKEN", secret)
    rc, out, err = cli(api.url, capsys, "--token-env", "REVIEW_TOKEN")
    assert rc == 1 and out["trusted_producer"] == "unknown" and out["reason_code"] == "HTTP_STATUS"
    assert {entry.headers.get("Authorization") for entry in api.log} == {f"Bearer {secret}"}
    assert secret not in json.dumps(out) and secret not in err


def test_token_env_unset_is_usage_error(api: ReplayServer, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_SUCH_TOKEN_VAR", raising=False)
    rc, out, _ = cli(api.url, capsys, "--token-env", "NO_SUCH_TOKEN_VAR")
    assert rc == 2 and out["trusted_producer"] == "unknown" and out["reason_code"] == "TOKEN_MISSING"
    assert api.log == []


def test_token_with_header_breaking_characters_is_refused_without_echo(api: ReplayServer, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BAD_TOKEN", "abc\r\nX-Evil: 1")
    rc, out, err = cli(api.url, capsys, "--token-env", "BAD_TOKEN")
    assert rc == 2 and out["reason_code"] == "TOKEN_MISSING"
    assert "X-Evil" not in json.dumps(out) + err and api.log == []


@pytest.mark.parametrize(
    "args",
    [
        ["--app-login", "github-actions[bot]"],
        ["--app-login", "opencode-review"],
        ["--repo", "not-a-repo"],
        ["--workflow", "../evil.yml"],
        ["--job", "bad job"],
        ["--api-url", "http://api.example.com"],
        ["--api-url", "ftp://127.0.0.1/"],
        ["--api-url", "https://user:pw@api.github.com"],
        ["--max-pages", "0"],
        ["--pr", "0"],
        ["--environment", "a/b"],
        ["--environment", ".."],
        ["--environment", ""],
    ],
)
def test_bad_configuration_is_usage_error(api: ReplayServer, capsys: pytest.CaptureFixture[str], args: list[str]) -> None:
    base = {"--repo": REPO, "--pr": str(PR), "--app-login": APP, "--api-url": api.url}
    base.update(dict(zip(args[::2], args[1::2], strict=True)))
    argv = ["evidence", "trusted-producer", "--json"] + [x for kv in base.items() for x in kv]
    rc = main(argv)
    out = json.loads(capsys.readouterr().out)
    assert rc == 2 and out["ok"] is False and out["trusted_producer"] == "unknown" and out["reason_code"] == "BAD_CONFIG"
    assert api.log == []


# --------------------------------------------------------------------------- identity of the producer

@pytest.mark.parametrize(
    "login",
    [
        "OpenCode-Review[bot]",  # case
        "opencode-reviеw[bot]",  # Cyrillic U+0435 for the last "e"
        "opencode-review",  # no [bot] suffix: a user account
        "opencode-review[bot] ",
        "github-actions[bot]",  # the shared Actions identity, forgeable by any workflow
    ],
)
def test_look_alike_or_shared_login_is_not_the_producer(api: ReplayServer, login: str) -> None:
    install_trusted(api, review_pages=[[review(login=login)]])
    assert_verdict(verdict_of(api), Trust.FALSE, "NO_TRUSTED_REVIEW")


def test_display_name_never_authenticates(api: ReplayServer) -> None:
    forged = review(login="mallory")
    forged["user"]["name"] = APP  # display name equal to the App login
    install_trusted(api, review_pages=[[forged]])
    assert_verdict(verdict_of(api), Trust.FALSE, "NO_TRUSTED_REVIEW")


# --------------------------------------------------------------------------- review state

def test_approved_review_with_clean_marker_blocks(api: ReplayServer) -> None:
    install_trusted(api, review_pages=[[review(state="APPROVED")]])
    assert_verdict(verdict_of(api), Trust.FALSE, "BLOCKING_REVIEW")


def test_later_clean_review_after_blocking_one_on_same_head_still_blocks(api: ReplayServer) -> None:
    install_trusted(api, review_pages=[[review(findings_body()), review()]])
    v = verdict_of(api)
    assert_verdict(v, Trust.FALSE, "BLOCKING_REVIEW")
    assert "findings marker" in v.reason


def test_blocking_review_on_older_head_does_not_block_new_head(api: ReplayServer) -> None:
    install_trusted(api, review_pages=[[review(findings_body(head=OLD_HEAD), commit=OLD_HEAD), review("<!-- opencode-review: diagnostic -->", commit=OLD_HEAD), review()]])
    assert_verdict(verdict_of(api), Trust.TRUE, "TRUSTED")


def test_blocking_review_on_page_two(api: ReplayServer) -> None:
    install_trusted(api, review_pages=[[review()], [review("<!-- opencode-review: diagnostic -->\n" + clean_body())]])
    assert_verdict(verdict_of(api), Trust.FALSE, "BLOCKING_REVIEW")
    assert api.targets[:4] == UPTO_REVIEWS


def test_failed_page_read_is_unknown(api: ReplayServer) -> None:
    install_trusted(api)
    api.set(f"{REVIEWS_PATH}&page=2", error(502, "Bad Gateway"))
    v = verdict_of(api)
    assert_verdict(v, Trust.UNKNOWN, "HTTP_STATUS")
    assert "502" in v.reason
    assert api.targets == UPTO_REVIEWS  # stops: no Actions reads, no final read


def test_review_changed_between_pages_is_unknown(api: ReplayServer) -> None:
    first = review(review_id=77)
    changed = dict(first, body=findings_body())
    install_trusted(api, review_pages=[[first], [changed]])
    assert_verdict(verdict_of(api), Trust.UNKNOWN, "LISTING_INCONSISTENT")


def test_no_run_marker_is_false(api: ReplayServer) -> None:
    install_trusted(api, review_pages=[[review("<!-- opencode-review: clean -->")]])
    assert_verdict(verdict_of(api), Trust.FALSE, "RUN_MARKER_MISSING")


# --------------------------------------------------------------------------- pull request

def test_fork_pull_request_is_false_without_further_reads(api: ReplayServer) -> None:
    install_trusted(api, first_pr=pull(head_repo="mallory/widgets"))
    assert_verdict(verdict_of(api), Trust.FALSE, "NOT_SAME_REPO")
    assert api.targets == [PR_PATH]


def test_deleted_head_repository_is_not_known_same_repo(api: ReplayServer) -> None:
    install_trusted(api, first_pr=pull(head_repo=None))
    assert_verdict(verdict_of(api), Trust.FALSE, "NOT_SAME_REPO")


def test_api_answering_for_another_pull_request_is_unknown(api: ReplayServer) -> None:
    install_trusted(api, first_pr=pull(number=PR + 1))
    assert_verdict(verdict_of(api), Trust.UNKNOWN, "PR_MISMATCH")


def test_head_moving_after_the_actions_reads_is_unknown(api: ReplayServer) -> None:
    install_trusted(api, final_pr=pull(head=NEW_HEAD))
    v = verdict_of(api)
    assert_verdict(v, Trust.UNKNOWN, "HEAD_MOVED")
    assert api.targets == FULL_ORDER and NEW_HEAD in v.reason


def test_failed_final_read_is_unknown(api: ReplayServer) -> None:
    install_trusted(api)
    api.set(PR_PATH, ok(pull()), error(503))
    assert_verdict(verdict_of(api), Trust.UNKNOWN, "HTTP_STATUS")
    assert api.targets == FULL_ORDER


# --------------------------------------------------------------------------- runs and jobs

def test_marker_naming_an_older_attempt_is_false(api: ReplayServer) -> None:
    install_trusted(api, runs=[run(attempt=2)], attempt=2)
    assert_verdict(verdict_of(api), Trust.FALSE, "STALE_ATTEMPT")


def test_newer_attempt_still_running_is_unknown(api: ReplayServer) -> None:
    install_trusted(api, runs=[run(attempt=2, status="in_progress", conclusion=None)])
    assert_verdict(verdict_of(api), Trust.UNKNOWN, "RUN_PENDING")
    assert jobs_path() not in api.targets and api.targets[-1] == RUNS_PATH


def test_required_job_skipped_while_run_succeeded(api: ReplayServer) -> None:
    install_trusted(api, jobs=[job(conclusion="skipped"), job("opencode-review-fork")])
    assert_verdict(verdict_of(api), Trust.FALSE, "JOB_NOT_SUCCESS")


@pytest.mark.parametrize("conclusion", ["cancelled", "failure", "neutral", "skipped", "timed_out"])
def test_unsuccessful_latest_run_is_false(api: ReplayServer, conclusion: str) -> None:
    install_trusted(api, runs=[run(conclusion=conclusion)])
    assert_verdict(verdict_of(api), Trust.FALSE, "RUN_NOT_SUCCESS")


def test_wrong_event(api: ReplayServer) -> None:
    install_trusted(api, runs=[run(event="pull_request")])
    assert_verdict(verdict_of(api), Trust.FALSE, "RUN_WRONG_EVENT")


def test_wrong_workflow_path(api: ReplayServer) -> None:
    install_trusted(api, runs=[run(path=".github/workflows/other.yml")])
    assert_verdict(verdict_of(api), Trust.FALSE, "RUN_WRONG_WORKFLOW")


def test_marker_naming_a_wrong_event_run_beside_a_real_one(api: ReplayServer) -> None:
    install_trusted(api, runs=[run(event="workflow_dispatch"), run(RUN_ID - 9, run_number=RUN_NUMBER - 1)])
    assert_verdict(verdict_of(api), Trust.FALSE, "RUN_WRONG_EVENT")


def test_run_bound_only_through_pull_requests_entry(api: ReplayServer) -> None:
    install_trusted(api, runs=[run(title="OpenCode code review", pr_refs=[(PR, HEAD)])])
    assert_verdict(verdict_of(api), Trust.TRUE, "TRUSTED")


def test_run_for_an_older_head_is_not_bound(api: ReplayServer) -> None:
    install_trusted(api, runs=[run(title="Widget frobnication", pr_refs=[(PR, OLD_HEAD)])])
    assert_verdict(verdict_of(api), Trust.FALSE, "RUN_NOT_BOUND")


def test_missing_run_attempt_is_unknown_not_one(api: ReplayServer) -> None:
    install_trusted(api, runs=[run(attempt=None)])
    assert_verdict(verdict_of(api), Trust.UNKNOWN, "MISSING_RUN_ATTEMPT")


def test_newer_run_for_same_head_supersedes_marker(api: ReplayServer) -> None:
    install_trusted(api, runs=[run(), run(RUN_ID + 1, run_number=RUN_NUMBER + 1)])
    assert_verdict(verdict_of(api), Trust.FALSE, "MARKER_MISMATCH")


def test_jobs_are_read_for_the_exact_attempt(api: ReplayServer) -> None:
    install_trusted(api, review_pages=[[review(clean_body(attempt=3))]], runs=[run(attempt=3)], attempt=3)
    assert_verdict(verdict_of(api), Trust.TRUE, "TRUSTED")
    assert jobs_path(RUN_ID, 3) in api.targets


def test_run_with_a_pull_requests_entry_for_another_pr_is_not_bound(api: ReplayServer) -> None:
    install_trusted(api, runs=[run(pr_refs=[(PR + 1, HEAD)])])
    assert_verdict(verdict_of(api), Trust.FALSE, "RUN_NOT_BOUND")


def test_run_bound_only_by_its_title_is_bound_only_with_the_opt_in(api: ReplayServer, capsys: pytest.CaptureFixture[str]) -> None:
    """The run-name is text the run chose; only the API's pull_requests association binds by default."""
    install_trusted(api, runs=[run(pr_refs=[])])  # display_title is exactly the run-name, no pull_requests entry
    rc, out, _ = cli(api.url, capsys)
    assert (rc, out["trusted_producer"], out["reason_code"]) == (1, "false", "RUN_NOT_BOUND")
    assert "--bind-by-run-name" in out["reason"] and jobs_path() not in api.targets
    api.log.clear()
    rc, out, _ = cli(api.url, capsys, "--bind-by-run-name")
    assert (rc, out["trusted_producer"], out["reason_code"]) == (0, "true", "TRUSTED")
    assert api.targets == FULL_ORDER


def test_the_opt_in_lets_a_run_titled_like_the_run_name_take_true_away(api: ReplayServer, capsys: pytest.CaptureFixture[str]) -> None:
    """What --bind-by-run-name costs: a newer run whose title only claims this PR and head becomes
    the latest candidate, and the App's marker names another run (false, never true)."""
    install_trusted(api, runs=[run(), run(RUN_ID + 1, run_number=RUN_NUMBER + 1, pr_refs=[])])
    rc, out, _ = cli(api.url, capsys)
    assert (rc, out["reason_code"]) == (0, "TRUSTED")
    rc, out, _ = cli(api.url, capsys, "--bind-by-run-name")
    assert (rc, out["trusted_producer"], out["reason_code"]) == (1, "false", "MARKER_MISMATCH")


def test_runs_read_failure_is_unknown(api: ReplayServer) -> None:
    install_trusted(api)
    api.set(RUNS_PATH, error(403, "Resource not accessible by integration"))
    assert_verdict(verdict_of(api), Trust.UNKNOWN, "HTTP_STATUS")
    assert PR_PATH not in api.targets[1:]  # no final read after a failed Actions read


# --------------------------------------------------------------------------- transport

def test_duplicate_key_in_response_is_unknown(api: ReplayServer) -> None:
    install_trusted(api)
    body = json.dumps(pull())[:-1] + ', "number": 43}'
    api.set(PR_PATH, raw(body.encode()))
    v = verdict_of(api)
    assert_verdict(v, Trust.UNKNOWN, "RESPONSE_NOT_JSON")
    assert "twice" in v.reason


def test_non_json_content_type_is_unknown(api: ReplayServer) -> None:
    api.set(PR_PATH, raw(b"<html>rate limited</html>", content_type="text/html"))
    assert_verdict(verdict_of(api), Trust.UNKNOWN, "RESPONSE_NOT_JSON")


def test_wrong_shape_is_unknown(api: ReplayServer) -> None:
    install_trusted(api)
    bad = review()
    bad["id"] = "77"
    api.set(REVIEWS_PATH, ok([bad]))
    assert_verdict(verdict_of(api), Trust.UNKNOWN, "RESPONSE_SHAPE")


def test_runs_page_without_workflow_runs_is_unknown(api: ReplayServer) -> None:
    install_trusted(api)
    api.set(RUNS_PATH, ok({"total_count": 0}))
    assert_verdict(verdict_of(api), Trust.UNKNOWN, "RESPONSE_SHAPE")


def test_oversized_response_is_unknown(api: ReplayServer) -> None:
    install_trusted(api)
    big = pull()
    big["body"] = "x" * 5000
    api.set(PR_PATH, ok(big))
    assert_verdict(verdict_of(api, max_page_bytes=4096), Trust.UNKNOWN, "RESPONSE_TOO_LARGE")


def test_oversized_chunked_response_without_length_is_unknown(api: ReplayServer) -> None:
    big = pull()
    big["body"] = "x" * 9000
    api.set(PR_PATH, Response(200, json.dumps(big).encode(), {"Content-Type": "application/json"}, chunked=True))
    v = verdict_of(api, max_page_bytes=4096)
    assert_verdict(v, Trust.UNKNOWN, "RESPONSE_TOO_LARGE")
    assert "exceeds 4096 bytes" in v.reason


def test_chunked_response_within_limits_is_read(api: ReplayServer) -> None:
    install_trusted(api)
    api.set(PR_PATH, Response(200, json.dumps(pull()).encode(), {"Content-Type": "application/json"}, chunked=True))
    assert_verdict(verdict_of(api), Trust.TRUE, "TRUSTED")


def test_page_cap_is_unknown(api: ReplayServer) -> None:
    install_trusted(api, review_pages=[[review(login="alice")], [review(login="bob")], [review()]])
    v = verdict_of(api, max_pages=2)
    assert_verdict(v, Trust.UNKNOWN, "TOO_MANY_PAGES")
    assert f"{REVIEWS_PATH}&page=3" not in api.targets


def test_next_link_to_another_host_is_not_followed(api: ReplayServer, monkeypatch: pytest.MonkeyPatch) -> None:
    install_trusted(api)
    foreign = f"http://localhost:{api.port}/steal?page=2"
    api.set(REVIEWS_PATH, ok([review()], link=f'<{foreign}>; rel="next"'))
    monkeypatch.setenv("T", "tok-abc123")
    v = verdict_of(api, token="tok-abc123")
    assert_verdict(v, Trust.UNKNOWN, "FOREIGN_LINK")
    assert not any(t.startswith("/steal") for t in api.targets)


def test_next_link_is_followed_verbatim(api: ReplayServer) -> None:
    install_trusted(api)
    odd = f"{PR_PATH}/reviews?per_page=100&cursor=Y3Vyc29yOnYyOpK0&page=2"
    api.set(REVIEWS_PATH, ok([review(login="alice")], link=f'<{api.url}{odd}>; rel="next"'))
    api.set(odd, ok([review()]))
    assert_verdict(verdict_of(api), Trust.TRUE, "TRUSTED")
    assert odd in api.targets


@pytest.mark.parametrize(
    "link",
    [
        "not a link header",
        '<{url}/a?page=2>; rel="next", <{url}/b?page=2>; rel="next"',
        '<{url}/repos/octo/widgets/pulls/42/reviews?per_page=100>; rel="next"',  # loop to page 1
        '<{url}/x#frag>; rel="next"',
    ],
)
def test_bad_next_links_are_unknown(api: ReplayServer, link: str) -> None:
    install_trusted(api)
    api.set(REVIEWS_PATH, ok([review()], link=link.format(url=api.url)))
    assert_verdict(verdict_of(api), Trust.UNKNOWN, "BAD_LINK")


def test_connection_refused_is_unknown(capsys: pytest.CaptureFixture[str]) -> None:
    dead = ReplayServer()
    url = dead.url
    dead.close()
    rc, out, _ = cli(url, capsys)
    assert rc == 1 and out["trusted_producer"] == "unknown" and out["reason_code"] == "HTTP_ERROR"


def test_timeout_is_unknown_and_not_retried(api: ReplayServer) -> None:
    release = threading.Event()
    api.set(PR_PATH, Response(200, b"{}", {"Content-Type": "application/json"}, hold=release))
    try:
        v = verdict_of(api, timeout=0.2)
    finally:
        release.set()
    assert_verdict(v, Trust.UNKNOWN, "HTTP_ERROR")
    assert api.targets == [PR_PATH]


def test_redirect_is_not_followed(api: ReplayServer) -> None:
    api.set(PR_PATH, Response(301, b"", {"Location": "https://evil.example/x", "Content-Type": "application/json"}))
    assert_verdict(verdict_of(api), Trust.UNKNOWN, "HTTP_STATUS")
    assert api.targets == [PR_PATH]


# --------------------------------------------------------------------------- one deadline per response

@pytest.mark.parametrize("part", ["head", "body"])
def test_slow_loris_response_is_cut_off_at_the_deadline(api: ReplayServer, part: str) -> None:
    """Regression (review finding A): the deadline was not applied while the status line and
    headers arrived, so a server sending them a byte at a time held the client for 151 s
    against a documented 60 s. Each byte here comes well within the socket timeout."""
    import time

    body = json.dumps(pull()).encode()
    api.set(PR_PATH, Response(200, body, {"Content-Type": "application/json"}, trickle=0.05, trickle_part=part))
    started = time.monotonic()
    v = verdict_of(api, timeout=0.5, deadline=1.0)
    elapsed = time.monotonic() - started
    assert_verdict(v, Trust.UNKNOWN, "HTTP_ERROR")
    assert "not complete within 1.0s" in v.reason
    # Unbounded, the head alone (about 100 bytes) takes 5 s and the body 20 s.
    assert elapsed < 2.5, f"the client waited {elapsed:.1f}s against a 1.0s deadline"
    assert api.targets == [PR_PATH]  # not retried


def test_a_response_within_the_deadline_is_read(api: ReplayServer) -> None:
    install_trusted(api)
    api.set(PR_PATH, Response(200, json.dumps(pull()).encode(), {"Content-Type": "application/json"}, trickle=0.001))
    assert_verdict(verdict_of(api, timeout=2, deadline=10), Trust.TRUE, "TRUSTED")


# --------------------------------------------------------------------------- edited reviews (finding B a)

EDITED_AT = "2026-07-24T09:12:00Z"


def graphql_ids(api: ReplayServer) -> list[list[str]]:
    return [json.loads(e.body)["variables"]["ids"] for e in api.log if e.method == "POST"]


def test_review_edited_by_a_maintainer_is_not_evidence(api: ReplayServer) -> None:
    """Regression (review finding B a): anyone with write access can edit the App's review.
    Here a findings review was edited into a clean one, markers and all; REST shows only the
    new body, GraphQL shows the edit. Before the fix this was `true`."""
    edited = review(clean_body())  # the body after the maintainer's edit
    install_trusted(api, review_pages=[[review("Looks fine to me.", login="alice", user_type="User", state="APPROVED")], [edited]])
    api.nodes[edited["node_id"]] = review_node(edited, edited_at=EDITED_AT, editor="mallory")
    v = verdict_of(api, token="ghs_token123")
    assert_verdict(v, Trust.FALSE, "REVIEW_EDITED")
    assert "mallory" in v.reason and EDITED_AT in v.reason
    # Only the App's reviews on the head are asked about, through GraphQL, after the REST pages.
    assert api.targets == UPTO_GRAPHQL and graphql_ids(api) == [[edited["node_id"]]]
    post = api.log[len(UPTO_GRAPHQL) - 1]
    assert post.headers["Authorization"] == "Bearer ghs_token123" and post.headers["Content-Type"] == "application/json"
    assert "lastEditedAt" in json.loads(post.body)["query"]


def test_earlier_blocking_review_edited_clean_is_not_evidence(api: ReplayServer) -> None:
    """A same-head findings review blocks a later clean one; editing it clean must not unblock."""
    first, second = review(clean_body()), review(clean_body())
    install_trusted(api, review_pages=[[first, second]])
    api.nodes[first["node_id"]] = review_node(first, edited_at=EDITED_AT, editor="mallory")
    assert_verdict(verdict_of(api), Trust.FALSE, "REVIEW_EDITED")
    assert graphql_ids(api) == [[first["node_id"], second["node_id"]]]


def test_edit_by_a_deleted_account_is_still_an_edit(api: ReplayServer) -> None:
    rev = review()
    install_trusted(api, review_pages=[[rev]])
    api.nodes[rev["node_id"]] = review_node(rev, edited_at=EDITED_AT, editor=None)
    assert_verdict(verdict_of(api), Trust.FALSE, "REVIEW_EDITED")


def test_graphql_error_with_status_200_is_unknown(api: ReplayServer) -> None:
    install_trusted(api)
    api.set(GRAPHQL, ok({"data": {"nodes": [None]}, "errors": [{"type": "FORBIDDEN", "message": "Resource not accessible by integration"}]}))
    v = verdict_of(api)
    assert_verdict(v, Trust.UNKNOWN, "GRAPHQL_ERROR")
    assert "Resource not accessible" in v.reason and api.targets == UPTO_GRAPHQL  # no Actions reads after it


def test_node_answered_as_null_or_for_another_id_is_unknown(api: ReplayServer) -> None:
    rev, other = review(), review()
    install_trusted(api, review_pages=[[rev]])
    api.nodes[rev["node_id"]] = None  # type: ignore[assignment]  # null, and no error to say why
    assert_verdict(verdict_of(api), Trust.UNKNOWN, "RESPONSE_SHAPE")
    api.log.clear()
    api.nodes[rev["node_id"]] = review_node(other)
    v = verdict_of(api)
    assert_verdict(v, Trust.UNKNOWN, "RESPONSE_SHAPE")
    assert "no node answered" in v.reason


def test_node_id_github_cannot_resolve_fails_the_read(api: ReplayServer) -> None:
    from attest.review.evidence._http import FetchFailed
    from attest.review.evidence._model import REVIEW_EDIT_SELECTION, ReviewEdit

    client = GitHubClient(api.url, token=None, limits=HttpLimits())
    with pytest.raises(FetchFailed) as e:
        client.get_nodes(["PRR_nope"], REVIEW_EDIT_SELECTION, ReviewEdit.from_json)
    assert e.value.code == "GRAPHQL_ERROR" and "Could not resolve" in e.value.detail
    assert client.get_nodes([], REVIEW_EDIT_SELECTION, ReviewEdit.from_json) == () and api.targets == [GRAPHQL]
    capped = GitHubClient(api.url, token=None, limits=HttpLimits(max_pages=1))
    with pytest.raises(FetchFailed) as e:
        capped.get_nodes([f"PRR_{i}" for i in range(101)], REVIEW_EDIT_SELECTION, ReviewEdit.from_json)
    assert e.value.code == "TOO_MANY_PAGES" and api.targets == [GRAPHQL]  # refused before asking


def test_graphql_without_a_token_is_unknown(api: ReplayServer) -> None:
    """GitHub's GraphQL API refuses anonymous requests: an anonymous evaluation cannot be true."""
    install_trusted(api)
    api.set(GRAPHQL, error(401, "This endpoint requires you to be authenticated."))
    v = verdict_of(api)
    assert_verdict(v, Trust.UNKNOWN, "HTTP_STATUS")
    assert "401" in v.reason


@pytest.mark.parametrize(
    "node",
    [
        {"__typename": "IssueComment"},
        {"fullDatabaseId": 2_000_000_001},  # a number, not the BigInt string
        {"fullDatabaseId": None},
        {"includesCreatedEdit": None},
        {"editor": "mallory"},
    ],
)
def test_malformed_review_node_is_unknown(api: ReplayServer, node: dict[str, Any]) -> None:
    rev = review()
    install_trusted(api, review_pages=[[rev]])
    api.nodes[rev["node_id"]] = {**review_node(rev), **node}
    assert_verdict(verdict_of(api), Trust.UNKNOWN, "RESPONSE_SHAPE")


def test_graphql_endpoint_beside_the_rest_base() -> None:
    assert GitHubClient("https://api.github.com", token=None, limits=HttpLimits()).graphql_target() == "/graphql"
    assert GitHubClient("https://ghe.example.com/api/v3", token=None, limits=HttpLimits()).graphql_target() == "/api/graphql"


# --------------------------------------------------------------------------- the base the run reviewed (finding B b)

RETARGETED = "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"


def test_pull_request_retargeted_after_the_run_is_false(api: ReplayServer) -> None:
    """Regression (review finding B b): the run reviewed BASE...HEAD for the old base; after
    the base is changed the PR's diff is another one. Before the fix this was `true`."""
    moved = pull(base_ref="release", base_sha=RETARGETED)
    install_trusted(api, first_pr=moved, final_pr=moved)
    v = verdict_of(api)
    assert_verdict(v, Trust.FALSE, "BASE_MISMATCH")
    assert BASE_SHA in v.reason and RETARGETED in v.reason
    assert api.targets == UPTO_REVIEWS  # decided from the reviews: no GraphQL, no Actions reads


def test_review_from_a_wrapper_without_the_base_marker_is_false(api: ReplayServer) -> None:
    install_trusted(api, review_pages=[[review(clean_body(base=None))]])
    assert_verdict(verdict_of(api), Trust.FALSE, "BASE_MARKER_MISSING")


def test_new_review_for_the_new_base_qualifies(api: ReplayServer) -> None:
    moved = pull(base_ref="release", base_sha=RETARGETED)
    install_trusted(api, review_pages=[[review(clean_body()), review(clean_body(base=RETARGETED))]], first_pr=moved, final_pr=moved)
    assert_verdict(verdict_of(api), Trust.TRUE, "TRUSTED")


def test_base_retargeted_during_the_evaluation_is_unknown(api: ReplayServer) -> None:
    install_trusted(api, final_pr=pull(base_ref="release", base_sha=RETARGETED))
    v = verdict_of(api)
    assert_verdict(v, Trust.UNKNOWN, "BASE_MOVED")
    assert api.targets == FULL_ORDER


# --------------------------------------------------------------------------- issue comments

def test_diagnostic_comment_for_the_head_blocks_beside_a_clean_review(api: ReplayServer) -> None:
    install_trusted(api, comment_pages=[[comment(clean_body()), comment(diagnostic_body())]])
    v = verdict_of(api)
    assert_verdict(v, Trust.FALSE, "BLOCKING_COMMENT")
    assert "diagnostic comment" in v.reason and HEAD in v.reason
    assert api.targets == [PR_PATH, COMMENTS_PATH]  # decided from the comments: nothing more is read


def test_fallback_comment_when_the_review_could_not_be_posted(api: ReplayServer, capsys: pytest.CaptureFixture[str]) -> None:
    """The wrapper's findings review could not be posted, so its body was posted as an issue
    comment: a known failure with its own code, not a mere missing review."""
    install_trusted(api, review_pages=[[]], comment_pages=[[comment(findings_body())]])
    rc, out, _ = cli(api.url, capsys)
    assert (rc, out["trusted_producer"], out["reason_code"]) == (1, "false", "BLOCKING_COMMENT")
    assert "fallback (findings) comment" in out["reason"]


def test_actionable_comment_on_page_two(api: ReplayServer) -> None:
    install_trusted(api, comment_pages=[[comment("Thanks!", login="alice", user_type="User")], [comment(diagnostic_body())]])
    assert_verdict(verdict_of(api), Trust.FALSE, "BLOCKING_COMMENT")
    assert api.targets == [PR_PATH, COMMENTS_PATH, f"{COMMENTS_PATH}&page=2"]


def test_diagnostic_comment_naming_no_head_blocks(api: ReplayServer) -> None:
    install_trusted(api, comment_pages=[[comment(diagnostic_body(head=None))]])
    v = verdict_of(api)
    assert_verdict(v, Trust.FALSE, "BLOCKING_COMMENT")
    assert "names no head" in v.reason


@pytest.mark.parametrize(
    "body",
    [
        clean_body(),  # a no-findings comment for this head: historical, non-actionable
        clean_body(head=None),
        diagnostic_body(head=OLD_HEAD),  # about an older head: a new head recovers
        findings_body(head=NEW_HEAD),
        "Review started.",  # the App, but no marker
        "",
    ],
    ids=["no-findings", "no-findings-without-head", "diagnostic-older-head", "fallback-other-head", "no-marker", "empty"],
)
def test_non_actionable_comments_by_the_app_are_ignored(api: ReplayServer, body: str) -> None:
    install_trusted(api, comment_pages=[[comment(body)]])
    assert_verdict(verdict_of(api), Trust.TRUE, "TRUSTED")
    assert api.targets == FULL_ORDER


@pytest.mark.parametrize("login", ["mallory", "github-actions[bot]", "OpenCode-Review[bot]", "opencode-review", "opencode-reviеw[bot]"])
def test_a_comment_by_another_login_never_counts(api: ReplayServer, login: str) -> None:
    """Display names never authenticate: a look-alike's diagnostic comment neither blocks nor helps."""
    forged = comment(diagnostic_body(), login=login)
    forged["user"]["name"] = APP
    install_trusted(api, comment_pages=[[forged]])
    assert_verdict(verdict_of(api), Trust.TRUE, "TRUSTED")
    install_trusted(api, review_pages=[[]], comment_pages=[[comment(clean_body(), login=login)]])
    assert_verdict(verdict_of(api), Trust.FALSE, "NO_TRUSTED_REVIEW")  # nor does its no-findings comment stand in for a review


def test_comment_by_a_deleted_account_is_ignored(api: ReplayServer) -> None:
    ghost = comment(diagnostic_body())
    ghost["user"] = None
    install_trusted(api, comment_pages=[[ghost]])
    assert_verdict(verdict_of(api), Trust.TRUE, "TRUSTED")


def test_comments_read_failure_is_unknown(api: ReplayServer) -> None:
    install_trusted(api)
    api.set(COMMENTS_PATH, error(500))
    assert_verdict(verdict_of(api), Trust.UNKNOWN, "HTTP_STATUS")
    assert api.targets == [PR_PATH, COMMENTS_PATH]


def test_comment_of_the_wrong_shape_is_unknown(api: ReplayServer) -> None:
    bad = comment(diagnostic_body())
    bad["id"] = "1"
    install_trusted(api, comment_pages=[[bad]])
    assert_verdict(verdict_of(api), Trust.UNKNOWN, "RESPONSE_SHAPE")


def test_comment_changed_between_pages_is_unknown(api: ReplayServer) -> None:
    first = comment(clean_body(), comment_id=55)
    install_trusted(api, comment_pages=[[first], [dict(first, body=diagnostic_body())]])
    assert_verdict(verdict_of(api), Trust.UNKNOWN, "LISTING_INCONSISTENT")


# --------------------------------------------------------------------------- the protected environment

def test_missing_environment_is_false(api: ReplayServer) -> None:
    install_trusted(api, env=error(404, "Not Found"))
    v = verdict_of(api)
    assert_verdict(v, Trust.FALSE, "ENVIRONMENT_MISSING")
    assert api.targets == FULL_ORDER[:-1]  # decided: no final read


def test_environment_without_a_deployment_branch_policy_is_false(api: ReplayServer) -> None:
    install_trusted(api, env=ok(environment(unrestricted=True)))
    v = verdict_of(api)
    assert_verdict(v, Trust.FALSE, "ENVIRONMENT_UNPROTECTED")
    assert "any branch may deploy" in v.reason


@pytest.mark.parametrize("status", [403, 500, 502])
def test_environment_read_failure_is_unknown(api: ReplayServer, status: int) -> None:
    """403: the token cannot read environments, which says nothing about whether it is protected."""
    install_trusted(api, env=error(status, "Resource not accessible by integration"))
    v = verdict_of(api)
    assert_verdict(v, Trust.UNKNOWN, "HTTP_STATUS")
    assert f"HTTP {status}" in v.reason and api.targets == FULL_ORDER[:-1]


def test_a_404_that_is_not_the_apis_json_is_unknown(api: ReplayServer) -> None:
    install_trusted(api, env=raw(b"<html>not found</html>", status=404, content_type="text/html"))
    assert_verdict(verdict_of(api), Trust.UNKNOWN, "RESPONSE_NOT_JSON")


def test_custom_branch_policies_qualify(api: ReplayServer) -> None:
    install_trusted(api, env=ok(environment(protected_branches=False, custom_branch_policies=True)))
    assert_verdict(verdict_of(api), Trust.TRUE, "TRUSTED")


@pytest.mark.parametrize(
    "change",
    [
        {"deployment_branch_policy": {"protected_branches": False, "custom_branch_policies": False}},
        {"deployment_branch_policy": {"protected_branches": True, "custom_branch_policies": True}},
        {"deployment_branch_policy": {"protected_branches": "true", "custom_branch_policies": False}},
        {"deployment_branch_policy": []},
        {"name": None},
    ],
    ids=["neither", "both", "not-a-boolean", "not-an-object", "no-name"],
)
def test_malformed_environment_is_unknown(api: ReplayServer, change: dict[str, Any]) -> None:
    install_trusted(api, env=ok({**environment(), **change}))
    assert_verdict(verdict_of(api), Trust.UNKNOWN, "RESPONSE_SHAPE")


def test_environment_without_the_policy_field_is_unknown(api: ReplayServer) -> None:
    """Absent is not null: the API did not say whether deployments are restricted."""
    env = environment()
    del env["deployment_branch_policy"]
    install_trusted(api, env=ok(env))
    v = verdict_of(api)
    assert_verdict(v, Trust.UNKNOWN, "RESPONSE_SHAPE")
    assert "deployment_branch_policy is missing" in v.reason


def test_environment_answered_for_another_name_is_unknown(api: ReplayServer) -> None:
    install_trusted(api, env=ok(environment("Attest-Review-Trusted")))
    assert_verdict(verdict_of(api), Trust.UNKNOWN, "ENVIRONMENT_MISMATCH")


def test_environment_named_on_the_command_line(api: ReplayServer, capsys: pytest.CaptureFixture[str]) -> None:
    install_trusted(api)
    custom = f"/repos/{REPO}/environments/review.prod_1"
    api.set(custom, ok(environment("review.prod_1")))
    rc, out, _ = cli(api.url, capsys, "--environment", "review.prod_1")
    assert (rc, out["reason_code"]) == (0, "TRUSTED")
    assert custom in api.targets and ENV_PATH not in api.targets
    api.log.clear()
    rc, out, _ = cli(api.url, capsys, "--environment", "staging")  # the replay server has none: 404
    assert (rc, out["trusted_producer"], out["reason_code"]) == (1, "false", "ENVIRONMENT_MISSING")
