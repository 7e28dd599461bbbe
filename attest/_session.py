"""A child that keeps nothing of its caller's session: no controlling terminal, no keyring.

Two things a process keeps across fork, exec, a uid change and every namespace, and that a
confined command (the reviewer, a build step) must not get:

- **the caller's terminal.** A process holding a descriptor of it can push input into it
  (``TIOCSTI``: the caller's shell runs it, as the caller, once attest returns), read the
  operator's keystrokes, or reopen ``/proc/self/fd/2`` (the caller's log file). :func:`start`
  starts the child in a new session (no controlling terminal), stdin ``/dev/null``, stderr (and
  stdout, unless the caller gives a descriptor of its own) on pipes that :func:`relay` copies to
  attest's own, a bounded chunk at a time, control characters neutralized on a terminal.
- **the caller's keyrings.** A process possessing a session keyring reads every key linked
  there, whatever its uid or namespaces; and a process of the caller's uid (a rootless
  confinement) can link any keyring of the caller's into its own by serial number
  (``/proc/keys`` lists them) and read it. :func:`child_setup` makes the child join a new,
  empty session keyring (``keyctl(KEYCTL_JOIN_SESSION_KEYRING, NULL)``) before it execs and,
  for a confined child, installs a seccomp filter (after no_new_privs) that refuses ``add_key``,
  ``request_key`` and ``keyctl`` (``ENOSYS``) for it and all it starts, for every system-call
  ABI the machine runs. Everything is bound in the parent: the child only makes the calls.

Where ``keyctl`` fails in attest itself (keyrings compiled out: ``ENOSYS``; refused by a seccomp
filter of a container: ``EPERM``), nothing is inherited and nothing can be read: the child then
runs without either call and :func:`keyring_statement` says so. Where it works, any failure of
either call fails closed: the child never runs.

    >>> proc = start(argv, env=env, cwd=cwd, stdout=fd, deny_keyrings=True)
    >>> rc = relay(proc, stdout=None)
"""

from __future__ import annotations

import codecs
import ctypes
import errno
import functools
import os
import selectors
import signal
import subprocess
from collections.abc import Callable, Mapping, Sequence

from ._fdio import write_all

_KEYCTL_JOIN_SESSION_KEYRING = 1
_KEYCTL_NO_SUCH_OPERATION = 0x7FFF  # answered EOPNOTSUPP wherever keyctl exists and may be called
_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2
_X32_BIT = 0x40000000

# Per machine (os.uname().machine): each ABI its processes can call the kernel with, as
# (AUDIT_ARCH_*, mask applied to the system-call number, (add_key, request_key, keyctl)); the
# first is the 64-bit one, the second (if any) the 32-bit compat one. From the kernel's
# syscall tables (arch/*/entry/syscalls, include/uapi/asm-generic/unistd.h).
_ABIS: dict[str, tuple[tuple[int, int, tuple[int, int, int]], ...]] = {
    # x86-64 (x32 shares these numbers with _X32_BIT set), and i386 through int 0x80.
    "x86_64": ((0xC000003E, 0xFFFFFFFF & ~_X32_BIT, (248, 249, 250)), (0x40000003, 0xFFFFFFFF, (286, 287, 288))),
    "aarch64": ((0xC00000B7, 0xFFFFFFFF, (217, 218, 219)), (0x40000028, 0xFFFFFFFF, (309, 310, 311))),
    "riscv64": ((0xC00000F3, 0xFFFFFFFF, (217, 218, 219)), (0x400000F3, 0xFFFFFFFF, (217, 218, 219))),
    "ppc64le": ((0xC0000015, 0xFFFFFFFF, (269, 270, 271)),),
    "s390x": ((0x80000016, 0xFFFFFFFF, (278, 279, 280)), (0x00000016, 0xFFFFFFFF, (278, 279, 280))),
    "i386": ((0x40000003, 0xFFFFFFFF, (286, 287, 288)),),
}
_MACHINES = {"amd64": "x86_64", "arm64": "aarch64", "i486": "i386", "i586": "i386", "i686": "i386"}


class _SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter))]


def _abis() -> tuple[tuple[int, int, tuple[int, int, int]], ...] | None:
    machine = os.uname().machine
    return _ABIS.get(_MACHINES.get(machine, machine))


def keyring_filter(abis: Sequence[tuple[int, int, tuple[int, int, int]]]) -> list[tuple[int, int, int, int]]:
    """The seccomp program (``(code, jt, jf, k)`` each) refusing the keyring calls of ``abis`` with ENOSYS (pure).

    Raises:
        Nothing.
    """
    ld, jeq, ret, and_ = 0x20, 0x15, 0x06, 0x54  # BPF_LD|W|ABS, BPF_JMP|JEQ|K, BPF_RET|K, BPF_ALU|AND|K
    allow, deny = 0x7FFF0000, 0x00050000 | errno.ENOSYS  # SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO
    blocks = [[(ld, 0, 0, 0), *([(and_, 0, 0, mask)] if mask != 0xFFFFFFFF else []), *((jeq, -1, 0, n) for n in nrs),
               (ret, 0, 0, allow)] for _, mask, nrs in abis]
    prog: list[tuple[int, int, int, int]] = [(ld, 0, 0, 4)]  # seccomp_data.arch
    start = 1 + len(abis) + 1
    for i, (arch, _, _) in enumerate(abis):
        prog.append((jeq, start - (len(prog) + 1), 0, arch))
        start += len(blocks[i])
    prog.append((ret, 0, 0, allow))  # an ABI this machine does not have
    deny_at = start
    for block in blocks:
        for code, jt, jf, k in block:
            prog.append((code, deny_at - (len(prog) + 1) if jt == -1 else jt, jf, k))
    prog.append((ret, 0, 0, deny))
    return prog


@functools.cache
def keyring_errno() -> int:
    """0 where attest may call ``keyctl`` (so a child would inherit a keyring); else the errno it gets.

    Asks with an operation no kernel has (``EOPNOTSUPP`` where keyctl works); no keyring is touched.

    Raises:
        Nothing.
    """
    abis = _abis()
    if abis is None:
        return 0  # unknown here: child_setup refuses rather than guess
    libc = ctypes.CDLL(None, use_errno=True)
    call = libc.syscall
    call.restype = ctypes.c_long
    nr = abis[0][2][2] if ctypes.sizeof(ctypes.c_void_p) == 8 or len(abis) == 1 else abis[1][2][2]
    if call(ctypes.c_long(nr), ctypes.c_long(_KEYCTL_NO_SUCH_OPERATION), ctypes.c_long(0)) >= 0:
        return 0
    err = ctypes.get_errno()
    return 0 if err == errno.EOPNOTSUPP else err


def keyring_statement(*, deny: bool) -> str:
    """What a child started with :func:`child_setup` (``deny_keyrings=deny``) has of keyrings, for the records.

    Raises:
        Nothing.
    """
    err = keyring_errno()
    if err:
        name = errno.errorcode.get(err, str(err))
        if deny:
            return (f"keyctl fails for attest here ({name}: keyrings compiled out, or refused by a filter of the caller's), "
                    "so no new session keyring could be joined; add_key, request_key and keyctl are refused on every "
                    "system-call ABI (seccomp, ENOSYS), so no keyring of the caller's is reachable")
        return (f"keyctl fails for attest here ({name}): no new session keyring could be joined; the command runs as "
                "the caller")
    if deny:
        return ("a new, empty session keyring; add_key, request_key and keyctl refused (seccomp, ENOSYS), so no keyring "
                "of the caller's is reachable, not even by serial number")
    return ("a new, empty session keyring, not the caller's; the command runs as the caller, so the caller's other "
            "keyrings stay reachable by serial number")


def child_setup(*, deny_keyrings: bool) -> Callable[[], None]:
    """A ``preexec_fn``: join a new, empty session keyring, then (``deny_keyrings``) refuse the keyring calls.

    The library functions and the filter are bound here, in the parent; the child only calls
    them, and raises (so the command never runs) if a call fails where keyrings exist.

    Raises:
        OSError: ``ENOSYS`` where keyrings exist but this machine's system-call numbers are not known.
    """
    abis = _abis()
    if abis is None and keyring_errno():
        return _nothing  # keyrings refused here, and no filter can be built for this machine's numbers
    if abis is None:
        raise OSError(errno.ENOSYS, f"cannot keep the caller's keyrings from the command on {os.uname().machine}: "
                                    "its system-call numbers are not known to attest")
    native = ctypes.sizeof(ctypes.c_void_p) == 8 or len(abis) == 1
    keyctl_nr = ctypes.c_long(abis[0][2][2] if native else abis[1][2][2])
    libc = ctypes.CDLL(None, use_errno=True)
    call, prctl, get_errno = libc.syscall, libc.prctl, ctypes.get_errno
    call.restype = ctypes.c_long
    call.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_long]
    prctl.restype = ctypes.c_int
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    join, null = ctypes.c_long(_KEYCTL_JOIN_SESSION_KEYRING), ctypes.c_long(0)
    insns = keyring_filter(abis)
    table = (_SockFilter * len(insns))(*(_SockFilter(*i) for i in insns))
    prog = _SockFprog(len(insns), table)
    prog_at = ctypes.addressof(prog)

    def setup() -> None:
        # The filter below is installed whatever the join gives: a caller's filter may refuse only
        # the native keyctl (ENOSYS, EPERM) and leave another ABI's open, so a failed join proves
        # nothing about what the command could reach.
        if call(keyctl_nr, join, null) < 0:
            err = get_errno()
            if err not in (errno.ENOSYS, errno.EPERM, errno.EACCES):
                raise OSError(err, "cannot join a new session keyring")
        if deny_keyrings:
            if prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
                raise OSError(get_errno(), "cannot set no_new_privs")
            if prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, prog_at, 0, 0) != 0:
                raise OSError(get_errno(), "cannot install the keyring filter")

    setup.keep = (table, prog)  # type: ignore[attr-defined]  # alive as long as the callable
    return setup


def _nothing() -> None:
    return None


def popen_error(e: subprocess.SubprocessError) -> OSError:
    """The OSError for a child whose :func:`child_setup` failed (Popen says only "Exception occurred in preexec_fn").

    Raises:
        Nothing.
    """
    return OSError(errno.EPERM, "the command could not be started with a new, empty session keyring and the keyring "
                                f"system calls refused; it did not run ({e})")


def start(argv: Sequence[str], *, env: Mapping[str, str], cwd: str, stdout: int | None, pass_fds: Sequence[int] = (),
          deny_keyrings: bool = True) -> subprocess.Popen[bytes]:
    """Start ``argv`` in a new session, stdin ``/dev/null``, stderr (and stdout when None) on pipes for :func:`relay`.

    Raises:
        OSError: it cannot be started (:func:`child_setup`'s failures included, as :func:`popen_error`).
    """
    setup = child_setup(deny_keyrings=deny_keyrings)
    try:
        return subprocess.Popen(list(argv), env=dict(env), cwd=cwd, close_fds=True, pass_fds=tuple(pass_fds),
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE if stdout is None else stdout,
                                stderr=subprocess.PIPE, start_new_session=True, preexec_fn=setup)
    except subprocess.SubprocessError as e:
        raise popen_error(e) from e


_CHUNK = 1 << 16
# C0 and C1 controls but tab and newline, and DEL: what a terminal would act on (escape sequences).
_CONTROLS = {c: "?" for c in (*range(0x20), 0x7F, *range(0x80, 0xA0)) if c not in (0x09, 0x0A)}


class _Sink:
    """One descriptor of attest's own that a child's pipe is copied to; on a terminal, controls neutralized."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        try:
            self.decoder = codecs.getincrementaldecoder("utf-8")("replace") if os.isatty(fd) else None
        except OSError:
            self.decoder = None
        self.broken = False

    def write(self, chunk: bytes, *, final: bool = False) -> None:
        if self.decoder is not None:
            chunk = self.decoder.decode(chunk, final).translate(_CONTROLS).encode("utf-8")
        if not self.broken:
            try:
                write_all(self.fd, chunk)
            except OSError:
                self.broken = True  # attest's own output is gone: the child's is drained, not kept


def relay(proc: subprocess.Popen[bytes], *, stdout: int | None = 1, stderr: int = 2) -> int:
    """Copy the child's pipes to ``stdout`` / ``stderr`` (attest's own) until they close; its exit status.

    At most one chunk (64 KiB) of each is held at a time. Whatever interrupts the copy
    (``KeyboardInterrupt`` included) kills the child's process group first.

    Raises:
        Whatever interrupts it, after the child is killed and reaped.
    """
    pipes: dict[int, _Sink] = {}
    if proc.stderr is not None:
        pipes[proc.stderr.fileno()] = _Sink(stderr)
    if proc.stdout is not None and stdout is not None:
        pipes[proc.stdout.fileno()] = _Sink(stdout)
    try:
        with selectors.DefaultSelector() as sel:
            for fd in pipes:
                sel.register(fd, selectors.EVENT_READ)
            while sel.get_map():
                for key, _ in sel.select():
                    chunk = os.read(key.fd, _CHUNK)
                    if not chunk:
                        sel.unregister(key.fd)
                        pipes[key.fd].write(b"", final=True)
                        continue
                    pipes[key.fd].write(chunk)
        return proc.wait()
    except BaseException:
        if proc.returncode is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # unreaped, so its pid (the group's id) is not reused
            except (ProcessLookupError, PermissionError):
                proc.kill()
            proc.wait()
        raise
    finally:
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
