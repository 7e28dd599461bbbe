"""Attacks on the fast walker: the listing-trusting classification, the plain-ASCII name batch,
the walk against expected entries, and the hashing checks (docs/inventory.md).

Each test is an attack that the walker must refuse, run against real files, real mounts and
real racing processes (never a mock of ``os``).
"""

from __future__ import annotations

import hashlib
import mmap
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

from attest.errors import Finding, VerificationError
from attest.inventory import Inventory, InventoryCode, _walk, check_tree, inventory_tree, scan_tree, verify_tree
from attest.inventory._names import PATH_MAX

IS_ROOT = os.geteuid() == 0


def _codes(findings: Iterable[Finding]) -> set[str]:
    return {f.code for f in findings}


def _mkdirs_at(root: Path, names: list[str]) -> int:
    """Create the chain of directories ``names`` below ``root`` through descriptors; the deepest one's descriptor."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    for name in names:
        os.mkdir(name, dir_fd=fd)
        nfd = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = nfd
    return fd


# --- The plain-ASCII batch measured a non-ASCII prefix in characters ------------------------------

# 16 directories of 85 euro signs: 255 bytes each, 85 characters. Their paths are 4095 bytes
# (allowed); a plain ASCII name below them makes a path of more than 4096 bytes but of fewer
# than 1,400 characters.
_EURO_DIRS = ["\u20ac" * 85] * 16


def _deep_non_ascii_tree(tmp_path: Path, leaf: bool = True) -> tuple[Path, str]:
    root = tmp_path / "t"
    root.mkdir()
    fd = _mkdirs_at(root, _EURO_DIRS)
    try:
        if leaf:
            f = os.open("abcdef", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
            os.write(f, b"x")
            os.close(f)
    finally:
        os.close(fd)
    return root, "/".join([*_EURO_DIRS, "abcdef"])


def _open_deepest(root: Path) -> int:
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    for name in _EURO_DIRS:
        nfd = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = nfd
    return fd


def test_a_plain_name_below_non_ascii_directories_cannot_pass_the_path_cap(tmp_path: Path, walk_mode: str) -> None:
    """Before the fix the walker accepted the 4102-byte path and inventory_tree wrote an
    inventory its own reader refuses (PATH_TOO_LONG); in the forked walk the child's answer
    failed the walk with INTERNAL instead."""
    root, long_path = _deep_non_ascii_tree(tmp_path)
    assert len(long_path.encode()) > PATH_MAX and len(long_path) < PATH_MAX
    result = scan_tree(root)
    assert all(len(e.path.encode()) <= PATH_MAX for e in result.entries)
    assert [f.code for f in result.findings] == [InventoryCode.PATH_TOO_LONG]
    with pytest.raises(VerificationError) as info:
        inventory_tree(root)
    assert InventoryCode.PATH_TOO_LONG in _codes(info.value.findings)


def test_check_tree_reports_the_overlong_path_below_non_ascii_directories(tmp_path: Path, walk_mode: str) -> None:
    root, _ = _deep_non_ascii_tree(tmp_path, leaf=False)
    expected = inventory_tree(root)  # the directories alone: every path at most 4095 bytes
    Inventory.from_bytes(expected.canonical)
    fd = _open_deepest(root)
    try:
        os.mkdir("sub", dir_fd=fd)  # a plain directory name: 4099 bytes
    finally:
        os.close(fd)
    findings = check_tree(root, expected)
    assert _codes(findings) == {InventoryCode.PATH_TOO_LONG}


def test_a_path_of_exactly_path_max_bytes_below_non_ascii_directories_is_kept(tmp_path: Path) -> None:
    """The fix counts bytes, not more: a 4096-byte path (the cap itself) stays admissible."""
    root = tmp_path / "t"
    root.mkdir()
    fd = _mkdirs_at(root, _EURO_DIRS[:15])  # 15 * 255 + 14 slashes = 3839 bytes
    try:
        name = "n" * (PATH_MAX - (15 * 255 + 15))  # 256 bytes: one over NAME_MAX, so split in two levels
        os.mkdir(name[:200], dir_fd=fd)
        sub = os.open(name[:200], os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        rest = name[200:]
        f = os.open(rest[:-1], os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=sub)
        os.close(f)
        os.close(sub)
    finally:
        os.close(fd)
    inv = inventory_tree(root)
    longest = max(len(e.path.encode()) for e in inv.entries)
    assert longest == PATH_MAX
    assert Inventory.from_bytes(inv.canonical) == inv


# --- Files changed while hashed ------------------------------------------------------------------


@pytest.mark.xfail(
    strict=True,
    reason="a write through a shared writable mapping to an already dirty page moves neither mtime nor ctime "
    "(Linux updates them at the page's first write fault only): fstat before and after cannot see it",
)
def test_a_file_changed_through_a_shared_mapping_while_hashed_is_reported(tmp_path: Path) -> None:
    """A writer flips three bytes (at the start, the end, the middle: in that order, so the
    states (0,0,1) and (1,1,0) never exist) of a mapped 8 MiB file while the walker hashes
    it. A digest of one of the two states that never existed, without CHANGED_DURING_WALK,
    is a digest of bytes the file never held."""
    root = tmp_path / "t"
    root.mkdir()
    size = 8 << 20
    path = root / "big"
    path.write_bytes(bytes(size))
    fd = os.open(path, os.O_RDWR)
    mm = mmap.mmap(fd, size)
    os.close(fd)
    for i in range(0, size, 4096):
        mm[i] = 1  # every page dirty now: later writes take no write fault and no timestamp
    base = bytearray(mm[:])
    never: set[str] = set()
    for a, b, c in ((0, 0, 1), (1, 1, 0)):
        base[0], base[size // 2], base[size - 1] = a, b, c
        never.add(hashlib.sha256(base).hexdigest())
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the writer
        try:
            v = 0
            while True:
                v ^= 1
                mm[0] = v
                mm[size - 1] = v
                mm[size // 2] = v
        finally:
            os._exit(0)
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            result = scan_tree(root, workers=1)
            if InventoryCode.CHANGED_DURING_WALK in _codes(result.findings):
                continue
            assert not {e.sha256 for e in result.entries} & never, "hashed bytes the file never held, and no finding"
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        mm.close()


# --- A real racing process swapping an entry between the listing and the open --------------------


def _racer(tree: Path, name: str, variants: list[Path]) -> int:
    """Fork a process that keeps putting each of ``variants`` at ``tree/name`` (by rename) and taking it away."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the racer
        try:
            target = str(tree / name)
            while True:
                for v in variants:
                    try:
                        os.rename(v, target)
                        os.rename(target, v)
                    except OSError:
                        pass
        finally:
            os._exit(0)
    return pid


@pytest.fixture
def good_bytes() -> bytes:
    return b"the expected bytes\n" * 100


@pytest.fixture(params=["tmpfs", "ext4"])
def raced(
    request: pytest.FixtureRequest, tmp_path: Path, good_bytes: bytes
) -> Iterator[tuple[Path, Inventory, list[Path]]]:
    """A tree whose expected inventory lists ``f`` (a 0644 file of ``good_bytes``) and ``d/x``;
    the variants are every way of presenting the same bytes that must be refused. On the
    suite's tmpfs and on a loop-mounted ext4."""
    if request.param == "ext4":
        tmp_path = request.getfixturevalue("htree_fs")
    tree = tmp_path / "tree"
    (tree / "d").mkdir(parents=True)
    (tree / "f").write_bytes(good_bytes)
    (tree / "f").chmod(0o644)
    (tree / "d" / "x").write_bytes(b"x")
    (tree / "d" / "x").chmod(0o644)
    for i in range(40):  # enough siblings for the listing and the open to be apart
        (tree / f"s{i:02}").write_bytes(b"s")
        (tree / f"s{i:02}").chmod(0o644)
    expected = inventory_tree(tree)
    (tree / "f").unlink()
    stage = tmp_path / "stage"  # same filesystem: rename works
    stage.mkdir()
    outside = tmp_path / "outside"
    outside.write_bytes(good_bytes)
    outside.chmod(0o644)
    variants = []
    link = stage / "link"
    os.symlink(outside, link)  # a symlink to the same bytes
    variants.append(link)
    hard = stage / "hard"
    os.link(outside, hard)  # the same bytes with a second name outside the tree
    variants.append(hard)
    fifo = stage / "fifo"
    os.mkfifo(fifo, 0o644)
    variants.append(fifo)
    sub = stage / "dir"
    sub.mkdir(mode=0o755)
    variants.append(sub)
    setuid = stage / "setuid"
    setuid.write_bytes(good_bytes)
    setuid.chmod(0o4644)
    variants.append(setuid)
    yield tree, expected, variants


def test_a_racing_process_never_gets_a_refused_variant_accepted(raced: tuple[Path, Inventory, list[Path]], walk_mode: str) -> None:
    """Never once does a symlink, a hard link, a FIFO, a directory or a setuid file put where
    ``f`` is listed pass as the expected file, whichever moment of the walk it comes in at."""
    tree, expected, variants = raced
    pid = _racer(tree, "f", variants)
    try:
        seen: set[str] = set()
        deadline = time.monotonic() + 1.5
        rounds = 0
        while time.monotonic() < deadline or rounds < 20:
            rounds += 1
            findings = check_tree(tree, expected)
            # A change of the root while it was listed is reported on "."; f itself must always
            # have its own finding, or it passed as the expected file.
            assert any(f.path == "f" or (f.path or "").startswith("f/") for f in findings), findings
            assert all(f.path in ("f", ".") or (f.path or "").startswith("f/") for f in findings), findings
            seen |= _codes(findings)
            with pytest.raises(VerificationError):
                verify_tree(tree, expected)
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    # The race reached more than the absent entry.
    assert seen - {InventoryCode.MISSING}


def test_a_directory_swapped_for_a_symlink_to_an_identical_copy_mid_walk_is_never_accepted(tmp_path: Path, walk_mode: str) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    for i in range(30):
        (tree / f"a{i:02}").write_bytes(b"a")
    (tree / "d").mkdir()
    for i in range(30):
        (tree / "d" / f"x{i:02}").write_bytes(b"x")
    expected = inventory_tree(tree)
    copy = tmp_path / "copy"
    shutil.copytree(tree / "d", copy)
    os.chmod(copy, os.stat(tree / "d").st_mode & 0o7777)
    shutil.rmtree(tree / "d")
    stage = tmp_path / "stage"
    stage.mkdir()
    os.symlink(copy, stage / "link")
    pid = _racer(tree, "d", [stage / "link"])
    try:
        deadline = time.monotonic() + 1
        rounds = 0
        while time.monotonic() < deadline or rounds < 20:
            rounds += 1
            findings = check_tree(tree, expected)
            assert any(f.path == "d" for f in findings), findings
            assert all(f.path in ("d", ".") or (f.path or "").startswith("d/") for f in findings), findings
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)


# --- A filesystem without d_type (DT_UNKNOWN in every listing) ----------------------------------


def _loop_ext4(tmp_path: Path, *features: str) -> Iterator[Path]:
    """A freshly made ext4 (``-O`` ``features``), loop-mounted below ``tmp_path``: the suite's
    own tmp_path is a tmpfs, whose listings and types differ from a disk's."""
    if not IS_ROOT or shutil.which("mkfs.ext4") is None:
        pytest.skip("needs root and mkfs.ext4 for a loop-mounted ext4")
    image = tmp_path / "fs.img"
    with open(image, "wb") as f:
        f.truncate(32 << 20)
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    subprocess.run(["mkfs.ext4", "-q", "-F", *[a for x in features for a in ("-O", x)], str(image)], check=True)
    if subprocess.run(["mount", "-o", "loop", str(image), str(mnt)], capture_output=True).returncode != 0:
        pytest.skip("cannot loop-mount")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], check=True)


@pytest.fixture
def no_dtype_fs(tmp_path: Path) -> Iterator[Path]:
    """An ext4 without the filetype feature: every listing gives DT_UNKNOWN."""
    yield from _loop_ext4(tmp_path, "^filetype")


@pytest.fixture
def htree_fs(tmp_path: Path) -> Iterator[Path]:
    """An ext4 with hashed directories (the default): a large listing is in name-hash order."""
    yield from _loop_ext4(tmp_path, "dir_index")


def test_a_filesystem_without_d_type_is_walked_and_refused_as_any_other(no_dtype_fs: Path, tmp_path: Path, walk_mode: str) -> None:
    root = no_dtype_fs / "t"
    root.mkdir()
    (root / "d").mkdir()
    (root / "d" / "f").write_bytes(b"data")
    (root / "g").write_bytes(b"gg")
    (root / "g").chmod(0o755)
    clean = inventory_tree(root, ignore=["lost+found/"])
    copy = tmp_path / "copy"
    shutil.copytree(root, copy)
    os.chmod(copy / "d", os.stat(root / "d").st_mode & 0o7777)
    assert inventory_tree(copy, ignore=["lost+found/"]).identity == clean.identity
    os.symlink("d/f", root / "link")
    os.mkfifo(root / "fifo")
    os.link(root / "g", root / "d" / "g2")
    findings = scan_tree(root).findings
    by_path = {f.path: f.code for f in findings}
    assert by_path == {
        "link": InventoryCode.SYMLINK,
        "fifo": InventoryCode.SPECIAL_FILE,
        "g": InventoryCode.HARDLINK,
        "d/g2": InventoryCode.HARDLINK,
    }
    findings = check_tree(root, clean)
    assert {(f.path, f.code) for f in findings} >= {("link", InventoryCode.SYMLINK), ("g", InventoryCode.HARDLINK)}


# --- Mount points inside the tree ---------------------------------------------------------------


@pytest.fixture
def mounts(tmp_path: Path) -> Iterator[list[Path]]:
    if not IS_ROOT:
        pytest.skip("needs root for bind mounts")
    done: list[Path] = []
    try:
        yield done
    finally:
        for m in reversed(done):
            subprocess.run(["umount", str(m)], check=False)


def _bind(src: Path, dst: Path, mounts: list[Path]) -> None:
    if subprocess.run(["mount", "--bind", str(src), str(dst)], capture_output=True).returncode != 0:
        pytest.skip("cannot bind-mount")
    mounts.append(dst)


def test_a_symlink_fifo_and_hard_link_inside_a_mounted_tmpfs_are_refused(tmp_path: Path, mounts: list[Path], walk_mode: str) -> None:
    """Below a mount point the listing's device is another: every rule still holds there."""
    root = tmp_path / "t"
    (root / "m").mkdir(parents=True)
    (root / "a").write_bytes(b"a")
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=0755", "tmpfs", str(root / "m")], capture_output=True).returncode != 0:
        pytest.skip("cannot mount tmpfs")
    mounts.append(root / "m")
    (root / "m" / "f").write_bytes(b"f")
    os.symlink("f", root / "m" / "l")
    os.mkfifo(root / "m" / "p")
    os.link(root / "m" / "f", root / "m" / "f2")
    os.chmod(root / "m" / "f", 0o644)
    findings = {(f.path, f.code) for f in scan_tree(root).findings}
    assert findings == {
        ("m/l", InventoryCode.SYMLINK),
        ("m/p", InventoryCode.SPECIAL_FILE),
        ("m/f", InventoryCode.HARDLINK),
        ("m/f2", InventoryCode.HARDLINK),
    }


def test_a_file_bind_mounted_over_an_expected_file_is_hashed_as_what_it_shows(tmp_path: Path, mounts: list[Path], walk_mode: str) -> None:
    """A file mounted over a listed file: the listing gives the covered inode, the descriptor the
    mounted one; the walker must hash what it opened and never the covered bytes."""
    root = tmp_path / "t"
    root.mkdir()
    (root / "f").write_bytes(b"expected")
    (root / "f").chmod(0o644)
    expected = inventory_tree(root)
    other = tmp_path / "other"
    other.write_bytes(b"mounted!")
    other.chmod(0o644)
    _bind(other, root / "f", mounts)
    findings = check_tree(root, expected)
    assert [(f.path, f.code) for f in findings] == [("f", InventoryCode.DIGEST_MISMATCH)]


def test_a_hard_linked_file_bind_mounted_into_the_tree_is_a_hard_link(tmp_path: Path, mounts: list[Path], walk_mode: str) -> None:
    root = tmp_path / "t"
    root.mkdir()
    (root / "f").write_bytes(b"expected")
    (root / "f").chmod(0o644)
    expected = inventory_tree(root)
    other = tmp_path / "other"
    other.write_bytes(b"expected")
    other.chmod(0o644)
    os.link(other, tmp_path / "other2")
    _bind(other, root / "f", mounts)
    findings = check_tree(root, expected)
    assert [(f.path, f.code) for f in findings] == [("f", InventoryCode.HARDLINK)]


@pytest.mark.parametrize("trust_listing", [True, False], ids=["listing-trusted", "lstat-first"])
def test_a_bind_mount_of_the_same_filesystem_is_walked_as_what_it_shows(
    tmp_path: Path, mounts: list[Path], monkeypatch: pytest.MonkeyPatch, walk_mode: str, trust_listing: bool
) -> None:
    """A bind mount of the same filesystem keeps the device: the listing's inode (the covered
    one) differs from fstat's on the same st_dev. Before the fix, the trusted-listing path took
    that for a swap (CHANGED_DURING_WALK) while the lstat-first path walked the same tree
    cleanly; both must walk it as the directory and file it shows (docs/inventory.md: the
    mounted entry is confirmed by its lstat)."""
    monkeypatch.setattr(_walk, "_TRUST_LISTING", trust_listing)
    root = tmp_path / "t"
    (root / "d").mkdir(parents=True)
    (root / "a").write_bytes(b"a")  # the first entry: an ordinary file, so the listing is trusted
    (root / "f").write_bytes(b"covered")
    src = tmp_path / "src"
    src.mkdir()
    (src / "x").write_bytes(b"x")
    (tmp_path / "g").write_bytes(b"shown")
    for p in (root / "a", root / "f", src / "x", tmp_path / "g"):
        p.chmod(0o644)
    for p in (root / "d", src):
        p.chmod(0o755)
    _bind(src, root / "d", mounts)
    _bind(tmp_path / "g", root / "f", mounts)
    assert os.stat(root / "d").st_dev == os.stat(root).st_dev
    result = scan_tree(root)
    assert result.findings == []
    got = {e.path: e for e in result.entries}
    assert sorted(got) == ["a", "d", "d/x", "f"]
    assert got["f"].sha256 == hashlib.sha256(b"shown").hexdigest()
    expected = inventory_tree(root)
    assert check_tree(root, expected) == []


# --- Names: twins, case, and the plain batch -----------------------------------------------------


@pytest.mark.parametrize(
    ("tree_name", "expected_name"),
    [
        ("caf\u0065\u0301", "caf\u00e9"),  # NFD in the tree, NFC in the inventory
        ("README", "readme"),  # case
        ("\u212a", "K"),  # Kelvin sign, whose NFC is K
        ("\ufb01le", "file"),  # a ligature that case-folds to "fi"
    ],
)
def test_a_twin_of_an_expected_name_is_extra_and_the_expected_one_missing(
    tmp_path: Path, walk_mode: str, tree_name: str, expected_name: str
) -> None:
    """The walk against expected entries matches by exact path: a name equal to the expected one
    only after normalization or case folding is never taken for it."""
    root = tmp_path / "t"
    root.mkdir()
    (root / expected_name).write_bytes(b"same")
    (root / expected_name).chmod(0o644)
    expected = inventory_tree(root)
    os.rename(root / expected_name, root / tree_name)
    assert {(f.path, f.code) for f in check_tree(root, expected)} == {
        (expected_name, InventoryCode.MISSING),
        (tree_name, InventoryCode.EXTRA),
    }


def test_an_inventory_listing_two_colliding_siblings_never_matches_a_tree(tmp_path: Path) -> None:
    """The reader accepts two entries equal under NFC and case folding (distinct bytes, sorted);
    no tree can then match it: the walker refuses one of the two names."""
    nfc, nfd = "caf\u00e9", "caf\u0065\u0301"
    root = tmp_path / "t"
    root.mkdir()
    for name in (nfc, nfd):
        (root / name).write_bytes(b"same")
        (root / name).chmod(0o644)
    digest = hashlib.sha256(b"same").hexdigest()
    paths = sorted([nfc, nfd], key=lambda p: p.encode())
    entries = ",".join(
        f'{{"digest":{{"sha256":"{digest}"}},"mode":420,"path":"{p}","size":4,"type":"file"}}' for p in paths
    )
    doc = f'{{"entries":[{entries}],"format":"https://attest.dev/inventory/v1","ignore":[],"name_policy":"strict-v1"}}'
    inv = Inventory.from_bytes(doc.encode())
    findings = check_tree(root, inv)
    assert InventoryCode.NAME_COLLISION in _codes(findings)
    with pytest.raises(VerificationError):
        verify_tree(root, inv)


@pytest.mark.parametrize(
    "name",
    [".git", ".GIT", "git~1", ".git.", ".git ", "a\\b", "a\nb", "\x7f", " "],
)
def test_an_ascii_name_the_batch_must_leave_to_the_per_name_rules(tmp_path: Path, name: str) -> None:
    """Each name hides among 200 plain siblings, so the listing would take the plain batch if it could."""
    root = tmp_path / "t"
    root.mkdir()
    for i in range(200):
        (root / f"n{i:03}").write_bytes(b"")
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.close(os.open(name, os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd))
    finally:
        os.close(fd)
    findings = scan_tree(root).findings
    if name == " ":
        assert findings == []  # a space alone is a valid name under strict-v1
    else:
        assert len(findings) == 1, findings


# --- Executable bits, sizes, an empty directory -------------------------------------------------


def test_an_added_exec_bit_and_an_empty_directory_are_each_reported(tmp_path: Path, walk_mode: str) -> None:
    root = tmp_path / "t"
    root.mkdir()
    for i in range(100):
        (root / f"f{i:03}").write_bytes(b"z")
        (root / f"f{i:03}").chmod(0o644)
    expected = inventory_tree(root)
    (root / "f050").chmod(0o744)
    (root / "empty").mkdir()
    os.chmod(root / "empty", 0o755)
    assert {(f.path, f.code) for f in check_tree(root, expected)} == {
        ("f050", InventoryCode.MODE_CHANGED),
        ("empty", InventoryCode.EXTRA),
    }


def test_a_file_truncated_and_refilled_to_the_same_size_and_mtime_is_a_digest_mismatch(tmp_path: Path) -> None:
    """Matching by path compares the digest, not the stat: the same size and the old mtime back
    do not make other bytes pass."""
    root = tmp_path / "t"
    root.mkdir()
    f = root / "f"
    f.write_bytes(b"A" * 1000)
    f.chmod(0o644)
    expected = inventory_tree(root)
    st = os.stat(f)
    f.write_bytes(b"B" * 1000)
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert [(x.path, x.code) for x in check_tree(root, expected)] == [("f", InventoryCode.DIGEST_MISMATCH)]


# --- An entry that would make an open block ------------------------------------------------------


def test_a_file_under_a_write_lease_is_reported_at_once_not_waited_for(tmp_path: Path, walk_mode: str) -> None:
    """Opening a file another description holds a write lease on waits for the lease break
    (45 s by default) unless O_NONBLOCK: the walker must neither wait nor skip the file."""
    import fcntl

    root = tmp_path / "t"
    root.mkdir()
    for i in range(20):
        (root / f"s{i:02}").write_bytes(b"s")
    (root / "f").write_bytes(b"leased")
    old = signal.signal(signal.SIGIO, signal.SIG_IGN)  # the lease break signal to the holder
    fd = os.open(root / "f", os.O_RDWR)
    try:
        fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_WRLCK)
        started = time.monotonic()
        findings = scan_tree(root).findings
        assert time.monotonic() - started < 5
        assert [(f.path, f.code) for f in findings] == [("f", InventoryCode.UNREADABLE_ENTRY)]
    finally:
        os.close(fd)
        signal.signal(signal.SIGIO, old)


def test_a_racing_process_at_a_directory_position_never_blocks_or_passes(tmp_path: Path, walk_mode: str) -> None:
    """``d`` is listed as a directory and then is, at any moment, a FIFO (whose open with
    O_DIRECTORY must not block), a regular file, or a symlink to an identical copy."""
    tree = tmp_path / "tree"
    (tree / "d").mkdir(parents=True)
    (tree / "d" / "x").write_bytes(b"x")
    for i in range(40):
        (tree / f"s{i:02}").write_bytes(b"s")
    expected = inventory_tree(tree)
    copy = tmp_path / "copy"
    shutil.copytree(tree / "d", copy)
    shutil.rmtree(tree / "d")
    stage = tmp_path / "stage"
    stage.mkdir()
    os.mkfifo(stage / "fifo")
    (stage / "file").write_bytes(b"x")
    os.symlink(copy, stage / "link")
    pid = _racer(tree, "d", [stage / "fifo", stage / "file", stage / "link"])
    try:
        deadline = time.monotonic() + 1
        rounds = 0
        while time.monotonic() < deadline or rounds < 20:
            rounds += 1
            started = time.monotonic()
            findings = check_tree(tree, expected)
            assert time.monotonic() - started < 10
            assert any(f.path == "d" for f in findings), findings
            assert all(f.path in ("d", ".") or (f.path or "").startswith("d/") for f in findings), findings
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)


# --- Inventory documents a reader must refuse -----------------------------------------------------

_DIGEST = hashlib.sha256(b"").hexdigest()


def _file(path: str, **over: object) -> dict[str, object]:
    e: dict[str, object] = {"digest": {"sha256": _DIGEST}, "mode": 420, "path": path, "size": 0, "type": "file"}
    e.update(over)
    return e


def _dir(path: str, **over: object) -> dict[str, object]:
    e: dict[str, object] = {"mode": 493, "path": path, "type": "dir"}
    e.update(over)
    return e


def _doc(entries: list[dict[str, object]]) -> bytes:
    import json

    doc = {"entries": entries, "format": "https://attest.dev/inventory/v1", "ignore": [], "name_policy": "strict-v1"}
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


@pytest.mark.parametrize(
    "entries",
    [
        pytest.param([_file("a"), _file("a")], id="repeated-path"),
        pytest.param([_dir("a"), _file("a")], id="same-path-dir-and-file"),
        pytest.param([_dir("a"), _file("a.b"), _file("a/b")], id="string-order-not-component-order"),
        pytest.param([_file("a/b")], id="parent-missing"),
        pytest.param([_file("a"), _file("a/b")], id="parent-is-a-file"),
        pytest.param([_file("a", size=2**53)], id="size-over-2^53-1"),
        pytest.param([_file("a", size=True)], id="size-bool"),
        pytest.param([_file("a", mode=True)], id="mode-bool"),
        pytest.param([_file("a", mode=0o4755)], id="setuid-mode"),
        pytest.param([_file("a", size=-1)], id="negative-size"),
        pytest.param([_file("a", digest={"sha256": _DIGEST.upper()})], id="uppercase-hex"),
        pytest.param([_file("a", digest={"sha256": _DIGEST, "sha512": _DIGEST})], id="extra-digest"),
        pytest.param([_dir("a", size=0)], id="dir-with-size"),
        pytest.param([_file("a", extra=1)], id="unknown-key"),
        pytest.param([_file("a\u0000b")], id="nul"),
        pytest.param([_file("./a")], id="dot-component"),
        pytest.param([_file("a/")], id="trailing-slash"),
        pytest.param([_file("/a")], id="absolute"),
        pytest.param([_dir(".GIT"), _file(".GIT/config")], id="dotgit"),
        pytest.param([_file("a\\b")], id="backslash"),
        pytest.param([_file("caf\u0065\u200d")], id="zero-width-joiner"),
    ],
)
def test_an_inventory_document_with_a_trick_is_refused(entries: list[dict[str, object]]) -> None:
    from attest.errors import InputError

    with pytest.raises(InputError):
        Inventory.from_bytes(_doc(entries))


def test_component_order_is_the_one_accepted() -> None:
    inv = Inventory.from_bytes(_doc([_dir("a"), _file("a/b"), _file("a.b")]))
    assert [e.path for e in inv.entries] == ["a", "a/b", "a.b"]


def test_a_directory_that_becomes_a_fifo_or_a_file_is_never_called_a_symlink(tmp_path: Path, walk_mode: str) -> None:
    """``O_DIRECTORY|O_NOFOLLOW`` gives ENOTDIR for a FIFO and a file as for a symlink; before
    the fix every such open was reported SYMLINK ("replaced by a symbolic link") although no
    symlink ever existed here: a stable reason code that names another cause. A racing
    process keeps putting a directory, a FIFO and a file at ``d``; no symlink, so no SYMLINK."""
    tree = tmp_path / "t"
    tree.mkdir()
    for i in range(40):
        (tree / f"s{i:02}").write_bytes(b"")
    stage = tmp_path / "stage"
    (stage / "dir").mkdir(parents=True)
    os.mkfifo(stage / "fifo")
    (stage / "file").write_bytes(b"")
    pid = _racer(tree, "d", [stage / "dir", stage / "fifo", stage / "file"])
    seen: set[str] = set()
    try:
        deadline = time.monotonic() + 1.5
        while time.monotonic() < deadline:
            for f in scan_tree(tree).findings:
                assert f.code != InventoryCode.SYMLINK, f
                seen.add(f.code)
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    assert InventoryCode.SPECIAL_FILE in seen


# --- A finding cap that drops every finding -----------------------------------------------------


def test_a_findings_cap_of_zero_cannot_make_a_refused_tree_pass(tmp_path: Path) -> None:
    """check_tree passes on no findings and the walk keeps at most ``max_findings``: before the
    fix ``Limits(max_findings=0)`` dropped every refusal, and verify_tree and inventory_tree
    accepted a tree holding a symlink to /etc/passwd and a FIFO."""
    from attest.inventory import Limits

    root = tmp_path / "t"
    root.mkdir()
    (root / "f").write_bytes(b"x")
    expected = inventory_tree(root)
    os.symlink("/etc/passwd", root / "evil")
    os.mkfifo(root / "p")
    for limits in ({"max_findings": 0}, {"max_findings": -1}, {"max_depth": -1}, {"max_entries": -5}):
        with pytest.raises((ValueError, VerificationError)):
            verify_tree(root, expected, limits=Limits(**limits))
        with pytest.raises((ValueError, VerificationError)):
            inventory_tree(root, limits=Limits(**limits))
    assert len(check_tree(root, expected, limits=Limits(max_findings=1))) >= 1


# --- A tampered second walker that repeats a path the parent walked ---------------------------


def test_a_child_entry_repeating_a_path_the_parent_found_changed_cannot_hide_the_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The parent walks the whole tree itself (this child gives no help) and finds ``d0/f1``
    changed; the child's answer repeats ``d0/f1`` as the expected entry. Before the fix
    check_tree built its entries by path, the child's copy (appended last) replaced the
    parent's, and check_tree (the `attest check` path) reported a match."""
    import marshal
    import struct

    from attest.errors import AttestError
    from attest.inventory._fork import _RESULT_MAGIC

    monkeypatch.setattr(_walk, "_FORK_AFTER", 0)
    root = tmp_path / "t"
    for i in range(20):
        (root / f"d{i}").mkdir(parents=True)
        for j in range(20):
            (root / f"d{i}" / f"f{j}").write_bytes(b"x" * j)
    expected = inventory_tree(root)
    want = expected.by_path()["d0/f1"]
    (root / "d0" / "f1").write_bytes(b"y")  # same size, other bytes

    def child(walk: object, link: object, shm: object, wfd: int) -> None:
        columns: tuple[list[object], ...] = ([want.path], [want.mode], [want.size], [want.sha256], [], [])
        blob = marshal.dumps((1, 1, want.size, columns, [], None, []))
        data = _RESULT_MAGIC + struct.pack("<Q", len(blob)) + blob
        while data:
            data = data[os.write(wfd, data) :]
        os.close(wfd)

    monkeypatch.setattr(_walk, "_child_main", child)
    try:
        findings = check_tree(root, expected)
    except AttestError:
        return  # refusing the walk is a right answer too
    assert findings, "the changed file passed because the second walker repeated it"


# --- An entry renamed while its directory is listed -----------------------------------------------


def test_a_file_kept_moving_while_its_directory_is_listed_is_never_missed(htree_fs: Path, walk_mode: str) -> None:
    """readdir over several getdents calls may miss an entry renamed meanwhile (POSIX allows
    it; ext4 orders a large directory by name hash). A racing process renames an extra file
    among eight names in a 3000-entry directory: at every moment the tree holds it, yet before
    the fix about one walk in six missed it and check_tree reported a match."""
    root = htree_fs / "t"
    root.mkdir()
    for i in range(3000):
        (root / f"f{i:05}").write_bytes(b"")
    expected = inventory_tree(root)
    names = [root / f"evil_{c}" for c in "abcdefgh"]
    names[0].write_bytes(b"evil")
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the racer
        try:
            i = 0
            while True:
                try:
                    os.rename(names[i % 8], names[(i + 1) % 8])
                except OSError:
                    pass
                i += 1
        finally:
            os._exit(0)
    try:
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline:
            assert check_tree(root, expected) != [], "an extra file in the tree was never listed"
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)


def test_a_quiet_large_directory_on_disk_verifies_every_time(htree_fs: Path, walk_mode: str) -> None:
    """The listing's two fstats must not refuse a tree nobody changes: reading a directory
    moves its atime at most, never its mtime or ctime."""
    root = htree_fs / "t"
    (root / "sub").mkdir(parents=True)
    for i in range(3000):
        (root / f"f{i:05}").write_bytes(b"%d" % i)
        (root / "sub" / f"g{i:05}").write_bytes(b"")
    expected = inventory_tree(root)
    for _ in range(5):
        assert verify_tree(root, expected).identity == expected.identity
        assert check_tree(root, expected) == []
