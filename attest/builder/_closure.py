"""The interpreter closure of a runtime image: what it carries, and what it records of the host.

A runtime image runs only its own interpreter (docs/build.md
"The interpreter closure: what the runtime image carries, and what it records of the host"):

- **carried** (image content, closed-inventoried, verified at every use): the interpreter
  binary (``bin/python``), each libpython it loads (``lib/``), and the standard library
  (``lib/pythonX.Y``: every module, ``lib-dynload/`` included; not ``site-packages``,
  ``dist-packages``, ``__pycache__``, CPython's own regression suite ``test/`` or the
  ``config-X.Y-<platform>/`` files for building C extensions). The host
  copies them itself, before any build step runs, from the bytes it hashes: the binary and
  each libpython must have the probed digests and the copied standard library must be exactly
  the probed ``stdlib_identity`` (:func:`copy_interpreter`). A search path naming the host
  prefix (``RUNPATH=/root/.pyenv/versions/3.11.7/lib``) is rewritten in the copy to the image's
  own ``lib/`` (``$ORIGIN/../lib``), so the copy never loads the host's libpython.
- **recorded** (by path and SHA-256, in the image's ``attest-runtime.json``, re-verified before
  every use by the freeze layer): every library the system's loader resolves outside the
  image for any ELF file of the image (:func:`host_closure`), and the loader itself.

    >>> copied = copy_interpreter(ident, "/staging/out")
    >>> libs = host_closure("/staging/taken", loader=copied.loader)
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import stat
from dataclasses import dataclass

from .._json import canonical_bytes
from ..errors import EnvironmentFailure, VerificationError
from ..freeze._hostlibs import host_path_problem
from ..inventory import Entry, EntryType, Inventory
from ._codes import BuildCode
from ._elf import ElfError, is_elf, loader_list, origin_relative, read_elf, rewrite_search_path, search_path_problem
from ._identity import STDLIB_IGNORE, InterpreterIdentity

#: Top-level entries of ``lib/pythonX.Y`` that are not the standard library an image carries.
STDLIB_SKIP_TOP = ("site-packages", "dist-packages", "test", "config-*")
_MAX_ELF_SCAN = 64 << 20


@dataclass(frozen=True, slots=True)
class CopiedInterpreter:
    """What :func:`copy_interpreter` wrote: image-relative path -> SHA-256 of each file, and the loader.

    ``files`` covers ``bin/python``, each carried libpython and every standard-library file;
    after the build steps the taken tree must still hold exactly these bytes there.
    """

    files: dict[str, str]
    libpython: tuple[tuple[str, str], ...]
    stdlib: str
    loader: str | None
    site_name: str = "site-packages"


def _read(path: str, what: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise EnvironmentFailure(BuildCode.INTERPRETER_UNUSABLE, f"cannot read the interpreter's {what}: {e.strerror}", path) from e


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def carry_elf(data: bytes, rel: str, *, lib_rel: str = "lib") -> bytes:
    """``data`` with every absolute search path replaced by the image's ``lib_rel`` seen from ``rel`` (pure).

    Raises:
        EnvironmentFailure: ``INTERPRETER_UNUSABLE`` when the file is not a readable ELF file or
            the image's path does not fit where the host's was.
    """
    try:
        info = read_elf(data)
    except ElfError as e:
        raise EnvironmentFailure(BuildCode.INTERPRETER_UNUSABLE, f"cannot read {rel} as an ELF file: {e}", rel) from e
    if not info.search:
        return data
    out = bytearray(data)
    for entry in info.search:
        if search_path_problem(rel, entry.value) is None:
            continue
        try:
            rewrite_search_path(out, entry, origin_relative(rel, lib_rel))
        except ElfError as e:
            raise EnvironmentFailure(BuildCode.INTERPRETER_UNUSABLE, f"{rel}: {e}; the image cannot carry this interpreter", rel) from e
    return bytes(out)


def _stdlib_entries(stdlib: str) -> tuple[list[tuple[str, os.stat_result]], list[tuple[str, str]]]:
    """Every standard-library directory and file (relative, with its lstat) and every link, in walk order."""
    found: list[tuple[str, os.stat_result]] = []
    links: list[tuple[str, str]] = []
    for dirpath, dirnames, filenames in os.walk(stdlib, followlinks=False):
        rel_dir = os.path.relpath(dirpath, stdlib)
        top = rel_dir == "."
        keep = []
        for name in sorted(dirnames):
            if name == "__pycache__" or (top and any(fnmatch.fnmatchcase(name, p) for p in STDLIB_SKIP_TOP)):
                continue
            rel = name if top else f"{rel_dir}/{name}"
            st = os.lstat(os.path.join(dirpath, name))
            if stat.S_ISLNK(st.st_mode):
                links.append((rel, os.readlink(os.path.join(dirpath, name))))
                continue
            keep.append(name)
            found.append((rel, st))
        dirnames[:] = keep
        for name in sorted(filenames):
            rel = name if top else f"{rel_dir}/{name}"
            st = os.lstat(os.path.join(dirpath, name))
            if stat.S_ISLNK(st.st_mode):
                links.append((rel, os.readlink(os.path.join(dirpath, name))))
            elif stat.S_ISREG(st.st_mode):
                found.append((rel, st))
            else:
                raise EnvironmentFailure(BuildCode.INTERPRETER_UNUSABLE, "the standard library holds a special file", rel)
    return found, links


def copy_interpreter(ident: InterpreterIdentity, root: str) -> CopiedInterpreter:
    """Copy the probed interpreter into ``root`` (``bin/python``, ``lib/libpython*``, ``lib/pythonX.Y``).

    Host code, before any build step: every byte is read once, checked against the probe
    (the binary's and each libpython's digest; the standard library's closed inventory equals
    ``stdlib_identity``, its link list the recorded one) and written from that same buffer.
    A link inside the standard library to a file inside it (Debian's ``_sysconfigdata``
    alias) is written as a copy of its target; a link leaving it (Debian's ``sitecustomize.py``
    -> ``/etc``) is left out: the image runs nothing of the host's ``/etc``.

    Raises:
        VerificationError: ``INTERPRETER_MISMATCH`` when a file is not what was probed.
        EnvironmentFailure: ``INTERPRETER_UNUSABLE`` when it cannot be read or carried.
    """
    files: dict[str, str] = {}
    os.makedirs(os.path.join(root, "bin"), 0o755, exist_ok=True)
    os.makedirs(os.path.join(root, "lib"), 0o755, exist_ok=True)
    binary = _read(ident.executable, "binary")
    if _sha(binary) != ident.executable_sha256.removeprefix("sha256:"):
        raise VerificationError(BuildCode.INTERPRETER_MISMATCH, "the interpreter binary changed since it was probed", ident.executable)
    info = read_elf(binary) if is_elf(binary) else None
    carried = _write(root, "bin/python", carry_elf(binary, "bin/python"), 0o755, files)
    libpython: list[tuple[str, str]] = []
    # A libpython is carried only where the binary finds it through a search path the copy now
    # points at lib/; one found through the system's search (no RUNPATH) stays a host library.
    if info is not None and info.search:
        for path, digest in ident.libpython:
            data = _read(path, "libpython")
            if _sha(data) != digest.removeprefix("sha256:"):
                raise VerificationError(BuildCode.INTERPRETER_MISMATCH, "libpython changed since it was probed", path)
            rel = f"lib/{os.path.basename(path)}"
            libpython.append((rel, _write(root, rel, carry_elf(data, rel), 0o755, files)))
    del carried
    short = ident.python_tag
    lib_rel = f"lib/python{short}"
    entries, links = _stdlib_entries(ident.stdlib)
    inventory: list[Entry] = []
    contents: dict[str, tuple[bytes, int]] = {}
    os.makedirs(os.path.join(root, lib_rel), 0o755, exist_ok=True)
    for rel, st in entries:
        mode = stat.S_IMODE(st.st_mode)
        if stat.S_ISDIR(st.st_mode):
            inventory.append(Entry(rel, EntryType.DIR, mode))
            os.mkdir(os.path.join(root, lib_rel, rel), 0o755)
            continue
        data = _read(os.path.join(ident.stdlib, rel), "standard library")
        inventory.append(Entry(rel, EntryType.FILE, mode, len(data), _sha(data)))
        contents[rel] = (data, 0o755 if mode & 0o111 else 0o644)
    probed = dict(ident.stdlib_identity)
    have = Inventory.from_entries(inventory, STDLIB_IGNORE).identity
    link_digest = hashlib.sha256(canonical_bytes(sorted(links))).hexdigest()
    if have != probed.get("inventory") or link_digest != probed.get("symlinks"):
        raise VerificationError(BuildCode.INTERPRETER_MISMATCH, f"the standard library is not the one probed (inventory {have}, "
                                f"probed {probed.get('inventory')})", ident.stdlib)
    for rel, (data, file_mode) in contents.items():
        full = f"{lib_rel}/{rel}"
        _write(root, full, carry_elf(data, full) if is_elf(data) else data, file_mode, files)
    for rel, target in links:
        inside = os.path.normpath(os.path.join(os.path.dirname(rel), target))
        if os.path.isabs(target) or inside.startswith("..") or inside not in contents:
            continue  # a link leaving the standard library (or to a directory) is not carried
        full = f"{lib_rel}/{rel}"
        data, file_mode = contents[inside]
        _write(root, full, carry_elf(data, full) if is_elf(data) else data, file_mode, files)
    return CopiedInterpreter(files, tuple(libpython), lib_rel, info.interpreter if info is not None else None, ident.site_name)


def _write(root: str, rel: str, data: bytes, mode: int, files: dict[str, str]) -> str:
    with open(os.path.join(root, rel), "xb") as f:
        f.write(data)
    os.chmod(os.path.join(root, rel), mode)
    files[rel] = _sha(data)
    return files[rel]


def verify_carried(root: str, copied: CopiedInterpreter) -> None:
    """After the build steps: ``root`` (the taken tree) holds exactly the carried files, no more, no other bytes.

    Raises:
        VerificationError: ``INTERPRETER_MISMATCH`` for a carried file changed, missing or added
            (bytecode caches under ``__pycache__`` and ``site-packages`` are the steps' own).
    """
    seen: dict[str, str] = {}
    for top in ("bin/python", *(rel for rel, _ in copied.libpython)):
        seen[top] = _file_sha(os.path.join(root, top))
    stdlib = os.path.join(root, copied.stdlib)
    for dirpath, dirnames, filenames in os.walk(stdlib):
        rel_dir = os.path.relpath(dirpath, root)
        dirnames[:] = [d for d in dirnames if d != "__pycache__" and not (dirpath == stdlib and d == copied.site_name)]
        for name in filenames:
            seen[f"{rel_dir}/{name}"] = _file_sha(os.path.join(dirpath, name))
    carried = {rel for rel in copied.files}
    wrong = sorted(rel for rel in carried | set(seen) if seen.get(rel) != copied.files.get(rel))
    if wrong:
        raise VerificationError(BuildCode.INTERPRETER_MISMATCH, f"{len(wrong)} carried interpreter file(s) changed during the build "
                                f"(first: {wrong[0]})", wrong[0])


def _file_sha(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def host_closure(root: str, *, loader: str | None) -> tuple[list[dict[str, str]], list[str]]:
    """The host libraries the image's ELF files load, and the sonames the loader found nowhere.

    Every ELF file of ``root`` (the taken, host-only tree) must be readable by
    :func:`~attest.builder._elf.read_elf`, have only search paths inside the image
    (:func:`~attest.builder._elf.search_path_problem`) and name no program loader but the
    interpreter's own; every library it loads from the host must be writable by its owner
    only, root or this builder, through directories of theirs (:func:`host_path_problem`). The system's loader (the
    interpreter's ``PT_INTERP``) then lists what each one loads (``LOADER --list``, which runs no
    code of the file). Each library it resolved outside ``root``, and the loader, is returned
    with its SHA-256, sorted by path.

    Raises:
        VerificationError: ``UNSAFE_STEP_OUTPUT`` for an ELF file it cannot read, a search path
            leaving the image, another program loader, a host library another user could write.
        EnvironmentFailure: ``INTERPRETER_UNUSABLE`` when the loader cannot list a file.
    """
    real_root = os.path.realpath(root)
    outside: dict[str, str] = {}
    missing: set[str] = set()
    elves: list[str] = []
    for dirpath, _dirnames, filenames in os.walk(root):
        for name in filenames:
            path = os.path.join(dirpath, name)
            st = os.lstat(path)
            if not stat.S_ISREG(st.st_mode) or st.st_size < 64:
                continue
            with open(path, "rb") as f:
                if not is_elf(f.read(4)):
                    continue
                if st.st_size > _MAX_ELF_SCAN:
                    raise EnvironmentFailure(BuildCode.INTERPRETER_UNUSABLE, "an ELF file of the image is too large to inspect", path)
                f.seek(0)
                data = f.read()
            rel = os.path.relpath(path, root)
            try:
                info = read_elf(data)
            except ElfError as e:  # an ELF file nothing here can vouch for is refused, never skipped
                raise VerificationError(BuildCode.UNSAFE_STEP_OUTPUT, f"{rel} is an ELF file attest cannot read ({e}): its "
                                        "search path and libraries cannot be checked", rel) from e
            for entry in info.search:
                problem = search_path_problem(rel, entry.value)
                if problem is not None:
                    raise VerificationError(BuildCode.UNSAFE_STEP_OUTPUT, f"{entry.tag} of {rel}: {problem}", rel)
            if info.loads:
                tag, value = info.loads[0]
                raise VerificationError(BuildCode.UNSAFE_STEP_OUTPUT, f"{rel} has DT_{tag} {value!r}: the loader would load that "
                                        "file too, and nothing lists or re-hashes it", rel)
            # The kernel starts a program through the loader it names: only the interpreter's own one.
            if info.interpreter is not None and info.interpreter != loader:
                raise VerificationError(BuildCode.UNSAFE_STEP_OUTPUT, f"{rel} names the program loader {info.interpreter!r}, not "
                                        f"the interpreter's {loader!r}: the kernel would start it through that file", rel)
            if info.needed or info.interpreter:
                elves.append(path)
    if loader is None:
        return [], []
    for path in elves:
        try:
            resolved = loader_list(loader, path)
        except ElfError as e:
            raise EnvironmentFailure(BuildCode.INTERPRETER_UNUSABLE, f"cannot list the libraries of {os.path.relpath(path, root)}: {e}",
                                     path) from e
        for name, where in resolved.libraries:
            if where is None:
                missing.add(name)
                continue
            real = os.path.realpath(where)
            if real == real_root or real.startswith(real_root + os.sep):
                continue
            if where not in outside:
                # Re-hashed before every use; only its owner (root, or this builder) could swap it after that.
                problem = host_path_problem(where)
                if problem is not None:
                    raise VerificationError(BuildCode.UNSAFE_STEP_OUTPUT, f"{os.path.relpath(path, root)} loads {where}, which "
                                            f"{problem}: another user could swap it between its check and its load", where)
                outside[where] = _file_sha(where)
    return [{"path": p, "sha256": outside[p]} for p in sorted(outside)], sorted(missing)


def write_runtime_manifest(root: str, copied: CopiedInterpreter, host_libraries: list[dict[str, str]], missing: list[str]) -> None:
    """Add the image's closure to ``attest-runtime.json`` (the worker wrote the probed identity there)."""
    path = os.path.join(root, "attest-runtime.json")
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    doc["image"] = {
        "libpython": [{"path": rel, "sha256": digest} for rel, digest in copied.libpython],
        "host_libraries": host_libraries,
        "missing_libraries": missing,
        "stdlib": copied.stdlib,
    }
    tmp = path + ".tmp"
    with open(tmp, "x", encoding="utf-8") as f:
        f.write(json.dumps(doc, sort_keys=True, indent=1) + "\n")
    os.replace(tmp, path)


__all__ = ["STDLIB_SKIP_TOP", "CopiedInterpreter", "carry_elf", "copy_interpreter", "host_closure", "verify_carried",
           "write_runtime_manifest"]
