"""`attest verify` checks a tree against any predicate that carries a closed inventory.

The closed-tree, runtime and installation predicates all hold the closed inventory of their
single subject; provenance and verification summaries do not, and stay refused with
``BAD_PREDICATE_TYPE``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support.keys import Keys

from attest.attestation import (
    CLOSED_TREE_PREDICATE,
    INSTALLATION_PREDICATE,
    INVENTORY_PREDICATES,
    RUNTIME_PREDICATE,
    SLSA_PROVENANCE_V1,
    VSA_V1,
    load_policy,
    sign_statement,
    statement,
    subject,
    tree_inventory,
    verify_tree_attestation,
)
from attest.errors import VerificationError
from attest.inventory import inventory_tree

_RUNTIME_FIELDS = {"name": "rt", "inputs_digest": "sha256:" + "a" * 64, "toolchain": {"repository": "r", "revision": "b" * 40},
                   "interpreter": {"version": "3.11.7"}, "distributions": [], "wheels": []}
_INSTALL_FIELDS = {"name": "skill", "installer": {"repository": "r", "revision": "c" * 40}, "root": "agent-policy"}


@pytest.mark.parametrize(
    ("predicate_type", "fields", "code"),
    [
        (CLOSED_TREE_PREDICATE, {}, None),
        (RUNTIME_PREDICATE, _RUNTIME_FIELDS, None),
        (INSTALLATION_PREDICATE, _INSTALL_FIELDS, None),
        (CLOSED_TREE_PREDICATE, {"note": "x"}, "BAD_PREDICATE"),   # the closed-tree predicate stays exact
        (SLSA_PROVENANCE_V1, {"buildDefinition": {}}, "BAD_PREDICATE_TYPE"),
        (VSA_V1, {"verificationResult": "PASSED"}, "BAD_PREDICATE_TYPE"),
        ("https://example.org/other/v1", {}, "BAD_PREDICATE_TYPE"),
    ],
    ids=["closed-tree", "runtime", "installation", "closed-tree-extra-field", "provenance", "vsa", "foreign"],
)
def test_verify_accepts_every_inventory_predicate(sample_tree: Path, tmp_path: Path, keys: Keys, write_policy,
                                                  predicate_type: str, fields: dict[str, Any], code: str | None) -> None:
    inv = inventory_tree(sample_tree)
    doc = statement([subject("tree", inv.digest_hex)], predicate_type, {**fields, "inventory": inv.to_json()})
    att = tmp_path / "att.json"
    att.write_bytes(sign_statement(doc, keys.signers["ed"]))
    policy = load_policy(write_policy(["ed"]))
    if code is None:
        result = verify_tree_attestation(sample_tree, att, policy)
        assert result.inventory.identity == inv.identity and result.verified.predicate_type == predicate_type
        (sample_tree / "README").write_bytes(b"changed\n")
        with pytest.raises(VerificationError) as caught:
            verify_tree_attestation(sample_tree, att, policy)
        assert [(f.code, f.path) for f in caught.value.findings] == [("DIGEST_MISMATCH", "README")]
    else:
        with pytest.raises(VerificationError) as caught:
            verify_tree_attestation(sample_tree, att, policy)
        assert caught.value.code == code


@pytest.mark.parametrize(
    ("accepted", "predicate_type", "ok"),
    [
        (CLOSED_TREE_PREDICATE, CLOSED_TREE_PREDICATE, True),
        (CLOSED_TREE_PREDICATE, RUNTIME_PREDICATE, False),
        (RUNTIME_PREDICATE, RUNTIME_PREDICATE, True),
        (RUNTIME_PREDICATE, INSTALLATION_PREDICATE, False),
        (INVENTORY_PREDICATES, INSTALLATION_PREDICATE, True),
        (INVENTORY_PREDICATES, SLSA_PROVENANCE_V1, False),
        ((), CLOSED_TREE_PREDICATE, False),
    ],
)
def test_tree_inventory_accepts_one_type_or_several(sample_tree: Path, accepted: Any, predicate_type: str, ok: bool) -> None:
    """Pure: the statement's type must be the one accepted, or one of several."""
    inv = inventory_tree(sample_tree)
    doc = statement([subject("tree", inv.digest_hex)], predicate_type, {"inventory": inv.to_json()})
    if ok:
        assert tree_inventory(doc, accepted).identity == inv.identity
    else:
        with pytest.raises(VerificationError) as caught:
            tree_inventory(doc, accepted)
        assert caught.value.code == "BAD_PREDICATE_TYPE"


@pytest.mark.parametrize(("subjects", "code"), [({"name": "tree"}, "BAD_STATEMENT"), ("tree", "BAD_STATEMENT"), ([], "NO_SUBJECT")])
def test_tree_inventory_of_a_document_no_one_verified_refuses_a_subject_that_is_no_list(subjects: object, code: str) -> None:
    """Pure: a ``subject`` that is not a list (never in a verified statement) is refused with a code, not a TypeError."""
    with pytest.raises(VerificationError) as caught:
        tree_inventory({"predicateType": CLOSED_TREE_PREDICATE, "subject": subjects})
    assert caught.value.code == code
