"""Second attack review of the interpreter closure (71135f9, b092417): ELF files whose search path the loader sees and
attest's reader does not.

The claim (docs/build.md "The interpreter closure"): every ELF file of the image must search only inside it, an
absolute search-path entry fails the build (UNSAFE_STEP_OUTPUT). ``attest.builder._elf.read_elf`` reads the dynamic
section from the *file*, at PT_DYNAMIC's ``p_offset``, for ``p_filesz`` bytes. glibc's loader reads it from *memory*,
at PT_DYNAMIC's ``p_vaddr`` (mapped by a PT_LOAD), up to DT_NULL, whatever ``p_filesz`` says. Any ELF file where the
two differ hides its DT_RUNPATH from attest. Each test builds a real runtime whose locked ``libdep`` wheel carries one
such extension, then (when the build accepts it) plants the soname in the hidden directory, runs the image through
``attest exec`` and shows the planted code running. Each asserts the secure behaviour, so it fails while the attack
works. They need gcc to make the ELF files.
"""

from __future__ import annotations

import struct
import subprocess
from pathlib import Path

import pytest
from support.build import Project
from test_attack_closure_review import _EVIL_LIB, _EVIL_LOADER, _build, _gcc, _lock_with, needs_gcc

from attest.builder._elf import ElfError, read_elf
from attest.errors import AttestError
from attest.freeze import run_from_images

_PT_LOAD, _PT_DYNAMIC = 1, 2
_SEARCH = (15, 29)  # DT_RPATH, DT_RUNPATH


def _phdrs(out: bytearray) -> list[tuple[int, tuple[int, ...]]]:
    phoff, = struct.unpack_from("<Q", out, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", out, 0x36)
    return [(phoff + i * phentsize, struct.unpack_from("<IIQQQQQQ", out, phoff + i * phentsize)) for i in range(phnum)]


def _dynamic(out: bytearray) -> tuple[int, int, int]:
    """(its program header's offset, p_offset, p_filesz) of PT_DYNAMIC."""
    at, ph = next((at, ph) for at, ph in _phdrs(out) if ph[0] == _PT_DYNAMIC)
    return at, ph[2], ph[5]


def _entries(out: bytearray, start: int, size: int) -> list[tuple[int, int]]:
    found = []
    for off in range(start, start + size, 16):
        tag, val = struct.unpack_from("<qQ", out, off)
        if tag == 0:
            break
        found.append((tag, val))
    return found


def hide_past_filesz(data: bytes) -> bytes:
    """Move DT_RUNPATH last (the order of dynamic entries means nothing to the loader) and shrink PT_DYNAMIC's
    ``p_filesz`` to end just before it: attest reads ``p_filesz`` bytes, the loader reads on to DT_NULL."""
    out = bytearray(data)
    at, start, size = _dynamic(out)
    ents = _entries(out, start, size)
    rest, search = [e for e in ents if e[0] not in _SEARCH], [e for e in ents if e[0] in _SEARCH]
    assert search, "no search path to hide"
    for j, (tag, val) in enumerate([*rest, *search, (0, 0)]):
        struct.pack_into("<qQ", out, start + 16 * j, tag, val)
    struct.pack_into("<Q", out, at + 32, 16 * len(rest))  # p_filesz
    return bytes(out)


def hide_behind_p_offset(data: bytes) -> bytes:
    """Append a copy of the dynamic section without its DT_RUNPATH and point PT_DYNAMIC's ``p_offset`` (only) at it:
    attest reads the copy, the loader still reads the mapped original at ``p_vaddr``."""
    out = bytearray(data)
    at, start, size = _dynamic(out)
    ents = [e for e in _entries(out, start, size) if e[0] not in _SEARCH]
    while len(out) % 16:
        out.append(0)
    copy_at = len(out)
    for tag, val in [*ents, (0, 0)]:
        out += struct.pack("<qQ", tag, val)
    struct.pack_into("<Q", out, at + 8, copy_at)  # p_offset
    struct.pack_into("<Q", out, at + 32, 16 * (len(ents) + 1))  # p_filesz (still within the file)
    return bytes(out)


@needs_gcc
@pytest.mark.parametrize("hide", [hide_past_filesz, hide_behind_p_offset], ids=["past-p_filesz", "p_offset-not-p_vaddr"])
def test_attack_a_runpath_the_loader_reads_and_attests_elf_reader_does_not(project: Project, tmp_path: Path, hide) -> None:  # type: ignore[no-untyped-def]
    """An extension whose DT_RUNPATH is an absolute host directory, hidden from read_elf only: host_closure sees no search
    path, `ld.so --list` (the directory not there yet) resolves the soname in /lib and records that. Afterwards whoever
    can write that directory (here: any user; in practice a path the wheel's author chose) plants the soname there and
    the image's interpreter loads it at import, though the image is re-verified and every recorded host library
    re-hashed."""
    work = tmp_path / "elf"
    work.mkdir()
    evil_dir = tmp_path / "anyone-can-write-here"
    mark = tmp_path / "planted-ran"
    native = _gcc(work, "native.so", "int libdep_native(void) { return 42; }\n", "-shared", "-fPIC", "-Wl,--no-as-needed",
                  f"-Wl,-rpath,{evil_dir}", "-lanl")
    data = hide(native.read_bytes())
    # The reader now reads the dynamic section at its address up to DT_NULL, as the loader does: it sees the RUNPATH.
    assert [e.value for e in read_elf(data).search] == [str(evil_dir)]
    # The loader still honours it (checked on the host, before any build).
    (work / "hidden.so").write_bytes(data)
    evil_dir.mkdir()
    _gcc(evil_dir, "libanl.so.1", _EVIL_LIB, "-shared", "-fPIC", f"-DMARK=\"{work / 'probe'}\"")
    listed = subprocess.run(["/lib64/ld-linux-x86-64.so.2", "--list", str(work / "hidden.so")], capture_output=True, text=True,
                            check=False).stdout
    assert f"{evil_dir}/libanl.so.1" in listed, listed
    for p in evil_dir.iterdir():
        p.unlink()
    evil_dir.rmdir()

    _lock_with(project, {"libdep/_native.so": data})
    built = _build(project)
    if isinstance(built, AttestError):
        # refused: the secure outcome (a search path attest cannot vouch for), never a failure for another reason
        assert str(built.code) == "UNSAFE_STEP_OUTPUT", built
        return
    # Accepted. After the build, someone plants the soname in the directory the hidden RUNPATH names.
    evil_dir.mkdir(mode=0o777)
    _gcc(evil_dir, "libanl.so.1", _EVIL_LIB, "-shared", "-fPIC", f"-DMARK=\"{mark}\"")
    image = built.inventory.identity  # type: ignore[attr-defined]
    try:
        rc: object = run_from_images(str(project.store), {"RUNTIME": image},
                                     ["$ATTEST_IMAGE_RUNTIME/bin/python", "-I", "-c", "import libdep._native"])
    except AttestError as e:
        rc = e
    pytest.fail(f"the build accepted an extension whose loader-visible RUNPATH is {evil_dir} (outside the image), and attest "
                f"exec ran the image (rc {rc}); planted library ran: {mark.exists()}")


def two_program_loaders(data: bytes, first: str) -> bytes:
    """``data`` with two PT_INTERP headers: ``first`` (appended to the file), then the original one (a PT_NOTE after it
    becomes its copy). The kernel starts the program through the first PT_INTERP; attest's reader keeps the last."""
    out = bytearray(data)
    phoff, = struct.unpack_from("<Q", out, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", out, 0x36)
    hdrs = [phoff + i * phentsize for i in range(phnum)]
    types = [struct.unpack_from("<I", out, at)[0] for at in hdrs]
    real = hdrs[types.index(3)]
    spare = next(at for at, t in zip(hdrs, types, strict=True) if t == 4 and at > real)  # PT_NOTE: nothing the kernel or loader needs
    out[spare:spare + phentsize] = out[real:real + phentsize]
    raw = first.encode() + b"\0"
    at = len(out)
    out += raw
    struct.pack_into("<QQQQQ", out, real + 8, at, 0, 0, len(raw), len(raw))  # p_offset, p_vaddr, p_paddr, p_filesz, p_memsz
    return bytes(out)


@needs_gcc
def test_attack_an_executable_with_two_program_loaders_the_kernel_uses_the_first(project: Project, tmp_path: Path) -> None:
    """71135f9 refuses an executable whose PT_INTERP is not the interpreter's own loader; read_elf keeps the *last*
    PT_INTERP, the kernel (fs/binfmt_elf.c) uses the *first*. An executable of the image with the foreign loader first
    and the system's second is accepted; `ld.so --list` answers with its own loader; the kernel starts it through the
    foreign file, which nothing records or re-hashes."""
    work = tmp_path / "elf"
    work.mkdir()
    loader = tmp_path / "anyone-can-write-here" / "ld.so"
    mark = tmp_path / "planted-ran"
    helper = _gcc(work, "helper", "int main(void) { return 0; }\n")
    data = two_program_loaders(helper.read_bytes(), str(loader))
    with pytest.raises(ElfError):  # two program loaders: the reader now refuses to pick one (the build refuses the file)
        read_elf(data)
    _lock_with(project, {"libdep-1.2.data/scripts/libdep-helper": data})
    built = _build(project)
    if isinstance(built, AttestError):
        assert str(built.code) == "UNSAFE_STEP_OUTPUT", built  # refused: a program loader attest cannot vouch for
        return
    loader.parent.mkdir(mode=0o777)
    _gcc(loader.parent, "ld.so", _EVIL_LOADER, "-static-pie", "-nostdlib", "-fPIE", "-O1", f"-DMARK=\"{mark}\"")
    image = built.inventory.identity  # type: ignore[attr-defined]
    try:
        rc: object = run_from_images(str(project.store), {"RUNTIME": image}, ["$ATTEST_IMAGE_RUNTIME/bin/libdep-helper"])
    except AttestError as e:
        rc = e
    pytest.fail(f"the build accepted an executable whose first PT_INTERP is {loader} (outside the image, never recorded), "
                f"and attest exec ran it (rc {rc}); planted loader ran: {mark.exists()}")


# -- dynamic tags attest's reader never looks at ---------------------------------------------------------------------------

@needs_gcc
def test_attack_an_extension_with_an_auxiliary_filtee_outside_the_image(project: Project, tmp_path: Path) -> None:
    """DT_AUXILIARY (``ld -f PATH``): glibc maps the named object with the library that names it, and runs its
    constructors; an absent one is silently skipped. read_elf knows only DT_NEEDED, DT_RPATH and DT_RUNPATH: the
    extension below has no DT_NEEDED, so host_closure does not even ask the loader about it (`ld.so --list` would say
    "statically linked" anyway). Nothing outside the image is recorded; planted afterwards, the filtee runs at import."""
    work = tmp_path / "elf"
    work.mkdir()
    evil_dir = tmp_path / "anyone-can-write-here"
    mark = tmp_path / "planted-ran"
    native = _gcc(work, "native.so", "int libdep_native(void) { return 42; }\n", "-shared", "-fPIC",
                  f"-Wl,-f,{evil_dir}/libaux.so")
    info = read_elf(native.read_bytes())
    assert info.search == () and all(str(evil_dir) not in n for n in info.needed)  # invisible to attest's reader
    _lock_with(project, {"libdep/_native.so": native.read_bytes()})
    built = _build(project)
    if isinstance(built, AttestError):
        assert str(built.code) == "UNSAFE_STEP_OUTPUT", built  # refused: an object loaded from outside the image
        return
    evil_dir.mkdir(mode=0o777)
    _gcc(evil_dir, "libaux.so", _EVIL_LIB, "-shared", "-fPIC", f"-DMARK=\"{mark}\"")
    image = built.inventory.identity  # type: ignore[attr-defined]
    try:
        rc: object = run_from_images(str(project.store), {"RUNTIME": image},
                                     ["$ATTEST_IMAGE_RUNTIME/bin/python", "-I", "-c", "import libdep._native"])
    except AttestError as e:
        rc = e
    pytest.fail(f"the build accepted an extension whose DT_AUXILIARY is {evil_dir}/libaux.so (outside the image, never "
                f"recorded), and attest exec ran the image (rc {rc}); planted filtee ran: {mark.exists()}")


@needs_gcc
def test_attack_an_executable_with_an_audit_library_outside_the_image(project: Project, tmp_path: Path) -> None:
    """DT_AUDIT (``ld --audit PATH``) of a program: glibc (2.32+) loads the named audit module before the program, runs
    its constructor and its la_version; an absent one is only a warning. read_elf ignores the tag, `ld.so --list`
    does not show the module: nothing outside the image is recorded; planted afterwards, it runs in every start."""
    work = tmp_path / "elf"
    work.mkdir()
    evil_dir = tmp_path / "anyone-can-write-here"
    mark = tmp_path / "planted-ran"
    helper = _gcc(work, "helper", "int main(void) { return 0; }\n", f"-Wl,--audit,{evil_dir}/libaudit.so")
    _lock_with(project, {"libdep-1.2.data/scripts/libdep-helper": helper.read_bytes()})
    built = _build(project)
    if isinstance(built, AttestError):
        assert str(built.code) == "UNSAFE_STEP_OUTPUT", built  # refused: an object loaded from outside the image
        return
    evil_dir.mkdir(mode=0o777)
    _gcc(evil_dir, "libaudit.so", _EVIL_LIB + "unsigned int la_version(unsigned int v) { return v; }\n", "-shared", "-fPIC",
         f"-DMARK=\"{mark}\"")
    image = built.inventory.identity  # type: ignore[attr-defined]
    try:
        rc: object = run_from_images(str(project.store), {"RUNTIME": image}, ["$ATTEST_IMAGE_RUNTIME/bin/libdep-helper"])
    except AttestError as e:
        rc = e
    pytest.fail(f"the build accepted an executable whose DT_AUDIT is {evil_dir}/libaudit.so (outside the image, never "
                f"recorded), and attest exec ran it (rc {rc}); planted audit module ran: {mark.exists()}")
