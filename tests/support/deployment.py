"""The review tests' deployment: a real promotion (toolchain repository, lock, runtime build, pins) and its trust.

Built once per test session (and per xdist worker) by the ``dep`` fixture of tests/review/conftest.py; a
promotion costs seconds of real building, and every review test module needs one. Tests must treat it as
read-only: a test that changes pins, trust or the store works on a copy or passes its own (``run(..., pins=)``).
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

from attest.attestation import INSTALLATION_PREDICATE, RUNTIME_PREDICATE, generate_key, load_policy, load_signer
from attest.builder import PROMOTION_PREDICATE, Sandbox, fetch, install_skill, load_lock, load_recipe
from attest.builder._promote import promote
from attest.review.bootstrap import HANDOFF_PREDICATE
from attest.review.procedure import REVIEW_RECORD_PREDICATE
from support.build import RUNTIME_RECIPE, SKILL_RECIPE, make_toolchain_repo, write_lock


@dataclass
class Deployment:
    tmp: Path
    state: Path
    pins: Path
    trust: Path
    key: Path
    release_key: Path
    evil_key: Path
    sha: str


def trust_policy(path: Path, *pubs: Path | tuple[Path, tuple[str, ...]]) -> Path:
    """A trust policy of keys; a (key, predicate types) pair gives that key its roles."""
    def signer(p: Path | tuple[Path, tuple[str, ...]]) -> str:
        key, roles = p if isinstance(p, tuple) else (p, ())
        extra = f"predicates = {json.dumps(list(roles))}\n" if roles else ""
        return f'[[signers]]\nkind = "key"\npublic_key = "{key}"\n{extra}'
    path.write_text("threshold = 1\n" + "".join(signer(p) for p in pubs))
    return path


# The deployment's trust: its own key signs installations and handoffs, the release key runtimes and the promotion log's
# entries; neither stands in for the other.
DEPLOY_ROLES = (INSTALLATION_PREDICATE, HANDOFF_PREDICATE, REVIEW_RECORD_PREDICATE)
RELEASE_ROLES = (RUNTIME_PREDICATE, PROMOTION_PREDICATE)


def make_project(root: Path) -> str:
    """A toolchain project under *root*: its lock and wheels, its git repository (the full SHA returned), its two recipes."""
    wheels = root / "lockfiles" / "wheels"
    wheels.mkdir(parents=True)
    write_lock(root, wheels)
    sha = make_toolchain_repo(root / "repo")
    (root / "builders").mkdir()
    (root / "builders" / "runtime.toml").write_text(RUNTIME_RECIPE)
    (root / "builders" / "skill.toml").write_text(SKILL_RECIPE)
    return sha


def make_deployment(tmp: Path) -> Deployment:
    """Promote a toolchain repository's runtime and skill into pins under *tmp*, with a deployment key and its trust."""
    root = tmp / "proj"
    sha = make_project(root)
    keys = tmp / "keys"
    keys.mkdir()
    generate_key("ed25519", keys / "release.pem")
    generate_key("ed25519", keys / "deploy.pem")
    generate_key("ed25519", keys / "evil.pem")
    release_policy = trust_policy(keys / "release-policy.toml", keys / "release.pub.pem")
    recipe = load_recipe(root / "builders" / "runtime.toml")
    fetch(load_lock(recipe.lock_path), tmp / "cache", lock_path=recipe.lock_path)
    deploy = tmp / "deploy"
    deploy.mkdir()
    pins = deploy / "pins.toml"
    state = tmp / "state"
    promote(toolchain_rev=sha, pins_path=str(pins), signer=load_signer(str(keys / "release.pem")), policy_path=str(release_policy),
            runtime_recipe=recipe, skill_recipe=load_recipe(root / "builders" / "skill.toml"),  # type: ignore[arg-type]
            state=str(state), cache=str(tmp / "cache"), sandbox=Sandbox.establish(allow_unisolated_network=False),
            unsafe_without_rebuilders=True)  # a one-builder deployment fixture (tests/review/test_release_promotion.py: k of n)
    trust = trust_policy(deploy / "trust.toml", (keys / "deploy.pub.pem", DEPLOY_ROLES), (keys / "release.pub.pem", RELEASE_ROLES))
    return Deployment(tmp, state, pins, trust, keys / "deploy.pem", keys / "release.pem", keys / "evil.pem", sha)


def install(dep: Deployment, into: Path) -> tuple[Path, Path]:
    """A fresh installation of the pinned skill under *into*/skills: (installed root, installation attestation)."""
    (into / "skills").mkdir()
    result = install_skill(dep.pins, dep.state, into / "skills" / "agent-policy", load_signer(str(dep.key)),
                           policy=load_policy(dep.trust))
    return Path(result.installed_root), Path(result.attestation)


def unfreeze(tmp: Path) -> None:
    """Clear the immutable flags under *tmp* so the test session can remove it."""
    subprocess.run(["chattr", "-R", "-f", "-i", str(tmp)], check=False, capture_output=True)
