"""Interpreter identity: what a runtime was built for, and must run under.

The interpreter is probed in a child process (so the libpython really loaded is read from
the child's ``/proc/self/maps``, not guessed), then the binary and that library are hashed
here. The identity's digest is an input of every runtime build.

    >>> ident = interpreter_identity("/usr/bin/python3.11")
    >>> ident.digest, ident.version, ident.soabi
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

from .._json import canonical_bytes
from ..errors import EnvironmentFailure, VerificationError
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
print(json.dumps({
    "executable": os.path.realpath(sys.executable),
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

    def to_json(self) -> dict[str, Any]:
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


def _probe(python: str) -> dict[str, Any]:
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
    return doc


def interpreter_identity(python: str | None = None) -> InterpreterIdentity:
    """Probe ``python`` (default: the running interpreter's real binary) and hash it."""
    target = python or os.path.realpath(sys.executable)
    doc = _probe(target)
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
    )


def marker_environment(python: str | None = None) -> dict[str, str]:
    return dict(_probe(python or os.path.realpath(sys.executable))["markers"])


def verify_same_interpreter(recorded: dict[str, Any], current: InterpreterIdentity) -> None:
    """Raise ``INTERPRETER_MISMATCH`` unless ``current`` is the interpreter a runtime recorded."""
    now = current.to_json()
    differing = sorted(k for k in set(recorded) | set(now) if recorded.get(k) != now.get(k))
    if differing:
        detail = "; ".join(f"{k}: recorded {recorded.get(k)!r}, running {now.get(k)!r}" for k in differing[:4])
        raise VerificationError(BuildCode.INTERPRETER_MISMATCH, f"the runtime was built for another interpreter ({detail})")


def compatible_tags(ident: InterpreterIdentity) -> list[str]:
    """Wheel tags this interpreter accepts, most preferred first (packaging's order)."""
    from packaging import tags

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
    import sysconfig

    return sysconfig.get_platform() == ident.platform
