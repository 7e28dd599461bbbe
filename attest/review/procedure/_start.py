"""`attest review start` (docs/review.md "attest review start", its bindings: "Output bindings").

:func:`review_start` runs these steps in order; a failure raises and nothing after it runs:

1. **handoff**: it verifies under TRUST; its predicate is read from the same verified bytes
   (:func:`verify_handoff_evidence`: the :class:`~attest.review.handoff.Handoff` plus the
   reproduced outputs and the config and lock digests);
2. **identity**: the host is asked again (``host.resolve()``); repository, pull request and base
   commit must be the handoff's (:func:`decide_identity`, pure, every difference its own code);
3. **base**: the base commit's tree in GITDIR's objects is the handoff's base tree; the four
   images come from the store, verified (seal, every byte, seal), and are exactly the handoff's;
   every blob and tree id of the base image, recomputed from its frozen bytes, gives that tree;
4. **head**: the host's head is a full id of the repository's format and a commit in its objects;
5. **merge base**: the complete set of best common ancestors of base and head, from objects;
   exactly one, or fail (``NO_MERGE_BASE``, ``MULTIPLE_MERGE_BASES``);
6. **surface**: the changed surface merge base -> head, from objects, its line ranges git's own
   (:func:`._change.align_surface`: the lines the host's diff shows, the only ones a comment can anchor to);
7. **bindings**: config and lock from the frozen base snapshot only, the handoff's exactly;
   the ``--semantic`` and ``--adapter`` paths bound (:mod:`._bindings`); and the **authority
   changes**: every path of the changed surface that is authority material of that base
   (:func:`authority_changes`, pure: its configuration and lock, the policy modules and generated
   outputs they name, ``.agents/`` and ``.github/``), recorded whatever the reviewer later says;
8. **retain**: the semantic and adapter bytes read once from the frozen base image, checked
   against the locked digests, kept as immutable bytes (:func:`attest.freeze.retain_file`) before
   anything uses them; no projection path is opened again;
9. **change**: the change image (:mod:`._change`): the head tree from objects, git's diff, the
   surface, the identities and the retained projection bytes, materialized into private staging,
   frozen and verified against the inventory of those objects and bytes;
10. **state**: the review state, RFC 8785 canonical JSON, written atomically to
   ``STATE/reviews/<id>.json``; ``id`` is content-derived (the first 32 hex digits of the
   SHA-256 of the canonical state without its ``review`` and ``change`` fields).

    >>> start = review_start(handoff="handoff.json", policy=load_policy("trust.toml"), state_dir="/var/lib/attest",
    ...                      repo="/srv/git/widgets.git", host=IdentityFile("identity.json"),
    ...                      semantic="docs/review/policy-context.md", adapter="docs/review/github-review.json")
    >>> start.review, start.semantic.sha256
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypedDict

from ..._json import canonical_bytes
from ..._safefs import replace_at
from ..._shape import Shape
from ...attestation import verify_attestation_file
from ...errors import EnvironmentFailure, Finding, VerificationError
from ...freeze import Store, retain_file
from ...freeze._state import open_state, open_sub, state_lock
from ...git import GitRepo, best_common_ancestors, require_single_merge_base, verify_full_sha
from ..bootstrap import (
    BaseSnapshot,
    BootstrapCode,
    GitHubIdentity,
    HostAdapter,
    HostIdentity,
    IdentityFile,
    ReproducedOutput,
    read_authority,
    verify_base_ids,
)
from ..handoff import IMAGE_NAMES, Handoff, HandoffCode, decide_images, parse_handoff
from ._bindings import Bindings, bind_outputs, parse_reproduced_outputs
from ._change import ChangeSpec, change_reference, freeze_change, prepare_change, review_surface
from ._codes import RecheckCode, ReviewStartCode

if TYPE_CHECKING:
    from ..._safefs import Kind
    from ...attestation import Policy
    from ...freeze import Image, RetainedBytes
    from ...git import ChangedSurface
    from ...policy import PolicyConfig, PolicyLock
    from ..bootstrap import Authority, CommitTreeDoc, PullRequestDoc, RepositoryDoc

STATE_FORMAT = "https://attest.dev/review-state/v1"
REVIEWS_DIR = "reviews"
MAX_PROJECTION_BYTES = 16 << 20
_HEX64 = re.compile(r"[0-9a-f]{64}\Z")


def _raise(found: Sequence[Finding]) -> None:
    if found:
        raise VerificationError(findings=found)


# -- step 1: the handoff -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class HandoffEvidence:
    """A verified handoff with what :class:`Handoff` does not carry: the reproduced outputs, config and lock digests."""

    handoff: Handoff
    path: str
    outputs: tuple[ReproducedOutput, ...]
    config_sha256: str
    lock_sha256: str


def handoff_evidence(statement: Mapping[str, object], handoff: Handoff, path: str) -> HandoffEvidence:
    """Read the outputs and the config and lock digests of an already verified and parsed handoff (pure).

    Raises:
        VerificationError: ``HANDOFF_MALFORMED`` (a config or lock digest that is not a
            SHA-256, or outputs that are not ``{path, renderer, context, sha256}``).
    """
    def bad(detail: str) -> VerificationError:
        return VerificationError(HandoffCode.HANDOFF_MALFORMED, detail, path)

    pred = Shape(statement.get("predicate"), "handoff", bad)
    digests = [pred.at(key).string("sha256", pattern=_HEX64, expected="64 lowercase hex digits") for key in ("config", "lock")]
    try:
        outputs = parse_reproduced_outputs(pred.object().value)
    except VerificationError as e:
        raise bad(e.detail) from e
    return HandoffEvidence(handoff, path, outputs, digests[0], digests[1])


def verify_handoff_evidence(path: str | os.PathLike[str], policy: Policy) -> HandoffEvidence:
    """Step 1: verify the handoff under ``policy`` once and read all of it from those verified bytes.

    Raises:
        InputError: the file is unreadable or not an attestation (``UNREADABLE``, ``BAD_JSON``, ...).
        VerificationError: no trusted signature (the attestation layer's codes), or
            ``HANDOFF_WRONG_PREDICATE``, ``HANDOFF_MALFORMED``, ``HANDOFF_SUBJECT_MISMATCH``.
    """

    where = os.path.abspath(os.fspath(path))
    verified = verify_attestation_file(where, policy)
    handoff = parse_handoff(verified.statement, attestation_digest=verified.attestation_digest, signers=verified.signers)
    return handoff_evidence(verified.statement, handoff, where)


# -- step 2: the identities ----------------------------------------------------------------------


def identity_changes(now: tuple[int, str, int, int, str], then: tuple[int, str, int, int, str], whose: str
                     ) -> tuple[list[Finding], list[Finding]]:
    """(repository or pull request changed, base moved): ``now`` against ``then`` (pure).

    Each is ``(repository id, full name, pull request id, number, base commit)``; ``whose``
    names the record in the details ("handoff", "review"). One comparison for ``review start``
    and ``review recheck``.

    Raises:
        Nothing: the differences are returned (``REVIEW_REPOSITORY_CHANGED``,
        ``REVIEW_PULL_REQUEST_CHANGED``; ``REVIEW_BASE_MOVED``).
    """
    changed: list[Finding] = []
    if now[:2] != then[:2]:
        changed.append(Finding(ReviewStartCode.REVIEW_REPOSITORY_CHANGED, None,
                               f"the host names repository {now[0]} {now[1]!r}; the {whose} {then[0]} {then[1]!r}"))
    if now[2:4] != then[2:4]:
        changed.append(Finding(ReviewStartCode.REVIEW_PULL_REQUEST_CHANGED, None,
                               f"the host names pull request {now[2]} #{now[3]}; the {whose} {then[2]} #{then[3]}"))
    moved = [] if now[4] == then[4] else [
        Finding(ReviewStartCode.REVIEW_BASE_MOVED, None, f"the base is now {now[4]}; the {whose}'s trusted base is {then[4]}: "
                "run the bootstrap again (nothing of the old root is reused)")]
    return changed, moved


def decide_identity(handoff: Handoff, host: HostIdentity) -> list[Finding]:
    """The host's identities against the handoff's (pure): each difference its own code.

    Raises:
        Nothing: the differences are returned (``REVIEW_REPOSITORY_CHANGED``,
        ``REVIEW_PULL_REQUEST_CHANGED``, ``REVIEW_BASE_MOVED``).
    """
    changed, moved = identity_changes(
        (host.repository_id, host.full_name, host.pull_request_id, host.number, host.base_sha),
        (handoff.repository_id, handoff.full_name, handoff.pull_request_id, handoff.number, handoff.base_commit), "handoff")
    return changed + moved


# -- step 7: the authority changes (pure) -------------------------------------------------------

#: What an authority change touches (docs/review.md "Authority changes"), in precedence order.
AUTHORITY_KINDS = ("config", "lock", "skill", "workflow", "github", "module", "output")
AUTHORITY_FINDING_PREFIX = "attest-authority-"
#: An authority change's status: the changed surface's (:mod:`attest.git`).
AUTHORITY_STATUSES = ("added", "deleted", "modified", "type-changed")


class AuthorityChangeDoc(TypedDict):
    """An authority change in a written document (the review state, the record, ``--json``)."""

    path: str
    status: str
    kind: str


@dataclass(frozen=True, slots=True)
class AuthorityChange:
    """One head change (merge base -> head) to authority material of the trusted base.

    Raises:
        Nothing: made by :func:`authority_changes`.
    """

    path: str
    status: str  # the changed surface's: added, deleted, modified, type-changed
    kind: str    # one of AUTHORITY_KINDS

    def to_json(self) -> AuthorityChangeDoc:
        return {"path": self.path, "status": self.status, "kind": self.kind}


def _key(path: str) -> tuple[str, ...]:
    # lazy: attest.policy, +25 ms to importing review.procedure, which the merge gate imports (run records, the record's constants) and never needs it
    from ...policy._paths import namespace_key

    return tuple(namespace_key(part) for part in path.split("/"))


def authority_kind(path: str, config: PolicyConfig, lock: PolicyLock) -> str | None:
    """What authority material of the base ``config`` and ``lock`` ``path`` is, or None (pure).

    Paths are compared component by component under case folding, NFC and what NTFS strips
    (:func:`attest.policy._paths.namespace_key`): a head path that is the same file as an
    authority path on some checkout is that authority path. ``config``: ``.agent-policy.yml``;
    ``lock``: ``.agent-policy.lock``; ``skill``: ``.agents`` or anything below it (the Skill
    generator's namespace, ``.agents/skills/<name>/`` of every Skill, configured or not: an
    agent finds a Skill there whatever the configuration says); ``workflow``:
    ``.github/workflows`` or below; ``github``: anything else at or below ``.github`` (actions,
    CODEOWNERS, ...: GitHub's runtime namespace); ``module``: a policy module a context of the
    configuration or an input of the lock names; ``output``: a generated output the
    configuration (enabled or not) or the lock names.

    Raises:
        Nothing.
    """
    return _kind_of(_key(path), _named(config, lock))


def _named(config: PolicyConfig, lock: PolicyLock) -> dict[tuple[str, ...], str]:
    """The keys of the base's exact authority paths: the two files, the modules and outputs they name."""
    # lazy: attest.policy, +25 ms to importing review.procedure, which the merge gate imports (run records, the record's constants) and never needs it
    from ...policy import CONFIG_PATH, LOCK_PATH

    named = {_key(o.path): "output" for o in config.outputs}
    named.update({_key(o.path): "output" for o in lock.outputs})
    named.update({_key(m): "module" for m in (*(m for ctx in config.contexts for m in ctx.modules), *(i.path for i in lock.inputs))})
    named.update({_key(CONFIG_PATH): "config", _key(LOCK_PATH): "lock"})
    return named


def _kind_of(key: tuple[str, ...], named: dict[tuple[str, ...], str]) -> str | None:
    exact = named.get(key)
    if exact in ("config", "lock"):
        return exact
    if key[:1] == _key(".agents"):
        return "skill"
    if key[:2] == _key(".github/workflows"):
        return "workflow"
    if key[:1] == _key(".github"):
        return "github"
    return exact


def authority_changes(changed: Sequence[tuple[str, str]], config: PolicyConfig, lock: PolicyLock) -> tuple[AuthorityChange, ...]:
    """Every ``(path, status)`` of a changed surface that is authority material of the base (pure), in the surface's order.

    ``config`` and ``lock`` are the trusted base's (never the head's): the head's configuration
    cannot take a path out of the authority it is reviewed under.

    Raises:
        Nothing.
    """
    named = _named(config, lock)
    out: list[AuthorityChange] = []
    for path, status in changed:
        kind = _kind_of(_key(path), named)
        if kind is not None:
            out.append(AuthorityChange(path, status, kind))
    return tuple(out)


def parse_authority_changes(value: object, surface: object, where: str | None = None) -> tuple[AuthorityChange, ...]:
    """A state's ``authority_changes`` read strictly against its surface document (pure).

    A list of exactly ``{path, status, kind}``, each a path of the surface with its status, in
    the surface's order, no path twice, ``kind`` one of :data:`AUTHORITY_KINDS`.

    Raises:
        VerificationError: ``REVIEW_STATE_MALFORMED``.
    """

    def bad(detail: str) -> VerificationError:
        return VerificationError(RecheckCode.REVIEW_STATE_MALFORMED, detail, where)

    paths = surface.get("paths") if isinstance(surface, dict) else None
    if not isinstance(paths, list):
        raise bad("state.surface.paths: expected a list")
    order = {p["path"]: (i, p.get("status")) for i, p in enumerate(paths) if isinstance(p, dict) and isinstance(p.get("path"), str)}
    out: list[AuthorityChange] = []
    last = -1
    for c in Shape(value, "state.authority_changes", bad).list_of():
        c.object(("path", "status", "kind"))
        path, status, kind = c.string("path"), c.one_of("status", AUTHORITY_STATUSES), c.one_of("kind", AUTHORITY_KINDS)
        at = order.get(path)
        if at is None or at[1] != status or at[0] <= last:
            c.fail("a path of the state's surface, with its status, in its order, none twice", "path")
        last = at[0]
        out.append(AuthorityChange(path, status, kind))
    return tuple(out)


def read_base_authority(image: Image, commit: str, tree: str, object_format: str, config_sha256: str,
                        lock_sha256: str) -> Authority:
    """The base's config and lock (:func:`attest.review.bootstrap.read_authority`) from a verified base image, the recorded ones exactly.

    Raises:
        VerificationError: ``REVIEW_AUTHORITY_MISMATCH`` (another config or lock than the
            recorded digests), and the codes of ``read_authority``.
        InputError: the codes of ``read_authority`` (a configuration or lock that does not parse).
    """

    authority = read_authority(BaseSnapshot(commit, tree, object_format, image, 0))
    for what, got, want in (("configuration", authority.config_sha256, config_sha256),
                            ("lock", authority.lock_sha256, lock_sha256)):
        if got != want:
            raise VerificationError(ReviewStartCode.REVIEW_AUTHORITY_MISMATCH, f"the snapshot's {what} has SHA-256 "
                                    f"{got}; the review records {want}")
    return authority


# -- step 7: where a binding's path leads in the base tree ---------------------------------------


def path_kinds(repo: GitRepo, tree: str, path: str) -> list[Kind | None]:
    """What each component of ``path`` is in ``tree``, from the root down (``None``: absent), from objects.

    Raises:
        InputError: ``NOT_FULL_SHA``.
        VerificationError: the codes of :meth:`attest.git.GitRepo.read_tree` (``OBJECT_MISSING``,
            ``WRONG_OBJECT_TYPE``, ``BAD_TREE_NAME``, ``MALFORMED_OBJECT``, ...).
        EnvironmentFailure: ``GIT_FAILED``.
    """
    # lazy: attest.policy, +25 ms to importing review.procedure, which the merge gate imports (run records, the record's constants) and never needs it
    from ...policy import kind_of_git_mode

    kinds: list[Kind | None] = []
    oid: str | None = tree
    parts = path.split("/")
    for i, part in enumerate(parts):
        entry = None if oid is None else next((e for e in repo.read_tree(oid, where="/".join(parts[:i])) if e.name == part), None)
        if entry is None:
            kinds.append(None)
            break
        kind = kind_of_git_mode(entry.mode)
        kinds.append(kind)
        if not entry.is_tree:
            break
        oid = entry.oid
    return kinds


# -- the result and its state --------------------------------------------------------------------


class ProjectionDoc(TypedDict):
    """A retained projection in ``attest review start --json``: its configured path and the SHA-256 of the bytes kept."""

    path: str
    sha256: str


class ReviewStartDoc(TypedDict):
    """``attest review start --json`` (docs/json.md), which its text output reads by key."""

    ok: bool
    review: str
    state: str
    handoff_digest: str
    repository: RepositoryDoc
    pull_request: PullRequestDoc
    base: CommitTreeDoc
    head: str
    merge_base: str
    changed_paths: int
    authority_changes: list[AuthorityChangeDoc]
    projections: dict[str, ProjectionDoc]  # semantic, adapter
    images: dict[str, str]
    change: str | None


@dataclass(frozen=True, slots=True)
class ReviewStart:
    """A started review: what was established, the retained projections, and the state that records it.

    Raises:
        Nothing: ``state`` and ``to_json`` encode what :func:`review_start` established.
    """

    review: str
    state_path: str
    evidence: HandoffEvidence
    host: HostIdentity
    object_format: str
    head: str
    merge_base: str
    surface: ChangedSurface
    bindings: Bindings
    semantic: RetainedBytes
    adapter: RetainedBytes
    repo: str
    host_adapter: dict[str, object]
    authority: tuple[AuthorityChange, ...] = ()
    # The change image (._change), on every ReviewStart review_start returns; None only on the one it builds the
    # state document from, before the image is frozen.
    change: Image | None = None
    change_content: str = ""  # its head/, links and diff (._change.content_digest): part of what the id hashes

    @property
    def handoff(self) -> Handoff:
        return self.evidence.handoff

    def state(self) -> dict[str, object]:
        """The review state document (without ``review``): everything recheck and serialize compare against."""
        h = self.handoff
        return {
            "format": STATE_FORMAT,
            "handoff": {"path": self.evidence.path, "digest": h.attestation_digest},
            "repo": self.repo,
            "host": self.host_adapter,
            "repository": {"id": h.repository_id, "full_name": h.full_name},
            "pull_request": {"id": h.pull_request_id, "number": h.number},
            "base": {"commit": h.base_commit, "tree": h.base_tree, "object_format": self.object_format},
            "head": self.head,
            "merge_base": self.merge_base,
            "images": {n: {"identity": i.identity, "path": i.path, "backend": i.backend} for n, i in h.images.items()},
            "config": {"sha256": self.evidence.config_sha256},
            "lock": {"sha256": self.evidence.lock_sha256},
            "context": self.bindings.context,
            "projections": {role: {**getattr(self.bindings, role).to_json(), "image": kept.identity, "retained": "sha256:" + kept.sha256}
                            for role, kept in (("semantic", self.semantic), ("adapter", self.adapter))},
            "surface": self.surface.to_json(),
            "authority_changes": [c.to_json() for c in self.authority],
            **({"change_content": self.change_content} if self.change_content else {}),
            **({"change": change_reference(self.change)} if self.change is not None else {}),
        }

    def to_json(self) -> ReviewStartDoc:
        h = self.handoff
        return {
            "ok": True,
            "review": self.review,
            "state": self.state_path,
            "handoff_digest": h.attestation_digest,
            "repository": {"id": h.repository_id, "full_name": h.full_name},
            "pull_request": {"id": h.pull_request_id, "number": h.number},
            "base": {"commit": h.base_commit, "tree": h.base_tree},
            "head": self.head,
            "merge_base": self.merge_base,
            "changed_paths": len(self.surface.paths),
            "authority_changes": [c.to_json() for c in self.authority],
            "projections": {"semantic": {"path": self.semantic.path, "sha256": "sha256:" + self.semantic.sha256},
                            "adapter": {"path": self.adapter.path, "sha256": "sha256:" + self.adapter.sha256}},
            "images": {n: i.identity for n, i in h.images.items()},
            "change": self.change.identity if self.change is not None else None,
        }


def review_id(state: dict[str, object]) -> str:
    """The content-derived id of a review state: the first 32 hex digits of SHA-256 of its canonical bytes.

    Without its ``change``: the change image holds the id (its ``review.json``), so it is recorded
    beside the id and checked against the state before every use (:func:`._change.decide_change`).

    Raises:
        InputError: ``BAD_JSON`` for a state that RFC 8785 cannot encode
            (never for a :meth:`ReviewStart.state`).
    """

    return hashlib.sha256(canonical_bytes({k: v for k, v in state.items() if k != "change"})).hexdigest()[:32]


def write_state_file(state_dir: str, sub: str, name: str, data: bytes) -> str:
    """Write ``data`` atomically to ``STATE/sub/name`` (mode 0600); return its path.

    Through descriptors of the private state directory: a temp file created there (never an
    existing one), fsync, ``rename`` onto the name, fsync of the directory.

    Raises:
        EnvironmentFailure: ``REVIEW_STATE_FAILED`` (the file cannot be written or renamed),
            ``STATE_INSECURE``, ``STAGING_FAILED`` (``STATE/sub`` cannot be opened or made).
        VerificationError: ``STATE_SYMLINK`` (a link or non-directory planted in the state
            directory).
    """

    where = os.path.join(state_dir, sub, name)
    state_fd = open_state(state_dir, create=False)
    try:
        dfd = open_sub(state_fd, sub, os.path.join(state_dir, sub))
    finally:
        os.close(state_fd)
    try:
        try:
            replace_at(dfd, name, data, mode=0o600)
        except OSError as e:
            raise EnvironmentFailure(ReviewStartCode.REVIEW_STATE_FAILED, f"cannot write the review state: {e.strerror}", where) from e
    finally:
        os.close(dfd)
    return where


def write_review_state(state_dir: str, state: dict[str, object]) -> tuple[str, str]:
    """Step 9: write ``{"review": id, **state}`` atomically to ``STATE/reviews/<id>.json``; return (id, path).

    Raises:
        EnvironmentFailure: ``REVIEW_STATE_FAILED`` (the file cannot be written or renamed),
            ``STATE_INSECURE``, ``STAGING_FAILED`` (``STATE/reviews`` cannot be opened or made).
        VerificationError: ``STATE_SYMLINK`` (a link or non-directory planted in the state
            directory).
    """

    ident = review_id(state)
    return ident, write_state_file(state_dir, REVIEWS_DIR, f"{ident}.json", canonical_bytes({"review": ident, **state}))


def describe_host(host: HostAdapter) -> dict[str, object]:
    """How to ask the host again (recheck): the identity file, or the GitHub repository, pull request and API URL (never a token).

    Raises:
        Nothing.
    """

    if isinstance(host, IdentityFile):
        return {"adapter": "identity", "path": os.path.abspath(host.path)}
    if isinstance(host, GitHubIdentity):
        return {"adapter": "github", "repository": host.full_name, "pr": host.number, "api_url": host.api_url}
    return {"adapter": type(host).__name__}


# -- the procedure -------------------------------------------------------------------------------


def review_start(
    *,
    handoff: str | os.PathLike[str],
    policy: Policy,
    state_dir: str | os.PathLike[str],
    repo: str | os.PathLike[str],
    host: HostAdapter,
    semantic: str,
    adapter: str,
) -> ReviewStart:
    """Run steps 1-10 of the module docstring; raise at the first failure (nothing after it runs).

    Raises:
        InputError: an unreadable handoff, identity or repository; ``NOT_FULL_SHA``; ``BAD_IDENTITY``.
        VerificationError: ``REVIEW_REPOSITORY_CHANGED``, ``REVIEW_PULL_REQUEST_CHANGED``,
            ``REVIEW_BASE_MOVED``, ``REVIEW_BASE_TREE_MISMATCH``, ``REVIEW_AUTHORITY_MISMATCH``, the
            ``REVIEW_BINDING_*`` codes, and the codes of the layers below (handoff, store, git, freeze).
        EnvironmentFailure: ``REVIEW_STATE_FAILED`` and the layers' environment failures.
    """

    state = os.path.abspath(os.fspath(state_dir))
    repo_path = os.path.abspath(os.fspath(repo))
    # 1. The handoff, verified under TRUST; nothing of it is read before.
    evidence = verify_handoff_evidence(handoff, policy)
    h = evidence.handoff
    with GitRepo.open(repo_path) as git:
        fmt = git.object_format
        # 2. The host, asked again: the same repository, pull request and base as the handoff's.
        now = host.resolve()
        _raise(decide_identity(h, now))
        # 3. The base: its tree from objects is the handoff's, and the frozen snapshot is that tree.
        verify_full_sha(now.base_sha, fmt, what="base commit")
        tree = git.commit_tree(now.base_sha)
        if tree != h.base_tree:
            raise VerificationError(ReviewStartCode.REVIEW_BASE_TREE_MISMATCH, f"GITDIR's objects give the base commit "
                                    f"{now.base_sha} the tree {tree}; the handoff's base tree is {h.base_tree}")
        if now.api_base_tree is not None and now.api_base_tree != tree:
            raise VerificationError(BootstrapCode.API_TREE_MISMATCH, f"the hosting API says the base commit {now.base_sha} has "
                                    f"the tree {now.api_base_tree}; GITDIR's objects say {tree}")
        state_fd = open_state(state, create=False)
        try:
            # The store's shared lock, as freeze and exec hold it: gc cannot remove an image between
            # its verification and the retention of its bytes.
            with state_lock(state_fd, exclusive=False):
                store = Store(state)
                images = {name.upper(): store.get(h.images[name].identity) for name in IMAGE_NAMES}
                _raise(decide_images(h, images))
                base_image = images["BASE"]
                snapshot = BaseSnapshot(h.base_commit, h.base_tree, fmt, base_image, 0)
                verify_base_ids(snapshot)  # Store.get just verified it: its seal, then every id from its bytes
                # 4. The head: a full id of this repository's format, a commit in its objects.
                verify_full_sha(now.head_sha, fmt, what="head commit")
                git.read_object(now.head_sha, "commit", path="head")
                # 5. Exactly one best common ancestor: never one picked out of several, never a virtual one.
                merge_base = require_single_merge_base(best_common_ancestors(git, now.base_sha, now.head_sha))
                # 6. The changed surface merge base -> head, from objects.
                surface = review_surface(git, state, merge_base, now.head_sha)
                # 7. The bindings, against the frozen snapshot's config and lock (the handoff's exactly).
                authority = read_authority(snapshot)
                for what, got, want in (("configuration", authority.config_sha256, evidence.config_sha256),
                                        ("lock", authority.lock_sha256, evidence.lock_sha256)):
                    if got != want:
                        raise VerificationError(ReviewStartCode.REVIEW_AUTHORITY_MISMATCH, f"the snapshot's {what} has SHA-256 "
                                                f"{got}; the handoff records {want}")
                # lazy: attest.policy, +25 ms to importing review.procedure, which the merge gate imports (run records, the record's constants) and never needs it
                from ...policy import PathRole, check_authority_path

                kinds = {p: path_kinds(git, tree, p) for p in (semantic, adapter)
                         if isinstance(p, str) and check_authority_path(p, PathRole.OUTPUT) is None}
                bindings = bind_outputs(authority.config, authority.lock, evidence.outputs, semantic, adapter, kinds=kinds)
                # ... and every head change to the base's authority material, from the surface and the base only.
                changes = authority_changes([(p.path, p.status) for p in surface.paths], authority.config, authority.lock)
                # 8. Retained before any use: the exact locked bytes, read once from the frozen base image.
                kept_semantic = retain_file(base_image, bindings.semantic.path, bindings.semantic.sha256, max_bytes=MAX_PROJECTION_BYTES)
                kept_adapter = retain_file(base_image, bindings.adapter.path, bindings.adapter.sha256, max_bytes=MAX_PROJECTION_BYTES)
                start = ReviewStart("", "", evidence, now, fmt, now.head_sha, merge_base, surface, bindings, kept_semantic,
                                    kept_adapter, repo_path, describe_host(host), changes)
                # 9. The change image: head tree, diff, surface, identities and projections, frozen and verified.
                prepared = prepare_change(git, state, merge_base, now.head_sha, surface.head_tree)
                doc = {**start.state(), "change_content": prepared.digest}
                spec = ChangeSpec.from_state(review_id(doc), doc, kept_semantic.data, kept_adapter.data)
                change = freeze_change(git, state, spec, prepared, backend=base_image.backend)
        finally:
            os.close(state_fd)
    # 10. The review state.
    ident, where = write_review_state(state, {**doc, "change": change_reference(change)})
    return ReviewStart(ident, where, evidence, now, fmt, now.head_sha, merge_base, surface, bindings, kept_semantic, kept_adapter,
                       repo_path, start.host_adapter, changes, change, prepared.digest)


__all__ = [
    "AUTHORITY_FINDING_PREFIX",
    "AUTHORITY_KINDS",
    "AUTHORITY_STATUSES",
    "REVIEWS_DIR",
    "STATE_FORMAT",
    "AuthorityChange",
    "HandoffEvidence",
    "ReviewStart",
    "authority_changes",
    "authority_kind",
    "decide_identity",
    "describe_host",
    "handoff_evidence",
    "parse_authority_changes",
    "path_kinds",
    "read_base_authority",
    "review_id",
    "review_start",
    "verify_handoff_evidence",
    "write_review_state",
    "write_state_file",
]
