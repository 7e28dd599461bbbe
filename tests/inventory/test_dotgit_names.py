"""Every name git refuses as `.git` (fsck, core.protectNTFS, core.protectHFS) is refused (security review).

Before the fix only ``name.rstrip(". ").casefold() in {".git", "git~1"}`` was reserved, so
``.GIT:x``, ``.git::$INDEX_ALLOCATION`` (NTFS alternate data streams of ``.git``) and, had they
passed the character checks, HFS+ spellings such as ``.g\\u200cit`` got through. The table comes
from git's own tests (t1014-read-tree-confusing.sh, t1450-fsck.sh) and from ``is_ntfs_dotgit``
(path.c) / ``is_hfs_dotgit`` (utf8.c); every case, and a generated batch, is also put to the
real ``git fsck`` so the port cannot drift from git.
"""

from __future__ import annotations

import os
import random
import re
import subprocess
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from support.gitrepo import GIT_ENV
from support.trees import make_tree

from attest.errors import VerificationError
from attest.git import GitCode
from attest.git._objects import parse_tree
from attest.inventory import InventoryCode, check_name, check_path, scan_tree
from attest.inventory._names import _RESERVED, _fsck_dotgit, is_dotgit

HFS_IGNORED = [*range(0x200C, 0x2010), *range(0x202A, 0x202F), *range(0x206A, 0x2070), 0xFEFF]

DOTGIT = [
    # t1014-read-tree-confusing.sh "reject ... at end of path / as subtree"
    ".git",
    ".GIT",
    "\u200c.Git",
    ".gI\u200cT",
    ".GiT\u200c",
    "git~1",
    ".git. ",
    ".\\.GIT\\foobar",
    ".git\\foobar",
    ".git...:alternate-stream",
    # t1450-fsck.sh "fsck notices ..."
    ".Git",
    ".git.",
    # the security review
    ".git::$INDEX_ALLOCATION",
    ".GIT:x",
    ".git ",
    ".g\u200cit",
    # is_ntfs_dotgit: trailing dots and spaces, then the end, a separator or ':'
    "GIT~1",
    "Git~1 . ",
    "git~1:stream",
    "git~1::$INDEX_ALLOCATION",
    ".git. . .",
    ".git:",
    ".GIT\\",
    "a\\.git",
    "a\\b\\git~1.",
    # is_hfs_dotgit: an invalid UTF-8 sequence ends the name (surrogateescape byte, U+FFFE, U+FFFF)
    ".git\udcff",
    ".git\ufffe",
    ".git\uffff",
    # every code point HFS+ ignores, anywhere in the name
    *(f".g{chr(cp)}it" for cp in HFS_IGNORED),
    *(f"{chr(cp)}.git" for cp in HFS_IGNORED),
    *(f".git{chr(cp)}" for cp in HFS_IGNORED),
    ".\ufeffg\u200di\u202et\u206f",
]

NOT_DOTGIT = [
    # t1014 / t1450 and git's is_dotgitmodules "--not" lists, adapted to .git
    ".",
    "..",
    ".\u0147it",  # t1450 "fsck allows .Ňit"
    ".github",
    ".gitignore",
    ".gitmodules",
    ".gitattributes",
    ".git-x",
    ".gitx",
    ".git x",
    ".git .x",
    ".git x ",
    " .git",
    "..git",
    "x.git",
    "git",
    ".gi",
    "gi~1",
    "git~",
    "git~0",
    "git~2",
    "git~10",
    "git~1x",
    "GITMOD~1",
    # only these code points are ignored by HFS+, and only ASCII letters fold
    ".g\u200bit",  # ZERO WIDTH SPACE
    ".g\u00adit",  # SOFT HYPHEN
    ".g\u2060it",  # WORD JOINER
    ".git\u200b",
    ".g\u0131t",  # dotless i
    ".\uff47it",  # fullwidth g
    ".gi\u0074\u0301",  # t + combining acute
    # HFS+ does not drop trailing dots; NTFS does not drop ignorable code points
    ".g\u200cit.",
    ".git\u200c.",
    "git\u200c~1",
    # an invalid sequence before the end is not .git
    ".g\udcffit",
    ".\udcffgit",
]


@pytest.mark.parametrize("name", DOTGIT)
def test_git_spellings_of_dotgit_are_reserved(name: str) -> None:
    assert is_dotgit(name)
    problem = check_name(name)
    if "\udcff" in name:  # not UTF-8: refused before any spelling is considered
        assert problem is not None and problem[0] == InventoryCode.BAD_NAME
    else:
        assert problem is not None and problem[0] == InventoryCode.RESERVED_NAME, problem
        assert check_path(f"sub/{name}/x") == problem


@pytest.mark.parametrize("name", NOT_DOTGIT)
def test_names_git_accepts_are_not_dotgit(name: str) -> None:
    assert not is_dotgit(name)
    problem = check_name(name)
    assert problem is None or problem[0] != InventoryCode.RESERVED_NAME


def _generated(count: int) -> list[str]:
    """Deterministic names around the edges of both ports (seeded: the same batch every run)."""
    rng = random.Random(20240601)
    alphabet = [".", "g", "G", "i", "I", "t", "T", "~", "1", "2", " ", ":", "\\", "x", "$", "\u200c", "\ufeff", "\u202e", "\u200b", "\u0131"]
    heads = ["", ".", ".git", ".GIT", "git~1", "GIT~1", "\u200c", ".g"]
    edges = [".", " ", ":", "\u200c", "\ufeff"]  # what may follow the prefix in one port or the other
    out = set()
    while len(out) < count:
        pool = edges if rng.random() < 0.5 else alphabet
        tail = "".join(rng.choice(pool) for _ in range(rng.randint(0, 6)))
        out.add(rng.choice(heads) + tail)
    out.discard("")
    return sorted(out)


def _git_fsck_dotgit(tmp_path: Path, names: list[str]) -> dict[str, bool]:
    """What the real ``git fsck`` says of each name: one tree per name, one fsck for all."""
    repo = tmp_path / "fsck"
    subprocess.run(["git", "init", "-q", str(repo)], check=True, env=GIT_ENV)

    def git(*args: str, data: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(["git", "-C", str(repo), *args], input=data, capture_output=True, env=GIT_ENV, check=False)

    blob = git("hash-object", "-w", "--stdin", data=b"x\n").stdout.decode().strip()
    batch = b"".join(b"100644 blob " + blob.encode() + b"\t" + os.fsencode(name) + b"\0\0" for name in names)
    made = git("mktree", "-z", "--batch", data=batch)  # one tree per name, in order
    assert made.returncode == 0, made.stderr
    trees = made.stdout.decode().split()
    assert len(trees) == len(names)
    tree_of = dict(zip(names, trees, strict=True))
    report = git("fsck", "--no-dangling", "--no-progress").stderr.decode(errors="replace")
    flagged = set(re.findall(r"tree ([0-9a-f]{40}): hasDotgit", report))
    assert flagged, "git fsck flagged nothing: the differential check would prove nothing"
    return {name: oid in flagged for name, oid in tree_of.items()}


def _fsck_can_hold(name: str) -> bool:
    # A tree entry name cannot hold NUL or '/'; any other bytes, invalid UTF-8 included, it can.
    return "\0" not in name and "/" not in name


def test_the_port_agrees_with_the_real_git_fsck(tmp_path: Path) -> None:
    names = [n for n in (*DOTGIT, *NOT_DOTGIT, *_generated(1500)) if _fsck_can_hold(n)]
    verdicts = _git_fsck_dotgit(tmp_path, names)
    disagree = {n: git_says for n, git_says in verdicts.items() if is_dotgit(n) != git_says}
    assert disagree == {}
    assert 200 < sum(verdicts.values()) < len(verdicts) - 200  # both verdicts are well exercised


def test_a_real_git_tree_entry_spelled_like_dotgit_is_refused(tmp_path: Path) -> None:
    repo = tmp_path / "r"
    subprocess.run(["git", "init", "-q", str(repo)], check=True, env=GIT_ENV)

    def git(*args: str, data: bytes | None = None) -> bytes:
        return subprocess.run(["git", "-C", str(repo), *args], input=data, capture_output=True, env=GIT_ENV, check=True).stdout

    blob = git("hash-object", "-w", "--stdin", data=b"[core]\n\tfsmonitor = evil\n").decode().strip()
    for name in (".GIT:x", ".git::$INDEX_ALLOCATION", "git~1.", ".g\u200cit"):
        tree = git("mktree", "-z", data=f"100644 blob {blob}\t{name}\0".encode()).decode().strip()
        raw = git("cat-file", "tree", tree)
        with pytest.raises(VerificationError) as err:
            parse_tree(raw, "sha1")
        assert err.value.code == GitCode.BAD_TREE_NAME and err.value.path == name


def test_the_walker_refuses_dotgit_spellings_on_disk(tmp_path: Path, walk_mode: str) -> None:
    """Real files with these names (ext4 / tmpfs store them all), in both walk modes."""
    on_disk = [n for n in DOTGIT if "\\" not in n and "\0" not in n]
    root = make_tree(tmp_path / "t", {"ok": b"fine\n", "sub": {}})
    for i, name in enumerate(on_disk):
        d = root / "sub" / f"d{i}"
        d.mkdir()
        os.close(os.open(os.path.join(os.fsencode(d), os.fsencode(name)), os.O_CREAT | os.O_WRONLY, 0o644))
    for name in (".github", ".git x", "git~2"):  # ordinary names beside them
        (root / "sub" / name).write_bytes(b"")
    findings = scan_tree(root).findings
    refused = {f.path.split("/")[1] for f in findings if f.path and f.path.startswith("sub/d")}
    assert refused == {f"d{i}" for i in range(len(on_disk))}
    codes = {f.path.split("/")[1]: f.code for f in findings if f.path and f.path.startswith("sub/d")}
    for i, name in enumerate(on_disk):
        assert codes[f"d{i}"] == (InventoryCode.BAD_NAME if "\udcff" in name else InventoryCode.RESERVED_NAME), name
    assert not [f for f in findings if not (f.path or "").startswith("sub/d")]


# The walker decides printable ASCII names with ``name.rstrip(". ").casefold() in _RESERVED``;
# that must be exactly is_dotgit(name) for them, or the walker and check_name drift apart.
@given(st.text(alphabet=st.sampled_from(list(".gGiItT~1 :x$-") + [chr(c) for c in range(0x20, 0x7F) if c not in (0x2F, 0x5C)]), max_size=12))
def test_the_walkers_fast_path_is_the_same_rule(name: str) -> None:
    assert (name.rstrip(". ").casefold() in _RESERVED) == is_dotgit(name)


# For ASCII names is_dotgit uses one expression instead of the port: they must agree everywhere.
_ASCII_EDGES = list(".gGiItT~1 :\\/\0x$") + [chr(c) for c in range(0x80)]


@given(st.lists(st.sampled_from(_ASCII_EDGES), max_size=14).map("".join))
def test_the_ascii_expression_is_the_port(name: str) -> None:
    assert is_dotgit(name) == _fsck_dotgit(name)


def test_the_ascii_expression_is_the_port_on_every_table_name() -> None:
    names = [n for n in (*DOTGIT, *NOT_DOTGIT, *_generated(1500)) if n.isascii()]
    assert len(names) > 300
    assert [n for n in names if is_dotgit(n) != _fsck_dotgit(n)] == []
