"""Build steps that run as a separate hermetic process: ``python -I -m attest.builder._worker SPEC``.

The parent writes a JSON spec into a directory of the staging area that no step can write,
before the step runs, and runs this module inside the sandbox (clean environment, no
network). Every wheel is named with the SHA-256 the host verified and is re-hashed here, at
the moment it is installed, from the very bytes that are installed. Only this process writes the runtime tree, with
the ``installer`` library: no pip, no ``direct_url.json``, no cache, no absolute staging path.

Tasks:
- ``install``: install every wheel into ``lib/pythonX.Y/site-packages`` of the runtime tree, a
  whole prefix the host laid out before the step (``bin/python``, ``lib/libpython*``, the
  standard library: see attest.builder._closure);
- ``install-dir``: install wheels into one flat directory (the build backend's environment).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import sys
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, TypedDict

from installer import install
from installer.destinations import SchemeDictionaryDestination
from installer.records import RecordEntry
from installer.sources import WheelFile
from installer.utils import Scheme

if TYPE_CHECKING:
    from installer.scripts import ScriptSection


class InstallDirSpec(TypedDict):
    """The ``install-dir`` task: the wheels (path and verified sha256) to install into the directory ``root``."""

    task: str
    root: str
    wheels: list[dict[str, str]]


class InstallSpec(InstallDirSpec):
    """The ``install`` task: the runtime tree at ``root``, for the interpreter the host probed (its identity)."""

    interpreter: str
    python_version: str
    full_version: str
    identity: dict[str, object]


INSTALLER_NAME = b"attest\n"

# A POSIX launcher that finds its interpreter next to itself, so the tree runs from any
# path it is materialized at (a frozen review-run copy included). The first line is run
# by /bin/sh (''' 'exec' ''' is "exec"), the rest is read by Python as a string literal.
# -I ignores every PYTHON* variable, PYTHONDONTWRITEBYTECODE included, so -B keeps the
# interpreter from writing bytecode anywhere: next to image files (root writes through the
# readonly backend's missing write bits) or into the base interpreter's stdlib.
_LAUNCHER_HEAD = """#!/bin/sh
'''exec' "$(dirname -- "$(readlink -f -- "$0")")/python" -I -B "$0" "$@"
' '''
"""
_LAUNCHER = _LAUNCHER_HEAD + """import sys
from {module} import {root}
if __name__ == "__main__":
    sys.argv[0] = sys.argv[0].removesuffix(".exe")
    sys.exit({attr}())
"""


_GUARD = '''"""attest runtime guard: refuse to start under an interpreter other than the recorded one."""
import hashlib, json, os, platform, sys, sysconfig


def _check():
    root = os.path.realpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
    with open(os.path.join(root, "attest-runtime.json"), encoding="utf-8") as f:
        want = json.load(f)
    libs = []
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 6 and "/libpython" in parts[-1] and os.path.realpath(parts[-1]) not in libs:
                libs.append(os.path.realpath(parts[-1]))
    have_libs = []
    for p in libs:
        h = hashlib.sha256()
        with open(p, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        have_libs.append({"path": p, "sha256": h.hexdigest()})
    # The image carries its libpython (image-relative paths) or the host's is a recorded host library.
    image = want.get("image") or {}
    carried = image.get("libpython") or []
    want_libs = ([{"path": os.path.join(root, e["path"]), "sha256": e["sha256"]} for e in carried] if carried
                 else [e for e in want.get("libpython", [])])
    have = {"version": platform.python_version(), "soabi": sysconfig.get_config_var("SOABI") or "",
            "platform": sysconfig.get_platform(), "libpython": sorted(have_libs, key=str),
            "prefix": os.path.realpath(sys.prefix), "stdlib": os.path.realpath(os.path.dirname(os.__file__))}
    want = {**want, "libpython": sorted(want_libs, key=str), "prefix": root,
            "stdlib": os.path.join(root, image.get("stdlib", "?"))}
    wrong = [k for k in have if have[k] != want.get(k)]
    if wrong:
        sys.stderr.write("attest runtime: built for another interpreter (%s differ); refusing to run\\n" % ", ".join(wrong))
        sys.stderr.flush()
        os._exit(70)


try:
    _check()
except BaseException as e:  # site.py would print an exception and start anyway: fail closed here
    sys.stderr.write("attest runtime: cannot check the interpreter (%s: %s); refusing to run\\n" % (type(e).__name__, e))
    sys.stderr.flush()
    os._exit(70)
'''
# The guard runs from a .pth file, not as sitecustomize: a base interpreter whose stdlib has its
# own sitecustomize (Debian's links /etc/python3.X/sitecustomize.py) shadows one in site-packages.
GUARD_MODULE = "_attest_runtime_guard"
GUARD_PTH = "00-attest-runtime-guard.pth"
# Imported by site.py at every interpreter start, -I included, after the .pth files: whoever
# ships one runs code in every program of the runtime, a locked distribution's scripts too.
STARTUP_MODULES = frozenset({"sitecustomize", "usercustomize"})


def _destination(scheme: dict[str, str], interpreter: str, *, runtime: bool = False) -> SchemeDictionaryDestination:
    site = os.path.abspath(scheme["purelib"]) if runtime else None

    class RelocatableDestination(SchemeDictionaryDestination):
        def write_to_fs(self, scheme: Scheme, path: str, stream: BinaryIO, is_executable: bool) -> RecordEntry:
            if site is not None:  # the runtime tree, where the guard must run first
                _refuse_startup_hook(scheme, os.path.abspath(os.path.join(self.scheme_dict[scheme], path)), site)
            return super().write_to_fs(scheme, path, stream, is_executable)

        def write_file(self, scheme: Scheme, path: str | os.PathLike[str], stream: BinaryIO, is_executable: bool) -> RecordEntry:
            if scheme == "scripts":
                data = stream.read()
                first, _, rest = data.partition(b"\n")
                if first.startswith(b"#!python"):
                    # installer would write an absolute interpreter path; use the launcher instead.
                    data = _LAUNCHER_HEAD.encode() + rest
                return self.write_to_fs(scheme, os.fspath(path), io.BytesIO(data), is_executable)
            return super().write_file(scheme, path, stream, is_executable)

        def write_script(self, name: str, module: str, attr: str, section: ScriptSection) -> RecordEntry:
            root = attr.split(".")[0]
            data = _LAUNCHER.format(module=module, root=root, attr=attr).encode()
            with io.BytesIO(data) as stream:
                entry = self.write_to_fs(Scheme("scripts"), name, stream, is_executable=True)
            return entry

    return RelocatableDestination(scheme, interpreter=interpreter, script_kind="posix", hash_algorithm="sha256",
                                  bytecode_optimization_levels=())


def layout_problem(rel: str) -> str | None:
    """Why no wheel file may land at ``rel`` (relative to the runtime tree, outside site-packages), or None (pure).

    Besides site-packages, what the interpreter or the guard reads before any installed code
    runs: CPython's getpath takes ``bin/python._pth`` (it replaces ``sys.path`` and switches
    ``site`` off, so the guard never runs) and ``bin/pyvenv.cfg`` (read before the tree's own,
    e.g. ``include-system-site-packages = true``), even under ``-I``; the tree's root holds the
    worker's own ``pyvenv.cfg`` and ``attest-runtime.json``; ``bin/python`` is the probed binary.
    """
    parts = rel.split("/")
    name = parts[-1]
    if len(parts) == 1:
        return "the tree's root holds only the runtime's own manifest (attest-runtime.json)"
    if name.endswith("._pth") or name in ("pyvenv.cfg", "pybuilddir.txt"):
        return "the interpreter reads it at start, before site.py and the runtime guard"
    if parts[0] == "bin" and len(parts) == 2 and name.startswith("python"):
        return "bin/python is the probed interpreter: no wheel file may stand beside it under its name"
    if parts[0] == "lib":
        return "lib/ holds the interpreter's site-packages only"
    return None


class StartupHook(Exception):
    """A wheel file would run, or replace, code at interpreter start before the guard."""


def _refuse_startup_hook(scheme: str, target: str, site: str) -> None:
    """Refuse a wheel file that could switch the runtime guard off or run before it.

    - outside site-packages, what :func:`layout_problem` refuses (``bin/python._pth``,
      ``pyvenv.cfg``, the tree's root, ``lib/``, a second ``bin/python*``);
    - any file another scheme (``data``, ``scripts``, ``headers``) would place under
      site-packages: its RECORD path starts with ``../``, so the ownership check (one
      distribution per importable name, no ``.pth`` from the toolchain) never sees it;
    - anything named as the guard module (a package directory or an extension module is
      imported before ``_attest_runtime_guard.py``) or as its ``.pth``;
    - ``sitecustomize`` or ``usercustomize`` in any form: site.py imports them at every start;
    - any file under a ``__pycache__`` directory: bytecode runs instead of its source;
    - a ``.pth`` that site.py would process before the guard's (names sort as strings).
    """
    rel = os.path.relpath(target, site)
    if rel == os.curdir or rel == os.pardir or rel.startswith(os.pardir + os.sep):
        tree = os.path.dirname(os.path.dirname(os.path.dirname(site)))  # TREE/lib/pythonX.Y/site-packages
        where = os.path.relpath(target, tree)
        why = "it is outside the runtime tree" if where == os.pardir or where.startswith(os.pardir + os.sep) else layout_problem(
            where.replace(os.sep, "/"))
        if why is not None:
            raise StartupHook(f"the {scheme} file {where!r} may not be installed: {why}")
        return
    top = rel.split(os.sep, 1)[0]
    if scheme not in ("purelib", "platlib"):
        raise StartupHook(f"the {scheme} file {rel!r} would be installed into site-packages, past the ownership checks")
    parts = rel.split(os.sep)
    if "__pycache__" in parts:
        # Bytecode is what Python runs instead of a source (an unchecked hash-based .pyc without
        # reading it); only the sandboxed compile step writes any (installer >= 1.1 skips these).
        raise StartupHook(f"{rel!r} is bytecode: a wheel's .pyc would run instead of the source beside it")
    name = top.split(".", 1)[0]
    if name == GUARD_MODULE or top == GUARD_PTH:
        raise StartupHook(f"{rel!r} would be imported instead of the runtime guard")
    if name in STARTUP_MODULES:
        raise StartupHook(f"{rel!r} would run at every interpreter start (site.py imports {name})")
    if os.sep not in rel and rel.endswith(".pth") and not rel.startswith(".") and rel < GUARD_PTH:
        raise StartupHook(f"{rel!r} would run at interpreter start before the runtime guard ({GUARD_PTH})")


class WheelChanged(Exception):
    """A wheel's bytes are not the ones the host verified."""


def _install_wheels(wheels: list[dict[str, str]], scheme: dict[str, str], interpreter: str, *, runtime: bool = False) -> None:
    """Install each wheel from the bytes just read and re-hashed, never from a second open."""
    dest = _destination(scheme, interpreter, runtime=runtime)
    for wheel in wheels:
        with open(wheel["path"], "rb") as f:
            data = f.read()
        if hashlib.sha256(data).hexdigest() != wheel["sha256"]:
            raise WheelChanged(f"{os.path.basename(wheel['path'])} does not have the verified digest {wheel['sha256']}")
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            z.filename = os.path.basename(wheel["path"])
            install(WheelFile(z), dest, {"INSTALLER": INSTALLER_NAME})


def task_install(spec: InstallSpec) -> None:
    # The host laid out bin/python, lib/libpython* and the standard library (lib/pythonX.Y)
    # before this step: the tree is a whole prefix, found by the interpreter's own landmarks.
    root = Path(spec["root"])
    pyver = spec["python_version"]
    site_name = spec["identity"].get("site_name", "site-packages")
    if not isinstance(site_name, str):
        raise TypeError(f"the interpreter identity's site_name is {site_name!r}, not a directory name")
    site = root / "lib" / f"python{pyver}" / site_name
    if not (root / "bin" / "python").is_file() or not (site.parent / "os.py").is_file():
        raise FileNotFoundError("the runtime tree does not hold the interpreter the host copied")
    site.mkdir()
    scheme = {
        "purelib": str(site),
        "platlib": str(site),
        "scripts": str(root / "bin"),
        "headers": str(root / "include" / "site" / f"python{pyver}"),
        "data": str(root),
    }
    _install_wheels(spec["wheels"], scheme, "python", runtime=spec.get("identity") is not None)
    if spec.get("identity") is not None:
        # The runtime records the interpreter it was built for and refuses any other at startup.
        (root / "attest-runtime.json").write_text(json.dumps(spec["identity"], sort_keys=True, indent=1) + "\n")
        (site / f"{GUARD_MODULE}.py").write_text(_GUARD)
        (site / GUARD_PTH).write_text(f"import {GUARD_MODULE}\n")


def task_install_dir(spec: InstallDirSpec) -> None:
    target = Path(spec["root"])
    target.mkdir(parents=True, exist_ok=True)
    scheme = {k: str(target / k) if k in ("scripts", "headers", "data") else str(target) for k in
              ("purelib", "platlib", "scripts", "headers", "data")}
    _install_wheels(spec["wheels"], scheme, sys.executable)


TASKS = {"install": task_install, "install-dir": task_install_dir}


def main(argv: list[str]) -> int:
    with open(argv[1], encoding="utf-8") as f:
        spec = json.load(f)
    try:
        TASKS[spec["task"]](spec)
    except Exception as e:  # noqa: BLE001 - reported to the parent as a failed step, never swallowed
        sys.stderr.write(f"{type(e).__name__}: {e}\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
