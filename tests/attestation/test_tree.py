"""`verify_tree_attestation`: the signed claim, then the tree against it (THREATS D, E)."""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import shutil
from pathlib import Path

import pytest
from support.keys import Keys

from attest.attestation import (
    VSA_V1,
    closed_tree_statement,
    load_policy,
    sign_statement,
    verify_attestation_file,
    verify_tree_attestation,
)
from attest.errors import VerificationError
from attest.inventory import inventory_tree

FIXED = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)


def attest_tree(tree: Path, out: Path, keys: Keys, key: str = "ed", fmt: str = "dsse", name: str = "tree") -> Path:
    out.write_bytes(sign_statement(closed_tree_statement(name, inventory_tree(tree)), keys.signers[key], fmt=fmt))
    return out


def fails(*args, **kwargs) -> VerificationError:
    with pytest.raises(VerificationError) as caught:
        verify_tree_attestation(*args, **kwargs)
    return caught.value


@pytest.mark.parametrize("fmt", ["dsse", "bundle"])
def test_attest_verify_tamper(sample_tree: Path, tmp_path: Path, keys: Keys, write_policy, fmt: str) -> None:
    att = attest_tree(sample_tree, tmp_path / "att.json", keys, fmt=fmt)
    policy = load_policy(write_policy(["ed"]))
    result = verify_tree_attestation(sample_tree, att, policy)
    assert result.inventory.identity == inventory_tree(sample_tree).identity
    (sample_tree / "lib" / "pkg" / "mod.py").write_bytes(b"X = 2\n")
    err = fails(sample_tree, att, policy)
    assert [(f.code, f.path) for f in err.findings] == [("DIGEST_MISMATCH", "lib/pkg/mod.py")]


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda t: (t / "planted").write_bytes(b""), ("EXTRA", "planted")),
        (lambda t: (t / ".hidden").mkdir(), ("EXTRA", ".hidden")),
        (lambda t: (t / "README").unlink(), ("MISSING", "README")),
        (lambda t: os.chmod(t / "bin" / "tool", 0o755), ("MODE_CHANGED", "bin/tool")),
        (lambda t: (os.unlink(t / "README"), os.symlink("bin/tool", t / "README")), ("SYMLINK", "README")),
    ],
)
def test_tree_deltas_use_the_codes_of_attest_check(sample_tree, tmp_path, keys, write_policy, change, expected) -> None:
    att = attest_tree(sample_tree, tmp_path / "att.json", keys)
    change(sample_tree)
    err = fails(sample_tree, att, load_policy(write_policy(["ed"])))
    assert expected in [(f.code, f.path) for f in err.findings]


def test_statement_for_tree_a_presented_for_tree_b(sample_tree: Path, tmp_path: Path, keys: Keys, write_policy) -> None:
    other = tmp_path / "other"
    other.mkdir()
    (other / "README").write_bytes(b"hello\n")
    os.chmod(other / "README", 0o644)
    att = attest_tree(sample_tree, tmp_path / "att.json", keys)
    err = fails(other, att, load_policy(write_policy(["ed"])))
    assert {f.code for f in err.findings} == {"MISSING"}


def test_replay_of_an_older_release_fails(sample_tree: Path, tmp_path: Path, keys: Keys, write_policy) -> None:
    old = attest_tree(sample_tree, tmp_path / "v1.json", keys)
    (sample_tree / "README").write_bytes(b"hello v2\n")
    new = attest_tree(sample_tree, tmp_path / "v2.json", keys)
    policy = load_policy(write_policy(["ed"]))
    assert verify_tree_attestation(sample_tree, new, policy).verified.signers
    assert fails(sample_tree, old, policy).code == "DIGEST_MISMATCH"
    # A deployment that pins the promoted attestation's digest also refuses any other validly signed one.
    pinned = "sha256:" + hashlib.sha256(new.read_bytes()).hexdigest()
    assert verify_tree_attestation(sample_tree, new, policy, expected_attestation_digest=pinned)
    err = fails(sample_tree, old, policy, expected_attestation_digest=pinned)
    assert err.code == "ATTESTATION_DIGEST_MISMATCH"


@pytest.mark.parametrize("where", ["policy", "key"])
def test_policy_inputs_from_inside_the_tree_are_refused(sample_tree, tmp_path, keys, write_policy, where) -> None:
    att = attest_tree(sample_tree, tmp_path / "att.json", keys)
    inside = sample_tree / "lib"
    if where == "policy":
        policy_path = write_policy(["ed"], where=inside / "cfg")
    else:
        shutil.copy(keys.pub("ed"), inside / "k.pub.pem")
        policy_path = tmp_path / "outside.toml"
        policy_path.write_text(f'threshold = 1\n[[signers]]\nkind = "key"\npublic_key = "{inside / "k.pub.pem"}"\n')
    err = fails(sample_tree, att, load_policy(policy_path))
    assert err.code == "POLICY_IN_TREE"


def test_a_sibling_with_a_common_prefix_is_not_inside(sample_tree, tmp_path, keys, write_policy) -> None:
    att = attest_tree(sample_tree, tmp_path / "att.json", keys)
    sibling = sample_tree.parent / (sample_tree.name + "-policy")
    assert verify_tree_attestation(sample_tree, att, load_policy(write_policy(["ed"], where=sibling)))


def test_a_policy_reached_through_a_symlink_into_the_tree_is_refused(sample_tree, tmp_path, keys, write_policy) -> None:
    att = attest_tree(sample_tree, tmp_path / "att.json", keys)
    real = write_policy(["ed"], where=tmp_path / "real")
    shutil.move(str(real), sample_tree / "policy.toml")
    os.symlink(sample_tree / "policy.toml", tmp_path / "link.toml")
    assert fails(sample_tree, att, load_policy(tmp_path / "link.toml")).code == "POLICY_IN_TREE"


def test_summary_passed(sample_tree, tmp_path, keys, write_policy) -> None:
    att = attest_tree(sample_tree, tmp_path / "att.json", keys)
    policy_path = write_policy(["ed"])
    out = tmp_path / "vsa.json"
    result = verify_tree_attestation(
        sample_tree, att, load_policy(policy_path), summary_out=out, summary_signer=keys.signers["ec"], clock=lambda: FIXED
    )
    assert result.summary == str(out)
    vsa = verify_attestation_file(out, load_policy(write_policy(["ec"])))
    assert vsa.predicate_type == VSA_V1
    pred = vsa.statement["predicate"]
    assert pred["verificationResult"] == "PASSED"
    assert pred["timeVerified"] == "2026-01-02T03:04:05Z"
    assert pred["inputAttestations"] == [{"uri": att.as_uri(), "digest": {"sha256": hashlib.sha256(att.read_bytes()).hexdigest()}}]
    # The policy digest covers the TOML and the keys it names (test_policy_digest.py).
    assert pred["policy"]["digest"]["sha256"] == load_policy(policy_path).digest.removeprefix("sha256:")
    assert pred["policy"]["annotations"]["covers"]["policy"] == hashlib.sha256(policy_path.read_bytes()).hexdigest()
    assert vsa.statement["subject"][0]["digest"]["sha256"] == inventory_tree(sample_tree).digest_hex


def test_summary_failed_is_written_and_the_error_still_raised(sample_tree, tmp_path, keys, write_policy) -> None:
    att = attest_tree(sample_tree, tmp_path / "att.json", keys)
    (sample_tree / "README").write_bytes(b"tampered\n")
    out = tmp_path / "vsa.json"
    err = fails(sample_tree, att, load_policy(write_policy(["ed"])), summary_out=out, summary_signer=keys.signers["ec"])
    assert err.code == "DIGEST_MISMATCH"
    vsa = verify_attestation_file(out, load_policy(write_policy(["ec"])))
    assert vsa.statement["predicate"]["verificationResult"] == "FAILED"
    assert vsa.statement["predicate"]["verifiedLevels"] == ["FAILED"]


def test_summary_failed_before_any_claim_names_the_attestation(sample_tree, tmp_path, keys, write_policy) -> None:
    att = attest_tree(sample_tree, tmp_path / "att.json", keys, key="evil")
    out = tmp_path / "vsa.json"
    err = fails(sample_tree, att, load_policy(write_policy(["ed"])), summary_out=out, summary_signer=keys.signers["ec"])
    assert err.code == "NO_TRUSTED_SIGNATURE"
    vsa = verify_attestation_file(out, load_policy(write_policy(["ec"])))
    assert vsa.statement["subject"][0]["name"] == "attestation:att.json"
    assert vsa.statement["predicate"]["verificationResult"] == "FAILED"
