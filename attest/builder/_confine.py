"""The confinement's new root, laid out by one process: every mount a step's root needs, as system calls.

Run by the confinement's shell (``_CONFINE`` of :mod:`attest.builder._sandbox`) inside its new
namespaces, before it chroots, as ``python -I -S -B _confine.py ROOT ITEM... -- WRITABLE... --``:
the interpreter attest runs on, isolated from the environment and from site-packages, so this
file imports nothing but the standard library. One interpreter making the system calls replaces
what was about a hundred ``mount``, ``findmnt``, ``mkdir`` and ``ln`` processes (70-100 ms of
CPU for every build step and every confined reviewer; this is about 15 ms).

It builds exactly the root the shell described: a tmpfs at ROOT holding fresh tmpfs ``/tmp``,
``/var/tmp`` and ``/run``; each ITEM in order (a read-only bind of a host directory, recursive,
every mount under it remounted read-only, nosuid and nodev, keeping the ``noexec`` and atime
flags it has, which a user namespace may not clear; a read-only bind of a host file; a host
symlink recreated as a symlink; ``fd:N:/path`` and ``fdnx:N:/path`` the directory open as
descriptor N (bound by the path it has now, then checked to be that very directory), ``noexec``
too for ``fdnx``; ``file:N:/etc/...`` the bytes of descriptor N copied
into a new file of the root's own tmpfs; ``lo:IP`` is the shell's, skipped here); each WRITABLE
directory bound read-write, nosuid, nodev; a tmpfs ``/dev`` with only null, zero, full, random
and urandom bound in and the usual links; a tmpfs ``/dev/shm``; ``/var/run`` linked to ``/run``;
a new ``/proc``; and the root itself remounted read-only. Any failure prints
``attest-sandbox: WHAT: WHY`` and exits 97, before any step runs.
"""

from __future__ import annotations

import ctypes
import os
import stat
import sys
from collections.abc import Sequence

MS_RDONLY = 0x1
MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_NOEXEC = 0x8
MS_REMOUNT = 0x20
MS_NOATIME = 0x400
MS_NODIRATIME = 0x800
MS_BIND = 0x1000
MS_REC = 0x4000
MS_PRIVATE = 1 << 18
MS_RELATIME = 1 << 21

# The per-mount flags a remount keeps as the mount has them (a user namespace may not clear them), by their name in
# /proc/self/mountinfo.
KEPT = {"noexec": MS_NOEXEC, "noatime": MS_NOATIME, "nodiratime": MS_NODIRATIME, "relatime": MS_RELATIME}
DEVICES = ("null", "zero", "full", "random", "urandom")
DEV_LINKS = (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"), ("stderr", "/proc/self/fd/2"))
TMPFS = "mode=1777,size=512m"
SYNTHESIZED = "/etc/"


class Failed(Exception):
    """The root cannot be laid out: the message says what, and the system's reason why."""


def remount_flags(options: str, *, readonly: bool, noexec: bool = False) -> int:
    """The ``mount(2)`` flags that remount a bind ``readonly`` or not, nosuid, nodev, keeping the flags of :data:`KEPT`.

    ``options`` is the mount's per-mount options as ``/proc/self/mountinfo`` lists them
    (``rw,nosuid,relatime``); ``noexec`` adds that flag whatever the mount has (pure).
    """
    flags = MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NODEV | (MS_RDONLY if readonly else 0) | (MS_NOEXEC if noexec else 0)
    for name in options.split(","):
        flags |= KEPT.get(name, 0)
    return flags


def unescape(field: str) -> str:
    """A path of ``/proc/self/mountinfo`` with the kernel's octal escapes (``\\040`` for a space) undone (pure)."""
    if "\\" not in field:
        return field
    out, i = bytearray(), 0
    raw = os.fsencode(field)
    while i < len(raw):
        if raw[i] == 0x5C and i + 3 < len(raw) and all(0x30 <= c <= 0x37 for c in raw[i + 1:i + 4]):
            out.append(int(raw[i + 1:i + 4], 8))
            i += 4
        else:
            out.append(raw[i])
            i += 1
    return os.fsdecode(bytes(out))


def submounts(mountinfo: str, target: str) -> list[tuple[str, str]]:
    """The mount at ``target`` (the top one, if several are stacked there) and every mount below it, each as
    (mount point, per-mount options), parents first: what ``findmnt -R`` lists (pure)."""
    rows = []
    for line in mountinfo.splitlines():
        fields = line.split(" ")
        if len(fields) >= 6:
            rows.append((fields[0], fields[1], unescape(fields[4]), fields[5]))
    tops = [r for r in rows if r[2] == target]
    if not tops:
        return []
    out, ids = [(tops[-1][2], tops[-1][3])], {tops[-1][0]}
    grown = True
    while grown:  # the kernel lists a mount after its parent, so one pass is the rule; more cost nothing
        grown = False
        for mid, parent, point, options in rows:
            if parent in ids and mid not in ids:
                ids.add(mid)
                out.append((point, options))
                grown = True
    return out


class Root:
    """The new root being laid out at ``path``, through ``mount(2)`` and plain file system calls."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._libc = ctypes.CDLL(None, use_errno=True)
        self._libc.mount.argtypes = (ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p)

    def mount(self, source: str | None, target: str, fstype: str | None, flags: int, data: str | None, what: str) -> None:
        enc = [None if s is None else os.fsencode(s) for s in (source, target, fstype, data)]
        if self._libc.mount(enc[0], enc[1], enc[2], flags, enc[3]) != 0:
            raise Failed(f"{what}: {os.strerror(ctypes.get_errno())}")

    def inside(self, path: str) -> str:
        return self.path + path

    def makedirs(self, path: str, what: str) -> None:
        try:
            os.makedirs(path, exist_ok=True)
        except OSError as e:
            raise Failed(f"{what}: {e.strerror}") from None

    def options(self, point: str) -> str:
        """The per-mount options of the mount at ``point`` (the top one)."""
        found = submounts(_mountinfo(), os.path.realpath(point))
        if not found:
            raise Failed(f"no mount at {point}")
        return found[0][1]

    def bind_ro_dir(self, source: str, target: str, *, noexec: bool = False) -> None:
        where = self.inside(target)
        self.makedirs(where, f"cannot bind {target}")
        self.mount(source, where, None, MS_BIND | MS_REC, None, f"cannot bind {target}")
        for point, options in submounts(_mountinfo(), os.path.realpath(where)):
            self.mount(None, point, None, remount_flags(options, readonly=True, noexec=noexec), None,
                       f"cannot make {point} read-only")

    def bind_descriptor(self, fd: int, target: str, *, noexec: bool) -> None:
        """Bind the directory open as ``fd`` read-only at ``target``, and check that what is bound is that directory.

        The descriptor was opened outside this mount namespace, and the kernel binds no mount of another namespace
        (EINVAL): the directory is bound by the path it has now in this one (as ``mount(8)`` did, canonicalizing
        ``/proc/self/fd/N``), then the root of the new bind must be the descriptor's own inode, or nothing runs.
        """
        try:
            source, held = os.readlink(f"/proc/self/fd/{fd}"), os.fstat(fd)
        except OSError as e:
            raise Failed(f"cannot bind {target}: descriptor {fd}: {e.strerror}") from None
        # A pipe's or socket's link is `pipe:[INO]`, a path relative to the working directory: nothing is bound for it.
        if not stat.S_ISDIR(held.st_mode) or not source.startswith("/"):
            raise Failed(f"cannot bind {target}: descriptor {fd} is no directory with a path ({source!r})")
        self.bind_ro_dir(source, target, noexec=noexec)
        try:
            bound = os.stat(self.inside(target))
        except OSError as e:
            raise Failed(f"cannot bind {target}: {e.strerror}") from None
        if (bound.st_dev, bound.st_ino) != (held.st_dev, held.st_ino):
            raise Failed(f"cannot bind {target}: {source} is no longer the directory of descriptor {fd}")

    def bind_file(self, path: str) -> None:
        where = self.inside(path)
        self.makedirs(os.path.dirname(where), f"cannot bind {path}")
        try:
            os.close(os.open(where, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666))
        except OSError as e:
            raise Failed(f"cannot bind {path}: {e.strerror}") from None
        self.mount(path, where, None, MS_BIND, None, f"cannot bind {path}")
        self.mount(None, where, None, remount_flags(self.options(where), readonly=True), None, f"cannot bind {path}")

    def bind_rw_dir(self, path: str) -> None:
        where = self.inside(path)
        self.makedirs(where, f"cannot bind {path} read-write")
        self.mount(path, where, None, MS_BIND, None, f"cannot bind {path} read-write")
        self.mount(None, where, None, remount_flags(self.options(where), readonly=False), None, f"cannot bind {path} read-write")

    def link(self, path: str, to: str, what: str) -> None:
        try:
            os.symlink(to, self.inside(path))
        except OSError as e:
            raise Failed(f"{what}: {e.strerror}") from None

    def synthesize(self, fd: int, path: str) -> None:
        if not path.startswith(SYNTHESIZED) or not normal_target(path):
            raise Failed(f"a synthesized file must be a normal path under /etc: {path!r}")
        where = self.inside(path)
        if os.path.lexists(where):
            raise Failed(f"{path} is synthesized twice")
        self.makedirs(os.path.dirname(where), f"cannot write {path}")
        try:
            with open(f"/proc/self/fd/{fd}", "rb") as src, open(where, "xb") as dst:
                while chunk := src.read(1 << 16):
                    dst.write(chunk)
        except OSError as e:
            raise Failed(f"cannot write {path}: {e.strerror}") from None


def _mountinfo() -> str:
    with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as f:
        return f.read()


def normal_target(target: str) -> bool:
    """Whether ``target`` is a normal absolute path below ``/``: nothing such as ``/../x`` that the new root's own path
    joined to it would lead out of the root (pure)."""
    return target.startswith("/") and target != "/" and os.path.normpath(target) == target and "\0" not in target


def _descriptor(item: str) -> tuple[int, str]:
    number, _, target = item.partition(":")[2].partition(":")
    if not number.isdigit() or not number.isascii():
        raise Failed(f"bad descriptor {number}")
    if not normal_target(target):
        raise Failed(f"a descriptor's target must be a normal absolute path: {target!r}")
    return int(number), target


def lay_out(path: str, items: Sequence[str], writable: Sequence[str]) -> None:
    """Lay out the new root at ``path`` (module docstring); raise :class:`Failed` at the first thing that cannot be done."""
    root = Root(path)
    root.mount("none", "/", None, MS_REC | MS_PRIVATE, None, "cannot make mounts private")
    root.mount("attest-root", path, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755", "cannot mount the new root")
    # The fresh tmpfs directories come first, so a read-only bind below them (a venv or an interpreter under /tmp) lands
    # on top of the tmpfs instead of being hidden by it.
    for t in ("/tmp", "/var/tmp", "/run"):
        root.makedirs(root.inside(t), "cannot lay out the new root")
        root.mount("attest-tmp", root.inside(t), "tmpfs", MS_NOSUID | MS_NODEV, TMPFS, f"cannot mount {t}")
    for item in items:
        kind = item.partition(":")[0]
        if kind in ("fd", "fdnx"):
            fd, target = _descriptor(item)
            root.bind_descriptor(fd, target, noexec=kind == "fdnx")
            os.close(fd)
        elif kind == "file":
            fd, target = _descriptor(item)
            root.synthesize(fd, target)
            os.close(fd)
        elif kind == "lo":
            continue
        elif os.path.islink(item):
            root.makedirs(root.inside(os.path.dirname(item)), f"cannot link {item}")
            root.link(item, os.readlink(item), f"cannot link {item}")
        elif os.path.isdir(item):
            root.bind_ro_dir(item, item)
        elif os.path.isfile(item):
            root.bind_file(item)
    for w in writable:
        if not os.path.isdir(w) or os.path.islink(w):
            raise Failed(f"writable {w} is not a directory")
        root.bind_rw_dir(w)
    dev = root.inside("/dev")
    root.makedirs(dev, "cannot lay out the new root")
    root.makedirs(root.inside("/proc"), "cannot lay out the new root")
    root.mount("attest-dev", dev, "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755", "cannot mount /dev")
    for n in DEVICES:
        try:
            os.close(os.open(f"{dev}/{n}", os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666))
        except OSError as e:
            raise Failed(f"cannot bind /dev/{n}: {e.strerror}") from None
        root.mount(f"/dev/{n}", f"{dev}/{n}", None, MS_BIND, None, f"cannot bind /dev/{n}")
    for name, to in DEV_LINKS:
        root.link(f"/dev/{name}", to, "cannot lay out /dev")
    try:
        os.mkdir(f"{dev}/shm")
    except OSError as e:
        raise Failed(f"cannot lay out /dev: {e.strerror}") from None
    root.mount("attest-tmp", f"{dev}/shm", "tmpfs", MS_NOSUID | MS_NODEV, TMPFS, "cannot mount /dev/shm")
    if not os.path.lexists(root.inside("/var/run")):
        root.link("/var/run", "/run", "cannot link /var/run")
    root.mount("proc", root.inside("/proc"), "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None, "cannot mount a new /proc")
    root.mount(None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, None,
               "cannot make the new root read-only")


def main(argv: Sequence[str]) -> int:
    """``ROOT ITEM... -- WRITABLE... --``: lay the root out; 0, or 97 with the reason on stderr."""
    args = list(argv)
    try:
        if not args or "--" not in args[1:]:
            raise Failed("no command")
        path, rest = args[0], args[1:]
        split = rest.index("--")
        items, after = rest[:split], rest[split + 1:]
        if "--" not in after:
            raise Failed("no command")
        lay_out(path, items, after[:after.index("--")])
    except Failed as e:
        sys.stderr.write(f"attest-sandbox: {e}\n")
        return 97
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
