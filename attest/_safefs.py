"""How the host touches a tree that something else could write: through descriptors only.

The one home of the rules for a directory the host does not control (a build step's output
after the step ran, a tree under review, a stored image being removed):

1. A directory is opened relative to its parent's descriptor with ``O_DIRECTORY|O_NOFOLLOW``,
   never by a path below the untrusted root, so no component can be swapped for a link.
2. A file is opened ``O_NOFOLLOW|O_NONBLOCK|O_NOCTTY`` (a FIFO or device never blocks, a
   terminal never becomes ours) and what it is is decided from ``fstat`` of that descriptor:
   :func:`classify` is the one pure function from a stat result to a verdict.
3. An entry that was listed (``lstat``) and is then opened by name is confirmed from ``fstat``
   of the descriptor: :func:`drift` is the one pure cross-check between the two (another inode,
   another type, a gained link or setuid/setgid/sticky bit); :func:`open_listed_at` opens and
   applies it.
4. Removal goes through descriptors: a link found anywhere is unlinked, never entered, and
   the descriptors of no more than :data:`REMOVE_HELD_DIRS` levels are held however deep the tree is.

    >>> root = open_dir_at(AT_FDCWD, "/var/lib/attest/builder-staging/stage-1234")
    >>> fd, st = open_regular_at(root, "dist")   # raises UnsafeEntry for a link, FIFO, hard link
    >>> listed = os.stat("lib", dir_fd=root, follow_symlinks=False)
    >>> fd, st = open_listed_at(root, "lib", listed)   # raises UnsafeEntry if it drifted since
"""

from __future__ import annotations

import enum
import errno
import fcntl
import hashlib
import os
import stat
import struct

from ._fdio import write_all

__all__ = [
    "AT_FDCWD",
    "FS_IMMUTABLE_FL",
    "O_DIR",
    "O_FILE",
    "O_NEW",
    "O_OWN",
    "O_OWN_RDWR",
    "REMOVE_HELD_DIRS",
    "Drift",
    "Kind",
    "UnsafeEntry",
    "chown_tree",
    "classify",
    "clear_immutable",
    "copy_regular_at",
    "drift",
    "get_flags",
    "open_dir_at",
    "open_listed_at",
    "open_regular_at",
    "read_regular",
    "remove_tree",
    "set_flags",
]

AT_FDCWD = -100
# The only open flags the package uses below a directory it does not control (a test keeps
# every other module from spelling its own): never follow the last component, never block on
# a FIFO or device, never acquire a controlling terminal, never leak into a child.
O_DIR = os.O_RDONLY | os.O_NOFOLLOW | os.O_DIRECTORY | os.O_CLOEXEC
O_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
#: A new file, created here and now (``O_EXCL``): never an existing path or a planted link.
O_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_NOCTTY | os.O_CLOEXEC
#: A file of our own layout that may already exist (a lock, a use stamp), never through a link.
O_OWN = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NOCTTY | os.O_CLOEXEC
O_OWN_RDWR = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NOCTTY | os.O_CLOEXEC

FS_IOC_GETFLAGS = 0x80086601
FS_IOC_SETFLAGS = 0x40086602
FS_IMMUTABLE_FL = 0x10
FS_APPEND_FL = 0x20
_SPECIAL_BITS = stat.S_ISUID | stat.S_ISGID | stat.S_ISVTX


class Kind(enum.Enum):
    """What an entry is, decided from its stat result alone."""

    DIR = "dir"
    FILE = "file"  # a regular file with one link and no setuid/setgid/sticky bit
    SYMLINK = "symlink"
    SPECIAL = "special"  # FIFO, socket, device
    HARDLINK = "hardlink"  # a regular file with more than one name
    SPECIAL_MODE = "special-mode"  # setuid, setgid or sticky


# classify() runs once or twice per entry of every walk: one table lookup on the type and the
# special bits (enum attribute access is slow in 3.11, so the members are bound here).
_K_DIR, _K_FILE, _K_SYMLINK, _K_SPECIAL, _K_HARDLINK, _K_SPECIAL_MODE = (
    Kind.DIR,
    Kind.FILE,
    Kind.SYMLINK,
    Kind.SPECIAL,
    Kind.HARDLINK,
    Kind.SPECIAL_MODE,
)
_TYPE_AND_SPECIAL = stat.S_IFMT(0o177777) | _SPECIAL_BITS
_BY_MODE: dict[int, Kind] = {}
for _bits in range(0, _SPECIAL_BITS + 1, stat.S_ISVTX):
    _BY_MODE[stat.S_IFREG | _bits] = _K_SPECIAL_MODE if _bits else _K_FILE
    _BY_MODE[stat.S_IFDIR | _bits] = _K_SPECIAL_MODE if _bits else _K_DIR
    _BY_MODE[stat.S_IFLNK | _bits] = _K_SYMLINK
del _bits


def classify(st: os.stat_result) -> Kind:
    """The verdict on one entry from its ``fstat``/``lstat`` result (pure).

    Precedence: a link or special file by its type; then setuid/setgid/sticky bits on a file or
    directory; then a second link of a regular file.
    """
    kind = _BY_MODE.get(st.st_mode & _TYPE_AND_SPECIAL, _K_SPECIAL)
    if kind is _K_FILE and st.st_nlink > 1:
        return _K_HARDLINK
    return kind


class Drift(enum.Enum):
    """How the entry opened under a name differs from the one listed under it (see :func:`drift`)."""

    TYPE = "type"  # another kind of inode now: a file became a directory, a FIFO, a device...
    REPLACED = "replaced"  # another inode of the same type
    MODE = "mode"  # the same inode's setuid, setgid or sticky bits changed
    LINKS = "links"  # the same regular file gained a second link (or lost one)


def drift(listed: os.stat_result, opened: os.stat_result) -> Drift | None:
    """The one cross-check of an opened descriptor's ``fstat`` against the ``lstat`` that listed it (pure).

    None when ``opened`` is the listed inode and :func:`classify` still gives it the listed
    verdict; a permission change that keeps the verdict (``chmod 600``) is no drift.
    """
    if opened.st_ino != listed.st_ino or opened.st_dev != listed.st_dev:
        return Drift.TYPE if stat.S_IFMT(opened.st_mode) != stat.S_IFMT(listed.st_mode) else Drift.REPLACED
    if opened.st_mode == listed.st_mode and opened.st_nlink == listed.st_nlink:
        return None  # the common case: nothing classify() reads has changed
    if stat.S_IFMT(opened.st_mode) != stat.S_IFMT(listed.st_mode):
        return Drift.TYPE  # the inode number was freed and reused in between
    was, kind = classify(listed), classify(opened)
    if kind is was:
        return None
    return Drift.MODE if _K_SPECIAL_MODE in (was, kind) else Drift.LINKS


class UnsafeEntry(OSError):
    """An entry that is not what the host may use (``kind`` says what it is instead).

    From :func:`open_listed_at`, ``drift`` says how the opened entry differs from the listed one
    and ``st`` is its ``fstat``; both are None when the open itself was refused (a link, or no
    longer a directory).
    """

    def __init__(
        self,
        name: str,
        kind: Kind | None,
        detail: str,
        *,
        drift: Drift | None = None,
        st: os.stat_result | None = None,
    ) -> None:
        super().__init__(errno.EPERM, detail, name)
        self.kind = kind
        self.drift = drift
        self.st = st


def open_dir_at(parent_fd: int, name: str) -> int:
    """Open the directory ``name`` under ``parent_fd``; a link or anything else raises UnsafeEntry."""
    try:
        fd = os.open(name, O_DIR, dir_fd=parent_fd)
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.ENOTDIR):
            raise UnsafeEntry(name, None, "not a directory (a link or another kind of entry)") from e
        raise
    kind = classify(os.fstat(fd))
    if kind is not Kind.DIR:
        os.close(fd)
        raise UnsafeEntry(name, kind, f"a directory with a {kind.value} mode")
    return fd


def open_regular_at(parent_fd: int, name: str) -> tuple[int, os.stat_result]:
    """Open ``name`` under ``parent_fd`` for reading; only a plain regular file is returned.

    Never blocks (``O_NONBLOCK``: a FIFO opens at once and is then refused from ``fstat``).
    """
    try:
        fd = os.open(name, O_FILE, dir_fd=parent_fd)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise UnsafeEntry(name, Kind.SYMLINK, "a symbolic link") from e
        raise
    st = os.fstat(fd)
    kind = classify(st)
    if kind is not Kind.FILE:
        os.close(fd)
        raise UnsafeEntry(name, kind, f"not a plain regular file: {kind.value}")
    return fd, st


def open_listed_at(parent_fd: int, name: str, listed: os.stat_result) -> tuple[int, os.stat_result]:
    """Open the directory or regular file ``name`` under ``parent_fd`` that was listed as ``listed``.

    Opened with :data:`O_DIR` or :data:`O_FILE` by the listed type and confirmed from ``fstat``
    with :func:`drift`; returns the descriptor and its ``fstat``, from which every later
    decision is made. Raises :class:`UnsafeEntry` for a drift (``drift``, ``kind`` and ``st``
    of what is there now) or when the open meets a link or a non-directory (``drift`` None,
    ``kind`` SYMLINK for a link); ``FileNotFoundError`` when the name vanished; ``OSError``.
    """
    try:
        fd = os.open(name, O_DIR if stat.S_ISDIR(listed.st_mode) else O_FILE, dir_fd=parent_fd)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise UnsafeEntry(name, Kind.SYMLINK, "replaced by a symbolic link") from e
        if e.errno == errno.ENOTDIR:
            raise UnsafeEntry(name, None, "no longer a directory (a link or another kind of entry)") from e
        raise
    try:
        st = os.fstat(fd)
    except BaseException:
        os.close(fd)
        raise
    d = drift(listed, st)
    if d is not None:
        os.close(fd)
        kind = classify(st)
        raise UnsafeEntry(name, kind, f"not the entry that was listed: {d.value} ({kind.value})", drift=d, st=st)
    return fd, st


def copy_regular_at(src_dir_fd: int, name: str, dst_dir_fd: int, dst_name: str, *, max_bytes: int) -> str:
    """Copy the plain regular file ``name`` into a new file ``dst_name``; return its SHA-256 (hex).

    The destination is created ``O_EXCL|O_NOFOLLOW``, mode 0444; the digest is of the bytes written.
    """
    fd, st = open_regular_at(src_dir_fd, name)
    try:
        if st.st_size > max_bytes:
            raise UnsafeEntry(name, Kind.FILE, f"{st.st_size} bytes; the limit is {max_bytes}")
        out = os.open(dst_name, O_NEW, 0o444, dir_fd=dst_dir_fd)
        try:
            h = hashlib.sha256()
            total = 0
            while chunk := os.read(fd, 1 << 20):
                total += len(chunk)
                if total > max_bytes:
                    raise UnsafeEntry(name, Kind.FILE, f"grew past {max_bytes} bytes while it was copied")
                h.update(chunk)
                write_all(out, chunk)
            os.fsync(out)
        finally:
            os.close(out)
        return h.hexdigest()
    finally:
        os.close(fd)


def create_at(dfd: int, name: str, data: bytes, *, mode: int = 0o600) -> None:
    """Create ``name`` in the directory ``dfd`` holding exactly ``data``, only if it does not exist; durably.

    The bytes are written whole to a new temp file (``O_EXCL``, no link followed), fsynced and
    then linked to ``name`` (``link`` fails if ``name`` exists, as ``O_EXCL`` does), so no reader
    ever sees ``name`` without all of its content; the temp name is removed and the directory
    fsynced.

    Raises:
        FileExistsError: ``name`` exists (nothing was changed).
        OSError: any other step fails (``name`` was not created).
    """
    import secrets  # lazy: secrets (base64, hmac, random), +3.6 ms to attest.inventory, which never needs a random name

    tmp = f".{name}.{secrets.token_hex(8)}.tmp"
    try:
        fd = os.open(tmp, O_NEW, mode, dir_fd=dfd)
        try:
            os.fchmod(fd, mode)
            write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.link(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd, follow_symlinks=False)
    finally:
        try:
            os.unlink(tmp, dir_fd=dfd)
        except FileNotFoundError:
            pass
    os.fsync(dfd)


def replace_at(dfd: int, name: str, data: bytes, *, mode: int = 0o600) -> None:
    """Make ``name`` in the directory ``dfd`` hold exactly ``data``, atomically and durably.

    A new temp file (``O_EXCL``, no link followed, named ``.<name>.<random>.attest-tmp``) is
    written, fsynced, renamed over ``name`` and the directory fsynced; on any failure, an
    interruption included, the temp file is removed and ``name`` is untouched.

    Raises:
        OSError: any step fails.
    """
    import secrets  # lazy: as in create_at

    tmp = f".{name[:64]}.{secrets.token_hex(8)}.attest-tmp"  # within NAME_MAX for any name
    try:
        fd = os.open(tmp, O_NEW, mode, dir_fd=dfd)
        try:
            os.fchmod(fd, mode)
            write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.rename(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
    except BaseException:
        try:
            os.unlink(tmp, dir_fd=dfd)
        except OSError:
            pass
        raise
    os.fsync(dfd)


def chown_tree(parent_fd: int, name: str, uid: int) -> None:
    """Give ``parent/name`` and everything below it to ``uid`` (and the same gid), never following a link.

    A regular file with more than one name is refused (``UnsafeEntry``, ``Kind.HARDLINK``): its
    other name may lie outside the tree, and it would change owner there too.

    One descriptor is held per level of depth, whatever the number of siblings.
    """
    top = os.stat(name, dir_fd=parent_fd, follow_symlinks=False)
    if stat.S_ISREG(top.st_mode) and top.st_nlink != 1:
        raise UnsafeEntry(name, Kind.HARDLINK, f"{name!r} has {top.st_nlink} hard links; it is not given away")
    os.chown(name, uid, uid, dir_fd=parent_fd, follow_symlinks=False)
    if not stat.S_ISDIR(top.st_mode):
        return
    root = open_dir_at(parent_fd, name)
    stack: list[tuple[int, list[str]]] = [(root, os.listdir(root))]
    try:
        while stack:
            dfd, pending = stack[-1]
            if not pending:
                os.close(dfd)
                stack.pop()
                continue
            child = pending.pop()
            st = os.stat(child, dir_fd=dfd, follow_symlinks=False)
            if stat.S_ISREG(st.st_mode) and st.st_nlink != 1:  # another name may lie outside the tree
                raise UnsafeEntry(child, Kind.HARDLINK, f"{child!r} has {st.st_nlink} hard links; it is not given away")
            os.chown(child, uid, uid, dir_fd=dfd, follow_symlinks=False)
            if stat.S_ISDIR(st.st_mode):
                cfd = open_dir_at(dfd, child)
                stack.append((cfd, os.listdir(cfd)))
    finally:
        for dfd, _ in stack:
            os.close(dfd)


def read_regular(path: str | os.PathLike[str], max_bytes: int) -> bytes:
    """At most ``max_bytes + 1`` bytes of the regular file at ``path`` (so the caller sees oversize).

    Opened ``O_NONBLOCK|O_NOCTTY`` and judged from ``fstat``: a FIFO, socket or device raises
    ``OSError`` at once instead of blocking or reading a device.
    """
    fd = os.open(os.fspath(path), os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    try:
        return read_regular_fd(fd, max_bytes, os.fspath(path))
    finally:
        os.close(fd)


def read_regular_fd(fd: int, max_bytes: int, where: str | None = None) -> bytes:
    """At most ``max_bytes + 1`` bytes of the open regular file ``fd`` (``OSError`` ``EINVAL`` for anything else)."""
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        raise OSError(errno.EINVAL, "not a regular file", where)
    chunks: list[bytes] = []
    total = 0
    while total <= max_bytes and (chunk := os.read(fd, min(1 << 20, max_bytes + 1 - total))):
        chunks.append(chunk)
        total += len(chunk)
    return b"".join(chunks)


def get_flags(fd: int) -> int:
    """The inode flags of ``fd`` (the kernel reads and writes a C int)."""
    buf = bytearray(8)
    fcntl.ioctl(fd, FS_IOC_GETFLAGS, buf, True)
    return int(struct.unpack_from("i", buf)[0])


def set_flags(fd: int, flags: int) -> None:
    buf = bytearray(8)
    struct.pack_into("i", buf, 0, flags)
    fcntl.ioctl(fd, FS_IOC_SETFLAGS, buf, True)


def clear_immutable(fd: int, also: int = 0) -> None:
    """Clear the immutable flag (and the flags ``also``) if set; a filesystem without flags has nothing to clear."""
    try:
        flags = get_flags(fd)
    except OSError as e:
        if e.errno in (errno.ENOTTY, errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
            return
        raise
    if flags & (FS_IMMUTABLE_FL | also):
        set_flags(fd, flags & ~(FS_IMMUTABLE_FL | also))


def mount_id(fd: int) -> int | None:
    """The id of the mount ``fd`` is on (``mnt_id`` of ``/proc/self/fdinfo``), or None when unknown.

    Two bind mounts of one filesystem share ``st_dev``; only the mount id tells them apart.
    """
    try:
        info = os.open(f"/proc/self/fdinfo/{fd}", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        text = os.read(info, 4096)
    except OSError:
        return None
    finally:
        os.close(info)
    for line in text.splitlines():
        if line.startswith(b"mnt_id:"):
            try:
                return int(line[7:])
            except ValueError:
                return None
    return None


def _on_mount(fd: int, mount: int | None, name: str) -> None:
    """Raise EBUSY unless ``fd`` is on ``mount`` (None: not known, nothing to compare)."""
    if mount is not None and mount_id(fd) != mount:
        raise OSError(errno.EBUSY, "a mount point inside the tree: not entered, its flags and modes untouched", name)


#: How many levels of directory descriptors :func:`remove_tree` holds at once, whatever the tree's depth.
REMOVE_HELD_DIRS = 16


def remove_tree(parent_fd: int, name: str) -> None:
    """Remove ``parent/name`` through descriptors, clearing immutable flags on the way.

    Never follows a link: a symlink found anywhere is unlinked, not entered. Nothing is
    resolved by a path string: every call is relative to a directory descriptor held. A
    directory is listed once, when it is entered.

    The descriptors of at most :data:`REMOVE_HELD_DIRS` levels are held, however deep the tree
    (a hostile 30,000-level tree must not exhaust the descriptors; see
    docs/freeze.md "State directory layout"): a directory met below that depth is first moved
    up, by one ``renameat`` between two descriptors already held, to a fresh random name in the
    tree's top directory, and removed from there later.

    Everything that can be removed is removed; then the first failure is raised.

    Raises:
        OSError: an entry could not be removed (an immutable file with a second name, whose
            flag is never cleared; a mount point; an I/O error), or ``name`` itself cannot be
            opened.
    """
    try:
        st = os.stat(name, dir_fd=parent_fd, follow_symlinks=False)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(st.st_mode):
        _unlink_entry(parent_fd, name, st, mount_id(parent_fd))
        return
    root = _open_dir_for_removal(parent_fd, name)
    # Every entry of the tree is on the mount of its top: anything else is a mount point (a bind of an outside
    # directory or file), never entered, emptied, chmodded or unflagged.
    mount = mount_id(root)
    # (dir fd, names still to visit, its name in the level above); iterative: no recursion limit.
    stack: list[tuple[int, list[str], str]] = []
    first: OSError | None = None
    try:
        names = sorted(os.listdir(root))
    except BaseException:
        os.close(root)
        raise
    stack.append((root, names, name))
    try:
        while stack:
            dfd, pending, dname = stack[-1]
            if not pending:
                stack.pop()
                os.close(dfd)
                try:
                    os.rmdir(dname, dir_fd=stack[-1][0] if stack else parent_fd)
                except FileNotFoundError:
                    pass
                except OSError as e:  # not empty: what failed below is already recorded
                    first = first or e
                continue
            child = pending.pop()
            try:
                if _unlink_plain(dfd, child, mount):
                    continue
                if len(stack) >= REMOVE_HELD_DIRS:
                    # Moved up, or left and reported: entering it in place would hold one more descriptor per level.
                    stack[0][1].append(_move_up(dfd, child, root, mount))
                    continue
                cfd = _open_dir_for_removal(dfd, child, mount)
            except FileNotFoundError:
                continue  # gone meanwhile: nothing to remove
            except OSError as e:
                first = first or e
                continue
            try:
                names = sorted(os.listdir(cfd))
            except OSError as e:
                os.close(cfd)
                first = first or e
                continue
            stack.append((cfd, names, child))
    finally:
        for dfd, _, _ in stack:
            os.close(dfd)
    if first is not None:
        raise first


def _move_up(dfd: int, child: str, top_fd: int, mount: int | None) -> str:
    """Move the directory ``child`` of ``dfd`` to a fresh name in ``top_fd``; the name.

    Renaming a directory into another parent rewrites its ``..``, which needs write access to
    it and no immutable flag: :func:`_open_dir_for_removal` gives both first. If ``child`` was
    swapped for a link meanwhile, the link itself moves (``renameat`` follows nothing) and is
    unlinked later.

    Raises:
        OSError: it cannot move (a mount point, another filesystem, a flag on ``dfd``): the
            caller reports it and leaves it, never enters it in place.
    """
    import secrets  # lazy: as in create_at

    os.close(_open_dir_for_removal(dfd, child, mount))
    last: OSError | None = None
    for _ in range(4):
        fresh = f".attest-removing-{secrets.token_hex(16)}"
        try:
            os.rename(child, fresh, src_dir_fd=dfd, dst_dir_fd=top_fd)
            return fresh
        except (FileExistsError, IsADirectoryError, NotADirectoryError) as e:
            last = e  # that name exists (it never should): draw another
        except OSError as e:
            if e.errno != errno.ENOTEMPTY:
                raise
            last = e
    raise last or OSError(errno.EEXIST, "no fresh name to move the directory up to", child)


def _open_dir_for_removal(parent_fd: int, name: str, mount: int | None = None) -> int:
    """Open a directory on ``mount`` (None: any) so its entries can be unlinked.

    Clears the immutable and append-only flags (a directory has no second name they could
    protect) and gives the owner rwx back: a `readonly` image's directories are 0555, and its
    non-root owner could otherwise never remove them. A directory the owner cannot even read is
    made accessible through an O_PATH descriptor of exactly that inode (``/proc/self/fd``), never
    by a path that could have been swapped for a link. A directory on another mount is refused
    (EBUSY) before any of that.
    """
    try:
        fd = os.open(name, O_DIR, dir_fd=parent_fd)
    except PermissionError:
        pfd = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=parent_fd)
        try:
            _on_mount(pfd, mount, name)
            os.chmod(f"/proc/self/fd/{pfd}", 0o700)
        finally:
            os.close(pfd)
        fd = os.open(name, O_DIR, dir_fd=parent_fd)
    try:
        _on_mount(fd, mount, name)
        clear_immutable(fd, also=FS_APPEND_FL)
        if stat.S_IMODE(os.fstat(fd).st_mode) & 0o700 != 0o700:
            os.fchmod(fd, 0o700)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _unlink_plain(dfd: int, name: str, mount: int | None) -> bool:
    """Remove the non-directory ``name`` of ``dfd``; False when it is a directory, which the caller enters.

    One ``unlinkat`` for what has no immutable flag, instead of a stat, an open, a flag read and
    a close before it; only a refused unlink looks further, by :func:`_unlink_entry`'s rule. A name ``unlinkat`` calls a directory is one: a link to a
    directory is unlinked like any link, never entered.
    """
    try:
        os.unlink(name, dir_fd=dfd)
        return True
    except IsADirectoryError:
        return False
    except PermissionError:
        pass  # an immutable or append-only flag, or a directory without write access (raised again below)
    st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
    if stat.S_ISDIR(st.st_mode):
        return False
    _unlink_entry(dfd, name, st, mount)
    return True


def _unlink_entry(dfd: int, name: str, st: os.stat_result, mount: int | None) -> None:
    # A hard-linked file keeps its flag: clearing it would unseal its other, outside name too
    # (an immutable one then fails to unlink, which the caller reports). So does a file that is
    # not the one-link inode the stat saw by the time it is opened, or not on the tree's mount
    # (an outside file bind-mounted over the name).
    if stat.S_ISREG(st.st_mode) and st.st_nlink == 1:
        try:
            fd = os.open(name, O_FILE, dir_fd=dfd)
        except OSError:
            fd = -1
        if fd >= 0:
            try:
                opened = os.fstat(fd)
                if ((opened.st_dev, opened.st_ino) == (st.st_dev, st.st_ino) and opened.st_nlink == 1
                        and (mount is None or mount_id(fd) == mount)):
                    clear_immutable(fd)
            finally:
                os.close(fd)
    os.unlink(name, dir_fd=dfd)
