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
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import quote, urlsplit

from ...errors import EnvironmentFailure
from ..evidence._codes import EvidenceCode
from ..evidence._http import FetchFailed, GitHubClient
from ..evidence._model import ShapeError, _printable
from ._codes import PlatformCode

if TYPE_CHECKING:
    from ..bootstrap import GitHubIdentity

_T = TypeVar("_T")
_SHA = re.compile(r"(?:[0-9a-f]{40}|[0-9a-f]{64})\Z")
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

def _get(doc: Any, dotted: str) -> Any:
    value = doc
    for part in dotted.split("."):
        if not isinstance(value, Mapping) or part not in value:
            raise ShapeError(f"{dotted} is missing")
        value = value[part]
    return value


def _int(doc: Any, dotted: str) -> int:
    value = _get(doc, dotted)
    if type(value) is not int or not 0 < value <= _MAX_ID:
        raise ShapeError(f"{dotted} is not a positive integer")
    return value


def _str(doc: Any, dotted: str, *, empty: bool = False) -> str:
    value = _get(doc, dotted)
    if not isinstance(value, str) or (not value and not empty):
        raise ShapeError(f"{dotted} is not a {'' if empty else 'non-empty '}string")
    return value


def _opt_str(doc: Any, dotted: str) -> str | None:
    value = _get(doc, dotted)
    if value is not None and not isinstance(value, str):
        raise ShapeError(f"{dotted} is not a string or null")
    return value


def _sha(doc: Any, dotted: str) -> str:
    value = _get(doc, dotted)
    if not isinstance(value, str) or not _SHA.match(value):
        raise ShapeError(f"{dotted} is not a full lowercase commit id")
    return value


def _bool(doc: Any, dotted: str) -> bool:
    value = _get(doc, dotted)
    if type(value) is not bool:
        raise ShapeError(f"{dotted} is not a boolean")
    return value


def _holds(value: Any, scrub: Callable[[str], str]) -> bool:
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
    def from_json(cls, doc: Any) -> PullRequestState:
        mergeable = _get(doc, "mergeable")
        if mergeable is not None and type(mergeable) is not bool:
            raise ShapeError("mergeable is not a boolean or null")
        state = _str(doc, "state")
        if state not in ("open", "closed"):
            raise ShapeError(f"state is {_printable(state, 20)!r}, not open or closed")
        head_repo = _get(doc, "head.repo")
        merge_commit = _opt_str(doc, "merge_commit_sha")
        if merge_commit is not None and not _SHA.match(merge_commit):
            raise ShapeError("merge_commit_sha is not a full lowercase commit id")
        return cls(_int(doc, "id"), _int(doc, "number"), state, _bool(doc, "merged"), _int(doc, "base.repo.id"),
                   _str(doc, "base.repo.full_name"), None if head_repo is None else _str(doc, "head.repo.full_name"),
                   _str(doc, "base.ref"), _sha(doc, "base.sha"), _sha(doc, "head.sha"), mergeable,
                   _opt_str(doc, "mergeable_state"), merge_commit)


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
    def from_json(cls, doc: Any) -> PostedReview:
        user = _get(doc, "user")
        commit = _opt_str(doc, "commit_id")
        if commit is not None and not _SHA.match(commit):
            raise ShapeError("commit_id is not a full lowercase commit id")
        return cls(_int(doc, "id"), None if user is None else _str(doc, "user.login"), commit, _str(doc, "state"),
                   _opt_str(doc, "body") or "", _str(doc, "pull_request_url"))


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
    def from_json(cls, doc: Any) -> ReviewThread:
        line = _get(doc, "line")
        if line is not None and (type(line) is not int or line < 1):
            raise ShapeError("line is not a positive integer or null")
        comments = _get(doc, "comments.nodes")
        if not isinstance(comments, list):
            raise ShapeError("comments.nodes is not an array")
        first = comments[0] if comments else None
        author = None
        url = None
        if first is not None:
            if not isinstance(first, Mapping):
                raise ShapeError("comments.nodes[0] is not an object")
            author = None if first.get("author") is None else _str(first, "author.login")
            url = _opt_str(first, "url") if "url" in first else None
        return cls(_str(doc, "id"), _bool(doc, "isResolved"), _bool(doc, "isOutdated"), _str(doc, "path"), line, author, url)


@dataclass(frozen=True, slots=True)
class GitCommit:
    """A commit as the API reports it (``GET .../git/commits/{sha}``): its tree and parents."""

    sha: str
    tree: str
    parents: tuple[str, ...]

    @classmethod
    def from_json(cls, doc: Any) -> GitCommit:
        parents = _get(doc, "parents")
        if not isinstance(parents, list):
            raise ShapeError("parents is not an array")
        return cls(_sha(doc, "sha"), _sha(doc, "tree.sha"), tuple(_sha(p, "sha") for p in parents))


@dataclass(frozen=True, slots=True)
class PostedStatus:
    """A commit status as the API answered its creation."""

    id: int
    state: str
    context: str
    description: str | None
    url: str | None = None  # names the commit it is on: .../statuses/{sha}

    @classmethod
    def from_json(cls, doc: Any) -> PostedStatus:
        return cls(_int(doc, "id"), _str(doc, "state"), _str(doc, "context"), _opt_str(doc, "description"), _str(doc, "url"))


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

    def _clean(self, parse: Callable[[Any], _T]) -> Callable[[Any], _T]:
        """``parse``, refusing (ShapeError) an answer that holds the token anywhere."""
        def parse_clean(value: Any) -> _T:
            if _holds(value, self.client._scrub):
                raise ShapeError("the answer holds the token (not shown)")
            return parse(value)

        return parse_clean

    def _read(self, path: str, parse: Callable[[Any], _T]) -> _T:
        try:
            return self.client.get_object(path, self._clean(parse))
        except FetchFailed as e:
            raise self._fail(e) from e

    def _list(self, path: str, parse: Callable[[Any], _T]) -> tuple[_T, ...]:
        try:
            return self.client.get_list(path, None, self._clean(parse))
        except FetchFailed as e:
            raise self._fail(e) from e

    def _write(self, method: str, path: str, body: Any, *, ok: Collection[int]) -> tuple[int, Any]:
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

    def _parse(self, what: str, parse: Callable[[Any], _T], value: Any) -> _T:
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
        ref, kind, sha = self._read(path, lambda d: (_str(d, "ref"), _str(d, "object.type"), _sha(d, "object.sha")))
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
            page = self._parse("the review-threads query", lambda a: _get(a, "repository.pullRequest.reviewThreads"), answer)
            nodes = self._parse("the review-threads query", lambda p: _get(p, "nodes"), page)
            if not isinstance(nodes, list):
                raise EnvironmentFailure(PlatformCode.PLATFORM_RESPONSE_SHAPE, "reviewThreads.nodes is not an array")
            threads += [self._parse("a review thread", ReviewThread.from_json, n) for n in nodes]
            more = self._parse("the review-threads query", lambda p: _bool(p, "pageInfo.hasNextPage"), page)
            if not more:
                return tuple(threads)
            cursor = self._parse("the review-threads query", lambda p: _str(p, "pageInfo.endCursor"), page)
        raise EnvironmentFailure(PlatformCode.PLATFORM_REQUEST_FAILED, f"more than {self.client.limits.max_pages} pages of "
                                 "review threads")

    # writes
    def create_review(self, payload: Mapping[str, Any]) -> PostedReview:
        _, answer = self._write("POST", f"{self.pr_path}/reviews", dict(payload), ok=(200,))
        what = f"POST {self.pr_path}/reviews"
        return self._of_this_pull(what, self._parse(what, PostedReview.from_json, answer))

    def post_status(self, sha: str, *, state: str, description: str, context: str, target_url: str | None) -> PostedStatus:
        body: dict[str, Any] = {"state": state, "description": description, "context": context}
        if target_url is not None:
            body["target_url"] = target_url
        _, answer = self._write("POST", f"{self.repo_path}/statuses/{sha}", body, ok=(201,))
        return self._parse(f"POST {self.repo_path}/statuses/{sha}", PostedStatus.from_json, answer)

    def statuses_path(self, sha: str) -> str:
        """The path a commit status of ``sha`` is posted to, and which its answer's ``url`` names (with the API's base)."""
        return self.client.target(f"{self.repo_path}/statuses/{sha}")

    def merge(self, sha: str, method: str) -> tuple[int, Any]:
        """``PUT .../merge`` pinned to ``sha``: (200, answer), or 405/409/422 with GitHub's answer (the caller decides)."""
        return self._write("PUT", f"{self.pr_path}/merge", {"sha": sha, "merge_method": method}, ok=(200, 405, 409, 422))


__all__ = ["THREADS_QUERY", "GitCommit", "GitHubPlatform", "NoAnswer", "PostedReview", "PostedStatus", "PullRequestState",
           "ReviewThread"]
