"""in-toto Statement v1: building, strict parsing, and the project's predicate types.

    >>> st = closed_tree_statement("skill", inventory)       # a plain dict
    >>> payload = canonical_bytes(st)                          # what gets signed (RFC 8785)

Parsing always starts from the exact signed payload bytes (:func:`parse_statement`).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping
from typing import NotRequired, TypedDict, cast

from .._json import loads_strict
from ..errors import InputError, VerificationError
from ..inventory import Inventory
from ._codes import AttestationCode

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_NAMESPACE = "https://attest.dev/"
CLOSED_TREE_PREDICATE = "https://attest.dev/closed-tree/v1"
RUNTIME_PREDICATE = "https://attest.dev/runtime/v1"
INSTALLATION_PREDICATE = "https://attest.dev/installation/v1"
SLSA_PROVENANCE_V1 = "https://slsa.dev/provenance/v1"
VSA_V1 = "https://slsa.dev/verification_summary/v1"
#: The predicates whose ``inventory`` is the closed inventory of their single subject (a tree):
#: what `attest verify` checks a tree against.
INVENTORY_PREDICATES = (CLOSED_TREE_PREDICATE, RUNTIME_PREDICATE, INSTALLATION_PREDICATE)

MAX_SUBJECTS = 1024
MAX_PAYLOAD_BYTES = 512 * 1024 * 1024
MAX_PAYLOAD_DEPTH = 64
_HEX64 = re.compile(r"[0-9a-f]{64}\Z")
_HEX = re.compile(r"(?:[0-9a-f]{2}){1,128}\Z")  # whole bytes only
# in-toto DigestSet names: lowercase algorithms (sha256, sha3_256, ...) and the camelCase
# git and directory names the spec lists (gitCommit, gitTree, gitBlob, gitTag, dirHash).
_DIGEST_ALG = re.compile(r"[a-z][a-zA-Z0-9_-]{0,31}\Z")
# in-toto ResourceDescriptor fields; anything else in a subject is an unknown field.
_SUBJECT_FIELDS = {"name", "uri", "digest", "content", "downloadLocation", "mediaType", "annotations"}
_STATEMENT_FIELDS = {"_type", "subject", "predicateType", "predicate"}

class SubjectDoc(TypedDict):
    """One in-toto ResourceDescriptor :func:`verify_statement` checked: a DigestSet carrying sha256, a string name
    when present; the other descriptor fields are kept as they were signed, unread by attest."""

    digest: dict[str, str]
    name: NotRequired[str]
    uri: NotRequired[object]
    content: NotRequired[object]
    downloadLocation: NotRequired[object]
    mediaType: NotRequired[object]
    annotations: NotRequired[object]


class StatementDoc(TypedDict):
    """A statement :func:`verify_statement` checked: exactly the in-toto fields, ``subject`` a non-empty list of
    descriptors, ``predicateType`` a URI, ``predicate`` (when present) an object, whose fields each layer reads
    from it (narrowed by its own parser) for its own predicate."""

    _type: str
    subject: list[SubjectDoc]
    predicateType: str
    predicate: NotRequired[dict[str, object]]


def _fail(code: AttestationCode, detail: str, path: str | None = None) -> VerificationError:
    return VerificationError(code, detail, path)


def check_digest_set(digest: object, where: str, *, require_sha256: bool = True) -> dict[str, str]:
    """A DigestSet that carries SHA-256 (64 lowercase hex); other algorithms must be hex too.

    ``require_sha256=False`` only for what is described rather than verified (a provenance's
    resolved dependencies: a git dependency is named by ``gitCommit`` alone); a sha256 that is
    present is still checked.
    """
    if not isinstance(digest, dict) or not digest:
        raise _fail(AttestationCode.BAD_DIGEST, f"{where}: digest must be a non-empty object")
    for alg, value in digest.items():
        if not _DIGEST_ALG.match(alg) or not isinstance(value, str) or not _HEX.match(value):
            raise _fail(AttestationCode.BAD_DIGEST, f"{where}: digest {alg[:40]!r} is not a lowercase hex string")
    sha = digest.get("sha256")
    if sha is None and not require_sha256:
        return dict(digest)
    if sha is None:
        raise _fail(AttestationCode.BAD_DIGEST, f"{where}: the digest has no sha256 (other algorithms alone are not accepted)")
    if not _HEX64.match(sha):
        raise _fail(AttestationCode.BAD_DIGEST, f"{where}: sha256 is not 64 lowercase hex digits")
    return dict(digest)


def subject(name: str, sha256_hex: str) -> dict[str, object]:
    """One ResourceDescriptor naming an artifact by SHA-256.

    Raises:
        InputError: ``BAD_STATEMENT`` for an empty name; ``BAD_DIGEST`` unless ``sha256_hex``
            is 64 lowercase hex digits.
    """
    if not isinstance(name, str) or not name:
        raise InputError(AttestationCode.BAD_STATEMENT, "a subject needs a non-empty name")
    if not _HEX64.match(sha256_hex):
        raise InputError(AttestationCode.BAD_DIGEST, f"subject {name!r}: sha256 is not 64 lowercase hex digits")
    return {"name": name, "digest": {"sha256": sha256_hex}}


def statement(subjects: Iterable[Mapping[str, object]], predicate_type: str, predicate: Mapping[str, object]) -> StatementDoc:
    """A generic in-toto Statement v1 (a plain dict), checked like a parsed one.

    Raises:
        InputError: the statement checks' codes (``BAD_STATEMENT``, ``BAD_PREDICATE_TYPE``,
            ``BAD_PREDICATE``, ``NO_SUBJECT``, ``EXTRA_SUBJECT``, ``BAD_DIGEST``): building a
            bad statement is the caller's input error.
    """
    doc = {
        "_type": STATEMENT_TYPE,
        "subject": [dict(s) for s in subjects],
        "predicateType": predicate_type,
        "predicate": dict(predicate),
    }
    try:
        return verify_statement(doc)
    except VerificationError as e:  # building a bad statement is the caller's input error
        raise InputError(findings=e.findings) from e


def closed_tree_predicate(inventory: Inventory) -> dict[str, object]:
    return {"inventory": inventory.to_json()}


def closed_tree_statement(name: str, inventory: Inventory) -> StatementDoc:
    """The statement `attest attest` signs: one subject (the tree), its full closed inventory.

    Raises:
        InputError: ``BAD_STATEMENT`` for an empty ``name``.
    """
    return statement([subject(name, inventory.digest_hex)], CLOSED_TREE_PREDICATE, closed_tree_predicate(inventory))


def verify_statement(doc: object) -> StatementDoc:
    """Validate a parsed statement object (exact fields, type, subjects, digests)."""
    if not isinstance(doc, dict):
        raise _fail(AttestationCode.BAD_STATEMENT, "the statement is not a JSON object")
    if "_type" not in doc or doc["_type"] != STATEMENT_TYPE:
        raise _fail(AttestationCode.BAD_STATEMENT_TYPE, f"_type {str(doc.get('_type'))[:100]!r} is not {STATEMENT_TYPE!r}")
    missing = {"subject", "predicateType"} - set(doc)
    extra = set(doc) - _STATEMENT_FIELDS
    if missing or extra:
        raise _fail(AttestationCode.BAD_STATEMENT, f"statement fields: missing {sorted(missing)}, unknown {sorted(extra)}")
    ptype = doc["predicateType"]
    if not isinstance(ptype, str) or not re.match(r"[a-z][a-z0-9+.-]*:\S+\Z", ptype) or len(ptype) > 1024:
        raise _fail(AttestationCode.BAD_PREDICATE_TYPE, f"predicateType {str(ptype)[:100]!r} is not a URI")
    if "predicate" in doc and not isinstance(doc["predicate"], dict):
        raise _fail(AttestationCode.BAD_PREDICATE, "the predicate is not a JSON object")
    subjects = doc["subject"]
    if not isinstance(subjects, list):
        raise _fail(AttestationCode.BAD_STATEMENT, "subject is not a list")
    if not subjects:
        raise _fail(AttestationCode.NO_SUBJECT, "the statement names no subject")
    if len(subjects) > MAX_SUBJECTS:
        raise _fail(AttestationCode.EXTRA_SUBJECT, f"the statement names {len(subjects)} subjects; the limit is {MAX_SUBJECTS}")
    for i, s in enumerate(subjects):
        where = f"subject[{i}]"
        if not isinstance(s, dict):
            raise _fail(AttestationCode.BAD_STATEMENT, f"{where} is not an object")
        unknown = set(s) - _SUBJECT_FIELDS
        if unknown:
            raise _fail(AttestationCode.BAD_STATEMENT, f"{where} has unknown fields {sorted(unknown)}")
        if "name" in s and not isinstance(s["name"], str):
            raise _fail(AttestationCode.BAD_STATEMENT, f"{where}.name is not a string")
        check_digest_set(s.get("digest"), where)
    return cast(StatementDoc, doc)  # every field of the type checked above; the signed object itself, not a copy


def parse_statement(payload: bytes) -> StatementDoc:
    """Parse a statement from the exact signed payload bytes (strict JSON, capped).

    Raises:
        VerificationError: the strict-JSON codes (``BAD_JSON``, ``DUPLICATE_KEY``,
            ``TOO_LARGE``, ``TOO_DEEP``) and the statement checks' codes (``BAD_STATEMENT``,
            ``BAD_STATEMENT_TYPE``, ``BAD_PREDICATE_TYPE``, ``BAD_PREDICATE``, ``NO_SUBJECT``,
            ``EXTRA_SUBJECT``, ``BAD_DIGEST``): a signed but malformed payload does not verify.
    """
    try:
        doc = loads_strict(payload, what="statement payload", max_bytes=MAX_PAYLOAD_BYTES, max_depth=MAX_PAYLOAD_DEPTH)
    except InputError as e:  # a signed but malformed payload is a verification failure
        raise VerificationError(findings=e.findings) from e
    return verify_statement(doc)


def tree_inventory(doc: Mapping[str, object], predicate_type: str | Collection[str] = CLOSED_TREE_PREDICATE) -> Inventory:
    """The inventory a tree statement carries, checked against its single subject (pure).

    Requires ``predicate_type`` (or one of several, e.g. :data:`INVENTORY_PREDICATES`),
    exactly one subject whose digest is exactly
    ``{"sha256": ...}``, a predicate holding ``inventory`` (for the closed-tree predicate,
    nothing else), and the inventory's identity equal to the subject digest.

    Raises:
        VerificationError: ``BAD_PREDICATE_TYPE``, ``NO_SUBJECT`` / ``EXTRA_SUBJECT`` (not
            exactly one), ``BAD_DIGEST``, ``BAD_PREDICATE`` (no or a malformed inventory, with
            the inventory's findings), ``SUBJECT_MISMATCH`` (the digest is not its identity);
            ``BAD_STATEMENT`` when ``subject`` is not a list (only in a document :func:`verify_statement` did not check).
    """
    accepted = (predicate_type,) if isinstance(predicate_type, str) else tuple(predicate_type)
    if doc.get("predicateType") not in accepted:
        wanted = repr(accepted[0]) if len(accepted) == 1 else "one of " + ", ".join(accepted)
        raise _fail(AttestationCode.BAD_PREDICATE_TYPE, f"predicateType {str(doc.get('predicateType'))[:100]!r} is not {wanted}")
    subjects = doc.get("subject") or []
    if not isinstance(subjects, list):  # as verify_statement refuses it: never in a verified statement
        raise _fail(AttestationCode.BAD_STATEMENT, "subject is not a list")
    if len(subjects) != 1:
        raise _fail(AttestationCode.EXTRA_SUBJECT if subjects else AttestationCode.NO_SUBJECT,
                    f"a tree statement names exactly one subject; this one names {len(subjects)}")
    digest = subjects[0].get("digest")
    if not isinstance(digest, dict) or set(digest) != {"sha256"}:
        raise _fail(AttestationCode.BAD_DIGEST, "a tree subject's digest is exactly {'sha256': <inventory identity>}")
    check_digest_set(digest, "subject[0]")
    predicate = doc.get("predicate")
    if not isinstance(predicate, dict) or "inventory" not in predicate:
        raise _fail(AttestationCode.BAD_PREDICATE, "the predicate carries no inventory")
    if doc.get("predicateType") == CLOSED_TREE_PREDICATE and set(predicate) != {"inventory"}:
        raise _fail(AttestationCode.BAD_PREDICATE, f"closed-tree predicate fields {sorted(predicate)} are not exactly ['inventory']")
    try:
        inventory = Inventory.from_json(predicate["inventory"])
    except InputError as e:
        raise VerificationError(AttestationCode.BAD_PREDICATE, "the predicate's inventory is malformed", findings=e.findings) from e
    if inventory.digest_hex != digest["sha256"]:
        raise _fail(
            AttestationCode.SUBJECT_MISMATCH,
            f"the subject digest sha256:{digest['sha256']} is not the identity of the inventory it carries ({inventory.identity})",
        )
    return inventory
