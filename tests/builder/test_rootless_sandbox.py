"""The rootless sandbox: build steps and the reviewer confined without root.

Without root the build refused (or, accepted unisolated, ran unconfined) and the demo stopped
before the runtime build. A non-root builder now confines each step in a new user namespace that
maps only the caller (as bubblewrap does), with the same mount, PID, IPC, UTS and network
namespaces, the same minimal root and no capabilities. The hostile steps below run as an
ordinary user (uid ``nobody``, started with ``setpriv`` from this root test process) in a
private copy of the package that ``nobody`` can read: the step cannot read a file outside its
inputs, write its inputs (it owns them: only the read-only mount stops it), reach the network,
leave a process behind, or have the host follow a symlink it planted in its output.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from attest.builder._sandbox import ROOTLESS_PROFILE, USERNS_SYSCTLS, decide_confinement, not_isolated_detail
from attest.errors import EnvironmentFailure
from attest.review.handoff import HandoffCode, verify_can_confine

# -- the decisions (pure) ----------------------------------------------------------------------------------------------

_ALLOWED = {"unprivileged_userns_clone": "1\n", "max_user_namespaces": "96363\n", "apparmor_restrict_unprivileged_userns": "0\n"}
_ABSENT: dict[str, str | None] = dict.fromkeys(USERNS_SYSCTLS)


@pytest.mark.parametrize(("euid", "sysctls", "mode", "why"), [
    (0, _ALLOWED, "rootful", None),
    (0, {**_ALLOWED, "max_user_namespaces": "0\n"}, "rootful", None),  # root needs no user namespace
    (1000, _ALLOWED, "rootless", None),
    (1000, _ABSENT, "rootless", None),  # kernels without the switches allow them (the probe decides)
    (1000, {**_ABSENT, "max_user_namespaces": "15000\n"}, "rootless", None),
    (1000, {**_ALLOWED, "unprivileged_userns_clone": "0\n"}, "none", "unprivileged_userns_clone = 0"),
    (1000, {**_ALLOWED, "unprivileged_userns_clone": ""}, "none", "unprivileged_userns_clone = empty"),
    (1000, {**_ALLOWED, "max_user_namespaces": "0\n"}, "none", "max_user_namespaces = 0"),
    (1000, {**_ALLOWED, "max_user_namespaces": "many"}, "none", "max_user_namespaces = many"),
    (1000, {**_ALLOWED, "apparmor_restrict_unprivileged_userns": "1\n"}, "none", "AppArmor"),
    (65534, {**_ALLOWED, "unprivileged_userns_clone": "unreadable (Permission denied)"}, "none", "unreadable"),
])
def test_which_confinement_a_builder_tries(euid: int, sysctls: dict[str, str | None], mode: str, why: str | None) -> None:
    got_mode, got_why = decide_confinement(euid, sysctls)
    assert got_mode == mode
    if why is None:
        assert got_why is None
    else:
        assert got_why is not None and why in got_why


_CLONE_OFF = "unprivileged user namespaces are disabled here (kernel.unprivileged_userns_clone = 0)"


@pytest.mark.parametrize(("why_not", "net", "rootless", "detail"), [
    # The kernel's reason is the whole reason: no "here" twice, no guessed tool failure after it.
    (_CLONE_OFF, False, True, f"cannot create a rootless sandbox (a user namespace): {_CLONE_OFF}; pass --allow-network-unisolated"),
    (None, False, True, "cannot create a network namespace without interfaces in a user namespace here (unshare, mount or "
                        "setpriv failed); pass"),
    (None, False, False, "cannot create a network namespace without interfaces here (unshare, mount or setpriv failed); pass"),
    (None, True, True, "cannot create a confined mount/PID/IPC namespace in a user namespace (rootless) here (unshare"),
    (None, True, False, "cannot create a confined mount/PID/IPC namespace as an unprivileged uid here (unshare"),
])
def test_the_sandbox_refusal_says_what_is_missing_and_why(why_not: str | None, net: bool, rootless: bool, detail: str) -> None:
    got = not_isolated_detail(why_not, net=net, rootless=rootless)
    assert got.startswith(detail), got
    assert got.count(" here") == 1 and got.endswith("(recorded in the output and the input address)")


@pytest.mark.parametrize(("euid", "unsafe", "rootless", "refused"), [
    (0, False, "no user namespaces", False),  # root confines rootful; the rootless answer is not asked
    (0, True, None, False),
    (1000, False, None, False),  # rootless works: confined, as the caller
    (1000, False, "user.max_user_namespaces = 0", True),
    (1000, True, "user.max_user_namespaces = 0", False),  # unconfined on request only
    (1000, True, None, False),
])
def test_the_reviewer_is_confined_rootless_or_the_caller_said_unsafe(euid: int, unsafe: bool, rootless: str | None,
                                                                       refused: bool) -> None:
    asked: list[int] = []

    def answer() -> str | None:
        asked.append(euid)
        return rootless

    if refused:
        with pytest.raises(EnvironmentFailure) as ei:
            verify_can_confine(euid, unsafe_unconfined=unsafe, rootless=answer)
        assert ei.value.code == HandoffCode.REVIEWER_NOT_CONFINED
        assert "--unsafe-unconfined" in str(ei.value) and str(rootless) in str(ei.value)
    else:
        verify_can_confine(euid, unsafe_unconfined=unsafe, rootless=answer)
    assert asked == ([euid] if euid != 0 and not unsafe else [])


# -- real steps as uid nobody -----------------------------------------------------------------------------------------

_DISTRIBUTIONS = ("packaging", "installer", "pathspec", "rfc8785", "cryptography", "cffi", "pycparser")  # what the layers used import


def _python_for(uid: int, gid: int) -> str | None:
    """A Python >= 3.11 with venv that ``uid`` can run and read (the build hashes it): this one's base, else the system's."""
    for candidate in (os.path.realpath(getattr(sys, "_base_executable", sys.executable)), "/usr/bin/python3"):
        probe = subprocess.run(["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", candidate, "-I", "-c",
                                "import os, sys, venv; open(os.path.realpath(sys.executable), 'rb').close(); "
                                "sys.exit(sys.version_info < (3, 11))"], capture_output=True, cwd="/")
        if probe.returncode == 0:
            return candidate
    return None


class Nobody:
    """A venv that uid nobody can run, holding a copy of attest, tests/support and what they import."""

    def __init__(self, base: Path, python: str, user: pwd.struct_passwd) -> None:
        self.base, self.user = base, user
        self.work = base / "work"  # nobody's own: state, projects, staging
        self.python = str(base / "venv" / "bin" / "python")
        subprocess.run([python, "-m", "venv", "--without-pip", str(base / "venv")], check=True, capture_output=True)
        site = Path(subprocess.run([self.python, "-I", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                   check=True, capture_output=True, text=True).stdout.strip())
        here = Path(__file__).resolve().parents[2]
        ignore = shutil.ignore_patterns("__pycache__")
        shutil.copytree(here / "attest", site / "attest", ignore=ignore)
        shutil.copytree(here / "tests" / "support", site / "support", ignore=ignore)
        for name in _DISTRIBUTIONS:
            dist = importlib.metadata.distribution(name)
            for rel in dist.files or ():
                src = Path(str(dist.locate_file(rel)))
                if "__pycache__" in rel.parts or not src.is_file():
                    continue
                (site / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, site / rel)
        subprocess.run(["chmod", "-R", "a+rX,go-w", str(base)], check=True)
        self.work.mkdir()
        (self.work / "home").mkdir()
        for p in (self.work, self.work / "home"):
            os.chown(p, user.pw_uid, user.pw_gid)

    def run(self, script: str, *args: str, timeout: float = 300) -> dict[str, Any]:
        """Run ``script`` as nobody in the venv; the JSON object it printed last."""
        proc = subprocess.run(
            ["setpriv", f"--reuid={self.user.pw_uid}", f"--regid={self.user.pw_gid}", "--clear-groups",
             self.python, "-I", "-c", textwrap.dedent(script), str(self.work), *args],
            capture_output=True, text=True, timeout=timeout, cwd="/",
            env={"PATH": "/usr/bin:/bin", "HOME": str(self.work / "home"), "LC_ALL": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1"},
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


@pytest.fixture(scope="module")
def nobody() -> Iterator[Nobody]:
    if os.geteuid() != 0:
        pytest.skip("needs root to start processes as uid nobody")
    try:
        user = pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("no 'nobody' user")
    if shutil.which("setpriv") is None or shutil.which("unshare") is None:
        pytest.skip("no setpriv or unshare")
    python = _python_for(user.pw_uid, user.pw_gid)
    if python is None:
        pytest.skip("no Python >= 3.11 (with venv) on this machine that uid 'nobody' can run")
    userns = subprocess.run(["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--clear-groups",
                             "unshare", "--user", "--map-root-user", "true"], capture_output=True, cwd="/")
    if userns.returncode != 0:
        pytest.skip(f"unprivileged user namespaces do not work here: {userns.stderr.decode()[-200:]}")
    base = Path(tempfile.mkdtemp(prefix="attest-rootless-"))
    try:
        os.chmod(base, 0o755)
        yield Nobody(base, python, user)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _processes_with(marker: str) -> list[int]:
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                if marker.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                    found.append(int(pid))
            except OSError:
                continue
    return found


def _gone(marker: str, within: float = 5.0) -> bool:
    deadline = time.monotonic() + within
    while _processes_with(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    return not _processes_with(marker)


class Listeners:
    """A TCP listener on loopback, a socket file nobody may connect to and an abstract socket: what a step must not reach."""

    def __init__(self, where: Path) -> None:
        self.tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.tcp.bind(("127.0.0.1", 0))
        self.port = self.tcp.getsockname()[1]
        self.path = str(where / f"host-daemon-{time.monotonic_ns()}.sock")
        self.unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.unix.bind(self.path)
        os.chmod(self.path, 0o777)
        self.abstract_name = f"attest-rootless-{os.getpid()}-{time.monotonic_ns()}"
        self.abstract = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.abstract.bind("\0" + self.abstract_name)
        self.got: list[str] = []
        self._stop = False
        self._threads = []
        for name, s in (("tcp", self.tcp), ("unix", self.unix), ("abstract", self.abstract)):
            s.listen(4)
            s.settimeout(0.2)
            t = threading.Thread(target=self._serve, args=(name, s), daemon=True)
            t.start()
            self._threads.append(t)

    def _serve(self, name: str, s: socket.socket) -> None:
        while not self._stop:
            try:
                conn, _ = s.accept()
            except (TimeoutError, OSError):
                continue
            self.got.append(name)
            conn.close()

    def close(self) -> None:
        self._stop = True
        for t in self._threads:
            t.join(2)
        for s in (self.tcp, self.unix, self.abstract):
            s.close()


# Run as nobody: each hostile step in a fresh staging directory under nobody's work directory.
_STEPS = r"""
import json, os, subprocess, sys, tempfile
from attest.builder import Sandbox
from attest.builder._outputs import take_output, take_single_file
from attest._safefs import O_DIR, remove_tree
from attest.errors import AttestError

work, port, sock_path, abstract, marker = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
out = {"caller": [os.getuid(), os.getgid()]}
sb = Sandbox.establish(allow_unisolated_network=False)
out["confinement"], out["guarantees"] = sb.confinement, sb.guarantees()
secret = os.path.join(work, "secret.txt")  # the caller's own file, outside every input
with open(secret, "w") as f:
    f.write("the caller's secret\n")
os.chmod(secret, 0o600)
victim = os.path.join(work, "victim.txt")
with open(victim, "w") as f:
    f.write("original\n")


def stage():
    staging = tempfile.mkdtemp(prefix="stage-", dir=work)
    dirs = {n: os.path.join(staging, n) for n in ("out", "inputs", "spec")}
    for d in dirs.values():
        os.mkdir(d)
    with open(os.path.join(dirs["inputs"], "input.txt"), "w") as f:
        f.write("an input\n")
    return staging, dirs


def step(name, code, *, timeout=120, keep=False):
    staging, dirs = stage()
    try:
        r = sb.run(["/usr/bin/python3", "-I", "-c", code], cwd=dirs["out"], home=dirs["out"], staging=staging,
                   writable=[dirs["out"]], uid=12345, readonly=[dirs["inputs"]], timeout=timeout)
        out[name] = json.loads(r.stdout.decode().strip().splitlines()[-1])
    except AttestError as e:
        out[name] = {"error": str(e.code), "detail": str(e)[-300:]}
    if keep:
        return staging, dirs
    fd = os.open(work, O_DIR)
    try:
        remove_tree(fd, os.path.basename(staging))
    finally:
        os.close(fd)
    return None


PROLOGUE = '''
import ctypes, errno, json, os, socket, sys
r = {}
def attempt(name, fn):
    try:
        fn()
        r[name] = "DONE"
    except OSError as e:
        r[name] = errno.errorcode.get(e.errno, str(e.errno))
'''
INPUT = "os.path.join(os.path.dirname(os.getcwd()), 'inputs', 'input.txt')"

step("reach", PROLOGUE + f'''
r["uid"], r["gid"], r["groups"] = os.getuid(), os.getgid(), os.getgroups()
r["root"] = sorted(os.listdir("/"))
attempt("read-secret", lambda: open({secret!r}).read())
attempt("read-input", lambda: open({INPUT}).read())
attempt("write-input", lambda: open({INPUT}, "a").write("x"))
attempt("chmod-input", lambda: os.chmod({INPUT}, 0o666))
attempt("unlink-input", lambda: os.unlink({INPUT}))
attempt("write-usr", lambda: open("/usr/pwned", "w"))
attempt("plant-in-staging", lambda: os.symlink({victim!r}, os.path.join(os.path.dirname(os.getcwd()), "spec", "spec.json")))
attempt("proc1-root", lambda: os.listdir("/proc/1/root"))
attempt("proc1-cwd", lambda: os.listdir("/proc/1/cwd"))
attempt("proc1-environ", lambda: open("/proc/1/environ", "rb").read())
libc = ctypes.CDLL(None, use_errno=True)
r["nested-userns"] = "CREATED" if libc.unshare(0x10000000) == 0 else errno.errorcode[ctypes.get_errno()]
r["nested-mountns"] = "CREATED" if libc.unshare(0x00020000) == 0 else errno.errorcode[ctypes.get_errno()]
r["status"] = {{k: v.strip() for k, v in (l.split(":", 1) for l in open("/proc/self/status"))
               if k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs")}}
print(json.dumps(r))
''')

step("network", PROLOGUE + f'''
r["interfaces"] = sorted(n for _, n in socket.if_nameindex())
def tcp():
    s = socket.create_connection(("127.0.0.1", {port}), timeout=3)
    s.sendall(b"exfiltrated")
attempt("tcp", tcp)
attempt("unix", lambda: socket.socket(socket.AF_UNIX).connect({sock_path!r}))
attempt("abstract", lambda: socket.socket(socket.AF_UNIX).connect("\\0" + {abstract!r}))
print(json.dumps(r))
''')

DAEMON = '''
def daemon(mark):
    pid = os.fork()
    if pid == 0:
        os.setsid()
        if os.fork() == 0:
            os.execv("/bin/sleep", ["sleep", mark])
        os._exit(0)
    os.waitpid(pid, 0)
'''
step("daemon", PROLOGUE + DAEMON + f'''
daemon("{marker}1")
r["spawned"] = True
print(json.dumps(r))
''')
step("timeout", PROLOGUE + DAEMON + f'''
import time
daemon("{marker}2")
time.sleep(600)
''', timeout=5)

kept = step("plant", PROLOGUE + f'''
attempt("link-file", lambda: os.symlink({victim!r}, "evil.txt"))
attempt("link-dir", lambda: os.symlink({work!r}, "evil-dir"))
attempt("replace-own-dir", lambda: os.rename(os.getcwd(), os.getcwd() + ".moved"))
print(json.dumps(r))
''', keep=True)
staging, dirs = kept
try:
    take_output(dirs["out"], os.path.join(staging, "taken"))
    out["take_output"] = "TAKEN"
except AttestError as e:
    out["take_output"] = sorted({str(f.code) for f in e.findings})
os.unlink(os.path.join(dirs["out"], "evil-dir"))
try:
    take_single_file(dirs["out"], dirs["spec"], suffix=".txt", what="the built wheel")
    out["take_single_file"] = "TAKEN"
except AttestError as e:
    out["take_single_file"] = str(e.code)
fd = os.open(work, O_DIR)
try:
    remove_tree(fd, os.path.basename(staging))
finally:
    os.close(fd)
out["victim"] = open(victim).read()
out["work_left"] = sorted(n for n in os.listdir(work) if n.startswith("stage-"))
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def steps(nobody: Nobody) -> Iterator[dict[str, Any]]:
    listeners = Listeners(nobody.base)
    marker = f"{4000 + os.getpid() % 1000}.{time.monotonic_ns() % 10**6:06d}"
    try:
        out = nobody.run(_STEPS, str(listeners.port), listeners.path, listeners.abstract_name, marker)
        out["listeners_got"] = list(listeners.got)
        out["marker"] = marker
        yield out
    finally:
        listeners.close()
        for pid in _processes_with(marker):
            os.kill(pid, 9)


def test_a_non_root_builder_establishes_the_rootless_sandbox_and_says_so(steps: dict[str, Any], nobody: Nobody) -> None:
    g = steps["guarantees"]
    assert steps["confinement"] == "rootless" == g["confinement"]
    assert g["profile"] == ROOTLESS_PROFILE and g["network_isolated"] is True and g["filesystem_confined"] is True
    assert g["namespaces"] == ["user", "net", "mount", "pid", "ipc", "uts"]
    assert str(nobody.user.pw_uid) in g["uid"] and "rootless" in g["uid"]
    assert any("host processes of that uid" in d for d in g["differs"])  # honest about what running as the caller changes


def test_a_rootless_step_runs_as_the_caller_with_no_capabilities(steps: dict[str, Any], nobody: Nobody) -> None:
    seen = steps["reach"]
    assert [seen["uid"], seen["gid"]] == steps["caller"] == [nobody.user.pw_uid, nobody.user.pw_gid]
    status = seen["status"]
    assert all(int(status[k], 16) == 0 for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")), status
    assert status["NoNewPrivs"] == "1"
    # Chrooted, it cannot make a user namespace of its own (where it would hold capabilities), nor a mount namespace.
    assert seen["nested-userns"] == "EPERM" and seen["nested-mountns"] == "EPERM"
    # The waiting pid 1 has the namespace's capabilities, the step none: /proc/1 stays closed to it.
    assert {seen["proc1-root"], seen["proc1-cwd"], seen["proc1-environ"]} == {"EACCES"}


def test_a_rootless_step_cannot_read_outside_its_inputs_nor_write_them(steps: dict[str, Any]) -> None:
    seen = steps["reach"]
    assert seen["read-secret"] == "ENOENT"  # the caller's own file: not in its root
    assert seen["read-input"] == "DONE"
    # The step owns its inputs (they are the caller's): only the read-only mount stops these.
    assert seen["write-input"] == seen["chmod-input"] == seen["unlink-input"] == "EROFS"
    assert seen["write-usr"] == "EROFS"
    assert seen["plant-in-staging"] in ("ENOENT", "EROFS")  # staging itself is not in its root
    assert set(seen["root"]) <= {"bin", "dev", "etc", "lib", "lib32", "lib64", "libx32", "proc", "run", "sbin", "tmp", "usr", "var"}


def test_a_rootless_step_cannot_reach_the_network(steps: dict[str, Any]) -> None:
    seen = steps["network"]
    assert seen["interfaces"] == ["lo"]
    assert seen["tcp"] in ("ENETUNREACH", "ECONNREFUSED")
    assert seen["unix"] == "ENOENT" and seen["abstract"] == "ECONNREFUSED"
    assert steps["listeners_got"] == [], "a rootless build step reached a host listener"


def test_a_rootless_step_leaves_no_process_behind(steps: dict[str, Any]) -> None:
    assert steps["daemon"] == {"spawned": True}
    assert steps["timeout"]["error"] == "BUILD_STEP_FAILED"
    assert _gone(steps["marker"] + "1") and _gone(steps["marker"] + "2"), "a rootless step's daemon outlived it"


def test_a_planted_symlink_in_a_rootless_output_is_not_followed(steps: dict[str, Any]) -> None:
    seen = steps["plant"]
    assert seen["link-file"] == seen["link-dir"] == "DONE"
    assert seen["replace-own-dir"] in ("EBUSY", "EROFS", "EACCES")  # its writable directory is a mount point
    assert steps["take_output"] != "TAKEN" and "UNSAFE_STEP_OUTPUT" in steps["take_output"]
    assert steps["take_single_file"] == "UNSAFE_STEP_OUTPUT"
    assert steps["victim"] == "original\n" and steps["work_left"] == []


# -- a whole runtime build as nobody, its toolchain hostile -------------------------------------------------------------

_BUILD = r"""
import json, os, sys, textwrap
from pathlib import Path
from support.build import RUNTIME_RECIPE, make_toolchain_repo, write_lock
from attest.builder import Sandbox, build_runtime, fetch, load_lock, load_recipe
from attest.errors import AttestError

work, port, marker, kind = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
root = work / f"proj-{kind}"
(root / "lockfiles" / "wheels").mkdir(parents=True)
write_lock(root, root / "lockfiles" / "wheels")
secret, victim = work / "build-secret.txt", work / "build-victim.txt"
secret.write_text("the caller's secret\n")
victim.write_text("original\n")
if kind == "attempts":
    hook = f'''
import errno, json, os, socket
r = {{}}
def attempt(name, fn):
    try:
        fn()
        r[name] = "DONE"
    except OSError as e:
        r[name] = errno.errorcode.get(e.errno, str(e.errno))
r["uid"] = os.getuid()
attempt("read-secret", lambda: open({str(secret)!r}).read())
attempt("tcp", lambda: socket.create_connection(("127.0.0.1", {port}), timeout=3))
staging = os.path.dirname(os.getcwd())
attempt("plant-in-staging", lambda: os.symlink({str(victim)!r}, os.path.join(staging, "spec", "spec-install.json")))
attempt("write-backend", lambda: open(os.path.join(staging, "backend", "pwned.py"), "w"))
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv("/bin/sleep", ["sleep", "{marker}3"])
    os._exit(0)
os.wait()
with open(os.path.join("toolchain", "_hostile.json"), "w") as f:
    json.dump(r, f, sort_keys=True)
'''
else:  # the built wheel becomes a symlink to a file of the caller's
    hook = f'''
import os
def after_wheel(path):
    os.unlink(path)
    os.symlink({str(victim)!r}, path)
'''
sha = make_toolchain_repo(root / "repo", build_hook=textwrap.dedent(hook))
(root / "builders").mkdir()
(root / "builders" / "runtime.toml").write_text(RUNTIME_RECIPE)
recipe = load_recipe(root / "builders" / "runtime.toml")
fetch(load_lock(recipe.lock_path), str(work / "cache"), lock_path=recipe.lock_path)
sandbox = Sandbox.establish(allow_unisolated_network=False)
out = {}
try:
    built = build_runtime(recipe, sha, str(work / f"store-{kind}"), str(work / "cache"), sandbox, freeze_backend="readonly")
    out["built"] = {"confinement": built.details["sandbox"]["confinement"], "inputs_sandbox": built.inputs["sandbox"],
                    "filesystem_confined": built.details["filesystem_confined"], "network_isolated": built.network_isolated}
    v = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    # site-packages, or dist-packages under an interpreter whose site.py reads that (Debian's)
    site = next(p for p in (Path(built.store_path) / "lib" / v).glob("*-packages") if (p / "toolchain").is_dir())
    out["report"] = json.loads((site / "toolchain" / "_hostile.json").read_text())
except AttestError as e:
    out["error"] = sorted({str(e.code), *(str(f.code) for f in e.findings)})
    out["detail"] = str(e)[-1000:]
out["victim"] = victim.read_text()
print(json.dumps(out))
"""


def test_a_hostile_toolchain_built_rootless_reaches_nothing(nobody: Nobody) -> None:
    listeners = Listeners(nobody.base)
    marker = f"{5000 + os.getpid() % 1000}.{time.monotonic_ns() % 10**6:06d}"
    try:
        out = nobody.run(_BUILD, str(listeners.port), marker, "attempts")
    finally:
        listeners.close()
        leftover = _gone(marker + "3")
        for pid in _processes_with(marker):
            os.kill(pid, 9)
    assert "error" not in out, out
    assert out["built"]["confinement"] == "rootless" and out["built"]["filesystem_confined"] is True
    assert out["built"]["inputs_sandbox"]["profile"] == ROOTLESS_PROFILE  # its own input address: never a rootful one's
    report = out["report"]
    assert report["uid"] == nobody.user.pw_uid
    assert report["read-secret"] == "ENOENT" and report["tcp"] in ("ENETUNREACH", "ECONNREFUSED")
    assert report["plant-in-staging"] in ("ENOENT", "EROFS") and report["write-backend"] == "EROFS"
    assert listeners.got == [] and out["victim"] == "original\n"
    assert leftover, "the hostile build step's daemon outlived the build"


def test_a_symlink_left_as_the_built_wheel_is_refused_rootless(nobody: Nobody) -> None:
    out = nobody.run(_BUILD, "9", "0.0", "symlink")
    assert "UNSAFE_STEP_OUTPUT" in out.get("error", []), out
    assert out["victim"] == "original\n"


# -- the reviewer, confined rootless ------------------------------------------------------------------------------------

_REVIEWER = r"""
import json, os, subprocess, sys, tempfile
from attest.builder import SYSTEM_PATHS
from attest.review.handoff import confine_reviewer, verify_can_confine

work = sys.argv[1]
verify_can_confine(os.geteuid(), unsafe_unconfined=False)  # rootless: no refusal
image = os.path.join(work, "image")  # stands for a readonly-backend image: the caller's, write bits removed
os.makedirs(image)
with open(os.path.join(image, "SKILL.md"), "w") as f:
    f.write("frozen\n")
os.chmod(os.path.join(image, "SKILL.md"), 0o444)
os.chmod(image, 0o555)
secret = os.path.join(work, "reviewer-secret.txt")
with open(secret, "w") as f:
    f.write("deployment key\n")
st = os.stat(image)


class Entry:
    path, ino = "", st.st_ino


class Image:
    path, sealed, dev = image, [Entry()], st.st_dev


run_dir = tempfile.mkdtemp(dir=work)
for sub in ("home", "tmp", "cache", "config", "data", "pycache"):
    os.mkdir(os.path.join(run_dir, sub), 0o700)
code = f'''
import errno, json, os
r = {{"uid": os.getuid(), "skill": open("SKILL.md").read()}}
def attempt(name, fn):
    try:
        fn()
        r[name] = "DONE"
    except OSError as e:
        r[name] = errno.errorcode.get(e.errno, str(e.errno))
attempt("chmod-image", lambda: os.chmod("SKILL.md", 0o644))
attempt("write-image", lambda: open("SKILL.md", "a").write("x"))
attempt("create-in-image", lambda: open("new.md", "w"))
attempt("read-secret", lambda: open({secret!r}).read())
attempt("write-home", lambda: open(os.path.join({run_dir!r}, "home", "notes"), "w").write("ok"))
print(json.dumps(r))
'''
confine, picked = confine_reviewer((), network=False)
argv, fds = confine(["/usr/bin/python3", "-I", "-c", code], {"BASE": Image()}, run_dir, image)
try:
    proc = subprocess.run(argv, pass_fds=fds, cwd=image, env={"PATH": "/usr/bin:/bin", "HOME": run_dir + "/home"},
                          capture_output=True, text=True, timeout=120)
finally:
    for fd in fds:
        os.close(fd)
out = {"rc": proc.returncode, "stderr": proc.stderr[-500:], "picked": picked,
       "seen": json.loads(proc.stdout.strip().splitlines()[-1]) if proc.returncode == 0 else None,
       "mode": oct(os.stat(os.path.join(image, "SKILL.md")).st_mode & 0o777)}
print(json.dumps(out))
"""


def test_the_reviewer_is_confined_rootless(nobody: Nobody) -> None:
    out = nobody.run(_REVIEWER)
    assert out["rc"] == 0, out["stderr"]
    seen = out["seen"]
    assert out["picked"] == [nobody.user.pw_uid] == [seen["uid"]]  # the recorded uid is the one it ran as
    assert seen["skill"] == "frozen\n"
    # The image is the caller's (readonly backend): only its read-only bind keeps the reviewer from changing it.
    assert seen["chmod-image"] == "EROFS"  # its owner could make it writable again, but for the mount
    assert seen["write-image"] in ("EROFS", "EACCES") and seen["create-in-image"] in ("EROFS", "EACCES")
    assert out["mode"] == "0o444"
    assert seen["read-secret"] == "ENOENT" and seen["write-home"] == "DONE"
