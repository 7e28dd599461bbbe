"""The hermetic runner: one build step in a fresh process with nothing inherited.

Each step gets a clean environment (fixed ``PATH``, ``HOME`` and ``TMPDIR`` inside the
staging directory, ``SOURCE_DATE_EPOCH``, ``PYTHONHASHSEED=0``, ``TZ=UTC``,
``LC_ALL=C.UTF-8``), a fixed ``umask``, no controlling terminal, and, when confined: new
network (no usable interface), mount, PID, IPC and UTS namespaces; a minimal root (the
system paths and the interpreters' prefixes read-only, nosuid, nodev; a tmpfs ``/dev``
with five harmless nodes; a new ``/proc``; fresh tmpfs ``/tmp``, ``/var/tmp``, ``/run``,
``/dev/shm``; only the step's own directories of the staging area read-write); no
capabilities, no_new_privs. Two confinements give this (:func:`decide_confinement`):

- ``rootful`` (the builder is root): the step runs as a uid/gid that no account or host
  process has (one per build);
- ``rootless`` (any other builder, where unprivileged user namespaces work): the same
  namespaces inside a new user namespace that maps only the caller's own uid and gid, so the
  step runs as the caller (as bubblewrap does); see :meth:`Sandbox.guarantees` for what that
  changes.

When neither can be established the step is refused with ``NETWORK_NOT_ISOLATED`` unless
the caller explicitly accepted an unisolated build; the result, the build record and the
input address then say so.

    >>> sandbox = Sandbox.establish(allow_unisolated_network=False)
    >>> sandbox.confinement
    'rootless'
    >>> sandbox.run([python, "-I", "-c", "print(1)"], cwd=staging, home=staging, staging=staging)
"""

from __future__ import annotations

import grp
import os
import pwd
import secrets
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from .._safefs import O_DIR, chown_tree
from .._session import keyring_statement
from ..errors import EnvironmentFailure
from ._capture import run_captured
from ._codes import BuildCode
from ._confine import normal_target

# 1980-01-01T00:00:00Z: the earliest time a zip (wheel) can record.
SOURCE_DATE_EPOCH = 315532800
BUILD_UMASK = 0o022


def clean_env(home: str, *, source_date_epoch: int = SOURCE_DATE_EPOCH, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The complete environment of a build step. Nothing of the caller's leaks in.

    Raises:
        Nothing: a new dict of fixed values, ``home`` and ``extra``.
    """
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": home,
        "TMPDIR": home,
        "SOURCE_DATE_EPOCH": str(source_date_epoch),
        "PYTHONHASHSEED": "0",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONNOUSERSITE": "1",
        "PYTHONUTF8": "1",
        "TZ": "UTC",
        "LC_ALL": "C.UTF-8",
        "LANG": "C.UTF-8",
        "PIP_NO_INDEX": "1",
        "PIP_CONFIG_FILE": os.devnull,
    }
    env.update(extra or {})
    return env


# The confinement, run by ``unshare --net --mount --pid --fork --ipc --uts`` (so as pid 1 of a
# new PID namespace): as root (``rootful``), or with the capabilities of a new user namespace
# that maps only the caller (``rootless``: ``unshare --user --map-current-user --keep-caps``
# first). It builds a new root on a tmpfs at $S/.sandbox-root holding only: the read-only
# paths it is given (bind mounts remounted ro,nosuid,nodev, keeping the noexec and atime flags
# they have, which a user namespace may not clear; host symlinks such as /bin -> usr/bin
# recreated as symlinks), a tmpfs /dev with only null, zero, full, random and urandom bound
# in, a fresh proc for the new PID namespace, fresh tmpfs /tmp, /var/tmp, /run (/var/run
# links to it) and /dev/shm, and the step's writable directories read-write (nosuid,nodev).
# A build step's read-only paths include the host's /etc; the reviewer's do not: its /etc is a
# directory of the new root's own tmpfs holding only the files it is given as descriptors
# (file:N:/etc/...), copied in before the binds and read-only with the root.
# The staging directory $S itself is never bound: a step sees only the directories below it
# that it is given, so it can neither plant anything where the host later looks nor touch the
# inputs of a later step. It then chroots there (a chrooted process cannot create a user
# namespace, so the step cannot gain capabilities in a namespace of its own), drops to the
# step's uid/gid with no supplementary groups (rootful; rootless keeps the caller's uid, the
# only one mapped) with no capabilities (bounding, inheritable and ambient sets emptied) and
# no_new_privs, restores the step's umask and execs the step in its working directory. Any
# failure exits 97 before the step runs.
# The new root is laid out by one process, the interpreter attest runs on (attest/builder/_confine.py, which prints its
# own "attest-sandbox:" reason and exits 97); this shell then closes its own copies of the descriptors that were bound
# or copied, brings up the loopback, sets the limits and runs the step.
# Arguments: S C PYTHON LAYOUT CHROOT SETPRIV UID|caller UMASK [file:N:/etc/...]... ro-path|fd:N:/path... -- rw-path... -- argv...
_CONFINE = r"""
S="$1"; C="$2"; PY="$3"; LAYOUT="$4"; CHROOT="$5"; SETPRIV="$6"; ID="$7"; U="$8"; shift 8
R="$S/.sandbox-root"
fail() { echo "attest-sandbox: $1" >&2; exit 97; }
umask 022
"$PY" -I -S -B "$LAYOUT" "$R" "$@" || { s=$?; [ "$s" = 97 ] && exit 97; fail "laying out the new root failed with exit $s"; }
while [ "$#" -gt 0 ] && [ "$1" != "--" ]; do
  P="$1"; shift
  case "$P" in
    # The descriptor is closed: nothing started later holds a directory outside the new root.
    fd:*|fdnx:*|file:*) N="${P#*:}"; N="${N%%:*}"
          case "$N" in ''|*[!0-9]*) fail "bad descriptor $N" ;; esac
          eval "exec $N<&-" ;;
    # lo:IP: bring the new network namespace's loopback up with the program IP, before the step
    # starts (it has no capability to): the reviewer's own 127.0.0.1, reaching nothing else.
    lo:*) IP="${P#lo:}" ;;
  esac
done
[ "$1" = "--" ] || fail "no command"
shift
while [ "$#" -gt 0 ] && [ "$1" != "--" ]; do shift; done
[ "$1" = "--" ] || fail "no command"
shift
if [ -n "${IP:-}" ]; then "$IP" link set lo up || fail "cannot bring up the loopback interface"; fi
umask "$U" || fail "bad umask"
# Bounds the step cannot raise, against a step that exhausts the machine (docs/build.md
# "The build", step 4, limits): processes of its uid, and the size of any one file it writes,
# each lowered to the bound and never raised (a rootless caller cannot raise a hard limit; dash
# counts 512-byte blocks: 4 GiB).
# (bash, which runs the script when descriptors are bound, names the process limit -u and counts -f in KiB)
bound() {  # OPTION VALUE
  h=$(ulimit -H "$1") || return 1
  if [ "$h" = unlimited ] || [ "$h" -gt "$2" ]; then h="$2"; fi
  ulimit "$1" "$h"
}
if [ -n "${BASH_VERSION:-}" ]; then bound -u 4096 && bound -f 4194304; else bound -p 4096 && bound -f 8388608; fi \
  || fail "cannot set the step's limits"
# This shell stays pid 1 and waits, with its (namespace's) capabilities: the kernel clears a
# parent-death signal on any uid change, so the step itself cannot carry one. unshare
# --kill-child (and setpriv --pdeathsig on unshare) kill this pid 1 when the builder dies, and
# the kernel then kills every process of the namespace: an interrupted build leaves no step
# running. Rootful, the step's other uid keeps it out of /proc/1; rootless (the same uid), the
# capabilities it lacks do (ptrace access needs the target's capabilities to be a subset of
# the caller's).
if [ "$ID" = caller ]; then
  "$CHROOT" "$R" "$SETPRIV" --bounding-set=-all --inh-caps=-all --ambient-caps=-all \
    --no-new-privs -- /bin/sh -c 'cd "$0" && exec "$@"' "$C" "$@" &
else
  "$CHROOT" "$R" "$SETPRIV" --reuid="$ID" --regid="$ID" --clear-groups --bounding-set=-all --inh-caps=-all \
    --no-new-privs -- /bin/sh -c 'cd "$0" && exec "$@"' "$C" "$@" &
fi
wait "$!"
"""
_TOOLS_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"
# The program that lays out a confinement's new root (run by the interpreter attest runs on, -I -S).
_LAYOUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_confine.py")
_NAMESPACES = ("net", "mount", "pid", "ipc", "uts")
_UNSHARE_FLAGS = ("--net", "--mount", "--pid", "--fork", "--kill-child", "--ipc", "--uts")
# Rootless: a new user namespace mapping only the caller's uid and gid to themselves (no other
# id exists there, setgroups is denied), whose capabilities the confinement shell keeps
# (as ambient capabilities across its exec) to mount and chroot; the step gets none of them.
_USERNS_FLAGS = ("--user", "--map-current-user", "--keep-caps")

#: What every step (confined or not) holds of the builder's session (attest.builder._capture.run_captured).
_SESSION = "new session, no controlling terminal; stdin /dev/null; stdout and stderr captured through pipes"

#: The confinements a sandbox can have: ``rootful`` (root builds, steps as a uid of their own),
#: ``rootless`` (a user namespace mapping only the caller; steps as the caller), ``none``.
CONFINEMENTS = ("rootful", "rootless", "none")

# Confined steps run as a uid no host process has: one drawn per build from a range that no
# distribution allocates (just below 2^31), absent from the user database and checked against
# every running process. A shared uid such as nobody (65534) would let any host process of that
# uid write into a running build through /proc/PID/cwd, or ptrace its steps.
STEP_UID_RANGE = (0x7F000000, 0x7FFE0000)  # below systemd's foreign range 0x7FFE0000-0x7FFEFFFF
# What a build step may read: the system's programs and libraries and a read-only /etc.
# Interpreters outside these (a pyenv or venv prefix) are added per step by the builder.
SYSTEM_PATHS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
# Increment when what a confined step can reach changes: it is part of every input address.
SANDBOX_PROFILE = "attest-sandbox/v5"  # v5: a new, empty session keyring; confined, the keyring calls refused
# A rootless step reaches what a rootful one does, but runs as the caller (see Sandbox.guarantees):
# its own profile, so a rootless output never shares an input address with a rootful one.
ROOTLESS_PROFILE = f"{SANDBOX_PROFILE}+rootless"

# Where the kernel says whether unprivileged users may create user namespaces (Debian's switch,
# the per-user limit, Ubuntu's AppArmor restriction, which lets them be created without
# capabilities inside).
USERNS_SYSCTLS = {
    "unprivileged_userns_clone": "/proc/sys/kernel/unprivileged_userns_clone",
    "max_user_namespaces": "/proc/sys/user/max_user_namespaces",
    "apparmor_restrict_unprivileged_userns": "/proc/sys/kernel/apparmor_restrict_unprivileged_userns",
}


def decide_confinement(euid: int, sysctls: Mapping[str, str | None]) -> tuple[str, str | None]:
    """Which confinement a builder of ``euid`` can try, from the user-namespace sysctls (pure).

    ``sysctls`` maps the names of :data:`USERNS_SYSCTLS` to their contents (None: the file
    does not exist, as on kernels without that switch). Root confines ``rootful``: it has the
    privileges, and a rootless sandbox would run its steps as uid 0 of the host (owner of
    ``/etc/shadow``). Anyone else confines ``rootless`` unless the kernel forbids unprivileged
    user namespaces. The answer is what to *try*: the probe still has to succeed.

    Raises:
        Nothing: ``(confinement, None)``, or ``("none", why)``.
    """
    if euid == 0:
        return "rootful", None

    def value(name: str) -> str | None:
        raw = sysctls.get(name)
        return None if raw is None else raw.strip()

    clone, limit, apparmor = (value(n) for n in USERNS_SYSCTLS)
    if clone is not None and clone != "1":
        return "none", f"unprivileged user namespaces are disabled here (kernel.unprivileged_userns_clone = {clone or 'empty'})"
    if limit is not None and not (limit.isdigit() and int(limit) > 0):
        return "none", f"user namespaces are disabled here (user.max_user_namespaces = {limit or 'empty'})"
    if apparmor is not None and apparmor != "0":
        return "none", ("AppArmor restricts unprivileged user namespaces here "
                        f"(kernel.apparmor_restrict_unprivileged_userns = {apparmor or 'empty'})")
    return "rootless", None


def _read_sysctls() -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for name, path in USERNS_SYSCTLS.items():
        try:
            with open(path, "rb") as f:
                out[name] = f.read(64).decode("ascii", "replace")
        except FileNotFoundError:
            out[name] = None
        except OSError as e:  # unreadable: say so rather than guess
            out[name] = f"unreadable ({e.strerror})"
    return out


def _tools() -> tuple[str, ...] | None:
    found = tuple(shutil.which(t, path=_TOOLS_PATH) for t in ("unshare", "chroot", "setpriv"))
    return None if any(t is None for t in found) else found  # type: ignore[return-value]


def rootless_problem() -> str | None:
    """Why a rootless confinement cannot be made by this process, or None when it can.

    None only when this process is not root, :func:`decide_confinement` allows user
    namespaces and ``unshare --user --map-root-user true`` really runs (the confinement itself
    is probed by :meth:`Sandbox.establish` and, for the reviewer, by running it).

    Raises:
        Nothing: every failure is the returned reason.
    """
    if os.geteuid() == 0:
        return "the caller is root (root confines rootful)"
    mode, why = decide_confinement(os.geteuid(), _read_sysctls())
    if mode != "rootless":
        return why
    tools = _tools()
    if tools is None:
        return "unshare, chroot or setpriv is missing"
    with tempfile.TemporaryDirectory(prefix="attest-userns-probe-") as scratch:
        if not _probe([tools[0], "--user", "--map-root-user", "--", "/bin/true"], scratch):
            return "cannot create a user namespace here (unshare --user --map-root-user true failed)"
    return None


def not_isolated_detail(why_not: str | None, *, net: bool, rootless: bool) -> str:
    """The detail of ``NETWORK_NOT_ISOLATED`` (pure): what could not be made, and why when that is known.

    ``why_not`` is :func:`rootless_problem`'s answer (the kernel's setting, a missing tool, a failed
    ``unshare``); without it a probe failed, ``net`` saying whether the network namespace was made.
    """
    if why_not is not None:
        missing = f"a rootless sandbox (a user namespace): {why_not}"
    else:
        if not net:
            what = "a network namespace without interfaces" + (" in a user namespace" if rootless else "")
        elif rootless:
            what = "a confined mount/PID/IPC namespace in a user namespace (rootless)"
        else:
            what = "a confined mount/PID/IPC namespace as an unprivileged uid"
        missing = f"{what} here (unshare, mount or setpriv failed)"
    return (f"cannot create {missing}; pass --allow-network-unisolated to build anyway "
            "(recorded in the output and the input address)")


def readonly_roots(paths: Sequence[str], *, system: Sequence[str] = SYSTEM_PATHS) -> tuple[str, ...]:
    """Absolute, resolved, de-nested paths to expose read-only (``system`` paths always first)."""
    out: list[str] = []
    for p in [*system, *(os.path.realpath(x) for x in paths)]:
        if not os.path.isabs(p) or p == "/" or not os.path.lexists(p):
            continue
        if any(p == q or p.startswith(q.rstrip("/") + "/") for q in out):
            continue
        out = [q for q in out if not q.startswith(p + "/")]
        out.append(p)
    return tuple(out)


def python_roots(*, executable: str, stdlib: str | None = None, libraries: Sequence[str] = ()) -> tuple[str, ...]:
    """What running ``executable`` needs besides the system paths: its prefix and its libraries."""
    roots = [os.path.dirname(os.path.realpath(executable)), *(os.path.dirname(os.path.realpath(x)) for x in libraries)]
    if stdlib:
        roots.append(os.path.dirname(os.path.dirname(os.path.realpath(stdlib))))
    return tuple(roots)


def worker_roots() -> tuple[str, ...]:
    """What ``python -I -m attest.builder._worker`` needs: this interpreter, its venv, this package."""
    here = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))  # the attest package
    return (sys.prefix, sys.base_prefix, os.path.dirname(os.path.realpath(sys.executable)), here)


def _uids_in_use() -> set[int]:
    """Every real, effective, saved and filesystem uid of every process visible here."""
    used: set[int] = set()
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/status", "rb") as f:
                for line in f:
                    if line.startswith(b"Uid:"):
                        used.update(int(x) for x in line.split()[1:])
                        break
        except OSError:
            continue  # the process exited meanwhile
    return used


def pick_step_uid() -> int:
    """A uid for one build's steps that no account and no running process has.

    Only a rootful sandbox uses it; a rootless one runs its steps as the caller (the only uid
    its user namespace maps) and ignores the uid it is given.
    """
    used = _uids_in_use()
    lo, hi = STEP_UID_RANGE
    for _ in range(64):
        uid = lo + secrets.randbelow(hi - lo)
        if uid in used:
            continue
        try:
            pwd.getpwuid(uid)
            continue
        except KeyError:
            pass
        try:
            grp.getgrgid(uid)  # the step's gid is the same number
        except KeyError:
            return uid
    raise EnvironmentFailure(BuildCode.NETWORK_NOT_ISOLATED, "no unused uid found for the build step")


def _give_to_step(writable: Sequence[str], uid: int) -> None:
    """Hand each writable directory, and everything in it, to the step's uid (descriptors only)."""
    for w in writable:
        parent, name = os.path.split(w)
        pfd = os.open(parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            chown_tree(pfd, name, uid)
        finally:
            os.close(pfd)


#: Where the reviewer's synthesized /etc files may go (and nowhere else): ``file:N:/etc/...`` of ``_CONFINE``.
ETC = "/etc"


def confined_roots(paths: Sequence[str], *, host_etc: bool = True) -> tuple[str, ...]:
    """Exactly the read-only roots a confinement binds for ``paths`` (pure but for resolving links and existence).

    ``host_etc``: the system paths with the host's ``/etc`` (a build step: :func:`readonly_roots`);
    otherwise without it (the reviewer, whose ``/etc`` is synthesized): then ``/etc`` or a path
    under it is bound only when ``paths`` names it, as any other path.

    Raises:
        Nothing: absolute, resolved, de-nested, existing paths, the system paths first.
    """
    return readonly_roots(paths, system=SYSTEM_PATHS if host_etc else tuple(q for q in SYSTEM_PATHS if q != ETC))


def _bind_target(target: str) -> str:
    if not normal_target(target):
        raise ValueError(f"a descriptor is bound at a normal absolute path, not {target!r}")
    return target


def _etc_target(target: str) -> str:
    if (not target.startswith(ETC + "/") or os.path.normpath(target) != target or "\0" in target
            or any(c in target for c in ":\n")):
        raise ValueError(f"a synthesized file must be a normal path under {ETC}: {target!r}")
    return target


def _confined_argv(tools: tuple[str, ...], staging: str, cwd: str, umask: int, readonly: Sequence[str],
                   writable: Sequence[str], uid: int | None, argv: Sequence[str], *, network: bool = False,
                   fd_binds: Sequence[tuple[int, str]] = (), shell: str = "/bin/sh",
                   etc: Sequence[tuple[int, str]] | None = None, fd_binds_noexec: Sequence[tuple[int, str]] = (),
                   loopback: str | None = None) -> list[str]:
    # uid None: rootless (a user namespace mapping only the caller, who the step runs as).
    # setpriv --pdeathsig: the step dies with the builder (an interrupted build leaves no process).
    # etc None: the host's /etc read-only (a build step); otherwise no host /etc and these files
    # (descriptor, path under /etc) copied into the new root first.
    flags = _UNSHARE_FLAGS if not network else tuple(f for f in _UNSHARE_FLAGS if f != "--net")
    if uid is None:
        flags = (*_USERNS_FLAGS, *flags)
    files = [f"file:{fd}:{_etc_target(target)}" for fd, target in etc or ()]
    binds = ([f"fd:{fd}:{_bind_target(target)}" for fd, target in fd_binds]
             + [f"fdnx:{fd}:{_bind_target(target)}" for fd, target in fd_binds_noexec])
    if loopback is not None and not network:
        binds.append(f"lo:{loopback}")
    return [tools[2], "--pdeathsig", "KILL", "--", tools[0], *flags, "--", shell, "-c", _CONFINE, "sh", staging, cwd, sys.executable,
            _LAYOUT, *tools[1:],
            "caller" if uid is None else str(uid), f"{umask:04o}", *files, *confined_roots(readonly, host_etc=etc is None),
            *binds, "--", *writable, "--", *argv]


def confine_argv(argv: Sequence[str], *, root_parent: str, cwd: str, readonly: Sequence[str], writable: Sequence[str], uid: int,
                 network: bool = False, fd_binds: Sequence[tuple[int, str]] = (), umask: int = BUILD_UMASK,
                 rootless: bool = False, etc: Sequence[tuple[int, str]] | None = None,
                 fd_binds_noexec: Sequence[tuple[int, str]] = (), loopback: bool = False) -> list[str]:
    """The command line that runs ``argv`` confined exactly as a build step is (``_CONFINE``).

    New mount, PID, IPC, UTS (and, unless ``network``, network) namespaces; a tmpfs root holding
    the system paths and ``readonly`` read-only, each ``(fd, target)`` of ``fd_binds`` (a
    directory descriptor the caller verified, passed to the child) read-only at ``target``, and
    ``writable`` read-write (hand them to ``uid`` first: :func:`give_to_uid`); each of
    ``fd_binds_noexec`` as ``fd_binds`` and ``noexec`` as well; ``loopback`` (without ``network``):
    the new network namespace's ``lo`` brought up before the command starts (its own
    127.0.0.1 and nothing else; :func:`loopback_tool` must find ``ip``); ``uid`` with no
    capabilities and no_new_privs; every process killed when the confinement's pid 1 ends.
    ``root_parent`` is a private directory that will hold the new root's mount point.
    ``rootless``: all of it inside a new user namespace that maps only the caller, who the
    command then runs as (``uid`` is ignored and nothing needs handing over); for a caller that
    is not root, where :func:`rootless_problem` is None.
    ``etc``: None binds the host's ``/etc`` read-only with the other system paths (a build
    step). Otherwise the host's ``/etc`` is not in the root (:func:`confined_roots` with
    ``host_etc=False``): ``/etc`` is a directory of the new root's own tmpfs holding only the
    files of ``etc``, each ``(fd, target)`` a descriptor passed to the child (a sealed memfd)
    whose bytes are copied to ``target`` (a normal path under ``/etc``) before any bind, and
    read-only with the rest of the root. A ``readonly`` path at or under ``/etc`` is still bound
    (over or into it), as the caller asked.

    Raises:
        EnvironmentFailure: ``NETWORK_NOT_ISOLATED`` when unshare, chroot or setpriv is missing
            here.
        ValueError: a target of ``etc`` is not a normal path under ``/etc``, or one of ``fd_binds`` or
            ``fd_binds_noexec`` not a normal absolute path.
    """
    tools = _tools()
    # bash, not dash, runs the script when descriptors are passed: dash cannot close a descriptor above 9.
    bash = shutil.which("bash", path=_TOOLS_PATH) if fd_binds or fd_binds_noexec or etc else "/bin/sh"
    if tools is None or bash is None:
        raise EnvironmentFailure(BuildCode.NETWORK_NOT_ISOLATED, "unshare, chroot, setpriv (and bash, to bind descriptors) "
                                 "are needed to confine a command")
    ip = loopback_tool() if loopback and not network else None
    if loopback and not network and ip is None:
        raise EnvironmentFailure(BuildCode.NETWORK_NOT_ISOLATED, "ip (iproute2) is needed to bring up the confinement's loopback")
    root = os.path.join(root_parent, ".sandbox-root")
    if not os.path.isdir(root):
        os.mkdir(root, 0o700)
    return _confined_argv(tools, root_parent, cwd, umask, readonly, writable, None if rootless else uid, argv, network=network,
                          fd_binds=fd_binds, shell=bash, etc=etc, fd_binds_noexec=fd_binds_noexec, loopback=ip)


def loopback_tool() -> str | None:
    """The ``ip`` program that brings a confinement's loopback up, or None where there is none (pure but for the lookup)."""
    return shutil.which("ip", path=_TOOLS_PATH)


def give_to_uid(writable: Sequence[str], uid: int) -> None:
    """Hand each directory of ``writable``, and everything in it, to ``uid`` (through descriptors, no link followed).

    Raises:
        OSError: a directory cannot be opened or changed.
    """
    _give_to_step(writable, uid)


def _probe(argv: list[str], scratch: str) -> bool:
    try:
        proc = subprocess.run(argv, capture_output=True, timeout=30, env={"PATH": "/usr/bin:/bin"}, cwd=scratch,
                              stdin=subprocess.DEVNULL, start_new_session=True)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return proc.returncode == 0


#: The most a build step may print, stdout and stderr together; past it the step is killed
#: (``STEP_OUTPUT_TOO_LARGE``). The host keeps only :data:`STEP_OUTPUT_TAIL` bytes of each
#: stream in memory; the rest goes to capped host-only files in staging.
MAX_STEP_OUTPUT = 64 << 20
STEP_OUTPUT_TAIL = 1 << 20


@dataclass(frozen=True, slots=True)
class StepResult:
    """What a step printed, bounded (:func:`attest.builder._capture.run_captured`).

    ``stdout`` / ``stderr``: each stream whole when it is at most :data:`STEP_OUTPUT_TAIL`
    bytes, else its last :data:`STEP_OUTPUT_TAIL` bytes; ``*_size``: the stream's length;
    ``*_log``: the host-only file in staging holding it whole (removed with staging).
    """

    returncode: int
    stdout: bytes
    stderr: bytes
    stdout_size: int = 0
    stderr_size: int = 0
    stdout_log: str | None = None
    stderr_log: str | None = None


@dataclass(frozen=True, slots=True)
class Sandbox:
    """How build steps run here; the guarantees are recorded in every build's inputs and evidence.

    ``network_isolated``: steps run in a network namespace with no usable interface (abstract
    AF_UNIX sockets are per network namespace, so the host's are unreachable too).
    ``filesystem_confined``: steps run in new mount, PID, IPC and UTS namespaces, chrooted
    into a minimal root (see ``_CONFINE``), without capabilities and with no_new_privs: they
    cannot read or write the cache, the store, git or host sockets, open host devices, or see
    or signal host processes. ``rootless``: all of it inside a new user namespace mapping only
    the caller, as whom the steps run (a rootful sandbox runs them as a uid/gid no host process
    has); :attr:`confinement` names which.
    """

    network_isolated: bool
    filesystem_confined: bool
    tools: tuple[str, ...] | None
    umask: int = BUILD_UMASK
    source_date_epoch: int = SOURCE_DATE_EPOCH
    extra_env: tuple[tuple[str, str], ...] = ()
    rootless: bool = False

    @property
    def confinement(self) -> str:
        """``rootful``, ``rootless`` or ``none`` (:data:`CONFINEMENTS`): how the steps' filesystem is confined."""
        if not self.filesystem_confined:
            return "none"
        return "rootless" if self.rootless else "rootful"

    @classmethod
    def establish(cls, *, allow_unisolated_network: bool, umask: int = BUILD_UMASK,
                  source_date_epoch: int = SOURCE_DATE_EPOCH, force_unisolated: bool = False) -> Sandbox:
        """Probe the namespaces and the confinement once; refuse (fail closed) unless both hold.

        Root probes the rootful confinement; any other caller the rootless one
        (:func:`decide_confinement`, then ``unshare --user --map-root-user true``, then a confined
        step). ``allow_unisolated_network`` accepts a build without them (recorded in the output
        and in the input address, so such an output is never reused by a caller who required
        them). ``force_unisolated`` pretends namespaces are unavailable, so the refusal path is
        testable on machines where they work.

        Raises:
            EnvironmentFailure: ``NETWORK_NOT_ISOLATED`` when the network namespace or the
                confinement cannot be established and ``allow_unisolated_network`` is false.
        """
        tools = None if force_unisolated else _tools()
        rootless = os.geteuid() != 0
        why_not: str | None = None
        if rootless and tools is not None:
            why_not = rootless_problem()
        net = confined = False
        if tools is not None and why_not is None:
            prefix = [tools[0], *_USERNS_FLAGS[:2]] if rootless else [tools[0]]
            with tempfile.TemporaryDirectory(prefix="attest-sandbox-probe-") as scratch:
                net = _probe([*prefix, "--net", "--", "/bin/true"], scratch)
                if net:
                    os.mkdir(os.path.join(scratch, ".sandbox-root"), 0o700)
                    work = os.path.join(scratch, "work")
                    os.mkdir(work, 0o700)
                    uid = os.getuid() if rootless else pick_step_uid()
                    if not rootless:
                        _give_to_step([work], uid)
                    confined = _probe(_confined_argv(tools, scratch, work, umask, (), [work], None if rootless else uid,
                                                     ["/bin/sh", "-c", ": > probe"]), scratch)
                    # The step could write where it was given, and as no one else (rootless: as the caller).
                    try:
                        confined = confined and os.lstat(os.path.join(work, "probe")).st_uid == uid
                    except FileNotFoundError:
                        confined = False
        if not (net and confined) and not allow_unisolated_network:
            raise EnvironmentFailure(BuildCode.NETWORK_NOT_ISOLATED, not_isolated_detail(why_not, net=net, rootless=rootless))
        return cls(net, net and confined, tools if net else None, umask, source_date_epoch, (), rootless and net)

    def with_umask(self, umask: int) -> Sandbox:
        """Another sandbox whose steps run with ``umask`` (the rebuild check's second context).

        Raises:
            Nothing: a copy with one field changed.
        """
        return replace(self, umask=umask)

    def with_env(self, extra: Mapping[str, str]) -> Sandbox:
        """Another sandbox whose steps also see ``extra`` (the rebuild check's noise).

        Raises:
            Nothing: a copy with one field changed.
        """
        return replace(self, extra_env=tuple(sorted(extra.items())))

    def guarantees(self) -> dict[str, Any]:  # Any: a JSON object whose keys the demo reads (docs/build.md)
        """Exactly what was established, for the output, the build record and the input address.

        Only the guarantees (not the umask or the environment noise of a rebuild check) are
        here: two builds under the same guarantees share an input address. ``confinement``
        names the kind (``rootful``, ``rootless``, ``none``) and, rootless, ``differs`` says
        what running as the caller changes.

        Raises:
            Nothing: it describes what :meth:`establish` found.
        """
        common = {
            "capabilities": "none (bounding set empty), no_new_privs",
            "root": "tmpfs; read-only nosuid nodev binds of the system paths, the interpreters' prefixes and "
                    "the step's inputs; only the step's own output directories read-write nosuid nodev",
            "dev": "tmpfs with null, zero, full, random, urandom",
            "tmpfs": ["/tmp", "/var/tmp", "/run", "/dev/shm"],
            "proc": "new, for the new PID namespace",
            "session": _SESSION,
            "keyring": keyring_statement(deny=True),
        }
        if self.filesystem_confined and self.rootless:
            uid, gid = os.getuid(), os.getgid()
            return {
                "profile": ROOTLESS_PROFILE,
                "confinement": "rootless",
                "network_isolated": True,
                "filesystem_confined": True,
                "namespaces": ["user", *_NAMESPACES],
                "uid": f"{uid} (rootless: the caller's own, the only uid its new user namespace maps)",
                "gid": f"{gid} (the caller's own, the only gid mapped)",
                **common,
                "capabilities": "none (bounding, inheritable and ambient sets empty), no_new_privs",
                "limits": "512 MiB per tmpfs, 4096 processes of the caller's uid in the namespace (or the caller's lower "
                          "limit), 4 GiB per file written",
                "differs": [
                    "the steps run as the caller's uid, not as a uid of their own: host processes of that uid can reach "
                    "a running step (ptrace, /proc/PID/cwd), which a rootful build's steps are out of reach of",
                    "what a step writes in its own directories is owned by the caller (nothing is handed to a step uid); "
                    "everything else in its root is read-only to it, whoever owns it",
                    "a step can read what the caller can read in its root (the system paths and its inputs), not only "
                    "what every user can",
                    "the caller's supplementary groups stay with the steps (an unprivileged user namespace cannot drop "
                    f"them), shown as the overflow gid; here: {sorted(os.getgroups()) or 'none'}",
                ],
            }
        if self.filesystem_confined:
            return {
                "profile": SANDBOX_PROFILE,
                "confinement": "rootful",
                "network_isolated": True,
                "filesystem_confined": True,
                "namespaces": list(_NAMESPACES),
                "uid": "one per build, unused by any account or process, from "
                       f"{STEP_UID_RANGE[0]}-{STEP_UID_RANGE[1] - 1}",
                "gid": "the same number as the uid",
                **common,
                "limits": "512 MiB per tmpfs, 4096 processes of the step uid, 4 GiB per file written",
            }
        return {
            "profile": SANDBOX_PROFILE,
            "confinement": "none",
            "network_isolated": self.network_isolated,
            "filesystem_confined": False,
            "namespaces": (["user", "net"] if self.rootless else ["net"]) if self.network_isolated else [],
            "uid": os.getuid(),
            "gid": os.getgid(),
            "capabilities": "inherited",
            "root": "the host's, unconfined",
            "dev": "the host's",
            "tmpfs": [],
            "proc": "the host's",
            "session": _SESSION,
            "keyring": keyring_statement(deny=False),
        }

    def run(self, argv: Sequence[str], *, cwd: str, home: str, staging: str, writable: Sequence[str], uid: int,
            extra_env: Mapping[str, str] | None = None, what: str = "build step", timeout: float = 1800,
            readonly: Sequence[str] = (), max_output: int = MAX_STEP_OUTPUT) -> StepResult:
        """Run one step. Raise ``BUILD_STEP_FAILED`` on failure.

        A confined step sees the system paths and ``readonly`` (read-only) and the directories
        ``writable`` (read-write, each a direct child of ``staging``, handed to ``uid`` first);
        nothing else of the host, not even ``staging`` itself. ``uid`` is the build's step uid
        (:func:`pick_step_uid`), the same for every step of one build; a rootless sandbox
        ignores it (its steps run as the caller, who already owns ``writable``).

        What the step prints is bounded (docs/build.md "The build", step 4, **limits**): at
        most ``max_output`` bytes, stdout and stderr together, are read, into two new files
        directly in ``staging`` (which no step can write), and only the last
        :data:`STEP_OUTPUT_TAIL` bytes of each stay in memory.

        Raises:
            EnvironmentFailure: ``BUILD_STEP_FAILED`` when a writable directory is not a child
                of ``staging``, the step cannot be started, times out or exits non-zero;
                ``STEP_OUTPUT_TOO_LARGE`` when it prints more than ``max_output`` bytes (its
                process group is killed); ``NETWORK_NOT_ISOLATED`` when the confinement cannot
                be set up for the step.
        """
        cmd = list(argv)
        for w in (*writable, home):
            if os.path.dirname(w) != staging:
                raise EnvironmentFailure(BuildCode.BUILD_STEP_FAILED, f"{what}: {w} is not a directory of the staging directory")
        if home not in writable:
            writable = (*writable, home)
        if self.filesystem_confined:
            assert self.tools is not None
            root = os.path.join(staging, ".sandbox-root")
            if not os.path.isdir(root):
                os.mkdir(root, 0o700)
            if not self.rootless:
                _give_to_step(writable, uid)
            cmd = _confined_argv(self.tools, staging, cwd, self.umask, readonly, writable, None if self.rootless else uid, cmd)
        elif self.network_isolated:
            assert self.tools is not None
            cmd = [self.tools[0], *(_USERNS_FLAGS[:2] if self.rootless else ()), "--net", "--", *cmd]
        log_name = f".step-output-{secrets.token_hex(8)}"
        try:
            sfd = os.open(staging, O_DIR)  # the host's own path, above anything a step can write
            try:
                proc = run_captured(cmd, log_dir_fd=sfd, log_name=log_name, max_bytes=max_output, tail_bytes=STEP_OUTPUT_TAIL,
                                    timeout=timeout, cwd=cwd, umask=self.umask, deny_keyrings=self.filesystem_confined,
                                    env=clean_env(home, source_date_epoch=self.source_date_epoch,
                                                  extra={**dict(self.extra_env), **(extra_env or {})}))
            finally:
                os.close(sfd)
        except OSError as e:
            raise EnvironmentFailure(BuildCode.BUILD_STEP_FAILED, f"{what}: cannot run: {e}") from e
        if proc.killed == "output":
            tail = proc.stderr.decode("utf-8", "replace").strip()[-300:]
            raise EnvironmentFailure(BuildCode.STEP_OUTPUT_TOO_LARGE, f"{what} printed more than {max_output} bytes (stdout and "
                                     "stderr together) and was killed" + (f": {tail}" if tail else ""))
        if proc.killed == "timeout":
            raise EnvironmentFailure(BuildCode.BUILD_STEP_FAILED, f"{what}: cannot run: timed out after {timeout} seconds")
        if proc.returncode == 97 and b"attest-sandbox:" in proc.stderr:
            raise EnvironmentFailure(BuildCode.NETWORK_NOT_ISOLATED, f"{what}: the sandbox could not be set up: "
                                     + proc.stderr.decode("utf-8", "replace").strip()[-300:])
        if proc.returncode != 0:
            tail = proc.stderr.decode("utf-8", "replace").strip()[-1500:]
            raise EnvironmentFailure(BuildCode.BUILD_STEP_FAILED, f"{what} exited with {proc.returncode}: {tail}")
        return StepResult(proc.returncode, proc.stdout, proc.stderr, proc.stdout_size, proc.stderr_size,
                          os.path.join(staging, proc.stdout_log), os.path.join(staging, proc.stderr_log))
