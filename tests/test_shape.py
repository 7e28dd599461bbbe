"""Every strict parser names the field it refuses, with the reason code it always had.

For each parser: one valid document, then a table of one-bad-field mutations, each asserting the
exact code and that the message names the field by its dotted path (``record.authority_changes[0].status``).
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.shapes import DROP, Path_, mutated, names, refused, rows

from attest._json import canonical_bytes
from attest._shape import Shape
from attest.builder import BuildCode, load_recipe
from attest.builder._lock import parse_pylock
from attest.review.bootstrap import GitHubIdentity, HostIdentity
from attest.review.evidence._model import Environment, PullRequest, Run
from attest.review.handoff import HANDOFF_PREDICATE, IMAGE_NAMES, parse_handoff
from attest.review.merge import parse_ci_result, parse_review_record
from attest.review.platform._api import GitCommit, PullRequestState
from attest.review.procedure._recheck import parse_review_state
from attest.review.procedure._serialize import parse_run_record
from attest.review.procedure._start import STATE_FORMAT, review_id

A, B, C = "a" * 40, "b" * 40, "c" * 40
D = {n: "sha256:" + str(i) * 64 for i, n in enumerate(IMAGE_NAMES, 1)}


# -- the handoff -------------------------------------------------------------------------------------------------

HANDOFF = {
    "predicateType": HANDOFF_PREDICATE,
    "subject": [{"name": n, "digest": {"sha256": D[n].removeprefix("sha256:")}} for n in IMAGE_NAMES],
    "predicate": {
        "repository": {"id": 1, "full_name": "acme/widgets"}, "pull_request": {"id": 2, "number": 3},
        "base": {"commit": A, "tree": B, "object_format": "sha1"},
        "toolchain": {"repository": "https://git.example/attest.git", "revision": C},
        "images": {n: {"identity": D[n], "path": f"/images/{n}", "backend": "immutable"} for n in IMAGE_NAMES},
        "installation": {"attestation_digest": D["bootstrap"], "installed_root": "/skills/agent-policy",
                         "installer": {"repository": "https://git.example/attest.git", "revision": C},
                         "source": {"repository": "https://git.example/skill.git", "revision": A}},
        "runtime": {"name": "0" * 32 + "-runtime-1", "attestation_digest": D["runtime"]},
        "config": {"path": ".agent-policy.yml", "sha256": "c" * 64}, "lock": {"path": ".agent-policy.lock", "sha256": "d" * 64},
        "outputs": [{"context": None, "path": "AGENTS.md", "renderer": "agents-md", "sha256": "a" * 64}],
        "procedure": {"revision": C, "files": [{"path": "a.py", "sha256": "e" * 64}, {"path": "b.py", "sha256": "f" * 64}]},
        "time": "2026-12-01T00:00:00Z",
    },
}


def _handoff(doc: Any) -> object:
    return parse_handoff(doc, attestation_digest=D["base"], signers=("k",))


HANDOFF_CASES = [
    (("predicate", "images", "procedure", "identity"), "sha256:xyz", "HANDOFF_MALFORMED", "handoff.images.procedure.identity"),
    (("predicate", "images", "base", "path"), "images/base", "HANDOFF_MALFORMED", "handoff.images.base.path"),
    (("predicate", "images", "runtime", "backend"), "", "HANDOFF_MALFORMED", "handoff.images.runtime.backend"),
    (("predicate", "images", "runtime"), DROP, "HANDOFF_MALFORMED", "handoff.images"),
    (("predicate", "repository", "id"), 0, "HANDOFF_MALFORMED", "handoff.repository.id"),
    (("predicate", "pull_request", "number"), True, "HANDOFF_MALFORMED", "handoff.pull_request.number"),
    (("predicate", "pull_request", "id"), DROP, "HANDOFF_MALFORMED", "handoff.pull_request"),
    (("predicate", "base", "tree"), "abc", "HANDOFF_MALFORMED", "handoff.base.tree"),
    (("predicate", "toolchain"), [], "HANDOFF_MALFORMED", "handoff.toolchain"),
    (("predicate", "toolchain"), DROP, "HANDOFF_MALFORMED", "handoff"),
    (("predicate", "runtime", "name"), "..", "HANDOFF_MALFORMED", "handoff.runtime.name"),
    (("predicate", "runtime", "attestation_digest"), D["runtime"][:-1], "HANDOFF_MALFORMED", "handoff.runtime.attestation_digest"),
    (("predicate", "procedure", "files"), [], "HANDOFF_MALFORMED", "handoff.procedure.files"),
    (("predicate", "procedure", "files", 1, "sha256"), "F" * 64, "HANDOFF_MALFORMED", "handoff.procedure.files[1].sha256"),
    (("predicate", "procedure", "files", 1, "mode"), 1, "HANDOFF_MALFORMED", "handoff.procedure.files[1]"),
    (("predicate", "procedure", "files", 1, "path"), "a.py", "HANDOFF_MALFORMED", "handoff.procedure.files"),
    # Every sub-object is exactly its documented fields: a field more is refused, not ignored.
    (("predicate", "repository", "owner"), "acme", "HANDOFF_MALFORMED", "handoff.repository"),
    (("predicate", "pull_request", "head"), C, "HANDOFF_MALFORMED", "handoff.pull_request"),
    (("predicate", "base", "head"), C, "HANDOFF_MALFORMED", "handoff.base"),
    (("predicate", "base", "object_format"), "md5", "HANDOFF_MALFORMED", "handoff.base.object_format"),
    (("predicate", "images", "base", "writable"), True, "HANDOFF_MALFORMED", "handoff.images.base"),
    (("predicate", "runtime", "path"), "/elsewhere", "HANDOFF_MALFORMED", "handoff.runtime"),
    (("predicate", "toolchain", "repository"), 7, "HANDOFF_MALFORMED", "handoff.toolchain.repository"),
    (("predicate", "toolchain", "branch"), "main", "HANDOFF_MALFORMED", "handoff.toolchain"),
    (("predicate", "procedure", "revision"), A, "HANDOFF_MALFORMED", "handoff.procedure.revision"),
    (("predicate", "procedure", "extra"), [], "HANDOFF_MALFORMED", "handoff.procedure"),
    (("predicate", "config", "sha256"), "C" * 64, "HANDOFF_MALFORMED", "handoff.config.sha256"),
    (("predicate", "lock", "path"), DROP, "HANDOFF_MALFORMED", "handoff.lock"),
    (("predicate", "installation", "installer", "revision"), "main", "HANDOFF_MALFORMED",
     "handoff.installation.installer.revision"),
    (("predicate", "installation", "extra"), 1, "HANDOFF_MALFORMED", "handoff.installation"),
    (("predicate", "outputs"), {}, "HANDOFF_MALFORMED", "handoff.outputs"),
    (("predicate", "outputs", 0, "extra"), 1, "HANDOFF_MALFORMED", "handoff.outputs[0]"),
    (("predicate", "outputs", 0, "sha256"), "", "HANDOFF_MALFORMED", "handoff.outputs[0].sha256"),
    (("predicate", "outputs", 0, "context"), 7, "HANDOFF_MALFORMED", "handoff.outputs[0].context"),
    (("predicate", "time"), "yesterday", "HANDOFF_MALFORMED", "handoff.time"),
    (("predicate", "time"), "\u0662\u0660\u0662\u0666-09-02T12:00:00Z", "HANDOFF_MALFORMED", "handoff.time"),  # Arabic-Indic digits
    (("predicate", "time"), "\uff12\uff10\uff12\uff16-09-02T12:00:00Z", "HANDOFF_MALFORMED", "handoff.time"),  # full-width digits
    (("predicate", "time"), "2026-13-45T99:99:99Z", "HANDOFF_MALFORMED", "handoff.time"),
    (("subject", 0, "digest", "sha256"), "0" * 64, "HANDOFF_SUBJECT_MISMATCH", "subjects"),
    (("predicateType",), "https://attest.dev/review-handoff/v2", "HANDOFF_WRONG_PREDICATE", "predicate type"),
]

# -- the review state --------------------------------------------------------------------------------------------

STATE = {
    "format": STATE_FORMAT, "handoff": {"path": "/h.json", "digest": D["base"]}, "repo": "/srv/repo.git",
    "host": {"adapter": "identity", "path": "/identity.json"}, "repository": {"id": 1, "full_name": "acme/widgets"},
    "pull_request": {"id": 2, "number": 3}, "base": {"commit": A, "tree": B, "object_format": "sha1"}, "head": C,
    "merge_base": A, "images": {n: {"identity": D[n], "path": f"/images/{n}", "backend": "immutable"} for n in IMAGE_NAMES},
    "config": {"sha256": "e" * 64}, "lock": {"sha256": "f" * 64}, "context": "ctx",
    "projections": {role: {"path": f"docs/{role}", "renderer": "r", "context": "ctx", "sha256": "e" * 64, "image": D["base"],
                           "retained": "sha256:" + "e" * 64} for role in ("semantic", "adapter")},
    "surface": {"base": A, "head": C, "base_tree": B, "head_tree": B, "paths": []},
    "authority_changes": [],
    "change_content": D["procedure"], "change": {"identity": D["runtime"], "path": "/images/change", "backend": "immutable"},
}


def _state(doc: Any) -> object:
    rest = {k: v for k, v in doc.items() if k != "review"}
    review = review_id(rest)
    return parse_review_state(canonical_bytes({**rest, "review": review}), review, "/state/reviews/x.json")


STATE_CASES = [
    (("base", "commit"), "abc", "REVIEW_STATE_MALFORMED", "state.base.commit"),
    (("base", "object_format"), "md5", "REVIEW_STATE_MALFORMED", "state.base.object_format"),
    (("head",), "c" * 64, "REVIEW_STATE_MALFORMED", "state.head"),
    (("repository", "id"), -1, "REVIEW_STATE_MALFORMED", "state.repository.id"),
    (("pull_request", "number"), "3", "REVIEW_STATE_MALFORMED", "state.pull_request.number"),
    (("repository", "full_name"), "", "REVIEW_STATE_MALFORMED", "state.repository.full_name"),
    (("images", "runtime"), DROP, "REVIEW_STATE_MALFORMED", "state.images"),
    (("change", "identity"), "x", "REVIEW_STATE_MALFORMED", "state.change.identity"),
    (("change", "backend"), 1, "REVIEW_STATE_MALFORMED", "state.change.backend"),
    (("change_content",), None, "REVIEW_STATE_MALFORMED", "state.change_content"),
    (("repo",), "repo.git", "REVIEW_STATE_MALFORMED", "state.repo"),
    (("host", "adapter"), 3, "REVIEW_STATE_MALFORMED", "state.host.adapter"),
    (("host", "token"), "t", "REVIEW_STATE_MALFORMED", "state.host"),
    (("surface", "head"), A, "REVIEW_STATE_MALFORMED", "state.surface"),
    (("surface", "base_tree"), "tree", "REVIEW_STATE_MALFORMED", "state.surface.base_tree"),
    (("surface", "extra"), [], "REVIEW_STATE_MALFORMED", "state.surface"),
    (("format",), "https://attest.dev/review-state/v0", "REVIEW_STATE_MALFORMED", "state.format"),
    (("refresh",), {"previous": "x", "generation": 1}, "REVIEW_STATE_MALFORMED", "state.refresh.previous"),
    (("refresh",), {"previous": "0" * 32, "generation": 0}, "REVIEW_STATE_MALFORMED", "state.refresh.generation"),
    (("extra",), 1, "REVIEW_STATE_MALFORMED", "state"),
]

RUN_RECORD = {"review": "0" * 32, "state": D["base"], "handoff_digest": D["bootstrap"], "repository_id": 1, "pull_request_id": 2,
       "head": C, "outcome": "result", "result": D["procedure"], "failure": None, "blocking": 0, "confinement": {"confined": True}}

RUN_CASES = [
    (("review",), "0" * 31, "REVIEW_STATE_MALFORMED", "run_record.review"),
    (("state",), "sha256:", "REVIEW_STATE_MALFORMED", "run_record.state"),
    (("repository_id",), 0, "REVIEW_STATE_MALFORMED", "run_record.repository_id"),
    (("head",), "HEAD", "REVIEW_STATE_MALFORMED", "run_record.head"),
    (("outcome",), "done", "REVIEW_STATE_MALFORMED", "run_record.outcome"),
    (("outcome",), "running", "REVIEW_STATE_MALFORMED", "run_record.outcome"),
    (("blocking",), -1, "REVIEW_STATE_MALFORMED", "run_record.blocking"),
    (("failure",), {"code": "X"}, "REVIEW_STATE_MALFORMED", "run_record.failure"),
    (("result",), "sha256:x", "REVIEW_STATE_MALFORMED", "run_record.result"),
    (("confinement",), True, "REVIEW_STATE_MALFORMED", "run_record.confinement"),
    (("confinement",), None, "REVIEW_STATE_MALFORMED", "run_record.outcome"),  # a result, and no word of how the reviewer ran
    (("blocking",), DROP, "REVIEW_STATE_MALFORMED", "run_record"),
]

# -- the gate's review record and CI result ----------------------------------------------------------------------

RECORD = {
    "review": "0" * 32, "state_digest": D["base"], "generation": 0, "status": "complete",
    "repository": {"id": 1, "full_name": "a/b"}, "pull_request": {"id": 2, "number": 3}, "base": {"commit": A, "tree": B},
    "head": C, "merge_base": A, "handoff_digest": D["bootstrap"], "images": dict(D), "change": {"identity": D["runtime"]},
    "projections": {r: {"path": f"docs/{r}", "sha256": D["procedure"]} for r in ("semantic", "adapter")}, "result": {"sha256": D["procedure"]}, "failure": None, "limitations": [], "authority_changes": [],
    "findings": {"total": 1, "blocking": 0, "inline": 1, "in_body": 0}, "event": "COMMENT",
    "confinement": {"confined": True}, "time": "2026-12-01T00:00:00Z",
}
CFG = {"path": ".agent-policy.yml", "status": "modified", "kind": "config"}

RECORD_CASES = [
    (("review",), "x", "MERGE_RECORD_MALFORMED", "record.review"),
    (("status",), "approved", "MERGE_RECORD_MALFORMED", "record.status"),
    (("repository", "id"), 0, "MERGE_RECORD_MALFORMED", "record.repository.id"),
    (("repository", "full_name"), "", "MERGE_RECORD_MALFORMED", "record.repository.full_name"),
    (("repository", "full_name"), "a/b\n", "MERGE_RECORD_MALFORMED", "record.repository.full_name"),
    (("pull_request", "number"), None, "MERGE_RECORD_MALFORMED", "record.pull_request.number"),
    (("base", "commit"), "main", "MERGE_RECORD_MALFORMED", "record.base.commit"),
    (("base", "tree"), "main", "MERGE_RECORD_MALFORMED", "record.base.tree"),
    (("base", "ref"), "main", "MERGE_RECORD_MALFORMED", "record.base"),
    (("repository", "owner"), "a", "MERGE_RECORD_MALFORMED", "record.repository"),
    (("pull_request", "head"), C, "MERGE_RECORD_MALFORMED", "record.pull_request"),
    (("head",), "main", "MERGE_RECORD_MALFORMED", "record.head"),
    (("merge_base",), 1, "MERGE_RECORD_MALFORMED", "record.merge_base"),
    (("findings", "inline"), -1, "MERGE_RECORD_MALFORMED", "record.findings.inline"),
    (("findings",), [], "MERGE_RECORD_MALFORMED", "record.findings"),
    (("images", "runtime"), "sha256:1", "MERGE_RECORD_MALFORMED", "record.images.runtime"),
    (("change", "identity"), "sha256:" + "3" * 63, "MERGE_RECORD_MALFORMED", "record.change.identity"),
    (("change", "path"), "/x", "MERGE_RECORD_MALFORMED", "record.change"),
    (("limitations",), [""], "MERGE_RECORD_MALFORMED", "record.limitations[0]"),
    (("confinement",), [], "MERGE_RECORD_MALFORMED", "record.confinement"),
    (("authority_changes",), {}, "MERGE_RECORD_MALFORMED", "record.authority_changes"),
    (("authority_changes",), [{**CFG, "status": "renamed"}], "MERGE_RECORD_MALFORMED", "record.authority_changes[0].status"),
    (("authority_changes",), [{**CFG, "kind": "policy"}], "MERGE_RECORD_MALFORMED", "record.authority_changes[0].kind"),
    (("authority_changes",), [CFG, {**CFG, "path": ""}], "MERGE_RECORD_MALFORMED", "record.authority_changes[1].path"),
    (("authority_changes",), [{**CFG, "source": "x"}], "MERGE_RECORD_MALFORMED", "record.authority_changes[0]"),
    (("time",), DROP, "MERGE_RECORD_MALFORMED", "record"),
]

CI = {"repository": {"id": 1, "full_name": "a/b"}, "head": C, "base": A, "check": "test", "conclusion": "success", "run": "r1"}

CI_CASES = [
    (("repository", "id"), 0, "MERGE_RECORD_MALFORMED", "ci_result.repository.id"),
    (("repository", "url"), "x", "MERGE_RECORD_MALFORMED", "ci_result.repository"),
    (("head",), "x", "MERGE_RECORD_MALFORMED", "ci_result.head"),
    (("base",), "A" * 40, "MERGE_RECORD_MALFORMED", "ci_result.base"),
    (("check",), "", "MERGE_RECORD_MALFORMED", "ci_result.check"),
    (("conclusion",), "ok", "MERGE_RECORD_MALFORMED", "ci_result.conclusion"),
    (("run",), "r" * 2001, "MERGE_RECORD_MALFORMED", "ci_result.run"),
    (("run",), "r1\x1b[2J", "MERGE_RECORD_MALFORMED", "ci_result.run"),  # a terminal escape in what the gate prints
    (("repository", "full_name"), "acme", "MERGE_RECORD_MALFORMED", "ci_result.repository.full_name"),
    (("repository", "full_name"), "acme/widgets/extra", "MERGE_RECORD_MALFORMED", "ci_result.repository.full_name"),
    (("run",), DROP, "MERGE_RECORD_MALFORMED", "ci_result"),
]

# -- identities from the host ------------------------------------------------------------------------------------

IDENTITY = {"repository": {"id": 1, "full_name": "acme/widgets"}, "pull_request": {"id": 2, "number": 3},
            "base": {"sha": A}, "head": {"sha": C}}

IDENTITY_CASES = [
    (("repository", "full_name"), "widgets", "BAD_IDENTITY", "identity.repository.full_name"),
    (("repository", "id"), 1.0, "BAD_IDENTITY", "identity.repository.id"),
    (("pull_request", "number"), 2**53, "BAD_IDENTITY", "identity.pull_request.number"),
    (("pull_request", "url"), "x", "BAD_IDENTITY", "identity.pull_request"),
    (("base", "sha"), "A" * 40, "NOT_FULL_SHA", "identity.base.sha"),
    (("head", "sha"), 1, "NOT_FULL_SHA", "identity.head.sha"),
    (("head",), DROP, "BAD_IDENTITY", "identity"),
]

REPO_ANSWER = {"id": 1, "full_name": "acme/widgets", "base": {"sha": A, "repo": {"id": 1, "full_name": "acme/widgets"}}}


def _github_answer(doc: Any) -> object:
    gh = GitHubIdentity("acme/widgets", 3, token="tok-secret")
    return (gh._integer(doc, "id", "w"), gh._name(doc, "full_name", "w"), gh._sha(doc, "base.sha", "w"),
            gh._integer(doc, "base.repo.id", "w"), gh._name(doc, "base.repo.full_name", "w"))


GITHUB_CASES = [
    (("id",), 0, "BAD_IDENTITY", "response.id"),
    (("full_name",), "acme/..", "BAD_IDENTITY", "response.full_name"),
    (("base", "sha"), "x", "NOT_FULL_SHA", "response.base.sha"),
    (("base", "repo"), DROP, "BAD_IDENTITY", "response.base.repo"),
    (("base", "repo", "id"), -5, "BAD_IDENTITY", "response.base.repo.id"),
    (("base", "repo", "full_name"), "tok-secret/x", "BAD_IDENTITY", "base.repo.full_name"),
]

# -- hosting-API answers (ShapeError: the client reports RESPONSE_SHAPE / PLATFORM_RESPONSE_SHAPE) ------------------

PULL = {"number": 7, "head": {"sha": C, "repo": {"full_name": "c/d"}}, "base": {"sha": A, "repo": {"full_name": "a/b"}}}
RUN = {"id": 1, "event": "pull_request_target", "path": ".github/workflows/x.yml", "run_number": 4,
       "pull_requests": [{"number": 7, "head": {"sha": C}}]}
ENVIRONMENT = {"name": "trusted", "deployment_branch_policy": {"protected_branches": True, "custom_branch_policies": False}}
PULL_STATE = {"id": 1, "number": 7, "state": "open", "merged": False, "mergeable": None, "mergeable_state": None,
              "merge_commit_sha": None, "base": {"repo": {"id": 1, "full_name": "a/b"}, "ref": "main", "sha": A},
              "head": {"repo": {"full_name": "c/d"}, "sha": C}}
COMMIT = {"sha": A, "tree": {"sha": B}, "parents": [{"sha": C}]}

API_CASES: list[tuple[Callable[[Any], object], Any, Path_, Any, str]] = [
    (PullRequest.from_json, PULL, ("head", "sha"), "x", "pull_request.head.sha"),
    (PullRequest.from_json, PULL, ("base", "repo"), DROP, "pull_request.base.repo"),
    (PullRequest.from_json, PULL, ("number",), -1, "pull_request.number"),
    (Run.from_json, RUN, ("pull_requests", 0, "number"), "7", "workflow_run.pull_requests[0].number"),
    (Run.from_json, RUN, ("run_attempt",), True, "workflow_run.run_attempt"),
    (Environment.from_json, ENVIRONMENT, ("deployment_branch_policy",), DROP, "environment.deployment_branch_policy"),
    (Environment.from_json, ENVIRONMENT, ("deployment_branch_policy", "custom_branch_policies"), True,
     "environment.deployment_branch_policy"),
    (PullRequestState.from_json, PULL_STATE, ("base", "repo", "id"), 0, "base.repo.id"),
    (PullRequestState.from_json, PULL_STATE, ("merge_commit_sha",), "x", "merge_commit_sha"),
    (PullRequestState.from_json, PULL_STATE, ("mergeable_state",), DROP, "mergeable_state"),
    (PullRequestState.from_json, PULL_STATE, ("state",), "draft", "state"),
    (PullRequestState.from_json, PULL_STATE, ("mergeable",), "yes", "mergeable"),
    (GitCommit.from_json, COMMIT, ("parents", 0, "sha"), "x", "parents[0].sha"),
    (GitCommit.from_json, COMMIT, ("tree",), [], "tree"),
]

# -- TOML: the recipe and the pylock -----------------------------------------------------------------------------


def toml(doc: dict[str, Any]) -> bytes:
    """``doc`` as TOML, every table inline (what tomllib reads back as the same dict)."""
    def value(v: Any) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, (int, str)):
            return json.dumps(v)
        if isinstance(v, list):
            return "[" + ", ".join(value(x) for x in v) + "]"
        return "{" + ", ".join(f"{json.dumps(k)} = {value(x)}" for k, x in v.items()) + "}"

    return "".join(f"{json.dumps(k)} = {value(v)}\n" for k, v in doc.items()).encode()


RECIPE = {"schema": "attest-recipe/v1", "kind": "runtime", "name": "runtime", "toolchain": {"repository": "https://x/t", "source": "."},
          "lock": {"path": "pylock.toml", "build_only": []}, "interpreter": {"requires": ">=3.11"},
          "expose": {"entry_points": ["attest"]}, "options": {"bytecode": "none"}}

RECIPE_CASES = [
    (("name",), "", "BAD_RECIPE", "recipe.name"),
    (("name",), "../../../tmp/evil name\n", "BAD_RECIPE", "recipe.name"),
    (("name",), "..", "BAD_RECIPE", "recipe.name"),
    (("schema",), "attest-recipe/v0", "BAD_RECIPE", "recipe.schema"),
    (("toolchain", "repository"), "", "BAD_RECIPE", "recipe.toolchain.repository"),
    (("toolchain",), DROP, "BAD_RECIPE", "recipe.toolchain"),
    (("lock", "extra"), "x", "BAD_RECIPE", "recipe.lock"),
    (("interpreter", "path"), "bin/python", "BAD_RECIPE", "recipe.interpreter.path"),
    (("interpreter", "requires"), ">=>3", "BAD_RECIPE", "recipe.interpreter.requires"),
    (("expose", "entry_points"), ["attest", ""], "BAD_RECIPE", "recipe.expose.entry_points[1]"),
    (("options", "bytecode"), "all", "BAD_RECIPE", "recipe.options.bytecode"),
    (("options", "strip"), True, "BAD_RECIPE", "recipe.options"),
    (("extra",), 1, "BAD_RECIPE", "recipe"),
]

WHEEL = "foo-1.0-py3-none-any.whl"
PYLOCK = {"lock-version": "1.0", "requires-python": ">=3.11", "packages": [
    {"name": "foo", "version": "1.0", "wheels": [
        {"name": WHEEL, "url": f"https://files.example/{WHEEL}", "size": 10, "hashes": {"sha256": "a" * 64}}]}]}
W = ("packages", 0, "wheels", 0)

PYLOCK_CASES = [
    (("lock-version",), "2.0", BuildCode.BAD_LOCK, "lock.lock-version"),
    (("requires-python",), 3, BuildCode.BAD_LOCK, "lock.requires-python"),
    (("packages",), [], BuildCode.BAD_LOCK, "lock.packages"),
    (("created",), "now", BuildCode.BAD_LOCK, "lock"),
    (("packages", 0, "name"), "", BuildCode.BAD_LOCK, "lock.packages[0].name"),
    (("packages", 0, "extra"), 1, BuildCode.BAD_LOCK, "lock.packages[0]"),
    (("packages", 0, "sdist"), {"url": "https://x"}, BuildCode.LOCK_NOT_WHEEL, "lock.packages[0].sdist"),
    (("packages", 0, "version"), 1, BuildCode.LOCK_NOT_PINNED, "lock.packages[0].version"),
    (("packages", 0, "wheels"), [], BuildCode.LOCK_NOT_WHEEL, "lock.packages[0].wheels"),
    ((*W, "hashes", "sha256"), "x", BuildCode.LOCK_UNHASHED, "lock.packages[0].wheels[0].hashes.sha256"),
    ((*W, "hashes"), DROP, BuildCode.LOCK_UNHASHED, "lock.packages[0].wheels[0].hashes"),
    ((*W, "size"), -1, BuildCode.BAD_LOCK, "lock.packages[0].wheels[0].size"),
    ((*W, "url"), f"http://files.example/{WHEEL}", BuildCode.BAD_LOCK, "lock.packages[0].wheels[0].url"),
    ((*W, "path"), f"../{WHEEL}", BuildCode.BAD_LOCK, "lock.packages[0].wheels[0].path"),
    ((*W, "name"), "", BuildCode.BAD_LOCK, "lock.packages[0].wheels[0].name"),
    ((*W, "mirror"), "x", BuildCode.BAD_LOCK, "lock.packages[0].wheels[0]"),
]


def _pylock(doc: Any) -> object:
    return parse_pylock(toml(doc), where="pylock.toml")


PARSERS: list[tuple[str, Callable[[Any], object], Any, list[Any]]] = [
    ("handoff", _handoff, HANDOFF, HANDOFF_CASES),
    ("review state", _state, STATE, STATE_CASES),
    ("run record", lambda d: parse_run_record(canonical_bytes(d), "/state/results/x.json"), RUN_RECORD, RUN_CASES),
    ("review record", lambda d: parse_review_record(d, "sha256:" + "9" * 64), RECORD, RECORD_CASES),
    ("ci result", lambda d: parse_ci_result(d, "sha256:" + "9" * 64), CI, CI_CASES),
    ("identity file", lambda d: HostIdentity.from_json(d, "identity.json"), IDENTITY, IDENTITY_CASES),
    ("github identity answer", _github_answer, REPO_ANSWER, GITHUB_CASES),
    ("pylock", _pylock, PYLOCK, PYLOCK_CASES),
]

ROWS = rows(PARSERS)


@pytest.mark.parametrize(("name", "parse", "doc"), [(n, p, d) for n, p, d, _ in PARSERS], ids=[n for n, *_ in PARSERS])
def test_the_valid_document_parses(name: str, parse: Callable[[Any], object], doc: Any) -> None:
    assert parse(copy.deepcopy(doc)) is not None, name


@pytest.mark.parametrize(("parse", "doc", "at", "value", "code", "field"), ROWS)
def test_one_bad_field_is_refused_with_its_code_naming_it(parse: Callable[[Any], object], doc: Any, at: Path_, value: Any,
                                                          code: str, field: str) -> None:
    got, message = refused(parse, mutated(doc, at, value))
    assert got == code, message
    assert names(message, field), message


@pytest.mark.parametrize(("parse", "doc", "at", "value", "field"), API_CASES,
                         ids=[f"{p.__qualname__}: {'.'.join(map(str, a))}" for p, _, a, _, _ in API_CASES])
def test_an_api_answer_with_one_bad_field_is_a_shape_error_naming_it(parse: Callable[[Any], object], doc: Any, at: Path_,
                                                                     value: Any, field: str) -> None:
    assert parse(copy.deepcopy(doc)) is not None
    got, message = refused(parse, mutated(doc, at, value))
    assert got == "ShapeError", message
    assert names(message, field), message


def test_the_valid_recipe_loads(tmp_path: Path) -> None:
    (tmp_path / "runtime.toml").write_bytes(toml(RECIPE))
    assert load_recipe(tmp_path / "runtime.toml").kind == "runtime"


@pytest.mark.parametrize(("at", "value", "code", "field"), RECIPE_CASES, ids=[".".join(map(str, c[0])) for c in RECIPE_CASES])
def test_a_recipe_with_one_bad_field_is_refused_naming_it(tmp_path: Path, at: Path_, value: Any, code: str, field: str) -> None:
    path = tmp_path / "runtime.toml"
    path.write_bytes(toml(mutated(RECIPE, at, value)))
    got, message = refused(load_recipe, path)
    assert got == code, message
    assert names(message, field), message


def test_a_token_in_a_github_answer_is_never_shown() -> None:
    got, message = refused(_github_answer, mutated(REPO_ANSWER, ("base", "sha"), "tok-secret"))
    assert got == "BAD_IDENTITY" and "tok-secret" not in message and "holds the token" in message


# -- the helper itself -------------------------------------------------------------------------------------------


def test_shape_paths_name_nested_fields_and_list_items() -> None:
    doc = {"images": [{"digest": "sha256:" + "0" * 64}, {"digest": "sha256:" + "1" * 64}, {"digest": "sha256:x"}]}
    s = Shape(doc, "handoff", ValueError)
    with pytest.raises(ValueError, match=re.escape("handoff.images[2].digest: expected sha256:<64 hex>")):
        for item in s.list_of("images"):
            item.string("digest", pattern=re.compile(r"sha256:[0-9a-f]{64}\Z"), expected="sha256:<64 hex>")
    with pytest.raises(ValueError, match=re.escape("handoff.images[0].size is missing")):
        s.list_of("images")[0].positive_int("size")
    with pytest.raises(ValueError, match=re.escape("the value: expected an object")):
        Shape([], "", ValueError).object()


@pytest.mark.parametrize(("value", "ok"), [(1, True), (0, False), (-1, False), (True, False), (1.0, False), ("1", False)])
def test_positive_int_is_an_int_above_zero_never_a_boolean(value: Any, ok: bool) -> None:
    s = Shape({"n": value}, "doc", ValueError)
    if ok:
        assert s.positive_int("n") == value
    else:
        with pytest.raises(ValueError, match=re.escape("doc.n: expected a positive integer")):
            s.positive_int("n")


def test_optional_fields_tell_absent_from_null_only_when_asked() -> None:
    s = Shape({"a": None}, "doc", ValueError)
    assert s.optional_string("a") is None and s.optional_string("b") is None
    assert s.optional_string("a", present=True) is None
    with pytest.raises(ValueError, match=re.escape("doc.b is missing")):
        s.optional_string("b", present=True)
