"""The change image: the pull request's change as review data, frozen like every other image (docs/review.md "The reviewer's inputs").

``review start`` (and a refresh) materializes it from git objects into private staging, freezes
it and verifies the frozen bytes against an inventory computed from those objects and the bytes
attest generated; the reviewer gets it read-only (and ``noexec``) as ``$ATTEST_IMAGE_CHANGE``:

- ``head/``: the complete head tree, regular files and directories (a symbolic link or a
  submodule is not materialized: ``review.json`` lists each under ``not_materialized``);
- ``diff.patch``: merge base -> head, the unified diff ``git diff`` prints (rendered by git with
  every setting that changes its format pinned, never an external or textconv driver);
- ``surface.json``: the changed surface review start computed (the one anchors are checked
  against: paths, statuses, modes, object ids, LEFT/RIGHT line ranges);
- ``review.json``: repository, pull request, base, head, merge base, review id, the bound
  semantic and adapter paths and their digests;
- ``projections/semantic`` and ``projections/adapter``: exactly the retained projection bytes.

The image holds the review id, so its identity cannot be part of what the id hashes: the review
state records it beside the id (``change``, left out of :func:`~._start.review_id`), and every
run checks the verified image against the state (:func:`decide_change`) before the reviewer
starts: its ``review.json``, ``surface.json`` and projection files are what the state says.

    >>> image = freeze_change(git, "/var/lib/attest", ChangeSpec(...), backend="immutable")
    >>> image.identity
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from ..._digest import sha256_of
from ..._fdio import write_all
from ..._json import canonical_bytes, loads_strict
from ..._safefs import O_DIR, O_FILE, O_NEW
from ...errors import AttestError, EnvironmentFailure, Finding, VerificationError
from ...freeze import freeze_tree
from ...freeze._store import HELD_STAGING
from ...git import ChangedSurface, GitCode, GitRepo, changed_surface
from ...git._objects import MODE_EXEC, MODE_GITLINK, MODE_SYMLINK, MODE_TREE
from ...git._repo import _GIT_ARGS, MAX_DEPTH, MAX_ENTRIES, _run, git_env
from ...git._surface import Hunk
from ...inventory import Entry, EntryType, Inventory
from ..handoff import HandoffCode
from ._codes import ReviewStartCode

if TYPE_CHECKING:
    from ...freeze import Image

#: A JSON object attest checked before reading it by key (a review state as parse_review_state read it, and its
#: parts: surface, host, images, projections; the adapter document that is exactly the known projection).
#: Any: its nested fields are read by key at the types that check established.
CheckedDoc = Mapping[str, Any]

CHANGE_FORMAT = "https://attest.dev/review-change/v1"
_HUNK = re.compile(rb"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@", re.M)
MAX_DIFF_BYTES = 64 << 20
MAX_HEAD_BYTES = 1 << 30
FILE_MODE, EXEC_MODE, DIR_MODE = 0o444, 0o555, 0o555
HEAD_DIR = "head"
GENERATED = ("review.json", "surface.json", "diff.patch", "projections/semantic", "projections/adapter")
#: Every git setting that changes what ``git diff`` prints, at git's default.
_DIFF_ARGS = ("-c", "core.quotePath=true", "-c", "diff.noprefix=false", "-c", "diff.mnemonicPrefix=false",
              "-c", "diff.relative=false", "-c", "diff.suppressBlankEmpty=false", "-c", "diff.context=3",
              "-c", "diff.interHunkContext=0", "-c", "diff.algorithm=default", "-c", "diff.indentHeuristic=true",
              "-c", "core.abbrev=7", "-c", "color.ui=never", "-c", "core.bigFileThreshold=512m",
              # git >= 2.45 reads these (older git ignores a setting it does not know):
              "-c", "diff.srcPrefix=a/", "-c", "diff.dstPrefix=b/",
              "-c", "core.attributesFile=/dev/null")


@dataclass(frozen=True, slots=True)
class ChangeSpec:
    """What the change image is made of: the review's identities, its surface and the retained projection bytes.

    Raises:
        Nothing.
    """

    review: str
    repository: Mapping[str, object]   # {"id", "full_name"}
    pull_request: Mapping[str, object]  # {"id", "number"}
    base_commit: str
    base_tree: str
    head: str
    merge_base: str
    surface: Mapping[str, object]      # attest.git.ChangedSurface.to_json()
    projections: Mapping[str, tuple[str, bytes]]  # role -> (repository path, retained bytes)

    @classmethod
    def from_state(cls, review: str, doc: CheckedDoc, semantic: bytes, adapter: bytes) -> ChangeSpec:
        """The spec of a review state document (``doc``) and its retained projection bytes (pure)."""
        p = doc["projections"]
        return cls(review, doc["repository"], doc["pull_request"], doc["base"]["commit"], doc["base"]["tree"], doc["head"],
                   doc["merge_base"], doc["surface"],
                   {"semantic": (p["semantic"]["path"], semantic), "adapter": (p["adapter"]["path"], adapter)})


def _projections(digests: Mapping[str, tuple[str, str]]) -> dict[str, object]:
    """``review.json``'s projections of role -> (repository path, sha256 hex) (pure)."""
    return {role: {"path": path, "file": f"projections/{role}", "sha256": sha256} for role, (path, sha256) in sorted(digests.items())}


def review_document(spec: ChangeSpec, not_materialized: Sequence[Mapping[str, str]]) -> dict[str, object]:
    """The ``review.json`` of ``spec`` (pure)."""
    return {
        "format": CHANGE_FORMAT,
        "review": spec.review,
        "repository": dict(spec.repository),
        "pull_request": dict(spec.pull_request),
        "base": {"commit": spec.base_commit, "tree": spec.base_tree},
        "head": {"commit": spec.head, "tree": spec.surface["head_tree"]},
        "merge_base": spec.merge_base,
        "projections": _projections({role: (path, hashlib.sha256(data).hexdigest()) for role, (path, data) in spec.projections.items()}),
        "not_materialized": [dict(x) for x in not_materialized],
    }


# -- the head tree, from objects ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class HeadTree:
    """The head tree's regular files and directories (path, git mode, blob id), and what cannot be materialized."""

    entries: tuple[tuple[str, str, str], ...]  # (path, mode, oid); MODE_TREE for a directory
    not_materialized: tuple[dict[str, str], ...]


def read_head_tree(git: GitRepo, tree: str) -> HeadTree:
    """Every path of ``tree`` from the object database, parents first; links and submodules set aside.

    Raises:
        VerificationError: ``TREE_TOO_LARGE`` beyond the git layer's caps, and the git layer's
            object checks (``OBJECT_MISSING``, ``BAD_TREE_NAME``, ...).
        EnvironmentFailure: ``GIT_FAILED``.
    """
    out: list[tuple[str, str, str]] = []
    aside: list[dict[str, str]] = []
    stack: list[tuple[str, str, int]] = [(tree, "", 0)]
    while stack:
        oid, prefix, depth = stack.pop()
        for e in git.read_tree(oid, where=prefix):
            rel = f"{prefix}/{e.name}" if prefix else e.name
            if len(out) + len(aside) >= MAX_ENTRIES:
                raise VerificationError(GitCode.TREE_TOO_LARGE, f"the head tree has more than {MAX_ENTRIES} entries", rel)
            if e.mode == MODE_SYMLINK:
                _, target = git.read_object(e.oid, "blob", path=rel)
                aside.append({"path": rel, "kind": "symlink", "target": target.decode("utf-8", "backslashreplace")})
            elif e.mode == MODE_GITLINK:
                aside.append({"path": rel, "kind": "submodule", "target": e.oid})
            elif e.is_tree:
                if depth + 1 > MAX_DEPTH:
                    raise VerificationError(GitCode.TREE_TOO_LARGE, f"the head tree is deeper than {MAX_DEPTH}", rel)
                out.append((rel, e.mode, e.oid))
                stack.append((e.oid, rel, depth + 1))
            else:
                out.append((rel, e.mode, e.oid))
    return HeadTree(tuple(out), tuple(sorted(aside, key=lambda x: x["path"])))


# -- git's diff ---------------------------------------------------------------------------------


def _objects_dir(git: GitRepo) -> str:
    """The absolute path of the repository's object database (a linked worktree's is its common directory's)."""

    out = _run([f"--git-dir={git.git_dir}", "rev-parse", "--git-path", "objects"], git.git_dir).decode("utf-8", "replace").strip()
    return os.path.normpath(os.path.join(git.git_dir, out)) if not os.path.isabs(out) else out


def private_repository(git: GitRepo, scratch: str) -> str:
    """A new, empty bare repository under ``scratch`` whose only content is an alternate to ``git``'s objects; its path.

    git run on it reads the objects of the repository under review and nothing else of it: no
    configuration, attributes (``info/attributes``), ``.gitmodules`` or worktree.

    Raises:
        EnvironmentFailure: ``GIT_FAILED``.
    """

    private = os.path.join(scratch, "diff.git")
    if os.path.isdir(private):
        return private
    try:
        init = subprocess.run([*_GIT_ARGS, "init", "-q", "--bare", f"--object-format={git.object_format}", private],
                              capture_output=True, env=git_env(), cwd=scratch, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise EnvironmentFailure(GitCode.GIT_FAILED, f"cannot run git init: {e}") from e
    if init.returncode != 0:
        raise EnvironmentFailure(GitCode.GIT_FAILED, f"git init exited {init.returncode}: "
                                 f"{init.stderr.decode('utf-8', 'replace').strip()[:300]}")
    fd = os.open(os.path.join(private, "objects", "info", "alternates"), O_NEW, 0o600)
    try:
        write_all(fd, (_objects_dir(git) + "\n").encode())
    finally:
        os.close(fd)
    return private


def git_hunks(private: str, merge_base: str, head: str, path: str) -> tuple[Hunk, ...]:
    """The hunks of ``path`` as ``git diff -U0`` numbers them in the private repository (what the host's diff shows).

    Raises:
        EnvironmentFailure: ``GIT_FAILED``.
    """
    argv = [*_GIT_ARGS, *_DIFF_ARGS, f"--git-dir={private}", "diff", "-U0", "--no-color", "--no-ext-diff", "--no-textconv",
            "--no-renames", "--no-relative", merge_base, head, "--", path]
    try:
        proc = subprocess.run(argv, capture_output=True, env={**git_env(), "GIT_LITERAL_PATHSPECS": "1"}, cwd=private, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise EnvironmentFailure(GitCode.GIT_FAILED, f"cannot run git diff: {e}") from e
    if proc.returncode != 0:
        raise EnvironmentFailure(GitCode.GIT_FAILED, f"git diff -U0 exited {proc.returncode}: "
                                 f"{proc.stderr.decode('utf-8', 'replace').strip()[:300]}", path)
    hunks: list[Hunk] = []
    for m in _HUNK.finditer(proc.stdout):
        left, right = int(m.group(1)), int(m.group(3))
        lcount = int(m.group(2)) if m.group(2) is not None else 1
        rcount = int(m.group(4)) if m.group(4) is not None else 1
        hunks.append(Hunk(left, lcount, right, rcount))
    return tuple(hunks)


def align_surface(git: GitRepo, surface: ChangedSurface, scratch: str) -> ChangedSurface:
    """``surface`` with the hunks of every text path as git's own diff has them (what the host shows and anchors to).

    attest's line diff is a minimal one; git's (and GitHub's) may place an equally short change
    elsewhere (its heuristics slide and merge hunks). A comment anchored to a line attest's diff
    changes but git's does not would not be on the host's diff at all, so the surface the reviewer
    reads and the serializer anchors against is git's: its paths, statuses, modes, ids and content
    classes stay attest's own, from objects; only the line ranges of text paths are git's.

    Raises:
        EnvironmentFailure: ``GIT_FAILED``.
    """

    private = private_repository(git, scratch)
    paths = tuple(replace(p, hunks=git_hunks(private, surface.base, surface.head, p.path)) if p.content == "text" else p
                  for p in surface.paths)
    return replace(surface, paths=paths)


def review_surface(git: GitRepo, state_dir: str, merge_base: str, head: str) -> ChangedSurface:
    """The changed surface ``merge_base`` -> ``head`` a review records: from objects, its line ranges git's (:func:`align_surface`).

    Raises:
        VerificationError: the git layer's codes (``OBJECT_MISSING``, ``BAD_TREE_NAME``, ...).
        EnvironmentFailure: ``GIT_FAILED``, ``STAGING_FAILED``.
    """
    # lazy: attest.builder, +84 ms to importing review.procedure, which the merge gate imports (run records, the record's constants) and never needs it
    from ...builder._common import make_staging
    from ...builder._outputs import remove_tree  # lazy: as above

    surface = changed_surface(git, merge_base, head)
    with make_staging(os.path.join(state_dir, HELD_STAGING)) as scratch:
        try:
            return align_surface(git, surface, scratch)
        finally:
            remove_tree(scratch)


def render_diff(git: GitRepo, merge_base: str, head: str, scratch: str, *, max_bytes: int = MAX_DIFF_BYTES) -> bytes:
    """``git diff --no-renames MERGE_BASE HEAD`` as git prints it, every format setting pinned, at most ``max_bytes``.

    git runs in a private, empty bare repository made under ``scratch`` whose only content is an
    alternate to the repository's object database: no configuration, attributes
    (``info/attributes``), ``.gitmodules`` or worktree of the repository under review can change
    what it prints; it reads objects only.

    Raises:
        VerificationError: ``REVIEW_CHANGE_TOO_LARGE`` (a longer diff).
        EnvironmentFailure: ``GIT_FAILED`` (git cannot run or fails).
    """
    private = private_repository(git, scratch)
    argv = [*_GIT_ARGS, *_DIFF_ARGS, f"--git-dir={private}", "diff", "--no-color", "--no-ext-diff", "--no-textconv",
            "--no-renames", "--no-relative", "--submodule=short", "--ignore-submodules=none", "-O/dev/null", merge_base, head, "--"]
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env=git_env(), cwd=private)
    except OSError as e:
        raise EnvironmentFailure(GitCode.GIT_FAILED, f"cannot run git diff: {e.strerror}") from e
    assert proc.stdout is not None and proc.stderr is not None
    chunks: list[bytes] = []
    total = 0
    try:
        while total <= max_bytes:
            chunk = proc.stdout.read(min(1 << 20, max_bytes + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
    finally:
        if total > max_bytes:
            proc.kill()
        proc.stdout.close()
        err = proc.stderr.read(4096)
        proc.stderr.close()
        rc = proc.wait()
    if total > max_bytes:
        raise VerificationError(ReviewStartCode.REVIEW_CHANGE_TOO_LARGE, f"the diff of the change is more than {max_bytes} bytes")
    if rc != 0:
        raise EnvironmentFailure(GitCode.GIT_FAILED, f"git diff exited {rc}: {err.decode('utf-8', 'replace').strip()[:300]}")
    return b"".join(chunks)


# -- what the image will hold, before the review id exists ---------------------------------------


def content_digest(head: Sequence[tuple[str, str, int, str | None]], not_materialized: Sequence[Mapping[str, str]],
                   diff_sha256: str) -> str:
    """``sha256:<hex>`` of what the change image holds that does not depend on the review id (pure).

    ``head``: ``(path, kind, size, sha256)`` of every ``head/`` entry (kind ``dir``, ``file`` or
    ``exec``; size 0 and sha256 None for a directory), in any order. The review state records it
    inside what its id hashes (``change_content``), so the image's ``head/`` and ``diff.patch``
    are bound to the review as firmly as its surface is.
    """

    doc = {"head": sorted([list(e) for e in head], key=lambda e: str(e[0])), "not_materialized": [dict(x) for x in not_materialized],
           "diff": diff_sha256}
    return sha256_of(canonical_bytes(doc))


def _kind(mode: str) -> str:
    return "dir" if mode == MODE_TREE else "exec" if mode == MODE_EXEC else "file"


@dataclass(frozen=True, slots=True)
class PreparedChange:
    """The head tree's entries (from objects, every blob hashed) and git's diff: the change before it is frozen."""

    head: HeadTree
    entries: tuple[tuple[str, str, int, str | None], ...]  # (path, git mode, size, sha256), parents first
    diff: bytes

    @property
    def digest(self) -> str:
        return content_digest([(p, _kind(m), n, h) for p, m, n, h in self.entries], self.head.not_materialized,
                              hashlib.sha256(self.diff).hexdigest())


def prepare_change(git: GitRepo, state_dir: str, merge_base: str, head: str, head_tree: str) -> PreparedChange:
    """Read the head tree (every blob hashed, at most :data:`MAX_HEAD_BYTES`) and git's diff, from objects.

    Raises:
        VerificationError: ``REVIEW_CHANGE_TOO_LARGE``, the git layer's object codes.
        EnvironmentFailure: ``GIT_FAILED``, ``STAGING_FAILED``.
    """
    # lazy: attest.builder, +84 ms to importing review.procedure, which the merge gate imports (run records, the record's constants) and never needs it
    from ...builder._common import make_staging
    from ...builder._outputs import remove_tree  # lazy: as above

    tree = read_head_tree(git, head_tree)
    entries: list[tuple[str, str, int, str | None]] = []
    total = 0
    for path, mode, oid in tree.entries:
        if mode == MODE_TREE:
            entries.append((path, mode, 0, None))
            continue
        _, data = git.read_object(oid, "blob", path=path)
        total += len(data)
        if total > MAX_HEAD_BYTES:
            raise VerificationError(ReviewStartCode.REVIEW_CHANGE_TOO_LARGE, f"the head tree holds more than {MAX_HEAD_BYTES} "
                                    "bytes of files", path)
        entries.append((path, mode, len(data), hashlib.sha256(data).hexdigest()))
    with make_staging(os.path.join(state_dir, HELD_STAGING)) as scratch:
        try:
            diff = render_diff(git, merge_base, head, scratch)
        finally:
            remove_tree(scratch)
    return PreparedChange(tree, tuple(entries), diff)


# -- the inventory and the files ----------------------------------------------------------------


def generated_files(spec: ChangeSpec, diff: bytes, head: HeadTree) -> dict[str, bytes]:
    """The bytes of every file attest writes into the change image besides ``head/`` (pure)."""

    return {
        "review.json": canonical_bytes(review_document(spec, head.not_materialized)),
        "surface.json": canonical_bytes(dict(spec.surface)),
        "diff.patch": diff,
        "projections/semantic": spec.projections["semantic"][1],
        "projections/adapter": spec.projections["adapter"][1],
    }


def change_inventory(generated: Mapping[str, bytes], head: Sequence[tuple[str, str, int, str | None]]) -> Inventory:
    """The closed inventory of the change image (pure): ``generated`` and the ``head/`` entries ``(path, mode, size, sha256)``."""
    entries = [Entry(HEAD_DIR, EntryType.DIR, DIR_MODE), Entry("projections", EntryType.DIR, DIR_MODE)]
    for path, data in generated.items():
        entries.append(Entry(path, EntryType.FILE, FILE_MODE, len(data), hashlib.sha256(data).hexdigest()))
    for path, mode, size, sha in head:
        rel = f"{HEAD_DIR}/{path}"
        if sha is None:
            entries.append(Entry(rel, EntryType.DIR, DIR_MODE))
        else:
            entries.append(Entry(rel, EntryType.FILE, EXEC_MODE if mode == MODE_EXEC else FILE_MODE, size, sha))
    return Inventory.from_entries(entries)


def _write_new(dfd: int, name: str, data: bytes, mode: int) -> None:
    fd = os.open(name, O_NEW, 0o600, dir_fd=dfd)
    try:
        write_all(fd, data)
        os.fchmod(fd, mode)
    finally:
        os.close(fd)


def _open_dir(top: int, rel: str) -> int:
    """A new descriptor of the directory ``rel`` (``""``: ``top`` itself) below ``top``, no link followed."""

    fd = os.dup(top)
    try:
        for part in rel.split("/") if rel else ():
            below = os.open(part, O_DIR, dir_fd=fd)
            os.close(fd)
            fd = below
    except BaseException:
        os.close(fd)
        raise
    return fd


def _export(git: GitRepo, root: str, generated: Mapping[str, bytes], head: HeadTree) -> None:
    """Write the image's files below the empty private directory ``root`` (the inventory they must match is the caller's).

    One directory descriptor at a time (the one being written into, opened again from ``root``
    when that changes): a head of any number of directories never runs out of descriptors.
    """

    dirs: list[str] = [HEAD_DIR, "projections"]
    top = os.open(root, O_DIR)
    current_rel: str | None = None  # the directory being written into, and its descriptor
    current_fd = -1

    def into(rel: str) -> int:
        nonlocal current_rel, current_fd
        if rel != current_rel:
            if current_fd >= 0:
                fd, current_fd = current_fd, -1
                os.close(fd)
            current_fd = _open_dir(top, rel)
            current_rel = rel
        return current_fd

    try:
        for d in (HEAD_DIR, "projections"):
            os.mkdir(d, 0o700, dir_fd=top)
        for path, data in generated.items():
            parent, _, name = path.rpartition("/")
            _write_new(into(parent), name, data, FILE_MODE)
        for path, mode, oid in head.entries:
            parent, _, name = f"{HEAD_DIR}/{path}".rpartition("/")
            pfd = into(parent)
            if mode == MODE_TREE:
                os.mkdir(name, 0o700, dir_fd=pfd)
                dirs.append(f"{HEAD_DIR}/{path}")
                continue
            _, data = git.read_object(oid, "blob", path=path)  # re-hashed; its size was bounded by prepare_change
            _write_new(pfd, name, data, EXEC_MODE if mode == MODE_EXEC else FILE_MODE)
        for rel in dirs:  # directory modes last, so a read-only directory never blocks its children
            fd = _open_dir(top, rel)
            try:
                os.fchmod(fd, DIR_MODE)
            finally:
                os.close(fd)
    finally:
        if current_fd >= 0:
            os.close(current_fd)
        os.close(top)


def freeze_change(git: GitRepo, state_dir: str, spec: ChangeSpec, prepared: PreparedChange, *, backend: str | None) -> Image:
    """Materialize the change image of ``spec`` from ``git``'s objects, freeze it and verify it; return the image.

    The inventory is computed from ``prepared`` (the objects, hashed) and the generated bytes,
    never from what was written; :func:`attest.freeze.freeze_tree` copies the export into the
    store's own private staging, seals it, verifies every sealed byte against that inventory and
    publishes it.

    Raises:
        VerificationError: ``REVIEW_CHANGE_TOO_LARGE``, the git layer's object codes, the freeze codes.
        EnvironmentFailure: ``GIT_FAILED``, ``STAGING_FAILED``, the backend's codes.
    """
    # lazy: attest.builder, +84 ms to importing review.procedure, which the merge gate imports (run records, the record's constants) and never needs it
    from ...builder._common import make_staging
    from ...builder._outputs import remove_tree  # lazy: as above

    generated = generated_files(spec, prepared.diff, prepared.head)
    with make_staging(os.path.join(state_dir, HELD_STAGING)) as staging:
        try:
            out = os.path.join(staging, "change")
            os.mkdir(out, 0o700)
            _export(git, out, generated, prepared.head)
            return freeze_tree(out, change_inventory(generated, prepared.entries), state_dir, backend=backend)
        finally:
            remove_tree(staging)


def change_reference(image: Image) -> dict[str, str]:
    """The review state's ``change``: how to take the image from the store again (pure)."""
    return {"identity": image.identity, "path": image.path, "backend": image.backend}


# -- the check before every use -----------------------------------------------------------------


def decide_change(doc: CheckedDoc, review: str, image: Image, read: Callable[[str], bytes]) -> list[Finding]:
    """Whether the verified change ``image`` is the one of the review state ``doc`` (pure but for ``read``).

    ``read(path)`` returns the bytes of a file of the image (the caller reads them through the
    verified root). The image must be the state's ``change`` (identity, path, backend); its
    ``surface.json`` exactly the canonical surface of the state; its ``review.json`` the state's
    identities and projections with this ``review``; each projection file exactly the retained
    digest the state records.

    Raises:
        Nothing: every difference is a ``REVIEW_CHANGE_MISMATCH`` finding.
    """

    def bad(detail: str, path: str | None = None) -> Finding:
        return Finding(HandoffCode.REVIEW_CHANGE_MISMATCH, path or getattr(image, "path", None), detail)

    want = doc.get("change")
    if not isinstance(want, Mapping):
        return [bad("the review state records no change image")]
    found = [bad(f"the change image's {f} is {getattr(image, f)!r}, the review state's {want.get(f)!r}")
             for f in ("identity", "path", "backend") if getattr(image, f) != want.get(f)]
    if found:
        return found
    try:
        if read("surface.json") != canonical_bytes(doc["surface"]):
            found.append(bad("surface.json is not the review's changed surface", "surface.json"))
        got = loads_strict(read("review.json"), what="review.json", max_bytes=16 << 20)
    except (AttestError, OSError) as e:
        return [*found, bad(f"the change image cannot be read: {e}")]
    p = doc["projections"]
    spec = ChangeSpec(review, doc["repository"], doc["pull_request"], doc["base"]["commit"], doc["base"]["tree"], doc["head"],
                      doc["merge_base"], doc["surface"], {"semantic": (p["semantic"]["path"], b""), "adapter": (p["adapter"]["path"], b"")})
    expected = {**review_document(spec, []), "projections": _projections({role: (p[role]["path"], p[role]["sha256"])
                                                                         for role in ("semantic", "adapter")})}
    if not isinstance(got, dict) or {k: v for k, v in got.items() if k != "not_materialized"} != \
            {k: v for k, v in expected.items() if k != "not_materialized"}:
        fields = sorted(k for k in {*expected, *(got if isinstance(got, dict) else {})} - {"not_materialized"}
                        if not isinstance(got, dict) or got.get(k) != expected.get(k))
        found.append(bad(f"review.json does not hold this review's identities and projections: {', '.join(fields)} differ",
                         "review.json"))
    found += _content_problems(doc, image, got, read)
    for role in ("semantic", "adapter"):
        try:
            data = read(f"projections/{role}")
        except OSError as e:
            found.append(bad(f"projections/{role} cannot be read: {e.strerror}"))
            continue
        if hashlib.sha256(data).hexdigest() != p[role]["sha256"]:
            found.append(bad(f"projections/{role} is not the retained {role} projection", f"projections/{role}"))
    return found


def _content_problems(doc: CheckedDoc, image: Image, review_json: object, read: Callable[[str], bytes]) -> list[Finding]:
    """Whether the image's ``head/``, its links and submodules and ``diff.patch`` are the state's ``change_content`` (pure but for ``read``)."""
    inventory = getattr(image, "inventory", None)
    where = getattr(image, "path", None)
    if inventory is None:
        return [Finding(HandoffCode.REVIEW_CHANGE_MISMATCH, where, "the change image has no inventory to compare")]
    prefix = HEAD_DIR + "/"
    head = [(e.path[len(prefix):], "dir" if e.type is EntryType.DIR else "exec" if e.mode & 0o111 else "file",
             0 if e.type is EntryType.DIR else e.size, e.sha256)
            for e in inventory.entries if e.path.startswith(prefix)]
    aside = review_json.get("not_materialized") if isinstance(review_json, dict) else None
    try:
        diff = hashlib.sha256(read("diff.patch")).hexdigest()
    except OSError as e:
        return [Finding(HandoffCode.REVIEW_CHANGE_MISMATCH, where, f"diff.patch cannot be read: {e.strerror}")]
    if not isinstance(aside, list) or not all(isinstance(x, dict) for x in aside) or \
            content_digest(head, aside, diff) != doc.get("change_content"):
        return [Finding(HandoffCode.REVIEW_CHANGE_MISMATCH, where, "the change image's head/, its links and submodules or "
                        "diff.patch are not the ones the review state records (change_content)")]
    return []


def read_image_file(image: Image, rel: str, *, max_bytes: int = 64 << 20) -> bytes:
    """The bytes of ``rel`` in the verified ``image``, read through descriptors of its root (no link followed).

    Raises:
        OSError: the file cannot be opened or is larger than ``max_bytes``.
    """

    fds = [os.open(image.path, O_DIR)]
    try:
        parts = rel.split("/")
        for part in parts[:-1]:
            fds.append(os.open(part, O_DIR, dir_fd=fds[-1]))
        fd = os.open(parts[-1], O_FILE, dir_fd=fds[-1])
        try:
            size = os.fstat(fd).st_size
            if size > max_bytes:
                raise OSError(27, f"more than {max_bytes} bytes")
            return os.pread(fd, size, 0)
        finally:
            os.close(fd)
    finally:
        for fd in fds:
            os.close(fd)


__all__ = [
    "CHANGE_FORMAT",
    "ChangeSpec",
    "HeadTree",
    "PreparedChange",
    "align_surface",
    "change_inventory",
    "change_reference",
    "content_digest",
    "decide_change",
    "freeze_change",
    "generated_files",
    "git_hunks",
    "prepare_change",
    "private_repository",
    "read_head_tree",
    "read_image_file",
    "render_diff",
    "review_document",
    "review_surface",
]
