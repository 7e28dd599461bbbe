"""Attack review of `attest bootstrap` steps 1-9: where the deployment's inputs may lie, and what selects the base.

Real deployments (test_bootstrap's promotion, keys, trust policy), real installations, real git
repositories (linked worktrees, bare clones, alternates, replace refs, grafts), real frozen images.
A test marked ``xfail(strict=True, reason="ATTACK: ...")`` asserts the secure behaviour and fails
against the current code; the others are refused attempts kept as regression tests.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import test_bootstrap
from support.caps import BACKEND
from support.gitrepo import git
from test_bootstrap import Consumer, Deployment, codes, config_text, identity_file, make_consumer, run

from attest.attestation import Envelope
from attest.errors import AttestError
from attest.policy import generate_policy
from attest.review.bootstrap import BootstrapError

# test_bootstrap's module-scoped deployment and a fresh installed Skill, which pytest injects by name.


def attempt(fn: object) -> AttestError | None:
    """The bootstrap's error, or None when it signed a handoff."""
    try:
        fn()  # type: ignore[operator]
    except AttestError as e:
        return e
    return None


def refused_in_tree(err: AttestError | None) -> bool:
    return isinstance(err, BootstrapError) and err.step == 1 and codes(err) == {"BOOTSTRAP_INPUT_IN_TREE"}


def refused_at_all(err: AttestError | None, tmp: Path) -> bool:
    """Refused by whatever code a fix chooses, before any handoff was signed."""
    return isinstance(err, BootstrapError) and not (tmp / "handoff.json").exists()


# -- PINS where the repository can write it ---------------------------------------------------------------------------


@pytest.mark.parametrize("given", ["linked-worktree", "main-worktree"])
def test_attack_pins_in_another_worktree_of_the_repository(dep: Deployment, skill: tuple[Path, Path], tmp_path: Path,
                                                          given: str) -> None:
    c = make_consumer(tmp_path / "consumer", dep.sha)
    linked = tmp_path / "linked"
    git(c.path, "worktree", "add", "-q", "--detach", str(linked), c.base)
    # --repo names one worktree; the pins lie in the other one.
    repo, holder = (linked, c.path) if given == "linked-worktree" else (c.path, linked)
    (holder / "deploy").mkdir()
    shutil.copy(dep.pins, holder / "deploy" / "pins.toml")
    err = attempt(lambda: run(dep, skill, Consumer(repo, c.base, c.head), tmp_path, pins=holder / "deploy" / "pins.toml"))
    assert refused_in_tree(err), err


def _alternates(git_dir: Path, tmp_path: Path) -> Path:
    """An alternates object directory of the repository; returns the pins placed inside it."""
    alt = tmp_path / "shared" / "objects"
    alt.mkdir(parents=True)
    (git_dir / "objects" / "info").mkdir(exist_ok=True)
    (git_dir / "objects" / "info" / "alternates").write_text(f"{alt}\n")
    pins = alt / "pins.toml"
    return pins


def test_attack_pins_inside_an_alternates_directory_of_a_non_bare_repository(dep: Deployment, skill: tuple[Path, Path],
                                                                             tmp_path: Path) -> None:
    c = make_consumer(tmp_path / "consumer", dep.sha)
    pins = _alternates(c.path / ".git", tmp_path)
    shutil.copy(dep.pins, pins)
    err = attempt(lambda: run(dep, skill, c, tmp_path, pins=pins))
    assert refused_in_tree(err), err


def test_refused_pins_inside_an_alternates_directory_of_a_bare_repository(dep: Deployment, skill: tuple[Path, Path],
                                                                          tmp_path: Path) -> None:
    c = make_consumer(tmp_path / "consumer", dep.sha)
    bare = tmp_path / "bare.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(c.path), str(bare)], check=True, capture_output=True)
    pins = _alternates(bare, tmp_path)
    shutil.copy(dep.pins, pins)
    err = attempt(lambda: run(dep, skill, Consumer(bare, c.base, c.head), tmp_path, pins=pins))
    assert refused_in_tree(err), err


def test_attack_pins_hard_linked_into_the_worktree(dep: Deployment, skill: tuple[Path, Path], tmp_path: Path) -> None:
    c = make_consumer(tmp_path / "consumer", dep.sha)
    inside = c.path / "pins.toml"
    shutil.copy(dep.pins, inside)
    outside = tmp_path / "deploy" / "pins.toml"
    outside.parent.mkdir()
    os.link(inside, outside)
    assert os.stat(outside).st_ino == os.stat(inside).st_ino
    err = attempt(lambda: run(dep, skill, c, tmp_path, pins=outside))
    assert refused_at_all(err, tmp_path) and err is not None and err.step == 1, err


def test_refused_pins_reached_through_a_symlinked_directory_into_the_repository(dep: Deployment, skill: tuple[Path, Path],
                                                                                tmp_path: Path) -> None:
    c = make_consumer(tmp_path / "consumer", dep.sha)
    (c.path / "deploy").mkdir()
    shutil.copy(dep.pins, c.path / "deploy" / "pins.toml")
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "attest").symlink_to(c.path / "deploy")
    err = attempt(lambda: run(dep, skill, c, tmp_path, pins=tmp_path / "etc" / "attest" / "pins.toml"))
    assert refused_in_tree(err), err


def test_refused_pins_inside_a_bind_mount_of_the_repository(dep: Deployment, skill: tuple[Path, Path], tmp_path: Path) -> None:
    c = make_consumer(tmp_path / "consumer", dep.sha)
    (c.path / "deploy").mkdir()
    shutil.copy(dep.pins, c.path / "deploy" / "pins.toml")
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    if subprocess.run(["mount", "--bind", str(c.path / "deploy"), str(mnt)], capture_output=True, check=False).returncode != 0:
        pytest.skip("no bind mounts here")
    try:
        err = attempt(lambda: run(dep, skill, c, tmp_path, pins=mnt / "pins.toml"))
    finally:
        subprocess.run(["umount", str(mnt)], check=False, capture_output=True)
    assert refused_in_tree(err), err


# -- what names the base ------------------------------------------------------------------------------------------------


def test_attack_an_identity_file_inside_the_repository_selects_an_older_base(dep: Deployment, skill: tuple[Path, Path],
                                                                             tmp_path: Path) -> None:
    c = make_consumer(tmp_path / "consumer", dep.sha)
    old = c.base
    # The base moves on (a stricter module); the repository's own file still names the old base.
    (c.path / "policy/core/evidence.md").write_bytes(b"# Evidence\n\nStricter: every finding cites two lines.\n")
    generate_policy(c.path)
    git(c.path, "commit", "-qam", "stricter")
    new = git(c.path, "rev-parse", "HEAD")
    ident = identity_file(c.path / "pr.json", Consumer(c.path, old, new))
    err = attempt(lambda: run(dep, skill, Consumer(c.path, old, new), tmp_path, ident=ident))
    assert refused_at_all(err, tmp_path), err


def test_refused_replace_refs_and_grafts_do_not_change_the_base(dep: Deployment, skill: tuple[Path, Path], tmp_path: Path) -> None:
    """refs/replace/<base> -> a commit whose config disables pr-review, plus info/grafts: the objects decide."""
    c = make_consumer(tmp_path / "consumer", dep.sha)
    original = (c.path / ".agent-policy.yml").read_bytes()
    git(c.path, "checkout", "-qb", "evil")
    (c.path / ".agent-policy.yml").write_text(config_text(dep.sha, skills="[]"))
    git(c.path, "commit", "-qam", "evil")
    evil = git(c.path, "rev-parse", "HEAD")
    git(c.path, "checkout", "-q", "--detach", c.base)
    git(c.path, "replace", c.base, evil)
    (c.path / ".git" / "info").mkdir(exist_ok=True)
    (c.path / ".git" / "info" / "grafts").write_text(f"{c.base} {evil}\n")
    assert git(c.path, "rev-parse", f"{c.base}^{{tree}}") == git(c.path, "rev-parse", f"{evil}^{{tree}}")  # plain git is fooled
    result = run(dep, skill, c, tmp_path)
    pred = json.loads(Envelope.from_json(json.loads(Path(result.handoff).read_bytes())).payload)["predicate"]
    assert pred["config"]["sha256"] == hashlib.sha256(original).hexdigest()
    assert pred["base"]["tree"] == git(c.path, "--no-replace-objects", "rev-parse", f"{c.base}^{{tree}}")



def test_the_documented_gitdir_form_of_a_non_bare_repository_works(dep: Deployment, skill: tuple[Path, Path], tmp_path: Path) -> None:
    """`--repo GITDIR` with a non-bare repository's .git: it bootstraps, and PINS in its worktree is still refused."""
    c = make_consumer(tmp_path / "consumer", dep.sha)
    done = test_bootstrap.bootstrap(pins=dep.pins, trust=dep.trust, state_dir=dep.state, skill_dir=skill[0], installation=skill[1],
                                    repo=c.path / ".git", host=test_bootstrap.IdentityFile(str(identity_file(tmp_path / "id.json", c))),
                                    key=str(dep.key), out=tmp_path / "handoff.json", backend=BACKEND,
                                    runner=test_bootstrap.HostCheck(), clock=lambda: test_bootstrap.T0)
    assert done.to_json()["ok"] is True
    planted = c.path / "pins.toml"
    shutil.copy(dep.pins, planted)
    err = attempt(lambda: test_bootstrap.bootstrap(
        pins=planted, trust=dep.trust, state_dir=dep.state, skill_dir=skill[0], installation=skill[1], repo=c.path / ".git",
        host=test_bootstrap.IdentityFile(str(identity_file(tmp_path / "id2.json", c))), key=str(dep.key),
        out=tmp_path / "h2.json", backend=BACKEND, runner=test_bootstrap.HostCheck(), clock=lambda: test_bootstrap.T0))
    assert refused_in_tree(err), err
