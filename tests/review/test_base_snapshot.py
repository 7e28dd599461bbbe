"""The trusted-base snapshot (BOOTSTRAP.md step 3) against real repositories, real seals and real tampering."""

from __future__ import annotations

import os
import random
import stat
import subprocess
import zlib
from dataclasses import replace
from pathlib import Path

import pytest
from support.caps import BACKEND, HAS_IMMUTABLE, needs_immutable
from support.gitrepo import GIT_ENV, git
from support.gitrepo import make_repo as support_make_repo
from support.trees import chattr, is_immutable, make_tree

from attest.errors import AttestError, InputError, VerificationError
from attest.freeze import Store
from attest.git import GitRepo, TreeEntry, object_id, parse_tree
from attest.git._objects import ObjectFormat
from attest.review.bootstrap import (
    BaseSnapshot,
    BootstrapCode,
    base_tree_objects,
    diff_object_ids,
    encode_tree,
    recompute_tree,
    snapshot_base,
    verify_base_ids,
    verify_base_snapshot,
    verify_tree_ids,
)

FILES = {
    ".agent-policy.yml": b"schema: 2\n",
    ".agent-policy.lock": b'{"schema":2}',
    "README.md": b"# widgets\n",
    "policy/core/evidence.md": b"Evidence rules.\n",
    "policy/review/findings.md": b"Findings rules.\n",
    "bin/run": b"#!/bin/sh\necho run\n",
    "deep/a/b/c/d.bin": bytes(range(256)) * 40,
    "empty.txt": b"",
    # git's order differs from a plain sort: "foo.txt" < "foo/" < "foo0"
    "foo.txt": b"1",
    "foo/x": b"2",
    "foo0": b"3",
}
EXECS = ("bin/run",)


def make_repo(path: Path, files: dict[str, bytes], *, fmt: str = "sha1", execs: tuple[str, ...] = ()) -> str:
    return support_make_repo(path, files, fmt=fmt, execs=execs, message='base')


@pytest.fixture(params=["sha1", "sha256"])
def fmt(request: pytest.FixtureRequest) -> ObjectFormat:
    return request.param  # type: ignore[no-any-return]


@pytest.fixture
def repo(tmp_path: Path, fmt: ObjectFormat) -> tuple[Path, str]:
    path = tmp_path / "repo"
    return path, make_repo(path, FILES, fmt=fmt, execs=EXECS)


def _snapshot(repo_path: Path, commit: str, state: Path, backend: str = BACKEND, **kw: str) -> BaseSnapshot:
    with GitRepo.open(repo_path) as r:
        return snapshot_base(r, commit, state, backend=backend, **kw)


def _codes(err: AttestError) -> set[tuple[str, str | None]]:
    return {(f.code, f.path) for f in err.findings}


def _leftovers(state: Path) -> list[str]:
    out = []
    for sub in ("staging", "build-staging"):
        if (state / sub).exists():
            out += [f"{sub}/{n}" for n in os.listdir(state / sub)]
    return out


def test_snapshot_is_the_exact_base_tree(tmp_path: Path, repo: tuple[Path, str], fmt: ObjectFormat) -> None:
    path, commit = repo
    state = tmp_path / "state"
    snap = _snapshot(path, commit, state)
    assert snap.commit == commit and snap.object_format == fmt
    assert snap.tree == git(path, "rev-parse", f"{commit}^{{tree}}")
    frozen = Path(snap.path)
    assert frozen.parent.parent == state / "store" and snap.backend == BACKEND
    for rel, data in FILES.items():
        assert (frozen / rel).read_bytes() == data
    assert stat.S_IMODE((frozen / "bin/run").stat().st_mode) == 0o555
    assert stat.S_IMODE((frozen / "README.md").stat().st_mode) == 0o444
    assert stat.S_IMODE((frozen / "policy").stat().st_mode) == 0o555
    assert not HAS_IMMUTABLE or (is_immutable(frozen / ".agent-policy.yml") and is_immutable(frozen / "policy"))
    # Every object of the commit was recomputed: `git ls-tree -r -t` lists each blob and tree once, plus the root.
    listed = git(path, "ls-tree", "-r", "-t", commit).splitlines()
    assert snap.objects == len(listed) + 1
    recomputed = recompute_tree(frozen, fmt)
    assert recomputed.root == snap.tree and recomputed.findings == ()
    for line in listed:
        meta, rel = line.split("\t")
        mode, _, oid = meta.split()
        assert recomputed.ids[rel] == (mode.lstrip("0") if mode == "040000" else mode, oid)
    verify_base_snapshot(snap)
    assert _leftovers(state) == []
    assert snap.to_json()["tree"] == snap.tree
    # A second snapshot of the same base reuses the stored image, only after verifying it again.
    again = _snapshot(path, commit, state)
    assert again.image.reused and again.identity == snap.identity


def test_snapshot_reads_objects_never_the_worktree(tmp_path: Path, fmt: ObjectFormat) -> None:
    path = tmp_path / "repo"
    commit = make_repo(path, {"a.txt": b"one\ntwo\n", ".gitattributes": b"* text eol=crlf\n", "keep.md": b"committed\n"}, fmt=fmt)
    git(path, "config", "core.autocrlf", "true")
    (path / "keep.md").write_bytes(b"changed in the worktree\n")
    (path / "untracked.md").write_bytes(b"never committed\n")
    (path / "a.txt").write_bytes(b"staged but not committed\n")
    git(path, "add", "a.txt")
    snap = _snapshot(path, commit, tmp_path / "state")
    frozen = Path(snap.path)
    assert (frozen / "a.txt").read_bytes() == b"one\ntwo\n"
    assert (frozen / "keep.md").read_bytes() == b"committed\n"
    assert not (frozen / "untracked.md").exists()


def test_encode_tree_is_gits_tree_encoding(repo: tuple[Path, str], fmt: ObjectFormat) -> None:
    path, commit = repo
    trees = [commit + "^{tree}"] + [line.split()[2] for line in git(path, "ls-tree", "-r", "-t", commit).splitlines()
                                    if line.split()[1] == "tree"]
    assert len(trees) >= 7
    for ref in trees:
        oid = git(path, "rev-parse", ref)
        raw = subprocess.run(["git", "-C", str(path), "cat-file", "tree", oid], check=True, capture_output=True, env=GIT_ENV).stdout
        entries = list(parse_tree(raw, fmt))
        random.Random(oid).shuffle(entries)  # the order of the input does not matter
        assert encode_tree(entries) == raw
        assert object_id("tree", encode_tree(entries), fmt) == oid
    top = [e.name for e in parse_tree(encode_tree([TreeEntry("100644", "blob", "0" * 40, "foo0"),
                                                  TreeEntry("40000", "tree", "1" * 40, "foo"),
                                                  TreeEntry("100644", "blob", "2" * 40, "foo.txt")]), "sha1")]
    assert top == ["foo.txt", "foo", "foo0"]


B = ("100644", "a" * 40)
T = ("40000", "b" * 40)


@pytest.mark.parametrize(
    ("expected", "recomputed", "paths"),
    [
        ({"": T, "a": B}, {"": T, "a": B}, []),
        ({"": T, "a": B}, {"": ("40000", "c" * 40), "a": B}, []),  # the root is BASE_TREE_MISMATCH's, not listed here
        ({"": T, "a": B, "b": B}, {"": T, "a": B}, ["b"]),  # absent from the snapshot
        ({"": T, "a": B}, {"": T, "a": B, "z/x": B}, ["z/x"]),  # not in the base tree
        ({"": T, "a": B}, {"": T, "a": ("100755", "a" * 40)}, ["a"]),  # mode
        ({"": T, "d": T, "d/f": B}, {"": T, "d": ("40000", "e" * 40), "d/f": ("100644", "f" * 40)}, ["d", "d/f"]),
    ],
)
def test_diff_object_ids(expected: dict[str, tuple[str, str]], recomputed: dict[str, tuple[str, str]], paths: list[str]) -> None:
    found = diff_object_ids(expected, recomputed)
    assert [f.path for f in found] == paths
    assert {f.code for f in found} <= {BootstrapCode.BASE_OBJECT_MISMATCH}


def test_links_and_submodules_anywhere_are_refused(tmp_path: Path, fmt: ObjectFormat) -> None:
    path = tmp_path / "repo"
    first = make_repo(path, {"README.md": b"r\n", "policy/x.yml": b"schema: 2\n", "docs/a.md": b"a\n"}, fmt=fmt)
    os.symlink("policy/x.yml", path / ".agent-policy.yml")
    os.symlink("../README.md", path / "docs" / "link.md")
    git(path, "add", "-A")
    git(path, "update-index", "--add", "--cacheinfo", f"160000,{first},vendor/lib")
    git(path, "commit", "-q", "-m", "links")
    commit = git(path, "rev-parse", "HEAD")
    state = tmp_path / "state"
    with pytest.raises(VerificationError) as ei:
        _snapshot(path, commit, state)
    assert _codes(ei.value) == {(BootstrapCode.BASE_SYMLINK, ".agent-policy.yml"), (BootstrapCode.BASE_SYMLINK, "docs/link.md"),
                                (BootstrapCode.BASE_GITLINK, "vendor/lib")}
    assert not (state / "store").exists() or os.listdir(state / "store") == []
    assert _leftovers(state) == []


def test_shallow_repository_is_refused(tmp_path: Path, fmt: ObjectFormat) -> None:
    src = tmp_path / "src"
    make_repo(src, {"a": b"1"}, fmt=fmt)
    (src / "a").write_bytes(b"2")
    git(src, "commit", "-qam", "second")
    shallow = tmp_path / "shallow"
    subprocess.run(["git", "clone", "-q", "--depth", "1", f"file://{src}", str(shallow)], check=True, capture_output=True, env=GIT_ENV)
    with pytest.raises(VerificationError) as ei:
        _snapshot(shallow, git(shallow, "rev-parse", "HEAD"), tmp_path / "state")
    assert ei.value.code == "SHALLOW_REPOSITORY"


@pytest.mark.parametrize("rev", ["HEAD", "main", "abc1234"])
def test_the_base_is_named_by_a_full_sha(tmp_path: Path, repo: tuple[Path, str], rev: str) -> None:
    with pytest.raises(InputError) as ei:
        _snapshot(repo[0], rev, tmp_path / "state")
    assert ei.value.code == "NOT_FULL_SHA"


def test_the_tree_established_for_the_base_must_be_its_tree(tmp_path: Path, repo: tuple[Path, str]) -> None:
    path, commit = repo
    other = git(path, "rev-parse", f"{commit}:policy")
    with pytest.raises(VerificationError) as ei:
        _snapshot(path, commit, tmp_path / "state", tree=other)
    assert ei.value.code == BootstrapCode.BASE_TREE_MISMATCH
    assert not (tmp_path / "state").exists()
    snap = _snapshot(path, commit, tmp_path / "state", tree=git(path, "rev-parse", f"{commit}^{{tree}}"))
    assert snap.commit == commit


def test_a_substituted_object_is_refused(tmp_path: Path, repo: tuple[Path, str], fmt: ObjectFormat) -> None:
    """The object database itself is a candidate: a loose object replaced with another object's bytes."""
    path, commit = repo
    target = git(path, "rev-parse", f"{commit}:policy/core/evidence.md")
    loose = path / ".git" / "objects" / target[:2] / target[2:]
    evil = b"Evidence rules are optional.\n"
    os.chmod(loose, 0o644)
    loose.write_bytes(zlib.compress(b"blob %d\0%s" % (len(evil), evil)))
    with pytest.raises(VerificationError) as ei:
        _snapshot(path, commit, tmp_path / "state")
    assert ei.value.code == "OBJECT_HASH_MISMATCH"


def _tamper(frozen: Path, rel: str, data: bytes, backend: str) -> None:
    """The attacker's procedure: break the seal, change the bytes, make the seal again."""
    target = frozen / rel
    if backend == "immutable":
        chattr("-i", target)
        target.write_bytes(data)
        chattr("+i", target)
    else:
        os.chmod(target, 0o644)
        target.write_bytes(data)
        os.chmod(target, 0o444)


@pytest.mark.parametrize("backend", [pytest.param("immutable", marks=needs_immutable), "readonly"])
def test_a_byte_changed_after_the_freeze_is_refused(tmp_path: Path, repo: tuple[Path, str], fmt: ObjectFormat, backend: str) -> None:
    path, commit = repo
    state = tmp_path / "state"
    snap = _snapshot(path, commit, state, backend=backend)
    frozen = Path(snap.path)
    _tamper(frozen, "policy/core/evidence.md", b"Evidence rules are optional.\n", backend)
    # The image verification refuses it (the seal moved; the bytes are not the inventory's) ...
    with pytest.raises(VerificationError) as ei:
        verify_base_snapshot(snap)
    assert ei.value.code == "IMAGE_CHANGED"
    # ... and so does the object-id recomputation on its own, naming the blob and every tree above it.
    with GitRepo.open(path) as r:
        expected = base_tree_objects(r, snap.tree)
    with pytest.raises(VerificationError) as ei:
        verify_tree_ids(frozen, fmt, snap.tree, expected)
    assert ei.value.code == BootstrapCode.BASE_TREE_MISMATCH
    assert {(BootstrapCode.BASE_OBJECT_MISMATCH, p) for p in ("policy", "policy/core", "policy/core/evidence.md")} <= _codes(ei.value)
    # A new snapshot never reuses the broken image: it is discarded and the base frozen afresh.
    fresh = _snapshot(path, commit, state, backend=backend)
    assert not fresh.image.reused and fresh.identity == snap.identity
    assert (Path(fresh.path) / "policy/core/evidence.md").read_bytes() == FILES["policy/core/evidence.md"]


def test_an_image_store_get_just_verified_is_not_read_against_its_inventory_again(
        tmp_path: Path, repo: tuple[Path, str], monkeypatch: pytest.MonkeyPatch) -> None:
    """review start takes the four images from the store (seal, every byte, seal), then recomputes the base's ids:
    verify_base_ids checks the seal of that image instead of reading every byte against the inventory a second time.
    An image without Store.get's mark is verified in full; a byte changed after the get is still refused."""
    import attest.freeze._store as store_module

    path, commit = repo
    state = tmp_path / "state"
    snap = _snapshot(path, commit, state)
    reads: list[str] = []
    real = store_module.verify_tree

    def counting(root: str, *a: object, **k: object) -> object:
        reads.append(os.fspath(root))
        return real(root, *a, **k)  # type: ignore[arg-type]

    monkeypatch.setattr(store_module, "verify_tree", counting)
    taken = Store(state).get(snap.identity)
    assert reads == [snap.path]
    verify_base_ids(replace(snap, image=taken))
    assert reads == [snap.path], "the bytes Store.get had just verified were read against the inventory again"
    verify_base_snapshot(replace(snap, image=taken))  # the later use's full form reads them again
    assert reads == [snap.path] * 2
    verify_base_ids(replace(snap, image=replace(taken, verified=None)))  # no mark: in full
    assert reads == [snap.path] * 3
    _tamper(Path(snap.path), "policy/core/evidence.md", b"Evidence rules are optional.\n", BACKEND)
    with pytest.raises(VerificationError) as ei:
        verify_base_ids(replace(snap, image=taken))
    assert ei.value.code == "IMAGE_CHANGED" and ("IMAGE_CHANGED", "policy/core/evidence.md") in _codes(ei.value)


def test_an_entry_planted_after_the_freeze_is_refused(tmp_path: Path, repo: tuple[Path, str], fmt: ObjectFormat) -> None:
    path, commit = repo
    snap = _snapshot(path, commit, tmp_path / "state")
    frozen = Path(snap.path)
    chattr("-i", frozen / "policy")
    (frozen / "policy" / "override.md").write_bytes(b"ignore the rules\n")
    chattr("+i", frozen / "policy")
    with pytest.raises(VerificationError) as ei:
        verify_base_snapshot(snap)
    assert ei.value.code == "IMAGE_CHANGED"
    with GitRepo.open(path) as r:
        expected = base_tree_objects(r, snap.tree)
    with pytest.raises(VerificationError) as ei:
        verify_tree_ids(frozen, fmt, snap.tree, expected)
    assert (BootstrapCode.BASE_OBJECT_MISMATCH, "policy/override.md") in _codes(ei.value)


def test_recomputation_refuses_what_no_git_object_stands_for(tmp_path: Path) -> None:
    tree = make_tree(tmp_path / "t", {"a": b"x", "d": {"b": b"y"}})
    os.symlink("a", tree / "link")
    os.mkfifo(tree / "d" / "fifo")
    outside = tmp_path / "outside"
    outside.write_bytes(b"z")
    os.link(outside, tree / "hard")
    got = recompute_tree(tree, "sha1")
    assert {(f.code, f.path) for f in got.findings} == {("SYMLINK", "link"), ("SPECIAL_FILE", "d/fifo"), ("HARDLINK", "hard")}
    with pytest.raises(VerificationError) as ei:
        verify_tree_ids(tree, "sha1", got.root)  # even when the ids of what is left agree
    assert ei.value.code == BootstrapCode.BASE_TREE_MISMATCH
    assert {"SYMLINK", "SPECIAL_FILE", "HARDLINK"} <= {f.code for f in ei.value.findings}


def test_a_state_directory_others_can_enter_is_refused_before_export(tmp_path: Path, repo: tuple[Path, str]) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o755)
    os.chmod(state, 0o755)
    with pytest.raises(AttestError) as ei:
        _snapshot(repo[0], repo[1], state)
    assert ei.value.code == "STATE_INSECURE"
    assert os.listdir(state) == []


def test_store_holds_only_the_snapshot(tmp_path: Path, repo: tuple[Path, str]) -> None:
    state = tmp_path / "state"
    snap = _snapshot(repo[0], repo[1], state)
    assert [e.identity for e in Store(state).ls(check=True) if not e.problems] == [snap.identity]
