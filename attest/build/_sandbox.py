"""The hermetic runner: one build step in a fresh process with nothing inherited.

Each step gets a clean environment (fixed ``PATH``, ``HOME`` and ``TMPDIR`` inside the
staging directory, ``SOURCE_DATE_EPOCH``, ``PYTHONHASHSEED=0``, ``TZ=UTC``,
``LC_ALL=C.UTF-8``), a fixed ``umask``, and no network: it runs inside a new network
namespace with no interface but a downed loopback (``unshare --net``). When that namespace
cannot be created the step is refused with ``NETWORK_NOT_ISOLATED`` unless the caller
explicitly accepted an unisolated build, and the result then says so.

    >>> sandbox = Sandbox.establish(allow_unisolated_network=False)
    >>> sandbox.run([python, "-I", "-c", "print(1)"], cwd=staging, home=staging)
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


def _netns_available(unshare: str | None) -> bool:
    if unshare is None:
        return False
    try:
        proc = subprocess.run([unshare, "--net", "--", "/bin/true"], capture_output=True, timeout=20, env={"PATH": "/usr/bin:/bin"})
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
    """How build steps run here. ``network_isolated`` is recorded in every build's evidence."""

    network_isolated: bool
    unshare: str | None
    umask: int = BUILD_UMASK
    source_date_epoch: int = SOURCE_DATE_EPOCH
    extra_env: tuple[tuple[str, str], ...] = ()

    @classmethod
    def establish(cls, *, allow_unisolated_network: bool, umask: int = BUILD_UMASK,
                  source_date_epoch: int = SOURCE_DATE_EPOCH, force_unisolated: bool = False) -> Sandbox:
        """Check that an empty network namespace can be made; refuse (fail closed) if not.

        ``force_unisolated`` pretends namespaces are unavailable; it exists so the refusal
        path is testable on machines where they work.
        """
        unshare = shutil.which("unshare", path="/usr/bin:/bin")
        ok = not force_unisolated and _netns_available(unshare)
        if not ok and not allow_unisolated_network:
            raise EnvironmentFailure(
                BuildCode.NETWORK_NOT_ISOLATED,
                "cannot create a network namespace without interfaces here (unshare --net failed); "
                "pass --allow-network-unisolated to build anyway (recorded in the output)",
            )
        return cls(ok, unshare if ok else None, umask, source_date_epoch)

    def with_umask(self, umask: int) -> Sandbox:
        return Sandbox(self.network_isolated, self.unshare, umask, self.source_date_epoch, self.extra_env)

    def with_env(self, extra: Mapping[str, str]) -> Sandbox:
        """Another sandbox whose steps also see ``extra`` (the rebuild check's noise)."""
        return Sandbox(self.network_isolated, self.unshare, self.umask, self.source_date_epoch, tuple(sorted(extra.items())))

    def run(self, argv: Sequence[str], *, cwd: str, home: str, extra_env: Mapping[str, str] | None = None,
            what: str = "build step", timeout: float = 1800) -> StepResult:
        """Run one step; raise ``BUILD_STEP_FAILED`` with the tail of its stderr on failure."""
        cmd = list(argv)
        if self.network_isolated:
            assert self.unshare is not None
            cmd = [self.unshare, "--net", "--", *cmd]
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
        if proc.returncode != 0:
            tail = proc.stderr.decode("utf-8", "replace").strip()[-1500:]
            raise EnvironmentFailure(BuildCode.BUILD_STEP_FAILED, f"{what} exited with {proc.returncode}: {tail}")
        return StepResult(proc.returncode, proc.stdout, proc.stderr)
