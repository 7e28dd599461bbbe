"""The `--github` adapter end to end: bootstrap, review start, recheck and serialize, over real HTTP.

The local replay server (127.0.0.1, no network) answers as the REST API does; the repository is a
real git repository whose objects decide the trees. The token is given again to recheck and
serialize by the name of its variable and must never be recorded.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import test_bootstrap
import test_bootstrap_github as tg
import test_review_serialize as ts
from support.caps import BACKEND
from support.github_replay import ReplayServer, ok
from support.gitrepo import git

from attest.attestation import load_policy, load_signer
from attest.review.bootstrap import GitHubIdentity
from attest.review.evidence import HttpLimits
from attest.review.procedure import recheck_review, review_start, run_review, serialize_review

Consumer = test_bootstrap.Consumer


def serve(api: ReplayServer, c: Any, head: str) -> None:
    tree = git(c.path, "rev-parse", f"{c.base}^{{tree}}")
    d = copy.deepcopy(tg.docs(tg.Repo(c.path, c.base, head, tree, "sha1")))
    api.set(tg.REPO_PATH, ok(d["repo"]))
    api.set(tg.PR_PATH, ok(d["pull"]))
    api.set(f"{tg.REPO_PATH}/git/commits/{c.base}", ok(d["commit"]))


def test_a_github_review_from_bootstrap_to_serialize(dep: Any, skill: Any, tmp_path: Path, api: ReplayServer) -> None:
    c = test_bootstrap.make_consumer(tmp_path / "consumer", dep.sha)
    git(c.path, "checkout", "-qb", "pr")
    (c.path / "notes.txt").write_text("one\n")
    head = ts.commit(c.path, "notes")
    c = Consumer(c.path, c.base, head)
    serve(api, c, head)
    host = GitHubIdentity(tg.REQUESTED, tg.NUMBER, api.url, tg.TOKEN, HttpLimits())
    handoff = Path(test_bootstrap.bootstrap(pins=dep.pins, trust=dep.trust, state_dir=dep.state, skill_dir=skill[0], installation=skill[1],
                             repo=c.path, host=host, key=str(dep.key), out=tmp_path / "handoff.json", backend=BACKEND,
                             runner=test_bootstrap.HostCheck(), clock=lambda: test_bootstrap.T0).handoff)
    start = review_start(handoff=handoff, policy=load_policy(dep.trust), state_dir=dep.state, repo=c.path, host=host,
                         semantic=ts.SEM, adapter=ts.ADA)
    state_bytes = (dep.state / "reviews" / f"{start.review}.json").read_bytes()
    state = json.loads(state_bytes)
    assert state["host"] == {"adapter": "github", "repository": tg.REQUESTED, "pr": tg.NUMBER, "api_url": api.url}
    assert tg.TOKEN.encode() not in state_bytes
    env = {"REVIEW_TOKEN": tg.TOKEN}
    # Recheck makes the adapter again from the state; the token comes from the named variable only.
    api.log.clear()
    got = recheck_review(state_dir=dep.state, review=start.review, token_env="REVIEW_TOKEN", environ=env)
    assert got.outcome.outcome == "proceed"
    assert api.log and all(entry.headers.get("Authorization") == f"Bearer {tg.TOKEN}" for entry in api.log)
    out = tmp_path / "result.json"
    run_review(state_dir=dep.state, review=start.review, handoff=handoff, policy=load_policy(dep.trust),
               argv=ts.printing({"complete": True, "limitations": [], "findings": []}), out=out, readonly=ts.HOST_PYTHON)
    done = serialize_review(state_dir=dep.state, review=start.review, result=out, out=tmp_path / "payload.json",
                            signer=load_signer(str(dep.key)), token_env="REVIEW_TOKEN", environ=env)
    assert done.status == "complete" and done.head == head
    for written in (tmp_path / "payload.json", Path(done.record_path), dep.state / "results" / f"{start.review}.json"):
        assert tg.TOKEN.encode() not in written.read_bytes()
    # The API now reports another head: the recheck refreshes, and the old review's serialization is refused.
    (c.path / "later.txt").write_text("later\n")
    moved = ts.commit(c.path, "later")
    serve(api, c, moved)
    got = recheck_review(state_dir=dep.state, review=start.review, token_env="REVIEW_TOKEN", environ=env)
    assert got.outcome.outcome == "refresh" and [f.code for f in got.outcome.findings] == ["REVIEW_HEAD_MOVED"]
    assert json.loads((dep.state / "reviews" / f"{got.current_review}.json").read_bytes())["head"] == moved
