"""`attest install skill` and the installation attestation, from a real promotion, with real keys and real attacks."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import stat
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from support.build import SKILL_RECIPE, Project
from support.caps import BACKEND
from support.deployment import make_project
from support.gitrepo import git
from support.trees import chattr, is_immutable

from attest import cli
from attest._json import canonical_bytes
from attest.attestation import (
    INSTALLATION_PREDICATE,
    generate_key,
    load_policy,
    load_signer,
    sign_statement,
    verify_attestation_file,
)
from attest.builder import (
    InstallationClaim,
    InstallCode,
    Sandbox,
    SkillPins,
    build_skill,
    fetch,
    install_skill,
    installed_root_of,
    load_lock,
    load_recipe,
    verify_installation,
)
from attest.builder._attest import attest_build, file_digest
from attest.builder._install import Ancestor, check_claim, destination_problem, installed_inventory
from attest.builder._outputs import BuildResult
from attest.builder._promote import dump_pins, parse_pins, promote
from attest.errors import AttestError, InputError, VerificationError
from attest.inventory import Entry, EntryType, Inventory, inventory_tree

# -- a real promotion, once per module ----------------------------------------------------------


@dataclass
class Deployment:
    project: Project
    state: Path
    pins: Path
    key: Path  # the deployment key: signs installation attestations
    trust: Path  # the deployment's trust policy: that key only
    release_key: Path
    both: Path  # a policy trusting the release and the deployment keys
    other: BuildResult  # a second skill (another source commit), built and attested in the same state
    other_sha: str


def _policy(path: Path, *pubs: Path) -> Path:
    path.write_text("threshold = 1\n" + "".join(f'[[signers]]\nkind = "key"\npublic_key = "{p}"\n' for p in pubs))
    return path


def skill_table(skill: BuildResult, recipe_root: str = "agent-policy") -> dict[str, str]:
    """The [skill] table exactly as `attest promote` writes it."""
    s = skill.details["skill"]
    return {"name": skill.name, "inventory": skill.inventory.identity, "root": recipe_root,
            "source_repository": s["source_repository"], "source_revision": s["source_revision"],
            "installer_repository": s["installer_repository"], "installer_revision": s["installer_revision"],
            "attestation": file_digest(skill.attestations[0]), "provenance": file_digest(skill.attestations[1])}


@pytest.fixture(scope="module")
def dep(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    tmp = tmp_path_factory.mktemp("install")
    root = tmp / "proj"
    sha = make_project(root)
    wheels = root / "lockfiles" / "wheels"
    project = Project(root, root / "repo", sha, wheels, root / "lockfiles" / "pylock.toml", root / "builders" / "runtime.toml",
                      root / "builders" / "skill.toml", tmp / "cache", tmp / "state")
    keys = tmp / "keys"
    keys.mkdir()
    generate_key("ed25519", keys / "release.pem")
    generate_key("ecdsa-p256", keys / "deploy.pem")
    release_policy = _policy(keys / "release-policy.toml", keys / "release.pub.pem")
    recipe = load_recipe(project.recipe)
    fetch(load_lock(recipe.lock_path), project.cache, lock_path=recipe.lock_path)
    pins = tmp / "deploy" / "pins.toml"
    pins.parent.mkdir()
    promote(toolchain_rev=sha, pins_path=str(pins), signer=load_signer(str(keys / "release.pem")), policy_path=str(release_policy),
            runtime_recipe=recipe, skill_recipe=load_recipe(project.skill_recipe),  # type: ignore[arg-type]
            state=str(project.store), cache=str(project.cache), sandbox=Sandbox.establish(allow_unisolated_network=False),
            unsafe_without_rebuilders=True)  # a one-builder deployment fixture (tests/review/test_release_promotion.py: k of n)
    # Another skill: the same recipe at another source commit, built and attested into the same state.
    (project.repo / "skills" / "agent-policy" / "SKILL.md").write_bytes(b"# agent-policy, another revision\n")
    git(project.repo, "commit", "-qam", "another skill")
    other_sha = git(project.repo, "rev-parse", "HEAD")
    other = attest_build(build_skill(load_recipe(project.skill_recipe), other_sha, str(project.store),  # type: ignore[arg-type]
                                     installer_rev=other_sha), load_signer(str(keys / "release.pem")), str(project.store))
    yield Deployment(project, project.store, pins, keys / "deploy.pem", _policy(tmp / "deploy" / "trust.toml", keys / "deploy.pub.pem"),
                     keys / "release.pem", _policy(tmp / "deploy" / "both.toml", keys / "deploy.pub.pem", keys / "release.pub.pem"),
                     other, other_sha)
    subprocess.run(["chattr", "-R", "-f", "-i", str(tmp)], check=False, capture_output=True)


@pytest.fixture
def dest(tmp_path: Path) -> Path:
    (tmp_path / "skills").mkdir()
    return tmp_path / "skills" / "agent-policy"


def _install(dep: Deployment, dest: Path, pins: Path | None = None, state: Path | None = None) -> Any:
    # The deployment's pins have a promotion log (release key): it verifies under a policy trusting that key.
    return install_skill(pins or dep.pins, state or dep.state, dest, load_signer(str(dep.key)), policy=load_policy(dep.both))


def _pins_with(dep: Deployment, tmp_path: Path, **changes: str) -> Path:
    doc = parse_pins(dep.pins.read_bytes(), str(dep.pins))
    doc["skill"] = {**doc["skill"], **changes}
    out = tmp_path / "pins-changed.toml"
    out.write_bytes(dump_pins(doc))
    return out


def _codes(err: AttestError) -> set[tuple[str, str | None]]:
    return {(f.code, f.path) for f in err.findings}


def _installations(dep: Deployment) -> set[str]:
    d = dep.state / "installations"
    return set(os.listdir(d)) if d.exists() else set()


# -- installing ---------------------------------------------------------------------------------


def test_install_copies_the_promoted_image_and_signs_outside_it(dep: Deployment, dest: Path) -> None:
    pins = SkillPins.from_file(dep.pins)
    result = _install(dep, dest)
    image = dep.state / "store" / pins.inventory.removeprefix("sha256:") / "tree" / "agent-policy"
    # A writable copy: the image's bytes and modes, new inodes, no seal.
    assert (dest / "SKILL.md").read_bytes() == (image / "SKILL.md").read_bytes() == b"# agent-policy\n"
    assert {p.name: stat.S_IMODE(p.stat().st_mode) for p in (dest / "SKILL.md", dest / "bin", dest / "bin" / "bootstrap")} == \
        {"SKILL.md": 0o444, "bin": 0o555, "bootstrap": 0o555}
    assert stat.S_IMODE(dest.stat().st_mode) == 0o555
    assert os.stat(dest / "SKILL.md").st_ino != os.stat(image / "SKILL.md").st_ino and not is_immutable(dest / "SKILL.md")
    assert sorted(os.listdir(dest.parent)) == ["agent-policy"]  # no temp sibling left behind
    # The attestation: under S/installations, never inside the tree, verifying under the deployment's policy.
    att = Path(result.attestation)
    assert att.parent == dep.state / "installations" and not str(att).startswith(str(dest) + "/")
    assert result.attestation_digest == "sha256:" + hashlib.sha256(att.read_bytes()).hexdigest()
    verified = verify_attestation_file(att, load_policy(dep.trust))
    assert verified.predicate_type == INSTALLATION_PREDICATE == "https://attest.dev/installation/v1"
    pred = verified.statement["predicate"]
    assert pred["installer"] == {"repository": "https://example.org/toolchain.git", "revision": dep.project.sha}
    assert pred["source"]["repository"] == "https://example.org/toolchain.git" and pred["source"]["revision"] == dep.project.sha
    assert pred["installed_root"] == str(dest) == result.installed_root and os.path.isabs(pred["installed_root"])
    assert pred["name"] == pins.name and pred["root"] == "agent-policy"
    # The closed inventory is exactly the installed tree's; the subject names it.
    observed = inventory_tree(dest)
    assert Inventory.from_json(pred["inventory"]).identity == observed.identity == result.inventory.identity
    assert verified.statement["subject"] == [{"name": pins.name, "digest": {"sha256": observed.digest_hex}}]
    # One predicate shape: the build's installation predicate plus installed_root.
    build_pred = verify_attestation_file(dep.state / "builds" / f"{pins.name}.skill.json", load_policy(dep.both)).statement["predicate"]
    assert set(pred) == set(build_pred) | {"installed_root"}
    assert {k: pred[k] for k in ("name", "inputs_digest", "installer", "source", "root")} == \
        {k: build_pred[k] for k in ("name", "inputs_digest", "installer", "source", "root")}
    # ... and the installed inventory is the image's below its root.
    assert installed_inventory(Inventory.from_json(build_pred["inventory"]), "agent-policy")[0].identity == observed.identity
    checked = verify_installation(att, load_policy(dep.trust), dest, pins)
    assert checked.inventory.identity == observed.identity and checked.attestation_digest == result.attestation_digest


def test_reinstalling_the_same_root_signs_the_same_statement(dep: Deployment, dest: Path) -> None:
    """No clock, no randomness in the statement: the same installation is the same payload (ECDSA signatures differ)."""
    first = _install(dep, dest)
    payload = json.loads(Path(first.attestation).read_bytes())["payload"]
    os.chmod(dest, 0o755)
    os.chmod(dest / "bin", 0o755)
    shutil.rmtree(dest)
    again = _install(dep, dest)
    assert again.attestation == first.attestation and json.loads(Path(again.attestation).read_bytes())["payload"] == payload


def test_an_existing_empty_directory_is_replaced(dep: Deployment, dest: Path) -> None:
    dest.mkdir()
    result = _install(dep, dest)
    assert (dest / "SKILL.md").exists() and result.installed_root == str(dest)


def test_a_bundle_installation_attestation_verifies(dep: Deployment, dest: Path) -> None:
    result = install_skill(dep.pins, dep.state, dest, load_signer(str(dep.key)), fmt="bundle", policy=load_policy(dep.both))
    assert json.loads(Path(result.attestation).read_bytes())["mediaType"].startswith("application/vnd.dev.sigstore.bundle")
    verify_installation(result.attestation, load_policy(dep.trust), dest, SkillPins.from_file(dep.pins))


# -- where an installation may not go ------------------------------------------------------------


@pytest.mark.parametrize("case", ["in-state", "state-itself", "in-worktree", "in-bare-repo", "in-dot-git", "in-toolchain-repo",
                                  "not-empty", "a-file", "a-symlink", "no-parent"])
def test_refused_destinations_leave_nothing(dep: Deployment, tmp_path: Path, case: str) -> None:
    before = _installations(dep)
    code: str = InstallCode.INSTALL_DEST_IN_REPOSITORY
    if case == "in-state":
        target, code = dep.state / "agent-policy", InstallCode.INSTALL_DEST_IN_STATE
    elif case == "state-itself":
        target, code = dep.state, InstallCode.INSTALL_DEST_IN_STATE
    elif case == "in-worktree":
        (tmp_path / "work" / "skills").mkdir(parents=True)
        git(tmp_path / "work", "init", "-q")
        target = tmp_path / "work" / "skills" / "agent-policy"
    elif case == "in-bare-repo":
        subprocess.run(["git", "init", "-q", "--bare", str(tmp_path / "bare.git")], check=True, capture_output=True)
        target = tmp_path / "bare.git" / "agent-policy"
    elif case == "in-dot-git":
        (tmp_path / "work").mkdir()
        git(tmp_path / "work", "init", "-q")
        target = tmp_path / "work" / ".git" / "agent-policy"
    elif case == "in-toolchain-repo":
        target = dep.project.repo / "skills" / "installed"
    elif case == "not-empty":
        target, code = tmp_path / "agent-policy", InstallCode.INSTALL_DEST_EXISTS
        target.mkdir()
        (target / "mine.txt").write_bytes(b"keep me\n")
    elif case == "a-file":
        target, code = tmp_path / "agent-policy", InstallCode.INSTALL_DEST_EXISTS
        target.write_bytes(b"keep me\n")
    elif case == "a-symlink":
        (tmp_path / "elsewhere").mkdir()
        target, code = tmp_path / "agent-policy", InstallCode.INSTALL_DEST_EXISTS
        os.symlink(tmp_path / "elsewhere", target)
    else:
        target, code = tmp_path / "missing" / "agent-policy", "BAD_OUTPUT_PATH"
    listing = sorted(os.listdir(target.parent)) if target.parent.exists() else None
    with pytest.raises(InputError) as ei:  # where to install is the operator's choice: exit 2
        _install(dep, target)
    assert ei.value.code == code, ei.value
    assert (sorted(os.listdir(target.parent)) if target.parent.exists() else None) == listing
    assert _installations(dep) == before
    if case in ("not-empty", "a-file"):
        assert (target / "mine.txt" if case == "not-empty" else target).read_bytes() == b"keep me\n"
    if case == "a-symlink":
        assert os.listdir(tmp_path / "elsewhere") == []


def _ancestors(*paths: str, git_at: str | None = None, git_dir_at: str | None = None, ident_of: str | None = None) -> list[Ancestor]:
    return [Ancestor(p, (1, 99) if p == ident_of else (1, i), p == git_at, p == git_dir_at) for i, p in enumerate(paths)]


@pytest.mark.parametrize(
    ("dest", "ancestors", "code"),
    [
        ("/home/u/.agents/skills/agent-policy", _ancestors("/home/u/.agents/skills", "/home/u/.agents", "/home/u", "/home", "/"), None),
        ("/var/lib/attest/skill", _ancestors("/var/lib/attest", "/var/lib", "/var", "/"), InstallCode.INSTALL_DEST_IN_STATE),
        ("/var/lib/attest", _ancestors("/var/lib", "/var", "/"), InstallCode.INSTALL_DEST_IN_STATE),
        # Whole components: /var/lib/attest-skills is not inside /var/lib/attest.
        ("/var/lib/attest-skills/x", _ancestors("/var/lib/attest-skills", "/var/lib", "/var", "/"), None),
        # Another path to the state directory (a bind mount): one ancestor is the state directory's inode.
        ("/mnt/view/skill", _ancestors("/mnt/view", "/mnt", "/", ident_of="/mnt/view"), InstallCode.INSTALL_DEST_IN_STATE),
        ("/src/repo/skills/x", _ancestors("/src/repo/skills", "/src/repo", "/src", "/", git_at="/src/repo"), InstallCode.INSTALL_DEST_IN_REPOSITORY),
        ("/srv/repo.git/x", _ancestors("/srv/repo.git", "/srv", "/", git_dir_at="/srv/repo.git"), InstallCode.INSTALL_DEST_IN_REPOSITORY),
        # Both: the state directory decides first (it holds the store, the keys and the attestations).
        ("/var/lib/attest/x", _ancestors("/var/lib/attest", "/var/lib", "/var", "/", git_at="/var"), InstallCode.INSTALL_DEST_IN_STATE),
    ],
)
def test_destination_problem(dest: str, ancestors: list[Ancestor], code: str | None) -> None:
    found = destination_problem(dest, ancestors, "/var/lib/attest", (1, 99))
    assert (None if found is None else found.code) == code


# -- the pins: another skill, or not the promoted one -----------------------------------------------


@pytest.mark.parametrize("case", ["inventory-of-other", "other-with-first-source", "attestation-of-other", "unknown-name",
                                  "other-root", "other-installer"])
def test_pins_naming_another_skill_are_refused(dep: Deployment, dest: Path, tmp_path: Path, case: str) -> None:
    other = skill_table(dep.other)
    code: str = InstallCode.INSTALL_PINS_MISMATCH
    if case == "inventory-of-other":
        changes = {"inventory": other["inventory"]}
    elif case == "other-with-first-source":
        changes = {**other, "source_revision": dep.project.sha}
    elif case == "attestation-of-other":
        changes, code = {"attestation": other["attestation"]}, InstallCode.INSTALL_ATTESTATION_MISMATCH
    elif case == "unknown-name":
        changes, code = {"name": "0" * 32 + "-test-skill"}, InstallCode.INSTALL_SKILL_MISSING
    elif case == "other-root":
        changes = {"root": "other-skill"}
    else:
        changes = {"installer_repository": "https://example.org/evil.git"}
    before = _installations(dep)
    with pytest.raises(VerificationError) as ei:
        _install(dep, dest, _pins_with(dep, tmp_path, **changes))
    assert ei.value.code == code, ei.value
    assert not dest.exists() and _installations(dep) == before


def test_the_other_skill_installs_when_pinned_consistently(dep: Deployment, dest: Path, tmp_path: Path) -> None:
    pins_path = _pins_with(dep, tmp_path, **skill_table(dep.other))
    result = _install(dep, dest, pins_path)
    assert (dest / "SKILL.md").read_bytes() == b"# agent-policy, another revision\n"
    assert result.claim.source_revision == dep.other_sha
    verify_installation(result.attestation, load_policy(dep.trust), dest, SkillPins.from_file(pins_path))
    # Under the first skill's pins the same installation is another skill.
    with pytest.raises(VerificationError) as ei:
        verify_installation(result.attestation, load_policy(dep.trust), dest, SkillPins.from_file(dep.pins))
    assert {f.code for f in ei.value.findings} == {InstallCode.INSTALL_PINS_MISMATCH}
    assert any("source.revision" in f.detail for f in ei.value.findings)


GOOD_PINS = {"name": "0123456789abcdef0123456789abcdef-test-skill", "inventory": "sha256:" + "a" * 64, "root": "agent-policy",
             "source_repository": "https://example.org/t.git", "source_revision": "b" * 40,
             "installer_repository": "https://example.org/t.git", "installer_revision": "c" * 64,
             "attestation": "sha256:" + "d" * 64, "provenance": "sha256:" + "e" * 64}


@pytest.mark.parametrize(
    ("skill", "needle"),
    [
        (None, "no [skill] table"),
        ({k: v for k, v in GOOD_PINS.items() if k != "provenance"}, "missing ['provenance']"),
        ({**GOOD_PINS, "extra": "x"}, "unknown ['extra']"),
        ({**GOOD_PINS, "source_revision": "b" * 12}, "source_revision"),
        ({**GOOD_PINS, "installer_revision": "main"}, "installer_revision"),
        ({**GOOD_PINS, "inventory": "sha256:" + "A" * 64}, "inventory"),
        ({**GOOD_PINS, "attestation": "d" * 64}, "attestation"),
        ({**GOOD_PINS, "root": "a/b"}, "root"),
        ({**GOOD_PINS, "root": ".git"}, "root"),
        ({**GOOD_PINS, "name": "../../etc/x"}, "name"),
        ({**GOOD_PINS, "source_repository": 3}, "source_repository"),
        ({**GOOD_PINS, "source_repository": " https://x"}, "source_repository"),
    ],
)
def test_bad_pins(skill: dict[str, Any] | None, needle: str) -> None:
    doc: dict[str, Any] = {"toolchain": {"revision": "b" * 40}} if skill is None else {"skill": skill}
    with pytest.raises(InputError) as ei:
        SkillPins.from_doc(doc, "pins.toml")
    assert ei.value.code == "BAD_PINS" and needle in ei.value.detail


def test_good_pins_parse() -> None:
    pins = SkillPins.from_doc({"skill": GOOD_PINS, "runtime": {"x": 1}}, "pins.toml")
    assert pins.root == "agent-policy" and pins.path is None


def _inv(*entries: Entry) -> Inventory:
    return Inventory.from_entries(entries)


@pytest.mark.parametrize(
    ("image", "ok"),
    [
        (_inv(Entry("agent-policy", EntryType.DIR, 0o555), Entry("agent-policy/SKILL.md", EntryType.FILE, 0o444, 1, "a" * 64)), True),
        (_inv(Entry("agent-policy", EntryType.DIR, 0o555)), True),  # an empty skill is still a skill image
        (_inv(), False),
        (_inv(Entry("other", EntryType.DIR, 0o555), Entry("other/SKILL.md", EntryType.FILE, 0o444, 1, "a" * 64)), False),
        (_inv(Entry("agent-policy", EntryType.FILE, 0o444, 1, "a" * 64)), False),
        (_inv(Entry("agent-policy", EntryType.DIR, 0o555), Entry("agent-policy.md", EntryType.FILE, 0o444, 1, "a" * 64)), False),
        (_inv(Entry("agent-policy", EntryType.DIR, 0o555), Entry("zz", EntryType.FILE, 0o444, 1, "a" * 64)), False),
    ],
)
def test_installed_inventory_of_a_skill_image(image: Inventory, ok: bool) -> None:
    if ok:
        below, mode = installed_inventory(image, "agent-policy")
        assert mode == 0o555 and [e.path for e in below.entries] == [e.path.removeprefix("agent-policy/") for e in image.entries[1:]]
        return
    with pytest.raises(VerificationError) as ei:
        installed_inventory(image, "agent-policy")
    assert ei.value.code == InstallCode.INSTALL_BAD_IMAGE


# -- the store image and the rollback: a state of their own ------------------------------------------


@pytest.fixture
def own_state(dep: Deployment, tmp_path: Path) -> tuple[Path, Path]:
    """The promoted skill rebuilt and attested into a fresh state directory, with its pins (the skill table only)."""
    state = tmp_path / "state"
    skill = attest_build(build_skill(load_recipe(dep.project.skill_recipe), dep.project.sha, str(state),  # type: ignore[arg-type]
                                     installer_rev=dep.project.sha), load_signer(str(dep.release_key)), str(state))
    pins = tmp_path / "own-pins.toml"
    pins.write_bytes(dump_pins({"skill": skill_table(skill)}))
    return state, pins


def test_a_tampered_store_image_is_never_installed(dep: Deployment, dest: Path, own_state: tuple[Path, Path]) -> None:
    state, pins = own_state
    image = state / "store" / SkillPins.from_file(pins).inventory.removeprefix("sha256:") / "tree" / "agent-policy" / "SKILL.md"
    chattr("-i", image)
    image.write_bytes(b"# agent-policy: trust me\n")
    chattr("+i", image)
    with pytest.raises(VerificationError) as ei:
        _install(dep, dest, pins, state)
    assert ei.value.code == "IMAGE_CHANGED"
    assert not dest.exists() and os.listdir(dest.parent) == [] and not (state / "installations").exists()


def test_a_failed_attestation_write_removes_the_installation(dep: Deployment, dest: Path, own_state: tuple[Path, Path]) -> None:
    state, pins = own_state
    (state / "installations").write_bytes(b"not a directory\n")
    with pytest.raises(AttestError) as ei:
        _install(dep, dest, pins, state)
    assert ei.value.code == InstallCode.INSTALL_FAILED and ei.value.exit_code == 1
    assert not dest.exists() and os.listdir(dest.parent) == []


def test_a_bad_image_shape_is_refused_even_when_pinned(dep: Deployment, dest: Path, tmp_path: Path) -> None:
    """A store image and build attestation that agree with the pins, but whose tree is not one skill root."""
    from attest.attestation import statement, subject
    from attest.freeze import freeze_tree

    state = tmp_path / "state"
    src = tmp_path / "src"
    (src / "agent-policy").mkdir(parents=True)
    (src / "agent-policy" / "SKILL.md").write_bytes(b"x\n")
    (src / "stray.txt").write_bytes(b"outside the root\n")
    inv = inventory_tree(src)
    freeze_tree(src, inv, state, backend=BACKEND)
    name = "f" * 32 + "-test-skill"
    claim = InstallationClaim(name, "0" * 64, "https://i", dep.project.sha, "https://s", dep.project.sha, dep.project.sha, "skills/x",
                              dep.project.sha, "agent-policy", None, inv)
    data = sign_statement(statement([subject(name, inv.digest_hex)], INSTALLATION_PREDICATE, claim.to_predicate()),
                          load_signer(str(dep.release_key)))
    (state / "builds").mkdir()
    (state / "builds" / f"{name}.skill.json").write_bytes(data)
    table = {**GOOD_PINS, "name": name, "inventory": inv.identity, "source_repository": "https://s", "source_revision": dep.project.sha,
             "installer_repository": "https://i", "installer_revision": dep.project.sha,
             "attestation": "sha256:" + hashlib.sha256(data).hexdigest()}
    pins = tmp_path / "pins.toml"
    pins.write_bytes(dump_pins({"skill": table}))
    with pytest.raises(VerificationError) as ei:
        _install(dep, dest, pins, state)
    assert ei.value.code == InstallCode.INSTALL_BAD_IMAGE and not dest.exists()


# -- the attestation means something: verifying an installation ---------------------------------------


@pytest.fixture
def installed(dep: Deployment, dest: Path) -> tuple[Any, SkillPins]:
    return _install(dep, dest), SkillPins.from_file(dep.pins)


def _writable(*paths: Path) -> None:
    for p in paths:
        os.chmod(p, 0o755 if p.is_dir() else 0o644)


@pytest.mark.parametrize(
    ("case", "code", "path"),
    [
        ("extra-file", "EXTRA", "NOTES.md"),
        ("planted-dotfile", "EXTRA", "bin/.hook"),
        ("extra-directory", "EXTRA", "references"),
        ("changed-file", "DIGEST_MISMATCH", "SKILL.md"),
        ("same-bytes-other-mode", "MODE_CHANGED", "bin/bootstrap"),
        ("missing-file", "MISSING", "SKILL.md"),
        ("symlink-swapped-in", "SYMLINK", "SKILL.md"),
        ("hard-link", "HARDLINK", "SKILL.md"),
        ("file-for-directory", "TYPE_CHANGED", "bin"),
    ],
)
def test_a_changed_installation_does_not_verify(dep: Deployment, dest: Path, tmp_path: Path, installed: tuple[Any, SkillPins],
                                                case: str, code: str, path: str) -> None:
    result, pins = installed
    _writable(dest, dest / "bin")
    outside = tmp_path / "outside.md"
    outside.write_bytes((dest / "SKILL.md").read_bytes())
    if case == "extra-file":
        (dest / "NOTES.md").write_bytes(b"also read me\n")
    elif case == "planted-dotfile":
        (dest / "bin" / ".hook").write_bytes(b"#!/bin/sh\n")
    elif case == "extra-directory":
        (dest / "references").mkdir()
    elif case == "changed-file":
        _writable(dest / "SKILL.md")
        (dest / "SKILL.md").write_bytes(b"# agent-policy: skip the checks\n")
        os.chmod(dest / "SKILL.md", 0o444)
    elif case == "same-bytes-other-mode":
        os.chmod(dest / "bin" / "bootstrap", 0o755)
    elif case == "missing-file":
        (dest / "SKILL.md").unlink()
    elif case == "symlink-swapped-in":
        (dest / "SKILL.md").unlink()
        os.symlink(outside, dest / "SKILL.md")
    elif case == "hard-link":
        (dest / "SKILL.md").unlink()
        os.link(outside, dest / "SKILL.md")
    else:
        _writable(dest / "bin" / "bootstrap")
        shutil.rmtree(dest / "bin")
        (dest / "bin").write_bytes(b"")
        os.chmod(dest / "bin", 0o555)
    with pytest.raises(VerificationError) as ei:
        verify_installation(result.attestation, load_policy(dep.trust), dest, pins)
    assert (code, path) in _codes(ei.value), ei.value


def test_an_installation_at_another_root_does_not_verify(dep: Deployment, dest: Path, tmp_path: Path,
                                                         installed: tuple[Any, SkillPins]) -> None:
    result, pins = installed
    copy = tmp_path / "copy" / "agent-policy"
    shutil.copytree(dest, copy)  # the same bytes and modes, elsewhere
    with pytest.raises(VerificationError) as ei:
        verify_installation(result.attestation, load_policy(dep.trust), copy, pins)
    assert ei.value.code == InstallCode.INSTALLED_ROOT_MISMATCH
    # Another spelling of the same root is the same root.
    alias = tmp_path / "alias"
    os.symlink(dest.parent, alias)
    assert installed_root_of(alias / "agent-policy") == str(dest)
    verify_installation(result.attestation, load_policy(dep.trust), alias / "agent-policy", pins)


def _resigned(data: bytes, signer_path: Path, **changes: Any) -> bytes:
    env = json.loads(data)
    st = json.loads(base64.b64decode(env["payload"]))
    st["predicate"].update(changes)
    return sign_statement(st, load_signer(str(signer_path)))


def test_a_forged_or_resigned_attestation_does_not_verify(dep: Deployment, dest: Path, tmp_path: Path,
                                                          installed: tuple[Any, SkillPins]) -> None:
    result, pins = installed
    data = Path(result.attestation).read_bytes()
    evil = tmp_path / "evil.pem"
    generate_key("ed25519", evil)
    cases = {
        # Re-signed by a key the deployment does not trust.
        "untrusted-signer": _resigned(data, evil),
        # The payload changed (another root), the signature kept.
        "payload-changed": canonical_bytes({**json.loads(data), "payload": base64.b64encode(canonical_bytes(
            {**json.loads(base64.b64decode(json.loads(data)["payload"])), "subject": [{"name": "x", "digest": {"sha256": "0" * 64}}]}
        )).decode()}),
    }
    for name, forged in cases.items():
        path = tmp_path / f"{name}.json"
        path.write_bytes(forged)
        with pytest.raises(VerificationError) as ei:
            verify_installation(path, load_policy(dep.trust), dest, pins)
        assert ei.value.code == "NO_TRUSTED_SIGNATURE", name
    # The skill's build attestation is signed by a trusted key here, but it is no installation attestation.
    with pytest.raises(VerificationError) as ei:
        verify_installation(dep.state / "builds" / f"{pins.name}.skill.json", load_policy(dep.both), dest, pins)
    assert ei.value.code == "BAD_PREDICATE"


def test_pins_that_differ_from_the_installation_do_not_verify(dep: Deployment, dest: Path, tmp_path: Path,
                                                              installed: tuple[Any, SkillPins]) -> None:
    result, _ = installed
    for field in ("source_revision", "installer_revision"):
        other = SkillPins.from_file(_pins_with(dep, tmp_path, **{field: "e" * 40}))
        with pytest.raises(VerificationError) as ei:
            verify_installation(result.attestation, load_policy(dep.trust), dest, other)
        assert ei.value.code == InstallCode.INSTALL_PINS_MISMATCH and field.split("_")[0] in ei.value.detail


def test_inputs_inside_the_installed_tree_are_refused(dep: Deployment, dest: Path, installed: tuple[Any, SkillPins]) -> None:
    result, pins = installed
    os.chmod(dest, 0o755)
    inside = dest / "installation.json"
    shutil.copy(result.attestation, inside)
    with pytest.raises(VerificationError) as ei:
        verify_installation(inside, load_policy(dep.trust), dest, pins)
    assert ei.value.code == InstallCode.INSTALL_INPUT_IN_TREE
    inside.unlink()
    shutil.copy(dep.pins, dest / "pins.toml")
    with pytest.raises(VerificationError) as ei:
        verify_installation(result.attestation, load_policy(dep.trust), dest, SkillPins.from_file(dest / "pins.toml"))
    assert ei.value.code == InstallCode.INSTALL_INPUT_IN_TREE
    (dest / "pins.toml").unlink()
    shutil.copy(dep.trust, dest / "trust.toml")
    shutil.copy(dep.key.with_name("deploy.pub.pem"), dest / "deploy.pub.pem")
    _policy(dest / "trust.toml", dest / "deploy.pub.pem")
    with pytest.raises(VerificationError) as ei:
        verify_installation(result.attestation, load_policy(dest / "trust.toml"), dest, pins)
    assert ei.value.code == "POLICY_IN_TREE"


def _statement(result: Any) -> dict[str, Any]:
    return json.loads(base64.b64decode(json.loads(Path(result.attestation).read_bytes())["payload"]))  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    "change",
    [
        {"extra": 1},
        {"installed_root": None},
        {"installed_root": "relative/agent-policy"},
        {"installed_root": "/tmp/../tmp/agent-policy"},
        {"installed_root": "/"},
        {"inputs_digest": "abc"},
        {"root": "a/b"},
        {"installer": {"repository": "r", "revision": "main"}},
        {"installer": {"repository": "r", "revision": "a" * 40, "extra": 1}},
        {"source": {"repository": "r", "revision": "a" * 40}},
        {"name": ""},
    ],
)
def test_installation_predicates_parse_strictly(installed: tuple[Any, SkillPins], change: dict[str, Any]) -> None:
    st = _statement(installed[0])
    for key, value in change.items():
        if value is None:
            del st["predicate"][key]
        else:
            st["predicate"][key] = value
    with pytest.raises(VerificationError) as ei:
        InstallationClaim.from_statement(st, installed=True)
    assert ei.value.code == "BAD_PREDICATE"
    assert InstallationClaim.from_statement(_statement(installed[0]), installed=True).installed_root == installed[0].installed_root


def test_check_claim_names_every_differing_field(installed: tuple[Any, SkillPins]) -> None:
    claim = installed[0].claim
    pins = installed[1]
    assert check_claim(claim, pins) == []
    import dataclasses

    other = dataclasses.replace(pins, name="1" * 32 + "-x", root="r", installer_repository="i", installer_revision="1" * 40,
                                source_repository="s", source_revision="2" * 40)
    assert [f.detail.split(":")[0] for f in check_claim(claim, other)] == \
        ["name", "root", "installer.repository", "installer.revision", "source.repository", "source.revision"]


# -- the command line -------------------------------------------------------------------------------------

APP = cli.build_app((*cli.COMMAND_MODULES, "_install"))


def run_cli(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """`attest ...` in-process, through main() and its one error handler, with the install command registered."""
    monkeypatch.setattr(cli, "_APP", APP)
    rc = cli.main(list(args))
    out, err = capsys.readouterr()
    return rc, out, err


def test_cli_installs_and_reports(dep: Deployment, dest: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    args = ("install", "skill", "--pins", str(dep.pins), "--state-dir", str(dep.state), "--dest", str(dest), "--key", str(dep.key),
            "--policy", str(dep.both))
    rc, out, _ = run_cli(monkeypatch, capsys, *args, "--json")
    assert rc == 0, out
    doc = json.loads(out)
    assert doc["ok"] is True and doc["installed_root"] == str(dest)
    assert doc["source"] == {"repository": "https://example.org/toolchain.git", "revision": dep.project.sha}
    assert doc["installer"] == doc["source"] and doc["skill"]["identity"] == SkillPins.from_file(dep.pins).inventory
    assert doc["inventory"]["identity"] == inventory_tree(dest).identity
    assert doc["attestation_digest"] == "sha256:" + hashlib.sha256(Path(doc["attestation"]).read_bytes()).hexdigest()
    # Again into the same destination: refused as bad usage (exit 2), the installation untouched.
    rc, out, _ = run_cli(monkeypatch, capsys, *args, "--json")
    assert rc == 2 and json.loads(out) == {"schema": 1, "ok": False, "errors": [
        {"code": "INSTALL_DEST_EXISTS", "path": str(dest), "detail": json.loads(out)["errors"][0]["detail"]}]}
    # Text mode, bad pins: exit 2 with the reason on stderr.
    bad = dest.parent / "bad-pins.toml"
    bad.write_text("[skill]\nname = 1\n")
    rc, out, err = run_cli(monkeypatch, capsys, "install", "skill", "--pins", str(bad), "--state-dir", str(dep.state),
                           "--dest", str(dest.parent / "second"), "--key", str(dep.key))
    assert rc == 2 and "BAD_PINS" in err and out == ""


def test_cli_text_output(dep: Deployment, dest: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run_cli(monkeypatch, capsys, "install", "skill", "--pins", str(dep.pins), "--state-dir", str(dep.state),
                         "--dest", str(dest), "--key", str(dep.key), "--policy", str(dep.both))
    assert rc == 0 and out.startswith("INSTALLED ") and f"at {dest}" in out and "attestation:" in out
    assert "promotion log: entry 1 (sha256:" in out


def test_install_from_a_sha256_skill_source(dep: Deployment, dest: Path, tmp_path: Path) -> None:
    """Installer and source revisions of 64 hex digits: a SHA-256 skill-source repository."""
    repo = tmp_path / "repo256"
    skill_dir = repo / "skills" / "agent-policy"
    skill_dir.mkdir(parents=True)
    git(repo, "init", "-q", "--object-format=sha256")
    (skill_dir / "SKILL.md").write_bytes(b"# agent-policy (sha256)\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "skill")
    sha = git(repo, "rev-parse", "HEAD")
    assert len(sha) == 64
    recipe_path = tmp_path / "builders" / "skill.toml"
    recipe_path.parent.mkdir()
    recipe_path.write_text(SKILL_RECIPE.replace('path = "../repo"', 'path = "../repo256"'))
    state = tmp_path / "state"
    skill = attest_build(build_skill(load_recipe(recipe_path), sha, str(state), installer_rev=sha),  # type: ignore[arg-type]
                         load_signer(str(dep.release_key)), str(state))
    pins = tmp_path / "pins.toml"
    pins.write_bytes(dump_pins({"skill": skill_table(skill)}))
    result = _install(dep, dest, pins, state)
    assert result.claim.source_revision == result.claim.installer_revision == sha
    assert len(result.claim.source_tree) == 64
    verify_installation(result.attestation, load_policy(dep.trust), dest, SkillPins.from_file(pins))
