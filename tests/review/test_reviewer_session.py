"""The confined reviewer and build steps keep nothing of their caller's session: no terminal, no keyring.

The attack review's findings: the reviewer kept the caller's controlling terminal (TIOCSTI pushed a
command into the operator's shell), and the reviewer and every build step kept the caller's session
keyring. Beyond them: a rootless reviewer runs as the caller's own uid, and a process of that uid can
link any keyring of the caller's (its session keyring, its user keyring ``@u``) into its own by serial
number (``/proc/keys`` lists them) and read every key there, whatever namespaces it is in; a fresh
session keyring alone does not stop that, so the keyring system calls are refused (seccomp).

Here a real reviewer, run through ``attest review exec``, tries exactly that against a secret its
caller keeps in its session keyring and in its user keyring; as root (rootful) and, from a root run,
again as uid ``nobody`` (rootless: ``test_the_same_as_an_ordinary_user``). And the reviewer dies
with attest (Ctrl-C, or attest killed).
"""

# The bootstrap fixtures (dep, skill) are imported from test_bootstrap, so their parameters shadow the imports.

from __future__ import annotations

import json
import os
import pwd
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from test_bootstrap import Deployment, make_consumer, run

from attest import _session
from attest.builder._sandbox import confine_argv, give_to_uid, pick_step_uid, rootless_problem

PY = sys.executable
ROOT = Path(__file__).resolve().parents[2]
IS_ROOT = os.geteuid() == 0
ABIS = _session._abis()
KEYRINGS = ABIS is not None and _session.keyring_errno() == 0
NR_ADD_KEY, _, NR_KEYCTL = ABIS[0][2] if ABIS else (0, 0, 0)
needs_keyrings = pytest.mark.skipif(not KEYRINGS, reason="no keyrings here (or an architecture attest does not know)")

# The attacker: every key /proc/keys lists, linked into its own session keyring and read by serial; then the
# secret's name searched for in its session, user and user-session keyrings. It prints what it got.
ATTACKER = """
import ctypes, json, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def kc(*a):
    r = libc.syscall(NR_KEYCTL, *[ctypes.c_long(x) if isinstance(x, int) else x for x in a])
    return r if r >= 0 else -ctypes.get_errno()
got = []
try:
    lines = open("/proc/keys").read().splitlines()
except OSError as e:
    lines = []
for line in lines:
    serial = int(line.split()[0], 16)
    kc(8, serial, -3)
    buf = ctypes.create_string_buffer(4096)
    n = kc(11, serial, buf, 4096)
    if n > 0:
        got.append(buf.raw[:n].decode("latin-1"))
for name in sys.argv[1:]:
    for ring in (-3, -4, -5):
        k = kc(10, ring, b"user", name.encode(), 0)
        buf = ctypes.create_string_buffer(4096)
        n = kc(11, k, buf, 4096) if k > 0 else k
        got.append(buf.raw[:n].decode("latin-1") if n > 0 else "errno %d" % -n)
print(json.dumps({"complete": False, "limitations": ["keyring: " + json.dumps(got), "keys listed: %d" % len(lines)],
                  "findings": []}))
""".replace("NR_KEYCTL", str(NR_KEYCTL)).replace("NR_ADD_KEY", str(NR_ADD_KEY))

# The caller: a fresh session keyring of its own (the host's is never touched) holding the secret, the same
# secret in its user keyring (@u, removed again afterwards); it runs the command and prints what it did.
CALLER = """
import ctypes, json, os, subprocess, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
if libc.syscall(NR_KEYCTL, 1, b"attest-test-caller-session") < 0:
    sys.exit("cannot join a session keyring: errno %d" % ctypes.get_errno())
secret = os.environ.pop("ATK_SECRET").encode()
name = sys.argv[1].encode()
for ring, suffix in ((-3, b""), (-4, b"-u")):
    if libc.syscall(NR_ADD_KEY, b"user", name + suffix, secret, len(secret), ring) < 0:
        sys.exit("cannot add the key: errno %d" % ctypes.get_errno())
try:
    proc = subprocess.run(sys.argv[2:], capture_output=True, check=False, timeout=600)
finally:
    k = libc.syscall(NR_KEYCTL, 10, -4, b"user", name + b"-u", 0)
    if k > 0:
        libc.syscall(NR_KEYCTL, 9, ctypes.c_long(k), -4)
print(json.dumps({"rc": proc.returncode, "stdout": proc.stdout.decode(), "stderr": proc.stderr.decode()[-3000:]}))
""".replace("NR_KEYCTL", str(NR_KEYCTL)).replace("NR_ADD_KEY", str(NR_ADD_KEY))


@pytest.fixture
def handoff(dep: Deployment, skill: tuple[Path, Path], tmp_path: Path) -> Path:
    c = make_consumer(tmp_path / "consumer", dep.sha)
    return Path(run(dep, skill, c, tmp_path).handoff)


def _review_exec(dep: Deployment, handoff: Path, out: Path, *command: str) -> list[str]:
    return [PY, "-m", "attest", "review", "exec", "--handoff", str(handoff), "--policy", str(dep.trust),
            "--state-dir", str(dep.state), "-o", str(out), "--json", "--", *command]


def _with_secret(argv: list[str], name: str, secret: str) -> dict[str, object]:
    proc = subprocess.run([PY, "-c", CALLER, name, *argv], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "ATK_SECRET": secret}, check=False, timeout=700)
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc: dict[str, object] = json.loads(proc.stdout)
    return doc


@needs_keyrings
def test_the_reviewer_reaches_no_keyring_of_its_caller(dep: Deployment, handoff: Path, tmp_path: Path) -> None:
    """Neither the caller's session keyring nor its user keyring, by possession, by name or by serial number."""
    secret = "attest-session-secret-" + secrets.token_hex(12)
    name = "attest-test-" + secrets.token_hex(4)
    out = tmp_path / "result.json"
    script = '"$ATTEST_IMAGE_RUNTIME/bin/python" -I -c "$1" "$2" "$2-u"'
    done = _with_secret(_review_exec(dep, handoff, out, "/bin/sh", "-c", script, "reviewer", ATTACKER, name), name, secret)
    assert done["rc"] == 0, done["stderr"]
    doc = json.loads(str(done["stdout"]))
    confinement = doc["confinement"]
    assert confinement["confined"] is True and confinement["mode"] == ("rootful" if IS_ROOT else "rootless")
    assert confinement["keyring"] == _session.keyring_statement(deny=True) and "refused" in confinement["keyring"]
    assert confinement["session"].startswith("new session, no controlling terminal; stdin /dev/null")
    result = json.loads(out.read_text())
    assert secret not in out.read_text(), f"the {confinement['mode']} reviewer read a keyring of its caller's: {result}"
    got = json.loads(result["limitations"][0].removeprefix("keyring: "))
    assert got == ["errno 38"] * 6, got  # every keyring call: ENOSYS


@needs_keyrings
@pytest.mark.parametrize("deny", [False, True])
def test_a_confined_command_reaches_no_keyring_of_its_caller_only_with_the_filter(tmp_path: Path, deny: bool) -> None:
    """The mechanism, without a deployment: the reviewer's confinement started by attest._session.start.

    Rootless, a fresh session keyring alone is not enough (the caller's uid links the caller's keyrings
    by serial number): without the filter the secrets are read; with it, nothing is. Rootful, the
    reviewer's uid of its own reaches neither either way.
    """
    secret = "attest-session-secret-" + secrets.token_hex(12)
    name = "attest-test-" + secrets.token_hex(4)
    work = tmp_path / "work"
    work.mkdir()
    attacker = tmp_path / "attacker.py"
    attacker.write_text(ATTACKER)
    attacker.chmod(0o644)
    tmp_path.chmod(0o755)
    rootless = not IS_ROOT
    if rootless and rootless_problem() is not None:
        pytest.skip(f"no rootless confinement here: {rootless_problem()}")
    uid = os.getuid() if rootless else pick_step_uid()
    if not rootless:
        give_to_uid([str(work)], uid)
    argv = confine_argv([sys.executable if rootless else "/usr/bin/python3", "-I", str(attacker), name, f"{name}-u"],
                        root_parent=str(tmp_path), cwd=str(work), readonly=[str(attacker), sys.prefix, sys.base_prefix],
                        writable=[str(work)], uid=uid, rootless=rootless)
    runner = ("import os, sys\nfrom attest import _session\n"
              f"p = _session.start(sys.argv[1:], env={{'PATH': '/usr/bin:/bin'}}, cwd='/', stdout=None, deny_keyrings={deny})\n"
              "sys.exit(_session.relay(p))\n")
    done = _with_secret([PY, "-c", runner, *argv], name, secret)
    assert done["rc"] == 0, done["stderr"]
    got = json.loads(json.loads(str(done["stdout"]))["limitations"][0].removeprefix("keyring: "))
    if deny:
        assert got == ["errno 38"] * 6, got
    elif rootless:
        assert secret in got, f"the attack this filter stops did not work here, so this test shows nothing: {got}"
    else:
        assert secret not in got, got


def test_keyring_filter_refuses_the_keyring_calls_of_every_abi_and_nothing_else() -> None:
    """The seccomp program, run by a small BPF interpreter, for the x86-64 machine (x86-64, x32, i386 ABIs)."""
    abis = _session._ABIS["x86_64"]
    prog = _session.keyring_filter(abis)

    def verdict(arch: int, nr: int) -> int:
        acc, pc = 0, 0
        while True:
            code, jt, jf, k = prog[pc]
            pc += 1
            if code == 0x20:
                acc = {0: nr, 4: arch}[k]
            elif code == 0x54:
                acc &= k
            elif code == 0x15:
                pc += jt if acc == k else jf
            else:
                assert code == 0x06
                return k

    allow, enosys = 0x7FFF0000, 0x00050000 | 38
    x86_64, i386 = 0xC000003E, 0x40000003
    for nr in (248, 249, 250, 0x40000000 | 248, 0x40000000 | 250):
        assert verdict(x86_64, nr) == enosys, nr
    for nr in (286, 287, 288):
        assert verdict(i386, nr) == enosys, nr
    for arch, nr in ((x86_64, 0), (x86_64, 39), (x86_64, 286), (x86_64, 251), (i386, 250), (i386, 20), (0xC00000B7, 219)):
        assert verdict(arch, nr) == allow, (arch, nr)
    assert len(prog) < 256


@needs_keyrings
def test_a_child_joins_a_new_session_keyring_and_confined_gets_no_keyring_calls() -> None:
    probe = ("import ctypes; libc = ctypes.CDLL(None, use_errno=True); libc.syscall.restype = ctypes.c_long\n"
             f"r = libc.syscall({NR_KEYCTL}, 0, -3, 0); print(r if r >= 0 else -ctypes.get_errno())")
    mine = subprocess.run([PY, "-c", probe], capture_output=True, text=True, check=True).stdout.strip()
    fresh = subprocess.run([PY, "-c", probe], capture_output=True, text=True, check=True,
                           preexec_fn=_session.child_setup(deny_keyrings=False)).stdout.strip()
    denied = subprocess.run([PY, "-c", probe], capture_output=True, text=True, check=True,
                            preexec_fn=_session.child_setup(deny_keyrings=True)).stdout.strip()
    assert int(mine) > 0 and int(fresh) > 0 and fresh != mine
    assert denied == "-38"


def _token_processes(token: str, *, starts: bytes = b"") -> list[int]:
    out = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    cmdline = f.read()
            except OSError:
                continue
            if token.encode() in cmdline and cmdline.startswith(starts):
                out.append(int(pid))
    return out


def _wait(what: str, cond: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.2)
    pytest.fail(f"timed out waiting until {what}")


@pytest.mark.parametrize("how", ["ctrl-c", "killed"])
def test_the_reviewer_dies_with_attest(dep: Deployment, handoff: Path, tmp_path: Path, how: str) -> None:
    """In a session of its own the terminal's SIGINT no longer reaches the reviewer: attest kills it; and if attest
    is killed, setpriv --pdeathsig and unshare --kill-child still take the reviewer's whole PID namespace with it."""
    token = "attest-reviewer-" + secrets.token_hex(8)
    script = f"sleep 600; echo {token}"
    argv = _review_exec(dep, handoff, tmp_path / "result.json", "/bin/sh", "-c", script)
    attest = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        _wait("the reviewer runs", lambda: bool(_token_processes(token, starts=f"/bin/sh\0-c\0{script}".encode())), 300)
        assert len(_token_processes(token)) >= 4  # attest, unshare, the confinement's pid 1, the reviewer
        if how == "ctrl-c":
            os.killpg(attest.pid, signal.SIGINT)  # what the terminal sends its foreground process group
        else:
            attest.kill()
        attest.wait(60)
        _wait("no process of the reviewer is left", lambda: not _token_processes(token), 30)
    finally:
        if attest.poll() is None:
            attest.kill()
            attest.wait()
        for pid in _token_processes(token):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.skipif(not IS_ROOT, reason="needs root to run the tests again as uid nobody (as that user they run rootless directly)")
@needs_keyrings
def test_the_same_as_an_ordinary_user() -> None:
    """This module's tests again, as uid ``nobody``: its own deployment, the reviewer confined rootless (as the caller)."""
    from test_reviewer_root import _closure, _python_for

    try:
        user = pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("no 'nobody' user")
    python = _python_for(user.pw_uid)
    if python is None:
        pytest.skip("no Python >= 3.11 (with venv) on this machine that uid 'nobody' can run")
    as_nobody = ["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--clear-groups"]
    userns = subprocess.run([*as_nobody, "unshare", "--user", "--map-root-user", "true"], capture_output=True, cwd="/", check=False)
    if userns.returncode != 0:
        pytest.skip(f"unprivileged user namespaces do not work here: {userns.stderr.decode()[-200:]}")
    base = Path(tempfile.mkdtemp(prefix="attest-session-nobody-"))
    try:
        os.chmod(base, 0o755)
        subprocess.run([python, "-m", "venv", "--without-pip", str(base / "venv")], check=True, capture_output=True)
        site = Path(subprocess.run([str(base / "venv" / "bin" / "python"), "-I", "-c",
                                    "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                   check=True, capture_output=True, text=True).stdout.strip())
        ignore = shutil.ignore_patterns("__pycache__")
        shutil.copytree(ROOT / "attest", site / "attest", ignore=ignore)
        for dist in _closure("attest", "pytest"):
            for rel in dist.files or ():
                src = Path(str(dist.locate_file(rel)))
                if "__pycache__" in rel.parts or not src.is_file() or rel.parts[0].startswith(".."):
                    continue
                (site / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, site / rel)
        repo = base / "repo"
        shutil.copytree(ROOT / "tests", repo / "tests", ignore=ignore)
        shutil.copy2(ROOT / "pyproject.toml", repo / "pyproject.toml")
        subprocess.run(["chmod", "-R", "a+rX,go-w", str(base)], check=True)
        for d in ("home", "tmp"):
            (base / d).mkdir(mode=0o700)
            os.chown(base / d, user.pw_uid, user.pw_gid)
        proc = subprocess.run(
            [*as_nobody, str(base / "venv" / "bin" / "python"), "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider",
             f"--basetemp={base / 'tmp' / 'pytest'}", "-k", "not ordinary_user", "tests/review/test_reviewer_session.py"],
            capture_output=True, text=True, timeout=900, cwd=repo, check=False,
            env={"PATH": "/usr/bin:/bin", "HOME": str(base / "home"), "LC_ALL": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1"})
        assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
        passed = set(re.findall(r"^PASSED tests/review/test_reviewer_session\.py::(\S+)", proc.stdout, re.M))
        assert {"test_the_reviewer_reaches_no_keyring_of_its_caller",
                "test_a_confined_command_reaches_no_keyring_of_its_caller_only_with_the_filter[False]",
                "test_a_confined_command_reaches_no_keyring_of_its_caller_only_with_the_filter[True]",
                "test_the_reviewer_dies_with_attest[ctrl-c]", "test_the_reviewer_dies_with_attest[killed]"} <= passed, \
            proc.stdout[-3000:]
    finally:
        subprocess.run(["chattr", "-R", "-f", "-i", str(base)], check=False, capture_output=True)
        shutil.rmtree(base, ignore_errors=True)
