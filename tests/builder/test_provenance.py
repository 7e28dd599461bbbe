"""SLSA provenance of builds names every resolved dependency as SLSA does.

The git dependency (toolchain, skill source, installer) carries a ``gitCommit`` digest; each
wheel carries its SHA-256 and, when the PEP 751 lock names one, its download URI.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from support.build import Project, make_wheel, pylock_text

from attest.attestation import ResourceRef, generate_key, git_dependency, load_policy, load_signer, verify_attestation_file
from attest.builder import Sandbox, build_runtime, build_skill, fetch, load_lock, load_recipe
from attest.builder._attest import attest_build
from attest.errors import InputError

LIBDEP_URL = "https://files.example.org/packages/ab/libdep-1.2-py3-none-any.whl"


@pytest.mark.parametrize(
    ("revision", "ok"),
    [("a" * 40, True), ("b" * 64, True), ("HEAD", False), ("A" * 40, False), ("abc", False), ("", False)],
    ids=["sha1", "sha256", "ref-name", "uppercase", "odd-length", "empty"],
)
def test_git_dependency_carries_git_commit(revision: str, ok: bool) -> None:
    if ok:
        assert git_dependency("https://example.org/t.git", revision, "toolchain").to_json() == {
            "name": "toolchain", "uri": f"git+https://example.org/t.git@{revision}", "digest": {"gitCommit": revision}}
    else:
        with pytest.raises(InputError) as caught:
            git_dependency("https://example.org/t.git", revision, "toolchain")
        assert caught.value.code == "BAD_DIGEST"


@pytest.mark.parametrize(
    ("digest", "require_sha256", "code"),
    [
        ({"gitCommit": "c" * 40}, False, None),
        ({"gitCommit": "c" * 40}, True, "BAD_DIGEST"),      # what is verified keeps needing a sha256
        ({"sha256": "d" * 64}, True, None),
        ({"sha256": "D" * 64}, False, "BAD_DIGEST"),       # a sha256 that is present is still checked
        ({"gitCommit": "xyz"}, False, "BAD_DIGEST"),
    ],
)
def test_resource_digest_sets(digest: dict[str, str], require_sha256: bool, code: str | None) -> None:
    ref = ResourceRef(name="dep", digest=digest, require_sha256=require_sha256)
    if code is None:
        assert ref.to_json()["digest"] == digest
    else:
        with pytest.raises(InputError) as caught:
            ref.to_json()
        assert caught.value.code == code


def _lock_with_urls(project: Project) -> None:
    """The project's lock, its libdep wheel with a download URL beside its local path (fetch uses the path)."""
    tiny = next(project.wheels.glob("tinybackend-*.whl"))
    libdep = next(project.wheels.glob("libdep-*.whl"))
    text = pylock_text([("tinybackend", "1.0", tiny), ("libdep", "1.2", libdep)], project.wheels)
    text = text.replace(f'{{ name = "{libdep.name}", path', f'{{ name = "{libdep.name}", url = "{LIBDEP_URL}", path')
    assert LIBDEP_URL in text
    project.lock.write_text(text)


def _deps(path: str, policy: Path) -> dict[str, dict[str, Any]]:
    verified = verify_attestation_file(path, load_policy(policy))
    assert verified.predicate_type == "https://slsa.dev/provenance/v1"
    return {d["name"]: d for d in verified.statement["predicate"]["buildDefinition"]["resolvedDependencies"]}


@pytest.fixture
def release_key(tmp_path: Path) -> tuple[Any, Path]:
    key = tmp_path / "keys" / "release.pem"
    key.parent.mkdir()
    generate_key("ed25519", key)
    policy = tmp_path / "keys" / "policy.toml"
    policy.write_text('threshold = 1\n[[signers]]\nkind = "key"\npublic_key = "release.pub.pem"\n')
    return load_signer(str(key)), policy


def test_runtime_provenance_names_the_commit_and_the_download_uris(project: Project, release_key: tuple[Any, Path]) -> None:
    signer, policy = release_key
    _lock_with_urls(project)
    recipe = load_recipe(project.recipe)
    fetch(load_lock(recipe.lock_path), project.cache, lock_path=recipe.lock_path)
    result = build_runtime(recipe, project.sha, str(project.store), str(project.cache), Sandbox.establish(allow_unisolated_network=False))
    signed = attest_build(result, signer, str(project.store))
    deps = _deps(signed.attestations[1], policy)
    assert deps["toolchain"] == {"name": "toolchain", "uri": f"git+https://example.org/toolchain.git@{project.sha}",
                                 "digest": {"gitCommit": project.sha}}
    libdep = next(project.wheels.glob("libdep-*.whl"))
    assert deps[libdep.name] == {"name": libdep.name, "uri": LIBDEP_URL, "digest": {"sha256": hashlib.sha256(libdep.read_bytes()).hexdigest()}}
    tiny = next(project.wheels.glob("tinybackend-*.whl"))
    assert "uri" not in deps[tiny.name]  # the lock names only a local path for it
    # The runtime predicate lists the same URL for the wheel.
    runtime = json.loads(verify_attestation_file(signed.attestations[0], load_policy(policy)).payload)
    assert {w["filename"]: w.get("url") for w in runtime["predicate"]["wheels"]} == {libdep.name: LIBDEP_URL}


def test_skill_provenance_names_source_and_installer_commits(project: Project, release_key: tuple[Any, Path]) -> None:
    signer, policy = release_key
    result = build_skill(load_recipe(project.skill_recipe), project.sha, str(project.store), installer_rev=project.sha)
    deps = _deps(attest_build(result, signer, str(project.store)).attestations[1], policy)
    for role in ("source", "installer"):
        assert deps[role]["digest"] == {"gitCommit": project.sha} and deps[role]["uri"].endswith("@" + project.sha)


def test_a_wheel_without_a_lock_url_has_none(tmp_path: Path) -> None:
    """make_wheel / pylock_text locks name paths only: the runtime inputs carry no url then."""
    from attest.builder import select_wheels
    from attest.builder._identity import interpreter_identity

    wheels = tmp_path / "wheels"
    wheels.mkdir()
    w = make_wheel(wheels, "libdep", "1.2", {"libdep/__init__.py": b""})
    lock = tmp_path / "pylock.toml"
    lock.write_text(pylock_text([("libdep", "1.2", w)], wheels))
    (selected,) = select_wheels(load_lock(str(lock)), interpreter_identity(), None)
    assert selected.url is None and "url" not in selected.to_json()
