"""`attest review exec --reviewer IMAGE --reviewer-attestation FILE`: the deployment's own reviewer program, from a frozen image.

A real reviewer tree (a ``bin/review`` shell script that reports what it was given), attested with
the deployment's key by ``attest attest`` and frozen by ``attest freeze`` under a trust policy that
lets that key sign closed-tree attestations; run confined through the library and through
``python -m attest``. Every refusal is provoked for real (another tree's attestation, none, an
untrusted signer, a signer not trusted for the predicate, a program that leaves the image) and
none of them claims the review's one run: a corrected run afterwards succeeds.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import test_review_change
import test_review_serialize
import test_review_start
from support import deployment
from support.caps import BACKEND

from attest.attestation import CLOSED_TREE_PREDICATE, closed_tree_statement, load_policy, load_signer, sign_statement
from attest.errors import AttestError
from attest.inventory import inventory_tree
from attest.review.handoff import HandoffCode
from attest.review.procedure import run_review

repo = test_review_change.repo
Repo = test_review_change.Repo
Started = test_review_start.Started
fails = test_review_start.fails
codes = test_review_serialize.codes
pr = test_review_change.pr
state_of = test_review_change.state_of
limitations = test_review_change.limitations
needs_confinement = test_review_change.needs_confinement
PY = sys.executable
ROOT = Path(__file__).resolve().parents[2]

REVIEW_SCRIPT = """#!/bin/sh
# The deployment's reviewer: says where it runs from and what it was given, as a provider-neutral result.
printf '{"complete": false, "limitations": ["reviewer=%s", "self=%s", "args=%s", "change=%s", "mode=%s", "review=%s"], "findings": []}' \\
  "$ATTEST_IMAGE_REVIEWER" "$0" "$*" "$ATTEST_IMAGE_CHANGE" "${REVIEWER_MODE:-unset}" "$REVIEW_ID"
"""


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PY, "-m", "attest", *args], capture_output=True, text=True, check=False, cwd=ROOT)


def tree(root: Path, extra: dict[str, str] | None = None) -> Path:
    (root / "bin").mkdir(parents=True)
    (root / "bin" / "review").write_text(REVIEW_SCRIPT)
    os.chmod(root / "bin" / "review", 0o755)
    (root / "README").write_text("the deployment's reviewer\n")
    for name, text in (extra or {}).items():
        (root / name).write_text(text)
    return root


def attest_tree(src: Path, key: Path, out: Path) -> str:
    """`attest attest SRC --key KEY -o OUT`; the attested identity."""
    done = cli("attest", str(src), "--key", str(key), "-o", str(out), "--json")
    assert done.returncode == 0, done.stderr
    identity: str = json.loads(done.stdout)["identity"]
    return identity


def sign_tree(src: Path, key: Path, out: Path) -> str:
    """What `attest attest` does, in this process (the library's own statement and signer)."""
    inventory = inventory_tree(src)
    out.write_bytes(sign_statement(closed_tree_statement(src.name, inventory), load_signer(str(key))))
    return inventory.identity


@dataclass
class Reviewer:
    trust: Path          # TRUST: the deployment's, and its key may sign closed-tree attestations
    identity: str
    path: str
    attestation: Path
    other_identity: str  # another tree, attested by the same key, never frozen
    other_attestation: Path
    evil_attestation: Path  # this tree, signed by a key TRUST does not hold


@pytest.fixture(scope="module")
def reviewer(dep: Any, tmp_path_factory: pytest.TempPathFactory) -> Reviewer:
    tmp = tmp_path_factory.mktemp("reviewer")
    keys = dep.key.parent
    trust = deployment.trust_policy(tmp / "trust.toml",
                                   (keys / "deploy.pub.pem", (*deployment.DEPLOY_ROLES, CLOSED_TREE_PREDICATE)),
                                   (keys / "release.pub.pem", deployment.RELEASE_ROLES))
    src = tree(tmp / "reviewer")
    att = tmp / "reviewer.att.json"
    identity = attest_tree(src, dep.key, att)
    frozen = cli("freeze", str(src), "--attestation", str(att), "--policy", str(trust), "--state-dir", str(dep.state),
                 "--backend", BACKEND, "--json")
    assert frozen.returncode == 0, frozen.stderr
    image = json.loads(frozen.stdout)
    assert image["identity"] == identity
    other = tmp / "other.att.json"
    other_identity = sign_tree(tree(tmp / "other", {"EXTRA": "not the deployment's reviewer\n"}), dep.key, other)
    evil = tmp / "evil.att.json"
    assert sign_tree(src, dep.evil_key, evil) == identity
    assert image["image"] == f"{dep.state}/store/{identity[7:]}/tree" and image["backend"] == BACKEND
    return Reviewer(trust, identity, image["image"], att, other_identity, other, evil)


def run(dep: Any, rv: Reviewer, s: Started, review: str, out: Path, argv: list[str], **kw: Any) -> Any:
    return run_review(state_dir=dep.state, review=review, handoff=s.handoff, policy=load_policy(kw.pop("trust", rv.trust)),
                      argv=argv, out=out, **kw)


def record(dep: Any, review: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((dep.state / "results" / f"{review}.json").read_bytes())
    return doc


# -- it runs ---------------------------------------------------------------------------------------------------------


@needs_confinement
@pytest.mark.parametrize("program", ["bin/review", "./bin/review", "$ATTEST_IMAGE_REVIEWER/bin/review"])
def test_the_reviewer_image_runs_and_the_record_names_it(dep: Any, repo: Repo, reviewer: Reviewer, tmp_path: Path,
                                                         program: str) -> None:
    s = pr(repo, f"reviewer-{program.replace('/', '-').replace('$', '')}")
    review = test_review_start.start(dep, s).review
    change = state_of(dep, review)["change"]["path"]
    out = tmp_path / "result.json"
    ran = run(dep, reviewer, s, review, out, [program, "one", "two"], reviewer=reviewer.identity,
              reviewer_attestation=reviewer.attestation, set_env={"REVIEWER_MODE": "strict-value"})
    seen = limitations(out)
    assert seen == {"reviewer": reviewer.path, "self": f"{reviewer.path}/bin/review", "args": "one two", "change": change,
                    "mode": "strict-value", "review": review}
    assert ran.result_digest == "sha256:" + hashlib.sha256(out.read_bytes()).hexdigest()
    doc = record(dep, review)
    confinement = doc["confinement"]
    assert confinement["reviewer"] == {"identity": reviewer.identity, "attestation": str(reviewer.attestation),
                                       "attestation_digest": "sha256:" + hashlib.sha256(reviewer.attestation.read_bytes()).hexdigest()}
    assert confinement["environment"] == ["REVIEWER_MODE"]
    assert b"strict-value" not in (dep.state / "results" / f"{review}.json").read_bytes()  # names only, never values
    # The reviewer image is bound read-only like the handoff's; only the change is noexec.
    assert reviewer.path in confinement["images"] and confinement["noexec"] == [change]
    assert doc["result"] == ran.result_digest and doc["failure"] is None


@needs_confinement
def test_the_reviewer_image_through_the_cli(dep: Any, repo: Repo, reviewer: Reviewer, tmp_path: Path) -> None:
    s = pr(repo, "reviewer-cli")
    review = test_review_start.start(dep, s).review
    out = tmp_path / "result.json"
    done = cli("review", "exec", "--handoff", str(s.handoff), "--policy", str(reviewer.trust), "--state-dir", str(dep.state),
               "-o", str(out), "--review", review, "--reviewer", reviewer.identity, "--reviewer-attestation",
               str(reviewer.attestation), "--env", "REVIEWER_MODE=from-the-cli", "--json", "--", "bin/review", "cli")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["ok"] is True
    seen = limitations(out)
    assert (seen["reviewer"], seen["self"], seen["args"], seen["mode"]) == \
        (reviewer.path, f"{reviewer.path}/bin/review", "cli", "from-the-cli")
    confinement = record(dep, review)["confinement"]
    assert confinement["reviewer"]["identity"] == reviewer.identity and confinement["environment"] == ["REVIEWER_MODE"]


# -- refused, and nothing claimed --------------------------------------------------------------------------------------


@needs_confinement
def test_every_refusal_leaves_the_review_runnable(dep: Any, repo: Repo, reviewer: Reviewer, tmp_path: Path) -> None:
    s = pr(repo, "reviewer-refused")
    review = test_review_start.start(dep, s).review
    out = tmp_path / "result.json"
    ok = {"reviewer": reviewer.identity, "reviewer_attestation": reviewer.attestation}
    refused: list[tuple[str, dict[str, Any], list[str], list[str]]] = [
        ("the attestation of another tree", {**ok, "reviewer_attestation": reviewer.other_attestation}, ["bin/review"],
         [HandoffCode.REVIEWER_IMAGE_MISMATCH]),
        ("no attestation", {**ok, "reviewer_attestation": None}, ["bin/review"], [HandoffCode.REVIEWER_IMAGE_MISMATCH]),
        ("an untrusted signer", {**ok, "reviewer_attestation": reviewer.evil_attestation}, ["bin/review"],
         ["NO_TRUSTED_SIGNATURE"]),
        ("a signer TRUST does not trust for closed trees", {**ok, "trust": dep.trust}, ["bin/review"],
         ["SIGNER_NOT_FOR_PREDICATE"]),
        ("an attested image that was never frozen",
         {"reviewer": reviewer.other_identity, "reviewer_attestation": reviewer.other_attestation}, ["bin/review"],
         ["NOT_IN_STORE"]),
        ("a relative program without a reviewer image", {}, ["bin/review"], ["BAD_EXEC_ENV"]),
        ("a bare program name that is not on the PATH", {}, ["no-such-review-program"], ["BAD_EXEC_ENV"]),
        ("a bare program name that is not on the PATH, with a reviewer image", ok, ["review"], ["BAD_EXEC_ENV"]),
        ("a program leaving the image", ok, ["../x"], ["BAD_EXEC_ENV"]),
        ("a program leaving the image from inside", ok, ["bin/../../x"], ["BAD_EXEC_ENV"]),
        ("an empty component", ok, ["bin//review"], ["BAD_EXEC_ENV"]),
        ("a dot component", ok, ["bin/./review"], ["BAD_EXEC_ENV"]),
    ]
    for what, kw, argv, want in refused:
        err = fails(lambda: run(dep, reviewer, s, review, out, argv, **kw), AttestError)  # noqa: B023 (called at once)
        assert codes(err) == want, (what, [str(f) for f in err.findings])
        assert not (dep.state / "results" / f"{review}.json").exists() and not out.exists(), what
    # Nothing was claimed: the corrected run is the review's one run.
    run(dep, reviewer, s, review, out, ["bin/review"], **ok)
    assert limitations(out)["reviewer"] == reviewer.path and record(dep, review)["confinement"]["reviewer"]["identity"] == \
        reviewer.identity
    err = fails(lambda: run(dep, reviewer, s, review, tmp_path / "again.json", ["bin/review"], **ok), AttestError)
    assert codes(err) == ["REVIEW_ALREADY_RUN"]


def test_reviewer_options_need_a_review(dep: Any, repo: Repo, reviewer: Reviewer, tmp_path: Path) -> None:
    base = ["review", "exec", "--handoff", str(repo.handoff), "--policy", str(reviewer.trust), "--state-dir", str(dep.state),
            "-o", str(tmp_path / "result.json"), "--json"]
    ran = tmp_path / "ran"
    for extra in (["--reviewer", reviewer.identity, "--reviewer-attestation", str(reviewer.attestation)],
                  ["--reviewer-attestation", str(reviewer.attestation)]):
        done = cli(*base, *extra, "--", "/bin/touch", str(ran))
        assert done.returncode == 2, (extra, done.stdout, done.stderr)
        assert [e["code"] for e in json.loads(done.stdout)["errors"]] == ["USAGE"], done.stdout
    assert not ran.exists() and not (tmp_path / "result.json").exists()


def test_a_reviewer_that_is_not_an_identity_is_bad_usage(dep: Any, repo: Repo, reviewer: Reviewer, tmp_path: Path) -> None:
    s = pr(repo, "reviewer-usage")
    review = test_review_start.start(dep, s).review
    for bad in (reviewer.path, reviewer.identity.upper()):
        done = cli("review", "exec", "--handoff", str(s.handoff), "--policy", str(reviewer.trust), "--state-dir", str(dep.state),
                   "-o", str(tmp_path / "result.json"), "--review", review, "--reviewer", bad, "--reviewer-attestation",
                   str(reviewer.attestation), "--json", "--", "bin/review")
        assert done.returncode == 2 and [e["code"] for e in json.loads(done.stdout)["errors"]] == ["USAGE"], (bad, done.stdout)
    assert not (dep.state / "results" / f"{review}.json").exists()



@needs_confinement
def test_a_dollar_program_that_names_no_image_is_refused_before_the_claim(dep: Any, repo: Repo, reviewer: Reviewer,
                                                                           tmp_path: Path) -> None:
    # "$HOME/review" is a relative program like "bin/review" (expand_image_refs only resolves $ATTEST_IMAGE_<NAME>):
    # without --reviewer it must be BAD_EXEC_ENV before the run is claimed, not a literal program that fails confined.
    s = pr(repo, "reviewer-dollar")
    review = test_review_start.start(dep, s).review
    out = tmp_path / "result.json"
    err = fails(lambda: run(dep, reviewer, s, review, out, ["$HOME/review"]), AttestError)
    assert codes(err) == ["BAD_EXEC_ENV"], [str(f) for f in err.findings]
    assert not (dep.state / "results" / f"{review}.json").exists()


@pytest.mark.parametrize(("argv", "reviewer", "want"), [
    (["sh", "-c", "true"], None, ["sh", "-c", "true"]),                        # a bare name: the run's fixed PATH
    (["sh", "-c", "true"], "/s/store/x/tree", ["sh", "-c", "true"]),
    (["/bin/sh"], "/s/store/x/tree", ["/bin/sh"]),                              # absolute: as it is
    (["$ATTEST_IMAGE_REVIEWER/bin/review"], "/s/store/x/tree", ["$ATTEST_IMAGE_REVIEWER/bin/review"]),
    (["bin/review", "a"], "/s/store/x/tree", ["/s/store/x/tree/bin/review", "a"]),  # a path: inside the image
    (["./bin/review"], "/s/store/x/tree", ["/s/store/x/tree/bin/review"]),
])
def test_which_program_a_reviewer_command_names(argv: list[str], reviewer: str | None, want: list[str]) -> None:
    from attest.review.handoff import reviewer_command

    assert reviewer_command(argv, reviewer) == want
