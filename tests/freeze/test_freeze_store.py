"""freeze_tree and the store: order of operations, backends, refusals, reuse, gc."""

from __future__ import annotations

import dataclasses
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from support.caps import BACKEND, HAS_IMMUTABLE, IS_ROOT, needs_immutable
from support.erofs import needs_erofs, tree_of
from support.trees import all_paths, chattr, is_immutable

from attest.errors import EnvironmentFailure, InputError, VerificationError
from attest.freeze import BACKENDS, FreezeCode, RoBindBackend, Store, check_image, freeze_tree, get_backend, verify_image
from attest.inventory import Inventory, InventoryCode, inventory_tree, verify_tree

ALL_BACKENDS = ("immutable", "readonly", "ro-bind", "erofs")


def _ro_bind_available() -> str | None:
    try:
        RoBindBackend().probe(-1, "/tmp")
    except EnvironmentFailure as e:
        return e.detail
    return None


def backend_param(name: str) -> object:
    if name == "immutable":
        return pytest.param(name, marks=needs_immutable)
    if name == "erofs":
        return pytest.param(name, marks=needs_erofs)
    reason = _ro_bind_available() if name == "ro-bind" else None
    return pytest.param(name, marks=pytest.mark.skipif(reason is not None, reason=f"ro-bind not available here: {reason}"))


BACKEND_PARAMS = [backend_param(b) for b in ALL_BACKENDS]


def frozen_view(expected: Inventory, backend: str = BACKEND) -> Inventory:
    """What a frozen image of ``expected`` must match: the attested modes minus the backend's mask."""
    mask = get_backend(backend).mode_mask
    if not mask:
        return expected
    return Inventory.from_entries([dataclasses.replace(e, mode=e.mode & ~mask) for e in expected.entries], expected.ignore)


def codes(err: pytest.ExceptionInfo[BaseException]) -> set[str]:
    return {f.code for f in err.value.findings}  # type: ignore[attr-defined]


def nothing_left(state: Path) -> bool:
    return not os.listdir(state / "staging") and not [n for n in os.listdir(state / "store")]


@pytest.mark.parametrize("backend", BACKEND_PARAMS)
def test_freeze_publishes_a_verified_sealed_image(src: Path, expected: Inventory, state: Path, backend: str) -> None:
    image = freeze_tree(src, expected, state, backend=backend)
    assert image.identity == expected.identity and image.backend == backend and not image.reused
    assert image.path == f"{state.resolve()}/store/{expected.digest_hex}/tree"
    mask = get_backend(backend).mode_mask
    if backend == "erofs":  # one sealed image file; its content only through a mount
        entry = Path(image.path).parent
        assert is_immutable(entry / "image.erofs") and os.listdir(image.path) == []
        observed = inventory_tree(tree_of(entry, state.parent / "through-the-mount"))
    else:
        observed = inventory_tree(image.path)
    assert [(e.path, e.type, e.size, e.sha256) for e in observed.entries] == [(e.path, e.type, e.size, e.sha256) for e in expected.entries]
    assert [e.mode for e in observed.entries] == [e.mode & ~mask for e in expected.entries]
    assert check_image(image) == []
    if backend == "erofs":
        assert stat.S_IMODE(os.stat(state).st_mode) == 0o700 and os.listdir(state / "staging") == []
        return
    # New inodes, never links to the source.
    for rel in ("README", "bin/tool", "big.bin"):
        assert os.stat(Path(image.path) / rel).st_ino != os.stat(src / rel).st_ino
        assert os.stat(Path(image.path) / rel).st_nlink == 1
    if backend == "immutable":
        assert all(is_immutable(Path(image.path) / p) for p in ["", *all_paths(Path(image.path))])
    else:
        assert all(not (Path(image.path) / p).stat().st_mode & 0o222 for p in ["", *all_paths(Path(image.path))])
    assert stat.S_IMODE(os.stat(state).st_mode) == 0o700
    assert os.listdir(state / "staging") == []


@needs_immutable  # only the flag holds against the owner and root
def test_published_immutable_image_refuses_every_writer(src: Path, expected: Inventory, state: Path) -> None:
    image = Path(freeze_tree(src, expected, state, backend="immutable").path)
    for attempt in (
        lambda: open(image / "README", "ab"),
        lambda: os.truncate(image / "README", 0),
        lambda: os.unlink(image / "README"),
        lambda: os.rename(image / "README", image / "x"),
        lambda: (image / "new").write_bytes(b"x"),
        lambda: os.chmod(image / "README", 0o777),
        lambda: os.link(image / "README", src / "alias"),
        lambda: os.rename(image, image.parent / "moved"),
    ):
        with pytest.raises(PermissionError):
            attempt()
    verify_tree(image, expected)


def test_reuse_is_cheap_and_only_when_the_seal_holds(src: Path, expected: Inventory, state: Path) -> None:
    first = freeze_tree(src, expected, state, backend=BACKEND)
    again = freeze_tree(src, expected, state, backend=BACKEND)
    assert again.reused and again.path == first.path and again.sealed == first.sealed


def test_reuse_detects_a_cleared_flag_and_freezes_afresh(src: Path, expected: Inventory, state: Path) -> None:
    # Without the flag (readonly), chattr -i is the owner's chmod u+w: see support/trees.py.
    image = freeze_tree(src, expected, state, backend=BACKEND)
    readme = Path(image.path) / "README"
    chattr("-i", readme)
    problems = check_image(image)
    assert {f.code for f in problems} == {FreezeCode.IMAGE_NOT_IMMUTABLE} and problems[0].path == "README"
    with pytest.raises(VerificationError) as err:
        Store(state).get(image.path)
    assert "IMAGE_NOT_IMMUTABLE" in codes(err)
    redone = freeze_tree(src, expected, state, backend=BACKEND)
    assert not redone.reused and check_image(redone) == []
    assert is_immutable(Path(redone.path) / "README") if HAS_IMMUTABLE else not os.stat(Path(redone.path) / "README").st_mode & 0o222
    verify_tree(redone.path, frozen_view(expected))


def test_reuse_detects_a_changed_image_even_with_the_flag_set_again(src: Path, expected: Inventory, state: Path) -> None:
    image = freeze_tree(src, expected, state, backend=BACKEND)
    readme = Path(image.path) / "README"
    chattr("-i", readme)
    readme.write_bytes(b"HELLO\n")  # same size, other bytes
    chattr("+i", readme)
    problems = check_image(image)
    assert [(f.code, f.path) for f in problems] == [(FreezeCode.IMAGE_CHANGED, "README")]
    redone = freeze_tree(src, expected, state, backend=BACKEND)
    assert not redone.reused
    assert (Path(redone.path) / "README").read_bytes() == b"hello\n"
    verify_tree(redone.path, frozen_view(expected))


def test_reuse_detects_an_added_entry(src: Path, expected: Inventory, state: Path) -> None:
    image = freeze_tree(src, expected, state, backend="readonly")
    if not IS_ROOT:  # the owner gives itself the write bit back; root bypasses the missing write bits
        os.chmod(image.path, 0o755)
    (Path(image.path) / "planted").write_bytes(b"x")
    assert {(f.code, f.path) for f in check_image(image)} >= {(FreezeCode.IMAGE_CHANGED, "planted")}
    redone = freeze_tree(src, expected, state, backend="readonly")
    assert not redone.reused and not (Path(redone.path) / "planted").exists()


@pytest.mark.parametrize(
    ("mutate", "code"),
    [
        (lambda s: (s / "extra").write_bytes(b"x"), InventoryCode.EXTRA),
        (lambda s: os.unlink(s / "README"), InventoryCode.MISSING),
        (lambda s: (s / "README").write_bytes(b"HELLO\n"), InventoryCode.DIGEST_MISMATCH),
        (lambda s: (s / "README").write_bytes(b"hello, longer\n"), InventoryCode.DIGEST_MISMATCH),
        (lambda s: (os.unlink(s / "README"), os.symlink("bin/tool", s / "README")), InventoryCode.SYMLINK),
        (lambda s: (os.unlink(s / "README"), os.mkfifo(s / "README")), InventoryCode.SPECIAL_FILE),
        (lambda s: os.link(s / "README", s.parent / "outside-alias"), InventoryCode.HARDLINK),
        (lambda s: os.chmod(s / "README", 0o4755), InventoryCode.SPECIAL_MODE),
        (lambda s: (os.unlink(s / "README"), os.mkdir(s / "README")), InventoryCode.TYPE_CHANGED),
        (lambda s: (shutil.rmtree(s / "lib"), os.symlink(s / "bin", s / "lib")), InventoryCode.SYMLINK),
    ],
)
def test_a_source_that_differs_is_refused_and_nothing_is_published(
    src: Path, expected: Inventory, state: Path, mutate: object, code: str
) -> None:
    mutate(src)  # type: ignore[operator]
    with pytest.raises(VerificationError) as err:
        freeze_tree(src, expected, state, backend=BACKEND)
    assert code in codes(err)
    assert nothing_left(state)


def test_source_modes_do_not_matter_the_attested_ones_do(src: Path, expected: Inventory, state: Path) -> None:
    os.chmod(src / "bin" / "tool", 0o600)
    image = freeze_tree(src, expected, state, backend=BACKEND)
    assert stat.S_IMODE(os.stat(Path(image.path) / "bin" / "tool").st_mode) == 0o755 & ~get_backend(BACKEND).mode_mask


def test_ignore_patterns_recorded_in_the_inventory_are_applied_to_the_source(tmp_path: Path, src: Path, state: Path) -> None:
    (src / "cache.pyc").write_bytes(b"junk")
    expected = inventory_tree(src, ignore=["*.pyc"])
    image = freeze_tree(src, expected, state, backend=BACKEND)
    assert not (Path(image.path) / "cache.pyc").exists()
    verify_tree(image.path, frozen_view(expected))


def test_unknown_backend_is_bad_usage(src: Path, expected: Inventory, state: Path) -> None:
    with pytest.raises(InputError) as err:
        freeze_tree(src, expected, state, backend="chattr-ish")
    assert err.value.code == "UNKNOWN_BACKEND"


def test_a_backend_that_cannot_be_established_is_refused_not_replaced(src: Path, expected: Inventory, state: Path) -> None:
    BACKENDS["ro-bind-broken"] = RoBindBackend(unshare="/nonexistent/unshare")
    try:
        with pytest.raises(EnvironmentFailure) as err:
            freeze_tree(src, expected, state, backend="ro-bind-broken")
    finally:
        del BACKENDS["ro-bind-broken"]
    assert err.value.code == "BACKEND_UNAVAILABLE"
    assert nothing_left(state)


@pytest.mark.skipif(shutil.which("setpriv") is None, reason="setpriv(1) is needed to drop CAP_LINUX_IMMUTABLE")
def test_immutable_backend_without_the_capability_fails_closed(tmp_path: Path, src: Path, expected: Inventory, state: Path) -> None:
    inv = tmp_path / "inv.json"
    inv.write_bytes(expected.canonical)
    code = (
        "import sys\n"
        "from attest.errors import AttestError\n"
        "from attest.freeze import freeze_tree\n"
        "from attest.inventory import Inventory\n"
        "exp = Inventory.from_bytes(open(sys.argv[1], 'rb').read())\n"
        "try:\n"
        "    freeze_tree(sys.argv[2], exp, sys.argv[3], backend='immutable')\n"
        "except AttestError as e:\n"
        "    print(e.code); sys.exit(e.exit_code)\n"
    )
    done = subprocess.run(
        ["setpriv", "--bounding-set", "-linux_immutable", "--inh-caps", "-linux_immutable", sys.executable, "-c", code, str(inv), str(src), str(state)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 1, done.stderr
    assert done.stdout.strip() == "BACKEND_UNAVAILABLE"
    assert nothing_left(state)


def test_a_change_while_the_frozen_copy_is_verified_fails_closed(src: Path, expected: Inventory, state: Path) -> None:
    """The seal must hold from before verification until after it (CHANGED_AFTER_FREEZE)."""
    calls = []

    def progress(files: int, size: int) -> None:
        # Called once, after every file of this small tree was hashed: change one sealed file.
        calls.append(files)
        (tree,) = (state / "staging").glob("tmp-*/tree")
        chattr("-i", tree / "README")
        (tree / "README").write_bytes(b"hello\n")  # same bytes: only the change time tells
        chattr("+i", tree / "README")

    with pytest.raises(VerificationError) as err:
        freeze_tree(src, expected, state, backend=BACKEND, progress=progress)
    assert calls and codes(err) == {"CHANGED_AFTER_FREEZE"}
    assert nothing_left(state)


def test_a_store_entry_with_another_backend_conflicts(src: Path, expected: Inventory, state: Path) -> None:
    # The conflict is found before the other backend is probed: it need not be available here.
    freeze_tree(src, expected, state, backend=BACKEND)
    with pytest.raises(VerificationError) as err:
        freeze_tree(src, expected, state, backend="readonly" if BACKEND == "immutable" else "immutable")
    assert err.value.code == "STORE_CONFLICT"


def test_a_damaged_record_is_not_trusted_and_is_replaced(src: Path, expected: Inventory, state: Path) -> None:
    image = freeze_tree(src, expected, state, backend=BACKEND)
    record = Path(image.path).parent / "record.json"
    chattr("-i", record)
    record.write_bytes(b'{"format": 1}')
    with pytest.raises(VerificationError) as err:
        Store(state).get(image.identity)
    assert err.value.code == "BAD_RECORD"
    assert Store(state).ls()[0].problems[0].code == FreezeCode.BAD_RECORD
    redone = freeze_tree(src, expected, state, backend=BACKEND)
    assert not redone.reused and check_image(redone) == []


def test_store_get_resolves_only_store_paths_and_identities(src: Path, expected: Inventory, state: Path) -> None:
    image = freeze_tree(src, expected, state, backend=BACKEND)
    store = Store(state)
    assert store.get(image.path).identity == store.get(image.identity).identity == expected.identity
    for ref in (str(src), f"{state}/store/{expected.digest_hex}", f"{state}/store/{expected.digest_hex}/tree/..", "sha256:" + "0" * 63):
        with pytest.raises(VerificationError) as err:
            store.get(ref)
        assert err.value.code == "NOT_IN_STORE"
    with pytest.raises(VerificationError) as err:
        store.get("sha256:" + "0" * 64)
    assert err.value.code == "NOT_IN_STORE"
    assert store.lookup("sha256:" + "0" * 64) is None
    assert store.lookup(image.identity) == store.get(image.identity)


def test_verify_image_raises_with_the_reason(src: Path, expected: Inventory, state: Path) -> None:
    image = freeze_tree(src, expected, state, backend=BACKEND)
    verify_image(image)
    chattr("-i", Path(image.path) / "lib" / "pkg")
    with pytest.raises(VerificationError) as err:
        verify_image(image)
    assert [(f.code, f.path) for f in err.value.findings] == [("IMAGE_NOT_IMMUTABLE", "lib/pkg")]


def test_gc_removes_only_unreferenced_images_and_clears_their_flags(tmp_path: Path, state: Path) -> None:
    from support.trees import make_tree

    images = []
    for i in range(3):
        tree = make_tree(tmp_path / f"t{i}", {"f": f"tree {i}\n".encode(), "d": {"g": b"x"}})
        images.append(freeze_tree(tree, inventory_tree(tree), state, backend=BACKEND, clock=lambda: 1000.0))
    store = Store(state)
    os.utime(state / "uses" / images[0].hex, (1000, 1000))
    os.utime(state / "uses" / images[1].hex, (1000, 1000))
    os.utime(state / "uses" / images[2].hex, (5000, 5000))  # recently run
    (state / "staging" / "tmp-leftover").mkdir()
    dry = store.gc(keep=[images[0].identity], recent=100, now=5050, dry_run=True)
    assert dry.removed == (images[1].identity,) and Path(images[1].path).exists()
    result = store.gc(keep=[images[0].identity], recent=100, now=5050)
    assert result.removed == (images[1].identity,)
    assert set(result.kept) == {images[0].identity, images[2].identity}
    assert not Path(images[1].path).exists() and not (state / "uses" / images[1].hex).exists()
    assert check_image(images[0]) == [] and check_image(images[2]) == []
    assert os.listdir(state / "staging") == []
    assert [e.identity for e in store.ls()] == sorted([images[0].identity, images[2].identity])
    with pytest.raises(InputError) as err:  # bad usage (exit 2), not a failed verification
        store.gc(keep=["not-an-identity"])
    assert err.value.code == "BAD_IMAGE_REF"
