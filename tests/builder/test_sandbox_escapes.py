"""Sandbox escapes and sandbox downgrades found by the 2nd security review; each test failed while its bug was present.

- The sandbox reports ``network_isolated`` and ``filesystem_confined``, but a step running as
  uid 0 without capabilities still reaches host AF_UNIX sockets (network/IPC escape), writes
  host block devices (read-only bind mounts do not cover device nodes) and signals host
  processes (no PID namespace).
- Network isolation is not an input of the input-addressed name, so an isolated build reuses
  (and promotion pins) an output produced without isolation.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import pytest
from support.build import Project
from support.caps import needs_root, require_tool

from attest.builder import Sandbox, build_runtime, fetch, load_lock, load_recipe
from attest.builder._sandbox import STEP_UID_RANGE, pick_step_uid
from attest.errors import AttestError


@pytest.fixture(scope="module")
def sandbox() -> Sandbox:
    return Sandbox.establish(allow_unisolated_network=False)


def _step(sandbox: Sandbox, code: str) -> bytes | None:
    """Run python code as a build step; its stdout, or None when the sandbox refused it."""
    staging = tempfile.mkdtemp(prefix="attest-review-stage-")
    work = os.path.join(staging, "work")
    os.mkdir(work)
    try:
        return sandbox.run(["/usr/bin/python3", "-I", "-c", code], cwd=work, home=work, staging=staging, writable=[work],
                           uid=pick_step_uid()).stdout
    except AttestError:
        return None
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def test_sandboxed_step_cannot_reach_a_host_unix_socket(sandbox: Sandbox, tmp_path: Path) -> None:
    assert sandbox.network_isolated and sandbox.filesystem_confined
    path = tmp_path / "host-daemon.sock"  # stands for /run/docker.sock, an ssh-agent, a proxy ...
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(str(path))
    srv.listen(1)
    _step(sandbox, f"import socket\ns = socket.socket(socket.AF_UNIX)\ns.connect({str(path)!r})\ns.sendall(b'exfiltrated')\n")
    # A connection the step made waits in the listen queue (with what it sent) after the step has
    # exited: a non-blocking accept finds it at once, with no need to wait for it.
    srv.setblocking(False)
    got: list[bytes] = []
    try:
        conn, _ = srv.accept()
    except BlockingIOError:
        pass
    else:
        got.append(conn.recv(100))
        conn.close()
    srv.close()
    assert got == [], "a network-isolated, confined build step talked to a host daemon over an AF_UNIX socket"


@needs_root  # loop devices need root
def test_sandboxed_step_cannot_write_a_host_block_device(sandbox: Sandbox, tmp_path: Path) -> None:
    losetup = require_tool("losetup")  # /usr/sbin, which an ordinary PATH may lack
    backing = tmp_path / "disk.img"
    backing.write_bytes(b"\0" * (1 << 20))
    lo = subprocess.run([losetup, "-f", "--show", str(backing)], capture_output=True, text=True)
    if lo.returncode != 0:
        pytest.skip(f"no loop device here: {lo.stderr.strip()}")
    dev = lo.stdout.strip()
    try:
        _step(sandbox, f"import os\nfd = os.open({dev!r}, os.O_WRONLY)\nos.write(fd, b'ESCAPED' + bytes(505))\nos.fsync(fd)\n")
    finally:
        subprocess.run([losetup, "-d", dev], capture_output=True)
    assert not backing.read_bytes().startswith(b"ESCAPED"), (
        "a 'filesystem_confined' build step wrote a host block device (and so a file outside staging)"
    )


def test_sandboxed_step_cannot_signal_host_processes(sandbox: Sandbox) -> None:
    victim = subprocess.Popen(["sleep", "60"])
    try:
        _step(sandbox, f"import os, signal\nos.kill({victim.pid}, signal.SIGKILL)\n")
        try:
            rc = victim.wait(timeout=3)
        except subprocess.TimeoutExpired:
            rc = None
        assert rc is None, "a build step killed a host process (no PID namespace; root without caps may signal uid 0)"
    finally:
        victim.kill()
        victim.wait()


def test_isolated_build_does_not_reuse_an_unisolated_output(project: Project, sandbox: Sandbox) -> None:
    recipe = load_recipe(project.recipe)
    fetch(load_lock(recipe.lock_path), project.cache, lock_path=recipe.lock_path)
    unisolated = Sandbox.establish(allow_unisolated_network=True, force_unisolated=True)
    first = build_runtime(recipe, project.sha, str(project.store), str(project.cache), unisolated)  # type: ignore[arg-type]
    assert first.network_isolated is False
    # The caller now demands isolation (no --allow-network-unisolated) ...
    second = build_runtime(recipe, project.sha, str(project.store), str(project.cache), sandbox)  # type: ignore[arg-type]
    # ... and silently gets the unisolated output back: isolation is not part of the input address.
    assert second.network_isolated is True or not second.reused, (
        "an isolated build reused an output built without network isolation (isolation is not an input)"
    )


@needs_root  # the rootful sandbox (a uid of its own); tests/builder/test_rootless_sandbox.py covers the rootless one
def test_confined_step_sees_a_minimal_root_as_an_unused_uid(sandbox: Sandbox, tmp_path: Path) -> None:
    secret = tmp_path / "cache-like.txt"
    secret.write_text("host file")
    out = _step(sandbox, (
        "import json, os\n"
        "print(json.dumps({'uid': os.getuid(), 'gid': os.getgid(), 'groups': os.getgroups(), 'pid': os.getpid(),"
        " 'dev': sorted(os.listdir('/dev')), 'procs': sorted(p for p in os.listdir('/proc') if p.isdigit()),"
        f" 'host_file': os.path.exists({str(secret)!r}), 'root': sorted(os.listdir('/')),"
        " 'caps': [l for l in open('/proc/self/status') if l.startswith(('CapEff', 'CapBnd', 'NoNewPrivs'))]}))\n"
    ))
    assert out is not None
    import json

    seen = json.loads(out)
    assert seen["uid"] == seen["gid"] and seen["groups"] == []
    assert STEP_UID_RANGE[0] <= seen["uid"] < STEP_UID_RANGE[1]
    assert len(seen["procs"]) <= 3  # a new PID namespace: its waiting pid 1, the step (and a transient child)
    assert set(seen["dev"]) <= {"null", "zero", "full", "random", "urandom", "fd", "stdin", "stdout", "stderr", "shm"}
    assert seen["host_file"] is False
    assert "work" not in seen["root"] and "root" not in seen["root"] and "sys" not in seen["root"]
    caps = dict(line.split(":") for line in seen["caps"])
    assert int(caps["CapEff"], 16) == 0 and int(caps["CapBnd"], 16) == 0 and caps["NoNewPrivs"].strip() == "1"


@needs_root  # the rootful sandbox (a uid of its own); tests/builder/test_rootless_sandbox.py covers the rootless one
def test_sandbox_reports_what_it_established(sandbox: Sandbox) -> None:
    g = sandbox.guarantees()
    assert g["network_isolated"] and g["filesystem_confined"]
    assert set(g["namespaces"]) == {"net", "mount", "pid", "ipc", "uts"} and "unused" in g["uid"]
    weak = Sandbox.establish(allow_unisolated_network=True, force_unisolated=True).guarantees()
    assert weak["network_isolated"] is False and weak["filesystem_confined"] is False and weak["namespaces"] == []


def test_a_record_claiming_a_weaker_sandbox_is_not_reused(project: Project, sandbox: Sandbox) -> None:
    import json

    from attest.builder import BuildCode
    from attest.builder._outputs import manifest_path

    recipe = load_recipe(project.recipe)
    fetch(load_lock(recipe.lock_path), project.cache, lock_path=recipe.lock_path)
    built = build_runtime(recipe, project.sha, str(project.store), str(project.cache), sandbox)  # type: ignore[arg-type]
    assert built.details["sandbox"]["filesystem_confined"] is True and built.inputs["sandbox"]["network_isolated"] is True
    path = Path(manifest_path(str(project.store), built.name))
    doc = json.loads(path.read_text())
    doc["network_isolated"] = False
    os.chmod(path, 0o644)
    path.write_text(json.dumps(doc))
    with pytest.raises(AttestError) as ei:
        build_runtime(recipe, project.sha, str(project.store), str(project.cache), sandbox)  # type: ignore[arg-type]
    assert ei.value.code == BuildCode.BUILD_RECORD_CONFLICT


def test_promote_refuses_an_unisolated_sandbox(project: Project, tmp_path: Path) -> None:
    from attest.attestation import generate_key, load_signer
    from attest.builder import BuildCode
    from attest.builder._promote import promote

    key = tmp_path / "release.pem"
    generate_key("ed25519", key)
    policy = tmp_path / "policy.toml"
    policy.write_text('threshold = 1\n[[signers]]\nkind = "key"\npublic_key = "release.pub.pem"\n')
    pins = tmp_path / "pins.toml"
    pins.write_bytes(b'[toolchain]\nrevision = "old"\n')
    recipe = load_recipe(project.recipe)
    fetch(load_lock(recipe.lock_path), project.cache, lock_path=recipe.lock_path)
    unisolated = Sandbox.establish(allow_unisolated_network=True, force_unisolated=True)
    with pytest.raises(AttestError) as ei:
        promote(toolchain_rev=project.sha, pins_path=str(pins), signer=load_signer(str(key)), policy_path=str(policy),
                runtime_recipe=recipe, skill_recipe=load_recipe(project.skill_recipe),  # type: ignore[arg-type]
                state=str(project.store), cache=str(project.cache), sandbox=unisolated)
    assert ei.value.code == BuildCode.PROMOTION_REFUSED
    assert pins.read_bytes() == b'[toolchain]\nrevision = "old"\n'


def test_readonly_root_under_tmp_is_visible_not_hidden_by_the_fresh_tmp(sandbox: Sandbox, tmp_path: Path) -> None:
    """A venv in a clone under /tmp must stay visible: the fresh tmpfs /tmp is mounted first.

    Found when `python3 bootstrap.py demo` ran in a clone under /tmp: the build step could not
    find the venv's python because the tmpfs /tmp was mounted over its read-only bind.
    """
    exposed = tmp_path / "exposed"
    exposed.mkdir()
    (exposed / "marker").write_bytes(b"visible\n")
    os.chmod(tmp_path, 0o755)
    staging = tempfile.mkdtemp(prefix="attest-tmp-root-")
    work = os.path.join(staging, "work")
    os.mkdir(work)
    try:
        out = sandbox.run(
            ["/usr/bin/python3", "-I", "-c", f"import sys; sys.stdout.write(open({str(exposed / 'marker')!r}).read())"],
            cwd=work,
            home=work,
            staging=staging,
            writable=[work],
            uid=pick_step_uid(),
            readonly=[str(exposed)],
        ).stdout
    finally:
        subprocess.run(["rm", "-rf", staging], check=False)
    assert out == b"visible\n"
