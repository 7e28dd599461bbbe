"""The end-to-end demonstration (`attest demo`): the one place that shows what the product does.

Runs on embedded defaults: a sample tree written by this module, a local key and a store
under ``state_dir``. Every step calls the same library functions the commands use, and the
demonstration fails (non-zero exit) if any check does not end the way it should: a
tampered copy that verified would be a bug, not a demo.

    >>> run_demo(Path(".attest-state"), print)
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

from .errors import CommonCode, EnvironmentFailure, VerificationError

Say = Callable[[str], None]

SAMPLE = {
    "README.md": b"# sample skill\n\nA tree the demo inventories, signs and freezes.\n",
    "bin/hello": b"#!/usr/bin/env python3\nprint('hello from a frozen image')\n",
    "lib/sample/__init__.py": b"GREETING = 'hello'\n",
    "lib/sample/data.txt": b"some data\n",
}


def write_sample(root: Path) -> Path:
    """(Re)create the sample tree with fixed modes, so its identity is the same everywhere."""
    if root.exists():
        shutil.rmtree(root)
    for rel, data in SAMPLE.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        os.chmod(path, 0o755 if rel.startswith("bin/") else 0o644)
    for d in [root, *{(root / rel).parent for rel in SAMPLE}]:
        os.chmod(d, 0o755)
    return root


def _expect_failure(say: Say, what: str, action: Callable[[], object]) -> None:
    """Run ``action``; it must fail verification. Print the reasons it gave."""
    try:
        action()
    except VerificationError as e:
        say(f"   refused, as it must be ({what}):")
        for f in e.findings[:5]:
            say(f"     {f}")
        return
    raise EnvironmentFailure(CommonCode.INTERNAL, f"{what} was NOT refused; this is a bug")


def step_inventory(state: Path, say: Say) -> None:
    from .inventory import check_tree, inventory_tree

    sample = write_sample(state / "sample")
    say(f"1. inventory the sample tree {sample}")
    inv = inventory_tree(sample)
    say(f"   {len(inv.entries)} entries, identity {inv.identity}")
    copy = state / "sample-tampered"
    if copy.exists():
        shutil.rmtree(copy)
    shutil.copytree(sample, copy)
    data = bytearray((copy / "lib/sample/data.txt").read_bytes())
    data[0] ^= 0x01
    (copy / "lib/sample/data.txt").write_bytes(bytes(data))
    say("2. change one byte in a copy and check the copy against the inventory")

    def check() -> None:
        findings = check_tree(copy, inv)
        if findings:
            raise VerificationError(findings=findings)

    _expect_failure(say, "one changed byte", check)


def demo_key(state: Path) -> tuple[Path, Path]:
    """The demo's local signing key and a trust policy pinning it, both outside every tree."""
    from .attestation import generate_key

    keys = state / "keys"
    keys.mkdir(mode=0o700, exist_ok=True)
    key = keys / "release.pem"
    if not key.exists():
        generate_key("ed25519", key)
    policy = state / "policy.toml"
    policy.write_text('threshold = 1\n\n[[signers]]\nkind = "key"\npublic_key = "keys/release.pub.pem"\n')
    return key, policy


def step_attest(state: Path, say: Say) -> None:
    from .attestation import closed_tree_statement, load_policy, load_signer, sign_statement, verify_tree_attestation
    from .inventory import inventory_tree

    key, policy_path = demo_key(state)
    sample = write_sample(state / "sample")
    say(f"3. sign the sample tree with the local key {key} (in-toto Statement v1 in a Sigstore bundle v0.3)")
    bundle = state / "sample.sigstore.json"
    data = sign_statement(closed_tree_statement("sample", inventory_tree(sample)), load_signer(str(key)), fmt="bundle")
    from ._fs import write_atomic

    write_atomic(bundle, data)
    policy = load_policy(policy_path)
    result = verify_tree_attestation(sample, bundle, policy)
    say(f"4. verify the tree against the attestation under the policy {policy_path}: OK")
    say(f"   signers {', '.join(result.verified.signers)}, attestation {result.verified.attestation_digest}")
    (sample / "lib/sample/data.txt").write_bytes(b"some dat4\n")
    say("5. tamper with the tree and verify again")
    _expect_failure(say, "a tampered tree", lambda: verify_tree_attestation(sample, bundle, policy))
    write_sample(sample)


def _freeze(sample: Path, attestation: Path, policy: object, state: Path, say: Say) -> object:
    """Freeze with the immutable backend; where it cannot be established, say so and use readonly."""
    from .freeze import FreezeCode, freeze_attested

    try:
        return freeze_attested(sample, attestation, policy, state)  # type: ignore[arg-type]
    except EnvironmentFailure as e:
        if e.code != FreezeCode.BACKEND_UNAVAILABLE:
            raise
        say(f"   {e.detail}")
        say("   the demo continues with the 'readonly' backend, which holds only against processes of another user")
        return freeze_attested(sample, attestation, policy, state, backend="readonly")  # type: ignore[arg-type]


def step_freeze(state: Path, say: Say) -> None:
    import sys

    from .attestation import closed_tree_inventory, load_policy, verify_attestation_file
    from .freeze import run_from_images

    sample = write_sample(state / "sample")
    policy = load_policy(state / "policy.toml")
    say("6. freeze: verify the signature, copy the sample into private staging, seal it, verify the frozen bytes, publish")
    image = _freeze(sample, state / "sample.sigstore.json", policy, state, say)
    info = image.to_json()  # type: ignore[attr-defined]
    say(f"   image {info['image']} ({info['backend']} backend{', reused from the store' if info['reused'] else ''})")
    say("7. run a command from the frozen image only (clean environment, no bytecode written into it)")
    script = f"{info['image']}/bin/hello"
    sys.stdout.flush()  # the child writes to the same stdout
    code = run_from_images(state, {"SAMPLE": info["image"]}, [sys.executable, "-I", script])
    if code != 0:
        raise EnvironmentFailure(CommonCode.INTERNAL, f"the command from the image exited {code}")
    try:
        with open(f"{info['image']}/README.md", "ab") as f:
            f.write(b"tamper")
        raise EnvironmentFailure(CommonCode.INTERNAL, "a write into the frozen image succeeded; this is a bug")
    except PermissionError as e:
        say(f"   a write into the image is refused by the kernel: {e.strerror}")
    say("8. release 2 of the sample is signed; its source is tampered with before the freeze")
    from ._fs import write_atomic
    from .attestation import closed_tree_statement, load_signer, sign_statement
    from .inventory import inventory_tree

    v2 = write_sample(state / "sample-v2")
    (v2 / "lib/sample/data.txt").write_bytes(b"release 2 data\n")
    bundle = state / "sample-v2.sigstore.json"
    write_atomic(bundle, sign_statement(closed_tree_statement("sample", inventory_tree(v2)), load_signer(str(state / "keys/release.pem")), fmt="bundle"))
    expected_v2 = closed_tree_inventory(verify_attestation_file(bundle, policy))
    (v2 / "bin/hello").write_bytes(b"#!/usr/bin/env python3\nprint('pwned')\n")
    _expect_failure(say, "a tampered source", lambda: _freeze(v2, bundle, policy, state, say))
    if (state / "store" / expected_v2.digest_hex).exists():
        raise EnvironmentFailure(CommonCode.INTERNAL, "a refused freeze published an image; this is a bug")
    say(f"   nothing was published: the store holds no image {expected_v2.identity}")


def _repository() -> Path | None:
    """The attest repository this package runs from (its recipes and git history), if any."""
    root = Path(__file__).resolve().parent.parent
    if (root / "builders" / "runtime.toml").is_file() and (root / ".git").exists():
        return root
    return None


def _head(repo: Path) -> str:
    import subprocess

    out = subprocess.run(["git", "-C", str(repo), "rev-parse", "--verify", "HEAD^{commit}"], capture_output=True, text=True)
    if out.returncode != 0:
        raise EnvironmentFailure(CommonCode.INTERNAL, f"cannot read the repository's HEAD: {out.stderr.strip()}")
    return out.stdout.strip()


def _rebuild(recipe: Path, sha: str, state: Path, say: Say) -> None:
    from .build import run_rebuild

    report, _ = run_rebuild(str(recipe), sha, str(state))
    if not report.ok:
        raise VerificationError(findings=report.findings)
    say(f"   rebuilt in another staging context: same name {report.second_name}, same inventory {report.second_identity}")


def step_build(state: Path, say: Say, *, offline: bool = False) -> None:
    from .build import run_build_runtime, run_build_skill, run_fetch, run_promote

    repo = _repository()
    if repo is None:
        say("9. builds: skipped, because this attest does not run from its git repository (no builders/ beside it)")
        return
    sha = _head(repo)
    key = str(state / "keys" / "release.pem")
    say(f"9. build the skill from git objects of {repo} at {sha}, freeze and sign it")
    skill = run_build_skill(str(repo / "builders" / "skill.toml"), sha, str(state), key=key)
    say(f"   {'reused' if skill.reused else 'built'} {skill.name}: {len(skill.inventory.entries)} entries, {skill.inventory.identity}")
    _rebuild(repo / "builders" / "skill.toml", sha, state, say)
    if offline:
        say("10. the runtime build, its rebuild check and the promotion: skipped (--offline; the fetch needs the package registry)")
        return
    from .build import BuildCode, Sandbox

    try:
        Sandbox.establish(allow_unisolated_network=False)
    except EnvironmentFailure as e:
        if e.code != BuildCode.NETWORK_NOT_ISOLATED:
            raise
        # Never build unconfined behind the user's back: say why and stop here.
        say(f"10. the runtime build, its rebuild check and the promotion: not run, the build sandbox cannot be established here: {e.detail}")
        return
    lock = repo / "lockfiles" / "pylock.toml"
    say(f"10. fetch the locked wheels of {lock.relative_to(repo)} (the only networked step) and build the runtime offline")
    fetched = run_fetch(str(lock), str(state / "cache"))
    say(f"   fetched {len(fetched.fetched)}, already cached {len(fetched.present)}; every hash checked")
    runtime = run_build_runtime(str(repo / "builders" / "runtime.toml"), sha, str(state), key=key)
    isolated = "in an empty network namespace" if runtime.network_isolated else "WITHOUT network isolation"
    say(f"   {'reused' if runtime.reused else 'built'} {runtime.name} {isolated}: {len(runtime.inventory.entries)} entries")
    _rebuild(repo / "builders" / "runtime.toml", sha, state, say)
    pins = state / "pins.toml"
    say(f"11. promote {sha} into the deployment pins {pins}")
    result = run_promote(
        sha,
        str(pins),
        key,
        str(state / "policy.toml"),
        runtime_recipe=str(repo / "builders" / "runtime.toml"),
        skill_recipe=str(repo / "builders" / "skill.toml"),
        state=str(state),
    )
    for name, old, new in result.changes:
        say(f"   {name}: {old!r} -> {new!r}")
    if not result.changes:
        say("   the pins already name this promotion; nothing changed")


STEPS: list[Callable[[Path, Say], None]] = [step_inventory, step_attest, step_freeze]


def run_demo(state_dir: Path, say: Say, *, offline: bool = False) -> None:
    """Run every step; raises an ``AttestError`` if any step does not end as it must."""
    state = Path(state_dir).absolute()
    state.mkdir(parents=True, exist_ok=True, mode=0o700)
    for step in STEPS:
        step(state, say)
    step_build(state, say, offline=offline)
    say("demo complete: every check ended as it must.")
