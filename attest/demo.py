"""The end-to-end demonstration (`attest demo`): the one place that shows what the product does.

Runs on embedded defaults: a sample tree written by this module, a local key and a store
under ``state_dir``. Every step calls the same library functions the commands use, and the
demonstration fails (non-zero exit) if any check does not end the way it should: a
tampered copy that verified would be a bug, not a demo.

    >>> run_demo(Path(".attest-state"), print)
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ._fs import write_atomic
from ._plural import count
from ._safefs import O_DIR, remove_tree
from .attestation import (
    CLOSED_TREE_PREDICATE,
    INSTALLATION_PREDICATE,
    RUNTIME_PREDICATE,
    closed_tree_inventory,
    closed_tree_statement,
    generate_key,
    load_policy,
    load_signer,
    sign_statement,
    verify_attestation_file,
    verify_tree_attestation,
)
from .builder import (
    PROMOTION_PREDICATE,
    REBUILD_PREDICATE,
    RELEASE_POLICY_EXTENSIONS,
    BuildCode,
    Sandbox,
    install_skill,
    log_path,
    run_build_runtime,
    run_build_skill,
    run_fetch,
    run_rebuild,
    verify_promotion_log,
)
from .errors import CommonCode, EnvironmentFailure, Finding, InputError, VerificationError
from .freeze import BACKEND_ENV, FreezeCode, freeze_attested, get_backend, resolve_backend, run_from_images
from .inventory import check_tree, inventory_tree
from .policy import generate_policy
from .review.bootstrap import IMAGE_NAMES, BootstrapError, DeploymentPins, IdentityFile, bootstrap
from .review.handoff import HANDOFF_PREDICATE
from .review.merge import CI_RESULT_PREDICATE, ci_result_predicate, merge_gate_check, sign_ci_result
from .review.procedure import REVIEW_RECORD_PREDICATE, recheck_review, review_start, run_review, serialize_review
from .review.release import promote_release

if TYPE_CHECKING:
    from .attestation import Policy, Signer
    from .builder import BuildResult, RebuildReport
    from .review.bootstrap import BootstrapResult
    from .review.merge import MergeGate
    from .review.procedure import Serialized

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

    sample = write_sample(state / "sample")
    say(f"1. inventory the sample tree {sample}")
    inv = inventory_tree(sample)
    say(f"   {count(len(inv.entries), 'entry')}, identity {inv.identity}")
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

    keys = state / "keys"
    keys.mkdir(mode=0o700, exist_ok=True)
    key = keys / "release.pem"
    if not key.exists():
        generate_key("ed25519", key)
    policy = state / "policy.toml"
    policy.write_text('threshold = 1\n\n[[signers]]\nkind = "key"\npublic_key = "keys/release.pub.pem"\n')
    return key, policy


def step_attest(state: Path, say: Say) -> None:

    key, policy_path = demo_key(state)
    sample = write_sample(state / "sample")
    say(f"3. sign the sample tree with the local key {key} (in-toto Statement v1 in a Sigstore bundle v0.3)")
    bundle = state / "sample.sigstore.json"
    data = sign_statement(closed_tree_statement("sample", inventory_tree(sample)), load_signer(str(key)), fmt="bundle")

    write_atomic(bundle, data)
    policy = load_policy(policy_path)
    result = verify_tree_attestation(sample, bundle, policy)
    say(f"4. verify the tree against the attestation under the policy {policy_path}: OK")
    say(f"   signers {', '.join(result.verified.signers)}, attestation {result.verified.attestation_digest}")
    (sample / "lib/sample/data.txt").write_bytes(b"some dat4\n")
    say("5. tamper with the tree and verify again")
    _expect_failure(say, "a tampered tree", lambda: verify_tree_attestation(sample, bundle, policy))
    write_sample(sample)


def demo_backend(state: Path) -> tuple[str, str | None]:
    """The backend every image of this demo is frozen with, and why it is not ``immutable`` (None when it is).

    ``$ATTEST_BACKEND`` when set; else ``immutable`` where this user can set the flag in the
    state directory, else ``readonly``. Chosen once for the whole demo, so that every step and a
    second run find their images under the backend they were stored with (a fallback per step
    met ``STORE_CONFLICT`` on the second run).
    """


    chosen = resolve_backend(None)
    if chosen != "immutable":
        return chosen, f"${BACKEND_ENV} chooses it"
    fd = os.open(state, os.O_RDONLY | os.O_DIRECTORY)
    try:
        get_backend(chosen).probe(fd, str(state))
    except EnvironmentFailure as e:
        if e.code != FreezeCode.BACKEND_UNAVAILABLE:
            raise
        return "readonly", e.detail
    finally:
        os.close(fd)
    return chosen, None


def _freeze(sample: Path, attestation: Path, policy: object, state: Path) -> object:

    return freeze_attested(sample, attestation, policy, state, backend=demo_backend(state)[0])  # type: ignore[arg-type]


def step_freeze(state: Path, say: Say) -> None:


    sample = write_sample(state / "sample")
    policy = load_policy(state / "policy.toml")
    say("6. freeze: verify the signature, copy the sample into private staging, seal it, verify the frozen bytes, publish")
    backend, why = demo_backend(state)
    if why is not None:
        say(f"   {why}: every image of the demo is frozen with the {backend!r} backend, which holds against "
            "processes of other users only (docs/freeze.md)")
    image = _freeze(sample, state / "sample.sigstore.json", policy, state)
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

    v2 = write_sample(state / "sample-v2")
    (v2 / "lib/sample/data.txt").write_bytes(b"release 2 data\n")
    bundle = state / "sample-v2.sigstore.json"
    write_atomic(bundle, sign_statement(closed_tree_statement("sample", inventory_tree(v2)), load_signer(str(state / "keys/release.pem")), fmt="bundle"))
    expected_v2 = closed_tree_inventory(verify_attestation_file(bundle, policy))
    (v2 / "bin/hello").write_bytes(b"#!/usr/bin/env python3\nprint('pwned')\n")
    _expect_failure(say, "a tampered source", lambda: _freeze(v2, bundle, policy, state))
    if (state / "store" / expected_v2.digest_hex).exists():
        raise EnvironmentFailure(CommonCode.INTERNAL, "a refused freeze published an image; this is a bug")
    say(f"   nothing was published: the store holds no image {expected_v2.identity}")


def _repository() -> Path | None:
    """The attest repository this package runs from (its recipes and git history), if any."""
    root = Path(__file__).resolve().parent.parent
    if (root / "builders" / "runtime.toml").is_file() and (root / ".git").exists():
        return root
    return None


def enclosing_repository(path: Path) -> Path | None:
    """The top of the git work tree (or repository) ``path`` would lie in, or None (pure but for the lookups)."""
    here = path.absolute().parent if not path.exists() else path.absolute()
    for d in (here, *here.parents):
        if (d / ".git").exists() or ((d / "HEAD").is_file() and (d / "objects").is_dir() and (d / "refs").is_dir()):
            return d
    return None


def check_default_state(state: Path) -> Path:
    """``state`` (the demo's default), unless it lies inside a git repository other than this package's own.

    The demo's images are immutable: a state directory left inside someone's repository is one
    they cannot delete with ``rm -rf``. Given explicitly, ``--state-dir`` is the caller's choice.

    Raises:
        InputError: ``USAGE``, naming the repository and what to pass instead.
    """

    inside = enclosing_repository(state)
    own = _repository()
    if inside is not None and (own is None or inside.resolve() != own.resolve()):
        raise InputError(CommonCode.USAGE, f"the default state directory {state.absolute()} lies inside the git repository "
                         f"{inside}: the demo's images are immutable, and that repository would keep an undeletable "
                         ".attest-state/; run it elsewhere or give --state-dir DIR", str(state.absolute()))
    return state


def _head(repo: Path) -> str:

    out = subprocess.run(["git", "-C", str(repo), "rev-parse", "--verify", "HEAD^{commit}"], capture_output=True, text=True)
    if out.returncode != 0:
        raise EnvironmentFailure(CommonCode.INTERNAL, f"cannot read the repository's HEAD: {out.stderr.strip()}")
    return out.stdout.strip()


def _rebuild(recipe: Path, sha: str, state: Path, say: Say) -> None:

    report, _ = run_rebuild(str(recipe), sha, str(state))
    _say_rebuilt(report, say)


def _say_rebuilt(report: RebuildReport, say: Say, by: str = "") -> None:
    if not report.ok:
        raise VerificationError(findings=report.findings)
    say(f"   {by}rebuilt in another staging context: same name {report.second_name}, same inventory {report.second_identity}")


def step_build(state: Path, say: Say, *, offline: bool = False) -> tuple[str, str] | None:
    """Build, rebuild-check and promote; return the promoted SHA and the backend its images were frozen with, or None."""

    repo = _repository()
    if repo is None:
        say("9. builds: skipped, because this attest does not run from its git repository (no builders/ beside it)")
        return None
    sha = _head(repo)
    key = str(state / "keys" / "release.pem")
    say(f"9. build the skill from git objects of {repo} at {sha}, freeze and sign it")
    backend = demo_backend(state)[0]  # the one the freeze of step 6 used
    skill = run_build_skill(str(repo / "builders" / "skill.toml"), sha, str(state), key=key, freeze_backend=backend)
    if backend != "immutable":
        say(f"   the skill is frozen with the {backend!r} backend, as every image of the demo is")
    say(f"   {'reused' if skill.reused else 'built'} {skill.name}: {count(len(skill.inventory.entries), 'entry')}, {skill.inventory.identity}")
    # The promotion (step 11) rebuild-checks the skill and the runtime itself and refuses a difference; its reports are
    # printed there. Only a demo that stops before the promotion runs the skill's rebuild check here (the warm run used
    # to build each of them twice).
    if offline:
        _rebuild(repo / "builders" / "skill.toml", sha, state, say)
        say("10. the runtime build, its rebuild check and the promotion: skipped (--offline; the fetch needs the package registry)")
        return None

    try:
        # Root confines the build steps rootful; anyone else rootless (a user namespace), where the kernel allows it.
        sandbox = Sandbox.establish(allow_unisolated_network=False)
    except EnvironmentFailure as e:
        if e.code != BuildCode.NETWORK_NOT_ISOLATED:
            raise
        # Never build unconfined behind the user's back: say why and stop here.
        _rebuild(repo / "builders" / "skill.toml", sha, state, say)
        say(f"10. the runtime build, its rebuild check and the promotion: not run, the build sandbox cannot be established here: {e.detail}")
        return None
    lock = repo / "lockfiles" / "pylock.toml"
    say(f"10. fetch the locked wheels of {lock.relative_to(repo)} (the only networked step) and build the runtime offline")
    fetched = run_fetch(str(lock), str(state / "cache"))
    say(f"   fetched {len(fetched.fetched)}, already cached {len(fetched.present)}; every hash checked")
    runtime = run_build_runtime(str(repo / "builders" / "runtime.toml"), sha, str(state), key=key, freeze_backend=backend)
    if backend != "immutable":
        say(f"   the runtime is frozen with the {backend!r} backend, as every image of the demo is")
    isolated = "in an empty network namespace" if runtime.network_isolated else "WITHOUT network isolation"
    say(f"   {'reused' if runtime.reused else 'built'} {runtime.name} {isolated}: {count(len(runtime.inventory.entries), 'entry')}")
    g = runtime.details.get("sandbox") or sandbox.guarantees()
    say(f"   confinement: {g.get('confinement', sandbox.confinement)} ({', '.join(g.get('namespaces', []))} namespaces; "
        f"uid {g.get('uid')}; capabilities {g.get('capabilities')})")
    pins = state / "pins.toml"
    if _verified_promotion(state, sha, runtime, skill, say):
        return sha, backend
    say(f"11. promote {sha} into the deployment pins {pins}: two independent rebuilders, each in a store of its own, rebuild it")
    say("   and sign rebuild results; the candidate is bootstrapped and reviewed on the fixture consumer before the pins are written")
    results = demo_rebuilders(state, repo, sha, say, backend)

    result = promote_release(sha, str(pins), key, str(demo_release_policy(state)), runtime_recipe=str(repo / "builders" / "runtime.toml"),
                             skill_recipe=str(repo / "builders" / "skill.toml"), state=str(state), rebuild_results=results,
                             fixture=str(repo / "builders" / "fixture-consumer"), backend=backend)
    for report in result.rebuilds:  # the promotion refuses a failed check; _say_rebuilt would too
        _say_rebuilt(report, say, by=f"the promotion's rebuild check: the {report.kind} ")
    for line in result.summary_lines()[1:]:
        say(f"  {line}")
    return sha, backend


def _verified_promotion(state: Path, sha: str, runtime: BuildResult, skill: BuildResult, say: Say) -> bool:
    """Whether this state's pins already promote ``sha`` with exactly these two builds, by a verified log; say so.

    A second run of the demo reuses its first promotion instead of promoting again (a promotion
    rebuilds the runtime from nothing to check it: 10-15 s of a warm run). Nothing
    unverified is reused: the whole log verifies under the release policy (every entry's
    signature, the chain, the head naming the pins' current bytes), and its head names this
    revision and exactly the runtime and skill just reused from the store (each verified there).
    A log that does not verify is an error, never a reason to promote again; pins of another
    revision or other builds are promoted as on a first run. ``attest promote`` itself always
    rebuild-checks.
    """

    pins = state / "pins.toml"
    if not (pins.exists() and os.path.isdir(log_path(pins))):
        return False
    log = verify_promotion_log(str(pins), load_policy(demo_release_policy(state), extensions=RELEASE_POLICY_EXTENSIONS))
    head = log.entries[-1]
    record = head.predicate
    built = {"runtime": runtime, "skill": skill}
    if head.toolchain_revision != sha or any(
            not isinstance(record.get(kind), dict) or record[kind].get("name") != b.name
            or record[kind].get("inventory") != b.inventory.identity for kind, b in built.items()):
        return False
    rebuilders = record.get("rebuilders") or {}
    fixture = record.get("fixture") or {}
    say(f"11. {sha} is already promoted into {pins}: the promotion log verifies under the release policy (each entry's")
    say(f"   signature, the chain, the pins' bytes); its entry {head.sequence} names this revision, the runtime {runtime.name}")
    say(f"   and the skill {skill.name} just reused, {len(rebuilders.get('agreed', []))} of {rebuilders.get('threshold')} "
        "rebuilders agreeing and the promotion's own rebuild checks passed;")
    say(f"   fixture: {str(fixture.get('summary', 'not recorded'))[:200]}")
    say("   (promoting again would rebuild both from nothing; `attest promote` always does)")
    return True


REBUILDERS = ("rebuilder-a", "rebuilder-b")


def demo_release_policy(state: Path) -> Path:
    """The release policy: the release key, and two rebuilders of which both must agree (``[rebuilders]``, k = n = 2)."""

    keys = state / "keys"
    text = 'threshold = 1\n\n[[signers]]\nkind = "key"\npublic_key = "keys/release.pub.pem"\n'
    ids = []
    for name in REBUILDERS:
        text += f'\n[[signers]]\nkind = "key"\npublic_key = "keys/{name}.pub.pem"\npredicates = ["{REBUILD_PREDICATE}"]\n'
        ids.append("key:sha256:" + load_signer(str(keys / f"{name}.pem")).key_id)

    text += f"\n[rebuilders]\nthreshold = {len(ids)}\nidentities = {json.dumps(ids)}\n"  # a JSON array of strings is TOML
    policy = state / "release-policy.toml"
    policy.write_text(text)
    return policy


def demo_rebuilders(state: Path, repo: Path, sha: str, say: Say, backend: str = "immutable") -> list[str]:
    """Each demo rebuilder builds the candidate in its own state directory and signs a rebuild result; return the results.

    The rebuilders are independent machines in a real release; here each is its own process (``attest rebuild-release``,
    its own state directory, the shared wheel cache only read), and they run side by side: on two cores the demo's
    first run waits for one rebuild instead of two.
    """
    (state / "rebuilds").mkdir(mode=0o700, exist_ok=True)
    started: list[tuple[str, subprocess.Popen[bytes], Path]] = []
    try:
        for name in REBUILDERS:
            key = state / "keys" / f"{name}.pem"
            if not key.exists():
                generate_key("ed25519", key)
            log = state / "rebuilds" / f"{name}.log"  # its --json document (stdout) and anything it says on stderr
            with open(log, "wb") as f:
                argv = [sys.executable, "-m", "attest", "rebuild-release", "--toolchain-rev", sha, "--key", str(key),
                        "-o", str(state / "rebuilds" / f"{name}.json"), "--runtime-recipe", str(repo / "builders" / "runtime.toml"),
                        "--skill-recipe", str(repo / "builders" / "skill.toml"), "--state-dir", str(state / name),
                        "--cache", str(state / "cache"), "--backend", backend, "--json"]
                started.append((name, subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=f, stderr=subprocess.STDOUT), log))
        return [_rebuilt(name, proc.wait(), log, say) for name, proc, log in started]
    finally:
        for _, proc, _ in started:  # an interrupted or failed demo leaves no rebuilder running
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def _rebuilt(name: str, rc: int, log: Path, say: Say) -> str:
    """Say what rebuilder ``name`` did (its ``--json`` document in ``log``); raise its own errors if it failed."""
    text = log.read_text(encoding="utf-8", errors="replace")
    doc: object = None
    for line in text.splitlines():
        if line.startswith("{"):
            try:
                doc = json.loads(line)
            except ValueError:
                doc = None  # not its document: what it printed is reported below
            break
    if rc != 0 or not isinstance(doc, dict) or doc.get("ok") is not True:
        errors = doc.get("errors") if isinstance(doc, dict) else None
        findings = [Finding(str(e.get("code")), e.get("path"), str(e.get("detail"))) for e in errors or [] if isinstance(e, dict)]
        raise VerificationError(findings=findings or [Finding(CommonCode.INTERNAL, str(log), f"{name} exited {rc}: {text[-2000:]}")])
    runtime, skill = doc["runtime"], doc["skill"]
    verb = "reused its own earlier build" if runtime["reused"] else "rebuilt"
    say(f"   {name} {verb}: runtime {runtime['identity'][:19]}…, skill {skill['identity'][:19]}…; signed {doc['output']}")
    return str(doc["output"])


# -- the trusted review chain: install, a consumer repository, `attest bootstrap` ------------------------

CONSUMER_MODULES = {
    "policy/core/evidence.md": b"# Evidence\n\nEvery finding cites the changed line.\n",
    "policy/review/findings.md": b"# Findings\n\nA blocking finding names its cause.\n",
}
_GIT_DATE = "2026-01-01T00:00:00Z"  # fixed authors and dates: the same commits (and base images) on every run


def consumer_config(repository: str, revision: str, *, skills: str = "[pr-review]") -> str:
    """The consumer's ``.agent-policy.yml``: the promoted toolchain, pr-review, one review context, two outputs."""
    return (f"schema: 2\ntoolchain:\n  repository: {repository}\n  revision: {revision}\nskills:\n  enabled: {skills}\n"
            "contexts:\n  review:\n    modules: [policy/core/evidence.md, policy/review/findings.md]\n"
            "outputs:\n  - {path: docs/review/policy-context.md, renderer: policy-context-md, context: review, enabled: true}\n"
            "  - {path: docs/review/github-review.json, renderer: github-review-json-adapter-v1, context: review, enabled: true}\n")


def _git(repo: Path, *args: str) -> str:

    env = {"PATH": os.environ.get("PATH", os.defpath), "HOME": str(repo), "LC_ALL": "C", "GIT_CONFIG_NOSYSTEM": "1",
           "GIT_CONFIG_GLOBAL": os.devnull, "GIT_AUTHOR_NAME": "attest demo", "GIT_AUTHOR_EMAIL": "demo@attest.invalid",
           "GIT_COMMITTER_NAME": "attest demo", "GIT_COMMITTER_EMAIL": "demo@attest.invalid",
           "GIT_AUTHOR_DATE": _GIT_DATE, "GIT_COMMITTER_DATE": _GIT_DATE}
    out = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, env=env)
    if out.returncode != 0:
        raise EnvironmentFailure(CommonCode.INTERNAL, f"git {' '.join(args)} failed in {repo}: {out.stderr.strip()}")
    return out.stdout.strip()


CALC_BASE = "def total(prices):\n    return sum(prices)\n"
#: The pull request's planted defect: a changed line the example reviewer must find (its one rule).
CALC_DEFECT = CALC_BASE + "\n\ndef parse_price(text):\n    return eval(text)\n"
CALC_FIXED = CALC_BASE + "\n\ndef parse_price(text):\n    return float(text)\n"
DEFECT_LINE = 6


def make_consumer(path: Path, repository: str, revision: str) -> tuple[str, str]:
    """(Re)create the consumer repository: a generated base commit, then a pull request head; return (base, head).

    The head plants a defect (``eval`` on line 6 of ``src/calc.py``) and rewrites the policy
    (``.agent-policy.yml``, ``policy/review/findings.md``): a blocking finding of the reviewer's
    and two authority changes of attest's.
    """

    if path.exists():
        _remove_tree(path)
    path.mkdir(mode=0o700)
    _git(path, "-c", "init.defaultBranch=main", "init", "-q", "--object-format=sha1")
    for rel, data in CONSUMER_MODULES.items():
        (path / rel).parent.mkdir(parents=True, exist_ok=True)
        (path / rel).write_bytes(data)
    (path / ".agent-policy.yml").write_text(consumer_config(repository, revision))
    (path / "src").mkdir()
    (path / "src" / "calc.py").write_text(CALC_BASE)
    generate_policy(path)
    _git(path, "add", "-A")
    _git(path, "commit", "-qm", "base: the trusted policy, generated")
    base = _git(path, "rev-parse", "HEAD")
    _git(path, "checkout", "-qb", "pr")
    (path / ".agent-policy.yml").write_text(consumer_config(repository, "0" * 40, skills="[]"))
    (path / "policy/review/findings.md").write_bytes(b"# Findings\n\nNothing is blocking.\n")
    (path / "src" / "calc.py").write_text(CALC_DEFECT)
    _git(path, "commit", "-qam", "pull request: parse prices, rewrite the policy")
    head = _git(path, "rev-parse", "HEAD")
    _git(path, "checkout", "-q", "main")
    return base, head


def fix_pull_request(path: Path) -> str:
    """The author's answer to the review: the defect fixed, the policy left as the base has it; return the new head."""
    _git(path, "checkout", "-q", "pr")
    (path / "src" / "calc.py").write_text(CALC_FIXED)
    _git(path, "checkout", "main", "--", ".agent-policy.yml", "policy/review/findings.md")
    _git(path, "commit", "-qam", "pull request: parse prices with float(), keep the base's policy")
    head = _git(path, "rev-parse", "HEAD")
    _git(path, "checkout", "-q", "main")
    return head


def _remove_tree(path: Path) -> None:
    """Remove a tree the demo made (an installed Skill has 0444 files and 0555 directories), through descriptors."""

    fd = os.open(path.parent, O_DIR)
    try:
        remove_tree(fd, path.name)
    finally:
        os.close(fd)


def _identity(path: Path, base: str, head: str) -> Path:

    doc = {"repository": {"id": 4242, "full_name": "acme/widgets"}, "pull_request": {"id": 99001, "number": 7},
           "base": {"sha": base}, "head": {"sha": head}}
    path.write_text(json.dumps(doc, indent=2) + "\n")
    return path


def _expect_refusal_at(say: Say, what: str, step: int, action: Callable[[], object]) -> None:
    """Run ``action``; the bootstrap must refuse it at ``step``. Print the step, the codes and the reasons."""

    try:
        action()
    except BootstrapError as e:
        if e.step != step:
            raise EnvironmentFailure(CommonCode.INTERNAL, f"{what} was refused at step {e.step}, not at step {step}; this is a "
                                     f"bug: {'; '.join(str(f) for f in e.findings[:3])}") from e
        say(f"   refused at step {e.step}, as it must be ({what}): {', '.join(dict.fromkeys(f.code for f in e.findings))}")
        for f in e.findings[:5]:
            say(f"     {str(f)[:240]}")
        return
    raise EnvironmentFailure(CommonCode.INTERNAL, f"{what} was NOT refused; this is a bug")


@dataclass
class Chain:
    """What the chain's steps share: the deployment's files, the consumer, the pull request's identities."""

    state: Path
    say: Say
    backend: str
    pins: Path
    trust: Path
    deploy_key: Path
    skill_dir: Path
    installation: Path
    consumer: Path
    review: Path
    base: str
    head: str

    @property
    def policy(self) -> Policy:

        return load_policy(str(self.trust))

    def signer(self) -> Signer:

        return load_signer(str(self.deploy_key))

    def bootstrap(self, ident: Path) -> BootstrapResult:

        return bootstrap(pins=self.pins, trust=self.trust, state_dir=self.state, skill_dir=self.skill_dir,
                         installation=self.installation, repo=self.consumer, host=IdentityFile(str(ident)),
                         key=str(self.deploy_key), out=self.review / "handoff.json", backend=self.backend)


def demo_trust(state: Path) -> Path:
    """One trust policy, two roles: the deployment key signs installations, handoffs, its reviewer image, review records
    and CI results; the release key runtimes and the promotion log's entries."""

    deployment = [INSTALLATION_PREDICATE, HANDOFF_PREDICATE, CLOSED_TREE_PREDICATE, REVIEW_RECORD_PREDICATE, CI_RESULT_PREDICATE]
    trust = state / "trust.toml"
    listed = ", ".join(f'"{p}"' for p in deployment)
    trust.write_text('threshold = 1\n\n[[signers]]\nkind = "key"\npublic_key = "keys/deploy.pub.pem"\n'
                     f"predicates = [{listed}]\n\n"
                     '[[signers]]\nkind = "key"\npublic_key = "keys/release.pub.pem"\n'
                     f'predicates = ["{RUNTIME_PREDICATE}", "{PROMOTION_PREDICATE}"]\n')
    return trust


def freeze_reviewer(c: Chain) -> tuple[str, Path]:
    """Attest the example reviewer (examples/reviewer) with the deployment key and freeze it; return (identity, attestation)."""

    repo = _repository()
    if repo is None or not (repo / "examples" / "reviewer" / "agent.py").is_file():
        raise EnvironmentFailure(CommonCode.INTERNAL, "the example reviewer (examples/reviewer) is not here")
    source = repo / "examples" / "reviewer"
    attestation = c.review / "reviewer.intoto.json"
    write_atomic(attestation, sign_statement(closed_tree_statement("reviewer", inventory_tree(source)), c.signer()))
    image = freeze_attested(source, attestation, c.policy, c.state, backend=c.backend)
    return image.identity, attestation


def review_once(c: Chain, review: str, reviewer: tuple[str, Path], tag: str) -> Serialized:
    """Run the example reviewer on ``review`` through `attest review agent`, then serialize; return what serialize wrote."""

    command = ["/bin/sh", "-c", 'exec "$ATTEST_IMAGE_REVIEWER/bin/review"']
    ran = run_review(state_dir=c.state, review=review, handoff=c.review / "handoff.json", policy=c.policy, argv=command,
                     out=c.review / f"result-{tag}.json", reviewer=reviewer[0], reviewer_attestation=reviewer[1])
    verdict = "complete" if ran.result.complete else "NOT complete"
    c.say(f"   result: {verdict}, {len(ran.result.findings)} finding(s), {sum(f.blocking for f in ran.result.findings)} blocking "
          f"(confined: network {ran.confinement.network})")
    for f in ran.result.findings:
        c.say(f"     {f.severity} {f.path}:{f.line}: {f.message.splitlines()[0]}")
    done = serialize_review(state_dir=c.state, review=review, result=c.review / f"result-{tag}.json",
                            out=c.review / f"payload-{tag}.json", signer=c.signer(), record=c.review / f"record-{tag}.json")
    c.say(f"   recheck: proceed; serialize: {done.status}, event {done.event}, {done.inline} inline comment(s), "
          f"{done.in_body} in the body")
    c.say(f"   signed review record {done.record_path}")
    return done


def gate(c: Chain, head: str, record: Path, host: Path, tag: str) -> MergeGate:
    """Sign a success CI result for ``head`` and ask the merge gate; say what it decided."""

    ci, _ = sign_ci_result(ci_result_predicate(repository_id=4242, full_name="acme/widgets", head=head, base=c.base,
                                               check="test", conclusion="success", run=f"demo-{tag}"),
                           c.signer(), c.review / f"ci-{tag}.json")
    got = merge_gate_check(record=record, policy=c.policy, host=IdentityFile(str(host)), ci=[ci], required_checks=("test",),
                           state_dir=c.state)
    c.say(f"   merge gate (CI 'test' success for {head[:12]}): {'AUTHORIZED' if got.authorized else 'REFUSED'}")
    for f in got.findings[:6]:  # each whole (the lines wrap at word boundaries), a long one cut between words, marked
        c.say(f"     {f.code}: {textwrap.shorten(str(f.detail), 400, placeholder=' [...]')}")
    return got


def step_chain(state: Path, sha: str, say: Say, backend: str = "immutable") -> None:
    """Install the promoted skill, make a consumer repository with a pull request, review it for real, fix it, merge-gate it."""


    pins = state / "pins.toml"
    deploy_key = state / "keys" / "deploy.pem"
    if not deploy_key.exists():
        generate_key("ed25519", deploy_key)
    trust = demo_trust(state)
    # The installed Skill lies outside the state directory and outside every repository (the installer refuses both).
    outside = Path(tempfile.mkdtemp(prefix="attest-demo-skill-"))
    installation: Path | None = None
    try:
        skill_dir = outside / "agent-policy"
        say(f"12. install the promoted skill into {skill_dir}, signed by the deployment key {deploy_key}")
        installed = install_skill(pins, state, skill_dir, load_signer(str(deploy_key)), policy=load_policy(str(trust)))
        installation = Path(installed.attestation)
        say(f"   {installed.inventory.identity}, installation attestation {installed.attestation_digest}")
        review = state / "review"
        review.mkdir(mode=0o700, exist_ok=True)
        consumer = state / "consumer"
        base, head = make_consumer(consumer, DeploymentPins.from_file(pins).toolchain_repository, sha)
        c = Chain(state, say, backend, pins, trust, deploy_key, skill_dir, installation, consumer, review, base, head)
        say(f"13. consumer repository {consumer}: toolchain {sha[:12]}, `attest policy generate`, base {base[:12]};")
        say(f"   pull request head {head[:12]} adds parse_price() with eval() (src/calc.py line {DEFECT_LINE}) and rewrites")
        say("   .agent-policy.yml and policy/review/findings.md")
        say(f"14. attest bootstrap (trust {trust.name}, offline identity file; the check runs the runtime image's own bin/attest)")
        result = c.bootstrap(_identity(review / "identity.json", base, head))
        doc = result.to_json()
        for name in IMAGE_NAMES:
            say(f"   {name:9} {doc['images'][name]['identity']} ({doc['images'][name]['backend']})")
        say(f"   handoff written: {doc['handoff']} ({doc['handoff_digest']})")
        step_review(c)
    finally:
        _remove_tree(outside)
        if installation is not None and installation.exists():
            installation.unlink()  # it names the temporary root just removed


def step_review(c: Chain) -> None:
    """Steps 15-22: start, the example reviewer, the gate refusing; the fix, refresh, a clean review, the gate authorizing."""

    say = c.say
    say("15. attest review start: the host again, the merge base, the changed surface; bind and retain the projections;")
    say("   freeze the change (head tree, diff, surface, identities, projections) as the fifth image")
    host = _identity(c.review / "identity-review.json", c.base, c.head)  # the host's answer for the review; it moves below
    started = review_start(handoff=c.review / "handoff.json", policy=c.policy, state_dir=c.state, repo=c.consumer,
                           host=IdentityFile(str(host)), semantic="docs/review/policy-context.md",
                           adapter="docs/review/github-review.json")
    assert started.change is not None  # review_start returns its review with the change image frozen
    say(f"   review {started.review}: merge base {started.merge_base[:12]}, {len(started.surface.paths)} changed path(s), "
        f"{len(started.authority)} of them authority changes; change image {started.change.identity}")
    reviewer = freeze_reviewer(c)
    say(f"16. the deployment's reviewer image (examples/reviewer, attested by the deployment key, frozen): {reviewer[0]}")
    say("17. attest review exec --reviewer: `attest review agent` runs the example agent confined, from its frozen image;")
    say("   it reads the change from $ATTEST_IMAGE_CHANGE only")
    first = review_once(c, started.review, reviewer, "1")
    for change in first.authority:
        say(f"     authority: {change.kind:<7} {change.status:<9} {change.path} (attest's own blocking finding)")
    if first.status != "complete" or first.event != "REQUEST_CHANGES" or first.inline != 1:
        raise EnvironmentFailure(CommonCode.INTERNAL, f"the first review is {first.status} ({first.event}, {first.inline} inline), "
                                 "not complete with the planted defect inline; this is a bug")
    say("18. attest merge-gate check: a complete record, and it has blocking findings")
    if gate(c, c.head, Path(first.record_path), host, "1").authorized:
        raise EnvironmentFailure(CommonCode.INTERNAL, "the gate authorized a head with blocking findings; this is a bug")
    fixed = fix_pull_request(c.consumer)
    say(f"19. the author fixes the pull request: head {fixed[:12]} uses float() and keeps the base's policy; recheck")
    _identity(host, c.base, fixed)
    got = recheck_review(state_dir=c.state, review=started.review)
    say(f"   {got.outcome.outcome} ({got.outcome.reason}): review {got.current_review} replaces it, with a change image of its own")
    if got.outcome.outcome != "refresh" or got.current_review is None:
        raise VerificationError(got.outcome.reason, "a moved head must refresh the review")
    say("20. the reviewer again, on the refreshed review")
    second = review_once(c, got.current_review, reviewer, "2")
    if second.status != "complete" or second.blocking or second.authority:
        raise EnvironmentFailure(CommonCode.INTERNAL, f"the fixed pull request's review is {second.status} with {second.blocking} "
                                 "blocking finding(s); this is a bug")
    say("21. attest merge-gate check on the fixed head")
    if not gate(c, fixed, Path(second.record_path), host, "2").authorized:
        raise EnvironmentFailure(CommonCode.INTERNAL, "the gate refused a clean, complete review with CI; this is a bug")
    step_base_moves(c, got.current_review, fixed, host)


def step_base_moves(c: Chain, review: str, head: str, host: Path) -> None:
    """Step 22: one byte of a policy module changes at the base: recheck restarts, a new bootstrap refuses the stale authority."""

    c.say("22. the base changes one byte of policy/core/evidence.md, not regenerated: recheck, then bootstrap again")
    module = c.consumer / "policy/core/evidence.md"
    data = bytearray(module.read_bytes())
    data[2] ^= 0x20  # "# Evidence" -> "# evidence"
    module.write_bytes(bytes(data))
    _git(c.consumer, "commit", "-qam", "base: one module byte changed, outputs not regenerated")
    new_base = _git(c.consumer, "rev-parse", "HEAD")
    _identity(host, new_base, head)
    again = recheck_review(state_dir=c.state, review=review)
    c.say(f"   {again.outcome.outcome} ({again.outcome.reason}): every result of the old root is discarded")
    if again.outcome.outcome != "restart":
        raise VerificationError(again.outcome.reason, "a moved base must restart the review")
    changed = _identity(c.review / "identity-changed.json", new_base, head)
    _expect_refusal_at(c.say, "a stale authority at the base", 6, lambda: c.bootstrap(changed))


STEPS: list[Callable[[Path, Say], None]] = [step_inventory, step_attest, step_freeze]


def run_demo(state_dir: Path, say: Say, *, offline: bool = False) -> None:
    """Run every step; raises an ``AttestError`` if any step does not end as it must."""
    state = Path(state_dir).absolute()
    state.mkdir(parents=True, exist_ok=True, mode=0o700)
    for step in STEPS:
        step(state, say)
    promoted = step_build(state, say, offline=offline)
    if promoted is None:
        why = "--offline; " if offline else ""
        say(f"11. the trusted review chain (install the skill, bootstrap a pull request, hand off): skipped ({why}it needs the "
            "promoted runtime)")
    else:
        step_chain(state, promoted[0], say, promoted[1])
    others = [str(Path(state) / name) for name in REBUILDERS if (Path(state) / name).is_dir()]  # the rebuilders' own stores
    also = f" and the same for {' and '.join(others)}" if others else ""
    say(f"(the store's images are immutable: to remove {state}, run `attest store gc --state-dir {state} --recent 0`{also}, "
        "then remove the directory)")
    say("demo complete: every check ended as it must.")
