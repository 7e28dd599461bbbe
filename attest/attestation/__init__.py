"""Attestation layer: in-toto Statement v1, DSSE, Sigstore bundles, signers, trust policy.

Knows nothing of filesystems beyond what it is handed (the tree check is the inventory
layer's). The smallest real use:

    >>> from attest.attestation import closed_tree_statement, load_policy, load_signer, sign_statement
    >>> data = sign_statement(closed_tree_statement("tree", inv), load_signer("release.pem"), fmt="bundle")
    >>> both = add_signatures(sign_statement(stmt, load_signer("a.pem")), load_signer("b.pem"))
    >>> verified = verify_attestation_bytes(data, load_policy("/etc/attest/policy.toml"))
    >>> closed_tree_inventory(verified).identity
"""

from __future__ import annotations

from ._codes import AttestationCode
from ._dsse import INTOTO_PAYLOAD_TYPE, Envelope, EnvelopeSignature, pae
from ._keys import (
    KEY_KINDS,
    PASSPHRASE_ENV,
    PemSigner,
    Signer,
    SslibSigner,
    generate_key,
    key_id,
    load_signer,
    public_key_path,
    signer_key_file,
    verify_signature,
)
from ._policy import (
    POLICY_DIGEST_V1,
    KeySignerRef,
    KeySignerSpec,
    ParsedPolicy,
    Policy,
    SigstoreSignerRef,
    SigstoreSignerSpec,
    load_policy,
    parse_policy,
    policy_digest,
)
from ._sign import BUNDLE_MEDIA_TYPE, FORMATS, KeylessSigner, add_signatures, sign_statement, signing_keys, statement_payload
from ._slsa import ResourceRef, git_dependency, slsa_provenance, verification_summary
from ._statement import (
    CLOSED_TREE_PREDICATE,
    INSTALLATION_PREDICATE,
    INVENTORY_PREDICATES,
    PREDICATE_NAMESPACE,
    RUNTIME_PREDICATE,
    SLSA_PROVENANCE_V1,
    STATEMENT_TYPE,
    VSA_V1,
    StatementDoc,
    SubjectDoc,
    closed_tree_statement,
    parse_statement,
    statement,
    subject,
    tree_inventory,
)
from ._tree import TreeVerification, check_policy_outside, verify_tree_attestation
from ._verify import (
    MAX_ATTESTATION_BYTES,
    VerifiedStatement,
    closed_tree_inventory,
    verify_artifact_bundle,
    verify_attestation_bytes,
    verify_attestation_file,
)

__all__ = [
    "BUNDLE_MEDIA_TYPE",
    "CLOSED_TREE_PREDICATE",
    "FORMATS",
    "INSTALLATION_PREDICATE",
    "INTOTO_PAYLOAD_TYPE",
    "INVENTORY_PREDICATES",
    "KEY_KINDS",
    "MAX_ATTESTATION_BYTES",
    "PASSPHRASE_ENV",
    "POLICY_DIGEST_V1",
    "PREDICATE_NAMESPACE",
    "RUNTIME_PREDICATE",
    "SLSA_PROVENANCE_V1",
    "STATEMENT_TYPE",
    "VSA_V1",
    "AttestationCode",
    "Envelope",
    "EnvelopeSignature",
    "KeySignerRef",
    "KeySignerSpec",
    "KeylessSigner",
    "ParsedPolicy",
    "PemSigner",
    "Policy",
    "ResourceRef",
    "Signer",
    "SigstoreSignerRef",
    "SigstoreSignerSpec",
    "SslibSigner",
    "StatementDoc",
    "SubjectDoc",
    "TreeVerification",
    "VerifiedStatement",
    "add_signatures",
    "check_policy_outside",
    "closed_tree_inventory",
    "closed_tree_statement",
    "generate_key",
    "git_dependency",
    "key_id",
    "load_policy",
    "load_signer",
    "pae",
    "parse_policy",
    "parse_statement",
    "policy_digest",
    "public_key_path",
    "sign_statement",
    "signer_key_file",
    "signing_keys",
    "slsa_provenance",
    "statement",
    "statement_payload",
    "subject",
    "tree_inventory",
    "verification_summary",
    "verify_artifact_bundle",
    "verify_attestation_bytes",
    "verify_attestation_file",
    "verify_signature",
    "verify_tree_attestation",
]
