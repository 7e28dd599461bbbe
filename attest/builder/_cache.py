"""The fetched-input cache and the fixed-output fetch.

Layout: ``CACHE/<sha256>/<filename>``, one directory per content hash. The cache is a
performance cache, never authority: every file is re-hashed when it is used.

:func:`fetch` is the only step of the build that may reach the network. With a warm cache it
re-hashes what is there and touches nothing else (no network, no writes).

    >>> result = fetch(load_lock("lockfiles/pylock.toml"), "cache")
    >>> result.fetched, result.present
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..errors import EnvironmentFailure, InputError, VerificationError
from ._codes import BuildCode
from ._identity import marker_environment
from ._lock import Lock, LockedWheel

MAX_WHEEL_BYTES = 512 * 1024 * 1024
_CHUNK = 1 << 20


@dataclass(frozen=True, slots=True)
class FetchResult:
    fetched: tuple[str, ...]   # filenames written into the cache by this run
    present: tuple[str, ...]   # filenames already present and verified
    network_used: bool


def sha256_file(path: str | os.PathLike[str]) -> str:
    h = hashlib.sha256()
    with open(path, "rb", buffering=0) as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def cached_file(cache: str | os.PathLike[str], sha256: str) -> Path | None:
    """The single file cached under ``sha256``, or None when absent. Not yet re-hashed."""
    d = Path(cache) / sha256
    if not d.is_dir() or d.is_symlink():
        return None
    names = [n for n in os.listdir(d) if not n.startswith(".")]
    if len(names) != 1:
        return None
    p = d / names[0]
    return p if p.is_file() and not p.is_symlink() else None


def verified_cached_file(cache: str | os.PathLike[str], sha256: str, *, what: str) -> Path:
    """The cached file for ``sha256`` after re-hashing it; raises when absent or altered."""
    p = cached_file(cache, sha256)
    if p is None:
        raise InputError(BuildCode.NOT_IN_CACHE, f"{what} (sha256 {sha256}) is not in the cache; run `attest fetch --cache {cache}` first", str(cache))
    got = sha256_file(p)
    if got != sha256:
        raise VerificationError(BuildCode.HASH_MISMATCH, f"cached {p.name} has sha256 {got}, the lock says {sha256}", str(p))
    return p


def _place(cache: Path, tmp: Path, wheel_name: str, sha256: str) -> None:
    """Move the verified temp file to ``cache/<sha256>/<name>`` with a rename (atomic)."""
    d = cache / sha256
    if d.exists() or d.is_symlink():
        shutil.rmtree(d) if d.is_dir() and not d.is_symlink() else d.unlink()
    staging = Path(tempfile.mkdtemp(dir=cache, prefix=".fetch-"))
    os.chmod(staging, 0o755)
    os.replace(tmp, staging / wheel_name)
    os.chmod(staging / wheel_name, 0o444)
    os.replace(staging, d)


def _stream_to_temp(cache: Path, read: Callable[[int], bytes], sha256: str, what: str) -> Path:
    fd, name = tempfile.mkstemp(dir=cache, prefix=".fetch-", suffix=".part")
    h = hashlib.sha256()
    total = 0
    try:
        with os.fdopen(fd, "wb") as out:
            while chunk := read(_CHUNK):
                total += len(chunk)
                if total > MAX_WHEEL_BYTES:
                    raise VerificationError(BuildCode.HASH_MISMATCH, f"{what} is larger than {MAX_WHEEL_BYTES} bytes")
                h.update(chunk)
                out.write(chunk)
            out.flush()
            os.fsync(out.fileno())
        if h.hexdigest() != sha256:
            raise VerificationError(BuildCode.HASH_MISMATCH, f"{what} has sha256 {h.hexdigest()}, the lock says {sha256}")
        return Path(name)
    except BaseException:
        os.unlink(name)
        raise


def _fetch_one(cache: Path, w: LockedWheel, lock_dir: Path) -> None:
    if w.path is not None:
        src = lock_dir / w.path
        try:
            with open(src, "rb") as f:
                tmp = _stream_to_temp(cache, f.read, w.sha256, w.filename)
        except OSError as e:
            raise InputError(BuildCode.FETCH_FAILED, f"cannot read {src}: {e.strerror}", str(src)) from e
    elif w.url is not None:
        import urllib.error  # lazy: with urllib.request (http.client, ssl) 9-13 ms measured on top of attest.builder
        import urllib.request  # lazy: only a download from a url needs it, never a cached or local wheel

        try:
            with urllib.request.urlopen(w.url, timeout=60) as resp:
                tmp = _stream_to_temp(cache, resp.read, w.sha256, w.filename)
        except (urllib.error.URLError, OSError, TimeoutError) as e:
            raise EnvironmentFailure(BuildCode.FETCH_FAILED, f"cannot download {w.url}: {e}", w.filename) from e
    else:
        raise InputError(BuildCode.FETCH_FAILED, "the lock gives neither a url nor a path for this wheel", w.filename)
    _place(cache, tmp, w.filename, w.sha256)


def _make_private_dirs(path: Path) -> None:
    """Create ``path`` and any missing parent as 0700 (the cache usually lives in the state dir)."""
    missing = []
    p = path.absolute()
    while not p.exists():
        missing.append(p)
        p = p.parent
    for d in reversed(missing):
        try:
            os.mkdir(d, 0o700)
        except FileExistsError:
            pass


def fetch(lock: Lock, cache: str | os.PathLike[str], *, lock_path: str | None = None,
          python: str | None = None) -> FetchResult:
    """Make the cache hold every locked file, each checked against its hash.

    Raises:
        InputError: ``FETCH_FAILED`` for a local wheel that cannot be read, an entry with
            neither url nor path, or a requirements lock given without its path.
        VerificationError: ``HASH_MISMATCH`` for downloaded, copied or cached bytes that are
            not the locked ones (or larger than the cap); nothing unverified is kept.
        EnvironmentFailure: ``FETCH_FAILED`` when a download (or ``pip download``) fails.
    """
    cdir = Path(cache)
    _make_private_dirs(cdir)
    lock_dir = Path(lock_path).resolve().parent if lock_path else Path.cwd()
    fetched: list[str] = []
    present: list[str] = []
    network = False
    if lock.format == "requirements":
        return _fetch_requirements(lock, cdir, lock_path, python)
    for pkg in lock.packages:
        for w in pkg.wheels:
            p = cached_file(cdir, w.sha256)
            if p is not None and p.name == w.filename and sha256_file(p) == w.sha256:
                present.append(w.filename)
                continue
            network = network or w.path is None
            _fetch_one(cdir, w, lock_dir)
            fetched.append(w.filename)
    return FetchResult(tuple(fetched), tuple(present), network)


def _fetch_requirements(lock: Lock, cdir: Path, lock_path: str | None, python: str | None) -> FetchResult:
    """pip does the download (it knows the index and tags); every file is then re-hashed here."""
    env_markers = marker_environment(python)
    missing = []
    present = []
    for pkg in lock.packages:
        if not pkg.applies(env_markers):
            continue
        hit = next((p for w in pkg.wheels if (p := cached_file(cdir, w.sha256)) is not None and sha256_file(p) == w.sha256), None)
        if hit is None:
            missing.append(pkg)
        else:
            present.append(hit.name)
    if not missing:
        return FetchResult((), tuple(present), False)
    if lock_path is None:
        raise InputError(BuildCode.FETCH_FAILED, "a requirements lock is fetched by pip from its file; give its path")
    allowed = lock.all_hashes
    with tempfile.TemporaryDirectory(dir=cdir, prefix=".pip-") as tmp:
        cmd = [python or sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check", "--no-deps",
               "--only-binary=:all:", "--require-hashes", "--dest", tmp, "-r", lock_path]
        proc = subprocess.run(cmd, capture_output=True, env={**os.environ, "PIP_CONFIG_FILE": os.devnull})
        if proc.returncode != 0:
            raise EnvironmentFailure(BuildCode.FETCH_FAILED, "pip download failed: " + proc.stderr.decode("utf-8", "replace")[-600:])
        fetched = []
        for name in sorted(os.listdir(tmp)):
            src = Path(tmp) / name
            digest = sha256_file(src)
            if digest not in allowed or not name.endswith(".whl"):
                raise VerificationError(BuildCode.HASH_MISMATCH, f"pip returned {name} (sha256 {digest}), which the lock does not allow")
            if cached_file(cdir, digest) is None:
                fd, t = tempfile.mkstemp(dir=cdir, prefix=".fetch-", suffix=".part")
                os.close(fd)
                shutil.copyfile(src, t)
                _place(cdir, Path(t), name, digest)
                fetched.append(name)
    return FetchResult(tuple(fetched), tuple(present), True)
