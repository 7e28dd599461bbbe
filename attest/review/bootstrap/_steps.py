"""Steps 1 and 3-8 of `attest bootstrap` (docs/bootstrap.md), one function each, with a pure decision per check.

Each step takes frozen, verified objects and returns the next one; every authority byte read
after step 3 comes from the frozen trusted-base snapshot, through directory descriptors of its
image path (:class:`attest.policy._tree.RepositoryRoot`), never from a worktree.

    >>> skill = establish_skill(att, trust, "/home/ci/.agents/skills/agent-policy", pins, state, backend="immutable")
    >>> authority = read_authority(base)                     # step 4
    >>> runtime = establish_runtime(authority, pins, trust, state)        # step 5
    >>> reproduced = run_managed_check(runtime, base, authority, ImageCheckRunner(state))   # step 6
    >>> paths = check_procedure_paths(base, reproduced)      # step 7
    >>> bundle = freeze_procedure(paths, reproduced, authority, state, backend="immutable")  # step 8
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from ..._digest import sha256_of
from ..._fs import read_bounded
from ..._json import loads_strict
from ..._safefs import O_NEW
from ...attestation import RUNTIME_PREDICATE, tree_inventory, verify_attestation_bytes
from ...errors import AttestError, Finding, VerificationError
from ...freeze import Image, Store, freeze_tree, run_from_images
from ...git import is_full_sha
from ...inventory import Entry, EntryType, Inventory
from ._base import BaseSnapshot, snapshot_base
from ._codes import BootstrapCode
from ._deploy import DeploymentPins

if TYPE_CHECKING:
    from ...attestation import Policy
    from ...builder import VerifiedInstallation
    from ...git import GitRepo
    from ...policy import PolicyConfig, PolicyLock
    from ._identity import Identity

MAX_CHECK_OUTPUT = 16 << 20
MAX_RUNTIME_ATTESTATION = 64 << 20
MAX_PROCEDURE_FILE = 4 << 20


def _raise(findings: Sequence[Finding]) -> None:
    if findings:
        raise VerificationError(findings=findings)


# -- step 1: the bootstrap image --------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BootstrapImage:
    """The installed Skill, authenticated by its installation attestation, frozen and verified after the seal."""

    installation: VerifiedInstallation
    image: Image


def decide_image(image: Image, identity: str, code: BootstrapCode, what: str) -> list[Finding]:
    """The frozen or stored ``image`` must be exactly the attested inventory ``identity`` (pure).

    Raises:
        Nothing: a difference is a returned finding with ``code``.
    """
    if image.identity != identity:
        return [Finding(code, image.path, f"the {what} image is {image.identity}; the attestation names {identity}")]
    return []


def establish_skill(installation: str | os.PathLike[str], policy: Policy, skill_dir: str | os.PathLike[str],
                    pins: DeploymentPins, state_dir: str | os.PathLike[str], *, backend: str | None) -> BootstrapImage:
    """Step 1: ATT verifies under TRUST and equals the pins and DIR; DIR is copied, sealed, and the frozen copy verified.

    Raises:
        VerificationError: the codes of :func:`attest.builder.verify_installation`
            (``INSTALL_INPUT_IN_TREE``, ``INSTALL_PINS_MISMATCH``, ``INSTALLED_ROOT_MISMATCH``, the
            attestation and inventory codes); ``SKILL_IMAGE_MISMATCH``; ``NOT_IN_STORE`` and the
            codes of :func:`attest.freeze.verify_image` for the pinned skill image; those of
            :func:`attest.freeze.freeze_tree`.
        InputError: ``UNREADABLE``, ``TOO_LARGE``, ``UNKNOWN_BACKEND``.
        EnvironmentFailure: ``BACKEND_UNAVAILABLE``, ``STATE_INSECURE``, ``STAGING_FAILED``.
    """
    # lazy: attest.builder, +75 ms to importing review.bootstrap (the merge gate imports it for the host adapter alone)
    from ...builder import installed_root_of, verify_installation
    from ...builder._install import installed_inventory  # lazy: as above

    verified = verify_installation(installation, policy, skill_dir, pins.skill)
    # The installation must be the promoted skill image itself: a signature by any key of TRUST
    # over another tree is not enough (attack review). The pinned image is verified (seal, every
    # byte) and the tree below its root is what the installation must hold.
    pinned = Store(state_dir).get(pins.skill.inventory).inventory
    if pinned is None:
        raise VerificationError(BootstrapCode.SKILL_IMAGE_MISMATCH, "the promoted skill image has no inventory", os.fspath(skill_dir))
    promoted, _ = installed_inventory(pinned, pins.skill.root)
    if promoted.identity != verified.inventory.identity:
        raise VerificationError(BootstrapCode.SKILL_IMAGE_MISMATCH, f"the installation attests {verified.inventory.identity}, "
                                f"not the promoted skill image's tree {promoted.identity}", os.fspath(skill_dir))
    # The writable installation is only a copy source: freeze_tree copies the attested entries
    # into private staging, seals them, and verifies the sealed bytes against the inventory.
    image = freeze_tree(installed_root_of(skill_dir), verified.inventory, state_dir, backend=backend)
    _raise(decide_image(image, verified.inventory.identity, BootstrapCode.SKILL_IMAGE_MISMATCH, "bootstrap"))
    return BootstrapImage(verified, image)


# -- step 3: the trusted-base snapshot ----------------------------------------------------------


def establish_base(repo: GitRepo, identity: Identity, state_dir: str | os.PathLike[str], *, backend: str | None) -> BaseSnapshot:
    """Step 3: :func:`snapshot_base` of the base commit, whose tree must be step 2's.

    Raises:
        VerificationError: ``BASE_SYMLINK``, ``BASE_GITLINK``, ``BASE_TREE_MISMATCH``,
            ``BASE_OBJECT_MISMATCH``, ``SHALLOW_REPOSITORY``, the git layer's object codes and
            the freeze codes.
        InputError: ``NOT_FULL_SHA``, ``UNKNOWN_BACKEND``.
        EnvironmentFailure: ``BACKEND_UNAVAILABLE``, ``STAGING_FAILED``, ``GIT_FAILED``.
    """

    return snapshot_base(repo, identity.base_sha, os.fspath(state_dir), backend=backend, tree=identity.base_tree)


# -- step 4: config and lock ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Authority:
    """The trusted base's ``.agent-policy.yml`` and ``.agent-policy.lock``, parsed from the frozen snapshot."""

    config: PolicyConfig
    lock: PolicyLock

    @property
    def config_sha256(self) -> str:
        return str(self.config.sha256)

    @property
    def lock_sha256(self) -> str:
        return str(self.lock.sha256)


def decide_authority(config: PolicyConfig, lock: PolicyLock) -> list[Finding]:
    """Agreement of config and lock, full SHAs, ``pr-review`` enabled (pure).

    Raises:
        Nothing: the problems are returned (the agreement codes of
        :func:`attest.policy.check_agreement`, ``TOOLCHAIN_NOT_FULL_SHA``, ``PR_REVIEW_NOT_ENABLED``).
    """
    # lazy: attest.policy, +25 ms to importing review.bootstrap (the merge gate imports it for the host adapter alone)
    from ...policy import CONFIG_PATH, LOCK_PATH, PolicyCode, check_agreement
    from ...policy._render import planned_outputs  # lazy: as above

    found = list(check_agreement(config, lock, planned_outputs(config)))
    for where, tc in ((CONFIG_PATH, config.toolchain), (LOCK_PATH, lock.toolchain)):
        if not is_full_sha(tc.revision):
            found.append(Finding(PolicyCode.TOOLCHAIN_NOT_FULL_SHA, where, f"toolchain.revision {tc.revision[:80]!r} is not a full SHA"))
    if not config.pr_review:
        found.append(Finding(BootstrapCode.PR_REVIEW_NOT_ENABLED, CONFIG_PATH,
                             f"skills.enabled is {list(config.skills)}; trusted review needs pr-review there"))
    return found


def read_authority(base: BaseSnapshot) -> Authority:
    """Step 4: both authority files from the frozen snapshot only, both valid, agreeing, pr-review enabled.

    Raises:
        VerificationError: a file missing or reached through a link (the policy layer's path
            codes); the findings of :func:`decide_authority` (``PR_REVIEW_NOT_ENABLED``, ...).
        InputError: the codes of :meth:`attest.policy.PolicyConfig.from_bytes` (``YAML_*``, ...)
            and :meth:`attest.policy.PolicyLock.from_bytes` (``NOT_CANONICAL``, ``BAD_JSON``, ...).
    """
    # lazy: attest.policy, +25 ms to importing review.bootstrap (the merge gate imports it for the host adapter alone)
    from ...policy import CONFIG_PATH, LOCK_PATH, PathRole, PolicyConfig, PolicyLock
    from ...policy._config import MAX_CONFIG_BYTES  # lazy: as above
    from ...policy._lock import MAX_LOCK_BYTES  # lazy: as above
    from ...policy._tree import RepositoryRoot  # lazy: as above

    with RepositoryRoot.open(base.path) as root:
        raw_config = root.read(CONFIG_PATH, PathRole.CONFIG, max_bytes=MAX_CONFIG_BYTES)
        raw_lock = root.read(LOCK_PATH, PathRole.LOCK, max_bytes=MAX_LOCK_BYTES)
    # The configuration first: its problems are reported even when the lock is missing too.
    if isinstance(raw_config, Finding):
        raise VerificationError(findings=[raw_config])
    config = PolicyConfig.from_bytes(raw_config)
    if isinstance(raw_lock, Finding):
        raise VerificationError(findings=[raw_lock])
    lock = PolicyLock.from_bytes(raw_lock)
    _raise(decide_authority(config, lock))
    return Authority(config, lock)


# -- step 5: the runtime image ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RuntimeImage:
    """The lock-selected runtime: its attestation verified under TRUST and equal to the pins, its stored image verified."""

    name: str
    image: Image
    attestation: str
    attestation_digest: str
    signers: tuple[str, ...]

    @property
    def path(self) -> str:
        return self.image.path


def decide_lock_toolchain(lock: PolicyLock, pins: DeploymentPins) -> list[Finding]:
    """The base lock's toolchain repository and revision must be the pinned ones (pure).

    Raises:
        Nothing: a difference is a returned ``LOCK_TOOLCHAIN_NOT_PINNED`` finding.
    """
    # lazy: attest.policy, +25 ms to importing review.bootstrap (the merge gate imports it for the host adapter alone)
    from ...policy import LOCK_PATH

    got = (lock.toolchain.repository, lock.toolchain.revision)
    want = (pins.toolchain_repository, pins.toolchain_revision)
    if got != want:
        return [Finding(BootstrapCode.LOCK_TOOLCHAIN_NOT_PINNED, LOCK_PATH, f"the lock selects {got[0]} at {got[1]}; the deployment "
                        f"pins {want[0]} at {want[1]}")]
    return []


def decide_runtime_claim(statement: Mapping[str, object], inventory_identity: str, pins: DeploymentPins) -> list[Finding]:
    """Every field of a verified runtime statement that differs from the pins (pure).

    Raises:
        Nothing: each difference is a returned ``RUNTIME_PREDICATE_MISMATCH`` finding.
    """
    pred = statement.get("predicate")
    rt = pins.runtime
    if not isinstance(pred, dict):
        return [Finding(BootstrapCode.RUNTIME_PREDICATE_MISMATCH, None, "the runtime predicate is not an object")]

    def field(*keys: str) -> object:
        value: object = pred
        for k in keys:
            value = value.get(k) if isinstance(value, dict) else None
        return value

    subjects = statement.get("subject")
    first = subjects[0] if isinstance(subjects, list) and subjects else None
    checks = (
        ("name", pred.get("name"), rt.name),
        ("subject", first.get("name") if isinstance(first, dict) else None, rt.name),
        ("inventory", inventory_identity, rt.inventory),
        ("toolchain.repository", field("toolchain", "repository"), pins.toolchain_repository),
        ("toolchain.revision", field("toolchain", "revision"), pins.toolchain_revision),
        ("lock.sha256", field("lock", "sha256"), rt.lock_sha256),
        ("interpreter.executable", field("interpreter", "executable"), rt.interpreter),
        ("interpreter.executable_sha256", field("interpreter", "executable_sha256"), rt.interpreter_sha256),
        ("interpreter.version", field("interpreter", "version"), rt.python),
    )
    return [Finding(BootstrapCode.RUNTIME_PREDICATE_MISMATCH, key, f"the runtime attestation says {got!r}; the pins say {want!r}")
            for key, got, want in checks if got != want]


def establish_runtime(authority: Authority, pins: DeploymentPins, policy: Policy, state_dir: str | os.PathLike[str], *,
                      attestation: str | os.PathLike[str] | None = None) -> RuntimeImage:
    """Step 5: lock toolchain == pins; the runtime attestation (pinned bytes) verifies under TRUST and equals the pins; the image verifies.

    ``attestation`` defaults to ``STATE/builds/<pinned runtime name>.runtime.json``, where
    `attest promote` wrote it.

    Raises:
        VerificationError: ``LOCK_TOOLCHAIN_NOT_PINNED``, ``RUNTIME_ATTESTATION_MISSING``,
            ``RUNTIME_ATTESTATION_MISMATCH``, the codes of
            :func:`attest.attestation.verify_attestation_bytes` and of the tree statement,
            ``RUNTIME_PREDICATE_MISMATCH``, ``RUNTIME_IMAGE_MISMATCH``, ``NOT_IN_STORE`` and the
            codes of :func:`attest.freeze.verify_image`.
        InputError: ``UNREADABLE``, ``TOO_LARGE``.
        EnvironmentFailure: ``STATE_INSECURE``, ``STAGING_FAILED``.
    """

    # (a) the repository's lock selects exactly the promoted toolchain.
    _raise(decide_lock_toolchain(authority.lock, pins))
    # (b) the runtime attestation: the pinned bytes, verified under the deployment's trust policy.
    state = os.path.abspath(os.fspath(state_dir))
    path = os.fspath(attestation) if attestation is not None else os.path.join(state, "builds", f"{pins.runtime.name}.runtime.json")
    if not os.path.lexists(path):
        raise VerificationError(BootstrapCode.RUNTIME_ATTESTATION_MISSING, "no runtime attestation of the pinned runtime (promote it "
                                "into this state directory first)", path)
    data = read_bounded(path, what="runtime attestation", max_bytes=MAX_RUNTIME_ATTESTATION)
    digest = sha256_of(data)
    if digest != pins.runtime.attestation:
        raise VerificationError(BootstrapCode.RUNTIME_ATTESTATION_MISMATCH, f"the runtime attestation is {digest}; the pins name "
                                f"{pins.runtime.attestation}", path)
    verified = verify_attestation_bytes(data, policy)
    inventory = tree_inventory(verified.statement, RUNTIME_PREDICATE)
    # (c) toolchain SHA, lock digest and interpreter identity equal the pins.
    _raise(decide_runtime_claim(verified.statement, inventory.identity, pins))
    # (d) the stored runtime image: seal, every byte against its inventory, seal; and it is the attested one.
    image = Store(state).get(inventory.identity)
    _raise(decide_image(image, inventory.identity, BootstrapCode.RUNTIME_IMAGE_MISMATCH, "runtime"))
    return RuntimeImage(pins.runtime.name, image, path, verified.attestation_digest, verified.signers)


# -- step 6: the managed check from the runtime image ---------------------------------------------------


@dataclass(frozen=True, slots=True)
class CheckRun:
    """What running ``attest policy check --json`` produced."""

    exit_code: int
    stdout: bytes


class PolicyCheckRunner(Protocol):
    """Runs the managed check of the frozen ``base`` with the ``runtime`` image's own ``attest``."""

    def __call__(self, runtime: RuntimeImage, base: BaseSnapshot) -> CheckRun: ...


@dataclass(frozen=True, slots=True)
class ImageCheckRunner:
    """The real runner: ``$RUNTIME/bin/attest policy check --root $BASE --json`` through :func:`attest.freeze.run_from_images`.

    Clean environment, isolated Python, no bytecode written, working directory in the base
    snapshot, both images re-checked after the command; standard output captured in a memfd.
    """

    state_dir: str

    def __call__(self, runtime: RuntimeImage, base: BaseSnapshot) -> CheckRun:
        fd = os.memfd_create("attest-policy-check", os.MFD_CLOEXEC)
        try:
            argv = [f"{runtime.path}/bin/attest", "policy", "check", "--root", base.path, "--json"]
            # Both images were taken with Store.get in steps 3 and 5 of this run: exec checks
            # their seals again instead of reading every byte a second time.
            rc = run_from_images(self.state_dir, {"RUNTIME": runtime.image, "BASE": base.image}, argv,
                                 cwd_image="BASE", stdout=fd)
            size = os.fstat(fd).st_size
            if size > MAX_CHECK_OUTPUT:
                return CheckRun(rc, b"")
            os.lseek(fd, 0, os.SEEK_SET)
            out = b"".join(iter(lambda: os.read(fd, 1 << 20), b""))
        finally:
            os.close(fd)
        return CheckRun(rc, out)


@dataclass(frozen=True, slots=True)
class ReproducedOutput:
    """One output the managed check reproduced: path, renderer, context and SHA-256.

    Raises:
        Nothing.
    """

    path: str
    renderer: str
    context: str | None
    sha256: str

    def to_json(self) -> dict[str, object]:
        return {"path": self.path, "renderer": self.renderer, "context": self.context, "sha256": self.sha256}


def decide_check(run: CheckRun, authority: Authority) -> tuple[list[Finding], tuple[ReproducedOutput, ...]]:
    """Judge the managed check's exit status and ``--json`` report against step 4 (pure).

    Raises:
        Nothing: the problems are returned (``CHECK_FAILED`` with the check's own codes,
        ``CHECK_BAD_OUTPUT``, ``CHECK_MISMATCH``).
    """

    try:
        doc: object = loads_strict(run.stdout, what="the managed check's report", max_bytes=MAX_CHECK_OUTPUT, max_depth=8)
    except AttestError:
        doc = None
    if run.exit_code != 0 or not isinstance(doc, dict) or doc.get("ok") is not True:
        found = [Finding(BootstrapCode.CHECK_FAILED, None, f"`attest policy check` from the runtime image exited {run.exit_code}")]
        errors = doc.get("errors") if isinstance(doc, dict) else None
        for e in errors if isinstance(errors, list) else []:
            if isinstance(e, dict) and isinstance(e.get("code"), str):
                path = e.get("path")
                found.append(Finding(e["code"], path if isinstance(path, str) else None, str(e.get("detail", ""))[:1000]))
        if run.exit_code == 0:
            found.append(Finding(BootstrapCode.CHECK_BAD_OUTPUT, None, "the managed check printed no valid --json report"))
        return found, ()
    found = []
    outputs: list[ReproducedOutput] = []
    try:
        config_sha, lock_sha = doc["config"]["sha256"], doc["lock"]["sha256"]
        for o in doc["outputs"]:
            if set(o) != {"path", "renderer", "context", "sha256"}:
                raise TypeError("output fields")
            outputs.append(ReproducedOutput(str(o["path"]), str(o["renderer"]), o["context"], str(o["sha256"])))
    except (KeyError, TypeError) as e:
        return [Finding(BootstrapCode.CHECK_BAD_OUTPUT, None, f"the managed check's report is not the documented shape ({e})")], ()
    if config_sha != authority.config_sha256:
        found.append(Finding(BootstrapCode.CHECK_MISMATCH, ".agent-policy.yml", f"the check read a configuration of SHA-256 {config_sha}; "
                             f"step 4 read {authority.config_sha256}"))
    if lock_sha != authority.lock_sha256:
        found.append(Finding(BootstrapCode.CHECK_MISMATCH, ".agent-policy.lock", f"the check read a lock of SHA-256 {lock_sha}; "
                             f"step 4 read {authority.lock_sha256}"))
    locked = {(o.path, o.renderer, o.context, o.sha256) for o in authority.lock.outputs}
    got = {(o.path, o.renderer, o.context, o.sha256) for o in outputs}
    for item in sorted(locked ^ got, key=lambda t: t[0]):
        side = "the lock lists it, the check did not reproduce it" if item in locked else "the check reproduced it, the lock does not list it"
        found.append(Finding(BootstrapCode.CHECK_MISMATCH, item[0], f"{side} ({item[1]}, sha256 {item[3]})"))
    return found, tuple(outputs)


def run_managed_check(runtime: RuntimeImage, base: BaseSnapshot, authority: Authority,
                      runner: PolicyCheckRunner) -> tuple[ReproducedOutput, ...]:
    """Step 6: the managed check over the frozen base, from the runtime image; its reproduced outputs.

    Raises:
        VerificationError: the findings of :func:`decide_check` (``CHECK_FAILED``,
            ``CHECK_BAD_OUTPUT``, ``CHECK_MISMATCH``).
        AttestError: whatever ``runner`` raises (for :class:`ImageCheckRunner`, the codes of
            :func:`attest.freeze.run_from_images`).
    """
    found, outputs = decide_check(runner(runtime, base), authority)
    _raise(found)
    return outputs


# -- step 7: the procedure paths --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ProcedureFile:
    path: str  # repository-relative, below .agents/skills/pr-review/
    data: bytes

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()


def decide_procedure_paths(paths: Sequence[str], reads: Mapping[str, bytes | Finding],
                           reproduced: Sequence[ReproducedOutput]) -> list[Finding]:
    """SKILL.md and every declared reference: a confined Skill path, a regular file reached through no link, reproduced (pure).

    Raises:
        Nothing: the problems are returned (the policy layer's path codes, the read findings,
        ``PROCEDURE_NOT_REPRODUCED``).
    """
    # lazy: attest.policy, +25 ms to importing review.bootstrap (the merge gate imports it for the host adapter alone)
    from ...policy import PR_REVIEW_SKILL_V1, PathRole, check_authority_path

    by_path = {o.path: o for o in reproduced}
    found: list[Finding] = []
    for path in paths:
        problem = check_authority_path(path, PathRole.SKILL)
        if problem is not None:
            found.append(problem)
            continue
        value = reads.get(path)
        if isinstance(value, Finding):
            found.append(value)
            continue
        if value is None:
            found.append(Finding(BootstrapCode.PROCEDURE_NOT_REPRODUCED, path, "never read from the snapshot"))
            continue
        out = by_path.get(path)
        digest = hashlib.sha256(value).hexdigest()
        if out is None or out.renderer != PR_REVIEW_SKILL_V1:
            found.append(Finding(BootstrapCode.PROCEDURE_NOT_REPRODUCED, path, "not among the pr-review Skill files the managed check reproduced"))
        elif out.sha256 != digest:
            found.append(Finding(BootstrapCode.PROCEDURE_NOT_REPRODUCED, path, f"the snapshot's bytes are {digest}; the check reproduced {out.sha256}"))
    return found


def check_procedure_paths(base: BaseSnapshot, reproduced: Sequence[ReproducedOutput]) -> tuple[ProcedureFile, ...]:
    """Step 7: read SKILL.md and its declared references from the frozen snapshot through descriptors; judge them.

    Raises:
        VerificationError: SKILL.md missing or unsafe (the policy layer's path codes); the
            findings of :func:`decide_procedure_paths` (``PROCEDURE_NOT_REPRODUCED``, ...).
        InputError: ``SKILL_FRONT_MATTER`` and the codes of
            :meth:`attest.policy.SkillFrontMatter.from_bytes`.
    """
    # lazy: attest.policy, +25 ms to importing review.bootstrap (the merge gate imports it for the host adapter alone)
    from ...policy import SKILL_DIR, PathRole, SkillFrontMatter
    from ...policy._tree import RepositoryRoot  # lazy: as above

    skill_md = f"{SKILL_DIR}/SKILL.md"
    with RepositoryRoot.open(base.path) as root:
        first = root.read(skill_md, PathRole.SKILL, max_bytes=MAX_PROCEDURE_FILE)
        if isinstance(first, Finding):
            raise VerificationError(findings=[first])
        front = SkillFrontMatter.from_bytes(first, what=skill_md)
        paths = front.paths()
        reads: dict[str, bytes | Finding] = {skill_md: first}
        for path in paths:
            if path not in reads:
                reads[path] = root.read(path, PathRole.SKILL, max_bytes=MAX_PROCEDURE_FILE)
    _raise(decide_procedure_paths(paths, reads, reproduced))
    return tuple(ProcedureFile(p, reads[p]) for p in paths)  # type: ignore[arg-type]


# -- step 8: the procedure bundle ------------------------------------------------------------------------------


FILE_MODE = 0o444
DIR_MODE = 0o555


def procedure_inventory(files: Sequence[ProcedureFile], reproduced: Sequence[ReproducedOutput], lock: PolicyLock) -> Inventory:
    """The closed inventory the bundle must have: each file (relative to the Skill directory) with its reproduced digest.

    Raises:
        VerificationError: ``BUNDLE_MISMATCH`` when a reproduced digest is not the lock's or
            the file's (pure).
    """
    # lazy: attest.policy, +25 ms to importing review.bootstrap (the merge gate imports it for the host adapter alone)
    from ...policy import SKILL_DIR

    by_path = {o.path: o for o in reproduced}
    found: list[Finding] = []
    entries: dict[str, Entry] = {}
    for f in files:
        out, locked = by_path.get(f.path), lock.output(f.path)
        if out is None or locked is None or out.sha256 != locked.sha256 or out.sha256 != f.sha256:
            found.append(Finding(BootstrapCode.BUNDLE_MISMATCH, f.path, f"reproduced {out.sha256 if out else None}, locked "
                                 f"{locked.sha256 if locked else None}, read {f.sha256}"))
            continue
        rel = f.path.removeprefix(SKILL_DIR + "/")
        parts = rel.split("/")
        for i in range(1, len(parts)):
            d = "/".join(parts[:i])
            entries[d] = Entry(d, EntryType.DIR, DIR_MODE)
        entries[rel] = Entry(rel, EntryType.FILE, FILE_MODE, len(f.data), out.sha256)
    _raise(found)
    return Inventory.from_entries(entries.values())


@dataclass(frozen=True, slots=True)
class ProcedureBundle:
    image: Image
    files: tuple[tuple[str, str], ...]  # (path relative to the Skill directory, sha256)


def freeze_procedure(files: Sequence[ProcedureFile], reproduced: Sequence[ReproducedOutput], authority: Authority,
                     state_dir: str | os.PathLike[str], *, backend: str | None) -> ProcedureBundle:
    """Step 8: copy the procedure files into private staging, freeze, verify the frozen bundle against the reproduced digests.

    Raises:
        VerificationError: ``BUNDLE_MISMATCH``; the codes of :func:`attest.freeze.freeze_tree`.
        InputError: ``UNKNOWN_BACKEND``.
        EnvironmentFailure: ``BACKEND_UNAVAILABLE``, ``STATE_INSECURE``, ``STAGING_FAILED``.
        OSError: writing the staging copy (:func:`bootstrap` reports it as ``BOOTSTRAP_IO``).
    """
    # lazy: attest.policy, +25 ms to importing review.bootstrap (the merge gate imports it for the host adapter alone)
    from ...policy import SKILL_DIR

    expected = procedure_inventory(files, reproduced, authority.lock)
    state = os.path.abspath(os.fspath(state_dir))
    parent = os.path.join(state, "bootstrap-staging")
    os.makedirs(parent, mode=0o700, exist_ok=True)
    staging = tempfile.mkdtemp(prefix="bundle-", dir=parent)  # 0700, ours alone
    try:
        for f in files:
            rel = f.path.removeprefix(SKILL_DIR + "/")
            target = os.path.join(staging, rel)
            os.makedirs(os.path.dirname(target), mode=0o700, exist_ok=True)
            fd = os.open(target, O_NEW, 0o600)
            with os.fdopen(fd, "wb") as out:
                out.write(f.data)
        # The freeze copies into its own staging, seals, and verifies the sealed bytes against ``expected``.
        image = freeze_tree(staging, expected, state, backend=backend)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    _raise(decide_image(image, expected.identity, BootstrapCode.BUNDLE_MISMATCH, "procedure bundle"))
    return ProcedureBundle(image, tuple((e.path, e.sha256) for e in expected.entries if e.sha256 is not None))


__all__ = [
    "Authority",
    "BootstrapImage",
    "CheckRun",
    "ImageCheckRunner",
    "PolicyCheckRunner",
    "ProcedureBundle",
    "ProcedureFile",
    "ReproducedOutput",
    "RuntimeImage",
    "check_procedure_paths",
    "decide_authority",
    "decide_check",
    "decide_image",
    "decide_lock_toolchain",
    "decide_procedure_paths",
    "decide_runtime_claim",
    "establish_base",
    "establish_runtime",
    "establish_skill",
    "freeze_procedure",
    "procedure_inventory",
    "read_authority",
    "run_managed_check",
]
