"""Step 2, identity: repository, pull request, base and head from the host (docs/bootstrap.md, "Step 2: identity").

The identity file's fields and an example: docs/formats.md "Identity file".

The offline host adapter reads them from an identity file (``--identity FILE``), a strict JSON
object of exactly these fields, read again by every later re-resolution (:func:`load_identity`):

    {"repository": {"id": int, "full_name": str}, "pull_request": {"id": int, "number": int},
     "base": {"sha": str}, "head": {"sha": str}}

The base tree always comes from ``GITDIR``'s object database (re-hashed), never from a worktree.
A hosting-API adapter (``--github``, :mod:`._github`) also reports the API's base tree
(:attr:`HostIdentity.api_base_tree`); :func:`establish_identity` then requires both to agree.

    >>> host = load_identity("identity.json")
    >>> with GitRepo.open("repo.git") as repo:
    ...     ident = establish_identity(IdentityFile("identity.json"), repo)
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Protocol, TypedDict

from ..._fs import read_bounded
from ..._json import loads_strict
from ..._shape import Shape
from ...errors import AttestError, InputError, VerificationError
from ...git import GitCode, GitRepo, verify_full_sha
from ._codes import BootstrapCode

MAX_IDENTITY_BYTES = 64 * 1024
MAX_ID = (1 << 53) - 1  # JSON-safe integers only
# OWNER/NAME; a NAME of "." or ".." is no repository's (GitHub refuses both) and would be another path.
FULL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}/(?!\.\.?\Z)[A-Za-z0-9_.-]{1,100}\Z")
_SHA = re.compile(r"(?:[0-9a-f]{40}|[0-9a-f]{64})\Z")
_SHA_EXPECTED = "a full lowercase 40- or 64-hex commit id"
_SHAPE = {"repository": {"id", "full_name"}, "pull_request": {"id", "number"}, "base": {"sha"}, "head": {"sha"}}


class RepositoryDoc(TypedDict):
    """A repository in a written document (the handoff, a review state, a ``--json`` output): its stable id and OWNER/NAME."""

    id: int
    full_name: str


class PullRequestDoc(TypedDict):
    """A pull request in a written document: its stable id and number."""

    id: int
    number: int


@dataclass(frozen=True, slots=True)
class HostIdentity:
    """What the host says: stable repository and pull-request identities, base and head commits.

    ``api_base_tree`` is the base commit's tree as a hosting API reports it (None for the offline
    adapter, whose file has no such field): never used as the tree, only compared with the objects'
    (:func:`establish_identity`). It takes no part in ``==``: two resolutions are the same identity
    whichever adapter made them, and the base tree that counts is always the objects'.

    Raises:
        InputError: from ``from_json``: ``BAD_IDENTITY`` (not exactly the documented fields, a
            non-positive or unsafe integer, a malformed ``full_name``), ``NOT_FULL_SHA`` (a base
            or head that is not a full lowercase commit id). The ``*_json`` methods raise nothing.
    """

    repository_id: int
    full_name: str
    pull_request_id: int
    number: int
    base_sha: str
    head_sha: str
    api_base_tree: str | None = field(default=None, compare=False)

    @classmethod
    def from_json(cls, doc: object, where: str) -> HostIdentity:
        ident = Shape(doc, "identity", lambda d: InputError(BootstrapCode.BAD_IDENTITY, d, where)).object(_SHAPE)
        parts = {key: ident.nested(key, fields) for key, fields in _SHAPE.items()}
        not_full = ident.with_error(lambda d: InputError(GitCode.NOT_FULL_SHA, d, where))
        repository, pull_request = parts["repository"], parts["pull_request"]
        name = repository.string("full_name", pattern=FULL_NAME, expected="OWNER/NAME")
        return cls(repository.positive_int("id", maximum=MAX_ID), name, pull_request.positive_int("id", maximum=MAX_ID),
                   pull_request.positive_int("number", maximum=MAX_ID),
                   not_full.at("base").string("sha", pattern=_SHA, expected=_SHA_EXPECTED),
                   not_full.at("head").string("sha", pattern=_SHA, expected=_SHA_EXPECTED))

    def repository_json(self) -> RepositoryDoc:
        return {"id": self.repository_id, "full_name": self.full_name}

    def pull_request_json(self) -> PullRequestDoc:
        return {"id": self.pull_request_id, "number": self.number}


def load_identity(path: str | os.PathLike[str]) -> HostIdentity:
    """Parse an identity file strictly (duplicate keys, non-integers, short SHAs, extra fields: errors).

    Raises:
        InputError: ``UNREADABLE``, ``TOO_LARGE``; ``BAD_IDENTITY`` (not strict JSON, or not the
            documented shape); ``NOT_FULL_SHA``.
    """

    where = os.fspath(path)
    data = read_bounded(where, what="identity file", max_bytes=MAX_IDENTITY_BYTES)
    try:
        doc = loads_strict(data, what="identity file", max_bytes=MAX_IDENTITY_BYTES, max_depth=4)
    except AttestError as e:
        raise InputError(BootstrapCode.BAD_IDENTITY, f"the identity file is not strict JSON: {e.detail}", where) from e
    return HostIdentity.from_json(doc, where)


class HostAdapter(Protocol):
    """Where the identities come from (offline file, or a hosting API).

    Raises:
        InputError: from ``resolve``: ``BAD_IDENTITY``, ``NOT_FULL_SHA``, and the adapter's read
            codes (``UNREADABLE``, ``HOST_READ_FAILED``).
        VerificationError: from ``resolve``: ``HOST_MISMATCH`` (a hosting API whose answers
            disagree with the request or each other).
    """

    def resolve(self) -> HostIdentity: ...


@dataclass(frozen=True, slots=True)
class IdentityFile:
    """The offline host adapter (``--identity FILE``).

    Raises:
        InputError: from ``resolve``, the codes of :func:`load_identity` (``UNREADABLE``,
            ``TOO_LARGE``, ``BAD_IDENTITY``, ``NOT_FULL_SHA``).
    """

    path: str

    def resolve(self) -> HostIdentity:
        return load_identity(self.path)


@dataclass(frozen=True, slots=True)
class Identity:
    """Step 2's result: the host's identities plus the base commit's tree from the object database."""

    host: HostIdentity
    base_tree: str
    object_format: str

    @property
    def base_sha(self) -> str:
        return self.host.base_sha


def establish_identity(adapter: HostAdapter, repo: GitRepo) -> Identity:
    """Step 2: the host's identities; base and head full SHAs of the repository's format; the base tree from objects.

    When the adapter reports the API's base tree, it must be the objects' tree (``API_TREE_MISMATCH``).

    Raises:
        InputError: the adapter's codes (see :class:`HostAdapter`); ``NOT_FULL_SHA`` (a base,
            head or API tree id that is not a full id of the repository's format).
        VerificationError: ``API_TREE_MISMATCH``, ``HOST_MISMATCH``; the git layer's codes for
            the base commit (``OBJECT_MISSING``, ``WRONG_OBJECT_TYPE``, ``MALFORMED_OBJECT``, ...).
        EnvironmentFailure: ``GIT_FAILED``.
    """

    host = adapter.resolve()
    fmt = repo.object_format
    verify_full_sha(host.base_sha, fmt, what="base commit")
    verify_full_sha(host.head_sha, fmt, what="head commit")
    tree = repo.commit_tree(host.base_sha)
    if host.api_base_tree is not None:
        # The objects decide what the base is; an API that names another tree for the same commit
        # is a host (or a repository) that cannot be trusted to have named the right base either.
        verify_full_sha(host.api_base_tree, fmt, what="API base tree")
        if host.api_base_tree != tree:
            raise VerificationError(BootstrapCode.API_TREE_MISMATCH,
                                    f"the hosting API says the base commit {host.base_sha} has the tree {host.api_base_tree}; "
                                    f"GITDIR's objects say {tree}")
    return Identity(host, tree, fmt)


__all__ = ["HostAdapter", "HostIdentity", "Identity", "IdentityFile", "establish_identity", "load_identity"]
