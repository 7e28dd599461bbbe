"""What the reviewer's confinement gives the adapter: the change image and the procedure, read strictly.

``$ATTEST_IMAGE_CHANGE`` holds ``review.json`` (the review's identities and projections),
``surface.json`` (the changed surface anchors are checked against), ``diff.patch``, ``head/``
and ``projections/``; ``$ATTEST_IMAGE_PROCEDURE`` the verified procedure bundle, whose
``SKILL.md`` is the review procedure's entry point; ``$ATTEST_REVIEW_SEMANTIC`` and
``$ATTEST_REVIEW_ADAPTER`` the two projection files. :func:`parse_review` and
:func:`parse_surface` are pure; :func:`read_inputs` reads the files through descriptors.

    >>> inputs = read_inputs(os.environ)
    >>> [p.path for p in inputs.surface.paths]
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TypeVar

from ..._json import loads_strict
from ..._safefs import O_DIR, UnsafeEntry, open_dir_at, open_regular_at
from ...errors import AttestError, InputError
from ...git._surface import ChangedPath, ChangedSurface, Content, Hunk, Status
from ...inventory import check_path
from ._codes import AgentCode

CHANGE_FORMAT = "https://attest.dev/review-change/v1"
MAX_REVIEW_BYTES = 1 << 20
MAX_SURFACE_BYTES = 64 << 20
MAX_PROJECTION_BYTES = 64 << 20
ROLES = ("semantic", "adapter")
STATUSES: tuple[Status, ...] = ("added", "deleted", "modified", "type-changed")
CONTENTS: tuple[Content, ...] = ("text", "binary", "non-utf8", "oversized", "too-complex", "not-a-file")
MODES = ("100644", "100755", "120000", "160000")
REGULAR_MODES = ("100644", "100755")
NOT_MATERIALIZED_KINDS = ("symlink", "submodule")
_SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
_SHA256 = re.compile(r"[0-9a-f]{64}")
_REVIEW_ID = re.compile(r"[0-9a-f]{32}")
_FULL_NAME = re.compile(r"[^/\s]+/[^/\s]+")
_MAX_ID = 2**53 - 1
_T = TypeVar("_T")
_C = TypeVar("_C", bound=str)
_REVIEW_KEYS = {"format", "review", "repository", "pull_request", "base", "head", "merge_base", "projections", "not_materialized"}
_SURFACE_KEYS = {"base", "head", "base_tree", "head_tree", "paths"}
_PATH_KEYS = {"path", "status", "old_mode", "new_mode", "old_oid", "new_oid", "content", "hunks"}


@dataclass(frozen=True, slots=True)
class Projection:
    """One bound projection: its role, its repository path in the base, its file in the change image, its digest.

    Raises:
        Nothing.
    """

    role: str
    path: str
    file: str
    sha256: str


@dataclass(frozen=True, slots=True)
class NotMaterialized:
    """A head path that is not in ``head/``: a symbolic link or a submodule.

    Raises:
        Nothing.
    """

    path: str
    kind: str
    target: str


@dataclass(frozen=True, slots=True)
class ChangeReview:
    """``review.json`` of the change image, checked field by field (see :func:`parse_review`).

    Raises:
        Nothing.
    """

    review: str
    repository_id: int
    full_name: str
    pull_request_id: int
    pull_request_number: int
    base_commit: str
    base_tree: str
    head_commit: str
    head_tree: str
    merge_base: str
    projections: tuple[Projection, ...]  # semantic, then adapter
    not_materialized: tuple[NotMaterialized, ...]

    def projection(self, role: str) -> Projection:
        return next(p for p in self.projections if p.role == role)


@dataclass(frozen=True, slots=True)
class AgentInputs:
    """Everything the adapter reads before CMD runs: where things are, the review and its changed surface.

    Raises:
        Nothing.
    """

    change_dir: str
    procedure_dir: str
    semantic_file: str
    adapter_file: str
    base_dir: str | None
    review: ChangeReview
    surface: ChangedSurface


class _Bad(Exception):
    """(internal) A shape problem at ``where``; turned into ``AGENT_INPUT_MALFORMED`` for the file it is in."""

    def __init__(self, where: str, detail: str) -> None:
        super().__init__(f"{where}: {detail}")
        self.where, self.detail = where, detail


def _malformed(what: str, detail: str) -> InputError:
    return InputError(AgentCode.AGENT_INPUT_MALFORMED, detail, what)


def _missing(what: str, detail: str) -> InputError:
    return InputError(AgentCode.AGENT_INPUT_MISSING, detail, what)


# -- shapes (pure) ------------------------------------------------------------------------------


def _obj(doc: object, keys: set[str], where: str) -> dict[str, object]:
    if not isinstance(doc, dict) or set(doc) != keys:
        raise _Bad(where, f"must be an object of exactly {', '.join(sorted(keys))}")
    return doc


def _match(value: object, pattern: re.Pattern[str], where: str, what: str) -> str:
    if not isinstance(value, str) or not pattern.fullmatch(value):
        raise _Bad(where, f"must be {what}")
    return value


def _sha(value: object, where: str) -> str:
    return _match(value, _SHA, where, "a full lowercase hex object id (40 or 64 digits)")


def _int(value: object, where: str, *, low: int = 1) -> int:
    if type(value) is not int or not low <= value <= _MAX_ID:
        raise _Bad(where, f"must be an integer of at least {low}")
    return value


def _path(value: object, where: str) -> str:
    problem = check_path(value) if isinstance(value, str) else (None, "not a string")
    if problem is not None:
        raise _Bad(where, f"must be a repository-relative path ({problem[1]})")
    assert isinstance(value, str)
    return value


def _strict_json(data: bytes, what: str, max_bytes: int, max_depth: int) -> object:
    try:
        return loads_strict(data, what=what, max_bytes=max_bytes, max_depth=max_depth)
    except AttestError as e:
        raise _malformed(what, f"not one strict JSON document: {e.code}: {e.detail}") from e


def _shaped(what: str, build: Callable[[], _T]) -> _T:
    try:
        return build()
    except _Bad as e:
        raise _malformed(what, f"{e.where} {e.detail}") from e


def _projection(role: str, doc: object) -> Projection:
    where = f"projections.{role}"
    p = _obj(doc, {"path", "file", "sha256"}, where)
    if p["file"] != f"projections/{role}":
        raise _Bad(f"{where}.file", f"must be projections/{role}")
    return Projection(role, _path(p["path"], f"{where}.path"), p["file"], _match(p["sha256"], _SHA256, f"{where}.sha256", "64 hex digits"))


def _not_materialized(i: int, doc: object) -> NotMaterialized:
    where = f"not_materialized[{i}]"
    x = _obj(doc, {"path", "kind", "target"}, where)
    if x["kind"] not in NOT_MATERIALIZED_KINDS or not isinstance(x["target"], str):
        raise _Bad(where, f"kind must be one of {', '.join(NOT_MATERIALIZED_KINDS)} and target a string")
    return NotMaterialized(_path(x["path"], f"{where}.path"), x["kind"], x["target"])


def _review(doc: object) -> ChangeReview:
    d = _obj(doc, _REVIEW_KEYS, "review.json")
    if d["format"] != CHANGE_FORMAT:
        raise _Bad("format", f"must be {CHANGE_FORMAT}")
    repo = _obj(d["repository"], {"id", "full_name"}, "repository")
    pr = _obj(d["pull_request"], {"id", "number"}, "pull_request")
    base = _obj(d["base"], {"commit", "tree"}, "base")
    head = _obj(d["head"], {"commit", "tree"}, "head")
    projections = _obj(d["projections"], set(ROLES), "projections")
    full_name = repo["full_name"]
    if not isinstance(full_name, str) or not _FULL_NAME.fullmatch(full_name) or not full_name.isprintable():
        raise _Bad("repository.full_name", "must be OWNER/NAME, printable, without white space")
    if not isinstance(d["not_materialized"], list):
        raise _Bad("not_materialized", "must be a list")
    return ChangeReview(
        _match(d["review"], _REVIEW_ID, "review", "32 lowercase hex digits"),
        _int(repo["id"], "repository.id"), full_name,
        _int(pr["id"], "pull_request.id"), _int(pr["number"], "pull_request.number"),
        _sha(base["commit"], "base.commit"), _sha(base["tree"], "base.tree"),
        _sha(head["commit"], "head.commit"), _sha(head["tree"], "head.tree"),
        _sha(d["merge_base"], "merge_base"),
        tuple(_projection(role, projections[role]) for role in ROLES),
        tuple(_not_materialized(i, x) for i, x in enumerate(d["not_materialized"])),
    )


def parse_review(data: bytes) -> ChangeReview:
    """``review.json`` of the change image, strictly: exactly the documented fields, each checked (pure).

    Raises:
        InputError: ``AGENT_INPUT_MALFORMED`` for anything but the documented shape.
    """
    return _shaped("review.json", lambda: _review(_strict_json(data, "review.json", MAX_REVIEW_BYTES, 4)))


def _side(doc: object, where: str) -> tuple[int, int]:
    s = _obj(doc, {"start", "count"}, where)
    return _int(s["start"], f"{where}.start", low=0), _int(s["count"], f"{where}.count", low=0)


def _hunk(doc: object, where: str) -> Hunk:
    h = _obj(doc, {"left", "right"}, where)
    (ls, lc), (rs, rc) = _side(h["left"], f"{where}.left"), _side(h["right"], f"{where}.right")
    try:
        return Hunk(ls, lc, rs, rc)
    except ValueError as e:
        raise _Bad(where, "is not a hunk (git diff -U0 numbering)") from e


def _optional(value: object, check: Callable[[object, str], str], where: str) -> str | None:
    return None if value is None else check(value, where)


def _mode(value: object, where: str) -> str:
    if value not in MODES:
        raise _Bad(where, f"must be one of {', '.join(MODES)} or null")
    assert isinstance(value, str)
    return value


def _one_of(value: object, choices: tuple[_C, ...]) -> _C | None:
    """The choice ``value`` is, or None (pure)."""
    return next((c for c in choices if c == value), None)


def _changed_path(i: int, doc: object) -> ChangedPath:
    where = f"paths[{i}]"
    p = _obj(doc, _PATH_KEYS, where)
    status, content = _one_of(p["status"], STATUSES), _one_of(p["content"], CONTENTS)
    if status is None or content is None or not isinstance(p["hunks"], list):
        raise _Bad(where, f"status must be one of {', '.join(STATUSES)}, content one of {', '.join(CONTENTS)}, hunks a list")
    hunks = tuple(_hunk(h, f"{where}.hunks[{j}]") for j, h in enumerate(p["hunks"]))
    try:
        return ChangedPath(_path(p["path"], f"{where}.path"), status, _optional(p["old_mode"], _mode, f"{where}.old_mode"),
                           _optional(p["new_mode"], _mode, f"{where}.new_mode"), _optional(p["old_oid"], _sha, f"{where}.old_oid"),
                           _optional(p["new_oid"], _sha, f"{where}.new_oid"), content, hunks)
    except ValueError as e:
        raise _Bad(where, "is not a consistent changed path (status, modes, object ids and hunks disagree)") from e


def _surface(doc: object) -> ChangedSurface:
    s = _obj(doc, _SURFACE_KEYS, "surface.json")
    if not isinstance(s["paths"], list):
        raise _Bad("paths", "must be a list")
    paths = tuple(_changed_path(i, p) for i, p in enumerate(s["paths"]))
    names = [p.path for p in paths]
    if len(set(names)) != len(names):
        raise _Bad("paths", "name a path more than once")
    return ChangedSurface(_sha(s["base"], "base"), _sha(s["head"], "head"), _sha(s["base_tree"], "base_tree"),
                          _sha(s["head_tree"], "head_tree"), paths)


def parse_surface(data: bytes) -> ChangedSurface:
    """``surface.json`` of the change image, strictly, as :class:`attest.git.ChangedSurface` (pure).

    Raises:
        InputError: ``AGENT_INPUT_MALFORMED`` for anything but the documented shape: an unknown
            or missing field, a path ``check_path`` refuses, a path twice, an inconsistent hunk.
    """
    return _shaped("surface.json", lambda: _surface(_strict_json(data, "surface.json", MAX_SURFACE_BYTES, 6)))


def check_consistent(review: ChangeReview, surface: ChangedSurface, environ: Mapping[str, str]) -> None:
    """``review.json``, ``surface.json`` and the run's ``REVIEW_*`` variables name one change (pure).

    Raises:
        InputError: ``AGENT_INPUT_MALFORMED`` naming the first disagreement.
    """
    pairs = [("surface.json head", surface.head, review.head_commit), ("surface.json base", surface.base, review.merge_base),
             ("surface.json head_tree", surface.head_tree, review.head_tree)]
    pairs += [(f"${name}", environ[name], value) for name, value in
              (("REVIEW_ID", review.review), ("REVIEW_HEAD", review.head_commit), ("REVIEW_MERGE_BASE", review.merge_base))
              if name in environ]
    for what, got, want in pairs:
        if got != want:
            raise _malformed(what, f"is {got!r}, but review.json says {want!r}")


# -- reading (through descriptors) --------------------------------------------------------------


def _env_path(environ: Mapping[str, str], name: str) -> str:
    value = environ.get(name, "")
    if not value or not os.path.isabs(value):
        raise _missing(f"${name}", "is not set to an absolute path: run me inside `attest review exec --review ID`")
    return value


@contextmanager
def _opened_dir(path: str, what: str) -> Iterator[int]:
    try:
        fd = os.open(path, O_DIR)
    except OSError as e:
        raise _missing(what, f"cannot open the directory {path}: {e.strerror}") from e
    try:
        yield fd
    finally:
        os.close(fd)


def _read_at(dfd: int, name: str, what: str, max_bytes: int) -> bytes:
    """The bytes of the plain regular file ``name`` under ``dfd`` (no link followed), at most ``max_bytes``."""

    try:
        fd, st = open_regular_at(dfd, name)
    except OSError as e:
        raise _missing(what, f"cannot open it as a regular file: {e.strerror or e}") from e
    try:
        if st.st_size > max_bytes:
            raise _malformed(what, f"is {st.st_size} bytes; the limit is {max_bytes}")
        chunks: list[bytes] = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        data = b"".join(chunks)
    except OSError as e:
        raise _missing(what, f"cannot read it: {e.strerror}") from e
    finally:
        os.close(fd)
    if len(data) > max_bytes:
        raise _malformed(what, f"grew past {max_bytes} bytes")
    return data


def _read_file(path: str, what: str, max_bytes: int) -> bytes:
    parent, name = os.path.split(path)
    with _opened_dir(parent or "/", what) as dfd:
        return _read_at(dfd, name, what, max_bytes)


def _check_present(change_dir: str) -> None:
    with _opened_dir(change_dir, "$ATTEST_IMAGE_CHANGE") as dfd:
        for name, opener in (("head", open_dir_at), ("diff.patch", lambda d, n: open_regular_at(d, n)[0])):
            try:
                os.close(opener(dfd, name))
            except OSError as e:
                raise _missing(f"$ATTEST_IMAGE_CHANGE/{name}", f"is not in the change image: {e.strerror or e}") from e


def read_inputs(environ: Mapping[str, str]) -> AgentInputs:
    """Read and check everything the confinement gives the adapter (see docs/review-agent.md "Inputs").

    Raises:
        InputError: ``AGENT_INPUT_MISSING`` (a variable unset or not absolute, a file or
            directory absent, unreadable or not of its kind); ``AGENT_INPUT_MALFORMED``
            (``review.json`` or ``surface.json`` not the documented shape, a file too large, a
            projection whose digest is not the one ``review.json`` records, or ``review.json``,
            ``surface.json`` and ``REVIEW_ID``/``REVIEW_HEAD``/``REVIEW_MERGE_BASE`` disagreeing).
    """
    change_dir = _env_path(environ, "ATTEST_IMAGE_CHANGE")
    procedure_dir = _env_path(environ, "ATTEST_IMAGE_PROCEDURE")
    files = {role: _env_path(environ, f"ATTEST_REVIEW_{role.upper()}") for role in ROLES}
    with _opened_dir(change_dir, "$ATTEST_IMAGE_CHANGE") as dfd:
        review = parse_review(_read_at(dfd, "review.json", "review.json", MAX_REVIEW_BYTES))
        surface = parse_surface(_read_at(dfd, "surface.json", "surface.json", MAX_SURFACE_BYTES))
    _check_present(change_dir)
    check_consistent(review, surface, environ)
    with _opened_dir(procedure_dir, "$ATTEST_IMAGE_PROCEDURE") as pfd:
        try:
            os.close(open_regular_at(pfd, "SKILL.md")[0])
        except OSError as e:
            raise _missing("$ATTEST_IMAGE_PROCEDURE/SKILL.md", f"the procedure's entry point is not there: {e.strerror or e}") from e
    for role, path in files.items():
        digest = hashlib.sha256(_read_file(path, f"$ATTEST_REVIEW_{role.upper()}", MAX_PROJECTION_BYTES)).hexdigest()
        if digest != review.projection(role).sha256:
            raise _malformed(f"$ATTEST_REVIEW_{role.upper()}", f"is not the {role} projection review.json records (sha256 {digest})")
    base = environ.get("ATTEST_IMAGE_BASE") or None
    return AgentInputs(change_dir, procedure_dir, files["semantic"], files["adapter"],
                       base if base is not None and os.path.isabs(base) else None, review, surface)


def _count_lines(fd: int) -> int:
    lines, last = 0, b"\n"
    while chunk := os.read(fd, 1 << 20):
        lines += chunk.count(b"\n")
        last = chunk[-1:]
    return lines + (last != b"\n")


def head_line_count(change_dir: str, path: str) -> int | None:
    """How many lines ``head/<path>`` of the change image has, or None when it is not a regular file there.

    Lines are counted as git numbers them: each newline ends one, and a last line without
    one counts too. Each component is opened without following a link.

    Raises:
        InputError: ``AGENT_INPUT_MISSING`` when the change image cannot be read.
    """

    with _opened_dir(change_dir, "$ATTEST_IMAGE_CHANGE") as top:
        fds: list[int] = []
        try:
            fds.append(open_dir_at(top, "head"))
            *parents, name = path.split("/")
            for part in parents:
                fds.append(open_dir_at(fds[-1], part))
            fd, _ = open_regular_at(fds[-1], name)
            fds.append(fd)
            return _count_lines(fd)
        except (UnsafeEntry, FileNotFoundError, NotADirectoryError, IsADirectoryError):
            return None
        except OSError as e:
            raise _missing(f"$ATTEST_IMAGE_CHANGE/head/{path}", f"cannot read it: {e.strerror}") from e
        finally:
            for fd in fds:
                os.close(fd)


__all__ = [
    "CHANGE_FORMAT",
    "AgentInputs",
    "ChangeReview",
    "NotMaterialized",
    "Projection",
    "check_consistent",
    "head_line_count",
    "parse_review",
    "parse_surface",
    "read_inputs",
]
