"""Reason codes of the policy layer (stable wire strings; see docs/policy.md).

Parsing the authority files refuses with exit 2 (``InputError``); what ``attest policy check``
or ``generate`` finds in the tree fails with exit 1 (``VerificationError``).
"""

from __future__ import annotations

from ..errors import ReasonCode


class PolicyCode(ReasonCode):
    # The one YAML reader (exit 2): every construct that lets two readers disagree is refused.
    YAML_SYNTAX = "YAML_SYNTAX"
    YAML_DUPLICATE_KEY = "YAML_DUPLICATE_KEY"
    YAML_ANCHOR = "YAML_ANCHOR"
    YAML_ALIAS = "YAML_ALIAS"
    YAML_TAG = "YAML_TAG"
    YAML_DIRECTIVE = "YAML_DIRECTIVE"
    YAML_MULTIPLE_DOCUMENTS = "YAML_MULTIPLE_DOCUMENTS"
    YAML_NON_STRING_KEY = "YAML_NON_STRING_KEY"
    YAML_AMBIGUOUS_SCALAR = "YAML_AMBIGUOUS_SCALAR"
    # .agent-policy.yml (exit 2, except a missing file in the tree).
    CONFIG_MISSING = "CONFIG_MISSING"
    CONFIG_SCHEMA = "CONFIG_SCHEMA"
    CONFIG_UNKNOWN_FIELD = "CONFIG_UNKNOWN_FIELD"
    CONFIG_MISSING_FIELD = "CONFIG_MISSING_FIELD"
    CONFIG_BAD_VALUE = "CONFIG_BAD_VALUE"
    TOOLCHAIN_NOT_FULL_SHA = "TOOLCHAIN_NOT_FULL_SHA"
    UNKNOWN_SKILL = "UNKNOWN_SKILL"
    UNKNOWN_RENDERER = "UNKNOWN_RENDERER"
    UNKNOWN_CONTEXT = "UNKNOWN_CONTEXT"
    ADAPTER_UNBOUND = "ADAPTER_UNBOUND"
    PATH_CONFLICT = "PATH_CONFLICT"
    # Path confinement: lexical (exit 2 in the config or lock) and against the tree (exit 1).
    PATH_ABSOLUTE = "PATH_ABSOLUTE"
    PATH_NOT_NORMAL = "PATH_NOT_NORMAL"
    PATH_BACKSLASH = "PATH_BACKSLASH"
    PATH_DOTGIT = "PATH_DOTGIT"
    PATH_BAD_NAME = "PATH_BAD_NAME"
    PATH_RESERVED = "PATH_RESERVED"
    MODULE_PATH = "MODULE_PATH"
    OUTPUT_PATH = "OUTPUT_PATH"
    PATH_OUTSIDE_SKILL = "PATH_OUTSIDE_SKILL"
    PATH_SYMLINK = "PATH_SYMLINK"
    PATH_NOT_REGULAR = "PATH_NOT_REGULAR"
    PATH_SHADOWED = "PATH_SHADOWED"
    # Policy modules (the inputs).
    INPUT_MISSING = "INPUT_MISSING"
    MODULE_NOT_UTF8 = "MODULE_NOT_UTF8"
    INPUT_DIGEST_MISMATCH = "INPUT_DIGEST_MISMATCH"
    # .agent-policy.lock.
    LOCK_MISSING = "LOCK_MISSING"
    LOCK_INVALID = "LOCK_INVALID"
    LOCK_TOOLCHAIN_MISMATCH = "LOCK_TOOLCHAIN_MISMATCH"
    CONFIG_DIGEST_MISMATCH = "CONFIG_DIGEST_MISMATCH"
    LOCK_STALE = "LOCK_STALE"
    # Generated outputs.
    OUTPUT_MISSING = "OUTPUT_MISSING"
    OUTPUT_STALE = "OUTPUT_STALE"
    OUTPUT_MODIFIED = "OUTPUT_MODIFIED"
    OUTPUT_UNLISTED = "OUTPUT_UNLISTED"
    UNOWNED_FILE = "UNOWNED_FILE"
    # A Skill's SKILL.md front matter.
    SKILL_FRONT_MATTER = "SKILL_FRONT_MATTER"
