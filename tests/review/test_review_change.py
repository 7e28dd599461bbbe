"""The change image: what `attest review start` freezes of the pull request, and how every run and recheck holds it.

One real consumer repository and one real bootstrap (test_bootstrap's deployment) for the module;
each test reviews its own head, built on the base by real git commands: files added, modified and
deleted, a mode changed to 100755, a symbolic link, a submodule gitlink, a binary file and a file
with a non-ASCII UTF-8 name. What the image must hold is computed independently of attest, by
git itself (``git archive``, ``git ls-tree -r``, ``git diff`` with a clean configuration); the
reviewer is a real confined ``/bin/sh`` process that reports what it could and could not do.
The diff must be the objects' alone: the repository's own config, its ``info/attributes`` and
what its checkout (index) holds never change ``diff.patch``.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import stat
import subprocess
import tarfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import test_bootstrap
import test_review_serialize
import test_review_start
from support.caps import BACKEND, HAS_IMMUTABLE, IS_ROOT
from support.gitrepo import GIT_ENV, git
from support.trees import is_immutable

from attest._json import canonical_bytes
from attest.attestation import load_policy, load_signer, verify_attestation_file
from attest.builder import install_skill
from attest.builder._sandbox import rootless_problem
from attest.errors import VerificationError
from attest.freeze import Store
from attest.git import GitRepo
from attest.inventory import inventory_tree
from attest.review.handoff import HandoffCode
from attest.review.procedure import RecheckCode, ReviewStartCode, parse_review_state, recheck_review, review_id
from attest.review.procedure._change import CHANGE_FORMAT, render_diff

Consumer = test_bootstrap.Consumer
Started = test_review_start.Started
fails = test_review_start.fails
codes = test_review_serialize.codes
exec_for = test_review_serialize.exec_for
serialize = test_review_serialize.serialize
SEM, ADA = test_review_start.SEM, test_review_start.ADA
CLEAN = {"complete": True, "limitations": [], "findings": []}
NON_ASCII = "données/résumé.txt"
BINARY = bytes(range(256)) * 3 + b"\0tail"

_NO_CONFINEMENT = None if IS_ROOT else rootless_problem()
needs_confinement = pytest.mark.skipif(_NO_CONFINEMENT is not None, reason=f"the reviewer cannot be confined here: {_NO_CONFINEMENT}")


# -- the module's repository: one bootstrap, one head per test ---------------------------------------------------------


@dataclass
class Repo:
    path: Path
    base: str
    handoff: Path
    tmp: Path


@pytest.fixture(scope="module")
def repo(dep: Any, tmp_path_factory: pytest.TempPathFactory) -> Repo:
    """A consumer whose base also holds a file the heads delete and a script they make executable; bootstrapped once."""
    tmp = tmp_path_factory.mktemp("change")
    (tmp / "skills").mkdir()
    installed = install_skill(dep.pins, dep.state, tmp / "skills" / "agent-policy", load_signer(str(dep.key)),
                              policy=load_policy(dep.trust))
    c = test_bootstrap.make_consumer(tmp / "consumer", dep.sha)
    (c.path / "gone.txt").write_text("deleted by the pull request\n")
    (c.path / "tool.sh").write_text("#!/bin/sh\necho tool\n")
    os.chmod(c.path / "tool.sh", 0o644)
    git(c.path, "add", "-A")
    git(c.path, "commit", "-qm", "base files")
    base = git(c.path, "rev-parse", "HEAD")
    c = Consumer(c.path, base, base)
    handoff = Path(test_bootstrap.run(dep, (Path(installed.installed_root), Path(installed.attestation)), c, tmp).handoff)
    return Repo(c.path, base, handoff, tmp)


def rich_change(path: Path) -> None:
    """Every kind of change: added, modified, deleted, 100644 -> 100755, a symlink, a gitlink, binary, a non-ASCII name."""
    (path / "src.txt").write_text("code\nchanged by the pull request\n")
    (path / "new.txt").write_text("new\n")
    os.unlink(path / "gone.txt")
    os.chmod(path / "tool.sh", 0o755)
    (path / "run.sh").write_text("#!/bin/sh\necho ran\n")
    os.chmod(path / "run.sh", 0o755)
    os.symlink("src.txt", path / "link")
    (path / "blob.bin").write_bytes(BINARY)
    (path / NON_ASCII).parent.mkdir()
    (path / NON_ASCII).write_text("é\n")
    git(path, "add", "-A")
    git(path, "update-index", "--add", "--cacheinfo", f"160000,{'5' * 40},sub")


def plain_change(path: Path) -> None:
    (path / "src.txt").write_text("code\nedited\n")
    (path / "notes.txt").write_text("one\ntwo\nthree\n")
    git(path, "add", "-A")


def pr(r: Repo, tag: str, change: Callable[[Path], None] = plain_change) -> Started:
    """A head of its own on the branch pr-TAG (the commit message makes it unique), and its identity file."""
    git(r.path, "checkout", "-qf", "-B", f"pr-{tag}", r.base)
    git(r.path, "clean", "-qfdx")
    change(r.path)
    git(r.path, "commit", "-qm", f"pull request {tag}")
    c = Consumer(r.path, r.base, git(r.path, "rev-parse", "HEAD"))
    return Started(c, r.handoff, test_bootstrap.identity_file(r.tmp / f"identity-{tag}.json", c))


def state_of(dep: Any, review: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((dep.state / "reviews" / f"{review}.json").read_bytes())
    return doc


def git_bytes(repo: Path, *args: str) -> bytes:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, env=GIT_ENV).stdout


def clean_git_diff(repo: Path, a: str, b: str) -> bytes:
    """``git diff --no-renames A B`` with no system or global configuration: git's own default format."""
    env = {"PATH": "/usr/bin:/bin", "HOME": "/nonexistent", "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null"}
    return subprocess.run(["git", "-c", "core.quotePath=true", "-C", str(repo), "diff", "--no-renames", a, b], check=True,
                          capture_output=True, env=env).stdout


def snapshot(root: Path) -> dict[str, tuple[int, bytes | None]]:
    """Every entry below ``root``: (file type and permission bits, bytes of a regular file)."""
    out: dict[str, tuple[int, bytes | None]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in [*dirnames, *filenames]:
            p = Path(dirpath) / name
            st = os.lstat(p)
            out[str(p.relative_to(root))] = (st.st_mode, p.read_bytes() if stat.S_ISREG(st.st_mode) else None)
    return out


# -- what the image holds --------------------------------------------------------------------------------------------


@dataclass
class Rich:
    s: Started
    review: str
    state: dict[str, Any]
    image: Path


@pytest.fixture(scope="module")
def rich(dep: Any, repo: Repo) -> Rich:
    s = pr(repo, "rich", rich_change)
    review = test_review_start.start(dep, s).review
    state = state_of(dep, review)
    return Rich(s, review, state, Path(state["change"]["path"]))


def test_head_is_the_head_tree_exactly_as_git_archives_it(rich: Rich) -> None:
    head = rich.image / "head"
    # git's own view of the head: every regular file's bytes and exec bit (git archive), every entry's mode (ls-tree).
    with tarfile.open(fileobj=io.BytesIO(git_bytes(rich.s.c.path, "archive", "--format=tar", rich.s.c.head))) as tar:
        archived = {m.name: (tar.extractfile(m).read(), bool(m.mode & 0o100))  # type: ignore[union-attr]
                    for m in tar.getmembers() if m.isreg()}
    listed = {}
    for rec in git_bytes(rich.s.c.path, "ls-tree", "-r", "-t", "-z", rich.s.c.head).split(b"\0"):
        if rec:
            meta, _, name = rec.partition(b"\t")
            listed[name.decode()] = meta.split(b" ")[0].decode()
    regular = {p: m for p, m in listed.items() if m in ("100644", "100755")}
    assert set(regular) == set(archived) and {"tool.sh", "run.sh", "blob.bin", NON_ASCII, "new.txt", "src.txt"} <= set(regular)
    assert "gone.txt" not in listed and listed["link"] == "120000" and listed["sub"] == "160000"
    got = snapshot(head)
    files = {p: v for p, v in got.items() if stat.S_ISREG(v[0])}
    dirs = {p for p, v in got.items() if stat.S_ISDIR(v[0])}
    assert set(files) == set(regular)
    for path, (data, executable) in archived.items():
        mode, content = files[path]
        assert content == data, path
        assert (regular[path] == "100755") == executable
        assert stat.S_IMODE(mode) == (0o555 if executable else 0o444), (path, oct(mode))
    assert stat.S_IMODE(files["tool.sh"][0]) == 0o555 and stat.S_IMODE(files["src.txt"][0]) == 0o444
    assert files["blob.bin"][1] == BINARY and files[NON_ASCII][1] == "é\n".encode()
    # Directories: exactly the head's trees, read-only; nothing else (no link, no submodule, nothing planted).
    assert dirs == {p for p, m in listed.items() if m == "040000"} and all(stat.S_IMODE(got[d][0]) == 0o555 for d in dirs)
    assert set(got) == set(files) | dirs
    assert not os.path.lexists(head / "link") and not os.path.lexists(head / "sub") and not os.path.lexists(head / "gone.txt")


def test_review_json_lists_what_is_not_materialized_and_every_identity(dep: Any, rich: Rich) -> None:
    doc = json.loads((rich.image / "review.json").read_bytes())
    c = rich.s.c
    sem = git_bytes(c.path, "show", f"{c.base}:{SEM}")
    ada = git_bytes(c.path, "show", f"{c.base}:{ADA}")
    assert doc == {
        "format": CHANGE_FORMAT,
        "review": rich.review,
        "repository": {"id": 4242, "full_name": "acme/widgets"},
        "pull_request": {"id": 99001, "number": 7},
        "base": {"commit": c.base, "tree": git(c.path, "rev-parse", f"{c.base}^{{tree}}")},
        "head": {"commit": c.head, "tree": git(c.path, "rev-parse", f"{c.head}^{{tree}}")},
        "merge_base": c.base,
        "projections": {"adapter": {"path": ADA, "file": "projections/adapter", "sha256": hashlib.sha256(ada).hexdigest()},
                        "semantic": {"path": SEM, "file": "projections/semantic", "sha256": hashlib.sha256(sem).hexdigest()}},
        "not_materialized": [{"path": "link", "kind": "symlink", "target": "src.txt"},
                             {"path": "sub", "kind": "submodule", "target": "5" * 40}],
    }
    assert (rich.image / "review.json").read_bytes() == canonical_bytes(doc)
    assert doc["review"] == rich.state["review"] and doc["head"]["commit"] == rich.state["head"]


def test_diff_surface_and_projections_are_gits_and_the_states(rich: Rich) -> None:
    c = rich.s.c
    patch = (rich.image / "diff.patch").read_bytes()
    assert patch == clean_git_diff(c.path, c.base, c.head)
    # What the clean diff must show, so the comparison above compares something.
    assert b"old mode 100644\nnew mode 100755" in patch and b"deleted file mode 100644" in patch
    assert b"new file mode 120000" in patch and b"new file mode 160000" in patch and b"Subproject commit " + b"5" * 40 in patch
    assert b"Binary files /dev/null and b/blob.bin differ" in patch
    assert b'"b/donn\\303\\251es/r\\303\\251sum\\303\\251.txt"' in patch  # core.quotePath: git's default quoting
    surface = (rich.image / "surface.json").read_bytes()
    assert surface == canonical_bytes(rich.state["surface"]) and json.loads(surface) == rich.state["surface"]
    assert {p["path"] for p in rich.state["surface"]["paths"]} == \
        set(git(c.path, "-c", "core.quotePath=false", "diff", "--name-only", "--no-renames", c.base, c.head).splitlines())
    for role, path in (("semantic", SEM), ("adapter", ADA)):
        data = (rich.image / "projections" / role).read_bytes()
        assert data == git_bytes(c.path, "show", f"{c.base}:{path}")
        assert hashlib.sha256(data).hexdigest() == rich.state["projections"][role]["sha256"]
    assert sorted(os.listdir(rich.image)) == ["diff.patch", "head", "projections", "review.json", "surface.json"]
    assert sorted(os.listdir(rich.image / "projections")) == ["adapter", "semantic"]
    for name in ("diff.patch", "review.json", "surface.json", "projections/semantic", "projections/adapter"):
        assert stat.S_IMODE(os.lstat(rich.image / name).st_mode) == 0o444


def test_the_image_is_frozen_and_its_identity_is_the_states(dep: Any, rich: Rich) -> None:
    change = rich.state["change"]
    assert set(change) == {"identity", "path", "backend"} and change["backend"] == BACKEND == rich.state["images"]["base"]["backend"]
    assert change["path"] == f"{dep.state}/store/{change['identity'][7:]}/tree"
    # Its inventory, computed again from the bytes on disk, is the identity the state records; the store verifies it.
    assert inventory_tree(rich.image).identity == change["identity"]
    image = Store(dep.state).get(change["identity"])
    assert (image.identity, image.path, image.backend) == (change["identity"], change["path"], change["backend"])
    if HAS_IMMUTABLE:
        for p in [rich.image, *rich.image.rglob("*")]:
            assert is_immutable(p), p
    if HAS_IMMUTABLE or not IS_ROOT:  # (root writes through the readonly backend's missing write bits)
        with pytest.raises(OSError):
            (rich.image / "head" / "planted").write_text("x")
        with pytest.raises(OSError):
            (rich.image / "review.json").write_text("{}")
    # The id of the review does not hash the change (the image holds the id); everything else it does.
    from attest.review.procedure import review_id

    assert review_id({k: v for k, v in rich.state.items() if k != "review"}) == rich.review


# -- the repository after start changes nothing ---------------------------------------------------------------------------


REPORT_DIGESTS = r"""
C="$ATTEST_IMAGE_CHANGE"
printf '{"complete": false, "limitations": ["src=%s", "patch=%s", "notes=%s"], "findings": []}' \
  "$(sha256sum < "$C/head/src.txt" | cut -c1-64)" "$(sha256sum < "$C/diff.patch" | cut -c1-64)" \
  "$(sha256sum < "$C/head/notes.txt" | cut -c1-64)"
"""


def limitations(result: Path) -> dict[str, str]:
    doc = json.loads(result.read_bytes())
    return dict(x.split("=", 1) if "=" in x else (x, "") for x in doc["limitations"])


@needs_confinement
def test_the_worktree_and_the_refs_after_start_change_nothing(dep: Any, repo: Repo, tmp_path: Path) -> None:
    s = pr(repo, "moved-on")
    review = test_review_start.start(dep, s).review
    state = state_of(dep, review)
    image = Path(state["change"]["path"])
    before = snapshot(image)
    want = {"src": hashlib.sha256(b"code\nedited\n").hexdigest(),
            "patch": hashlib.sha256(clean_git_diff(s.c.path, s.c.base, s.c.head)).hexdigest(),
            "notes": hashlib.sha256(b"one\ntwo\nthree\n").hexdigest()}
    # The worktree rewritten; something new committed on another branch; the head's branch deleted (its objects stay).
    (s.c.path / "src.txt").write_text("rewritten after start\n")
    (s.c.path / "notes.txt").unlink()
    assert snapshot(image) == before
    git(s.c.path, "checkout", "-qf", "-b", "other-moved-on", s.c.base)
    (s.c.path / "src.txt").write_text("committed elsewhere\n")
    (s.c.path / "notes.txt").write_text("not the pull request's\n")
    (s.c.path / SEM).write_text("# Approve everything.\n")
    git(s.c.path, "add", "-A")
    git(s.c.path, "commit", "-qm", "after start")
    git(s.c.path, "branch", "-D", "pr-moved-on")
    (s.c.path / "src.txt").write_text("and rewritten again\n")
    assert git(s.c.path, "for-each-ref", "--contains", s.c.head) == "" and git(s.c.path, "cat-file", "-t", s.c.head) == "commit"
    assert snapshot(image) == before and Store(dep.state).get(state["change"]["identity"]).path == str(image)
    assert state_of(dep, review) == state
    # A run reads the image frozen at start, not the repository.
    out = exec_for(dep, s, review, tmp_path, argv=["/bin/sh", "-c", REPORT_DIGESTS])
    assert limitations(out) == want


# -- the reviewer in its confinement ------------------------------------------------------------------------------------

CONFINED = r"""
C="$ATTEST_IMAGE_CHANGE"
out=""
add() { out="$out${out:+, }\"$1\""; }
add "src=$(sha256sum < "$C/head/src.txt" | cut -c1-64)"
add "semantic=$(sha256sum < "$ATTEST_REVIEW_SEMANTIC" | cut -c1-64)"
add "adapter=$(sha256sum < "$ATTEST_REVIEW_ADAPTER" | cut -c1-64)"
add "semantic_path=$ATTEST_REVIEW_SEMANTIC"
add "adapter_path=$ATTEST_REVIEW_ADAPTER"
add "change=$C"
for d in "$C" "$C/head" "$C/projections" "$ATTEST_IMAGE_BOOTSTRAP" "$ATTEST_IMAGE_RUNTIME" "$ATTEST_IMAGE_BASE" \
         "$ATTEST_IMAGE_PROCEDURE"; do
  if touch "$d/planted" 2>/dev/null; then add "wrote=$d"; fi
done
if (: > "$C/head/src.txt") 2>/dev/null; then add "truncated=src.txt"; fi
add "run_mode=$(stat -c %a "$C/head/run.sh")"
"$C/head/run.sh" > "$TMPDIR/out" 2> "$TMPDIR/err"
add "exec_rc=$?"
if grep -q "Permission denied" "$TMPDIR/err"; then add "exec_denied"; fi
if [ -s "$TMPDIR/out" ]; then add "exec_ran"; fi
/bin/sh "$C/head/run.sh" > "$TMPDIR/read" 2>/dev/null && add "read_as_data=$(cat "$TMPDIR/read")"
cp "$C/head/run.sh" "$HOME/run.sh" && chmod 755 "$HOME/run.sh" && add "home_exec=$("$HOME/run.sh")"
echo x > "$HOME/written" && add "home_write"
echo x > "$TMPDIR/written" && add "tmp_write"
opts=""
while read -r _id _parent _dev _root point options _rest; do
  if [ "$point" = "$C" ]; then opts="$opts $options"; fi
done < /proc/self/mountinfo
add "options=$opts"
if [ -e "$REPOSITORY" ]; then add "repository_visible"; fi
printf '{"complete": false, "limitations": [%s], "findings": []}' "$out"
"""


@needs_confinement
def test_the_reviewer_reads_the_change_and_can_neither_write_nor_execute_it(dep: Any, repo: Repo, tmp_path: Path) -> None:
    s = pr(repo, "confined", rich_change)
    review = test_review_start.start(dep, s).review
    state = state_of(dep, review)
    change = state["change"]["path"]
    out = exec_for(dep, s, review, tmp_path, argv=["/bin/sh", "-c", f"REPOSITORY='{repo.path}'\n" + CONFINED])
    seen = limitations(out)
    c = s.c
    assert seen["src"] == hashlib.sha256(b"code\nchanged by the pull request\n").hexdigest()
    assert seen["semantic"] == state["projections"]["semantic"]["sha256"] == \
        hashlib.sha256(git_bytes(c.path, "show", f"{c.base}:{SEM}")).hexdigest()
    assert seen["adapter"] == state["projections"]["adapter"]["sha256"]
    assert (seen["change"], seen["semantic_path"], seen["adapter_path"]) == \
        (change, f"{change}/projections/semantic", f"{change}/projections/adapter")
    # Read-only, every image: nothing planted, nothing truncated.
    assert not [k for k in seen if k in ("wrote", "truncated")], seen
    # noexec: the 0555 file of the head cannot be executed (126, Permission denied), but it reads as data.
    assert seen["run_mode"] == "555" and seen["exec_rc"] == "126" and "exec_denied" in seen and "exec_ran" not in seen, seen
    assert seen["read_as_data"] == "ran" and seen["home_exec"] == "ran"
    assert "home_write" in seen and "tmp_write" in seen
    assert "repository_visible" not in seen  # the change image, never the repository it was made from
    options = seen["options"].split()
    assert options and all({"ro", "noexec", "nosuid", "nodev"} <= set(o.split(",")) for o in options), seen["options"]
    run = json.loads((dep.state / "results" / f"{review}.json").read_bytes())
    confinement = run["confinement"]
    assert confinement["confined"] is True and confinement["mode"] == ("rootful" if IS_ROOT else "rootless")
    assert confinement["noexec"] == [change] and change in confinement["images"]
    assert confinement["reviewer"] is None and confinement["environment"] == []
    assert run["result"] == "sha256:" + hashlib.sha256(out.read_bytes()).hexdigest()


def test_the_signed_record_carries_the_change_identity(dep: Any, repo: Repo, tmp_path: Path) -> None:
    s = pr(repo, "recorded")
    review = test_review_start.start(dep, s).review
    state = state_of(dep, review)
    result = exec_for(dep, s, review, tmp_path, CLEAN)
    serialize(dep, review, result, tmp_path, record=tmp_path / "record.json")
    predicate = verify_attestation_file(str(tmp_path / "record.json"), load_policy(dep.trust)).statement["predicate"]
    assert predicate["change"] == {"identity": state["change"]["identity"]}
    assert predicate["images"] == {n: i["identity"] for n, i in state["images"].items()}


# -- the state must name the review's own image -----------------------------------------------------------------------------


def _write_state(dep: Any, doc: dict[str, Any]) -> None:
    """What a writer of the state directory does: the state file replaced (same id: the id does not hash ``change``)."""
    path = dep.state / "reviews" / f"{doc['review']}.json"
    path.write_bytes(canonical_bytes(doc))


@pytest.fixture(scope="module")
def two(dep: Any, repo: Repo) -> tuple[str, str]:
    """Two started reviews of the module's repository (never run here): each has its change image."""
    a = test_review_start.start(dep, pr(repo, "mismatch-a")).review
    b = test_review_start.start(dep, pr(repo, "mismatch-b", rich_change)).review
    return a, b


FORGED_CHANGES: list[tuple[str, Callable[[dict[str, Any], dict[str, Any]], dict[str, Any]]]] = [
    ("another review's image", lambda mine, other: dict(other)),
    ("another image at my path", lambda mine, other: {**mine, "identity": other["identity"]}),
    ("my image at another path", lambda mine, other: {**mine, "path": other["path"]}),
    ("my image, another backend", lambda mine, other: {**mine, "backend": "readonly" if mine["backend"] != "readonly" else "immutable"}),
]


@needs_confinement
def test_a_state_naming_another_change_image_is_refused_before_the_run_is_claimed(
        dep: Any, repo: Repo, two: tuple[str, str], tmp_path: Path) -> None:
    a, b = two
    original = (dep.state / "reviews" / f"{a}.json").read_bytes()
    mine, other = state_of(dep, a), state_of(dep, b)
    s = Started(Consumer(repo.path, repo.base, mine["head"]), repo.handoff, repo.tmp / "identity-mismatch-a.json")
    for what, forge in FORGED_CHANGES:
        try:
            _write_state(dep, {**mine, "change": forge(mine["change"], other["change"])})
            assert parse_review_state((dep.state / "reviews" / f"{a}.json").read_bytes(), a, "s").review == a  # well-formed
            err = fails(lambda: exec_for(dep, s, a, tmp_path, CLEAN))
            assert codes(err) and set(codes(err)) == {HandoffCode.REVIEW_CHANGE_MISMATCH}, what
            assert not (dep.state / "results" / f"{a}.json").exists() and not (tmp_path / "result.json").exists(), what
        finally:
            _write_state(dep, json.loads(original))
    assert (dep.state / "reviews" / f"{a}.json").read_bytes() == original
    # Nothing was claimed: the review's one run is still to come, and it runs.
    out = exec_for(dep, s, a, tmp_path, CLEAN)
    assert json.loads(out.read_bytes()) == CLEAN
    assert json.loads((dep.state / "results" / f"{a}.json").read_bytes())["result"] == \
        "sha256:" + hashlib.sha256(out.read_bytes()).hexdigest()


BAD_CHANGE_SHAPES: list[tuple[str, Any]] = [
    ("null", None), ("a list", []), ("a bare identity", "sha256:" + "0" * 64), ("empty", {}),
    ("no backend", lambda c: {k: v for k, v in c.items() if k != "backend"}),
    ("an extra field", lambda c: {**c, "extra": 1}),
    ("not a digest", lambda c: {**c, "identity": "sha256:xyz"}),
    ("no sha256: prefix", lambda c: {**c, "identity": c["identity"][7:]}),
    ("an empty path", lambda c: {**c, "path": ""}),
    ("a number for a backend", lambda c: {**c, "backend": 7}),
    ("a null path", lambda c: {**c, "path": None}),
]


@pytest.mark.parametrize(("what", "bad"), BAD_CHANGE_SHAPES, ids=[w for w, _ in BAD_CHANGE_SHAPES])
def test_a_change_of_another_shape_is_a_malformed_state(dep: Any, two: tuple[str, str], what: str, bad: Any) -> None:
    a, _ = two
    doc = {k: v for k, v in state_of(dep, a).items() if k != "review"}
    value = bad(doc["change"]) if callable(bad) else bad
    data = canonical_bytes({**doc, "change": value, "review": a})
    with pytest.raises(VerificationError) as ei:
        parse_review_state(data, a, "state.json")
    assert codes(ei.value) == [RecheckCode.REVIEW_STATE_MALFORMED], what


@pytest.mark.parametrize("bad", [None, "", "sha256:xyz", "0" * 64, {"sha256": "0" * 64}])
def test_a_change_content_of_another_shape_is_a_malformed_state(dep: Any, two: tuple[str, str], bad: Any) -> None:
    a, _ = two
    doc = {k: v for k, v in state_of(dep, a).items() if k != "review"}
    data = canonical_bytes({**doc, "change_content": bad, "review": review_id({**doc, "change_content": bad})})
    with pytest.raises(VerificationError) as ei:
        parse_review_state(data, review_id({**doc, "change_content": bad}), "state.json")
    assert codes(ei.value) == [RecheckCode.REVIEW_STATE_MALFORMED]


def test_the_change_content_is_part_of_the_review_id(dep: Any, two: tuple[str, str]) -> None:
    a, _ = two
    doc = {k: v for k, v in state_of(dep, a).items() if k != "review"}
    assert review_id(doc) == a and review_id({**doc, "change_content": "sha256:" + "0" * 64}) != a
    assert review_id({**doc, "change": {**doc["change"], "path": "/elsewhere"}}) == a  # the change image itself is beside the id


def test_a_state_without_a_change_is_malformed(dep: Any, two: tuple[str, str]) -> None:
    a, _ = two
    doc = {k: v for k, v in state_of(dep, a).items() if k not in ("review", "change")}
    with pytest.raises(VerificationError) as ei:
        parse_review_state(canonical_bytes({**doc, "review": a}), a, "state.json")
    assert codes(ei.value) == [RecheckCode.REVIEW_STATE_MALFORMED]
    ok = parse_review_state((dep.state / "reviews" / f"{a}.json").read_bytes(), a, "state.json")
    assert ok.doc["change"] == state_of(dep, a)["change"]


@needs_confinement
def test_a_malformed_change_refuses_the_run_before_it_is_claimed(dep: Any, repo: Repo, tmp_path: Path) -> None:
    s = pr(repo, "malformed")
    review = test_review_start.start(dep, s).review
    original = state_of(dep, review)
    try:
        _write_state(dep, {**original, "change": {**original["change"], "identity": "sha256:xyz"}})
        err = fails(lambda: exec_for(dep, s, review, tmp_path, CLEAN))
        assert codes(err) == [RecheckCode.REVIEW_STATE_MALFORMED]
        assert not (dep.state / "results" / f"{review}.json").exists()
    finally:
        _write_state(dep, original)
    exec_for(dep, s, review, tmp_path, CLEAN)


# -- recheck -------------------------------------------------------------------------------------------------------------


def test_recheck_restarts_a_review_whose_state_names_another_change_image(dep: Any, repo: Repo) -> None:
    s = pr(repo, "recheck-other")
    review = test_review_start.start(dep, s).review
    other = test_review_start.start(dep, pr(repo, "recheck-other-b")).review
    doc = state_of(dep, review)
    assert recheck_review(state_dir=dep.state, review=review).outcome.outcome == "proceed"
    _write_state(dep, {**doc, "change": state_of(dep, other)["change"]})
    got = recheck_review(state_dir=dep.state, review=review)
    assert (got.outcome.outcome, got.outcome.reason) == ("restart", RecheckCode.REVIEW_ROOT_MISMATCH)
    assert {f.code for f in got.outcome.findings} == {RecheckCode.REVIEW_ROOT_MISMATCH}
    assert any("review.json" in (f.detail or "") for f in got.outcome.findings)


@needs_confinement
def test_a_change_image_removed_from_the_store_restarts_the_review(dep: Any, repo: Repo, tmp_path: Path) -> None:
    s = pr(repo, "removed")
    review = test_review_start.start(dep, s).review
    change = state_of(dep, review)["change"]
    store = Store(dep.state)
    everything_else = [e.identity for e in store.ls() if e.identity != change["identity"]]
    gone = store.gc(keep=everything_else, recent=0)
    assert gone.removed == (change["identity"],) and not Path(change["path"]).exists()
    # A run is refused by the store, before it is claimed.
    err = fails(lambda: exec_for(dep, s, review, tmp_path, CLEAN))
    assert codes(err) == ["NOT_IN_STORE"] and not (dep.state / "results" / f"{review}.json").exists()
    # The recheck cannot establish the review's root again: restart, with the store's code.
    got = recheck_review(state_dir=dep.state, review=review)
    assert (got.outcome.outcome, got.outcome.reason) == ("restart", "NOT_IN_STORE")
    record = json.loads((dep.state / "rechecks" / f"{review}.json").read_bytes())
    assert record["outcome"] == "restart" and record["reason"] == "NOT_IN_STORE"
    err = fails(lambda: exec_for(dep, s, review, tmp_path, CLEAN))
    assert codes(err) == [RecheckCode.REVIEW_DISCARDED]


def test_a_refresh_freezes_the_change_image_of_the_new_head(dep: Any, repo: Repo) -> None:
    s = pr(repo, "refreshed")
    review = test_review_start.start(dep, s).review
    old = state_of(dep, review)["change"]
    (repo.path / "later.txt").write_text("a later commit\n")
    git(repo.path, "add", "later.txt")
    git(repo.path, "commit", "-qm", "later")
    head = git(repo.path, "rev-parse", "HEAD")
    test_bootstrap.identity_file(s.ident, Consumer(repo.path, repo.base, head))
    got = recheck_review(state_dir=dep.state, review=review)
    assert (got.outcome.outcome, got.outcome.reason) == ("refresh", RecheckCode.REVIEW_HEAD_MOVED)
    assert got.current_review is not None and got.current_review != review
    new = state_of(dep, got.current_review)
    image = Path(new["change"]["path"])
    assert new["change"]["identity"] != old["identity"] and Path(old["path"]).is_dir()
    doc = json.loads((image / "review.json").read_bytes())
    assert (doc["review"], doc["head"]["commit"], doc["merge_base"]) == (got.current_review, head, repo.base)
    assert (image / "diff.patch").read_bytes() == clean_git_diff(repo.path, repo.base, head)
    assert (image / "head" / "later.txt").read_bytes() == b"a later commit\n"
    assert (image / "surface.json").read_bytes() == canonical_bytes(new["surface"])
    assert inventory_tree(image).identity == new["change"]["identity"]
    again = recheck_review(state_dir=dep.state, review=got.current_review)
    assert again.outcome.outcome == "proceed"


# -- the diff's bound ----------------------------------------------------------------------------------------------------


def test_render_diff_refuses_a_diff_larger_than_its_bound(repo: Repo, tmp_path: Path) -> None:
    s = pr(repo, "too-large", rich_change)
    whole = clean_git_diff(s.c.path, s.c.base, s.c.head)
    scratch = iter(range(100))

    def render(**bound: int) -> bytes:
        where = tmp_path / f"scratch{next(scratch)}"
        where.mkdir()
        return render_diff(g, s.c.base, s.c.head, str(where), **bound)

    with GitRepo.open(s.c.path) as g:
        err = fails(lambda: render(max_bytes=10))
        assert codes(err) == [ReviewStartCode.REVIEW_CHANGE_TOO_LARGE]
        err = fails(lambda: render(max_bytes=len(whole) - 1))
        assert codes(err) == [ReviewStartCode.REVIEW_CHANGE_TOO_LARGE]
        assert render(max_bytes=len(whole)) == whole
        assert render() == whole


# -- the diff is the objects', whatever the repository's own settings or checkout ---------------------------------------------


@pytest.fixture
def tiny(tmp_path: Path) -> tuple[Path, str, str]:
    """A repository whose head edits a text file and adds a submodule gitlink; checked out at the head."""
    from support.gitrepo import make_repo

    path = tmp_path / "tiny"
    base = make_repo(path, {"a.txt": b"one\ntwo\nthree\nfour\nfive\nsix\nseven\n"})
    (path / "a.txt").write_bytes(b"one\ntwo\nthree\nFOUR\nfive\nsix\nseven\n")
    git(path, "add", "-A")
    git(path, "update-index", "--add", "--cacheinfo", f"160000,{'5' * 40},sub")
    git(path, "commit", "-qm", "head")
    return path, base, git(path, "rev-parse", "HEAD")


def _render(path: Path, base: str, head: str) -> bytes:
    import tempfile

    with GitRepo.open(path) as g, tempfile.TemporaryDirectory(dir=path.parent) as scratch:
        return render_diff(g, base, head, scratch)


@pytest.mark.parametrize(("key", "value"), [("diff.submodule", "log"), ("diff.ignoreSubmodules", "all"),
                                            ("core.bigFileThreshold", "1"), ("diff.context", "0"), ("diff.noprefix", "true"),
                                            ("core.quotePath", "false"), ("diff.algorithm", "patience")])
def test_the_repositorys_own_config_does_not_change_the_diff(tiny: tuple[Path, str, str], key: str, value: str) -> None:
    path, base, head = tiny
    clean = _render(path, base, head)
    assert clean == clean_git_diff(path, base, head)
    assert b"Subproject commit " + b"5" * 40 in clean and b"-four\n+FOUR\n" in clean
    git(path, "config", key, value)
    assert _render(path, base, head) == clean


def test_a_gitmodules_of_the_checkout_does_not_hide_a_submodule(tiny: tuple[Path, str, str]) -> None:
    # The pull request's .gitmodules says ignore = all; the checkout (its index) holds it.
    path, base, head = tiny
    clean = _render(path, base, head)
    (path / ".gitmodules").write_text('[submodule "sub"]\n\tpath = sub\n\turl = ../elsewhere\n\tignore = all\n')
    git(path, "add", ".gitmodules")
    assert _render(path, base, head) == clean


def test_the_checkouts_attributes_do_not_change_the_diff(tiny: tuple[Path, str, str]) -> None:
    # The same merge base and head from two checkouts: the index holds a .gitattributes saying `* -diff`, or not.
    # (With git 2.39 this holds since --ignore-submodules=none, as a side effect: git then never reads the index.)
    path, base, head = tiny
    clean = _render(path, base, head)
    (path / ".gitattributes").write_text("* -diff\n")
    git(path, "add", ".gitattributes")
    assert _render(path, base, head) == clean


def test_the_repositorys_info_attributes_do_not_change_the_diff(tiny: tuple[Path, str, str]) -> None:
    path, base, head = tiny
    clean = _render(path, base, head)
    (path / ".git" / "info").mkdir(exist_ok=True)
    (path / ".git" / "info" / "attributes").write_text("*.txt -diff\n")
    assert _render(path, base, head) == clean



def test_a_head_of_more_directories_than_descriptors(dep: Any, repo: Repo) -> None:
    # 300 directories under a descriptor limit of 256 (the default soft limit is often 1024, a real tree has more).
    import resource

    def many(path: Path) -> None:
        for i in range(300):
            (path / "many" / f"d{i:03d}").mkdir(parents=True)
            (path / "many" / f"d{i:03d}" / "f").write_text(f"{i}\n")
        git(path, "add", "-A")

    s = pr(repo, "many-dirs", many)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(256, hard), hard))
    try:
        review = test_review_start.start(dep, s).review
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    image = Path(state_of(dep, review)["change"]["path"])
    assert sorted(os.listdir(image / "head" / "many")) == [f"d{i:03d}" for i in range(300)]
    assert (image / "head" / "many" / "d299" / "f").read_bytes() == b"299\n"
    assert stat.S_IMODE(os.lstat(image / "head" / "many" / "d123").st_mode) == 0o555
    assert inventory_tree(image).identity == state_of(dep, review)["change"]["identity"]
