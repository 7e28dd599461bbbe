"""Private materialization: copy exactly the attested entries of a source into fresh inodes.

Rules (DESIGN.md "Freeze and store", THREATS.md A and B):

1. The source is walked like the inventory walker walks a tree: root opened component by
   component without following links, directories through descriptors, every entry decided
   from ``fstat`` of the opened descriptor cross-checked against its listing. Symlinks,
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

The bytes copied here decide nothing: the caller verifies the sealed copy afterwards.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

from ..errors import EnvironmentFailure, Finding
from ..inventory import EntryType, Inventory, InventoryCode, open_root
from ..inventory._walk import compile_ignore
from ._backends import Backend
from ._codes import FreezeCode
from ._image import Sealed, snapshot

_O_DIR = os.O_RDONLY | os.O_NOFOLLOW | os.O_DIRECTORY | os.O_CLOEXEC
_O_SRC = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_O_DST = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_NOCTTY | os.O_CLOEXEC
_SPECIAL_BITS = stat.S_ISUID | stat.S_ISGID | stat.S_ISVTX
_THREADED = 128 * 1024
# Filesystems whose copy_file_range never shares extents (no reflink support).
_NO_REFLINK = frozenset({"ext2", "ext3", "ext4", "tmpfs", "ramfs"})

Progress = Callable[[int, int], None]


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


@dataclass(slots=True)
class _Dir:
    src: int
    dst: int
    rel: str
    mode: int
    listing: Iterator[os.DirEntry[str]]
    expected: set[str]
    seen: set[str] = field(default_factory=set)
    pending: list[tuple[str, Future[Sealed]]] = field(default_factory=list)


def materialize(
    source: str | os.PathLike[str],
    expected: Inventory,
    dst_root: int,
    backend: Backend,
    *,
    workers: int = 2,
    progress: Progress | None = None,
    max_findings: int = 1000,
) -> tuple[list[Finding], list[Sealed]]:
    """Copy the attested entries of ``source`` into the empty directory ``dst_root`` and seal them.

    Returns the findings (the copy must not be used when there are any) and the sealed
    record, root first. Raises only for the source root itself and for a staging or seal
    failure (:class:`EnvironmentFailure`).
    """
    spec = compile_ignore(expected.ignore)
    want = expected.by_path()
    children: dict[str, set[str]] = {}
    for e in expected.entries:
        parent, _, name = e.path.rpartition("/")
        children.setdefault(parent, set()).add(name)
    mask = backend.mode_mask
    use_cfr = fs_type(os.fstat(dst_root).st_dev) in _NO_REFLINK
    findings: list[Finding] = []
    sealed: list[Sealed] = []
    files = 0
    nbytes = 0

    def report(code: str, path: str, detail: str) -> None:
        if len(findings) < max_findings:
            findings.append(Finding(code, path, detail))

    def seal(fd: int, rel: str, is_dir: bool, mode: int) -> Sealed:
        try:
            os.fchmod(fd, mode & ~mask)
            backend.seal(fd)
        except OSError as e:
            raise EnvironmentFailure(FreezeCode.BACKEND_UNAVAILABLE, f"cannot seal with {backend.name!r}: {e.strerror}", rel or ".") from e
        return snapshot(fd, rel, is_dir)

    def copy_one(sfd: int, dfd: int, rel: str, size: int, mode: int) -> Sealed:
        try:
            try:
                _copy(sfd, dfd, size, use_cfr)
            except OSError as e:
                raise EnvironmentFailure(FreezeCode.STAGING_FAILED, f"cannot copy into staging: {e.strerror}", rel) from e
            return seal(dfd, rel, False, mode)
        finally:
            os.close(sfd)
            os.close(dfd)

    src_root = open_root(source)
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="attest-copy") if workers > 0 else None
    stack: list[_Dir] = []
    try:
        try:
            listing = _safe_listing(src_root)
        except BaseException:
            os.close(src_root)
            raise
        stack.append(_Dir(src_root, os.dup(dst_root), "", 0o755, listing, children.get("", set())))
        while stack:
            top = stack[-1]
            dent = next(top.listing, None)
            if dent is None:
                # Post-order: every child is copied and sealed; now seal this directory.
                stack.pop()
                try:
                    for rel, fut in top.pending:
                        s = fut.result()
                        sealed.append(s)
                    for name in sorted(top.expected - top.seen):
                        rel = f"{top.rel}/{name}" if top.rel else name
                        report(InventoryCode.MISSING, rel, "attested entry is absent from the source")
                    if not findings:
                        sealed.append(seal(top.dst, top.rel, True, top.mode))
                finally:
                    os.close(top.src)
                    os.close(top.dst)
                continue
            name = dent.name
            rel = f"{top.rel}/{name}" if top.rel else name
            shown = rel.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
            try:
                st = dent.stat(follow_symlinks=False)
            except OSError as e:
                report(InventoryCode.CHANGED_DURING_WALK, shown, f"cannot stat: {e.strerror}")
                continue
            fmt = stat.S_IFMT(st.st_mode)
            if spec is not None and spec.match_file(rel + "/" if fmt == stat.S_IFDIR else rel):
                continue
            entry = want.get(rel)
            if entry is None or name not in top.expected:
                report(InventoryCode.EXTRA, shown, "the source has an entry the attested inventory does not list")
                continue
            top.seen.add(name)
            if fmt == stat.S_IFLNK:
                report(InventoryCode.SYMLINK, rel, "symbolic links are never materialized")
                continue
            if fmt not in (stat.S_IFDIR, stat.S_IFREG):
                report(InventoryCode.SPECIAL_FILE, rel, "special files are never materialized")
                continue
            if st.st_mode & _SPECIAL_BITS:
                report(InventoryCode.SPECIAL_MODE, rel, "the source has setuid, setgid or sticky bits")
                continue
            is_dir = fmt == stat.S_IFDIR
            if is_dir != (entry.type is EntryType.DIR):
                report(InventoryCode.TYPE_CHANGED, rel, f"attested a {entry.type.value}, the source has a {'dir' if is_dir else 'file'}")
                continue
            if not is_dir and st.st_nlink > 1:
                report(InventoryCode.HARDLINK, rel, f"the source file has {st.st_nlink} links")
                continue
            try:
                sfd = os.open(name, _O_DIR if is_dir else _O_SRC, dir_fd=top.src)
            except OSError as e:
                if e.errno in (errno.ELOOP, errno.ENOTDIR):
                    report(InventoryCode.SYMLINK, rel, "the entry was replaced by a symbolic link during the copy")
                elif e.errno == errno.ENOENT:
                    report(InventoryCode.CHANGED_DURING_WALK, rel, "the entry vanished during the copy")
                else:
                    report(InventoryCode.UNREADABLE_ENTRY, rel, f"cannot open: {e.strerror}")
                continue
            fst = os.fstat(sfd)
            if (fst.st_dev, fst.st_ino, stat.S_IFMT(fst.st_mode)) != (st.st_dev, st.st_ino, fmt) or (not is_dir and fst.st_nlink > 1):
                os.close(sfd)
                code = InventoryCode.HARDLINK if fst.st_nlink > 1 and not is_dir else InventoryCode.CHANGED_DURING_WALK
                report(code, rel, "the entry was replaced or linked during the copy")
                continue
            if fst.st_mode & _SPECIAL_BITS:
                os.close(sfd)
                report(InventoryCode.SPECIAL_MODE, rel, "the source gained setuid, setgid or sticky bits")
                continue
            if not is_dir and fst.st_size != entry.size:
                os.close(sfd)
                # Only ever a reason to fail: success is decided from the frozen copy alone.
                report(InventoryCode.DIGEST_MISMATCH, rel, f"the source file has {fst.st_size} bytes; the attested size is {entry.size}")
                continue
            if findings:
                # Already failing: stop copying, keep walking to report everything.
                if is_dir:
                    stack.append(_Dir(sfd, os.dup(sfd), rel, entry.mode, _safe_listing(sfd), children.get(rel, set())))
                else:
                    os.close(sfd)
                continue
            try:
                if is_dir:
                    os.mkdir(name, 0o700, dir_fd=top.dst)
                    dfd = os.open(name, _O_DIR, dir_fd=top.dst)
                else:
                    dfd = os.open(name, _O_DST, 0o600, dir_fd=top.dst)
            except OSError as e:
                os.close(sfd)
                raise EnvironmentFailure(FreezeCode.STAGING_FAILED, f"cannot create in staging: {e.strerror}", rel) from e
            if is_dir:
                stack.append(_Dir(sfd, dfd, rel, entry.mode, _safe_listing(sfd), children.get(rel, set())))
                continue
            size = entry.size or 0
            files += 1
            nbytes += size
            if pool is not None and size >= _THREADED:
                top.pending.append((rel, pool.submit(copy_one, sfd, dfd, rel, size, entry.mode)))
            else:
                sealed.append(copy_one(sfd, dfd, rel, size, entry.mode))
            if progress is not None and files % 256 == 0:
                progress(files, nbytes)
    finally:
        for d in stack:
            os.close(d.src)
            os.close(d.dst)
            for _, fut in d.pending:
                fut.cancel()
        if pool is not None:
            pool.shutdown(wait=True)
    if progress is not None:
        progress(files, nbytes)
    sealed.sort(key=lambda s: (s.path != "", s.path))
    return findings, sealed


def _safe_listing(fd: int) -> Iterator[os.DirEntry[str]]:
    try:
        return iter(sorted(os.scandir(fd), key=lambda d: d.name))
    except OSError as e:
        raise EnvironmentFailure(InventoryCode.UNREADABLE_ENTRY, f"cannot list a source directory: {e.strerror}") from e
