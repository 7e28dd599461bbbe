"""The deployment's inputs of `attest bootstrap`: the pins, and where PINS, TRUST, ATT and KEY may lie.

The pins file (written by `attest promote`) holds three tables: ``[toolchain]`` (the promoted
repository and full SHA), ``[runtime]`` (the promoted runtime: name, inventory identity,
interpreter identity, lock digest, attestation digest) and ``[skill]``
(:class:`attest.builder.SkillPins`). None of them may be selected by the repository under review,
so none of the deployment's inputs may lie inside it, inside an image, or inside the installed
Skill (:func:`check_inputs_outside`, pure; :func:`verify_inputs_outside` gathers the facts).

    >>> pins = DeploymentPins.from_file("/etc/attest/pins.toml")
    >>> verify_inputs_outside({"PINS": pins.path, "ATT": att}, {"GITDIR": repo, "SKILL": skill, "STORE": f"{state}/store"})
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..._fs import read_bounded
from ...attestation._tree import Placement, _placement, _read_mounts, policy_source_inside
from ...errors import CommonCode, Finding, InputError, VerificationError
from ...git import is_full_sha, is_repository_url
from ._codes import BootstrapCode

if TYPE_CHECKING:
    from ...builder import SkillPins

MAX_PINS_BYTES = 1 << 20
_IDENTITY = re.compile(r"sha256:[0-9a-f]{64}\Z")
_HEX64 = re.compile(r"[0-9a-f]{64}\Z")
_RUNTIME_FIELDS = ("name", "inventory", "interpreter", "interpreter_sha256", "python", "lock_sha256", "attestation", "provenance")


@dataclass(frozen=True, slots=True)
class RuntimePins:
    """The ``[runtime]`` table of the pins, exactly as `attest promote` writes it."""

    name: str
    inventory: str
    interpreter: str
    interpreter_sha256: str
    python: str
    lock_sha256: str
    attestation: str
    provenance: str


@dataclass(frozen=True, slots=True)
class DeploymentPins:
    """Every pin the bootstrap uses: the promoted toolchain, its runtime and its skill.

    Raises:
        InputError: from ``from_bytes`` / ``from_file``: ``BAD_PINS`` (not TOML, or a bad
            ``[skill]`` table), ``BAD_RUNTIME_PINS`` (the ``[toolchain]`` or ``[runtime]`` table
            missing or malformed); ``from_file`` also ``UNREADABLE`` and ``TOO_LARGE``.
    """

    toolchain_repository: str
    toolchain_revision: str
    runtime: RuntimePins
    skill: SkillPins
    path: str

    @classmethod
    def from_bytes(cls, data: bytes, where: str) -> DeploymentPins:
        # lazy: attest.builder, +75 ms to importing review.bootstrap (the merge gate imports it for the host adapter alone)
        from ...builder import SkillPins
        from ...builder._install import _BUILD_NAME  # lazy: as above
        from ...builder._promote import parse_pins  # lazy: as above

        def bad(detail: str) -> InputError:
            return InputError(BootstrapCode.BAD_RUNTIME_PINS, detail, where)

        doc = parse_pins(data, where)
        real = os.path.realpath(where)
        skill = SkillPins.from_doc(doc, where, path=real)
        tc = doc.get("toolchain")
        if not isinstance(tc, dict) or set(tc) != {"repository", "revision"}:
            raise bad("the pins need a [toolchain] table of exactly repository and revision (run `attest promote`)")
        if not is_repository_url(tc["repository"]):
            raise bad("toolchain.repository must be an https:// repository URL (a host and a path, no '.' or '..' segment)")
        if not isinstance(tc["revision"], str) or not is_full_sha(tc["revision"]):
            raise bad("toolchain.revision must be a full lowercase commit SHA")
        rt = doc.get("runtime")
        if not isinstance(rt, dict) or set(rt) != set(_RUNTIME_FIELDS):
            got = sorted(rt) if isinstance(rt, dict) else None
            raise bad(f"the pins need a [runtime] table of exactly {list(_RUNTIME_FIELDS)}; it has {got}")
        for key in _RUNTIME_FIELDS:
            if not isinstance(rt[key], str) or not rt[key] or rt[key] != rt[key].strip() or not rt[key].isprintable():
                raise bad(f"runtime.{key} must be a non-empty printable string without surrounding spaces")
        # The name is a file name (STATE/builds/<name>.runtime.json): the input-addressed build name, never a path.
        if not _BUILD_NAME.match(rt["name"]):
            raise bad(f"runtime.name {rt['name'][:100]!r} is not an input-addressed build name (<32 hex>-<recipe>)")
        interpreter = rt["interpreter"]
        if not os.path.isabs(interpreter) or os.path.normpath(interpreter) != interpreter or not interpreter.isprintable():
            raise bad(f"runtime.interpreter {interpreter[:200]!r} is not a normalized absolute path")
        for key in ("inventory", "attestation", "provenance"):
            if not _IDENTITY.match(rt[key]):
                raise bad(f"runtime.{key} is not sha256:<64 lowercase hex>")
        for key in ("interpreter_sha256", "lock_sha256"):
            if not _HEX64.match(rt[key]):
                raise bad(f"runtime.{key} is not 64 lowercase hex digits")
        return cls(tc["repository"], tc["revision"], RuntimePins(**{k: rt[k] for k in _RUNTIME_FIELDS}), skill, real)

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> DeploymentPins:
        name = os.fspath(path)
        return cls.from_bytes(read_bounded(name, what="pins file", max_bytes=MAX_PINS_BYTES), name)


# -- placement ----------------------------------------------------------------------------------


def check_inputs_outside(inputs: Mapping[str, Placement], roots: Mapping[str, Placement]) -> list[Finding]:
    """``BOOTSTRAP_INPUT_IN_TREE`` for every input (name -> Placement) inside a root (name -> Placement). Pure.

    Inside by any of :func:`attest.attestation._tree.policy_source_inside`'s tests: resolved path,
    (st_dev, st_ino) of an ancestor, or location in the filesystem through the mount table.

    Raises:
        Nothing: every input inside a root is a returned finding.
    """

    out: list[Finding] = []
    for name, place in inputs.items():
        for root_name, root in roots.items():
            why = policy_source_inside(place, root)
            if why is not None:
                named = root_name if root.path in root_name else f"{root_name} ({root.path})"  # the path once
                out.append(Finding(BootstrapCode.BOOTSTRAP_INPUT_IN_TREE, place.path,
                                   f"{name} lies inside {named}: {why}; the deployment's inputs must "
                                   "come from outside every repository under review, every image and the installed Skill"))
    return out


def verify_inputs_outside(inputs: Mapping[str, str], roots: Mapping[str, str]) -> None:
    """Raise ``BOOTSTRAP_INPUT_IN_TREE`` unless every input path lies outside every root (absent roots are skipped).

    An input file with more than one hard link is refused too: its other names cannot be found.

    Raises:
        VerificationError: ``BOOTSTRAP_INPUT_IN_TREE``, one finding per input inside a root or
            with more than one hard link.
        InputError: ``UNREADABLE`` (an input that cannot be examined).
    """

    mounts = _read_mounts()
    placed_roots: dict[str, Placement] = {}
    for name, root in roots.items():
        real = os.path.realpath(root)
        try:
            placed_roots[name] = _placement(real, mounts, ancestors=False)
        except OSError:
            continue  # a root that does not exist holds nothing
    placed_inputs: dict[str, Placement] = {}
    for name, source in inputs.items():
        real = os.path.realpath(source)
        try:
            placed_inputs[name] = _placement(real, mounts, ancestors=True)
        except OSError as e:
            raise InputError(CommonCode.UNREADABLE, f"cannot examine {name} to confirm it lies outside the trees: {e.strerror}",
                             source) from e
    found = check_inputs_outside(placed_inputs, placed_roots)
    # A file with another name could have that name inside a tree: its bytes would be the tree's.
    for name, source in inputs.items():
        try:
            st = os.stat(os.path.realpath(source))
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode) and st.st_nlink != 1:
            found.append(Finding(BootstrapCode.BOOTSTRAP_INPUT_IN_TREE, source, f"{name} has {st.st_nlink} hard links: another of its "
                                 "names may lie inside a repository, an image or the installed Skill; use a file of its own"))
    if found:
        raise VerificationError(findings=found)


__all__ = ["DeploymentPins", "RuntimePins", "check_inputs_outside", "verify_inputs_outside"]
