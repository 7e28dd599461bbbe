"""Parsed hosting-API evidence and the verdict over it.

Every type here is built through one validating ``from_json`` (the boundary); a value that
exists is well-formed. A read that failed is a :class:`ReadFailure`, never a default value:
the decision turns it into ``unknown``.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

from ..._shape import Shape
from ...errors import Finding, InputError
from ._codes import EvidenceCode

DEFAULT_WORKFLOW = ".github/workflows/opencode-code-review.yml"
DEFAULT_JOB = "opencode-review-same-repo"
# The protected environment holding the App's private key: only same-repository review attaches
# it, and its deployment branches are restricted to the protected default branch.
DEFAULT_ENVIRONMENT = "attest-review-trusted"
TRUSTED_EVENT = "pull_request_target"
# The shared Actions identity: any workflow can post as it, so it can never be the producer.
SHARED_ACTIONS_LOGIN = "github-actions[bot]"

_OWNER_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})/[A-Za-z0-9._-]{1,100}")
_APP_LOGIN = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,98})\[bot\]")
_WORKFLOW = re.compile(r"\.github/workflows/[A-Za-z0-9._-]{1,200}\.ya?ml")
_JOB = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,99}")
_ENVIRONMENT = re.compile(r"[A-Za-z0-9._-]{1,255}")
_SHA = re.compile(r"(?:[0-9a-f]{40}|[0-9a-f]{64})\Z")
_SHA_EXPECTED = "a lowercase hex commit id"
_NODE_ID = re.compile(r"[A-Za-z0-9_=+/-]{1,200}")
_DECIMAL = re.compile(r"(?:0|[1-9][0-9]{0,19})\Z")
_MAX_ID = 2**53 - 1


class Trust(enum.StrEnum):
    TRUE = "true"
    FALSE = "false"
    UNKNOWN = "unknown"


class ShapeError(ValueError):
    """A response parsed as JSON but is not shaped like the API object it should be."""


def _printable(text: str, limit: int = 300) -> str:
    """Server-controlled text made safe to put in a one-line reason (no control characters)."""
    out = "".join(c if c.isprintable() else f"\\x{ord(c):02x}" if ord(c) < 256 else f"\\u{ord(c):04x}" for c in text[:limit])
    return out + ("..." if len(text) > limit else "")


@dataclass(frozen=True, slots=True)
class Verdict:
    """The canonical ``trusted_producer`` value with one reason code and a sentence.

    Raises:
        Nothing: a verdict is a value; ``false`` and ``unknown`` are returned, never raised.
    """

    trusted: Trust
    code: EvidenceCode
    reason: str

    @property
    def ok(self) -> bool:
        return self.trusted is Trust.TRUE

    def to_json(self) -> dict[str, object]:
        errors = [] if self.ok else [Finding(str(self.code), None, self.reason).to_json()]
        return {
            "ok": self.ok,
            "trusted_producer": str(self.trusted),
            "reason_code": str(self.code),
            "reason": self.reason,
            "errors": errors,
        }


# Reasons quote server-controlled strings (states, repository names, paths): keep them inert.
def true(reason: str) -> Verdict:
    return Verdict(Trust.TRUE, EvidenceCode.TRUSTED, _printable(reason, 1000))


def false(code: EvidenceCode, reason: str) -> Verdict:
    return Verdict(Trust.FALSE, code, _printable(reason, 1000))


def unknown(code: EvidenceCode, reason: str) -> Verdict:
    return Verdict(Trust.UNKNOWN, code, _printable(reason, 1000))


@dataclass(frozen=True, slots=True)
class ReadFailure:
    """A hosting-API read that did not produce complete, well-formed evidence."""

    code: EvidenceCode
    detail: str


@dataclass(frozen=True, slots=True)
class TrustConfig:
    """The explicit policy: which repository, pull request, App login, workflow, job and environment.

    The first five fields have no default here (the CLI supplies the documented defaults).
    ``environment`` defaults to :data:`DEFAULT_ENVIRONMENT` and ``bind_by_run_name`` to the
    strict ``False``: a run is bound to the pull request by the API's ``pull_requests``
    association only, and its display title (``run-name``) binds it only when the caller opts
    in (docs/evidence.md "Binding a run by its run-name"). Every field is validated so a typo
    cannot silently widen what is trusted.

    Raises:
        InputError: ``BAD_CONFIG`` from the constructor, one finding per bad field (repo, pr,
            App login, the shared Actions login, workflow, job, environment, bind_by_run_name).
            ``run_name`` raises nothing.
    """

    repo: str
    pr: int
    app_login: str
    workflow: str
    job: str
    environment: str = DEFAULT_ENVIRONMENT
    bind_by_run_name: bool = False

    def __post_init__(self) -> None:
        problems: list[str] = []
        if not _OWNER_NAME.fullmatch(self.repo) or self.repo.split("/")[-1] in (".", ".."):
            problems.append(f"--repo must be OWNER/NAME, got {_printable(self.repo)!r}")
        if isinstance(self.pr, bool) or not isinstance(self.pr, int) or not 1 <= self.pr <= _MAX_ID:
            problems.append(f"--pr must be a positive integer, got {self.pr!r}")
        if self.app_login == SHARED_ACTIONS_LOGIN:
            problems.append(f"--app-login {SHARED_ACTIONS_LOGIN} is the shared Actions identity and never authenticates evidence")
        elif not _APP_LOGIN.fullmatch(self.app_login):
            problems.append(f"--app-login must be the exact App bot login '<slug>[bot]' (lowercase ASCII slug), got {_printable(self.app_login)!r}")
        if not _WORKFLOW.fullmatch(self.workflow):
            problems.append(f"--workflow must be .github/workflows/<file>.yml, got {_printable(self.workflow)!r}")
        if not _JOB.fullmatch(self.job):
            problems.append(f"--job must be a workflow job id, got {_printable(self.job)!r}")
        if not isinstance(self.environment, str) or not _ENVIRONMENT.fullmatch(self.environment) or not self.environment.strip("."):
            problems.append(f"--environment must be an environment name of 1..255 ASCII letters, digits, '.', '_' or '-', not only dots, got {_printable(str(self.environment))!r}")
        if not isinstance(self.bind_by_run_name, bool):
            problems.append(f"bind_by_run_name must be a boolean, got {self.bind_by_run_name!r}")
        if problems:
            raise InputError(findings=[Finding(EvidenceCode.BAD_CONFIG, None, p) for p in problems])

    @property
    def workflow_file(self) -> str:
        return self.workflow.rsplit("/", 1)[1]

    def run_name(self, head_sha: str) -> str:
        """The run-name the trusted workflow sets; it binds a run only with ``bind_by_run_name``."""
        return f"OpenCode review PR #{self.pr} head {head_sha}"


# ----------------------------------------------------------------------------- parsing helpers

def _shape(value: object, what: str) -> Shape:
    """An API object at ``what``: refused, naming the field, as :class:`ShapeError`."""
    return Shape(value, what, ShapeError).object()


def _login(obj: Shape, key: str) -> str | None:
    """The ``login`` of the account object at ``key``; None when the account is gone (null or absent)."""
    account = obj.optional(key)
    return None if account is None else account.object().string("login", empty=True)


# ----------------------------------------------------------------------------- API objects

@dataclass(frozen=True, slots=True)
class PullRequest:
    """The pull-request fields the decision reads: number, head and base commits and repositories.

    Raises:
        ShapeError: (a ``ValueError``, ``attest.review.evidence._model``) from ``from_json`` when
            the value is not shaped like the API object; :class:`GitHubClient` turns it into a
            ``RESPONSE_SHAPE`` read failure.
    """

    number: int
    head_sha: str
    head_repo: str | None  # None: the head repository is gone (deleted fork)
    base_repo: str
    base_sha: str  # base.sha: the base commit GitHub computed for the PR (changes when it is retargeted)

    @classmethod
    def from_json(cls, value: object) -> PullRequest:
        obj = _shape(value, "pull_request")
        head = obj.nested("head")
        base = obj.nested("base")
        head_repo_obj = head.optional("repo")
        head_repo = None if head_repo_obj is None else head_repo_obj.object().string("full_name", empty=True)
        base_repo = base.nested("repo").string("full_name", empty=True)
        return cls(obj.non_negative_int("number"), head.string("sha", pattern=_SHA, expected=_SHA_EXPECTED), head_repo,
                   base_repo, base.string("sha", pattern=_SHA, expected=_SHA_EXPECTED))


@dataclass(frozen=True, slots=True)
class Review:
    """One pull-request review: author login, state, reviewed commit, body and GraphQL node id.

    Raises:
        ShapeError: (a ``ValueError``, ``attest.review.evidence._model``) from ``from_json`` when
            the value is not shaped like the API object; :class:`GitHubClient` turns it into a
            ``RESPONSE_SHAPE`` read failure.
    """

    id: int
    login: str | None  # None: the author account is gone
    state: str
    commit_id: str | None
    body: str
    node_id: str  # the GraphQL id, through which the edit status is read (REST has no edit marker)

    @classmethod
    def from_json(cls, value: object) -> Review:
        obj = _shape(value, "review")
        login = _login(obj, "user")
        node_id = obj.string("node_id", empty=True)
        obj.check(bool(_NODE_ID.fullmatch(node_id)), "a GraphQL node id", "node_id")
        return cls(
            obj.non_negative_int("id"),
            login,
            obj.string("state", empty=True),
            obj.optional_string("commit_id"),
            obj.optional_string("body") or "",
            node_id,
        )


@dataclass(frozen=True, slots=True)
class IssueComment:
    """One issue comment of the pull request (``GET /repos/{repo}/issues/{n}/comments``): author login and body.

    An issue comment has no commit: it names its head only through a head marker in its body.

    Raises:
        ShapeError: (a ``ValueError``, ``attest.review.evidence._model``) from ``from_json`` when
            the value is not shaped like the API object; :class:`GitHubClient` turns it into a
            ``RESPONSE_SHAPE`` read failure.
    """

    id: int
    login: str | None  # None: the author account is gone
    body: str

    @classmethod
    def from_json(cls, value: object) -> IssueComment:
        obj = _shape(value, "issue_comment")
        login = _login(obj, "user")
        return cls(obj.non_negative_int("id"), login, obj.optional_string("body") or "")


# The GraphQL selection ReviewEdit.from_json parses (a `nodes(ids:)` lookup of review node ids).
REVIEW_EDIT_SELECTION = "... on PullRequestReview { fullDatabaseId lastEditedAt editor { login } includesCreatedEdit }"


@dataclass(frozen=True, slots=True)
class ReviewEdit:
    """Whether a review's body was ever edited, from the GraphQL ``PullRequestReview`` object.

    Anyone with write access to the repository can edit a review's body (GitHub: "Managing
    disruptive comments"); the REST review object carries no edit marker, GraphQL does.

    Raises:
        ShapeError: (a ``ValueError``, ``attest.review.evidence._model``) from ``from_json`` when
            the value is not shaped like the API object; :class:`GitHubClient` turns it into a
            ``RESPONSE_SHAPE`` read failure.
    """

    id: int  # fullDatabaseId: the REST review id
    node_id: str
    last_edited_at: str | None
    editor: str | None  # the editor's login; None also when the editor account is gone
    includes_created_edit: bool

    @property
    def edited(self) -> bool:
        # Any one sign is enough: an edit by a deleted account has a time but no editor.
        return self.last_edited_at is not None or self.editor is not None or self.includes_created_edit

    @classmethod
    def from_json(cls, value: object) -> ReviewEdit:
        obj = _shape(value, "review_node")
        obj.check(obj.optional_string("__typename") == "PullRequestReview", "a PullRequestReview", "__typename")
        node_id = obj.string("id", empty=True)
        # BigInt is a JSON string ("may exceed the size of a 32-bit integer"); `databaseId` overflows.
        raw_id = obj.string("fullDatabaseId", pattern=_DECIMAL, expected="a decimal BigInt string")
        obj.check(int(raw_id) <= _MAX_ID, "a decimal BigInt string", "fullDatabaseId")
        editor = _login(obj, "editor")
        created = obj.boolean("includesCreatedEdit")
        return cls(int(raw_id), node_id, obj.optional_string("lastEditedAt"), editor, created)


@dataclass(frozen=True, slots=True)
class PullRef:
    number: int
    head_sha: str


@dataclass(frozen=True, slots=True)
class Run:
    """One workflow run: event, workflow path, run number and attempt, status, bound pull requests.

    Raises:
        ShapeError: (a ``ValueError``, ``attest.review.evidence._model``) from ``from_json`` when
            the value is not shaped like the API object; :class:`GitHubClient` turns it into a
            ``RESPONSE_SHAPE`` read failure.
    """

    id: int
    display_title: str | None
    event: str
    path: str
    run_number: int
    run_attempt: int | None  # None: missing; never assumed to be 1
    status: str | None
    conclusion: str | None
    pull_requests: tuple[PullRef, ...]

    @classmethod
    def from_json(cls, value: object) -> Run:
        obj = _shape(value, "workflow_run")
        prs = []
        listed = obj.optional("pull_requests")
        for item in listed.list_of() if listed is not None and listed.value else []:
            pr = item.object()
            prs.append(PullRef(pr.non_negative_int("number"), pr.nested("head").string("sha", empty=True)))
        return cls(
            obj.non_negative_int("id"),
            obj.optional_string("display_title"),
            obj.string("event", empty=True),
            obj.string("path", empty=True),
            obj.non_negative_int("run_number"),
            obj.optional_int("run_attempt", minimum=0),
            obj.optional_string("status"),
            obj.optional_string("conclusion"),
            tuple(prs),
        )


@dataclass(frozen=True, slots=True)
class Job:
    """One job of a workflow-run attempt: name, run, attempt, status and conclusion.

    Raises:
        ShapeError: (a ``ValueError``, ``attest.review.evidence._model``) from ``from_json`` when
            the value is not shaped like the API object; :class:`GitHubClient` turns it into a
            ``RESPONSE_SHAPE`` read failure.
    """

    id: int
    name: str
    run_id: int
    run_attempt: int | None
    status: str | None
    conclusion: str | None

    @classmethod
    def from_json(cls, value: object) -> Job:
        obj = _shape(value, "job")
        return cls(
            obj.non_negative_int("id"),
            obj.string("name", empty=True),
            obj.non_negative_int("run_id"),
            obj.optional_int("run_attempt", minimum=0),
            obj.optional_string("status"),
            obj.optional_string("conclusion"),
        )


BRANCH_POLICIES = ("protected_branches", "custom_branch_policies")


@dataclass(frozen=True, slots=True)
class Environment:
    """A deployment environment (``GET /repos/{repo}/environments/{name}``): its name and deployment branch policy.

    ``branch_policy`` is ``None`` when ``deployment_branch_policy`` is ``null`` (any branch may
    deploy), else which restriction the API shows: ``"protected_branches"`` (only branches
    with branch protection rules) or ``"custom_branch_policies"`` (only branches matching name
    patterns, which live at a further endpoint not read here).

    Raises:
        ShapeError: (a ``ValueError``, ``attest.review.evidence._model``) from ``from_json`` when
            the value is not shaped like the API object, ``deployment_branch_policy`` absent,
            or both or neither of its flags set (the API sets exactly one); :class:`GitHubClient`
            turns it into a ``RESPONSE_SHAPE`` read failure.
    """

    name: str
    branch_policy: str | None

    @classmethod
    def from_json(cls, value: object) -> Environment:
        obj = _shape(value, "environment")
        name = obj.string("name", empty=True)
        # Absent is not null: the API did not say whether deployments are restricted.
        policy = obj.at("deployment_branch_policy")
        if policy.value is None:
            return cls(name, None)
        policy.object()
        flags = [key for key in BRANCH_POLICIES if policy.boolean(key)]
        if len(flags) != 1:
            policy.refuse("sets neither or both of protected_branches and custom_branch_policies")
        return cls(name, flags[0])


@dataclass(frozen=True, slots=True)
class AbsentEnvironment:
    """The API answered 404 for the environment: the repository has no environment of that name."""

    name: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Evidence:
    """Everything the decision looks at, in the order it reads it (docs/evidence.md "The decision, step by step").

    Each stage is the parsed value, the :class:`ReadFailure` that stopped it, or ``None``
    when it was not read (yet). Keyword-only: the stages are named, never positional.
    """

    pull_request: PullRequest | ReadFailure | None = None
    issue_comments: tuple[IssueComment, ...] | ReadFailure | None = None
    reviews: tuple[Review, ...] | ReadFailure | None = None
    review_edits: tuple[ReviewEdit, ...] | ReadFailure | None = None
    runs: tuple[Run, ...] | ReadFailure | None = None
    jobs: tuple[Job, ...] | ReadFailure | None = None
    environment: Environment | AbsentEnvironment | ReadFailure | None = None
    final_pull_request: PullRequest | ReadFailure | None = None
