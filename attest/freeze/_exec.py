"""Run a command from frozen images only (DESIGN.md "Freeze and store"; ADR-0008).

1. Every image must be a published store entry whose seal still holds (:func:`Store.get`).
2. The command gets a clean environment (never ``LD_*``, ``PYTHON*`` or other variables that
   load code from elsewhere): a fixed ``PATH``, ``PYTHONDONTWRITEBYTECODE=1``,
   ``PYTHONNOUSERSITE=1``, ``PYTHONPYCACHEPREFIX``, ``HOME``/``TMPDIR``/``XDG_*`` in a fresh
   private run directory under ``STATE/runs`` (outside every image), each image's path as
   ``ATTEST_IMAGE_<NAME>``, plus only the variables the caller allows or sets.
3. Images sealed with ``ro-bind`` are exposed through read-only bind mounts in a private mount
   namespace for the command.
4. After the command ends every image is checked again; an image that changed while the
   command ran fails closed (``IMAGE_CHANGED_DURING_EXEC``) whatever the command returned.
   Otherwise the command's exit status is passed through.

    >>> rc = run_from_images("/var/lib/attest", {"RUNTIME": "sha256:..."}, ["python3", "-I", "-B", "-c", "..."])
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections.abc import Mapping, Sequence

from ..errors import InputError, VerificationError
from ._backends import BACKENDS
from ._codes import FreezeCode
from ._image import Image, check_image
from ._state import make_private_dir, open_state, open_sub, random_name, remove_tree, state_lock
from ._store import Store

_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,63}\Z")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"
_FIXED = ("PYTHONDONTWRITEBYTECODE", "PYTHONNOUSERSITE", "PYTHONPYCACHEPREFIX", "ATTEST_RUN_DIR")
# Variables that make an interpreter or the dynamic loader run code from outside the images
# (a preloaded library, a startup file, another stdlib or module path): never passed through.
_CODE_INJECTING_PREFIXES = ("LD_", "PYTHON")
_CODE_INJECTING = frozenset(
    {"BASH_ENV", "ENV", "GCONV_PATH", "PERL5OPT", "PERL5LIB", "PERLLIB", "RUBYOPT", "RUBYLIB", "NODE_OPTIONS", "NODE_PATH"}
)


def run_from_images(
    state_dir: str | os.PathLike[str],
    images: Mapping[str, str],
    argv: Sequence[str],
    *,
    cwd_image: str | None = None,
    pass_env: Sequence[str] = (),
    set_env: Mapping[str, str] | None = None,
    now: float | None = None,
) -> int:
    """Run ``argv`` with the named images (identity or store path each); return its exit status."""
    if not argv:
        raise InputError(FreezeCode.BAD_EXEC_ENV, "no command to run")
    if not images:
        raise InputError(FreezeCode.BAD_IMAGE_REF, "at least one --image NAME=PATH is required")
    store = Store(state_dir)
    seen: dict[str, str] = {}
    for name in images:
        if not _NAME.match(name):
            raise InputError(FreezeCode.BAD_IMAGE_REF, "an image name is a letter followed by letters, digits or '_'", name)
        if name.upper() in seen:
            raise InputError(FreezeCode.BAD_IMAGE_REF, f"the image names {seen[name.upper()]!r} and {name!r} collide", name)
        seen[name.upper()] = name
    if cwd_image is not None and cwd_image not in images:
        raise InputError(FreezeCode.BAD_IMAGE_REF, "--cwd must name one of the --image names", cwd_image)
    env: dict[str, str] = {}
    for var in pass_env:
        if not _ENV_NAME.match(var):
            raise InputError(FreezeCode.BAD_EXEC_ENV, "not an environment variable name", var)
        if var in os.environ:
            env[var] = os.environ[var]
    for var, value in (set_env or {}).items():
        if not _ENV_NAME.match(var):
            raise InputError(FreezeCode.BAD_EXEC_ENV, "not an environment variable name", var)
        env[var] = value
    for var in env:
        if var in _FIXED or var.startswith("ATTEST_IMAGE_"):
            raise InputError(FreezeCode.BAD_EXEC_ENV, "this variable is fixed by attest exec and cannot be overridden", var)
        if var.startswith(_CODE_INJECTING_PREFIXES) or var in _CODE_INJECTING:
            raise InputError(
                FreezeCode.BAD_EXEC_ENV,
                "this variable makes an interpreter or the loader run code from outside the images; it is never passed",
                var,
            )

    state_fd = open_state(store.state_dir, create=False)
    try:
        with state_lock(state_fd, exclusive=False):
            # (1) Only verified store entries whose seal holds.
            resolved: dict[str, Image] = {name: store.get(ref) for name, ref in images.items()}
            runs_fd = open_sub(state_fd, "runs", f"{store.state_dir}/runs")
            run_name = random_name("run")
            run_dir = f"{store.state_dir}/runs/{run_name}"
            run_fd = make_private_dir(runs_fd, run_name, run_dir)
            try:
                for sub in ("home", "tmp", "cache", "config", "data", "pycache"):
                    os.mkdir(sub, 0o700, dir_fd=run_fd)
                os.close(run_fd)
                # (2) Clean environment, caches and temp outside every image.
                full = {
                    "PATH": DEFAULT_PATH,
                    "LC_ALL": "C.UTF-8",
                    "TZ": "UTC",
                    "HOME": f"{run_dir}/home",
                    "TMPDIR": f"{run_dir}/tmp",
                    "XDG_CACHE_HOME": f"{run_dir}/cache",
                    "XDG_CONFIG_HOME": f"{run_dir}/config",
                    "XDG_DATA_HOME": f"{run_dir}/data",
                    **env,
                    "PYTHONDONTWRITEBYTECODE": "1",
                    "PYTHONNOUSERSITE": "1",
                    "PYTHONPYCACHEPREFIX": f"{run_dir}/pycache",
                    "ATTEST_RUN_DIR": run_dir,
                }
                for name, image in resolved.items():
                    full[f"ATTEST_IMAGE_{name.upper()}"] = image.path
                cwd = resolved[cwd_image].path if cwd_image is not None else f"{run_dir}/home"
                # (3) Confine through the backend of any image that needs it (ro-bind).
                command = list(argv)
                for backend_name in sorted({i.backend for i in resolved.values()}):
                    backend = BACKENDS[backend_name]
                    wrapped = backend.wrap(command, [i.path for i in resolved.values()], cwd)
                    if wrapped != command:
                        backend.probe(runs_fd, run_dir)
                        command = wrapped
                        break
                try:
                    done = subprocess.run(command, env=full, cwd=cwd, close_fds=True, check=False)
                except OSError as e:
                    raise InputError(FreezeCode.EXEC_FAILED, f"cannot run the command: {e.strerror}", argv[0]) from e
                # (4) The images must still be exactly what was sealed.
                for name, image in resolved.items():
                    problems = check_image(image)
                    if problems:
                        raise VerificationError(
                            FreezeCode.IMAGE_CHANGED_DURING_EXEC,
                            f"image {name!r} changed while the command ran; its result is not trusted",
                            image.path,
                            findings=problems,
                        )
                for image in resolved.values():
                    store._touch_use(state_fd, image.hex, time.time() if now is None else now)
            finally:
                remove_tree(runs_fd, run_name)
                os.close(runs_fd)
    finally:
        os.close(state_fd)
    rc = done.returncode
    return 128 - rc if rc < 0 else rc
