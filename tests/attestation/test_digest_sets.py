"""in-toto DigestSet names and values as the spec writes them."""

from __future__ import annotations

import pytest

from attest.attestation import statement
from attest.attestation._statement import check_digest_set
from attest.errors import VerificationError

SHA = "ab" * 32


@pytest.mark.parametrize("extra", [{"gitCommit": "c" * 40}, {"gitTree": "d" * 64}, {"dirHash": SHA}, {"sha3_256": SHA}, {"sha512": "e" * 128}])
def test_spec_digest_names_accepted_beside_sha256(extra: dict[str, str]) -> None:
    assert check_digest_set({"sha256": SHA, **extra}, "subject") == {"sha256": SHA, **extra}
    doc = statement([{"name": "x", "digest": {"sha256": SHA, **extra}}], "https://example.com/p", {})
    assert doc["subject"][0]["digest"] == {"sha256": SHA, **extra}


@pytest.mark.parametrize(
    "digest",
    [{"sha256": SHA, "gitCommit": "abc"}, {"sha256": SHA, "Sha1": "a" * 40}, {"sha256": SHA, "sha1": "A" * 40}, {"gitCommit": "c" * 40}, {}],
)
def test_bad_digest_sets_refused(digest: dict[str, str]) -> None:
    with pytest.raises(VerificationError) as info:
        check_digest_set(digest, "subject")
    assert info.value.code == "BAD_DIGEST"
