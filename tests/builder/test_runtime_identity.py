"""The runtime's identity does not depend on where the checkout (or its .venv) lives.

An independent rebuilder clones the same commit somewhere else and builds with its own
``.venv``: the interpreter identity is the real interpreter behind that venv (its resolved
base executable, digest, libpython, stdlib inventory, version, platform), so both reach the
same runtime name and the same inventory.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support.build import Project, git

from attest.builder import BuildCode, Sandbox, build_runtime, fetch, load_lock, load_recipe
from attest.builder._identity import interpreter_identity
from attest.errors import EnvironmentFailure


@pytest.fixture(scope="module")
def sandbox() -> Sandbox:
    return Sandbox.establish(allow_unisolated_network=False)


@pytest.fixture(scope="module")
def base_python() -> str:
    """The real interpreter the test suite runs on (never a venv path)."""
    return interpreter_identity().executable


def _venv(base: str, where: Path, *, copies: bool) -> Path:
    subprocess.run([base, "-m", "venv", "--without-pip", *(["--copies"] if copies else []), str(where)],
                   check=True, capture_output=True)
    return where / "bin" / "python"


def _clone(project: Project, where: Path) -> Path:
    """A second checkout of the project: the toolchain cloned, the lock, wheels and recipes copied."""
    where.mkdir(parents=True)
    git(where, "clone", "-q", str(project.repo), "repo")
    shutil.copytree(project.root / "lockfiles", where / "lockfiles")
    shutil.copytree(project.root / "builders", where / "builders")
    return where


@pytest.mark.parametrize("copies", [True, False], ids=["venv-copies", "venv-symlinks"])
def test_a_venv_python_has_its_base_interpreters_identity(tmp_path: Path, base_python: str, copies: bool) -> None:
    base = interpreter_identity(base_python)
    python = _venv(base_python, tmp_path / "checkout" / ".venv", copies=copies)
    ident = interpreter_identity(str(python))
    assert ident.executable == base.executable == base_python
    assert ident.to_json() == base.to_json() and ident.digest == base.digest
    assert str(tmp_path) not in json.dumps(ident.to_json())


def test_a_venv_whose_base_is_gone_is_unusable(tmp_path: Path, base_python: str) -> None:
    python = _venv(base_python, tmp_path / ".venv", copies=True)
    cfg = tmp_path / ".venv" / "pyvenv.cfg"
    cfg.write_text("".join(f"home = {tmp_path / 'gone' / 'bin'}\n" if line.startswith("home =") else line
                           for line in cfg.read_text().splitlines(keepends=True)))
    with pytest.raises(EnvironmentFailure) as ei:
        interpreter_identity(str(python))
    assert ei.value.code == BuildCode.INTERPRETER_UNUSABLE


def test_two_clones_with_their_own_venvs_build_the_same_runtime(project: Project, sandbox: Sandbox, tmp_path: Path,
                                                                 base_python: str) -> None:
    results = []
    for where in (tmp_path / "alice" / "proj", tmp_path / "elsewhere" / "bob" / "checkout"):
        clone = _clone(project, where)
        python = _venv(base_python, clone / ".venv", copies=True)  # bootstrap.py's venv: a copy of the binary
        recipe = load_recipe(clone / "builders" / "runtime.toml")
        cache = clone / ".attest-state" / "cache"
        fetch(load_lock(recipe.lock_path), str(cache), lock_path=recipe.lock_path)
        sha = git(clone / "repo", "rev-parse", "HEAD")
        results.append((clone, build_runtime(recipe, sha, str(clone / ".attest-state"), str(cache), sandbox,
                                             python=str(python))))
    (clone_a, a), (clone_b, b) = results
    assert a.name == b.name and a.inputs_digest == b.inputs_digest
    assert a.inventory.canonical == b.inventory.canonical
    # The recorded interpreter is the real one, never either clone's venv.
    assert a.inputs["interpreter"] == b.inputs["interpreter"]
    assert a.inputs["interpreter"]["executable"] == base_python
    for _, r in results:
        recorded = json.dumps(r.inputs) + json.dumps(r.details)
        assert str(clone_a) not in recorded and str(clone_b) not in recorded
        # The image is a whole prefix: no pyvenv.cfg sends its interpreter to the base's stdlib.
        assert not (Path(r.store_path) / "pyvenv.cfg").exists()
        assert (Path(r.store_path) / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "os.py").is_file()
