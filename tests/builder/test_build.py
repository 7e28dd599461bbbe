"""Fetch, runtime and skill builds from real wheels and a real git repository."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support.build import RUNTIME_RECIPE, Project, git, make_toolchain_repo, site_rel, write_lock
from support.caps import BACKEND

from attest.builder import BuildCode, Sandbox, build_runtime, build_skill, fetch, load_lock, load_recipe
from attest.builder._identity import interpreter_identity, verify_same_interpreter
from attest.errors import EnvironmentFailure, InputError, VerificationError
from attest.inventory import inventory_tree


@pytest.fixture(scope="module")
def sandbox() -> Sandbox:
    return Sandbox.establish(allow_unisolated_network=False)


def _fetch(p: Project) -> None:
    recipe = load_recipe(p.recipe)
    fetch(load_lock(recipe.lock_path), p.cache, lock_path=recipe.lock_path)


def test_fetch_is_fixed_output_and_warm_cache_touches_nothing(project: Project) -> None:
    recipe = load_recipe(project.recipe)
    lock = load_lock(recipe.lock_path)
    first = fetch(lock, project.cache, lock_path=recipe.lock_path)
    assert len(first.fetched) == 2 and not first.network_used
    before = {p: p.stat().st_mtime_ns for p in project.cache.rglob("*")}
    second = fetch(lock, project.cache, lock_path=recipe.lock_path)
    assert second.fetched == () and len(second.present) == 2 and not second.network_used
    assert {p: p.stat().st_mtime_ns for p in project.cache.rglob("*")} == before


def test_fetch_refuses_wrong_bytes(project: Project) -> None:
    recipe = load_recipe(project.recipe)
    lock = load_lock(recipe.lock_path)
    wheel = next(project.wheels.glob("libdep-*.whl"))
    wheel.write_bytes(wheel.read_bytes() + b"tampered")
    with pytest.raises(VerificationError) as ei:
        fetch(lock, project.cache, lock_path=recipe.lock_path)
    assert ei.value.code == BuildCode.HASH_MISMATCH
    assert not any(p.name.startswith("libdep") for p in project.cache.rglob("*.whl"))


def test_runtime_builds_runs_and_stays_unchanged(project: Project, sandbox: Sandbox) -> None:
    _fetch(project)
    recipe = load_recipe(project.recipe)
    result = build_runtime(recipe, project.sha, str(project.store), str(project.cache), sandbox)
    root = Path(result.store_path)
    assert result.network_isolated
    assert {d["name"] for d in result.details["distributions"]} == {"toolchain", "libdep"}
    env = {"PATH": "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1"}
    out = subprocess.run([root / "bin" / "tool"], capture_output=True, env=env, check=True)
    assert out.stdout == b"tool says b'hi' 42\n"
    out = subprocess.run([root / "bin" / "libdep-hello"], capture_output=True, env=env, check=True)
    assert out.stdout == b"hello from libdep 42\n"
    out = subprocess.run([root / "bin" / "libdep-script"], capture_output=True, env=env, check=True)
    assert out.stdout == b"script 42\n"
    out = subprocess.run([root / "bin" / "python", "-I", "-c", "import libdep, toolchain.cli; print(libdep.VALUE)"],
                         capture_output=True, env={"PATH": "/usr/bin:/bin"}, check=True)
    assert out.stdout == b"42\n"
    assert (root / "share" / "libdep" / "notes.txt").read_bytes() == b"a data file\n"
    # Running it (even without PYTHONDONTWRITEBYTECODE) leaves the image unchanged.
    subprocess.run([root / "bin" / "tool"], capture_output=True, env={"PATH": "/usr/bin:/bin"}, check=True)
    assert inventory_tree(root).identity == result.inventory.identity
    # No absolute staging path, no direct_url.json, fixed modes.
    assert not list(root.rglob("direct_url.json"))
    modes = {e.mode for e in result.inventory.entries}
    assert modes <= {0o444, 0o555}
    # A second build is a verified no-op.
    again = build_runtime(recipe, project.sha, str(project.store), str(project.cache), sandbox)
    if not again.reused:  # say why the stored image was not reused
        from attest.freeze import Store

        Store(str(project.store)).get(result.inventory.identity)
    assert again.reused and again.store_path == result.store_path and again.name == result.name
    assert result.immutability == BACKEND
    assert Path(result.store_path).parts[-3] == "store"  # the freeze layer's content-addressed image


def test_two_builds_in_different_contexts_are_identical(project: Project, sandbox: Sandbox, tmp_path: Path) -> None:
    _fetch(project)
    recipe = load_recipe(project.recipe)
    a = build_runtime(recipe, project.sha, str(project.store), str(project.cache), sandbox, publish_output=False,
                      staging_parent=str(tmp_path / "s1"), keep_staging=True)
    # Another cache copy with other mtimes, another umask, another staging directory.
    cache2 = tmp_path / "cache2"
    shutil.copytree(project.cache, cache2)
    for p in cache2.rglob("*.whl"):
        os.chmod(p, 0o644)
        os.utime(p, (1_700_000_000, 1_700_000_000))
    os.environ["ATTEST_TEST_NOISE"] = "1"
    try:
        b = build_runtime(recipe, project.sha, str(project.store), str(cache2), sandbox.with_umask(0o077),
                          publish_output=False, staging_parent=str(tmp_path / "other" / "s2"), keep_staging=True)
    finally:
        del os.environ["ATTEST_TEST_NOISE"]
    assert a.name == b.name
    assert a.inventory.canonical == b.inventory.canonical


def test_changed_inputs_change_the_path(project: Project, sandbox: Sandbox, tmp_path: Path) -> None:
    _fetch(project)
    recipe = load_recipe(project.recipe)
    base = build_runtime(recipe, project.sha, str(project.store), str(project.cache), sandbox, publish_output=False,
                         staging_parent=str(tmp_path / "s"))
    # Another SHA of the toolchain.
    sha2 = make_toolchain_repo(project.repo, message=b"changed")
    other_sha = build_runtime(recipe, sha2, str(project.store), str(project.cache), sandbox, publish_output=False,
                              staging_parent=str(tmp_path / "s"))
    assert other_sha.name != base.name
    assert other_sha.inventory.identity != base.inventory.identity
    # Another wheel (same name and version, other bytes).
    write_lock(project.root, project.wheels, libdep_value=b"VALUE = 43\n")
    _fetch(project)
    other_wheel = build_runtime(load_recipe(project.recipe), project.sha, str(project.store), str(project.cache), sandbox,
                                publish_output=False, staging_parent=str(tmp_path / "s"))
    assert other_wheel.name != base.name


def test_interpreter_identity_is_an_input(project: Project, sandbox: Sandbox, tmp_path: Path) -> None:
    """A byte-identical copy of the interpreter at another path is another interpreter identity."""
    real = interpreter_identity()
    pydir = tmp_path / "py" / "bin"
    pydir.mkdir(parents=True)
    shutil.copy2(real.executable, pydir / "python3.11")
    copy = interpreter_identity(str(pydir / "python3.11"))
    assert copy.digest != real.digest
    with pytest.raises(VerificationError) as ei:
        verify_same_interpreter(real.to_json(), copy)
    assert ei.value.code == BuildCode.INTERPRETER_MISMATCH
    verify_same_interpreter(real.to_json(), interpreter_identity())


def test_unusable_interpreter(tmp_path: Path) -> None:
    with pytest.raises(EnvironmentFailure) as ei:
        interpreter_identity(str(tmp_path / "nope"))
    assert ei.value.code == BuildCode.INTERPRETER_UNUSABLE


def test_not_in_cache_and_cache_tampering(project: Project, sandbox: Sandbox) -> None:
    recipe = load_recipe(project.recipe)
    with pytest.raises(InputError) as ei:
        build_runtime(recipe, project.sha, str(project.store), str(project.cache), sandbox)
    assert ei.value.code == BuildCode.NOT_IN_CACHE
    _fetch(project)
    cached = next(project.cache.rglob("libdep-*.whl"))
    os.chmod(cached, 0o644)
    cached.write_bytes(cached.read_bytes() + b"x")
    with pytest.raises(VerificationError) as ei:
        build_runtime(recipe, project.sha, str(project.store), str(project.cache), sandbox)
    assert ei.value.code == BuildCode.HASH_MISMATCH


def test_network_refusal_without_consent() -> None:
    with pytest.raises(EnvironmentFailure) as ei:
        Sandbox.establish(allow_unisolated_network=False, force_unisolated=True)
    assert ei.value.code == BuildCode.NETWORK_NOT_ISOLATED
    accepted = Sandbox.establish(allow_unisolated_network=True, force_unisolated=True)
    assert accepted.network_isolated is False


def test_build_step_failure_and_unsatisfied_dependency(project: Project, sandbox: Sandbox) -> None:
    _fetch(project)
    recipe = load_recipe(project.recipe)
    (project.repo / "pyproject.toml").write_text((project.repo / "pyproject.toml").read_text().replace("libdep>=1.0", "libdep>=2"))
    git(project.repo, "commit", "-qam", "needs libdep 2")
    sha = git(project.repo, "rev-parse", "HEAD")
    with pytest.raises(VerificationError) as ei:
        build_runtime(recipe, sha, str(project.store), str(project.cache), sandbox)
    assert ei.value.code == BuildCode.DEPENDENCY_UNSATISFIED
    (project.repo / "toolchain" / "__init__.py").unlink()
    (project.repo / "pyproject.toml").write_text('[build-system]\nrequires = ["tinybackend"]\nbuild-backend = "tinybackend"\n[project]\nname = "toolchain"\n')
    git(project.repo, "commit", "-qam", "broken project")
    sha = git(project.repo, "rev-parse", "HEAD")
    with pytest.raises(EnvironmentFailure) as ei:
        build_runtime(recipe, sha, str(project.store), str(project.cache), sandbox)
    assert ei.value.code == BuildCode.BUILD_STEP_FAILED


def test_skill_build(project: Project, tmp_path: Path) -> None:
    recipe = load_recipe(project.skill_recipe)
    result = build_skill(recipe, project.sha, str(project.store), installer_rev=project.sha)
    root = Path(result.store_path)
    assert (root / "agent-policy" / "SKILL.md").read_bytes() == b"# agent-policy\n"
    assert {e.path: e.mode for e in result.inventory.entries}["agent-policy/bin/bootstrap"] == 0o555
    again = build_skill(recipe, project.sha, str(project.store), installer_rev=project.sha)
    assert again.reused and again.inventory.identity == result.inventory.identity
    other = build_skill(recipe, project.sha, str(project.store), installer_rev=project.sha, publish_output=False,
                        staging_parent=str(tmp_path / "x"), umask=0o077)
    assert other.name == result.name and other.inventory.canonical == result.inventory.canonical


def test_bad_recipe(tmp_path: Path) -> None:
    p = tmp_path / "r.toml"
    p.write_text('schema = "attest-recipe/v1"\nkind = "runtime"\nname = "x"\nsurprise = 1\n')
    with pytest.raises(InputError) as ei:
        load_recipe(p)
    assert ei.value.code == BuildCode.BAD_RECIPE


def _interpreters() -> list[object]:
    """This interpreter, and Debian's when present: its stdlib has a sitecustomize of its own,
    which shadowed a guard installed as site-packages/sitecustomize.py (found running the suite
    as an ordinary user, whose python3 was Debian's)."""
    params: list[object] = [pytest.param(None, id="this")]
    debian = Path("/usr/bin/python3.11")
    if debian.exists() and (debian.resolve().parent.parent / "lib" / "python3.11" / "sitecustomize.py").exists():
        params.append(pytest.param(str(debian), id="debian-sitecustomize"))
    return params


@pytest.mark.parametrize("python", _interpreters())
def test_runtime_refuses_another_interpreter(project: Project, sandbox: Sandbox, tmp_path: Path, python: str | None) -> None:
    _fetch(project)
    result = build_runtime(load_recipe(project.recipe), project.sha, str(project.store), str(project.cache), sandbox, python=python,
                           publish_output=False, staging_parent=str(tmp_path / "s"), keep_staging=True)
    root = Path(result.store_path)
    assert not list(root.glob("lib/python*/*-packages/sitecustomize.py"))
    env = {"PATH": "/usr/bin:/bin"}
    ok = subprocess.run([root / "bin" / "python", "-I", "-c", "print('ran')"], capture_output=True, env=env)
    assert ok.returncode == 0 and ok.stdout == b"ran\n"
    record = root / "attest-runtime.json"
    os.chmod(root, 0o755)
    os.chmod(record, 0o644)
    good = record.read_text()
    record.write_text(good.replace('"version": "3.11', '"version": "3.99'))
    bad = subprocess.run([root / "bin" / "python", "-I", "-c", "print('ran')"], capture_output=True, env=env)
    assert bad.returncode == 70 and b"built for another interpreter" in bad.stderr and bad.stdout == b""
    # A record the guard cannot read stops the start too: site.py would report the exception and go on.
    record.write_text("{not json")
    broken = subprocess.run([root / "bin" / "python", "-I", "-c", "print('ran')"], capture_output=True, env=env)
    assert broken.returncode == 70 and b"cannot check the interpreter" in broken.stderr and broken.stdout == b""


def test_no_compatible_wheel(project: Project, sandbox: Sandbox) -> None:
    from support.build import make_wheel, pylock_text

    win = make_wheel(project.wheels, "winonly", "1.0", {"winonly/__init__.py": b""}, tag="cp311-cp311-win_amd64")
    project.lock.write_text(pylock_text([("winonly", "1.0", win)], project.wheels))
    _fetch(project)
    with pytest.raises(InputError) as ei:
        build_runtime(load_recipe(project.recipe), project.sha, str(project.store), str(project.cache), sandbox)
    assert ei.value.code == BuildCode.NO_COMPATIBLE_WHEEL


def test_fetch_failed_for_missing_local_wheel(project: Project) -> None:
    next(project.wheels.glob("libdep-*.whl")).unlink()
    recipe = load_recipe(project.recipe)
    with pytest.raises(InputError) as ei:
        fetch(load_lock(recipe.lock_path), project.cache, lock_path=recipe.lock_path)
    assert ei.value.code == BuildCode.FETCH_FAILED


def test_staging_path_leak_is_found(tmp_path: Path) -> None:
    from attest.builder._outputs import find_leaks

    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "a.txt").write_bytes(b"built in /tmp/stage-1234/out\n")
    (tmp_path / "t" / "b.txt").write_bytes(b"clean\n")
    found = find_leaks(str(tmp_path / "t"), [b"/tmp/stage-1234"])
    assert [(f.code, f.path) for f in found] == [("STAGING_PATH_LEAK", "a.txt")]


def test_tampered_build_record_is_a_store_conflict(project: Project, sandbox: Sandbox) -> None:
    import json as _json

    from attest.builder._outputs import manifest_path

    recipe = load_recipe(project.skill_recipe)
    result = build_skill(recipe, project.sha, str(project.store), installer_rev=project.sha)
    path = Path(manifest_path(str(project.store), result.name))
    doc = _json.loads(path.read_text())
    doc["inventory"]["entries"][0]["mode"] = 0o777
    os.chmod(path, 0o644)
    path.write_text(_json.dumps(doc))
    with pytest.raises(VerificationError) as ei:
        build_skill(recipe, project.sha, str(project.store), installer_rev=project.sha)
    assert ei.value.code == BuildCode.BUILD_RECORD_CONFLICT


def test_requirements_lock_builds_from_a_warm_cache(project: Project, sandbox: Sandbox) -> None:
    """A pip requirements lock names only hashes: the cache supplies the files, offline."""
    import hashlib

    _fetch(project)
    lines = []
    for name, pattern in (("tinybackend", "tinybackend-*.whl"), ("libdep", "libdep-*.whl")):
        wheel = next(project.wheels.glob(pattern))
        version = wheel.name.split("-")[1]
        lines.append(f"{name}=={version} \\\n    --hash=sha256:{hashlib.sha256(wheel.read_bytes()).hexdigest()}\n")
    req = project.root / "lockfiles" / "requirements.lock"
    req.write_text("# generated for the test\n" + "".join(lines))
    recipe_path = project.root / "builders" / "runtime-req.toml"
    recipe_path.write_text(project.recipe.read_text().replace("../lockfiles/pylock.toml", "../lockfiles/requirements.lock"))
    recipe = load_recipe(recipe_path)
    warm = fetch(load_lock(recipe.lock_path), project.cache, lock_path=recipe.lock_path)
    assert warm.fetched == () and not warm.network_used and len(warm.present) == 2
    result = build_runtime(recipe, project.sha, str(project.store), str(project.cache), sandbox)
    assert {d["name"] for d in result.details["distributions"]} == {"toolchain", "libdep"}
    pylock_build = build_runtime(load_recipe(project.recipe), project.sha, str(project.store), str(project.cache), sandbox)
    # Same files, another lock (digest and format are inputs): another name, the same bytes.
    assert pylock_build.name != result.name
    assert pylock_build.inventory.identity == result.inventory.identity


def test_build_step_cannot_write_outside_staging_or_reach_the_network(project: Project, sandbox: Sandbox, tmp_path: Path) -> None:
    assert sandbox.filesystem_confined and sandbox.network_isolated
    target = tmp_path / "escaped.txt"
    sha = make_toolchain_repo(project.repo, probe=str(target))
    _fetch(project)
    result = build_runtime(load_recipe(project.recipe), sha, str(project.store), str(project.cache), sandbox)
    assert not target.exists() and not list(tmp_path.rglob("planted"))  # neither write reached the host
    report = (Path(result.store_path) / site_rel() / "toolchain/_probe.txt").read_text().splitlines()
    if sandbox.rootless:
        # The step runs as the caller's own (mapped) uid, so it may write the mount-point
        # skeleton its sandbox made on the private /tmp tmpfs; that tmpfs dies with the step,
        # and the host has neither file (asserted above).
        assert report[0] in ("refused 2", "refused 13", "refused 30", f"wrote {target}")
        assert report[1].startswith(("refused ", "wrote "))
    else:
        # The host path is not in the step's root (ENOENT), or read-only (EROFS), or not the step's (EACCES).
        assert report[0] in ("refused 2", "refused 13", "refused 30")
        assert report[1].startswith("refused ")
    assert report[2].startswith("network refused")
    assert result.details["filesystem_confined"] is True


def test_builder_identity_covers_the_whole_package_and_the_worker_interpreter(tmp_path: Path) -> None:
    import sys

    import attest
    from attest.builder._common import builder_identity, package_code_inventory

    ident = builder_identity()
    assert ident["worker_interpreter"]["executable_sha256"] == interpreter_identity(os.path.realpath(sys.executable)).executable_sha256
    pkg = Path(attest.__file__).resolve().parent
    assert ident["code_inventory"] == package_code_inventory(pkg).identity
    copy = tmp_path / "attest"
    shutil.copytree(pkg, copy, ignore=shutil.ignore_patterns("__pycache__"))
    before = package_code_inventory(copy).identity
    (copy / "__pycache__").mkdir(exist_ok=True)
    (copy / "__pycache__" / "x.pyc").write_bytes(b"cache")
    assert package_code_inventory(copy).identity == before  # bytecode caches are not code
    walk = copy / "inventory" / "_walk.py"  # not a build or git module: still the builder
    walk.write_bytes(walk.read_bytes() + b"\n# changed\n")
    assert package_code_inventory(copy).identity != before


def test_checked_hash_bytecode_is_reproducible_image_content(project: Project, sandbox: Sandbox, tmp_path: Path) -> None:
    """``bytecode = "checked-hash"``: every module's .pyc is in the inventory, frozen and verified with
    the image, the same from any context, and what a launcher runs; nothing ever writes bytecode."""
    _fetch(project)
    project.recipe.write_text(RUNTIME_RECIPE + '\n[options]\nbytecode = "checked-hash"\n')
    recipe = load_recipe(project.recipe)
    a = build_runtime(recipe, project.sha, str(project.store), str(project.cache), sandbox)
    b = build_runtime(recipe, project.sha, str(project.store), str(project.cache), sandbox.with_umask(0o077),
                      publish_output=False, staging_parent=str(tmp_path / "other" / "s2"), keep_staging=True)
    assert a.inventory.canonical == b.inventory.canonical and not b.reused
    root = Path(a.store_path)
    paths = {e.path for e in a.inventory.entries}
    site = next(p for p in paths if p.endswith("/" + site_rel().rsplit("/", 1)[1] + "/toolchain/cli.py")).removesuffix("toolchain/cli.py")
    sources = [p for p in paths if p.startswith(site) and p.endswith(".py")]
    assert sources
    for src in sources:
        head, name = src.rsplit("/", 1)
        pyc = f"{head}/__pycache__/{name[:-3]}.{sys.implementation.cache_tag}.pyc"
        assert pyc in paths, pyc
        flags = int.from_bytes((root / pyc).read_bytes()[4:8], "little")
        assert flags == 0b11, (pyc, flags)  # hash-based, checked against the source at every import
    # The launcher's interpreter loads the image's own bytecode (and compiles nothing).
    cli_pyc = f"{site}toolchain/__pycache__/cli.{sys.implementation.cache_tag}.pyc"
    out = subprocess.run([root / "bin" / "python", "-I", "-B", "-v", "-c", "import toolchain.cli"],
                         capture_output=True, env={"PATH": "/usr/bin:/bin"}, check=True)
    assert f"code object from '{root / cli_pyc}'".encode() in out.stderr
    assert (root / "bin" / "tool").read_bytes().splitlines()[1].endswith(b'/python" -I -B "$0" "$@"')
    # -I ignores PYTHONDONTWRITEBYTECODE: the launcher's -B keeps a writable copy without bytecode so.
    copy = tmp_path / "copy"
    shutil.copytree(root, copy)
    for dirpath, _, _ in os.walk(copy):
        os.chmod(dirpath, 0o755)
    for cache in list(copy.rglob("__pycache__")):
        shutil.rmtree(cache)
    out = subprocess.run([copy / "bin" / "tool"], capture_output=True, env={"PATH": "/usr/bin:/bin"}, check=True)
    assert out.stdout == b"tool says b'hi' 42\n"
    assert not list(copy.rglob("*.pyc"))
