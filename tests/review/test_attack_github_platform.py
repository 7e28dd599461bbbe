"""Attacks on the GitHub adapter (`attest review publish`, `merge-gate check --github --publish-status`, `merge-gate merge`).

Each one is performed for real against the stateful fake GitHub over a real git repository (faults:
``lose_answer``, ``status``, ``redirect``, ``huge``, ``rewrite``, ``hold``), with the signed record of
tests/review/test_github_flow.py's template. The ones marked *fixed* were accepted (or misreported)
before their fix; the others are refusals this file adds coverage for.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import test_github_flow
import test_review_serialize as ts
from support.fake_github import FakeGitHub
from support.gitrepo import git
from test_github_flow import APP_LOGIN, APP_TOKEN, LIMITS, PR, REPO, Flow, codes, copy_of

from attest.attestation import load_policy
from attest.errors import AttestError
from attest.review.bootstrap import GitHubIdentity
from attest.review.evidence import HttpLimits
from attest.review.merge import verify_review_record
from attest.review.platform import GitHubPlatform, PlatformCode, merge_pull_request, publish_gate_status, record_marker

QUICK = HttpLimits(timeout=1.0, deadline=2.0)
# test_github_flow's fixtures, injected by name: its module-scoped review of a clean pull request, and fresh fakes.
template = test_github_flow.template
fakes = test_github_flow.fakes


# -- helpers ------------------------------------------------------------------------------------------------------


def host_args(flow: Flow) -> list[str]:
    return ["--github", REPO, "--pr", str(PR), "--api-url", flow.fake.url, "--token-env", "ATTEST_APP_TOKEN"]


def gate_args(flow: Flow) -> list[str]:
    return ["--record", str(flow.record), "--policy", str(flow.gate_trust), "--ci", str(flow.ci()), "--require-check", "test",
            "--state-dir", str(flow.state), *host_args(flow)]


def publish_args(flow: Flow) -> list[str]:
    return ["review", "publish", "--record", str(flow.record), "--payload", str(flow.payload), "--policy", str(flow.trust),
            *host_args(flow)]


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> tuple[int, dict[str, Any], str]:
    """attest ARGS --json: (exit code, the JSON document, everything printed)."""
    from attest.cli import main

    monkeypatch.setenv("ATTEST_APP_TOKEN", APP_TOKEN)
    rc = main([*args, "--json"])
    out = capsys.readouterr()
    doc = json.loads(out.out)
    assert "INTERNAL" not in [e.get("code") for e in doc.get("errors", [])], doc  # never a traceback
    return rc, doc, out.out + out.err


def error_codes(doc: dict[str, Any]) -> list[str]:
    return [e["code"] for e in doc["errors"]]


def puts(fake: FakeGitHub) -> int:
    return [e.method for e in fake.log].count("PUT")


def review_posts(fake: FakeGitHub) -> int:
    return sum(e.method == "POST" and e.target.endswith("/reviews") for e in fake.log)


def statuses_posted(fake: FakeGitHub) -> list[tuple[str, Any]]:
    return [(e.target.rsplit("/", 1)[1], e.json()) for e in fake.log if e.method == "POST" and "/statuses/" in e.target]


def everything_sent(fake: FakeGitHub) -> str:
    return "\n".join(f"{e.target} {e.body.decode(errors='replace')}" for e in fake.log)


def push(repo: Path, branch: str, name: str) -> str:
    """A new commit on ``branch`` of the fake's repository (its checkout is left on main)."""
    git(repo, "checkout", "-q", branch)
    (repo / name).write_text(f"{name}\n")
    sha = ts.commit(repo, f"pushed {name}")
    git(repo, "checkout", "-q", "main")
    return sha


def record_digest(flow: Flow) -> str:
    return verify_review_record(flow.record, load_policy(flow.trust))[0].digest


# -- writes whose answer is not usable: processed, perhaps; resolved by reading (fixed) ----------------------------


PROCESSED_WITHOUT_AN_ANSWER = [
    pytest.param("status", {"status": 502, "process": True}, id="502-after-processing"),
    pytest.param("status", {"status": 503, "body": b"<html>busy</html>", "headers": {"Content-Type": "text/html"},
                            "process": True}, id="503-html-after-processing"),
    pytest.param("huge", {"size": 9 * 1024 * 1024, "process": True}, id="huge-after-processing"),
    pytest.param("status", {"status": 200, "body": b"<html>ok</html>", "headers": {"Content-Type": "text/html"},
                            "process": True}, id="200-not-json"),
]


@pytest.mark.parametrize(("kind", "params"), PROCESSED_WITHOUT_AN_ANSWER)
def test_a_merge_done_but_answered_with_a_server_error_is_read_back_and_checked(kind: str, params: dict[str, Any],
                                                                                 template: Flow, tmp_path: Path,
                                                                                 fakes: Any) -> None:
    """Fixed: the merge was made, the answer was a 5xx (or too large, or not JSON); attest failed PLATFORM_REQUEST_FAILED
    without ever checking the merge commit (a base moved under it would never have been reported)."""
    flow = copy_of(template, tmp_path, fakes)
    gate = flow.gate()
    assert gate.authorized
    flow.fake.fault("PUT", r"/merge$", kind, **params)
    merged = merge_pull_request(gate, flow.gh, base=gate.base)
    assert git(flow.c.path, "rev-parse", "main") == merged.sha and puts(flow.fake) == 1


def test_a_merge_answered_200_without_its_commit_is_read_back_and_checked(template: Flow, tmp_path: Path, fakes: Any,
                                                                         capsys: pytest.CaptureFixture[str],
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Fixed: a 200 without `merged: true` and a sha was MERGE_UNCONFIRMED, and the command printed NOT MERGED
    (`"merged": false`) for a pull request that was merged."""
    flow = copy_of(template, tmp_path, fakes)
    flow.fake.fault("PUT", r"/merge$", "rewrite", fn=lambda doc: {"message": "Pull Request successfully merged"})
    rc, doc, _ = run_cli(["merge-gate", "merge", *gate_args(flow)], capsys, monkeypatch)
    assert rc == 0 and doc["merged"] is True and doc["merge_commit"] == git(flow.c.path, "rev-parse", "main")
    assert puts(flow.fake) == 1


@pytest.mark.parametrize(("kind", "params"), PROCESSED_WITHOUT_AN_ANSWER[:3])
def test_a_review_created_but_answered_with_a_server_error_is_found_and_confirmed(kind: str, params: dict[str, Any],
                                                                                  template: Flow, tmp_path: Path,
                                                                                  fakes: Any) -> None:
    """Fixed: a created review answered 5xx (or too large) failed PLATFORM_REQUEST_FAILED; it is a lost answer, read back."""
    flow = copy_of(template, tmp_path, fakes)
    flow.fake.fault("POST", r"/pulls/42/reviews$", kind, **params)
    done = flow.publish(app_login=APP_LOGIN)
    assert done.posted and len(flow.gh.reviews()) == 1 and review_posts(flow.fake) == 1


@pytest.mark.parametrize("write", ["review", "merge"])
def test_a_server_error_of_a_write_not_done_is_unconfirmed_and_never_resent(write: str, template: Flow, tmp_path: Path,
                                                                            fakes: Any) -> None:
    """Never answered and never processed (a 502 before GitHub did anything): read back, not there, nothing sent again."""
    flow = copy_of(template, tmp_path, fakes)
    gate = flow.gate()
    flow.fake.fault("*", r"/pulls/42/reviews$" if write == "review" else r"/merge$", "status", status=502)
    with pytest.raises(AttestError) as e:
        flow.publish(app_login=APP_LOGIN) if write == "review" else merge_pull_request(gate, flow.gh, base=gate.base)
    want = PlatformCode.PUBLISH_UNCONFIRMED if write == "review" else PlatformCode.MERGE_UNCONFIRMED
    assert codes(e.value) == [want] and "502" in e.value.detail
    assert (review_posts(flow.fake), puts(flow.fake)) == ((1, 0) if write == "review" else (0, 1))
    assert flow.gh.reviews() == () and not flow.gh.pull().merged


def test_a_slow_merge_answer_after_the_merge_is_read_back(template: Flow, tmp_path: Path, fakes: Any) -> None:
    """Slow-loris on the write: the merge is made, its answer held past the deadline; read back, checked, never re-sent."""
    flow = copy_of(template, tmp_path, fakes)
    gate = flow.gate()
    held = flow.fake.fault("PUT", r"/merge$", "hold", when="after")
    quick = GitHubPlatform.for_host(GitHubIdentity(REPO, PR, flow.fake.url, APP_TOKEN, QUICK))
    try:
        merged = merge_pull_request(gate, quick, base=gate.base)
    finally:
        held.release()
    assert git(flow.c.path, "rev-parse", "main") == merged.sha and puts(flow.fake) == 1


# -- what merge verifies after the merge (fixed) -------------------------------------------------------------------


def test_a_base_pushed_during_the_merge_call_is_reported_merged_not_as_reviewed(template: Flow, tmp_path: Path, fakes: Any,
                                                                               capsys: pytest.CaptureFixture[str],
                                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Fixed: GitHub pins the head, not the base; the merge under a moved base is MERGE_COMMIT_MISMATCH, and the command's
    JSON said `"merged": false` and its text NOT MERGED for a pull request that was merged."""
    from attest.cli import main

    flow = copy_of(template, tmp_path, fakes)
    held = flow.fake.fault("PUT", r"/merge$", "hold")
    monkeypatch.setenv("ATTEST_APP_TOKEN", APP_TOKEN)
    out: dict[str, Any] = {}
    t = threading.Thread(target=lambda: out.update(rc=main(["merge-gate", "merge", *gate_args(flow), "--json"])))
    t.start()
    try:
        assert held.entered.wait(60)
        moved = push(flow.c.path, "main", "pushed-to-the-base.txt")
    finally:
        held.release()
        t.join(60)
    doc = json.loads(capsys.readouterr().out)
    assert out["rc"] == 1 and error_codes(doc) == [PlatformCode.MERGE_COMMIT_MISMATCH]
    assert doc["merged"] is True
    merge = git(flow.c.path, "rev-parse", "main")
    assert git(flow.c.path, "rev-list", "--parents", "-n1", merge).split()[1:] == [moved, flow.head]


def test_a_merge_reported_but_not_on_the_base_branch_is_a_mismatch(template: Flow, tmp_path: Path, fakes: Any) -> None:
    """Fixed: an inconsistent API says merged (the merge answer and the pull request) by GitHub's own test merge commit,
    whose parents and tree are right, but nothing was merged: attest reported MERGED. The base branch is read now."""
    flow = copy_of(template, tmp_path, fakes)
    gate = flow.gate()
    trial = flow.gh.pull().merge_commit_sha
    assert trial is not None
    flow.fake.fault("PUT", r"/merge$", "status", status=200,
                    body={"sha": trial, "merged": True, "message": "Pull Request successfully merged"})

    def says_merged(doc: Any) -> Any:
        if puts(flow.fake):
            doc.update(state="closed", merged=True, merge_commit_sha=trial, mergeable=None, mergeable_state="unknown")
        return doc

    flow.fake.fault("GET", r"/pulls/42$", "rewrite", fn=says_merged, times=None)
    with pytest.raises(AttestError) as e:
        merge_pull_request(gate, flow.gh, base=gate.base)
    assert codes(e.value) == [PlatformCode.MERGE_COMMIT_MISMATCH] and "base branch" in e.value.detail
    assert git(flow.c.path, "rev-parse", "main") == flow.base


def test_a_merge_that_cannot_be_read_back_is_reported_merged(template: Flow, tmp_path: Path, fakes: Any) -> None:
    """Fixed: after a 200 merge, the merge commit's read failed and attest said only PLATFORM_REQUEST_FAILED (the
    command: no `merged` at all); it is merged and unchecked: MERGE_COMMIT_MISMATCH, investigate."""
    flow = copy_of(template, tmp_path, fakes)
    gate = flow.gate()
    trial = flow.gh.pull().merge_commit_sha
    flow.fake.fault("GET", rf"/git/commits/(?!{trial})", "status", status=500, times=None)
    with pytest.raises(AttestError) as e:
        merge_pull_request(gate, flow.gh, base=gate.base)
    assert codes(e.value) == [PlatformCode.MERGE_COMMIT_MISMATCH] and e.value.detail.startswith("MERGED")
    assert flow.gh.pull().merged


def test_a_pull_request_of_another_id_is_never_merged(template: Flow, tmp_path: Path, fakes: Any) -> None:
    """Fixed: the merge's read of the pull request was not compared with the gate's ids (an answer for another pull
    request of the same number and name, e.g. a repository deleted and made again): it merged."""
    flow = copy_of(template, tmp_path, fakes)
    gate = flow.gate()
    flow.fake.fault("GET", r"/pulls/42$", "rewrite", fn=lambda doc: {**doc, "id": doc["id"] + 1}, times=None)
    with pytest.raises(AttestError) as e:
        merge_pull_request(gate, flow.gh, base=gate.base)
    assert codes(e.value) == [PlatformCode.PLATFORM_RESPONSE_SHAPE] and puts(flow.fake) == 0


# -- answers for another pull request or commit (fixed) ------------------------------------------------------------


def test_a_listing_holding_another_pull_requests_review_is_refused(template: Flow, tmp_path: Path, fakes: Any) -> None:
    """Fixed: the listing of pull request 42's reviews answered with pull request 43's copy of the record's review
    (the exact body and marker, by the App, on the head): publish said ALREADY PUBLISHED and posted nothing on 42."""
    flow = copy_of(template, tmp_path, fakes)
    flow.fake.open_pull(43, base_ref="main", head_ref="pr")
    body = json.loads(flow.payload.read_bytes())["body"] + record_marker(record_digest(flow)) + "\n"
    flow.fake.add_review(43, login=APP_LOGIN, body=body, commit_id=flow.head)
    other = flow.gh.client.get_object(f"/repos/{REPO}/pulls/43/reviews", lambda value: value)
    flow.fake.fault("GET", r"/pulls/42/reviews\?", "rewrite", fn=lambda doc: doc + other, times=None)
    with pytest.raises(AttestError) as e:
        flow.publish(app_login=APP_LOGIN)
    assert codes(e.value) == [PlatformCode.PLATFORM_RESPONSE_SHAPE] and "43" in e.value.detail
    assert review_posts(flow.fake) == 0


def test_a_review_created_on_another_pull_request_is_refused(template: Flow, tmp_path: Path, fakes: Any) -> None:
    """Fixed: the created review, as answered and as read back, was of pull request 43: accepted as published."""
    flow = copy_of(template, tmp_path, fakes)

    def elsewhere(doc: Any) -> Any:
        doc["pull_request_url"] = doc["pull_request_url"].replace("/pulls/42", "/pulls/43")
        return doc

    flow.fake.fault("POST", r"/pulls/42/reviews$", "rewrite", fn=elsewhere)
    flow.fake.fault("GET", r"/pulls/42/reviews/\d+$", "rewrite", fn=elsewhere)
    with pytest.raises(AttestError) as e:
        flow.publish(app_login=APP_LOGIN)
    assert codes(e.value) == [PlatformCode.PLATFORM_RESPONSE_SHAPE]


def test_a_status_answered_for_another_commit_is_refused(template: Flow, tmp_path: Path, fakes: Any) -> None:
    """Fixed: STATUS_READBACK_MISMATCH says "for another commit", but the answer's commit was never looked at."""
    flow = copy_of(template, tmp_path, fakes)
    flow.fake.fault("POST", r"/statuses/", "rewrite", fn=lambda doc: {**doc, "url": doc["url"].replace(flow.head, flow.base)})
    with pytest.raises(AttestError) as e:
        publish_gate_status(flow.gh, flow.head, True, ())
    assert codes(e.value) == [PlatformCode.STATUS_READBACK_MISMATCH] and flow.base in e.value.detail


# -- publishing exactly once (fixed) -------------------------------------------------------------------------------


def test_a_token_that_is_not_the_apps_is_caught_on_the_first_post(template: Flow, tmp_path: Path, fakes: Any) -> None:
    """Fixed: with --app-login, a token of someone else posted the review as them and publish said PUBLISHED; every
    later run ignored that review (not the App's) and posted one more."""
    flow = copy_of(template, tmp_path, fakes)
    someone = GitHubIdentity(REPO, PR, flow.fake.url, "ghs_admin", LIMITS)  # octocat's token
    with pytest.raises(AttestError) as e:
        flow.publish(host=someone, app_login=APP_LOGIN)
    assert codes(e.value) == [PlatformCode.PUBLISH_READBACK_MISMATCH] and "octocat" in e.value.detail
    assert [r.login for r in flow.gh.reviews()] == ["octocat"]


def test_two_publishers_at_once_are_caught(template: Flow, tmp_path: Path, fakes: Any) -> None:
    """Fixed: two runs read no review, both posted: both said PUBLISHED, and the pull request had the record twice.
    The one whose post lands second now reads the reviews again and finds the other: PUBLISH_DUPLICATE."""
    flow = copy_of(template, tmp_path, fakes)
    held = flow.fake.fault("POST", r"/pulls/42/reviews$", "hold")
    out: dict[str, Any] = {}

    def first() -> None:
        try:
            out["done"] = flow.publish(app_login=APP_LOGIN)
        except AttestError as e:
            out["error"] = e

    t = threading.Thread(target=first)
    t.start()
    try:
        assert held.entered.wait(30)
        second = flow.publish(app_login=APP_LOGIN)  # its own post is not held (the fault is spent)
        assert second.posted
    finally:
        held.release()
        t.join(30)
    assert codes(out["error"]) == [PlatformCode.PUBLISH_DUPLICATE]
    assert review_posts(flow.fake) == 2


# -- the token never leaves in a message, a file or the JSON output (fixed) ----------------------------------------


def test_a_merge_refusal_echoing_the_token_does_not_print_it(template: Flow, tmp_path: Path, fakes: Any,
                                                             capsys: pytest.CaptureFixture[str],
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Fixed: the 405 answer's message was quoted unscrubbed into the error (and the command's JSON)."""
    flow = copy_of(template, tmp_path, fakes)
    flow.fake.fault("PUT", r"/merge$", "status", status=405, body={"message": f"not with Bearer {APP_TOKEN}"})
    rc, doc, printed = run_cli(["merge-gate", "merge", *gate_args(flow)], capsys, monkeypatch)
    assert rc == 1 and doc["merged"] is False and APP_TOKEN not in printed
    assert not flow.gh.pull().merged


def test_a_published_review_whose_login_is_the_token_is_not_written(template: Flow, tmp_path: Path, fakes: Any,
                                                                    capsys: pytest.CaptureFixture[str],
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Fixed: the review read back named the token as its author; it went into the JSON output and the note file."""
    flow = copy_of(template, tmp_path, fakes)

    def author(doc: Any) -> Any:
        doc["user"]["login"] = APP_TOKEN
        return doc

    flow.fake.fault("GET", r"/pulls/42/reviews/\d+$", "rewrite", fn=author)
    rc, _, printed = run_cli(publish_args(flow), capsys, monkeypatch)
    assert rc == 1 and APP_TOKEN not in printed
    note = tmp_path / "record.published.json"
    assert not note.exists() or APP_TOKEN not in note.read_text()


@pytest.mark.parametrize("where", ["thread-path", "mergeable-state", "status-context"])
def test_a_gate_answer_echoing_the_token_does_not_print_or_post_it(where: str, template: Flow, tmp_path: Path, fakes: Any,
                                                                   capsys: pytest.CaptureFixture[str],
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Fixed: a thread's path, the mergeable_state or the status answer's context holding the token was quoted into
    the gate's findings: the JSON output, and (the first two) the status description posted."""
    flow = copy_of(template, tmp_path, fakes)
    if where == "thread-path":
        flow.fake.add_thread(PR, "app.py", 1, login="octocat")

        def path(doc: Any) -> Any:
            doc["data"]["repository"]["pullRequest"]["reviewThreads"]["nodes"][0]["path"] = f"{APP_TOKEN}.py"
            return doc

        flow.fake.fault("POST", r"/graphql$", "rewrite", fn=path, times=None)
    elif where == "mergeable-state":
        flow.fake.fault("GET", r"/pulls/42$", "rewrite", times=None,
                        fn=lambda doc: {**doc, "mergeable": False, "mergeable_state": APP_TOKEN})
    else:
        flow.fake.fault("POST", r"/statuses/", "rewrite", fn=lambda doc: {**doc, "context": APP_TOKEN})
    rc, doc, printed = run_cli(["merge-gate", "check", *gate_args(flow), "--publish-status"], capsys, monkeypatch)
    assert rc == 1 and doc["ok"] is False and APP_TOKEN not in printed
    # The failure is posted when the head can be read; the gate's own success is posted before its answer is judged.
    states = {"thread-path": ["failure"], "mergeable-state": [], "status-context": ["success"]}[where]
    posted = statuses_posted(flow.fake)
    assert [body["state"] for _, body in posted] == states and all(sha == flow.head for sha, _ in posted)
    assert APP_TOKEN not in json.dumps([body for _, body in posted])


# -- hostile or paginated answers the gate and publish already refuse (coverage) -----------------------------------


def test_an_unresolved_thread_on_the_last_page_blocks(template: Flow, tmp_path: Path, fakes: Any) -> None:
    flow = copy_of(template, tmp_path, fakes, page_size=1)
    for line in (1, 2):
        flow.fake.resolve_thread(flow.fake.add_thread(PR, "app.py", line, login="octocat"))
    flow.fake.add_thread(PR, "app.py", 1, login="mallory")
    gate = flow.gate()
    assert [f.code for f in gate.findings] == [PlatformCode.MERGE_UNRESOLVED_THREADS]
    assert sum(e.target == "/graphql" for e in flow.fake.log) >= 3


def _errors(doc: Any) -> Any:
    return {"data": None, "errors": [{"message": "Something went wrong while executing your query."}]}


def _null_pull(doc: Any) -> Any:
    return {"data": {"repository": {"pullRequest": None}}}


def _no_data(doc: Any) -> Any:
    return {"data": None}


def _loop(doc: Any) -> Any:
    doc["data"]["repository"]["pullRequest"]["reviewThreads"]["pageInfo"] = {"hasNextPage": True, "endCursor": "Y3Vyc29yOnYyOjA="}
    return doc


def _no_cursor(doc: Any) -> Any:
    doc["data"]["repository"]["pullRequest"]["reviewThreads"]["pageInfo"] = {"hasNextPage": True, "endCursor": None}
    return doc


@pytest.mark.parametrize(("fn", "code"), [
    (_errors, PlatformCode.PLATFORM_REQUEST_FAILED),
    (_null_pull, PlatformCode.PLATFORM_RESPONSE_SHAPE),
    (_no_data, PlatformCode.PLATFORM_RESPONSE_SHAPE),
    (_loop, PlatformCode.PLATFORM_REQUEST_FAILED),
    (_no_cursor, PlatformCode.PLATFORM_RESPONSE_SHAPE),
], ids=["errors", "null-pull-request", "null-data", "cursor-loop", "no-cursor"])
def test_a_hostile_threads_answer_fails_closed_with_a_failure_status(fn: Any, code: str, template: Flow, tmp_path: Path,
                                                                      fakes: Any, capsys: pytest.CaptureFixture[str],
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    flow = copy_of(template, tmp_path, fakes)
    flow.fake.fault("POST", r"/graphql$", "rewrite", fn=fn, times=None)
    rc, doc, _ = run_cli(["merge-gate", "check", *gate_args(flow), "--publish-status"], capsys, monkeypatch)
    assert rc == 1 and error_codes(doc) == [code]
    assert [(sha, body["state"]) for sha, body in statuses_posted(flow.fake)] == [(flow.head, "failure")]
    rc, doc, _ = run_cli(["merge-gate", "merge", *gate_args(flow)], capsys, monkeypatch)
    assert rc == 1 and puts(flow.fake) == 0


@pytest.mark.parametrize("to", ["itself", "another-origin"])
def test_a_reviews_listing_that_loops_or_leaves_the_origin_posts_nothing(to: str, template: Flow, tmp_path: Path,
                                                                          fakes: Any) -> None:
    flow = copy_of(template, tmp_path, fakes)
    elsewhere = fakes(flow.c.path)
    origin = flow.fake.url if to == "itself" else elsewhere.url
    link = f'<{origin}/repos/{REPO}/pulls/42/reviews?per_page=100>; rel="next"'
    flow.fake.fault("GET", r"/pulls/42/reviews\?", "status", status=200, body=[], headers={"Link": link}, times=None)
    with pytest.raises(AttestError) as e:
        flow.publish(app_login=APP_LOGIN)
    assert codes(e.value) == [PlatformCode.PLATFORM_REQUEST_FAILED]
    assert ("loop" if to == "itself" else "FOREIGN_LINK") in e.value.detail
    assert review_posts(flow.fake) == 0 and elsewhere.log == []


def test_the_records_review_on_a_later_page_is_found(template: Flow, tmp_path: Path, fakes: Any) -> None:
    flow = copy_of(template, tmp_path, fakes, page_size=1)
    for who in ("alice", "octocat"):
        flow.fake.add_review(PR, login=who, body=f"a review by {who}")
    done = flow.publish(app_login=APP_LOGIN)
    assert done.posted
    again = flow.publish(app_login=APP_LOGIN)
    assert not again.posted and again.review_id == done.review_id and review_posts(flow.fake) == 1


def test_a_forged_copy_by_another_author_is_ignored_with_app_login(template: Flow, tmp_path: Path, fakes: Any) -> None:
    """Another user's exact copy of the record's review (its body, marker, head and state) is not the App's."""
    flow = copy_of(template, tmp_path, fakes)
    body = json.loads(flow.payload.read_bytes())["body"] + record_marker(record_digest(flow)) + "\n"
    forged = flow.fake.add_review(PR, login="mallory", body=body, commit_id=flow.head)
    done = flow.publish(app_login=APP_LOGIN)
    assert done.posted and done.review_id != forged and done.login == APP_LOGIN


def test_an_older_record_of_the_pull_request_is_never_published_or_merged(template: Flow, tmp_path: Path, fakes: Any,
                                                                          capsys: pytest.CaptureFixture[str],
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    flow = copy_of(template, tmp_path, fakes)
    push(flow.c.path, "pr", "later.py")
    with pytest.raises(AttestError) as e:
        flow.publish()
    assert codes(e.value) == [PlatformCode.PUBLISH_HEAD_MOVED] and review_posts(flow.fake) == 0
    rc, doc, _ = run_cli(["merge-gate", "merge", *gate_args(flow)], capsys, monkeypatch)
    assert rc == 1 and "MERGE_REVIEW_STALE_HEAD" in error_codes(doc) and puts(flow.fake) == 0


@pytest.mark.parametrize("field", ["id", "base-repo-id"])
def test_a_pull_request_of_other_ids_is_never_published(field: str, template: Flow, tmp_path: Path, fakes: Any) -> None:
    """The record's pull request and repository ids against GitHub's (step 3), not only the name and number."""
    flow = copy_of(template, tmp_path, fakes)

    def other(doc: Any) -> Any:
        if field == "id":
            doc["id"] += 1
        else:
            doc["base"]["repo"]["id"] += 1
        return doc

    flow.fake.fault("GET", r"/pulls/42$", "rewrite", fn=other, times=None)
    with pytest.raises(AttestError) as e:
        flow.publish()
    assert codes(e.value) == [PlatformCode.PUBLISH_OTHER_PULL_REQUEST] and review_posts(flow.fake) == 0


@pytest.mark.parametrize("write", ["review", "merge"])
def test_a_redirected_write_is_never_followed(write: str, template: Flow, tmp_path: Path, fakes: Any) -> None:
    """A 307 on the POST or PUT (it would be re-sent, with the token): not followed; the other origin sees nothing."""
    flow = copy_of(template, tmp_path, fakes)
    elsewhere = fakes(flow.c.path)
    gate = flow.gate()
    pattern = r"/pulls/42/reviews$" if write == "review" else r"/merge$"
    flow.fake.fault("*", pattern, "redirect", status=307, location=f"{elsewhere.url}/repos/{REPO}/pulls/42/x")
    with pytest.raises(AttestError) as e:
        flow.publish() if write == "review" else merge_pull_request(gate, flow.gh, base=gate.base)
    assert codes(e.value) == [PlatformCode.PLATFORM_REQUEST_FAILED] and "307" in e.value.detail
    assert elsewhere.log == [] and flow.gh.reviews() == () and not flow.gh.pull().merged


def test_a_slow_review_answer_times_out_and_is_found(template: Flow, tmp_path: Path, fakes: Any) -> None:
    """Slow-loris on the create: made, answered after the deadline; found by its marker, never posted twice."""
    flow = copy_of(template, tmp_path, fakes)
    held = flow.fake.fault("POST", r"/pulls/42/reviews$", "hold", when="after")
    quick = GitHubIdentity(REPO, PR, flow.fake.url, APP_TOKEN, QUICK)
    try:
        start = time.monotonic()
        done = flow.publish(host=quick, app_login=APP_LOGIN)
        assert time.monotonic() - start < 15
    finally:
        held.release()
    assert done.posted and len(flow.gh.reviews()) == 1 and review_posts(flow.fake) == 1
