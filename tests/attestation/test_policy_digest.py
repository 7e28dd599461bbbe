"""The policy digest covers the TOML and every key and trusted root it names.

A verification summary names the policy by this digest; a key file swapped behind an unchanged
policy.toml is another policy, so it must change the digest. The construction is documented in
docs/attestation.md and recomputed here from the files.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import shutil
from pathlib import Path

import pytest
from support.keys import VECTORS, Keys

from attest._json import canonical_bytes
from attest.attestation import (
    POLICY_DIGEST_V1,
    ResourceRef,
    closed_tree_statement,
    load_policy,
    policy_digest,
    sign_statement,
    verification_summary,
    verify_attestation_file,
    verify_tree_attestation,
)
from attest.errors import InputError
from attest.inventory import inventory_tree

ROOT = VECTORS / "production_trusted_root.json"
FIXED = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)


def _h(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def policy_dir(tmp_path: Path, keys: Keys) -> Path:
    d = tmp_path / "etc"
    (d / "keys").mkdir(parents=True)
    shutil.copy(keys.pub("ed"), d / "keys" / "a.pub.pem")
    shutil.copy(keys.pub("ec"), d / "keys" / "b.pub.pem")
    shutil.copy(ROOT, d / "root.json")
    (d / "policy.toml").write_text(
        'threshold = 1\n'
        '[[signers]]\nkind = "key"\npublic_key = "keys/a.pub.pem"\ntrusted_root = "root.json"\n'
        '[[signers]]\nkind = "key"\npublic_key = "keys/b.pub.pem"\n'
        '[[signers]]\nkind = "sigstore"\nidentity = "https://example.org/id"\nissuer = "https://example.org"\n'
        'trusted_root = "root.json"\n')
    return d


def test_the_digest_is_the_documented_construction(policy_dir: Path) -> None:
    policy = load_policy(policy_dir / "policy.toml")
    files = {p: (policy_dir / p).read_bytes() for p in ("keys/a.pub.pem", "keys/b.pub.pem", "root.json")}
    covers = {"policy": _h((policy_dir / "policy.toml").read_bytes()),
              "keys": {"keys/a.pub.pem": _h(files["keys/a.pub.pem"]), "keys/b.pub.pem": _h(files["keys/b.pub.pem"])},
              "trusted_roots": {"root.json": _h(files["root.json"])}}  # named twice, covered once
    assert policy.digest_covers == covers
    assert policy.digest == "sha256:" + _h(canonical_bytes(covers))
    assert policy.digest == policy_digest((policy_dir / "policy.toml").read_bytes(),
                                          {k: v for k, v in files.items() if k.startswith("keys/")}, {"root.json": files["root.json"]})


def test_changing_a_key_file_changes_the_digest(policy_dir: Path, keys: Keys) -> None:
    before = load_policy(policy_dir / "policy.toml").digest
    toml = (policy_dir / "policy.toml").read_bytes()
    shutil.copy(keys.pub("ed2"), policy_dir / "keys" / "b.pub.pem")  # the same TOML, another key behind it
    after = load_policy(policy_dir / "policy.toml")
    assert (policy_dir / "policy.toml").read_bytes() == toml
    assert after.digest != before
    # A trusted root's bytes count too.
    root = json.loads((policy_dir / "root.json").read_bytes())
    root["tlogs"] = root["tlogs"][:1]
    (policy_dir / "root.json").write_text(json.dumps(root))
    assert load_policy(policy_dir / "policy.toml").digest not in (before, after.digest)


def test_the_digest_does_not_depend_on_where_the_policy_lives(policy_dir: Path, tmp_path: Path) -> None:
    moved = tmp_path / "elsewhere"
    shutil.copytree(policy_dir, moved)
    assert load_policy(moved / "policy.toml").digest == load_policy(policy_dir / "policy.toml").digest


def test_the_summary_names_the_policy_by_that_digest(policy_dir: Path, tmp_path: Path, keys: Keys, sample_tree: Path) -> None:
    att = tmp_path / "att.json"
    att.write_bytes(sign_statement(closed_tree_statement("tree", inventory_tree(sample_tree)), keys.signers["ed"]))
    policy = load_policy(policy_dir / "policy.toml")
    out = tmp_path / "vsa.json"
    verify_tree_attestation(sample_tree, att, policy, summary_out=out, summary_signer=keys.signers["ec"], clock=lambda: FIXED)
    pred = verify_attestation_file(out, policy).statement["predicate"]
    assert pred["policy"] == {"uri": (policy_dir / "policy.toml").as_uri(), "digest": {"sha256": policy.digest.removeprefix("sha256:")},
                              "annotations": {"digestOf": POLICY_DIGEST_V1, "covers": policy.digest_covers}}
    assert pred["inputAttestations"] == [{"uri": att.as_uri(), "digest": {"sha256": _h(att.read_bytes())}}]


def test_input_attestations_need_a_uri_and_a_digest() -> None:
    for ref in (ResourceRef(name="a.json", digest={"sha256": "00" * 32}), ResourceRef("file:///a.json")):
        with pytest.raises(InputError) as caught:
            verification_summary(verifier_id="v", time_verified=FIXED, resource_uri="r", policy=ResourceRef("p"),
                                 input_attestations=[ref], passed=True)
        assert caught.value.code == "BAD_PREDICATE"
