"""The erofs backend's decisions that need neither root nor erofs-utils, so that every run (an ordinary user's, a
machine without erofs-utils) provokes their reason codes: the metadata the pinned flags never write
(``EROFS_MISMATCH``), a ``mkfs.erofs`` that does not build the checked-in gate image (``EROFS_NOT_REPRODUCIBLE``) and
the consumers that refuse the backend before anything runs (``EROFS_UNSUPPORTED``). The mounted checks themselves are
in tests/freeze/test_erofs.py and test_attack_erofs_image.py (root, erofs-utils)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from support.trees import make_tree

from attest.errors import EnvironmentFailure, VerificationError
from attest.freeze import FreezeCode
from attest.inventory import inventory_tree


def _zero_times(root: Path) -> None:
    for dirpath, dirnames, filenames in os.walk(root):
        for name in [*dirnames, *filenames]:
            os.utime(os.path.join(dirpath, name), ns=(0, 0), follow_symlinks=False)
    os.utime(root, ns=(0, 0))


def test_an_entry_with_a_time_or_another_owner_is_not_what_the_pinned_flags_write(tmp_path: Path) -> None:
    from attest.freeze._erofs_image import foreign_metadata

    root = make_tree(tmp_path / "t", {"a": b"a\n", "sub": {"b": b"b\n"}})
    _zero_times(root)
    os.utime(root / "sub" / "b", ns=(0, 12345))
    findings = foreign_metadata(str(root), inventory_tree(root))
    assert {f.code for f in findings} == {FreezeCode.EROFS_MISMATCH}
    assert [f.path for f in findings if "modification time" in f.detail] == ["sub/b"]
    owned = [f.path for f in findings if "owned by uid" in f.detail]
    # As root the tree is root's and only the time is foreign; as another user every entry is.
    assert owned == ([] if os.geteuid() == 0 and os.getegid() == 0 else [None, "a", "sub", "sub/b"])


def test_a_mkfs_erofs_that_builds_another_image_of_the_gate_tree_is_refused(tmp_path: Path) -> None:
    from attest.freeze._erofs import gate

    fake = tmp_path / "bin" / "mkfs.erofs"
    fake.parent.mkdir()
    # Says it is erofs-utils 1.5 (its first line, as the real one prints without arguments), then writes an image
    # of its own: the gate's digest cannot match.
    fake.write_text('#!/bin/sh\nif [ $# -eq 0 ]; then echo "mkfs.erofs 1.5"; exit 1; fi\n'
                    'for a; do img=$src; src=$a; done\nprintf "not the gate image" > "$img"\n')
    fake.chmod(0o755)
    scratch = tmp_path / "scratch"
    scratch.mkdir(mode=0o700)
    fd = os.open(scratch, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with pytest.raises(EnvironmentFailure) as ei:
            gate(str(fake), fd, str(scratch))
    finally:
        os.close(fd)
    assert ei.value.code == FreezeCode.EROFS_NOT_REPRODUCIBLE
    assert "mkfs.erofs 1.5" in ei.value.detail and "not the checked-in" in ei.value.detail
    assert os.listdir(scratch) == []  # the gate's scratch tree is removed


def test_build_outputs_refuse_the_erofs_backend_before_anything_is_frozen(tmp_path: Path) -> None:
    from attest.builder._outputs import publish

    out = make_tree(tmp_path / "out", {"bin": {"tool": b"#!/bin/sh\n"}})
    state = tmp_path / "state"
    with pytest.raises(VerificationError) as ei:
        publish(str(out), str(state), inventory_tree(out), "erofs")
    assert ei.value.code == FreezeCode.EROFS_UNSUPPORTED
    assert "choose another backend" in ei.value.detail
    assert not state.exists()
