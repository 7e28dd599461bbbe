"""The ``erofs`` backend: one image file, sealed, read only through a private read-only mount.

Real mkfs.erofs, real mounts (in private namespaces of threads and children: the test process's
own namespace never changes), real immutable flags. State directories live on disk
(``erofs_state``): the kernel mounts no image file that lives on the suite's tmpfs, which one
test here proves is refused with a reason.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from support.erofs import needs_erofs, rebuild, tree_of
from support.trees import is_immutable, make_tree

from attest.errors import AttestError, EnvironmentFailure, VerificationError
from attest.freeze import BACKENDS, ErofsBackend, FreezeCode, Store, check_image, freeze_tree, retain_file, run_from_images
from attest.freeze._erofs import GATE_SHA256, IMAGE_NAME, MKFS_FLAGS, filesystem_name
from attest.freeze._image import RECORD_NAME
from attest.inventory import Inventory, inventory_tree

pytestmark = needs_erofs
REAL_MKFS = ErofsBackend().mkfs


def codes(err: pytest.ExceptionInfo[AttestError]) -> list[str]:
    return [str(f.code) for f in err.value.findings]


def nothing_published(state: Path) -> bool:
    return os.listdir(state / "store") == [] and os.listdir(state / "staging") == []


def fake_mkfs(tmp_path: Path, body: str) -> str:
    """A mkfs.erofs look-alike: the real one, then ``body`` (sh) with $img and $src set to the last two arguments."""
    script = tmp_path / "bin" / "mkfs.erofs"
    script.parent.mkdir(exist_ok=True)
    script.write_text(f"""#!/bin/sh
set -e
if [ $# -lt 2 ]; then exec {REAL_MKFS} "$@"; fi
for a; do img=$src; src=$a; done
{body}
""")
    script.chmod(0o755)
    return str(script)


def test_freeze_writes_one_sealed_image_file_and_records_it(src: Path, expected: Inventory, erofs_state: Path) -> None:
    image = freeze_tree(src, expected, erofs_state, backend="erofs")
    entry = Path(image.path).parent
    assert sorted(os.listdir(entry)) == ["image.erofs", "inventory.json", "record.json", "tree"]
    assert os.listdir(image.path) == []  # the mount point: the content is seen only through a mount
    img = entry / IMAGE_NAME
    st = img.stat()
    assert stat.S_IMODE(st.st_mode) == 0o400 and is_immutable(img) and is_immutable(Path(image.path))
    rec = json.loads((entry / RECORD_NAME).read_bytes())["erofs"]
    assert rec == {"sha256": hashlib.sha256(img.read_bytes()).hexdigest(), "size": str(st.st_size), "ino": str(st.st_ino),
                   "ctime": str(st.st_ctime_ns), "mkfs": "1.5"}
    # Through a mount, exactly the attested entries, modes and bytes.
    copied = tree_of(entry, Path(tempfile.mkdtemp(dir=erofs_state.parent)) / "t")
    assert inventory_tree(copied).identity == expected.identity
    assert check_image(image) == []
    again = freeze_tree(src, expected, erofs_state, backend="erofs")
    assert again.reused and again.erofs == image.erofs


def test_the_image_is_a_pure_function_of_the_inventory(tmp_path: Path, src: Path, expected: Inventory, erofs_state: Path) -> None:
    """Another copy of the tree (other inodes, mtimes, creation order) in another state: the same image bytes."""
    a = freeze_tree(src, expected, erofs_state, backend="erofs")
    other_src = make_tree(tmp_path / "other", {"empty": None, "big.bin": bytes(range(256)) * 2048, "lib": {"pkg": {"mod.py": b"VALUE = 41 + 1\n", "__init__.py": b""}},
                                               "bin": {"tool": (b"#!/bin/sh\necho tool ran\n", 0o755)}, "README": b"hello\n"})
    os.utime(other_src / "README", (12345, 12345))
    assert inventory_tree(other_src).identity == expected.identity
    b = freeze_tree(other_src, expected, erofs_state.parent / "state2", backend="erofs")
    assert a.erofs is not None and b.erofs is not None and a.erofs.sha256 == b.erofs.sha256


def test_a_state_directory_on_tmpfs_is_refused_with_the_reason(src: Path, expected: Inventory, tmp_path: Path) -> None:
    """The product bug the last attempt shipped: the probe never mounted, so a tmpfs state failed late, unexplained."""
    base = tmp_path if filesystem_name(os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)) == "tmpfs" else Path("/dev/shm")
    if filesystem_name(os.open(base, os.O_RDONLY | os.O_DIRECTORY)) != "tmpfs":
        pytest.skip("no tmpfs here to put a state directory on")
    state = Path(tempfile.mkdtemp(dir=base)) / "state"
    with pytest.raises(EnvironmentFailure) as ei:
        freeze_tree(src, expected, state, backend="erofs")
    assert ei.value.code == FreezeCode.BACKEND_UNAVAILABLE
    assert "the state directory's filesystem (tmpfs) cannot back an erofs image file" in ei.value.detail
    assert nothing_published(state)


def test_a_mkfs_erofs_that_builds_other_bytes_is_refused(src: Path, expected: Inventory, erofs_state: Path, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """A "newer" erofs-utils: its image of the gate tree is not the checked-in one."""
    monkeypatch.setitem(BACKENDS, "erofs", ErofsBackend(mkfs=fake_mkfs(tmp_path, 'printf "newer" >> "$img"')))
    with pytest.raises(EnvironmentFailure) as ei:
        freeze_tree(src, expected, erofs_state, backend="erofs")
    assert ei.value.code == FreezeCode.EROFS_NOT_REPRODUCIBLE and GATE_SHA256 in ei.value.detail
    assert nothing_published(erofs_state)


def test_a_missing_mkfs_erofs_is_backend_unavailable(src: Path, expected: Inventory, erofs_state: Path, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(BACKENDS, "erofs", ErofsBackend(mkfs=str(tmp_path / "no-such-mkfs.erofs")))
    with pytest.raises(EnvironmentFailure) as ei:
        freeze_tree(src, expected, erofs_state, backend="erofs")
    assert ei.value.code == FreezeCode.BACKEND_UNAVAILABLE and "erofs-utils" in ei.value.detail


CRAFTS = {
    # what the crafted image changes -> the inventory code the check through the mount reports
    "content": ('printf pwned > "$t/README"', "DIGEST_MISMATCH", "README"),
    "extra": ('printf x > "$t/planted"', "EXTRA", "planted"),
    "missing": ('rm "$t/README"', "MISSING", "README"),
    "mode": ('chmod 0777 "$t/README"', "MODE_CHANGED", "README"),
    "type": ('rm "$t/README" && mkdir "$t/README"', "TYPE_CHANGED", "README"),
    "symlink": ('rm "$t/README" && ln -s bin/tool "$t/README"', "SYMLINK", "README"),
}


@pytest.mark.parametrize("craft", sorted(CRAFTS))
def test_an_image_that_decodes_differently_from_its_inventory_is_never_published(
        craft: str, src: Path, expected: Inventory, erofs_state: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A mkfs.erofs that passes the gate but builds the freeze's image from altered staging."""
    change, code, path = CRAFTS[craft]
    body = f"""if [ -f "$src/README" ] && [ "$(cat "$src/README")" = hello ]; then
  t=$(mktemp -d); cp -a "$src/." "$t"; {change}; src=$t
fi
exec {REAL_MKFS} {' '.join(MKFS_FLAGS)} "$img" "$src"
"""
    monkeypatch.setitem(BACKENDS, "erofs", ErofsBackend(mkfs=fake_mkfs(tmp_path, body)))
    with pytest.raises(VerificationError) as ei:
        freeze_tree(src, expected, erofs_state, backend="erofs")
    assert codes(ei)[0] == FreezeCode.EROFS_MISMATCH
    assert any(f.code == code and f.path == path for f in ei.value.findings), ei.value.findings
    assert nothing_published(erofs_state)


def _pwn(tree: Path) -> None:
    target = tree / "lib" / "pkg" / "mod.py"
    target.chmod(0o644)
    target.write_bytes(b"VALUE = 'pwned'\n")


def test_a_modified_image_file_is_never_used(src: Path, expected: Inventory, erofs_state: Path, tmp_path: Path) -> None:
    """The image file changed in place (flag cleared, bytes changed, flag set again; the record left)."""
    image = freeze_tree(src, expected, erofs_state, backend="erofs")
    entry = Path(image.path).parent
    rebuild(entry, _pwn, record=False)
    assert any(f.code == FreezeCode.IMAGE_CHANGED and f.path.endswith(IMAGE_NAME) for f in check_image(image))
    with pytest.raises(VerificationError) as ei:
        Store(erofs_state).get(image.identity)
    assert codes(ei)[0] == FreezeCode.IMAGE_CHANGED
    marker = tmp_path / "ran"
    with pytest.raises(AttestError):
        run_from_images(erofs_state, {"T": image.identity}, ["/bin/sh", "-c", f": > {marker}"])
    assert not marker.exists()
    assert not freeze_tree(src, expected, erofs_state, backend="erofs").reused


def test_a_resealed_image_with_a_rewritten_record_is_caught_by_the_walk_not_the_hash(
        src: Path, expected: Inventory, erofs_state: Path, tmp_path: Path) -> None:
    """Rebuilt from altered staging, resealed, the record rewritten to its hash: only the walk through the mount tells."""
    image = freeze_tree(src, expected, erofs_state, backend="erofs")
    entry = Path(image.path).parent
    rebuild(entry, _pwn)
    store = Store(erofs_state)
    fd = os.open(erofs_state / "store", os.O_RDONLY | os.O_DIRECTORY)
    try:
        forged = store.load_record(fd, expected.digest_hex)
    finally:
        os.close(fd)
    assert forged is not None and check_image(forged) == []  # the record and its hash agree with the file
    with pytest.raises(VerificationError) as ei:
        store.get(image.identity)
    assert codes(ei)[:2] == [FreezeCode.IMAGE_CHANGED, FreezeCode.EROFS_MISMATCH]
    assert any(f.code == "DIGEST_MISMATCH" and f.path == "lib/pkg/mod.py" for f in ei.value.findings)
    [listed] = store.ls(check=True)
    assert listed.problems and listed.problems[0].code == FreezeCode.IMAGE_CHANGED
    marker = tmp_path / "ran"
    with pytest.raises(AttestError):
        run_from_images(erofs_state, {"T": image.identity}, ["/bin/sh", "-c", f": > {marker}"])
    assert not marker.exists()
    again = freeze_tree(src, expected, erofs_state, backend="erofs")  # not reused: removed and frozen afresh
    assert not again.reused and again.erofs is not None and again.erofs.sha256 == image.erofs.sha256  # type: ignore[union-attr]


def _in_child_namespace(setup: str, state: Path, identity: str) -> subprocess.CompletedProcess[str]:
    """Run ``setup`` (sh) and then Store.get in a child's own mount namespace: the attacker's mounts stay there."""
    code = f"from attest.freeze import Store\nStore({str(state)!r}).get({identity!r})\nprint('HELD')"
    return subprocess.run(["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", f'{setup} && exec "$0" -c "$1"',
                           sys.executable, code], capture_output=True, text=True)


def test_a_swapped_mount_over_the_tree_or_the_image_file_is_refused(src: Path, expected: Inventory, erofs_state: Path,
                                                                    tmp_path: Path) -> None:
    image = freeze_tree(src, expected, erofs_state, backend="erofs")
    entry = Path(image.path).parent
    other = tmp_path / "other"
    make_tree(other, {"README": b"hello\n"})
    over_tree = _in_child_namespace(f"mount --bind {other} {image.path}", erofs_state, image.identity)
    assert "HELD" not in over_tree.stdout and "IMAGE_CHANGED" in over_tree.stderr, over_tree.stderr
    fake = erofs_state.parent / "fake.img"
    subprocess.run(["mkfs.erofs", *MKFS_FLAGS, str(fake), str(other)], check=True)
    subprocess.run(["chattr", "+i", str(fake)], check=True)  # sealed too: only its inode tells (the session clears the flag)
    over_file = _in_child_namespace(f"mount --bind {fake} {entry / IMAGE_NAME}", erofs_state, image.identity)
    assert "HELD" not in over_file.stdout and "IMAGE_CHANGED" in over_file.stderr, over_file.stderr
    assert "HELD" in _in_child_namespace("true", erofs_state, image.identity).stdout


def test_exec_sees_the_image_read_only_in_its_own_namespace_only(src: Path, expected: Inventory, erofs_state: Path,
                                                                 tmp_path: Path) -> None:
    image = freeze_tree(src, expected, erofs_state, backend="erofs")
    out = tmp_path / "out"
    fd = os.open(out, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        rc = run_from_images(erofs_state, {"T": image.identity}, [
            "/bin/sh", "-c", '$ATTEST_IMAGE_T/bin/tool; cat README; touch planted 2>/dev/null && echo WROTE; '
                             'grep -c " erofs " /proc/self/mountinfo'], cwd_image="T", stdout=fd)
    finally:
        os.close(fd)
    assert rc == 0
    assert out.read_text() == "tool ran\nhello\n1\n"
    with open("/proc/self/mountinfo") as f:
        assert " erofs " not in f.read()  # the test process's namespace never saw it
    assert os.listdir(image.path) == []


def test_exec_of_erofs_and_ro_bind_images_together(src: Path, expected: Inventory, erofs_state: Path, tmp_path: Path) -> None:
    """One namespace for both: every erofs image mounted, every ro-bind image bound read-only."""
    e = freeze_tree(src, expected, erofs_state, backend="erofs")
    other = make_tree(tmp_path / "o", {"x": b"x\n"})
    r = freeze_tree(other, inventory_tree(other), erofs_state, backend="ro-bind")
    out = tmp_path / "out"
    fd = os.open(out, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        rc = run_from_images(erofs_state, {"E": e.identity, "R": r.identity}, [
            "/bin/sh", "-c", 'cat $ATTEST_IMAGE_E/README $ATTEST_IMAGE_R/x; touch $ATTEST_IMAGE_R/y 2>/dev/null || echo RO'], stdout=fd)
    finally:
        os.close(fd)
    assert rc == 0 and out.read_text() == "hello\nx\nRO\n"


def test_an_image_changed_while_the_command_runs_fails_the_run(src: Path, expected: Inventory, erofs_state: Path) -> None:
    image = freeze_tree(src, expected, erofs_state, backend="erofs")
    img = Path(image.path).parent / IMAGE_NAME
    with pytest.raises(VerificationError) as ei:
        run_from_images(erofs_state, {"T": image.identity}, ["/bin/sh", "-c", f"chattr -i {img} && printf x >> {img} && chattr +i {img}"])
    assert ei.value.code == FreezeCode.IMAGE_CHANGED_DURING_EXEC


def test_a_command_not_found_under_erofs_exits_127(src: Path, expected: Inventory, erofs_state: Path) -> None:
    image = freeze_tree(src, expected, erofs_state, backend="erofs")
    assert run_from_images(erofs_state, {"T": image.identity}, ["no-such-command-here"]) == 127


def test_retained_bytes_are_read_through_the_mount(src: Path, expected: Inventory, erofs_state: Path) -> None:
    image = Store(erofs_state).get(freeze_tree(src, expected, erofs_state, backend="erofs").identity)
    entry = expected.by_path()["lib/pkg/mod.py"]
    assert entry.sha256 is not None
    assert retain_file(image, "lib/pkg/mod.py", entry.sha256).data == b"VALUE = 41 + 1\n"
    with pytest.raises(VerificationError) as ei:
        retain_file(image, "lib/pkg/mod.py", "0" * 64)
    assert ei.value.code == FreezeCode.RETAINED_MISMATCH
    with pytest.raises(VerificationError) as ei:
        retain_file(image, "lib/pkg", entry.sha256)
    assert ei.value.code == FreezeCode.RETAINED_MISMATCH


def test_a_confined_command_refuses_an_erofs_image(src: Path, expected: Inventory, erofs_state: Path, tmp_path: Path) -> None:
    """The reviewer's confinement binds image directories: an erofs image's is an empty mount point. Not wired: refused."""
    image = freeze_tree(src, expected, erofs_state, backend="erofs")
    called: list[bool] = []

    def confine(argv: object, images: object, run_dir: str, cwd: str) -> tuple[list[str], list[int]]:
        called.append(True)
        return ["/bin/true"], []

    with pytest.raises(VerificationError) as ei:
        run_from_images(erofs_state, {"T": image.identity}, ["/bin/true"], confine=confine)
    assert ei.value.code == FreezeCode.EROFS_UNSUPPORTED and not called


def test_the_review_bootstrap_refuses_the_erofs_backend(tmp_path: Path, erofs_state: Path) -> None:
    from support.gitrepo import make_repo

    from attest.git import GitRepo
    from attest.review.bootstrap import snapshot_base

    commit = make_repo(tmp_path / "repo", {"README": b"hi\n"})
    with GitRepo.open(tmp_path / "repo") as repo, pytest.raises(VerificationError) as ei:
        snapshot_base(repo, commit, erofs_state, backend="erofs")
    assert ei.value.code == FreezeCode.EROFS_UNSUPPORTED
    assert not (erofs_state / "store").exists()  # refused before anything was frozen


def test_gc_removes_an_erofs_image(src: Path, expected: Inventory, erofs_state: Path) -> None:
    image = freeze_tree(src, expected, erofs_state, backend="erofs")
    result = Store(erofs_state).gc(recent=0, now=2**40)
    assert result.removed == (image.identity,) and result.broken == () and os.listdir(erofs_state / "store") == []


@pytest.mark.parametrize("damage", ["drop", "bad-sha", "extra-field", "on-other-backend"])
def test_a_malformed_erofs_record_is_bad_record(damage: str, src: Path, expected: Inventory, erofs_state: Path) -> None:
    image = freeze_tree(src, expected, erofs_state, backend="erofs")
    entry = Path(image.path).parent
    doc = json.loads((entry / RECORD_NAME).read_bytes())
    if damage == "drop":
        del doc["erofs"]
    elif damage == "bad-sha":
        doc["erofs"]["sha256"] = "x" * 64
    elif damage == "extra-field":
        doc["erofs"]["more"] = "1"
    else:
        doc["backend"] = "immutable"
    subprocess.run(["chattr", "-i", str(entry / RECORD_NAME)], check=True)
    (entry / RECORD_NAME).write_text(json.dumps(doc))
    with pytest.raises(VerificationError) as ei:
        Store(erofs_state).get(image.identity)
    assert ei.value.code == FreezeCode.BAD_RECORD


def test_a_build_output_is_not_frozen_into_an_erofs_image(src: Path, expected: Inventory, erofs_state: Path) -> None:
    """The installer and the bootstrap read a build's image by path: not wired for erofs, refused before the freeze."""
    from attest.builder._outputs import publish

    with pytest.raises(VerificationError) as ei:
        publish(str(src), str(erofs_state), expected, "erofs")
    assert ei.value.code == FreezeCode.EROFS_UNSUPPORTED and not erofs_state.exists()


_AS_USER = """
import os, sys
from attest.errors import AttestError
from attest.freeze import freeze_tree
from attest.inventory import inventory_tree
base = sys.argv[1]
src = os.path.join(base, "src"); os.mkdir(src)
with open(os.path.join(src, "f"), "w") as f:
    f.write("x")
try:
    freeze_tree(src, inventory_tree(src), os.path.join(base, "state"), backend="erofs")
    print("FROZE")
except AttestError as e:
    print(e.code, e.detail)
"""


def test_an_ordinary_user_gets_backend_unavailable_with_the_reason() -> None:
    """Rootless keeps 'readonly': on the very machine where root freezes into erofs, an ordinary user is refused, saying why."""
    import pwd
    import shutil

    from test_freeze_readonly_cleanup import _interpreter_for

    nobody = pwd.getpwnam("nobody")
    python = _interpreter_for(nobody.pw_uid, nobody.pw_gid)
    if python is None or shutil.which("setpriv") is None:
        pytest.skip("no setpriv, or no Python >= 3.11 that uid 'nobody' can run")
    base = tempfile.mkdtemp(prefix="attest-erofs-user-", dir="/var/tmp")
    try:
        lib = os.path.join(base, "lib")
        shutil.copytree(Path(__file__).resolve().parents[2] / "attest", os.path.join(lib, "attest"), ignore=shutil.ignore_patterns("__pycache__"))
        subprocess.run(["chmod", "-R", "a+rX", base], check=True)
        work = os.path.join(base, "work")
        os.mkdir(work, 0o700)
        os.chown(work, nobody.pw_uid, nobody.pw_gid)
        proc = subprocess.run(["setpriv", f"--reuid={nobody.pw_uid}", f"--regid={nobody.pw_gid}", "--clear-groups", python, "-c", _AS_USER, work],
                              capture_output=True, text=True, timeout=120, cwd="/",
                              env={"PATH": "/usr/bin:/bin", "PYTHONPATH": lib, "PYTHONDONTWRITEBYTECODE": "1"})
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert proc.stdout.startswith("BACKEND_UNAVAILABLE the 'erofs' backend cannot be established here: no CAP_LINUX_IMMUTABLE"), proc.stdout
    finally:
        shutil.rmtree(base, ignore_errors=True)
