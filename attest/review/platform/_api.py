"""What attest reads from and writes to GitHub, each answer parsed strictly (docs/github.md).

One :class:`GitHubPlatform` per pull request, over the review layer's one client
(:class:`~attest.review.evidence.GitHubClient`). Every answer is parsed into a small frozen
value of exactly the fields attest decides on; a field of the wrong type or a missing one is
``PLATFORM_RESPONSE_SHAPE``, a request without a complete answer ``PLATFORM_REQUEST_FAILED``
(nothing is retried, no redirect is followed). A write whose answer never came whole raises
:class:`NoAnswer` (no answer in time, a server error, an answer too large or not JSON, one
holding the token): GitHub may have done it all the same, and whether it took effect is for the
caller to find out by reading, never by writing again.

Nothing GitHub answers holds the token; an answer that does is refused whole (every string of
it becomes messages, files and the JSON output), and so is a review answered for another pull
request (its ``pull_request_url``).

    >>> gh = GitHubPlatform.for_host(host)  # host: attest.review.bootstrap.GitHubIdentity
    >>> gh.pull().head_sha  # doctest: +SKIP
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar
from urllib.parse import quote, urlsplit

from ..._shape import Shape
from ...errors import EnvironmentFailure
from ..evidence._codes import EvidenceCode
from ..evidence._http import FetchFailed, GitHubClient
from ..evidence._model import ShapeError, _printable
from ._codes import PlatformCode

if TYPE_CHECKING:
    from ..bootstrap import GitHubIdentity

_T = TypeVar("_T")
_SHA = re.compile(r"(?:[0-9a-f]{40}|[0-9a-f]{64})\Z")
_SHA_EXPECTED = "a full lowercase commit id"
_MAX_ID = 2**63 - 1
#: A write's failures after which GitHub may have done it: no whole answer, or one that is not JSON (a proxy's page).
_MAYBE_DONE = frozenset({EvidenceCode.HTTP_ERROR, EvidenceCode.RESPONSE_TOO_LARGE, EvidenceCode.RESPONSE_NOT_JSON})
_SERVER_ERRORS = frozenset(range(500, 600))
#: The one GraphQL query of review threads (cursor-paginated, 100 per page).
THREADS_QUERY = (
    "query($owner: String!, $name: String!, $number: Int!, $cursor: String) { repository(owner: $owner, name: $name) { "
    "pullRequest(number: $number) { reviewThreads(first: 100, after: $cursor) { pageInfo { hasNextPage endCursor } "
    "nodes { id isResolved isOutdated path line comments(first: 1) { nodes { author { login } url } } } } } } }"
)


class NoAnswer(Exception):
    """A write got no complete answer: it may or may not have taken effect."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


# -- strict fields -------------------------------------------------------------------------------------------------

def _answer(doc: object) -> Shape:
    """An answer, read strictly: a refusal is a :class:`ShapeError` naming the field (``base.repo.id: expected ...``)."""
    return Shape(doc, "", ShapeError)


def _holds(value: object, scrub: Callable[[str], str]) -> bool:
    """Whether any string of a JSON value (keys too) holds what ``scrub`` removes: the token."""
    todo = [value]
    while todo:
        item = todo.pop()
        if isinstance(item, str):
            if scrub(item) != item:
                return True
        elif isinstance(item, Mapping):
            todo += [*item.keys(), *item.values()]
        elif isinstance(item, list):
            todo += item
    return False


# -- the values ----------------------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class PullRequestState:
    """A pull request as GitHub answers it now (``GET /repos/{repo}/pulls/{n}``).

    ``mergeable`` is None while GitHub computes it; ``merge_commit_sha`` is then GitHub's test
    merge of the head into the base (after a merge: the merge commit).
    """

    id: int
    number: int
    state: str
    merged: bool
    base_repository_id: int
    base_full_name: str
    head_full_name: str | None
    base_ref: str
    base_sha: str
    head_sha: str
    mergeable: bool | None
    mergeable_state: str | None
    merge_commit_sha: str | None

    @classmethod
    def from_json(cls, doc: object) -> PullRequestState:
        a = _answer(doc)
        mergeable = a.optional_boolean("mergeable", present=True)
        state = a.one_of("state", ("open", "closed"))
        head_repo = a.at("head", "repo")
        merge_commit = a.optional_string("merge_commit_sha", pattern=_SHA, expected=_SHA_EXPECTED, present=True)
        base = a.at("base")
        return cls(a.positive_int("id", maximum=_MAX_ID), a.positive_int("number", maximum=_MAX_ID), state, a.boolean("merged"),
                   base.at("repo").positive_int("id", maximum=_MAX_ID), base.at("repo").string("full_name"),
                   None if head_repo.value is None else head_repo.string("full_name"), base.string("ref"),
                   base.string("sha", pattern=_SHA, expected=_SHA_EXPECTED),
                   a.at("head").string("sha", pattern=_SHA, expected=_SHA_EXPECTED), mergeable,
                   a.optional_string("mergeable_state", present=True), merge_commit)


@dataclass(frozen=True, slots=True)
class PostedReview:
    """A review on the pull request (``GET .../pulls/{n}/reviews``): who, on which commit, in which state, saying what."""

    id: int
    login: str | None
    commit_id: str | None
    state: str
    body: str
    pull_request_url: str | None = None  # whose review it is (GitHubPlatform compares it with the pull request)

    @classmethod
    def from_json(cls, doc: object) -> PostedReview:
        a = _answer(doc)
        user = a.at("user")
        commit = a.optional_string("commit_id", pattern=_SHA, expected=_SHA_EXPECTED, present=True)
        return cls(a.positive_int("id", maximum=_MAX_ID), None if user.value is None else user.string("login"), commit,
                   a.string("state"), a.optional_string("body", present=True) or "", a.string("pull_request_url"))


@dataclass(frozen=True, slots=True)
class ReviewThread:
    """One review thread (GraphQL ``reviewThreads``): resolved or not, where, who opened it."""

    id: str
    resolved: bool
    outdated: bool
    path: str
    line: int | None
    author: str | None
    url: str | None

    @classmethod
    def from_json(cls, doc: object) -> ReviewThread:
        a = _answer(doc)
        line = a.optional_int("line", present=True)
        comments = a.at("comments").list_of("nodes")
        author = None
        url = None
        if comments:
            first = comments[0].object()
            account = first.optional("author")
            author = None if account is None else account.string("login")
            url = first.optional_string("url")
        return cls(a.string("id"), a.boolean("isResolved"), a.boolean("isOutdated"), a.string("path"), line, author, url)


@dataclass(frozen=True, slots=True)
class GitCommit:
    """A commit as the API reports it (``GET .../git/commits/{sha}``): its tree and parents."""

    sha: str
    tree: str
    parents: tuple[str, ...]

    @classmethod
    def from_json(cls, doc: object) -> GitCommit:
        a = _answer(doc)
        parents = a.list_of("parents")
        return cls(a.string("sha", pattern=_SHA, expected=_SHA_EXPECTED),
                   a.at("tree").string("sha", pattern=_SHA, expected=_SHA_EXPECTED),
                   tuple(p.string("sha", pattern=_SHA, expected=_SHA_EXPECTED) for p in parents))


@dataclass(frozen=True, slots=True)
class PostedStatus:
    """A commit status as the API answered its creation."""

    id: int
    state: str
    context: str
    description: str | None
    url: str | None = None  # names the commit it is on: .../statuses/{sha}

    @classmethod
    def from_json(cls, doc: object) -> PostedStatus:
        a = _answer(doc)
        return cls(a.positive_int("id", maximum=_MAX_ID), a.string("state"), a.string("context"),
                   a.optional_string("description", present=True), a.string("url"))


# -- the adapter ---------------------------------------------------------------------------------------------------

class GitHubPlatform:
    """The reads and writes of one pull request ``number`` of ``full_name``.

    Raises:
        EnvironmentFailure: ``PLATFORM_REQUEST_FAILED`` (no complete answer, a refused status,
            too large, not JSON), ``PLATFORM_RESPONSE_SHAPE`` (an answer not of the documented shape).
        NoAnswer: from the writes, when the answer never came (see the module docstring).
    """

    def __init__(self, client: GitHubClient, full_name: str, number: int) -> None:
        self.client = client
        self.full_name = full_name
        self.number = number
        self.repo_path = f"/repos/{full_name}"
        self.pr_path = f"{self.repo_path}/pulls/{number}"

    @classmethod
    def for_host(cls, host: GitHubIdentity) -> GitHubPlatform:
        """The platform of the pull request a ``--github`` host adapter names, with its token and API URL."""
        return cls(host.client(), host.full_name, host.number)

    def _fail(self, e: FetchFailed) -> EnvironmentFailure:
        code = PlatformCode.PLATFORM_RESPONSE_SHAPE if e.code is EvidenceCode.RESPONSE_SHAPE else PlatformCode.PLATFORM_REQUEST_FAILED
        return EnvironmentFailure(code, f"{e.detail} ({e.code}; not retried)")

    def _clean(self, parse: Callable[[object], _T]) -> Callable[[object], _T]:
        """``parse``, refusing (ShapeError) an answer that holds the token anywhere."""
        def parse_clean(value: object) -> _T:
            if _holds(value, self.client._scrub):
                raise ShapeError("the answer holds the token (not shown)")
            return parse(value)

        return parse_clean

    def _read(self, path: str, parse: Callable[[object], _T]) -> _T:
        try:
            return self.client.get_object(path, self._clean(parse))
        except FetchFailed as e:
            raise self._fail(e) from e

    def _list(self, path: str, parse: Callable[[object], _T]) -> tuple[_T, ...]:
        try:
            return self.client.get_list(path, None, self._clean(parse))
        except FetchFailed as e:
            raise self._fail(e) from e

    def _write(self, method: str, path: str, body: object, *, ok: Collection[int]) -> tuple[int, object]:
        where = f"{method} {self.client.target(path)}"
        try:
            status, answer = self.client.send(method, path, body, ok=set(ok) | _SERVER_ERRORS)
        except FetchFailed as e:
            if e.code in _MAYBE_DONE:  # sent, perhaps done; the answer never came whole, or not as JSON
                raise NoAnswer(e.detail) from e
            raise self._fail(e) from e  # a refusal (4xx), a redirect (never followed): not done
        if status not in ok:  # a server error: GitHub may have done it before failing to answer
            raise NoAnswer(f"{where}: HTTP {status}")
        if _holds(answer, self.client._scrub):
            raise NoAnswer(f"{where}: the answer holds the token (not shown)")
        return status, answer

    def _of_this_pull(self, what: str, review: PostedReview) -> PostedReview:
        """``review``, when it is a review of this pull request (its ``pull_request_url``)."""
        url = review.pull_request_url or ""
        if urlsplit(url).path.lower() != self.client.target(self.pr_path).lower():
            raise EnvironmentFailure(PlatformCode.PLATFORM_RESPONSE_SHAPE, f"{what} answered review {review.id} of "
                                     f"{_printable(url, 200)!r}, not of {self.full_name} pull request {self.number}")
        return review

    def _parse(self, what: str, parse: Callable[[object], _T], value: object) -> _T:
        try:
            return parse(value)
        except ShapeError as e:
            raise EnvironmentFailure(PlatformCode.PLATFORM_RESPONSE_SHAPE, f"{what}: {e}") from e

    # reads
    def pull(self) -> PullRequestState:
        pr = self._read(self.pr_path, PullRequestState.from_json)
        if pr.number != self.number or pr.base_full_name.lower() != self.full_name.lower():
            raise EnvironmentFailure(PlatformCode.PLATFORM_RESPONSE_SHAPE, f"GET {self.pr_path} answered for pull request "
                                     f"{pr.number} of {_printable(pr.base_full_name, 100)}")
        return pr

    def reviews(self) -> tuple[PostedReview, ...]:
        path = f"{self.pr_path}/reviews?per_page=100"
        return tuple(self._of_this_pull(f"GET {path}", r) for r in self._list(path, PostedReview.from_json))

    def review(self, review_id: int) -> PostedReview:
        path = f"{self.pr_path}/reviews/{review_id}"
        return self._of_this_pull(f"GET {path}", self._read(path, PostedReview.from_json))

    def branch(self, name: str) -> str:
        """The commit ``refs/heads/{name}`` points at now (``GET .../git/ref/heads/{name}``)."""
        if not name or any(part in ("", ".", "..") for part in name.split("/")):
            raise EnvironmentFailure(PlatformCode.PLATFORM_RESPONSE_SHAPE, f"the branch name {_printable(name, 100)!r} "
                                     "is not a branch name")
        path = f"{self.repo_path}/git/ref/heads/{quote(name, safe='/')}"
        ref, kind, sha = self._read(path, lambda d: (_answer(d).string("ref"), _answer(d).at("object").string("type"),
                                                       _answer(d).at("object").string("sha", pattern=_SHA, expected=_SHA_EXPECTED)))
        if (ref, kind) != (f"refs/heads/{name}", "commit"):
            raise EnvironmentFailure(PlatformCode.PLATFORM_RESPONSE_SHAPE, f"GET {path} answered the {_printable(kind, 20)} "
                                     f"{_printable(ref, 100)!r}, not the branch {_printable(name, 100)!r}")
        return sha

    def commit(self, sha: str) -> GitCommit:
        got = self._read(f"{self.repo_path}/git/commits/{sha}", GitCommit.from_json)
        if got.sha != sha:
            raise EnvironmentFailure(PlatformCode.PLATFORM_RESPONSE_SHAPE, f"GET {self.repo_path}/git/commits/{sha} answered "
                                     f"for the commit {got.sha}")
        return got

    def threads(self) -> tuple[ReviewThread, ...]:
        """Every review thread of the pull request (GraphQL, cursor pages, at most the client's page cap)."""
        owner, name = self.full_name.split("/", 1)
        threads: list[ReviewThread] = []
        cursor: str | None = None
        for _ in range(self.client.limits.max_pages):
            variables = {"owner": owner, "name": name, "number": self.number, "cursor": cursor}
            try:
                answer = self.client.graphql(THREADS_QUERY, variables)
            except FetchFailed as e:
                raise self._fail(e) from e
            answer = self._parse("the review-threads query", self._clean(lambda a: a), answer)
            page = self._parse("the review-threads query", lambda a: _answer(a).at("repository", "pullRequest", "reviewThreads").value, answer)
            nodes = self._parse("the review-threads query", lambda p: Shape(p, "reviewThreads", ShapeError).list_of("nodes"), page)
            threads += [self._parse("a review thread", ReviewThread.from_json, n.value) for n in nodes]
            more = self._parse("the review-threads query", lambda p: _answer(p).at("pageInfo").boolean("hasNextPage"), page)
            if not more:
                return tuple(threads)
            cursor = self._parse("the review-threads query", lambda p: _answer(p).at("pageInfo").string("endCursor"), page)
        raise EnvironmentFailure(PlatformCode.PLATFORM_REQUEST_FAILED, f"more than {self.client.limits.max_pages} pages of "
                                 "review threads")

    # writes
    def create_review(self, payload: Mapping[str, object]) -> PostedReview:
        _, answer = self._write("POST", f"{self.pr_path}/reviews", dict(payload), ok=(200,))
        what = f"POST {self.pr_path}/reviews"
        return self._of_this_pull(what, self._parse(what, PostedReview.from_json, answer))

    def post_status(self, sha: str, *, state: str, description: str, context: str, target_url: str | None) -> PostedStatus:
        body: dict[str, object] = {"state": state, "description": description, "context": context}
        if target_url is not None:
            body["target_url"] = target_url
        _, answer = self._write("POST", f"{self.repo_path}/statuses/{sha}", body, ok=(201,))
        return self._parse(f"POST {self.repo_path}/statuses/{sha}", PostedStatus.from_json, answer)

    def statuses_path(self, sha: str) -> str:
        """The path a commit status of ``sha`` is posted to, and which its answer's ``url`` names (with the API's base)."""
        return self.client.target(f"{self.repo_path}/statuses/{sha}")

    def merge(self, sha: str, method: str) -> tuple[int, object]:
        """``PUT .../merge`` pinned to ``sha``: (200, answer), or 405/409/422 with GitHub's answer (the caller decides)."""
        return self._write("PUT", f"{self.pr_path}/merge", {"sha": sha, "merge_method": method}, ok=(200, 405, 409, 422))


__all__ = ["THREADS_QUERY", "GitCommit", "GitHubPlatform", "NoAnswer", "PostedReview", "PostedStatus", "PullRequestState",
           "ReviewThread"]
