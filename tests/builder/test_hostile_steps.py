"""A hostile toolchain commit attacks the host through its own build step.

The toolchain's build code (``build_hook.py``, run by the build backend as setuptools runs
``setup.py``) is the untrusted step the sandbox confines. Each test commits such code to a real
git repository and builds it. Before the fix the host wrote its task spec through a symlink the
step planted in staging (creating or truncating any file on the machine), consumed locked wheels
the step had rewritten, blocked on a FIFO the step left, and shared its uid (65534) with every
host process running as nobody, which could write into the running build through /proc/PID/cwd.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import tempfile
import textwrap
import threading
from pathlib import Path

import pytest
from support.build import Project, make_toolchain_repo, rewrite_wheel_hook, site_rel
from support.caps import needs_root

from attest.builder import BuildCode, Sandbox, build_runtime, fetch, load_lock, load_recipe
from attest.builder._outputs import take_output, take_single_file
from attest.builder._sandbox import STEP_UID_RANGE
from attest.errors import AttestError

ENV = {"PATH": "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1"}


@pytest.fixture(scope="module")
def sandbox() -> Sandbox:
    return Sandbox.establish(allow_unisolated_network=False)


def _hostile(project: Project, hook: str) -> str:
    """Commit ``hook`` as the toolchain's build code; the new revision."""
    return make_toolchain_repo(project.repo, build_hook=textwrap.dedent(hook))


def _build(project: Project, sandbox: Sandbox, sha: str, timeout: float = 300) -> object:
    """Build in a thread so a host that blocks fails the test instead of hanging the suite."""
    recipe = load_recipe(project.recipe)
    fetch(load_lock(recipe.lock_path), project.cache, lock_path=recipe.lock_path)
    outcome: list[object] = []

    def run() -> None:
        try:
            outcome.append(build_runtime(recipe, sha, str(project.store), str(project.cache), sandbox))
        except BaseException as e:  # noqa: BLE001 - handed to the test thread, which asserts on it
            outcome.append(e)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(timeout)
    assert not t.is_alive(), "the host blocked on what the build step left behind"
    return outcome[0]


def _report(result: object) -> dict[str, str]:
    """What the hook recorded about its attempts (it writes toolchain/_hostile.json into the wheel)."""
    assert not isinstance(result, BaseException), result
    path = Path(result.store_path) / site_rel() / "toolchain" / "_hostile.json"  # type: ignore[attr-defined]
    return dict(json.loads(path.read_text()))


_RECORD = """
import json, os
def record(results):
    with open(os.path.join("toolchain", "_hostile.json"), "w") as f:
        json.dump(results, f, sort_keys=True)
"""


def test_a_symlink_planted_in_staging_never_redirects_a_host_write(project: Project, sandbox: Sandbox, tmp_path: Path) -> None:
    victim = tmp_path / "victim.conf"  # stands for /etc/shadow, a root crontab, ...
    victim.write_text("original\n")
    absent = tmp_path / "created-by-attacker"
    sha = _hostile(project, _RECORD + f"""
staging = os.path.dirname(os.getcwd())
results = {{}}
for rel, target in (("spec-install.json", {str(victim)!r}), ("spec-install-dir.json", {str(absent)!r}),
                    ("spec/spec-install.json", {str(victim)!r}), ("inputs/toolchain-0.1-py3-none-any.whl", {str(victim)!r}),
                    ("out", {str(tmp_path)!r}), ("taken", {str(tmp_path)!r}), ("home-install", {str(tmp_path)!r})):
    try:
        os.symlink(target, os.path.join(staging, rel))
        results[rel] = "planted"
    except OSError as e:
        results[rel] = "refused"
record(results)
""")
    result = _build(project, sandbox, sha)
    assert victim.read_text() == "original\n", "the host wrote through a symlink the build step planted"
    assert not absent.exists()
    if sandbox.rootless:
        # The step runs as the caller, owner of the mount-point skeleton its sandbox made on a
        # private tmpfs: links land there and die with it. What must hold is asserted above:
        # the host wrote through none of them.
        assert set(_report(result).values()) <= {"refused", "planted"}, _report(result)
    else:
        assert set(_report(result).values()) == {"refused"}, _report(result)


def test_a_build_step_cannot_rewrite_the_locked_wheels_it_precedes(project: Project, sandbox: Sandbox) -> None:
    sha = _hostile(project, _RECORD + """
import glob
staging = os.path.dirname(os.getcwd())
results = {}
for wheel in glob.glob(os.path.join(staging, "*", "libdep-*.whl")) or [os.path.join(staging, "inputs", "libdep-1.2-py3-none-any.whl")]:
    rel = os.path.relpath(wheel, staging)
    try:
        with open(wheel, "r+b") as f:
            f.write(b"PK-tampered")
        results[rel] = "rewritten"
    except OSError:
        results[rel] = "refused"
    try:
        os.unlink(wheel)
        results[rel + " unlink"] = "removed"
    except OSError:
        results[rel + " unlink"] = "refused"
record(results)
""")
    result = _build(project, sandbox, sha)
    assert set(_report(result).values()) == {"refused"}, _report(result)
    root = Path(result.store_path)  # type: ignore[attr-defined]
    out = subprocess.run([root / "bin" / "libdep-hello"], capture_output=True, env=ENV, check=True)
    assert out.stdout == b"hello from libdep 42\n"


@pytest.mark.parametrize("swap", ["fifo", "symlink"])
def test_a_wheel_swapped_for_a_fifo_or_symlink_fails_without_blocking(project: Project, sandbox: Sandbox, swap: str) -> None:
    replace = 'os.mkfifo(path)' if swap == "fifo" else 'os.symlink("/etc/passwd", path)'
    sha = _hostile(project, f"""
import os
def after_wheel(path):
    os.unlink(path)
    {replace}
""")
    result = _build(project, sandbox, sha)
    assert isinstance(result, AttestError), result
    assert result.code == BuildCode.UNSAFE_STEP_OUTPUT


def test_step_output_with_a_link_fifo_or_hard_link_is_not_taken(tmp_path: Path) -> None:
    """take_output and take_single_file judge every entry from fstat; nothing blocks or is followed."""
    for planted in ("fifo", "symlink", "hardlink", "setuid"):
        step = tmp_path / f"step-{planted}"
        (step / "lib").mkdir(parents=True)
        (step / "lib" / "ok.py").write_bytes(b"X = 1\n")
        bad = step / "lib" / "bad"
        if planted == "fifo":
            os.mkfifo(bad)
        elif planted == "symlink":
            os.symlink("/etc/passwd", bad)
        elif planted == "hardlink":
            os.link(step / "lib" / "ok.py", bad)
        else:
            bad.write_bytes(b"#!/bin/sh\n")
            os.chmod(bad, 0o4755)
        with pytest.raises(AttestError) as ei:
            take_output(str(step), str(tmp_path / f"taken-{planted}"))
        assert ei.value.code == BuildCode.UNSAFE_STEP_OUTPUT, (planted, ei.value)
        dist = tmp_path / f"dist-{planted}"
        dist.mkdir()
        one = dist / "x-1.0-py3-none-any.whl"
        if planted == "fifo":
            os.mkfifo(one)
        elif planted == "symlink":
            os.symlink("/etc/passwd", one)
        elif planted == "hardlink":
            (tmp_path / "elsewhere.whl").write_bytes(b"PK")
            os.link(tmp_path / "elsewhere.whl", one)
        else:
            one.write_bytes(b"PK")
            os.chmod(one, 0o4644)
        into = tmp_path / f"into-{planted}"
        into.mkdir()
        with pytest.raises(AttestError) as ei:
            take_single_file(str(dist), str(into), suffix=".whl", what="the wheel")
        assert ei.value.code == BuildCode.UNSAFE_STEP_OUTPUT, (planted, ei.value)
        assert os.listdir(into) == []


_ATTACKER = r"""
import os, sys, time
deadline = time.time() + float(sys.argv[1])
wrote = set()
while time.time() < deadline:
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or pid in wrote:
            continue
        try:
            if sys.argv[2] not in os.readlink(f"/proc/{pid}/cwd"):
                continue  # only this test's build: never another test's, running beside it
            os.listdir(f"/proc/{pid}/cwd/toolchain")
            with open(f"/proc/{pid}/cwd/toolchain/pwned.py", "w") as f:
                f.write("PWNED = True\n")
            wrote.add(pid)
            print("WROTE", pid, flush=True)
        except OSError:
            pass
    time.sleep(0.05)
"""


@needs_root  # as an ordinary user the attacker would be the builder's own uid, outside the rootless sandbox's model (docs/build.md)
def test_a_host_process_running_as_nobody_cannot_write_into_a_running_build(project: Project, sandbox: Sandbox) -> None:
    try:
        nobody = pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("no 'nobody' user to attack from")
    if shutil.which("setpriv") is None:
        pytest.skip("no setpriv")
    sha = _hostile(project, _RECORD + """
import time
time.sleep(4)  # a long build: the window the attacker uses
record({"uid": str(os.getuid())})
""")
    # The attacker is any host process of uid nobody (a daemon, a CI job); it needs no file of ours.
    scratch = tempfile.mkdtemp(prefix="attest-attacker-")
    os.chmod(scratch, 0o755)
    script = Path(scratch) / "attack.py"
    script.write_text(_ATTACKER)
    os.chmod(script, 0o644)
    attacker = subprocess.Popen(["setpriv", f"--reuid={nobody.pw_uid}", f"--regid={nobody.pw_gid}", "--clear-groups",
                                 "/usr/bin/python3", "-I", str(script), "60", str(project.store)], stdout=subprocess.PIPE, text=True, cwd="/")
    try:
        result = _build(project, sandbox, sha)
    finally:
        attacker.kill()
        out, _ = attacker.communicate()
        shutil.rmtree(scratch)
    assert "WROTE" not in out, f"a host process of uid nobody wrote into the running build: {out}"
    uid = int(_report(result)["uid"])
    assert uid != nobody.pw_uid and STEP_UID_RANGE[0] <= uid < STEP_UID_RANGE[1]
    assert not list(Path(result.store_path).rglob("pwned.py"))  # type: ignore[attr-defined]


_SHADOW_C = r"""
#include <Python.h>
static PyObject *hello(PyObject *s, PyObject *a) { puts("PWNED"); fflush(stdout); Py_RETURN_NONE; }
static PyMethodDef M[] = {{"hello", hello, METH_NOARGS, 0}, {0}};
static struct PyModuleDef D = {PyModuleDef_HEAD_INIT, "libdep", 0, -1, M};
PyMODINIT_FUNC PyInit_libdep(void) { return PyModule_Create(&D); }
"""


@pytest.mark.parametrize("attack", ["extension-shadow", "pth", "unlocked-distribution"])
def test_the_toolchain_wheel_cannot_shadow_or_add_distributions(project: Project, sandbox: Sandbox, tmp_path: Path,
                                                                attack: str) -> None:
    """A review found the toolchain's wheel could ship libdep/__init__.<so> (imported instead of the
    locked libdep/__init__.py, whose digest never changed), a .pth, or a whole unlocked distribution."""
    if attack == "extension-shadow":
        if shutil.which("gcc") is None:
            pytest.skip("no C compiler to build the shadowing extension")
        import sysconfig

        src = tmp_path / "shadow.c"
        src.write_text(_SHADOW_C)
        so = tmp_path / "shadow.so"
        subprocess.run(["gcc", "-shared", "-fPIC", "-I", sysconfig.get_paths()["include"], "-o", str(so), str(src)], check=True)
        # The step cannot read the host's tmp_path: the hook carries the bytes.
        extra = f"body['libdep/__init__{sysconfig.get_config_var('EXT_SUFFIX')}'] = {so.read_bytes()!r}\n"
        code = BuildCode.DISTRIBUTION_OVERLAP
    elif attack == "pth":
        extra = "body['toolchain-0.1.data/purelib/zzz-evil.pth'] = b'import os; os.system(\"echo PWNED\")\\n'\n"
        code = BuildCode.DISTRIBUTION_OVERLAP
    else:
        extra = ("body['toolchain-0.1.data/purelib/urllib3/__init__.py'] = b'print(1)\\n'\n"
                 "body['toolchain-0.1.data/purelib/urllib3-9.9.9.dist-info/METADATA'] = "
                 "b'Metadata-Version: 2.1\\nName: urllib3\\nVersion: 9.9.9\\n'\n")
        code = BuildCode.UNLOCKED_DISTRIBUTION
    result = _build(project, sandbox, _hostile(project, rewrite_wheel_hook(extra)))
    assert isinstance(result, AttestError), result
    assert code in {f.code for f in result.findings}, result


def test_the_leak_scan_finds_a_path_across_a_chunk_boundary_and_reads_in_bounded_chunks(tmp_path: Path) -> None:
    from attest.builder._outputs import find_leaks

    needle = b"/var/lib/attest/builder-staging/stage-0123456789abcdef"
    tree = tmp_path / "t"
    tree.mkdir()
    (tree / "across").write_bytes(b"x" * ((1 << 20) - 10) + needle + b"y" * 100)
    (tree / "clean").write_bytes(b"z" * (3 << 20))
    found = find_leaks(str(tree), [needle])
    assert [(f.code, f.path) for f in found] == [(BuildCode.STAGING_PATH_LEAK, "across")]


def test_a_build_step_is_bounded_in_file_size_processes_and_tmpfs(project: Project, sandbox: Sandbox) -> None:
    """Attack review: a step could write files of any size, fork without
    bound and fill tmpfs mounts as large as half the machine's memory."""
    sha = _hostile(project, _RECORD + """
import errno, os, signal, time
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
results = {}
try:
    with open("huge", "wb") as f:
        f.seek(5 << 30)  # sparse: past the 4 GiB bound without using the disk
        f.write(b"x")
    results["file"] = "written"
except OSError as e:
    results["file"] = "refused" if e.errno == errno.EFBIG else f"error {e.errno}"
finally:
    if os.path.exists("huge"):
        os.unlink("huge")
# The kernel counts threads and processes of the uid alike (RLIMIT_NPROC): fill the bound with
# threads (cheap), then fork once more.
import threading
threading.stack_size(65536)
stop, threads = threading.Event(), []
try:
    for _ in range(5000):
        t = threading.Thread(target=stop.wait)
        t.start()
        threads.append(t)
except RuntimeError:  # "can't start new thread": clone refused
    pass
try:
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    results["fork"] = "unbounded"
except OSError as e:
    results["fork"] = "refused" if e.errno == errno.EAGAIN else f"error {e.errno}"
results["tasks_below_the_bound"] = len(threads) < 4096
stop.set()
for t in threads:
    t.join()
st = os.statvfs("/tmp")
results["tmpfs"] = "refused" if st.f_blocks * st.f_frsize <= 512 << 20 else f"{st.f_blocks * st.f_frsize} bytes"
record(results)
""")
    assert _report(_build(project, sandbox, sha)) == {"file": "refused", "fork": "refused", "tasks_below_the_bound": True, "tmpfs": "refused"}
