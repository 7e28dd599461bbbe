"""The git layer against real repositories built in tmp_path."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from support.gitrepo import GIT_ENV, git
from support.gitrepo import make_repo as support_make_repo

from attest.errors import InputError, VerificationError
from attest.git import GitCode, GitRepo, object_id, parse_tree, verify_full_sha
from attest.inventory import inventory_tree

ENV = GIT_ENV


def make_repo(path: Path, files: dict[str, bytes], *, fmt: str = "sha1", execs: tuple[str, ...] = ()) -> str:
    return support_make_repo(path, files, fmt=fmt, execs=execs, message='init')


def test_object_id_matches_git(tmp_path: Path) -> None:
    repo = tmp_path / "r"
    make_repo(repo, {"a": b"hello\n"})
    assert object_id("blob", b"hello\n", "sha1") == git(repo, "hash-object", "a")


@pytest.mark.parametrize("fmt", ["sha1", "sha256"])
def test_export_matches_tree_inventory(tmp_path: Path, fmt: str) -> None:
    repo = tmp_path / "r"
    sha = make_repo(repo, {"skills/x/SKILL.md": b"# x\n", "skills/x/bin/run": b"#!/bin/sh\n", "top": b"t"}, fmt=fmt,
                    execs=("skills/x/bin/run",))
    with GitRepo.open(repo) as r:
        assert r.object_format == fmt
        tree = r.commit_tree(sha)
        sub = r.subtree(tree, "skills/x")
        expected = r.tree_inventory(sub)
        out = tmp_path / "out"
        out.mkdir()
        assert r.export_tree(sub, out) == 2
    got = inventory_tree(out)
    assert got.identity == expected.identity
    assert {e.path: e.mode for e in got.entries} == {"SKILL.md": 0o644, "bin": 0o755, "bin/run": 0o755}


def test_export_ignores_worktree_filters(tmp_path: Path) -> None:
    """Bytes come from objects: a smudge filter or autocrlf in the repo config changes nothing."""
    repo = tmp_path / "r"
    sha = make_repo(repo, {"f.txt": b"a\nb\n", ".gitattributes": b"* text eol=crlf\n"})
    git(repo, "config", "core.autocrlf", "true")
    with GitRepo.open(repo) as r:
        out = tmp_path / "out"
        out.mkdir()
        r.export_tree(r.commit_tree(sha), out)
    assert (out / "f.txt").read_bytes() == b"a\nb\n"


@pytest.mark.parametrize("rev", ["HEAD", "main", "abc123", "A" * 40, "a" * 39, "a" * 64 + "0", ""])
def test_not_full_sha_refused(tmp_path: Path, rev: str) -> None:
    repo = tmp_path / "r"
    make_repo(repo, {"a": b"1"})
    with GitRepo.open(repo) as r, pytest.raises(InputError) as ei:
        r.commit_tree(rev)
    assert ei.value.code == GitCode.NOT_FULL_SHA


def test_sha256_length_refused_in_sha1_repo(tmp_path: Path) -> None:
    with pytest.raises(InputError) as ei:
        verify_full_sha("a" * 64, "sha1")
    assert ei.value.code == "NOT_FULL_SHA"


def test_missing_and_wrong_type(tmp_path: Path) -> None:
    repo = tmp_path / "r"
    sha = make_repo(repo, {"a": b"1"})
    blob = git(repo, "rev-parse", "HEAD:a")
    with GitRepo.open(repo) as r:
        with pytest.raises(VerificationError) as ei:
            r.commit_tree("0" * 40)
        assert ei.value.code == GitCode.OBJECT_MISSING
        with pytest.raises(VerificationError) as ei:
            r.commit_tree(blob)
        assert ei.value.code == GitCode.WRONG_OBJECT_TYPE
        # the batch process is still usable after errors
        assert r.commit_tree(sha)


def test_symlink_and_gitlink_refused(tmp_path: Path) -> None:
    repo = tmp_path / "r"
    make_repo(repo, {"s/a": b"1"})
    os.symlink("a", repo / "s" / "link")
    git(repo, "add", "-A")
    blob = git(repo, "rev-parse", "HEAD:s/a")
    git(repo, "update-index", "--add", "--cacheinfo", f"160000,{blob},g/sub")
    git(repo, "commit", "-q", "-m", "links")
    sha = git(repo, "rev-parse", "HEAD")
    with GitRepo.open(repo) as r:
        tree = r.commit_tree(sha)
        with pytest.raises(VerificationError) as ei:
            r.tree_inventory(r.subtree(tree, "s"))
        assert ei.value.code == GitCode.TREE_SYMLINK
        with pytest.raises(VerificationError) as ei:
            list(r.walk(r.subtree(tree, "g")))
        assert ei.value.code == GitCode.GITLINK
        with pytest.raises(VerificationError) as ei:
            r.subtree(tree, "g/sub")
        assert ei.value.code == GitCode.GITLINK
        with pytest.raises(VerificationError) as ei:
            r.subtree(tree, "s/link")
        assert ei.value.code == GitCode.TREE_SYMLINK
        with pytest.raises(VerificationError) as ei:
            r.subtree(tree, "nope")
        assert ei.value.code == GitCode.PATH_NOT_IN_TREE


def _raw_entry(mode: bytes, name: bytes, oid: str = "e" * 40) -> bytes:
    return mode + b" " + name + b"\0" + bytes.fromhex(oid)


@pytest.mark.parametrize(
    ("raw", "code"),
    [
        (_raw_entry(b"100644", b"b") + _raw_entry(b"100644", b"a"), GitCode.BAD_TREE_ORDER),
        (_raw_entry(b"100644", b"a") + _raw_entry(b"100644", b"a"), GitCode.BAD_TREE_ORDER),
        (_raw_entry(b"100644", b".."), GitCode.BAD_TREE_NAME),
        (_raw_entry(b"40000", b".GIT"), GitCode.BAD_TREE_NAME),
        (_raw_entry(b"100644", b"a\x01b"), GitCode.BAD_TREE_NAME),
        (_raw_entry(b"100644", b"\xff"), GitCode.BAD_TREE_NAME),
        (_raw_entry(b"100664", b"a"), GitCode.BAD_TREE_MODE),
        (_raw_entry(b"100644", b"a")[:-3], GitCode.MALFORMED_OBJECT),
    ],
)
def test_parse_tree_is_fsck_strict(raw: bytes, code: GitCode) -> None:
    with pytest.raises(VerificationError) as ei:
        parse_tree(raw, "sha1")
    assert ei.value.code == code


def test_corrupted_object_detected(tmp_path: Path) -> None:
    """A loose object whose content no longer hashes to its name is refused."""
    import zlib

    repo = tmp_path / "r"
    sha = make_repo(repo, {"a": b"original\n"})
    blob = git(repo, "rev-parse", "HEAD:a")
    obj = repo / ".git" / "objects" / blob[:2] / blob[2:]
    os.chmod(obj, 0o644)
    obj.write_bytes(zlib.compress(b"blob 9\0tampered\n"))
    with GitRepo.open(repo) as r:
        tree = r.commit_tree(sha)
        with pytest.raises(VerificationError) as ei:
            r.tree_inventory(tree)
    assert ei.value.code == GitCode.OBJECT_HASH_MISMATCH


def test_not_a_repository(tmp_path: Path) -> None:
    with pytest.raises(InputError) as ei:
        GitRepo.open(tmp_path)
    assert ei.value.code == GitCode.NOT_A_REPOSITORY


def test_export_refuses_planted_entries(tmp_path: Path) -> None:
    repo = tmp_path / "r"
    sha = make_repo(repo, {"a": b"1"})
    out = tmp_path / "out"
    out.mkdir()
    victim = tmp_path / "victim"
    victim.write_bytes(b"keep")
    os.symlink(victim, out / "a")
    with GitRepo.open(repo) as r, pytest.raises(FileExistsError):
        r.export_tree(r.commit_tree(sha), out)
    assert victim.read_bytes() == b"keep"


def test_caps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import attest.git._repo as repo_mod

    repo = tmp_path / "r"
    sha = make_repo(repo, {"a": b"1", "b": b"2"})
    monkeypatch.setattr(repo_mod, "MAX_ENTRIES", 1)
    with GitRepo.open(repo) as r, pytest.raises(VerificationError) as ei:
        r.tree_inventory(r.commit_tree(sha))
    assert ei.value.code == GitCode.TREE_TOO_LARGE


def test_git_failure_is_reported(tmp_path: Path) -> None:
    """A git-dir that vanished under an open repository object: a typed failure, not a hang."""
    from attest.errors import EnvironmentFailure

    r = GitRepo(str(tmp_path / "gone"), "sha1")
    with pytest.raises(EnvironmentFailure) as ei:
        r.read_object("a" * 40)
    r.close()
    assert ei.value.code == GitCode.GIT_FAILED


def test_merge_bases(tmp_path: Path) -> None:
    from attest.git import merge_bases, unique_merge_base

    repo = tmp_path / "r"
    base = make_repo(repo, {"a": b"1"})
    git(repo, "checkout", "-q", "-b", "x")
    (repo / "x").write_bytes(b"x")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "x")
    x1 = git(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "-q", base)
    git(repo, "checkout", "-q", "-b", "y")
    (repo / "y").write_bytes(b"y")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "y")
    y1 = git(repo, "rev-parse", "HEAD")
    with GitRepo.open(repo) as r:
        assert unique_merge_base(r, x1, y1) == base
        # Criss-cross: merge each side into the other; now two best bases.
        git(repo, "merge", "-q", "--no-edit", x1)
        y2 = git(repo, "rev-parse", "HEAD")
        git(repo, "checkout", "-q", x1)
        git(repo, "merge", "-q", "--no-edit", y1)
        x2 = git(repo, "rev-parse", "HEAD")
        assert merge_bases(r, x2, y2) == tuple(sorted((x1, y1)))
        with pytest.raises(VerificationError) as ei:
            unique_merge_base(r, x2, y2)
        assert ei.value.code == GitCode.MULTIPLE_MERGE_BASES
        # Unrelated history.
        git(repo, "checkout", "-q", "--orphan", "other")
        git(repo, "commit", "-q", "-m", "orphan")
        orphan = git(repo, "rev-parse", "HEAD")
        with pytest.raises(VerificationError) as ei:
            unique_merge_base(r, orphan, base)
        assert ei.value.code == GitCode.NO_MERGE_BASE
        with pytest.raises(InputError):
            unique_merge_base(r, "main", base)


def test_verify_export(tmp_path: Path) -> None:
    from attest.git import verify_export

    repo = tmp_path / "r"
    sha = make_repo(repo, {"d/f": b"1"})
    out = tmp_path / "out"
    out.mkdir()
    with GitRepo.open(repo) as r:
        tree = r.commit_tree(sha)
        r.export_tree(tree, out)
        assert verify_export(out, r, tree).file_count == 1
        (out / "d" / "extra").write_bytes(b"planted")
        with pytest.raises(VerificationError) as ei:
            verify_export(out, r, tree)
        assert ei.value.code == "EXTRA"


def _forked(tmp_path: Path) -> tuple[Path, str, str, str]:
    """base <- x1 (branch x) and base <- y1 (branch y)."""
    repo = tmp_path / "r"
    base = make_repo(repo, {"a": b"1"})
    git(repo, "checkout", "-q", "-b", "x")
    (repo / "x").write_bytes(b"x")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "x")
    x1 = git(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "-q", base)
    git(repo, "checkout", "-q", "-b", "y")
    (repo / "y").write_bytes(b"y")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "y")
    return repo, base, x1, git(repo, "rev-parse", "HEAD")


def test_merge_base_ignores_a_grafts_file(tmp_path: Path) -> None:
    from attest.git import unique_merge_base

    repo, base, x1, y1 = _forked(tmp_path)
    (repo / ".git" / "info").mkdir(exist_ok=True)
    (repo / ".git" / "info" / "grafts").write_text(f"{x1}\n")  # x1 becomes a root commit for plain git
    plain = subprocess.run(["git", "-C", str(repo), "merge-base", x1, y1], capture_output=True, env=ENV)
    assert plain.stdout.strip() == b""  # the graft steers plain git ...
    with GitRepo.open(repo) as r:
        assert unique_merge_base(r, x1, y1) == base  # ... but not us


def test_merge_base_ignores_a_forged_commit_graph(tmp_path: Path) -> None:
    from attest.git import unique_merge_base

    repo, base, x0, y1 = _forked(tmp_path)
    git(repo, "checkout", "-q", x0)
    (repo / "x").write_bytes(b"x1")
    git(repo, "commit", "-q", "-am", "x1")
    x1 = git(repo, "rev-parse", "HEAD")
    git(repo, "commit-graph", "write", "--reachable")
    graph = repo / ".git" / "objects" / "info" / "commit-graph"
    data = bytearray(graph.read_bytes())
    # Chunk table after the 8-byte header: (4-byte id, 8-byte offset) entries.
    offsets = {}
    for i in range(data[6] + 1):
        cid = bytes(data[8 + 12 * i: 12 + 12 * i])
        offsets[cid] = int.from_bytes(data[12 + 12 * i: 20 + 12 * i], "big")
    oidl = offsets[b"OIDL"]
    ids = [bytes(data[oidl + 20 * k: oidl + 20 * k + 20]).hex() for k in range(4)]
    # git parses the commits it is given from their objects, the ones it walks to from the graph.
    row = offsets[b"CDAT"] + 36 * ids.index(x0)
    data[row + 20: row + 24] = (0x70000000).to_bytes(4, "big")  # "no parent": x0 claims to be a root
    os.chmod(graph, 0o644)
    graph.write_bytes(bytes(data))
    plain = subprocess.run(["git", "-C", str(repo), "merge-base", x1, y1], capture_output=True, env=ENV)
    assert plain.stdout.strip() == b""  # the forged graph steers plain git ...
    with GitRepo.open(repo) as r:
        assert unique_merge_base(r, x1, y1) == base  # ... but not us


def test_merge_base_refuses_a_shallow_repository(tmp_path: Path) -> None:
    from attest.git import merge_bases

    repo, _, x1, y1 = _forked(tmp_path)
    clone = tmp_path / "shallow"
    subprocess.run(["git", "clone", "-q", "--depth", "1", "--no-single-branch", f"file://{repo}", str(clone)], check=True,
                   capture_output=True, env=ENV)
    with GitRepo.open(clone) as r:
        with pytest.raises(VerificationError) as ei:
            merge_bases(r, x1, y1)
        assert ei.value.code == GitCode.SHALLOW_REPOSITORY
        assert r.commit_tree(x1)  # reading a commit by its full id still works in a shallow clone
