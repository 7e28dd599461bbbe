"""Private materialization: copy exactly the attested entries of a source into fresh inodes.

Rules (DESIGN.md "Freeze and store", THREATS.md A and B):

1. The source is walked like the inventory walker walks a tree: root opened component by
   component without following links, directories through descriptors, every entry judged by
   :func:`attest._safefs.classify` and opened with :func:`attest._safefs.open_listed_at`
   (decided from ``fstat`` of the opened descriptor, cross-checked against its listing). Symlinks,
   special files, hard-linked files and setuid/setgid/sticky modes are refused with the
   inventory's codes; entries the attested inventory does not list are ``EXTRA``, listed
   entries the source lacks are ``MISSING``. Only listed entries are copied.
2. Every file becomes a new inode created ``O_CREAT|O_EXCL|O_NOFOLLOW`` under the staging
   directory's descriptor; bytes move with ``copy_file_range`` (``sendfile`` where the
   destination filesystem could turn that into a reflink, which would share extents with a
   mutable source). Never a hard link. At most the attested size is copied.
3. Modes are the attested ones (minus the backend's mask), set on the new inode; then the
   backend seals the inode and its inode number and change time are recorded.
4. Directories are sealed after everything inside them (post-order), the root last.
5. Sealing is one pass behind copying: the staging directory is private (0700, created by
   us) until it is sealed, so nothing else can reach a copied inode before its seal. A
   sealing thread takes each directory once all its files are copied, reopens every file by
   name under the staging directory's descriptor (checking it is the inode we created), seals
   it, then seals the directory. For a backend whose seal writes the file back (ext4 sets
   the immutable flag only after ``filemap_write_and_wait``), each copy lane starts the
   writeback right after copying (``sync_file_range(SYNC_FILE_RANGE_WRITE)``, which does not
   wait), so the sealing pass finds the pages already on their way to disk instead of
   writing and waiting one file at a time. :func:`materialize` returns only after every
   entry is sealed.

The bytes copied here decide nothing: the caller verifies the sealed copy afterwards.

The steps, in :class:`_Materializer`: :meth:`~_Materializer.run` walks the source (rule 1);
:meth:`~_Materializer.visit` judges one listed entry; :meth:`~_Materializer.enter_dir` opens a
source directory and creates its staging twin; :meth:`~_Materializer.copy_file` is one copy
job (rules 1-3); :meth:`~_Materializer.finish` collects a directory's jobs in post-order and
hands it to :meth:`~_Materializer.sealer`, the sealing thread (rules 4-5).

    >>> findings, sealed = materialize("src", attested_inventory, staging_fd, backend)
"""

from __future__ import annotations

import ctypes
import errno
import os
import queue
import stat
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from .._safefs import O_DIR, O_NEW, Drift, Kind, UnsafeEntry, classify, open_listed_at, open_regular_at
from ..errors import EnvironmentFailure, Finding
from ..inventory import Entry, EntryType, Inventory, InventoryCode, open_root
from ..inventory._ignore import compile_ignore
from ..inventory._names import display_name
from ._backends import Backend
from ._codes import FreezeCode
from ._image import Sealed, snapshot

_SYNC_FILE_RANGE_WRITE = 2
# Python 3.11 has no os.sync_file_range: call the C library's (it releases the GIL).
try:
    _sync_file_range: Any = ctypes.CDLL(None, use_errno=True).sync_file_range
    _sync_file_range.argtypes = (ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint)
    _sync_file_range.restype = ctypes.c_int
except (OSError, AttributeError):  # no wrapper: the seal writes back by itself, only later
    _sync_file_range = None
# Filesystems whose copy_file_range never shares extents (no reflink support).
_NO_REFLINK = frozenset({"ext2", "ext3", "ext4", "tmpfs", "ramfs"})

Progress = Callable[[int, int], None]


def start_writeback(fd: int) -> None:
    """Start writing ``fd``'s dirty pages back without waiting (a hint: failure is harmless).

    Whether the bytes reach the disk is not what any check relies on; it only makes the
    later seal (which waits for the writeback on ext4) find less to do.
    """
    if _sync_file_range is not None:
        _sync_file_range(fd, 0, 0, _SYNC_FILE_RANGE_WRITE)


def fs_type(dev: int) -> str | None:
    """The filesystem type mounted on device ``dev``, from /proc/self/mountinfo."""
    want = f"{os.major(dev)}:{os.minor(dev)}"
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                fields = line.split()
                if len(fields) > 2 and fields[2] == want and " - " in line:
                    return line.split(" - ", 1)[1].split()[0]
    except OSError:
        return None
    return None


def _copy(src: int, dst: int, size: int, use_cfr: bool) -> int:
    done = 0
    while done < size:
        n = 0
        if use_cfr:
            try:
                n = os.copy_file_range(src, dst, size - done)
            except OSError as e:
                if e.errno not in (errno.EXDEV, errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.EPERM):
                    raise
                use_cfr = False
                continue
        else:
            n = os.sendfile(dst, src, None, size - done)
        if n == 0:
            break
        done += n
    return done


@dataclass(frozen=True, slots=True)
class _Copied:
    """A file copied into staging, not yet sealed: its name, the inode we created, its mode."""

    name: str
    rel: str
    ino: int


_Job = Future[tuple[_Copied | None, Finding | None]]


@dataclass(slots=True)
class _Dir:
    src: int
    dst: int
    rel: str
    mode: int
    listing: Iterator[os.DirEntry[str]]
    expected: set[str]
    lane: int = 0
    seen: set[str] = field(default_factory=set)
    pending: list[_Job] = field(default_factory=list)
    copied: list[_Copied] = field(default_factory=list)


def _umask() -> int:
    """The process umask, read without changing it (os.umask would race other threads)."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    return 0o777  # unknown: always fchmod


def _default_open_dirs() -> int:
    """Copied directories wait, open, for the sealing pass: at most 128 of them, and never
    more than an eighth of the descriptors this process may open (each holds two)."""
    import resource

    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return 128 if soft == resource.RLIM_INFINITY else max(4, min(128, soft // 8))


def materialize(
    source: str | os.PathLike[str],
    expected: Inventory,
    dst_root: int,
    backend: Backend,
    *,
    workers: int = 2,
    progress: Progress | None = None,
    max_findings: int = 1000,
    max_open_dirs: int | None = None,
) -> tuple[list[Finding], list[Sealed]]:
    """Copy the attested entries of ``source`` into the empty directory ``dst_root`` and seal them.

    Returns the findings (the copy must not be used when there are any) and the sealed
    record, root first; when there are no findings every entry is sealed on return. Raises
    only for the source root itself and for a staging or seal failure
    (:class:`EnvironmentFailure`).

    The main thread walks the source and creates directories; each file (open the source
    by name under its directory descriptor, cross-check, create, copy, start its writeback)
    is one job on one of ``workers`` copy lanes. One sealing thread follows (rule 5): it
    takes the directories in post-order as their files are copied and seals their files and
    then them, so the writeback waits of the seal overlap the copying of later files.
    """
    if max_open_dirs is None:
        max_open_dirs = _default_open_dirs()
    m = _Materializer(expected, dst_root, backend, workers, progress, max_findings, max_open_dirs)
    return m.run(open_root(source), dst_root)


class _Materializer:
    """One materialization: the attested layout, the copy options, and what was found and sealed."""

    def __init__(
        self,
        expected: Inventory,
        dst_root: int,
        backend: Backend,
        workers: int,
        progress: Progress | None,
        max_findings: int,
        max_open_dirs: int,
    ) -> None:
        self.spec = compile_ignore(expected.ignore)
        self.want = expected.by_path()
        self.children: dict[str, set[str]] = {}
        for e in expected.entries:
            parent, _, name = e.path.rpartition("/")
            self.children.setdefault(parent, set()).add(name)
        self.backend = backend
        self.mask = backend.mode_mask
        self.umask = _umask()
        self.use_cfr = fs_type(os.fstat(dst_root).st_dev) in _NO_REFLINK
        self.flush = backend.seal_writes_back
        self.workers = workers
        self.progress = progress
        self.max_findings = max_findings
        self.max_open_dirs = max_open_dirs
        self.findings: list[Finding] = []
        self.sealed: list[Sealed] = []
        self.files = 0
        self.nbytes = 0
        self.dirs_listed = 0
        self.lanes: list[ThreadPoolExecutor] = []
        # Rule 5: the sealing thread owns (and closes) the staging descriptor of every
        # directory put in this queue; the bounded queue also bounds the open descriptors.
        self.to_seal: queue.Queue[_Dir | None] = queue.Queue(maxsize=max(1, max_open_dirs))
        self.seal_failure: list[BaseException] = []

    def report(self, code: str, path: str, detail: str) -> None:
        if len(self.findings) < self.max_findings:
            self.findings.append(Finding(code, path, detail))

    # -- the walk (main thread) -------------------------------------------------------------

    def run(self, src_root: int, dst_root: int) -> tuple[list[Finding], list[Sealed]]:
        """Walk the source from ``src_root`` (which this closes), copying into ``dst_root``."""
        # One single-threaded lane per worker, a directory's files all in one lane: two threads
        # creating in one directory would only contend for its lock.
        self.lanes = [ThreadPoolExecutor(max_workers=1, thread_name_prefix="attest-copy") for _ in range(self.workers)]
        sealing = threading.Thread(target=self.sealer, name="attest-seal", daemon=True)
        sealing.start()
        stack: list[_Dir] = []
        done_dirs: list[_Dir] = []  # listed, waiting for their file jobs; the root last of all
        try:
            try:
                listing = _safe_listing(src_root)
            except BaseException:
                os.close(src_root)
                raise
            stack.append(_Dir(src_root, os.dup(dst_root), "", 0o755, listing, self.children.get("", set())))
            while stack:
                top = stack[-1]
                dent = next(top.listing, None)
                if dent is None:
                    stack.pop()
                    done_dirs.append(top)
                    # Bound the open descriptors: finish the oldest listed directories first.
                    while len(done_dirs) > self.max_open_dirs:
                        self.finish(done_dirs.pop(0))
                    continue
                sub = self.visit(top, dent)
                if sub is not None:
                    stack.append(sub)
            # Directories in the order they were listed: children before parents, the root last.
            while done_dirs:
                self.finish(done_dirs.pop(0))
        finally:
            for d in (*stack, *done_dirs):
                for fut in d.pending:
                    fut.cancel()
            for lane in self.lanes:
                lane.shutdown(wait=True)
            for d in (*stack, *done_dirs):
                os.close(d.src)
                os.close(d.dst)
            # Every handed directory is sealed (or closed, after a failure) before we return.
            self.to_seal.put(None)
            sealing.join()
        if self.seal_failure:
            raise self.seal_failure[0]
        if self.progress is not None:
            self.progress(self.files, self.nbytes)
        self.sealed.sort(key=lambda s: (s.path != "", s.path))
        return self.findings, self.sealed

    def visit(self, top: _Dir, dent: os.DirEntry[str]) -> _Dir | None:
        """Judge one listed entry of ``top`` (rule 1): queue its copy, or return it to enter."""
        report = self.report
        name = dent.name
        rel = f"{top.rel}/{name}" if top.rel else name
        shown = display_name(rel)
        try:
            st = dent.stat(follow_symlinks=False)
        except OSError as e:
            report(InventoryCode.CHANGED_DURING_WALK, shown, f"cannot stat: {e.strerror}")
            return None
        if self.spec is not None and self.spec.match_file(rel + "/" if stat.S_ISDIR(st.st_mode) else rel):
            return None
        entry = self.want.get(rel)
        if entry is None or name not in top.expected:
            report(InventoryCode.EXTRA, shown, "the source has an entry the attested inventory does not list")
            return None
        top.seen.add(name)
        kind = classify(st)
        if kind is Kind.SYMLINK:
            report(InventoryCode.SYMLINK, rel, "symbolic links are never materialized")
            return None
        if kind is Kind.SPECIAL:
            report(InventoryCode.SPECIAL_FILE, rel, "special files are never materialized")
            return None
        if kind is Kind.SPECIAL_MODE:
            report(InventoryCode.SPECIAL_MODE, rel, "the source has setuid, setgid or sticky bits")
            return None
        is_dir = kind is Kind.DIR
        if is_dir != (entry.type is EntryType.DIR):
            report(InventoryCode.TYPE_CHANGED, rel, f"attested a {entry.type.value}, the source has a {'dir' if is_dir else 'file'}")
            return None
        if is_dir:
            return self.enter_dir(top, name, rel, st, entry)
        if kind is Kind.HARDLINK:
            report(InventoryCode.HARDLINK, rel, f"the source file has {st.st_nlink} links")
            return None
        if self.findings:
            return None  # already failing: keep walking to report everything, copy nothing
        size = entry.size or 0
        self.files += 1
        self.nbytes += size
        job = (top.src, top.dst, name, rel, st, size, entry.mode)
        top.pending.append(self.lanes[top.lane].submit(self.copy_file, *job) if self.lanes else _run_inline(self.copy_file, *job))
        if self.progress is not None and self.files % 256 == 0:
            self.progress(self.files, self.nbytes)
        return None

    def enter_dir(self, top: _Dir, name: str, rel: str, listed: os.stat_result, entry: Entry) -> _Dir | None:
        """Open the source directory ``name`` (rule 1) and create its private staging twin."""
        try:
            sfd, _ = open_listed_at(top.src, name, listed)
        except OSError as e:
            problem = _open_finding(e, rel, "the directory was replaced during the copy")
            self.report(problem.code, rel, problem.detail)
            return None
        try:
            listing = _safe_listing(sfd)
        except BaseException:
            os.close(sfd)
            raise
        expected = self.children.get(rel, set())
        if self.findings:
            return _Dir(sfd, os.dup(sfd), rel, entry.mode, listing, expected)
        try:
            os.mkdir(name, 0o700, dir_fd=top.dst)
            dfd = os.open(name, O_DIR, dir_fd=top.dst)
        except OSError as e:
            os.close(sfd)
            raise EnvironmentFailure(FreezeCode.STAGING_FAILED, f"cannot create in staging: {e.strerror}", rel) from e
        self.dirs_listed += 1
        return _Dir(sfd, dfd, rel, entry.mode, listing, expected, self.dirs_listed % max(1, self.workers))

    # -- one copy job (a copy lane) ---------------------------------------------------------

    def copy_file(self, sdir: int, ddir: int, name: str, rel: str, listed: os.stat_result, size: int, mode: int) -> tuple[_Copied | None, Finding | None]:
        # Rule 1: open by name under the directory descriptor, decide from fstat.
        try:
            sfd, fst = open_listed_at(sdir, name, listed)
        except OSError as e:
            return None, _open_finding(e, rel, "the entry was replaced during the copy")
        try:
            if fst.st_size != size:
                # Only ever a reason to fail: success is decided from the frozen copy alone.
                return None, Finding(InventoryCode.DIGEST_MISMATCH, rel, f"the source file has {fst.st_size} bytes; the attested size is {size}")
            # Rule 2: a new inode, never a link; rule 3: the attested mode.
            final = mode & ~self.mask
            try:
                dfd = os.open(name, O_NEW, final, dir_fd=ddir)
            except OSError as e:
                raise EnvironmentFailure(FreezeCode.STAGING_FAILED, f"cannot create in staging: {e.strerror}", rel) from e
            try:
                try:
                    if size:
                        _copy(sfd, dfd, size, self.use_cfr)
                        if self.flush:
                            start_writeback(dfd)
                    if final & self.umask:
                        os.fchmod(dfd, final)
                    ino = os.fstat(dfd).st_ino
                except OSError as e:
                    raise EnvironmentFailure(FreezeCode.STAGING_FAILED, f"cannot copy into staging: {e.strerror}", rel) from e
                return _Copied(name, rel, ino), None
            finally:
                os.close(dfd)
        finally:
            os.close(sfd)

    # -- post-order: collecting a directory, sealing it -------------------------------------

    def finish(self, d: _Dir) -> None:
        """Post-order: every file of ``d`` is copied; hand ``d`` to the sealing thread."""
        handed = False
        try:
            for fut in d.pending:
                got, problem = fut.result()
                if problem is not None:
                    self.report(problem.code, problem.path or "", problem.detail)
                elif got is not None:
                    d.copied.append(got)
            for name in sorted(d.expected - d.seen):
                rel = f"{d.rel}/{name}" if d.rel else name
                self.report(InventoryCode.MISSING, rel, "attested entry is absent from the source")
            if not self.findings and not self.seal_failure:
                self.to_seal.put(d)
                handed = True
        finally:
            os.close(d.src)
            if not handed:
                os.close(d.dst)

    def sealer(self) -> None:
        """The sealing thread (rule 5): seal each handed directory's files, then the directory."""
        while True:
            d = self.to_seal.get()
            if d is None:
                return
            try:
                if not self.seal_failure and not self.findings:
                    self.seal_dir(d)
            except BaseException as e:  # noqa: BLE001 - re-raised by the main thread after the join
                self.seal_failure.append(e)
            finally:
                os.close(d.dst)

    def seal_dir(self, d: _Dir) -> None:
        for c in d.copied:
            try:
                fd, fst = open_regular_at(d.dst, c.name)
            except UnsafeEntry as e:
                raise EnvironmentFailure(FreezeCode.STAGING_FAILED, "the staged file is not the inode that was created", c.rel) from e
            except OSError as e:
                raise EnvironmentFailure(FreezeCode.STAGING_FAILED, f"cannot reopen in staging: {e.strerror}", c.rel) from e
            try:
                if fst.st_ino != c.ino:
                    raise EnvironmentFailure(FreezeCode.STAGING_FAILED, "the staged file is not the inode that was created", c.rel)
                self.sealed.append(self.seal(fd, c.rel, False, 0, chmod=False))
            finally:
                os.close(fd)
        self.sealed.append(self.seal(d.dst, d.rel, True, d.mode & ~self.mask))

    def seal(self, fd: int, rel: str, is_dir: bool, mode: int, chmod: bool = True) -> Sealed:
        try:
            if chmod:
                os.fchmod(fd, mode)
            self.backend.seal(fd)
        except OSError as e:
            raise EnvironmentFailure(FreezeCode.BACKEND_UNAVAILABLE, f"cannot seal with {self.backend.name!r}: {e.strerror}", rel or ".") from e
        return snapshot(fd, rel, is_dir)


def _open_finding(e: OSError, rel: str, replaced: str) -> Finding:
    """The finding for a source entry that :func:`open_listed_at` refused (``replaced``: its detail for a swap)."""
    if isinstance(e, UnsafeEntry):
        if e.drift is None:
            return Finding(InventoryCode.SYMLINK, rel, "the entry was replaced by a symbolic link during the copy")
        if e.drift is Drift.LINKS and e.st is not None:
            return Finding(InventoryCode.HARDLINK, rel, f"the source file has {e.st.st_nlink} links")
        if e.drift is Drift.MODE:
            return Finding(InventoryCode.SPECIAL_MODE, rel, "the source has setuid, setgid or sticky bits")
        return Finding(InventoryCode.CHANGED_DURING_WALK, rel, replaced)
    if isinstance(e, FileNotFoundError):
        return Finding(InventoryCode.CHANGED_DURING_WALK, rel, "the entry vanished during the copy")
    return Finding(InventoryCode.UNREADABLE_ENTRY, rel, f"cannot open: {e.strerror}")


def _run_inline(fn: Callable[..., tuple[_Copied | None, Finding | None]], *a: object) -> _Job:
    fut: _Job = Future()
    try:
        fut.set_result(fn(*a))
    except BaseException as e:  # noqa: BLE001 - re-raised by finish() through fut.result()
        fut.set_exception(e)
    return fut


def _safe_listing(fd: int) -> Iterator[os.DirEntry[str]]:
    try:
        return iter(sorted(os.scandir(fd), key=lambda d: d.name))
    except OSError as e:
        raise EnvironmentFailure(InventoryCode.UNREADABLE_ENTRY, f"cannot list a source directory: {e.strerror}") from e
