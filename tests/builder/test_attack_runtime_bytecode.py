"""Attack review of the checked-hash runtime bytecode and the __pycache__ ownership rule (2c151e0).

Every runtime is built for real in the sandbox from a hostile toolchain commit whose build code
rewrites its own wheel (support.build.rewrite_wheel_hook); the built runtime is then run as a
subprocess. test_held_* held before the review's fixes; the other two failed before them (a
toolchain sitecustomize ran in a locked distribution's script; attest itself did not refuse a
wheel's __pycache__ file, only installer >= 1.1 skipped it).
"""

from __future__ import annotations

import importlib._bootstrap_external as bx
import subprocess
import sys
from pathlib import Path

from support.build import RUNTIME_RECIPE, build_runtime_or_error, hostile_runtime_project

from attest.builder import BuildCode
from attest.errors import AttestError

TAG = sys.implementation.cache_tag
PY = f"python{sys.version_info[0]}.{sys.version_info[1]}"
CHECKED = RUNTIME_RECIPE + '\n[options]\nbytecode = "checked-hash"\n'


def _unchecked_pyc(source: str) -> bytes:
    """An unchecked hash-based .pyc: Python runs it without reading (or hashing) its source."""
    return bytes(bx._code_to_hash_pyc(compile(source, "x.py", "exec"), b"\0" * 8, checked=False))


# Replaces the runtime guard: never checks the interpreter, says so.
FAKE_GUARD = _unchecked_pyc("import sys\nsys.stderr.write('GUARD REPLACED\\n')\n")





def _refused_as_bytecode(result: object) -> bool:
    """True for the install's own refusal of a wheel's bytecode; False for a built runtime; any other error fails the test."""
    if isinstance(result, AttestError):
        assert result.code == BuildCode.BUILD_STEP_FAILED and "is bytecode" in result.detail, result
        return True
    assert not isinstance(result, BaseException), result
    return False


def _guard_still_refuses(result: object, run: list[str], env: dict[str, str]) -> None:
    """Refused at build time, or built and the real guard still refuses another libpython."""
    if _refused_as_bytecode(result):
        return
    root = Path(result.store_path)  # type: ignore[attr-defined]
    argv = [a.replace("ROOT", str(root)) for a in run]
    argv[1:1] = ["-B"] if argv[0].endswith("/python") else []  # never write bytecode into the tree under test
    ran = subprocess.run(argv, capture_output=True, env=env, timeout=60)
    assert ran.returncode == 70 and b"built for another interpreter" in ran.stderr, (
        f"the guard was switched off: exit {ran.returncode}: {ran.stdout!r} {ran.stderr!r}")


def test_held_a_toolchain_pyc_of_the_runtime_guard_without_compiled_bytecode(
        tmp_path: Path, other_libpython: dict[str, str]) -> None:
    """Held: bytecode = "none". The guard is in no RECORD and _refuse_startup_hook only sees the top-level
    name (__pycache__), so nothing of attest refuses __pycache__/_attest_runtime_guard.<tag>.pyc; it is
    installer (>= 1.0) that skips every wheel path with a __pycache__ component, silently."""
    extra = f"body['__pycache__/_attest_runtime_guard.{TAG}.pyc'] = {FAKE_GUARD!r}\n"
    recipe, sha = hostile_runtime_project(tmp_path, extra, RUNTIME_RECIPE)
    _guard_still_refuses(build_runtime_or_error(tmp_path, recipe, sha), ["ROOT/bin/tool"], other_libpython)


def test_held_an_opt_pyc_of_the_runtime_guard_beside_checked_hash_bytecode(tmp_path: Path, other_libpython: dict[str, str]) -> None:
    """Held (by installer's __pycache__ skip, not by force=True, which rewrites only <name>.<tag>.pyc):
    an opt-1 .pyc beside the guard would otherwise be what `bin/python -O` runs."""
    extra = f"body['__pycache__/_attest_runtime_guard.{TAG}.opt-1.pyc'] = {FAKE_GUARD!r}\n"
    recipe, sha = hostile_runtime_project(tmp_path, extra, CHECKED)
    _guard_still_refuses(build_runtime_or_error(tmp_path, recipe, sha), ["ROOT/bin/python", "-O", "-c", "print('ran')"], other_libpython)


def test_held_no_pyc_a_wheel_shipped_survives_beside_a_source(tmp_path: Path) -> None:
    """Held by installer, not by force=True (an opt-1 .pyc is never rewritten by the compile step)."""
    fake_cli = _unchecked_pyc("def main():\n    print('not the cli.py of the wheel')\n    return 0\n")
    extra = f"body['toolchain/__pycache__/cli.{TAG}.opt-1.pyc'] = {fake_cli!r}\n"
    recipe, sha = hostile_runtime_project(tmp_path, extra, CHECKED)
    result = build_runtime_or_error(tmp_path, recipe, sha)
    if _refused_as_bytecode(result):
        return
    root = Path(result.store_path)  # type: ignore[attr-defined]
    shipped = root / "lib" / PY / "site-packages" / "toolchain" / "__pycache__" / f"cli.{TAG}.opt-1.pyc"
    assert not shipped.exists(), "the wheel's .pyc is image content"


def test_the_toolchain_cannot_run_code_at_every_interpreter_start(tmp_path: Path) -> None:
    """check_ownership refuses a toolchain .pth "which runs code at interpreter start"; a toolchain
    sitecustomize.py does the same (no stdlib sitecustomize shadows it on this interpreter) and
    changes what a locked distribution's own console script (bin/libdep-hello) runs."""
    hook = b"import libdep\nlibdep.VALUE = 'changed by the toolchain at interpreter start'\n"
    extra = f"body['sitecustomize.py'] = {hook!r}\n"
    recipe, sha = hostile_runtime_project(tmp_path, extra, RUNTIME_RECIPE)
    result = build_runtime_or_error(tmp_path, recipe, sha)
    assert isinstance(result, AttestError), "the build accepted a toolchain sitecustomize.py"
    assert result.code == BuildCode.BUILD_STEP_FAILED and "'sitecustomize.py' would run at every interpreter start" in result.detail, result


def test_attest_itself_refuses_a_toolchain_pyc_of_the_runtime_guard(tmp_path: Path) -> None:
    """What refuses __pycache__/_attest_runtime_guard.<tag>.pyc today is only installer's own skip
    (installer 1.1.0, the locked one; pyproject.toml allows installer>=0.7, whose older releases install
    __pycache__ files). Neither of attest's checks does: the guard is in no RECORD, so check_ownership
    sees one owner, and _refuse_startup_hook compares only the top-level name (__pycache__). With such
    an installer and bytecode = "none" the unchecked .pyc runs instead of the guard."""
    from attest.builder._runtime import check_ownership
    from attest.builder._worker import StartupHook, _refuse_startup_hook

    site = str(tmp_path / "site-packages")
    pyc = f"__pycache__/_attest_runtime_guard.{TAG}.pyc"
    refused = bool(check_ownership({"toolchain": ["toolchain/__init__.py", pyc]}, "toolchain"))
    try:
        _refuse_startup_hook("purelib", f"{site}/{pyc}", site)
    except StartupHook:
        refused = True
    assert refused, f"attest accepts the toolchain's {pyc}"
