"""Reading commits, trees and blobs from a repository's object database.

git runs as a subprocess with a clean environment: no system or global config, no
replace objects, no grafts file (``GIT_GRAFT_FILE`` names a path that does not exist), no
commit-graph (``core.commitGraph=false``: a planted graph file could rewrite parents), no
hooks, no pager, no terminal prompts. History questions (merge bases) refuse a shallow
repository (``SHALLOW_REPOSITORY``): its ``shallow`` file cuts history where it likes. Objects are read with
``git cat-file --batch`` and every object's bytes are re-hashed here, so a corrupted or
substituted object fails with ``OBJECT_HASH_MISMATCH`` instead of being trusted. Trees
are parsed from their raw bytes (never from a worktree: filters, ``autocrlf`` and
smudge would change the bytes), and exported only as regular files and directories.

    >>> with GitRepo.open("/src/attest") as repo:
    ...     tree = repo.commit_tree("0123...full sha...")
    ...     repo.export_tree(tree, "/tmp/out")          # refuses gitlinks and symlinks
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from collections.abc import Iterator
from types import TracebackType

from .._fdio import write_all
from .._safefs import O_DIR, O_NEW
from ..errors import EnvironmentFailure, InputError, VerificationError
from ..inventory import Entry, EntryType, Inventory, check_path, verify_tree
from ._codes import GitCode
from ._objects import (
    MODE_EXEC,
    MODE_GITLINK,
    MODE_SYMLINK,
    ObjectFormat,
    TreeEntry,
    is_full_sha,
    object_id,
    parse_commit_tree,
    parse_tree,
    verify_full_sha,
)

MAX_BLOB = 256 * 1024 * 1024
MAX_ENTRIES = 200_000
MAX_DEPTH = 128


def git_env() -> dict[str, str]:
    """The whole environment git runs with: nothing inherited that could change what it reads.

    Raises:
        Nothing: a constant mapping, new on each call.
    """
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": "/nonexistent",
        "LC_ALL": "C",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "GIT_NO_REPLACE_OBJECTS": "1",
        # Grafts rewrite parents from repository-local state; point git at a file that cannot exist.
        "GIT_GRAFT_FILE": "/nonexistent/attest-no-grafts",
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_PAGER": "cat",
        "GIT_OPTIONAL_LOCKS": "0",
        "GIT_ATTR_NOSYSTEM": "1",
        # git >= 2.44: never fetch a missing object from a promisor remote (older git: refused below).
        "GIT_NO_LAZY_FETCH": "1",
    }


_GIT_ARGS = ("git", "--no-replace-objects", "-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false",
             "-c", "core.commitGraph=false")


class GitRepo:
    """One repository's object database, read through a single ``cat-file --batch`` process.

    Open with :meth:`open` (a context manager); every method below says what it raises.
    """

    def __init__(self, git_dir: str, fmt: ObjectFormat) -> None:
        self.git_dir = git_dir
        self.object_format: ObjectFormat = fmt
        self._proc: subprocess.Popen[bytes] | None = None

    # -- opening -------------------------------------------------------------------------

    @classmethod
    def open(cls, path: str | os.PathLike[str]) -> GitRepo:
        """The repository at ``path`` (a work tree, a bare repository or a git directory).

        Raises:
            InputError: ``NOT_A_REPOSITORY`` when ``path`` is not a directory or git cannot
                open it.
            VerificationError: ``PARTIAL_CLONE`` for a repository with a promisor remote.
            EnvironmentFailure: ``GIT_FAILED`` when git cannot be run.
        """
        where = os.path.abspath(os.fspath(path))
        if not os.path.isdir(where):
            raise InputError(GitCode.NOT_A_REPOSITORY, "the repository path is not a directory", where)
        out = _run(["-C", where, "rev-parse", "--absolute-git-dir", "--show-object-format"], where)
        lines = out.decode("utf-8", "replace").splitlines()
        if len(lines) != 2 or lines[1] not in ("sha1", "sha256"):
            raise InputError(GitCode.NOT_A_REPOSITORY, f"unexpected answer from git rev-parse: {lines!r}", where)
        # A partial clone fetches a missing object by running its promisor remote's configured
        # command (remote.*.uploadpack, a transport helper, ...): code chosen by whoever can write
        # the repository's config. Objects come from the object database only, so refuse one.
        promisor = subprocess.run([*_GIT_ARGS, "-C", where, "config", "--get-regexp", r"^(extensions\.partialclone|remote\..*\.promisor)$"],
                                  capture_output=True, env=git_env(), cwd="/", timeout=60)
        if promisor.returncode == 0 and promisor.stdout.strip():
            raise VerificationError(GitCode.PARTIAL_CLONE, "a partial clone (promisor remote) reads missing objects by running a "
                                    "command its configuration names; use a full clone", where)
        return cls(lines[0], lines[1])  # type: ignore[arg-type]

    def __enter__(self) -> GitRepo:
        return self

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        """Stop the ``cat-file`` process, if one runs; the object can be used (and reopens) after.

        Raises:
            Nothing: a dead git's broken pipes are ignored.
        """
        proc, self._proc = self._proc, None
        if proc is not None:
            assert proc.stdin is not None and proc.stdout is not None
            for stream in (proc.stdin, proc.stdout):
                try:
                    stream.close()
                except OSError:  # a dead git: closing its pipes can only fail with EPIPE
                    pass
            proc.wait()

    # -- objects -------------------------------------------------------------------------

    def _batch(self) -> subprocess.Popen[bytes]:
        if self._proc is None:
            try:
                self._proc = subprocess.Popen(
                    [*_GIT_ARGS, f"--git-dir={self.git_dir}", "cat-file", "--batch"],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.DEVNULL,
                    env=git_env(),
                    cwd="/",
                )
            except OSError as e:
                raise EnvironmentFailure(GitCode.GIT_FAILED, f"cannot run git: {e.strerror}") from e
        return self._proc

    def read_object(self, oid: str, expect: str | None = None, *, path: str | None = None) -> tuple[str, bytes]:
        """``(kind, bytes)`` of object ``oid``, re-hashed here; ``expect`` checks the kind.

        Raises:
            InputError: ``NOT_FULL_SHA`` when ``oid`` is not a full id of this repository's format.
            VerificationError: ``OBJECT_MISSING``, ``OBJECT_HASH_MISMATCH`` (the bytes do not
                hash to ``oid``), ``WRONG_OBJECT_TYPE`` (not ``expect``), ``TREE_TOO_LARGE``
                (over ``MAX_BLOB``).
            EnvironmentFailure: ``GIT_FAILED`` when git cannot be run or answers oddly.
        """
        verify_full_sha(oid, self.object_format, what="object id")
        proc = self._batch()
        assert proc.stdin is not None and proc.stdout is not None
        try:
            proc.stdin.write(oid.encode() + b"\n")
            proc.stdin.flush()
            header = proc.stdout.readline()
        except OSError as e:
            self.close()
            raise EnvironmentFailure(GitCode.GIT_FAILED, f"git cat-file failed: {e}") from e
        parts = header.rstrip(b"\n").split(b" ")
        if len(parts) == 2 and parts[1] == b"missing":
            raise VerificationError(GitCode.OBJECT_MISSING, f"object {oid} is not in the repository", path)
        if len(parts) != 3 or parts[0].decode("ascii", "replace") != oid:
            self.close()
            raise EnvironmentFailure(GitCode.GIT_FAILED, f"unexpected git cat-file header {header[:200]!r}", path)
        kind = parts[1].decode("ascii", "replace")
        if not parts[2].isdigit():
            self.close()
            raise EnvironmentFailure(GitCode.GIT_FAILED, f"unexpected git cat-file header {header[:200]!r}", path)
        size = int(parts[2])
        if size > MAX_BLOB:
            self.close()
            raise VerificationError(GitCode.TREE_TOO_LARGE, f"object {oid} is {size} bytes; the limit is {MAX_BLOB}", path)
        data = proc.stdout.read(size)
        nl = proc.stdout.read(1)
        if len(data) != size or nl != b"\n":
            self.close()
            raise EnvironmentFailure(GitCode.GIT_FAILED, f"git cat-file returned a short object {oid}", path)
        if object_id(kind, data, self.object_format) != oid:
            raise VerificationError(GitCode.OBJECT_HASH_MISMATCH, f"the bytes of {kind} {oid} do not hash to its id", path)
        if expect is not None and kind != expect:
            raise VerificationError(GitCode.WRONG_OBJECT_TYPE, f"object {oid} is a {kind}, not a {expect}", path)
        return kind, data

    def commit_tree(self, rev: str) -> str:
        """The root tree id of commit ``rev``, which must be a full object id.

        Raises:
            InputError: ``NOT_FULL_SHA``.
            VerificationError: every code of :meth:`read_object` (``OBJECT_MISSING``,
                ``WRONG_OBJECT_TYPE``, ...) and ``MALFORMED_OBJECT`` for a bad commit.
            EnvironmentFailure: ``GIT_FAILED``.
        """
        verify_full_sha(rev, self.object_format, what="commit")
        _, data = self.read_object(rev, "commit")
        return parse_commit_tree(data, self.object_format)

    def read_tree(self, oid: str, *, where: str = "") -> tuple[TreeEntry, ...]:
        """The entries of tree ``oid``, parsed strictly (``where`` prefixes paths in errors).

        Raises:
            InputError: ``NOT_FULL_SHA``.
            VerificationError: the codes of :meth:`read_object` and of :func:`parse_tree`
                (``BAD_TREE_NAME``, ``BAD_TREE_MODE``, ``BAD_TREE_ORDER``, ``MALFORMED_OBJECT``).
            EnvironmentFailure: ``GIT_FAILED``.
        """
        _, data = self.read_object(oid, "tree", path=where or None)
        return parse_tree(data, self.object_format, where=where)

    def subtree(self, tree: str, path: str) -> str:
        """The tree id at ``path`` (``/``-separated, relative) below ``tree``; '' or '.' is the root.

        Raises:
            InputError: ``PATH_NOT_IN_TREE`` for a path the name rules refuse; ``NOT_FULL_SHA``.
            VerificationError: ``PATH_NOT_IN_TREE`` (absent, or not a directory),
                ``TREE_SYMLINK``, ``GITLINK`` for a component, and the codes of :meth:`read_tree`.
            EnvironmentFailure: ``GIT_FAILED``.
        """
        if path in ("", "."):
            return tree
        problem = check_path(path)
        if problem is not None:
            raise InputError(GitCode.PATH_NOT_IN_TREE, problem[1], path)
        current, walked = tree, ""
        for part in path.split("/"):
            walked = f"{walked}/{part}" if walked else part
            match = [e for e in self.read_tree(current, where=walked.rpartition("/")[0]) if e.name == part]
            if not match:
                raise VerificationError(GitCode.PATH_NOT_IN_TREE, "no such entry in the tree", walked)
            entry = match[0]
            if entry.mode == MODE_SYMLINK:
                raise VerificationError(GitCode.TREE_SYMLINK, "a path component is a symbolic link", walked)
            if entry.mode == MODE_GITLINK:
                raise VerificationError(GitCode.GITLINK, "a path component is a submodule (gitlink)", walked)
            if not entry.is_tree:
                raise VerificationError(GitCode.PATH_NOT_IN_TREE, "the path is not a directory", walked)
            current = entry.oid
        return current

    def walk(self, tree: str) -> Iterator[tuple[str, TreeEntry]]:
        """Every entry below ``tree`` as ``(relative path, entry)``, parents first.

        Symbolic links and gitlinks are refused: an installed subtree holds regular files and
        directories only (docs/build.md "Recipes (`builders/*.toml`)"), since a closed inventory
        has no link type and a gitlink's commit is in another repository.

        Raises:
            VerificationError: ``TREE_SYMLINK``, ``GITLINK``, ``TREE_TOO_LARGE`` (entries or
                depth over the caps), and the codes of :meth:`read_tree`; raised while iterating.
            InputError: ``NOT_FULL_SHA``.
            EnvironmentFailure: ``GIT_FAILED``.
        """
        stack: list[tuple[str, str, int]] = [(tree, "", 0)]
        count = 0
        while stack:
            oid, prefix, depth = stack.pop()
            for e in self.read_tree(oid, where=prefix):
                rel = f"{prefix}/{e.name}" if prefix else e.name
                count += 1
                if count > MAX_ENTRIES:
                    raise VerificationError(GitCode.TREE_TOO_LARGE, f"the tree has more than {MAX_ENTRIES} entries", rel)
                if e.mode == MODE_SYMLINK:
                    raise VerificationError(GitCode.TREE_SYMLINK, "symbolic links are not installed", rel)
                if e.mode == MODE_GITLINK:
                    raise VerificationError(GitCode.GITLINK, "submodules (gitlinks) are not installed", rel)
                yield rel, e
                if e.is_tree:
                    if depth + 1 > MAX_DEPTH:
                        raise VerificationError(GitCode.TREE_TOO_LARGE, f"the tree is deeper than {MAX_DEPTH}", rel)
                    stack.append((e.oid, rel, depth + 1))

    def tree_inventory(self, tree: str, *, file_mode: int = 0o644, exec_mode: int = 0o755, dir_mode: int = 0o755) -> Inventory:
        """The closed inventory a faithful export of ``tree`` has, computed from objects alone.

        Raises:
            VerificationError: the codes of :meth:`walk` and :meth:`read_object`.
            InputError: ``NOT_FULL_SHA``.
            EnvironmentFailure: ``GIT_FAILED``.
        """
        entries: list[Entry] = []
        for rel, e in self.walk(tree):
            if e.is_tree:
                entries.append(Entry(rel, EntryType.DIR, dir_mode))
            else:
                _, data = self.read_object(e.oid, "blob", path=rel)
                mode = exec_mode if e.mode == MODE_EXEC else file_mode
                entries.append(Entry(rel, EntryType.FILE, mode, len(data), hashlib.sha256(data).hexdigest()))
        return Inventory.from_entries(entries)

    def export_tree(self, tree: str, dest: str | os.PathLike[str], *, file_mode: int = 0o644, exec_mode: int = 0o755, dir_mode: int = 0o755) -> int:
        """Write ``tree`` below the existing empty directory ``dest``; return the file count.

        Files are new inodes created with ``O_EXCL|O_NOFOLLOW`` through directory descriptors,
        so nothing already present (or planted) under ``dest`` is followed or overwritten.

        Raises:
            VerificationError: the codes of :meth:`walk` and :meth:`read_object`.
            InputError: ``NOT_FULL_SHA``.
            EnvironmentFailure: ``GIT_FAILED``.
            OSError: ``dest`` is not a directory, or an entry already exists below it
                (``FileExistsError``); nothing below ``dest`` is followed.
        """
        root = os.open(os.fspath(dest), O_DIR)
        fds: dict[str, int] = {"": root}
        files = 0
        try:
            for rel, e in self.walk(tree):
                parent, _, name = rel.rpartition("/")
                pfd = fds[parent]
                if e.is_tree:
                    os.mkdir(name, 0o700, dir_fd=pfd)
                    fds[rel] = os.open(name, O_DIR, dir_fd=pfd)
                    continue
                _, data = self.read_object(e.oid, "blob", path=rel)
                fd = os.open(name, O_NEW, 0o600, dir_fd=pfd)
                try:
                    write_all(fd, data)
                    os.fchmod(fd, exec_mode if e.mode == MODE_EXEC else file_mode)
                finally:
                    os.close(fd)
                files += 1
            # Directory modes last, so a read-only directory mode never blocks its own children.
            for rel, fd in fds.items():
                if rel:
                    os.fchmod(fd, dir_mode)
        finally:
            for fd in fds.values():
                os.close(fd)
        return files


def merge_bases(repo: GitRepo, a: str, b: str) -> tuple[str, ...]:
    """Every best common ancestor of two full-SHA commits (``git merge-base --all``), sorted.

    Raises:
        InputError: ``NOT_FULL_SHA`` for ``a`` or ``b``; ``NOT_A_REPOSITORY``.
        VerificationError: ``OBJECT_MISSING`` / ``WRONG_OBJECT_TYPE`` when ``a`` or ``b`` is
            not a commit here; ``SHALLOW_REPOSITORY``.
        EnvironmentFailure: ``GIT_FAILED`` when git merge-base cannot run or fails.
    """
    for rev in (a, b):
        resolve_full_sha(repo, rev)
    verify_not_shallow(repo)
    try:
        proc = subprocess.run([*_GIT_ARGS, f"--git-dir={repo.git_dir}", "merge-base", "--all", a, b],
                              capture_output=True, env=git_env(), cwd="/", timeout=120)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise EnvironmentFailure(GitCode.GIT_FAILED, f"cannot run git merge-base: {e}") from e
    if proc.returncode not in (0, 1) or (proc.returncode == 1 and proc.stdout.strip()):
        raise EnvironmentFailure(GitCode.GIT_FAILED, "git merge-base failed: " + proc.stderr.decode("utf-8", "replace")[-300:])
    bases = tuple(sorted(line for line in proc.stdout.decode("ascii", "replace").split() if line))
    for base in bases:
        verify_full_sha(base, repo.object_format, what="merge base")
    return bases


def unique_merge_base(repo: GitRepo, a: str, b: str) -> str:
    """The single best common ancestor, or a failure: zero or several fail closed.

    The review procedure needs exactly one (docs/git-ancestry.md "Best common ancestors").

    Raises:
        VerificationError: ``NO_MERGE_BASE``, ``MULTIPLE_MERGE_BASES``, and the codes of
            :func:`merge_bases`.
        InputError: ``NOT_FULL_SHA``; ``NOT_A_REPOSITORY``.
        EnvironmentFailure: ``GIT_FAILED``.
    """
    bases = merge_bases(repo, a, b)
    if not bases:
        raise VerificationError(GitCode.NO_MERGE_BASE, f"{a} and {b} have unrelated histories")
    if len(bases) > 1:
        raise VerificationError(GitCode.MULTIPLE_MERGE_BASES, f"{len(bases)} best merge bases: {', '.join(bases)}")
    return bases[0]


def verify_export(root: str | os.PathLike[str], repo: GitRepo, tree: str, **modes: int) -> Inventory:
    """Raise unless the tree at ``root`` is exactly ``tree`` (paths, types, modes, bytes).

    Raises:
        VerificationError: every difference the inventory diff reports (``MISSING``,
            ``EXTRA``, ``MODE_CHANGED``, ``DIGEST_MISMATCH``, ``SYMLINK``, ...), and the codes
            of :meth:`GitRepo.tree_inventory`.
        InputError: ``NOT_FULL_SHA``; the walker's input codes for an unreadable ``root``.
        EnvironmentFailure: ``GIT_FAILED``.
    """
    return verify_tree(root, repo.tree_inventory(tree, **modes))


def _run(args: list[str], where: str) -> bytes:
    try:
        proc = subprocess.run([*_GIT_ARGS, *args], capture_output=True, env=git_env(), cwd="/", timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise EnvironmentFailure(GitCode.GIT_FAILED, f"cannot run git: {e}") from e
    if proc.returncode != 0:
        msg = proc.stderr.decode("utf-8", "replace").strip()[:300]
        raise InputError(GitCode.NOT_A_REPOSITORY, f"git cannot open the repository: {msg}", where)
    return proc.stdout


def repository_locations(path: str | os.PathLike[str]) -> tuple[str, ...]:
    """Every directory whose contents are the repository at ``path``, as git resolves it.

    The path itself, git's own directory (found upwards or through a ``.git`` file), its common
    directory, every working tree (the main one and each linked one), and every object
    directory its alternates name, transitively: a file inside any of these is the
    repository's data.

    Raises:
        InputError: ``NOT_A_REPOSITORY`` when git cannot open ``path``.
        EnvironmentFailure: ``GIT_FAILED`` when git cannot be run.
    """
    where = os.path.abspath(os.fspath(path))
    out = [where]
    answer = _run(["-C", where, "rev-parse", "--path-format=absolute", "--absolute-git-dir", "--git-common-dir"], where)
    git_dir, common = [*answer.decode("utf-8", "replace").splitlines(), "", ""][:2]
    out += [git_dir, common]
    # Every working tree of the repository: the main one (also when GITDIR is a non-bare repository's
    # .git, where --show-toplevel fails) and each `git worktree add`.
    listing = _run(["-C", where, "worktree", "list", "--porcelain", "-z"], where).decode("utf-8", "replace")
    out += [field[len("worktree "):] for field in listing.split("\0") if field.startswith("worktree ")]
    # Every object directory the alternates name, transitively (git follows them up to 5 deep).
    pending, seen = [os.path.join(common, "objects")], set[str]()
    while pending and len(seen) < 64:
        objects = os.path.realpath(pending.pop())
        if objects in seen:
            continue
        seen.add(objects)
        out.append(objects)
        try:
            with open(os.path.join(objects, "info", "alternates"), encoding="utf-8", errors="replace") as f:
                for line in f:
                    line = line.strip()
                    if line and not line.startswith("#"):
                        pending.append(os.path.normpath(os.path.join(objects, line)))
        except (FileNotFoundError, NotADirectoryError):
            pass
    return tuple(dict.fromkeys(os.path.realpath(p) for p in out if p))


def verify_not_shallow(repo: GitRepo) -> None:
    """Raise ``SHALLOW_REPOSITORY`` for a shallow clone: its history ends where a local file says.

    Raises:
        VerificationError: ``SHALLOW_REPOSITORY``.
        InputError: ``NOT_A_REPOSITORY`` when git cannot answer for the repository.
        EnvironmentFailure: ``GIT_FAILED`` when git cannot be run.
    """
    out = _run([f"--git-dir={repo.git_dir}", "rev-parse", "--is-shallow-repository"], repo.git_dir).strip()
    if out != b"false":
        raise VerificationError(GitCode.SHALLOW_REPOSITORY, "the repository is shallow (its history is cut by a local "
                                "'shallow' file); history questions need a full clone (git fetch --unshallow)", repo.git_dir)


def resolve_full_sha(repo: GitRepo, rev: str) -> str:
    """``rev`` itself after checking it is a full id of this repository's format and a commit.

    Raises:
        InputError: ``NOT_FULL_SHA``.
        VerificationError: ``OBJECT_MISSING``, ``WRONG_OBJECT_TYPE``, ``OBJECT_HASH_MISMATCH``.
        EnvironmentFailure: ``GIT_FAILED``.
    """
    verify_full_sha(rev, repo.object_format, what="revision")
    repo.read_object(rev, "commit")
    return rev


__all__ = ["GitRepo", "git_env", "is_full_sha", "merge_bases", "resolve_full_sha", "unique_merge_base", "verify_export",
           "verify_not_shallow"]


def enclosing_work_tree(path: str | os.PathLike[str]) -> str | None:
    """The nearest directory at or above ``path`` (resolved) that holds a ``.git`` entry, else None.

    A pure look at the filesystem, no git run: a ``.git`` directory, file (a linked worktree or a
    submodule) or link all count, so a checkout of any kind is found. ``path`` need not exist: its
    nearest existing ancestor is where the search starts.
    """
    where = os.path.realpath(os.fspath(path))
    while not os.path.lexists(where) and os.path.dirname(where) != where:
        where = os.path.dirname(where)
    while True:
        if os.path.lexists(os.path.join(where, ".git")):
            return where
        parent = os.path.dirname(where)
        if parent == where:
            return None
        where = parent
