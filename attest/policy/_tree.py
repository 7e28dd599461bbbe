"""The repository root as ``policy check`` and ``generate`` touch it: through descriptors only.

Every read opens the root once (no symlink in any component of the root's own path,
:func:`~attest.inventory.open_root`), then each authority path component by component with
``O_NOFOLLOW`` relative to its parent's descriptor (``attest._safefs``), deciding from
``lstat`` and then ``fstat`` of the opened descriptor. What each component turned out to be
goes to :func:`check_authority_path`, the one judge. Nothing is read outside the root and
nothing is opened for writing by a read; ``generate``'s writes are temp file + ``fsync`` +
``renameat`` in the same directory, and never follow a link either.

    >>> with RepositoryRoot.open(".") as root:
    ...     data = root.read(".agent-policy.yml", PathRole.CONFIG, max_bytes=1 << 18)
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import TracebackType

from .._safefs import Kind, UnsafeEntry, classify, open_dir_at, open_regular_at, replace_at
from ..errors import CommonCode, Finding, InputError, VerificationError
from ..inventory import open_root
from ..inventory._codes import InventoryCode
from ._codes import PolicyCode
from ._paths import SKILL_DIR, PathRole, check_authority_path, namespace_key

MAX_SKILL_TREE_ENTRIES = 1024
MAX_SKILL_TREE_DEPTH = 16
MAX_DIR_ENTRIES = 65536
HEAD_BYTES = 4096   # what a marker check sees of a file that is only hashed


@dataclass(frozen=True, slots=True)
class FileDigest:
    """A file judged by its digest: SHA-256, size and its first :data:`HEAD_BYTES` bytes."""

    sha256: str
    size: int
    head: bytes


class ReadBudget:
    """The bytes ``check`` and ``generate`` may read in one run, all files together."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.left = total

    def take(self, path: str, n: int) -> None:
        if n > self.left:
            raise VerificationError(CommonCode.TOO_LARGE,
                                    f"the files the policy check reads exceed {self.total} bytes together", _shown(path))
        self.left -= n


def _shown(path: str) -> str:
    return path.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def verify_root_spelling(root: str) -> None:
    """Refuse a root spelled with ``.`` or ``..`` components (only ``.`` alone, the current directory, is taken).

    ``a/link/..`` is ``a`` after lexical normalization but the parent of the link's target to
    the kernel; the root is refused rather than normalized, so no link in its path is skipped.
    """
    if root == ".":
        return
    parts = root.split("/")
    if any(p in (".", "..") for p in parts):
        raise InputError(InventoryCode.BAD_ROOT, "the root has a '.' or '..' component; pass it without one", _shown(root))


def _relstat(parent_fd: int, name: str) -> Kind | None:
    try:
        return classify(os.stat(name, dir_fd=parent_fd, follow_symlinks=False))
    except FileNotFoundError:
        return None


def _unsafe_finding(path: str, kind: Kind | None) -> Finding:
    if kind is Kind.SYMLINK:
        return Finding(PolicyCode.PATH_SYMLINK, path, "a symbolic link on the way; it is never followed")
    return Finding(PolicyCode.PATH_NOT_REGULAR, path, f"not a plain directory or regular file: {kind.value if kind else 'gone'}")


class RepositoryRoot:
    """An open repository root; ``read``, ``list_skill_tree``, ``write`` and ``remove_if`` below it."""

    def __init__(self, path: str, fd: int) -> None:
        self.path = path
        self.fd = fd

    @classmethod
    def open(cls, root: str | os.PathLike[str]) -> RepositoryRoot:
        spelled = os.fspath(root)
        verify_root_spelling(spelled)
        path = os.path.abspath(spelled)   # only joins a relative root to the current directory now
        return cls(path, open_root(path))

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> RepositoryRoot:
        return self

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    @contextmanager
    def _parent(self, path: str, *, create: bool = False) -> Iterator[int]:
        """The descriptor of ``path``'s directory, walked without following a link (created if asked)."""
        opened: list[int] = []
        fd = self.fd
        try:
            for name in path.split("/")[:-1]:
                try:
                    nfd = open_dir_at(fd, name)
                except FileNotFoundError:
                    if not create:
                        raise
                    os.mkdir(name, 0o755, dir_fd=fd)
                    nfd = open_dir_at(fd, name)
                    os.fchmod(nfd, 0o755)  # the same mode whatever the umask
                except UnsafeEntry as e:
                    raise VerificationError(findings=[_unsafe_finding(path, e.kind or _relstat(fd, name) or Kind.SYMLINK)]) from e
                opened.append(nfd)
                fd = nfd
            yield fd
        finally:
            for nfd in opened:
                os.close(nfd)

    def _open_file(self, path: str, role: PathRole) -> tuple[int, os.stat_result] | Finding:
        """A descriptor of the regular file ``path`` and its ``fstat`` (the caller closes it), or why not."""
        problem = check_authority_path(path, role)
        if problem is not None:
            return problem
        parts = path.split("/")
        kinds: list[Kind | None] = []
        opened: list[int] = []
        fd = self.fd
        try:
            for depth, name in enumerate(parts):
                try:
                    kind: Kind | None = classify(os.stat(name, dir_fd=fd, follow_symlinks=False))
                except FileNotFoundError:
                    kind = None
                except OSError as e:
                    return Finding(CommonCode.UNREADABLE, path, f"cannot inspect {'/'.join(parts[: depth + 1])}: {e.strerror}")
                kinds.append(kind)
                if depth == len(parts) - 1:
                    if kind is Kind.FILE:
                        try:
                            return open_regular_at(fd, name)
                        except UnsafeEntry as e:
                            return _unsafe_finding(path, e.kind or Kind.SYMLINK)
                        except FileNotFoundError:
                            return Finding(PolicyCode.PATH_NOT_REGULAR, path, "vanished while it was opened")
                        except OSError as e:
                            return Finding(CommonCode.UNREADABLE, path, f"cannot open the file: {e.strerror}")
                    break
                if kind is not Kind.DIR:
                    break
                try:
                    fd = open_dir_at(fd, name)
                except UnsafeEntry as e:  # swapped since the lstat: judge what is there now
                    kinds[-1] = e.kind or _relstat(fd, name) or Kind.SYMLINK
                    break
                except FileNotFoundError:
                    kinds[-1] = None
                    break
                except OSError as e:
                    return Finding(CommonCode.UNREADABLE, path, f"cannot open {'/'.join(parts[: depth + 1])}: {e.strerror}")
                opened.append(fd)
        finally:
            for nfd in opened:
                os.close(nfd)
        verdict = check_authority_path(path, role, kinds)
        return verdict if verdict is not None else Finding(PolicyCode.PATH_NOT_REGULAR, path, "not a regular file")

    def _stream(self, path: str, role: PathRole, max_bytes: int, budget: ReadBudget | None, sink: Callable[[bytes], None]) -> int | Finding:
        """Feed the bytes of ``path`` to ``sink`` in chunks; the number of bytes, or why not."""
        opened = self._open_file(path, role)
        if isinstance(opened, Finding):
            return opened
        fd, st = opened
        try:
            if st.st_size > max_bytes:
                return Finding(CommonCode.TOO_LARGE, path, f"{st.st_size} bytes; the limit is {max_bytes}")
            if budget is not None:
                budget.take(path, st.st_size)
            total = 0
            while total <= max_bytes and (chunk := os.read(fd, min(1 << 20, max_bytes + 1 - total))):
                total += len(chunk)
                grown = total - max(st.st_size, total - len(chunk))   # bytes beyond the size fstat gave
                if budget is not None and grown > 0:
                    budget.take(path, grown)
                if total > max_bytes:
                    break
                sink(chunk)
            if total > max_bytes:
                return Finding(CommonCode.TOO_LARGE, path, f"grew past {max_bytes} bytes while it was read")
            return total
        except OSError as e:
            return Finding(CommonCode.UNREADABLE, path, f"cannot read the file: {e.strerror}")
        finally:
            os.close(fd)

    def read(self, path: str, role: PathRole, *, max_bytes: int, budget: ReadBudget | None = None) -> bytes | Finding:
        """The bytes of the regular file ``path``, or the Finding that says why there are none."""
        chunks: list[bytes] = []
        got = self._stream(path, role, max_bytes, budget, chunks.append)
        return got if isinstance(got, Finding) else b"".join(chunks)

    def digest(self, path: str, role: PathRole, *, max_bytes: int, budget: ReadBudget | None = None) -> FileDigest | Finding:
        """SHA-256, size and first bytes of the regular file ``path``, hashed as a stream (never held whole)."""
        h = hashlib.sha256()
        head = bytearray()

        def sink(chunk: bytes) -> None:
            h.update(chunk)
            if len(head) < HEAD_BYTES:
                head.extend(chunk[: HEAD_BYTES - len(head)])

        got = self._stream(path, role, max_bytes, budget, sink)
        return got if isinstance(got, Finding) else FileDigest(h.hexdigest(), got, bytes(head))

    def shadows(self, path: str, cache: dict[str, dict[str, list[str]]]) -> list[Finding]:
        """Sibling entries that are ``path``'s components on a case-folding or normalizing checkout.

        At every level from the root down to ``path`` itself, an entry whose
        :func:`namespace_key` equals the component's but whose name differs (``.AGENTS`` beside
        ``.agents``, ``docs/Review`` beside ``docs/review``) is a finding: on macOS or Windows it
        *is* that component, and which bytes win depends on checkout order. ``cache`` keeps each
        directory's listing (relative path -> key -> names) across calls.
        """
        found: list[Finding] = []
        parts = path.split("/")
        opened: list[int] = []
        fd = self.fd
        try:
            for depth, name in enumerate(parts):
                here = "/".join(parts[:depth])
                listing = cache.get(here)
                if listing is None:
                    listing = {}
                    with os.scandir(fd) as it:
                        for count, entry in enumerate(it):
                            if count >= MAX_DIR_ENTRIES:
                                return [Finding(CommonCode.TOO_LARGE, here or ".", f"more than {MAX_DIR_ENTRIES} entries in one directory")]
                            listing.setdefault(namespace_key(entry.name), []).append(entry.name)
                    cache[here] = listing
                for other in sorted(listing.get(namespace_key(name), ())):
                    if other != name:
                        shown = (f"{here}/{other}" if here else other).encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
                        found.append(Finding(PolicyCode.PATH_SHADOWED, shown,
                                             f"is {'/'.join(parts[: depth + 1])} on a case-insensitive or normalizing checkout"))
                if depth == len(parts) - 1 or name not in listing.get(namespace_key(name), ()):
                    break
                try:
                    fd = open_dir_at(fd, name)
                except OSError:
                    break  # not a plain directory: the read of the path itself reports it
                opened.append(fd)
        except OSError as e:
            found.append(Finding(CommonCode.UNREADABLE, path, f"cannot list a directory on the way: {e.strerror}"))
        finally:
            for nfd in opened:
                os.close(nfd)
        return found

    def list_skill_tree(self) -> tuple[list[tuple[str, Kind]], list[Finding]]:
        """Every entry below ``.agents/skills/pr-review/`` (the generator's closed tree), never following a link."""
        entries: list[tuple[str, Kind]] = []
        parts = SKILL_DIR.split("/")
        opened: list[int] = []
        # Depth first, one descriptor per level: (fd, relative path, names still to visit).
        stack: list[tuple[int, str, list[str]]] = []
        bad: list[Finding] = []
        try:
            fd = self.fd
            for depth, name in enumerate(parts):
                kind = _relstat(fd, name)
                if kind is None:
                    return [], []
                if kind is not Kind.DIR:
                    return [], [_unsafe_finding("/".join(parts[: depth + 1]), kind)]
                fd = open_dir_at(fd, name)
                opened.append(fd)
            stack.append((fd, SKILL_DIR, sorted(os.listdir(fd), reverse=True)))
            while stack:
                dfd, rel, pending = stack[-1]
                if not pending:
                    stack.pop()
                    if dfd not in opened:
                        os.close(dfd)
                    continue
                name = pending.pop()
                child = f"{rel}/{name}"
                try:
                    child.encode("utf-8")
                except UnicodeEncodeError:
                    # Not UTF-8: no authority path can name it, and no report may carry it raw.
                    shown = child.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
                    bad.append(Finding(PolicyCode.PATH_BAD_NAME, shown, "a name that is not valid UTF-8 in the generated Skill tree"))
                    continue
                kind = _relstat(dfd, name)
                if kind is None:
                    continue
                entries.append((child, kind))
                if len(entries) > MAX_SKILL_TREE_ENTRIES:
                    return entries, [*bad, Finding(CommonCode.TOO_LARGE, SKILL_DIR, f"more than {MAX_SKILL_TREE_ENTRIES} entries")]
                if kind is Kind.DIR:
                    if len(stack) >= MAX_SKILL_TREE_DEPTH:
                        return entries, [*bad, Finding(CommonCode.TOO_DEEP, child, f"deeper than {MAX_SKILL_TREE_DEPTH} levels")]
                    try:
                        cfd = open_dir_at(dfd, name)
                    except UnsafeEntry as e:
                        entries[-1] = (child, e.kind or Kind.SYMLINK)
                        continue
                    stack.append((cfd, child, sorted(os.listdir(cfd), reverse=True)))
            return entries, bad
        except OSError as e:
            return entries, [*bad, Finding(CommonCode.UNREADABLE, SKILL_DIR, f"cannot list the Skill tree: {e.strerror}")]
        finally:
            for dfd, _, _ in stack:
                if dfd not in opened:
                    os.close(dfd)
            for nfd in opened:
                os.close(nfd)

    def write(self, path: str, data: bytes) -> None:
        """Replace (or create) ``path`` atomically with ``data``, mode 0644; never through a link."""
        name = path.rsplit("/", 1)[-1]
        try:
            with self._parent(path, create=True) as dfd:
                replace_at(dfd, name, data, mode=0o644)
        except OSError as e:
            if isinstance(e, UnsafeEntry):
                raise VerificationError(findings=[_unsafe_finding(path, e.kind)]) from e
            raise InputError(CommonCode.BAD_OUTPUT_PATH, f"cannot write the generated file: {e.strerror}", path) from e

    def remove_if(self, path: str, role: PathRole, sha256: str, *, max_bytes: int) -> bool:
        """Unlink ``path`` if it is still a regular file whose bytes hash to ``sha256``; True if removed."""
        now = self.digest(path, role, max_bytes=max_bytes)
        if not isinstance(now, FileDigest) or now.sha256 != sha256:
            return False
        name = path.rsplit("/", 1)[-1]
        try:
            with self._parent(path) as dfd:
                if not stat.S_ISREG(os.stat(name, dir_fd=dfd, follow_symlinks=False).st_mode):
                    return False
                os.unlink(name, dir_fd=dfd)
                os.fsync(dfd)
        except OSError as e:
            raise InputError(CommonCode.BAD_OUTPUT_PATH, f"cannot remove the generated file: {e.strerror}", path) from e
        return True

    def remove_emptied_dirs(self, dirs: Iterable[str]) -> list[str]:
        """Remove those of ``dirs`` that are empty now, deepest first; a directory still holding anything stays.

        The caller passes only directories that held files it removed: an empty directory it
        did not empty is never removed here (``plan_generation`` reports it).
        """
        removed = []
        for rel in sorted(set(dirs), key=lambda p: (p.count("/"), p), reverse=True):
            name = rel.rsplit("/", 1)[-1]
            try:
                with self._parent(rel) as dfd:
                    fd = open_dir_at(dfd, name)
                    try:
                        empty = not os.listdir(fd)
                    finally:
                        os.close(fd)
                    if empty:  # only then: a read-only tree with nothing to remove is never written
                        os.rmdir(name, dir_fd=dfd)
                        removed.append(rel)
            except FileNotFoundError:
                continue
            except OSError as e:
                if e.errno != errno.ENOTEMPTY:
                    raise InputError(CommonCode.BAD_OUTPUT_PATH, f"cannot remove the directory: {e.strerror}", rel) from e
        return removed


__all__ = ["HEAD_BYTES", "MAX_DIR_ENTRIES", "FileDigest", "ReadBudget", "RepositoryRoot", "verify_root_spelling"]
