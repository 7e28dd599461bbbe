"""The host libraries a runtime image runs with, re-verified before every use.

A runtime image carries its whole interpreter (binary, libpython, the standard library and its
extension modules; see docs/build.md
"The interpreter closure: what the runtime image carries, and what it records of the host").
What it does not carry is the system's C library and the libraries the system's packages own
(``libc``, ``libm``, ``libssl``, ``libcrypto``, ``libffi``, ``libz``, ... and the dynamic loader
itself): the build records each one the loader resolved, by path and SHA-256, in the image's
own ``attest-runtime.json`` (``image.host_libraries``), which the image's inventory (and so its
attestation) covers.

Before any command runs from an image that has that file, :func:`verify_host_libraries` reads
the file from the verified image (its bytes must be the inventory's), then hashes every listed
host file and refuses the run (``HOST_LIBRARY_CHANGED``) if one is missing, unreadable or has
other bytes: a swapped ``libz.so.1`` is never loaded by an image's interpreter.

    >>> problems = verify_host_libraries(image)
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .._digest import sha256_of
from .._json import loads_strict
from .._safefs import O_FILE
from ..errors import AttestError, Finding
from ._codes import FreezeCode
from ._erofs_image import read_image_file

if TYPE_CHECKING:  # for annotations only: _image imports much of the package
    from ._image import Image

#: The runtime's own description of itself, at the image's root (written by the runtime builder).
RUNTIME_MANIFEST = "attest-runtime.json"
MAX_MANIFEST_BYTES = 1 << 20
MAX_HOST_LIBRARIES = 512
_HEX = re.compile(r"[0-9a-f]{64}\Z")


@dataclass(frozen=True, slots=True)
class HostLibrary:
    """One host file the image's interpreter loads: its absolute path and SHA-256 (hex)."""

    path: str
    sha256: str


def parse_host_libraries(doc: object) -> tuple[tuple[HostLibrary, ...], str | None]:
    """The ``image.host_libraries`` of a runtime manifest, or why it is not the documented shape (pure).

    Each entry is ``{"path": ABSOLUTE-NORMAL-PATH, "sha256": HEX}``, no other key, no path twice.

    Raises:
        Nothing: ``((), reason)`` for a malformed manifest.
    """
    image = doc.get("image") if isinstance(doc, dict) else None
    libs = image.get("host_libraries") if isinstance(image, dict) else None
    if not isinstance(libs, list) or len(libs) > MAX_HOST_LIBRARIES:
        return (), "image.host_libraries is not a list of at most 512 entries"
    out: list[HostLibrary] = []
    for i, e in enumerate(libs):
        if not (isinstance(e, dict) and e.keys() == {"path", "sha256"}):
            return (), f"image.host_libraries[{i}] is not exactly {{path, sha256}}"
        path, digest = e["path"], e["sha256"]
        if not (isinstance(path, str) and path.startswith("/") and os.path.normpath(path) == path and path != "/"
                and "\0" not in path):
            return (), f"image.host_libraries[{i}].path is not an absolute, normal path"
        if not (isinstance(digest, str) and _HEX.match(digest)):
            return (), f"image.host_libraries[{i}].sha256 is not 64 lowercase hex digits"
        out.append(HostLibrary(path, digest))
    if len({lib.path for lib in out}) != len(out):
        return (), "image.host_libraries names a path twice"
    return tuple(out), None


def decide_host_libraries(declared: Sequence[HostLibrary], observed: Mapping[str, str | None], *, image: str) -> list[Finding]:
    """Which declared host libraries do not have their recorded bytes (pure).

    ``observed`` maps each path to the SHA-256 just read there, or to a reason it could not be read
    (a string that is not a digest).

    Raises:
        Nothing: every difference is a returned ``HOST_LIBRARY_CHANGED`` finding.
    """
    found: list[Finding] = []
    for lib in declared:
        have = observed.get(lib.path)
        if have == lib.sha256:
            continue
        why = (f"its SHA-256 is {have}, the runtime image {image} was built with {lib.sha256}" if have and _HEX.match(have)
               else f"it {have or 'was not checked'}; the runtime image {image} was built with it")
        found.append(Finding(FreezeCode.HOST_LIBRARY_CHANGED, lib.path, why + ": its interpreter would load another library"))
    return found


_MAX_LINKS = 40


def host_path_problem(path: str, *, owners: frozenset[int] | None = None) -> str | None:
    """Why another user could replace the host file ``path``, or None (links followed one component at a time).

    Every directory on the way, every link and the file itself must belong to root or to this
    process's user (``owners``), and no directory or file may be writable by group or others
    (a sticky ``/tmp`` included: anyone may create a name there). Then only root or the
    deployment's own user can swap the file between its check and its load.

    Raises:
        Nothing: the reason is returned (a component that cannot be read is one).
    """
    allowed = owners if owners is not None else frozenset({0, os.geteuid()})
    todo = [p for p in path.split("/") if p]
    resolved = "/"
    links = 0
    try:
        st = os.lstat("/")
        if st.st_uid not in allowed or st.st_mode & 0o022:
            return "lies under a root directory another user can write"
        while todo:
            name = todo.pop(0)
            if name in (".", ""):
                continue
            if name == "..":
                resolved = os.path.dirname(resolved)
                continue
            here = os.path.join(resolved, name)
            st = os.lstat(here)
            if st.st_uid not in allowed:
                return f"is reached through {here}, owned by uid {st.st_uid}"
            if stat.S_ISLNK(st.st_mode):
                links += 1
                if links > _MAX_LINKS:
                    return "is reached through too many links"
                target = os.readlink(here)
                if target.startswith("/"):
                    resolved = "/"
                todo[:0] = [p for p in target.split("/") if p]
                continue
            if st.st_mode & 0o022:
                return f"is reached through {here}, writable by group or others"
            resolved = here
    except OSError as e:
        return f"cannot be checked ({e.strerror})"
    return None


def _digest(path: str) -> str:
    """The file's SHA-256 (hex), or why it has none (a phrase: "cannot be opened (...)")."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as e:
        return f"cannot be opened ({e.strerror})"
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return "is not a regular file"
        h = hashlib.sha256()
        while chunk := os.read(fd, 1 << 20):
            h.update(chunk)
        return h.hexdigest()
    except OSError as e:
        return f"cannot be read ({e.strerror})"
    finally:
        os.close(fd)


def declared_host_libraries(image: Image) -> tuple[HostLibrary, ...] | Finding:
    """The host libraries ``image`` (a verified :class:`~attest.freeze.Image`) declares, read from its frozen manifest.

    An image without ``attest-runtime.json`` at its root declares none. The file is read without
    following links and must have exactly the digest its (verified) inventory records.

    Raises:
        Nothing: a manifest that cannot be read, is not the inventory's, or is malformed is a
        returned ``HOST_LIBRARY_CHANGED`` finding.
    """
    inventory = getattr(image, "inventory", None)
    entry = next((e for e in inventory.entries if e.path == RUNTIME_MANIFEST), None) if inventory is not None else None
    if entry is None:
        return ()
    path = os.path.join(image.path, RUNTIME_MANIFEST)

    def bad(detail: str) -> Finding:
        return Finding(FreezeCode.HOST_LIBRARY_CHANGED, path, f"the runtime manifest {detail}; its host libraries cannot be checked")

    if getattr(image, "erofs", None) is not None:  # read through a private mount of the (checked) image file
        try:
            data = read_image_file(image, RUNTIME_MANIFEST, MAX_MANIFEST_BYTES)
        except AttestError as e:
            return bad(f"cannot be read through the image's mount ({e.detail})")
    else:
        try:
            fd = os.open(path, O_FILE)
        except OSError as e:
            return bad(f"cannot be opened ({e.strerror})")
        try:
            chunks: list[bytes] = []
            while (chunk := os.read(fd, 1 << 16)) and sum(map(len, chunks)) <= MAX_MANIFEST_BYTES:
                chunks.append(chunk)
            data = b"".join(chunks)
        except OSError as e:
            return bad(f"cannot be read ({e.strerror})")
        finally:
            os.close(fd)
    if len(data) > MAX_MANIFEST_BYTES or sha256_of(data) != f"sha256:{entry.sha256}":
        return bad("is not the bytes its inventory records")
    try:
        doc = loads_strict(data, what="the runtime manifest", max_bytes=MAX_MANIFEST_BYTES)
    except AttestError as e:
        return bad(f"is not JSON ({e})")
    libs, problem = parse_host_libraries(doc)
    return bad(f"is not the documented shape: {problem}") if problem is not None else libs


def verify_host_libraries(image: Image) -> list[Finding]:
    """Hash every host library ``image`` declares and compare (see the module's docstring).

    Raises:
        Nothing: the problems are returned (``HOST_LIBRARY_CHANGED``).
    """
    declared = declared_host_libraries(image)
    if isinstance(declared, Finding):
        return [declared]
    observed = {lib.path: host_path_problem(lib.path) or _digest(lib.path) for lib in declared}
    return decide_host_libraries(declared, observed, image=image.path)


__all__ = [
    "MAX_HOST_LIBRARIES",
    "RUNTIME_MANIFEST",
    "HostLibrary",
    "decide_host_libraries",
    "declared_host_libraries",
    "host_path_problem",
    "parse_host_libraries",
    "verify_host_libraries",
]
