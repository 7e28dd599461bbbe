"""Regression tests for the attack review of `attest bootstrap` (each performed for real; each failed before its fix)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from support.gitrepo import git
from test_bootstrap import Deployment, codes, fails, make_consumer, run

from attest.attestation import Envelope, load_signer, sign_statement
from attest.errors import AttestError
from attest.git import GitCode, GitRepo


def test_a1_deployment_inputs_inside_the_repository_named_through_a_subdirectory(
        dep: Deployment, skill: tuple[Path, Path], tmp_path: Path) -> None:
    """--repo consumer/policy: git finds the repository upwards; PINS under consumer/deploy was accepted."""
    c = make_consumer(tmp_path / "consumer", dep.sha)
    inside = c.path / "deploy"
    inside.mkdir()
    shutil.copy(dep.pins, inside / "pins.toml")
    sub = c.path / "policy"
    from test_bootstrap import Consumer

    err = fails(1, lambda: run(dep, skill, Consumer(sub, c.base, c.head), tmp_path, pins=inside / "pins.toml"))
    assert codes(err) == {"BOOTSTRAP_INPUT_IN_TREE"}


def test_a1_deployment_inputs_inside_the_git_directory_named_by_a_gitdir_file(
        dep: Deployment, skill: tuple[Path, Path], tmp_path: Path) -> None:
    c = make_consumer(tmp_path / "consumer", dep.sha)
    wt = tmp_path / "wt"
    wt.mkdir()
    (wt / ".git").write_text(f"gitdir: {c.path / '.git'}\n")
    shutil.copy(dep.pins, c.path / ".git" / "pins.toml")
    from test_bootstrap import Consumer

    err = fails(1, lambda: run(dep, skill, Consumer(wt, c.base, c.head), tmp_path, pins=c.path / ".git" / "pins.toml"))
    assert codes(err) == {"BOOTSTRAP_INPUT_IN_TREE"}


def test_a2_a_partial_clone_is_refused_before_any_object_is_read(tmp_path: Path) -> None:
    """A promisor remote fetches a missing object by running remote.*.uploadpack: code from the repository's config."""
    repo = tmp_path / "r"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "f").write_text("x")
    git(repo, "add", "f")
    git(repo, "commit", "-qm", "c")
    marker = tmp_path / "ran"
    git(repo, "config", "extensions.partialClone", "origin")
    git(repo, "config", "remote.origin.promisor", "true")
    git(repo, "config", "remote.origin.url", "file:///nonexistent")
    git(repo, "config", "remote.origin.uploadpack", f"touch {marker}; git-upload-pack")
    with pytest.raises(AttestError) as ei:
        GitRepo.open(repo)
    assert ei.value.code == GitCode.PARTIAL_CLONE and not marker.exists()


@pytest.mark.parametrize("spelling", ["colon-slashes", "file2-uri"])
def test_a3_a_key_inside_the_repository_spelled_like_a_uri(dep: Deployment, skill: tuple[Path, Path], tmp_path: Path,
                                                           spelling: str) -> None:
    c = make_consumer(tmp_path / "consumer", dep.sha)
    keydir = c.path / "k:"
    keydir.mkdir()
    shutil.copy(dep.key, keydir / "deploy.pem")
    key = f"{c.path}/k://deploy.pem" if spelling == "colon-slashes" else f"file2://{keydir}/deploy.pem"
    err = fails(1, lambda: run(dep, skill, c, tmp_path, key=key))
    assert codes(err) == {"BOOTSTRAP_INPUT_IN_TREE"}
    assert not (tmp_path / "handoff.json").exists()


def test_a4_an_io_failure_inside_a_step_is_that_step_s_failure(dep: Deployment, skill: tuple[Path, Path], tmp_path: Path) -> None:
    from attest.review.bootstrap import BootstrapError

    c = make_consumer(tmp_path / "consumer", dep.sha)
    blocker = dep.state / "bootstrap-staging"
    aside = dep.state / "bootstrap-staging.aside"  # the shared deployment's earlier bootstraps made the real one
    existed = blocker.exists()
    if existed:
        blocker.rename(aside)
    blocker.write_text("not a directory")
    try:
        with pytest.raises(BootstrapError) as ei:
            run(dep, skill, c, tmp_path)
        doc = ei.value.to_json()
        assert doc["ok"] is False and doc["step"] == 8 and doc["errors"], doc
    finally:
        blocker.unlink()
        if existed:
            aside.rename(blocker)


@pytest.mark.parametrize(("signer", "code"), [("release_key", "SIGNER_NOT_FOR_PREDICATE"), ("key", "SKILL_IMAGE_MISMATCH")])
def test_a5_an_installation_of_another_tree_signed_by_a_trusted_key(dep: Deployment, skill: tuple[Path, Path],
                                                                     tmp_path: Path, signer: str, code: str) -> None:
    """Any key of TRUST signing an installation of a changed tree was enough. The release key may not sign an
    installation at all (its roles); the deployment's own key may, but not of a tree other than the promoted skill."""
    from attest.inventory import inventory_tree

    c = make_consumer(tmp_path / "consumer", dep.sha)
    os.chmod(skill[0], 0o755)
    (skill[0] / "PLANTED.md").write_text("obey me\n")
    doc = json.loads(Envelope.from_json(json.loads(skill[1].read_bytes())).payload)
    doc["predicate"]["inventory"] = inventory_tree(skill[0]).to_json()
    doc["subject"][0]["digest"]["sha256"] = inventory_tree(skill[0]).digest_hex
    forged = tmp_path / "installation-forged.json"
    forged.write_bytes(sign_statement(doc, load_signer(str(getattr(dep, signer)))))
    err = fails(1, lambda: run(dep, skill, c, tmp_path, installation=forged))
    assert code in codes(err)
    assert not (tmp_path / "handoff.json").exists()
