"""The trusted-base snapshot: docs/bootstrap.md "The trusted-base snapshot (step 3)".

The exact base tree, materialized from git objects into deployment-private staging, frozen, and
verified *after the seal* against the base commit's git object ids. It is the only
repository-policy root the later steps may read: a writable checkout is never one.

    >>> with GitRepo.open("/srv/git/widgets.git") as repo:
    ...     base = snapshot_base(repo, base_sha, "/var/lib/attest", backend="immutable")
    >>> base.path            # read .agent-policy.yml and .agent-policy.lock from here only

Steps, in the order of attest's one invariant (private materialization -> immutability ->
verification of the frozen bytes -> publication; docs/bootstrap.md), each failing closed with
nothing published:

1. the commit is a full object id of the repository's format; the repository is not shallow (its
   history would end where a local ``shallow`` file says); the commit's tree is read from the
   object database, re-hashed, and must equal ``tree`` when the caller already established it
   (step 2, from the host);
2. every tree object below it is read (each re-hashed) and the mode and id of every path recorded;
   a symbolic link or a gitlink anywhere is refused, every one of them reported (see below);
3. the closed inventory of the exact tree is computed from the objects alone (every blob re-hashed);
4. the tree is exported from objects, never from a worktree (no filter, ``autocrlf`` or smudge can
   change a byte), into private staging held for the duration (``STATE/build-staging``: ``attest
   store gc`` leaves it alone while it is held, and removes it if the process dies);
5. :func:`attest.freeze.freeze_tree` copies it into the store's own private staging, seals every
   inode, verifies the sealed bytes against the inventory of step 3 and publishes (a stored image
   of the same identity is reused only after every byte of it is verified again);
6. after the seal, every blob id and every tree id is recomputed from the frozen bytes
   (:func:`recompute_tree`) and each must equal the base tree's object at that path; the root
   must equal the commit's tree;
7. nothing sealed moved while the ids were recomputed.

Why links and submodules are refused anywhere in the base tree, not only in the authority closure:

- the closure is not known at step 3. It is defined by ``.agent-policy.yml``, which step 4 reads
  *from this snapshot*; a config path, a module, a generated output or a Skill reference could
  name any path, and a link anywhere could redirect that read. Refusing here is the one decision
  that does not depend on bytes not yet authenticated;
- a frozen image holds regular files and directories only (the closed inventory has no link type
  and the freeze layer never materializes one). A snapshot that left links out would not be the
  exact base tree, and its root id could not be recomputed from frozen bytes: the missing entries
  would have to be taken on trust from evidence outside the image;
- a gitlink names a commit of another repository, whose objects this one does not hold: its
  bytes can be neither materialized nor verified, and review authority from another repository
  is no part of the contract.

The cost is that a repository whose base holds a link or a submodule cannot be trusted-reviewed
until it removes them (or until an authority-closure snapshot, which knows the closure, lifts the
rule for paths outside it). The refusal names every such path.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from ..._safefs import Kind, UnsafeEntry, classify, open_dir_at, open_regular_at
from ...errors import Finding, VerificationError
from ...freeze import FreezeCode, Image, Store, check_image, freeze_tree, resolve_backend, verify_image
from ...freeze._image import VERIFIED
from ...freeze._state import open_state, state_lock
from ...freeze._store import HELD_STAGING
from ...git import GitCode, GitRepo, TreeEntry, object_id, verify_full_sha, verify_not_shallow
from ...git._objects import MODE_EXEC, MODE_FILE, MODE_GITLINK, MODE_SYMLINK, MODE_TREE, ObjectFormat
from ...git._repo import MAX_BLOB, MAX_DEPTH, MAX_ENTRIES
from ...inventory import Inventory, InventoryCode, open_root, sort_key
from ._codes import BootstrapCode

# Modes of the frozen base: read-only, executable exactly where git records 100755.
FILE_MODE = 0o444
EXEC_MODE = 0o555
DIR_MODE = 0o555

#: path -> (git mode, object id); ``""`` is the root tree.
ObjectIds = Mapping[str, tuple[str, str]]


@dataclass(frozen=True, slots=True)
class BaseSnapshot:
    """The trusted-base snapshot: a frozen image whose every object id was recomputed after its seal.

    Raises:
        Nothing: made by :func:`snapshot_base`; check it again with :func:`verify_base_snapshot`.
    """

    commit: str
    tree: str
    object_format: str
    image: Image
    #: Blobs and trees whose ids were recomputed from the frozen bytes (the root tree included).
    objects: int

    @property
    def path(self) -> str:
        return self.image.path

    @property
    def identity(self) -> str:
        return self.image.identity

    @property
    def backend(self) -> str:
        return self.image.backend

    def to_json(self) -> dict[str, object]:
        return {"commit": self.commit, "tree": self.tree, "object_format": self.object_format, "identity": self.identity,
                "path": self.path, "backend": self.backend, "objects": self.objects}


# -- git tree objects, pure -------------------------------------------------------------------


def _git_order(e: TreeEntry) -> bytes:
    raw = e.name.encode("utf-8", "surrogateescape")
    return raw + b"/" if e.is_tree else raw  # git sorts a tree as if its name ended in '/'


def encode_tree(entries: Iterable[TreeEntry]) -> bytes:
    """The raw bytes of the git tree object holding ``entries``, in git's order (pure).

    ``object_id("tree", encode_tree(parse_tree(raw, fmt)), fmt)`` is the id of ``raw``.

    Raises:
        ValueError: for an entry whose ``oid`` is not hex (never one that :func:`parse_tree` read).
    """
    return b"".join(e.mode.encode("ascii") + b" " + e.name.encode("utf-8", "surrogateescape") + b"\0" + bytes.fromhex(e.oid)
                    for e in sorted(entries, key=_git_order))


def diff_object_ids(expected: ObjectIds, recomputed: ObjectIds) -> list[Finding]:
    """``BASE_OBJECT_MISMATCH`` for every path below the root whose mode or id differs, or that only one side has (pure).

    Raises:
        Nothing: the differences are returned.
    """
    out: list[Finding] = []
    for path in sorted((set(expected) | set(recomputed)) - {""}, key=sort_key):
        want, got = expected.get(path), recomputed.get(path)
        if want == got:
            continue
        if got is None:
            detail = f"the base tree has {_describe(want)} here; the snapshot has nothing"
        elif want is None:
            detail = f"the snapshot has {_describe(got)} here; the base tree has nothing"
        else:
            detail = f"the frozen bytes are {_describe(got)}; the base tree has {_describe(want)}"
        out.append(Finding(BootstrapCode.BASE_OBJECT_MISMATCH, path, detail))
    return out


def _describe(item: tuple[str, str] | None) -> str:
    assert item is not None
    mode, oid = item
    return f"{'tree' if mode == MODE_TREE else 'blob'} {oid} (mode {mode})"


# -- reading the base from the object database -------------------------------------------------


def base_tree_objects(repo: GitRepo, tree: str) -> dict[str, tuple[str, str]]:
    """The mode and id of every path of ``tree`` from the object database (each tree re-hashed).

    Raises:
        VerificationError: ``BASE_SYMLINK`` / ``BASE_GITLINK`` listing every link and submodule
            in the tree; ``TREE_TOO_LARGE`` beyond the git layer's entry and depth caps;
            the git layer's object checks (``OBJECT_MISSING``,
            ``OBJECT_HASH_MISMATCH``, ``WRONG_OBJECT_TYPE``, ``BAD_TREE_NAME``, ``BAD_TREE_MODE``,
            ``BAD_TREE_ORDER``, ``MALFORMED_OBJECT``).
        InputError: ``NOT_FULL_SHA``.
        EnvironmentFailure: ``GIT_FAILED``.
    """
    ids: dict[str, tuple[str, str]] = {"": (MODE_TREE, tree)}
    refused: list[Finding] = []
    stack: list[tuple[str, str, int]] = [(tree, "", 0)]
    while stack:
        oid, prefix, depth = stack.pop()
        for e in repo.read_tree(oid, where=prefix):
            rel = f"{prefix}/{e.name}" if prefix else e.name
            if len(ids) > MAX_ENTRIES:
                raise VerificationError(GitCode.TREE_TOO_LARGE, f"the base tree has more than {MAX_ENTRIES} entries", rel)
            ids[rel] = (e.mode, e.oid)
            if e.mode == MODE_SYMLINK:
                refused.append(Finding(BootstrapCode.BASE_SYMLINK, rel, "a symbolic link in the base tree (never part of a "
                                       "trusted-base snapshot)"))
            elif e.mode == MODE_GITLINK:
                refused.append(Finding(BootstrapCode.BASE_GITLINK, rel, f"a submodule (gitlink to commit {e.oid}) in the base "
                                       "tree: its bytes are not in this repository"))
            elif e.is_tree:
                if depth + 1 > MAX_DEPTH:
                    raise VerificationError(GitCode.TREE_TOO_LARGE, f"the base tree is deeper than {MAX_DEPTH}", rel)
                stack.append((e.oid, rel, depth + 1))
    if refused:
        raise VerificationError(findings=sorted(refused, key=lambda f: sort_key(f.path or "")))
    return ids


# -- recomputing ids from frozen bytes -----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RecomputedTree:
    """Git object ids computed from the bytes of a directory tree, without git."""

    root: str
    ids: dict[str, tuple[str, str]]
    #: Entries that are not a plain regular file or directory (no git object can stand for them).
    findings: tuple[Finding, ...]


_UNSAFE_CODES = {"symlink": InventoryCode.SYMLINK, "special": InventoryCode.SPECIAL_FILE,
                 "hardlink": InventoryCode.HARDLINK, "special-mode": InventoryCode.SPECIAL_MODE}


def recompute_tree(root: str | os.PathLike[str], fmt: ObjectFormat) -> RecomputedTree:
    """Every blob and tree id of the directory at ``root``, recomputed from its bytes.

    Walked through directory descriptors, never following a link, every entry decided from
    ``fstat`` of the descriptor opened for it and cross-checked against its listing
    (:mod:`attest._safefs`). A file is a blob of mode 100755 when its owner-execute bit is set
    (git's own rule), else 100644; a directory is a tree. Anything else is a finding.

    Raises:
        InputError: ``BAD_ROOT`` (the root is missing or not a directory).
        VerificationError: ``ROOT_SYMLINK``; ``TREE_TOO_LARGE`` (more entries, depth or file
            bytes than the git layer's caps). Entries below the root that no git object can
            stand for are returned findings (``SYMLINK``, ``SPECIAL_FILE``, ``HARDLINK``,
            ``SPECIAL_MODE``, ``CHANGED_DURING_WALK``).
    """

    ids: dict[str, tuple[str, str]] = {}
    findings: list[Finding] = []

    def unsafe(rel: str, kind: Kind | None, detail: str) -> None:
        code = _UNSAFE_CODES.get(kind.value if kind is not None else "", InventoryCode.CHANGED_DURING_WALK)
        findings.append(Finding(code, rel, detail))

    def visit(dfd: int, prefix: str, depth: int) -> str:
        entries: list[TreeEntry] = []
        for name in sorted(os.listdir(dfd)):
            rel = f"{prefix}/{name}" if prefix else name
            if len(ids) >= MAX_ENTRIES:
                raise VerificationError(GitCode.TREE_TOO_LARGE, f"more than {MAX_ENTRIES} entries", rel)
            try:
                listed = os.stat(name, dir_fd=dfd, follow_symlinks=False)
            except OSError as e:
                unsafe(rel, None, f"cannot stat: {e.strerror}")
                continue
            kind = classify(listed)
            try:
                if kind is Kind.DIR:
                    if depth + 1 > MAX_DEPTH:
                        raise VerificationError(GitCode.TREE_TOO_LARGE, f"deeper than {MAX_DEPTH}", rel)
                    fd = open_dir_at(dfd, name)
                    try:
                        if os.fstat(fd).st_ino != listed.st_ino:
                            unsafe(rel, None, "the directory was replaced while the ids were recomputed")
                            continue
                        mode, oid = MODE_TREE, visit(fd, rel, depth + 1)
                    finally:
                        os.close(fd)
                elif kind is Kind.FILE:
                    fd, st = open_regular_at(dfd, name)
                    try:
                        if st.st_ino != listed.st_ino:
                            unsafe(rel, None, "the file was replaced while the ids were recomputed")
                            continue
                        if st.st_size > MAX_BLOB:
                            raise VerificationError(GitCode.TREE_TOO_LARGE, f"{st.st_size} bytes; the limit is {MAX_BLOB}", rel)
                        data = b"".join(iter(lambda: os.read(fd, 1 << 20), b""))  # noqa: B023 - fd is this iteration's
                    finally:
                        os.close(fd)
                    if len(data) != st.st_size:
                        unsafe(rel, None, "the file changed size while it was read")
                        continue
                    mode, oid = (MODE_EXEC if st.st_mode & 0o100 else MODE_FILE), object_id("blob", data, fmt)
                else:
                    unsafe(rel, kind, f"a {kind.value} entry has no place in a git tree")
                    continue
            except UnsafeEntry as e:
                unsafe(rel, e.kind, f"changed while the ids were recomputed: {e.strerror}")
                continue
            ids[rel] = (mode, oid)
            entries.append(TreeEntry(mode, "tree" if mode == MODE_TREE else "blob", oid, name))
        return object_id("tree", encode_tree(entries), fmt)

    rfd = open_root(root)
    try:
        top = visit(rfd, "", 0)
    finally:
        os.close(rfd)
    ids[""] = (MODE_TREE, top)
    return RecomputedTree(top, ids, tuple(findings))


def verify_tree_ids(root: str | os.PathLike[str], fmt: ObjectFormat, tree: str, expected: ObjectIds | None = None) -> int:
    """Raise unless the directory at ``root`` hashes to the git tree ``tree``; return how many objects were recomputed.

    ``BASE_TREE_MISMATCH`` when the root differs, then (with ``expected``, from
    :func:`base_tree_objects`) ``BASE_OBJECT_MISMATCH`` for every path that differs, and the
    walker's codes for any entry no git object can stand for.

    Raises:
        VerificationError: ``BASE_TREE_MISMATCH`` first, then ``BASE_OBJECT_MISMATCH`` and the
            walker's codes (``SYMLINK``, ``SPECIAL_FILE``, ...); those of :func:`recompute_tree`.
        InputError: ``BAD_ROOT``.
    """
    got = recompute_tree(root, fmt)
    findings: list[Finding] = []
    if got.root != tree:
        findings.append(Finding(BootstrapCode.BASE_TREE_MISMATCH, None, f"the frozen bytes hash to tree {got.root}; the base "
                                f"commit's tree is {tree}"))
    findings += got.findings
    if expected is not None:
        findings += diff_object_ids(expected, got.ids)
    if findings:
        if findings[0].code != BootstrapCode.BASE_TREE_MISMATCH:  # a finding always means the tree is not the base's
            findings.insert(0, Finding(BootstrapCode.BASE_TREE_MISMATCH, None, f"the frozen tree is not the base tree {tree}"))
        raise VerificationError(findings=findings)
    return len(got.ids)


def _verify_after_seal(image: Image, fmt: ObjectFormat, tree: str, expected: ObjectIds | None) -> int:
    """Steps 6 and 7: recompute every id from the sealed bytes, then confirm the seal did not move meanwhile."""
    count = verify_tree_ids(image.path, fmt, tree, expected)
    moved = check_image(image, flags=False)
    if moved:
        raise VerificationError(findings=[Finding(FreezeCode.CHANGED_AFTER_FREEZE, f.path, f"changed while the object ids were "
                                                  f"recomputed: {f.detail}") for f in moved])
    return count


# -- the snapshot --------------------------------------------------------------------------------


def _stored(state: str, expected: Inventory, backend: str | None) -> Image | None:
    """The stored image of exactly ``expected`` under the backend asked for, verified (seal, every byte, seal); else None.

    A warm store needs no export of the tree: ``freeze_tree`` would reuse this image without
    reading its source. None (not stored, not holding, another backend) makes the caller export
    and freeze, which replaces an image that does not hold and refuses another backend
    (``STORE_CONFLICT``) as before.
    """

    if not os.path.isdir(os.path.join(state, "store", expected.identity.removeprefix("sha256:"))):
        return None  # a hint only: what is there is opened and verified by Store.get, through descriptors
    try:
        image = Store(state).get(expected.identity)
    except VerificationError:
        return None
    return replace(image, reused=True) if image.backend == resolve_backend(backend) else None


def snapshot_base(repo: GitRepo, commit: str, state_dir: str | os.PathLike[str], *, backend: str | None,
                  tree: str | None = None) -> BaseSnapshot:
    """Materialize, freeze and verify the exact tree of ``commit``; see the module docstring.

    Raises:
        VerificationError: ``BASE_SYMLINK``, ``BASE_GITLINK``, ``BASE_TREE_MISMATCH``,
            ``BASE_OBJECT_MISMATCH``, ``SHALLOW_REPOSITORY``, the git layer's object checks
            (``OBJECT_HASH_MISMATCH``, ``OBJECT_MISSING``, ``BAD_TREE_NAME``, ...), and any
            difference between the frozen copy and the tree (the inventory and freeze codes).
        InputError: ``NOT_FULL_SHA``, an unknown backend.
        EnvironmentFailure: the backend or staging cannot be established.
        VerificationError: ``EROFS_UNSUPPORTED`` for the ``erofs`` backend (not wired yet).
    """
    # lazy: attest.builder, +75 ms to importing review.bootstrap (the merge gate imports it for the host adapter alone)
    from ...builder._common import make_staging
    from ...builder._outputs import remove_tree  # lazy: as above

    if resolve_backend(backend) == "erofs":  # its tree is a mount point: the id recomputation below would read nothing
        raise VerificationError(FreezeCode.EROFS_UNSUPPORTED, "the review bootstrap cannot freeze the base into an erofs image yet; "
                                "choose another backend (--backend immutable or $ATTEST_BACKEND)")
    fmt = repo.object_format
    # 1. The commit and its tree, from the object database.
    verify_full_sha(commit, fmt, what="base commit")
    if tree is not None:
        verify_full_sha(tree, fmt, what="base tree")
    verify_not_shallow(repo)
    base_tree = repo.commit_tree(commit)
    if tree is not None and base_tree != tree:
        raise VerificationError(BootstrapCode.BASE_TREE_MISMATCH, f"commit {commit} has tree {base_tree}, not the base tree "
                                f"{tree} established for it")
    # 2. Every path's object id; no link, no submodule.
    expected_ids = base_tree_objects(repo, base_tree)
    # 3. The closed inventory, from objects alone.
    expected = repo.tree_inventory(base_tree, file_mode=FILE_MODE, exec_mode=EXEC_MODE, dir_mode=DIR_MODE)
    # 4. Private staging under the deployment state (refused unless private), exported from objects.
    # The state lock is held shared throughout, as freeze and exec hold it: `attest store gc` cannot
    # remove the image between its freeze and the recomputation of its ids.
    state = os.path.abspath(os.fspath(state_dir))
    state_fd = open_state(state)
    try:
        with state_lock(state_fd, exclusive=False):
            image = _stored(state, expected, backend)
            if image is None:
                with make_staging(os.path.join(state, HELD_STAGING)) as staging:
                    try:
                        out = os.path.join(staging, "base")
                        os.mkdir(out, 0o700)
                        repo.export_tree(base_tree, out, file_mode=FILE_MODE, exec_mode=EXEC_MODE, dir_mode=DIR_MODE)
                        # 5. Sealed, then its bytes verified against the inventory from objects, then published.
                        image = freeze_tree(out, expected, state, backend=backend)
                    finally:
                        remove_tree(staging)
            # 6. + 7. Every id, from the frozen bytes, after the seal.
            objects = _verify_after_seal(image, fmt, base_tree, expected_ids)
    finally:
        os.close(state_fd)
    return BaseSnapshot(commit, base_tree, fmt, image, objects)


def verify_base_snapshot(snapshot: BaseSnapshot) -> None:
    """Raise unless ``snapshot`` still holds: for a later use of it (a later step, a reuse).

    The seal, then every byte against the image's inventory, then the seal again
    (:func:`attest.freeze.verify_image`); then every object id recomputed from the frozen
    bytes must give the snapshot's tree, and the seal must not have moved meanwhile.

    Raises:
        VerificationError: the codes of :func:`attest.freeze.verify_image` (``IMAGE_CHANGED``,
            ``IMAGE_NOT_IMMUTABLE``, ``CHANGED_AFTER_FREEZE``, the inventory differences), then
            ``BASE_TREE_MISMATCH`` / ``BASE_OBJECT_MISMATCH``, ``CHANGED_AFTER_FREEZE``.
        InputError: ``UNKNOWN_BACKEND``, ``BAD_ROOT``.
    """
    verify_image(snapshot.image)
    fmt: ObjectFormat = "sha256" if snapshot.object_format == "sha256" else "sha1"
    _verify_after_seal(snapshot.image, fmt, snapshot.tree, None)


def verify_base_ids(snapshot: BaseSnapshot) -> None:
    """:func:`verify_base_snapshot` for a snapshot of the image :meth:`attest.freeze.Store.get` just returned.

    For the caller that took the image from the store for this use, under the state lock it still
    holds (``review start``): that verified it (seal, every byte, seal), so its seal is checked
    again instead of every byte being read a second time against the inventory (as
    :func:`attest.freeze.run_from_images` takes a verified image), then every object id is
    recomputed from the frozen bytes and the seal must not have moved meanwhile (steps 6 and 7).
    An image without the mark Store.get and freeze_tree set is verified in full.

    Raises:
        VerificationError: as :func:`verify_base_snapshot`.
        InputError: ``UNKNOWN_BACKEND``, ``BAD_ROOT``.
    """
    if snapshot.image.verified is not VERIFIED:
        verify_base_snapshot(snapshot)
        return
    problems = check_image(snapshot.image)
    if problems:
        raise VerificationError(findings=problems)
    fmt: ObjectFormat = "sha256" if snapshot.object_format == "sha256" else "sha1"
    _verify_after_seal(snapshot.image, fmt, snapshot.tree, None)


__all__ = [
    "BaseSnapshot",
    "RecomputedTree",
    "base_tree_objects",
    "diff_object_ids",
    "encode_tree",
    "recompute_tree",
    "snapshot_base",
    "verify_base_ids",
    "verify_base_snapshot",
    "verify_tree_ids",
]
