"""A `readonly` image can be removed by its own non-root deployment user (found by a security review).

The ``readonly`` backend is meant for a non-root deployment user. ``remove_tree`` once only
cleared immutable flags and never gave a sealed 0555 directory its write bit back, so as that
user gc (and the discard of a stale or failed image) died with a raw PermissionError and left
the image's bytes behind in staging forever.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import textwrap

import pytest

_SCRIPT = textwrap.dedent(
    """
    import os, sys
    from attest.inventory import inventory_tree
    from attest.freeze import freeze_tree, Store
    base = sys.argv[1]
    src = os.path.join(base, "src")
    os.makedirs(os.path.join(src, "d"))
    with open(os.path.join(src, "d", "f"), "w") as f:
        f.write("x")
    state = os.path.join(base, "state")
    freeze_tree(src, inventory_tree(src), state, backend="readonly")
    try:
        Store(state).gc(recent=0, now=10**12)
    except Exception as e:
        print("GC-FAILED", type(e).__name__, e)
    print("LEFT", sorted(os.listdir(os.path.join(state, "staging"))))
    """
)


def _interpreter_for(uid: int, gid: int) -> str | None:
    """A Python >= 3.11 that ``uid`` can run: this one's base interpreter, else the system's."""
    for candidate in (os.path.realpath(getattr(sys, "_base_executable", sys.executable)), "/usr/bin/python3"):
        probe = subprocess.run(["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", candidate, "-I", "-c",
                                "import sys; sys.exit(sys.version_info < (3, 11))"], capture_output=True, cwd="/")
        if probe.returncode == 0:
            return candidate
    return None


def test_readonly_backend_gc_works_for_a_non_root_deployment_user() -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to switch to an unprivileged user")
    try:
        nobody = pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("no 'nobody' user")
    if shutil.which("setpriv") is None:
        pytest.skip("no setpriv")
    python = _interpreter_for(nobody.pw_uid, nobody.pw_gid)
    if python is None:
        pytest.skip("no Python >= 3.11 on this machine that uid 'nobody' can run")
    base = tempfile.mkdtemp(prefix="attest-review-ro-")
    try:
        os.chmod(base, 0o755)
        # The clone may live where 'nobody' cannot go (a clone in /root): copy the package out.
        lib = os.path.join(base, "lib")
        shutil.copytree(os.path.dirname(os.path.dirname(os.path.abspath(__import__("attest").__file__))) + "/attest",
                        os.path.join(lib, "attest"), ignore=shutil.ignore_patterns("__pycache__"))
        subprocess.run(["chmod", "-R", "a+rX", lib], check=True)
        os.chown(base, nobody.pw_uid, nobody.pw_gid)
        proc = subprocess.run(
            ["setpriv", f"--reuid={nobody.pw_uid}", f"--regid={nobody.pw_gid}", "--clear-groups",
             python, "-c", _SCRIPT, base],
            capture_output=True, text=True, timeout=120, cwd="/",
            env={"PATH": "/usr/bin:/bin", "PYTHONPATH": lib, "PYTHONDONTWRITEBYTECODE": "1"},
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert "GC-FAILED" not in proc.stdout, f"gc of a readonly image fails for its own deployment user: {proc.stdout}"
        assert "LEFT []" in proc.stdout, proc.stdout
    finally:
        subprocess.run(["chmod", "-R", "u+w", base], capture_output=True)
        shutil.rmtree(base, ignore_errors=True)
