"""Best common ancestors from objects, against ``git merge-base --all`` on real repositories."""

from __future__ import annotations

import os
import random
import subprocess
from pathlib import Path

import pytest
from support.gitrepo import GIT_ENV, git

from attest.errors import InputError, VerificationError
from attest.git import GitCode, GitRepo
from attest.git._ancestry import (
    DEFAULT_MAX_COMMITS,
    best_common_ancestors,
    parse_commit_header,
    require_single_merge_base,
)

FORMATS = ["sha1", "sha256"]


class History:
    """A repository whose commits (all with the empty tree) are made with ``git commit-tree``."""

    def __init__(self, path: Path, fmt: str) -> None:
        self.path = path
        path.mkdir(parents=True, exist_ok=True)
        git(path, "init", "-q", f"--object-format={fmt}")
        self.tree = git(path, "mktree", input=b"")
        self.n = 0

    def commit(self, *parents: str, time: int | None = None) -> str:
        self.n += 1
        env = dict(GIT_ENV, GIT_COMMITTER_DATE=f"{1_600_000_000 + (self.n if time is None else time)} +0000")
        args = ["git", "-C", str(self.path), "commit-tree", self.tree, "-m", f"c{self.n}"]
        for p in parents:
            args += ["-p", p]
        return subprocess.run(args, env=env, capture_output=True, check=True).stdout.decode().strip()

    def chain(self, start: str | None, length: int) -> list[str]:
        out: list[str] = []
        for _ in range(length):
            start = self.commit(*([start] if start else []))
            out.append(start)
        return out


def git_merge_bases(path: Path, a: str, b: str) -> tuple[str, ...]:
    proc = subprocess.run(["git", "-C", str(path), "merge-base", "--all", a, b], env=GIT_ENV, capture_output=True)
    assert proc.returncode in (0, 1), proc.stderr
    return tuple(sorted(proc.stdout.decode().split()))


def _scenario(h: History, name: str) -> tuple[str, str, tuple[str, ...]]:
    """(a, b, the expected best common ancestors) for each named history shape."""
    root = h.commit()
    if name == "linear":
        c = h.chain(root, 4)
        return c[-1], c[1], (c[1],)
    if name == "head-equals-base":
        return root, root, (root,)
    if name == "head-behind-base":  # the base has moved on past the head
        c = h.chain(root, 3)
        return c[-1], c[0], (c[0],)
    if name == "branch":
        x, y = h.chain(root, 3), h.chain(root, 2)
        return x[-1], y[-1], (root,)
    if name == "branch-and-merge":
        x, y = h.chain(root, 2), h.chain(root, 2)
        merged = h.commit(x[-1], y[-1])
        more = h.chain(y[-1], 1)
        return merged, more[-1], (y[-1],)
    if name == "criss-cross":
        x1, y1 = h.commit(root), h.commit(root)
        x2, y2 = h.commit(x1, y1), h.commit(y1, x1)
        return x2, y2, tuple(sorted((x1, y1)))
    if name == "criss-cross-then-merged":  # one side merged the other again: one base once more
        x1, y1 = h.commit(root), h.commit(root)
        x2, y2 = h.commit(x1, y1), h.commit(y1, x1)
        x3 = h.commit(x2, y2)
        return x3, y2, (y2,)
    if name == "unrelated":
        other = h.chain(None, 3)
        return h.chain(root, 2)[-1], other[-1], ()
    if name == "octopus":
        x, y, z = h.commit(root), h.commit(root), h.commit(root)
        octo = h.commit(x, y, z)
        return octo, h.commit(y), (y,)
    if name == "skewed-clock":  # committer times that lie: ordering only, never the answer
        old = h.commit(root, time=10_000)
        x = h.commit(old, time=5)
        y = h.commit(old, time=1)
        return x, h.commit(y, time=20_000), (old,)
    raise AssertionError(name)


SCENARIOS = ["linear", "head-equals-base", "head-behind-base", "branch", "branch-and-merge", "criss-cross",
             "criss-cross-then-merged", "unrelated", "octopus", "skewed-clock"]
DECISION = {"criss-cross": GitCode.MULTIPLE_MERGE_BASES, "unrelated": GitCode.NO_MERGE_BASE}


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("name", SCENARIOS)
def test_scenarios_match_git_merge_base_all(tmp_path: Path, fmt: str, name: str) -> None:
    h = History(tmp_path / "r", fmt)
    a, b, expected = _scenario(h, name)
    assert git_merge_bases(h.path, a, b) == expected  # the table itself agrees with git
    with GitRepo.open(h.path) as r:
        assert best_common_ancestors(r, a, b) == expected
        assert best_common_ancestors(r, b, a) == expected
        bases = best_common_ancestors(r, a, b)
    if name in DECISION:
        with pytest.raises(VerificationError) as ei:
            require_single_merge_base(bases)
        assert ei.value.code == DECISION[name]
    else:
        assert require_single_merge_base(bases) == expected[0]


@pytest.mark.parametrize("fmt", FORMATS)
def test_porcelain_histories_match_git(tmp_path: Path, fmt: str) -> None:
    """The same shapes made the ordinary way (commit, branch, merge, checkout --orphan)."""
    repo = tmp_path / "r"
    repo.mkdir()
    git(repo, "init", "-q", f"--object-format={fmt}", "-b", "main")

    def commit(name: str) -> str:
        (repo / name).write_text(name)
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", name)
        return git(repo, "rev-parse", "HEAD")

    base = commit("base")
    git(repo, "checkout", "-q", "-b", "x")
    x1 = commit("x1")
    git(repo, "checkout", "-q", "main")
    m1 = commit("m1")
    git(repo, "merge", "-q", "--no-edit", "x")
    merged = git(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "-q", "x")
    git(repo, "merge", "-q", "--no-edit", m1)
    x2 = git(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "-q", "--orphan", "lonely")
    lonely = commit("lonely")
    pairs = [(merged, x1), (x1, m1), (merged, x2), (lonely, merged), (base, merged), (x2, x2)]
    with GitRepo.open(repo) as r:
        for a, b in pairs:
            assert best_common_ancestors(r, a, b) == git_merge_bases(repo, a, b), (a, b)
        assert best_common_ancestors(r, merged, x2) == tuple(sorted((x1, m1)))  # criss-cross


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("seed", range(4))
def test_random_histories_match_git(tmp_path: Path, fmt: str, seed: int) -> None:
    """Random DAGs (merges of up to three parents, several roots, lying clocks) against git."""
    rng = random.Random(seed)
    h = History(tmp_path / "r", fmt)
    commits: list[str] = []
    for _ in range(45):
        if not commits or rng.random() < 0.05:
            parents: list[str] = []
        elif rng.random() < 0.6:
            parents = [rng.choice(commits[-4:])]
        else:
            parents = rng.sample(commits, min(len(commits), rng.choice((2, 2, 3))))
        commits.append(h.commit(*parents, time=rng.randrange(1_000_000)))
    with GitRepo.open(h.path) as r:
        for _ in range(60):
            a, b = rng.choice(commits), rng.choice(commits)
            assert best_common_ancestors(r, a, b) == git_merge_bases(h.path, a, b), (a, b)


@pytest.mark.parametrize("fmt", FORMATS)
def test_deep_history_beyond_the_bound(tmp_path: Path, fmt: str) -> None:
    h = History(tmp_path / "r", fmt)
    root = h.commit()
    x = h.chain(root, 30)
    y = h.chain(root, 30)
    with GitRepo.open(h.path) as r:
        assert best_common_ancestors(r, x[-1], y[-1], max_commits=61) == (root,)  # exactly what it needs
        with pytest.raises(VerificationError) as ei:
            best_common_ancestors(r, x[-1], y[-1], max_commits=60)
        assert ei.value.code == GitCode.HISTORY_TOO_LONG
        # Unrelated histories are walked to both roots: the bound applies there too.
        other = h.chain(None, 40)
        with pytest.raises(VerificationError) as ei:
            best_common_ancestors(r, x[-1], other[-1], max_commits=50)
        assert ei.value.code == GitCode.HISTORY_TOO_LONG
        assert best_common_ancestors(r, x[-1], other[-1]) == ()
    assert DEFAULT_MAX_COMMITS >= 10_000


def test_a_short_walk_in_a_long_history(tmp_path: Path) -> None:
    """A nearby base is found without reading the whole history (the walk stops when all is stale)."""
    h = History(tmp_path / "r", "sha1")
    trunk = h.chain(None, 200)
    x, y = h.chain(trunk[-1], 3), h.chain(trunk[-1], 3)
    with GitRepo.open(h.path) as r:
        assert best_common_ancestors(r, x[-1], y[-1], max_commits=12) == (trunk[-1],)


@pytest.mark.parametrize("bad", [0, -1, True, 1.5, "10"])
def test_the_bound_must_be_a_positive_integer(tmp_path: Path, bad: object) -> None:
    h = History(tmp_path / "r", "sha1")
    c = h.commit()
    with GitRepo.open(h.path) as r, pytest.raises(ValueError):
        best_common_ancestors(r, c, c, max_commits=bad)  # type: ignore[arg-type]


def test_shallow_clone_fails_where_history_is_cut(tmp_path: Path) -> None:
    h = History(tmp_path / "r", "sha1")
    root = h.commit()
    x = h.chain(root, 3)
    y = h.chain(root, 3)
    git(h.path, "branch", "x", x[-1])
    git(h.path, "branch", "y", y[-1])
    clone = tmp_path / "shallow"
    subprocess.run(["git", "clone", "-q", "--bare", "--depth", "2", "--no-single-branch", f"file://{h.path}", str(clone)],
                   check=True, capture_output=True, env=GIT_ENV)
    with GitRepo.open(clone) as r:
        with pytest.raises(VerificationError) as ei:
            best_common_ancestors(r, x[-1], y[-1])
        assert ei.value.code == GitCode.SHALLOW_REPOSITORY
        # A question the objects present answer completely is answered.
        assert best_common_ancestors(r, x[-1], x[-2]) == (x[-2],)


def test_a_missing_parent_in_a_full_repository(tmp_path: Path) -> None:
    h = History(tmp_path / "r", "sha1")
    root = h.commit()
    mid = h.commit(root)
    x, y = h.commit(mid), h.commit(mid)
    os.remove(h.path / ".git" / "objects" / mid[:2] / mid[2:])
    with GitRepo.open(h.path) as r, pytest.raises(VerificationError) as ei:
        best_common_ancestors(r, x, y)
    assert ei.value.code == GitCode.OBJECT_MISSING
    assert mid in ei.value.detail


@pytest.mark.parametrize("fmt", FORMATS)
def test_tips_must_be_full_commit_ids(tmp_path: Path, fmt: str) -> None:
    h = History(tmp_path / "r", fmt)
    c = h.commit()
    with GitRepo.open(h.path) as r:
        for rev in ("HEAD", c[:12], c.upper()):
            with pytest.raises(InputError) as ei:
                best_common_ancestors(r, rev, c)
            assert ei.value.code == GitCode.NOT_FULL_SHA
        with pytest.raises(VerificationError) as vi:
            best_common_ancestors(r, c, h.tree)
        assert vi.value.code == GitCode.WRONG_OBJECT_TYPE
        with pytest.raises(VerificationError) as vi:
            best_common_ancestors(r, c, "0" * len(c))
        assert vi.value.code == GitCode.OBJECT_MISSING


def test_local_state_that_rewrites_parents_is_ignored(tmp_path: Path) -> None:
    """Grafts, a planted shallow file and replace refs steer plain git; the objects decide here."""
    h = History(tmp_path / "r", "sha1")
    root = h.commit()
    x, y = h.commit(root), h.commit(root)
    replacement = h.commit()  # a root commit
    git(h.path, "replace", x, replacement)
    (h.path / ".git" / "info").mkdir(exist_ok=True)
    (h.path / ".git" / "info" / "grafts").write_text(f"{y}\n")
    (h.path / ".git" / "shallow").write_text(f"{x}\n")
    assert git_merge_bases(h.path, x, y) == ()  # plain git is steered ...
    with GitRepo.open(h.path) as r:
        assert best_common_ancestors(r, x, y) == (root,)  # ... but not us


def _literal_commit(repo: Path, body: bytes) -> str:
    return git(repo, "hash-object", "-t", "commit", "-w", "--literally", "--stdin", input=body)


def test_malformed_commit_objects(tmp_path: Path) -> None:
    h = History(tmp_path / "r", "sha1")
    root = h.commit()
    who = b"author t <t@e> 1 +0000\ncommitter t <t@e> 1 +0000\n"
    tree = h.tree.encode()
    bodies = {
        "bad parent": b"tree " + tree + b"\nparent " + root[:20].encode() + b"\n" + who + b"\nm\n",
        "late parent": b"tree " + tree + b"\n" + who + b"parent " + root.encode() + b"\n\nm\n",
        "no header end": b"tree " + tree + b"\n" + who,
        "no tree": b"parent " + root.encode() + b"\n" + who + b"\nm\n",
    }
    with GitRepo.open(h.path) as r:
        for name, body in bodies.items():
            bad = _literal_commit(h.path, body)
            with pytest.raises(VerificationError) as ei:
                best_common_ancestors(r, bad, root)
            assert ei.value.code == GitCode.MALFORMED_OBJECT, name


def test_parse_commit_header() -> None:
    t, p1, p2 = "1" * 40, "2" * 40, "3" * 40
    data = (f"tree {t}\nparent {p1}\nparent {p2}\nparent {p1}\nauthor a <a> 5 +0000\n"
            f"committer c <c> 1577836800 +0100\ngpgsig -----BEGIN\n parent {p2}\n\nmsg\nparent x\n").encode()
    header = parse_commit_header("9" * 40, data, "sha1")
    assert (header.tree, header.parents, header.committer_time) == (t, (p1, p2), 1577836800)
    odd = parse_commit_header("9" * 40, f"tree {t}\ncommitter nobody\n\n".encode(), "sha1")
    assert (odd.parents, odd.committer_time) == ((), 0)


@pytest.mark.parametrize(("bases", "outcome"), [
    ((), GitCode.NO_MERGE_BASE),
    (("a" * 40,), "a" * 40),
    (("b" * 64,), "b" * 64),
    (("a" * 40, "a" * 40), "a" * 40),
    (("a" * 40, "b" * 40), GitCode.MULTIPLE_MERGE_BASES),
    (["c" * 40, "a" * 40, "b" * 40], GitCode.MULTIPLE_MERGE_BASES),
])
def test_require_single_merge_base(bases: tuple[str, ...], outcome: str) -> None:
    if isinstance(outcome, GitCode):
        with pytest.raises(VerificationError) as ei:
            require_single_merge_base(bases)
        assert ei.value.code == outcome
    else:
        assert require_single_merge_base(bases) == outcome


def test_require_single_merge_base_refuses_non_ids() -> None:
    with pytest.raises(TypeError):
        require_single_merge_base("a" * 40)
    with pytest.raises(InputError) as ei:
        require_single_merge_base(("HEAD",))
    assert ei.value.code == GitCode.NOT_FULL_SHA
