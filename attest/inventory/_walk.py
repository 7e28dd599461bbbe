"""The safe walker: inventory a tree without following links or trusting a path twice.

Rules (docs/inventory.md "How the walker reads a tree", names as in "Name policy `strict-v1`"),
against a hostile tree (links, special files, hard links, bad names), entries swapped while it is
walked, and a tree made to exhaust the walker:

1. The root is opened one component at a time from ``/`` with ``O_NOFOLLOW``, so a root that
   is, or passes through, a symlink or a ``/proc/*/fd`` magic link is refused.
2. Directories are walked through directory descriptors (``dir_fd``), never by path; a
   component swapped for a symlink mid-walk fails ``O_NOFOLLOW|O_DIRECTORY`` instead of being
   followed.
3. Every entry is classified from the listing before it is opened: from ``readdir``'s type
   and inode (``d_type``, ``d_ino``) when the directory's listing proved its inodes true (the
   ``lstat`` of its first file or directory has the listed inode), else from ``lstat``
   (``fstatat(AT_SYMLINK_NOFOLLOW)``) of its name with :func:`attest._safefs.classify`. Only
   an entry listed as a regular file or directory is opened, with the flags of
   :mod:`attest._safefs` (``O_NOFOLLOW|O_NONBLOCK``), and the decision is re-made from
   ``fstat`` of the descriptor, cross-checked against the listing (the listed inode on the
   directory's device and the listed type, or :func:`attest._safefs.drift` against the
   ``lstat``; an entry on another device, a mount point, is confirmed by its ``lstat``).
   FIFOs, sockets and devices are never opened unless swapped in after the listing (the
   flags keep that open from blocking and its ``fstat`` refuses it).
4. A file is hashed from its descriptor (:func:`._hash.hash_fd`); the byte count must equal
   ``st_size`` and the ``fstat`` before and after must agree, or the entry changed during
   the walk.
5. The walk is iterative (an explicit stack), so a deep tree meets the depth cap, not Python's
   recursion limit.

Who does the work, in which thread, is :mod:`._sched`'s; a tree that is not small is split
with a second process (:mod:`._fork`), which holds every rule above because it walks through
the descriptors it is given. This module is the work itself: listing a directory, and
classifying, opening and hashing the entries of one slice of it.

    >>> inv = inventory_tree("some/tree")          # raises VerificationError on any rejection
    >>> result = scan_tree("some/tree")            # never raises for entries; collects findings
"""

from __future__ import annotations

import errno
import os
import stat
import threading
from collections.abc import Callable, Sequence
from enum import Enum
from typing import TYPE_CHECKING, Final

from .._safefs import O_DIR, O_FILE, Drift, Kind, classify, drift, mount_id
from ..errors import Finding, InputError, VerificationError
from ._codes import InventoryCode
from ._fork import CAN_FORK, Child, SplitWalk, fork_walker
from ._fork import child_main as _child_main
from ._gc import GcPaused
from ._hash import changed, hash_fd
from ._ignore import compile_ignore
from ._model import Entry, EntryType, Inventory
from ._names import PATH_MAX, check_name, collision_key, display_name, is_plain, plain_names
from ._types import (
    BIG,
    DEFAULT_LIMITS,
    HANDOFF,
    LIST,
    LISTED_DIR,
    LISTED_FILE,
    LISTED_UNKNOWN,
    MAX_HANDOFFS,
    SLICE,
    SLICE_ITEM,
    WALK_THREADS,
    DirRef,
    Expected,
    Item,
    Limits,
    ListedName,
    ScanResult,
    SliceItem,
)

if TYPE_CHECKING:
    from pathspec import GitIgnoreSpec

Progress = Callable[[int, int], None]
Report = Callable[[InventoryCode, str, str], None]

_FILE = EntryType.FILE  # enum attribute access is slow in 3.11; this is per entry
_DIR = EntryType.DIR
_K_FILE = Kind.FILE
_K_DIR = Kind.DIR
_S_IMODE = stat.S_IMODE
_S_IFREG = stat.S_IFREG
_TYPE_AND_SPECIAL = stat.S_IFMT(0o177777) | stat.S_ISUID | stat.S_ISGID | stat.S_ISVTX
_NAME_CACHE_MAX = 1 << 16


class _Unlisted(Enum):
    """What ``open_unlisted`` answers besides an opened file or None."""

    NOT_TAKEN = "not the walk's: excluded, or gone or unreadable (reported)"
    OVER_BUDGET = "the walk's entry cap is reached (the walk is halted)"


class _Unseen(Enum):
    UNSEEN = 0


_UNSEEN: Final = _Unseen.UNSEEN  # not yet in the walk's name cache (an enum member, so `is` narrows it away)


def _name_of(entry: os.DirEntry[str]) -> str:
    return entry.name


def _listed_names(dfd: int, kept: list[os.DirEntry[str]], rels: list[str]) -> list[ListedName]:
    """The slice items of a checked listing: each name with what ``readdir`` said of it (``d_type``, ``d_ino``).

    The listing's inodes are trusted only when the first listed file or directory's ``lstat``
    has its inode (one ``lstat`` per directory): a filesystem whose ``d_ino`` is not the
    ``st_ino`` (some overlay or network filesystems), a listing that failed, or an entry
    swapped just then sends the whole directory down the ``lstat``-first path (LISTED_UNKNOWN).
    """
    if not _TRUST_LISTING:
        return [(e.name, rel, LISTED_UNKNOWN, 0) for e, rel in zip(kept, rels, strict=True)]
    try:
        kinds = [
            LISTED_FILE if e.is_file(follow_symlinks=False) else LISTED_DIR if e.is_dir(follow_symlinks=False) else LISTED_UNKNOWN
            for e in kept
        ]
        inodes = [e.inode() for e in kept]
    except OSError:  # d_type unknown and the entry's lstat failed: the slow path reports it
        return [(e.name, rel, LISTED_UNKNOWN, 0) for e, rel in zip(kept, rels, strict=True)]
    probe = next((i for i, k in enumerate(kinds) if k != LISTED_UNKNOWN), None)
    if probe is not None:
        try:
            trusted = os.stat(kept[probe].name, dir_fd=dfd, follow_symlinks=False).st_ino == inodes[probe]
        except OSError:
            trusted = False
        if not trusted:
            kinds = [LISTED_UNKNOWN] * len(kept)
    return list(zip([e.name for e in kept], rels, kinds, inodes, strict=True))


_NEVER = 1 << 63  # no file is this large: no hand-off without a second worker
# Two processes (see ._fork): the calling process walks this many entries alone first; a
# tree it finishes by then is never split. 2,500 rather than 500: the project's own
# runtime image (about 2,000 entries, verified several times in every review run) took 78 ms
# walked in one process against 90 ms split (alternated, 21 rounds, medians); a 21,000-entry
# tree 1.26 s against 1.23 s.
_FORK_AFTER = 2500
# Whether an entry the listing gives as a regular file or a directory is opened without an
# lstat first (see _listed_names). The tests turn it off to walk the lstat-first path alone.
_TRUST_LISTING = True


def open_root(root: str | os.PathLike[str]) -> int:
    """Open ``root`` as a directory, refusing symlinks in every component (rule 1).

    Raises:
        InputError: ``BAD_ROOT`` (a component is missing, not a directory, or cannot be
            opened).
        VerificationError: ``ROOT_SYMLINK`` (a component is a symlink, or the path is under
            ``/proc``).
    """
    path = os.path.abspath(os.fspath(root))
    parts = [p for p in path.split("/") if p]
    if parts[:1] == ["proc"]:
        raise VerificationError(InventoryCode.ROOT_SYMLINK, "a /proc path is a magic link, not a tree", path)
    fd = os.open("/", O_DIR)
    walked = ""
    try:
        for part in parts:
            walked += "/" + part
            try:
                # Not open_dir_at: an ancestor such as /tmp may carry the sticky bit.
                nfd = os.open(part, O_DIR, dir_fd=fd)
            except OSError as e:
                try:
                    st = os.lstat(part, dir_fd=fd)
                except OSError:
                    st = None
                if st is not None and stat.S_ISLNK(st.st_mode):
                    raise VerificationError(
                        InventoryCode.ROOT_SYMLINK,
                        f"{walked} is a symbolic link; pass the real directory {os.path.realpath(walked)!r}",
                        path,
                    ) from e
                if e.errno == errno.ENOENT:
                    raise InputError(InventoryCode.BAD_ROOT, f"{walked} does not exist", path) from e
                if e.errno == errno.ENOTDIR:
                    raise InputError(InventoryCode.BAD_ROOT, f"{walked} is not a directory", path) from e
                raise InputError(InventoryCode.BAD_ROOT, f"cannot open {walked}: {e.strerror}", path) from e
            os.close(fd)
            fd = nfd
        return fd
    except BaseException:
        os.close(fd)
        raise


class _Walk(SplitWalk):
    """One walk: the scheduler's work items, carried out under the rules of the module docstring."""

    def __init__(
        self, spec: GitIgnoreSpec | None, limits: Limits, result: ScanResult, workers: int, want: Expected | None = None
    ) -> None:
        super().__init__(workers)
        self.spec = spec
        self.limits = limits
        self.entries = result.entries
        self.findings = result.findings
        self.matched = result.matched
        self.want = want
        self.names: dict[str, tuple[InventoryCode, str] | None] = {}

    def record_file(self, rel: str, mode: int, size: int, digest: str) -> None:
        """Record a hashed file: matched when it is exactly the expected one, else an entry."""
        if self.want is not None and self.want.get(rel) == (mode, size, digest):
            self.matched.append(rel)
        else:
            self.entries.append(Entry(rel, _FILE, mode, size, digest))

    def record_dir(self, rel: str, mode: int) -> None:
        if self.want is not None and self.want.get(rel) == mode:
            self.matched.append(rel)
        else:
            self.entries.append(Entry(rel, _DIR, mode))

    def report(self, code: InventoryCode, path: str, detail: str) -> None:
        with self.cond:
            if len(self.findings) < self.limits.max_findings:
                self.findings.append(Finding(code, path, detail))

    def do(self, item: Item, buf: bytearray, stats: list[int]) -> None:
        try:
            if item[0] == SLICE_ITEM:
                self.slice(item[1], item[2], item[3], item[4], buf, stats)
            elif item[0] == LIST:
                self.listing(item[1], item[2], item[3])
            else:
                try:
                    self.hash_file(item[1], item[2], item[3], buf, stats)
                finally:
                    os.close(item[1])
        finally:
            self.finish(item)

    def listing(self, d: DirRef, prefix: str, depth: int) -> None:
        try:
            before = os.fstat(d.fd)
            with os.scandir(d.fd) as it:
                listed = sorted(it, key=_name_of)
            after = os.fstat(d.fd)
        except OSError as e:
            self.report(InventoryCode.UNREADABLE_ENTRY, prefix or ".", f"cannot list directory: {e.strerror}")
            return
        if after.st_mtime_ns != before.st_mtime_ns or after.st_ctime_ns != before.st_ctime_ns:
            # readdir over several calls may miss an entry renamed meanwhile (or list it twice):
            # a file kept moving would never be seen. A change inside moves the directory's times.
            self.report(InventoryCode.CHANGED_DURING_WALK, prefix or ".", "the directory changed while it was listed")
        if not listed:
            return
        names = [e.name for e in listed]
        pre = f"{prefix}/" if prefix else ""
        # The prefix's length in bytes (a plain name is one byte a character; a prefix of
        # non-ASCII names is not): characters would let a path over PATH_MAX bytes through.
        pre_bytes = len(pre) if pre.isascii() else len(pre.encode("utf-8"))
        if plain_names(names) and pre_bytes + max(map(len, names)) <= PATH_MAX:
            # The common listing: every name plain ASCII, no two colliding, no path too long.
            kept = listed
            rels = [pre + name for name in names] if pre else names
        else:
            kept, rels = self.checked_names(listed, prefix)
            if not kept:
                return
        items = _listed_names(d.fd, kept, rels)
        slices: list[SliceItem] = [(SLICE_ITEM, d, prefix, depth, items[i : i + SLICE]) for i in range(0, len(items), SLICE)]
        with self.cond:
            d.refs += len(slices)
        # Pushed in reverse so the LIFO queue takes them in name order.
        self.push(slices[::-1])

    def checked_names(self, listed: list[os.DirEntry[str]], prefix: str) -> tuple[list[os.DirEntry[str]], list[str]]:
        """The entries of a listing whose names pass one by one (each refusal a finding), and their paths."""
        cache = self.names
        cached = cache.get
        seen: dict[str, str] = {}
        kept: list[os.DirEntry[str]] = []
        rels: list[str] = []
        for entry in listed:
            name = entry.name
            # _names.entry_path, inlined.
            rel = name if name.isascii() else display_name(name)
            if prefix:
                rel = f"{prefix}/{rel}"
            problem = cached(name, _UNSEEN)
            if problem is _UNSEEN:
                # check_name's verdict, without its byte-by-byte scan, for the common name.
                problem = None if is_plain(name) else check_name(name)
                if len(cache) < _NAME_CACHE_MAX:
                    cache[name] = problem
            if problem is not None:
                self.report(problem[0], rel, problem[1])
                continue
            key = collision_key(name)
            if key in seen:
                self.report(
                    InventoryCode.NAME_COLLISION,
                    rel,
                    f"equal to the sibling {seen[key]!r} under case folding or Unicode normalization",
                )
                continue
            seen[key] = name
            # UTF-8 takes at most 4 bytes a code point: only long paths need encoding.
            if len(rel) * 4 > PATH_MAX and len(rel.encode("utf-8")) > PATH_MAX:
                self.report(InventoryCode.PATH_TOO_LONG, rel[:200] + "...", f"the path is longer than {PATH_MAX} bytes")
                continue
            kept.append(entry)
            rels.append(rel)
        return kept, rels

    def slice(self, d: DirRef, prefix: str, depth: int, items: list[ListedName], buf: bytearray, stats: list[int]) -> None:
        """Walk one slice of a listing: enter each directory, open and hash each file, refuse the rest (rule 3)."""
        dfd = d.fd
        dev = d.dev
        spec = self.spec
        max_size = self.limits.max_file_size
        report = self.report
        open_ = os.open
        fstat = os.fstat
        close = os.close
        counter = self.counter
        handoff = HANDOFF if self.workers > 1 else _NEVER
        append = self.entries.append
        want = self.want.get if self.want is not None else None
        matched = self.matched.append
        nfiles = nbytes = 0
        budget = self.limits.max_entries - self.peer_count()  # the whole walk's cap, over both processes
        taken = 0
        for name, rel, kind, ino in items:
            if self.halted:
                break
            if kind == LISTED_DIR:
                if spec is not None and spec.match_file(rel + "/"):
                    continue
                taken += 1
                if next(counter) > budget:
                    self.too_many(rel)
                    break
                self.enter_listed(d, name, ino, rel, depth + 1)
                continue
            if kind != LISTED_FILE:
                opened = self.open_unlisted(dfd, name, rel, depth, budget)
                if opened is _Unlisted.NOT_TAKEN:
                    continue
                taken += 1
                if opened is _Unlisted.OVER_BUDGET:
                    break
                if opened is None:
                    continue
                fd, fst = opened
            else:
                # Listed as a regular file: opened without an lstat first, and confirmed from
                # fstat against the listed inode (rule 3).
                if spec is not None and spec.match_file(rel):
                    continue
                taken += 1
                if next(counter) > budget:
                    self.too_many(rel)
                    break
                try:
                    fd = open_(name, O_FILE, dir_fd=dfd)
                except OSError as e:
                    _report_open_error(e, rel, report)
                    continue
                try:
                    fst = fstat(fd)
                except OSError as e:
                    close(fd)
                    report(InventoryCode.UNREADABLE_ENTRY, rel, f"cannot stat: {e.strerror}")
                    continue
                # classify(fst) is Kind.FILE, inlined: a regular file, no special bits, one link.
                if (
                    fst.st_ino != ino or fst.st_dev != dev or fst.st_mode & _TYPE_AND_SPECIAL != _S_IFREG or fst.st_nlink > 1
                ) and not self.confirm(dfd, name, fd, fst, _K_FILE, ino, dev, rel):
                    close(fd)
                    continue
                if fst.st_size > max_size:
                    close(fd)
                    report(InventoryCode.FILE_TOO_LARGE, rel, f"the file is {fst.st_size} bytes; the limit is {max_size}")
                    continue
            size = fst.st_size
            if size >= handoff and self.handoffs < MAX_HANDOFFS:
                self.push([(BIG, fd, rel, fst)])
                continue
            try:  # hash_file, inlined: most files of a tree are small and this is per file
                digest, got = hash_fd(fd, size, buf)
                after = fstat(fd)
            except OSError as e:
                report(InventoryCode.UNREADABLE_ENTRY, rel, f"cannot read: {e.strerror}")
                continue
            finally:
                close(fd)
            if (got != size or after.st_ino != fst.st_ino or after.st_dev != fst.st_dev or after.st_size != size
                    or after.st_mtime_ns != fst.st_mtime_ns or after.st_ctime_ns != fst.st_ctime_ns):
                report(InventoryCode.CHANGED_DURING_WALK, rel, "the file changed while it was hashed")
                continue
            mode = _S_IMODE(fst.st_mode)
            if want is not None and want(rel) == (mode, got, digest):
                matched(rel)
            else:
                append(Entry(rel, _FILE, mode, got, digest))
            nfiles += 1
            nbytes += got
        stats[0] += nfiles
        stats[1] += nbytes
        self.count(taken)

    def too_many(self, rel: str) -> None:
        """Refuse the walk at ``rel``: the tree has more entries than the cap (both processes counted)."""
        self.report(InventoryCode.TOO_MANY_ENTRIES, rel, f"the tree has more than {self.limits.max_entries} entries")
        self.halt()

    def open_unlisted(
        self, dfd: int, name: str, rel: str, depth: int, budget: int
    ) -> tuple[int, os.stat_result] | _Unlisted | None:
        """An entry the listing did not classify (no ``d_type``, a symlink, a special file), decided from its ``lstat``.

        ``NOT_TAKEN`` when it is not the walk's (excluded, or gone or unreadable: reported);
        ``OVER_BUDGET`` when the walk's entry cap is reached (the walk is halted); None for a
        directory (entered) or a refused entry (reported); ``(fd, fstat)`` for a regular file,
        opened and checked against the ``lstat``.
        """
        report = self.report
        try:
            st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
        except FileNotFoundError:
            report(InventoryCode.CHANGED_DURING_WALK, rel, "the entry vanished while the tree was walked")
            return _Unlisted.NOT_TAKEN
        except OSError as e:
            report(InventoryCode.UNREADABLE_ENTRY, rel, f"cannot stat: {e.strerror}")
            return _Unlisted.NOT_TAKEN
        if self.spec is not None and self.spec.match_file(rel + "/" if stat.S_ISDIR(st.st_mode) else rel):
            return _Unlisted.NOT_TAKEN
        if next(self.counter) > budget:
            self.too_many(rel)
            return _Unlisted.OVER_BUDGET
        listed_kind = classify(st)
        if listed_kind is _K_DIR:
            self.enter(dfd, name, st, rel, depth + 1)
            return None
        if listed_kind is not _K_FILE:
            _report_kind(listed_kind, st, rel, report)
            return None
        max_size = self.limits.max_file_size
        if st.st_size > max_size:
            report(InventoryCode.FILE_TOO_LARGE, rel, f"the file is {st.st_size} bytes; the limit is {max_size}")
            return None
        opened = _open_checked(dfd, name, O_FILE, st, rel, report)
        if opened is not None and opened[1].st_size > max_size:
            os.close(opened[0])
            report(InventoryCode.FILE_TOO_LARGE, rel, f"the file grew past {max_size} bytes")
            return None
        return opened

    def confirm(
        self, dfd: int, name: str, fd: int, opened: os.stat_result, want: Kind, ino: int, dev: int, rel: str
    ) -> bool:
        """Whether an entry opened as listed (``want``, inode ``ino`` on device ``dev``) is that entry, and admissible.

        The slow path of a listed entry whose ``fstat`` did not match the listing at a glance:
        on another device or another mount (a mount point: the listing gives the inode it
        covers; a bind mount of the same filesystem keeps the device) the name's ``lstat``
        decides as for an unlisted entry; another inode is a swap (rule 3); the same inode
        with another verdict (a second link, setuid, setgid or sticky bits) is refused as it
        would have been from an ``lstat``. Every refusal is reported. ``fd`` is the opened
        descriptor, whose ``fstat`` is ``opened``.
        """
        report = self.report
        if opened.st_dev != dev or (opened.st_ino != ino and _other_mount(fd, dfd)):
            try:
                listed = os.stat(name, dir_fd=dfd, follow_symlinks=False)
            except FileNotFoundError:
                report(InventoryCode.CHANGED_DURING_WALK, rel, "the entry vanished while the tree was walked")
                return False
            except OSError as e:
                report(InventoryCode.UNREADABLE_ENTRY, rel, f"cannot stat: {e.strerror}")
                return False
            moved = drift(listed, opened)
            if moved is not None:
                _report_drift(moved, opened, rel, report)
                return False
        elif opened.st_ino != ino:
            same_type = stat.S_IFMT(opened.st_mode) == (stat.S_IFDIR if want is _K_DIR else stat.S_IFREG)
            _report_drift(Drift.REPLACED if same_type else Drift.TYPE, opened, rel, report)
            return False
        kind = classify(opened)
        if kind is want:
            return True
        if kind is _K_DIR or kind is _K_FILE:
            _report_drift(Drift.TYPE, opened, rel, report)
        else:
            _report_kind(kind, opened, rel, report)
        return False

    def enter_listed(self, d: DirRef, name: str, ino: int, rel: str, depth: int) -> None:
        """Open the directory ``name`` listed with inode ``ino`` (rule 3), record it, and queue its listing at ``depth``."""
        if depth > self.limits.max_depth:
            self.report(InventoryCode.DEPTH_EXCEEDED, rel, f"the tree is deeper than {self.limits.max_depth} levels")
            return
        try:
            child = os.open(name, O_DIR, dir_fd=d.fd)
        except OSError as e:
            _report_open_error(e, rel, self.report, d.fd, name)
            return
        try:
            cst = os.fstat(child)
        except OSError as e:
            os.close(child)
            self.report(InventoryCode.UNREADABLE_ENTRY, rel, f"cannot stat: {e.strerror}")
            return
        if (cst.st_ino != ino or cst.st_dev != d.dev or classify(cst) is not _K_DIR) and not self.confirm(
            d.fd, name, child, cst, _K_DIR, ino, d.dev, rel
        ):
            os.close(child)
            return
        self.record_dir(rel, _S_IMODE(cst.st_mode))
        self.push([(LIST, DirRef(child, cst.st_dev), rel, depth)])

    def enter(self, dfd: int, name: str, st: os.stat_result, rel: str, depth: int) -> None:
        """Open the directory ``name`` listed with ``st`` (rule 3), record it, and queue its listing at ``depth``."""
        if depth > self.limits.max_depth:
            self.report(InventoryCode.DEPTH_EXCEEDED, rel, f"the tree is deeper than {self.limits.max_depth} levels")
            return
        opened = _open_checked(dfd, name, O_DIR, st, rel, self.report)
        if opened is None:
            return
        child, cst = opened
        self.record_dir(rel, _S_IMODE(cst.st_mode))
        self.push([(LIST, DirRef(child, cst.st_dev), rel, depth)])

    def hash_file(self, fd: int, rel: str, before: os.stat_result, buf: bytearray, stats: list[int]) -> None:
        """Hash an opened regular file (rule 4) and record it; ``fd`` stays open."""
        size = before.st_size
        try:
            digest, got = hash_fd(fd, size, buf)
            after = os.fstat(fd)
        except OSError as e:
            self.report(InventoryCode.UNREADABLE_ENTRY, rel, f"cannot read: {e.strerror}")
            return
        if got != size or changed(before, after):
            self.report(InventoryCode.CHANGED_DURING_WALK, rel, "the file changed while it was hashed")
            return
        self.record_file(rel, _S_IMODE(before.st_mode), got, digest)
        stats[0] += 1
        stats[1] += got


def scan_tree(
    root: str | os.PathLike[str],
    *,
    ignore: Sequence[str] = (),
    limits: Limits = DEFAULT_LIMITS,
    progress: Progress | None = None,
    workers: int = 2,
) -> ScanResult:
    """Walk ``root`` and return every admissible entry and every finding.

    Everything below the root becomes a finding so a check can report all of them.
    ``workers`` threads share the walk; with ``workers <= 1`` and no ``progress`` it runs
    in the calling thread.

    Raises:
        InputError: ``BAD_ROOT`` and ``BAD_IGNORE``, for the root and the patterns only.
        VerificationError: ``ROOT_SYMLINK``, for the root only.
        EnvironmentFailure: ``INTERNAL`` when the second walking process fails or answers
            malformed.
    """
    with GcPaused():
        return _scan(root, ignore, limits, progress, workers)


def scan_against(
    root: str | os.PathLike[str],
    expected: Inventory,
    *,
    exact: bool = False,
    limits: Limits = DEFAULT_LIMITS,
    progress: Progress | None = None,
    workers: int = 2,
) -> ScanResult:
    """:func:`scan_tree` of ``root`` for a comparison with ``expected`` (its ignore patterns, none with ``exact``).

    Each entry the walk finds exactly as ``expected`` lists it (type, mode, and a file's size
    and SHA-256) is recorded by its path alone in :attr:`ScanResult.matched`; only the others
    are in ``entries``. Every rule of the walk holds as for :func:`scan_tree`.

    Raises:
        As :func:`scan_tree`.
    """
    want: Expected = {}
    for e in expected.entries:
        want[e.path] = e.mode if e.type is _DIR else (e.mode, e.size or 0, e.sha256 or "")
    with GcPaused():
        return _scan(root, () if exact else expected.ignore, limits, progress, workers, want)


def _scan(
    root: str | os.PathLike[str],
    ignore: Sequence[str],
    limits: Limits,
    progress: Progress | None,
    workers: int,
    want: Expected | None = None,
) -> ScanResult:
    spec = compile_ignore(tuple(ignore))
    result = ScanResult(ignore=tuple(ignore))
    root_fd = open_root(root)
    walk = _Walk(spec, limits, result, max(1, workers), want)
    try:
        root_dev = os.fstat(root_fd).st_dev
    except BaseException:
        os.close(root_fd)
        raise
    walk.push([(LIST, DirRef(root_fd, root_dev), "", 0)])
    child: Child | None = None
    try:
        if workers <= 1 and progress is None:
            walk.run()
        else:
            # Split the walk with a second process when the tree is not small: per-entry
            # Python work runs on one core per process (see ._fork). Only on Linux
            # (descriptor passing, SOCK_SEQPACKET, fork), and before this walk starts a
            # thread; a tree finished within _FORK_AFTER entries is walked in this process.
            if workers > 1 and CAN_FORK and walk.prewalk(_FORK_AFTER):
                child = fork_walker(walk, _child_main)
            threads = [
                threading.Thread(target=walk.run, args=(i < WALK_THREADS,), name=f"attest-walk-{i}", daemon=True)
                for i in range(max(1, workers))
            ]
            for t in threads:
                t.start()
            try:
                for t in threads:
                    while t.is_alive():
                        t.join(0.2 if progress is not None else None)
                        if progress is not None:
                            progress(*walk.done())
            except BaseException:
                if child is not None:
                    child.kill()  # also ends a wait for its answer on the link
                walk.halt()
                for t in threads:
                    t.join()
                raise
        if child is not None:
            if walk.error is not None:
                child.kill()
            else:
                child.merge(walk, result)
    finally:
        if child is not None:
            child.kill()
        walk.drain()
    if walk.error is not None:
        raise walk.error
    if progress is not None:
        progress(*walk.done())
    return result


def _other_mount(fd: int, dfd: int) -> bool:
    """Whether ``fd`` is on another mount than its directory ``dfd``: a mount point, maybe of the same filesystem.

    Asked only when an opened entry's inode is not the listed one on the listing's device (the
    listing gives the inode a mount point covers); unknown is no, and the entry then stays a
    swap (refused).
    """
    mine, parent = mount_id(fd), mount_id(dfd)
    return mine is not None and parent is not None and mine != parent


# -- what a finding says ----------------------------------------------------------------------


def _kind(fmt: int) -> str:
    return {
        stat.S_IFIFO: "a FIFO",
        stat.S_IFSOCK: "a socket",
        stat.S_IFCHR: "a character device",
        stat.S_IFBLK: "a block device",
    }.get(fmt, "a special file")


def _report_kind(kind: Kind, st: os.stat_result, rel: str, report: Report) -> None:
    """The finding for a listed entry that :func:`classify` did not find a plain file or directory."""
    if kind is Kind.SYMLINK:
        report(InventoryCode.SYMLINK, rel, "symbolic links are not allowed in a closed tree (to leave it out, give an ignore "
               "pattern for its path, e.g. `--ignore PATH`; the inventory records the pattern)")
    elif kind is Kind.SPECIAL:
        report(InventoryCode.SPECIAL_FILE, rel, f"{_kind(stat.S_IFMT(st.st_mode))} is not allowed in a closed tree")
    elif kind is Kind.SPECIAL_MODE:
        report(InventoryCode.SPECIAL_MODE, rel, f"mode {_S_IMODE(st.st_mode):04o} has setuid, setgid or sticky bits")
    else:
        report(InventoryCode.HARDLINK, rel, f"the file has {st.st_nlink} links (another name shares its inode)")


def _report_open_error(e: OSError, rel: str, report: Report, dfd: int | None = None, name: str = "") -> None:
    """The finding for an entry whose open failed; ``dfd`` and ``name`` for a directory's open.

    ``O_DIRECTORY|O_NOFOLLOW`` fails with ``ENOTDIR`` for a symlink and for a FIFO or a file
    alike: the name's ``lstat`` then tells which it became (a FIFO is SPECIAL_FILE, a file
    CHANGED_DURING_WALK), so the code is never SYMLINK for an entry that never was one.
    """
    if e.errno == errno.ENOTDIR and dfd is not None:
        try:
            now = os.stat(name, dir_fd=dfd, follow_symlinks=False)
        except FileNotFoundError:
            report(InventoryCode.CHANGED_DURING_WALK, rel, "the entry vanished while the tree was walked")
            return
        except OSError:
            now = None
        if now is not None:
            _report_drift(Drift.TYPE, now, rel, report)
            return
    if e.errno in (errno.ELOOP, errno.ENOTDIR):
        report(InventoryCode.SYMLINK, rel, "the entry was replaced by a symbolic link while the tree was walked")
    elif e.errno == errno.ENOENT:
        report(InventoryCode.CHANGED_DURING_WALK, rel, "the entry vanished while the tree was walked")
    else:
        report(InventoryCode.UNREADABLE_ENTRY, rel, f"cannot open: {e.strerror}")


def _report_drift(moved: Drift, st: os.stat_result, rel: str, report: Report) -> None:
    """The finding for an opened entry (``fstat`` ``st``) that :func:`drift` found not to be the listed one."""
    if moved is Drift.TYPE:
        kind = classify(st)
        if kind is Kind.SYMLINK:
            report(InventoryCode.SYMLINK, rel, "the entry became a symbolic link while the tree was walked")
        elif kind is Kind.SPECIAL:
            report(InventoryCode.SPECIAL_FILE, rel, f"the entry became {_kind(stat.S_IFMT(st.st_mode))} while the tree was walked")
        else:
            report(InventoryCode.CHANGED_DURING_WALK, rel, "the entry changed type while the tree was walked")
    elif moved is Drift.REPLACED:
        report(InventoryCode.CHANGED_DURING_WALK, rel, "the entry was replaced while the tree was walked")
    elif moved is Drift.MODE:
        report(InventoryCode.SPECIAL_MODE, rel, "the entry gained setuid, setgid or sticky bits while the tree was walked")
    else:
        report(InventoryCode.HARDLINK, rel, "the file gained a second link while the tree was walked")


def _open_checked(
    dfd: int,
    name: str,
    flags: int,
    listed: os.stat_result,
    rel: str,
    report: Report,
) -> tuple[int, os.stat_result] | None:
    """Open ``name`` under ``dfd`` and confirm it is still the inode that was listed (rule 3).

    Returns the descriptor and its ``fstat``, from which every later decision is made.
    (``_safefs.open_listed_at`` with the walker's findings instead of exceptions; the
    walker passes ``_safefs.O_DIR``, the race tests their own flags.)
    """
    try:
        fd = os.open(name, flags, dir_fd=dfd)
    except OSError as e:
        _report_open_error(e, rel, report, dfd, name)
        return None
    try:
        st = os.fstat(fd)
    except OSError as e:
        os.close(fd)
        report(InventoryCode.UNREADABLE_ENTRY, rel, f"cannot stat: {e.strerror}")
        return None
    moved = drift(listed, st)
    if moved is not None:
        os.close(fd)
        _report_drift(moved, st, rel, report)
        return None
    return fd, st


def inventory_tree(
    root: str | os.PathLike[str],
    *,
    ignore: Sequence[str] = (),
    limits: Limits = DEFAULT_LIMITS,
    progress: Progress | None = None,
) -> Inventory:
    """The closed inventory of ``root``.

    Raises:
        InputError: ``BAD_ROOT``, ``BAD_IGNORE``.
        VerificationError: with every finding of the walk (``SYMLINK``, ``HARDLINK``,
            ``SPECIAL_FILE``, ``SPECIAL_MODE``, ``BAD_NAME``, ``TOO_MANY_ENTRIES``, ...), or
            ``ROOT_SYMLINK``.
        EnvironmentFailure: ``INTERNAL`` when the second walking process fails.
    """
    with GcPaused():
        result = scan_tree(root, ignore=ignore, limits=limits, progress=progress)
        if result.findings:
            raise VerificationError(findings=sorted(result.findings, key=lambda f: (f.path or "", f.code)))
        return result.inventory()
