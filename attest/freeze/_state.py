"""The deployment-managed state directory: layout, safe opening, private staging, removal.

Layout under ``STATE`` (every directory mode 0700, owned by the deployment user)::

    STATE/lock                 flock: freeze/exec hold it shared, gc exclusive
    STATE/staging/tmp-<rand>/  private staging of one freeze: tree/ and record.json
    STATE/store/<hex>/         a published image: tree/ (the frozen tree), record.json
    STATE/uses/<hex>           when the image was last frozen or run (gc keeps recent ones)
    STATE/runs/run-<rand>/     temp, cache and home of one ``attest exec`` (outside every image)

Everything is opened through directory descriptors with ``O_NOFOLLOW``, so that nothing swapped
in between a check and a use is ever followed (docs/freeze.md "What freeze does, step by step",
steps 1 and 3): a symlink planted anywhere in the layout, or a state directory reachable to other
users, is refused, and a staging name that already exists is an error, never reused.
"""

from __future__ import annotations

import errno
import fcntl
import os
import secrets
import stat
from collections.abc import Iterator
from contextlib import contextmanager

from .._safefs import O_DIR, O_OWN_RDWR
from .._safefs import remove_tree as _remove_at
from ..errors import AttestError, CommonCode, EnvironmentFailure, InputError, VerificationError
from ..inventory import open_root
from ._codes import FreezeCode

__all__ = ["O_DIR", "make_private_dir", "open_state", "open_sub", "random_name", "remove_tree", "state_lock"]
SUBDIRS = ("staging", "store", "uses", "runs")


def _check_private(st: os.stat_result, where: str) -> None:
    if not stat.S_ISDIR(st.st_mode):
        raise VerificationError(FreezeCode.STATE_SYMLINK, "not a directory", where)
    if st.st_uid != os.geteuid():
        raise EnvironmentFailure(FreezeCode.STATE_INSECURE, f"owned by uid {st.st_uid}, not the deployment user {os.geteuid()}", where)
    if st.st_mode & 0o077:
        raise EnvironmentFailure(
            FreezeCode.STATE_INSECURE, f"mode {stat.S_IMODE(st.st_mode):04o} lets other users in; it must be 0700", where
        )


def check_ancestor(st: os.stat_result, where: str) -> None:
    """Refuse an ancestor of the state directory that another user could rename entries in (pure).

    Paths below the state directory are handed on after verification (``exec`` gives the command
    ``STATE/store/<hex>/tree``); if another user may rename an ancestor's entries, they can swap
    in a look-alike state between the check and the use. Allowed: owned by root or the
    deployment user, and not group- or world-writable unless sticky (``/tmp``: others may then
    rename only what they own, and the next component is checked the same way).
    """
    if st.st_uid not in (0, os.geteuid()):
        raise EnvironmentFailure(FreezeCode.STATE_INSECURE, f"an ancestor of the state directory is owned by uid {st.st_uid}, "
                                 "who could swap the state directory for a look-alike", where)
    if st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX:
        raise EnvironmentFailure(FreezeCode.STATE_INSECURE, f"an ancestor of the state directory has mode {stat.S_IMODE(st.st_mode):04o}: "
                                 "other users could rename the state directory away and plant another", where)


def _check_ancestors(path: str) -> None:
    parent = os.path.dirname(path)
    walked = ""
    fd = os.open("/", O_DIR)
    try:
        check_ancestor(os.fstat(fd), "/")
        for part in [p for p in parent.split("/") if p]:
            walked += "/" + part
            nfd = os.open(part, O_DIR, dir_fd=fd)
            os.close(fd)
            fd = nfd
            check_ancestor(os.fstat(fd), walked)
    except OSError:
        return  # a link or a missing component: opening the state directory says exactly which
    finally:
        os.close(fd)


def open_state(state_dir: str | os.PathLike[str], *, create: bool = True) -> int:
    """Open (creating with mode 0700 if allowed) the state directory; refuse links and sharing.

    Every ancestor is checked too (:func:`check_ancestor`): a private state directory under a
    directory others may write is not private. Not allowed to create it, a missing state
    directory is ``UNREADABLE`` (an ``InputError``): there is nothing in it to read.
    """
    path = os.path.abspath(os.fspath(state_dir))
    _check_ancestors(path)
    if create:
        parent, name = os.path.split(path)
        pfd = _open_path(parent)
        try:
            try:
                os.mkdir(name, 0o700, dir_fd=pfd)
            except FileExistsError:
                pass
            except OSError as e:
                raise EnvironmentFailure(FreezeCode.STAGING_FAILED, f"cannot create the state directory: {e.strerror}", path) from e
        finally:
            os.close(pfd)
    elif not os.path.lexists(path):
        # Only read here: a missing state directory holds nothing to read, and is the caller's mistake.
        raise InputError(CommonCode.UNREADABLE, "the state directory does not exist (pass --state-dir, or set $ATTEST_STATE_DIR)", path)
    fd = _open_path(path)
    try:
        _check_private(os.fstat(fd), path)
        return fd
    except BaseException:
        os.close(fd)
        raise


def _open_path(path: str) -> int:
    try:
        return open_root(path)
    except AttestError as e:
        code = FreezeCode.STATE_SYMLINK if e.code == "ROOT_SYMLINK" else FreezeCode.STAGING_FAILED
        cls = VerificationError if code is FreezeCode.STATE_SYMLINK else EnvironmentFailure
        raise cls(code, e.detail, path) from e


def open_sub(state_fd: int, name: str, where: str, *, create: bool = True) -> int:
    """Open ``STATE/name``, a private directory, without following a planted link."""
    if create:
        try:
            os.mkdir(name, 0o700, dir_fd=state_fd)
        except FileExistsError:
            pass
        except OSError as e:
            raise EnvironmentFailure(FreezeCode.STAGING_FAILED, f"cannot create: {e.strerror}", where) from e
    try:
        fd = os.open(name, O_DIR, dir_fd=state_fd)
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.ENOTDIR):
            raise VerificationError(FreezeCode.STATE_SYMLINK, "a symbolic link or non-directory is planted here", where) from e
        raise EnvironmentFailure(FreezeCode.STAGING_FAILED, f"cannot open: {e.strerror}", where) from e
    try:
        _check_private(os.fstat(fd), where)
        return fd
    except BaseException:
        os.close(fd)
        raise


def make_private_dir(parent_fd: int, name: str, where: str) -> int:
    """Create ``name`` fresh (mode 0700) and open it; an existing or linked path is an error."""
    try:
        os.mkdir(name, 0o700, dir_fd=parent_fd)
    except FileExistsError as e:
        raise VerificationError(FreezeCode.STAGING_EXISTS, "the staging path already exists (never reused)", where) from e
    except OSError as e:
        raise EnvironmentFailure(FreezeCode.STAGING_FAILED, f"cannot create: {e.strerror}", where) from e
    try:
        fd = os.open(name, O_DIR, dir_fd=parent_fd)
    except OSError as e:
        raise VerificationError(FreezeCode.STAGING_EXISTS, f"the fresh staging directory was replaced: {e.strerror}", where) from e
    st = os.fstat(fd)
    if st.st_uid != os.geteuid() or st.st_nlink != 2 or stat.S_IMODE(st.st_mode) & 0o077:
        os.close(fd)
        raise VerificationError(FreezeCode.STAGING_EXISTS, "the fresh staging directory is not the one just created", where)
    return fd


def remove_tree(parent_fd: int, name: str, where: str | None = None) -> None:
    """Remove ``parent/name`` and everything in it (:func:`attest._safefs.remove_tree`).

    Through descriptors only, never following a link, holding a bounded number of them however
    deep the tree is (a run's home can hold what its command left: a 30,000-level tree, a FIFO,
    a 0000-mode directory). ``where`` names it in the error (by default the path the kernel
    gives ``parent_fd``, shown only, never opened).

    Raises:
        EnvironmentFailure: ``REMOVAL_FAILED`` when an entry cannot be removed (everything else
            is removed first).
    """
    try:
        _remove_at(parent_fd, name)
    except OSError as e:
        if where is None:
            try:
                where = os.path.join(os.readlink(f"/proc/self/fd/{parent_fd}"), name)
            except OSError:
                where = name
        what = f": {e.filename!r}" if e.filename else ""
        raise EnvironmentFailure(FreezeCode.REMOVAL_FAILED, f"cannot remove everything in it ({e.strerror}{what})", where) from e


def random_name(prefix: str) -> str:
    return f"{prefix}-{secrets.token_hex(16)}"


@contextmanager
def state_lock(state_fd: int, *, exclusive: bool) -> Iterator[None]:
    """Shared for freeze and exec, exclusive for gc, so gc never removes an image in use."""
    fd = os.open("lock", O_OWN_RDWR, 0o600, dir_fd=state_fd)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        yield
    finally:
        os.close(fd)
