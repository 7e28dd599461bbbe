"""The whole review on GitHub, against the stateful fake GitHub (tests/support/fake_github.py):
bootstrap, start, exec, recheck, serialize, publish, the gate with its status, and the merge.

Every answer the fake sends and every body it accepts is checked against GitHub's OpenAPI
description (``fake.schema_errors`` stays empty). The repository behind the fake is a real git
repository, so a merge is a real merge commit whose parents and tree the post-merge check reads.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import test_bootstrap
import test_merge_gate as tm
import test_review_serialize as ts
from support.caps import BACKEND
from support.fake_github import FakeGitHub
from support.gitrepo import git

from attest.attestation import load_policy, load_signer
from attest.errors import AttestError
from attest.review.bootstrap import GitHubIdentity
from attest.review.evidence import HttpLimits
from attest.review.merge import ci_result_predicate, merge_gate_check, sign_ci_result
from attest.review.platform import (
    GitHubPlatform,
    PlatformCode,
    github_gate_facts,
    merge_pull_request,
    publish_gate_status,
    publish_review,
    record_marker,
)
from attest.review.procedure import recheck_review, review_start, run_review, serialize_review

Consumer = test_bootstrap.Consumer

REPO, REPO_ID, PR = "octo/widgets", 1296269, 42
APP_TOKEN, APP_LOGIN = "ghs_app", "attest-review[bot]"
CLEAN = {"complete": True, "limitations": [], "findings": []}
BLOCKING = {"complete": True, "limitations": [], "findings": [
    {"id": "eval", "severity": "high", "blocking": True, "message": "eval() of request data", "path": "app.py", "line": 2,
     "side": "RIGHT"}]}
LIMITS = HttpLimits(timeout=5.0, deadline=10.0)


def codes(err: AttestError) -> list[str]:
    return [f.code for f in err.findings]


@dataclass
class Flow:
    """One pull request on the fake GitHub, reviewed up to a signed record and its payload."""

    c: Any
    fake: FakeGitHub
    host: GitHubIdentity
    gh: GitHubPlatform
    handoff: Path
    review: str
    record: Path
    payload: Path
    gate_trust: Path
    ci_key: Path
    tmp: Path
    state: Path  # the deployment's state directory
    trust: Path  # the deployment's TRUST (review records verify under it)

    @property
    def head(self) -> str:
        return self.c.head

    @property
    def base(self) -> str:
        return self.c.base

    def ci(self, conclusion: str = "success") -> Path:
        out = self.tmp / f"ci-{conclusion}-{self.head[:8]}.json"
        sign_ci_result(ci_result_predicate(repository_id=REPO_ID, full_name=REPO, head=self.head, base=self.base, check="test",
                                           conclusion=conclusion, run="run-1"), load_signer(str(self.ci_key)), out)
        return out

    def publish(self, **kw: Any) -> Any:
        return publish_review(record=kw.pop("record", self.record), payload=kw.pop("payload", self.payload),
                              policy=load_policy(self.trust), host=kw.pop("host", self.host), **kw)

    def gate(self, *, record: Path | None = None, host: GitHubIdentity | None = None, ci: list[Path] | None = None) -> Any:
        host = host or self.host
        return merge_gate_check(record=record or self.record, policy=load_policy(self.gate_trust), host=host,
                                ci=[self.ci()] if ci is None else ci, required_checks=("test",), state_dir=self.state,
                                host_facts=github_gate_facts(GitHubPlatform.for_host(host)))


def make_pr(path: Path, dep: Any, content: str, *, conflict: bool = False) -> Any:
    """A consumer repository: main at the base, pr one commit on it changing app.py (``conflict``: main changed it too)."""
    c = test_bootstrap.make_consumer(path, dep.sha)
    git(c.path, "branch", "-M", "main")
    git(c.path, "checkout", "-qb", "pr")
    (c.path / "app.py").write_text(content)
    head = ts.commit(c.path, "the change")
    git(c.path, "checkout", "-q", "main")
    base = c.base
    if conflict:
        (c.path / "app.py").write_text("def f(x):\n    return -x\n")
        base = ts.commit(c.path, "the base changes app.py too")
    return Consumer(c.path, base, head)


def reviewed(dep: Any, skill: Any, tmp: Path, fake_factory: Any, *, content: str = "def f(x):\n    return x\n",
             result: Any = CLEAN, number: int = PR, conflict: bool = False) -> Flow:
    c = make_pr(tmp / "consumer", dep, content, conflict=conflict)
    fake = fake_factory(c.path)
    fake.open_pull(number, base_ref="main", head_ref="pr")
    host = GitHubIdentity(REPO, number, fake.url, APP_TOKEN, LIMITS)
    handoff = Path(test_bootstrap.bootstrap(
        pins=dep.pins, trust=dep.trust, state_dir=dep.state, skill_dir=skill[0], installation=skill[1], repo=c.path, host=host,
        key=str(dep.key), out=tmp / "handoff.json", backend=BACKEND, runner=test_bootstrap.HostCheck(),
        clock=lambda: test_bootstrap.T0).handoff)
    start = review_start(handoff=handoff, policy=load_policy(dep.trust), state_dir=dep.state, repo=c.path, host=host,
                         semantic=ts.SEM, adapter=ts.ADA)
    env = {"REVIEW_TOKEN": APP_TOKEN}
    assert recheck_review(state_dir=dep.state, review=start.review, token_env="REVIEW_TOKEN", environ=env).outcome.outcome == "proceed"
    out = tmp / "result.json"
    run_review(state_dir=dep.state, review=start.review, handoff=handoff, policy=load_policy(dep.trust),
               argv=ts.printing(result), out=out, readonly=ts.HOST_PYTHON)
    done = serialize_review(state_dir=dep.state, review=start.review, result=out, out=tmp / "payload.json",
                            signer=load_signer(str(dep.key)), token_env="REVIEW_TOKEN", environ=env, record=tmp / "record.json")
    gate_trust, ci_key = tm.gate_trust(dep, tmp)
    return Flow(c, fake, host, GitHubPlatform.for_host(host), handoff, start.review, Path(done.record_path), tmp / "payload.json",
                gate_trust, ci_key, tmp, dep.state, dep.trust)


@pytest.fixture(scope="module")
def template(dep: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Flow]:
    """One clean pull request reviewed up to its record, once per module; each test works on a copy of its repository."""
    tmp = tmp_path_factory.mktemp("github-flow")
    with fake_factory() as make:
        flow = reviewed(dep, skill_for(dep, tmp), tmp, make, content="def template():\n    return 0\n")
    yield flow


def skill_for(dep: Any, tmp: Path) -> tuple[Path, Path]:
    """A fresh installation of the pinned skill (what the ``skill`` fixture makes, for a module-scoped fixture)."""
    from attest.builder import install_skill

    (tmp / "skills").mkdir()
    done = install_skill(dep.pins, dep.state, tmp / "skills" / "agent-policy", load_signer(str(dep.key)), policy=load_policy(dep.trust))
    return Path(done.installed_root), Path(done.attestation)


def copy_of(template: Flow, tmp: Path, fakes: Any, **kw: Any) -> Flow:
    """The template's pull request on a fresh fake over a copy of its repository, with copies of its record and payload."""
    repo = tmp / "consumer"
    shutil.copytree(template.c.path, repo, symlinks=True)
    fake = fakes(repo, **kw)
    fake.open_pull(PR, base_ref="main", head_ref="pr")
    host = GitHubIdentity(REPO, PR, fake.url, APP_TOKEN, LIMITS)
    for name in ("record.json", "payload.json"):
        shutil.copyfile(template.tmp / name, tmp / name)
    return Flow(Consumer(repo, template.base, template.head), fake, host, GitHubPlatform.for_host(host), template.handoff,
                template.review, tmp / "record.json", tmp / "payload.json", template.gate_trust, template.ci_key, tmp,
                template.state, template.trust)


@contextmanager
def fake_factory() -> Iterator[Any]:
    """Start fakes of the repository on demand; on the way out stop each, and none may have sent or accepted an off-schema body."""
    started: list[FakeGitHub] = []

    def make(repo: Path, **kw: Any) -> FakeGitHub:
        fake = FakeGitHub(repo, full_name=REPO, repository_id=REPO_ID, **kw)
        fake.__enter__()
        started.append(fake)
        return fake

    yield make
    for fake in started:
        fake.__exit__(None, None, None)
        assert fake.schema_errors == [], fake.schema_errors


@pytest.fixture
def fakes() -> Iterator[Any]:
    with fake_factory() as make:
        yield make


# -- the clean path -----------------------------------------------------------------------------------------------


def test_a_clean_pull_request_is_published_gated_and_merged(dep: Any, skill: Any, tmp_path: Path, fakes: Any) -> None:
    """Each step for real, from a fresh review: bootstrap, start, recheck, exec and serialize on the fake, then the rest."""
    flow = reviewed(dep, skill, tmp_path, fakes)
    done = flow.publish(app_login=APP_LOGIN)
    assert done.posted and done.commit_id == flow.head and done.state == "COMMENTED"
    posted = flow.gh.reviews()
    assert len(posted) == 1 and posted[0].login == APP_LOGIN and record_marker(done.record_digest) in posted[0].body
    # The body on GitHub is the signed payload's body followed by the marker line, nothing else.
    payload = json.loads(flow.payload.read_bytes())
    assert posted[0].body == payload["body"] + record_marker(done.record_digest) + "\n"
    assert json.loads(Path(done.note).read_text())["review_id"] == done.review_id
    # A second publish finds it and posts nothing.
    again = flow.publish(app_login=APP_LOGIN)
    assert not again.posted and again.review_id == done.review_id and len(flow.gh.reviews()) == 1

    gate = flow.gate()
    assert gate.authorized, [f.to_json() for f in gate.findings]
    status = publish_gate_status(flow.gh, gate.head, gate.authorized, gate.findings)
    assert (status.state, status.sha) == ("success", flow.head)
    merged = merge_pull_request(gate, flow.gh, base=gate.base)
    parents = git(flow.c.path, "rev-list", "--parents", "-n1", merged.sha).split()[1:]
    assert parents == [flow.base, flow.head]
    assert git(flow.c.path, "rev-parse", "main") == merged.sha
    pr = flow.gh.pull()
    assert pr.merged and pr.merge_commit_sha == merged.sha
    assert [e.method for e in flow.fake.log].count("PUT") == 1


def test_a_squash_merge_is_checked_too(template: Flow, tmp_path: Path, fakes: Any) -> None:
    flow = copy_of(template, tmp_path, fakes)
    flow.publish()
    gate = flow.gate()
    assert gate.authorized
    merged = merge_pull_request(gate, flow.gh, base=gate.base, method="squash")
    assert git(flow.c.path, "rev-list", "--parents", "-n1", merged.sha).split()[1:] == [flow.base]
    assert git(flow.c.path, "rev-parse", f"{merged.sha}^{{tree}}") == merged.tree


def test_branch_protection_requires_the_gates_status(template: Flow, tmp_path: Path, fakes: Any) -> None:
    flow = copy_of(template, tmp_path, fakes, required_status="attest/merge-gate")
    gate = flow.gate()
    assert gate.authorized
    with pytest.raises(AttestError) as e:  # GitHub itself refuses while the required status is missing
        merge_pull_request(gate, flow.gh, base=gate.base)
    assert codes(e.value) == [PlatformCode.MERGE_REFUSED] and "attest/merge-gate" in e.value.detail
    assert publish_gate_status(flow.gh, gate.head, gate.authorized, gate.findings).state == "success"
    assert merge_pull_request(gate, flow.gh, base=gate.base).head == flow.head


# -- what ends unmerged -------------------------------------------------------------------------------------------


def codes_of(gate: Any) -> list[str]:
    return [f.code for f in gate.findings]


def test_a_blocking_review_is_posted_and_the_gate_refuses(dep: Any, skill: Any, tmp_path: Path, fakes: Any) -> None:
    flow = reviewed(dep, skill, tmp_path, fakes, content="def g(x):\n    return eval(x)\n", result=BLOCKING)
    done = flow.publish()
    assert done.state == "CHANGES_REQUESTED"
    gate = flow.gate()
    assert not gate.authorized and "MERGE_BLOCKING_FINDINGS" in codes_of(gate)
    status = publish_gate_status(flow.gh, gate.head, gate.authorized, gate.findings)
    assert status.state == "failure" and status.description.startswith("MERGE_BLOCKING_FINDINGS")
    with pytest.raises(AttestError) as e:
        merge_pull_request(gate, flow.gh, base=gate.base)
    assert codes(e.value) == [PlatformCode.MERGE_REFUSED]
    assert not flow.gh.pull().merged and len(flow.gh.reviews()) == 1


def test_an_unresolved_thread_blocks_until_a_person_resolves_it(template: Flow, tmp_path: Path, fakes: Any) -> None:
    flow = copy_of(template, tmp_path, fakes)
    flow.publish()
    thread = flow.fake.add_thread(PR, "app.py", 1, login="octocat")
    gate = flow.gate()
    assert codes_of(gate) == [PlatformCode.MERGE_UNRESOLVED_THREADS]
    status = publish_gate_status(flow.gh, gate.head, gate.authorized, gate.findings)
    assert status.state == "failure" and status.description.startswith("MERGE_UNRESOLVED_THREADS")
    with pytest.raises(AttestError):
        merge_pull_request(gate, flow.gh, base=gate.base)
    flow.fake.resolve_thread(thread)
    assert flow.gate().authorized
    assert not flow.gh.pull().merged and len(flow.gh.reviews()) == 1


def test_a_head_moved_between_gate_and_merge_is_not_merged(template: Flow, tmp_path: Path, fakes: Any) -> None:
    flow = copy_of(template, tmp_path, fakes)
    gate = flow.gate()
    assert gate.authorized
    git(flow.c.path, "checkout", "-q", "pr")
    (flow.c.path / "later.py").write_text("print('unreviewed')\n")
    ts.commit(flow.c.path, "pushed after the gate")
    with pytest.raises(AttestError) as e:
        merge_pull_request(gate, flow.gh, base=gate.base)
    assert codes(e.value) == [PlatformCode.MERGE_HEAD_MOVED]
    assert not flow.gh.pull().merged


def test_a_head_moved_during_the_merge_call_is_refused_by_the_pinned_sha(template: Flow, tmp_path: Path, fakes: Any) -> None:
    import threading

    flow = copy_of(template, tmp_path, fakes)
    gate = flow.gate()
    held = flow.fake.fault("PUT", r"/merge$", "hold")
    out: dict[str, Any] = {}

    def merging() -> None:
        try:
            out["merged"] = merge_pull_request(gate, flow.gh, base=gate.base)
        except AttestError as e:
            out["error"] = e

    t = threading.Thread(target=merging)
    t.start()
    assert held.entered.wait(10)
    git(flow.c.path, "checkout", "-q", "pr")
    (flow.c.path / "later.py").write_text("print('unreviewed')\n")
    ts.commit(flow.c.path, "pushed while the merge call was in flight")
    held.release()
    t.join(20)
    assert codes(out["error"]) == [PlatformCode.MERGE_HEAD_MOVED] and "409" in out["error"].detail
    assert not flow.gh.pull().merged


def test_a_moved_base_is_a_stale_review(template: Flow, tmp_path: Path, fakes: Any) -> None:
    flow = copy_of(template, tmp_path, fakes)
    (flow.c.path / "base-later.txt").write_text("later\n")
    ts.commit(flow.c.path, "the base moves on")  # main is checked out in the copy
    with pytest.raises(AttestError) as e:
        flow.publish()
    assert codes(e.value) == [PlatformCode.PUBLISH_HEAD_MOVED]
    gate = flow.gate()
    assert "MERGE_REVIEW_STALE_BASE" in codes_of(gate)
    assert publish_gate_status(flow.gh, gate.head, gate.authorized, gate.findings).state == "failure"
    assert flow.gh.reviews() == () and not flow.gh.pull().merged


def test_a_record_of_another_pull_request_is_never_published_or_merged(template: Flow, tmp_path: Path, fakes: Any) -> None:
    flow = copy_of(template, tmp_path, fakes)
    flow.fake.open_pull(43, base_ref="main", head_ref="pr")  # the same head and base, another pull request
    other = GitHubIdentity(REPO, 43, flow.fake.url, APP_TOKEN, LIMITS)
    with pytest.raises(AttestError) as e:
        flow.publish(host=other)
    assert codes(e.value) == [PlatformCode.PUBLISH_OTHER_PULL_REQUEST]
    gate = flow.gate(host=other)
    assert codes_of(gate) == ["MERGE_REVIEW_OTHER_PULL_REQUEST"]
    assert GitHubPlatform.for_host(other).reviews() == () and not GitHubPlatform.for_host(other).pull().merged


def test_a_lost_answer_is_read_back_and_never_posted_twice(template: Flow, tmp_path: Path, fakes: Any) -> None:
    flow = copy_of(template, tmp_path, fakes)
    flow.fake.fault("POST", r"/pulls/42/reviews$", "lose_answer")
    done = flow.publish()
    assert done.posted and len(flow.gh.reviews()) == 1
    assert not flow.publish().posted and len(flow.gh.reviews()) == 1
    assert [(e.method, e.target.endswith("/reviews")) for e in flow.fake.log].count(("POST", True)) == 1


def test_a_lost_answer_of_a_review_not_there_yet_is_unconfirmed_then_found(template: Flow, tmp_path: Path, fakes: Any) -> None:
    flow = copy_of(template, tmp_path, fakes)
    quick = GitHubIdentity(REPO, PR, flow.fake.url, APP_TOKEN, HttpLimits(timeout=1.0, deadline=2.0))
    held = flow.fake.fault("POST", r"/pulls/42/reviews$", "hold")  # GitHub is slow: the answer never comes in time
    with pytest.raises(AttestError) as e:
        flow.publish(host=quick)
    assert codes(e.value) == [PlatformCode.PUBLISH_UNCONFIRMED]
    held.release()  # ... and then GitHub creates it after all
    for _ in range(100):
        if flow.gh.reviews():
            break
        import time

        time.sleep(0.05)
    again = flow.publish()
    assert not again.posted and len(flow.gh.reviews()) == 1  # found, not posted a second time


def test_a_payload_that_is_not_the_records_is_refused(template: Flow, tmp_path: Path, fakes: Any) -> None:
    flow = copy_of(template, tmp_path, fakes)
    doc = json.loads(flow.payload.read_bytes())
    doc["body"] = doc["body"].replace("complete", "COMPLETE")
    flow.payload.write_text(json.dumps(doc))
    with pytest.raises(AttestError) as e:
        flow.publish()
    assert codes(e.value) == [PlatformCode.PUBLISH_PAYLOAD_MISMATCH]
    assert flow.gh.reviews() == ()


@pytest.mark.parametrize(("method", "path"), [("POST", r"/pulls/42/reviews$"), ("GET", r"/pulls/42/reviews/\d+$")],
                         ids=["create-answer", "read-back"])
def test_a_review_answered_for_another_commit_is_caught(method: str, path: str, template: Flow, tmp_path: Path,
                                                        fakes: Any) -> None:
    flow = copy_of(template, tmp_path, fakes)

    def elsewhere(doc: Any) -> Any:
        doc["commit_id"] = flow.base
        return doc

    flow.fake.fault(method, path, "rewrite", fn=elsewhere)
    with pytest.raises(AttestError) as e:
        flow.publish()
    assert codes(e.value) == [PlatformCode.PUBLISH_READBACK_MISMATCH]
    # What GitHub holds is the record's review after all: the next publish finds it, checks it, and posts nothing.
    assert not flow.publish().posted and len(flow.gh.reviews()) == 1


def test_an_edited_or_duplicated_publication_is_refused(template: Flow, tmp_path: Path, fakes: Any) -> None:
    flow = copy_of(template, tmp_path, fakes)
    done = flow.publish()
    flow.fake.edit_review(done.review_id, "nothing to see" + record_marker(done.record_digest), login="octocat")
    with pytest.raises(AttestError) as e:
        flow.publish()
    assert codes(e.value) == [PlatformCode.PUBLISH_EXISTING_MISMATCH]
    flow.fake.add_review(PR, login=APP_LOGIN, body="copy " + record_marker(done.record_digest), commit_id=flow.head)
    with pytest.raises(AttestError) as e:
        flow.publish()
    assert codes(e.value) == [PlatformCode.PUBLISH_DUPLICATE]


def test_a_merge_reported_for_another_commit_is_a_mismatch(template: Flow, tmp_path: Path, fakes: Any) -> None:
    flow = copy_of(template, tmp_path, fakes)
    gate = flow.gate()

    def other(doc: Any) -> Any:
        doc["sha"] = flow.base
        return doc

    flow.fake.fault("PUT", r"/merge$", "rewrite", fn=other)
    with pytest.raises(AttestError) as e:
        merge_pull_request(gate, flow.gh, base=gate.base)
    assert codes(e.value) == [PlatformCode.MERGE_COMMIT_MISMATCH] and e.value.detail.startswith("MERGED, but not as reviewed")


def test_a_lost_merge_answer_is_read_back(template: Flow, tmp_path: Path, fakes: Any) -> None:
    flow = copy_of(template, tmp_path, fakes)
    gate = flow.gate()
    flow.fake.fault("PUT", r"/merge$", "lose_answer")
    merged = merge_pull_request(gate, flow.gh, base=gate.base)
    assert flow.gh.pull().merge_commit_sha == merged.sha
    assert [e.method for e in flow.fake.log].count("PUT") == 1


def test_a_merge_answer_that_never_comes_is_unconfirmed(template: Flow, tmp_path: Path, fakes: Any) -> None:
    flow = copy_of(template, tmp_path, fakes)
    gate = flow.gate()
    quick = GitHubPlatform.for_host(GitHubIdentity(REPO, PR, flow.fake.url, APP_TOKEN, HttpLimits(timeout=1.0, deadline=2.0)))
    held = flow.fake.fault("PUT", r"/merge$", "hold")
    with pytest.raises(AttestError) as e:
        merge_pull_request(gate, quick, base=gate.base)
    assert codes(e.value) == [PlatformCode.MERGE_UNCONFIRMED]
    held.release()


def test_mergeability_not_computed_yet_is_pending(template: Flow, tmp_path: Path, fakes: Any) -> None:
    flow = copy_of(template, tmp_path, fakes)
    flow.fake.pulls[PR].mergeable_override = [None]
    gate = flow.gate()
    assert codes_of(gate) == [PlatformCode.MERGE_MERGEABILITY_UNKNOWN]
    assert publish_gate_status(flow.gh, gate.head, gate.authorized, gate.findings).state == "pending"


def test_a_conflict_is_not_mergeable(dep: Any, skill: Any, tmp_path: Path, fakes: Any) -> None:
    flow = reviewed(dep, skill, tmp_path, fakes, content="def f(x):\n    return x + 1\n", conflict=True)
    gate = flow.gate()
    assert codes_of(gate) == [PlatformCode.MERGE_NOT_MERGEABLE]


def test_a_status_answered_as_another_is_refused(template: Flow, tmp_path: Path, fakes: Any) -> None:
    flow = copy_of(template, tmp_path, fakes)

    def pending(doc: Any) -> Any:
        doc["state"] = "pending"
        return doc

    flow.fake.fault("POST", r"/statuses/", "rewrite", fn=pending)
    with pytest.raises(AttestError) as e:
        publish_gate_status(flow.gh, flow.head, True, ())
    assert codes(e.value) == [PlatformCode.STATUS_READBACK_MISMATCH]


@pytest.mark.parametrize(("kind", "params", "code"), [
    ("redirect", {"location": "http://127.0.0.1:9/elsewhere"}, PlatformCode.PLATFORM_REQUEST_FAILED),
    ("huge", {"size": 9 * 1024 * 1024}, PlatformCode.PLATFORM_REQUEST_FAILED),
    ("rewrite", {"fn": lambda doc: {k: v for k, v in doc.items() if k != "head"}}, PlatformCode.PLATFORM_RESPONSE_SHAPE),
])
def test_a_hostile_pull_request_answer_fails_closed(kind: str, params: dict[str, Any], code: str, template: Flow,
                                                    tmp_path: Path, fakes: Any) -> None:
    flow = copy_of(template, tmp_path, fakes)
    flow.fake.fault("GET", r"/pulls/42$", kind, times=None, **params)
    with pytest.raises(AttestError) as e:
        GitHubPlatform.for_host(flow.host).pull()
    assert codes(e.value) == [code]
    assert flow.fake.targets.count("/repos/octo/widgets/pulls/42") >= 1


def test_a_rebase_merge_is_refused(template: Flow, tmp_path: Path, fakes: Any) -> None:
    flow = copy_of(template, tmp_path, fakes)
    gate = flow.gate()
    with pytest.raises(AttestError) as e:
        merge_pull_request(gate, flow.gh, base=gate.base, method="rebase")
    assert codes(e.value) == [PlatformCode.MERGE_BAD_METHOD]


# -- the commands -------------------------------------------------------------------------------------------------


def test_the_commands_publish_gate_with_status_and_merge(template: Flow, tmp_path: Path, fakes: Any,
                                                          capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    from attest.cli import main

    flow = copy_of(template, tmp_path, fakes)
    monkeypatch.setenv("ATTEST_APP_TOKEN", APP_TOKEN)
    host = ["--github", REPO, "--pr", str(PR), "--api-url", flow.fake.url, "--token-env", "ATTEST_APP_TOKEN"]
    assert main(["review", "publish", "--record", str(flow.record), "--payload", str(flow.payload), "--policy",
                 str(flow.trust), *host, "--json"]) == 0
    published = json.loads(capsys.readouterr().out)
    assert published["posted"] is True and published["commit_id"] == flow.head
    gate = ["--record", str(flow.record), "--policy", str(flow.gate_trust), "--ci", str(flow.ci()), "--require-check", "test",
            "--state-dir", str(flow.state), *host]
    assert main(["merge-gate", "check", *gate, "--publish-status", "--json"]) == 0
    checked = json.loads(capsys.readouterr().out)
    assert checked["authorized"] is True and checked["status"]["state"] == "success" and checked["status"]["sha"] == flow.head
    assert main(["merge-gate", "merge", *gate, "--json"]) == 0
    merged = json.loads(capsys.readouterr().out)
    assert merged["merged"] is True and git(flow.c.path, "rev-parse", "main") == merged["merge_commit"]
    assert APP_TOKEN not in json.dumps([published, checked, merged])
    # Merged now: the gate says so, and its failure is posted (the pull request's head is unchanged).
    assert main(["merge-gate", "check", *gate, "--publish-status", "--json"]) == 1
    after = json.loads(capsys.readouterr().out)
    assert after["authorized"] is False and "MERGE_NOT_MERGEABLE" in [f["code"] for f in after["findings"]]
    assert after["status"]["state"] == "failure"


def test_a_gate_that_cannot_decide_posts_failure(template: Flow, tmp_path: Path, fakes: Any, capsys: pytest.CaptureFixture[str],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from attest.cli import main

    flow = copy_of(template, tmp_path, fakes)
    monkeypatch.setenv("ATTEST_APP_TOKEN", APP_TOKEN)
    flow.record.write_text("{}")  # not a signed record
    rc = main(["merge-gate", "check", "--record", str(flow.record), "--policy", str(flow.gate_trust), "--require-check", "test",
               "--state-dir", str(flow.state), "--github", REPO, "--pr", str(PR), "--api-url", flow.fake.url,
               "--token-env", "ATTEST_APP_TOKEN", "--publish-status", "--json"])
    assert rc != 0
    posted = [e for e in flow.fake.log if e.method == "POST" and "/statuses/" in e.target]
    assert len(posted) == 1 and json.loads(posted[0].body)["state"] == "failure" and posted[0].target.endswith(flow.head)
