"""`attest review recheck` (docs/review.md "attest review recheck").

:func:`recheck_review` reads a review state strictly (:func:`load_review_state`), asks the host
again through the adapter the state records, re-reads base and head from GITDIR's objects,
recomputes the complete merge-base set and lets :func:`decide_recheck` (pure) decide exactly one
outcome, in this precedence (the first that applies wins; every applicable finding is reported):

1. ``fail``: the repository (``REVIEW_REPOSITORY_CHANGED``) or the pull request
   (``REVIEW_PULL_REQUEST_CHANGED``) changed, or base and head have no merge base
   (``NO_MERGE_BASE``) or several (``MULTIPLE_MERGE_BASES``);
2. ``restart``: the base commit (``REVIEW_BASE_MOVED``) or the base tree
   (``REVIEW_BASE_TREE_MISMATCH``) moved, or a frozen image or retained projection of the review
   can no longer be established (``REVIEW_ROOT_MISMATCH`` or the store's code: ``NOT_IN_STORE``,
   ``IMAGE_CHANGED``, ``RETAINED_MISMATCH``, ...): the whole bootstrap must run again, and every
   result of the old root is discarded, even when the reproduced procedure bytes would be identical;
3. ``refresh``: only the head (``REVIEW_HEAD_MOVED``) or the merge base
   (``REVIEW_MERGE_BASE_MOVED``) moved: the changed surface, and from it and the re-established
   frozen base's configuration and lock the authority changes, are recomputed into a new review state
   (``refresh.generation`` one higher, ``refresh.previous`` the old id) and the old review is
   superseded, so every analysis of it is stale;
4. ``proceed`` (``REVIEW_UNCHANGED``): nothing moved.

Every outcome but ``proceed`` closes the old review with a recheck record,
``STATE/rechecks/<id>.json``: a later recheck (and serialize) of it fails with
``REVIEW_SUPERSEDED``, ``REVIEW_DISCARDED`` or ``REVIEW_FAILED``.

    >>> got = recheck_review(state_dir="/var/lib/attest", review="0f3c...")
    >>> got.outcome.outcome, got.outcome.reason, got.current_review
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, NotRequired, TypedDict, cast

from ..._digest import sha256_of
from ..._json import canonical_bytes, loads_strict
from ..._safefs import UnsafeEntry, open_regular_at
from ..._shape import MAX_SAFE_INT, Shape
from ...errors import AttestError, EnvironmentFailure, Finding, InputError, VerificationError
from ...freeze import FreezeCode
from ...freeze._state import open_state, open_sub
from ...git import ChangedPath, GitCode, GitRepo, Hunk, best_common_ancestors, is_full_sha, verify_full_sha
from ...inventory import check_path
from ..bootstrap import BootstrapCode, HostAdapter, host_adapter
from ..bootstrap._identity import FULL_NAME
from ..handoff import IMAGE_NAMES
from ..handoff._handoff import BACKEND_NAMES, CONTEXT_NAME, RENDERER_NAME
from ._change import ChangeSpec, CheckedDoc, change_reference, freeze_change, prepare_change, review_surface
from ._codes import RecheckCode, ReviewStartCode
from ._root import ReviewRoot, reestablish_root
from ._start import (
    REVIEWS_DIR,
    STATE_FORMAT,
    AuthorityChange,
    authority_changes,
    identity_changes,
    parse_authority_changes,
    read_base_authority,
    review_id,
    write_review_state,
    write_state_file,
)

if TYPE_CHECKING:
    from ...git._surface import Content, Status
    from ..bootstrap import CommitTreeDoc, PullRequestDoc, RepositoryDoc

RECHECKS_DIR = "rechecks"
MAX_STATE_BYTES = 64 << 20
MAX_RECORD_BYTES = 64 << 10
Outcome = Literal["proceed", "refresh", "restart", "fail"]
OUTCOMES: tuple[Outcome, ...] = ("proceed", "refresh", "restart", "fail")  # ascending precedence
_ID = re.compile(r"[0-9a-f]{32}\Z")
_CODE = re.compile(r"[A-Z][A-Z0-9_]{0,99}\Z")  # a reason code
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}\Z")
_HEX64 = re.compile(r"[0-9a-f]{64}\Z")
_HTTPS_URL = re.compile(r"https?://[!-~]+\Z")  # --api-url, which host_adapter judges again
_STATE_KEYS = frozenset({"review", "format", "handoff", "repo", "host", "repository", "pull_request", "base", "head",
                         "merge_base", "images", "config", "lock", "context", "projections", "surface", "authority_changes",
                         "change_content", "change"})
_HOST_KEYS = {"identity": {"adapter", "path"}, "github": {"adapter", "repository", "pr", "api_url"}}
_RECORD_KEYS = frozenset({"review", "state", "outcome", "reason", "superseded_by"})
_CLOSED = {"refresh": RecheckCode.REVIEW_SUPERSEDED, "restart": RecheckCode.REVIEW_DISCARDED, "fail": RecheckCode.REVIEW_FAILED}


# -- the parsed state and the facts of now -----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ReviewState:
    """A review state as :func:`parse_review_state` read it: the fields recheck compares, and the whole document.

    Raises:
        Nothing.
    """

    review: str
    digest: str  # "sha256:<hex>" of the state file's bytes
    doc: CheckedDoc
    repository_id: int
    full_name: str
    pull_request_id: int
    number: int
    base_commit: str
    base_tree: str
    object_format: str
    head: str
    merge_base: str
    repo: str
    host: CheckedDoc
    generation: int  # 0 for a started review; one more on every refresh
    authority: tuple[AuthorityChange, ...] = ()  # the head's changes to the base's authority material


class RecheckFactsDoc(TypedDict):
    """What a recheck found true now, as ``attest review recheck --json`` shows it."""

    repository: RepositoryDoc
    pull_request: PullRequestDoc
    base: CommitTreeDoc
    head: str
    merge_bases: list[str]


@dataclass(frozen=True, slots=True)
class RecheckFacts:
    """What is true now: the host's identities, base tree and head from objects, the complete merge-base set.

    Raises:
        Nothing.
    """

    repository_id: int
    full_name: str
    pull_request_id: int
    number: int
    base_commit: str
    base_tree: str
    head: str
    merge_bases: tuple[str, ...]

    def to_json(self) -> RecheckFactsDoc:
        return {"repository": {"id": self.repository_id, "full_name": self.full_name},
                "pull_request": {"id": self.pull_request_id, "number": self.number},
                "base": {"commit": self.base_commit, "tree": self.base_tree}, "head": self.head,
                "merge_bases": list(self.merge_bases)}


@dataclass(frozen=True, slots=True)
class RecheckOutcome:
    """Exactly one outcome, its reason code (the first finding of the deciding class) and every finding.

    Raises:
        Nothing.
    """

    outcome: Outcome
    reason: str
    findings: tuple[Finding, ...]

    @property
    def ok(self) -> bool:
        return self.outcome in ("proceed", "refresh")


def decide_recheck(state: ReviewState, now: RecheckFacts, root: Sequence[Finding] = ()) -> RecheckOutcome:
    """The recheck decision (pure): fail > restart > refresh > proceed; see the module docstring.

    ``root`` are the findings of :func:`~attest.review.procedure.reestablish_root`: a frozen
    image or retained projection of the review that can no longer be established is a
    ``restart`` (the trusted root must be bootstrapped again).

    Raises:
        Nothing: every difference is a finding of the outcome.
    """

    fail, restart = identity_changes(
        (now.repository_id, now.full_name, now.pull_request_id, now.number, now.base_commit),
        (state.repository_id, state.full_name, state.pull_request_id, state.number, state.base_commit), "review")
    refresh: list[Finding] = []
    bases = sorted(set(now.merge_bases))
    if not bases:
        fail.append(Finding(GitCode.NO_MERGE_BASE, None, f"the base {now.base_commit} and the head {now.head} have unrelated "
                            "histories: no common ancestor"))
    elif len(bases) > 1:
        fail.append(Finding(GitCode.MULTIPLE_MERGE_BASES, None, f"{len(bases)} best common ancestors (a criss-cross history): "
                            f"{', '.join(bases)}; none is picked"))
    if now.base_tree != state.base_tree:
        restart.append(Finding(ReviewStartCode.REVIEW_BASE_TREE_MISMATCH, None, f"the base tree is now {now.base_tree}; the "
                               f"review's is {state.base_tree}: run the bootstrap again"))
    restart += root
    if now.head != state.head:
        refresh.append(Finding(RecheckCode.REVIEW_HEAD_MOVED, None, f"the head is now {now.head}; the review's is {state.head}"))
    if len(bases) == 1 and bases[0] != state.merge_base:
        refresh.append(Finding(RecheckCode.REVIEW_MERGE_BASE_MOVED, None, f"the merge base is now {bases[0]}; the review's is "
                               f"{state.merge_base}"))
    order: tuple[tuple[Outcome, list[Finding]], ...] = (("fail", fail), ("restart", restart), ("refresh", refresh))
    for outcome, found in order:
        if found:
            return RecheckOutcome(outcome, found[0].code, tuple(fail + restart + refresh))
    return RecheckOutcome("proceed", RecheckCode.REVIEW_UNCHANGED,
                          (Finding(RecheckCode.REVIEW_UNCHANGED, None, "repository, pull request, base, head, merge base, "
                                   "the four frozen images and the retained projections are the review's"),))


# -- reading the state -----------------------------------------------------------------------------------


def check_review_id(review: str) -> str:
    """``review`` if it is a review id (32 lowercase hex digits).

    Raises:
        InputError: ``REVIEW_ID_INVALID``.
    """
    if not isinstance(review, str) or not _ID.match(review):
        raise InputError(RecheckCode.REVIEW_ID_INVALID, "a review id is 32 lowercase hex digits (as `attest review start` prints it)")
    return review


def _strict_doc(data: bytes, what: str, where: str, max_bytes: int) -> CheckedDoc:
    try:
        doc = loads_strict(data, what=what, max_bytes=max_bytes)
    except AttestError as e:
        raise VerificationError(RecheckCode.REVIEW_STATE_MALFORMED, f"{what} is not strict JSON: {e.detail}", where) from e
    if not isinstance(doc, dict):
        raise VerificationError(RecheckCode.REVIEW_STATE_MALFORMED, f"{what} is not a JSON object", where)
    if canonical_bytes(doc) != data:
        raise VerificationError(RecheckCode.REVIEW_STATE_MALFORMED, f"{what} is not in RFC 8785 canonical form", where)
    return doc


def _image(image: Shape, identity: str = "sha256:<64 hex>") -> None:
    """``{identity, path, backend}`` of a frozen image: its identity, its store path, a backend of the review chain's."""
    image.string("identity", pattern=_DIGEST, expected=identity)
    image.absolute_path("path")
    image.one_of("backend", BACKEND_NAMES)


_SURFACE_PATH_KEYS = ("path", "status", "old_mode", "new_mode", "old_oid", "new_oid", "content", "hunks")
_GIT_MODE = re.compile(r"(?:100644|100755|120000|160000)\Z")  # what a changed (non-tree) entry can be


def _surface_paths(paths: list[Shape], fmt: Literal["sha1", "sha256"]) -> None:
    """The surface's changed paths (docs/git-ancestry.md "The changed surface"): each of exactly its fields, consistent
    as a ``ChangedPath`` is, sorted by path bytes, none twice."""
    last: bytes | None = None
    for p in paths:
        p.object(_SURFACE_PATH_KEYS)
        path = p.string("path")
        problem = check_path(path)
        if problem is not None:
            p.fail(f"a repository-relative path ({problem[1]})", "path")
        key = path.encode("utf-8", "surrogateescape")
        p.check(last is None or key > last, "sorted by path bytes, each path once", "path")
        last = key
        modes = [p.optional_string(k, pattern=_GIT_MODE, expected="a file mode of git's or null", present=True)
                 for k in ("old_mode", "new_mode")]
        oids = []
        for k in ("old_oid", "new_oid"):
            oid = p.optional_string(k, expected=f"a full {fmt} object id or null", present=True)
            p.check(oid is None or is_full_sha(oid, fmt), f"a full {fmt} object id or null", k)
            oids.append(oid)
        hunks = []
        for h in p.list_of("hunks"):
            h.object(("left", "right"))
            sides = [h.nested(side, ("start", "count")) for side in ("left", "right")]
            numbers = [s.non_negative_int(k, maximum=MAX_SAFE_INT) for s in sides for k in ("start", "count")]
            try:
                hunks.append(Hunk(*numbers))
            except ValueError:
                h.fail("a hunk (@@ -l,s +r,t @@: a side with lines starts at 1, one side has lines)")
        status = cast("Status", p.one_of("status", ("added", "deleted", "modified", "type-changed")))
        content = cast("Content", p.one_of("content", ("text", "binary", "non-utf8", "oversized", "too-complex", "not-a-file")))
        try:
            ChangedPath(path, status, modes[0], modes[1], oids[0], oids[1], content, tuple(hunks))
        except ValueError:
            p.fail("a consistent changed path (modes and ids on the sides its status has, hunks only for text)")


def parse_review_state(data: bytes, review: str, where: str) -> ReviewState:
    """Parse a review state file's bytes strictly (pure): canonical JSON, its id its content's and ``review``, the documented shape.

    Raises:
        VerificationError: ``REVIEW_STATE_MALFORMED`` (not canonical strict JSON, or not the
            documented shape), ``REVIEW_STATE_TAMPERED`` (the content does not hash to its
            ``review``, or that is not ``review``).
    """

    doc = _strict_doc(data, "the review state", where, MAX_STATE_BYTES)
    claimed = doc.get("review")
    rest = {k: v for k, v in doc.items() if k != "review"}
    if not isinstance(claimed, str) or review_id(rest) != claimed:
        raise VerificationError(RecheckCode.REVIEW_STATE_TAMPERED, f"the review state's content hashes to {review_id(rest)}, "
                                f"not to its review {claimed!r}", where)
    if claimed != review:
        raise VerificationError(RecheckCode.REVIEW_STATE_TAMPERED, f"the state of review {review} holds review {claimed}", where)

    def bad(detail: str) -> VerificationError:
        return VerificationError(RecheckCode.REVIEW_STATE_MALFORMED, detail, where)

    state = Shape(doc, "state", bad)
    if state.keys() not in (_STATE_KEYS, _STATE_KEYS | {"refresh"}):
        state.fail(f"exactly the fields {sorted(_STATE_KEYS)} (and refresh after a refresh)")
    state.one_of("format", (STATE_FORMAT,))
    repository = state.nested("repository", ("id", "full_name"))
    pull_request = state.nested("pull_request", ("id", "number"))
    base = state.nested("base", ("commit", "tree", "object_format"))
    fmt: Literal["sha1", "sha256"] = "sha256" if base.one_of("object_format", ("sha1", "sha256")) == "sha256" else "sha1"
    shas = [base.at("commit"), base.at("tree"), state.at("head"), state.at("merge_base")]
    for sha in shas:
        sha.check(isinstance(sha.value, str) and is_full_sha(sha.value, fmt), f"a full {fmt} object id")
    handoff = state.nested("handoff", ("path", "digest"))
    handoff.absolute_path("path")
    handoff.string("digest", pattern=_DIGEST, expected="sha256:<64 hex>")
    for key in ("config", "lock"):
        state.nested(key, ("sha256",)).string("sha256", pattern=_HEX64, expected="64 lowercase hex digits")
    images = state.nested("images", IMAGE_NAMES)
    for name in IMAGE_NAMES:
        _image(images.nested(name, ("identity", "path", "backend")))
    context = state.string("context", pattern=CONTEXT_NAME, expected="a context name")
    projections = state.nested("projections", ("semantic", "adapter"))
    for role in ("semantic", "adapter"):
        kept = projections.nested(role, ("path", "renderer", "context", "sha256", "image", "retained"))
        problem = check_path(kept.string("path"))
        if problem is not None:
            kept.fail(f"a repository-relative path ({problem[1]})", "path")
        kept.string("renderer", pattern=RENDERER_NAME, expected="a renderer name")
        kept.check(kept.get("context") == context, "the state's context", "context")
        kept.string("sha256", pattern=_HEX64, expected="64 lowercase hex digits")
        kept.string("image", pattern=_DIGEST, expected="sha256:<64 hex>")
        kept.string("retained", pattern=_DIGEST, expected="sha256:<64 hex>")
    _image(state.nested("change", ("identity", "path", "backend")), "sha256:<hex> of the change image")
    state.string("change_content", pattern=_DIGEST, expected="the sha256:<hex> of the change image's head tree and diff")
    repo = state.absolute_path("repo")
    host = state.at("host").object()
    adapter = host.string("adapter", empty=True)
    host.object(_HOST_KEYS.get(adapter, {"adapter"}))
    if adapter == "identity":
        host.absolute_path("path")
    elif adapter == "github":
        host.string("repository", pattern=FULL_NAME, expected="OWNER/NAME")
        host.positive_int("pr", maximum=MAX_SAFE_INT)
        host.string("api_url", pattern=_HTTPS_URL, expected="an http(s) URL")
    surface = state.nested("surface", ("base", "head", "base_tree", "head_tree", "paths"))
    for tree in (surface.at("base_tree"), surface.at("head_tree")):
        tree.check(isinstance(tree.value, str) and is_full_sha(tree.value, fmt), f"a full {fmt} object id")
    _surface_paths(surface.list_of("paths"), fmt)
    surface.check((surface.optional_string("base"), surface.optional_string("head")) == (doc["merge_base"], doc["head"]),
                  "the changed surface from the state's merge_base to its head")
    authority = parse_authority_changes(doc["authority_changes"], doc["surface"], where)
    generation = 0
    if state.has("refresh"):
        refresh = state.nested("refresh", ("previous", "generation"))
        generation = refresh.positive_int("generation")
        refresh.string("previous", pattern=_ID, expected="a review id (32 lowercase hex digits)")
    return ReviewState(claimed, sha256_of(data), doc,
                       repository.positive_int("id"), repository.string("full_name"),
                       pull_request.positive_int("id"), pull_request.positive_int("number"),
                       doc["base"]["commit"], doc["base"]["tree"], fmt, doc["head"], doc["merge_base"], repo, doc["host"],
                       generation, authority)


def _read_at(state_dir: str, sub: str, name: str, max_bytes: int) -> bytes | None:
    """The bytes of ``STATE/sub/name`` through descriptors (None when absent); a planted link fails."""

    where = os.path.join(state_dir, sub, name)
    state_fd = open_state(state_dir, create=False)
    try:
        try:
            os.stat(sub, dir_fd=state_fd, follow_symlinks=False)
        except FileNotFoundError:
            return None
        dfd = open_sub(state_fd, sub, os.path.join(state_dir, sub), create=False)
    finally:
        os.close(state_fd)
    try:
        try:
            fd, _ = open_regular_at(dfd, name)
        except FileNotFoundError:
            return None
        except UnsafeEntry as e:
            raise VerificationError(FreezeCode.STATE_SYMLINK, f"not a plain regular file: {e.strerror}", where) from e
        except OSError as e:
            raise EnvironmentFailure(ReviewStartCode.REVIEW_STATE_FAILED, f"cannot read: {e.strerror}", where) from e
        try:
            data = os.read(fd, max_bytes + 1)
            while data and len(data) <= max_bytes:
                more = os.read(fd, max_bytes + 1 - len(data))
                if not more:
                    break
                data += more
        except OSError as e:
            raise EnvironmentFailure(ReviewStartCode.REVIEW_STATE_FAILED, f"cannot read: {e.strerror}", where) from e
        finally:
            os.close(fd)
    finally:
        os.close(dfd)
    if len(data) > max_bytes:
        raise VerificationError(RecheckCode.REVIEW_STATE_MALFORMED, f"larger than {max_bytes} bytes", where)
    return data


def load_review_state(state_dir: str | os.PathLike[str], review: str) -> ReviewState:
    """Read and strictly parse ``STATE/reviews/<review>.json``; refuse a review an earlier recheck closed.

    Raises:
        InputError: ``REVIEW_ID_INVALID``, ``REVIEW_STATE_MISSING``.
        VerificationError: ``REVIEW_STATE_MALFORMED``, ``REVIEW_STATE_TAMPERED``,
            ``REVIEW_SUPERSEDED``, ``REVIEW_DISCARDED``, ``REVIEW_FAILED``, ``STATE_SYMLINK``.
        EnvironmentFailure: ``REVIEW_STATE_FAILED`` (unreadable), ``STATE_INSECURE``, ``STAGING_FAILED``.
    """
    state = os.path.abspath(os.fspath(state_dir))
    check_review_id(review)
    where = os.path.join(state, REVIEWS_DIR, f"{review}.json")
    data = _read_at(state, REVIEWS_DIR, f"{review}.json", MAX_STATE_BYTES)
    if data is None:
        raise InputError(RecheckCode.REVIEW_STATE_MISSING, f"no review {review} under this state directory", where)
    parsed = parse_review_state(data, review, where)
    record_where = os.path.join(state, RECHECKS_DIR, f"{review}.json")
    record = _read_at(state, RECHECKS_DIR, f"{review}.json", MAX_RECORD_BYTES)
    if record is not None:
        doc = _strict_doc(record, "the recheck record", record_where, MAX_RECORD_BYTES)
        rec = Shape(doc, "recheck_record", lambda d: VerificationError(RecheckCode.REVIEW_STATE_MALFORMED,
                                                                        f"the recheck record is not one of this review state: {d}",
                                                                        record_where))
        rec.object(_RECORD_KEYS)
        rec.one_of("review", (review,))
        rec.one_of("state", (parsed.digest,))
        outcome = rec.one_of("outcome", _CLOSED)
        rec.string("reason", pattern=_CODE, expected="a reason code")
        if outcome == "refresh":  # the review that replaced it; a closed one (restart, fail) has none
            rec.string("superseded_by", pattern=_ID, expected="the review id that replaced it (32 lowercase hex digits)")
        else:
            rec.check(rec.get("superseded_by") is None, "null: a review closed by a restart or a failure has no successor",
                      "superseded_by")
        then = f"an earlier recheck decided {doc['outcome']} ({doc['reason']})"
        if doc["outcome"] == "refresh":
            then += f"; the current review is {doc['superseded_by']}"
        raise VerificationError(_CLOSED[doc["outcome"]], then, record_where)
    return parsed


# -- the recheck ---------------------------------------------------------------------------------------------


class CurrentReviewDoc(TypedDict):
    """The review to use from now on (after proceed or refresh): its id, state file and generation."""

    review: str
    state: str | None
    generation: int


class RecheckDoc(RecheckFactsDoc):
    """``attest review recheck --json`` (docs/json.md), which its text output reads by key."""

    ok: bool
    review: str
    state: str
    outcome: Outcome
    reason: str
    findings: list[dict[str, object]]
    generation: int
    current: CurrentReviewDoc | None
    record: str | None
    changed_paths: NotRequired[int]


@dataclass(frozen=True, slots=True)
class Recheck:
    """One recheck: the state it read, the facts of now, the outcome, and what it wrote.

    ``current_review`` is the review to use from now on: the refreshed one after ``refresh``,
    the same after ``proceed``, None after ``restart`` or ``fail``.

    Raises:
        Nothing.
    """

    state: ReviewState
    state_path: str
    now: RecheckFacts
    outcome: RecheckOutcome
    current_review: str | None
    current_state: str | None
    record: str | None
    changed_paths: int | None
    root: ReviewRoot | None = None  # after proceed: the re-established images and retained projections

    def to_json(self) -> RecheckDoc:
        current: CurrentReviewDoc | None = None
        if self.current_review is not None:
            current = {"review": self.current_review, "state": self.current_state,
                       "generation": self.state.generation + (self.outcome.outcome == "refresh")}
        now = self.now.to_json()
        doc: RecheckDoc = {"ok": self.outcome.ok, "review": self.state.review, "state": self.state_path,
                           "outcome": self.outcome.outcome, "reason": str(self.outcome.reason),
                           "findings": [f.to_json() for f in self.outcome.findings],
                           "repository": now["repository"], "pull_request": now["pull_request"], "base": now["base"],
                           "head": now["head"], "merge_bases": now["merge_bases"],
                           "generation": self.state.generation, "current": current, "record": self.record}
        if self.changed_paths is not None:
            doc["changed_paths"] = self.changed_paths
        return doc


def host_from_state(host: CheckedDoc, *, token_env: str | None, environ: Mapping[str, str]) -> HostAdapter:
    """The host adapter a review state records, made again (``token_env`` as ``--token-env``: the token is never recorded).

    Raises:
        InputError: ``BAD_HOST_OPTIONS`` (an adapter the state cannot re-create, ``--token-env``
            with the identity file, or what :func:`~attest.review.bootstrap.host_adapter` refuses).
    """

    if host["adapter"] == "identity":
        return host_adapter(identity=host["path"], github=None, pr=None, token_env=token_env, api_url=None, environ=environ)
    if host["adapter"] == "github":
        return host_adapter(identity=None, github=host["repository"], pr=host["pr"], token_env=token_env, api_url=host["api_url"],
                            environ=environ)
    raise InputError(BootstrapCode.BAD_HOST_OPTIONS, f"the review state's host adapter {host['adapter']!r} cannot be made again "
                     "from the state; pass the adapter (host=)")


def _write_record(state_dir: str, state: ReviewState, outcome: RecheckOutcome, superseded_by: str | None) -> str:
    doc = {"review": state.review, "state": state.digest, "outcome": outcome.outcome, "reason": str(outcome.reason),
           "superseded_by": superseded_by}
    return write_state_file(state_dir, RECHECKS_DIR, f"{state.review}.json", canonical_bytes(doc))


def recheck_review(
    *,
    state_dir: str | os.PathLike[str],
    review: str,
    host: HostAdapter | None = None,
    token_env: str | None = None,
    environ: Mapping[str, str] = os.environ,
) -> Recheck:
    """Re-resolve everything the review state records and decide (:func:`decide_recheck`); record the outcome.

    ``host`` (None: the adapter the state records, :func:`host_from_state`) is for adapters the
    state cannot name. ``refresh`` writes the refreshed state and then the old review's recheck
    record; ``restart`` and ``fail`` write the record only; ``proceed`` writes nothing.

    Raises:
        InputError: ``REVIEW_ID_INVALID``, ``REVIEW_STATE_MISSING``, ``BAD_HOST_OPTIONS``, the
            host adapter's codes (``UNREADABLE``, ``BAD_IDENTITY``, ``HOST_READ_FAILED``, ...),
            ``NOT_FULL_SHA``.
        VerificationError: ``REVIEW_STATE_MALFORMED``, ``REVIEW_STATE_TAMPERED``,
            ``REVIEW_SUPERSEDED``, ``REVIEW_DISCARDED``, ``REVIEW_FAILED``, ``HOST_MISMATCH``,
            ``API_TREE_MISMATCH``, the git layer's codes (``OBJECT_MISSING``,
            ``WRONG_OBJECT_TYPE``, ``HISTORY_TOO_LONG``, ``SHALLOW_REPOSITORY``, ...);
            ``REVIEW_AUTHORITY_MISMATCH`` (a refresh whose frozen base's config or lock is not
            the state's: never for a base image that verified).
        EnvironmentFailure: ``REVIEW_STATE_FAILED``, ``GIT_FAILED`` and the state directory's codes.
    """

    root_dir = os.path.abspath(os.fspath(state_dir))
    state = load_review_state(root_dir, review)
    state_path = os.path.join(root_dir, REVIEWS_DIR, f"{review}.json")
    adapter = host if host is not None else host_from_state(state.host, token_env=token_env, environ=environ)
    surface = None
    changes: tuple[AuthorityChange, ...] = ()
    with GitRepo.open(state.repo) as git:
        fmt = git.object_format
        resolved = adapter.resolve()
        verify_full_sha(resolved.base_sha, fmt, what="base commit")
        tree = git.commit_tree(resolved.base_sha)
        if resolved.api_base_tree is not None and resolved.api_base_tree != tree:
            raise VerificationError(BootstrapCode.API_TREE_MISMATCH, f"the hosting API says the base commit {resolved.base_sha} "
                                    f"has the tree {resolved.api_base_tree}; GITDIR's objects say {tree}")
        verify_full_sha(resolved.head_sha, fmt, what="head commit")
        git.read_object(resolved.head_sha, "commit", path="head")
        bases = best_common_ancestors(git, resolved.base_sha, resolved.head_sha)
        now = RecheckFacts(resolved.repository_id, resolved.full_name, resolved.pull_request_id, resolved.number,
                           resolved.base_sha, tree, resolved.head_sha, bases)
        # The frozen root, established again: only when nothing else already closes the review.
        problems: list[Finding] = []
        root: ReviewRoot | None = None
        if decide_recheck(state, now).outcome not in ("fail", "restart"):
            problems, root = reestablish_root(root_dir, state.doc)
        outcome = decide_recheck(state, now, problems)
        if outcome.outcome == "refresh":
            surface = review_surface(git, root_dir, bases[0], resolved.head_sha)
            assert root is not None  # a root that cannot be established is a restart
            authority = read_base_authority(root.images["base"], state.base_commit, state.base_tree, state.object_format,
                                            state.doc["config"]["sha256"], state.doc["lock"]["sha256"])
            changes = authority_changes([(p.path, p.status) for p in surface.paths], authority.config, authority.lock)
            doc = {k: v for k, v in state.doc.items() if k not in ("review", "change")}
            doc.update(head=now.head, merge_base=bases[0], surface=surface.to_json(),
                       authority_changes=[c.to_json() for c in changes],
                       refresh={"previous": review, "generation": state.generation + 1})
            prepared = prepare_change(git, root_dir, bases[0], resolved.head_sha, surface.head_tree)
            doc["change_content"] = prepared.digest
            spec = ChangeSpec.from_state(review_id(doc), doc, root.semantic.data, root.adapter.data)
            change = freeze_change(git, root_dir, spec, prepared, backend=root.images["base"].backend)
            doc["change"] = change_reference(change)
    if outcome.outcome == "proceed":
        return Recheck(state, state_path, now, outcome, review, state_path, None, None, root)
    if outcome.outcome == "refresh":
        assert surface is not None
        new_id, new_path = write_review_state(root_dir, doc)
        record = _write_record(root_dir, state, outcome, new_id)
        return Recheck(state, state_path, now, outcome, new_id, new_path, record, len(surface.paths))
    record = _write_record(root_dir, state, outcome, None)
    return Recheck(state, state_path, now, outcome, None, None, record, None)


__all__ = [
    "OUTCOMES",
    "RECHECKS_DIR",
    "Recheck",
    "RecheckFacts",
    "RecheckOutcome",
    "ReviewState",
    "check_review_id",
    "decide_recheck",
    "host_from_state",
    "load_review_state",
    "parse_review_state",
    "recheck_review",
]
