"""Recipes: the canonical construction of a runtime or a skill, as data (``builders/*.toml``).

Relative paths in a recipe are relative to the recipe file's directory. Unknown keys are
refused, so a typo cannot silently drop an input.

    >>> recipe = load_recipe("builders/runtime.toml")
    >>> recipe.kind, recipe.lock_path
"""

from __future__ import annotations

import hashlib
import os
import re
import tomllib
from dataclasses import dataclass
from typing import Literal

from packaging.specifiers import InvalidSpecifier, SpecifierSet

from .._fs import read_bounded
from .._shape import Shape
from ..errors import InputError
from ..git import is_repository_url
from ..inventory import check_name
from ._codes import BuildCode

SCHEMA = "attest-recipe/v1"
_BYTECODE = ("none", "checked-hash")
# A recipe's name becomes part of file names under the state directory (builds/<hex>-<name>.build.json):
# one path component, never '..', as the handoff requires of a runtime's name.
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,199}\Z")


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


def _table(doc: Shape, key: str, allowed: set[str]) -> Shape:
    t = doc.optional(key)
    if t is None or not isinstance(t.value, dict):
        doc.refuse("is missing or not a table", key)
    return t.object(allowed=allowed)


def _path(t: Shape, key: str) -> str:
    """A path of the recipe, ``.`` when absent."""
    return t.string(key) if t.has(key) else "."


def _repository(t: Shape, key: str) -> str:
    """A repository's name as attestations, pins and the bootstrap record it: an https URL (the bootstrap refuses others)."""
    value = t.string(key)
    t.check(is_repository_url(value), "an https:// repository URL (a host and a path, no '.' or '..' segment)", key)
    return value


def _strs(t: Shape, key: str) -> tuple[str, ...]:
    return t.strings(key) if t.has(key) else ()


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
    recipe = Shape(doc, "recipe", lambda d: InputError(BuildCode.BAD_RECIPE, d, where))
    recipe.check(doc.get("schema") == SCHEMA, repr(SCHEMA), "schema")
    base = os.path.dirname(os.path.abspath(where))
    digest = hashlib.sha256(data).hexdigest()
    kind = recipe.one_of("kind", ("runtime", "skill"))
    name = recipe.string("name", pattern=_NAME, expected="one safe file-name component (letters, digits, . _ + -; not .. )")
    if kind == "runtime":
        recipe.object(allowed={"schema", "kind", "name", "toolchain", "lock", "interpreter", "expose", "options"})
        tc = _table(recipe, "toolchain", {"repository", "source"})
        lk = _table(recipe, "lock", {"path", "build_only"})
        it = _table(recipe, "interpreter", {"requires", "path"})
        ex = _table(recipe, "expose", {"entry_points"})
        op = recipe.at("options").object(allowed={"bytecode"}) if recipe.has("options") else None
        bytecode = op.one_of("bytecode", _BYTECODE) if op is not None and op.has("bytecode") else "none"
        requires = it.string("requires")
        try:
            SpecifierSet(requires)
        except InvalidSpecifier as e:
            raise InputError(BuildCode.BAD_RECIPE, f"recipe.interpreter.requires {requires!r} is invalid", where) from e
        ipath = it.string("path") if it.has("path") else None
        it.check(ipath is None or os.path.isabs(ipath), "an absolute path", "path")
        lock_ref = lk.string("path")
        entry_points = _strs(ex, "entry_points")
        for i, ep in enumerate(entry_points):  # bin/<name>: one name, never a path out of bin/ (or an absolute one)
            problem = check_name(ep)
            if problem is not None:
                ex.fail(f"one file name in bin/ ({problem[1]})", f"entry_points[{i}]")
        return RuntimeRecipe(
            name=name,
            toolchain_repository=_repository(tc, "repository"),
            toolchain_source=os.path.normpath(os.path.join(base, _path(tc, "source"))),
            lock_path=os.path.normpath(os.path.join(base, lock_ref)),
            lock_ref=lock_ref,
            build_only=_strs(lk, "build_only"),
            interpreter_requires=requires,
            interpreter_path=ipath,
            entry_points=entry_points,
            bytecode="checked-hash" if bytecode == "checked-hash" else "none",
            digest=digest,
            path=where,
        )
    if kind == "skill":
        recipe.object(allowed={"schema", "kind", "name", "source", "install", "installer"})
        src = _table(recipe, "source", {"repository", "path", "subtree"})
        ins = _table(recipe, "install", {"root"})
        inr = _table(recipe, "installer", {"repository"})
        root = ins.string("root")
        ins.check(check_name(root) is None, "a single safe name", "root")
        return SkillRecipe(
            name=name,
            source_repository=_repository(src, "repository"),
            source_path=os.path.normpath(os.path.join(base, _path(src, "path"))),
            subtree=src.string("subtree"),
            root=root,
            installer_repository=_repository(inr, "repository"),
            digest=digest,
            path=where,
        )
    recipe.fail("'runtime' or 'skill'", "kind")
