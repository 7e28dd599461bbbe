"""The runtime image carries its whole interpreter, and runs nothing else of the host's Python.

The attack it answers: with a venv-shaped image (``pyvenv.cfg`` -> the host prefix) the image's
interpreter loaded the standard library from the host, so a ``sitecustomize.py`` planted in the
pinned interpreter's stdlib ran inside ``$RUNTIME/bin/attest policy check``. Now:

- the image holds ``bin/python`` (search path rewritten to ``$ORIGIN/../lib``), ``lib/libpython*``
  and the standard library; its interpreter's prefix is the image;
- every file the image's interpreter opens while ``bin/attest policy check`` runs (strace) is
  inside a verified image, on the image's attested host-library list, or glibc's own data
  (the loader cache, locale data);
- a stdlib module and a ``.pth`` planted in the host interpreter, and a swapped host library,
  are never run: the planted files are simply not read, and the swapped library makes
  ``attest exec`` and step 6's runner refuse (``HOST_LIBRARY_CHANGED``) before anything starts.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from support.build import registry_reachable
from support.gitrepo import git
from support.project_runtime import project_runtime

from attest.builder._elf import ElfError, SearchPath, origin_relative, read_elf, rewrite_search_path, search_path_problem
from attest.freeze import Store
from attest.freeze._codes import FreezeCode
from attest.freeze._hostlibs import HostLibrary, decide_host_libraries, parse_host_libraries

ROOT = Path(__file__).resolve().parents[2]
HEX = "a" * 64


# --- pure decisions ---------------------------------------------------------------------------


@pytest.mark.parametrize(("file_rel", "value", "ok"), [
    ("bin/python", "$ORIGIN/../lib", True),
    ("bin/python", "${ORIGIN}/../lib", True),
    ("lib/libpython3.11.so.1.0", "$ORIGIN", True),
    ("lib/python3.11/lib-dynload/_ssl.so", "$ORIGIN/../..", True),
    ("lib/python3.11/site-packages/cffi.libs/x.so", "$ORIGIN/../../../../..", False),  # one above the image
    ("bin/python", "/root/.pyenv/versions/3.11.7/lib", False),
    ("bin/python", "$ORIGIN/../lib:/opt/lib", False),
    ("bin/python", "", False),   # an empty entry is the working directory
    ("bin/python", "lib", False),  # relative to the working directory
    ("bin/python", "$ORIGINAL/lib", False),
])
def test_search_path_problem(file_rel: str, value: str, ok: bool) -> None:
    assert (search_path_problem(file_rel, value) is None) is ok


@pytest.mark.parametrize(("file_rel", "want"), [
    ("bin/python", "$ORIGIN/../lib"), ("lib/libpython3.11.so.1.0", "$ORIGIN"),
    ("lib/python3.11/lib-dynload/_ssl.so", "$ORIGIN/../.."),
])
def test_origin_relative(file_rel: str, want: str) -> None:
    assert origin_relative(file_rel, "lib") == want


@pytest.mark.parametrize(("doc", "problem"), [
    ({"image": {"host_libraries": []}}, None),
    ({"image": {"host_libraries": [{"path": "/lib/libc.so.6", "sha256": HEX}]}}, None),
    ({}, "not a list"),
    ({"image": {"host_libraries": [{"path": "lib/libc.so.6", "sha256": HEX}]}}, "absolute"),
    ({"image": {"host_libraries": [{"path": "/lib/../etc/x", "sha256": HEX}]}}, "absolute, normal"),
    ({"image": {"host_libraries": [{"path": "/lib/libc.so.6", "sha256": "A" * 64}]}}, "hex"),
    ({"image": {"host_libraries": [{"path": "/lib/libc.so.6", "sha256": HEX, "x": 1}]}}, "exactly"),
    ({"image": {"host_libraries": [{"path": "/l", "sha256": HEX}, {"path": "/l", "sha256": HEX}]}}, "twice"),
])
def test_parse_host_libraries(doc: object, problem: str | None) -> None:
    libs, why = parse_host_libraries(doc)
    assert (why is None) is (problem is None)
    if problem is not None:
        assert problem in str(why) and libs == ()


def test_decide_host_libraries() -> None:
    declared = (HostLibrary("/lib/a.so", HEX), HostLibrary("/lib/b.so", HEX), HostLibrary("/lib/c.so", HEX))
    found = decide_host_libraries(declared, {"/lib/a.so": HEX, "/lib/b.so": "b" * 64, "/lib/c.so": "cannot be opened (No such file)"},
                                  image="IMG")
    assert [(f.code, f.path) for f in found] == [(FreezeCode.HOST_LIBRARY_CHANGED, "/lib/b.so"),
                                                 (FreezeCode.HOST_LIBRARY_CHANGED, "/lib/c.so")]
    assert "it cannot be opened" in found[1].detail
    assert decide_host_libraries(declared[:1], {"/lib/a.so": HEX}, image="IMG") == []


@pytest.mark.parametrize(("make", "problem"), [
    (lambda d: (d / "lib.so").write_bytes(b"x"), None),
    (lambda d: ((d / "lib.so").write_bytes(b"x"), (d / "lib.so").chmod(0o666)), "writable by group or others"),
    (lambda d: ((d / "sub").mkdir(), (d / "sub").chmod(0o777), (d / "sub" / "x").write_bytes(b"x"),
                (d / "lib.so").symlink_to("sub/x")), "writable by group or others"),
    (lambda d: ((d / "t").write_bytes(b"x"), (d / "lib.so").symlink_to(d / "t")), None),
    (lambda d: (d / "lib.so").symlink_to("lib.so"), "too many links"),
    (lambda d: None, "cannot be checked"),
])
def test_host_path_problem(tmp_path: Path, make: object, problem: str | None) -> None:
    import tempfile

    from attest.freeze._hostlibs import host_path_problem

    # The judgement starts at /: a directory whose every ancestor is root's (or ours) and writable by no one else.
    base = next((c for c in (Path("/run"), ROOT.parent, ROOT) if host_path_problem(str(c)) is None and os.access(c, os.W_OK)), None)
    if base is None:
        pytest.skip("no writable directory here whose ancestors no other user can write (/tmp is anyone's)")
    d = Path(tempfile.mkdtemp(prefix="attest-hostpath-", dir=base))
    try:
        d.chmod(0o755)
        make(d)  # type: ignore[operator]
        got = host_path_problem(str(d / "lib.so"))
    finally:
        shutil.rmtree(d)
    assert host_path_problem(str(tmp_path / "x")) is not None  # under the sticky, world-writable /tmp: anyone may create a name
    assert (got is None) is (problem is None) and (problem is None or problem in str(got)), got


def test_the_search_path_of_a_real_binary_is_rewritten_in_place() -> None:
    data = Path(os.path.realpath(sys.executable)).read_bytes()
    info = read_elf(data)
    if not info.search:
        pytest.skip(f"{sys.executable} has no RPATH/RUNPATH to rewrite")
    out = bytearray(data)
    rewrite_search_path(out, info.search[0], "$ORIGIN/../lib")
    again = read_elf(bytes(out))
    assert len(out) == len(data) and again.search[0].value == "$ORIGIN/../lib" and again.needed == info.needed
    with pytest.raises(ElfError):
        rewrite_search_path(out, SearchPath("RUNPATH", info.search[0].offset, "x"), "$ORIGIN/../lib")


@pytest.mark.parametrize("content", [b"\x7fELF" + b"\0" * 100, b"\x7fELF\x01\x01" + b"\0" * 100,
                                     b"\x7fELF\x02\x01" + b"\xff" * 100])
def test_an_elf_file_the_reader_cannot_read_is_refused_not_skipped(tmp_path: Path, content: bytes) -> None:
    from attest.builder import BuildCode
    from attest.builder._closure import host_closure
    from attest.errors import VerificationError

    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "odd.so").write_bytes(content)
    with pytest.raises(VerificationError) as ei:
        host_closure(str(tmp_path), loader="/lib64/ld-linux-x86-64.so.2")
    assert ei.value.code == BuildCode.UNSAFE_STEP_OUTPUT and "cannot read" in str(ei.value)


def test_read_elf_refuses_what_it_cannot_read() -> None:
    with pytest.raises(ElfError):
        read_elf(b"not elf")
    with pytest.raises(ElfError):
        read_elf(b"\x7fELF\x01\x01" + b"\0" * 60)  # 32-bit


# --- the real runtime -------------------------------------------------------------------------


@dataclass(frozen=True)
class Built:
    state: Path
    runtime: object  # attest.freeze.Image
    base: object     # attest.review.bootstrap.BaseSnapshot
    manifest: dict


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Built]:
    from attest.git import GitRepo
    from attest.policy import generate_policy
    from attest.review.bootstrap import snapshot_base

    if not registry_reachable():
        pytest.skip("the package registry is unreachable")
    tmp = tmp_path_factory.mktemp("closure")
    shared = project_runtime(tmp_path_factory)  # the session's one build of HEAD (support.project_runtime), verified and reused
    result = shared.build()
    sha, state = shared.sha, shared.state
    consumer = tmp / "consumer"
    consumer.mkdir()
    git(consumer, "init", "-q")
    (consumer / "policy/core").mkdir(parents=True)
    (consumer / "policy/core/evidence.md").write_bytes(b"# Evidence\n")
    (consumer / ".agent-policy.yml").write_text(
        f"schema: 2\ntoolchain:\n  repository: https://github.com/attest-dev/attest\n  revision: {sha}\nskills:\n  enabled: [pr-review]\n"
        "contexts:\n  review:\n    modules: [policy/core/evidence.md]\n"
        "outputs:\n  - {path: docs/review/policy-context.md, renderer: policy-context-md, context: review, enabled: true}\n")
    generate_policy(consumer)
    git(consumer, "add", "-A")
    git(consumer, "commit", "-qm", "base")
    from support.caps import BACKEND

    with GitRepo.open(consumer) as repo:
        base = snapshot_base(repo, git(consumer, "rev-parse", "HEAD"), str(state), backend=BACKEND)
    image = Store(state).get(result.inventory.identity)
    manifest = json.loads((Path(image.path) / "attest-runtime.json").read_text())
    yield Built(state, image, base, manifest)


def test_the_image_is_a_whole_prefix(built: Built) -> None:
    root = Path(built.runtime.path)  # type: ignore[attr-defined]
    tag = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    assert not (root / "pyvenv.cfg").exists()
    assert (root / "lib" / tag / "os.py").is_file() and (root / "lib" / tag / "lib-dynload").is_dir()
    assert not (root / "lib" / tag / "test").exists()
    info = read_elf((root / "bin" / "python").read_bytes())
    assert all(search_path_problem("bin/python", s.value) is None for s in info.search)
    image = built.manifest["image"]
    assert image["stdlib"] == f"lib/{tag}"
    paths = {lib["path"] for lib in image["host_libraries"]}
    assert any(os.path.basename(p).startswith("libc.so") for p in paths), paths
    assert read_elf((root / "bin" / "python").read_bytes()).interpreter in paths
    # Started directly (no launcher, no environment), it runs from the image.
    out = subprocess.run([str(root / "bin" / "python"), "-I", "-B", "-c", "import os, sys; print(sys.prefix); print(os.__file__)"],
                         capture_output=True, text=True, env={}, check=True).stdout.split()
    assert [os.path.realpath(p) for p in out] == [os.path.realpath(root), os.path.realpath(root / "lib" / tag / "os.py")]


# The system's own data and configuration the C library and libcrypto read (the loader's cache,
# locale and time-zone data, OpenSSL's configuration), root-owned like the libraries themselves
# (docs/build.md "The interpreter closure" lists them), and the kernel's /proc and /dev.
SYSTEM_DATA = ("/etc/ld.so.cache", "/usr/lib/locale/", "/usr/share/locale/locale.alias", "/usr/share/zoneinfo/",
               "/usr/lib/x86_64-linux-gnu/gconv/gconv-modules", "/usr/lib/aarch64-linux-gnu/gconv/gconv-modules",
               "/usr/lib/ssl/openssl.cnf", "/proc/", "/dev/")
_CALL = re.compile(r'^(\d+)\s+(execve|openat|open|openat2)\((?:AT_FDCWD, |\d+, )?"([^"]*)".*?= (-?\d+)')


@pytest.mark.skipif(shutil.which("strace") is None, reason="strace is not installed (Debian's strace package)")
def test_every_file_the_policy_check_opens_is_verified_or_attested(built: Built, tmp_path: Path) -> None:
    from attest.freeze import run_from_images

    trace = tmp_path / "trace"
    runtime, base = built.runtime, built.base.image  # type: ignore[attr-defined]
    fd = os.open(tmp_path / "out.json", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        rc = run_from_images(str(built.state), {"RUNTIME": runtime, "BASE": base},
                             [shutil.which("strace") or "strace", "-f", "-qq", "-e", "trace=execve,open,openat,openat2", "-o", str(trace),
                              f"{runtime.path}/bin/attest", "policy", "check", "--root", base.path, "--json"],  # type: ignore[attr-defined]
                             cwd_image="BASE", stdout=fd)
    finally:
        os.close(fd)
    report = json.loads((tmp_path / "out.json").read_text())
    assert rc == 0 and report["ok"] is True, report
    allowed_libs = {p for lib in built.manifest["image"]["host_libraries"] for p in (lib["path"], os.path.realpath(lib["path"]))}
    inside = [os.path.realpath(runtime.path), os.path.realpath(base.path), str(built.state / "runs")]  # type: ignore[attr-defined]
    foreign: set[str] = set()
    opened: list[tuple[str, str, int]] = []
    for line in trace.read_text().splitlines():
        m = _CALL.match(line)
        if m is None:
            continue
        pid, call, path, ret = m.group(1), m.group(2), m.group(3), int(m.group(4))
        if call == "execve":
            if ret == 0 and not os.path.realpath(path).startswith(inside[0] + "/"):
                foreign.add(pid)  # a program that is not the image's (git): not the interpreter under test
            continue
        opened.append((pid, path, ret))
    assert opened, "strace recorded no open"
    # The host interpreter's standard library (its prefix may be /usr itself, as Debian's is).
    host_python = {os.path.realpath(os.path.dirname(os.__file__))}
    bad = []
    for pid, path, ret in opened:
        if pid in foreign:
            continue
        real = os.path.realpath(os.path.join(base.path, path))  # type: ignore[attr-defined]  # relative: the working directory, BASE
        if any(real == d or real.startswith(d + "/") for d in inside) or path in allowed_libs or real in allowed_libs:
            continue
        if (path.startswith(SYSTEM_DATA) and not path.endswith((".so", ".py", ".pyc", ".pth"))) or path == "/":
            continue
        bad.append((path, ret))
    assert bad == [], f"the image's interpreter opened (or looked for) files outside every verified image: {sorted(set(bad))[:20]}"
    assert not any(p.startswith(tuple(h + "/" for h in host_python)) for _, p, _ in opened if not p.startswith(inside[0]))


_PLANT = textwrap.dedent("""
    import os, sys
    with open({marker!r}, "a") as f:
        f.write("%s %s\\n" % ({what!r}, os.path.realpath(sys.prefix)))
""")

_IN_NAMESPACE = textwrap.dedent("""
    import json, subprocess, sys
    from types import SimpleNamespace
    spec = json.loads(sys.argv[1])
    for source, target in spec["binds"]:
        subprocess.run(["mount", "--bind", source, target], check=True)
    # The plant is live: an interpreter of the host (this venv's base) runs it.
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    from attest.errors import AttestError
    from attest.freeze import Store, run_from_images
    from attest.review.bootstrap import ImageCheckRunner
    state = spec["state"]
    out = {}
    try:
        out["exec"] = {"rc": run_from_images(state, {"RUNTIME": spec["runtime"]}, ["/bin/true"])}
    except AttestError as e:
        out["exec"] = {"codes": [f.code.value for f in e.findings]}
    try:
        store = Store(state)
        runtime, base = store.get(spec["runtime"]), store.get(spec["base"])
        run = ImageCheckRunner(state)(SimpleNamespace(path=runtime.path, image=runtime), SimpleNamespace(path=base.path, image=base))
        out["step6"] = {"rc": run.exit_code, "ok": json.loads(run.stdout or b"{}").get("ok") is True}
    except AttestError as e:
        out["step6"] = {"codes": [f.code.value for f in e.findings]}
    print(json.dumps(out))
""")


def _in_private_mounts(built: Built, binds: list[tuple[str, str]]) -> dict:
    spec = {"binds": binds, "state": str(built.state), "runtime": built.runtime.identity,  # type: ignore[attr-defined]
            "base": built.base.image.identity}  # type: ignore[attr-defined]
    proc = subprocess.run(["unshare", "--mount", "--propagation", "private", "--", sys.executable, "-c", _IN_NAMESPACE,
                           json.dumps(spec)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


needs_root_mounts = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None,
                                       reason="planting into the host's interpreter, privately, needs root's mount namespace")


@needs_root_mounts
def test_a_planted_stdlib_module_and_pth_are_never_run(built: Built, tmp_path: Path) -> None:
    interp = built.manifest["stdlib"]
    marker = tmp_path / "ran"
    planted = tmp_path / "stdlib"
    shutil.copytree(interp, planted, symlinks=True, ignore=shutil.ignore_patterns("site-packages", "dist-packages", "test", "__pycache__"))
    # Debian's sitecustomize.py is a link to /etc/python3.11/: written through, the plant was the host's own file.
    (planted / "sitecustomize.py").unlink(missing_ok=True)
    (planted / "sitecustomize.py").write_text(_PLANT.format(marker=str(marker), what="sitecustomize"))
    (planted / "site-packages").mkdir()
    (planted / "site-packages" / "00-planted.pth").write_text(
        f"import os, sys; open({str(marker)!r}, 'a').write('pth ' + os.path.realpath(sys.prefix) + '\\n')\n")
    got = _in_private_mounts(built, [(str(planted), interp)])
    assert got["exec"] == {"rc": 0} and got["step6"]["rc"] == 0 and got["step6"]["ok"], got
    image = os.path.realpath(built.runtime.path)  # type: ignore[attr-defined]
    ran = marker.read_text().splitlines() if marker.exists() else []
    assert ran, "the planted files did not run even in the host's own interpreter: the test proves nothing"
    assert not [line for line in ran if line.split()[-1].startswith(image)], ran


@needs_root_mounts
def test_a_swapped_host_library_is_refused_before_anything_runs(built: Built, tmp_path: Path) -> None:
    libs = [lib["path"] for lib in built.manifest["image"]["host_libraries"] if "libz.so" in lib["path"] or "libffi" in lib["path"]]
    if not libs:
        pytest.skip("the runtime records neither libz nor libffi")
    target = os.path.realpath(libs[0])
    swapped = tmp_path / os.path.basename(target)
    swapped.write_bytes(Path(target).read_bytes() + b"\0planted")
    got = _in_private_mounts(built, [(str(swapped), target)])
    assert got["exec"] == {"codes": [FreezeCode.HOST_LIBRARY_CHANGED.value]}, got
    assert got["step6"] == {"codes": [FreezeCode.HOST_LIBRARY_CHANGED.value]}, got
