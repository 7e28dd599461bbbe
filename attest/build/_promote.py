"""Promotion: the release engineer's step from a full SHA to updated deployment pins.

Steps, each failing closed before the pins file is touched:

1. the revision is a full SHA (nothing else selects authority);
2. the pins file (if present) and the release policy parse strictly;
3. the runtime and the skill are built (or reused from the store) and attested;
4. both pass the rebuild check (identical name and inventory from another context);
5. every attestation verifies under the release policy and names the built tree;
6. the pins file is rewritten atomically, and only if it did not change meanwhile.

A failed promotion leaves the pins file byte-identical (or absent, if it was absent).

    >>> result = promote(toolchain_rev=sha, pins_path="pins.toml", signer=signer, policy_path="policy.toml", ...)
    >>> result.changes
"""

from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass
from typing import Any

from .._fs import read_bounded, write_atomic
from ..errors import Finding, InputError, VerificationError
from ..git import verify_full_sha
from ._attest import attest_build, file_digest
from ._codes import BuildCode
from ._rebuild import RebuildReport, rebuild_check
from ._recipe import RuntimeRecipe, SkillRecipe
from ._runtime import build_runtime
from ._sandbox import Sandbox
from ._skill import build_skill
from ._store import BuildResult

MAX_PINS_BYTES = 1 << 20
MANAGED = ("toolchain", "runtime", "skill")
_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+\Z")


def parse_pins(data: bytes | None, where: str) -> dict[str, Any]:
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


def dump_pins(doc: dict[str, Any]) -> bytes:
    """A small deterministic TOML writer for pins: scalars, arrays of scalars, nested tables."""
    lines = ["# Deployment pins. Rewritten by `attest promote`; keep this file outside every reviewed repository.", ""]

    def emit(table: dict[str, Any], prefix: str) -> None:
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


def _flatten(doc: dict[str, Any], prefix: str = "") -> dict[str, Any]:
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
    pins_path: str
    runtime: BuildResult
    skill: BuildResult
    rebuilds: tuple[RebuildReport, ...]
    changes: tuple[tuple[str, Any, Any], ...]   # (key, old, new)

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": True,
            "pins": self.pins_path,
            "runtime": self.runtime.to_json(),
            "skill": self.skill.to_json(),
            "changes": [{"key": k, "old": o, "new": n} for k, o, n in self.changes],
        }


def _verify_attestations(result: BuildResult, policy: Any) -> list[Finding]:
    from ..attestation import verify_attestation_file

    problems: list[Finding] = []
    if len(result.attestations) != 2:
        return [Finding(BuildCode.PROMOTION_REFUSED, result.name, "the build has no signed predicate and provenance")]
    for path in result.attestations:
        verified = verify_attestation_file(path, policy)
        subjects = verified.statement.get("subject", [])
        if len(subjects) != 1 or subjects[0].get("digest") != {"sha256": result.inventory.digest_hex}:
            problems.append(Finding(BuildCode.PROMOTION_REFUSED, path, "the attestation does not name the built tree"))
    return problems


def _require_confined(result: BuildResult) -> None:
    """Refuse a runtime whose build (or reused record) was not isolated and confined."""
    sandbox = result.inputs.get("sandbox") or {}
    if not (result.network_isolated and result.details.get("filesystem_confined") is True
            and sandbox.get("network_isolated") is True and sandbox.get("filesystem_confined") is True):
        raise VerificationError(BuildCode.PROMOTION_REFUSED, "the runtime was not built network-isolated and confined; "
                                "the pins are unchanged", result.name)


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
    original = read_bounded(pins_path, what="pins file", max_bytes=MAX_PINS_BYTES) if os.path.lexists(pins_path) else None
    old = parse_pins(original, pins_path)
    policy = load_policy(policy_path)
    # 3. Build (or reuse) and attest.
    runtime = attest_build(build_runtime(runtime_recipe, toolchain_rev, state, cache, sandbox, python=python), signer, state, fmt=fmt)
    _require_confined(runtime)
    skill = attest_build(build_skill(skill_recipe, skill_source, state, installer_rev=installer), signer, state, fmt=fmt)
    # 4. Reproducible from another context.
    reports = (
        rebuild_check(runtime_recipe, toolchain_rev, state, cache=cache, sandbox=sandbox, python=python, first=runtime),
        rebuild_check(skill_recipe, skill_source, state, installer_rev=installer, first=skill),
    )
    failed = [f for r in reports for f in r.findings]
    if failed:
        raise VerificationError(BuildCode.PROMOTION_REFUSED, "the rebuild check failed; the pins are unchanged", findings=failed)
    # 5. The attestations verify under the release policy.
    problems = _verify_attestations(runtime, policy) + _verify_attestations(skill, policy)
    if problems:
        raise VerificationError(findings=problems)
    # 6. New pins, written atomically over exactly the bytes read in step 2.
    new = dict(old)
    new["toolchain"] = {"repository": runtime_recipe.toolchain_repository, "revision": toolchain_rev}
    new["runtime"] = {
        "name": runtime.name,
        "inventory": runtime.inventory.identity,
        "interpreter": runtime.inputs["interpreter"]["executable"],
        "interpreter_sha256": runtime.inputs["interpreter"]["executable_sha256"],
        "python": runtime.inputs["interpreter"]["version"],
        "lock_sha256": runtime.inputs["lock"]["sha256"],
        "attestation": file_digest(runtime.attestations[0]),
        "provenance": file_digest(runtime.attestations[1]),
    }
    new["skill"] = {
        "name": skill.name,
        "inventory": skill.inventory.identity,
        "root": skill_recipe.root,
        "source_repository": skill_recipe.source_repository,
        "source_revision": skill_source,
        "installer_repository": skill_recipe.installer_repository,
        "installer_revision": installer,
        "attestation": file_digest(skill.attestations[0]),
        "provenance": file_digest(skill.attestations[1]),
    }
    data = dump_pins(new)
    now = read_bounded(pins_path, what="pins file", max_bytes=MAX_PINS_BYTES) if os.path.lexists(pins_path) else None
    if now != original:
        raise VerificationError(BuildCode.PROMOTION_REFUSED, "the pins file changed during the promotion; nothing written", pins_path)
    if tomllib.loads(data.decode()) != new:
        raise VerificationError(BuildCode.BAD_PINS, "the pins writer does not round-trip; nothing written", pins_path)
    if data != original:
        write_atomic(pins_path, data, mode=0o644)
    before, after = _flatten(old), _flatten(new)
    changes = tuple((k, before.get(k), after.get(k)) for k in sorted(set(before) | set(after)) if before.get(k) != after.get(k))
    return PromotionResult(pins_path, runtime, skill, reports, changes)
