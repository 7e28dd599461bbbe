"""A release engineer's round trip: `attest build --key`, then `attest verify` of the image.

Item 12: `attest verify` checks a built image against its runtime or installation
attestation (both carry the closed inventory), not only against closed-tree statements.
Item 16 (tail): a repeated `--key` of `attest build` and `attest install` signs with every
key (one DSSE envelope, one signature per key); `attest bootstrap` refuses several.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from support.build import Project

from attest.attestation import generate_key
from attest.cli import main


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict]:
    rc = main([*args, "--json"])
    out = capsys.readouterr().out.strip().splitlines()
    return rc, json.loads(out[-1]) if out else {}


def _policy(tmp_path: Path, pubs: list[Path], threshold: int = 1) -> Path:
    d = tmp_path / "policy"
    d.mkdir(exist_ok=True)
    path = d / "policy.toml"
    path.write_text(f"threshold = {threshold}\n" + "".join(f'[[signers]]\nkind = "key"\npublic_key = "{p}"\n' for p in pubs))
    return path


@pytest.mark.parametrize("kind", ["runtime", "skill"])
def test_verify_a_built_image_against_its_own_attestation(project: Project, tmp_path: Path, capsys, kind: str) -> None:
    state = str(tmp_path / "state")
    key = tmp_path / "keys" / "release.pem"
    key.parent.mkdir()
    generate_key("ed25519", key)
    if kind == "runtime":
        assert run(capsys, "fetch", "--lock", str(project.lock), "--cache", str(project.cache))[0] == 0
        rc, doc = run(capsys, "build", "runtime", str(project.recipe), "--toolchain-rev", project.sha,
                      "--state-dir", state, "--cache", str(project.cache), "--key", str(key))
    else:
        rc, doc = run(capsys, "build", "skill", str(project.skill_recipe), "--skill-rev", project.sha,
                      "--state-dir", state, "--key", str(key))
    assert rc == 0, doc
    image, predicate = Path(doc["image"]), Path(doc["attestations"][0])
    assert predicate.name.endswith(f".{kind}.json")
    policy = _policy(tmp_path, [key.parent / "release.pub.pem"])
    rc, out = run(capsys, "verify", str(image), "--attestation", str(predicate), "--policy", str(policy))
    assert rc == 0 and out["ok"] is True, out
    assert out["predicate_type"] == f"https://attest.dev/{'runtime' if kind == 'runtime' else 'installation'}/v1"
    # A copy that differs in one file does not match the attested inventory.
    copy = tmp_path / "copy"
    shutil.copytree(image, copy)
    victim = next(p for p in sorted(copy.rglob("*")) if p.is_file())
    victim.chmod(0o644)
    victim.write_bytes(victim.read_bytes() + b"\n")
    rc, out = run(capsys, "verify", str(copy), "--attestation", str(predicate), "--policy", str(policy))
    assert rc == 1 and "DIGEST_MISMATCH" in {e["code"] for e in out["errors"]}
    # Provenance carries no inventory: still refused.
    rc, out = run(capsys, "verify", str(image), "--attestation", str(doc["attestations"][1]), "--policy", str(policy))
    assert rc == 1 and out["errors"][0]["code"] == "BAD_PREDICATE_TYPE"


# --- item 16 (tail): every --key signs ------------------------------------------------------------

def _keys(tmp_path: Path, *names: str) -> list[Path]:
    d = tmp_path / "keys"
    d.mkdir(exist_ok=True)
    out = []
    for n in names:
        generate_key("ed25519" if n.startswith("ed") else "ecdsa-p256", d / f"{n}.pem")
        out.append(d / f"{n}.pem")
    return out


def _pub(key: Path) -> Path:
    return key.with_name(key.name.removesuffix(".pem") + ".pub.pem")


def _signatures(path: str | Path) -> int:
    return len(json.loads(Path(path).read_bytes())["signatures"])


@pytest.mark.parametrize("kind", ["runtime", "skill"])
def test_build_signs_with_every_key(project: Project, tmp_path: Path, capsys, kind: str) -> None:
    state = str(tmp_path / "state")
    alice, bob = _keys(tmp_path, "ed-alice", "ec-bob")
    if kind == "runtime":
        assert run(capsys, "fetch", "--lock", str(project.lock), "--cache", str(project.cache))[0] == 0
        args = ["build", "runtime", str(project.recipe), "--toolchain-rev", project.sha, "--state-dir", state,
                "--cache", str(project.cache)]
    else:
        args = ["build", "skill", str(project.skill_recipe), "--skill-rev", project.sha, "--state-dir", state]
    rc, doc = run(capsys, *args, "--key", str(alice), "--key", str(bob))
    assert rc == 0, doc
    assert [_signatures(a) for a in doc["attestations"]] == [2, 2]  # the predicate and the provenance, both signed twice
    image = str(doc["image"])
    both = _policy(tmp_path, [_pub(alice), _pub(bob)], threshold=2)
    rc, out = run(capsys, "verify", image, "--attestation", doc["attestations"][0], "--policy", str(both))
    assert rc == 0 and len(out["signers"]) == 2, out


@pytest.mark.parametrize(
    ("extra", "code"),
    [(["--format", "bundle"], "USAGE"), ([], "USAGE")],
    ids=["two-keys-in-a-bundle", "the-same-key-twice"],
)
def test_build_key_sets_refused_before_building(project: Project, tmp_path: Path, capsys, extra: list[str], code: str) -> None:
    alice, bob = _keys(tmp_path, "ed-alice", "ec-bob")
    second = bob if extra else alice
    state = tmp_path / "state"
    rc, doc = run(capsys, "build", "skill", str(project.skill_recipe), "--skill-rev", project.sha, "--state-dir", str(state),
                  "--key", str(alice), "--key", str(second), *extra)
    assert rc == 2 and doc["errors"][0]["code"] == code
    assert not (state / "builds").exists()  # refused before anything was built


def test_install_signs_with_every_key(project: Project, tmp_path: Path, capsys) -> None:
    from attest.attestation import load_policy, load_signer, verify_attestation_file
    from attest.builder import build_skill, load_recipe
    from attest.builder._attest import attest_build, file_digest
    from attest.builder._promote import dump_pins

    release, alice, bob = _keys(tmp_path, "ed-release", "ed-alice", "ec-bob")
    state = tmp_path / "state"
    skill = attest_build(build_skill(load_recipe(project.skill_recipe), project.sha, str(state), installer_rev=project.sha),  # type: ignore[arg-type]
                         load_signer(str(release)), str(state))
    s = skill.details["skill"]
    pins = tmp_path / "deploy" / "pins.toml"
    pins.parent.mkdir()
    pins.write_bytes(dump_pins({"skill": {
        "name": skill.name, "inventory": skill.inventory.identity, "root": "agent-policy",
        "source_repository": s["source_repository"], "source_revision": s["source_revision"],
        "installer_repository": s["installer_repository"], "installer_revision": s["installer_revision"],
        "attestation": file_digest(skill.attestations[0]), "provenance": file_digest(skill.attestations[1])}}))
    dest = tmp_path / "skills" / "agent-policy"
    dest.parent.mkdir()
    rc, doc = run(capsys, "install", "skill", "--pins", str(pins), "--state-dir", str(state), "--dest", str(dest),
                  "--key", str(alice), "--key", str(bob))
    assert rc == 0, doc
    attestation = doc["attestation"]
    assert _signatures(attestation) == 2
    verified = verify_attestation_file(attestation, load_policy(_policy(tmp_path, [_pub(alice), _pub(bob)], threshold=2)))
    assert len(verified.signers) == 2
    # The same key twice is refused before anything is copied.
    again = tmp_path / "skills" / "again"
    rc, doc = run(capsys, "install", "skill", "--pins", str(pins), "--state-dir", str(state), "--dest", str(again),
                  "--key", str(alice), "--key", str(alice))
    assert rc == 2 and doc["errors"][0]["code"] == "USAGE" and not again.exists()

