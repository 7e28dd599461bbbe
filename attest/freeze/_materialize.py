"""Private materialization: copy exactly the attested entries of a source into fresh inodes.

Rules (docs/freeze.md "What freeze does, step by step", steps 3-5), against a hostile source tree
(links, special files, hard links, setid modes) and against entries swapped while it is copied:

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
5. Sealing follows copying: the staging directory is private (0700, created by us) until it
   is sealed, so nothing else can reach a copied inode before its seal. The sealing pass
   reopens every file by name under its staging directory's descriptor (checking it is the
   inode we created), seals it, then seals the directory. For a backend whose seal writes
   the file back (ext4 sets the immutable flag only after ``filemap_write_and_wait``, so a
   seal per file waits for the disk once per file), the seal is a batch: every file is
   copied first, then one ``syncfs(2)`` writes them all back in one go, then the sealing pass
   (one directory descriptor per level, each reopened under its parent and checked to be the
   inode we created) finds nothing left to write. For the other backends a sealing thread
   follows the copying one directory behind. :func:`materialize` returns only after every
   entry is sealed.

The bytes copied here decide nothing: the caller verifies the sealed copy afterwards.

The steps, in :class:`_Materializer`: :meth:`~_Materializer.run` walks the source (rule 1);
:meth:`~_Materializer.visit` judges one listed entry; :meth:`~_Materializer.enter_dir` opens a
source directory and creates its staging twin; :meth:`~_Materializer.copy_file` copies one
file (rules 1-3), :meth:`~_Materializer.copy_files` up to 64 large ones of a directory as one
lane job; :meth:`~_Materializer.finish` collects a directory's copies in post-order and hands
it to :meth:`~_Materializer.sealer`, the sealing thread, or records it for
:meth:`~_Materializer.seal_batch` (rules 4-5).

    >>> findings, sealed = materialize("src", attested_inventory, staging_fd, backend)
"""

from __future__ import annotations

import ctypes
import errno
import operator
import os
import queue
import resource
import stat
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

from .._plural import count
from .._safefs import O_DIR, O_NEW, Drift, Kind, UnsafeEntry, classify, open_listed_at, open_regular_at
from ..errors import EnvironmentFailure, Finding
from ..inventory import Entry, EntryType, Inventory, InventoryCode, open_root
from ..inventory._ignore import compile_ignore
from ..inventory._names import display_name
from ._backends import Backend
from ._codes import FreezeCode
from ._image import Sealed, snapshot

_SYNC_FILE_RANGE_WRITE = 2
# Python 3.11 has neither os.sync_file_range nor os.syncfs: call the C library's (ctypes
# releases the GIL). Without them the seal writes each file back by itself, only later.
try:
    _libc: ctypes.CDLL | None = ctypes.CDLL(None, use_errno=True)
except OSError:
    _libc = None


def _load_sync_file_range() -> Callable[[int, int, int, int], int] | None:
    """sync_file_range(fd, offset, nbytes, flags) -> 0 or -1, or None without one."""
    try:
        fn = _libc.sync_file_range if _libc is not None else None
    except AttributeError:
        return None
    if fn is not None:
        fn.argtypes = (ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint)
        fn.restype = ctypes.c_int
    return fn


def _load_syncfs() -> Callable[[int], int] | None:
    """syncfs(fd) -> 0 or -1, or None without one."""
    try:
        fn = _libc.syncfs if _libc is not None else None
    except AttributeError:
        return None
    if fn is not None:
        fn.argtypes = (ctypes.c_int,)
        fn.restype = ctypes.c_int
    return fn


_sync_file_range = _load_sync_file_range()
_syncfs = _load_syncfs()
_PATH_OF = operator.attrgetter("path")
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


def write_back_all(fd: int) -> bool:
    """Write back every dirty page of the filesystem holding ``fd`` and wait: one ``syncfs(2)``.

    Whether it worked is a matter of speed only (the seal writes back whatever is left, file by
    file); returns False when there is no ``syncfs`` or it failed.
    """
    return _syncfs is not None and _syncfs(fd) == 0


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


_Copy = tuple[int, int, str, str, os.stat_result, int, int]  # copy_file's arguments
_Job = Future[list[tuple[_Copied | None, Finding | None]]]
# Files of one directory per copy job: a job (a Future and a lane's queue entry) per file cost
# more than the copy of a small file.
_CHUNK = 64
# Files smaller than this are copied by the walking thread itself, larger ones by a copy lane:
# per-file system calls from several threads cost a GIL hand-off each (measured on the
# runtime-like tree of bench/case_freeze.py: 2.5 s with small files inline, 3.5 s with every
# file on two lanes), while a large copy_file_range runs without the GIL.
_LANE_MIN = 256 * 1024


@dataclass(slots=True)
class _Staged:
    """A staging directory waiting for the batch seal (rule 5): its name, the inode we created, its files."""

    name: str
    rel: str
    ino: int
    mode: int
    files: list[_Copied] = field(default_factory=list)
    subdirs: list[_Staged] = field(default_factory=list)


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
    queued: list[_Copy] = field(default_factory=list)  # copies not yet handed to the lane
    done: list[tuple[_Copied | None, Finding | None]] = field(default_factory=list)  # copied by the walking thread
    copied: list[_Copied] = field(default_factory=list)
    staged: _Staged | None = None  # with a batch seal: where its files go once copied


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

    The main thread walks the source, creates directories and copies each file under 256 KiB
    itself (open the source by name under its directory descriptor, cross-check, create,
    copy); larger files go, up to 64 of a directory per job, to one of ``workers`` copy lanes.
    For a backend whose seal writes back (``immutable``), every entry is sealed after all
    copies and one ``syncfs`` (rule 5); otherwise one sealing thread follows, taking the
    directories in post-order as their files are copied.
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
        # Rule 5: a seal that writes back is done as a batch after one syncfs. No copy starts a
        # writeback of its own then: measured on bench/case_freeze.py, sync_file_range per
        # file made the copies slower by more than it took off the syncfs.
        self.batch = backend.seal_writes_back and _syncfs is not None
        self.flush = backend.seal_writes_back and not self.batch
        self.staged_root: _Staged | None = None
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
        if self.batch:
            self.staged_root = _Staged("", "", os.fstat(dst_root).st_ino, 0o755)
        done_dirs: list[_Dir] = []  # listed, waiting for their file jobs; the root last of all
        try:
            try:
                listing = _safe_listing(src_root)
            except BaseException:
                os.close(src_root)
                raise
            stack.append(_Dir(src_root, os.dup(dst_root), "", 0o755, listing, self.children.get("", set()), staged=self.staged_root))
            while stack:
                top = stack[-1]
                dent = next(top.listing, None)
                if dent is None:
                    stack.pop()
                    if top.queued:
                        self.submit(top)
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
        if self.staged_root is not None and not self.findings:
            self.seal_batch(dst_root, self.staged_root)
        if self.progress is not None:
            self.progress(self.files, self.nbytes)
        self.sealed.sort(key=_PATH_OF)  # the root ("") first
        return self.findings, self.sealed

    def visit(self, top: _Dir, dent: os.DirEntry[str]) -> _Dir | None:
        """Judge one listed entry of ``top`` (rule 1): queue its copy, or return it to enter."""
        report = self.report
        name = dent.name
        rel = f"{top.rel}/{name}" if top.rel else name
        try:
            st = dent.stat(follow_symlinks=False)
        except OSError as e:
            report(InventoryCode.CHANGED_DURING_WALK, display_name(rel), f"cannot stat: {e.strerror}")
            return None
        if self.spec is not None and self.spec.match_file(rel + "/" if stat.S_ISDIR(st.st_mode) else rel):
            return None
        entry = self.want.get(rel)
        if entry is None or name not in top.expected:
            report(InventoryCode.EXTRA, display_name(rel), "the source has an entry the attested inventory does not list")
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
        if self.lanes and size >= _LANE_MIN:
            top.queued.append(job)
            if len(top.queued) >= _CHUNK:
                self.submit(top)
        else:
            top.done.append(self.copy_file(*job))
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
            staged = None
            if top.staged is not None:
                staged = _Staged(name, rel, os.fstat(dfd).st_ino, entry.mode)
                top.staged.subdirs.append(staged)
        except OSError as e:
            os.close(sfd)
            raise EnvironmentFailure(FreezeCode.STAGING_FAILED, f"cannot create in staging: {e.strerror}", rel) from e
        self.dirs_listed += 1
        return _Dir(sfd, dfd, rel, entry.mode, listing, expected, self.dirs_listed % max(1, self.workers), staged=staged)

    def submit(self, top: _Dir) -> None:
        """Hand the queued copies of ``top`` to its lane as one job."""
        jobs, top.queued = top.queued, []
        top.pending.append(self.lanes[top.lane].submit(self.copy_files, jobs) if self.lanes else _run_inline(self.copy_files, jobs))

    # -- one copy job (a copy lane) ---------------------------------------------------------

    def copy_files(self, jobs: list[_Copy]) -> list[tuple[_Copied | None, Finding | None]]:
        copy = self.copy_file
        return [copy(*job) for job in jobs]

    def copy_file(self, sdir: int, ddir: int, name: str, rel: str, listed: os.stat_result, size: int, mode: int) -> tuple[_Copied | None, Finding | None]:
        # Rule 1: open by name under the directory descriptor, decide from fstat.
        try:
            sfd, fst = open_listed_at(sdir, name, listed)
        except OSError as e:
            return None, _open_finding(e, rel, "the entry was replaced during the copy")
        try:
            if fst.st_size != size:
                # Only ever a reason to fail: success is decided from the frozen copy alone.
                return None, Finding(InventoryCode.DIGEST_MISMATCH, rel, f"the source file has {count(fst.st_size, 'byte')}; the attested size is {size}")
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
            for results in (d.done, *(fut.result() for fut in d.pending)):
                for got, problem in results:
                    if problem is not None:
                        self.report(problem.code, problem.path or "", problem.detail)
                    elif got is not None:
                        d.copied.append(got)
            for name in sorted(d.expected - d.seen):
                rel = f"{d.rel}/{name}" if d.rel else name
                self.report(InventoryCode.MISSING, rel, "attested entry is absent from the source")
            if d.staged is not None:
                d.staged.files = d.copied  # sealed by seal_batch, through a reopened descriptor
            elif not self.findings and not self.seal_failure:
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
                    self.seal_dir(d.dst, d.rel, d.mode, d.copied)
            except BaseException as e:  # noqa: BLE001 - re-raised by the main thread after the join
                self.seal_failure.append(e)
            finally:
                os.close(d.dst)

    def seal_batch(self, dst_root: int, root: _Staged) -> None:
        """Rule 5 for a seal that writes back: one syncfs, then every entry sealed, post-order.

        Every copy is done. Each staging directory is reopened under its parent's descriptor
        (one per level of depth) and must be the inode we created.
        """
        write_back_all(dst_root)
        stack: list[tuple[int, _Staged, Iterator[_Staged]]] = [(os.dup(dst_root), root, iter(root.subdirs))]
        try:
            while stack:
                fd, node, subdirs = stack[-1]
                sub = next(subdirs, None)
                if sub is None:
                    stack.pop()
                    try:
                        self.seal_dir(fd, node.rel, node.mode, node.files)
                    finally:
                        os.close(fd)
                    continue
                try:
                    cfd = os.open(sub.name, O_DIR, dir_fd=fd)
                except OSError as e:
                    raise EnvironmentFailure(FreezeCode.STAGING_FAILED, f"cannot reopen in staging: {e.strerror}", sub.rel) from e
                if os.fstat(cfd).st_ino != sub.ino:
                    os.close(cfd)
                    raise EnvironmentFailure(FreezeCode.STAGING_FAILED, "the staged directory is not the inode that was created", sub.rel)
                stack.append((cfd, sub, iter(sub.subdirs)))
        finally:
            for fd, _, _ in stack:
                os.close(fd)

    def seal_dir(self, dst: int, rel: str, mode: int, copied: list[_Copied]) -> None:
        for c in copied:
            try:
                fd, fst = open_regular_at(dst, c.name)
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
        self.sealed.append(self.seal(dst, rel, True, mode & ~self.mask))

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


def _run_inline(fn: Callable[..., list[tuple[_Copied | None, Finding | None]]], *a: object) -> _Job:
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
