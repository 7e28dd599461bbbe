"""The hermetic runner: one build step in a fresh process with nothing inherited.

Each step gets a clean environment (fixed ``PATH``, ``HOME`` and ``TMPDIR`` inside the
staging directory, ``SOURCE_DATE_EPOCH``, ``PYTHONHASHSEED=0``, ``TZ=UTC``,
``LC_ALL=C.UTF-8``), a fixed ``umask``, no network (a new network namespace with only a
downed loopback) and a read-only view of the whole filesystem except its staging directory,
as root without capabilities (a new mount namespace, a read-only bind of ``/``, ``chroot``,
``setpriv``). When these cannot be created the step is refused with
``NETWORK_NOT_ISOLATED`` unless the caller explicitly accepted an unisolated build, and
the result then says so.

    >>> sandbox = Sandbox.establish(allow_unisolated_network=False)
    >>> sandbox.run([python, "-I", "-c", "print(1)"], cwd=staging, home=staging, staging=staging)
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..errors import EnvironmentFailure
from ._codes import BuildCode

# 1980-01-01T00:00:00Z: the earliest time a zip (wheel) can record.
SOURCE_DATE_EPOCH = 315532800
BUILD_UMASK = 0o022


def clean_env(home: str, *, source_date_epoch: int = SOURCE_DATE_EPOCH, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The complete environment of a build step. Nothing of the caller's leaks in."""
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


# Runs as root inside new network and mount namespaces: bind the whole filesystem read-only
# at a private root, make only the staging directory writable again, chroot there, drop every
# capability (so the step cannot remount), enter the step's working directory from inside the
# new root, and exec the step. Any failure exits 97 before the step runs.
_CONFINE = r"""
S="$1"; C="$2"; MOUNT="$3"; FINDMNT="$4"; CHROOT="$5"; SETPRIV="$6"; shift 6
R="$S/.sandbox-root"
fail() { echo "attest-sandbox: $1" >&2; exit 97; }
"$MOUNT" --make-rprivate / || fail "cannot make mounts private"
"$MOUNT" --rbind / "$R" || fail "cannot bind the root"
"$FINDMNT" -R -n -r -o TARGET "$R" > "$S/.sandbox-mounts" || fail "cannot list mounts"
while read -r m; do
  "$MOUNT" -o remount,bind,ro "$m" || fail "cannot make $m read-only"
done < "$S/.sandbox-mounts"
"$MOUNT" --bind "$S" "$R$S" || fail "cannot bind the staging directory"
"$MOUNT" -o remount,bind,rw "$R$S" || fail "cannot make the staging directory writable"
exec "$CHROOT" "$R" "$SETPRIV" --bounding-set=-all --inh-caps=-all --no-new-privs -- /bin/sh -c 'cd "$0" && exec "$@"' "$C" "$@"
"""
_TOOLS_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"


def _tools() -> tuple[str, ...] | None:
    found = tuple(shutil.which(t, path=_TOOLS_PATH) for t in ("unshare", "mount", "findmnt", "chroot", "setpriv"))
    return None if any(t is None for t in found) else found  # type: ignore[return-value]


def _probe(argv_prefix: list[str], scratch: str) -> bool:
    try:
        proc = subprocess.run([*argv_prefix, "/bin/true"], capture_output=True, timeout=30, env={"PATH": "/usr/bin:/bin"}, cwd=scratch)
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
    """How build steps run here; both guarantees are recorded in every build's evidence.

    ``network_isolated``: steps run in a network namespace with no usable interface.
    ``filesystem_confined``: steps see the whole filesystem read-only except their staging
    directory, as root without capabilities (they cannot touch the cache, the store or git).
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
        """Probe the namespaces once; refuse (fail closed) unless both guarantees hold.

        ``allow_unisolated_network`` accepts a build without them (recorded in the output).
        ``force_unisolated`` pretends namespaces are unavailable, so the refusal path is
        testable on machines where they work.
        """
        import tempfile

        tools = None if force_unisolated else _tools()
        net = confined = False
        if tools is not None:
            with tempfile.TemporaryDirectory(prefix="attest-sandbox-probe-") as scratch:
                net = _probe([tools[0], "--net", "--"], scratch)
                if net:
                    os.mkdir(os.path.join(scratch, ".sandbox-root"), 0o700)
                    confined = _probe([tools[0], "--net", "--mount", "--", "/bin/sh", "-c", _CONFINE, "sh", scratch, scratch, *tools[1:]], scratch)
        if not (net and confined) and not allow_unisolated_network:
            missing = "a network namespace without interfaces" if not net else "a read-only mount namespace"
            raise EnvironmentFailure(
                BuildCode.NETWORK_NOT_ISOLATED,
                f"cannot create {missing} here (unshare failed); "
                "pass --allow-network-unisolated to build anyway (recorded in the output)",
            )
        return cls(net, net and confined, tools if net else None, umask, source_date_epoch)

    def with_umask(self, umask: int) -> Sandbox:
        return Sandbox(self.network_isolated, self.filesystem_confined, self.tools, umask, self.source_date_epoch, self.extra_env)

    def with_env(self, extra: Mapping[str, str]) -> Sandbox:
        """Another sandbox whose steps also see ``extra`` (the rebuild check's noise)."""
        return Sandbox(self.network_isolated, self.filesystem_confined, self.tools, self.umask, self.source_date_epoch,
                       tuple(sorted(extra.items())))

    def run(self, argv: Sequence[str], *, cwd: str, home: str, staging: str, extra_env: Mapping[str, str] | None = None,
            what: str = "build step", timeout: float = 1800) -> StepResult:
        """Run one step; only ``staging`` is writable to it. Raise ``BUILD_STEP_FAILED`` on failure."""
        cmd = list(argv)
        if self.filesystem_confined:
            assert self.tools is not None
            root = os.path.join(staging, ".sandbox-root")
            if not os.path.isdir(root):
                os.mkdir(root, 0o700)
            cmd = [self.tools[0], "--net", "--mount", "--", "/bin/sh", "-c", _CONFINE, "sh", staging, cwd, *self.tools[1:], *cmd]
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
