"""Store records read again are not parsed again; every other record is still parsed, and refused when malformed."""

from __future__ import annotations

import pytest

from attest.errors import VerificationError
from attest.freeze import FreezeCode
from attest.freeze._image import Image, Sealed, image_from_record


def _record() -> bytes:
    sealed = (Sealed("", True, 11, 1_000), Sealed("a", False, 12, 2_000))
    return Image("/s/store/x/tree", "sha256:" + "ab" * 32, "readonly", 2049, 1_700_000_000, sealed).record_bytes()


def test_the_same_record_bytes_give_the_same_image_and_other_bytes_are_parsed() -> None:
    data = _record()
    first = image_from_record(data, "/s/store/x/tree", "where")
    assert image_from_record(bytearray(data), "/s/store/x/tree", "where") is first
    assert image_from_record(data, "/t/store/x/tree", "where").path == "/t/store/x/tree"  # the path is part of the key
    moved = data.replace(b'"12"', b'"13"', 1)
    assert image_from_record(moved, "/s/store/x/tree", "where").sealed[1].ino == 13


@pytest.mark.parametrize("edit", [(b'"12"', b'"012"'), (b'"file"', b'"link"'), (b'"readonly"', b'"nope"')])
def test_a_malformed_record_is_refused_after_a_good_one_was_read(edit: tuple[bytes, bytes]) -> None:
    data = _record()
    image_from_record(data, "/s/store/x/tree", "where")
    with pytest.raises(VerificationError) as info:
        image_from_record(data.replace(*edit, 1), "/s/store/x/tree", "where")
    assert info.value.code == FreezeCode.BAD_RECORD
