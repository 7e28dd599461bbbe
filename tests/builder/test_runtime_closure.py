"""What the runtime image trusts from the host: the interpreter binary and its standard library."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from attest.builder import BuildCode
from attest.builder._closure import copy_interpreter, verify_carried
from attest.builder._identity import interpreter_identity, memoized_stdlib_identity, stdlib_identity, verify_same_interpreter
from attest.errors import EnvironmentFailure, VerificationError


def _stdlib(tmp_path: Path) -> Path:
    lib = tmp_path / "lib" / "python3.11"
    (lib / "encodings").mkdir(parents=True)
    (lib / "os.py").write_text("# os\n")
    (lib / "encodings" / "__init__.py").write_text("# enc\n")
    (lib / "__pycache__").mkdir()
    (lib / "__pycache__" / "os.cpython-311.pyc").write_bytes(b"cache")
    (lib / "site-packages" / "evil").mkdir(parents=True)
    (lib / "site-packages" / "evil" / "__init__.py").write_text("x = 1\n")
    return lib


def test_stdlib_identity_covers_the_stdlib_and_not_site_packages(tmp_path: Path) -> None:
    lib = _stdlib(tmp_path)
    first = stdlib_identity(str(lib))
    (lib / "site-packages" / "evil" / "__init__.py").write_text("x = 2\n")
    (lib / "__pycache__" / "os.cpython-311.pyc").write_bytes(b"other cache")
    assert stdlib_identity(str(lib)) == first  # installed packages and bytecode caches are not the stdlib
    (lib / "os.py").write_text("# os, patched\n")
    assert stdlib_identity(str(lib))["inventory"] != first["inventory"]
    os.symlink("/etc/python3.11/sitecustomize.py", lib / "sitecustomize.py")
    linked = stdlib_identity(str(lib))
    assert linked["symlinks"] != first["symlinks"]  # recorded by target (the target is not covered)


def test_stdlib_memo_notices_a_changed_file(tmp_path: Path) -> None:
    lib = _stdlib(tmp_path)
    memo = tmp_path / "state"
    memo.mkdir(mode=0o700)
    first = memoized_stdlib_identity(str(lib), str(memo))
    assert list((memo / "interpreters").iterdir())
    assert memoized_stdlib_identity(str(lib), str(memo)) == first
    (lib / "encodings" / "__init__.py").write_text("# enc, patched\n")
    assert memoized_stdlib_identity(str(lib), str(memo)) != first
    (memo / "interpreters" / next(iter(os.listdir(memo / "interpreters")))).write_bytes(b"{not json")
    assert memoized_stdlib_identity(str(lib), str(memo)) == stdlib_identity(str(lib))  # a damaged memo is recomputed


def test_an_unreadable_stdlib_makes_the_interpreter_unusable(tmp_path: Path) -> None:
    lib = _stdlib(tmp_path)
    os.mkfifo(lib / "fifo")
    with pytest.raises(EnvironmentFailure) as ei:
        stdlib_identity(str(lib))
    assert ei.value.code == BuildCode.INTERPRETER_UNUSABLE


def test_a_changed_stdlib_is_another_interpreter() -> None:
    real = interpreter_identity()
    assert dict(real.stdlib_identity)["inventory"].startswith("sha256:")
    changed = dataclasses.replace(real, stdlib_identity=tuple(sorted({**dict(real.stdlib_identity), "inventory": "sha256:" + "0" * 64}.items())))
    assert changed.digest != real.digest  # the identity digest (an input of every runtime) changes
    with pytest.raises(VerificationError) as ei:
        verify_same_interpreter(real.to_json(), changed)
    assert ei.value.code == BuildCode.INTERPRETER_MISMATCH and "stdlib_identity" in str(ei.value)


def test_copied_interpreter_must_be_the_probed_one(tmp_path: Path) -> None:
    real = interpreter_identity()
    root = tmp_path / "out"
    copied = copy_interpreter(real, str(root))
    verify_carried(str(root), copied)
    assert (root / "lib" / f"python{real.python_tag}" / "os.py").is_file()
    assert not (root / "lib" / f"python{real.python_tag}" / "test").exists()
    # A carried file changed, one added beside them, or the binary swapped: each is refused.
    for change in ("lib/python{tag}/os.py", "lib/python{tag}/planted.py", "bin/python"):
        target = root / change.format(tag=real.python_tag)
        before = target.read_bytes() if target.exists() else None
        target.write_bytes(b"#!/bin/sh\necho swapped\n")
        with pytest.raises(VerificationError) as ei:
            verify_carried(str(root), copied)
        assert ei.value.code == BuildCode.INTERPRETER_MISMATCH
        if before is None:
            target.unlink()
        else:
            target.write_bytes(before)
    verify_carried(str(root), copied)


def test_an_interpreter_changed_after_its_probe_is_not_copied(tmp_path: Path) -> None:
    real = interpreter_identity()
    other = dataclasses.replace(real, executable_sha256="0" * 64)
    with pytest.raises(VerificationError) as ei:
        copy_interpreter(other, str(tmp_path / "a"))
    assert ei.value.code == BuildCode.INTERPRETER_MISMATCH
    stale = dataclasses.replace(real, stdlib_identity=tuple(sorted({**dict(real.stdlib_identity), "inventory": "sha256:" + "0" * 64}.items())))
    with pytest.raises(VerificationError) as ei:
        copy_interpreter(stale, str(tmp_path / "b"))
    assert ei.value.code == BuildCode.INTERPRETER_MISMATCH and "standard library" in str(ei.value)


@pytest.mark.parametrize("content", [
    b"\xff\xfe not utf-8", b"[build-system]\nrequires = [" * 1 + b"1" * 5000 + b"]\n", b"a = " + b"[" * 3000 + b"]" * 3000 + b"\n",
    b'build-system = "x"\n', b"[build-system]\nrequires = [1]\n", b"[build-system]\nbuild-backend = 3\n", b"not = toml = at all",
])
def test_a_hostile_toolchain_pyproject_is_bad_recipe(tmp_path: Path, content: bytes) -> None:
    from attest.builder._runtime import _read_build_system
    from attest.errors import InputError

    (tmp_path / "pyproject.toml").write_bytes(content)
    with pytest.raises(InputError) as ei:
        _read_build_system(str(tmp_path))
    assert ei.value.code == BuildCode.BAD_RECIPE
