"""Promotion: the release engineer's step from a full SHA to updated deployment pins.

Steps, each failing closed before the pins file is touched:

1. the revision is a full SHA (nothing else selects authority);
2. the pins file (if present) and the release policy parse strictly;
3. the runtime and the skill are built (or reused from the store) and attested;
4. both pass the rebuild check (identical name and inventory from another context);
5. every attestation verifies under the release policy and names the built tree;
6. the pins file is rewritten atomically, and only if it did not change meanwhile.

A failed promotion leaves the pins file byte-identical (or absent, if it was absent).

The decision itself is :func:`plan_promotion`, a pure function from the parsed pins and what
steps 1-5 established (:class:`PromotionFacts`) to the new pins (:class:`PromotionPlan`);
:func:`promote` does the reading, building, verifying and writing around it.

    >>> result = promote(toolchain_rev=sha, pins_path="pins.toml", signer=signer, policy_path="policy.toml", ...)
    >>> result.changes
    >>> plan = plan_promotion(parse_pins(data, "pins.toml"), facts, original=data, where="pins.toml")
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .._fs import read_bounded, write_atomic
from ..errors import Finding, InputError, VerificationError
from ..git import verify_full_sha
from ._attest import attest_build
from ._codes import BuildCode
from ._outputs import BuildResult
from ._rebuild import RebuildReport, rebuild_check
from ._recipe import RuntimeRecipe, SkillRecipe
from ._runtime import build_runtime
from ._sandbox import Sandbox
from ._skill import build_skill

if TYPE_CHECKING:
    from ..attestation import Policy, VerifiedStatement

MAX_PINS_BYTES = 1 << 20
MANAGED = ("toolchain", "runtime", "skill")
_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+\Z")


def parse_pins(data: bytes | None, where: str) -> dict[str, Any]:
    """Parse the bytes of a pins file (``None``: the file is absent, so no pins yet).

    Raises:
        InputError: ``BAD_PINS`` when the bytes are not UTF-8 TOML (duplicate keys included)
            or a managed key (``toolchain``, ``runtime``, ``skill``) is not a table.
    """
    if data is None:
        return {}
    try:
        doc = tomllib.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise InputError(BuildCode.BAD_PINS, f"the pins file is not valid UTF-8 TOML: {e}", where) from e
    for key in MANAGED:
        if key in doc and not isinstance(doc[key], dict):
            raise InputError(BuildCode.BAD_PINS, f"{key!r} must be a table", where)
    return doc


def _toml_value(v: Any, where: str) -> str:
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


def dump_pins(doc: Mapping[str, Any]) -> bytes:
    """A small deterministic TOML writer for pins: scalars, arrays of scalars, nested tables.

    Raises:
        InputError: ``BAD_PINS`` for a value it cannot write back faithfully (a float, a
            date, a string with control characters); the caller writes nothing then.
    """
    lines = ["# Deployment pins. Rewritten by `attest promote`; keep this file outside every reviewed repository.", ""]

    def emit(table: Mapping[str, Any], prefix: str) -> None:
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


def _flatten(doc: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in doc.items():
        key = f"{prefix}.{k}" if prefix else k
        if isinstance(v, dict):
            out.update(_flatten(v, key))
        else:
            out[key] = v
    return out


@dataclass(frozen=True, slots=True)
class PromotionResult:
    """A completed promotion: the builds, their rebuild checks, and every pin that changed."""

    pins_path: str
    runtime: BuildResult
    skill: BuildResult
    rebuilds: tuple[RebuildReport, ...]
    changes: tuple[tuple[str, Any, Any], ...]   # (key, old, new)

    def to_json(self) -> dict[str, Any]:
        """The ``--json`` object of ``attest promote``.

        Raises:
            Nothing: it only reads fields already validated.
        """
        return {
            "ok": True,
            "pins": self.pins_path,
            "runtime": self.runtime.to_json(),
            "skill": self.skill.to_json(),
            "changes": [{"key": k, "old": o, "new": n} for k, o, n in self.changes],
        }


@dataclass(frozen=True, slots=True)
class PromotionFacts:
    """What promotion steps 1-5 established: the input of :func:`plan_promotion`.

    ``runtime_attestations`` / ``skill_attestations`` are the verified statements of each
    build's ``attestations`` files, in the same order (predicate, then provenance); their
    ``attestation_digest`` (of the verified bytes) is what the pins record.
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


@dataclass(frozen=True, slots=True)
class PromotionPlan:
    """The decided new pins: the document, its exact bytes, what changes, whether to write."""

    pins: dict[str, Any] = field(hash=False)
    data: bytes
    changes: tuple[tuple[str, Any, Any], ...]   # (key, old, new), sorted by key
    write: bool   # False when the file already holds exactly ``data``


def _require_confined(result: BuildResult) -> None:
    """Refuse a runtime whose build (or reused record) was not isolated and confined."""
    sandbox = result.inputs.get("sandbox") or {}
    if not (result.network_isolated and result.details.get("filesystem_confined") is True
            and sandbox.get("network_isolated") is True and sandbox.get("filesystem_confined") is True):
        raise VerificationError(BuildCode.PROMOTION_REFUSED, "the runtime was not built network-isolated and confined; "
                                "the pins are unchanged", result.name)


def _require_reproducible(reports: tuple[RebuildReport, ...], *builds: BuildResult) -> None:
    """Refuse unless each of ``builds`` has a rebuild check and no check found a difference."""
    failed = [f for r in reports for f in r.findings]
    if failed:
        raise VerificationError(BuildCode.PROMOTION_REFUSED, "the rebuild check failed; the pins are unchanged", findings=failed)
    checked = {r.first.name for r in reports}
    for result in builds:
        if result.name not in checked:
            raise VerificationError(BuildCode.PROMOTION_REFUSED, "the build has no rebuild check; the pins are unchanged", result.name)


def _attestation_problems(result: BuildResult, verified: tuple[VerifiedStatement, ...]) -> list[Finding]:
    if len(result.attestations) != 2 or len(verified) != 2:
        return [Finding(BuildCode.PROMOTION_REFUSED, result.name, "the build has no signed predicate and provenance")]
    problems: list[Finding] = []
    for path, statement in zip(result.attestations, verified, strict=True):
        subjects = statement.statement.get("subject", [])
        if len(subjects) != 1 or subjects[0].get("digest") != {"sha256": result.inventory.digest_hex}:
            problems.append(Finding(BuildCode.PROMOTION_REFUSED, path, "the attestation does not name the built tree"))
    return problems


def plan_promotion(pins: Mapping[str, Any], facts: PromotionFacts, *, original: bytes | None, where: str) -> PromotionPlan:
    """Decide the new pins from the parsed current ``pins`` and the verified ``facts``; no I/O.

    ``original`` is the exact bytes the pins were parsed from (``None``: no pins file), so the
    plan can say whether anything needs writing; ``where`` names the pins file in errors.
    Keys other than ``toolchain``, ``runtime`` and ``skill`` are kept as they are.

    Raises:
        InputError: ``NOT_FULL_SHA`` when a revision in ``facts`` is not a full object id;
            ``BAD_PINS`` when a kept pin cannot be written back (a float, a date, control
            characters).
        VerificationError: ``PROMOTION_REFUSED`` when a build is of the wrong kind, the
            runtime was not built network-isolated and confined, the rebuild check found a
            difference (its findings attached) or did not check a build, or a build lacks its two
            verified attestations or one of them does not name the built tree;
            ``BAD_PINS`` when the written bytes would not parse back to the planned pins.
    """
    # Step 1: only full SHAs select authority, whoever assembled the facts.
    verify_full_sha(facts.toolchain_rev, what="toolchain revision")
    verify_full_sha(facts.skill_source_rev, what="skill source revision")
    verify_full_sha(facts.installer_rev, what="installer revision")
    runtime, skill = facts.runtime, facts.skill
    for result, kind in ((runtime, "runtime"), (skill, "skill")):
        if result.kind != kind:
            raise VerificationError(BuildCode.PROMOTION_REFUSED, f"the {kind} fact is a {result.kind!r} build", result.name)
    # Step 3: only a confined, network-isolated runtime is ever released.
    _require_confined(runtime)
    # Step 4: reproducible from another context.
    _require_reproducible(facts.rebuilds, runtime, skill)
    # Step 5: every attestation verified and names the built tree.
    problems = _attestation_problems(runtime, facts.runtime_attestations) + _attestation_problems(skill, facts.skill_attestations)
    if problems:
        raise VerificationError(findings=problems)
    # Step 6: the new pins; unmanaged keys are kept.
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
    changes = tuple((k, before.get(k), after.get(k)) for k in sorted(set(before) | set(after)) if before.get(k) != after.get(k))
    return PromotionPlan(new, data, changes, data != original)


def _read_pins(pins_path: str) -> bytes | None:
    return read_bounded(pins_path, what="pins file", max_bytes=MAX_PINS_BYTES) if os.path.lexists(pins_path) else None


def _verified(result: BuildResult, policy: Policy) -> tuple[VerifiedStatement, ...]:
    from ..attestation import verify_attestation_file

    if len(result.attestations) != 2:
        return ()  # plan_promotion refuses it
    return tuple(verify_attestation_file(path, policy) for path in result.attestations)


def promote(
    *,
    toolchain_rev: str,
    pins_path: str,
    signer: Any,
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
) -> PromotionResult:
    """Build, rebuild-check and verify the runtime and skill at full SHAs, then update the pins.

    Raises:
        InputError: ``NOT_FULL_SHA`` for a revision that is not a full object id;
            ``BAD_PINS`` for a pins file that does not parse or cannot be written back;
            the policy's codes (``BAD_POLICY``, ``POLICY_*``, ``UNREADABLE``, ...) and the
            builders' input codes (``NOT_IN_CACHE``, ``BAD_LOCK``, ...).
        VerificationError: ``PROMOTION_REFUSED`` (unconfined sandbox or runtime, a failed
            rebuild check, an attestation that does not name the tree, the pins file changed
            meanwhile), an attestation's verification codes (``THRESHOLD_NOT_MET``, ...).
        EnvironmentFailure: a build guarantee that cannot be established here.
    """
    from ..attestation import load_policy

    # 1. Full SHAs only.
    verify_full_sha(toolchain_rev, what="toolchain revision")
    skill_source = skill_rev or toolchain_rev
    installer = installer_rev or toolchain_rev
    verify_full_sha(skill_source, what="skill source revision")
    verify_full_sha(installer, what="installer revision")
    # Only a confined, network-isolated build is ever promoted (--allow-network-unisolated
    # may build, never release).
    if not (sandbox.network_isolated and sandbox.filesystem_confined):
        raise VerificationError(BuildCode.PROMOTION_REFUSED, "promotion needs a network-isolated, confined sandbox; "
                                "this one is not (the pins are unchanged)", pins_path)
    # 2. Pins and policy, read once.
    original = _read_pins(pins_path)
    old = parse_pins(original, pins_path)
    policy = load_policy(policy_path)
    # 3. Build (or reuse) and attest.
    runtime = attest_build(build_runtime(runtime_recipe, toolchain_rev, state, cache, sandbox, python=python), signer, state, fmt=fmt)
    _require_confined(runtime)  # plan_promotion decides this too; refusing now saves the skill build
    skill = attest_build(build_skill(skill_recipe, skill_source, state, installer_rev=installer), signer, state, fmt=fmt)
    # 4. Reproducible from another context.
    reports = (
        rebuild_check(runtime_recipe, toolchain_rev, state, cache=cache, sandbox=sandbox, python=python, first=runtime),
        rebuild_check(skill_recipe, skill_source, state, installer_rev=installer, first=skill),
    )
    _require_reproducible(reports, runtime, skill)  # decided again by plan_promotion; refused before any verification
    # 5. The attestations verify under the release policy (the pins record the digest of the verified bytes).
    facts = PromotionFacts(
        toolchain_repository=runtime_recipe.toolchain_repository, toolchain_rev=toolchain_rev,
        runtime=runtime, runtime_attestations=_verified(runtime, policy),
        skill=skill, skill_attestations=_verified(skill, policy),
        skill_root=skill_recipe.root, skill_source_repository=skill_recipe.source_repository, skill_source_rev=skill_source,
        installer_repository=skill_recipe.installer_repository, installer_rev=installer, rebuilds=reports,
    )
    plan = plan_promotion(old, facts, original=original, where=pins_path)
    # 6. New pins, written atomically over exactly the bytes read in step 2.
    if _read_pins(pins_path) != original:
        raise VerificationError(BuildCode.PROMOTION_REFUSED, "the pins file changed during the promotion; nothing written", pins_path)
    if plan.write:
        write_atomic(pins_path, plan.data, mode=0o644)
    return PromotionResult(pins_path, runtime, skill, reports, plan.changes)
