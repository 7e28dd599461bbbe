"""Review output binding (docs/review.md "Output bindings"): the two projections a review uses, judged (pure).

The invocation names two repository-relative paths of the frozen trusted base: the
provider-neutral semantic projection (``--semantic``) and the adapter projection (``--adapter``).
:func:`decide_bindings` judges them against the base's configuration, its lock and the outputs
the bootstrap's managed check reproduced (the handoff's ``outputs``), and returns every problem;
:func:`bind_outputs` returns the :class:`Bindings` or raises. Nothing is inferred: no context is
guessed from a name, no path is normalized, no output is chosen among several.

    >>> decide_bindings(config, lock, reproduced, "docs/review/policy-context.md", "docs/review/github-review.json")
    []
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..._shape import Shape
from ...errors import Finding, VerificationError
from ...inventory._names import collision_key
from ..bootstrap import ReproducedOutput
from ..handoff import HandoffCode
from ._codes import BindingCode

if TYPE_CHECKING:
    from ..._safefs import Kind
    from ...policy import PolicyConfig, PolicyLock

#: The adapter-only renderers a review can serialize with (one today).
SUPPORTED_ADAPTERS = frozenset({"github-review-json-adapter-v1"})
SEMANTIC_RENDERER = "policy-context-md"
ROLES = ("semantic", "adapter")
_HEX64 = re.compile(r"[0-9a-f]{64}\Z")


@dataclass(frozen=True, slots=True)
class Binding:
    """One bound projection: its role, the configured and locked output, and the locked digest.

    Raises:
        Nothing: made by :func:`bind_outputs` once every check passed.
    """

    role: str
    path: str
    renderer: str
    context: str
    sha256: str

    def to_json(self) -> dict[str, object]:
        return {"path": self.path, "renderer": self.renderer, "context": self.context, "sha256": self.sha256}


@dataclass(frozen=True, slots=True)
class Bindings:
    semantic: Binding
    adapter: Binding

    @property
    def context(self) -> str:
        return self.semantic.context


def parse_reproduced_outputs(predicate: object) -> tuple[ReproducedOutput, ...]:
    """The handoff predicate's ``outputs`` (what step 6 of the bootstrap reproduced), strictly (pure).

    Raises:
        VerificationError: ``HANDOFF_MALFORMED`` unless it is a list of ``{path, renderer, context, sha256}``.
    """

    def bad(detail: str) -> VerificationError:
        return VerificationError(HandoffCode.HANDOFF_MALFORMED, detail)

    out: list[ReproducedOutput] = []
    for o in Shape(predicate, "handoff", bad).list_of("outputs"):
        o.object(("path", "renderer", "context", "sha256"))
        out.append(ReproducedOutput(o.string("path"), o.string("renderer"), o.optional_string("context", present=True),
                                    o.string("sha256", pattern=_HEX64, expected="64 lowercase hex digits")))
    return tuple(out)


def _want(role: str) -> str:
    return SEMANTIC_RENDERER if role == "semantic" else "a supported adapter renderer (" + ", ".join(sorted(SUPPORTED_ADAPTERS)) + ")"


def _judge_renderer(role: str, path: str, renderer: str) -> Finding | None:
    ok = renderer == SEMANTIC_RENDERER if role == "semantic" else renderer in SUPPORTED_ADAPTERS
    if ok:
        return None
    other = renderer in SUPPORTED_ADAPTERS if role == "semantic" else renderer == SEMANTIC_RENDERER
    if other:
        return Finding(BindingCode.REVIEW_BINDING_ROLE_SWAPPED, path, f"--{role} names the output of {renderer}, the other role's "
                       f"renderer; the {role} projection must be {_want(role)}")
    return Finding(BindingCode.REVIEW_BINDING_UNSUPPORTED, path, f"the output's renderer {renderer!r} is not {_want(role)}")


def _judge_one(role: str, path: str, config: PolicyConfig, lock: PolicyLock, reproduced: Sequence[ReproducedOutput],
               kinds: Sequence[Kind | None] | None) -> tuple[list[Finding], Binding | None]:
    # lazy: attest.policy, +25 ms to importing review.procedure, which the merge gate imports (run records, the record's constants) and never needs it
    from ...policy import PathRole, PolicyCode, check_authority_path

    # (1) the path's spelling: one spelling, repository-relative, confined, outside every reserved namespace.
    problem = check_authority_path(path, PathRole.OUTPUT)
    if problem is not None:
        return [Finding(BindingCode.REVIEW_BINDING_UNSAFE, path, f"--{role} is not a safe output path ({problem.code})"), problem], None
    # (2) exactly one configured and one locked output at exactly this path; nothing that collides with it.
    configured = [o for o in config.outputs if o.path == path]
    locked = [o for o in lock.outputs if o.path == path]
    key = collision_key(path)
    colliding = sorted(o.path for o in config.outputs if o.path != path and collision_key(o.path) == key)
    if len(configured) > 1 or len(locked) > 1:
        return [Finding(BindingCode.REVIEW_BINDING_DUPLICATE, path, f"--{role}: the path is configured {len(configured)} times "
                        f"and locked {len(locked)} times; a binding names exactly one output")], None
    if not configured:
        if colliding:
            return [Finding(BindingCode.REVIEW_BINDING_INEXACT, path, f"--{role} equals the configured output {colliding[0]!r} only "
                            "after case folding or normalization; a binding is matched exactly, never normalized")], None
        return [Finding(BindingCode.REVIEW_BINDING_MISSING, path, f"--{role} is not a configured output of the trusted base")], None
    spec = configured[0]
    if colliding:
        return [Finding(BindingCode.REVIEW_BINDING_AMBIGUOUS, path, f"--{role}: the configured outputs {[path, *colliding]} are one "
                        "file on a case-folding or normalizing checkout")], None
    if not spec.enabled:
        return [Finding(BindingCode.REVIEW_BINDING_DISABLED, path, f"--{role} names a configured output that is not enabled")], None
    if not locked:
        return [Finding(BindingCode.REVIEW_BINDING_MISSING, path, f"--{role}: the output is configured but not in the lock")], None
    entry = locked[0]
    if (entry.renderer, entry.context) != (spec.renderer, spec.context):
        return [Finding(BindingCode.REVIEW_BINDING_AMBIGUOUS, path, f"--{role}: the configuration says {spec.renderer} of context "
                        f"{spec.context!r}, the lock {entry.renderer} of context {entry.context!r}")], None
    # (3) the role: the renderer decides it, never the path or the context's name.
    wrong = _judge_renderer(role, path, spec.renderer)
    if wrong is not None:
        return [wrong], None
    # (4) in the base tree: a directory at every level, no link at any, a regular file at the end.
    if kinds is not None:
        problem = check_authority_path(path, PathRole.OUTPUT, kinds)
        if problem is not None and problem.code == PolicyCode.OUTPUT_MISSING:
            return [Finding(BindingCode.REVIEW_BINDING_MISSING, path, f"--{role}: {problem.detail} in the trusted base")], None
        if problem is not None:
            return [Finding(BindingCode.REVIEW_BINDING_UNSAFE, path, f"--{role} is not a safe output path ({problem.code})"),
                    problem], None
    # (5) reproduced by the bootstrap's managed check, with the locked bytes.
    made = [o for o in reproduced if o.path == path]
    if len(made) != 1 or (made[0].renderer, made[0].context, made[0].sha256) != (entry.renderer, entry.context, entry.sha256):
        why = "not among the outputs the bootstrap reproduced" if not made else \
            f"reproduced as {[(o.renderer, o.context, o.sha256) for o in made]}, locked as ({entry.renderer}, {entry.context}, {entry.sha256})"
        return [Finding(BindingCode.REVIEW_BINDING_NOT_REPRODUCED, path, f"--{role}: {why}")], None
    return [], Binding(role, path, spec.renderer, spec.context, entry.sha256)


def decide_bindings(config: PolicyConfig, lock: PolicyLock, reproduced_outputs: Sequence[ReproducedOutput], semantic: str, adapter: str,
                    *, kinds: Mapping[str, Sequence[Kind | None]] | None = None) -> list[Finding]:
    """Every problem with binding ``semantic`` and ``adapter`` (pure; ``[]`` when both bind).

    ``kinds`` maps a path to what each of its components is in the base tree, from the root down
    (:class:`attest._safefs.Kind`, ``None`` for an absent one), as
    :func:`attest.policy.check_authority_path` takes them; without it only the spelling is judged.

    Raises:
        Nothing: every problem is a returned finding (``REVIEW_BINDING_*``, each unsafe path
        followed by the policy layer's path code).
    """
    return _decide(config, lock, reproduced_outputs, semantic, adapter, kinds)[0]


def _decide(config: PolicyConfig, lock: PolicyLock, reproduced: Sequence[ReproducedOutput], semantic: str, adapter: str,
            kinds: Mapping[str, Sequence[Kind | None]] | None) -> tuple[list[Finding], Bindings | None]:
    if semantic == adapter:
        return [Finding(BindingCode.REVIEW_BINDING_DUPLICATE, semantic if isinstance(semantic, str) else None,
                        "--semantic and --adapter name the same path; each role needs its own output")], None
    found: list[Finding] = []
    bound: dict[str, Binding] = {}
    for role, path in zip(ROLES, (semantic, adapter), strict=True):
        problems, binding = _judge_one(role, path, config, lock, reproduced, None if kinds is None else kinds.get(path))
        found += problems
        if binding is not None:
            bound[role] = binding
    if not found and bound["semantic"].context != bound["adapter"].context:
        found.append(Finding(BindingCode.REVIEW_BINDING_CONTEXT_MISMATCH, adapter, f"the semantic projection is of context "
                             f"{bound['semantic'].context!r}, the adapter of {bound['adapter'].context!r}; both must name one context"))
    if found:
        return found, None
    return [], Bindings(bound["semantic"], bound["adapter"])


def bind_outputs(config: PolicyConfig, lock: PolicyLock, reproduced_outputs: Sequence[ReproducedOutput], semantic: str, adapter: str,
                 *, kinds: Mapping[str, Sequence[Kind | None]] | None = None) -> Bindings:
    """The two bindings, or raise ``VerificationError`` with every finding of :func:`decide_bindings`.

    Raises:
        VerificationError: with every finding: ``REVIEW_BINDING_MISSING``, ``_UNSAFE``,
            ``_INEXACT``, ``_DUPLICATE``, ``_DISABLED``, ``_ROLE_SWAPPED``, ``_UNSUPPORTED``,
            ``_AMBIGUOUS``, ``_CONTEXT_MISMATCH``, ``_NOT_REPRODUCED``.
    """
    found, bindings = _decide(config, lock, reproduced_outputs, semantic, adapter, kinds)
    if found or bindings is None:
        raise VerificationError(findings=found)
    return bindings


__all__ = ["ROLES", "SEMANTIC_RENDERER", "SUPPORTED_ADAPTERS", "Binding", "Bindings", "bind_outputs", "decide_bindings",
           "parse_reproduced_outputs"]
