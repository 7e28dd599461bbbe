"""End to end over a real local HTTP server replaying GitHub-shaped responses.

Covers every case of issue 6 plus the transport failures; each verdict is checked for its
value and reason code, and the read order for the cases where it matters.
"""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
from support.github_replay import (
    APP,
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
    error,
    findings_body,
    install_trusted,
    job,
    jobs_path,
    ok,
    pull,
    raw,
    review,
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
FULL_ORDER = [PR_PATH, REVIEWS_PATH, f"{REVIEWS_PATH}&page=2", RUNS_PATH, jobs_path(), PR_PATH]


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
    assert set(out) == {"ok", "trusted_producer", "reason_code", "reason", "errors"} and out["errors"] == []
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
    install_trusted(api, review_pages=[[review(findings_body(), commit=OLD_HEAD), review("<!-- opencode-review: diagnostic -->", commit=OLD_HEAD), review()]])
    assert_verdict(verdict_of(api), Trust.TRUE, "TRUSTED")


def test_blocking_review_on_page_two(api: ReplayServer) -> None:
    install_trusted(api, review_pages=[[review()], [review("<!-- opencode-review: diagnostic -->\n" + clean_body())]])
    assert_verdict(verdict_of(api), Trust.FALSE, "BLOCKING_REVIEW")
    assert api.targets[:3] == FULL_ORDER[:3]


def test_failed_page_read_is_unknown(api: ReplayServer) -> None:
    install_trusted(api)
    api.set(f"{REVIEWS_PATH}&page=2", error(502, "Bad Gateway"))
    v = verdict_of(api)
    assert_verdict(v, Trust.UNKNOWN, "HTTP_STATUS")
    assert "502" in v.reason
    assert api.targets == FULL_ORDER[:3]  # stops: no Actions reads, no final read


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
