"""What an ELF file asks the dynamic loader for: its loader, its libraries, its search path.

The runtime image carries its interpreter (binary, libpython, the standard library and its
extension modules). Those files name where the loader looks for libraries: ``PT_INTERP`` (the
loader itself), ``DT_NEEDED`` (the sonames) and ``DT_RPATH`` / ``DT_RUNPATH`` (directories
searched first). An interpreter built under a prefix (pyenv's, ``/opt/python``) searches that
prefix's ``lib/`` by absolute path, so the copy in an image would still load the host's
libpython, and a library planted there. :func:`rewrite_search_path` replaces such an entry in
place (same length or shorter, NUL-padded: no section moves) by one relative to the file
(``$ORIGIN/../lib``); :func:`search_path_problem` refuses any entry that still leaves the image.

Only 64-bit little-endian ELF (x86-64, AArch64, RISC-V 64, ...) is read; anything else is
reported as unsupported, never guessed at.

    >>> info = read_elf(open("/usr/bin/python3.11", "rb").read())
    >>> info.interpreter, info.needed
"""

from __future__ import annotations

import os
import posixpath
import struct
import subprocess
from dataclasses import dataclass

ELF_MAGIC = b"\x7fELF"
_PT_LOAD, _PT_DYNAMIC, _PT_INTERP = 1, 2, 3
_DT_NULL, _DT_NEEDED, _DT_STRTAB, _DT_RPATH, _DT_RUNPATH = 0, 1, 5, 15, 29
SEARCH_TAGS = {_DT_RPATH: "RPATH", _DT_RUNPATH: "RUNPATH"}
#: Tags naming a file glibc loads besides the DT_NEEDED ones (an audit module, a filtee): an image's
#: file may carry none, since ``ld.so --list`` never shows them and nothing could record them.
PATH_TAGS = {0x6FFFFEFC: "AUDIT", 0x6FFFFEFB: "DEPAUDIT", 0x7FFFFFFD: "AUXILIARY", 0x7FFFFFFF: "FILTER"}


class ElfError(ValueError):
    """The file starts as ELF but cannot be read as a 64-bit little-endian one."""


@dataclass(frozen=True, slots=True)
class SearchPath:
    """One ``DT_RPATH`` or ``DT_RUNPATH`` string: its tag name, file offset and value."""

    tag: str
    offset: int
    value: str


@dataclass(frozen=True, slots=True)
class ElfInfo:
    interpreter: str | None
    needed: tuple[str, ...]
    search: tuple[SearchPath, ...]
    #: ``(tag name, value)`` of every :data:`PATH_TAGS` entry.
    loads: tuple[tuple[str, str], ...] = ()


def is_elf(head: bytes) -> bool:
    return head[:4] == ELF_MAGIC


def read_elf(data: bytes) -> ElfInfo:
    """Parse the loader, the needed sonames and the search paths of an ELF image (pure).

    Raises:
        ElfError: not a 64-bit little-endian ELF file, or a header or table out of bounds.
    """
    if not is_elf(data) or len(data) < 64:
        raise ElfError("not an ELF file")
    if data[4] != 2 or data[5] != 1:
        raise ElfError("only 64-bit little-endian ELF files are supported")
    phoff, = struct.unpack_from("<Q", data, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
    if phnum == 0:  # a relocatable object (.o): nothing the loader maps
        return ElfInfo(None, (), ())
    if phentsize < 56 or phoff + phnum * phentsize > len(data):
        raise ElfError("the program header table is out of bounds")
    loads: list[tuple[int, int, int]] = []
    dynamic: tuple[int, int] | None = None
    interpreter = None
    seen_interp = seen_dynamic = 0
    for i in range(phnum):
        p_type, _flags, p_offset, p_vaddr, _paddr, p_filesz = struct.unpack_from("<IIQQQQ", data, phoff + i * phentsize)
        # Only the segments read here must lie in the file (the loader ignores the offset of
        # others, PT_GNU_STACK's say): a file the loader maps is never one this reader gives up on.
        if p_type in (_PT_LOAD, _PT_DYNAMIC, _PT_INTERP) and p_offset + p_filesz > len(data):
            raise ElfError("a segment is out of bounds")
        if p_type == _PT_LOAD:
            loads.append((p_vaddr, p_filesz, p_offset))
        elif p_type == _PT_DYNAMIC:
            seen_dynamic += 1
            dynamic = (p_vaddr, p_filesz)
        elif p_type == _PT_INTERP:
            seen_interp += 1
            interpreter = data[p_offset:p_offset + p_filesz].split(b"\0", 1)[0].decode("utf-8", "surrogateescape")
    # The kernel takes the first PT_INTERP and the loader one PT_DYNAMIC: a second of either means
    # two readers could see two files, so none is trusted.
    if seen_interp > 1 or seen_dynamic > 1:
        raise ElfError("more than one program loader or dynamic segment")
    if dynamic is None:
        return ElfInfo(interpreter, (), ())

    def mapped(vaddr: int) -> tuple[int, int] | None:  # (file offset, end of that segment's file bytes)
        return next(((vaddr - v + off, off + sz) for v, sz, off in loads if v <= vaddr < v + sz), None)

    # Read as the loader does: at the segment's address (not its file offset), up to DT_NULL
    # (past the segment's file size, memory is zero: the end).
    where = mapped(dynamic[0])
    if where is None:
        raise ElfError("the dynamic segment lies in no loaded segment")
    entries: list[tuple[int, int]] = []
    for off in range(where[0], where[1] - 15, 16):
        tag, val = struct.unpack_from("<qQ", data, off)
        if tag == _DT_NULL:
            break
        entries.append((tag, val))
    strtab = next((v for t, v in entries if t == _DT_STRTAB), None)
    if strtab is None:
        raise ElfError("the dynamic section has no string table")
    at = mapped(strtab)
    if at is None:
        raise ElfError("the string table lies in no loaded segment")
    base = at[0]

    def string(at: int) -> tuple[int, str]:
        pos = base + at
        end = data.find(b"\0", pos)
        if pos >= len(data) or end < 0:
            raise ElfError("a dynamic string is out of bounds")
        return pos, data[pos:end].decode("utf-8", "surrogateescape")

    needed = tuple(string(v)[1] for t, v in entries if t == _DT_NEEDED)
    search = tuple(SearchPath(SEARCH_TAGS[t], *string(v)) for t, v in entries if t in SEARCH_TAGS)
    extra = tuple((PATH_TAGS[t], string(v)[1]) for t, v in entries if t in PATH_TAGS)
    return ElfInfo(interpreter, needed, search, extra)


def rewrite_search_path(data: bytearray, entry: SearchPath, new: str) -> None:
    """Replace ``entry``'s string in ``data`` by ``new`` in place, NUL-padded to the old length.

    Raises:
        ElfError: ``new`` is longer than the string it replaces.
    """
    raw = new.encode()
    old = len(entry.value.encode("utf-8", "surrogateescape"))
    if len(raw) > old:
        raise ElfError(f"{new!r} does not fit where {entry.tag} {entry.value!r} is ({old} bytes)")
    data[entry.offset:entry.offset + old] = raw + b"\0" * (old - len(raw))


def origin_relative(file_rel: str, target_rel: str) -> str:
    """``$ORIGIN``-relative spelling of ``target_rel`` seen from the file at ``file_rel`` (both image-relative)."""
    rel = posixpath.relpath(target_rel, posixpath.dirname(file_rel) or ".")
    return "$ORIGIN" if rel == "." else f"$ORIGIN/{rel}"


def search_path_problem(file_rel: str, value: str) -> str | None:
    """Why a search path of the image file ``file_rel`` may reach outside the image, or None (pure).

    Every ``:``-separated entry must be ``$ORIGIN`` (or ``${ORIGIN}``) followed by a path that
    stays inside the image; an absolute, empty (the working directory) or other entry is refused.
    """
    for part in value.split(":"):
        for spelling in ("${ORIGIN}", "$ORIGIN"):
            if part == spelling or part.startswith(spelling + "/"):
                rest = part[len(spelling):].lstrip("/")
                joined = posixpath.normpath(posixpath.join(posixpath.dirname(file_rel), rest))
                if joined == ".." or joined.startswith("../") or posixpath.isabs(joined):
                    return f"the entry {part!r} leads outside the image"
                break
        else:
            return f"the entry {part!r} is not relative to the file ($ORIGIN): the loader would search the host there"
    return None


@dataclass(frozen=True, slots=True)
class Resolved:
    """What the loader resolved for one file: each soname's path, or None where it found none."""

    libraries: tuple[tuple[str, str | None], ...]


def loader_list(loader: str, path: str, *, timeout: float = 30) -> Resolved:
    """Ask the system's loader which libraries ``path`` loads (``LOADER --list PATH``, no code of the file runs).

    The loader is the interpreter's own ``PT_INTERP``; it resolves each ``DT_NEEDED`` exactly as
    it would at run time (search paths, cache, default directories) and prints it.

    Raises:
        ElfError: the loader cannot be run or does not answer in the expected form.
    """
    try:
        proc = subprocess.run([loader, "--list", path], capture_output=True, timeout=timeout, env={"PATH": "/usr/bin:/bin"},
                              cwd="/", stdin=subprocess.DEVNULL, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise ElfError(f"cannot run the loader {loader}: {e}") from e
    if proc.returncode != 0:
        raise ElfError(f"{loader} --list {path} exited {proc.returncode}: "
                       + proc.stderr.decode("utf-8", "replace").strip()[-300:])
    out: list[tuple[str, str | None]] = []
    for raw in proc.stdout.decode("utf-8", "surrogateescape").splitlines():
        line = raw.strip()
        if not line or line.startswith(("linux-vdso.so", "linux-gate.so")) or line.startswith("statically linked"):
            continue
        name, arrow, rest = line.partition(" => ")
        if arrow:
            where = rest.rsplit(" (", 1)[0].strip()
            out.append((name, None if where == "not found" else where))
        else:  # the loader itself, or a NEEDED given as an absolute path
            where = line.rsplit(" (", 1)[0].strip()
            if not os.path.isabs(where):
                raise ElfError(f"{loader} --list answered {line[:200]!r}")
            out.append((where, where))
    return Resolved(tuple(out))


__all__ = [
    "ELF_MAGIC",
    "ElfError",
    "ElfInfo",
    "Resolved",
    "SearchPath",
    "is_elf",
    "loader_list",
    "origin_relative",
    "read_elf",
    "rewrite_search_path",
    "search_path_problem",
]
