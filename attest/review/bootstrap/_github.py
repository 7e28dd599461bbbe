"""The GitHub host adapter of step 2 (``--github OWNER/NAME --pr N``; docs/bootstrap.md "Step 2: identity").

:class:`GitHubIdentity` reads the facts the offline identity file holds from the REST API, through
the review layer's one HTTP client (:class:`~attest.review.evidence.GitHubClient`: one deadline per
response, a size cap, no retry, no redirect, the token only in ``Authorization: Bearer`` and
scrubbed from every message), in this order, afresh on every :meth:`~GitHubIdentity.resolve`:

1. ``GET /repos/{owner}/{name}``: the repository's ``id`` and ``full_name`` (which must be the
   requested name, compared case-insensitively as GitHub compares names; the API's spelling is
   recorded);
2. ``GET /repos/{owner}/{name}/pulls/{N}``: the pull request's ``id``, ``number`` (must be N),
   ``base.sha``, ``head.sha``, and ``base.repo.id`` / ``base.repo.full_name`` (must be the
   repository of 1, exactly);
3. ``GET /repos/{owner}/{name}/git/commits/{base.sha}``: the base commit's ``sha`` (must be
   ``base.sha``) and ``tree.sha``, which :func:`establish_identity` compares with the tree of that
   commit in GITDIR's objects.

A read without a complete JSON answer is ``HOST_READ_FAILED``, an answer of the wrong shape
``BAD_IDENTITY`` (a SHA that is not full and lowercase: ``NOT_FULL_SHA``), answers that disagree
``HOST_MISMATCH``; nothing is retried. :func:`host_adapter` turns the command's host options into
an adapter (``BAD_HOST_OPTIONS``).

    >>> host = GitHubIdentity("octo/widgets", 42, token=os.environ.get("GITHUB_TOKEN"))
    >>> with GitRepo.open("widgets.git") as repo:
    ...     ident = establish_identity(host, repo)  # doctest: +SKIP
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import NoReturn

from ..._shape import Shape
from ...errors import AttestError, Finding, InputError, VerificationError
from ...git import GitCode
from ..evidence._http import DEFAULT_API_URL, FetchFailed, GitHubClient, HttpLimits
from ._codes import BootstrapCode
from ._identity import _SHA, FULL_NAME, MAX_ID, HostAdapter, HostIdentity, IdentityFile

DEFAULT_TOKEN_ENV = "GITHUB_TOKEN"
# A name that is safe to put into a request path: GitHub's owner and repository spellings, and
# never "." or ".." (which would make /repos/octo/.. another endpoint).
_OWNER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]{0,38}/[A-Za-z0-9._-]{1,100}\Z")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,255}\Z")


def _check_full_name(value: str) -> bool:
    return bool(_OWNER_NAME.match(value)) and value.split("/")[1] not in (".", "..")


@dataclass(frozen=True, slots=True)
class GitHubIdentity:
    """The GitHub host adapter: repository ``full_name``, pull request ``number``, read through ``api_url``.

    ``token`` (None: anonymous reads) is sent to ``api_url`` only and never shown, not even in
    ``repr``. Construction validates every option, so a bad one fails before any step runs.

    Raises:
        InputError: from the constructor: ``BAD_HOST_OPTIONS`` (a malformed ``--github``,
            ``--pr`` or ``--api-url``, or a token a header cannot carry). From ``resolve``:
            ``HOST_READ_FAILED`` (a read gave no complete JSON answer), ``BAD_IDENTITY`` (a
            response without a field, or holding the token), ``NOT_FULL_SHA``.
        VerificationError: from ``resolve``: ``HOST_MISMATCH`` (an answer for another
            repository, pull request, base repository or commit).
    """

    full_name: str
    number: int
    api_url: str = DEFAULT_API_URL
    token: str | None = field(default=None, repr=False)
    limits: HttpLimits = field(default_factory=HttpLimits)

    def __post_init__(self) -> None:
        problems: list[str] = []
        if not isinstance(self.full_name, str) or not _check_full_name(self.full_name):
            problems.append("--github must be OWNER/NAME (GitHub's spelling of a repository)")
        if type(self.number) is not int or not 0 < self.number <= MAX_ID:
            problems.append("--pr must be a positive JSON-safe integer")
        if problems:
            raise InputError(findings=[Finding(BootstrapCode.BAD_HOST_OPTIONS, None, p) for p in problems])
        self.client()  # the URL and the token, judged now

    def client(self) -> GitHubClient:
        try:
            return GitHubClient(self.api_url, token=self.token, limits=self.limits)
        except InputError as e:  # the client's own judgement of --api-url and the token (it never quotes the token)
            raise InputError(BootstrapCode.BAD_HOST_OPTIONS, e.detail) from e

    def _scrub(self, text: str) -> str:
        return text.replace(self.token, "<token>") if self.token else text

    # ------------------------------------------------------------------ reading
    def resolve(self) -> HostIdentity:
        """Read the repository, the pull request and the base commit (in that order, every time)."""
        client = self.client()
        repo_path = f"/repos/{self.full_name}"

        # 1. The repository: its stable id, and the name the API spells it with.
        where, doc = self._get(client, repo_path)
        repository_id = self._integer(doc, "id", where)
        full_name = self._name(doc, "full_name", where)
        if full_name.lower() != self.full_name.lower():
            # GitHub compares names case-insensitively; a renamed repository answers 301, which the
            # client never follows, so any other name is an answer for another repository.
            self._mismatch(f"the API answered for the repository {full_name}, not the requested {self.full_name}", where)

        # 2. The pull request, which must be number N of exactly that repository.
        where, doc = self._get(client, f"{repo_path}/pulls/{self.number}")
        pull_request_id = self._integer(doc, "id", where)
        number = self._integer(doc, "number", where)
        base_sha = self._sha(doc, "base.sha", where)
        head_sha = self._sha(doc, "head.sha", where)
        base_repo_id = self._integer(doc, "base.repo.id", where)
        base_repo_name = self._name(doc, "base.repo.full_name", where)
        if number != self.number:
            self._mismatch(f"the API answered for pull request {number}, not the requested {self.number}", where)
        if base_repo_id != repository_id or base_repo_name != full_name:
            self._mismatch(f"the pull request's base repository (id {base_repo_id}) is not the repository read first "
                           f"(id {repository_id}, {full_name})", where)

        # 3. The base commit: its tree as the API knows it (compared with the objects' in establish_identity).
        where, doc = self._get(client, f"{repo_path}/git/commits/{base_sha}")
        commit_sha = self._sha(doc, "sha", where)
        tree_sha = self._sha(doc, "tree.sha", where)
        if commit_sha != base_sha:
            self._mismatch(f"the API answered for the commit {commit_sha}, not the pull request's base {base_sha}", where)
        return HostIdentity(repository_id, full_name, pull_request_id, number, base_sha, head_sha, api_base_tree=tree_sha)

    def _get(self, client: GitHubClient, path: str) -> tuple[str, object]:
        where = client.target(path)
        try:
            return where, client.get_object(path, lambda value: value)
        except FetchFailed as e:  # already scrubbed by the client
            raise InputError(BootstrapCode.HOST_READ_FAILED, f"{e.detail} ({e.code}; not retried)", where) from e

    # Every failure below is built here, scrubbed: a hostile server may echo the token in any field.
    def _fail(self, cls: type[AttestError], code: str, detail: str, where: str) -> NoReturn:
        raise cls(code, self._scrub(detail), self._scrub(where))

    def _mismatch(self, detail: str, where: str) -> NoReturn:
        self._fail(VerificationError, BootstrapCode.HOST_MISMATCH, detail, where)

    def _field(self, doc: object, dotted: str, where: str) -> Shape:
        field = Shape(doc, "response", lambda d: self._error(BootstrapCode.BAD_IDENTITY, d, where)).at(*dotted.split("."))
        if isinstance(field.value, str) and self.token and self.token in field.value:
            self._fail(InputError, BootstrapCode.BAD_IDENTITY, f"the response's {dotted} holds the token (not shown)", where)
        return field

    def _error(self, code: str, detail: str, where: str) -> InputError:
        return InputError(code, self._scrub(detail), self._scrub(where))

    def _integer(self, doc: object, dotted: str, where: str) -> int:
        return self._field(doc, dotted, where).positive_int(maximum=MAX_ID)

    def _name(self, doc: object, dotted: str, where: str) -> str:
        field = self._field(doc, dotted, where)
        name = field.string(pattern=FULL_NAME, expected="OWNER/NAME")
        field.check(_check_full_name(name), "OWNER/NAME")
        return name

    def _sha(self, doc: object, dotted: str, where: str) -> str:
        field = self._field(doc, dotted, where).with_error(lambda d: self._error(GitCode.NOT_FULL_SHA, d, where))
        return field.string(pattern=_SHA, expected="a full lowercase 40- or 64-hex object id")


def host_adapter(
    *,
    identity: str | os.PathLike[str] | None,
    github: str | None,
    pr: int | None,
    token_env: str | None,
    api_url: str | None,
    environ: Mapping[str, str],
    limits: HttpLimits | None = None,
) -> HostAdapter:
    """The adapter the host options select: ``identity`` (``--identity FILE``) or ``github`` with ``pr``.

    ``token_env`` and ``api_url`` are None when not given. The token is the variable ``token_env``
    names (unset or empty: ``BAD_HOST_OPTIONS``); without ``token_env`` it is ``GITHUB_TOKEN`` if
    set, but only for the default API URL: a token found implicitly is never sent to a URL the
    operator named without also naming the token.

    Raises:
        InputError: ``BAD_HOST_OPTIONS``: not exactly one adapter, ``--pr``/``--token-env``/
            ``--api-url`` with ``--identity``, ``--github`` without ``--pr``, a ``--token-env``
            that is not a variable name or names an unset or empty variable, and whatever
            :class:`GitHubIdentity` refuses.
    """
    problems: list[str] = []
    if (identity is None) == (github is None):
        problems.append("give exactly one host adapter: --identity FILE or --github OWNER/NAME --pr N")
    elif github is None and (pr is not None or token_env is not None or api_url is not None):
        problems.append("--pr, --token-env and --api-url belong to --github, not to --identity")
    elif github is not None and pr is None:
        problems.append("--github OWNER/NAME needs --pr N")
    if problems:
        raise InputError(findings=[Finding(BootstrapCode.BAD_HOST_OPTIONS, None, p) for p in problems])
    if identity is not None:
        return IdentityFile(os.fspath(identity))
    assert github is not None and pr is not None
    url = DEFAULT_API_URL if api_url is None else api_url
    token: str | None = None
    if token_env is not None:
        if not _ENV_NAME.match(token_env):
            # Not quoted: the likeliest wrong value here is the token itself.
            raise InputError(BootstrapCode.BAD_HOST_OPTIONS, "--token-env must be the NAME of an environment variable (the value is not shown)")
        token = environ.get(token_env) or None
        if token is None:
            raise InputError(BootstrapCode.BAD_HOST_OPTIONS, f"the environment variable {token_env!r} named by --token-env is unset or empty")
    elif url == DEFAULT_API_URL:
        token = environ.get(DEFAULT_TOKEN_ENV) or None
    return GitHubIdentity(github, pr, url, token, limits if limits is not None else HttpLimits())


__all__ = ["DEFAULT_TOKEN_ENV", "GitHubIdentity", "host_adapter"]
