"""Interpreter identity: what a runtime was built for, and must run under.

The interpreter is probed in a child process (so the libpython really loaded is read from
the child's ``/proc/self/maps``, not guessed), then the binary and that library are hashed
here, and the standard library directory it runs from is inventoried (a closed inventory
of ``lib/pythonX.Y`` without ``site-packages``, ``dist-packages`` and ``__pycache__``; its
symbolic links are recorded by target). The identity's digest is an input of every runtime
build, so a changed binary, libpython or stdlib file renames the runtime. A venv's python
stands for the real interpreter it was made from (``sys._base_executable``, resolved): the
identity never names a venv path, so two clones of one commit, each with its own ``.venv``,
build the same runtime.

    >>> ident = interpreter_identity("/usr/bin/python3.11")
    >>> ident.digest, ident.version, ident.soabi
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import sysconfig
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TypedDict, cast

from packaging import tags

from .._fs import read_bounded, write_atomic
from .._json import canonical_bytes, loads_strict
from ..errors import EnvironmentFailure, InputError, VerificationError
from ..inventory import InventoryCode, scan_tree
from ._codes import BuildCode

# Runs under the target interpreter with -I -S: stdlib only, no site, no user paths.
_PROBE = r"""
import json, os, platform, sys, sysconfig
libs = []
with open("/proc/self/maps") as f:
    for line in f:
        p = line.split()[-1] if len(line.split()) >= 6 else ""
        if "/libpython" in p and p not in libs:
            libs.append(p)
impl = sys.implementation
iver = "{0.major}.{0.minor}.{0.micro}".format(impl.version)
if impl.version.releaselevel != "final":
    iver += impl.version.releaselevel[0] + str(impl.version.serial)
markers = {
    "implementation_name": impl.name, "implementation_version": iver,
    "os_name": os.name, "platform_machine": platform.machine(), "platform_release": platform.release(),
    "platform_system": platform.system(), "platform_version": platform.version(),
    "python_full_version": platform.python_version(), "platform_python_implementation": platform.python_implementation(),
    "python_version": ".".join(platform.python_version_tuple()[:2]), "sys_platform": sys.platform,
}
try:
    libc = os.confstr("CS_GNU_LIBC_VERSION") or ""
except (ValueError, OSError):
    libc = ""
# A venv's python (a link or, with --copies, a copy) runs the interpreter named by its
# pyvenv.cfg `home`: that base executable is the real interpreter, wherever the venv lives.
base = getattr(sys, "_base_executable", None) or sys.executable
# Where this interpreter's site.py looks for packages under a prefix of its own (upstream:
# lib/pythonX.Y/site-packages; Debian's: lib/pythonX.Y/dist-packages among others).
import site
short = "python%d.%d" % sys.version_info[:2]
site_name = next((p.split("/")[-1] for p in site.getsitepackages(["/@prefix@"])
                  if p.startswith("/@prefix@/lib/" + short + "/") and p.count("/") == 4), "")
print(json.dumps({
    "site_name": site_name,
    "executable": os.path.realpath(sys.executable),
    "base_executable": os.path.realpath(base),
    "version": platform.python_version(),
    "implementation": impl.name,
    "cache_tag": impl.cache_tag,
    "soabi": sysconfig.get_config_var("SOABI") or "",
    "platform": sysconfig.get_platform(),
    "libc": libc,
    "libpython": [os.path.realpath(p) for p in libs],
    "stdlib": sysconfig.get_path("stdlib"),
    "markers": markers,
}))
"""


class _Probe(TypedDict):
    """What :data:`_PROBE` prints (our own script, under the target interpreter)."""

    site_name: str
    executable: str
    base_executable: str
    version: str
    implementation: str
    cache_tag: str | None
    soabi: str
    platform: str
    libc: str
    libpython: list[str]
    stdlib: str
    markers: dict[str, str]


# platform_release / platform_version name the running kernel, not the interpreter: they
# are kept for marker evaluation but excluded from the identity, so a kernel update does
# not rename every runtime. The markers a lock may use on them are evaluated at build time.
_VOLATILE_MARKERS = ("platform_release", "platform_version")


@dataclass(frozen=True, slots=True)
class InterpreterIdentity:
    """Resolved path, SHA-256 of the binary and of the loaded libpython, version, tags."""

    executable: str
    executable_sha256: str
    libpython: tuple[tuple[str, str], ...]   # (resolved path, sha256) of each libpython mapped
    version: str
    implementation: str
    cache_tag: str
    soabi: str
    platform: str
    libc: str
    stdlib: str
    markers: tuple[tuple[str, str], ...]
    stdlib_identity: tuple[tuple[str, str], ...] = ()   # see stdlib_identity(): (key, value) pairs
    #: The directory of lib/pythonX.Y that this interpreter's site.py reads under its own prefix.
    site_name: str = "site-packages"

    def to_json(self) -> dict[str, object]:
        """The identity as recorded in inputs and build records (compared by :func:`verify_same_interpreter`).

        Raises:
            Nothing: it only reads fields.
        """
        volatile = set(_VOLATILE_MARKERS)
        return {
            "executable": self.executable,
            "executable_sha256": self.executable_sha256,
            "libpython": [{"path": p, "sha256": d} for p, d in self.libpython],
            "version": self.version,
            "implementation": self.implementation,
            "cache_tag": self.cache_tag,
            "soabi": self.soabi,
            "platform": self.platform,
            "libc": self.libc,
            "stdlib": self.stdlib,
            "stdlib_identity": dict(self.stdlib_identity),
            "site_name": self.site_name,
            "markers": {k: v for k, v in self.markers if k not in volatile},
        }

    @property
    def digest(self) -> str:
        return hashlib.sha256(canonical_bytes(self.to_json())).hexdigest()

    @property
    def marker_environment(self) -> dict[str, str]:
        return dict(self.markers)

    @property
    def python_tag(self) -> str:
        major, minor = self.version.split(".")[:2]
        return f"{major}.{minor}"


def _sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb", buffering=0) as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def _probe(python: str) -> _Probe:
    try:
        proc = subprocess.run([python, "-I", "-S", "-c", _PROBE], capture_output=True, timeout=60,
                              env={"PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8"}, cwd="/")
    except (OSError, subprocess.TimeoutExpired) as e:
        raise EnvironmentFailure(BuildCode.INTERPRETER_UNUSABLE, f"cannot run the interpreter: {e}", python) from e
    if proc.returncode != 0:
        raise EnvironmentFailure(BuildCode.INTERPRETER_UNUSABLE,
                                 "the interpreter probe failed: " + proc.stderr.decode("utf-8", "replace")[-300:], python)
    try:
        doc = json.loads(proc.stdout)
    except ValueError as e:
        raise EnvironmentFailure(BuildCode.INTERPRETER_UNUSABLE, "the interpreter probe printed no JSON", python) from e
    if not isinstance(doc, dict):
        raise EnvironmentFailure(BuildCode.INTERPRETER_UNUSABLE, "the interpreter probe printed no object", python)
    return cast(_Probe, doc)  # an object printed by _PROBE, our own script: its keys are _Probe's


# What of lib/pythonX.Y is not the standard library a runtime carries: installed packages,
# bytecode caches, CPython's own regression suite (``test/``, 1,300 files) and the files for
# building C extensions against it (``config-X.Y-<platform>/``: Makefile, a 44 MB static
# libpython), none of which a program imports; the runtime image leaves them out, so its
# identity does too.
STDLIB_IGNORE = ("/site-packages/", "/dist-packages/", "/test/", "/config-*/", "__pycache__/")


def stdlib_identity(stdlib: str) -> dict[str, str]:
    """A closed-inventory identity of the standard library directory (files, dirs, modes, bytes).

    Symbolic links (Debian links ``sitecustomize.py`` into /etc) are not admitted by a
    closed inventory; they are recorded here by their targets (what they point at is not
    covered). Anything else the inventory refuses makes the interpreter unusable.
    """
    try:
        scan = scan_tree(stdlib, ignore=STDLIB_IGNORE)
    except (InputError, VerificationError) as e:
        raise EnvironmentFailure(BuildCode.INTERPRETER_UNUSABLE, f"cannot inventory the standard library: {e}", stdlib) from e
    links: list[tuple[str, str]] = []
    problems = []
    for f in scan.findings:
        if f.code == InventoryCode.SYMLINK and f.path:
            try:
                links.append((f.path, os.readlink(os.path.join(stdlib, f.path))))
            except OSError as e:
                raise EnvironmentFailure(BuildCode.INTERPRETER_UNUSABLE, f"cannot read the link: {e}", f.path) from e
        else:
            problems.append(f)
    if problems:
        raise EnvironmentFailure(BuildCode.INTERPRETER_UNUSABLE, f"the standard library is not a closed tree: {problems[0]}", stdlib)
    inventory = scan.inventory()
    return {
        "inventory": inventory.identity,
        "entries": str(len(inventory.entries)),
        "symlinks": hashlib.sha256(canonical_bytes(sorted(links))).hexdigest(),
    }


def _stat_signature(stdlib: str) -> str:
    """A digest of every stdlib entry's lstat (inode, size, mode, mtime and ctime in ns).

    Any write to a file, rename or replacement changes its ctime (which only the kernel
    sets, to the current time), so an unchanged signature means unchanged bytes unless the
    system clock itself was turned back by root.
    """
    h = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(stdlib):
        top = dirpath == stdlib
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__" and not (top and d in ("site-packages", "dist-packages")))
        for name in (".", *sorted(filenames), *dirnames):
            st = os.lstat(os.path.join(dirpath, name))
            h.update(f"{os.path.relpath(dirpath, stdlib)}/{name}\0{st.st_dev}:{st.st_ino}:{st.st_mode}:{st.st_size}:"
                     f"{st.st_mtime_ns}:{st.st_ctime_ns}\n".encode("utf-8", "surrogateescape"))
    return h.hexdigest()


_STDLIB_MEMO: dict[tuple[str, str], dict[str, str]] = {}


def memoized_stdlib_identity(stdlib: str, memo_dir: str | None = None) -> dict[str, str]:
    """``stdlib_identity``, computed once per unchanged stdlib (keyed by its stat signature).

    The memo lives in this process and, with ``memo_dir`` (the private state directory),
    in ``memo_dir/interpreters/``, so a no-op rebuild does not re-hash 100 MB of stdlib.
    """
    try:
        signature = _stat_signature(stdlib)
    except OSError as e:
        raise EnvironmentFailure(BuildCode.INTERPRETER_UNUSABLE, f"cannot stat the standard library: {e}", stdlib) from e
    key = (stdlib, signature)
    if key in _STDLIB_MEMO:
        return dict(_STDLIB_MEMO[key])
    path = None
    if memo_dir is not None:
        path = os.path.join(memo_dir, "interpreters", hashlib.sha256(stdlib.encode("utf-8", "surrogateescape")).hexdigest() + ".json")
        if os.path.isfile(path):
            try:
                doc = loads_strict(read_bounded(path, what="stdlib memo", max_bytes=1 << 16), what="stdlib memo")
            except (InputError, VerificationError):
                doc = None  # a damaged memo is recomputed, never trusted
            if (isinstance(doc, dict) and doc.get("stdlib") == stdlib and doc.get("signature") == signature
                    and doc.get("ignore") == list(STDLIB_IGNORE)
                    and isinstance(doc.get("identity"), dict) and all(isinstance(v, str) for v in doc["identity"].values())):
                _STDLIB_MEMO[key] = dict(doc["identity"])
                return dict(doc["identity"])
    ident = stdlib_identity(stdlib)
    _STDLIB_MEMO[key] = ident
    if path is not None:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        write_atomic(path, canonical_bytes({"stdlib": stdlib, "signature": signature, "ignore": list(STDLIB_IGNORE), "identity": ident}), mode=0o600)
    return dict(ident)


# A venv made from a venv's python names the first one's base already; a hand-written
# pyvenv.cfg chain is followed this far and then refused.
_MAX_VENV_HOPS = 4


def interpreter_identity(python: str | None = None, *, memo_dir: str | None = None) -> InterpreterIdentity:
    """Probe ``python`` (default: the running interpreter) and hash it; a venv's python is its base interpreter.

    The identity never names a venv: ``python`` inside a venv (a link or a ``--copies``
    copy) is replaced by the base executable its ``pyvenv.cfg`` names, which is probed,
    hashed, run by the build steps and copied into the runtime.

    Raises:
        EnvironmentFailure: ``INTERPRETER_UNUSABLE`` when the interpreter (or a venv's base
            interpreter) cannot be run or probed, answers oddly, or its binary or libpython
            cannot be hashed.
    """
    target = python or os.path.realpath(sys.executable)
    doc = _probe(target)
    # A venv's python stands for its base interpreter: the identity is that one's, probed
    # directly, so two clones (each with its own .venv) name the same interpreter.
    for _ in range(_MAX_VENV_HOPS):
        base = doc.get("base_executable")
        if not isinstance(base, str) or base == doc["executable"]:
            break
        doc = _probe(base)
    else:
        raise EnvironmentFailure(BuildCode.INTERPRETER_UNUSABLE,
                                 f"the interpreter's venv base does not resolve within {_MAX_VENV_HOPS} hops", target)
    exe = doc["executable"]
    try:
        libs = tuple((p, _sha256(p)) for p in doc["libpython"])
        exe_digest = _sha256(exe)
    except OSError as e:
        raise EnvironmentFailure(BuildCode.INTERPRETER_UNUSABLE, f"cannot hash the interpreter: {e}", exe) from e
    return InterpreterIdentity(
        executable=exe,
        executable_sha256=exe_digest,
        libpython=libs,
        version=doc["version"],
        implementation=doc["implementation"],
        cache_tag=doc["cache_tag"] or "",
        soabi=doc["soabi"],
        platform=doc["platform"],
        libc=doc["libc"],
        stdlib=doc["stdlib"],
        markers=tuple(sorted(doc["markers"].items())),
        stdlib_identity=tuple(sorted(memoized_stdlib_identity(doc["stdlib"], memo_dir).items())),
        site_name=_site_name(doc.get("site_name"), exe),
    )


def _site_name(name: object, exe: str) -> str:
    if name not in ("site-packages", "dist-packages"):
        raise EnvironmentFailure(BuildCode.INTERPRETER_UNUSABLE, "the interpreter's site.py reads no site-packages or dist-packages "
                                 "directory of lib/pythonX.Y under its own prefix", exe)
    return str(name)


def marker_environment(python: str | None = None) -> dict[str, str]:
    return dict(_probe(python or os.path.realpath(sys.executable))["markers"])


def verify_same_interpreter(recorded: Mapping[str, object], current: InterpreterIdentity) -> None:
    """Raise ``INTERPRETER_MISMATCH`` unless ``current`` is the interpreter a runtime recorded.

    Raises:
        VerificationError: ``INTERPRETER_MISMATCH``, naming up to four differing fields.
    """
    now = current.to_json()
    differing = sorted(k for k in set(recorded) | set(now) if recorded.get(k) != now.get(k))
    if differing:
        detail = "; ".join(f"{k}: recorded {recorded.get(k)!r}, running {now.get(k)!r}" for k in differing[:4])
        raise VerificationError(BuildCode.INTERPRETER_MISMATCH, f"the runtime was built for another interpreter ({detail})")


def compatible_tags(ident: InterpreterIdentity) -> list[str]:
    """Wheel tags this interpreter accepts, most preferred first (packaging's order)."""
    here = interpreter_platform_matches(ident)
    if not here:
        raise EnvironmentFailure(BuildCode.INTERPRETER_UNUSABLE,
                                 f"the interpreter's platform {ident.platform} is not this machine's; cross builds are not supported")
    major, minor = (int(x) for x in ident.version.split(".")[:2])
    if ident.implementation != "cpython":
        raise EnvironmentFailure(BuildCode.INTERPRETER_UNUSABLE, f"only CPython runtimes are built, not {ident.implementation}")
    platforms = list(tags.platform_tags())
    abi = f"cp{major}{minor}"
    out = [*tags.cpython_tags((major, minor), abis=[abi], platforms=platforms),
           *tags.compatible_tags((major, minor), interpreter=abi, platforms=platforms)]
    return [str(t) for t in out]


def interpreter_platform_matches(ident: InterpreterIdentity) -> bool:
    return sysconfig.get_platform() == ident.platform
