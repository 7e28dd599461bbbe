"""The seal witness is an index, not a witness.

Whoever can break a seal can also rewrite ``record.json``: root with CAP_LINUX_IMMUTABLE for
``immutable``, the owner for ``readonly``. The attack: break the seal, change a file, seal it
again, refresh the record with the new inode numbers and change times. Before the fix
``store ls --check`` said the image held, ``exec`` ran the changed code and ``freeze`` reused it.
Now every use verifies every byte against the inventory stored beside the tree, whose SHA-256
is the entry's name.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.caps import BACKEND, needs_immutable
from support.erofs import needs_erofs
from support.store import image_bytes, load_record, reseal, rewrite_record
from support.trees import chattr

from attest.errors import AttestError
from attest.freeze import FreezeCode, Store, freeze_tree, run_from_images
from attest.freeze._image import INVENTORY_NAME, RECORD_NAME
from attest.inventory import Inventory


@pytest.mark.parametrize("backend", [pytest.param("immutable", marks=needs_immutable), "readonly", pytest.param("erofs", marks=needs_erofs)])
def test_a_resealed_image_with_a_refreshed_record_is_never_used(src: Path, expected: Inventory, state: Path,
                                                                backend: str, tmp_path: Path) -> None:
    image = freeze_tree(src, expected, state, backend=backend)
    entry = Path(image.path).parent
    reseal(entry, backend, "lib/pkg/mod.py", b"VALUE = 'pwned'\n")
    # The seal itself holds again: only the content check can tell.
    from attest.freeze import check_image

    assert check_image(load_record(entry)) == []

    # store ls --check
    [listed] = Store(state).ls(check=True)
    assert listed.problems and listed.problems[0].code == FreezeCode.IMAGE_CHANGED
    assert any(p.code == "DIGEST_MISMATCH" and p.path == "lib/pkg/mod.py" for p in listed.problems)

    # exec refuses before running anything
    marker = tmp_path / "ran"
    with pytest.raises(AttestError) as ei:
        run_from_images(state, {"LIB": image.identity}, ["/bin/sh", "-c", f": > {marker}"])
    assert ei.value.code == FreezeCode.IMAGE_CHANGED and not marker.exists()

    # freeze does not reuse it: the stale entry is replaced by a fresh, correct copy
    again = freeze_tree(src, expected, state, backend=backend)
    assert not again.reused
    assert image_bytes(again.path, "lib/pkg/mod.py") == b"VALUE = 41 + 1\n"


@pytest.mark.parametrize("backend", [pytest.param("immutable", marks=needs_immutable), "readonly", pytest.param("erofs", marks=needs_erofs)])
def test_an_image_verified_for_this_use_is_checked_against_its_own_seal(src: Path, expected: Inventory, state: Path,
                                                                         backend: str, tmp_path: Path) -> None:
    """exec given an Image the caller took with Store.get checks the seal again, never the record on disk."""
    freeze_tree(src, expected, state, backend=backend)
    image = Store(state).get(expected.identity)  # seal, every byte, seal: for this use
    marker = tmp_path / "ran"
    assert run_from_images(state, {"LIB": image}, ["/bin/sh", "-c", f": > {marker}"]) == 0 and marker.exists()
    marker.unlink()
    # Broken and re-made, record refreshed: the record holds, the image's own snapshot does not.
    reseal(Path(image.path).parent, backend, "lib/pkg/mod.py", b"VALUE = 'pwned'\n")
    with pytest.raises(AttestError) as ei:
        run_from_images(state, {"LIB": image}, ["/bin/sh", "-c", f": > {marker}"])
    assert ei.value.code == FreezeCode.IMAGE_CHANGED and not marker.exists()
    # The changed file (erofs: the image file that holds it, whose seal is the one that moved).
    assert any(f.path == "lib/pkg/mod.py" or (f.path or "").endswith("/image.erofs") for f in ei.value.findings)
    # An image of another store is not this store's, whatever its identity.
    other = state.parent / "other-state"
    freeze_tree(src, expected, other, backend=backend)
    with pytest.raises(AttestError) as ei:
        run_from_images(other, {"LIB": image}, ["/bin/sh", "-c", f": > {marker}"])
    assert ei.value.code == FreezeCode.NOT_IN_STORE and not marker.exists()


def test_a_stored_inventory_swapped_for_another_is_refused(src: Path, expected: Inventory, state: Path) -> None:
    """The inventory beside the tree must hash to the entry's name: it cannot be replaced to match new bytes."""
    image = freeze_tree(src, expected, state, backend=BACKEND)
    entry = Path(image.path).parent
    chattr("-i", entry / INVENTORY_NAME)
    (entry / INVENTORY_NAME).write_bytes(expected.canonical.replace(b'"README"', b'"READMF"'))
    with pytest.raises(AttestError) as ei:
        Store(state).get(image.identity)
    assert ei.value.code == FreezeCode.BAD_RECORD


def test_exec_through_the_cli_refuses_a_resealed_image(src: Path, expected: Inventory, state: Path) -> None:
    image = freeze_tree(src, expected, state, backend=BACKEND)
    reseal(Path(image.path).parent, BACKEND, "bin/tool", b"#!/bin/sh\necho pwned\n")
    out = subprocess.run([sys.executable, "-m", "attest", "exec", "--state-dir", str(state), "--image",
                          f"T={image.identity}", "--json", "--", "/bin/sh", "-c", f"{image.path}/bin/tool"],
                         capture_output=True, text=True)
    assert out.returncode == 125 and "pwned" not in out.stdout and "IMAGE_CHANGED" in out.stdout  # exec itself refused


def test_a_file_added_under_an_ignored_path_of_a_stored_image_is_refused(tmp_path: Path, state: Path) -> None:
    """The attested inventory's ignore patterns (``__pycache__/``) must not apply to a frozen image:
    freeze copies only listed entries, so an image holds exactly those (attack review)."""
    from support.trees import make_tree

    from attest.inventory import inventory_tree

    src = make_tree(tmp_path / "src", {"main.py": b"import mod\n", "mod.py": b"X = 1\n", "__pycache__": {"old.pyc": b"junk"}})
    expected = inventory_tree(src, ignore=["__pycache__/"])
    image = freeze_tree(src, expected, state, backend=BACKEND)
    entry = Path(image.path).parent
    assert not (Path(image.path) / "__pycache__").exists()
    # The attacker (able to break the seal) adds bytecode under the ignored path and re-seals.
    chattr("-i", Path(image.path), entry / RECORD_NAME)
    (Path(image.path) / "__pycache__").mkdir()
    (Path(image.path) / "__pycache__" / "mod.cpython-311.pyc").write_bytes(b"PWNED")
    chattr("+i", Path(image.path) / "__pycache__" / "mod.cpython-311.pyc", Path(image.path) / "__pycache__", Path(image.path))
    store = Store(state)
    rewrite_record(entry)
    chattr("+i", entry / RECORD_NAME)
    [listed] = store.ls(check=True)
    assert listed.problems, "an image with an added __pycache__ was reported as holding"
    with pytest.raises(AttestError):
        run_from_images(state, {"T": image.identity}, ["/bin/true"])
    assert not freeze_tree(src, expected, state, backend=BACKEND).reused


@pytest.mark.parametrize(("mode", "refused"), [(0o777, True), (0o775, True), (0o1777, False), (0o755, False)])
def test_a_state_directory_under_a_directory_others_may_write_is_refused(tmp_path: Path, src: Path, expected: Inventory,
                                                                         mode: int, refused: bool) -> None:
    """Attack review: exec verified the image through descriptors, then handed the command
    paths below the state directory; an ancestor writable by nobody let them swap in a look-alike
    state (inotify on the 5th open) and run it with exit 0. Such an ancestor is now refused."""
    parent = tmp_path / "shared"
    parent.mkdir()
    os.chmod(tmp_path, 0o755)
    os.chmod(parent, mode)
    if refused:
        with pytest.raises(AttestError) as ei:
            freeze_tree(src, expected, parent / "state")
        assert ei.value.code == FreezeCode.STATE_INSECURE
    else:
        assert freeze_tree(src, expected, parent / "state").identity == expected.identity


def test_check_ancestor_table() -> None:
    from attest.errors import EnvironmentFailure
    from attest.freeze._state import check_ancestor

    me = os.geteuid()
    for uid, mode, ok in [(0, 0o40755, True), (me, 0o40700, True), (0, 0o41777, True), (12345, 0o40755, False),
                          (0, 0o40777, False), (0, 0o40775, False), (me, 0o40757, False)]:
        st = os.stat_result((mode, 1, 1, 2, uid, 0, 0, 0, 0, 0))
        if ok:
            check_ancestor(st, "/x")
        else:
            with pytest.raises(EnvironmentFailure):
                check_ancestor(st, "/x")
