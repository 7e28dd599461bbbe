"""Independent rebuilders: the release policy's ``[rebuilders]`` table, signed rebuild results, k of n.

A rebuilder builds the candidate (the runtime and the skill at full SHAs) in a state directory
of its own and signs a **rebuild result** (:func:`rebuild_release`, ``attest rebuild-release``):
an in-toto statement, predicate ``https://attest.dev/rebuild/v1``, whose two subjects are the
runtime and the skill (input-addressed name, inventory digest) and whose predicate holds the
revisions and repositories built, each build's input digest and its closed inventory.

``attest promote`` verifies every result under the rebuilder identities the release policy
names (:func:`verify_rebuild_results`), then decides (:func:`decide_rebuilders`, pure): at least
``threshold`` distinct identities, each counted once however many results or signatures it
gave, whose results name exactly the promoted builds. A trusted result that names other bytes
(or other inputs) for the same candidate is a disagreement: the promotion is refused and a
signed negative result (predicate ``https://attest.dev/rebuild-disagreement/v1``) naming the
first differing inventory entry is written under ``STATE/rebuild-disagreements/``
(:func:`write_disagreement`).

The release policy (the attestation layer's trust policy plus one table)::

    threshold = 1
    [[signers]]                                   # the release key
    kind = "key"
    public_key = "release.pub.pem"
    [[signers]]                                   # one entry per rebuilder
    kind = "key"
    public_key = "rebuilder-a.pub.pem"
    predicates = ["https://attest.dev/rebuild/v1"]
    [rebuilders]
    threshold = 2                                 # k
    identities = ["key:sha256:<a>", "key:sha256:<b>"]   # n: signer ids of entries above

    >>> policy = load_policy("release.toml", extensions=RELEASE_POLICY_EXTENSIONS)
    >>> claims, problems = verify_rebuild_results(["rebuild-a.json"], policy, rebuilders_of(policy))
    >>> verdict = decide_rebuilders(rebuilders_of(policy), claims, candidate, problems=problems)
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from .._digest import sha256_of
from .._fs import read_bounded, write_atomic
from .._plural import count as count_of
from ..attestation import (
    KeylessSigner,
    Policy,
    Signer,
    StatementDoc,
    sign_statement,
    statement,
    subject,
    verify_attestation_bytes,
)
from ..errors import CommonCode, EnvironmentFailure, Finding, InputError, VerificationError
from ..git import is_full_sha, verify_full_sha
from ..inventory import Inventory, diff_inventories
from ._codes import BuildCode
from ._outputs import BuildResult, require_confined
from ._promotion_codes import PromotionCode
from ._recipe import RuntimeRecipe, SkillRecipe
from ._runtime import build_runtime
from ._sandbox import Sandbox
from ._skill import build_skill

REBUILD_PREDICATE = "https://attest.dev/rebuild/v1"
DISAGREEMENT_PREDICATE = "https://attest.dev/rebuild-disagreement/v1"
REBUILDERS_TABLE = "rebuilders"
RELEASE_POLICY_EXTENSIONS = (REBUILDERS_TABLE,)
DISAGREEMENTS_DIR = "rebuild-disagreements"
MAX_REBUILD_RESULTS = 64
MAX_REBUILDERS = 64
MAX_REBUILD_RESULT_BYTES = 64 << 20


# -- the [rebuilders] table ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RebuildersRequirement:
    """k of n: ``threshold`` distinct ``identities`` (signer ids of the release policy) must agree."""

    threshold: int
    identities: tuple[str, ...]

    def to_json(self) -> dict[str, object]:
        return {"threshold": self.threshold, "identities": list(self.identities)}


def parse_rebuilders(raw: object, signer_ids: Sequence[str], where: str) -> RebuildersRequirement:
    """Validate a ``[rebuilders]`` table against the policy's signer ids (pure).

    Raises:
        InputError: ``BAD_REBUILDERS`` (not a table of exactly ``threshold`` and
            ``identities``; identities not a non-empty list of distinct strings, one not a signer
            id of the policy; a threshold that is not an integer from 1 to the number of identities).
    """
    def bad(detail: str) -> InputError:
        return InputError(PromotionCode.BAD_REBUILDERS, f"[rebuilders]: {detail}", where)

    if not isinstance(raw, dict):
        raise bad("must be a table")
    if set(raw) != {"threshold", "identities"}:
        raise bad(f"the table has {sorted(raw)}; it holds exactly 'threshold' and 'identities'")
    identities = raw["identities"]
    if (not isinstance(identities, list) or not identities or len(identities) > MAX_REBUILDERS
            or not all(isinstance(i, str) and i for i in identities)):
        raise bad(f"identities must be a non-empty list of signer ids (at most {MAX_REBUILDERS})")
    if len(set(identities)) != len(identities):
        raise bad("an identity is listed twice (each rebuilder counts once)")
    unknown = [i for i in identities if i not in signer_ids]
    if unknown:
        raise bad(f"{', '.join(repr(i[:100]) for i in unknown)} is not a signer of this policy (its [[signers]] ids: "
                  f"{', '.join(signer_ids)})")
    threshold = raw["threshold"]
    if type(threshold) is not int or not 1 <= threshold <= len(identities):
        raise bad(f"threshold {threshold!r} must be an integer from 1 to the number of identities ({len(identities)})")
    return RebuildersRequirement(threshold, tuple(identities))


def rebuilders_of(policy: Policy) -> RebuildersRequirement | None:
    """The release policy's ``[rebuilders]`` (``None``: the policy has no such table).

    The policy must have been loaded with ``extensions=RELEASE_POLICY_EXTENSIONS``.

    Raises:
        InputError: ``BAD_REBUILDERS`` (see :func:`parse_rebuilders`).
    """
    raw = policy.extensions.get(REBUILDERS_TABLE)
    return None if raw is None else parse_rebuilders(raw, policy.signer_ids, policy.path)


# -- what a rebuild is of, and what it produced ---------------------------------------------------


@dataclass(frozen=True, slots=True)
class RebuiltArtifact:
    """One build as a rebuild result names it: its input-addressed name, input digest and closed inventory."""

    name: str
    inputs_digest: str
    inventory: Inventory = field(hash=False)

    @classmethod
    def of(cls, result: BuildResult) -> RebuiltArtifact:
        return cls(result.name, result.inputs_digest, result.inventory)

    def to_json(self) -> dict[str, object]:
        return {"name": self.name, "inputs_digest": self.inputs_digest, "inventory": self.inventory.to_json()}


def _candidate_json(candidate: Sequence[str]) -> dict[str, object]:
    """A candidate key (:attr:`RebuildSubject.candidate`) as JSON."""
    toolchain_repository, toolchain_revision, source_repository, source_revision, installer_repository, installer_revision = candidate
    return {"toolchain": {"repository": toolchain_repository, "revision": toolchain_revision},
            "skill_source": {"repository": source_repository, "revision": source_revision},
            "installer": {"repository": installer_repository, "revision": installer_revision}}


@dataclass(frozen=True, slots=True)
class RebuildSubject:
    """A candidate (repositories and full SHAs) and the runtime and skill built from it."""

    toolchain_repository: str
    toolchain_revision: str
    skill_source_repository: str
    skill_source_revision: str
    installer_repository: str
    installer_revision: str
    runtime: RebuiltArtifact
    skill: RebuiltArtifact

    @property
    def candidate(self) -> tuple[str, ...]:
        """What was built from where: two subjects are rebuilds of one candidate iff these are equal."""
        return (self.toolchain_repository, self.toolchain_revision, self.skill_source_repository, self.skill_source_revision,
                self.installer_repository, self.installer_revision)

    def candidate_json(self) -> dict[str, object]:
        return _candidate_json(self.candidate)

    def subjects(self) -> list[dict[str, object]]:
        return [subject(self.runtime.name, self.runtime.inventory.digest_hex), subject(self.skill.name, self.skill.inventory.digest_hex)]

    def statement(self) -> StatementDoc:
        """The rebuild result's in-toto statement (pure; no time: an honest rebuild signs the same statement).

        Raises:
            InputError: the statement checks' codes (never for names and inventories of real builds).
        """
        return statement(self.subjects(), REBUILD_PREDICATE, {
            "toolchain": {"repository": self.toolchain_repository, "revision": self.toolchain_revision},
            "runtime": self.runtime.to_json(),
            "skill": {**self.skill.to_json(), "source": {"repository": self.skill_source_repository, "revision": self.skill_source_revision},
                      "installer": {"repository": self.installer_repository, "revision": self.installer_revision}},
        })

    @classmethod
    def from_statement(cls, doc: Mapping[str, object], where: str) -> RebuildSubject:
        """Read a verified rebuild result's statement strictly.

        Raises:
            VerificationError: ``REBUILD_RESULT_MALFORMED`` (another predicate type, missing or
                unknown fields, a revision that is not a full SHA, a malformed inventory, subjects
                that are not exactly the two builds with their inventory digests).
        """
        def bad(detail: str, findings: Sequence[Finding] = ()) -> VerificationError:
            return VerificationError(PromotionCode.REBUILD_RESULT_MALFORMED, f"the rebuild result {detail}", where, findings=findings)

        if doc.get("predicateType") != REBUILD_PREDICATE:
            raise bad(f"has predicateType {str(doc.get('predicateType'))[:100]!r}, not {REBUILD_PREDICATE!r}")
        pred = doc.get("predicate")
        if not isinstance(pred, dict) or set(pred) != {"toolchain", "runtime", "skill"}:
            raise bad("predicate is not exactly {toolchain, runtime, skill}")

        def ref(value: object, what: str) -> tuple[str, str]:
            if (not isinstance(value, dict) or set(value) != {"repository", "revision"} or not isinstance(value["repository"], str)
                    or not value["repository"] or not is_full_sha(value["revision"])):
                raise bad(f"{what} is not {{repository, revision: <full sha>}}")
            return value["repository"], value["revision"]

        def artifact(value: object, what: str, extra: set[str]) -> RebuiltArtifact:
            if not isinstance(value, dict) or set(value) != {"name", "inputs_digest", "inventory"} | extra:
                raise bad(f"{what} is not exactly {sorted({'name', 'inputs_digest', 'inventory'} | extra)}")
            if not isinstance(value["name"], str) or not value["name"] or not isinstance(value["inputs_digest"], str):
                raise bad(f"{what}.name or {what}.inputs_digest is not a string")
            try:
                inventory = Inventory.from_json(value["inventory"])
            except InputError as e:
                raise bad(f"{what}.inventory is malformed", e.findings) from e
            return RebuiltArtifact(value["name"], value["inputs_digest"], inventory)

        toolchain = ref(pred["toolchain"], "toolchain")
        runtime = artifact(pred["runtime"], "runtime", set())
        skill = artifact(pred["skill"], "skill", {"source", "installer"})
        source = ref(pred["skill"]["source"], "skill.source")
        installer = ref(pred["skill"]["installer"], "skill.installer")
        subject = cls(*toolchain, *source, *installer, runtime, skill)
        subjects = doc.get("subject", [])
        if not isinstance(subjects, list) or subjects != subject.subjects():
            raise bad("subjects are not exactly the runtime and the skill, each with its inventory's digest")
        return subject


@dataclass(frozen=True, slots=True)
class RebuildClaim:
    """A verified rebuild result: what it says, who signed it (distinct rebuilder identities), its digest."""

    subject: RebuildSubject
    signers: tuple[str, ...]
    digest: str
    path: str


# -- the decision ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Disagreement:
    """A trusted rebuilder's result that names other bytes (or inputs) than the promoted build's."""

    identity: str
    result: str   # sha256:<hex> of the result file
    path: str
    kind: str     # "runtime" or "skill"
    expected: RebuiltArtifact
    rebuilt: RebuiltArtifact
    first: Finding  # the first differing inventory entry (its diff code), or NOT_REPRODUCIBLE for other inputs

    def to_json(self) -> dict[str, object]:
        return {"rebuilder": self.identity, "result": self.result, "artifact": self.kind,
                "promoted": {"name": self.expected.name, "inventory": self.expected.inventory.identity},
                "rebuilt": {"name": self.rebuilt.name, "inventory": self.rebuilt.inventory.identity},
                "first_difference": self.first.to_json()}


@dataclass(frozen=True, slots=True)
class RebuildersVerdict:
    """The outcome of :func:`decide_rebuilders`: who agreed, who disagreed, and every reason to refuse."""

    requirement: RebuildersRequirement | None
    agreed: tuple[tuple[str, str], ...]  # (identity, digest of its first agreeing result), in the policy's order
    disagreements: tuple[Disagreement, ...]
    findings: tuple[Finding, ...]
    unsafe: bool = False  # --unsafe-without-rebuilders: no [rebuilders] table, accepted and recorded

    @property
    def ok(self) -> bool:
        return not self.findings

    def to_json(self) -> dict[str, object]:
        """What the promotion log and ``--json`` record.

        Raises:
            Nothing.
        """
        if self.requirement is None:
            return {"unsafe_without_rebuilders": self.unsafe, "agreed": []}
        return {**self.requirement.to_json(), "agreed": [{"identity": i, "result": d} for i, d in self.agreed],
                "unsafe_without_rebuilders": False}


def _first_difference(expected: RebuiltArtifact, rebuilt: RebuiltArtifact) -> Finding | None:
    if expected.inventory.canonical != rebuilt.inventory.canonical:
        differences = diff_inventories(expected.inventory, rebuilt.inventory)
        if differences:
            return differences[0]
        return Finding(BuildCode.NOT_REPRODUCIBLE, None, f"the inventories differ ({expected.inventory.identity} vs "
                       f"{rebuilt.inventory.identity}) in their ignore patterns, not in an entry")
    if (expected.name, expected.inputs_digest) != (rebuilt.name, rebuilt.inputs_digest):
        return Finding(BuildCode.NOT_REPRODUCIBLE, None, f"the inputs differ: {expected.name} (inputs {expected.inputs_digest[:16]}) "
                       f"vs {rebuilt.name} (inputs {rebuilt.inputs_digest[:16]})")
    return None


def _without_requirement(claims: Sequence[RebuildClaim], problems: Sequence[Finding], unsafe: bool) -> list[Finding]:
    """Every reason to refuse when the release policy has no ``[rebuilders]`` table (pure)."""
    found = list(problems)
    if claims:
        found.append(Finding(PromotionCode.REBUILDERS_NOT_CONFIGURED, claims[0].path, "rebuild results were given but the release "
                             "policy has no [rebuilders] table to trust them"))
    elif not unsafe and not found:
        found.append(Finding(PromotionCode.REBUILDERS_NOT_CONFIGURED, None, "the release policy has no [rebuilders] table: "
                             "promotion needs k of n independent rebuilds (or, knowingly, --unsafe-without-rebuilders, "
                             "which the promotion log records)"))
    return found


def _claims_of(requirement: RebuildersRequirement, claims: Sequence[RebuildClaim], candidate: Sequence[str], promoter: Sequence[str]
               ) -> tuple[list[tuple[RebuildClaim, list[str]]], list[Finding]]:
    """The claims of ``candidate`` with the rebuilder identities that count for each, and a finding for every other claim."""
    ours: list[tuple[RebuildClaim, list[str]]] = []
    other: list[Finding] = []
    for claim in claims:
        counted = [s for s in claim.signers if s in requirement.identities and s not in promoter]
        if not counted:
            other.append(Finding(PromotionCode.REBUILD_RESULT_UNTRUSTED, claim.path, "no rebuilder identity other than the promoting "
                                 "key signed this rebuild result: the promoter's own rebuild is not independent"))
        elif claim.subject.candidate != tuple(candidate):
            other.append(Finding(PromotionCode.REBUILD_RESULT_OTHER_CANDIDATE, claim.path,
                                 f"this result rebuilt {claim.subject.candidate_json()}; the promotion is of {_candidate_json(candidate)}"))
        else:
            ours.append((claim, counted))
    return ours, other


def _threshold_not_met(requirement: RebuildersRequirement, count: Sequence[str], what: str) -> Finding:
    missing = [i for i in requirement.identities if i not in count]
    return Finding(PromotionCode.REBUILDERS_THRESHOLD_NOT_MET, None,
                   f"{len(count)} of the {count_of(requirement.threshold, 'required independent rebuilder')} {what} ({', '.join(count) or 'none'}; "
                   f"each identity counts once, however many results or signatures it gave); no agreeing result from "
                   f"{', '.join(missing)}")


def decide_before_build(requirement: RebuildersRequirement | None, claims: Sequence[RebuildClaim], candidate: Sequence[str], *,
                        problems: Sequence[Finding] = (), promoter: Sequence[str] = (), unsafe: bool = False) -> tuple[Finding, ...]:
    """What refuses the promotion whatever its builds turn out to be (pure): checked before anything is built.

    ``candidate`` is the promotion's :attr:`RebuildSubject.candidate` (repositories and full
    SHAs, known before any build). Every finding here is one :func:`decide_rebuilders` makes
    too, for any runtime and skill: no ``[rebuilders]`` table (unless ``unsafe``), results
    given without one, results that did not verify (``problems``), a result no rebuilder other
    than the promoter signed, a result of another candidate, and fewer distinct rebuilder
    identities with a result of this candidate than the threshold (even if all of them agree,
    too few). An empty answer decides nothing: the builds must still agree.

    Raises:
        Nothing.
    """
    if requirement is None:
        return tuple(_without_requirement(claims, problems, unsafe))
    ours, other = _claims_of(requirement, claims, candidate, promoter)
    could_agree = [i for i in requirement.identities if any(i in counted for _, counted in ours)]
    findings = [*other, *problems]
    if len(could_agree) < requirement.threshold:
        findings.append(_threshold_not_met(requirement, could_agree, "gave a result of this candidate"))
    return tuple(findings)


def decide_rebuilders(requirement: RebuildersRequirement | None, claims: Sequence[RebuildClaim], candidate: RebuildSubject, *,
                      problems: Sequence[Finding] = (), promoter: Sequence[str] = (), unsafe: bool = False) -> RebuildersVerdict:
    """k of n independent rebuilders, from verified claims (pure).

    ``problems`` are findings about results that did not verify (they refuse the promotion too);
    ``promoter`` the identities of the promoting key: their signatures never count (not
    independent). ``unsafe``: no ``[rebuilders]`` table is accepted (``--unsafe-without-rebuilders``).

    Raises:
        Nothing: every reason to refuse is a finding of the verdict (``REBUILD_DISAGREEMENT``
        one per disagreeing identity and artifact, naming the first differing entry;
        ``REBUILD_RESULT_OTHER_CANDIDATE``; ``REBUILD_RESULT_UNTRUSTED`` for a result only the
        promoting key signed; the ``problems``; ``REBUILDERS_THRESHOLD_NOT_MET``;
        ``REBUILDERS_NOT_CONFIGURED`` without a requirement unless ``unsafe``).
    """
    if requirement is None:
        found = _without_requirement(claims, problems, unsafe)
        return RebuildersVerdict(None, (), (), tuple(found), unsafe and not found)
    agreed: dict[str, str] = {}
    disagreements: list[Disagreement] = []
    ours, other = _claims_of(requirement, claims, candidate.candidate, promoter)
    for claim, counted in ours:
        differing = [(kind, want, got, first) for kind, want, got in (("runtime", candidate.runtime, claim.subject.runtime),
                                                                       ("skill", candidate.skill, claim.subject.skill))
                     if (first := _first_difference(want, got)) is not None]
        for identity in counted:
            if differing:
                disagreements.extend(Disagreement(identity, claim.digest, claim.path, kind, want, got, first)
                                     for kind, want, got, first in differing)
            else:
                agreed.setdefault(identity, claim.digest)
    disagreeing = {d.identity for d in disagreements}
    count = {i: agreed[i] for i in requirement.identities if i in agreed and i not in disagreeing}
    findings = [Finding(PromotionCode.REBUILD_DISAGREEMENT, d.first.path,
                        f"{d.identity} rebuilt the {d.kind} {d.rebuilt.name} as {d.rebuilt.inventory.identity}; the promoted build "
                        f"{d.expected.name} is {d.expected.inventory.identity}; first difference: {d.first}")
                for d in disagreements]
    findings += [*other, *problems]
    if len(count) < requirement.threshold:
        findings.append(_threshold_not_met(requirement, list(count), "agree"))
    return RebuildersVerdict(requirement, tuple(count.items()), tuple(disagreements), tuple(findings))


# -- reading the results, writing the negative one --------------------------------------------------


def verify_rebuild_results(paths: Sequence[str], policy: Policy, requirement: RebuildersRequirement | None
                           ) -> tuple[list[RebuildClaim], list[Finding]]:
    """Verify each rebuild result under the rebuilder identities only; return (claims, problems).

    Each file is read once (bounded) and its bytes verified: a signature counts only if it is by
    one of ``requirement.identities`` and that signer may sign ``rebuild/v1`` statements.

    Raises:
        InputError: ``USAGE`` (more than 64 results), ``UNREADABLE`` / ``TOO_LARGE`` (a result
            file), ``BAD_POLICY`` (a pinned trusted root sigstore cannot use).
    """
    if len(paths) > MAX_REBUILD_RESULTS:
        raise InputError(CommonCode.USAGE, f"{len(paths)} rebuild results; at most {MAX_REBUILD_RESULTS}")
    if requirement is None:
        # Nothing could make them count; never ignore them silently.
        return [], [Finding(PromotionCode.REBUILDERS_NOT_CONFIGURED, path, "a rebuild result was given but the release policy has no "
                            "[rebuilders] table to trust it") for path in paths]
    only = Policy(1, tuple(policy.signer(i) for i in requirement.identities), policy.path, policy.sources, policy.digest)
    claims: list[RebuildClaim] = []
    problems: list[Finding] = []
    for path in paths:
        data = read_bounded(path, what="rebuild result", max_bytes=MAX_REBUILD_RESULT_BYTES)
        try:
            verified = verify_attestation_bytes(data, only)
        except VerificationError as e:
            problems.append(Finding(PromotionCode.REBUILD_RESULT_UNTRUSTED, path, "no rebuilder identity of the release policy "
                                    f"signed this rebuild result ({e.findings[0]})"))
            continue
        try:
            subject = RebuildSubject.from_statement(verified.statement, path)
        except VerificationError as e:
            problems.extend(e.findings)
            continue
        claims.append(RebuildClaim(subject, verified.signers, verified.attestation_digest, path))
    return claims, problems


def _utc(t: _dt.datetime) -> str:
    if t.tzinfo is None:
        raise InputError(CommonCode.INTERNAL, "the clock must return an aware datetime")
    return t.astimezone(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def disagreement_statement(verdict: RebuildersVerdict, candidate: RebuildSubject, policy_digest: str, time: _dt.datetime
                           ) -> StatementDoc:
    """The signed negative result (pure): the candidate's builds as subjects, every disagreement with its first difference.

    Raises:
        InputError: ``INTERNAL`` for a naive ``time``.
    """
    return statement(candidate.subjects(), DISAGREEMENT_PREDICATE, {
        **candidate.candidate_json(),
        "promoted": {kind: {"name": a.name, "inventory": a.inventory.identity}
                     for kind, a in (("runtime", candidate.runtime), ("skill", candidate.skill))},
        "verdict": "DISAGREE",
        "disagreements": [d.to_json() for d in verdict.disagreements],
        "policy": policy_digest,
        "time": _utc(time),
    })


def write_disagreement(verdict: RebuildersVerdict, candidate: RebuildSubject, signer: Signer | KeylessSigner | Sequence[Signer], state: str, policy_digest: str,
                       time: _dt.datetime, *, fmt: str = "dsse") -> str:
    """Sign the negative result and write it to ``STATE/rebuild-disagreements/<revision>-<digest>.json``; return its path.

    Raises:
        InputError: ``SIGNING_FAILED``, ``BAD_OUTPUT_PATH``, ``INTERNAL`` (a naive ``time``).
    """
    data = sign_statement(disagreement_statement(verdict, candidate, policy_digest, time), signer, fmt=fmt)
    where = os.path.join(state, DISAGREEMENTS_DIR)
    os.makedirs(where, mode=0o700, exist_ok=True)
    path = os.path.join(where, f"{candidate.toolchain_revision}-{hashlib.sha256(data).hexdigest()[:16]}.json")
    write_atomic(path, data, mode=0o444, what="negative rebuild result")
    return path


# -- the rebuilder's side -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RebuildRelease:
    """A written rebuild result: where, its digest, the signing identities, what it names."""

    path: str
    digest: str
    signers: tuple[str, ...]
    subject: RebuildSubject
    runtime: BuildResult
    skill: BuildResult

    def to_json(self) -> dict[str, object]:
        """The ``--json`` object of ``attest rebuild-release``.

        Raises:
            Nothing.
        """
        s = self.subject
        return {"ok": True, "output": self.path, "attestation_digest": self.digest, "signers": list(self.signers), **s.candidate_json(),
                "runtime": {"name": s.runtime.name, "identity": s.runtime.inventory.identity, "reused": self.runtime.reused},
                "skill": {"name": s.skill.name, "identity": s.skill.inventory.identity, "reused": self.skill.reused}}


def candidate_subject(toolchain_repository: str, toolchain_rev: str, skill_recipe: SkillRecipe, skill_rev: str, installer_rev: str,
                      runtime: BuildResult, skill: BuildResult) -> RebuildSubject:
    """The :class:`RebuildSubject` of two builds of one candidate (the promoter's own, or a rebuilder's).

    Raises:
        Nothing.
    """
    return RebuildSubject(toolchain_repository, toolchain_rev, skill_recipe.source_repository, skill_rev,
                          skill_recipe.installer_repository, installer_rev, RebuiltArtifact.of(runtime), RebuiltArtifact.of(skill))


def rebuild_release(*, toolchain_rev: str, runtime_recipe: RuntimeRecipe, skill_recipe: SkillRecipe, state: str, cache: str,
                    sandbox: Sandbox, signer: Signer | KeylessSigner | Sequence[Signer], out: str, skill_rev: str | None = None, installer_rev: str | None = None,
                    python: str | None = None, fmt: str = "dsse", freeze_backend: str | None = None) -> RebuildRelease:
    """Build (or reuse, from this rebuilder's own store) the candidate's runtime and skill and sign a rebuild result.

    ``freeze_backend`` seals the rebuilder's images (the inventories, and so the result, do not
    depend on it).

    Independence comes from the state directory: a rebuilder builds into its own store, so
    ``state`` must not be the promoter's. The runtime must be built network-isolated and
    confined, exactly as a promoted one.

    Raises:
        InputError: ``NOT_FULL_SHA``, the builders' input codes, ``SIGNING_FAILED``, ``BAD_OUTPUT_PATH``.
        VerificationError: ``PROMOTION_REFUSED`` (the runtime was not built confined), the builders' codes.
        EnvironmentFailure: ``NETWORK_NOT_ISOLATED`` (an unconfined sandbox), the builders' codes.
    """
    verify_full_sha(toolchain_rev, what="toolchain revision")
    skill_source = skill_rev or toolchain_rev
    installer = installer_rev or toolchain_rev
    verify_full_sha(skill_source, what="skill source revision")
    verify_full_sha(installer, what="installer revision")
    if not (sandbox.network_isolated and sandbox.filesystem_confined):
        raise EnvironmentFailure(BuildCode.NETWORK_NOT_ISOLATED, "a rebuild result is signed only for a network-isolated, confined "
                                 "build; this sandbox is not")
    runtime = build_runtime(runtime_recipe, toolchain_rev, state, cache, sandbox, python=python, freeze_backend=freeze_backend)
    require_confined(runtime)
    skill = build_skill(skill_recipe, skill_source, state, installer_rev=installer, freeze_backend=freeze_backend)
    subject = candidate_subject(runtime_recipe.toolchain_repository, toolchain_rev, skill_recipe, skill_source, installer, runtime, skill)
    data = sign_statement(subject.statement(), signer, fmt=fmt)
    write_atomic(out, data, mode=0o644, what="rebuild result")
    ids = tuple("key:sha256:" + s.key_id for s in (signer if isinstance(signer, Sequence) else [signer]) if hasattr(s, "key_id"))
    return RebuildRelease(os.path.abspath(out), sha256_of(data), ids, subject, runtime, skill)
