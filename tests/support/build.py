"""Helpers for the build tests: small real wheels, a toolchain repository, a local lock."""

from __future__ import annotations

import base64
import hashlib
import io
import os
import subprocess
import textwrap
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .gitrepo import GIT_ENV, git

__all__ = ["GIT_ENV", "git"]  # re-exported for the build tests


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def make_wheel(directory: Path, name: str, version: str, files: dict[str, bytes], *, requires: tuple[str, ...] = (),
               scripts: dict[str, str] | None = None, tag: str = "py3-none-any", mtime: tuple[int, ...] = (1980, 1, 1, 0, 0, 0)) -> Path:
    """A real wheel built with zipfile: modules, .data files, entry points, RECORD."""
    dist = name.replace("-", "_")
    info = f"{dist}-{version}.dist-info"
    body = dict(files)
    body[f"{info}/METADATA"] = (f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
                               + "".join(f"Requires-Dist: {r}\n" for r in requires)).encode()
    body[f"{info}/WHEEL"] = f"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: {tag}\n".encode()
    if scripts:
        body[f"{info}/entry_points.txt"] = ("[console_scripts]\n" + "".join(f"{k} = {v}\n" for k, v in scripts.items())).encode()
    record = "".join(f"{p},{_record_hash(d)},{len(d)}\n" for p, d in sorted(body.items())) + f"{info}/RECORD,,\n"
    body[f"{info}/RECORD"] = record.encode()
    path = directory / f"{dist}-{version}-{tag}.whl"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for p, d in sorted(body.items()):
            zi = zipfile.ZipInfo(p, date_time=mtime)
            zi.external_attr = (0o100755 if "/scripts/" in p else 0o100644) << 16
            z.writestr(zi, d)
    path.write_bytes(buf.getvalue())
    return path


TINY_BACKEND = b'''
"""A minimal PEP 517 backend: packages the project's module directory as a pure wheel."""
import base64, hashlib, io, os, tomllib, zipfile

def _h(d):
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(d).digest()).rstrip(b"=").decode()

def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    with open("pyproject.toml", "rb") as f:
        doc = tomllib.load(f)
    hook = None
    if os.path.exists("build_hook.py"):
        # The project's own build code, run by the backend as setuptools runs setup.py: in a
        # hostile commit, this is the attacker. It may define after_wheel(path) too.
        hook = {"__name__": "build_hook", "WHEEL_DIRECTORY": wheel_directory}
        with open("build_hook.py") as f:
            exec(compile(f.read(), "build_hook.py", "exec"), hook)
    p = doc["project"]
    name, version = p["name"], p["version"]
    dist = name.replace("-", "_")
    info = f"{dist}-{version}.dist-info"
    body = {}
    for root, dirs, files in os.walk(dist):
        dirs.sort()
        for fn in sorted(files):
            path = os.path.join(root, fn)
            with open(path, "rb") as f:
                body[path] = f.read()
    probe = doc.get("tool", {}).get("tiny", {}).get("probe")
    if probe:
        # A hostile build: try to write outside staging and to reach the network.
        results = []
        for target in (probe, os.path.join(os.path.dirname(os.getcwd()), "..", "planted")):
            try:
                with open(target, "w") as f:
                    f.write("escaped")
                results.append("wrote " + (target if target == probe else "beside staging"))  # never the staging path
            except OSError as e:
                results.append(f"refused {e.errno}")
        import socket
        try:
            socket.create_connection(("1.1.1.1", 80), timeout=2).close()
            results.append("network reachable")
        except OSError as e:
            results.append(f"network refused {e.errno}")
        body[f"{dist}/_probe.txt"] = ("\\n".join(results) + "\\n").encode()
    if doc.get("tool", {}).get("tiny", {}).get("noisy"):
        body[f"{dist}/_noise.txt"] = (os.urandom(8).hex() + "\\n").encode()
    body[f"{info}/METADATA"] = (f"Metadata-Version: 2.1\\nName: {name}\\nVersion: {version}\\n"
        + "".join(f"Requires-Dist: {r}\\n" for r in p.get("dependencies", []))).encode()
    body[f"{info}/WHEEL"] = b"Wheel-Version: 1.0\\nGenerator: tiny\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n"
    if p.get("scripts"):
        body[f"{info}/entry_points.txt"] = ("[console_scripts]\\n" + "".join(f"{k} = {v}\\n" for k, v in sorted(p["scripts"].items()))).encode()
    body[f"{info}/RECORD"] = ("".join(f"{k},{_h(v)},{len(v)}\\n" for k, v in sorted(body.items())) + f"{info}/RECORD,,\\n").encode()
    out = f"{dist}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(wheel_directory, out), "w") as z:
        for k, v in sorted(body.items()):
            zi = zipfile.ZipInfo(k, date_time=(1980, 1, 1, 0, 0, 0))
            zi.external_attr = 0o644 << 16
            z.writestr(zi, v)
    if hook is not None and "after_wheel" in hook:
        hook["after_wheel"](os.path.join(wheel_directory, out))
    return out
'''


@dataclass
class Project:
    root: Path
    repo: Path
    sha: str
    wheels: Path
    lock: Path
    recipe: Path
    skill_recipe: Path
    cache: Path
    store: Path


def pylock_text(entries: list[tuple[str, str, Path]], wheels: Path) -> str:
    out = ['lock-version = "1.0"', 'created-by = "tests"', ""]
    for name, version, path in entries:
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        out += ["[[packages]]", f'name = "{name}"', f'version = "{version}"',
                f'wheels = [{{ name = "{path.name}", path = "{wheels.name}/{path.name}", hashes = {{ sha256 = "{digest}" }} }}]', ""]
    return "\n".join(out)


def write_lock(project_root: Path, wheels: Path, *, libdep_value: bytes = b"VALUE = 42\n") -> Path:
    tiny = make_wheel(wheels, "tinybackend", "1.0", {"tinybackend/__init__.py": TINY_BACKEND})
    libdep = make_wheel(
        wheels, "libdep", "1.2",
        {"libdep/__init__.py": libdep_value + b"def hello():\n    print('hello from libdep', VALUE)\n",
         "libdep/data.txt": b"package data\n",
         "libdep-1.2.data/data/share/libdep/notes.txt": b"a data file\n",
         "libdep-1.2.data/scripts/libdep-script": b"#!python\nimport libdep\nprint('script', libdep.VALUE)\n"},
        scripts={"libdep-hello": "libdep:hello"},
    )
    lock = project_root / "lockfiles" / "pylock.toml"
    lock.parent.mkdir(exist_ok=True)
    lock.write_text(pylock_text([("tinybackend", "1.0", tiny), ("libdep", "1.2", libdep)], wheels))
    return lock


RUNTIME_RECIPE = """schema = "attest-recipe/v1"
kind = "runtime"
name = "test-runtime"

[toolchain]
repository = "https://example.org/toolchain.git"
source = "../repo"

[lock]
path = "../lockfiles/pylock.toml"
build_only = ["tinybackend"]

[interpreter]
requires = ">=3.11"

[expose]
entry_points = ["tool", "libdep-hello"]
"""

SKILL_RECIPE = """schema = "attest-recipe/v1"
kind = "skill"
name = "test-skill"

[source]
repository = "https://example.org/toolchain.git"
path = "../repo"
subtree = "skills/agent-policy"

[install]
root = "agent-policy"

[installer]
repository = "https://example.org/toolchain.git"
"""


def make_toolchain_repo(repo: Path, *, message: bytes = b"hi", noisy: bool = False, probe: str | None = None,
                        build_hook: str | None = None) -> str:
    repo.mkdir(parents=True, exist_ok=True)
    if not (repo / ".git").exists():
        git(repo, "init", "-q")
    (repo / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["tinybackend>=1"]\nbuild-backend = "tinybackend"\n\n'
        '[project]\nname = "toolchain"\nversion = "0.1"\ndependencies = ["libdep>=1.0"]\n\n'
        '[project.scripts]\ntool = "toolchain.cli:main"\n'
        + ('\n[tool.tiny]\n' if noisy or probe else '')
        + ('noisy = true\n' if noisy else '')
        + (f'probe = "{probe}"\n' if probe else '')
    )
    pkg = repo / "toolchain"
    pkg.mkdir(exist_ok=True)
    (pkg / "__init__.py").write_bytes(b"")
    (pkg / "cli.py").write_bytes(b"import libdep, sys\n\ndef main():\n    print('tool says', " + repr(message).encode() + b", libdep.VALUE)\n    return 0\n")
    skill = repo / "skills" / "agent-policy"
    skill.mkdir(parents=True, exist_ok=True)
    (skill / "SKILL.md").write_bytes(b"# agent-policy\n")
    (skill / "bin").mkdir(exist_ok=True)
    (skill / "bin" / "bootstrap").write_bytes(b"#!/bin/sh\necho bootstrap\n")
    os.chmod(skill / "bin" / "bootstrap", 0o755)
    if build_hook is not None:
        (repo / "build_hook.py").write_text(build_hook)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "--allow-empty", "-m", "toolchain")
    return git(repo, "rev-parse", "HEAD")




def registry_reachable() -> bool:
    """Whether the package registry answers (tests marked ``registry`` skip otherwise)."""
    import urllib.request

    try:
        with urllib.request.urlopen("https://files.pythonhosted.org/", timeout=5):
            return True
    except OSError:
        return False


def rewrite_wheel_hook(extra: str) -> str:
    """Build-hook code (a hostile toolchain's) that adds files to the toolchain's own wheel (RECORD regenerated, so installer takes it)."""
    return (
        "import base64, hashlib, os, zipfile\n"
        "def _h(d):\n"
        "    return 'sha256=' + base64.urlsafe_b64encode(hashlib.sha256(d).digest()).rstrip(b'=').decode()\n"
        "def after_wheel(path):\n"
        "    with zipfile.ZipFile(path) as z:\n"
        "        body = {n: z.read(n) for n in z.namelist()}\n"
        + textwrap.indent(textwrap.dedent(extra), "    ")
        + "    rec = next(n for n in body if n.endswith('.dist-info/RECORD') and n.startswith('toolchain'))\n"
        "    del body[rec]\n"
        "    body[rec] = (''.join(f'{k},{_h(v)},{len(v)}\\n' for k, v in sorted(body.items())) + f'{rec},,\\n').encode()\n"
        "    os.unlink(path)\n"
        "    with zipfile.ZipFile(path, 'w') as z:\n"
        "        for k, v in sorted(body.items()):\n"
        "            zi = zipfile.ZipInfo(k, date_time=(1980, 1, 1, 0, 0, 0))\n"
        "            zi.external_attr = 0o644 << 16\n"
        "            z.writestr(zi, v)\n"
    )


def build_runtime_or_error(tmp_path: Path, recipe_path: Path, sha: str) -> object:
    """Fetch the recipe's lock and build its runtime in the sandbox (unpublished); the error instead when it is refused."""
    from attest.builder import Sandbox, build_runtime, fetch, load_lock, load_recipe
    from attest.errors import AttestError

    recipe = load_recipe(recipe_path)
    fetch(load_lock(recipe.lock_path), tmp_path / "cache", lock_path=recipe.lock_path)
    try:
        return build_runtime(recipe, sha, str(tmp_path / "store"), str(tmp_path / "cache"), Sandbox.establish(allow_unisolated_network=False),
                             publish_output=False, staging_parent=str(tmp_path / "s"), keep_staging=True)
    except AttestError as e:
        return e


def hostile_runtime_project(tmp_path: Path, hook: str, recipe_text: str = RUNTIME_RECIPE) -> tuple[Path, str]:
    """A project whose toolchain commit's build code rewrites its own wheel with ``hook``: (runtime recipe, commit)."""
    root = tmp_path / "proj"
    wheels = root / "lockfiles" / "wheels"
    wheels.mkdir(parents=True)
    write_lock(root, wheels)
    sha = make_toolchain_repo(root / "repo", build_hook=rewrite_wheel_hook(hook))
    (root / "builders").mkdir()
    (root / "builders" / "runtime.toml").write_text(recipe_text)
    return root / "builders" / "runtime.toml", sha


def site_rel() -> str:
    """Where a runtime built for this interpreter keeps its packages, relative to the image: lib/pythonX.Y/site-packages,
    or dist-packages under an interpreter whose site.py reads that there (Debian's python3.11)."""
    from attest.builder._identity import interpreter_identity

    global _SITE_REL
    if _SITE_REL is None:
        ident = interpreter_identity()
        _SITE_REL = f"lib/python{ident.python_tag}/{ident.site_name}"
    return _SITE_REL


_SITE_REL: str | None = None


def sandbox_available() -> bool:
    """Whether the confined, network-isolated build sandbox can be established here."""
    from attest.builder import Sandbox
    from attest.errors import EnvironmentFailure

    try:
        Sandbox.establish(allow_unisolated_network=False)
    except EnvironmentFailure:
        return False
    return True


# A build step that marks when it runs (as the step's uid, inside the confinement), then sleeps: a build to interrupt or gc.
SLEEPING_STEP = "import time\nopen('step-running', 'w').close()\ntime.sleep(60)\n"


def build_stages(state: Path) -> list[str]:
    """The build staging directories under the state directory, sorted."""
    d = state / "build-staging"
    return sorted(os.listdir(d)) if d.exists() else []


def wait_for_running_step(build: subprocess.Popen[Any], state: Path, *, timeout: float = 60) -> str:
    """Wait until the build's one staging holds the running step's mark; its staging's name."""
    deadline = time.monotonic() + timeout
    while not (build_stages(state) and (state / "build-staging" / build_stages(state)[0] / "src" / "step-running").exists()):
        assert build.poll() is None and time.monotonic() < deadline, "the build did not reach its step"
        time.sleep(0.1)
    [stage] = build_stages(state)
    return stage
