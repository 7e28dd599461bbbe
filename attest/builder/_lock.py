"""Hash-pinned locks: PEP 751 ``pylock.toml`` and pip requirements with ``--hash`` lines.

Strict on purpose, so that nothing but the exact, hash-checked wheels a lock names can reach a
build (docs/build.md "Locks (`lockfiles/`)"): only wheels, every one with a SHA-256; sdists,
VCS, directory and archive sources, unpinned or unhashed requirements, unknown keys and
duplicate entries are refused. A lock's identity is the SHA-256 of its exact bytes.

    >>> lock = load_lock("lockfiles/pylock.toml")
    >>> lock.digest, [w.filename for p in lock.packages for w in p.wheels]
"""

from __future__ import annotations

import hashlib
import re
import tomllib
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from packaging.markers import InvalidMarker, Marker
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from .._fs import read_bounded
from .._shape import ErrorFactory, Shape
from ..errors import InputError
from ._codes import BuildCode

MAX_LOCK_BYTES = 8 * 1024 * 1024
MAX_PACKAGES = 5000
_HEX64 = re.compile(r"[0-9a-f]{64}\Z")

_TOP_KEYS = {"lock-version", "environments", "requires-python", "extras", "dependency-groups",
             "default-groups", "created-by", "packages", "tool"}
_PKG_KEYS = {"name", "version", "marker", "requires-python", "dependencies", "index", "vcs", "directory",
             "archive", "sdist", "wheels", "attestation-identities", "tool"}
_WHEEL_KEYS = {"name", "upload-time", "url", "path", "size", "hashes"}
_DIST_NAME = re.compile(r"(?:[A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9._-]*[A-Za-z0-9])\Z")  # PEP 508


@dataclass(frozen=True, slots=True)
class LockedWheel:
    """One wheel a lock allows, named by its SHA-256. ``url`` is where fetch may get it."""

    filename: str
    sha256: str
    url: str | None = None
    size: int | None = None
    path: str | None = None     # pylock ``path``: relative to the lock's directory


@dataclass(frozen=True, slots=True)
class LockedPackage:
    """One distribution: normalized name, exact version, optional marker, allowed wheels.

    In a requirements lock the filenames are unknown until fetch: ``wheels`` then holds
    only hashes (``filename`` empty) and the cache resolves them.
    """

    name: str
    version: str
    marker: str | None
    wheels: tuple[LockedWheel, ...]

    def applies(self, environment: Mapping[str, str]) -> bool:
        """Whether this entry is for ``environment`` (PEP 508 marker values); no marker: always.

        Raises:
            Nothing: the marker was parsed when the lock was (``BAD_LOCK`` then).
        """
        return self.marker is None or Marker(self.marker).evaluate(dict(environment))


@dataclass(frozen=True, slots=True)
class Lock:
    """A parsed lock: its format, the SHA-256 of its exact bytes and its packages."""

    format: Literal["pylock", "requirements"]
    digest: str
    packages: tuple[LockedPackage, ...]
    requires_python: str | None = None
    raw: bytes = b""

    @property
    def all_hashes(self) -> frozenset[str]:
        return frozenset(w.sha256 for p in self.packages for w in p.wheels)


def _bad(code: BuildCode, detail: str, where: str | None = None) -> InputError:
    return InputError(code, detail, where)


def load_lock(path: str) -> Lock:
    """Read and parse a lock file; the format is chosen by the name (``*.toml`` is PEP 751).

    Raises:
        InputError: ``UNREADABLE`` / ``TOO_LARGE``, and the codes of :func:`parse_pylock` or
            :func:`parse_requirements`.
    """
    data = read_bounded(path, what="lock", max_bytes=MAX_LOCK_BYTES)
    if path.endswith(".toml"):
        return parse_pylock(data, where=path)
    return parse_requirements(data, where=path)


def parse_pylock(data: bytes, *, where: str = "pylock.toml") -> Lock:
    """Parse a PEP 751 ``pylock.toml`` strictly: wheels only, every one hashed.

    Raises:
        InputError: ``BAD_LOCK`` (not UTF-8 TOML, unknown keys, lock-version other than 1.0,
            no packages, malformed entries or markers, over the caps); ``LOCK_NOT_WHEEL`` (an
            sdist, VCS, directory or archive entry); ``LOCK_UNHASHED``; ``LOCK_DUPLICATE``
            (one distribution twice for one environment).
    """
    try:
        doc = tomllib.loads(data.decode("utf-8"))
    # UnicodeDecodeError and TOMLDecodeError are ValueErrors; so is what tomllib raises, unwrapped, for an
    # integer of more than 4300 digits. Deep nesting ("a = [[[[...") is a RecursionError.
    except (ValueError, RecursionError) as e:
        raise _bad(BuildCode.BAD_LOCK, f"not valid UTF-8 TOML: {e}", where) from e
    lock = Shape(doc, "lock", _refuse(BuildCode.BAD_LOCK, where)).object(allowed=_TOP_KEYS)
    lock.check(doc.get("lock-version") == "1.0", "'1.0'", "lock-version")
    raw_packages = lock.list_of("packages", non_empty=True, maximum=MAX_PACKAGES)
    rp = _requires_python(lock)
    packages = tuple(_pylock_package(p, where) for p in raw_packages)
    _check_duplicates(packages, where)
    return Lock("pylock", hashlib.sha256(data).hexdigest(), packages, rp, data)


def _refuse(code: BuildCode, where: str, name: str | None = None) -> ErrorFactory:
    """The lock's refusal with ``code``, naming the package ``name`` once it is known."""
    return lambda detail: _bad(code, detail if name is None else f"{name}: {detail}", where)


def _pylock_package(raw: Shape, where: str) -> LockedPackage:
    if not isinstance(raw.value, dict):
        raw.fail("a table")
    raw.object(allowed=_PKG_KEYS)
    name = raw.string("name", pattern=_DIST_NAME, expected="a distribution name (PEP 508)")
    pkg = raw.with_error(_refuse(BuildCode.BAD_LOCK, where, name))
    for source in ("sdist", "vcs", "directory", "archive"):
        if pkg.has(source):
            pkg.with_error(_refuse(BuildCode.LOCK_NOT_WHEEL, where, name)).refuse(
                "is refused; only hashed wheels are built from", source)
    pinned = pkg.with_error(_refuse(BuildCode.LOCK_NOT_PINNED, where, name))
    version = pinned.string("version", empty=True, expected="an exact version")
    try:
        Version(version)
        ok = version == version.strip()
    except (InvalidVersion, ValueError):  # ValueError: a release number of more than 4300 digits
        ok = False
    pinned.check(ok, "an exact version (PEP 440)", "version")
    marker = None
    if pkg.has("marker"):
        text = pkg.string("marker", empty=True)
        try:
            marker = str(Marker(text))
        except InvalidMarker as e:
            pkg.refuse(f"{text!r} is invalid: {e}", "marker")
    _requires_python(pkg)
    wheels = []
    for w in pkg.with_error(_refuse(BuildCode.LOCK_NOT_WHEEL, where, name)).list_of("wheels", non_empty=True):
        w = w.with_error(_refuse(BuildCode.BAD_LOCK, where, name))
        if not isinstance(w.value, dict):
            w.fail("a table")
        w.object(allowed=_WHEEL_KEYS)
        sha = w.with_error(_refuse(BuildCode.LOCK_UNHASHED, where, name)).nested("hashes").string(
            "sha256", pattern=_HEX64, expected="64 lowercase hex digits")
        url, path, filename = w.get("url"), w.get("path"), w.get("name")
        w.check(url is not None or path is not None, "a url or a path (PEP 751: one is required)", "url")
        if filename is None:
            source = url if isinstance(url, str) else path if isinstance(path, str) else ""
            filename = source.rsplit("/", 1)[-1]
        if not isinstance(filename, str) or not filename:
            w.fail("a file name", "name")
        _wheel_filename(w, w.with_error(_refuse(BuildCode.LOCK_NOT_WHEEL, where, name)),
                        "name" if w.has("name") else "url" if url is not None else "path", filename, name, version)
        if path is not None:
            path = w.string("path", empty=True)
            w.check(not path.startswith("/") and ".." not in path.split("/"), "a path relative to the lock, without '..'",
                    "path")
        if url is not None:
            url = w.string("url", empty=True)
            _https_url(w, url)
        located = url if url is not None else path
        if w.has("name") and located is not None:  # one wheel, one file name: the one the reader installs is the one fetched
            last = urllib.parse.unquote(urllib.parse.urlsplit(located).path.rsplit("/", 1)[-1]) if url is not None else located.rsplit("/", 1)[-1]
            w.check(last == filename, f"a {'url' if url is not None else 'path'} whose last part is the wheel's name {filename!r}",
                    "url" if url is not None else "path")
        size = w.optional_int("size", minimum=0)
        wheels.append(LockedWheel(filename, sha, url, size, path))
    return LockedPackage(str(canonicalize_name(name)), version, marker, tuple(wheels))


def _https_url(w: Shape, url: str) -> None:
    """An https:// URL of a host and a path, with no credentials in it (a lock is published: its URLs are in attestations)."""
    try:
        parts = urllib.parse.urlsplit(url)
        port_ok = parts.port is None or parts.port > 0  # .port raises ValueError for one out of range or not a number
    except ValueError:
        w.fail("an https:// URL", "url")
    w.check(url.startswith("https://") and bool(parts.hostname) and port_ok and url.isprintable() and " " not in url,
            "an https:// URL", "url")
    w.check("@" not in parts.netloc, "an https:// URL without credentials (user or password before '@')", "url")


def _version(version: str, at: str) -> None:
    try:
        Version(version)
    except (InvalidVersion, ValueError) as e:  # ValueError: a release number of more than 4300 digits
        raise _bad(BuildCode.LOCK_NOT_PINNED, f"{at}: version {version!r} is invalid") from e


def _requires_python(t: Shape) -> str | None:
    """The table's ``requires-python``, a PEP 440 specifier set (None when absent)."""
    if not t.has("requires-python"):
        return None
    spec = t.string("requires-python", empty=True)
    try:
        SpecifierSet(spec)
    except InvalidSpecifier:
        t.fail("a version specifier set (PEP 440)", "requires-python")
    return spec


def _wheel_filename(w: Shape, not_wheel: Shape, key: str, filename: str, name: str, version: str) -> None:
    """The wheel's file name (its ``name``, else the last part of its ``url`` or ``path``): a wheel of ``name`` ``version``.

    ``not_wheel`` refuses a name that is no wheel's (``LOCK_NOT_WHEEL``), ``w`` a wheel of another distribution (``BAD_LOCK``).
    """
    if not filename.endswith(".whl") or "/" in filename or filename.startswith("."):
        not_wheel.refuse(f"{filename!r} is not a wheel file name", key)
    try:
        wname, wversion, _, _ = parse_wheel_filename(filename)
    except (InvalidWheelFilename, ValueError) as e:  # ValueError: a version number of more than 4300 digits
        not_wheel.refuse(f"{filename!r} is not a valid wheel file name: {e}", key)
    if wname != canonicalize_name(name) or wversion != Version(version):
        w.refuse(f"{filename!r} is not a wheel of {name} {version}", key)


def _check_duplicates(packages: tuple[LockedPackage, ...], where: str) -> None:
    seen: dict[str, list[str | None]] = {}
    for p in packages:
        markers = seen.setdefault(p.name, [])
        # Two entries for one name are legitimate only when markers separate them; the same
        # (or no) marker twice means two readers could pick different files.
        if p.marker in markers or (markers and (p.marker is None or None in markers)):
            raise _bad(BuildCode.LOCK_DUPLICATE, f"{where}: {p.name} is locked more than once for one environment")
        markers.append(p.marker)


def parse_requirements(data: bytes, *, where: str = "requirements.lock") -> Lock:
    """pip's hash-checking requirements format: ``name==version [; marker] --hash=sha256:...``.

    Raises:
        InputError: ``BAD_LOCK`` (not UTF-8, an option or line it does not read);
            ``LOCK_NOT_PINNED`` (not ``name==version``); ``LOCK_UNHASHED``;
            ``LOCK_NOT_WHEEL`` (a URL, path or VCS requirement); ``LOCK_DUPLICATE``.
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise _bad(BuildCode.BAD_LOCK, "the lock is not UTF-8", where) from e
    logical: list[tuple[int, str]] = []
    buf, start = "", 0
    for n, line in enumerate(text.splitlines(), 1):
        if not buf:
            start = n
        stripped = line.split(" #", 1)[0].rstrip() if not line.lstrip().startswith("#") else ""
        if stripped.endswith("\\"):
            buf += stripped[:-1] + " "
            continue
        buf += stripped
        if buf.strip():
            logical.append((start, buf.strip()))
        buf = ""
    if buf.strip():
        logical.append((start, buf.strip()))
    packages = []
    for n, line in logical:
        at = f"{where}:{n}"
        parts = line.split()
        hashes = []
        spec_parts = []
        for part in parts:
            if part.startswith("--hash="):
                algo, _, value = part[7:].partition(":")
                if algo != "sha256":
                    continue  # another algorithm may accompany sha256; it is not what we check
                if not _HEX64.match(value):
                    raise _bad(BuildCode.LOCK_UNHASHED, f"{at}: {part!r} is not a sha256 hex digest")
                hashes.append(value)
            elif part.startswith("-"):
                raise _bad(BuildCode.BAD_LOCK, f"{at}: option {part!r} is not allowed in a lock (only --hash)")
            else:
                spec_parts.append(part)
        spec = " ".join(spec_parts)
        try:
            req = Requirement(spec)
        except InvalidRequirement as e:
            raise _bad(BuildCode.BAD_LOCK, f"{at}: {spec!r} is not a requirement: {e}") from e
        if req.url:
            raise _bad(BuildCode.LOCK_NOT_WHEEL, f"{at}: direct URL requirements are refused")
        specs = list(req.specifier)
        if len(specs) != 1 or specs[0].operator != "==" or "*" in specs[0].version:
            raise _bad(BuildCode.LOCK_NOT_PINNED, f"{at}: {req.name} is not pinned with a single name==version")
        if not hashes:
            raise _bad(BuildCode.LOCK_UNHASHED, f"{at}: {req.name} has no --hash=sha256:... line")
        _version(specs[0].version, at)
        if len(set(hashes)) != len(hashes):
            raise _bad(BuildCode.LOCK_DUPLICATE, f"{at}: a hash is listed twice")
        marker = str(req.marker) if req.marker else None
        packages.append(LockedPackage(str(canonicalize_name(req.name)), specs[0].version, marker,
                                      tuple(LockedWheel("", h) for h in hashes)))
    if not packages:
        raise _bad(BuildCode.BAD_LOCK, "the lock names no packages", where)
    ps = tuple(packages)
    _check_duplicates(ps, where)
    return Lock("requirements", hashlib.sha256(data).hexdigest(), ps, None, data)
