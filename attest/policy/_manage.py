"""``attest policy check`` (the managed check) and ``attest policy generate``.

Both read the root once into an :class:`Observed` (config, lock, every file they judge,
the generated Skill tree), then decide with pure functions: :func:`decide_check` lists what
keeps the tree from being exactly what its authority generates; :func:`plan_generation`
decides what to write and what may be removed. ``check`` never writes and reads nothing
outside the root; ``generate`` writes only after the whole plan is clear, and only removes
a file whose bytes still equal the digest the lock recorded for it.

    >>> report = check_policy(".")           # raises VerificationError listing every problem
    >>> [o.path for o in report.outputs]
    >>> generate_policy(".").written
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .._safefs import Kind
from ..errors import Finding, InputError, VerificationError
from ..inventory import sort_key
from ._codes import PolicyCode
from ._config import MAX_CONFIG_BYTES, PR_REVIEW_SKILL_V1, PolicyConfig
from ._lock import MAX_LOCK_BYTES, LockedInput, PolicyLock, check_agreement, make_lock
from ._paths import CONFIG_PATH, LOCK_PATH, SKILL_DIR, PathRole
from ._render import Rendered, planned_outputs, render_outputs
from ._tree import RepositoryRoot

MAX_MODULE_BYTES = 1024 * 1024
MAX_OUTPUT_BYTES = 64 * 1024 * 1024
_MISSING = frozenset({PolicyCode.INPUT_MISSING, PolicyCode.OUTPUT_MISSING})


def _shown(path: str) -> str:
    """``path`` as text a report can carry, whatever bytes the file system gave (JSON and terminals need UTF-8)."""
    return path.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _missing(value: bytes | Finding) -> bool:
    return isinstance(value, Finding) and value.code in _MISSING


@dataclass(frozen=True, slots=True)
class Observed:
    """What ``check`` and ``generate`` judge, as read from the root: the pure decisions' only input."""

    config: PolicyConfig
    lock: PolicyLock | None                 # None: no lock file
    files: Mapping[str, bytes | Finding]    # every module, output, locked or stale path: its bytes or why not
    roles: Mapping[str, PathRole]
    skill_tree: tuple[tuple[str, Kind], ...]
    tree_findings: tuple[Finding, ...]

    def removal_candidates(self) -> list[str]:
        """Paths that may hold a generated file no longer wanted: locked, disabled, or in the Skill tree."""
        wanted = {p for p, _, _ in planned_outputs(self.config)}
        found = {o.path for o in self.lock.outputs} if self.lock is not None else set()
        found |= {o.path for o in self.config.outputs if not o.enabled}
        found |= {p for p, k in self.skill_tree if k is not Kind.DIR}
        return sorted(found - wanted, key=sort_key)


def observe(root: RepositoryRoot, *, lock_required: bool) -> Observed:
    """Read everything the decisions need from ``root`` (through its descriptors only)."""
    raw = root.read(CONFIG_PATH, PathRole.CONFIG, max_bytes=MAX_CONFIG_BYTES)
    if isinstance(raw, Finding):
        if raw.code == PolicyCode.CONFIG_MISSING:
            raise InputError(PolicyCode.CONFIG_MISSING, f"no {CONFIG_PATH} at the root {root.path}", CONFIG_PATH)
        raise VerificationError(findings=[raw])
    config = PolicyConfig.from_bytes(raw)
    tree_findings: list[Finding] = []
    lock: PolicyLock | None = None
    raw_lock = root.read(LOCK_PATH, PathRole.LOCK, max_bytes=MAX_LOCK_BYTES)
    if isinstance(raw_lock, bytes):
        lock = PolicyLock.from_bytes(raw_lock)
    elif raw_lock.code != PolicyCode.LOCK_MISSING or lock_required:
        tree_findings.append(raw_lock)
    roles: dict[str, PathRole] = {m: PathRole.MODULE for m in config.inputs}
    for o in config.outputs:
        roles[o.path] = PathRole.OUTPUT
    for path, renderer, _ in planned_outputs(config):
        roles[path] = PathRole.SKILL if renderer == PR_REVIEW_SKILL_V1 else PathRole.OUTPUT
    for locked in lock.outputs if lock is not None else ():
        roles.setdefault(locked.path, PathRole.SKILL if locked.renderer == PR_REVIEW_SKILL_V1 else PathRole.OUTPUT)
    entries, listing = root.list_skill_tree()
    tree_findings += listing
    for path, kind in entries:
        if kind is not Kind.DIR:
            roles.setdefault(path, PathRole.SKILL)
    files: dict[str, bytes | Finding] = {}
    for path, role in roles.items():
        files[path] = root.read(path, role, max_bytes=MAX_MODULE_BYTES if role is PathRole.MODULE else MAX_OUTPUT_BYTES)
    return Observed(config, lock, files, roles, tuple(entries), tuple(tree_findings))


def _modules(obs: Observed, found: list[Finding]) -> dict[str, bytes] | None:
    """The modules' bytes, or None (with the reasons in ``found``) when any is unusable."""
    modules: dict[str, bytes] = {}
    for path in obs.config.inputs:
        value = obs.files[path]
        if isinstance(value, Finding):
            found.append(value)
            continue
        try:
            value.decode("utf-8")
        except UnicodeDecodeError as e:
            found.append(Finding(PolicyCode.MODULE_NOT_UTF8, path, f"not UTF-8: {e.reason} at byte {e.start}"))
            continue
        modules[path] = value
    return modules if len(modules) == len(obs.config.inputs) else None


def _skill_tree_findings(obs: Observed, wanted: set[str]) -> list[Finding]:
    """Links, special files and extra directories in the generator's closed Skill tree."""
    found = list(obs.tree_findings)
    needed_dirs = {"/".join(p.split("/")[:i]) for p in wanted for i in range(1, p.count("/") + 1)}
    # Every other entry (a file, a link, a FIFO) is a removal candidate or an output, judged there;
    # a directory is reported only when nothing below it is.
    parents = {"/".join(p.split("/")[:i]) for p, _ in obs.skill_tree for i in range(1, p.count("/") + 1)}
    for path, kind in obs.skill_tree:
        if kind is Kind.DIR and path not in needed_dirs and path not in parents:
            found.append(Finding(PolicyCode.OUTPUT_UNLISTED, path, f"a directory in {SKILL_DIR}/ that no generated file needs"))
    return found


def decide_check(obs: Observed) -> tuple[list[Finding], tuple[Rendered, ...]]:
    """Every reason ``obs`` is not exactly what its authority generates, and what was reproduced. Pure."""
    config, lock = obs.config, obs.lock
    found: list[Finding] = []
    modules = _modules(obs, found)
    # (1) the lock agrees with the configuration and with the inputs' bytes.
    if lock is not None:
        found += check_agreement(config, lock, planned_outputs(config))
        for path in config.inputs:
            value, locked = obs.files[path], lock.input(path)
            if isinstance(value, bytes) and locked is not None and _sha(value) != locked.sha256:
                found.append(Finding(PolicyCode.INPUT_DIGEST_MISMATCH, path,
                                     f"the module's SHA-256 is {_sha(value)}; the lock records {locked.sha256}"))
    # (2) every output is byte for byte what the renderers make of the inputs now.
    rendered = render_outputs(config, modules) if modules is not None else ()
    for r in rendered:
        value = obs.files[r.path]
        locked_out = lock.output(r.path) if lock is not None else None
        if isinstance(value, Finding):
            found.append(value)
        elif value != r.data:
            if locked_out is not None and _sha(value) == locked_out.sha256:
                found.append(Finding(PolicyCode.OUTPUT_STALE, r.path,
                                     "generated from other inputs or by another renderer version; run `attest policy generate`"))
            else:
                found.append(Finding(PolicyCode.OUTPUT_MODIFIED, r.path,
                                     "differs from what its renderer makes and from what the lock records: edited by hand?"))
        elif locked_out is not None and locked_out.sha256 != r.sha256:
            found.append(Finding(PolicyCode.LOCK_STALE, r.path, f"the lock records {locked_out.sha256}; the output is {r.sha256}"))
    # (3) no generated file is left that nothing generates any more.
    for path in obs.removal_candidates():
        value = obs.files[path]
        if isinstance(value, bytes):
            found.append(Finding(PolicyCode.OUTPUT_UNLISTED, path,
                                 "a generated file that is no longer configured and enabled; `attest policy generate` removes it"))
        elif not _missing(value):
            found.append(value)
    found += _skill_tree_findings(obs, {p for p, _, _ in planned_outputs(config)})
    return _unique(found), rendered


def _unique(found: list[Finding]) -> list[Finding]:
    seen: set[tuple[str, str | None, str]] = set()
    out = []
    for f in found:
        key = (str(f.code), f.path, f.detail)
        if key not in seen:
            seen.add(key)
            out.append(f)
    return out


@dataclass(frozen=True, slots=True)
class GenerationPlan:
    """What ``generate`` will do; built only when nothing is in the way."""

    writes: tuple[Rendered, ...]
    unchanged: tuple[str, ...]
    removals: tuple[tuple[str, PathRole, str], ...]   # (path, role, SHA-256 it must still have)
    lock: PolicyLock
    write_lock: bool


def plan_generation(obs: Observed) -> GenerationPlan:
    """Decide every write and removal of ``generate``, or raise with everything in the way. Pure.

    A file is replaced or removed only when it is absent, already right, or still exactly
    the bytes the lock recorded for it (pristine); anything else (edited, never generated,
    a link, a special file) is reported and left alone.
    """
    config, lock = obs.config, obs.lock
    found: list[Finding] = list(obs.tree_findings)
    modules = _modules(obs, found)
    if modules is None:
        raise VerificationError(findings=found)

    def pristine(path: str, data: bytes) -> bool:
        locked = lock.output(path) if lock is not None else None
        return locked is not None and locked.sha256 == _sha(data)

    rendered = render_outputs(config, modules)
    writes, unchanged = [], []
    for r in rendered:
        value = obs.files[r.path]
        if isinstance(value, bytes) and value == r.data:
            unchanged.append(r.path)
        elif _missing(value) or (isinstance(value, bytes) and pristine(r.path, value)):
            writes.append(r)
        elif isinstance(value, bytes):
            found.append(Finding(PolicyCode.UNOWNED_FILE, r.path,
                                 "not the file generate wrote (edited, or never generated): not replaced; move it away and rerun"))
        else:
            found.append(value)
    removals = []
    for path in obs.removal_candidates():
        value = obs.files[path]
        if isinstance(value, bytes):
            if pristine(path, value):
                removals.append((path, obs.roles[path], _sha(value)))
            else:
                found.append(Finding(PolicyCode.UNOWNED_FILE, path,
                                     "no longer generated, but not the bytes generate wrote (edited, or never generated): not removed"))
        elif not _missing(value):
            found.append(value)
    if found:
        raise VerificationError(findings=_unique(found))
    new_lock = make_lock(config, {p: _sha(modules[p]) for p in config.inputs}, [r.locked() for r in rendered])
    write_lock = lock is None or lock.to_bytes() != new_lock.to_bytes()
    return GenerationPlan(tuple(writes), tuple(unchanged), tuple(removals), new_lock, write_lock)


@dataclass(frozen=True, slots=True)
class CheckReport:
    """A passed managed check: what was verified and every output it reproduced."""

    root: str
    config_sha256: str
    lock: PolicyLock
    outputs: tuple[Rendered, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": True,
            "root": _shown(self.root),
            "config": {"path": CONFIG_PATH, "sha256": self.config_sha256},
            "lock": {"path": LOCK_PATH, "sha256": self.lock.sha256},
            "toolchain": self.lock.toolchain.to_json(),
            "inputs": [i.to_json() for i in self.lock.inputs],
            "outputs": [{"path": o.path, "renderer": o.renderer, "context": o.context, "sha256": o.sha256} for o in self.outputs],
        }

    @property
    def inputs(self) -> tuple[LockedInput, ...]:
        return self.lock.inputs


@dataclass(frozen=True, slots=True)
class GenerateReport:
    """What ``generate`` did; ``check`` passed on the result."""

    root: str
    written: tuple[str, ...]
    unchanged: tuple[str, ...]
    removed: tuple[str, ...]
    lock_written: bool
    check: CheckReport

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": True,
            "root": _shown(self.root),
            "written": list(self.written),
            "unchanged": list(self.unchanged),
            "removed": list(self.removed),
            "lock": {"path": LOCK_PATH, "sha256": self.check.lock.sha256, "written": self.lock_written},
            "outputs": self.check.to_json()["outputs"],
        }


def check_policy(root: str | os.PathLike[str]) -> CheckReport:
    """The managed check of the repository at ``root``: raises unless everything reproduces exactly.

    Reads only below ``root`` (never the current directory, never the network) and never
    writes, so it runs on a read-only tree or a frozen snapshot.
    """
    with RepositoryRoot.open(root) as tree:
        obs = observe(tree, lock_required=True)
        found, rendered = decide_check(obs)
        if found:
            raise VerificationError(findings=found)
        if obs.lock is None:  # unreachable: a missing lock is a finding above
            raise VerificationError(PolicyCode.LOCK_MISSING, "no lock", LOCK_PATH)
        return CheckReport(tree.path, obs.config.sha256, obs.lock, rendered)


def generate_policy(root: str | os.PathLike[str]) -> GenerateReport:
    """Render every enabled output and the Skill, write them and then the lock; then check the result."""
    with RepositoryRoot.open(root) as tree:
        plan = plan_generation(observe(tree, lock_required=False))
        for r in plan.writes:
            tree.write(r.path, r.data)
        removed = [path for path, role, sha in plan.removals if tree.remove_if(path, role, sha)]
        tree.remove_empty_skill_dirs()
        if plan.write_lock:
            # Last: an interrupted run leaves the old lock, which `check` then refuses.
            tree.write(LOCK_PATH, plan.lock.to_bytes())
        path = tree.path
    report = check_policy(path)
    return GenerateReport(path, tuple(r.path for r in plan.writes), plan.unchanged, tuple(removed), plan.write_lock, report)


__all__ = [
    "CheckReport",
    "GenerateReport",
    "GenerationPlan",
    "Observed",
    "check_policy",
    "decide_check",
    "generate_policy",
    "observe",
    "plan_generation",
]
