"""Promotion: the release engineer's step from a full SHA to updated deployment pins.

Steps, each failing closed before the pins file and the promotion log are touched:

1. the revision is a full SHA (nothing else selects authority);
2. the pins file (if present), the release policy (with its ``[rebuilders]`` table), the
   promotion log (every entry verified, the chain unbroken, and continuing the head the state
   directory remembers for these pins: no rollback, no fork) and the rebuild results (each
   verified under the rebuilder identities) are read once;
3. the runtime and the skill are built (or reused from the store) and attested;
4. both pass the rebuild check (identical name and inventory from another context);
5. every attestation verifies under the release policy and names the built tree;
6. k of n independent rebuilders agree (:func:`attest.builder._rebuilders.decide_rebuilders`):
   a disagreement writes a signed negative result naming the first differing entry;
7. the new pins are decided (:func:`plan_promotion`), and a pinned identity other than the
   toolchain SHA (interpreter, lock, repositories, skill root) changes only with ``repin``;
8. ``before_write`` runs on the candidate pins (``attest promote``: the review layer's fixture
   consumer bootstrap and review start, :mod:`attest.review.release`);
9. a log entry naming the previous one is created, then the pins file is rewritten
   atomically, and only if it did not change meanwhile;
10. the state directory remembers the log's head (:func:`attest.builder._promolog.remember_log`):
    step 2 refuses a log that ends below it or holds another entry at its sequence.

A failed promotion leaves the pins file and the log byte-identical (or absent, if they were).

The decision itself is :func:`plan_promotion`, a pure function from the parsed pins and what
steps 1-6 established (:class:`PromotionFacts`) to the new pins (:class:`PromotionPlan`);
:func:`promote` does the reading, building, verifying and writing around it.

    >>> result = promote(toolchain_rev=sha, pins_path="pins.toml", signer=signer, policy_path="policy.toml",
    ...                  rebuild_results=["rebuild-a.json", "rebuild-b.json"], ...)
    >>> print("\n".join(result.summary_lines()))
    >>> plan = plan_promotion(parse_pins(data, "pins.toml"), facts, original=data, where="pins.toml")
"""

from __future__ import annotations

import datetime as _dt
import os
import re
import tomllib
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from .._digest import sha256_of
from .._fs import read_bounded, write_atomic
from .._plural import count
from ..attestation import KeylessSigner, Policy, Signer, VerifiedStatement, load_policy, sign_statement, verify_attestation_file
from ..errors import CommonCode, Finding, InputError, VerificationError
from ..git import verify_full_sha
from ._attest import attest_build
from ._codes import BuildCode
from ._outputs import BuildResult, require_confined
from ._promolog import (
    REMEMBERED,
    AcceptedLog,
    LogCheckpoint,
    LogEntry,
    append_entry,
    check_log_chain,
    checkpoint_path,
    decide_log_checkpoint,
    entry_statement,
    log_path,
    read_checkpoint,
    read_log,
    remember_log,
    remove_entry,
)
from ._promotion_codes import PromotionCode
from ._rebuild import RebuildReport, rebuild_check
from ._rebuilders import (
    RELEASE_POLICY_EXTENSIONS,
    RebuildClaim,
    RebuildersRequirement,
    RebuildersVerdict,
    candidate_subject,
    decide_before_build,
    decide_rebuilders,
    rebuilders_of,
    verify_rebuild_results,
    write_disagreement,
)
from ._recipe import RuntimeRecipe, SkillRecipe
from ._runtime import build_runtime
from ._sandbox import Sandbox
from ._skill import build_skill

MAX_PINS_BYTES = 1 << 20
MANAGED = ("toolchain", "runtime", "skill")
# Pinned identities other than the toolchain SHA: each changes only with ``--repin GROUP``.
REPIN_GROUPS: dict[str, tuple[str, ...]] = {
    "interpreter": ("runtime.interpreter", "runtime.interpreter_sha256", "runtime.python"),
    "lock": ("runtime.lock_sha256",),
    "toolchain-repository": ("toolchain.repository",),
    "skill-source": ("skill.root", "skill.source_repository", "skill.installer_repository"),
}
_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+\Z")
#: A parsed pins file (TOML). Any, as tomllib gives it: its managed tables (``MANAGED``, checked
#: tables by :func:`parse_pins`) are read by the keys promotion itself writes into them.
Pins = dict[str, Any]


def parse_pins(data: bytes | None, where: str) -> Pins:
    """Parse the bytes of a pins file (``None``: the file is absent, so no pins yet).

    Raises:
        InputError: ``BAD_PINS`` when the bytes are not UTF-8 TOML (duplicate keys included)
            or a managed key (``toolchain``, ``runtime``, ``skill``) is not a table.
    """
    if data is None:
        return {}
    try:
        doc = tomllib.loads(data.decode("utf-8"))
    except (ValueError, RecursionError) as e:  # as in parse_pylock: tomllib also raises bare ValueError and RecursionError
        raise InputError(BuildCode.BAD_PINS, f"the pins file is not valid UTF-8 TOML: {e}", where) from e
    for key in MANAGED:
        if key in doc and not isinstance(doc[key], dict):
            raise InputError(BuildCode.BAD_PINS, f"{key!r} must be a table", where)
    return doc


def _toml_value(v: object, where: str) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        out = v.replace("\\", "\\\\").replace('"', '\\"')
        if any(ord(c) < 0x20 or ord(c) == 0x7F for c in out):
            raise InputError(BuildCode.BAD_PINS, "control characters are not written to pins", where)
        return f'"{out}"'
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x, where) for x in v) + "]"
    raise InputError(BuildCode.BAD_PINS, f"cannot write a {type(v).__name__} value back to the pins file", where)


def _key(k: str) -> str:
    return k if _BARE_KEY.match(k) else _toml_value(k, k)


def dump_pins(doc: Mapping[str, object]) -> bytes:
    """A small deterministic TOML writer for pins: scalars, arrays of scalars, nested tables.

    Raises:
        InputError: ``BAD_PINS`` for a value it cannot write back faithfully (a float, a
            date, a string with control characters); the caller writes nothing then.
    """
    lines = ["# Deployment pins. Rewritten by `attest promote`; keep this file outside every reviewed repository.", ""]

    def emit(table: Mapping[str, object], prefix: str) -> None:
        scalars = {k: v for k, v in table.items() if not isinstance(v, dict)}
        tables = {k: v for k, v in table.items() if isinstance(v, dict)}
        if prefix and (scalars or not tables):
            lines.append(f"[{prefix}]")
        for k in sorted(scalars):
            lines.append(f"{_key(k)} = {_toml_value(scalars[k], prefix + '.' + k)}")
        if prefix and (scalars or not tables):
            lines.append("")
        for k in sorted(tables):
            emit(tables[k], f"{prefix}.{_key(k)}" if prefix else _key(k))

    emit(doc, "")
    return ("\n".join(lines).rstrip("\n") + "\n").encode()


def _flatten(doc: Mapping[str, object], prefix: str = "") -> dict[str, object]:
    out: dict[str, object] = {}
    for k, v in doc.items():
        key = f"{prefix}.{k}" if prefix else k
        if isinstance(v, dict):
            out.update(_flatten(v, key))
        else:
            out[key] = v
    return out


def _short(identity: str) -> str:
    """A signer id or digest cut for a summary line (the ``--json`` output keeps it whole)."""
    head, _, hex_ = identity.rpartition(":")
    return f"{head}:{hex_[:12]}…" if len(hex_) > 16 else identity


@dataclass(frozen=True, slots=True)
class PromotionResult:
    """A completed promotion: the builds, their checks, what changed, the log entry, and the notes to print."""

    pins_path: str
    runtime: BuildResult
    skill: BuildResult
    rebuilds: tuple[RebuildReport, ...]
    changes: tuple[tuple[str, object, object], ...]   # (key, old, new)
    toolchain_repository: str = ""
    toolchain_rev: str = ""
    previous_rev: str | None = None             # the toolchain revision the pins named before (None: none)
    rebuilders: RebuildersVerdict | None = None
    repinned: tuple[tuple[str, object, object], ...] = ()  # changed pinned identities (allowed by ``repin``)
    fixture: Mapping[str, object] | None = field(default=None, hash=False)
    log_entry: str | None = None                 # the entry this promotion appended (None: nothing changed)
    log_sequence: int | None = None
    notes: tuple[str, ...] = ()                  # warnings a person must see (unsafe options, edits outside promotion)

    def to_json(self) -> dict[str, object]:
        """The ``--json`` object of ``attest promote``.

        Raises:
            Nothing: it only reads fields already validated.
        """
        return {
            "ok": True,
            "pins": self.pins_path,
            "toolchain": {"repository": self.toolchain_repository, "revision": self.toolchain_rev, "previous": self.previous_rev},
            "runtime": self.runtime.to_json(),
            "skill": self.skill.to_json(),
            "rebuilders": self.rebuilders.to_json() if self.rebuilders is not None else None,
            "fixture": dict(self.fixture) if self.fixture is not None else None,
            "repinned": [{"key": k, "old": o, "new": n} for k, o, n in self.repinned],
            "changes": [{"key": k, "old": o, "new": n} for k, o, n in self.changes],
            "log": {"entry": self.log_entry, "sequence": self.log_sequence},
            "notes": list(self.notes),
        }

    def summary_lines(self) -> list[str]:
        """What ``attest promote`` prints: one line per part of the promotion, never one per pin.

        Raises:
            Nothing.
        """
        rev = self.toolchain_rev
        if self.previous_rev is None:
            was = "first promotion"
        elif self.previous_rev == rev:
            was = "already pinned"
        else:
            was = f"was {self.previous_rev}"
        python = self.runtime.inputs.get("interpreter", {}).get("version", "?")
        # A promotion that changed no pin is no new promotion: the head says so (the checks still ran and held).
        pins = os.path.abspath(self.pins_path)
        head = f"PROMOTED {rev} into {pins}" if self.changes else f"ALREADY PROMOTED {rev} in {pins} (no pin changed)"
        lines = [head,
                 f"  toolchain   {self.toolchain_repository} ({was})",
                 f"  runtime     {self.runtime.name}: python {python}, {count(len(self.runtime.inventory.entries), 'entry')}, "
                 f"{_short(self.runtime.inventory.identity)}",
                 f"  skill       {self.skill.name}: {count(len(self.skill.inventory.entries), 'entry')}, {_short(self.skill.inventory.identity)}"]
        verdict = self.rebuilders
        if verdict is not None and verdict.requirement is not None:
            lines.append(f"  rebuilders  {len(verdict.agreed)} of {len(verdict.requirement.identities)} agree (threshold "
                         f"{verdict.requirement.threshold}): {', '.join(_short(i) for i, _ in verdict.agreed)}")
        else:
            lines.append("  rebuilders  NONE: no independent rebuild was required (--unsafe-without-rebuilders, recorded in the log)")
        summary = (self.fixture or {}).get("summary") if self.fixture is not None else None
        lines.append(f"  fixture     {summary or 'passed'}" if self.fixture is not None else "  fixture     not run")
        for key, old, new in self.repinned:
            lines.append(f"  REPINNED    {key}: {old} -> {new}")
        if not self.changes:
            lines.append("  pins        no change: the pins already named this promotion")
        else:
            tables = sorted({k.split(".")[0] for k, _, _ in self.changes})
            added = sum(1 for _, old, _ in self.changes if old is None)
            what = f"{count(len(self.changes), 'pin')} {'written' if added == len(self.changes) else 'changed'}"
            lines.append(f"  pins        {what} ({', '.join(tables)})")
        if self.log_entry is not None:
            lines.append(f"  log         entry {self.log_sequence}: {os.path.abspath(self.log_entry)}")
        else:
            lines.append("  log         no entry (nothing changed; the log already names these pins)")
        lines.extend(f"  NOTE        {n}" for n in self.notes)
        return lines


@dataclass(frozen=True, slots=True)
class PromotionFacts:
    """What promotion steps 1-6 established: the input of :func:`plan_promotion`.

    ``runtime_attestations`` / ``skill_attestations`` are the verified statements of each
    build's ``attestations`` files, in the same order (predicate, then provenance); their
    ``attestation_digest`` (of the verified bytes) is what the pins record. ``rebuilders`` is
    the k-of-n verdict on the independent rebuild results.
    """

    toolchain_repository: str
    toolchain_rev: str
    runtime: BuildResult
    runtime_attestations: tuple[VerifiedStatement, ...]
    skill: BuildResult
    skill_attestations: tuple[VerifiedStatement, ...]
    skill_root: str
    skill_source_repository: str
    skill_source_rev: str
    installer_repository: str
    installer_rev: str
    rebuilds: tuple[RebuildReport, ...]
    rebuilders: RebuildersVerdict


@dataclass(frozen=True, slots=True)
class PromotionPlan:
    """The decided new pins: the document, its exact bytes, what changes, whether to write."""

    pins: Pins = field(hash=False)
    data: bytes
    changes: tuple[tuple[str, object, object], ...]   # (key, old, new), sorted by key
    write: bool   # False when the file already holds exactly ``data``
    repinned: tuple[tuple[str, object, object], ...] = ()  # changed pinned identities, each allowed by ``repin``


@dataclass(frozen=True, slots=True)
class PromotionCandidate:
    """What ``before_write`` is given: the candidate pins (exact bytes) and everything they were decided from."""

    pins_path: str
    pins_data: bytes
    state: str
    policy: Policy
    facts: PromotionFacts


class BeforeWrite(Protocol):
    """Runs on the candidate before anything is written; raises to refuse; returns what the log entry records."""

    def __call__(self, candidate: PromotionCandidate) -> Mapping[str, object]: ...


def _require_reproducible(reports: tuple[RebuildReport, ...], *builds: BuildResult) -> None:
    """Refuse unless each of ``builds`` has a rebuild check and no check found a difference."""
    failed = [f for r in reports for f in r.findings]
    if failed:
        raise VerificationError(BuildCode.PROMOTION_REFUSED, "the rebuild check failed; the pins are unchanged", findings=failed)
    checked = {r.first.name for r in reports}
    for result in builds:
        if result.name not in checked:
            raise VerificationError(BuildCode.PROMOTION_REFUSED, "the build has no rebuild check; the pins are unchanged", result.name)


def _require_rebuilders(verdict: RebuildersVerdict) -> None:
    """Refuse unless k of n independent rebuilders agreed (or no table was knowingly accepted as unsafe)."""
    if verdict.findings:
        raise VerificationError(findings=verdict.findings)
    if verdict.requirement is None:
        if not verdict.unsafe:
            raise VerificationError(PromotionCode.REBUILDERS_NOT_CONFIGURED, "no [rebuilders] requirement and no "
                                    "--unsafe-without-rebuilders; the pins are unchanged")
        return
    distinct = {i for i, _ in verdict.agreed if i in verdict.requirement.identities}
    if len(distinct) < verdict.requirement.threshold:
        raise VerificationError(PromotionCode.REBUILDERS_THRESHOLD_NOT_MET, f"{len(distinct)} distinct agreeing rebuilders; the "
                                f"release policy requires {verdict.requirement.threshold}")


def _attestation_problems(result: BuildResult, verified: tuple[VerifiedStatement, ...]) -> list[Finding]:
    if len(result.attestations) != 2 or len(verified) != 2:
        return [Finding(BuildCode.PROMOTION_REFUSED, result.name, "the build has no signed predicate and provenance")]
    problems: list[Finding] = []
    for path, statement in zip(result.attestations, verified, strict=True):
        subjects = statement.statement.get("subject", [])
        if len(subjects) != 1 or subjects[0].get("digest") != {"sha256": result.inventory.digest_hex}:
            problems.append(Finding(BuildCode.PROMOTION_REFUSED, path, "the attestation does not name the built tree"))
    return problems


def check_repin(repin: Collection[str]) -> frozenset[str]:
    """The ``--repin`` groups, each one of :data:`REPIN_GROUPS`.

    Raises:
        InputError: ``USAGE`` for an unknown group.
    """
    unknown = sorted(set(repin) - set(REPIN_GROUPS))
    if unknown:
        raise InputError(CommonCode.USAGE, f"--repin {', '.join(unknown)}: unknown; the pinned identities are "
                         f"{', '.join(sorted(REPIN_GROUPS))}")
    return frozenset(repin)


def _identity_changes(before: Mapping[str, object], after: Mapping[str, object], repin: frozenset[str]
                      ) -> tuple[list[tuple[str, object, object]], list[Finding]]:
    """(allowed changes, refusals) of pinned identities other than the toolchain SHA; a pin set for the first time is no change."""
    allowed: list[tuple[str, object, object]] = []
    refused: list[Finding] = []
    for group, keys in REPIN_GROUPS.items():
        for key in keys:
            old, new = before.get(key), after.get(key)
            if old is None or old == new:
                continue
            if group in repin:
                allowed.append((key, old, new))
            else:
                refused.append(Finding(PromotionCode.PINNED_IDENTITY_CHANGED, key, f"{old!r} -> {new!r}: a pinned identity other "
                                       f"than the toolchain SHA changes only when asked (--repin {group}); the pins are unchanged"))
    return allowed, refused


def plan_promotion(pins: Mapping[str, object], facts: PromotionFacts, *, original: bytes | None, where: str,
                   repin: Collection[str] = frozenset()) -> PromotionPlan:
    """Decide the new pins from the parsed current ``pins`` and the verified ``facts``; no I/O.

    ``original`` is the exact bytes the pins were parsed from (``None``: no pins file), so the
    plan can say whether anything needs writing; ``where`` names the pins file in errors.
    Keys other than ``toolchain``, ``runtime`` and ``skill`` are kept as they are. ``repin``
    names the groups of :data:`REPIN_GROUPS` whose pinned identities may change.

    Raises:
        InputError: ``NOT_FULL_SHA`` when a revision in ``facts`` is not a full object id;
            ``BAD_PINS`` when a kept pin cannot be written back (a float, a date, control
            characters); ``USAGE`` for an unknown ``repin`` group.
        VerificationError: ``PROMOTION_REFUSED`` when a build is of the wrong kind, the
            runtime was not built network-isolated and confined, the rebuild check found a
            difference (its findings attached) or did not check a build, or a build lacks its two
            verified attestations or one of them does not name the built tree; the verdict's
            codes (``REBUILD_DISAGREEMENT``, ``REBUILDERS_THRESHOLD_NOT_MET``,
            ``REBUILDERS_NOT_CONFIGURED``, ...) unless k of n independent rebuilders agreed;
            ``PINNED_IDENTITY_CHANGED`` (one finding per pin) when a pinned identity other than
            the toolchain SHA would change outside ``repin``;
            ``BAD_PINS`` when the written bytes would not parse back to the planned pins.
    """
    allowed_groups = check_repin(repin)
    # Step 1: only full SHAs select authority, whoever assembled the facts.
    verify_full_sha(facts.toolchain_rev, what="toolchain revision")
    verify_full_sha(facts.skill_source_rev, what="skill source revision")
    verify_full_sha(facts.installer_rev, what="installer revision")
    runtime, skill = facts.runtime, facts.skill
    for result, kind in ((runtime, "runtime"), (skill, "skill")):
        if result.kind != kind:
            raise VerificationError(BuildCode.PROMOTION_REFUSED, f"the {kind} fact is a {result.kind!r} build", result.name)
    # Step 3: only a confined, network-isolated runtime is ever released.
    require_confined(runtime)
    # Step 4: reproducible from another context.
    _require_reproducible(facts.rebuilds, runtime, skill)
    # Step 5: every attestation verified and names the built tree.
    problems = _attestation_problems(runtime, facts.runtime_attestations) + _attestation_problems(skill, facts.skill_attestations)
    if problems:
        raise VerificationError(findings=problems)
    # Step 6: k of n independent rebuilders agree.
    _require_rebuilders(facts.rebuilders)
    # Step 7: the new pins; unmanaged keys are kept.
    new = dict(pins)
    new["toolchain"] = {"repository": facts.toolchain_repository, "revision": facts.toolchain_rev}
    new["runtime"] = {
        "name": runtime.name,
        "inventory": runtime.inventory.identity,
        "interpreter": runtime.inputs["interpreter"]["executable"],
        "interpreter_sha256": runtime.inputs["interpreter"]["executable_sha256"],
        "python": runtime.inputs["interpreter"]["version"],
        "lock_sha256": runtime.inputs["lock"]["sha256"],
        "attestation": facts.runtime_attestations[0].attestation_digest,
        "provenance": facts.runtime_attestations[1].attestation_digest,
    }
    new["skill"] = {
        "name": skill.name,
        "inventory": skill.inventory.identity,
        "root": facts.skill_root,
        "source_repository": facts.skill_source_repository,
        "source_revision": facts.skill_source_rev,
        "installer_repository": facts.installer_repository,
        "installer_revision": facts.installer_rev,
        "attestation": facts.skill_attestations[0].attestation_digest,
        "provenance": facts.skill_attestations[1].attestation_digest,
    }
    data = dump_pins(new)
    if tomllib.loads(data.decode()) != new:
        raise VerificationError(BuildCode.BAD_PINS, "the pins writer does not round-trip; nothing written", where)
    before, after = _flatten(pins), _flatten(new)
    # Step 7b: a pinned identity other than the toolchain SHA never moves without a word.
    repinned, refused = _identity_changes(before, after, allowed_groups)
    if refused:
        raise VerificationError(findings=refused)
    changes = tuple((k, before.get(k), after.get(k)) for k in sorted(set(before) | set(after)) if before.get(k) != after.get(k))
    return PromotionPlan(new, data, changes, data != original, tuple(repinned))


def _read_pins(pins_path: str) -> bytes | None:
    return read_bounded(pins_path, what="pins file", max_bytes=MAX_PINS_BYTES) if os.path.lexists(pins_path) else None


def _verified(result: BuildResult, policy: Policy) -> tuple[VerifiedStatement, ...]:
    if len(result.attestations) != 2:
        return ()  # plan_promotion refuses it
    return tuple(verify_attestation_file(path, policy) for path in result.attestations)


def _now() -> _dt.datetime:
    return _dt.datetime.now(_dt.UTC)


def _signer_ids(signer: Signer | KeylessSigner | Sequence[Signer]) -> tuple[str, ...]:
    keys: Sequence[object] = signer if isinstance(signer, Sequence) else [signer]
    ids = (getattr(k, "key_id", None) for k in keys)
    return tuple("key:sha256:" + i for i in ids if isinstance(i, str))


def _log_record(facts: PromotionFacts, plan: PromotionPlan, policy: Policy, fixture: Mapping[str, object] | None) -> dict[str, object]:
    return {
        "toolchain": {"repository": facts.toolchain_repository, "revision": facts.toolchain_rev},
        "runtime": {k: plan.pins["runtime"][k] for k in ("name", "inventory", "attestation")},
        "skill": {k: plan.pins["skill"][k] for k in ("name", "inventory", "attestation")},
        "policy": policy.digest,
        "rebuilders": facts.rebuilders.to_json(),
        "fixture": dict(fixture) if fixture is not None else None,
        "repinned": [{"key": k, "old": o, "new": n} for k, o, n in plan.repinned],
        "changes": len(plan.changes),
    }


def promote(
    *,
    toolchain_rev: str,
    pins_path: str,
    signer: Signer | KeylessSigner | Sequence[Signer],
    policy_path: str,
    runtime_recipe: RuntimeRecipe,
    skill_recipe: SkillRecipe,
    state: str,
    cache: str,
    sandbox: Sandbox,
    installer_rev: str | None = None,
    skill_rev: str | None = None,
    python: str | None = None,
    fmt: str = "dsse",
    rebuild_results: Sequence[str] = (),
    unsafe_without_rebuilders: bool = False,
    repin: Collection[str] = frozenset(),
    before_write: BeforeWrite | None = None,
    clock: Callable[[], _dt.datetime] = _now,
    freeze_backend: str | None = None,
) -> PromotionResult:
    """Build, rebuild-check and verify the runtime and skill at full SHAs, require k of n rebuilders, then update the pins.

    ``rebuild_results`` are the independent rebuilders' signed results; without a
    ``[rebuilders]`` table in the release policy the promotion is refused unless
    ``unsafe_without_rebuilders`` (recorded in the log entry). What the policy and the results
    decide alone (no table, a result that cannot count, fewer rebuilders than the threshold:
    :func:`decide_before_build`) is refused before anything is built. ``before_write`` (the review
    layer's fixture run for ``attest promote``) runs on the candidate pins before anything is
    written; what it returns is recorded in the log entry.

    Raises:
        InputError: ``NOT_FULL_SHA`` for a revision that is not a full object id;
            ``BAD_PINS`` for a pins file that does not parse or cannot be written back;
            ``BAD_REBUILDERS``; ``USAGE`` (an unknown ``repin`` group, ``unsafe_without_rebuilders``
            with a ``[rebuilders]`` table, too many results); the policy's codes (``BAD_POLICY``,
            ``POLICY_*``, ``UNREADABLE``, ...) and the builders' input codes (``NOT_IN_CACHE``, ...).
        VerificationError: ``PROMOTION_REFUSED`` (unconfined sandbox or runtime, a failed
            rebuild check, an attestation that does not name the tree, the pins file changed
            meanwhile), an attestation's verification codes (``THRESHOLD_NOT_MET``, ...), the
            rebuilders' codes (``REBUILD_DISAGREEMENT`` after writing the signed negative result,
            ``REBUILDERS_THRESHOLD_NOT_MET``, ``REBUILD_RESULT_*``, ``REBUILDERS_NOT_CONFIGURED``),
            ``PINNED_IDENTITY_CHANGED``, the log's codes (``PROMOTION_LOG_*``, with
            ``PROMOTION_LOG_ROLLBACK`` / ``PROMOTION_LOG_FORK`` against what ``state`` remembers), and
            whatever ``before_write`` raises.
        EnvironmentFailure: a build guarantee that cannot be established here.
    """
    # 1. Full SHAs only, known repin groups, a confined sandbox.
    revs, repin_groups = _check_request(toolchain_rev, skill_rev, installer_rev, repin, sandbox, pins_path)
    # 2. Pins, policy, log and rebuild results, read once.
    inputs = _read_inputs(pins_path, policy_path, state, rebuild_results, unsafe_without_rebuilders)
    # ... and refused now for what no build can change (no [rebuilders] table, a result that cannot count,
    # too few rebuilders): a refusal after minutes of building would have been the same refusal.
    _refuse_before_build(inputs, revs, runtime_recipe=runtime_recipe, skill_recipe=skill_recipe, signer=signer)
    # 3-6. Build, rebuild-check, verify, and k of n independent rebuilders.
    facts = _checked_candidate(revs, inputs, runtime_recipe=runtime_recipe, skill_recipe=skill_recipe, state=state, cache=cache,
                               sandbox=sandbox, python=python, fmt=fmt, signer=signer, clock=clock,
                               freeze_backend=freeze_backend)
    # 7. The decision.
    plan = plan_promotion(inputs.old, facts, original=inputs.original, where=pins_path, repin=repin_groups)
    written = _write_promotion(pins_path, inputs, facts, plan, state=state, signer=signer, fmt=fmt, clock=clock,
                               before_write=before_write)
    previous = inputs.old.get("toolchain", {}).get("revision")
    return PromotionResult(pins_path, facts.runtime, facts.skill, facts.rebuilds, plan.changes, runtime_recipe.toolchain_repository,
                           toolchain_rev, previous if isinstance(previous, str) else None, facts.rebuilders, plan.repinned,
                           written.fixture, written.entry_path, written.sequence, written.notes)


@dataclass(frozen=True, slots=True)
class _Revisions:
    """The three full SHAs a promotion builds: the toolchain, the skill's source, the installer."""

    toolchain: str
    skill: str
    installer: str


def _check_request(toolchain_rev: str, skill_rev: str | None, installer_rev: str | None, repin: Collection[str],
                   sandbox: Sandbox, pins_path: str) -> tuple[_Revisions, frozenset[str]]:
    """Step 1: full SHAs only (the skill and the installer default to the toolchain's), the repin groups, the sandbox."""
    verify_full_sha(toolchain_rev, what="toolchain revision")
    revs = _Revisions(toolchain_rev, skill_rev or toolchain_rev, installer_rev or toolchain_rev)
    verify_full_sha(revs.skill, what="skill source revision")
    verify_full_sha(revs.installer, what="installer revision")
    repin_groups = check_repin(repin)
    # Only a confined, network-isolated build is ever promoted (--allow-network-unisolated
    # may build, never release).
    if not (sandbox.network_isolated and sandbox.filesystem_confined):
        raise VerificationError(BuildCode.PROMOTION_REFUSED, "promotion needs a network-isolated, confined sandbox; "
                                "this one is not (the pins are unchanged)", pins_path)
    return revs, repin_groups


@dataclass(frozen=True, slots=True)
class _Inputs:
    """Step 2: what a promotion reads once, before anything is built."""

    original: bytes | None  # the pins file's bytes (None: absent); step 9 writes over exactly these
    old: Pins
    policy: Policy
    requirement: RebuildersRequirement | None
    unsafe_without_rebuilders: bool
    entries: list[LogEntry]
    accepted: AcceptedLog
    claims: list[RebuildClaim]
    result_problems: list[Finding]


def _read_inputs(pins_path: str, policy_path: str, state: str, rebuild_results: Sequence[str],
                 unsafe_without_rebuilders: bool) -> _Inputs:
    """Step 2: the pins, the release policy, the promotion log (and the head this state accepted), the rebuild results."""
    original = _read_pins(pins_path)
    old = parse_pins(original, pins_path)
    policy = load_policy(policy_path, extensions=RELEASE_POLICY_EXTENSIONS)
    requirement = rebuilders_of(policy)
    if requirement is not None and unsafe_without_rebuilders:
        raise InputError(CommonCode.USAGE, "--unsafe-without-rebuilders given, but the release policy has a [rebuilders] table: "
                         "its requirement holds", policy_path)
    entries, log_problems, unverified = read_log(pins_path, policy)
    log_problems += check_log_chain(entries, unverified=unverified)
    # ... and it continues what this state directory accepted last (a rollback or a fork is never appended to).
    remembered = read_checkpoint(state, pins_path)
    chain = {e.number: e.digest for e in entries}
    if remembered is not None:
        log_problems += decide_log_checkpoint(chain, max([*chain, *unverified], default=0),
                                              [(f"{REMEMBERED} ({checkpoint_path(state, pins_path)})", remembered)],
                                              where=log_path(pins_path))
    if log_problems:
        raise VerificationError(findings=log_problems)
    accepted = AcceptedLog(os.path.abspath(pins_path), os.path.abspath(log_path(pins_path)), tuple(sorted(chain.items())),
                           LogCheckpoint(entries[-1].sequence, entries[-1].digest) if entries else None, tuple(entries))
    claims, result_problems = verify_rebuild_results(rebuild_results, policy, requirement)
    return _Inputs(original, old, policy, requirement, unsafe_without_rebuilders, entries, accepted, claims, result_problems)


def _refuse_before_build(inputs: _Inputs, revs: _Revisions, *, runtime_recipe: RuntimeRecipe, skill_recipe: SkillRecipe,
                         signer: Signer | KeylessSigner | Sequence[Signer]) -> None:
    """Step 2, last: what the release policy and the rebuild results decide alone (:func:`decide_before_build`)."""
    early = decide_before_build(inputs.requirement, inputs.claims,
                                (runtime_recipe.toolchain_repository, revs.toolchain, skill_recipe.source_repository, revs.skill,
                                 skill_recipe.installer_repository, revs.installer),
                                problems=inputs.result_problems, promoter=_signer_ids(signer),
                                unsafe=inputs.unsafe_without_rebuilders)
    if early:
        raise VerificationError(findings=early)


def _checked_candidate(revs: _Revisions, inputs: _Inputs, *, runtime_recipe: RuntimeRecipe, skill_recipe: SkillRecipe, state: str,
                       cache: str, sandbox: Sandbox, python: str | None, fmt: str, signer: Signer | KeylessSigner | Sequence[Signer], clock: Callable[[], _dt.datetime],
                       freeze_backend: str | None) -> PromotionFacts:
    """Steps 3-6: the runtime and the skill built (or reused) and attested, rebuilt, verified, and agreed by the rebuilders."""
    # 3. Build (or reuse) and attest.
    runtime = attest_build(build_runtime(runtime_recipe, revs.toolchain, state, cache, sandbox, python=python,
                                         freeze_backend=freeze_backend), signer, state, fmt=fmt)
    require_confined(runtime)  # plan_promotion decides this too; refusing now saves the skill build
    skill = attest_build(build_skill(skill_recipe, revs.skill, state, installer_rev=revs.installer, freeze_backend=freeze_backend),
                         signer, state, fmt=fmt)
    # 4. Reproducible from another context.
    reports = (
        rebuild_check(runtime_recipe, revs.toolchain, state, cache=cache, sandbox=sandbox, python=python, first=runtime),
        rebuild_check(skill_recipe, revs.skill, state, installer_rev=revs.installer, first=skill),
    )
    _require_reproducible(reports, runtime, skill)  # decided again by plan_promotion; refused before any verification
    # 5. The attestations verify under the release policy (the pins record the digest of the verified bytes).
    runtime_statements, skill_statements = _verified(runtime, inputs.policy), _verified(skill, inputs.policy)
    # 6. k of n independent rebuilders; a disagreement is signed and kept before the refusal.
    candidate = candidate_subject(runtime_recipe.toolchain_repository, revs.toolchain, skill_recipe, revs.skill, revs.installer,
                                  runtime, skill)
    verdict = decide_rebuilders(inputs.requirement, inputs.claims, candidate, problems=inputs.result_problems,
                                promoter=_signer_ids(signer), unsafe=inputs.unsafe_without_rebuilders)
    if verdict.disagreements:
        negative = write_disagreement(verdict, candidate, signer, state, inputs.policy.digest, clock(), fmt=fmt)
        raise VerificationError(findings=[*verdict.findings, Finding(PromotionCode.REBUILD_DISAGREEMENT, negative,
                                          "the signed negative result naming each first differing entry; the pins and the log "
                                          "are unchanged")])
    return PromotionFacts(
        toolchain_repository=runtime_recipe.toolchain_repository, toolchain_rev=revs.toolchain,
        runtime=runtime, runtime_attestations=runtime_statements,
        skill=skill, skill_attestations=skill_statements,
        skill_root=skill_recipe.root, skill_source_repository=skill_recipe.source_repository, skill_source_rev=revs.skill,
        installer_repository=skill_recipe.installer_repository, installer_rev=revs.installer, rebuilds=reports, rebuilders=verdict,
    )


@dataclass(frozen=True, slots=True)
class _Written:
    """Steps 8-10: what the fixture returned, the log entry written (None: none was needed), the notes for the user."""

    fixture: Mapping[str, object] | None
    entry_path: str | None
    sequence: int | None
    notes: tuple[str, ...]


def _notes(inputs: _Inputs, before: str | None) -> tuple[str, ...]:
    """What the user is told beside the result: an unsafe promotion, pins changed outside promote, a log that starts now."""
    entries = inputs.entries
    notes: list[str] = []
    if inputs.unsafe_without_rebuilders:
        notes.append("--unsafe-without-rebuilders: no independent rebuild was required; the log entry records it")
    if entries and entries[-1].pins_sha256 != before:
        notes.append(f"the pins were changed outside `attest promote` since log entry {entries[-1].sequence} (it wrote "
                     f"{entries[-1].pins_sha256}; the file was {before or 'absent'}); this entry records what it replaced")
    elif not entries and inputs.original is not None:
        notes.append("these pins had no promotion log; it starts with this entry")
    return tuple(notes)


def _write_promotion(pins_path: str, inputs: _Inputs, facts: PromotionFacts, plan: PromotionPlan, *, state: str, signer: Signer | KeylessSigner | Sequence[Signer],
                     fmt: str, clock: Callable[[], _dt.datetime], before_write: BeforeWrite | None) -> _Written:
    """Steps 8-10: exercise the candidate, append the log entry and write the pins, remember the log's head."""
    entries, original, accepted = inputs.entries, inputs.original, inputs.accepted
    before = sha256_of(original) if original is not None else None
    append = plan.write or not entries or entries[-1].pins_sha256 != before
    notes = _notes(inputs, before)
    # 8. The candidate, exercised before anything is written.
    fixture = None
    if append and before_write is not None:
        fixture = before_write(PromotionCandidate(pins_path, plan.data, state, inputs.policy, facts))
    # 9. A new log entry, then the new pins, over exactly the bytes read in step 2.
    if _read_pins(pins_path) != original:
        raise VerificationError(BuildCode.PROMOTION_REFUSED, "the pins file changed during the promotion; nothing written", pins_path)
    entry_path: str | None = None
    sequence: int | None = None
    if append:
        sequence = (entries[-1].number if entries else 0) + 1
        statement = entry_statement(sequence=sequence, previous=entries[-1].digest if entries else None,
                                    pins_name=os.path.basename(pins_path), pins_data=plan.data, pins_before=before,
                                    record=_log_record(facts, plan, inputs.policy, fixture), time=clock())
        signed = sign_statement(statement, signer, fmt=fmt)
        entry_path = append_entry(pins_path, sequence, signed)
        if plan.write:
            try:
                write_atomic(pins_path, plan.data, mode=0o644)
            except BaseException:
                remove_entry(entry_path)  # the pins were not written: the entry never happened
                raise
        accepted = accepted.extended(sequence, sha256_of(signed))
    # 10. This state directory remembers the head it wrote (or found): a later rollback or fork is refused.
    remember_log(accepted, state)
    return _Written(fixture, entry_path, sequence, notes)
