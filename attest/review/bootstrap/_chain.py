"""Step 9 (the handoff evidence) and :func:`bootstrap`, which runs steps 1-9 in order.

A failure at step N raises :class:`BootstrapError` with ``step = N``; nothing after it runs.

    >>> result = bootstrap(pins="/etc/attest/pins.toml", trust="/etc/attest/trust.toml", state_dir="/var/lib/attest",
    ...                    skill_dir="/home/ci/.agents/skills/agent-policy", installation=att, repo="/srv/git/w.git",
    ...                    host=IdentityFile("identity.json"), key="/etc/attest/deploy.pem", out="handoff.json",
    ...                    backend="immutable")
    >>> result.to_json()["handoff_digest"]
    >>> [(n, name, round(s, 3)) for n, name, s in result.timings]   # each step's wall time (time.monotonic)
"""

from __future__ import annotations

import datetime as _dt
import os
import time as _time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, NotRequired, TypedDict

from ..._digest import sha256_of
from ..._fs import read_bounded, write_atomic
from ...attestation import load_policy, load_signer, sign_statement, signer_key_file, signing_keys, statement, subject
from ...errors import AttestError, CommonCode, EnvironmentFailure, InputError
from ...git import GitRepo, repository_locations
from ..handoff import HANDOFF_PREDICATE, IMAGE_NAMES  # one definition: the reader's (review exec) and the writer's
from ._base import BaseSnapshot
from ._codes import BootstrapCode
from ._deploy import MAX_PINS_BYTES, DeploymentPins, verify_inputs_outside
from ._errors import BootstrapError
from ._identity import HostAdapter, Identity, PullRequestDoc, RepositoryDoc, establish_identity
from ._steps import (
    Authority,
    BootstrapImage,
    ImageCheckRunner,
    PolicyCheckRunner,
    ProcedureBundle,
    ReproducedOutput,
    RuntimeImage,
    check_procedure_paths,
    establish_base,
    establish_runtime,
    establish_skill,
    freeze_procedure,
    read_authority,
    run_managed_check,
)

if TYPE_CHECKING:
    from ...attestation import KeylessSigner, Signer, StatementDoc
    from ...builder._promolog import AcceptedLog
    from ...freeze import Image

STEP_NAMES = ("skill", "identity", "base", "config", "runtime", "check", "paths", "bundle", "evidence")  # docs/bootstrap.md, steps 1-9


@dataclass(frozen=True, slots=True)
class Established:
    """Everything steps 1-8 established, each a frozen, verified object.

    Raises:
        Nothing.
    """

    skill: BootstrapImage
    identity: Identity
    base: BaseSnapshot
    authority: Authority
    runtime: RuntimeImage
    reproduced: tuple[ReproducedOutput, ...]
    bundle: ProcedureBundle

    def images(self) -> dict[str, Image]:
        return {"bootstrap": self.skill.image, "runtime": self.runtime.image, "base": self.base.image, "procedure": self.bundle.image}


def _utc(t: _dt.datetime) -> str:
    if t.tzinfo is None:
        raise InputError(CommonCode.INTERNAL, "the clock must return an aware datetime")
    return t.astimezone(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def handoff_statement(done: Established, time: _dt.datetime) -> StatementDoc:
    """The handoff's in-toto statement (pure): subjects the four images, the predicate of docs/bootstrap.md.

    Raises:
        InputError: ``INTERNAL`` for a naive ``time`` (the clock must be timezone-aware).
    """
    # lazy: attest.policy, +25 ms to importing review.bootstrap (the merge gate imports it for the host adapter alone)
    from ...policy import CONFIG_PATH, LOCK_PATH

    images = done.images()
    claim = done.skill.installation.claim
    host = done.identity.host
    predicate = {
        "repository": host.repository_json(),
        "pull_request": host.pull_request_json(),
        "base": {"commit": done.base.commit, "tree": done.base.tree, "object_format": done.base.object_format},
        "images": {n: {"identity": images[n].identity, "path": images[n].path, "backend": images[n].backend} for n in IMAGE_NAMES},
        "installation": {"attestation_digest": done.skill.installation.attestation_digest, "installed_root": claim.installed_root,
                         "installer": {"repository": claim.installer_repository, "revision": claim.installer_revision},
                         "source": {"repository": claim.source_repository, "revision": claim.source_revision}},
        "runtime": {"name": done.runtime.name, "attestation_digest": done.runtime.attestation_digest},
        "config": {"path": CONFIG_PATH, "sha256": done.authority.config_sha256},
        "lock": {"path": LOCK_PATH, "sha256": done.authority.lock_sha256},
        "toolchain": done.authority.lock.toolchain.to_json(),
        "outputs": [o.to_json() for o in done.reproduced],
        "procedure": {"revision": done.authority.lock.toolchain.revision,
                      "files": [{"path": p, "sha256": s} for p, s in done.bundle.files]},
        "time": _utc(time),
    }
    return statement([subject(n, images[n].hex) for n in IMAGE_NAMES], HANDOFF_PREDICATE, predicate)


class ImageDoc(TypedDict):
    """A frozen image in a written document: how to take it from the store again."""

    identity: str
    path: str
    backend: str


class CommitTreeDoc(TypedDict):
    """A commit and its tree (the base of a pull request), full ids."""

    commit: str
    tree: str


class StepTimingDoc(TypedDict):
    """One bootstrap step's wall time: its number, its name of :data:`STEP_NAMES`, seconds."""

    step: int
    name: str
    seconds: float


class BootstrapDoc(TypedDict):
    """``attest bootstrap --json`` (docs/json.md), which its text output reads by key."""

    ok: bool
    handoff: str
    handoff_digest: str
    images: dict[str, ImageDoc]
    repository: RepositoryDoc
    pull_request: PullRequestDoc
    base: CommitTreeDoc
    timings: NotRequired[list[StepTimingDoc]]


@dataclass(frozen=True, slots=True)
class BootstrapResult:
    """What :func:`bootstrap` produced: the signed handoff, its digest, what it established.

    Raises:
        Nothing.
    """

    handoff: str
    handoff_digest: str
    established: Established
    timings: tuple[tuple[int, str, float], ...] = ()  # (step, name of STEP_NAMES, wall seconds), steps 1-9 in order
    promotion_log: AcceptedLog | None = None  # the pins' log as checked and remembered (head None: no log)

    def to_json(self, *, timings: bool = False) -> BootstrapDoc:
        """The documented ``--json`` shape; ``timings=True`` adds ``"timings": [{"step", "name", "seconds"}]``."""
        done = self.established
        images = done.images()
        doc: BootstrapDoc = {
            "ok": True,
            "handoff": self.handoff,
            "handoff_digest": self.handoff_digest,
            "images": {n: {"identity": images[n].identity, "path": images[n].path, "backend": images[n].backend} for n in IMAGE_NAMES},
            "repository": done.identity.host.repository_json(),
            "pull_request": done.identity.host.pull_request_json(),
            "base": {"commit": done.base.commit, "tree": done.base.tree},
        }
        if timings:
            doc["timings"] = [{"step": n, "name": name, "seconds": seconds} for n, name, seconds in self.timings]
        return doc


def write_handoff(done: Established, signer: Signer | KeylessSigner | Sequence[Signer], out: str | os.PathLike[str], time: _dt.datetime, *, fmt: str = "dsse") -> tuple[str, str]:
    """Step 9: sign the handoff statement and write it atomically; return (path, sha256:<hex>).

    Raises:
        InputError: ``INTERNAL`` (a naive ``time``), ``USAGE`` (an unknown ``fmt``),
            ``SIGNING_FAILED`` (the key backend failed), ``BAD_OUTPUT_PATH`` (``out`` cannot be
            written).
    """

    data = sign_statement(handoff_statement(done, time), signer, fmt=fmt)
    path = os.path.abspath(os.fspath(out))
    write_atomic(path, data, mode=0o644, what="handoff")
    return path, sha256_of(data)


def _now() -> _dt.datetime:
    return _dt.datetime.now(_dt.UTC)


class _StepClock:
    """The current step and each finished step's wall time (``time.monotonic``)."""

    def __init__(self) -> None:
        self.step = 1
        self.timings: list[tuple[int, str, float]] = []
        self._start = _time.monotonic()

    def next(self, step: int) -> None:
        """The current step has ended; ``step`` begins."""
        now = _time.monotonic()
        self.timings.append((self.step, STEP_NAMES[self.step - 1], now - self._start))
        self.step, self._start = step, now

    def end(self) -> tuple[tuple[int, str, float], ...]:
        now = _time.monotonic()
        return (*self.timings, (self.step, STEP_NAMES[self.step - 1], now - self._start))


def bootstrap(
    *,
    pins: str | os.PathLike[str],
    trust: str | os.PathLike[str],
    state_dir: str | os.PathLike[str],
    skill_dir: str | os.PathLike[str],
    installation: str | os.PathLike[str],
    repo: str | os.PathLike[str],
    host: HostAdapter,
    key: str | Sequence[str],
    out: str | os.PathLike[str],
    backend: str | None = None,
    clock: Callable[[], _dt.datetime] = _now,
    log_checkpoint: str | None = None,
) -> BootstrapResult:
    """Run steps 1-9 of docs/bootstrap.md in order; raise :class:`BootstrapError` (with ``step``) at the first failure.

    Step 6's managed check always runs the runtime image's own ``bin/attest`` with ``attest exec``
    (:class:`ImageCheckRunner`), and step 5 always reads the pinned runtime attestation from the
    state directory: no caller replaces what runs the check or which runtime is trusted (no
    alternate loader is part of the contract: docs/bootstrap.md "attest bootstrap (steps 1-9)").
    The promotion log beside PINS (when there is one) must verify under TRUST, end at exactly the
    pins read, and continue the checkpoint the state directory remembers for these pins, or
    ``log_checkpoint`` (``SEQ:sha256:HEX``, a first use's); its head is remembered once steps 1-8
    passed. The result's ``timings`` hold each step's wall time.

    Raises:
        BootstrapError: (an ``AttestError`` with the exit code of its cause) carrying ``step``
            and the cause's findings: step 1 ``BAD_PINS`` / ``BAD_RUNTIME_PINS``, the policy's
            codes, ``BOOTSTRAP_INPUT_IN_TREE``, ``BAD_KEY``, the promotion log's codes
            (``PROMOTION_LOG_ROLLBACK``, ``PROMOTION_LOG_FORK``, ``PROMOTION_LOG_PINS_MISMATCH``,
            ``PROMOTION_LOG_BAD_ENTRY``, ...), ``SKILL_IMAGE_MISMATCH``; step 2
            ``BAD_IDENTITY``, ``HOST_READ_FAILED``, ``HOST_MISMATCH``, ``API_TREE_MISMATCH``;
            step 3 ``BASE_*``; step 4 ``PR_REVIEW_NOT_ENABLED`` and the policy codes; step 5
            ``LOCK_TOOLCHAIN_NOT_PINNED``, ``RUNTIME_ATTESTATION_*``, ``RUNTIME_*_MISMATCH``;
            step 6 ``CHECK_FAILED``, ``CHECK_BAD_OUTPUT``, ``CHECK_MISMATCH``; step 7
            ``PROCEDURE_NOT_REPRODUCED``; step 8 ``BUNDLE_MISMATCH``; any step the freeze and
            git layers' codes, and ``BOOTSTRAP_IO`` for an ``OSError``; step 9 also
            ``PROMOTION_LOG_ROLLBACK`` / ``PROMOTION_LOG_FORK`` when another run of this state
            accepted a later entry meanwhile.
    """
    state = os.path.abspath(os.fspath(state_dir))
    return _bootstrap(pins=pins, trust=trust, state_dir=state, skill_dir=skill_dir, installation=installation, repo=repo, host=host,
                      key=key, out=out, backend=backend, clock=clock, log_checkpoint=log_checkpoint, runner=ImageCheckRunner(state))


def _bootstrap(
    *,
    pins: str | os.PathLike[str],
    trust: str | os.PathLike[str],
    state_dir: str | os.PathLike[str],
    skill_dir: str | os.PathLike[str],
    installation: str | os.PathLike[str],
    repo: str | os.PathLike[str],
    host: HostAdapter,
    key: str | Sequence[str],
    out: str | os.PathLike[str],
    runner: PolicyCheckRunner,
    backend: str | None = None,
    clock: Callable[[], _dt.datetime] = _now,
    log_checkpoint: str | None = None,
    runtime_attestation: str | os.PathLike[str] | None = None,
) -> BootstrapResult:
    """:func:`bootstrap` with step 6's ``runner`` (and step 5's attestation file) given.

    Private: the seams of tests (a step-6 report of the test's making; a runtime attestation that
    is not the state directory's), never a library caller's authority.
    """
    # lazy: attest.builder, +75 ms to importing review.bootstrap (the merge gate imports it for the host adapter alone)
    from ...builder._promolog import check_promotion_log, log_path, remember_log

    state = os.path.abspath(os.fspath(state_dir))
    steps = _StepClock()
    try:
        # Step 1: the deployment's inputs lie outside the repository, every image and the installed Skill ...
        pins_name = os.fspath(pins)
        pins_data = read_bounded(pins_name, what="pins file", max_bytes=MAX_PINS_BYTES)  # read once: parsed, and the log's head
        deployment = DeploymentPins.from_bytes(pins_data, pins_name)
        policy = load_policy(trust)
        inputs = {"PINS": deployment.path, "ATT": os.fspath(installation)}
        if os.path.lexists(log_path(pins_name)):
            inputs["PINS.promotions"] = log_path(pins_name)
        identity_path = getattr(host, "path", None)  # the offline adapter's file names the base commit: authority too
        if isinstance(identity_path, str):
            inputs["IDENTITY"] = identity_path
        inputs.update({f"TRUST ({os.path.basename(s)})": s for s in policy.sources})
        keys = [key] if isinstance(key, str) else list(key)
        for i, one in enumerate(keys):
            key_file = signer_key_file(one)
            if key_file is not None:
                inputs["KEY" if len(keys) == 1 else f"KEY {i + 1}"] = key_file
        roots = {f"the repository ({where})": where for where in repository_locations(repo)}
        roots.update({"the installed Skill": os.fspath(skill_dir), "the image store": os.path.join(state, "store")})
        verify_inputs_outside(inputs, roots)
        # Early: a bad key fails before any work, after its placement was judged; several keys sign one envelope.
        loaded = [load_signer(one) for one in keys]
        signer = loaded[0] if len(loaded) == 1 else signing_keys(loaded, "dsse")
        # ... the promotion log: these pins are its head, and no rollback or fork of what this state accepted ...
        log = check_promotion_log(pins_name, pins_data, policy, state, given=log_checkpoint)
        # ... then the bootstrap image.
        skill = establish_skill(installation, policy, skill_dir, deployment, state, backend=backend)
        with GitRepo.open(repo) as git:
            steps.next(2)
            identity = establish_identity(host, git)
            steps.next(3)
            base = establish_base(git, identity, state, backend=backend)
        steps.next(4)
        authority = read_authority(base)
        steps.next(5)
        runtime = establish_runtime(authority, deployment, policy, state, attestation=runtime_attestation)
        steps.next(6)
        reproduced = run_managed_check(runtime, base, authority, runner)
        steps.next(7)
        files = check_procedure_paths(base, reproduced)
        steps.next(8)
        bundle = freeze_procedure(files, reproduced, authority, state, backend=backend)
        steps.next(9)
        # Steps 1-8 verified everything: this state remembers the log's head before any handoff exists.
        remember_log(log, state)
        done = Established(skill, identity, base, authority, runtime, reproduced, bundle)
        path, digest = write_handoff(done, signer, out, clock())
        timings = steps.end()
    except BootstrapError:
        raise
    except AttestError as e:
        raise BootstrapError(steps.step, e) from e
    except OSError as e:  # never a traceback or an empty --json: a failure of this step
        raise BootstrapError(steps.step, EnvironmentFailure(BootstrapCode.BOOTSTRAP_IO, f"{type(e).__name__}: {e}")) from e
    return BootstrapResult(path, digest, done, timings, log)


__all__ = ["HANDOFF_PREDICATE", "IMAGE_NAMES", "STEP_NAMES", "BootstrapResult", "Established", "bootstrap", "handoff_statement", "write_handoff"]
