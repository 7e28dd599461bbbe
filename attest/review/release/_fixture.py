"""The fixture consumer run: the whole bootstrap and review start with a candidate, before its pins are written.

The fixture consumer repository is data shipped in this repository (``builders/fixture-consumer/``,
:func:`load_fixture`): a template of the base commit's ``.agent-policy.yml``, the base commit's other
files and the files a pull request changes. :class:`FixtureRun` is the build layer's
``before_write`` hook of :func:`attest.builder._promote.promote`; given the candidate pins it:

1. writes them, an ephemeral deployment key and a fixture trust policy (the ephemeral key for
   installations and handoffs, the release policy's runtime signers for runtimes) into a
   private temporary directory outside the state directory and every repository;
2. installs the candidate skill there (``attest install skill``);
3. makes the consumer repository from the shipped files: the base commit (config naming the
   candidate toolchain; ``attest policy generate`` run from the candidate runtime image, as the
   consumer's maintainers would with the toolchain they pin: :class:`ImageGenerator`) and a pull
   request head;
4. runs ``attest bootstrap`` (steps 1-9, the managed check from the candidate runtime image's own
   ``bin/attest``) and ``attest review start`` on it;
5. removes the temporary directory, the installation attestation and the review state again
   (the content-addressed base and procedure images stay in the store, as after any bootstrap).

Any failure refuses the promotion (``PROMOTION_FIXTURE_FAILED`` with the failing step's findings).

    >>> hook = FixtureRun(load_fixture("builders/fixture-consumer"), backend="immutable")
    >>> promote(..., before_write=hook)
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import subprocess
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from ..._fs import read_bounded
from ..._json import loads_strict
from ..._safefs import O_DIR, remove_tree
from ...attestation import INSTALLATION_PREDICATE, RUNTIME_PREDICATE, KeySignerSpec, generate_key, load_policy, load_signer
from ...builder import install_skill
from ...errors import AttestError, EnvironmentFailure, Finding, InputError, VerificationError
from ...freeze import resolve_backend, run_from_images
from ...inventory import EntryType, inventory_tree
from .. import bootstrap
from ..bootstrap import STEP_NAMES, BootstrapError, IdentityFile
from ..bootstrap._chain import _bootstrap
from ..handoff import HANDOFF_PREDICATE
from ..procedure import review_start
from ._codes import ReleaseCode

if TYPE_CHECKING:
    from ...attestation import Policy
    from ...builder import BuildResult, PromotionCandidate
    from ..bootstrap import PolicyCheckRunner

TEMPLATE = "agent-policy.yml.in"
PLACEHOLDERS = ("@TOOLCHAIN_REPOSITORY@", "@TOOLCHAIN_REVISION@")
MAX_FIXTURE_FILES = 256
MAX_FIXTURE_FILE_BYTES = 1 << 20
SEMANTIC = "docs/review/policy-context.md"
ADAPTER = "docs/review/github-review.json"
# The host's facts of the fixture pull request (the offline identity file's).
REPOSITORY = {"id": 1, "full_name": "attest-fixture/consumer"}
PULL_REQUEST = {"id": 1, "number": 1}
_GIT_DATE = "2026-01-01T00:00:00Z"  # fixed authors and dates: the same commits for the same candidate
MAX_GENERATE_OUTPUT = 1 << 20


class PolicyGenerator(Protocol):
    """Runs ``attest policy generate`` over ``root`` with the candidate ``runtime`` (a built, frozen image)."""

    def __call__(self, runtime: BuildResult, root: Path) -> None: ...


@dataclass(frozen=True, slots=True)
class ImageGenerator:
    """The real generator: ``$RUNTIME/bin/attest policy generate --root ROOT --json`` through :func:`attest.freeze.run_from_images`.

    Clean environment, isolated Python, the runtime image re-checked after the command;
    standard output captured (bounded) in a memfd for the failure's findings.
    """

    state_dir: str

    def __call__(self, runtime: BuildResult, root: Path) -> None:
        fd = os.memfd_create("attest-policy-generate", os.MFD_CLOEXEC)
        try:
            argv = [f"{runtime.store_path}/bin/attest", "policy", "generate", "--root", str(root), "--json"]
            rc = run_from_images(self.state_dir, {"RUNTIME": runtime.inventory.identity}, argv, stdout=fd)
            os.lseek(fd, 0, os.SEEK_SET)
            out = os.read(fd, MAX_GENERATE_OUTPUT)
        finally:
            os.close(fd)
        if rc == 0:
            return
        try:
            doc: object = loads_strict(out, what="`attest policy generate` output", max_bytes=MAX_GENERATE_OUTPUT, max_depth=8)
        except AttestError:
            doc = None
        errors = doc.get("errors") if isinstance(doc, dict) else None
        found = [Finding(e["code"], e.get("path") if isinstance(e.get("path"), str) else None, str(e.get("detail", ""))[:1000])
                 for e in (errors if isinstance(errors, list) else []) if isinstance(e, dict) and isinstance(e.get("code"), str)]
        raise VerificationError(ReleaseCode.PROMOTION_FIXTURE_FAILED, f"`attest policy generate` from the candidate runtime image "
                                f"exited {rc}", str(root), findings=found)


@dataclass(frozen=True, slots=True)
class FixtureConsumer:
    """The shipped fixture, read once: the config template, the base files and the pull request's files."""

    path: str
    template: str
    base: tuple[tuple[str, bytes, int], ...] = field(repr=False)   # (relative path, bytes, mode)
    head: tuple[tuple[str, bytes, int], ...] = field(repr=False)

    def config(self, repository: str, revision: str) -> str:
        """The base commit's ``.agent-policy.yml`` for a candidate (pure)."""
        return self.template.replace(PLACEHOLDERS[0], repository).replace(PLACEHOLDERS[1], revision)


def _files(root: str, what: str) -> tuple[tuple[str, bytes, int], ...]:
    def bad(detail: str, e: AttestError | None = None) -> InputError:
        return InputError(ReleaseCode.FIXTURE_CONSUMER_BAD, f"the fixture's {what}/ {detail}", root,
                          findings=e.findings if e is not None else ())

    if not os.path.isdir(root):
        raise bad("is missing")
    try:
        inventory = inventory_tree(root)
    except (InputError, VerificationError) as e:
        raise bad("holds something other than regular files and directories", e) from e
    files = [e for e in inventory.entries if e.type is EntryType.FILE]
    if len(files) > MAX_FIXTURE_FILES:
        raise bad(f"holds {len(files)} files; the limit is {MAX_FIXTURE_FILES}")
    out: list[tuple[str, bytes, int]] = []
    for entry in files:
        data = read_bounded(os.path.join(root, entry.path), what="fixture file", max_bytes=MAX_FIXTURE_FILE_BYTES)
        if hashlib.sha256(data).hexdigest() != entry.sha256:
            raise bad(f"changed while it was read ({entry.path})")
        out.append((entry.path, data, 0o755 if entry.mode & 0o100 else 0o644))
    return tuple(out)


def load_fixture(path: str | os.PathLike[str]) -> FixtureConsumer:
    """Read the shipped fixture consumer at ``path`` (``builders/fixture-consumer``) strictly.

    Raises:
        InputError: ``FIXTURE_CONSUMER_BAD`` (the template, ``base/`` or ``head/`` missing; a
            placeholder not exactly once; a link, special file or too many or too large files;
            an ``.agent-policy.yml`` or ``.git`` among the shipped files); ``UNREADABLE``.
    """
    root = os.path.abspath(os.fspath(path))
    template_path = os.path.join(root, TEMPLATE)
    if not os.path.isfile(template_path):
        raise InputError(ReleaseCode.FIXTURE_CONSUMER_BAD, f"the fixture consumer has no {TEMPLATE}", root)
    try:
        template = read_bounded(template_path, what="fixture config template", max_bytes=MAX_FIXTURE_FILE_BYTES).decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(ReleaseCode.FIXTURE_CONSUMER_BAD, f"{TEMPLATE} is not UTF-8", template_path) from e
    for token in PLACEHOLDERS:
        if template.count(token) != 1:
            raise InputError(ReleaseCode.FIXTURE_CONSUMER_BAD, f"{TEMPLATE} must name {token} exactly once", template_path)
    base, head = _files(os.path.join(root, "base"), "base"), _files(os.path.join(root, "head"), "head")
    for rel, _, _ in (*base, *head):
        if rel == ".agent-policy.yml" or rel.split("/")[0].lower() == ".git":
            raise InputError(ReleaseCode.FIXTURE_CONSUMER_BAD, f"{rel}: the config comes from {TEMPLATE}, and a repository is "
                             "made at run time, never shipped", root)
    return FixtureConsumer(root, template, base, head)


def _git(repo: Path, *args: str) -> str:
    env = {"PATH": os.environ.get("PATH", os.defpath), "HOME": str(repo), "LC_ALL": "C", "GIT_CONFIG_NOSYSTEM": "1",
           "GIT_CONFIG_GLOBAL": os.devnull, "GIT_AUTHOR_NAME": "attest fixture", "GIT_AUTHOR_EMAIL": "fixture@attest.invalid",
           "GIT_COMMITTER_NAME": "attest fixture", "GIT_COMMITTER_EMAIL": "fixture@attest.invalid",
           "GIT_AUTHOR_DATE": _GIT_DATE, "GIT_COMMITTER_DATE": _GIT_DATE}
    try:
        out = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, env=env, check=False)
    except OSError as e:
        raise EnvironmentFailure(ReleaseCode.PROMOTION_FIXTURE_FAILED, f"cannot run git: {e.strerror}") from e
    if out.returncode != 0:
        raise EnvironmentFailure(ReleaseCode.PROMOTION_FIXTURE_FAILED, f"git {' '.join(args)} failed: {out.stderr.strip()[:500]}",
                                 str(repo))
    return out.stdout.strip()


def _write(root: Path, files: tuple[tuple[str, bytes, int], ...]) -> None:
    for rel, data, mode in files:
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        os.chmod(target, mode)


def make_consumer(fixture: FixtureConsumer, dest: Path, repository: str, revision: str,
                  generate: Callable[[Path], object]) -> tuple[str, str]:
    """Make the consumer repository at ``dest`` (must not exist): base commit (``generate``d policy), then the pull request head.

    Returns (base, head) commit ids.

    Raises:
        EnvironmentFailure: ``PROMOTION_FIXTURE_FAILED`` (git cannot run or fails).
        AttestError: whatever ``generate`` raises.
    """
    dest.mkdir(mode=0o700)
    _git(dest, "-c", "init.defaultBranch=main", "init", "-q", "--object-format=sha1")
    _write(dest, fixture.base)
    (dest / ".agent-policy.yml").write_text(fixture.config(repository, revision))
    generate(dest)
    _git(dest, "add", "-A")
    _git(dest, "commit", "-qm", "base: the trusted policy, generated")
    base = _git(dest, "rev-parse", "HEAD")
    _git(dest, "checkout", "-qb", "pull-request")
    _write(dest, fixture.head)
    _git(dest, "add", "-A")
    _git(dest, "commit", "-qm", "pull request")
    head = _git(dest, "rev-parse", "HEAD")
    _git(dest, "checkout", "-q", "main")
    return base, head


def _quoted(value: str) -> str:
    return json.dumps(value)  # a TOML basic string: JSON's escapes are TOML's


def fixture_trust(deploy_public: str, release: Policy) -> str:
    """The fixture's trust policy (pure): the ephemeral key signs installations and handoffs, the release signers runtimes.

    Raises:
        Nothing.
    """

    lines = ["threshold = 1", "", "[[signers]]", 'kind = "key"', f"public_key = {_quoted(deploy_public)}",
             f"predicates = [{_quoted(INSTALLATION_PREDICATE)}, {_quoted(HANDOFF_PREDICATE)}]"]
    for spec in release.signers:
        if not spec.may_sign(RUNTIME_PREDICATE):
            continue
        lines += ["", "[[signers]]"]
        if isinstance(spec, KeySignerSpec):
            lines += ['kind = "key"', f"public_key = {_quoted(spec.source)}"]
        else:
            lines += ['kind = "sigstore"', f"identity = {_quoted(spec.identity)}", f"issuer = {_quoted(spec.issuer)}",
                      f"trusted_root = {_quoted(spec.source)}"]
        lines.append(f"predicates = [{_quoted(RUNTIME_PREDICATE)}]")
    return "\n".join(lines) + "\n"


def _now() -> _dt.datetime:
    return _dt.datetime.now(_dt.UTC)


def _remove(path: str) -> None:
    fd = os.open(os.path.dirname(path), O_DIR)
    try:
        remove_tree(fd, os.path.basename(path))
    finally:
        os.close(fd)


@dataclass(frozen=True, slots=True)
class FixtureRun:
    """``before_write`` of a promotion: bootstrap and review start on the fixture consumer with the candidate.

    The base commit's ``attest policy generate`` and step 6's managed check always run the
    candidate runtime image's own ``bin/attest`` (:class:`ImageGenerator`,
    :class:`attest.review.bootstrap.ImageCheckRunner`): no caller replaces them. ``backend`` seals
    the base and procedure images.
    """

    fixture: FixtureConsumer
    backend: str | None = None  # None: $ATTEST_BACKEND, else immutable (attest.freeze.resolve_backend)
    clock: Callable[[], _dt.datetime] = _now

    def __call__(self, candidate: PromotionCandidate) -> Mapping[str, object]:
        """Run steps 1-5 of the module docstring; return what the log entry records.

        Raises:
            VerificationError: ``PROMOTION_FIXTURE_FAILED`` with the failing part's findings
                (the bootstrap's step, review start's codes, the installation's, git's).
        """
        return self._run(candidate, None, None)

    def _run(self, candidate: PromotionCandidate, runner: PolicyCheckRunner | None,
             generator: PolicyGenerator | None) -> Mapping[str, object]:
        state = os.path.abspath(candidate.state)
        facts = candidate.facts
        tmp = tempfile.mkdtemp(prefix="attest-promote-fixture-")
        installation: str | None = None
        review_state: str | None = None
        part = "setup"
        try:
            try:
                root = Path(tmp)
                deploy = root / "deploy"
                deploy.mkdir(mode=0o700)
                pins = deploy / "pins.toml"
                pins.write_bytes(candidate.pins_data)
                key = deploy / "fixture-deploy.pem"
                generate_key("ed25519", key)
                trust = deploy / "trust.toml"
                trust.write_text(fixture_trust(str(deploy / "fixture-deploy.pub.pem"), candidate.policy))
                (root / "skills").mkdir(mode=0o700)
                part = "install the candidate skill"
                installed = install_skill(pins, state, root / "skills" / "agent-policy", load_signer(str(key)))
                installation = installed.attestation
                part = "make the consumer repository"
                consumer = root / "consumer"
                generate = generator if generator is not None else ImageGenerator(state)
                base, head = make_consumer(self.fixture, consumer, facts.toolchain_repository, facts.toolchain_rev,
                                           lambda where: generate(facts.runtime, where))
                identity = deploy / "identity.json"
                identity.write_text(json.dumps({"repository": REPOSITORY, "pull_request": PULL_REQUEST, "base": {"sha": base},
                                                "head": {"sha": head}}))
                part = "bootstrap"
                result = _bootstrap(pins=pins, trust=trust, state_dir=state, skill_dir=installed.installed_root,
                                    installation=installation, repo=consumer, host=IdentityFile(str(identity)), key=str(key),
                                    out=deploy / "handoff.json", backend=self.backend, clock=self.clock, log_checkpoint=None,
                                    # bootstrap.ImageCheckRunner is looked up at call time, as the function-level import did
                                    runner=runner if runner is not None else bootstrap.ImageCheckRunner(state))
                part = "review start"
                start = review_start(handoff=result.handoff, policy=load_policy(trust), state_dir=state, repo=consumer,
                                     host=IdentityFile(str(identity)), semantic=SEMANTIC, adapter=ADAPTER)
                review_state = start.state_path
            except BootstrapError as e:
                raise VerificationError(ReleaseCode.PROMOTION_FIXTURE_FAILED, f"the candidate failed the fixture consumer's bootstrap "
                                        f"at step {e.step} ({STEP_NAMES[e.step - 1]}); the pins and the log are unchanged",
                                        self.fixture.path, findings=e.findings) from e
            except AttestError as e:
                raise VerificationError(ReleaseCode.PROMOTION_FIXTURE_FAILED, f"the candidate failed the fixture consumer's {part}; "
                                        "the pins and the log are unchanged", self.fixture.path, findings=e.findings) from e
            except OSError as e:
                raise VerificationError(ReleaseCode.PROMOTION_FIXTURE_FAILED, f"the fixture consumer's {part} failed: "
                                        f"{type(e).__name__}: {e}", self.fixture.path) from e
        finally:
            for path in (review_state, installation):
                if path is not None:
                    try:
                        os.unlink(path)  # it names the temporary tree removed next
                    except OSError:
                        pass
            try:
                _remove(tmp)
            except OSError as e:  # keep the reason the run failed, if it did; say what is left
                raise EnvironmentFailure(ReleaseCode.PROMOTION_FIXTURE_FAILED, f"cannot remove the fixture's temporary tree: "
                                         f"{e.strerror}; remove it by hand", tmp) from e
        images = result.established.images()
        return {
            "consumer": self.fixture.path,
            "repository": REPOSITORY["full_name"],
            "pull_request": PULL_REQUEST["number"],
            "base": base,
            "head": head,
            "handoff_digest": result.handoff_digest,
            "review": start.review,
            "backend": resolve_backend(self.backend),
            "images": {name: images[name].identity for name in sorted(images)},
            "summary": f"bootstrap (steps 1-9) and review start passed on {os.path.basename(self.fixture.path)} "
                       f"(base {base[:12]}, pull request head {head[:12]}, review {start.review[:12]})",
        }


@dataclass(frozen=True, slots=True)
class _FixtureRunWith:
    """A :class:`FixtureRun` whose generator and step-6 runner are given: private, for tests whose toy runtime has no ``bin/attest``."""

    run: FixtureRun
    runner: PolicyCheckRunner | None = None
    generator: PolicyGenerator | None = None

    def __call__(self, candidate: PromotionCandidate) -> Mapping[str, object]:
        return self.run._run(candidate, self.runner, self.generator)
