#!/usr/bin/env python3
"""Set up a development environment and run a `just` recipe: needs only python3 (>= 3.11) and git.

    python3 bootstrap.py demo     # the end-to-end demonstration on embedded defaults
    python3 bootstrap.py test     # the whole test suite

Creates ./.venv, installs this project with its test extras and `rust-just` from the package
registry (again only when pyproject.toml changed), compiles the bytecode of whatever changed in
attest/, then runs `.venv/bin/just RECIPE [ARGS...]`.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
STAMP = VENV / ".attest-bootstrap"


def run(*cmd: str | os.PathLike[str]) -> None:
    result = subprocess.run([os.fspath(c) for c in cmd], cwd=ROOT)
    if result.returncode != 0:
        sys.exit(f"bootstrap: {' '.join(map(str, cmd))} failed with exit code {result.returncode}")


# uv installs what pip does (the same resolution of the same requirements) in a fraction of pip's time: pip spent 20 s of
# CPU here, most of it its own Python. Pinned: its command line changes between releases. Where uv cannot be had or fails
# (a platform without its wheel, an index only pip's own configuration names), pip does the same install itself.
UV = "uv==0.13.10"
REQUIREMENTS = ("-e", ".[test]", "rust-just")


def uv_cache() -> tuple[str, ...]:
    """uv keeps its downloads in $UV_CACHE_DIR, else $XDG_CACHE_HOME/uv or ~/.cache/uv, and fails where it cannot create
    that (the system's `nobody` has the home /nonexistent): there it gets a throwaway cache instead."""
    if os.environ.get("UV_CACHE_DIR"):
        return ()
    where = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "uv"
    while not where.exists() and where != where.parent:
        where = where.parent
    return () if os.access(where, os.W_OK | os.X_OK) else ("--no-cache",)


def install(python: Path) -> None:
    quiet = ("--quiet", "--disable-pip-version-check")
    uv = VENV / "bin" / "uv"
    if subprocess.run([python, "-m", "pip", "install", *quiet, UV], cwd=ROOT).returncode == 0 and subprocess.run(
            # bytecode compiled now, as pip does: where PYTHONDONTWRITEBYTECODE is set no process would ever cache it
            [uv, "pip", "install", "--quiet", *uv_cache(), "--python", python, "--compile-bytecode", *REQUIREMENTS],
            cwd=ROOT).returncode == 0:
        return
    print("bootstrap: uv could not install them; pip does instead ...", file=sys.stderr, flush=True)
    run(python, "-m", "pip", "install", *quiet, *REQUIREMENTS)


def main() -> int:
    if sys.version_info < (3, 11):
        sys.exit(f"bootstrap: attest needs Python >= 3.11; this is {sys.version.split()[0]}")
    wanted = hashlib.sha256((ROOT / "pyproject.toml").read_bytes() + sys.version.encode()).hexdigest()
    python = VENV / "bin" / "python"
    if not python.exists() or not STAMP.exists() or STAMP.read_text().strip() != wanted:
        import time

        started = time.monotonic()
        print(f"bootstrap: creating {VENV} ...", file=sys.stderr, flush=True)
        venv.EnvBuilder(with_pip=True, clear=True).create(VENV)
        print("bootstrap: installing attest with its test extras and just from the package registry "
              "(uv; about 10 s measured on a 2-core machine, pip alone took 25 to 55 s) ...", file=sys.stderr, flush=True)
        install(python)
        STAMP.write_text(wanted + "\n")
        print(f"bootstrap: .venv ready in {time.monotonic() - started:.0f} s; running `just {' '.join(sys.argv[1:]) or '--list'}`",
              file=sys.stderr, flush=True)
    # attest is installed editable, imported from ./attest. Where PYTHONDONTWRITEBYTECODE is set (as on many CI machines)
    # no process caches its bytecode, and every attest command compiles its ~120 modules again: 0.26 s of CPU of a review
    # command's 0.56 s of imports. Compiling what is out of date here costs about 2 s once, nothing when all is current.
    run(python, "-m", "compileall", "-q", "attest")
    recipe = sys.argv[1:] or ["--list"]
    env = dict(os.environ, PATH=f"{VENV / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}", VIRTUAL_ENV=str(VENV))
    return subprocess.run([os.fspath(VENV / "bin" / "just"), *recipe], cwd=ROOT, env=env).returncode


if __name__ == "__main__":
    sys.exit(main())
