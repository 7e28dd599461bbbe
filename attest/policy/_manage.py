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

from .._safefs import Kind
from ..errors import CommonCode, Finding, InputError, VerificationError
from ..inventory import sort_key
from ._codes import PolicyCode
from ._config import MAX_CONFIG_BYTES, PR_REVIEW_SKILL_V1, PolicyConfig
from ._lock import MAX_LOCK_BYTES, LockedInput, PolicyLock, check_agreement, make_lock
from ._paths import CONFIG_PATH, LOCK_PATH, SKILL_DIR, PathRole
from ._render import Rendered, carries_marker, planned_outputs, render_outputs, rendered_sizes
from ._tree import FileDigest, ReadBudget, RepositoryRoot

MAX_MODULE_BYTES = 1024 * 1024
MAX_OUTPUT_BYTES = 64 * 1024 * 1024
# All files one run reads together, and all it renders together: with the per-file bounds
# alone, 256 modules of 1 MiB in 64 outputs would be 16 GiB rendered.
MAX_TOTAL_READ_BYTES = 64 * 1024 * 1024
MAX_TOTAL_RENDER_BYTES = 64 * 1024 * 1024
_MISSING = frozenset({PolicyCode.INPUT_MISSING, PolicyCode.OUTPUT_MISSING})


def _shown(path: str) -> str:
    """``path`` as text a report can carry, whatever bytes the file system gave (JSON and terminals need UTF-8)."""
    return path.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _missing(value: bytes | FileDigest | Finding) -> bool:
    return isinstance(value, Finding) and value.code in _MISSING


@dataclass(frozen=True, slots=True)
class Observed:
    """What ``check`` and ``generate`` judge, as read from the root: the pure decisions' only input."""

    config: PolicyConfig
    lock: PolicyLock | None                 # None: no lock file
    # Every module (its bytes), and every output, locked or stale path (its digest), or why not.
    files: Mapping[str, bytes | FileDigest | Finding]
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
    """Read everything the decisions need from ``root`` (through its descriptors only).

    Modules are kept (they are rendered); every other file is hashed as a stream and only its
    digest and first bytes kept. Everything read together is bounded by MAX_TOTAL_READ_BYTES.

    Problems of the tree (a missing module, a link, a file over a bound) are collected into
    ``tree_findings`` and the file map for the decisions, not raised.

    Raises:
        InputError: ``CONFIG_MISSING``; every code of :meth:`PolicyConfig.from_bytes` and
            :meth:`PolicyLock.from_bytes` (``YAML_*``, ``CONFIG_*``, ``LOCK_INVALID``,
            ``NOT_CANONICAL``, ...).
        VerificationError: the configuration file is there but not a plain regular file
            (``PATH_SYMLINK``, ``PATH_NOT_REGULAR``, ...), or a read bound is exceeded
            (``TOO_LARGE``).
    """
    budget = ReadBudget(MAX_TOTAL_READ_BYTES)
    raw = root.read(CONFIG_PATH, PathRole.CONFIG, max_bytes=MAX_CONFIG_BYTES, budget=budget)
    if isinstance(raw, Finding):
        if raw.code == PolicyCode.CONFIG_MISSING:
            raise InputError(PolicyCode.CONFIG_MISSING, f"no {CONFIG_PATH} at the root {root.path}", CONFIG_PATH)
        raise VerificationError(findings=[raw])
    config = PolicyConfig.from_bytes(raw)
    tree_findings: list[Finding] = []
    lock: PolicyLock | None = None
    raw_lock = root.read(LOCK_PATH, PathRole.LOCK, max_bytes=MAX_LOCK_BYTES, budget=budget)
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
    # No entry on the way to an authority path may be another spelling of it (.AGENTS, docs/Review).
    listings: dict[str, dict[str, list[str]]] = {}
    for path in sorted({CONFIG_PATH, LOCK_PATH, f"{SKILL_DIR}/SKILL.md", *roles}, key=sort_key):
        tree_findings += root.shadows(path, listings)
    files: dict[str, bytes | FileDigest | Finding] = {}
    for path, role in roles.items():
        if role is PathRole.MODULE:
            files[path] = root.read(path, role, max_bytes=MAX_MODULE_BYTES, budget=budget)
        else:
            files[path] = root.digest(path, role, max_bytes=MAX_OUTPUT_BYTES, budget=budget)
    return Observed(config, lock, files, roles, tuple(entries), tuple(_unique(tree_findings)))


def _modules(obs: Observed, found: list[Finding]) -> dict[str, bytes] | None:
    """The modules' bytes, or None (with the reasons in ``found``) when any is unusable."""
    modules: dict[str, bytes] = {}
    for path in obs.config.inputs:
        value = obs.files[path]
        if not isinstance(value, bytes):
            found.append(value if isinstance(value, Finding) else Finding(PolicyCode.PATH_CONFLICT, path, "also an output"))
            continue
        try:
            value.decode("utf-8")
        except UnicodeDecodeError as e:
            found.append(Finding(PolicyCode.MODULE_NOT_UTF8, path, f"not UTF-8: {e.reason} at byte {e.start}"))
            continue
        modules[path] = value
    return modules if len(modules) == len(obs.config.inputs) else None


def _render(config: PolicyConfig, modules: Mapping[str, bytes], found: list[Finding]) -> tuple[Rendered, ...]:
    """Every output, rendered only once its exact size is known to be within the bounds."""
    sizes = rendered_sizes(config, {p: (len(d), d.endswith(b"\n")) for p, d in modules.items()})
    before = len(found)
    for path, size in sizes:
        if size > MAX_OUTPUT_BYTES:
            found.append(Finding(CommonCode.TOO_LARGE, path, f"would be {size} bytes; the limit of an output is {MAX_OUTPUT_BYTES}"))
    total = sum(size for _, size in sizes)
    if total > MAX_TOTAL_RENDER_BYTES:
        found.append(Finding(CommonCode.TOO_LARGE, CONFIG_PATH,
                             f"the outputs would be {total} bytes together; the limit is {MAX_TOTAL_RENDER_BYTES}"))
    return render_outputs(config, modules) if len(found) == before else ()


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
    """Every reason ``obs`` is not exactly what its authority generates, and what was reproduced. Pure.

    Raises:
        Nothing: every reason is a returned finding (``INPUT_DIGEST_MISMATCH``,
        ``OUTPUT_STALE``, ``OUTPUT_MODIFIED``, ``OUTPUT_UNLISTED``, ``LOCK_STALE``, the lock
        agreement's and the tree's codes); ``([], rendered)`` when everything reproduces.
    """
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
    rendered = _render(config, modules, found) if modules is not None else ()
    for r in rendered:
        value = obs.files[r.path]
        locked_out = lock.output(r.path) if lock is not None else None
        if not isinstance(value, FileDigest):
            found.append(value if isinstance(value, Finding) else Finding(PolicyCode.PATH_CONFLICT, r.path, "also a module"))
        elif value.sha256 != r.sha256:   # SHA-256: equal digests are equal bytes
            if locked_out is not None and value.sha256 == locked_out.sha256:
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
        if not isinstance(value, Finding):
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


def owned_by_generate(obs: Observed, path: str, value: FileDigest) -> bool:
    """Whether ``generate`` may replace or remove the file at ``path``: one it wrote, by every sign it has.

    The lock is repository data a pull request controls, so its digest alone proves nothing
    (anyone knows the digest of README.md or of an empty file). All three must hold: (1) the
    bytes are the lock's digest for ``path``; (2) they carry the generated-file marker of the
    renderer the lock names; (3) ``path`` is generate's territory: the Skill tree, or an output
    the configuration names (enabled or not) or the previous generation recorded in the lock.
    """
    if obs.lock is None:
        return False
    locked = obs.lock.output(path)
    if locked is None or locked.sha256 != value.sha256:
        return False
    if not carries_marker(locked.renderer, value.head):
        return False
    if locked.renderer == PR_REVIEW_SKILL_V1:
        return path.startswith(f"{SKILL_DIR}/")
    return any(o.path == path for o in obs.config.outputs) or any(o.path == path for o in obs.lock.outputs)


def _foreign_empty_dirs(obs: Observed, wanted: set[str]) -> list[Finding]:
    """Empty directories of the Skill tree that no generated file needs: generate did not make them."""
    needed = {"/".join(p.split("/")[:i]) for p in wanted for i in range(1, p.count("/") + 1)}
    parents = {"/".join(p.split("/")[:i]) for p, _ in obs.skill_tree for i in range(1, p.count("/") + 1)}
    return [Finding(PolicyCode.UNOWNED_FILE, path, "an empty directory generate did not create: not removed; remove it and rerun")
            for path, kind in obs.skill_tree if kind is Kind.DIR and path not in needed and path not in parents]


def plan_generation(obs: Observed) -> GenerationPlan:
    """Decide every write and removal of ``generate``, or raise with everything in the way. Pure.

    A file is replaced or removed only when it is absent, already right, or one generate wrote
    (:func:`owned_by_generate`); anything else (edited, never generated, a link, a special
    file, an empty directory it did not create) is reported and left alone.

    Raises:
        VerificationError: with every finding at once: the tree's (``INPUT_MISSING``,
            ``MODULE_NOT_UTF8``, ``PATH_SYMLINK``, ...) and ``UNOWNED_FILE`` for a file or
            empty directory generate did not write.
    """
    config, lock = obs.config, obs.lock
    found: list[Finding] = list(obs.tree_findings)
    modules = _modules(obs, found)
    if modules is None:
        raise VerificationError(findings=found)
    rendered = _render(config, modules, found)
    writes, unchanged = [], []
    for r in rendered:
        value = obs.files[r.path]
        if isinstance(value, FileDigest) and value.sha256 == r.sha256:
            unchanged.append(r.path)
        elif _missing(value) or (isinstance(value, FileDigest) and owned_by_generate(obs, r.path, value)):
            writes.append(r)
        elif isinstance(value, FileDigest):
            found.append(Finding(PolicyCode.UNOWNED_FILE, r.path,
                                 "not the file generate wrote (edited, or never generated): not replaced; move it away and rerun"))
        elif isinstance(value, Finding):
            found.append(value)
    removals = []
    for path in obs.removal_candidates():
        value = obs.files[path]
        if isinstance(value, FileDigest):
            if owned_by_generate(obs, path, value):
                removals.append((path, obs.roles[path], value.sha256))
            else:
                found.append(Finding(PolicyCode.UNOWNED_FILE, path,
                                     "no longer generated, but not the bytes generate wrote (edited, or never generated): not removed"))
        elif isinstance(value, Finding) and not _missing(value):
            found.append(value)
    found += _foreign_empty_dirs(obs, {p for p, _, _ in planned_outputs(config)})
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

    def to_json(self) -> dict[str, object]:
        """The ``--json`` object of ``attest policy check``.

        Raises:
            Nothing: it only reads fields.
        """
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

    def to_json(self) -> dict[str, object]:
        """The ``--json`` object of ``attest policy generate``.

        Raises:
            Nothing: it only reads fields.
        """
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

    Raises despite its name (a ``check_*`` in the naming rule).

    Raises:
        InputError: ``BAD_ROOT`` (a root that is absent, not a directory, or spelled with
            ``.``/``..``); every input code of :func:`observe` (``CONFIG_MISSING``, ``YAML_*``,
            ``CONFIG_*``, ``LOCK_INVALID``, ...).
        VerificationError: ``ROOT_SYMLINK`` (a link in the root's path); every finding of
            :func:`decide_check` at once (``LOCK_MISSING``,
            ``OUTPUT_MODIFIED``, ``OUTPUT_STALE``, ``LOCK_STALE``, ``INPUT_DIGEST_MISMATCH``,
            ``PATH_SYMLINK``, ...).
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
    """Render every enabled output and the Skill, write them and then the lock; then check the result.

    Raises:
        InputError: ``BAD_ROOT`` and the codes of :func:`observe`; ``BAD_OUTPUT_PATH`` when
            a file cannot be written or removed.
        VerificationError: every finding of :func:`plan_generation` (nothing is written then);
            a link swapped in while writing (``PATH_SYMLINK``, ...); and every finding of
            :func:`check_policy` on the result.
    """
    with RepositoryRoot.open(root) as tree:
        plan = plan_generation(observe(tree, lock_required=False))
        for r in plan.writes:
            tree.write(r.path, r.data)
        removed = [path for path, role, sha in plan.removals if tree.remove_if(path, role, sha, max_bytes=MAX_OUTPUT_BYTES)]
        # Only directories of the Skill tree that the removals emptied; never one generate did not empty.
        tree.remove_emptied_dirs({"/".join(p.split("/")[:i]) for p in removed if p.startswith(f"{SKILL_DIR}/")
                                  for i in range(SKILL_DIR.count("/") + 1, p.count("/") + 1)})
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
    "owned_by_generate",
    "plan_generation",
]
