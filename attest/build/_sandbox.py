"""The hermetic runner: one build step in a fresh process with nothing inherited.

Each step gets a clean environment (fixed ``PATH``, ``HOME`` and ``TMPDIR`` inside the
staging directory, ``SOURCE_DATE_EPOCH``, ``PYTHONHASHSEED=0``, ``TZ=UTC``,
``LC_ALL=C.UTF-8``), a fixed ``umask``, no controlling terminal, and, when confined: new
network (no usable interface), mount, PID, IPC and UTS namespaces; a minimal root (the
system paths and the interpreters' prefixes read-only, nosuid, nodev; a tmpfs ``/dev``
with five harmless nodes; a new ``/proc``; fresh tmpfs ``/tmp``, ``/var/tmp``, ``/run``,
``/dev/shm``; only the step's own directories of the staging area read-write); a uid/gid
that no account or host process has (one per build), no capabilities,
no_new_privs. When this cannot be established the step is refused with
``NETWORK_NOT_ISOLATED`` unless the caller explicitly accepted an unisolated build; the
result, the build record and the input address then say so.

    >>> sandbox = Sandbox.establish(allow_unisolated_network=False)
    >>> sandbox.run([python, "-I", "-c", "print(1)"], cwd=staging, home=staging, staging=staging)
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import EnvironmentFailure
from ._codes import BuildCode

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


# The confinement, run as root by ``unshare --net --mount --pid --fork --ipc --uts`` (so as
# pid 1 of a new PID namespace). It builds a new root on a tmpfs at $S/.sandbox-root holding
# only: the read-only paths it is given (bind mounts remounted ro,nosuid,nodev; host
# symlinks such as /bin -> usr/bin recreated as symlinks), a tmpfs /dev with only null, zero,
# full, random and urandom bound in, a fresh proc for the new PID namespace, fresh tmpfs
# /tmp, /var/tmp, /run (/var/run links to it) and /dev/shm, and the step's writable
# directories read-write (nosuid,nodev). The staging directory $S itself is never bound:
# a step sees only the directories below it that it is given, so it can neither plant
# anything where the host later looks nor touch the inputs of a later step. It then chroots
# there, drops to the step's uid/gid with no supplementary groups, no capabilities (bounding
# set emptied) and no_new_privs, restores the step's umask and execs the step in its working
# directory. Any failure exits 97 before the step runs.
# Arguments: S C MOUNT FINDMNT CHROOT SETPRIV UID UMASK ro-path... -- rw-path... -- argv...
_CONFINE = r"""
S="$1"; C="$2"; MOUNT="$3"; FINDMNT="$4"; CHROOT="$5"; SETPRIV="$6"; ID="$7"; U="$8"; shift 8
R="$S/.sandbox-root"
fail() { echo "attest-sandbox: $1" >&2; exit 97; }
umask 022
"$MOUNT" --make-rprivate / || fail "cannot make mounts private"
"$MOUNT" -t tmpfs -o mode=0755,nosuid,nodev attest-root "$R" || fail "cannot mount the new root"
# The fresh tmpfs directories come first, so a read-only bind below them (a venv or an
# interpreter under /tmp) lands on top of the tmpfs instead of being hidden by it.
mkdir -p "$R/tmp" "$R/var/tmp" "$R/run" || fail "cannot lay out the new root"
for t in /tmp /var/tmp /run; do
  "$MOUNT" -t tmpfs -o mode=1777,nosuid,nodev,size=512m attest-tmp "$R$t" || fail "cannot mount $t"
done
bind_ro_dir() {  # SOURCE TARGET-inside-the-new-root
  mkdir -p "$R$2" && "$MOUNT" --rbind "$1" "$R$2" || fail "cannot bind $2"
  "$FINDMNT" -R -n -r -o TARGET "$R$2" > "$S/.sandbox-mounts" || fail "cannot list mounts under $2"
  while read -r m; do
    "$MOUNT" -o remount,bind,ro,nosuid,nodev "$m" || fail "cannot make $m read-only"
  done < "$S/.sandbox-mounts"
}
while [ "$#" -gt 0 ] && [ "$1" != "--" ]; do
  P="$1"; shift
  case "$P" in
    # fd:N:/path binds the directory open as descriptor N (the very one the caller verified;
    # no path is resolved again) read-only at /path.
    # The descriptor is closed right after: nothing started later holds a directory outside the new root.
    fd:*) N="${P#fd:}"; D="${N#*:}"; N="${N%%:*}"
          case "$N" in ''|*[!0-9]*) fail "bad descriptor $N" ;; esac
          bind_ro_dir "/proc/self/fd/$N" "$D"; eval "exec $N<&-"; continue ;;
  esac
  if [ -L "$P" ]; then
    mkdir -p "$R$(dirname -- "$P")" && ln -s "$(readlink -- "$P")" "$R$P" || fail "cannot link $P"
  elif [ -d "$P" ]; then
    bind_ro_dir "$P" "$P"
  elif [ -f "$P" ]; then
    mkdir -p "$R$(dirname -- "$P")" && : > "$R$P" && "$MOUNT" --bind "$P" "$R$P" \
      && "$MOUNT" -o remount,bind,ro,nosuid,nodev "$R$P" || fail "cannot bind $P"
  fi
done
[ "$1" = "--" ] || fail "no command"
shift
rm -f "$S/.sandbox-mounts"
while [ "$#" -gt 0 ] && [ "$1" != "--" ]; do
  W="$1"; shift
  [ -d "$W" ] && [ ! -L "$W" ] || fail "writable $W is not a directory"
  mkdir -p "$R$W" && "$MOUNT" --bind "$W" "$R$W" && "$MOUNT" -o remount,bind,rw,nosuid,nodev "$R$W" \
    || fail "cannot bind $W read-write"
done
[ "$1" = "--" ] || fail "no command"
shift
mkdir -p "$R/dev" "$R/proc" || fail "cannot lay out the new root"
"$MOUNT" -t tmpfs -o mode=0755,nosuid,noexec attest-dev "$R/dev" || fail "cannot mount /dev"
for n in null zero full random urandom; do
  : > "$R/dev/$n" && "$MOUNT" --bind "/dev/$n" "$R/dev/$n" || fail "cannot bind /dev/$n"
done
ln -s /proc/self/fd "$R/dev/fd" && ln -s /proc/self/fd/0 "$R/dev/stdin" && ln -s /proc/self/fd/1 "$R/dev/stdout" \
  && ln -s /proc/self/fd/2 "$R/dev/stderr" && mkdir "$R/dev/shm" || fail "cannot lay out /dev"
"$MOUNT" -t tmpfs -o mode=1777,nosuid,nodev,size=512m attest-tmp "$R/dev/shm" || fail "cannot mount /dev/shm"
[ -e "$R/var/run" ] || ln -s /run "$R/var/run" || fail "cannot link /var/run"
"$MOUNT" -t proc -o nosuid,nodev,noexec proc "$R/proc" || fail "cannot mount a new /proc"
"$MOUNT" -o remount,bind,ro,nosuid,nodev "$R" || fail "cannot make the new root read-only"
umask "$U" || fail "bad umask"
# Bounds the step cannot raise (THREATS G): processes of its (per-build) uid, and the size of
# any one file it writes (dash counts 512-byte blocks: 4 GiB).
# (bash, which runs the script when descriptors are bound, names the process limit -u and counts -f in KiB)
if [ -n "${BASH_VERSION:-}" ]; then ulimit -u 4096 && ulimit -f 4194304; else ulimit -p 4096 && ulimit -f 8388608; fi \
  || fail "cannot set the step's limits"
# This shell stays pid 1, as root, and waits: the kernel clears a parent-death signal on any
# uid change, so the step itself cannot carry one. unshare --kill-child (and setpriv
# --pdeathsig on unshare) kill this pid 1 when the builder dies, and the kernel then kills
# every process of the namespace: an interrupted build leaves no step running.
"$CHROOT" "$R" "$SETPRIV" --reuid="$ID" --regid="$ID" --clear-groups --bounding-set=-all --inh-caps=-all \
  --no-new-privs -- /bin/sh -c 'cd "$0" && exec "$@"' "$C" "$@" &
wait "$!"
"""
_TOOLS_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"
_NAMESPACES = ("net", "mount", "pid", "ipc", "uts")
_UNSHARE_FLAGS = ("--net", "--mount", "--pid", "--fork", "--kill-child", "--ipc", "--uts")

# Confined steps run as a uid no host process has: one drawn per build from a range that no
# distribution allocates (just below 2^31), absent from the user database and checked against
# every running process. A shared uid such as nobody (65534) would let any host process of that
# uid write into a running build through /proc/PID/cwd, or ptrace its steps.
STEP_UID_RANGE = (0x7F000000, 0x7FFE0000)  # below systemd's foreign range 0x7FFE0000-0x7FFEFFFF
# What a build step may read: the system's programs and libraries and a read-only /etc.
# Interpreters outside these (a pyenv or venv prefix) are added per step by the builder.
SYSTEM_PATHS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
# Increment when what a confined step can reach changes: it is part of every input address.
SANDBOX_PROFILE = "attest-sandbox/v4"


def _tools() -> tuple[str, ...] | None:
    found = tuple(shutil.which(t, path=_TOOLS_PATH) for t in ("unshare", "mount", "findmnt", "chroot", "setpriv"))
    return None if any(t is None for t in found) else found  # type: ignore[return-value]


def readonly_roots(paths: Sequence[str]) -> tuple[str, ...]:
    """Absolute, resolved, de-nested paths to expose read-only (system paths always first)."""
    out: list[str] = []
    for p in [*SYSTEM_PATHS, *(os.path.realpath(x) for x in paths)]:
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
    """What ``python -I -m attest.build._worker`` needs: this interpreter, its venv, this package."""
    import sys

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
    """A uid for one build's steps that no account and no running process has."""
    import grp
    import pwd
    import secrets

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
    from .._safefs import chown_tree

    for w in writable:
        parent, name = os.path.split(w)
        pfd = os.open(parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            chown_tree(pfd, name, uid)
        finally:
            os.close(pfd)


def _confined_argv(tools: tuple[str, ...], staging: str, cwd: str, umask: int, readonly: Sequence[str],
                   writable: Sequence[str], uid: int, argv: Sequence[str], *, network: bool = False,
                   fd_binds: Sequence[tuple[int, str]] = (), shell: str = "/bin/sh") -> list[str]:
    # setpriv --pdeathsig: the step dies with the builder (an interrupted build leaves no process).
    flags = _UNSHARE_FLAGS if not network else tuple(f for f in _UNSHARE_FLAGS if f != "--net")
    binds = [f"fd:{fd}:{target}" for fd, target in fd_binds]
    return [tools[4], "--pdeathsig", "KILL", "--", tools[0], *flags, "--", shell, "-c", _CONFINE, "sh", staging, cwd, *tools[1:],
            str(uid), f"{umask:04o}", *readonly_roots(readonly), *binds, "--", *writable, "--", *argv]


def confine_argv(argv: Sequence[str], *, root_parent: str, cwd: str, readonly: Sequence[str], writable: Sequence[str], uid: int,
                 network: bool = False, fd_binds: Sequence[tuple[int, str]] = (), umask: int = BUILD_UMASK) -> list[str]:
    """The command line that runs ``argv`` confined exactly as a build step is (``_CONFINE``).

    New mount, PID, IPC, UTS (and, unless ``network``, network) namespaces; a tmpfs root holding
    the system paths and ``readonly`` read-only, each ``(fd, target)`` of ``fd_binds`` (a
    directory descriptor the caller verified, passed to the child) read-only at ``target``, and
    ``writable`` read-write (hand them to ``uid`` first: :func:`give_to_uid`); ``uid`` with no
    capabilities and no_new_privs; every process killed when the confinement's pid 1 ends.
    ``root_parent`` is a private directory that will hold the new root's mount point.

    Raises:
        EnvironmentFailure: ``NETWORK_NOT_ISOLATED`` when unshare, mount, findmnt, chroot or
            setpriv is missing here.
    """
    tools = _tools()
    # bash, not dash, runs the script when descriptors are bound: dash cannot close a descriptor above 9.
    bash = shutil.which("bash", path=_TOOLS_PATH) if fd_binds else "/bin/sh"
    if tools is None or bash is None:
        raise EnvironmentFailure(BuildCode.NETWORK_NOT_ISOLATED, "unshare, mount, findmnt, chroot, setpriv (and bash, to bind "
                                 "descriptors) are needed to confine a command")
    root = os.path.join(root_parent, ".sandbox-root")
    if not os.path.isdir(root):
        os.mkdir(root, 0o700)
    return _confined_argv(tools, root_parent, cwd, umask, readonly, writable, uid, argv, network=network, fd_binds=fd_binds,
                          shell=bash)


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


@dataclass(frozen=True, slots=True)
class StepResult:
    returncode: int
    stdout: bytes
    stderr: bytes


@dataclass(frozen=True, slots=True)
class Sandbox:
    """How build steps run here; the guarantees are recorded in every build's inputs and evidence.

    ``network_isolated``: steps run in a network namespace with no usable interface (abstract
    AF_UNIX sockets are per network namespace, so the host's are unreachable too).
    ``filesystem_confined``: steps run in new mount, PID, IPC and UTS namespaces, chrooted
    into a minimal root (see ``_CONFINE``), as a uid/gid no host process has, without capabilities and with
    no_new_privs: they cannot read or write the cache, the store, git or host sockets, open
    host devices, or see or signal host processes.
    """

    network_isolated: bool
    filesystem_confined: bool
    tools: tuple[str, ...] | None
    umask: int = BUILD_UMASK
    source_date_epoch: int = SOURCE_DATE_EPOCH
    extra_env: tuple[tuple[str, str], ...] = ()

    @classmethod
    def establish(cls, *, allow_unisolated_network: bool, umask: int = BUILD_UMASK,
                  source_date_epoch: int = SOURCE_DATE_EPOCH, force_unisolated: bool = False) -> Sandbox:
        """Probe the namespaces and the confinement once; refuse (fail closed) unless both hold.

        ``allow_unisolated_network`` accepts a build without them (recorded in the output and
        in the input address, so such an output is never reused by a caller who required
        them). ``force_unisolated`` pretends namespaces are unavailable, so the refusal path
        is testable on machines where they work.

        Raises:
            EnvironmentFailure: ``NETWORK_NOT_ISOLATED`` when the network namespace or the
                confinement cannot be established and ``allow_unisolated_network`` is false.
        """
        import tempfile

        tools = None if force_unisolated else _tools()
        net = confined = False
        if tools is not None:
            with tempfile.TemporaryDirectory(prefix="attest-sandbox-probe-") as scratch:
                net = _probe([tools[0], "--net", "--", "/bin/true"], scratch)
                if net:
                    os.mkdir(os.path.join(scratch, ".sandbox-root"), 0o700)
                    work = os.path.join(scratch, "work")
                    os.mkdir(work, 0o700)
                    uid = pick_step_uid()
                    _give_to_step([work], uid)
                    confined = _probe(_confined_argv(tools, scratch, work, umask, (), [work], uid,
                                                     ["/bin/sh", "-c", ": > probe"]), scratch)
                    # The step could write where it was given, and as no one else.
                    try:
                        confined = confined and os.lstat(os.path.join(work, "probe")).st_uid == uid
                    except FileNotFoundError:
                        confined = False
        if not (net and confined) and not allow_unisolated_network:
            missing = "a network namespace without interfaces" if not net else "a confined mount/PID/IPC namespace as an unprivileged uid"
            raise EnvironmentFailure(
                BuildCode.NETWORK_NOT_ISOLATED,
                f"cannot create {missing} here (unshare, mount or setpriv failed); "
                "pass --allow-network-unisolated to build anyway (recorded in the output and the input address)",
            )
        return cls(net, net and confined, tools if net else None, umask, source_date_epoch)

    def with_umask(self, umask: int) -> Sandbox:
        """Another sandbox whose steps run with ``umask`` (the rebuild check's second context).

        Raises:
            Nothing: a copy with one field changed.
        """
        return Sandbox(self.network_isolated, self.filesystem_confined, self.tools, umask, self.source_date_epoch, self.extra_env)

    def with_env(self, extra: Mapping[str, str]) -> Sandbox:
        """Another sandbox whose steps also see ``extra`` (the rebuild check's noise).

        Raises:
            Nothing: a copy with one field changed.
        """
        return Sandbox(self.network_isolated, self.filesystem_confined, self.tools, self.umask, self.source_date_epoch,
                       tuple(sorted(extra.items())))

    def guarantees(self) -> dict[str, Any]:
        """Exactly what was established, for the output, the build record and the input address.

        Only the guarantees (not the umask or the environment noise of a rebuild check) are
        here: two builds under the same guarantees share an input address.

        Raises:
            Nothing: it describes what :meth:`establish` found.
        """
        if self.filesystem_confined:
            return {
                "profile": SANDBOX_PROFILE,
                "network_isolated": True,
                "filesystem_confined": True,
                "namespaces": list(_NAMESPACES),
                "uid": "one per build, unused by any account or process, from "
                       f"{STEP_UID_RANGE[0]}-{STEP_UID_RANGE[1] - 1}",
                "gid": "the same number as the uid",
                "capabilities": "none (bounding set empty), no_new_privs",
                "root": "tmpfs; read-only nosuid nodev binds of the system paths, the interpreters' prefixes and "
                        "the step's inputs; only the step's own output directories read-write nosuid nodev",
                "dev": "tmpfs with null, zero, full, random, urandom",
                "tmpfs": ["/tmp", "/var/tmp", "/run", "/dev/shm"],
                "proc": "new, for the new PID namespace",
                "limits": "512 MiB per tmpfs, 4096 processes of the step uid, 4 GiB per file written",
            }
        return {
            "profile": SANDBOX_PROFILE,
            "network_isolated": self.network_isolated,
            "filesystem_confined": False,
            "namespaces": ["net"] if self.network_isolated else [],
            "uid": os.getuid(),
            "gid": os.getgid(),
            "capabilities": "inherited",
            "root": "the host's, unconfined",
            "dev": "the host's",
            "tmpfs": [],
            "proc": "the host's",
        }

    def run(self, argv: Sequence[str], *, cwd: str, home: str, staging: str, writable: Sequence[str], uid: int,
            extra_env: Mapping[str, str] | None = None, what: str = "build step", timeout: float = 1800,
            readonly: Sequence[str] = ()) -> StepResult:
        """Run one step. Raise ``BUILD_STEP_FAILED`` on failure.

        A confined step sees the system paths and ``readonly`` (read-only) and the directories
        ``writable`` (read-write, each a direct child of ``staging``, handed to ``uid`` first);
        nothing else of the host, not even ``staging`` itself. ``uid`` is the build's step uid
        (:func:`pick_step_uid`), the same for every step of one build.

        Raises:
            EnvironmentFailure: ``BUILD_STEP_FAILED`` when a writable directory is not a child
                of ``staging``, the step cannot be started, times out or exits non-zero;
                ``NETWORK_NOT_ISOLATED`` when the confinement cannot be set up for the step.
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
            _give_to_step(writable, uid)
            cmd = _confined_argv(self.tools, staging, cwd, self.umask, readonly, writable, uid, cmd)
        elif self.network_isolated:
            assert self.tools is not None
            cmd = [self.tools[0], "--net", "--", *cmd]
        try:
            proc = subprocess.run(
                cmd,
                cwd=cwd,
                env=clean_env(home, source_date_epoch=self.source_date_epoch, extra={**dict(self.extra_env), **(extra_env or {})}),
                capture_output=True,
                umask=self.umask,
                stdin=subprocess.DEVNULL,
                timeout=timeout,
                close_fds=True,
                start_new_session=True,  # no controlling terminal: /dev/tty reaches nothing
            )
        except (OSError, subprocess.TimeoutExpired) as e:
            raise EnvironmentFailure(BuildCode.BUILD_STEP_FAILED, f"{what}: cannot run: {e}") from e
        if proc.returncode == 97 and b"attest-sandbox:" in proc.stderr:
            raise EnvironmentFailure(BuildCode.NETWORK_NOT_ISOLATED, f"{what}: the sandbox could not be set up: "
                                     + proc.stderr.decode("utf-8", "replace").strip()[-300:])
        if proc.returncode != 0:
            tail = proc.stderr.decode("utf-8", "replace").strip()[-1500:]
            raise EnvironmentFailure(BuildCode.BUILD_STEP_FAILED, f"{what} exited with {proc.returncode}: {tail}")
        return StepResult(proc.returncode, proc.stdout, proc.stderr)
