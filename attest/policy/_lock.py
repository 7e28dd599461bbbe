""".agent-policy.lock: what the configuration, its inputs and its outputs were when generated.

One JSON object in RFC 8785 canonical form, exactly (no trailing newline, no other spelling:
the lock's digest is evidence, so it has one byte form). Lists are sorted by path (path
components, bytewise) and hold no path twice. :func:`check_agreement` is the pure comparison
of a lock with the configuration it must agree with.

    >>> lock = PolicyLock.from_bytes(open(".agent-policy.lock", "rb").read())
    >>> lock.toolchain.revision, [o.path for o in lock.outputs]
"""

from __future__ import annotations

import hashlib
import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass

from .._json import canonical_bytes, loads_strict
from ..errors import CommonCode, Finding, InputError
from ..git import is_full_sha, is_repository_url
from ..inventory import sort_key
from ._codes import PolicyCode
from ._config import _CONTEXT_NAME, OUTPUT_RENDERERS, PR_REVIEW_SKILL_V1, SCHEMA, PolicyConfig, Toolchain
from ._paths import CONFIG_PATH, LOCK_PATH, PathRole, check_authority_path

MAX_LOCK_BYTES = 1024 * 1024
MAX_LOCK_ENTRIES = 1024
_SHA256 = re.compile(r"[0-9a-f]{64}\Z")


@dataclass(frozen=True, slots=True)
class LockedInput:
    """A policy module and the SHA-256 of its bytes."""

    path: str
    sha256: str

    def to_json(self) -> dict[str, str]:
        """``{"path", "sha256"}``, one entry of the lock's ``inputs``.

        Raises:
            Nothing: it only reads fields.
        """
        return {"path": self.path, "sha256": self.sha256}


@dataclass(frozen=True, slots=True)
class LockedOutput:
    """A generated file: path, renderer, context (None for the Skill's files) and SHA-256."""

    path: str
    renderer: str
    context: str | None
    sha256: str

    def to_json(self) -> dict[str, str | None]:
        """``{"context", "path", "renderer", "sha256"}``, one entry of the lock's ``outputs``.

        Raises:
            Nothing: it only reads fields.
        """
        return {"context": self.context, "path": self.path, "renderer": self.renderer, "sha256": self.sha256}


def _invalid(detail: str) -> InputError:
    return InputError(PolicyCode.LOCK_INVALID, detail, LOCK_PATH)


def _object(value: object, where: str, keys: set[str]) -> dict[str, object]:
    if not isinstance(value, dict):
        raise _invalid(f"{where} must be an object")
    if set(value) != keys:
        extra, missing = sorted(set(value) - keys), sorted(keys - set(value))
        raise _invalid(f"{where} must have exactly the fields {sorted(keys)} (unknown {extra}, missing {missing})")
    return value


def _digest(value: object, where: str) -> str:
    if not isinstance(value, str) or not _SHA256.match(value):
        raise _invalid(f"{where}.sha256 must be 64 lowercase hex digits")
    return value


def _path(value: object, where: str, role: PathRole) -> str:
    if not isinstance(value, str):
        raise _invalid(f"{where}.path must be a string")
    problem = check_authority_path(value, role)
    if problem is not None:
        raise InputError(problem.code, f"{where}.path: {problem.detail}", LOCK_PATH)
    return value


def _sorted_list(value: object, where: str) -> list[object]:
    if not isinstance(value, list):
        raise _invalid(f"{where} must be a list")
    if len(value) > MAX_LOCK_ENTRIES:
        raise _invalid(f"{where} has {len(value)} entries; the limit is {MAX_LOCK_ENTRIES}")
    return value


def _require_order(paths: list[str], where: str) -> None:
    keys = [sort_key(p) for p in paths]
    for a, b in itertools.pairwise(keys):
        if not a < b:
            raise _invalid(f"{where} must be sorted by path with no path twice")


@dataclass(frozen=True, slots=True)
class PolicyLock:
    """A valid ``.agent-policy.lock``."""

    toolchain: Toolchain
    config_sha256: str
    inputs: tuple[LockedInput, ...]
    outputs: tuple[LockedOutput, ...]

    @classmethod
    def from_bytes(cls, data: bytes) -> PolicyLock:
        """Parse ``.agent-policy.lock``, which must be exactly its RFC 8785 canonical bytes.

        Raises:
            InputError: the strict-JSON codes (``BAD_JSON``, ``DUPLICATE_KEY``, ``TOO_LARGE``,
                ``TOO_DEEP``); ``NOT_CANONICAL``; every code of :meth:`from_json`.
        """
        doc = loads_strict(data, what=LOCK_PATH, max_bytes=MAX_LOCK_BYTES)
        lock = cls.from_json(doc)
        if lock.to_bytes() != bytes(data):
            raise InputError(CommonCode.NOT_CANONICAL, "the lock is not exactly its RFC 8785 canonical bytes", LOCK_PATH)
        return lock

    @classmethod
    def from_json(cls, doc: object) -> PolicyLock:
        """Validate a parsed lock document; the first problem is raised.

        Raises:
            InputError: ``LOCK_INVALID`` (shape, fields, digests, order, context names);
                ``CONFIG_SCHEMA``; ``TOOLCHAIN_NOT_FULL_SHA``; ``UNKNOWN_RENDERER``; the path
                codes of :func:`check_authority_path` for an input or output path.
        """
        top = _object(doc, "the lock", {"config", "inputs", "outputs", "schema", "toolchain"})
        if type(top["schema"]) is not int or top["schema"] != SCHEMA:
            raise InputError(PolicyCode.CONFIG_SCHEMA, f"the lock's schema must be {SCHEMA}, not {top['schema']!r}", LOCK_PATH)
        config = _object(top["config"], "config", {"path", "sha256"})
        if config["path"] != CONFIG_PATH:
            raise _invalid(f"config.path must be {CONFIG_PATH!r}")
        tc = _object(top["toolchain"], "toolchain", {"repository", "revision"})
        if not is_repository_url(tc["repository"]):
            raise _invalid("toolchain.repository must be an https:// repository URL")
        if not isinstance(tc["revision"], str) or not is_full_sha(tc["revision"]):
            raise InputError(PolicyCode.TOOLCHAIN_NOT_FULL_SHA, "toolchain.revision must be a full lowercase commit SHA", LOCK_PATH)
        inputs = []
        for i, item in enumerate(_sorted_list(top["inputs"], "inputs")):
            entry = _object(item, f"inputs[{i}]", {"path", "sha256"})
            inputs.append(LockedInput(_path(entry["path"], f"inputs[{i}]", PathRole.MODULE), _digest(entry["sha256"], f"inputs[{i}]")))
        _require_order([e.path for e in inputs], "inputs")
        outputs = []
        for i, item in enumerate(_sorted_list(top["outputs"], "outputs")):
            where = f"outputs[{i}]"
            entry = _object(item, where, {"context", "path", "renderer", "sha256"})
            renderer, context = entry["renderer"], entry["context"]
            if renderer == PR_REVIEW_SKILL_V1:
                if context is not None:
                    raise _invalid(f"{where}: a file of the pr-review Skill has no context (null)")
                role = PathRole.SKILL
            elif isinstance(renderer, str) and renderer in OUTPUT_RENDERERS:
                if not isinstance(context, str) or not _CONTEXT_NAME.match(context):
                    raise _invalid(f"{where}.context must be a context name")
                role = PathRole.OUTPUT
            else:
                raise InputError(PolicyCode.UNKNOWN_RENDERER, f"{where}.renderer {renderer!r} is not known to this toolchain", LOCK_PATH)
            outputs.append(LockedOutput(_path(entry["path"], where, role), renderer, context, _digest(entry["sha256"], where)))
        _require_order([e.path for e in outputs], "outputs")
        return cls(Toolchain(tc["repository"], tc["revision"]), _digest(config["sha256"], "config"), tuple(inputs), tuple(outputs))

    def to_json(self) -> dict[str, object]:
        """The lock document (see :meth:`to_bytes` for its one byte form).

        Raises:
            Nothing: it only reads fields.
        """
        return {
            "config": {"path": CONFIG_PATH, "sha256": self.config_sha256},
            "inputs": [e.to_json() for e in self.inputs],
            "outputs": [e.to_json() for e in self.outputs],
            "schema": SCHEMA,
            "toolchain": self.toolchain.to_json(),
        }

    def to_bytes(self) -> bytes:
        """The lock's one byte form: RFC 8785 canonical JSON.

        Raises:
            Nothing: every value is a string, an int or a list of objects of them.
        """
        return canonical_bytes(self.to_json())

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.to_bytes()).hexdigest()

    def output(self, path: str) -> LockedOutput | None:
        """The locked output at ``path``, or None.

        Raises:
            Nothing: a lookup.
        """
        for o in self.outputs:
            if o.path == path:
                return o
        return None

    def input(self, path: str) -> LockedInput | None:
        """The locked input (policy module) at ``path``, or None.

        Raises:
            Nothing: a lookup.
        """
        for i in self.inputs:
            if i.path == path:
                return i
        return None


def make_lock(config: PolicyConfig, inputs: dict[str, str], outputs: list[LockedOutput]) -> PolicyLock:
    """The lock of ``config`` with module digests ``inputs`` and the rendered ``outputs``."""
    return PolicyLock(
        config.toolchain,
        config.sha256,
        tuple(LockedInput(p, inputs[p]) for p in sorted(inputs, key=sort_key)),
        tuple(sorted(outputs, key=lambda o: sort_key(o.path))),
    )


def check_agreement(config: PolicyConfig, lock: PolicyLock, expected: Sequence[tuple[str, str, str | None]]) -> list[Finding]:
    """What keeps ``lock`` from being the lock of ``config``, whose outputs are ``expected``
    ``(path, renderer, context)`` triples.

    Pure: compares the toolchain, the config digest, names, renderers and contexts, never file
    bytes (the input and output digests are judged against the files by the caller).

    Raises:
        Nothing: every disagreement is a returned finding (``LOCK_TOOLCHAIN_MISMATCH``,
        ``CONFIG_DIGEST_MISMATCH``, ``LOCK_STALE``); ``[]`` when they agree.
    """
    found: list[Finding] = []
    if lock.toolchain != config.toolchain:
        found.append(Finding(PolicyCode.LOCK_TOOLCHAIN_MISMATCH, LOCK_PATH,
                             f"the lock names {lock.toolchain.repository} at {lock.toolchain.revision}; the configuration names "
                             f"{config.toolchain.repository} at {config.toolchain.revision}"))
    if lock.config_sha256 != config.sha256:
        found.append(Finding(PolicyCode.CONFIG_DIGEST_MISMATCH, CONFIG_PATH,
                             f"the configuration's SHA-256 is {config.sha256}; the lock records {lock.config_sha256}"))
    locked_inputs = {i.path for i in lock.inputs}
    for path in sorted(set(config.inputs) - locked_inputs, key=sort_key):
        found.append(Finding(PolicyCode.LOCK_STALE, path, "the configuration names this module; the lock does not list it"))
    for path in sorted(locked_inputs - set(config.inputs), key=sort_key):
        found.append(Finding(PolicyCode.LOCK_STALE, path, "the lock lists this module; the configuration no longer names it"))
    want = {path: (renderer, context) for path, renderer, context in expected}
    have = {o.path: (o.renderer, o.context) for o in lock.outputs}
    for path in sorted(set(want) | set(have), key=sort_key):
        w, h = want.get(path), have.get(path)
        if h is None:
            found.append(Finding(PolicyCode.LOCK_STALE, path, "an output to generate that the lock does not list"))
        elif w is None:
            found.append(Finding(PolicyCode.LOCK_STALE, path, "the lock lists an output that is no longer configured and enabled"))
        elif w != h:
            found.append(Finding(PolicyCode.LOCK_STALE, path,
                                 f"the lock records renderer {h[0]} for context {h[1]}; the configuration says {w[0]} for {w[1]}"))
    return found


__all__ = ["MAX_LOCK_BYTES", "LockedInput", "LockedOutput", "PolicyLock", "check_agreement", "make_lock"]
