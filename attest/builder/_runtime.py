"""The runtime builder: the toolchain at a full git SHA plus its locked wheels, hermetically.

Steps (docs/build.md "The build"; what the runtime attestation records of them, and how
`attest bootstrap` checks it against the pins: docs/bootstrap.md "Step 5: runtime"):

1. Parse the recipe and the lock; probe the interpreter's identity; resolve the full SHA
   to its tree from the object database.
2. Select one wheel per applicable locked distribution (markers and tags of the target
   interpreter); compute the input address; reuse the store entry when it exists and
   still verifies (a no-op rebuild).
3. In private staging: export the toolchain tree from git objects (no worktree), install
   the locked build backend into a private directory, build the toolchain wheel with it
   (PEP 517, offline, in the sandbox).
4. Install the toolchain wheel and the locked wheels with ``installer`` in the sandbox
   into a venv-shaped, relocatable tree; optionally compile hash-based .pyc.
5. Validate the distribution set (every locked distribution installed once, every
   requirement of every installed distribution satisfied); check exposed entry points.
6. Normalize modes and mtimes; refuse any file naming a staging path; inventory.
7. Freeze into the store (the freeze layer seals, then verifies the sealed bytes); write
   the build record mapping the input-addressed name to the frozen image.
"""

from __future__ import annotations

import csv
import email.parser
import json
import os
import posixpath
import sys
import tomllib
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import Version

from ..errors import Finding, InputError, VerificationError
from ..git import GitRepo, verify_full_sha
from ..inventory import inventory_tree
from ._cache import cached_file, sha256_file, verified_cached_file
from ._closure import copy_interpreter, host_closure, verify_carried, write_runtime_manifest
from ._codes import BuildCode
from ._common import builder_identity, ensure_state, make_staging
from ._identity import InterpreterIdentity, compatible_tags, interpreter_identity
from ._lock import Lock, load_lock
from ._outputs import (
    BuildResult,
    find_leaks,
    input_digest,
    normalize_tree,
    publish,
    remove_tree,
    reuse,
    store_name,
    take_output,
    take_single_file,
    write_manifest,
)
from ._recipe import RuntimeRecipe
from ._sandbox import Sandbox, pick_step_uid, python_roots, worker_roots

if TYPE_CHECKING:
    from ._worker import InstallDirSpec, InstallSpec


@dataclass(frozen=True, slots=True)
class SelectedWheel:
    name: str
    version: str
    filename: str
    sha256: str
    url: str | None = None   # the lock's download URL (PEP 751 ``url``), when it names one

    def to_json(self) -> dict[str, str]:
        out = {"name": self.name, "version": self.version, "filename": self.filename, "sha256": self.sha256}
        if self.url is not None:
            out["url"] = self.url
        return out


def select_wheels(lock: Lock, ident: InterpreterIdentity, cache: str | None) -> list[SelectedWheel]:
    """One wheel per distribution that applies to ``ident``, the most specific tag first.

    A requirements lock names only hashes, so its file names come from the cache.

    Raises:
        InputError: ``LOCK_DUPLICATE`` when two entries of one name apply here;
            ``LOCK_NOT_WHEEL`` for a cached file name that is not a wheel's; ``NO_COMPATIBLE_WHEEL`` (pylock) or ``NOT_IN_CACHE`` (requirements) when a
            distribution has no usable wheel.
        VerificationError: ``HASH_MISMATCH`` for a cached file that was altered.
        EnvironmentFailure: ``INTERPRETER_UNUSABLE`` for a non-CPython or foreign-platform
            interpreter.
    """
    tags = compatible_tags(ident)
    rank = {t: i for i, t in enumerate(tags)}
    env = ident.marker_environment
    out: list[SelectedWheel] = []
    applicable = [pkg for pkg in lock.packages if pkg.applies(env)]
    applied: dict[str, str | None] = {}
    for pkg in applicable:
        # Entries for one name are separated only by markers; two that both apply here
        # would leave the choice of file to list order.
        if pkg.name in applied:
            raise InputError(BuildCode.LOCK_DUPLICATE, f"{pkg.name} is locked twice for this interpreter: the markers "
                             f"{applied[pkg.name]!r} and {pkg.marker!r} both apply", pkg.name)
        applied[pkg.name] = pkg.marker
    for pkg in applicable:
        best: tuple[int, SelectedWheel] | None = None
        for w in pkg.wheels:
            filename = w.filename
            if not filename:
                if cache is None:
                    continue
                p = cached_file(cache, w.sha256)
                if p is None:
                    continue
                filename = p.name
            try:
                _, _, _, wtags = parse_wheel_filename(filename)
            except InvalidWheelFilename as e:
                raise InputError(BuildCode.LOCK_NOT_WHEEL, f"{filename!r} is not a valid wheel file name", pkg.name) from e
            r = min((rank[str(t)] for t in wtags if str(t) in rank), default=None)
            if r is not None and (best is None or r < best[0]):
                best = (r, SelectedWheel(pkg.name, pkg.version, filename, w.sha256, w.url))
        if best is None:
            code = BuildCode.NOT_IN_CACHE if lock.format == "requirements" else BuildCode.NO_COMPATIBLE_WHEEL
            raise InputError(code, f"no locked wheel of {pkg.name} {pkg.version} fits {ident.soabi} on {ident.platform}"
                             + (" in the cache; run `attest fetch`" if code is BuildCode.NOT_IN_CACHE else ""), pkg.name)
        out.append(best[1])
    return sorted(out, key=lambda s: s.name)


def _read_build_system(src: str) -> tuple[list[str], str]:
    """The toolchain's ``[build-system]`` (``requires``, ``build-backend``), read by the host from its exported tree.

    The toolchain commit is untrusted: any content is either read or refused with ``BAD_RECIPE``.

    Raises:
        InputError: ``BAD_RECIPE`` for an unreadable, non-UTF-8, malformed or hostile (too deep,
            a huge integer) ``pyproject.toml``, an in-tree backend, or a malformed table.
    """
    path = os.path.join(src, "pyproject.toml")
    try:
        with open(path, "rb") as f:
            doc = tomllib.load(f)
    except (OSError, ValueError, RecursionError) as e:  # TOMLDecodeError and UnicodeDecodeError are ValueErrors
        raise InputError(BuildCode.BAD_RECIPE, f"the toolchain's pyproject.toml is unreadable: {e}", "pyproject.toml") from e
    bs = doc.get("build-system", {})
    if not isinstance(bs, dict):
        raise InputError(BuildCode.BAD_RECIPE, "[build-system] is not a table", "pyproject.toml")
    requires = bs.get("requires", [])
    backend = bs.get("build-backend", "setuptools.build_meta:__legacy__")
    if "backend-path" in bs:
        raise InputError(BuildCode.BAD_RECIPE, "in-tree build backends (backend-path) are not supported", "pyproject.toml")
    if not isinstance(requires, list) or not all(isinstance(r, str) for r in requires) or not isinstance(backend, str):
        raise InputError(BuildCode.BAD_RECIPE, "[build-system] is malformed", "pyproject.toml")
    return list(requires), backend


def _check_satisfied(requirements: list[str], available: Mapping[str, str], env: Mapping[str, str], who: str) -> list[Finding]:
    out = []
    for text in requirements:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            out.append(Finding(BuildCode.DEPENDENCY_UNSATISFIED, who, f"requirement {text!r} does not parse"))
            continue
        if req.marker is not None and not req.marker.evaluate({**env, "extra": ""}):
            continue
        have = available.get(canonicalize_name(req.name))
        if have is None:
            out.append(Finding(BuildCode.DEPENDENCY_UNSATISFIED, who, f"needs {text!r}; the lock does not provide {req.name}"))
        elif not req.specifier.contains(Version(have), prereleases=True):
            out.append(Finding(BuildCode.DEPENDENCY_UNSATISFIED, who, f"needs {text!r}; the lock provides {req.name} {have}"))
    return out


def check_ownership(records: Mapping[str, list[str]], untrusted: str) -> list[Finding]:
    """Each importable top-level name under site-packages belongs to exactly one distribution (pure).

    ``records`` maps a distribution to the site-packages-relative paths of its RECORD. A wheel
    that ships a file under another distribution's top-level name (an extension ``__init__``
    beside a locked package's ``__init__.py``, a module shadowing a package) would make the
    runtime import it instead of the locked bytes, while every locked file keeps its digest.
    Bytecode counts as its module: a ``.pyc`` under ``__pycache__`` is owned by the module it
    is named for. The ``untrusted`` distribution (the toolchain, built by its own code) may not
    ship ``sitecustomize`` or ``usercustomize`` (site.py imports them at every start), nor a
    ``.pth`` file: one runs code at every start of the interpreter. Outside site-packages, no
    distribution's file may stand where :func:`attest.builder._worker.layout_problem` says the
    interpreter or the guard reads before any installed code runs.
    """
    from ._worker import layout_problem  # lazy: _worker imports installer (12-24 ms), needed in the worker process only

    owners: dict[str, set[str]] = {}
    problems: list[Finding] = []
    for dist, paths in records.items():
        for p in paths:
            if p.startswith("../"):  # scripts and data outside site-packages, relative to the tree
                outside = posixpath.normpath(posixpath.join("lib/site/site-packages", p))
                why = "it is outside the runtime tree" if outside.startswith("../") else layout_problem(outside)
                if why is not None:
                    problems.append(Finding(BuildCode.DISTRIBUTION_OVERLAP, outside, f"{dist} installs it, and {why}"))
                continue
            top = p.split("/", 1)[0]
            if top.endswith(".dist-info"):
                continue
            if top == "__pycache__":
                # Bytecode of a top-level module (``__pycache__/six.cpython-311.pyc``) is that
                # module's code: Python runs an unchecked hash-based .pyc without reading the
                # source, so it belongs to whoever ships ``six.py``.
                name = p.rsplit("/", 1)[-1].split(".", 1)[0]
            else:
                name = top if "/" in p else top.split(".", 1)[0]
            owners.setdefault(name, set()).add(dist)
            if dist == untrusted and "/" not in p and p.endswith(".pth"):
                problems.append(Finding(BuildCode.DISTRIBUTION_OVERLAP, p, f"{dist} ships a .pth file, which runs code at interpreter start"))
            elif dist == untrusted and name in ("sitecustomize", "usercustomize"):
                problems.append(Finding(BuildCode.DISTRIBUTION_OVERLAP, p, f"{dist} ships {name}, which site.py imports at interpreter start"))
    for name, dists in sorted(owners.items()):
        if len(dists) > 1:
            problems.append(Finding(BuildCode.DISTRIBUTION_OVERLAP, name, f"the importable name {name!r} is shipped by {', '.join(sorted(dists))}"))
    return problems


def _record_paths(site: str, info: str) -> list[str] | None:
    """The paths a distribution's RECORD lists, relative to site-packages; None without a RECORD."""
    try:
        with open(os.path.join(site, info, "RECORD"), encoding="utf-8", newline="") as f:
            # Resolved against site-packages: a data-scheme path that comes back into it
            # (``../../../lib/python3.X/site-packages/x.pth``) is checked as ``x.pth``.
            return [os.path.relpath(os.path.normpath(os.path.join(site, row[0])), site).replace(os.sep, "/")
                    for row in csv.reader(f) if row]
    except FileNotFoundError:
        return None


def validate_distributions(site: str, expected: Mapping[str, str], env: Mapping[str, str], *,
                           untrusted: str | None = None) -> list[dict[str, str]]:
    """The installed distribution set: exactly ``expected``, every requirement satisfied, no overlap.

    Reads the host-only copy of the installed tree (never a directory a step can write).
    """
    parser = email.parser.BytesParser()
    installed: dict[str, str] = {}
    requires: dict[str, list[str]] = {}
    problems: list[Finding] = []
    records: dict[str, list[str]] = {}
    for entry in sorted(os.listdir(site)):
        if not entry.endswith(".dist-info"):
            continue
        with open(os.path.join(site, entry, "METADATA"), "rb") as f:
            meta = parser.parse(f, headersonly=True)
        name = str(canonicalize_name(str(meta["Name"])))
        if name in installed:
            problems.append(Finding(BuildCode.DEPENDENCY_UNSATISFIED, entry, f"{name} is installed twice"))
        installed[name] = str(meta["Version"])
        requires[name] = [str(r) for r in meta.get_all("Requires-Dist") or []]
        paths = _record_paths(site, entry)
        if paths is None:
            problems.append(Finding(BuildCode.UNLOCKED_DISTRIBUTION, entry, f"{name} has no RECORD: no wheel installed it"))
        records[name] = paths or []
    for name in sorted(set(installed) - set(expected)):
        problems.append(Finding(BuildCode.UNLOCKED_DISTRIBUTION, name, f"{name} {installed[name]} is installed but not locked "
                                "(a wheel carried its .dist-info in its data)"))
    problems.extend(check_ownership(records, untrusted or ""))
    for name, version in expected.items():
        if installed.get(name) is None or Version(installed[name]) != Version(version):
            problems.append(Finding(BuildCode.DEPENDENCY_UNSATISFIED, name, f"expected {name} {version} installed, found {installed.get(name)}"))
    for name, reqs in requires.items():
        problems.extend(_check_satisfied(reqs, installed, env, name))
    if problems:
        raise VerificationError(findings=problems)
    return [{"name": n, "version": installed[n]} for n in sorted(installed)]


# Run by the runtime tree's own interpreter (-I -S) in the last build step. It exits 3 unless it
# runs wholly from the tree: prefix, standard library and every mapped libpython inside it,
# nothing of a host Python mapped. Then, with checked-hash bytecode, it compiles the standard
# library (a file that does not compile, such as lib2to3's Python 2 test data, is left as source)
# and site-packages (which must compile).
_SELF_CHECK = """
import os, sys
root = os.path.realpath({root!r})
inside = lambda p: p == root or p.startswith(root + "/")
problems = []
if os.path.realpath(sys.prefix) != root or os.path.realpath(sys.exec_prefix) != root:
    problems.append("prefix %s, exec_prefix %s" % (sys.prefix, sys.exec_prefix))
if not inside(os.path.realpath(os.__file__)):
    problems.append("os loaded from %s" % os.__file__)
with open("/proc/self/maps") as f:
    for line in f:
        p = line.split()[-1] if len(line.split()) >= 6 else ""
        if "/libpython" in p and not inside(os.path.realpath(p)):
            problems.append("libpython mapped from %s" % p)
if problems:
    sys.stderr.write("the runtime's interpreter does not run from its own tree: " + "; ".join(problems) + "\\n")
    sys.exit(3)
if {compile!r}:
    import compileall, py_compile, re
    mode = py_compile.PycInvalidationMode.CHECKED_HASH
    stdlib = os.path.join(root, {stdlib!r})
    site = os.path.join(stdlib, {site!r})
    compileall.compile_dir(stdlib, ddir={stdlib!r}, quiet=2, workers=1, force=True, invalidation_mode=mode,
                           rx=re.compile("/" + {site!r} + "/"))
    ok = compileall.compile_dir(site, ddir={stdlib!r} + "/" + {site!r}, quiet=1, workers=1, force=True, invalidation_mode=mode)
    sys.exit(0 if ok else 1)
"""


def _interpreter_roots(ident: InterpreterIdentity) -> tuple[str, ...]:
    """What a confined step needs to run (or, for the installer, to copy) the target interpreter."""
    return python_roots(executable=ident.executable, stdlib=ident.stdlib, libraries=[p for p, _ in ident.libpython])


def _worker(sandbox: Sandbox, layout: _Layout, task: InstallSpec | InstallDirSpec, what: str, ident: InterpreterIdentity, *,
            writable: tuple[str, ...]) -> None:
    # The spec is written before the step runs, into spec/, which no step can write.
    spec = os.path.join(layout.spec, f"spec-{task['task']}.json")
    with open(spec, "x", encoding="utf-8") as f:
        json.dump(task, f)
    home = layout.new_dir(f"home-{task['task']}")
    sandbox.run([sys.executable, "-I", "-m", "attest.builder._worker", spec], cwd=home, home=home, staging=layout.staging,
                writable=writable, uid=layout.uid, what=what,
                readonly=(*worker_roots(), *_interpreter_roots(ident), layout.spec, layout.inputs))


@dataclass(frozen=True, slots=True)
class _Layout:
    """One runtime build's staging directory (root-owned, 0700; never bound into a step itself).

    ``spec/`` and ``inputs/`` are written by the host only and are read-only to every step;
    each step gets its own output directories (and a fresh home) read-write. After a step ran,
    the host touches what it wrote only through :mod:`attest._safefs` descriptors, or copies it
    into host-only ``taken/`` with the safe walker first (:func:`take_output`).
    """

    staging: str
    uid: int
    spec: str
    inputs: str

    @classmethod
    def create(cls, staging: str) -> _Layout:
        spec, inputs = os.path.join(staging, "spec"), os.path.join(staging, "inputs")
        os.mkdir(spec, 0o755)
        os.mkdir(inputs, 0o755)
        return cls(staging, pick_step_uid(), spec, inputs)

    def new_dir(self, name: str) -> str:
        path = os.path.join(self.staging, name)
        os.mkdir(path, 0o700)  # never an existing path
        return path


def runtime_inputs(recipe: RuntimeRecipe, rev: str, tree: str, lock: Lock, wheels: list[SelectedWheel],
                   backend_wheels: list[SelectedWheel], ident: InterpreterIdentity, sandbox: Sandbox) -> dict[str, object]:
    g = sandbox.guarantees()
    return {
        "kind": "runtime",
        "builder": builder_identity(),
        "recipe": {"name": recipe.name, "sha256": recipe.digest},
        "toolchain": {"repository": recipe.toolchain_repository, "revision": rev, "tree": tree},
        "lock": {"path": recipe.lock_ref, "sha256": lock.digest, "format": lock.format},
        "wheels": [w.to_json() for w in wheels],
        "build_backend": [w.to_json() for w in backend_wheels],
        "interpreter": ident.to_json(),
        "options": {"bytecode": recipe.bytecode, "entry_points": list(recipe.entry_points)},
        # How the build steps were confined: an unisolated output never shares a name with
        # an isolated one, so it is never reused by (or promoted for) a caller requiring isolation.
        "sandbox": {k: g[k] for k in ("profile", "network_isolated", "filesystem_confined")},
    }


def build_runtime(
    recipe: RuntimeRecipe,
    toolchain_rev: str,
    store: str,
    cache: str,
    sandbox: Sandbox,
    *,
    python: str | None = None,
    staging_parent: str | None = None,
    publish_output: bool = True,
    keep_staging: bool = False,
    freeze_backend: str | None = None,
) -> BuildResult:
    """Build (or reuse) the runtime of ``recipe`` at ``toolchain_rev``; ``store`` is the state dir.

    Raises:
        InputError: ``NOT_FULL_SHA``; the lock's codes (``BAD_LOCK``, ``LOCK_*``);
            ``NOT_IN_CACHE``; ``NO_COMPATIBLE_WHEEL``; ``INTERPRETER_UNUSABLE`` (a Python
            outside the recipe's range); ``BAD_RECIPE`` (the toolchain's ``[build-system]``
            unreadable, malformed or in-tree); the git layer's ``NOT_A_REPOSITORY``.
        VerificationError: ``HASH_MISMATCH``; ``INTERPRETER_MISMATCH``;
            ``BUILD_STEP_FAILED`` (an exposed entry point no distribution provides);
            ``DEPENDENCY_UNSATISFIED``, ``UNLOCKED_DISTRIBUTION``, ``DISTRIBUTION_OVERLAP``
            (the installed set); ``STAGING_PATH_LEAK``; ``UNSAFE_STEP_OUTPUT``;
            ``BUILD_RECORD_CONFLICT`` (a record to reuse that names other inputs or image);
            the git layer's object codes; the inventory walker's codes.
        EnvironmentFailure: ``BUILD_STEP_FAILED``; ``NETWORK_NOT_ISOLATED`` (the sandbox
            could not be set up); ``INTERPRETER_UNUSABLE``; ``GIT_FAILED``; the freeze
            layer's codes (``STATE_INSECURE``, ``BACKEND_UNAVAILABLE``, ``STORE_CONFLICT``, ...).
    """
    # 1. Inputs.
    store_root = ensure_state(store)
    verify_full_sha(toolchain_rev, what="toolchain revision")
    lock = load_lock(recipe.lock_path)
    # The interpreter probe (a child process) runs while git resolves the tree.
    with ThreadPoolExecutor(max_workers=1) as pool:
        probing = pool.submit(interpreter_identity, python or recipe.interpreter_path, memo_dir=store_root)
        repo = GitRepo.open(recipe.toolchain_source)
        try:
            verify_full_sha(toolchain_rev, repo.object_format, what="toolchain revision")
            tree = repo.commit_tree(toolchain_rev)
        except BaseException:
            repo.close()
            raise
        finally:
            ident_or_error = probing.exception() or probing.result()
    if isinstance(ident_or_error, BaseException):
        repo.close()
        raise ident_or_error
    ident = ident_or_error
    if not SpecifierSet(recipe.interpreter_requires).contains(ident.version, prereleases=True):
        repo.close()
        raise InputError(BuildCode.INTERPRETER_UNUSABLE, f"Python {ident.version} does not satisfy {recipe.interpreter_requires}", ident.executable)
    with repo:
        # 2. Selection and the input address.
        selected = select_wheels(lock, ident, cache)
        build_only = {str(canonicalize_name(n)) for n in recipe.build_only}
        wheels = [w for w in selected if w.name not in build_only]
        backend_wheels = [w for w in selected if w.name in build_only]
        inputs = runtime_inputs(recipe, toolchain_rev, tree, lock, wheels, backend_wheels, ident, sandbox)
        digest = input_digest(inputs)
        name = store_name(digest, recipe.name)
        if publish_output:
            found = reuse(store_root, name, "runtime", inputs, digest, freeze_backend)
            if found is not None:
                return found
        with make_staging(staging_parent or os.path.join(store_root, "build-staging")) as staging:
            try:
                build = _RuntimeBuild(recipe, repo, toolchain_rev, tree, lock, wheels, backend_wheels, ident, cache, sandbox)
                return _build_in_staging(build, staging, inputs=inputs, digest=digest, name=name, state=store_root,
                                         publish_output=publish_output, freeze_backend=freeze_backend)
            finally:
                if not keep_staging:
                    remove_tree(staging)


@dataclass(frozen=True, slots=True)
class _RuntimeBuild:
    """What one runtime build works from: the recipe, the toolchain's revision and tree, the lock and the wheels selected
    from it (installed, and the build backend's), the probed interpreter, the cache and the sandbox."""

    recipe: RuntimeRecipe
    repo: GitRepo
    rev: str
    tree: str
    lock: Lock
    wheels: list[SelectedWheel]
    backend_wheels: list[SelectedWheel]
    ident: InterpreterIdentity
    cache: str
    sandbox: Sandbox


@dataclass(frozen=True, slots=True)
class _ToolchainWheel:
    """Step 3's output: the toolchain's wheel, copied into ``inputs/`` and hashed as it was copied."""

    filename: str
    path: str
    sha256: str
    distribution: str
    version: str


def _build_in_staging(b: _RuntimeBuild, staging: str, *, inputs: dict[str, object], digest: str, name: str, state: str,
                      publish_output: bool, freeze_backend: str | None) -> BuildResult:
    layout = _Layout.create(staging)
    # Inputs are copied out of the cache after re-hashing (the cache is never trusted) into
    # inputs/, which no step can write; the worker re-hashes each one again as it installs it.
    wheel_inputs = [_take_wheel(b.cache, layout, w) for w in b.wheels]
    backend_inputs = [_take_wheel(b.cache, layout, w) for w in b.backend_wheels]
    toolchain = _build_toolchain_wheel(b, layout, backend_inputs)
    root, host_libraries = _install_runtime(b, layout, toolchain, wheel_inputs)
    site = os.path.join(root, "lib", f"python{b.ident.python_tag}", b.ident.site_name)
    # 5. The validated distribution set and the exposed entry points.
    expected = {w.name: w.version for w in b.wheels}
    expected[toolchain.distribution] = toolchain.version
    distributions = validate_distributions(site, expected, b.ident.marker_environment,
                                           untrusted=str(canonicalize_name(toolchain.distribution)))
    for ep in b.recipe.entry_points:
        if not os.path.isfile(os.path.join(root, "bin", ep)):
            raise VerificationError(BuildCode.BUILD_STEP_FAILED, f"the recipe exposes {ep!r}, which no installed distribution provides", f"bin/{ep}")
    # 6. Normalize and check for staging paths, then inventory.
    normalize_tree(root, b.sandbox.source_date_epoch)
    leaks = find_leaks(root, [staging.encode()])
    if leaks:
        raise VerificationError(findings=leaks)
    inventory = inventory_tree(root)
    details = {
        "toolchain": {"repository": b.recipe.toolchain_repository, "revision": b.rev, "tree": b.tree,
                      "wheel": toolchain.filename, "distribution": toolchain.distribution, "version": toolchain.version},
        "distributions": distributions,
        "interpreter": b.ident.to_json(),
        "host_libraries": host_libraries,
        "lock": {"path": b.recipe.lock_ref, "sha256": b.lock.digest},
        "filesystem_confined": b.sandbox.filesystem_confined,
        "sandbox": b.sandbox.guarantees(),
    }
    if not publish_output:
        return BuildResult("runtime", name, root, inputs, digest, inventory, False, b.sandbox.network_isolated,
                           "none (not published)", (), details)
    # 7. Freeze into the store (seal, then verify the sealed bytes), then record.
    image_path, immutability = publish(root, state, inventory, freeze_backend)
    result = BuildResult("runtime", name, image_path, inputs, digest, inventory, False, b.sandbox.network_isolated, immutability, (),
                         details)
    write_manifest(result, state)
    return result


def _take_wheel(cache: str, layout: _Layout, w: SelectedWheel) -> dict[str, str]:
    """Copy one selected wheel out of the cache (re-hashed there) into ``inputs/``, read-only, and hash the copy."""
    src = verified_cached_file(cache, w.sha256, what=w.filename)
    dst = os.path.join(layout.inputs, w.filename)
    with open(src, "rb") as f, open(dst, "xb") as g:
        g.write(f.read())
    os.chmod(dst, 0o444)
    if sha256_file(dst) != w.sha256:
        raise VerificationError(BuildCode.HASH_MISMATCH, "the wheel changed while it was copied", w.filename)
    return {"path": dst, "sha256": w.sha256}


def _build_toolchain_wheel(b: _RuntimeBuild, layout: _Layout, backend_inputs: list[dict[str, str]]) -> _ToolchainWheel:
    """3. The toolchain tree from git objects (read by the host before any step ran), and its
    wheel built offline by the toolchain's own build code: the untrusted step."""
    ident, sandbox = b.ident, b.sandbox
    src = layout.new_dir("src")
    b.repo.export_tree(b.tree, src)
    requires, backend = _read_build_system(src)
    provided = {w.name: w.version for w in b.backend_wheels}
    missing = _check_satisfied(requires, provided, ident.marker_environment, "build-system")
    if missing:
        raise VerificationError(findings=missing)
    backend_env = layout.new_dir("backend")
    if backend_inputs:
        _worker(sandbox, layout, {"task": "install-dir", "root": backend_env, "wheels": backend_inputs},
                "installing the build backend", ident, writable=(backend_env,))
    out = layout.new_dir("dist")
    module, _, obj = backend.partition(":")
    code = (
        "import sys, importlib\n"
        f"sys.path[:0] = [{backend_env!r}]\n"
        f"b = importlib.import_module({module!r})\n"
        + (f"b = getattr(b, {obj!r})\n" if obj else "")
        + f"print(b.build_wheel({out!r}))\n"
    )
    sandbox.run([ident.executable, "-I", "-c", code], cwd=src, home=layout.new_dir("home-build"), staging=layout.staging,
                writable=(src, out), uid=layout.uid, what="building the toolchain wheel",
                readonly=(*_interpreter_roots(ident), backend_env))
    # After the untrusted step: dist/ is read through descriptors only, and its one wheel is
    # copied into inputs/ (hashed as copied) before anything consumes it.
    built, built_sha256 = take_single_file(out, layout.inputs, suffix=".whl", what="the build backend's output")
    tname, tversion, _, _ = parse_wheel_filename(built)
    return _ToolchainWheel(built, os.path.join(layout.inputs, built), built_sha256, str(tname), str(tversion))


def _install_runtime(b: _RuntimeBuild, layout: _Layout, toolchain: _ToolchainWheel,
                     wheel_inputs: list[dict[str, str]]) -> tuple[str, list[dict[str, str]]]:
    """4. Install; return the tree taken into host-only ``taken/`` and its host libraries.

    The host first copies the interpreter it probed into the tree (binary, libpython, the
    standard library: _closure.copy_interpreter), so the tree is a whole prefix and the image
    never runs a file of the host's Python. Launchers find their interpreter relative to
    themselves, so no file names the path the tree is built or run at.
    """
    ident, sandbox = b.ident, b.sandbox
    installed = layout.new_dir("out")
    copied = copy_interpreter(ident, installed)
    _worker(sandbox, layout, {
        "task": "install",
        "root": installed,
        "interpreter": ident.executable,
        "python_version": ident.python_tag,
        "full_version": ident.version,
        "wheels": [{"path": toolchain.path, "sha256": toolchain.sha256}, *wheel_inputs],
        "identity": ident.to_json(),
    }, "installing the runtime", ident, writable=(installed,))
    # The tree's own interpreter runs the last step, in a sandbox that holds none of the host's
    # Python: it starts only if the tree is a whole prefix (_SELF_CHECK), then compiles bytecode.
    code = _SELF_CHECK.format(root=installed, stdlib=copied.stdlib, site=ident.site_name, compile=b.recipe.bytecode == "checked-hash")
    sandbox.run([os.path.join(installed, "bin", "python"), "-I", "-S", "-B", "-c", code], cwd=installed,
                home=layout.new_dir("home-compile"), staging=layout.staging, writable=(installed,), uid=layout.uid,
                what="checking the runtime's own interpreter and compiling bytecode")
    # After the last step: the safe walker takes the tree into host-only taken/ (refusing any
    # link, FIFO, device or hard link); every later check reads that copy, never out/.
    root = take_output(installed, os.path.join(layout.staging, "taken"))
    verify_carried(root, copied)
    host_libraries, unresolved = host_closure(root, loader=copied.loader)
    write_runtime_manifest(root, copied, host_libraries, unresolved)
    return root, host_libraries
