"""Reason codes of the attestation layer (stable wire strings; see docs/attestation.md)."""

from __future__ import annotations

from ..errors import ReasonCode


class AttestationCode(ReasonCode):
    # Envelopes and bundles, read strictly (docs/attestation.md "Formats").
    UNKNOWN_FORMAT = "UNKNOWN_FORMAT"
    BAD_ENVELOPE = "BAD_ENVELOPE"
    BAD_BASE64 = "BAD_BASE64"
    BAD_PAYLOAD_TYPE = "BAD_PAYLOAD_TYPE"
    NO_SIGNATURES = "NO_SIGNATURES"
    TOO_MANY_SIGNATURES = "TOO_MANY_SIGNATURES"
    BAD_BUNDLE = "BAD_BUNDLE"
    BAD_MEDIA_TYPE = "BAD_MEDIA_TYPE"
    UNSUPPORTED_BUNDLE = "UNSUPPORTED_BUNDLE"
    # A key-signed bundle's transparency-log entries and signed timestamps.
    TRUSTED_ROOT_REQUIRED = "TRUSTED_ROOT_REQUIRED"  # log entries or timestamps, and the key's signer pins no trusted_root
    TLOG_ENTRY_INVALID = "TLOG_ENTRY_INVALID"  # inclusion proof, checkpoint or SET does not verify against the root's logs
    TLOG_ENTRY_MISMATCH = "TLOG_ENTRY_MISMATCH"  # the entry's body is not this signature, key and artifact/payload
    TIMESTAMP_INVALID = "TIMESTAMP_INVALID"  # an RFC 3161 timestamp does not verify against the root's TSAs
    # Statements and predicates.
    BAD_STATEMENT = "BAD_STATEMENT"
    BAD_STATEMENT_TYPE = "BAD_STATEMENT_TYPE"
    BAD_PREDICATE_TYPE = "BAD_PREDICATE_TYPE"
    BAD_PREDICATE = "BAD_PREDICATE"
    NO_SUBJECT = "NO_SUBJECT"
    EXTRA_SUBJECT = "EXTRA_SUBJECT"
    BAD_DIGEST = "BAD_DIGEST"
    SUBJECT_MISMATCH = "SUBJECT_MISMATCH"
    # Signatures and trust: what counts as a trusted signer (docs/attestation.md "Trust policy").
    NO_TRUSTED_SIGNATURE = "NO_TRUSTED_SIGNATURE"
    THRESHOLD_NOT_MET = "THRESHOLD_NOT_MET"
    SIGNER_NOT_FOR_PREDICATE = "SIGNER_NOT_FOR_PREDICATE"  # a valid signature by a signer the policy does not let sign this statement type
    ATTESTATION_DIGEST_MISMATCH = "ATTESTATION_DIGEST_MISMATCH"
    # The trust policy file itself, read only from outside the tree (docs/attestation.md "Trust policy").
    BAD_POLICY = "BAD_POLICY"
    POLICY_UNKNOWN_KEY = "POLICY_UNKNOWN_KEY"
    POLICY_EMPTY = "POLICY_EMPTY"
    POLICY_THRESHOLD = "POLICY_THRESHOLD"
    POLICY_DUPLICATE_SIGNER = "POLICY_DUPLICATE_SIGNER"
    POLICY_IN_TREE = "POLICY_IN_TREE"
    # Keys and signing.
    BAD_KEY = "BAD_KEY"
    KEY_PASSPHRASE_REQUIRED = "KEY_PASSPHRASE_REQUIRED"  # an encrypted private key, no ATTEST_KEY_PASSPHRASE, no terminal
    BAD_PASSPHRASE = "BAD_PASSPHRASE"  # the passphrase does not decrypt the private key
    KEY_EXISTS = "KEY_EXISTS"
    SIGNING_FAILED = "SIGNING_FAILED"
