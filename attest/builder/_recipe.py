"""Recipes: the canonical construction of a runtime or a skill, as data (``builders/*.toml``).

Relative paths in a recipe are relative to the recipe file's directory. Unknown keys are
refused, so a typo cannot silently drop an input.

    >>> recipe = load_recipe("builders/runtime.toml")
    >>> recipe.kind, recipe.lock_path
"""

from __future__ import annotations

import hashlib
import os
import tomllib
from dataclasses import dataclass
from typing import Any, Literal

from packaging.specifiers import InvalidSpecifier, SpecifierSet

from .._fs import read_bounded
from ..errors import InputError
from ._codes import BuildCode

SCHEMA = "attest-recipe/v1"
_BYTECODE = ("none", "checked-hash")


@dataclass(frozen=True, slots=True)
class RuntimeRecipe:
    name: str
    toolchain_repository: str     # the name recorded in attestations (a URL)
    toolchain_source: str         # local git repository the tree is read from
    lock_path: str
    lock_ref: str                 # the lock path as written, recorded in predicates
    build_only: tuple[str, ...]   # locked distributions used by the build backend only
    interpreter_requires: str
    interpreter_path: str | None
    entry_points: tuple[str, ...]
    bytecode: Literal["none", "checked-hash"]
    digest: str
    path: str
    kind: Literal["runtime"] = "runtime"


@dataclass(frozen=True, slots=True)
class SkillRecipe:
    name: str
    source_repository: str
    source_path: str
    subtree: str
    root: str
    installer_repository: str
    digest: str
    path: str
    kind: Literal["skill"] = "skill"


def _table(doc: dict[str, Any], key: str, allowed: set[str], where: str) -> dict[str, Any]:
    t = doc.get(key)
    if not isinstance(t, dict):
        raise InputError(BuildCode.BAD_RECIPE, f"[{key}] is missing or not a table", where)
    unknown = set(t) - allowed
    if unknown:
        raise InputError(BuildCode.BAD_RECIPE, f"[{key}] has unknown keys {sorted(unknown)}", where)
    return t


def _str(t: dict[str, Any], key: str, where: str, *, default: str | None = None) -> str:
    v = t.get(key, default)
    if not isinstance(v, str) or not v:
        raise InputError(BuildCode.BAD_RECIPE, f"{key!r} must be a non-empty string", where)
    return v


def _strs(t: dict[str, Any], key: str, where: str) -> tuple[str, ...]:
    v = t.get(key, [])
    if not isinstance(v, list) or not all(isinstance(x, str) and x for x in v):
        raise InputError(BuildCode.BAD_RECIPE, f"{key!r} must be a list of strings", where)
    return tuple(v)


def load_recipe(path: str | os.PathLike[str]) -> RuntimeRecipe | SkillRecipe:
    """Read a ``builders/*.toml`` recipe strictly; relative paths resolve against the recipe file.

    Raises:
        InputError: ``UNREADABLE`` / ``TOO_LARGE``; ``BAD_RECIPE`` for anything else (not
            UTF-8 TOML, wrong schema or kind, unknown or missing keys, wrong types).
    """
    where = os.fspath(path)
    data = read_bounded(where, what="recipe", max_bytes=1 << 20)
    try:
        doc = tomllib.loads(data.decode("utf-8"))
    except (ValueError, RecursionError) as e:  # as in parse_pylock: tomllib also raises bare ValueError and RecursionError
        raise InputError(BuildCode.BAD_RECIPE, f"not valid UTF-8 TOML: {e}", where) from e
    if doc.get("schema") != SCHEMA:
        raise InputError(BuildCode.BAD_RECIPE, f"schema must be {SCHEMA!r}", where)
    base = os.path.dirname(os.path.abspath(where))
    digest = hashlib.sha256(data).hexdigest()
    kind = doc.get("kind")
    name = _str(doc, "name", where)
    if kind == "runtime":
        top = {"schema", "kind", "name", "toolchain", "lock", "interpreter", "expose", "options"}
        if set(doc) - top:
            raise InputError(BuildCode.BAD_RECIPE, f"unknown keys {sorted(set(doc) - top)}", where)
        tc = _table(doc, "toolchain", {"repository", "source"}, where)
        lk = _table(doc, "lock", {"path", "build_only"}, where)
        it = _table(doc, "interpreter", {"requires", "path"}, where)
        ex = _table(doc, "expose", {"entry_points"}, where)
        op = doc.get("options", {})
        if not isinstance(op, dict) or set(op) - {"bytecode"}:
            raise InputError(BuildCode.BAD_RECIPE, "[options] accepts only 'bytecode'", where)
        bytecode = op.get("bytecode", "none")
        if bytecode not in _BYTECODE:
            raise InputError(BuildCode.BAD_RECIPE, f"bytecode must be one of {_BYTECODE}", where)
        requires = _str(it, "requires", where)
        try:
            SpecifierSet(requires)
        except InvalidSpecifier as e:
            raise InputError(BuildCode.BAD_RECIPE, f"interpreter.requires {requires!r} is invalid", where) from e
        ipath = it.get("path")
        if ipath is not None and (not isinstance(ipath, str) or not os.path.isabs(ipath)):
            raise InputError(BuildCode.BAD_RECIPE, "interpreter.path must be an absolute path", where)
        lock_ref = _str(lk, "path", where)
        return RuntimeRecipe(
            name=name,
            toolchain_repository=_str(tc, "repository", where),
            toolchain_source=os.path.normpath(os.path.join(base, _str(tc, "source", where, default="."))),
            lock_path=os.path.normpath(os.path.join(base, lock_ref)),
            lock_ref=lock_ref,
            build_only=_strs(lk, "build_only", where),
            interpreter_requires=requires,
            interpreter_path=ipath,
            entry_points=_strs(ex, "entry_points", where),
            bytecode=bytecode,
            digest=digest,
            path=where,
        )
    if kind == "skill":
        top = {"schema", "kind", "name", "source", "install", "installer"}
        if set(doc) - top:
            raise InputError(BuildCode.BAD_RECIPE, f"unknown keys {sorted(set(doc) - top)}", where)
        src = _table(doc, "source", {"repository", "path", "subtree"}, where)
        ins = _table(doc, "install", {"root"}, where)
        inr = _table(doc, "installer", {"repository"}, where)
        root = _str(ins, "root", where)
        from ..inventory import check_name

        if check_name(root) is not None:
            raise InputError(BuildCode.BAD_RECIPE, f"install.root {root!r} is not a single safe name", where)
        return SkillRecipe(
            name=name,
            source_repository=_str(src, "repository", where),
            source_path=os.path.normpath(os.path.join(base, _str(src, "path", where, default="."))),
            subtree=_str(src, "subtree", where),
            root=root,
            installer_repository=_str(inr, "repository", where),
            digest=digest,
            path=where,
        )
    raise InputError(BuildCode.BAD_RECIPE, f"kind {kind!r} is not 'runtime' or 'skill'", where)
