"""What the confined reviewer's root holds: never the host's /etc, homes, /var, /run, /tmp or the state directory.

The attack review's finding: a rootless reviewer ran as the caller with the host's ``/etc`` bound in,
read the deployment's 0600 key there, and the key ended up in the result while the record said
``confined: true``. Here a real shell reviewer, run through ``attest review exec`` over
test_bootstrap's deployment (a real promotion, installation, bootstrap and signed handoff), tries
``cat`` on a 0600 file of the caller's under ``/etc``, ``$HOME``, ``~/.ssh``, ``/tmp``, the state
directory and the deployment's key path, and prints what it got, hex-encoded, into its result and
verbatim on its standard error. As root the reviewer is confined rootful; when the suite runs as an
ordinary user (and, from a root run, in ``test_the_same_reviewer_as_an_ordinary_user``, which runs
these tests again as uid ``nobody``), rootless: the caller's own uid in a user namespace, where only
its root keeps the files away.
"""

# The bootstrap fixtures (dep, skill) are imported from test_bootstrap, so their parameters shadow the imports.

from __future__ import annotations

import importlib.metadata
import json
import os
import pwd
import re
import secrets
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement
from test_bootstrap import Deployment, make_consumer, run

from attest.attestation import load_policy
from attest.builder._sandbox import SYSTEM_PATHS, confine_argv, confined_roots, loopback_tool, readonly_roots
from attest.review.handoff import run_review_step, verify_handoff
from attest.review.handoff._run import (
    CA_BUNDLES,
    SENSITIVE_ROOTS,
    EtcFile,
    decide_exposure,
    read_host_file,
    reviewer_etc,
)

PY = sys.executable
# The reviewer's own network namespace: its loopback up where `ip` is there to bring it up.
ISOLATED = "loopback" if loopback_tool() is not None else "none"
ROOT = Path(__file__).resolve().parents[2]
IS_ROOT = os.geteuid() == 0
MODE = "rootful" if IS_ROOT else "rootless"
#: Set by test_the_same_reviewer_as_an_ordinary_user: a 0600 file of that user's under /etc (which it cannot create itself).
ETC_SECRET_VAR = "ATTEST_TEST_ETC_SECRET"

# The reviewer: for each path given, cat it (verbatim to stderr; hex-encoded into a limitation of its
# result), then what its root holds. Each probe is "NAME=HEX" of the command's stdout and stderr.
REVIEWER = r"""
out=""
say() { n="$1"; shift; h=$( { "$@"; } 2>&1 | od -An -v -tx1 | tr -d ' \n'); out="$out\"$n=$h\", "; }
for f in "$@"; do
  printf '== %s\n' "$f" >&2
  cat -- "$f" >&2 2>&1
  say "cat:$f" cat -- "$f"
done
say uid id -u
say gid id -g
say whoami id -un
say root ls -A /
say etc ls -A /etc
say etc-tree find /etc
say passwd cat /etc/passwd
say group cat /etc/group
say hosts cat /etc/hosts
say nsswitch cat /etc/nsswitch.conf
say resolv cat /etc/resolv.conf
say tmp ls -A /tmp
say var ls -A /var
say run ls -A /run
say home ls -A /home
say write-etc sh -c ': > /etc/passwd'
say new-etc sh -c ': > /etc/evil'
say chmod-etc chmod 666 /etc/passwd
printf '{"complete": false, "limitations": [%s"end"], "findings": []}' "$out"
"""


@dataclass
class Secrets:
    """0600 files of the caller's, each holding a unique marker, and the deployment key's own text."""

    files: dict[str, Path]  # what -> path
    markers: list[bytes]
    home: Path


def _writable_home(tmp: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The caller's real home when it may write there (root: /root), else a fresh one it is given as $HOME."""
    for candidate in (os.environ.get("HOME", ""), pwd.getpwuid(os.getuid()).pw_dir):
        if candidate and os.path.isdir(candidate) and os.access(candidate, os.W_OK) and os.path.realpath(candidate) != "/":
            monkeypatch.setenv("HOME", candidate)
            return Path(candidate)
    home = tmp / "home"
    home.mkdir(mode=0o700)
    monkeypatch.setenv("HOME", str(home))
    return home


@pytest.fixture
def leaks(dep: Deployment, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Secrets]:
    token = secrets.token_hex(8)
    home = _writable_home(tmp_path, monkeypatch)
    made: list[Path] = []
    files: dict[str, Path] = {}
    markers: list[bytes] = []

    def secret(what: str, path: Path) -> None:
        marker = f"attest-leak-{what}-{token}".encode()
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(b"-----BEGIN PRIVATE KEY-----\n" + marker + b"\n-----END PRIVATE KEY-----\n")
        made.append(path)
        files[what] = path
        markers.append(marker)

    ssh = home / ".ssh"
    ssh_made = not ssh.exists()
    if ssh_made:
        ssh.mkdir(mode=0o700)
    etc_dir = Path(f"/etc/attest-leak-{token}")
    try:
        if IS_ROOT:  # the finding's own case: the deployment's key under /etc (an ordinary user cannot write /etc)
            etc_dir.mkdir(mode=0o700)
            secret("etc", etc_dir / "deploy.pem")
            shutil.copyfile(dep.key, etc_dir / "deploy-key.pem")
            os.chmod(etc_dir / "deploy-key.pem", 0o600)
            files["etc-deploy-key"] = etc_dir / "deploy-key.pem"
        secret("home", home / f".attest-leak-{token}")
        secret("ssh", ssh / f"id_attest_leak_{token}")
        secret("state", dep.state / f"leak-{token}.pem")
        secret("tmp", tmp_path / "leak.pem")
        given = os.environ.get(ETC_SECRET_VAR)  # as nobody, from a root run: a 0600 file of ours under /etc
        if not IS_ROOT and given and os.path.isfile(given) and os.stat(given).st_uid == os.getuid():
            files["etc"] = Path(given)
            markers.append(Path(given).read_bytes().strip())
        files["deploy-key"] = dep.key
        assert stat.S_IMODE(dep.key.stat().st_mode) == 0o600
        body = b"".join(dep.key.read_bytes().splitlines()[1:-1])  # the key's base64, without its armour
        markers.append(body)
        yield Secrets(files, markers, home)
    finally:
        for p in made:
            p.unlink(missing_ok=True)
        if IS_ROOT:
            shutil.rmtree(etc_dir, ignore_errors=True)
        if ssh_made:
            shutil.rmtree(ssh, ignore_errors=True)


def _probes(limitations: list[str]) -> dict[str, bytes]:
    out = {}
    for item in limitations[:-1]:
        name, _, hexed = item.rpartition("=")
        out[name] = bytes.fromhex(hexed)
    assert limitations[-1] == "end"
    return out


def _exec(dep: Deployment, handoff: Path, out: Path, paths: list[str], *options: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([PY, "-m", "attest", "review", "exec", "--handoff", str(handoff), "--policy", str(dep.trust),
                           "--state-dir", str(dep.state), "-o", str(out), "--json", *options, "--",
                           "/bin/sh", "-c", REVIEWER, "reviewer", *paths], capture_output=True, check=False, cwd=ROOT)


@pytest.fixture
def handoff(dep: Deployment, skill: tuple[Path, Path], tmp_path: Path) -> Path:
    c = make_consumer(tmp_path / "consumer", dep.sha)
    return Path(run(dep, skill, c, tmp_path).handoff)


def _names_under_etc(files: list[dict[str, Any]]) -> set[str]:
    return {f["path"].split("/")[2] for f in files}


# -- the finding, end to end -----------------------------------------------------------------------------------------


def test_the_reviewer_reads_nothing_of_its_caller(dep: Deployment, handoff: Path, leaks: Secrets, tmp_path: Path) -> None:
    out = tmp_path / "result.json"
    proc = _exec(dep, handoff, out, [str(p) for p in leaks.files.values()])
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    doc = json.loads(proc.stdout)
    result = out.read_bytes()
    got = _probes(json.loads(result)["limitations"])
    # Nothing of any secret, anywhere: the result, the reviewer's stderr, exec's own output.
    for marker in leaks.markers:
        for where, data in (("result", result), ("stderr", proc.stderr), ("stdout", proc.stdout), *got.items()):
            assert marker not in data, f"{where} holds a secret of the caller's"
    for what, path in leaks.files.items():
        assert got[f"cat:{path}"].strip().endswith(b"No such file or directory"), (what, got[f"cat:{path}"])

    c = doc["confinement"]
    assert c["confined"] is True and c["mode"] == MODE and c["network"] == ISOLATED and "net" in c["namespaces"]
    assert int(got["uid"]) == c["uid"] and int(got["gid"]) == c["gid"] and got["whoami"] == b"reviewer\n"
    if IS_ROOT:
        assert c["uid"] != 0 and c["gid"] == c["uid"] and "user" not in c["namespaces"]
    else:
        assert (c["uid"], c["gid"]) == (os.getuid(), os.getgid()) and c["namespaces"][0] == "user"
    # The exact read-only roots: the system paths without /etc, and nothing at or under /etc, a home, /tmp or the state.
    system = [p for p in SYSTEM_PATHS if p != "/etc" and os.path.lexists(p)]
    assert c["readonly"][:len(system)] == system
    for root in c["readonly"]:
        assert root != "/etc" and not root.startswith("/etc/"), root
        for path in leaks.files.values():
            assert not str(path.resolve()).startswith(root.rstrip("/") + "/"), (root, path)
    assert all(e["path"] in c["readonly"] for e in c["exposes"])
    assert {e["path"] for e in c["exposes"]} <= set(c["readonly"][len(system):])  # at most the runtime's interpreter files
    # /etc: synthesized, and the record says what it holds.
    etc = c["etc"]
    assert etc["source"] == "synthesized" and etc["host_paths"] == []
    paths = {f["path"]: f for f in etc["files"]}
    assert {"/etc/passwd", "/etc/group", "/etc/hosts", "/etc/nsswitch.conf"} <= set(paths)
    assert all(paths[p]["from"] == "synthesized" for p in ("/etc/passwd", "/etc/group", "/etc/hosts", "/etc/nsswitch.conf"))
    if os.path.isfile("/etc/ld.so.cache"):
        assert paths["/etc/ld.so.cache"]["from"] == "/etc/ld.so.cache"
    bundle = next((b for b in CA_BUNDLES if os.path.isfile(b)), None)
    if bundle is not None:
        assert bundle in paths
    assert "/etc/resolv.conf" not in paths  # no --network
    # What the reviewer saw there is exactly that: no host file.
    assert set(got["etc"].decode().split()) == _names_under_etc(etc["files"])
    tree = {"/etc", *paths}
    for p in paths:
        while (p := os.path.dirname(p)) != "/":
            tree.add(p)
    assert sorted(got["etc-tree"].decode().split()) == sorted(tree)
    assert f"reviewer:x:{c['uid']}:{c['gid']}:".encode() in got["passwd"]
    host_users = {line.split(":")[0] for line in Path("/etc/passwd").read_text().splitlines() if line}
    assert {line.split(b":")[0].decode() for line in got["passwd"].splitlines()} - {"root", "reviewer", "nobody"} == set()
    assert host_users - {"root", "nobody"}, "the host has accounts of its own to leave out"
    assert got["hosts"].startswith(b"127.0.0.1\tlocalhost") and b"dns" not in got["nsswitch"]
    assert b"No such file" in got["resolv"]
    assert b"Read-only file system" in got["write-etc"] and b"Read-only file system" in got["new-etc"]
    assert b"Read-only file system" in got["chmod-etc"]
    # Its /tmp, /run are empty tmpfs (below /tmp only the images' and run directories' mount points); no /home.
    assert got["run"] == b"" and b"No such file" in got["home"]
    assert set(got["var"].split()) <= {b"tmp", b"run"}
    # The serialized record (what `review serialize` signs) states the same confinement.
    assert json.loads(json.dumps(c)) == c


def test_run_review_step_records_the_confinement_it_established(dep: Deployment, handoff: Path, leaks: Secrets,
                                                                 tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    paths = [str(p) for p in leaks.files.values()]
    done = run_review_step(handoff, load_policy(dep.trust), dep.state, ["/bin/sh", "-c", REVIEWER, "reviewer", *paths],
                           out=tmp_path / "r.json")
    err = capfd.readouterr().err.encode()
    got = _probes(list(done.result.limitations))
    for marker in leaks.markers:
        assert marker not in err and not any(marker in v for v in got.values())
    c = done.confinement
    assert c.confined and c.mode == MODE and c.uid == int(got["uid"]) and c.network == ISOLATED
    assert c.readonly == confined_roots(c.readonly, host_etc=False) and "/etc" not in c.readonly
    images = verify_handoff(handoff, load_policy(dep.trust)).images
    assert sorted(c.images) == sorted(i.path for i in images.values())
    assert all(w.startswith(f"{dep.state}/runs/") for w in c.writable)
    assert done.to_json()["confinement"] == c.to_json()


# -- --readonly: the caller's explicit choice, recorded ----------------------------------------------------------------


def test_readonly_etc_home_and_state_are_bound_only_as_asked_and_recorded(dep: Deployment, handoff: Path, leaks: Secrets,
                                                                          tmp_path: Path) -> None:
    link = tmp_path / "innocent"
    link.symlink_to("/etc")  # a link is bound (and recorded) as what it leads to
    out = tmp_path / "result.json"
    # (A part of the state: all of it would hide the images below its 0700 root from a rootful reviewer.)
    builds = dep.state / "builds"
    proc = _exec(dep, handoff, out, [], "--readonly", str(link), "--readonly", str(leaks.home), "--readonly", str(builds))
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    c = json.loads(proc.stdout)["confinement"]
    home, state = os.path.realpath(leaks.home), os.path.realpath(dep.state)
    assert {"/etc", home, f"{state}/builds"} <= set(c["readonly"]) and str(link) not in c["readonly"]
    exposes = {e["path"]: e["reaches"] for e in c["exposes"]}
    assert "the host's /etc" in exposes["/etc"]
    assert f"the caller's home {home}" in exposes[home]
    assert f"the state directory {state}" in exposes[f"{state}/builds"]
    assert c["etc"]["source"] == "host" and c["etc"]["host_paths"] == ["/etc"]
    got = _probes(json.loads(out.read_bytes())["limitations"])
    assert set(got["etc"].decode().split()) == set(os.listdir("/etc"))  # the host's /etc, as asked, and as the record says
    if IS_ROOT:
        assert b"Permission denied" in got["write-etc"] or b"Read-only" in got["write-etc"]
    else:
        assert b"Read-only file system" in got["write-etc"]


def test_with_network_the_reviewer_gets_the_hosts_resolver_configuration(dep: Deployment, handoff: Path, tmp_path: Path) -> None:
    out = tmp_path / "result.json"
    proc = _exec(dep, handoff, out, [], "--network")
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    c = json.loads(proc.stdout)["confinement"]
    got = _probes(json.loads(out.read_bytes())["limitations"])
    assert c["network"] == "host" and "net" not in c["namespaces"] and b"dns" in got["nsswitch"]
    files = {f["path"]: f for f in c["etc"]["files"]}
    try:
        want, source = read_host_file("/etc/resolv.conf")
    except ValueError as e:
        assert "/etc/resolv.conf" not in files and b"No such file" in got["resolv"]
        assert any(o["path"] == "/etc/resolv.conf" and str(e) in o["why"] for o in c["etc"]["omitted"])
    else:
        assert files["/etc/resolv.conf"]["from"] == source and got["resolv"] == want


# -- the pieces ----------------------------------------------------------------------------------------------------------


def test_read_host_file_copies_only_roots_files_through_roots_directories(tmp_path: Path) -> None:
    data, source = read_host_file("/etc/passwd")
    assert data == Path("/etc/passwd").read_bytes() and source == "/etc/passwd"
    if os.path.islink("/bin") and os.path.isfile("/bin/sh"):  # a link of root's, in root's directory: followed
        assert read_host_file("/bin/sh", max_bytes=64 << 20)[1] == os.path.realpath("/bin/sh")
    with pytest.raises(ValueError, match="No such file"):
        read_host_file("/etc/attest-no-such-file")
    # /tmp is everyone's: nothing there (a file, a link planted to a host file) is taken.
    planted = tmp_path / "passwd"
    planted.symlink_to("/etc/passwd")
    for p in (planted, tmp_path):
        with pytest.raises(ValueError, match="not root's alone"):
            read_host_file(str(p))
    with pytest.raises(ValueError, match="not a regular file"):
        read_host_file("/dev/null")
    with pytest.raises(ValueError, match="more than 4 bytes"):
        read_host_file("/etc/passwd", max_bytes=4)
    with pytest.raises(ValueError, match="not an absolute path"):
        read_host_file("etc/passwd")


@pytest.mark.skipif(not IS_ROOT, reason="needs root to make files of root's and of another owner")
def test_read_host_file_refuses_a_file_or_directory_root_does_not_own_alone() -> None:
    parent = next((p for p in ("/run", "/var/lib", "/") if os.path.isdir(p) and os.stat(p).st_uid == 0
                   and not os.stat(p).st_mode & 0o022), "/")
    top = Path(parent) / f"attest-etc-test-{secrets.token_hex(4)}"
    top.mkdir(mode=0o755)
    try:
        (top / "ok").write_text("root's\n")
        assert read_host_file(str(top / "ok")) == (b"root's\n", str(top / "ok"))
        os.chown(top / "ok", 12345, 12345)
        with pytest.raises(ValueError, match="the file is not root's alone"):
            read_host_file(str(top / "ok"))
        os.chown(top / "ok", 0, 0)
        (top / "ok").chmod(0o664)
        with pytest.raises(ValueError, match="the file is not root's alone"):
            read_host_file(str(top / "ok"))
        (top / "ok").chmod(0o644)
        top.chmod(0o775)
        with pytest.raises(ValueError, match=f"the directory {top} is not root's alone"):
            read_host_file(str(top / "ok"))
        top.chmod(0o755)
        (top / "sub").mkdir()
        (top / "sub" / "f").write_text("planted\n")
        os.chown(top / "sub", 12345, 12345)
        (top / "link").symlink_to(top / "sub" / "f")  # a link of root's into a directory another uid owns
        with pytest.raises(ValueError, match=f"the directory {top}/sub is not root's alone"):
            read_host_file(str(top / "link"))
        # '..' goes back along the directories already opened, never through the kernel's '..' of
        # the other uid's directory: nothing in it was looked up, so nothing of it decides.
        (top / "up").symlink_to("sub/../ok")
        assert read_host_file(str(top / "up")) == (b"root's\n", str(top / "ok"))
        (top / "down").symlink_to("sub/f/..")
        with pytest.raises(ValueError, match=f"the directory {top}/sub is not root's alone"):
            read_host_file(str(top / "down"))
    finally:
        shutil.rmtree(top)


def test_reviewer_etc_names_its_ids_and_copies_only_what_read_allows() -> None:
    def refuse(path: str) -> tuple[bytes, str]:
        raise ValueError("refused")

    files, omitted = reviewer_etc(uid=2130706433, gid=2130706433, home="/s/runs/r/home", network=False, read=refuse)
    by_path = {e.path: (e, data) for e, data in files}
    assert sorted(by_path) == ["/etc/group", "/etc/hosts", "/etc/nsswitch.conf", "/etc/passwd"]
    passwd = by_path["/etc/passwd"][1].decode()
    assert "reviewer:x:2130706433:2130706433:attest reviewer:/s/runs/r/home:/usr/sbin/nologin\n" in passwd
    assert [line.split(":")[0] for line in passwd.splitlines()] == ["root", "reviewer", "nobody"]
    assert all(isinstance(e, EtcFile) and e.source == "synthesized" for e, _ in files)
    assert [p for p, _ in omitted] == ["/etc/ld.so.cache", "CA certificates"]
    assert all("refused" in why for _, why in omitted)
    # The overflow id is named once; a home that passwd cannot hold is none; with --network, resolv.conf is asked for.
    files, omitted = reviewer_etc(uid=65534, gid=65534, home="/a:b/home", network=True, read=refuse)
    passwd = dict((e.path, d) for e, d in files)["/etc/passwd"].decode()
    assert passwd.count(":65534:") == 1 and "/a:b" not in passwd and "/nonexistent" in passwd
    assert [p for p, _ in omitted] == ["/etc/ld.so.cache", "CA certificates", "/etc/resolv.conf"]
    assert b"hosts: files dns" in dict((e.path, d) for e, d in files)["/etc/nsswitch.conf"]


@pytest.mark.parametrize(("roots", "want"), [
    (("/usr", "/work/venv"), ()),
    (("/etc",), (("/etc", ("the host's /etc",)),)),
    (("/etc/ssl/certs",), (("/etc/ssl/certs", ("the host's /etc",)),)),
    (("/srv",), (("/srv", ("the state directory /srv/state",)),)),       # holds the state
    (("/srv/state/store",), (("/srv/state/store", ("the state directory /srv/state",)),)),
    (("/home/me/.pyenv", "/opt/x"), (("/home/me/.pyenv", ("the host's /home", "the caller's home /home/me")),)),
    (("/srv/statefoo",), ()),                                             # a sibling, not the state
])
def test_decide_exposure(roots: tuple[str, ...], want: tuple[tuple[str, tuple[str, ...]], ...]) -> None:
    sensitive = [(p, f"the host's {p}") for p in SENSITIVE_ROOTS]
    sensitive += [("/home/me", "the caller's home /home/me"), ("/srv/state", "the state directory /srv/state")]
    assert decide_exposure(roots, sensitive) == want


def test_build_steps_keep_the_hosts_etc_and_the_reviewer_never_gets_it(tmp_path: Path) -> None:
    assert confined_roots(["/usr", str(tmp_path)]) == readonly_roots(["/usr", str(tmp_path)])
    assert "/etc" in confined_roots([]) and "/etc" not in confined_roots([], host_etc=False)
    assert confined_roots(["/etc/ssl"], host_etc=False)[-1] == "/etc/ssl"  # only as asked
    root = tmp_path / "run"
    root.mkdir(mode=0o700)
    argv = confine_argv(["/bin/true"], root_parent=str(root), cwd="/", readonly=[], writable=[], uid=12345)
    assert "/etc" in argv and not any(a.startswith("file:") for a in argv)
    argv = confine_argv(["/bin/true"], root_parent=str(root), cwd="/", readonly=[], writable=[], uid=12345, etc=[(7, "/etc/passwd")])
    assert "/etc" not in argv[:argv.index("--", argv.index("0022"))] and "file:7:/etc/passwd" in argv
    for bad in ("/etc/../root/x", "/etcx", "/tmp/passwd", "/etc/a\nb", "/etc/a:b"):
        with pytest.raises(ValueError):
            confine_argv(["/bin/true"], root_parent=str(root), cwd="/", readonly=[], writable=[], uid=12345, etc=[(7, bad)])


# -- the same tests as an ordinary user (rootless), from a root run ------------------------------------------------------


def _closure(*names: str) -> list[importlib.metadata.Distribution]:
    """The installed distributions ``names`` need to run (their requirements, without extras), ``names`` too but attest."""
    seen: dict[str, importlib.metadata.Distribution] = {}
    todo = list(names)
    while todo:
        name = todo.pop()
        key = re.sub(r"[-_.]+", "-", name).lower()
        if key in seen:
            continue
        dist = importlib.metadata.distribution(name)
        seen[key] = dist
        for spec in dist.requires or ():
            req = Requirement(spec)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return [d for k, d in seen.items() if k != "attest"]


def _python_for(uid: int) -> str | None:
    """A Python >= 3.11 with venv that ``uid`` can run and read (a build hashes it): this one's base, else the system's."""
    for candidate in (os.path.realpath(getattr(sys, "_base_executable", sys.executable)), "/usr/bin/python3"):
        probe = subprocess.run(["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", candidate, "-I", "-c",
                                "import os, sys, venv; open(os.path.realpath(sys.executable), 'rb').close(); "
                                "sys.exit(sys.version_info < (3, 11))"],
                               capture_output=True, cwd="/", check=False)
        if probe.returncode == 0:
            return candidate
    return None


@pytest.mark.skipif(not IS_ROOT, reason="needs root to run the tests again as uid nobody (as that user they run rootless directly)")
def test_the_same_reviewer_as_an_ordinary_user(tmp_path_factory: pytest.TempPathFactory) -> None:
    """This module's tests again, as uid ``nobody``: its own deployment, and the reviewer confined rootless (as the caller)."""
    try:
        user = pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("no 'nobody' user")
    if shutil.which("setpriv") is None or shutil.which("unshare") is None:
        pytest.skip("no setpriv or unshare")
    python = _python_for(user.pw_uid)
    if python is None:
        pytest.skip("no Python >= 3.11 (with venv) on this machine that uid 'nobody' can run")
    as_nobody = ["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--clear-groups"]
    userns = subprocess.run([*as_nobody, "unshare", "--user", "--map-root-user", "true"], capture_output=True, cwd="/", check=False)
    if userns.returncode != 0:
        pytest.skip(f"unprivileged user namespaces do not work here: {userns.stderr.decode()[-200:]}")
    base = Path(tempfile.mkdtemp(prefix="attest-reviewer-nobody-"))
    etc_dir = Path(f"/etc/attest-leak-nobody-{secrets.token_hex(8)}")
    try:
        os.chmod(base, 0o755)
        subprocess.run([python, "-m", "venv", "--without-pip", str(base / "venv")], check=True, capture_output=True)
        site = Path(subprocess.run([str(base / "venv" / "bin" / "python"), "-I", "-c",
                                    "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                   check=True, capture_output=True, text=True).stdout.strip())
        ignore = shutil.ignore_patterns("__pycache__")
        shutil.copytree(ROOT / "attest", site / "attest", ignore=ignore)  # importable without the checkout (build steps run -I)
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
        # The finding's case: the caller's own 0600 key under /etc, which a rootless reviewer (the caller's uid) could read.
        etc_dir.mkdir(mode=0o700)
        key = etc_dir / "deploy.pem"
        key.write_text(f"-----BEGIN PRIVATE KEY-----\nattest-leak-etc-nobody-{secrets.token_hex(8)}\n-----END PRIVATE KEY-----\n")
        key.chmod(0o600)
        os.chown(key, user.pw_uid, user.pw_gid)
        os.chown(etc_dir, user.pw_uid, user.pw_gid)
        proc = subprocess.run(
            [*as_nobody, str(base / "venv" / "bin" / "python"), "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider",
             f"--basetemp={base / 'tmp' / 'pytest'}", "-k", "not ordinary_user", "tests/review/test_reviewer_root.py"],
            capture_output=True, text=True, timeout=900, cwd=repo, check=False,
            env={"PATH": "/usr/bin:/bin", "HOME": str(base / "home"), "LC_ALL": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1",
                 ETC_SECRET_VAR: str(key)})
        assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
        passed = set(re.findall(r"^PASSED tests/review/test_reviewer_root\.py::(\w+)", proc.stdout, re.M))
        # The end-to-end reviewers all ran, rootless (their MODE asserts it), none skipped.
        assert {"test_the_reviewer_reads_nothing_of_its_caller", "test_run_review_step_records_the_confinement_it_established",
                "test_readonly_etc_home_and_state_are_bound_only_as_asked_and_recorded",
                "test_with_network_the_reviewer_gets_the_hosts_resolver_configuration"} <= passed, proc.stdout[-3000:]
    finally:
        shutil.rmtree(etc_dir, ignore_errors=True)
        subprocess.run(["chattr", "-R", "-f", "-i", str(base)], check=False, capture_output=True)
        shutil.rmtree(base, ignore_errors=True)
