""".agent-policy.yml (schema 2): the repository's review configuration, parsed strictly.

Read with the one YAML reader (:mod:`._yaml`), then every field is validated and every
problem collected before one ``InputError`` is raised: exact field sets at every level, the
schema number, a full lowercase toolchain SHA, known skills and renderers, contexts that exist
and are not empty, module and output paths that pass :func:`check_authority_path`, no two
outputs (or an output and a module) on one path, and every adapter bound to exactly one
enabled semantic projection of its context.

    >>> config = PolicyConfig.from_bytes(open(".agent-policy.yml", "rb").read())
    >>> config.toolchain.revision, [o.path for o in config.enabled_outputs]
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from ..errors import Finding, InputError
from ..git import is_full_sha, is_repository_url
from ..inventory import sort_key
from ..inventory._names import collision_key
from ._codes import PolicyCode
from ._paths import CONFIG_PATH, PathRole, check_authority_path
from ._yaml import load_strict_yaml

SCHEMA = 2
MAX_CONFIG_BYTES = 256 * 1024
MAX_CONTEXTS = 64
MAX_MODULES = 256
MAX_OUTPUTS = 64

POLICY_CONTEXT_MD = "policy-context-md"
GITHUB_REVIEW_JSON_ADAPTER_V1 = "github-review-json-adapter-v1"
PR_REVIEW_SKILL_V1 = "pr-review-skill-v1"
SEMANTIC_RENDERERS = frozenset({POLICY_CONTEXT_MD})
ADAPTER_RENDERERS = frozenset({GITHUB_REVIEW_JSON_ADAPTER_V1})
OUTPUT_RENDERERS = SEMANTIC_RENDERERS | ADAPTER_RENDERERS
PR_REVIEW = "pr-review"
KNOWN_SKILLS = frozenset({PR_REVIEW})

_CONTEXT_NAME = re.compile(r"[a-z][a-z0-9_-]{0,63}\Z")


@dataclass(frozen=True, slots=True)
class Toolchain:
    """The toolchain a repository's authority names: a repository URL and a full commit SHA."""

    repository: str
    revision: str

    def to_json(self) -> dict[str, str]:
        """``{"repository", "revision"}``, as the lock records it.

        Raises:
            Nothing: it only reads fields.
        """
        return {"repository": self.repository, "revision": self.revision}


@dataclass(frozen=True, slots=True)
class Context:
    """A review context: its name and its ordered semantic policy modules."""

    name: str
    modules: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class OutputSpec:
    """One configured output: where, rendered by what, from which context, and whether it is on."""

    path: str
    renderer: str
    context: str
    enabled: bool


class _Problems:
    def __init__(self) -> None:
        self.found: list[Finding] = []

    def add(self, code: PolicyCode, detail: str, path: str | None = CONFIG_PATH) -> None:
        self.found.append(Finding(code, path, detail))

    def fields(self, value: object, where: str, required: set[str]) -> dict[str, object] | None:
        if not isinstance(value, dict):
            self.add(PolicyCode.CONFIG_BAD_VALUE, f"{where} must be a mapping")
            return None
        for key in sorted(set(value) - required):
            self.add(PolicyCode.CONFIG_UNKNOWN_FIELD, f"{where} has the unknown field {key!r}")
        for key in sorted(required - set(value)):
            self.add(PolicyCode.CONFIG_MISSING_FIELD, f"{where} lacks the field {key!r}")
        return value

    def string_list(self, value: object, where: str, limit: int) -> list[str]:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            self.add(PolicyCode.CONFIG_BAD_VALUE, f"{where} must be a list of strings")
            return []
        if len(value) > limit:
            self.add(PolicyCode.CONFIG_BAD_VALUE, f"{where} has {len(value)} items; the limit is {limit}")
            return []
        return list(value)


@dataclass(frozen=True, slots=True)
class PolicyConfig:
    """A valid ``.agent-policy.yml``; built only by :meth:`from_bytes` / :meth:`from_json`."""

    toolchain: Toolchain
    skills: tuple[str, ...]
    contexts: tuple[Context, ...]
    outputs: tuple[OutputSpec, ...]
    sha256: str   # of the exact bytes parsed ("" when built from a document)

    @classmethod
    def from_bytes(cls, data: bytes) -> PolicyConfig:
        """Parse ``.agent-policy.yml`` from its exact bytes (their SHA-256 is kept).

        Raises:
            InputError: the YAML reader's codes (``YAML_*``, ``TOO_LARGE``, ``TOO_DEEP``) and
                every code of :meth:`from_json`.
        """
        doc = load_strict_yaml(data, what=CONFIG_PATH, max_bytes=MAX_CONFIG_BYTES)
        return cls.from_json(doc, sha256=hashlib.sha256(data).hexdigest())

    @classmethod
    def from_json(cls, doc: object, *, sha256: str = "") -> PolicyConfig:
        """Validate a parsed configuration document; every problem is collected into one error.

        Raises:
            InputError: ``CONFIG_SCHEMA`` (alone, first); otherwise every finding at once:
                ``CONFIG_BAD_VALUE``, ``CONFIG_UNKNOWN_FIELD``, ``CONFIG_MISSING_FIELD``,
                ``TOOLCHAIN_NOT_FULL_SHA``, ``UNKNOWN_SKILL``, ``UNKNOWN_RENDERER``,
                ``UNKNOWN_CONTEXT``, ``ADAPTER_UNBOUND``, ``PATH_CONFLICT``, and the path codes
                of :func:`check_authority_path` (``PATH_*``, ``MODULE_PATH``, ``OUTPUT_PATH``).
        """
        p = _Problems()
        top = p.fields(doc, "the configuration", {"schema", "toolchain", "skills", "contexts", "outputs"})
        if top is None:
            raise InputError(findings=p.found)
        if "schema" in top and (type(top["schema"]) is not int or top["schema"] != SCHEMA):
            raise InputError(PolicyCode.CONFIG_SCHEMA, f"schema must be {SCHEMA}, not {top['schema']!r}", CONFIG_PATH)
        toolchain = _toolchain(p, top.get("toolchain"))
        skills = _skills(p, top.get("skills"))
        contexts = _contexts(p, top.get("contexts"))
        outputs = _outputs(p, top.get("outputs"), contexts)
        if p.found or toolchain is None:
            raise InputError(findings=p.found)
        return cls(toolchain, skills, contexts, outputs, sha256)

    @property
    def inputs(self) -> tuple[str, ...]:
        """Every module any context names, once, in lock order."""
        return tuple(sorted({m for c in self.contexts for m in c.modules}, key=sort_key))

    @property
    def enabled_outputs(self) -> tuple[OutputSpec, ...]:
        return tuple(o for o in self.outputs if o.enabled)

    @property
    def pr_review(self) -> bool:
        """Whether the generator writes the pr-review Skill (``pr-review`` in ``skills.enabled``)."""
        return PR_REVIEW in self.skills

    def context(self, name: str) -> Context:
        """The context called ``name``.

        Raises:
            KeyError: no context has that name (every output's context exists in a valid config).
        """
        for c in self.contexts:
            if c.name == name:
                return c
        raise KeyError(name)

    def semantic_output(self, context: str) -> OutputSpec:
        """The one enabled semantic projection of ``context`` (the adapter's binding).

        Raises:
            ValueError: ``context`` has no, or several, enabled semantic outputs; a valid config
                has exactly one for the context of every adapter (``ADAPTER_UNBOUND`` otherwise).
        """
        (found,) = [o for o in self.enabled_outputs if o.context == context and o.renderer in SEMANTIC_RENDERERS]
        return found


def _toolchain(p: _Problems, value: object) -> Toolchain | None:
    t = p.fields(value, "toolchain", {"repository", "revision"}) if value is not None else None
    if t is None:
        return None
    repository, revision = t.get("repository"), t.get("revision")
    ok = True
    if not is_repository_url(repository):
        p.add(PolicyCode.CONFIG_BAD_VALUE, f"toolchain.repository must be an https:// repository URL, not {repository!r}")
        ok = False
    if not isinstance(revision, str) or not is_full_sha(revision):
        p.add(PolicyCode.TOOLCHAIN_NOT_FULL_SHA, f"toolchain.revision must be a full lowercase commit SHA (40 or 64 hex), not {revision!r}")
        ok = False
    return Toolchain(repository, revision) if ok and isinstance(repository, str) and isinstance(revision, str) else None


def _skills(p: _Problems, value: object) -> tuple[str, ...]:
    s = p.fields(value, "skills", {"enabled"}) if value is not None else None
    if s is None:
        return ()
    enabled = p.string_list(s.get("enabled", []), "skills.enabled", 16)
    for name in enabled:
        if name not in KNOWN_SKILLS:
            p.add(PolicyCode.UNKNOWN_SKILL, f"skills.enabled names {name!r}; this toolchain knows {sorted(KNOWN_SKILLS)}")
    if len(set(enabled)) != len(enabled):
        p.add(PolicyCode.CONFIG_BAD_VALUE, "skills.enabled names a skill twice")
    return tuple(enabled)


def _contexts(p: _Problems, value: object) -> tuple[Context, ...]:
    if value is None:
        return ()
    if not isinstance(value, dict):
        p.add(PolicyCode.CONFIG_BAD_VALUE, "contexts must be a mapping of context names")
        return ()
    if len(value) > MAX_CONTEXTS:
        p.add(PolicyCode.CONFIG_BAD_VALUE, f"{len(value)} contexts; the limit is {MAX_CONTEXTS}")
        return ()
    out = []
    total = 0
    for name, body in value.items():
        where = f"contexts.{name}"
        if not _CONTEXT_NAME.match(name):
            p.add(PolicyCode.CONFIG_BAD_VALUE, f"the context name {name!r} is not [a-z][a-z0-9_-]* (at most 64 characters)")
            continue
        c = p.fields(body, where, {"modules"})
        if c is None:
            continue
        modules = p.string_list(c.get("modules", []), f"{where}.modules", MAX_MODULES)
        total += len(modules)
        if "modules" in c and not modules:
            p.add(PolicyCode.CONFIG_BAD_VALUE, f"{where}.modules is empty: a context without policy is refused")
        first: dict[str, int] = {}
        for i, module in enumerate(modules):
            problem = check_authority_path(module, PathRole.MODULE)
            if problem is not None:
                p.add(PolicyCode(problem.code), f"{where}.modules[{i}]: {problem.detail}", problem.path)
            if module in first:
                p.add(PolicyCode.PATH_CONFLICT, f"{where}.modules[{i}] names the module of {where}.modules[{first[module]}] again")
            first.setdefault(module, i)
        out.append(Context(name, tuple(modules)))
    if total > MAX_MODULES:
        p.add(PolicyCode.CONFIG_BAD_VALUE, f"the contexts name {total} modules; the limit is {MAX_MODULES}")
    return tuple(out)


def _outputs(p: _Problems, value: object, contexts: tuple[Context, ...]) -> tuple[OutputSpec, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        p.add(PolicyCode.CONFIG_BAD_VALUE, "outputs must be a list")
        return ()
    if len(value) > MAX_OUTPUTS:
        p.add(PolicyCode.CONFIG_BAD_VALUE, f"{len(value)} outputs; the limit is {MAX_OUTPUTS}")
        return ()
    names = {c.name for c in contexts}
    out: list[OutputSpec] = []
    for i, item in enumerate(value):
        where = f"outputs[{i}]"
        o = p.fields(item, where, {"path", "renderer", "context", "enabled"})
        if o is None or not {"path", "renderer", "context", "enabled"} <= set(o):
            continue
        path, renderer, context, enabled = o["path"], o["renderer"], o["context"], o["enabled"]
        ok = True
        problem = check_authority_path(path, PathRole.OUTPUT)
        if problem is not None:
            p.add(PolicyCode(problem.code), f"{where}.path: {problem.detail}", problem.path)
            ok = False
        if not isinstance(renderer, str) or renderer not in OUTPUT_RENDERERS:
            why = " (the Skill generator's, written by skills.enabled, not an output)" if renderer == PR_REVIEW_SKILL_V1 else ""
            p.add(PolicyCode.UNKNOWN_RENDERER, f"{where}.renderer {renderer!r} is not one of {sorted(OUTPUT_RENDERERS)}{why}")
            ok = False
        if not isinstance(context, str) or context not in names:
            p.add(PolicyCode.UNKNOWN_CONTEXT, f"{where}.context {context!r} is not a configured context")
            ok = False
        if type(enabled) is not bool:
            p.add(PolicyCode.CONFIG_BAD_VALUE, f"{where}.enabled must be true or false")
            ok = False
        # ok holds only for the types checked above; the isinstance tests say so to the type checker.
        if ok and isinstance(path, str) and isinstance(renderer, str) and isinstance(context, str) and isinstance(enabled, bool):
            out.append(OutputSpec(path, renderer, context, enabled))
    _conflicts(p, out, contexts)
    for spec in out:
        if spec.enabled and spec.renderer in ADAPTER_RENDERERS:
            bound = [o.path for o in out if o.enabled and o.context == spec.context and o.renderer in SEMANTIC_RENDERERS]
            if len(bound) != 1:
                why = "none" if not bound else f"{len(bound)} ({', '.join(bound)}): ambiguous"
                p.add(PolicyCode.ADAPTER_UNBOUND,
                      f"the adapter output needs exactly one enabled {POLICY_CONTEXT_MD} output of context {spec.context!r}; there are {why}",
                      spec.path)
    return tuple(out)


def _conflicts(p: _Problems, outputs: list[OutputSpec], contexts: tuple[Context, ...]) -> None:
    """No two files on one path, under case folding too, and no file where another needs a directory."""
    owners: dict[str, str] = {}
    for module in sorted({m for c in contexts for m in c.modules}):
        key = collision_key(module)
        if key in owners:
            # On a case-folding or normalizing checkout they are one file: which text is the rule
            # would depend on checkout order.
            p.add(PolicyCode.PATH_CONFLICT, f"the module collides with {owners[key]} under case folding or normalization", module)
            continue
        owners[key] = f"the module {module}"
    for spec in outputs:
        key = collision_key(spec.path)
        if key in owners:
            p.add(PolicyCode.PATH_CONFLICT, f"the output collides with {owners[key]}", spec.path)
            continue
        owners[key] = f"the output {spec.path}"
    for key in sorted(owners):
        parts = key.split("/")
        for depth in range(1, len(parts)):
            above = "/".join(parts[:depth])
            if above in owners:
                p.add(PolicyCode.PATH_CONFLICT, f"{owners[above]} is a file where {owners[key]} needs a directory", None)


__all__ = [
    "ADAPTER_RENDERERS",
    "GITHUB_REVIEW_JSON_ADAPTER_V1",
    "OUTPUT_RENDERERS",
    "POLICY_CONTEXT_MD",
    "PR_REVIEW",
    "PR_REVIEW_SKILL_V1",
    "SEMANTIC_RENDERERS",
    "Context",
    "OutputSpec",
    "PolicyConfig",
    "Toolchain",
]
