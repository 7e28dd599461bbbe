"""Path confinement: the one rule for every authority path (config, lock, modules, outputs, Skill).

:func:`check_authority_path` is pure. Given only the path and its role it judges the
spelling, before any filesystem call: repository-relative, ``/``-separated, no empty,
``.`` or ``..`` component, no backslash, no component git refuses as ``.git`` (the
inventory layer's :func:`~attest.inventory._names.is_dotgit`), every name acceptable to the
closed inventory, outside the reserved namespaces of its role. Given also what each
component *is* in a tree (``kinds``: from ``lstat``/``fstat`` of a directory walk, or from
git tree modes through :func:`kind_of_git_mode`), it adds: no symlink at any level, a
directory at every level but the last, and a plain regular file at the end.

    >>> check_authority_path("docs/review/policy-context.md", PathRole.OUTPUT) is None
    True
    >>> check_authority_path(".github/review.md", PathRole.OUTPUT).code
    'PATH_RESERVED'
    >>> check_authority_path("docs/review/policy-context.md", PathRole.OUTPUT, [Kind.SYMLINK]).code
    'PATH_SYMLINK'
"""

from __future__ import annotations

import enum
import re
from collections.abc import Sequence

from .._safefs import Kind
from ..errors import Finding
from ..inventory import check_name
from ..inventory._names import PATH_MAX, collision_key, is_dotgit
from ._codes import PolicyCode

CONFIG_PATH = ".agent-policy.yml"
LOCK_PATH = ".agent-policy.lock"
SKILL_DIR = ".agents/skills/pr-review"
MODULE_ROOTS = ("policy/core", "policy/review", "policy/security")

_SKILL_PARTS = tuple(SKILL_DIR.split("/"))
_MODULE_DIRS = frozenset(root.split("/")[1] for root in MODULE_ROOTS)
OUTPUT_SUFFIXES = (".md", ".json")
# Components no output may have at any depth: tool locations that execute or configure code
# whether or not they start with a dot (a dot component is refused anyway).
_TOOL_DIRS = frozenset({"venv", "node_modules", "__pycache__"})
# An NTFS 8.3 short name (`GITHUB~1` is `.github`, `AGENTS~1` is `.agents`).
_SHORT_NAME = re.compile(r"[^~]*~[0-9]")


def namespace_key(name: str) -> str:
    """The key under which ``name`` opens the same entry on some checkout.

    Case folding and NFC (:func:`collision_key`), and what NTFS ignores or strips: trailing
    dots and spaces (`core.` is `core`) and an alternate data stream (`core::$DATA`).
    """
    return collision_key(name.split(":", 1)[0].rstrip(". "))
# Compared under case folding and NFC: on a case-insensitive checkout `.GitHub` is `.github`.
_RESERVED_TOP = {
    namespace_key(".github"): "`.github/` is GitHub's runtime namespace, never a policy output",
    namespace_key(".agents"): "`.agents/` is written only by the Skill generator",
    namespace_key(CONFIG_PATH): "it is the authority file .agent-policy.yml",
    namespace_key(LOCK_PATH): "it is the authority file .agent-policy.lock",
}


class PathRole(enum.Enum):
    """What an authority path names; each role has its namespace."""

    CONFIG = "config"   # .agent-policy.yml, exactly
    LOCK = "lock"       # .agent-policy.lock, exactly
    MODULE = "module"   # policy/{core,review,security}/**.md
    OUTPUT = "output"   # a configured generated output
    SKILL = "skill"     # a file of the generated pr-review Skill, below .agents/skills/pr-review/


_MISSING = {
    PathRole.CONFIG: PolicyCode.CONFIG_MISSING,
    PathRole.LOCK: PolicyCode.LOCK_MISSING,
    PathRole.MODULE: PolicyCode.INPUT_MISSING,
    PathRole.OUTPUT: PolicyCode.OUTPUT_MISSING,
    PathRole.SKILL: PolicyCode.OUTPUT_MISSING,
}


def missing_code(role: PathRole) -> PolicyCode:
    """The code of an absent file of ``role``."""
    return _MISSING[role]


def kind_of_git_mode(mode: str) -> Kind:
    """What a git tree entry is, from its mode as git spells it (``40000``, ``100644``, ...).

    Raises:
        Nothing: any mode git would not check out as a file or directory is ``SPECIAL``.
    """
    if mode in ("40000", "040000"):
        return Kind.DIR
    if mode in ("100644", "100755"):
        return Kind.FILE
    if mode == "120000":
        return Kind.SYMLINK
    return Kind.SPECIAL  # a gitlink (160000) or anything git itself would not check out as a file


def _lexical(path: str, role: PathRole) -> tuple[PolicyCode, str] | None:
    # (1) one spelling: repository-relative, '/'-separated, no empty/'.'/'..' component.
    if path == "":
        return PolicyCode.PATH_NOT_NORMAL, "the path is empty"
    if path.startswith("/"):
        return PolicyCode.PATH_ABSOLUTE, "the path is absolute; authority paths are relative to the repository root"
    if "\\" in path:
        return PolicyCode.PATH_BACKSLASH, "the path contains a backslash (a separator on Windows)"
    parts = path.split("/")
    for part in parts:
        if part in ("", ".", ".."):
            shown = "an empty component ('//', or a leading or trailing '/')" if part == "" else f"a {part!r} component"
            return PolicyCode.PATH_NOT_NORMAL, f"the path has {shown}; it is refused, never normalized"
    # (2) outside .git in every spelling git refuses (one rule, the inventory layer's).
    for part in parts:
        if is_dotgit(part):
            return PolicyCode.PATH_DOTGIT, f"the component {part!r} is a spelling of .git"
    # (3) every name acceptable to the closed inventory: UTF-8, no control or invisible code point.
    for part in parts:
        problem = check_name(part)
        if problem is not None:
            return PolicyCode.PATH_BAD_NAME, problem[1]
    if len(path.encode("utf-8")) > PATH_MAX:
        return PolicyCode.PATH_BAD_NAME, f"the path is longer than {PATH_MAX} bytes"
    # (4) the namespace of the role.
    if role is PathRole.CONFIG or role is PathRole.LOCK:
        want = CONFIG_PATH if role is PathRole.CONFIG else LOCK_PATH
        if path != want:
            return PolicyCode.PATH_RESERVED, f"the {role.value} file is {want}, at the repository root"
        return None
    if role is PathRole.SKILL:
        if tuple(parts[: len(_SKILL_PARTS)]) != _SKILL_PARTS or len(parts) <= len(_SKILL_PARTS):
            return PolicyCode.PATH_OUTSIDE_SKILL, f"a file of the pr-review Skill must lie below {SKILL_DIR}/"
        return None
    top = namespace_key(parts[0])
    if top in _RESERVED_TOP:
        return PolicyCode.PATH_RESERVED, _RESERVED_TOP[top]
    if role is PathRole.MODULE:
        name = parts[-1]
        if parts[0] != "policy" or len(parts) < 3 or parts[1] not in _MODULE_DIRS or not name.endswith(".md") or name == ".md":
            return PolicyCode.MODULE_PATH, f"a policy module is a .md file under {', '.join(r + '/' for r in MODULE_ROOTS)}"
        return None
    # role is OUTPUT: a generated file never sits where semantic policy is written.
    if top == namespace_key("policy") and len(parts) > 2 and namespace_key(parts[1]) in _MODULE_DIRS:
        return PolicyCode.PATH_RESERVED, "policy/core/, policy/review/ and policy/security/ hold the policy modules"
    # (5) nowhere git, GitHub or a tool gives a file runtime meaning. One rule instead of a list
    # of such names: no dot component at any depth (.gitattributes, .gitmodules, .mailmap,
    # .github/, .vscode/, .venv/, .envrc, .direnv/ ...), no tool directory, no 8.3 alias of
    # one, and a .md or .json file (never CODEOWNERS, a .pth, .py, .pyc, .so or .sh).
    for part in parts:
        if part.startswith("."):
            return PolicyCode.PATH_RESERVED, f"the component {part!r} starts with a dot: git, GitHub and tools give such paths meaning"
        if namespace_key(part) in _TOOL_DIRS:
            return PolicyCode.PATH_RESERVED, f"the component {part!r} is a tool's directory (it may execute what it holds)"
        if _SHORT_NAME.match(part):
            return PolicyCode.PATH_RESERVED, f"the component {part!r} has the shape of an NTFS 8.3 alias"
    name = parts[-1]
    if not name.endswith(OUTPUT_SUFFIXES) or name in OUTPUT_SUFFIXES:
        return PolicyCode.OUTPUT_PATH, "a generated output is a .md or .json file"
    return None


def check_authority_path(path: object, role: PathRole, kinds: Sequence[Kind | None] | None = None) -> Finding | None:
    """The problem with ``path`` as an authority path of ``role``, or None.

    ``kinds``, when given, says what each component is in the tree, from the root down
    (``None``: absent); a walk may stop at the first component that is not a directory.

    Raises:
        ValueError: ``kinds`` has more entries than ``path`` has components, or stops at a
            directory before the last one (a caller's bug, not an input problem). Every
            problem with ``path`` itself is the returned finding (``PATH_*``, ``MODULE_PATH``,
            ``OUTPUT_PATH``, the role's missing code), never raised.
    """
    if not isinstance(path, str):
        return Finding(PolicyCode.PATH_NOT_NORMAL, None, f"a {role.value} path must be a string")
    problem = _lexical(path, role)
    if problem is not None:
        return Finding(problem[0], path, problem[1])
    if kinds is None:
        return None
    parts = path.split("/")
    if len(kinds) > len(parts):
        raise ValueError("more kinds than components")
    walked: list[str] = []
    for depth, kind in enumerate(kinds):
        walked.append(parts[depth])
        here = "/".join(walked)
        last = depth == len(parts) - 1
        if kind is None:
            return Finding(_MISSING[role], path, f"{here} does not exist" if not last else "the file does not exist")
        if kind is Kind.SYMLINK:
            return Finding(PolicyCode.PATH_SYMLINK, path, f"{here} is a symbolic link; no authority path passes through one")
        if last:
            if kind is not Kind.FILE:
                return Finding(PolicyCode.PATH_NOT_REGULAR, path, f"not a plain regular file: {kind.value}")
            return None
        if kind is not Kind.DIR:
            return Finding(PolicyCode.PATH_NOT_REGULAR, path, f"{here} is not a plain directory: {kind.value}")
    raise ValueError("the kinds stop at a directory before the last component")


__all__ = [
    "CONFIG_PATH",
    "LOCK_PATH",
    "MODULE_ROOTS",
    "OUTPUT_SUFFIXES",
    "SKILL_DIR",
    "PathRole",
    "check_authority_path",
    "kind_of_git_mode",
    "missing_code",
    "namespace_key",
]
