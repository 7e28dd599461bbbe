"""`attest review start`: the procedure's guards over real bootstraps, real git histories and real frozen images.

Real handoffs from test_bootstrap's deployment (a real promotion, installation and frozen images),
pull-request branches with commits, an unrelated ``--orphan`` head, a criss-cross history, SHA-1
and SHA-256 repositories; re-signed handoffs with one field changed; a table for every output
binding failure (:func:`decide_bindings` is pure).
"""

# The bootstrap fixtures (dep, skill) are imported from test_bootstrap, so their parameters shadow the imports.
# ruff: noqa: F401

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from support.gitrepo import git
from support.trees import chattr
from test_bootstrap import Consumer, Deployment, head_changes_every_authority_file, identity_file, make_consumer, run

from attest._json import canonical_bytes
from attest._safefs import Kind
from attest.attestation import Envelope, load_policy, load_signer, parse_statement, sign_statement
from attest.errors import AttestError, Finding, InputError, VerificationError
from attest.policy import Context, LockedOutput, OutputSpec, PolicyConfig, PolicyLock, Toolchain
from attest.review.bootstrap import HostIdentity, IdentityFile, ReproducedOutput
from attest.review.procedure import BindingCode, ReviewStartCode, decide_bindings, review_id, review_start

SEM = "docs/review/policy-context.md"
ADA = "docs/review/github-review.json"


def codes(err: AttestError) -> list[str]:
    return [f.code for f in err.findings]


def pr_branch(c: Consumer) -> Consumer:
    """A pull request of two commits: a changed line, an added file."""
    git(c.path, "checkout", "-qb", "pr")
    (c.path / "src.txt").write_text("code\nmore code\n")
    git(c.path, "commit", "-qam", "one")
    (c.path / "new.txt").write_text("new\n")
    git(c.path, "add", "new.txt")
    git(c.path, "commit", "-qm", "two")
    return Consumer(c.path, c.base, git(c.path, "rev-parse", "HEAD"))


@dataclass
class Started:
    c: Consumer
    handoff: Path
    ident: Path


def bootstrapped(dep: Deployment, skill: tuple[Path, Path], tmp: Path, *, fmt: str = "sha1") -> Started:
    c = pr_branch(make_consumer(tmp / "consumer", dep.sha, fmt=fmt))
    handoff = Path(run(dep, skill, c, tmp).handoff)
    return Started(c, handoff, identity_file(tmp / "identity.json", c))


def start(dep: Deployment, s: Started, *, ident: Path | None = None, host: Any = None, handoff: Path | None = None,
          semantic: str = SEM, adapter: str = ADA) -> Any:
    return review_start(handoff=handoff or s.handoff, policy=load_policy(dep.trust), state_dir=dep.state, repo=s.c.path,
                        host=host or IdentityFile(str(ident or s.ident)), semantic=semantic, adapter=adapter)


def fails(fn: Any, cls: type[AttestError] = VerificationError) -> AttestError:
    with pytest.raises(cls) as ei:
        fn()
    return ei.value


def resign(dep: Deployment, path: Path, out: Path, change: Any) -> Path:
    envelope = Envelope.from_json(json.loads(path.read_bytes()))
    st = parse_statement(envelope.payload)
    change(st)
    out.write_bytes(sign_statement(st, load_signer(str(dep.key))))
    return out


# -- success ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["sha1", "sha256"])
def test_start_records_every_identity_and_retains_the_base_projections(dep: Deployment, skill: tuple[Path, Path], tmp_path: Path,
                                                                        fmt: str) -> None:
    s = bootstrapped(dep, skill, tmp_path, fmt=fmt)
    got = start(dep, s)
    doc = got.to_json()
    assert doc["ok"] is True and doc["head"] == s.c.head and doc["merge_base"] == s.c.base
    assert doc["base"] == {"commit": s.c.base, "tree": git(s.c.path, "rev-parse", f"{s.c.base}^{{tree}}")}
    assert doc["changed_paths"] == 2
    # The state: canonical, content-addressed, under STATE/reviews/.
    state_path = Path(doc["state"])
    assert state_path == dep.state / "reviews" / f"{doc['review']}.json"
    data = state_path.read_bytes()
    state = json.loads(data)
    assert canonical_bytes(state) == data
    assert state.pop("review") == doc["review"] == review_id(state)
    assert state["head"] == s.c.head and state["merge_base"] == s.c.base and state["base"]["object_format"] == fmt
    assert state["handoff"]["digest"] == "sha256:" + hashlib.sha256(s.handoff.read_bytes()).hexdigest()
    assert set(state["images"]) == {"bootstrap", "runtime", "base", "procedure"}
    assert state["host"] == {"adapter": "identity", "path": str(s.ident)}
    surface = {p["path"]: p for p in state["surface"]["paths"]}
    assert set(surface) == set(git(s.c.path, "diff", "--name-only", s.c.base, s.c.head).split())
    assert surface["src.txt"]["status"] == "modified" and surface["new.txt"]["status"] == "added"
    assert surface["src.txt"]["hunks"] == [{"left": {"start": 1, "count": 0}, "right": {"start": 2, "count": 1}}]
    # The retained projections are the base's locked bytes, read from the frozen base image.
    lock = {o["path"]: o for o in json.loads(git(s.c.path, "show", f"{s.c.base}:.agent-policy.lock"))["outputs"]}
    for role, path, kept in (("semantic", SEM, got.semantic), ("adapter", ADA, got.adapter)):
        base_bytes = subprocess.run(["git", "-C", str(s.c.path), "show", f"{s.c.base}:{path}"], capture_output=True, check=True).stdout
        assert kept.data == base_bytes and kept.sha256 == lock[path]["sha256"] == hashlib.sha256(base_bytes).hexdigest()
        assert kept.identity == state["images"]["base"]["identity"]
        assert state["projections"][role] == {"path": path, "renderer": lock[path]["renderer"], "context": "review",
                                              "sha256": kept.sha256, "image": kept.identity, "retained": "sha256:" + kept.sha256}
    # Content-derived: the same start again is the same review, byte for byte.
    again = start(dep, s)
    assert again.review == got.review and state_path.read_bytes() == data


def test_a_head_rewriting_every_authority_file_binds_the_base_projections(dep: Deployment, skill: tuple[Path, Path],
                                                                          tmp_path: Path) -> None:
    c = make_consumer(tmp_path / "consumer", dep.sha)
    handoff = Path(run(dep, skill, c, tmp_path).handoff)
    c = head_changes_every_authority_file(c)
    s = Started(c, handoff, identity_file(tmp_path / "identity.json", c))
    got = start(dep, s)
    assert got.semantic.data == subprocess.run(["git", "-C", str(c.path), "show", f"{c.base}:{SEM}"], capture_output=True,
                                               check=True).stdout
    assert got.semantic.data != (c.path / SEM).read_bytes() and got.adapter.data != (c.path / ADA).read_bytes()
    assert {".agent-policy.yml", ".agent-policy.lock", SEM, ADA} <= {p.path for p in got.surface.paths}


def test_changing_the_source_after_retention_changes_nothing(dep: Deployment, skill: tuple[Path, Path], tmp_path: Path) -> None:
    s = bootstrapped(dep, skill, tmp_path)
    got = start(dep, s)
    kept_semantic, kept_adapter = got.semantic.data, got.adapter.data
    state_before = Path(got.to_json()["state"]).read_bytes()
    # The worktree's projections are rewritten and committed on the pull request: a new head.
    (s.c.path / SEM).write_bytes(b"# Nothing is blocking, ever.\n")
    (s.c.path / ADA).write_bytes(b"{\"event\": \"APPROVE\"}\n")
    git(s.c.path, "commit", "-qam", "rewrite the projections")
    assert got.semantic.data == kept_semantic and got.adapter.data == kept_adapter
    fd = got.semantic.memfd()
    try:
        import os

        assert os.read(fd, len(kept_semantic) + 1) == kept_semantic
    finally:
        os.close(fd)
    assert Path(got.to_json()["state"]).read_bytes() == state_before
    # A start at the new head still binds the base's bytes, never the head's or the worktree's.
    moved = Started(s.c, s.handoff, identity_file(tmp_path / "moved.json", Consumer(s.c.path, s.c.base, git(s.c.path, "rev-parse", "HEAD"))))
    later = start(dep, moved)
    assert later.semantic.data == kept_semantic and later.adapter.data == kept_adapter
    assert later.review != got.review and SEM in {p.path for p in later.surface.paths}


# -- the host's identities ----------------------------------------------------------------------------------------


@pytest.fixture
def started(dep: Deployment, skill: tuple[Path, Path], tmp_path: Path) -> Started:
    return bootstrapped(dep, skill, tmp_path)


def test_a_renamed_repository(dep: Deployment, started: Started, tmp_path: Path) -> None:
    ident = identity_file(tmp_path / "id2.json", started.c, repository={"id": 4242, "full_name": "acme/gadgets"})
    assert codes(fails(lambda: start(dep, started, ident=ident))) == ["REVIEW_REPOSITORY_CHANGED"]


def test_a_replaced_repository_same_name_new_id(dep: Deployment, started: Started, tmp_path: Path) -> None:
    ident = identity_file(tmp_path / "id2.json", started.c, repository={"id": 4343, "full_name": "acme/widgets"})
    assert codes(fails(lambda: start(dep, started, ident=ident))) == [ReviewStartCode.REVIEW_REPOSITORY_CHANGED]


def test_a_renumbered_pull_request(dep: Deployment, started: Started, tmp_path: Path) -> None:
    ident = identity_file(tmp_path / "id2.json", started.c, pull_request={"id": 99001, "number": 8})
    assert codes(fails(lambda: start(dep, started, ident=ident))) == [ReviewStartCode.REVIEW_PULL_REQUEST_CHANGED]


def test_a_moved_base(dep: Deployment, started: Started, tmp_path: Path) -> None:
    c = started.c
    git(c.path, "checkout", "-qB", "main2", c.base)
    (c.path / "other.txt").write_text("moved\n")
    git(c.path, "add", "other.txt")
    git(c.path, "commit", "-qm", "base moved")
    ident = identity_file(tmp_path / "id2.json", Consumer(c.path, git(c.path, "rev-parse", "HEAD"), c.head))
    assert codes(fails(lambda: start(dep, started, ident=ident))) == [ReviewStartCode.REVIEW_BASE_MOVED]


def test_every_changed_identity_is_reported(dep: Deployment, started: Started, tmp_path: Path) -> None:
    ident = identity_file(tmp_path / "id2.json", Consumer(started.c.path, started.c.head, started.c.head),
                          repository={"id": 1, "full_name": "acme/widgets"}, pull_request={"id": 2, "number": 7})
    assert codes(fails(lambda: start(dep, started, ident=ident))) == ["REVIEW_REPOSITORY_CHANGED", "REVIEW_PULL_REQUEST_CHANGED",
                                                                      "REVIEW_BASE_MOVED"]


def test_a_handoff_whose_base_tree_is_not_the_commits(dep: Deployment, started: Started, tmp_path: Path) -> None:
    head_tree = git(started.c.path, "rev-parse", f"{started.c.head}^{{tree}}")
    forged = resign(dep, started.handoff, tmp_path / "forged.json", lambda st: st["predicate"]["base"].update(tree=head_tree))
    assert codes(fails(lambda: start(dep, started, handoff=forged))) == [ReviewStartCode.REVIEW_BASE_TREE_MISMATCH]


def test_a_handoff_naming_another_lock(dep: Deployment, started: Started, tmp_path: Path) -> None:
    forged = resign(dep, started.handoff, tmp_path / "forged.json", lambda st: st["predicate"]["lock"].update(sha256="0" * 64))
    assert codes(fails(lambda: start(dep, started, handoff=forged))) == [ReviewStartCode.REVIEW_AUTHORITY_MISMATCH]


def test_a_handoff_with_malformed_outputs(dep: Deployment, started: Started, tmp_path: Path) -> None:
    forged = resign(dep, started.handoff, tmp_path / "forged.json", lambda st: st["predicate"].update(outputs={"a": 1}))
    assert codes(fails(lambda: start(dep, started, handoff=forged))) == ["HANDOFF_MALFORMED"]


def test_an_untrusted_handoff_is_read_no_further(dep: Deployment, started: Started, tmp_path: Path) -> None:
    envelope = Envelope.from_json(json.loads(started.handoff.read_bytes()))
    forged = tmp_path / "evil.json"
    forged.write_bytes(sign_statement(parse_statement(envelope.payload), load_signer(str(dep.evil_key))))
    assert "NO_TRUSTED_SIGNATURE" in codes(fails(lambda: start(dep, started, handoff=forged)))


@dataclass(frozen=True)
class ApiHost:
    """A fake of our HostAdapter interface: a hosting API that reports its own base tree."""

    identity: HostIdentity

    def resolve(self) -> HostIdentity:
        return self.identity


def test_an_api_base_tree_that_is_not_the_objects(dep: Deployment, started: Started) -> None:
    c = started.c
    host = ApiHost(HostIdentity(4242, "acme/widgets", 99001, 7, c.base, c.head,
                                api_base_tree=git(c.path, "rev-parse", f"{c.head}^{{tree}}")))
    assert codes(fails(lambda: start(dep, started, host=host))) == ["API_TREE_MISMATCH"]
    ok = ApiHost(HostIdentity(4242, "acme/widgets", 99001, 7, c.base, c.head, api_base_tree=git(c.path, "rev-parse", f"{c.base}^{{tree}}")))
    assert start(dep, started, host=ok).head == c.head


# -- the head and the merge base --------------------------------------------------------------------------------------


def test_a_head_that_is_not_a_commit(dep: Deployment, started: Started, tmp_path: Path) -> None:
    c = started.c
    tree = git(c.path, "rev-parse", f"{c.head}^{{tree}}")
    ident = identity_file(tmp_path / "id2.json", Consumer(c.path, c.base, tree))
    assert codes(fails(lambda: start(dep, started, ident=ident))) == ["WRONG_OBJECT_TYPE"]
    ident = identity_file(tmp_path / "id3.json", Consumer(c.path, c.base, "1" * 40))
    assert codes(fails(lambda: start(dep, started, ident=ident))) == ["OBJECT_MISSING"]
    ident = identity_file(tmp_path / "id4.json", Consumer(c.path, c.base, "1" * 64))
    assert codes(fails(lambda: start(dep, started, ident=ident), AttestError)) == ["NOT_FULL_SHA"]


def test_an_unrelated_orphan_head_fails_closed(dep: Deployment, started: Started, tmp_path: Path) -> None:
    c = started.c
    git(c.path, "checkout", "-q", "--orphan", "unrelated")
    git(c.path, "rm", "-rqf", ".")
    (c.path / "x.txt").write_text("another history\n")
    git(c.path, "add", "x.txt")
    git(c.path, "commit", "-qm", "root")
    ident = identity_file(tmp_path / "id2.json", Consumer(c.path, c.base, git(c.path, "rev-parse", "HEAD")))
    assert codes(fails(lambda: start(dep, started, ident=ident))) == ["NO_MERGE_BASE"]
    assert not (dep.state / "reviews").exists() or all(
        json.loads(p.read_bytes())["head"] != git(c.path, "rev-parse", "HEAD") for p in (dep.state / "reviews").iterdir())


@pytest.mark.parametrize("fmt", ["sha1", "sha256"])
def test_a_criss_cross_history_fails_closed(dep: Deployment, skill: tuple[Path, Path], tmp_path: Path, fmt: str) -> None:
    c = make_consumer(tmp_path / "consumer", dep.sha, fmt=fmt)
    root = git(c.path, "rev-parse", "HEAD")
    git(c.path, "checkout", "-qb", "a")
    (c.path / "a.txt").write_text("a\n")
    git(c.path, "add", "a.txt")
    git(c.path, "commit", "-qm", "a1")
    a1 = git(c.path, "rev-parse", "HEAD")
    git(c.path, "checkout", "-qb", "b", root)
    (c.path / "b.txt").write_text("b\n")
    git(c.path, "add", "b.txt")
    git(c.path, "commit", "-qm", "b1")
    b1 = git(c.path, "rev-parse", "HEAD")
    git(c.path, "merge", "-q", "--no-edit", a1)  # b2 = b1 + a1
    b2 = git(c.path, "rev-parse", "HEAD")
    git(c.path, "checkout", "-q", "a")
    git(c.path, "merge", "-q", "--no-edit", b1)  # a2 = a1 + b1
    a2 = git(c.path, "rev-parse", "HEAD")
    assert sorted(git(c.path, "merge-base", "--all", a2, b2).split()) == sorted([a1, b1])
    base = Consumer(c.path, a2, b2)
    handoff = Path(run(dep, skill, base, tmp_path).handoff)
    s = Started(base, handoff, identity_file(tmp_path / "identity.json", base))
    err = fails(lambda: start(dep, s))
    assert codes(err) == ["MULTIPLE_MERGE_BASES"]
    assert a1 in err.detail and b1 in err.detail


# -- bindings, end to end ---------------------------------------------------------------------------------------------


def test_bindings_end_to_end(dep: Deployment, started: Started) -> None:
    assert codes(fails(lambda: start(dep, started, semantic=ADA, adapter=SEM))) == ["REVIEW_BINDING_ROLE_SWAPPED"] * 2
    assert codes(fails(lambda: start(dep, started, adapter=SEM))) == ["REVIEW_BINDING_DUPLICATE"]
    assert codes(fails(lambda: start(dep, started, semantic="docs/review/nothing.md"))) == ["REVIEW_BINDING_MISSING"]
    assert codes(fails(lambda: start(dep, started, semantic="/" + SEM))) == ["REVIEW_BINDING_UNSAFE", "PATH_ABSOLUTE"]
    assert codes(fails(lambda: start(dep, started, semantic="docs/review/POLICY-CONTEXT.md"))) == ["REVIEW_BINDING_INEXACT"]
    assert codes(fails(lambda: start(dep, started, adapter=".agents/skills/pr-review/SKILL.md"))) == \
        ["REVIEW_BINDING_UNSAFE", "PATH_RESERVED"]


def test_a_handoff_that_did_not_reproduce_the_adapter(dep: Deployment, started: Started, tmp_path: Path) -> None:
    def drop(st: dict[str, Any]) -> None:
        st["predicate"]["outputs"] = [o for o in st["predicate"]["outputs"] if o["path"] != ADA]

    forged = resign(dep, started.handoff, tmp_path / "forged.json", drop)
    assert codes(fails(lambda: start(dep, started, handoff=forged))) == ["REVIEW_BINDING_NOT_REPRODUCED"]


DISABLED_CONFIG = (
    "schema: 2\ntoolchain:\n  repository: https://example.org/toolchain.git\n  revision: {sha}\nskills:\n  enabled: [pr-review]\n"
    "contexts:\n  review:\n    modules: [policy/core/evidence.md, policy/review/findings.md]\n"
    "  other:\n    modules: [policy/core/evidence.md]\n"
    "outputs:\n  - {{path: docs/review/policy-context.md, renderer: policy-context-md, context: review, enabled: true}}\n"
    "  - {{path: docs/review/github-review.json, renderer: github-review-json-adapter-v1, context: review, enabled: true}}\n"
    "  - {{path: docs/other/policy-context.md, renderer: policy-context-md, context: other, enabled: true}}\n"
    "  - {{path: docs/other/github-review.json, renderer: github-review-json-adapter-v1, context: other, enabled: true}}\n"
    "  - {{path: docs/old/github-review.json, renderer: github-review-json-adapter-v1, context: review, enabled: false}}\n")


def test_disabled_and_cross_context_bindings_end_to_end(dep: Deployment, skill: tuple[Path, Path], tmp_path: Path) -> None:
    c = pr_branch(make_consumer(tmp_path / "consumer", dep.sha, config=DISABLED_CONFIG.format(sha=dep.sha)))
    s = Started(c, Path(run(dep, skill, c, tmp_path).handoff), identity_file(tmp_path / "identity.json", c))
    assert codes(fails(lambda: start(dep, s, adapter="docs/old/github-review.json"))) == ["REVIEW_BINDING_DISABLED"]
    assert codes(fails(lambda: start(dep, s, adapter="docs/other/github-review.json"))) == ["REVIEW_BINDING_CONTEXT_MISMATCH"]
    assert start(dep, s, semantic="docs/other/policy-context.md", adapter="docs/other/github-review.json").bindings.context == "other"


# -- the review state ------------------------------------------------------------------------------------------------


def test_an_unwritable_state_fails_closed(dep: Deployment, started: Started) -> None:
    reviews = dep.state / "reviews"
    reviews.mkdir(mode=0o700, exist_ok=True)
    before = sorted(p.name for p in reviews.iterdir())
    chattr("+i", reviews)  # an ordinary user: the same directory without write permission
    try:
        err = fails(lambda: start(dep, started), AttestError)
    finally:
        chattr("-i", reviews)
    assert codes(err) == [ReviewStartCode.REVIEW_STATE_FAILED] and err.exit_code == 1
    assert sorted(p.name for p in reviews.iterdir()) == before


# -- the CLI ------------------------------------------------------------------------------------------------------------


def _cli(args: list[str]) -> tuple[int, str]:
    from attest.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(args)
    return code, out.getvalue()


def test_cli_start(dep: Deployment, started: Started, tmp_path: Path) -> None:
    args = ["review", "start", "--handoff", str(started.handoff), "--policy", str(dep.trust), "--state-dir", str(dep.state),
            "--repo", str(started.c.path), "--semantic", SEM, "--adapter", ADA, "--identity", str(started.ident)]
    code, out = _cli([*args, "--json"])
    doc = json.loads(out)
    assert code == 0, out
    assert set(doc) == {"schema", "ok", "review", "state", "handoff_digest", "repository", "pull_request", "base", "head", "merge_base",
                        "changed_paths", "authority_changes", "projections", "images", "change"}
    assert Path(doc["state"]).name == f"{doc['review']}.json"
    code, out = _cli(args)
    assert code == 0 and f"STARTED review {doc['review']}" in out
    moved = identity_file(tmp_path / "id2.json", started.c, pull_request={"id": 99001, "number": 8})
    code, out = _cli([*args[:-1], str(moved), "--json"])
    assert code == 1 and [e["code"] for e in json.loads(out)["errors"]] == ["REVIEW_PULL_REQUEST_CHANGED"]
    code, out = _cli([*args, "--github", "acme/widgets", "--pr", "7", "--json"])
    assert code == 2 and [e["code"] for e in json.loads(out)["errors"]] == ["BAD_HOST_OPTIONS"]


# -- decide_bindings, the table ----------------------------------------------------------------------------------------

D1, D2, D3 = "1" * 64, "2" * 64, "3" * 64
PCM, GH = "policy-context-md", "github-review-json-adapter-v1"
BASE_OUTPUTS = ((SEM, PCM, "review", True, D1), (ADA, GH, "review", True, D2))


def table(outputs: Any = BASE_OUTPUTS, *, lock: Any = None, reproduced: Any = None) -> tuple[PolicyConfig, PolicyLock, list[ReproducedOutput]]:
    tc = Toolchain("https://example.org/toolchain.git", "a" * 40)
    config = PolicyConfig(tc, ("pr-review",), (Context("review", ("policy/core/evidence.md",)), Context("other", ("policy/core/evidence.md",))),
                          tuple(OutputSpec(p, r, c, e) for p, r, c, e, _ in outputs), "f" * 64)
    locked = lock if lock is not None else [(p, r, c, d) for p, r, c, _, d in outputs]
    pl = PolicyLock(tc, "f" * 64, (), tuple(LockedOutput(p, r, c, d) for p, r, c, d in locked))
    made = reproduced if reproduced is not None else locked
    return config, pl, [ReproducedOutput(p, r, c, d) for p, r, c, d in made]


def _swap(outputs: Any, which: str, **kw: Any) -> Any:
    names = ("path", "renderer", "context", "enabled", "sha256")
    return tuple(tuple(kw.get(n, v) for n, v in zip(names, o, strict=True)) if o[0] == which else o for o in outputs)


B = BindingCode
CASES: list[tuple[str, dict[str, Any], str, str, dict[str, Any] | None, list[str]]] = [
    ("both bind", {}, SEM, ADA, None, []),
    ("both bind, the tree agrees", {}, SEM, ADA, {SEM: [Kind.DIR, Kind.DIR, Kind.FILE], ADA: [Kind.DIR, Kind.DIR, Kind.FILE]}, []),
    ("missing: not configured", {}, "docs/review/other.md", ADA, None, [B.REVIEW_BINDING_MISSING]),
    ("missing: not in the base tree", {}, SEM, ADA, {SEM: [Kind.DIR, None]}, [B.REVIEW_BINDING_MISSING]),
    ("missing: configured, not locked", {"lock": [(SEM, PCM, "review", D1)]}, SEM, ADA, None, [B.REVIEW_BINDING_MISSING]),
    ("unsafe: absolute", {}, "/" + SEM, ADA, None, [B.REVIEW_BINDING_UNSAFE, "PATH_ABSOLUTE"]),
    ("unsafe: parent traversal", {}, "docs/../" + SEM, ADA, None, [B.REVIEW_BINDING_UNSAFE, "PATH_NOT_NORMAL"]),
    ("unsafe: a dot component", {}, "./" + SEM, ADA, None, [B.REVIEW_BINDING_UNSAFE, "PATH_NOT_NORMAL"]),
    ("unsafe: a symlinked component", {}, SEM, ADA, {SEM: [Kind.SYMLINK]}, [B.REVIEW_BINDING_UNSAFE, "PATH_SYMLINK"]),
    ("unsafe: a symlinked endpoint", {}, SEM, ADA, {SEM: [Kind.DIR, Kind.DIR, Kind.SYMLINK]}, [B.REVIEW_BINDING_UNSAFE, "PATH_SYMLINK"]),
    ("unsafe: not a regular file", {}, SEM, ADA, {SEM: [Kind.DIR, Kind.DIR, Kind.DIR]}, [B.REVIEW_BINDING_UNSAFE, "PATH_NOT_REGULAR"]),
    ("unsafe: .github", {}, ".github/review.md", ADA, None, [B.REVIEW_BINDING_UNSAFE, "PATH_RESERVED"]),
    ("unsafe: the Skill's namespace", {}, SEM, ".agents/skills/pr-review/SKILL.md", None, [B.REVIEW_BINDING_UNSAFE, "PATH_RESERVED"]),
    ("unsafe: .git", {}, ".git/config.md", ADA, None, [B.REVIEW_BINDING_UNSAFE, "PATH_DOTGIT"]),
    ("unsafe: a policy module", {}, "policy/review/findings.md", ADA, None, [B.REVIEW_BINDING_UNSAFE, "PATH_RESERVED"]),
    ("duplicate: one path for both roles", {}, SEM, SEM, None, [B.REVIEW_BINDING_DUPLICATE]),
    ("duplicate: configured twice", {"outputs": (*BASE_OUTPUTS, (SEM, PCM, "other", True, D1))}, SEM, ADA, None,
     [B.REVIEW_BINDING_DUPLICATE]),
    ("duplicate: locked twice", {"lock": [(SEM, PCM, "review", D1), (SEM, PCM, "review", D3), (ADA, GH, "review", D2)]}, SEM, ADA,
     None, [B.REVIEW_BINDING_DUPLICATE]),
    ("disabled", {"outputs": _swap(BASE_OUTPUTS, ADA, enabled=False)}, SEM, ADA, None, [B.REVIEW_BINDING_DISABLED]),
    ("role-swapped", {}, ADA, SEM, None, [B.REVIEW_BINDING_ROLE_SWAPPED, B.REVIEW_BINDING_ROLE_SWAPPED]),
    ("role-swapped: two semantic outputs", {"outputs": (*BASE_OUTPUTS, ("docs/b.md", PCM, "review", True, D3))}, SEM, "docs/b.md",
     None, [B.REVIEW_BINDING_ROLE_SWAPPED]),
    ("unsupported adapter", {"outputs": _swap(BASE_OUTPUTS, ADA, renderer="gitlab-review-json-adapter-v1")}, SEM, ADA, None,
     [B.REVIEW_BINDING_UNSUPPORTED]),
    ("unsupported semantic", {"outputs": _swap(BASE_OUTPUTS, SEM, renderer="combined-review-md")}, SEM, ADA, None,
     [B.REVIEW_BINDING_UNSUPPORTED]),
    ("inexact: case", {}, "docs/review/Policy-Context.md", ADA, None, [B.REVIEW_BINDING_INEXACT]),
    ("inexact: unicode normalization", {"outputs": _swap(BASE_OUTPUTS, SEM, path="docs/review/caf\u00e9.md")},
     "docs/review/cafe\u0301.md", ADA, None, [B.REVIEW_BINDING_INEXACT]),
    ("ambiguous: a case-folding twin", {"outputs": (*BASE_OUTPUTS, ("docs/review/POLICY-CONTEXT.md", PCM, "other", True, D3))},
     SEM, ADA, None, [B.REVIEW_BINDING_AMBIGUOUS]),
    ("ambiguous: config and lock disagree", {"lock": [(SEM, PCM, "other", D1), (ADA, GH, "review", D2)]}, SEM, ADA, None,
     [B.REVIEW_BINDING_AMBIGUOUS]),
    ("context mismatch", {"outputs": _swap(BASE_OUTPUTS, ADA, context="other")}, SEM, ADA, None, [B.REVIEW_BINDING_CONTEXT_MISMATCH]),
    ("not reproduced", {"reproduced": [(SEM, PCM, "review", D1)]}, SEM, ADA, None, [B.REVIEW_BINDING_NOT_REPRODUCED]),
    ("reproduced with other bytes", {"reproduced": [(SEM, PCM, "review", D3), (ADA, GH, "review", D2)]}, SEM, ADA, None,
     [B.REVIEW_BINDING_NOT_REPRODUCED]),
    ("both roles fail, each reported", {"outputs": _swap(BASE_OUTPUTS, ADA, enabled=False)}, "/x.md", ADA, None,
     [B.REVIEW_BINDING_UNSAFE, "PATH_ABSOLUTE", B.REVIEW_BINDING_DISABLED]),
]


@pytest.mark.parametrize(("name", "setup", "semantic", "adapter", "kinds", "want"), CASES, ids=[c[0] for c in CASES])
def test_decide_bindings(name: str, setup: dict[str, Any], semantic: str, adapter: str, kinds: dict[str, Any] | None,
                         want: list[str]) -> None:
    config, lock, reproduced = table(**setup)
    found = decide_bindings(config, lock, reproduced, semantic, adapter, kinds=kinds)
    assert [f.code for f in found] == want, [str(f) for f in found]
    assert all(isinstance(f, Finding) for f in found)
