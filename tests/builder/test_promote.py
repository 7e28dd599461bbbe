"""Attestations, the rebuild check and promotion, with real keys and policies."""

from __future__ import annotations

import hashlib
import tomllib
from pathlib import Path

import pytest
from support.build import Project, make_toolchain_repo, site_rel

from attest.attestation import generate_key, load_policy, load_signer, verify_attestation_file
from attest.builder import BuildCode, Sandbox, build_runtime, build_skill, fetch, load_lock, load_recipe
from attest.builder._attest import attest_build
from attest.builder._promote import dump_pins, parse_pins, promote
from attest.builder._rebuild import rebuild_check, sign_vsa
from attest.errors import InputError, VerificationError


@pytest.fixture(scope="module")
def sandbox() -> Sandbox:
    return Sandbox.establish(allow_unisolated_network=False)


@pytest.fixture
def keys(tmp_path: Path) -> tuple[Path, Path]:
    key = tmp_path / "keys" / "release.pem"
    key.parent.mkdir()
    generate_key("ed25519", key)
    policy = tmp_path / "keys" / "policy.toml"
    policy.write_text('threshold = 1\n[[signers]]\nkind = "key"\npublic_key = "release.pub.pem"\n')
    return key, policy


def _fetch(p: Project) -> None:
    recipe = load_recipe(p.recipe)
    fetch(load_lock(recipe.lock_path), p.cache, lock_path=recipe.lock_path)


def test_attestations_verify_and_name_the_tree(project: Project, sandbox: Sandbox, keys: tuple[Path, Path]) -> None:
    _fetch(project)
    key, policy_path = keys
    result = build_runtime(load_recipe(project.recipe), project.sha, str(project.store), str(project.cache), sandbox)
    signed = attest_build(result, load_signer(str(key)), str(project.store))
    policy = load_policy(policy_path)
    runtime_st = verify_attestation_file(signed.attestations[0], policy)
    assert runtime_st.predicate_type == "https://attest.dev/runtime/v1"
    pred = runtime_st.statement["predicate"]
    assert pred["toolchain"]["revision"] == project.sha
    assert pred["interpreter"]["executable_sha256"] == result.inputs["interpreter"]["executable_sha256"]
    assert runtime_st.statement["subject"][0]["digest"] == {"sha256": result.inventory.digest_hex}
    prov = verify_attestation_file(signed.attestations[1], policy)
    assert prov.predicate_type == "https://slsa.dev/provenance/v1"
    skill = attest_build(build_skill(load_recipe(project.skill_recipe), project.sha, str(project.store), installer_rev=project.sha),
                         load_signer(str(key)), str(project.store))
    inst = verify_attestation_file(skill.attestations[0], policy)
    assert inst.statement["predicate"]["installer"]["revision"] == project.sha
    assert inst.statement["predicate"]["root"] == "agent-policy"


def test_rebuild_check_passes_and_signs_a_vsa(project: Project, sandbox: Sandbox, keys: tuple[Path, Path], tmp_path: Path) -> None:
    _fetch(project)
    recipe = load_recipe(project.recipe)
    report = rebuild_check(recipe, project.sha, str(project.store), cache=str(project.cache), sandbox=sandbox)
    assert report.ok and report.second_name == report.first.name
    vsa = sign_vsa(report, load_signer(str(keys[0])), str(tmp_path / "vsa.json"))
    verified = verify_attestation_file(vsa, load_policy(keys[1]))
    assert verified.statement["predicate"]["verificationResult"] == "PASSED"
    skill_report = rebuild_check(load_recipe(project.skill_recipe), project.sha, str(project.store), installer_rev=project.sha)
    assert skill_report.ok


def test_rebuild_check_reports_exact_differences(project: Project, sandbox: Sandbox) -> None:
    sha = make_toolchain_repo(project.repo, noisy=True)
    _fetch(project)
    report = rebuild_check(load_recipe(project.recipe), sha, str(project.store), cache=str(project.cache), sandbox=sandbox)
    assert not report.ok
    codes = {(f.code, f.path) for f in report.findings}
    assert ("NOT_REPRODUCIBLE", None) in codes
    noise = f"{site_rel()}/toolchain/_noise.txt"
    assert ("DIGEST_MISMATCH", noise) in codes
    assert noise in report.diffs and report.diffs[noise].startswith(f"--- first/{noise}")
    assert report.to_json()["ok"] is False


def test_promote_updates_pins_atomically(project: Project, sandbox: Sandbox, keys: tuple[Path, Path], tmp_path: Path) -> None:
    _fetch(project)
    unsafe = True  # one builder: k-of-n rebuilds and the fixture run are tests/review/test_release_promotion.py
    pins = tmp_path / "pins.toml"
    pins.write_text('[deployment]\nname = "prod"\nsigners = ["a", "b"]\n')
    result = promote(toolchain_rev=project.sha, pins_path=str(pins), signer=load_signer(str(keys[0])), policy_path=str(keys[1]),
                     runtime_recipe=load_recipe(project.recipe), skill_recipe=load_recipe(project.skill_recipe),  # type: ignore[arg-type]
                     state=str(project.store), cache=str(project.cache), sandbox=sandbox, unsafe_without_rebuilders=unsafe)
    doc = tomllib.loads(pins.read_text())
    assert doc["deployment"] == {"name": "prod", "signers": ["a", "b"]}
    assert doc["toolchain"]["revision"] == project.sha
    assert doc["runtime"]["inventory"] == result.runtime.inventory.identity
    assert doc["runtime"]["attestation"] == "sha256:" + hashlib.sha256(Path(result.runtime.attestations[0]).read_bytes()).hexdigest()
    assert ("toolchain.revision", None, project.sha) in result.changes
    # Promoting the same SHA again changes nothing.
    before = pins.read_bytes()
    again = promote(toolchain_rev=project.sha, pins_path=str(pins), signer=load_signer(str(keys[0])), policy_path=str(keys[1]),
                    runtime_recipe=load_recipe(project.recipe), skill_recipe=load_recipe(project.skill_recipe),  # type: ignore[arg-type]
                    state=str(project.store), cache=str(project.cache), sandbox=sandbox, unsafe_without_rebuilders=unsafe)
    assert again.changes == () and pins.read_bytes() == before
    # The first promotion started the log beside the pins; the second wrote nothing, so it appended nothing.
    assert result.log_entry is not None and again.log_entry is None
    assert sorted(p.name for p in Path(str(pins) + ".promotions").iterdir()) == ["000001.json"]
    assert any("unsafe-without-rebuilders" in n for n in result.notes)


@pytest.mark.parametrize("case", ["short-sha", "branch", "unreproducible", "wrong-signer", "bad-pins", "no-rebuilders-table"])
def test_failed_promotion_leaves_pins_byte_identical(case: str, project: Project, sandbox: Sandbox, keys: tuple[Path, Path],
                                                     tmp_path: Path) -> None:
    _fetch(project)
    pins = tmp_path / "pins.toml"
    original = b'# hand-written\n[toolchain]\nrevision = "old"\n'
    pins.write_bytes(original)
    rev, policy, code, unsafe = project.sha, keys[1], None, True
    if case == "short-sha":
        rev, code = project.sha[:12], "NOT_FULL_SHA"
    elif case == "branch":
        rev, code = "main", "NOT_FULL_SHA"
    elif case == "unreproducible":
        rev, code = make_toolchain_repo(project.repo, noisy=True), BuildCode.PROMOTION_REFUSED
    elif case == "wrong-signer":
        other = tmp_path / "other.pem"
        generate_key("ed25519", other)
        policy = tmp_path / "other-policy.toml"
        policy.write_text('threshold = 1\n[[signers]]\nkind = "key"\npublic_key = "other.pub.pem"\n')
    elif case == "bad-pins":
        original = b'[toolchain]\nrevision = "a"\nrevision = "b"\n'
        pins.write_bytes(original)
        code = BuildCode.BAD_PINS
    elif case == "no-rebuilders-table":
        unsafe, code = False, "REBUILDERS_NOT_CONFIGURED"
    with pytest.raises((InputError, VerificationError)) as ei:
        promote(toolchain_rev=rev, pins_path=str(pins), signer=load_signer(str(keys[0])), policy_path=str(policy),
                runtime_recipe=load_recipe(project.recipe), skill_recipe=load_recipe(project.skill_recipe),  # type: ignore[arg-type]
                state=str(project.store), cache=str(project.cache), sandbox=sandbox, unsafe_without_rebuilders=unsafe)
    if code is not None:
        assert ei.value.code == code
    assert pins.read_bytes() == original and not Path(str(pins) + ".promotions").exists()


@pytest.mark.parametrize("case", ["no-rebuilders-table", "no-rebuild-result"])
def test_promotion_refuses_what_the_release_policy_decides_before_building(case: str, project: Project, sandbox: Sandbox,
                                                                           keys: tuple[Path, Path], tmp_path: Path) -> None:
    """Nothing is fetched, so any build would fail NOT_IN_CACHE: the policy's refusal must come first, with nothing built."""
    key, policy = keys
    code = "REBUILDERS_NOT_CONFIGURED"
    if case == "no-rebuild-result":
        rebuilder = tmp_path / "keys" / "rebuilder.pem"
        generate_key("ed25519", rebuilder)
        ident = "key:sha256:" + load_signer(str(rebuilder)).key_id
        policy.write_text(policy.read_text() + '[[signers]]\nkind = "key"\npublic_key = "rebuilder.pub.pem"\n'
                          f'predicates = ["https://attest.dev/rebuild/v1"]\n[rebuilders]\nthreshold = 1\nidentities = ["{ident}"]\n')
        code = "REBUILDERS_THRESHOLD_NOT_MET"
    pins = tmp_path / "pins.toml"
    with pytest.raises(VerificationError) as ei:
        promote(toolchain_rev=project.sha, pins_path=str(pins), signer=load_signer(str(key)), policy_path=str(policy),
                runtime_recipe=load_recipe(project.recipe), skill_recipe=load_recipe(project.skill_recipe),  # type: ignore[arg-type]
                state=str(project.store), cache=str(project.cache), sandbox=sandbox)
    assert ei.value.code == code, [str(f) for f in ei.value.findings]
    assert not pins.exists() and not (project.store / "builds").exists() and not project.cache.exists()


def test_pins_writer_round_trips() -> None:
    doc = {"a": {"b": "x\"y", "n": 3, "l": ["p", "q"], "c": {"d": True}}, "top": "v", "e": {}}
    assert tomllib.loads(dump_pins(doc).decode()) == doc
    assert parse_pins(None, "p") == {}
