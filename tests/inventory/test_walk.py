"""The safe walker on real trees: THREATS A (the tree itself), C (names) and G (exhaustion)."""

from __future__ import annotations

import hashlib
import os
import socket
import stat
import threading
import unicodedata
from collections.abc import Callable
from pathlib import Path

import pytest
from support.trees import make_tree

from attest.errors import InputError, VerificationError
from attest.inventory import (
    EntryType,
    InventoryCode,
    Limits,
    check_tree,
    inventory_tree,
    scan_tree,
    verify_tree,
)


@pytest.fixture(autouse=True)
def _both_walk_modes(walk_mode: str) -> str:
    return walk_mode


def codes(findings) -> set[str]:  # type: ignore[no-untyped-def]
    return {f.code for f in findings}


def by_code(findings, code: str) -> list[str]:  # type: ignore[no-untyped-def]
    return sorted(f.path for f in findings if f.code == code)


def test_inventory_lists_every_entry_with_independent_digests(sample_tree: Path) -> None:
    os.chmod(sample_tree / "bin" / "tool", 0o755)
    inv = inventory_tree(sample_tree)
    got = {e.path: e for e in inv.entries}
    assert sorted(got) == ["README", "bin", "bin/tool", "empty", "lib", "lib/pkg", "lib/pkg/__init__.py", "lib/pkg/mod.py"]
    for e in inv.entries:
        real = sample_tree / e.path
        st = os.lstat(real)
        assert e.mode == stat.S_IMODE(st.st_mode)
        if e.type is EntryType.FILE:
            data = real.read_bytes()
            assert e.size == len(data)
            assert e.sha256 == hashlib.sha256(data).hexdigest()
        else:
            assert real.is_dir() and e.size is None
    assert got["bin/tool"].mode == 0o755


def test_large_files_hashed_on_threads_match_hashlib(tmp_path: Path) -> None:
    root = make_tree(tmp_path / "t", {})
    blobs = {f"f{i}": os.urandom(1024 * 1024 * 3 + i) for i in range(4)}
    for name, data in blobs.items():
        (root / name).write_bytes(data)
    inv = inventory_tree(root)
    assert {e.path: e.sha256 for e in inv.entries} == {k: hashlib.sha256(v).hexdigest() for k, v in blobs.items()}


def test_identity_is_stable_and_content_sensitive(sample_tree: Path, tmp_path: Path) -> None:
    first = inventory_tree(sample_tree).identity
    assert inventory_tree(sample_tree).identity == first
    (sample_tree / "README").write_bytes(b"hellp\n")
    assert inventory_tree(sample_tree).identity != first


# --- A. The tree itself --------------------------------------------------------------------------


@pytest.mark.parametrize("target", ["README", "bin", "missing", "loop", "/etc/passwd"])
def test_symlinks_are_refused_whatever_they_point_to(sample_tree: Path, target: str) -> None:
    os.symlink(target, sample_tree / "loop" if target == "loop" else sample_tree / "link")
    findings = scan_tree(sample_tree).findings
    assert codes(findings) == {InventoryCode.SYMLINK}
    with pytest.raises(VerificationError) as info:
        inventory_tree(sample_tree)
    assert info.value.code == InventoryCode.SYMLINK


def test_directory_replaced_by_symlink_to_identical_copy(sample_tree: Path, tmp_path: Path) -> None:
    expected = inventory_tree(sample_tree)
    copy = tmp_path / "copy-of-lib"
    os.rename(sample_tree / "lib", copy)
    os.symlink(copy, sample_tree / "lib")
    findings = check_tree(sample_tree, expected)
    assert by_code(findings, InventoryCode.SYMLINK) == ["lib"]
    assert InventoryCode.MISSING in codes(findings)  # lib/pkg and below are absent as real entries


def test_hard_links_refused_inside_and_outside(sample_tree: Path, tmp_path: Path) -> None:
    os.link(sample_tree / "README", sample_tree / "README2")
    outside = tmp_path / "outside"
    outside.write_bytes(b"secret")
    os.link(outside, sample_tree / "bin" / "alias")
    findings = scan_tree(sample_tree).findings
    assert by_code(findings, InventoryCode.HARDLINK) == ["README", "README2", "bin/alias"]


def test_hard_link_to_a_symlink_is_a_symlink(sample_tree: Path, tmp_path: Path) -> None:
    os.symlink("/etc/passwd", tmp_path / "sl")
    os.link(tmp_path / "sl", sample_tree / "hl", follow_symlinks=False)
    assert by_code(scan_tree(sample_tree).findings, InventoryCode.SYMLINK) == ["hl"]


def _scan_in_thread(root: Path) -> list:  # type: ignore[type-arg]
    out: list = []  # type: ignore[type-arg]
    worker = threading.Thread(target=lambda: out.append(scan_tree(root)), daemon=True)
    worker.start()
    worker.join(30)
    assert not worker.is_alive(), "the walk blocked on a special file"
    return out[0].findings


def test_fifo_socket_and_device_rejected_without_blocking(sample_tree: Path) -> None:
    os.mkfifo(sample_tree / "fifo")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(sample_tree / "sock"))
    try:
        expected = {"fifo", "sock"}
        if os.geteuid() == 0:
            os.mknod(sample_tree / "dev", 0o600 | stat.S_IFCHR, os.makedev(1, 3))
            expected.add("dev")
        findings = _scan_in_thread(sample_tree)
        assert set(by_code(findings, InventoryCode.SPECIAL_FILE)) == expected
    finally:
        sock.close()


@pytest.mark.parametrize("bits", [stat.S_ISUID, stat.S_ISGID, stat.S_ISVTX])
def test_setuid_setgid_sticky_refused(sample_tree: Path, bits: int) -> None:
    os.chmod(sample_tree / "bin" / "tool", 0o755 | bits)
    os.chmod(sample_tree / "empty", 0o755 | stat.S_ISVTX)
    findings = scan_tree(sample_tree).findings
    assert by_code(findings, InventoryCode.SPECIAL_MODE) == ["bin/tool", "empty"]


def test_mode_drift_with_identical_bytes(sample_tree: Path) -> None:
    expected = inventory_tree(sample_tree)
    os.chmod(sample_tree / "README", 0o755)
    os.chmod(sample_tree / "lib", 0o700)
    findings = check_tree(sample_tree, expected)
    assert [(f.code, f.path) for f in findings] == [
        (InventoryCode.MODE_CHANGED, "README"),
        (InventoryCode.MODE_CHANGED, "lib"),
    ]


def test_closed_set_deltas_every_difference_reported(sample_tree: Path) -> None:
    expected = inventory_tree(sample_tree)
    (sample_tree / ".planted").write_bytes(b"x")
    (sample_tree / "extra-dir").mkdir()
    (sample_tree / "lib" / "pkg" / "mod.py").unlink()
    os.rmdir(sample_tree / "empty")
    (sample_tree / "README").write_bytes(b"hello!\n")
    (sample_tree / "bin" / "tool").unlink()
    (sample_tree / "bin" / "tool").mkdir()
    findings = check_tree(sample_tree, expected)
    assert [(f.code, f.path) for f in findings] == [
        (InventoryCode.EXTRA, ".planted"),
        (InventoryCode.DIGEST_MISMATCH, "README"),
        (InventoryCode.TYPE_CHANGED, "bin/tool"),
        (InventoryCode.MISSING, "empty"),
        (InventoryCode.EXTRA, "extra-dir"),
        (InventoryCode.MISSING, "lib/pkg/mod.py"),
    ]
    with pytest.raises(VerificationError) as info:
        verify_tree(sample_tree, expected)
    assert len(info.value.findings) == 6


def test_verify_tree_passes_on_an_exact_copy(sample_tree: Path, tmp_path: Path) -> None:
    import shutil

    expected = inventory_tree(sample_tree)
    copy = tmp_path / "copy"
    shutil.copytree(sample_tree, copy)
    for src in sample_tree.rglob("*"):
        os.chmod(copy / src.relative_to(sample_tree), stat.S_IMODE(src.lstat().st_mode))
    assert verify_tree(copy, expected).identity == expected.identity
    assert check_tree(copy, expected) == []


def test_ignore_patterns_are_recorded_and_applied(sample_tree: Path) -> None:
    (sample_tree / "lib" / "pkg" / "__pycache__").mkdir()
    (sample_tree / "lib" / "pkg" / "__pycache__" / "mod.pyc").write_bytes(b"\0")
    (sample_tree / "debug.log").write_bytes(b"x")
    inv = inventory_tree(sample_tree, ignore=["__pycache__/", "*.log"])
    assert inv.ignore == ("__pycache__/", "*.log")
    assert not any("__pycache__" in e.path or e.path.endswith(".log") for e in inv.entries)
    (sample_tree / "other.log").write_bytes(b"y")
    assert check_tree(sample_tree, inv) == []  # the recorded patterns, not the caller's, apply
    (sample_tree / "new.txt").write_bytes(b"z")
    assert by_code(check_tree(sample_tree, inv), InventoryCode.EXTRA) == ["new.txt"]


# --- C. Names ------------------------------------------------------------------------------------


def test_non_utf8_and_control_names(tmp_path: Path) -> None:
    root = make_tree(tmp_path / "t", {"ok": b""})
    os.close(os.open(os.path.join(os.fsencode(root), b"bad\xff"), os.O_CREAT | os.O_WRONLY, 0o644))
    (root / "tab\there").write_bytes(b"")
    (root / "back\\slash").write_bytes(b"")
    (root / "zero\u200bwidth").write_bytes(b"")
    findings = scan_tree(root).findings
    assert len(by_code(findings, InventoryCode.BAD_NAME)) == 4
    assert all(f.path and "\\xff" in f.path for f in findings if "bad" in (f.path or ""))


@pytest.mark.parametrize("name", [".git", ".GIT", ".Git.", ".git ", ".git. .", "git~1"])
def test_reserved_git_spellings(tmp_path: Path, name: str) -> None:
    root = make_tree(tmp_path / "t", {"sub": {name: None}})
    assert by_code(scan_tree(root).findings, InventoryCode.RESERVED_NAME) == [f"sub/{name}"]


@pytest.mark.parametrize(
    ("first", "second"),
    [("README", "readme"), (unicodedata.normalize("NFC", "caf\u00e9"), unicodedata.normalize("NFD", "caf\u00e9")), ("STRASSE", "stra\u00dfe")],
)
def test_sibling_collisions(tmp_path: Path, first: str, second: str) -> None:
    root = make_tree(tmp_path / "t", {first: b"1", second: b"2"})
    findings = scan_tree(root).findings
    assert codes(findings) == {InventoryCode.NAME_COLLISION}


def test_path_too_long(tmp_path: Path) -> None:
    root = make_tree(tmp_path / "t", {})
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(20):
            os.mkdir("d" * 250, dir_fd=fd)
            nfd = os.open("d" * 250, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = nfd
    finally:
        os.close(fd)
    assert InventoryCode.PATH_TOO_LONG in codes(scan_tree(root).findings)


# --- The root ------------------------------------------------------------------------------------


def test_root_symlink_refused(sample_tree: Path, tmp_path: Path) -> None:
    os.symlink(sample_tree, tmp_path / "alias")
    with pytest.raises(VerificationError) as info:
        inventory_tree(tmp_path / "alias")
    assert info.value.code == InventoryCode.ROOT_SYMLINK


def test_root_through_symlinked_ancestor_refused(sample_tree: Path, tmp_path: Path) -> None:
    os.symlink(tmp_path, tmp_path / "up")
    with pytest.raises(VerificationError) as info:
        inventory_tree(tmp_path / "up" / "tree")
    assert info.value.code == InventoryCode.ROOT_SYMLINK


def test_proc_magic_link_root_refused(sample_tree: Path) -> None:
    fd = os.open(sample_tree, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with pytest.raises(VerificationError) as info:
            inventory_tree(f"/proc/self/fd/{fd}")
        assert info.value.code == InventoryCode.ROOT_SYMLINK
    finally:
        os.close(fd)


@pytest.mark.parametrize("which", ["missing", "file"])
def test_bad_root(sample_tree: Path, which: str) -> None:
    root = sample_tree / ("nope" if which == "missing" else "README")
    with pytest.raises(InputError) as info:
        inventory_tree(root)
    assert info.value.code == InventoryCode.BAD_ROOT


def test_unreadable_entry_reported_not_skipped(sample_tree: Path) -> None:
    """An unreadable directory is a finding, never a silently skipped subtree.

    Root reads through permission bits, so as root the walk runs in a child process that
    imports first and then drops to `nobody`.
    """
    import subprocess
    import sys

    os.chmod(sample_tree / "lib", 0o700)
    if os.geteuid() != 0:
        os.chmod(sample_tree / "lib", 0o000)
        try:
            assert InventoryCode.UNREADABLE_ENTRY in codes(scan_tree(sample_tree).findings)
        finally:
            os.chmod(sample_tree / "lib", 0o755)
        return
    for p in sample_tree.parents:
        if p != Path("/"):
            os.chmod(p, stat.S_IMODE(os.lstat(p).st_mode) | 0o005)
    code = (
        "import os; from attest.inventory import scan_tree;"
        "os.setgid(65534); os.setuid(65534);"
        f"print(sorted({{str(f.code) for f in scan_tree({str(sample_tree)!r}).findings}}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=Path(__file__).parents[2])
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "['UNREADABLE_ENTRY']"


# --- G. Exhaustion -------------------------------------------------------------------------------


def _deep_chain(root: Path, depth: int) -> None:
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(depth):
        os.mkdir("d", dir_fd=fd)
        nfd = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = nfd
    os.close(fd)


def _remove_chain(root: Path) -> None:
    """Delete a deep chain iteratively (shutil.rmtree recurses and would overflow)."""
    fds = [os.open(root, os.O_RDONLY | os.O_DIRECTORY)]
    while True:
        try:
            fds.append(os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fds[-1]))
        except FileNotFoundError:
            break
    for parent in reversed(fds[:-1]):
        os.rmdir("d", dir_fd=parent)
    for fd in fds:
        os.close(fd)


def test_ten_thousand_deep_tree_hits_the_depth_cap(tmp_path: Path) -> None:
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 11000:
        pytest.skip(f"cleanup needs 11000 fds; hard limit is {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 11000), hard))
    root = tmp_path / "deep"
    root.mkdir()
    _deep_chain(root, 10_000)
    try:
        findings = scan_tree(root).findings
        assert codes(findings) == {InventoryCode.DEPTH_EXCEEDED}
        with pytest.raises(VerificationError):
            inventory_tree(root, limits=Limits(max_depth=10))
    finally:
        _remove_chain(root)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_entry_count_cap(tmp_path: Path) -> None:
    root = make_tree(tmp_path / "t", {f"f{i:03}": b"" for i in range(150)})
    findings = scan_tree(root, limits=Limits(max_entries=100)).findings
    assert codes(findings) == {InventoryCode.TOO_MANY_ENTRIES}


def test_sparse_file_with_huge_apparent_size(tmp_path: Path) -> None:
    root = make_tree(tmp_path / "t", {})
    with open(root / "sparse", "wb") as f:
        f.truncate(1 << 40)  # 1 TiB apparent, no blocks
    findings = scan_tree(root, limits=Limits(max_file_size=1 << 30)).findings
    assert by_code(findings, InventoryCode.FILE_TOO_LARGE) == ["sparse"]
    with open(root / "sparse", "wb") as f:
        f.truncate((1 << 40) + 1)  # one byte over the default cap
    assert by_code(scan_tree(root).findings, InventoryCode.FILE_TOO_LARGE) == ["sparse"]


def test_findings_are_bounded(tmp_path: Path) -> None:
    root = make_tree(tmp_path / "t", {})
    for i in range(50):
        os.symlink("x", root / f"l{i}")
    assert len(scan_tree(root, limits=Limits(max_findings=10)).findings) == 10


def test_a_walk_against_expected_entries_reports_what_a_full_walk_and_diff_report(tmp_path: Path) -> None:
    """check_tree and verify_tree record a matched entry by its path alone; the findings are the
    same, finding by finding, as those of a full walk diffed against the inventory."""
    from attest.inventory import sort_key
    from attest.inventory._diff import diff_entries

    spec: dict[str, object] = {f"d{i}": {f"f{j}": b"x" * j for j in range(30)} for i in range(4)}
    spec["gone"] = {"inner": b"1\n"}
    root = make_tree(tmp_path / "t", spec)
    expected = inventory_tree(root)
    (root / "d0" / "f3").write_bytes(b"changed")  # DIGEST_MISMATCH
    os.chmod(root / "d1" / "f4", 0o600)  # MODE_CHANGED
    os.chmod(root / "d2", 0o700)  # MODE_CHANGED on a directory
    (root / "d3" / "f5").unlink()
    (root / "d3" / "f5").mkdir()  # TYPE_CHANGED
    (root / "gone" / "inner").unlink()
    (root / "gone").rmdir()  # MISSING twice
    (root / "d1" / "new").write_bytes(b"new\n")  # EXTRA
    os.symlink("/etc/passwd", root / "d0" / "f7.tmp")  # a walk finding
    full = scan_tree(root)
    suppressed = {f.path for f in full.findings if f.path is not None}
    want = sorted([*full.findings, *diff_entries(expected, full.entries, suppressed)], key=lambda f: (sort_key(f.path or ""), f.code))
    got = check_tree(root, expected)
    assert got == want
    assert codes(got) == {
        InventoryCode.DIGEST_MISMATCH,
        InventoryCode.MODE_CHANGED,
        InventoryCode.TYPE_CHANGED,
        InventoryCode.MISSING,
        InventoryCode.EXTRA,
        InventoryCode.SYMLINK,
    }
    with pytest.raises(VerificationError) as info:
        verify_tree(root, expected)
    assert list(info.value.findings) == want


def test_a_walk_against_expected_entries_returns_the_expected_inventory(tmp_path: Path) -> None:
    root = make_tree(tmp_path / "t", {f"d{i}": {f"f{j}": b"x" * j for j in range(30)} for i in range(4)})
    expected = inventory_tree(root)
    assert check_tree(root, expected) == []
    assert verify_tree(root, expected).canonical == expected.canonical
    assert verify_tree(root, expected, exact=True).canonical == expected.canonical


_CLONE_NEWNS = 0x00020000
_MS_REC, _MS_PRIVATE = 0x4000, 1 << 18


def _in_own_mount_namespace(body: Callable[[], None]) -> None:
    """Run *body* in a forked child that has a private mount namespace of its own (its mounts die with it); raise
    what it raised, or skip when the kernel refuses the namespace or the mount."""
    import ctypes
    import traceback

    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report one line, never return into pytest
        os.close(read)
        status, line = 1, b""
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            if libc.unshare(_CLONE_NEWNS) != 0 or libc.mount(b"none", b"/", None, _MS_REC | _MS_PRIVATE, None) != 0:
                status, line = 3, f"a private mount namespace: {os.strerror(ctypes.get_errno())}".encode()
            else:
                body()
                status = 0
        except MountRefused as e:
            status, line = 3, str(e).encode()
        except BaseException:  # noqa: BLE001 - the child hands every failure to the parent, which fails the test
            line = traceback.format_exc().encode()
        os.write(write, line[-8000:])
        os._exit(status)
    os.close(write)
    with os.fdopen(read, "rb") as f:
        report = f.read().decode(errors="replace")
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) == 3:
        pytest.skip(report)
    assert os.waitstatus_to_exitcode(status) == 0, report


class MountRefused(Exception):
    """The kernel refused a mount the test needs (the test is skipped, saying so)."""


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a filesystem inside the tree needs root")
def test_a_mount_point_inside_the_tree_is_walked_as_the_directory_it_shows(tmp_path: Path) -> None:
    """The listing gives a mount point's covered inode (another than fstat's, on another device):
    the walk confirms it by its lstat instead of reporting a swap, and walks the mounted filesystem."""
    root = make_tree(tmp_path / "t", {"a": b"a\n", "sub": {}, "z": b"z\n"})

    def walk_over_a_mount() -> None:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        if libc.mount(b"attest-test-mount", str(root / "sub").encode(), b"tmpfs", 0, b"mode=0755") != 0:
            raise MountRefused(f"mount: {os.strerror(ctypes.get_errno())}")
        (root / "sub" / "inner").write_bytes(b"on the mounted filesystem\n")
        os.chmod(root / "sub" / "inner", 0o644)
        assert os.stat(root / "sub").st_dev != os.stat(root).st_dev
        result = scan_tree(root)
        assert result.findings == []
        assert sorted(e.path for e in result.entries) == ["a", "sub", "sub/inner", "z"]
        expected = inventory_tree(root)
        assert check_tree(root, expected) == []

    _in_own_mount_namespace(walk_over_a_mount)
