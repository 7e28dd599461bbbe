"""Second attack review of `attest review exec` (the confinement, what a runtime attestation could add to it, the result).

Every attack is performed for real over test_bootstrap's deployment (a real promotion, installation,
bootstrap and signed handoff, a real confined reviewer). A test marked
``xfail(strict=True, reason="ATTACK: ...")`` asserts the secure behaviour and fails against the current
code (the attack works); the others are attempts that are refused, kept as regression tests.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
import test_bootstrap
from test_bootstrap import Deployment, make_consumer, run

from attest.attestation import Envelope, load_policy, load_signer, parse_statement, sign_statement
from attest.errors import InputError, VerificationError
from attest.freeze import expand_image_refs
from attest.review.handoff import parse_result, run_review_step, verify_handoff

PY = sys.executable
ROOT = Path(__file__).resolve().parents[2]
HOST_PYTHON = (sys.prefix, sys.base_prefix, str(ROOT))

needs_root = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None, reason="the confinement needs root and setpriv")

_RESULT = """
import json, sys
def result(note):
    sys.stdout.write(json.dumps({"complete": False, "limitations": [note], "findings": []}))
"""


def _limitation(done: Any) -> str:
    assert len(done.result.limitations) == 1
    return done.result.limitations[0]


# -- 1. the verified images' descriptors reach the reviewer ----------------------------------------------------------


@needs_root
def test_attack_the_reviewer_inherits_host_directory_descriptors(dep: Deployment, skill: tuple[Path, Path], tmp_path: Path) -> None:
    c = make_consumer(tmp_path / "consumer", dep.sha)
    handoff = Path(run(dep, skill, c, tmp_path).handoff)
    body = _RESULT + """
import os, stat
root = os.stat("/")
leaks = []
for name in sorted(os.listdir("/proc/self/fd"), key=int):
    try:
        st = os.stat(f"/proc/self/fd/{name}")
        up = os.stat(f"/proc/self/fd/{name}/..")  # the parent as the host sees it, not as the chroot does
    except OSError:
        continue
    if stat.S_ISDIR(st.st_mode):
        base = os.stat(os.path.dirname(os.environ["ATTEST_IMAGE_BASE"]))
        outside = (up.st_dev, up.st_ino) != (base.st_dev, base.st_ino) and up.st_dev != root.st_dev
        leaks.append(f"{name}->{os.readlink(f'/proc/self/fd/{name}')}{' (parent outside the root)' if outside else ''}")
result("directory descriptors: " + (", ".join(leaks) if leaks else "none"))
"""
    done = run_review_step(handoff, load_policy(dep.trust), dep.state, [PY, "-I", "-c", body], out=tmp_path / "r.json",
                           readonly=HOST_PYTHON)
    assert _limitation(done) == "directory descriptors: none", _limitation(done)


# -- 2. the runtime attestation decides which host directories the reviewer sees ---------------------------------------


def _runtime_attestation(dep: Deployment) -> tuple[Path, dict[str, Any]]:
    doc = test_bootstrap.parse_pins(dep.pins.read_bytes(), str(dep.pins))
    path = dep.state / "builds" / f"{doc['runtime']['name']}.runtime.json"
    return path, doc


def _release_signed_runtime(dep: Deployment, tmp_path: Path, libpython: str) -> tuple[Path, bytes, bytes]:
    """A runtime attestation by the release key (its role) naming an extra 'libpython', and pins that name it.

    The pins' checks (name, inventory, toolchain, lock, interpreter executable, its digest and version) all
    still hold: libpython and stdlib are not compared with anything.
    """
    path, doc = _runtime_attestation(dep)
    original = path.read_bytes()
    st = dict(parse_statement(Envelope.from_json(json.loads(original)).payload))
    interp = st["predicate"]["interpreter"]
    interp["libpython"] = [*interp["libpython"], {"path": libpython, "sha256": "0" * 64}]
    forged = sign_statement(st, load_signer(str(dep.release_key)))
    doc["runtime"]["attestation"] = "sha256:" + hashlib.sha256(forged).hexdigest()
    pins = tmp_path / "deploy" / "pins.toml"
    pins.parent.mkdir()
    pins.write_bytes(test_bootstrap.dump_pins(doc))
    return pins, original, forged


class _Canary:
    """A host service on a world-connectable Unix socket under the host's /run: it answers with a canary."""

    def __init__(self, path: Path, canary: bytes) -> None:
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(str(path))
        os.chmod(path, 0o777)
        self.sock.listen(4)
        self.sock.settimeout(0.2)
        self.stop = False
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stop:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            with conn:
                conn.sendall(CANARY)

    def close(self) -> None:
        self.stop = True
        self.thread.join()
        self.sock.close()
        self.path.unlink(missing_ok=True)


CANARY = b"host-service-canary-7c1e"


@needs_root
@pytest.mark.skipif(not os.path.isdir("/run"), reason="needs a host /run")
def test_attack_a_runtime_attestation_binds_the_hosts_run_into_the_reviewer(dep: Deployment, skill: tuple[Path, Path],
                                                                          tmp_path: Path) -> None:
    sock = Path(f"/run/attest-attack2-{os.getpid()}.sock")
    pins, original, forged = _release_signed_runtime(dep, tmp_path, "/run/attest-attack2-libpython.so")
    att, _ = _runtime_attestation(dep)
    canary = _Canary(sock, CANARY)
    try:
        att.write_bytes(forged)  # where `attest promote` writes it; review exec reads it from there
        c = make_consumer(tmp_path / "consumer", dep.sha)
        handoff = Path(run(dep, skill, c, tmp_path, pins=pins).handoff)
        assert verify_handoff(handoff, load_policy(dep.trust)).runtime_attestation_digest == \
            "sha256:" + hashlib.sha256(forged).hexdigest()
        body = _RESULT + f"""
import socket
try:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(5)
    s.connect({str(sock)!r})
    result("host service said " + s.recv(100).decode())
except OSError as e:
    result("no host service: " + type(e).__name__)
"""
        # The runtime image carries its own interpreter: review exec binds nothing an attestation names.
        done = run_review_step(handoff, load_policy(dep.trust), dep.state, [PY, "-I", "-c", body], out=tmp_path / "r.json",
                               readonly=HOST_PYTHON)
        assert _limitation(done).startswith("no host service"), _limitation(done)
        assert not any(p.startswith("/run") for p in done.confinement.readonly)
    finally:
        att.write_bytes(original)
        canary.close()


@needs_root
def test_attack_a_runtime_attestation_binds_the_worktree_into_the_reviewer(dep: Deployment, skill: tuple[Path, Path],
                                                                         tmp_path: Path) -> None:
    c = make_consumer(tmp_path / "consumer", dep.sha)
    assert os.stat(tmp_path).st_mode & 0o077 == 0  # the host protects the worktree by a private ancestor
    pins, original, forged = _release_signed_runtime(dep, tmp_path, str(c.path / "libpython3.11.so"))
    att, _ = _runtime_attestation(dep)
    try:
        att.write_bytes(forged)
        handoff = Path(run(dep, skill, c, tmp_path, pins=pins).handoff)
        body = _RESULT + f"""
got = []
for p in {[str(c.path / "src.txt"), str(c.path / ".git" / "HEAD")]!r}:
    try:
        open(p, "rb").read(); got.append(p)
    except OSError:
        pass
result("opened: " + " ".join(got) if got else "opened nothing")
"""
        try:  # refused (the worktree lies under /tmp here), or at most that one named file is bound: never its directory
            done = run_review_step(handoff, load_policy(dep.trust), dep.state, [PY, "-I", "-c", body], out=tmp_path / "r.json",
                                   readonly=HOST_PYTHON)
        except VerificationError as e:
            assert {f.code for f in e.findings} == {"HANDOFF_IMAGE_MISMATCH"}
        else:
            assert _limitation(done) == "opened nothing", _limitation(done)
    finally:
        att.write_bytes(original)


@needs_root
def test_refused_a_runtime_attestation_naming_root_as_a_library_directory(dep: Deployment, skill: tuple[Path, Path],
                                                                          tmp_path: Path) -> None:
    """A libpython of "/x" is not named as a libpython is: refused before anything runs (nothing of the host is bound)."""
    pins, original, forged = _release_signed_runtime(dep, tmp_path, "/attest-attack2-libpython.so")
    att, _ = _runtime_attestation(dep)
    try:
        att.write_bytes(forged)
        c = make_consumer(tmp_path / "consumer", dep.sha)
        handoff = Path(run(dep, skill, c, tmp_path, pins=pins).handoff)
        body = _RESULT + f"""
import os
result("sees the worktree" if os.path.exists({str(c.path / 'src.txt')!r}) else "sees nothing of the host")
"""
        done = run_review_step(handoff, load_policy(dep.trust), dep.state, [PY, "-I", "-c", body], out=tmp_path / "r.json",
                               readonly=HOST_PYTHON)
        assert _limitation(done) == "sees nothing of the host", _limitation(done)
        assert "/" not in done.confinement.readonly
    finally:
        att.write_bytes(original)


def test_a_runtime_attestation_swapped_after_the_bootstrap_changes_nothing_the_reviewer_sees(dep: Deployment, skill: tuple[Path, Path],
                                                                                             tmp_path: Path) -> None:
    """review exec reads no runtime attestation: its root is the handoff's images and the system paths, whatever the file says."""
    c = make_consumer(tmp_path / "consumer", dep.sha)
    handoff = Path(run(dep, skill, c, tmp_path).handoff)
    body = _RESULT + "\nresult('ran')\n"
    before = run_review_step(handoff, load_policy(dep.trust), dep.state, [PY, "-I", "-c", body], out=tmp_path / "a.json",
                             readonly=HOST_PYTHON)
    _, original, forged = _release_signed_runtime(dep, tmp_path, "/run/attest-attack2-libpython.so")
    att, _ = _runtime_attestation(dep)
    mode = att.stat().st_mode
    att.chmod(0o644)  # the owner may (root need not): the attacker owns the state as much as we do
    try:
        att.write_bytes(forged)
        after = run_review_step(handoff, load_policy(dep.trust), dep.state, [PY, "-I", "-c", body], out=tmp_path / "b.json",
                                readonly=HOST_PYTHON)
    finally:
        att.write_bytes(original)
        att.chmod(mode)
    assert after.confinement.readonly == before.confinement.readonly
    assert not any(p.startswith("/run") for p in after.confinement.readonly)


# -- 3. the result's paths ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["../../etc/passwd", "src/../../x", "a//b", "./a", "a/.", "a\\..\\b", "a\nb", "src/"])
def test_attack_a_result_finding_path_leaves_the_repository(path: str) -> None:
    doc = {"complete": False, "limitations": ["x"],
           "findings": [{"id": "F1", "severity": "high", "blocking": True, "message": "m", "path": path, "line": 1}]}
    with pytest.raises(VerificationError) as ei:
        parse_result(json.dumps(doc).encode())
    assert ei.value.code == "REVIEW_RESULT_INVALID"


# -- 4. attest exec's argument expansion (pure) ----------------------------------------------------------------------------


@pytest.mark.parametrize("arg", ["$ATTEST_IMAGE_X/a/\n/../b", "$ATTEST_IMAGE_X/a/..", "${ATTEST_IMAGE_X}/../bin/sh",
                                 "$ATTEST_IMAGE_X//etc", "$ATTEST_IMAGE_X/", "$ATTEST_IMAGE_x/bin", "${ATTEST_IMAGE_X/bin}"])
def test_refused_image_references_that_leave_the_image(arg: str) -> None:
    try:
        out = expand_image_refs([arg], {"X": "/s/store/h/tree"})
    except InputError as e:
        assert e.code == "BAD_IMAGE_REF"
        return
    assert out == [arg], out  # left literal (not an image path): never expanded


@pytest.mark.parametrize("arg", ["$ATTEST_IMAGE_X\n/../../bin/sh", "$ATTEST_IMAGE_\uff38/bin/sh", "$ATTEST_IMAGE_X\0/../bin/sh",
                                 "$ATTEST_IMAGE_X /bin/sh", "$ATTEST_IMAGE_X\t"])
def test_refused_image_references_with_unicode_nul_or_newlines_stay_literal(arg: str) -> None:
    assert expand_image_refs([arg], {"X": "/s/store/h/tree"}) == [arg]


# -- 5. signer roles: the release key's signature never counts for a handoff -----------------------------------------------


@pytest.mark.parametrize("fmt", ["dsse", "bundle"])
def test_refused_a_handoff_signed_twice_by_the_release_key_or_with_an_untrusted_key(dep: Deployment, skill: tuple[Path, Path],
                                                                                   tmp_path: Path, fmt: str) -> None:
    """Two release-key signatures (or release + an untrusted key) over a genuine handoff's statement: one signer, not allowed."""
    c = make_consumer(tmp_path / "consumer", dep.sha)
    handoff = Path(run(dep, skill, c, tmp_path).handoff)
    st = dict(parse_statement(Envelope.from_json(json.loads(handoff.read_bytes())).payload))
    release = load_signer(str(dep.release_key))
    forged = tmp_path / f"forged-{fmt}.json"
    if fmt == "dsse":
        doc = json.loads(sign_statement(st, [release, load_signer(str(dep.evil_key))]))
        doc["signatures"] = [doc["signatures"][0], *doc["signatures"]]  # the release signature listed twice
        forged.write_text(json.dumps(doc))
    else:
        forged.write_bytes(sign_statement(st, release, fmt="bundle"))
    ran = tmp_path / "ran"
    with pytest.raises(VerificationError) as ei:
        run_review_step(forged, load_policy(dep.trust), dep.state, ["/bin/touch", str(ran)], out=tmp_path / "r.json")
    assert {f.code for f in ei.value.findings} == {"SIGNER_NOT_FOR_PREDICATE"} and not ran.exists()
