"""Attacks on the reviewer's new inputs: the change image, the example reviewer, the agent adapter, anchors, loopback.

Every test asserts the SAFE behaviour: a failing test is a hole. Real git repositories (test_review_change's
module consumer, one head per test), real frozen images, real confined reviewers (rootful when run as root),
real host listeners for the loopback checks.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import unicodedata
from pathlib import Path
from typing import Any

import pytest
import test_bootstrap
import test_review_agent
import test_review_change
import test_review_serialize
import test_review_start
from support import deployment
from support.caps import BACKEND
from support.gitrepo import git

from attest._json import canonical_bytes
from attest.attestation import CLOSED_TREE_PREDICATE, load_policy
from attest.errors import AttestError
from attest.git import ChangedPath, ChangedSurface, Hunk
from attest.review.agent import decide_result, parse_output, review_agent
from attest.review.agent._parse import AgentFinding, AgentOutput
from attest.review.handoff import ResultFinding
from attest.review.procedure import anchor, run_review

Repo = test_review_change.Repo
pr = test_review_change.pr
state_of = test_review_change.state_of
limitations = test_review_change.limitations
needs_confinement = test_review_change.needs_confinement
exec_for = test_review_serialize.exec_for
serialize = test_review_serialize.serialize
git_changed_lines = test_review_serialize.git_changed_lines
codes = test_review_serialize.codes
fails = test_review_start.fails
start = test_review_start.start
PY = sys.executable
ROOT = Path(__file__).resolve().parents[2]
HOST_PYTHON = test_review_serialize.HOST_PYTHON


DIVERGE_OLD = ["a", "a", "b", "b", "b", "b", "a", "a", "b"]
DIVERGE_NEW = ["a", "b", "a", "b", "a", "a", "b", "b", "b", "b", "b"]
OLD_PY = b"a = 1\reval(y)\nb = 2\n"


@pytest.fixture(scope="module")
def arepo(dep: Any, tmp_path_factory: pytest.TempPathFactory) -> Repo:
    """test_review_change's consumer, whose base also holds rep.txt (lines that diff ambiguously) and old.py (a \\r)."""
    from attest.attestation import load_signer
    from attest.builder import install_skill

    tmp = tmp_path_factory.mktemp("attack-inputs")
    (tmp / "skills").mkdir()
    installed = install_skill(dep.pins, dep.state, tmp / "skills" / "agent-policy", load_signer(str(dep.key)),
                              policy=load_policy(dep.trust))
    c = test_bootstrap.make_consumer(tmp / "consumer", dep.sha)
    (c.path / "rep.txt").write_text("".join(f"{x}\n" for x in DIVERGE_OLD))
    (c.path / "old.py").write_bytes(OLD_PY)
    git(c.path, "add", "-A")
    git(c.path, "commit", "-qm", "base files")
    base = git(c.path, "rev-parse", "HEAD")
    c = test_bootstrap.Consumer(c.path, base, base)
    handoff = Path(test_bootstrap.run(dep, (Path(installed.installed_root), Path(installed.attestation)), c, tmp).handoff)
    r = Repo(c.path, base, handoff, tmp)
    r.installation = Path(installed.attestation)  # type: ignore[attr-defined]
    return r


def started(dep: Any, r: Repo, tag: str, change: Any) -> tuple[Any, str, dict[str, Any]]:
    s = pr(r, tag, change)
    review = start(dep, s).review
    return s, review, state_of(dep, review)


def commit_all(path: Path) -> None:
    git(path, "add", "-A")


def py_reviewer(script: str) -> list[str]:
    """A confined reviewer: the host's Python (bound read-only) running ``script``, which prints a result."""
    return [PY, "-I", "-c", script]


RESULT_OF_SEEN = """
import json, sys
def done(seen):
    sys.stdout.write(json.dumps({"complete": False, "findings": [], "limitations": [f"{k}={v}" for k, v in seen.items()] or ["none"]}))
"""


# == 1. the change image: links, loader, host paths ====================================================================

def links_change(state: str) -> Any:
    def change(path: Path) -> None:
        for name, target in (("up", ".."), ("upup", "../../../.."), ("shadow", "/etc/shadow"), ("state", state),
                             ("root", "/"), ("self", "self"), ("dir/into", "../src.txt")):
            (path / name).parent.mkdir(parents=True, exist_ok=True)
            os.symlink(target, path / name)
        (path / "dir" / "plain.txt").write_text("plain\n")
        commit_all(path)
    return change


LINKS_SCRIPT = RESULT_OF_SEEN + r"""
import os
C = os.environ["ATTEST_IMAGE_CHANGE"]
STATE = sys.argv[1]
seen = {}
for dirpath, dirnames, filenames in os.walk(C):
    for n in dirnames + filenames:
        p = os.path.join(dirpath, n)
        if os.path.islink(p):
            seen["link:" + os.path.relpath(p, C)] = os.readlink(p)
for name in ("up", "upup", "shadow", "state", "root", "self", "dir/into"):
    if os.path.lexists(os.path.join(C, "head", name)):
        seen["present:" + name] = "yes"
for p in ("/etc/shadow", STATE + "/reviews", STATE + "/results", STATE + "/keys"):
    try:
        os.listdir(p) if os.path.isdir(p) else open(p, "rb").read(1)
        seen["readable:" + p] = "yes"
    except OSError:
        pass
# What of the state directory is visible at all: only the path to the images.
try:
    seen["state_entries"] = ",".join(sorted(os.listdir(STATE)))
except OSError as e:
    seen["state_entries"] = "error:" + e.strerror
# Of the runs, only its own run directory (the path to its scratch directories).
seen["other_runs"] = ",".join(sorted(set(os.listdir(STATE + "/runs")) - {os.path.basename(os.environ["ATTEST_RUN_DIR"])}))
done(seen)
"""


@needs_confinement
def test_symbolic_links_of_the_head_reach_nothing(dep: Any, arepo: Repo, tmp_path: Path) -> None:
    s, review, state = started(dep, arepo, "links", links_change(str(dep.state)))
    kinds = {x["path"]: x["kind"] for x in json.loads((Path(state["change"]["path"]) / "review.json").read_bytes())["not_materialized"]}
    assert kinds == {n: "symlink" for n in ("up", "upup", "shadow", "state", "root", "self", "dir/into")}
    out = exec_for(dep, s, review, tmp_path, argv=[*py_reviewer(LINKS_SCRIPT), str(dep.state)])
    seen = limitations(out)
    assert not [k for k in seen if k.startswith(("link:", "present:", "readable:"))], seen
    # The state directory is a path leading to the store, nothing else of it (no reviews, results, runs, keys).
    assert seen["state_entries"] == "runs,store" and seen["other_runs"] == "", seen


def elf_change(path: Path) -> None:
    shutil.copyfile("/bin/true", path / "elf")
    os.chmod(path / "elf", 0o755)
    (path / "run.sh").write_text("#!/bin/sh\necho ran\n")
    os.chmod(path / "run.sh", 0o755)
    commit_all(path)


LOADER_SCRIPT = r"""
C="$ATTEST_IMAGE_CHANGE/head"
out=""
add() { out="$out${out:+, }\"$1\""; }
"$C/elf" 2>/dev/null && add "direct_ran"
for ld in /lib64/ld-linux-x86-64.so.2 /lib/ld-linux-aarch64.so.1 /lib/ld-musl-x86_64.so.1; do
  if [ -x "$ld" ]; then
    add "loader=$ld"
    "$ld" "$C/elf" 2>"$TMPDIR/ld.err" && add "loader_ran"
    add "loader_err=$(tr -d '\"\n' < "$TMPDIR/ld.err" | tail -c 100)"
  fi
done
printf '{"complete": false, "limitations": [%s], "findings": []}' "$out"
"""


@needs_confinement
def test_no_program_of_the_change_runs_through_the_loader(dep: Any, arepo: Repo, tmp_path: Path) -> None:
    s, review, _ = started(dep, arepo, "elf", elf_change)
    out = exec_for(dep, s, review, tmp_path, argv=["/bin/sh", "-c", LOADER_SCRIPT])
    seen = limitations(out)
    assert "loader" in seen, seen  # the host's dynamic loader is in the confinement: the check is real
    assert "direct_ran" not in seen and "loader_ran" not in seen, seen


# == 2. loopback: the reviewer's own, never the host's =================================================================

LOOPBACK_SCRIPT = RESULT_OF_SEEN + r"""
import socket
port, port6, abstract = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
seen = {}
def attempt(key, family, kind, addr):
    s = socket.socket(family, kind)
    s.settimeout(2)
    try:
        s.connect(addr)
        seen[key] = "connected:" + s.recv(64).decode("ascii", "replace")
    except OSError as e:
        seen[key + "_refused"] = type(e).__name__
    finally:
        s.close()
attempt("host_tcp4", socket.AF_INET, socket.SOCK_STREAM, ("127.0.0.1", port))
attempt("host_tcp6", socket.AF_INET6, socket.SOCK_STREAM, ("::1", port6))
attempt("host_abstract", socket.AF_UNIX, socket.SOCK_STREAM, "\0" + abstract)
# its own loopback works
srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(1)
c = socket.create_connection(srv.getsockname(), timeout=2); a, _ = srv.accept(); a.sendall(b"own"); seen["own"] = c.recv(8).decode()
try:
    seen["abstract_listed"] = str(abstract in open("/proc/net/unix").read())
except OSError as e:
    seen["abstract_listed"] = "unreadable"
done(seen)
"""


class _Listener:
    def __init__(self, family: int, addr: Any) -> None:
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        if family != socket.AF_UNIX:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(addr)
        self.sock.listen(8)
        self.hits = 0
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def close(self) -> None:
        """Stop listening for good. A close alone would not: the thread blocked in accept() keeps the socket
        listening on its port until a connection comes, and that can be a later test's client (a flaky
        `BadStatusLine: HOST-SECRET` in another file run by the same worker)."""
        try:
            self.sock.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept() (EINVAL) and ends the listening
        except OSError:
            pass
        self.thread.join(10)
        assert not self.thread.is_alive(), "the listener's thread did not stop"
        self.sock.close()

    def _serve(self) -> None:
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.hits += 1
            c.sendall(b"HOST-SECRET")
            c.close()


@needs_confinement
def test_loopback_reaches_no_host_service(dep: Any, arepo: Repo, tmp_path: Path) -> None:
    s, review, _ = started(dep, arepo, "loopback", test_review_change.plain_change)
    tcp4 = _Listener(socket.AF_INET, ("127.0.0.1", 0))
    tcp6 = _Listener(socket.AF_INET6, ("::1", 0))
    name = f"attest-attack-{os.getpid()}-{tmp_path.name}"
    unix = _Listener(socket.AF_UNIX, "\0" + name)
    # The listeners answer on the host (the check is real).
    for fam, addr in ((socket.AF_INET, tcp4.sock.getsockname()), (socket.AF_INET6, tcp6.sock.getsockname()[:2]),
                      (socket.AF_UNIX, "\0" + name)):
        with socket.socket(fam, socket.SOCK_STREAM) as c:
            c.connect(addr)
            assert c.recv(64) == b"HOST-SECRET"
    before = (tcp4.hits, tcp6.hits, unix.hits)
    try:
        out = exec_for(dep, s, review, tmp_path, argv=[*py_reviewer(LOOPBACK_SCRIPT), str(tcp4.sock.getsockname()[1]),
                                                      str(tcp6.sock.getsockname()[1]), name])
    finally:
        for x in (tcp4, tcp6, unix):
            x.close()
    seen = limitations(out)
    run = json.loads((dep.state / "results" / f"{review}.json").read_bytes())
    assert run["confinement"]["network"] == "loopback"
    assert seen.get("own") == "own", seen
    assert not [k for k, v in seen.items() if v.startswith("connected")], seen
    assert seen["abstract_listed"] != "True", seen
    assert (tcp4.hits, tcp6.hits, unix.hits) == before


# == 3. the example reviewer (examples/reviewer): git's line numbers ====================================================

def cr_change(path: Path) -> None:
    # One changed line as git counts them (split at \n only); Python reads it as two lines (universal newlines), and
    # runs it as two statements: the second calls eval.
    (path / "calc.py").write_bytes(b"x = 1\reval(input())\n")
    commit_all(path)


def _example_agent() -> Any:
    import importlib.util

    spec = importlib.util.spec_from_file_location("example_agent", ROOT / "examples" / "reviewer" / "agent.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_example_agent_reads_the_lines_git_numbers(dep: Any, arepo: Repo) -> None:
    _, _, state = started(dep, arepo, "cr-eval", cr_change)
    change = state["change"]["path"]
    surface = {p["path"]: p for p in state["surface"]["paths"]}
    # attest says: one changed text line, line 1, and it holds the call.
    assert surface["calc.py"]["content"] == "text"
    assert surface["calc.py"]["hunks"] == [{"left": {"start": 0, "count": 0}, "right": {"start": 1, "count": 1}}]
    assert b"eval(" in (Path(change) / "head" / "calc.py").read_bytes().split(b"\n")[0]
    # Python executes the call (the \r ends a statement).
    ran = subprocess.run([PY, "-I", "-c", "import ast,sys; print([type(n.value.func).__name__ if isinstance(n, ast.Expr) "
                          "else type(n).__name__ for n in ast.parse(open(sys.argv[1],'rb').read()).body])",
                          str(Path(change) / "head" / "calc.py")], capture_output=True, text=True, check=True)
    assert ran.stdout.strip() == "['Assign', 'Name']"
    doc = _example_agent().review(change)
    assert doc["limitations"] == []
    assert [(f["path"], f["line"], f["severity"]) for f in doc["findings"]] == [("calc.py", 1, "blocker")], doc


@pytest.fixture(scope="module")
def example_reviewer(dep: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, Path]:
    """examples/reviewer, attested by the deployment key and frozen (TRUST lets that key sign closed-tree): (trust, identity, att)."""
    tmp = tmp_path_factory.mktemp("example-reviewer")
    trust = _trust_with_closed_tree(dep, tmp / "trust.toml")
    src = tmp / "reviewer"
    shutil.copytree(ROOT / "examples" / "reviewer", src, ignore=shutil.ignore_patterns("__pycache__"))
    att = tmp / "reviewer.intoto.json"
    done = subprocess.run([PY, "-m", "attest", "attest", str(src), "--key", str(dep.key), "-o", str(att), "--json"],
                          capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    frozen = subprocess.run([PY, "-m", "attest", "freeze", str(src), "--attestation", str(att), "--policy", str(trust),
                             "--state-dir", str(dep.state), "--backend", BACKEND, "--json"], capture_output=True, text=True, cwd=ROOT)
    assert frozen.returncode == 0, frozen.stderr
    return trust, json.loads(frozen.stdout)["identity"], att


@needs_confinement
def test_the_example_reviewer_blocks_an_eval_on_a_changed_line(dep: Any, arepo: Repo, example_reviewer: Any,
                                                                tmp_path: Path) -> None:
    # The whole path: the frozen example reviewer image, confined, through `attest review agent`, then serialize.
    trust, identity, att = example_reviewer

    import test_merge_gate

    gate_policy, ci_key = test_merge_gate.gate_trust(dep, tmp_path)

    def reviewed(tag: str, change: Any, tmp: Path) -> tuple[Any, dict[str, Any], Any]:
        tmp.mkdir()
        s, review, _ = started(dep, arepo, tag, change)
        out = tmp / "result.json"
        run_review(state_dir=dep.state, review=review, handoff=s.handoff, policy=load_policy(trust), out=out,
                   readonly=HOST_PYTHON, reviewer=identity, reviewer_attestation=att,
                   argv=[PY, "-m", "attest", "review", "agent", "--timeout", "60", "--", PY, "-I", "$ATTEST_IMAGE_REVIEWER/agent.py"])
        done = serialize(dep, review, out, tmp, record=tmp / "record.json")
        ci = test_merge_gate.ci(tmp, ci_key, s.c.head, s.c.base)
        gate = test_merge_gate.check(dep, gate_policy, s, tmp / "record.json", [ci])
        return done, json.loads(out.read_bytes()), gate

    def plain_eval(path: Path) -> None:
        (path / "calc.py").write_bytes(b"x = 1\neval(input())\n")
        commit_all(path)

    control, _, gate = reviewed("eval-plain-e2e", plain_eval, tmp_path / "control")
    # The reviewer works here (the check is real): the plain call blocks, and the gate does not authorize.
    assert (control.event, control.blocking, gate.authorized) == ("REQUEST_CHANGES", 1, False)
    done, result, gate = reviewed("cr-eval-e2e", cr_change, tmp_path / "attack")
    assert (done.event, done.blocking, gate.authorized) == ("REQUEST_CHANGES", 1, False), \
        f"calc.py line 1 is b'x = 1\\reval(input())' (one changed line; Python runs eval): result {result}, event " \
        f"{done.event}, merge gate {[f.code for f in gate.findings]}"


def cr_misplaced_change(path: Path) -> None:
    # The base's old.py holds the call on line 1 ("a = 1\reval(y)"); the pull request changes line 2 only.
    (path / "old.py").write_bytes(b"a = 1\reval(y)\nb = 3\n")
    commit_all(path)


def test_the_example_agent_never_flags_an_unchanged_call_on_a_changed_line(dep: Any, arepo: Repo) -> None:
    _, _, state = started(dep, arepo, "cr-misplaced", cr_misplaced_change)
    surface = {p["path"]: p for p in state["surface"]["paths"]}
    assert surface["old.py"]["hunks"] == [{"left": {"start": 2, "count": 1}, "right": {"start": 2, "count": 1}}]
    doc = _example_agent().review(state["change"]["path"])
    assert doc["findings"] == [], doc  # git's line 2 is "b = 3": no call on it


# == 4. anchors: an inline comment only on a line the host's diff shows as changed ======================================

def diverging_change(path: Path) -> None:
    # attest's minimal diff of rep.txt changes RIGHT line 10, more than 3 lines away from every line git's diff (the
    # host's) changes: not even in the context GitHub shows.
    (path / "rep.txt").write_text("".join(f"{x}\n" for x in DIVERGE_NEW))
    commit_all(path)


def test_an_inline_comment_is_on_a_line_the_hosts_diff_shows(dep: Any, arepo: Repo, tmp_path: Path) -> None:
    s, review, state = started(dep, arepo, "diverge", diverging_change)
    ours = {p["path"]: p for p in state["surface"]["paths"]}["rep.txt"]
    right = sorted({n for h in ours["hunks"] for n in range(h["right"]["start"], h["right"]["start"] + h["right"]["count"])})
    gits = git_changed_lines(arepo.path, s.c.base, s.c.head)
    # attest's own minimal diff changes RIGHT [2, 5, 6, 10]; git's (the host's) [2, 3, 4, 5]: the surface is git's.
    assert right == sorted(gits[("rep.txt", "RIGHT")]) and 10 not in right, (right, gits)
    # A reviewer that anchors where attest's own minimal diff would have said a line changed: into the body.
    finding = {"id": "F1", "severity": "high", "blocking": True, "message": "this added line", "path": "rep.txt", "line": 10,
               "side": "RIGHT"}
    result = exec_for(dep, s, review, tmp_path, {"complete": True, "limitations": [], "findings": [finding]})
    serialize(dep, review, result, tmp_path)
    payload = json.loads((tmp_path / "payload.json").read_bytes())
    for comment in payload["comments"]:
        assert comment["line"] in gits.get((comment["path"], comment["side"]), set()), \
            f"inline at {comment['path']}:{comment['line']} {comment['side']}, a line git's diff (the host's) does not change: " \
            f"git changes RIGHT {sorted(gits[('rep.txt', 'RIGHT')])}, attest's surface RIGHT {right}"
    assert payload["comments"] == [] and "this added line" in payload["body"]


# == 5. the change image vs the review state =============================================================================

@needs_confinement
def test_a_change_image_of_another_head_tree_is_refused(dep: Any, arepo: Repo, tmp_path: Path) -> None:
    """A writer of the state directory freezes an image with this review's review.json and surface.json, but another head/."""
    from attest.freeze import Store, freeze_tree
    from attest.review.procedure._change import change_inventory

    s, review, state = started(dep, arepo, "forged-head", test_review_change.plain_change)
    real = Path(state["change"]["path"])
    forged = tmp_path / "forged"
    shutil.copytree(real, forged, symlinks=True)
    for p in forged.rglob("*"):
        os.chmod(p, 0o755 if p.is_dir() else 0o644)
    (forged / "head" / "src.txt").write_text("code\nnothing to see here\n")
    generated = {rel: (forged / rel).read_bytes() for rel in ("review.json", "surface.json", "diff.patch", "projections/semantic",
                                                             "projections/adapter")}
    head = []
    for p in sorted((forged / "head").rglob("*")):
        rel = str(p.relative_to(forged / "head"))
        if p.is_dir():
            head.append((rel, "040000", 0, None))
        else:
            data = p.read_bytes()
            head.append((rel, "100644", len(data), hashlib.sha256(data).hexdigest()))
    image = freeze_tree(str(forged), change_inventory(generated, head), str(dep.state), backend=BACKEND)
    assert Store(dep.state).get(image.identity).path == image.path
    doc = dict(state)
    doc["change"] = {"identity": image.identity, "path": image.path, "backend": image.backend}
    (dep.state / "reviews" / f"{review}.json").write_bytes(canonical_bytes(doc))
    read = ["/bin/sh", "-c", 'printf \'{"complete": false, "limitations": ["src=%s"], "findings": []}\' '
            '"$(tr "\\n" "|" < "$ATTEST_IMAGE_CHANGE/head/src.txt")"']
    try:
        out = exec_for(dep, s, review, tmp_path, argv=read)
    except AttestError as e:
        assert codes(e) and all(c.endswith("MISMATCH") for c in codes(e)), codes(e)
        return
    seen = limitations(out)
    from attest.attestation import verify_attestation_file

    serialize(dep, review, out, tmp_path, record=tmp_path / "record.json")
    predicate = verify_attestation_file(str(tmp_path / "record.json"), load_policy(dep.trust)).statement["predicate"]
    pytest.fail(f"the reviewer read a head/ that is not the head commit's tree: src.txt={seen['src']!r} (the head commit "
                f"{s.c.head[:12]} has {git(arepo.path, 'show', s.c.head + ':src.txt')!r}); the signed record names change "
                f"{predicate['change']} and head {predicate['head'][:12] if isinstance(predicate.get('head'), str) else predicate.get('head')}")


# == 6. the deployment's reviewer image ==================================================================================

def _trust_with_closed_tree(dep: Any, path: Path) -> Path:
    keys = dep.key.parent
    return deployment.trust_policy(path, (keys / "deploy.pub.pem", (*deployment.DEPLOY_ROLES, CLOSED_TREE_PREDICATE)),
                                  (keys / "release.pub.pem", deployment.RELEASE_ROLES))


def test_an_installation_attestation_is_not_a_reviewer_attestation(dep: Any, arepo: Repo, tmp_path: Path) -> None:
    # The installed Skill (the bootstrap image) is in the store, and the deployment key signed a closed inventory of it.
    s, review, state = started(dep, arepo, "install-as-reviewer", test_review_change.plain_change)
    trust = _trust_with_closed_tree(dep, tmp_path / "trust.toml")
    identity = state["images"]["bootstrap"]["identity"]
    err = fails(lambda: run_review(state_dir=dep.state, review=review, handoff=s.handoff, policy=load_policy(trust),
                                   argv=["SKILL.md"], out=tmp_path / "r.json", reviewer=identity,
                                   reviewer_attestation=arepo.installation))  # type: ignore[attr-defined]
    assert codes(err) and not (dep.state / "results" / f"{review}.json").exists(), codes(err)


def test_a_reviewer_tree_with_a_link_cannot_be_attested_or_frozen(dep: Any, tmp_path: Path) -> None:
    src = tmp_path / "reviewer"
    (src / "bin").mkdir(parents=True)
    os.symlink("/bin/sh", src / "bin" / "review")
    trust = _trust_with_closed_tree(dep, tmp_path / "trust.toml")
    att = subprocess.run([PY, "-m", "attest", "attest", str(src), "--key", str(dep.key), "-o", str(tmp_path / "a.json")],
                         capture_output=True, text=True, cwd=ROOT)
    frz = subprocess.run([PY, "-m", "attest", "freeze", str(src), "--attestation", str(tmp_path / "a.json"), "--policy", str(trust),
                          "--state-dir", str(dep.state), "--backend", BACKEND], capture_output=True, text=True, cwd=ROOT)
    assert att.returncode != 0 or frz.returncode != 0, (att.stdout, frz.stdout)


# == 7. the adapter: the agent's output, anchors and coverage (pure or with real /bin/sh agents) =========================

NFC = unicodedata.normalize("NFC", "café.py")
NFD = unicodedata.normalize("NFD", "café.py")
SURFACE = ChangedSurface("3" * 40, "4" * 40, "6" * 40, "5" * 40, (
    ChangedPath("src/a.py", "modified", "100644", "100644", "d" * 40, "e" * 40, "text", (Hunk(3, 2, 3, 1),)),
    ChangedPath(NFC, "added", None, "100644", None, "a" * 40, "text", (Hunk(0, 0, 1, 2),)),
    ChangedPath("gone.py", "deleted", "100644", None, "c" * 40, None, "text", (Hunk(1, 3, 0, 0),)),
    ChangedPath("link", "added", None, "120000", None, "b" * 40, "not-a-file"),
    ChangedPath("sub", "added", None, "160000", None, "f" * 40, "not-a-file"),
))
LINES = {"src/a.py": 5, NFC: 2, "link": None, "sub": None}


@pytest.mark.parametrize(("path", "line", "side"), [
    ("./src/a.py", 3, "RIGHT"), ("src/a.py/", 3, "RIGHT"), ("SRC/a.py", 3, "RIGHT"), ("src//a.py", 3, "RIGHT"),
    ("src/./a.py", 3, "RIGHT"), (NFD, 1, "RIGHT"), ("gone.py", 1, "RIGHT"), (NFC, 1, "LEFT"), ("link", 1, "RIGHT"),
    ("sub", 1, "RIGHT"), ("src/a.py", 5, "LEFT"), ("src/a.py", 6, "RIGHT"),
])
def test_the_adapter_never_anchors_elsewhere(path: str, line: int, side: str) -> None:
    out = AgentOutput((AgentFinding(path, "major", "t", line, side),), tuple(p.path for p in SURFACE.paths), ())
    f = decide_result(out, SURFACE, LINES).findings[0]
    assert (f.path, f.line, f.side) == (None, None, None), f


@pytest.mark.parametrize(("path", "line", "side"), [
    ("./src/a.py", 3, "RIGHT"), ("src/a.py/", 3, "RIGHT"), (NFD, 1, "RIGHT"), ("gone.py", 1, "RIGHT"), (NFC, 1, "LEFT"),
    ("link", 1, "RIGHT"), ("src/a.py", 5, "LEFT"), ("src/a.py", 4, "RIGHT"), ("src/a.py", 3, "LEFT"),
])
def test_the_serializer_never_anchors_elsewhere(path: str, line: int, side: str) -> None:
    lines = {p.path: {s: tuple(h.lines(s) for h in p.hunks) for s in ("LEFT", "RIGHT")} for p in SURFACE.paths}
    got = anchor(ResultFinding("F", "high", True, "m", path, line, side), lines)
    ok = {("src/a.py", "RIGHT", 3), ("src/a.py", "LEFT", 3), ("src/a.py", "LEFT", 4)}
    assert got is None or got in ok, got
    assert got != ("src/a.py", "RIGHT", 4)


@pytest.mark.parametrize("coverage", [[], [NFD, "src/a.py", "gone.py", "link", "sub"], ["src/a.py", "src/a.py"],
                                      ["./src/a.py", NFC, "gone.py", "link", "sub"], ["src/a.py/", NFC, "gone.py", "link", "sub"]])
def test_coverage_that_misses_a_path_is_never_complete(coverage: list[str]) -> None:
    result = decide_result(AgentOutput((), tuple(coverage), ()), SURFACE, LINES)
    assert result.complete is False and result.limitations


def _block(detail: str) -> bytes:
    body = json.dumps({"findings": [{"path": "src/a.py", "severity": "nit", "title": "t", "detail": detail}],
                       "coverage": [p.path for p in SURFACE.paths], "limitations": []})
    return f"<findings>\n{body}\n</findings>\n".encode()


@pytest.mark.parametrize("escaped", ["<\\/findings>", "\\u003c/findings\\u003e", "\\u003cfindings>"])
def test_a_marker_spelled_with_json_escapes_is_not_taken(escaped: str) -> None:
    # docs/review-agent.md: a marker "inside a JSON string (a forged </findings> in a detail)" is AGENT_OUTPUT_INVALID.
    raw = _block("x").replace(b'"x"', b'"' + escaped.encode() + b'"')
    try:
        out = parse_output(raw)
    except AttestError as e:
        assert e.findings[0].code == "AGENT_OUTPUT_INVALID"
        return
    text = out.findings[0].detail
    assert "<findings>" not in text and "</findings>" not in text, f"accepted, and the finding's text holds {text!r}"


@pytest.mark.parametrize("raw", [
    b"```\n<findings>\n```\n" + _block("x"),                       # a marker in a fence of the chatter
    _block("x").replace(b"</findings>\n", b""),                     # truncated
    _block("x") + _block("y"),                                     # two blocks
    _block("x").replace(b"</findings>", b"</findings\x00>") + b"</findings>",
    _block("a\u0085b".encode().decode("latin-1")),                 # bytes of a C1 control, as text
    _block("\u2028"), _block("\u202e"), _block("\x1b[2J"),
])
def test_malformed_outputs_are_refused(raw: bytes) -> None:
    with pytest.raises(AttestError):
        out = parse_output(raw)
        # a C1 or bidi character that was accepted must at least not survive into a finding
        assert all(c.isprintable() or c in "\n\t" for f in out.findings for c in f.detail), out


@pytest.fixture
def agent_env(tmp_path: Path) -> dict[str, str]:
    return test_review_agent.make_image(tmp_path / "run")


def _agent(tmp_path: Path, body: str) -> list[str]:
    return [test_review_agent.agent(tmp_path, body)]


def test_markers_on_stderr_and_split_writes_give_the_stdout_block(agent_env: dict[str, str], tmp_path: Path) -> None:
    block = test_review_agent.block()
    half = len(block) // 2
    body = (f"cat >/dev/null\necho '<findings>' >&2\necho '</findings>' >&2\nprintf %s '{block[:half]}'\nsleep 0.3\n"
            f"printf %s '{block[half:]}'\n")
    result = review_agent(_agent(tmp_path, body), environ=agent_env, timeout=30)
    assert result.complete is True and result.findings == ()


def test_a_daemon_holding_the_output_is_a_timeout_not_a_result(agent_env: dict[str, str], tmp_path: Path) -> None:
    block = test_review_agent.block()
    body = f"cat >/dev/null\nprintf %s '{block}'\nsetsid sh -c 'sleep 30' &\nexit 0\n"
    with pytest.raises(AttestError) as ei:
        review_agent(_agent(tmp_path, body), environ=agent_env, timeout=2)
    assert ei.value.findings[0].code == "AGENT_TIMEOUT"


def test_an_agent_writing_home_changes_nothing_the_adapter_reads_after(agent_env: dict[str, str], tmp_path: Path) -> None:
    # The agent rewrites what it can: its HOME, TMPDIR, and the prompt file's directory; the adapter's answer is unchanged.
    block = test_review_agent.block(findings=[{"path": "src/a.py", "line": 5, "severity": "major", "title": "t"}])
    body = (f'cat >/dev/null\nmkdir -p "$HOME/.config" && echo evil > "$HOME/.config/x"\n'
            f'rm -rf "$TMPDIR"/* 2>/dev/null; printf %s \'{block}\'\n')
    result = review_agent(_agent(tmp_path, body), environ=agent_env, timeout=30)
    assert [(f.path, f.line) for f in result.findings] == [("src/a.py", 5)]


# == 8. names the head may not hold =======================================================================================

def _head_with(r: Repo, name: bytes, tag: str) -> Any:
    """A head commit on the base whose tree also holds ``name`` (written as objects: git may refuse to check it out)."""
    def run(*args: str, data: bytes | None = None) -> str:
        return subprocess.run(["git", "-C", str(r.path), *args], input=data, capture_output=True, check=True).stdout.decode().strip()

    blob = run("hash-object", "-w", "--stdin", data=b"x\n")
    entries = subprocess.run(["git", "-C", str(r.path), "ls-tree", "-z", r.base], capture_output=True, check=True).stdout
    entries += b"100644 blob " + blob.encode() + b"\t" + name + b"\0"
    tree = run("mktree", "-z", data=entries)
    head = run("-c", "user.name=a", "-c", "user.email=a@b", "commit-tree", tree, "-p", r.base, "-m", f"name {tag}")
    c = test_bootstrap.Consumer(r.path, r.base, head)
    return test_review_start.Started(c, r.handoff, test_bootstrap.identity_file(r.tmp / f"identity-{tag}.json", c))


@pytest.mark.parametrize("name", [b"evil\nname.txt", b"\xff\xfe.txt", b".GIT", b"tab\there", b"bidi\xe2\x80\xaename.txt"],
                         ids=["newline", "non-utf8", "dot-git", "tab", "bidi-override"])
def test_a_head_name_no_inventory_may_hold_cannot_be_reviewed(dep: Any, arepo: Repo, name: bytes) -> None:
    s = _head_with(arepo, name, "name-" + hashlib.sha256(name).hexdigest()[:8])
    assert name in subprocess.run(["git", "-C", str(arepo.path), "ls-tree", "-z", "--name-only", s.c.head], capture_output=True,
                                  check=True).stdout
    err = fails(lambda: start(dep, s), AttestError)
    assert codes(err), codes(err)


# == 9. more of the reviewer image and the example agent ===================================================================

def test_an_attestation_of_a_subtree_does_not_admit_the_tree(dep: Any, arepo: Repo, example_reviewer: Any, tmp_path: Path) -> None:
    trust, identity, _ = example_reviewer
    s, review, _ = started(dep, arepo, "subtree-reviewer", test_review_change.plain_change)
    sub = tmp_path / "bin"
    shutil.copytree(ROOT / "examples" / "reviewer" / "bin", sub)
    att = tmp_path / "bin.intoto.json"
    done = subprocess.run([PY, "-m", "attest", "attest", str(sub), "--key", str(dep.key), "-o", str(att)], capture_output=True,
                          text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    err = fails(lambda: run_review(state_dir=dep.state, review=review, handoff=s.handoff, policy=load_policy(trust), argv=["bin/review"],
                                   out=tmp_path / "r.json", reviewer=identity, reviewer_attestation=att))
    assert codes(err) == ["REVIEWER_IMAGE_MISMATCH"] and not (dep.state / "results" / f"{review}.json").exists()


def unreadable_pythons(path: Path) -> None:
    (path / "big.py").write_bytes(b"eval(input())\n" + b"# pad\n" * 200_000)   # over 1 MiB: oversized
    (path / "latin.py").write_bytes(b"# -*- coding: latin-1 -*-\ns = '\xe9'\neval(input())\n")  # not UTF-8
    (path / "nul.py").write_bytes(b"eval(input())\n\0\n")                                         # binary
    commit_all(path)


def test_the_example_agent_never_calls_an_unread_python_file_complete(dep: Any, arepo: Repo) -> None:
    _, _, state = started(dep, arepo, "unreadable-py", unreadable_pythons)
    contents = {p["path"]: p["content"] for p in state["surface"]["paths"]}
    assert contents == {"big.py": "oversized", "latin.py": "non-utf8", "nul.py": "binary"}
    doc = _example_agent().review(state["change"]["path"])
    assert len(doc["limitations"]) == 3 or len(doc["findings"]) == 3, doc
