"""The trust policy: which signers a deployment trusts, and how many must agree.

Read only from a path the caller names (never discovered in a tree or the current
directory). Strict TOML: duplicate keys and redefined tables are errors (tomllib), unknown
keys are errors, an empty policy or a threshold above the number of distinct signers is an
error. Paths inside the policy are relative to the policy file.

    threshold = 1
    [[signers]]
    kind = "key"
    public_key = "keys/release.pub.pem"
    trusted_root = "trusted_root.json"               # optional: checks the log entries and timestamps of its bundles
    [[signers]]
    kind = "sigstore"
    identity = "https://github.com/org/repo/.github/workflows/release.yml@refs/heads/main"
    issuer = "https://token.actions.githubusercontent.com"
    trusted_root = "trusted_root.json"
    predicates = ["https://attest.dev/runtime/v1"]   # optional: the statement types it may sign

    >>> policy = load_policy("/etc/attest/policy.toml")
    >>> parse_policy(b'threshold = 1\n[[signers]]\nkind = "key"\npublic_key = "k.pem"\n', "p.toml").signers
    (KeySignerRef(public_key='k.pem'),)

:func:`parse_policy` is the pure part (the document's rules, no file read);
:func:`load_policy` reads the file and every key and root it names around it.

The policy's digest (``Policy.digest``, named by verification summaries and promotions) covers
the TOML bytes **and** every file they name: :func:`policy_digest` is the SHA-256 of the RFC
8785 JSON ``{"policy": hex, "keys": {path: hex}, "trusted_roots": {path: hex}}`` (each hex a
SHA-256 of the file's bytes, each path as written in the TOML), so replacing a key file behind
an unchanged policy changes the digest.
"""

from __future__ import annotations

import hashlib
import os
import tomllib
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from .._digest import sha256_of
from .._fs import read_bounded
from .._json import canonical_bytes, loads_strict
from ..errors import CommonCode, InputError
from ._codes import AttestationCode
from ._keys import MAX_KEY_BYTES, PublicKey, key_id, load_public_key_pem

MAX_POLICY_BYTES = 1024 * 1024
MAX_TRUSTED_ROOT_BYTES = 4 * 1024 * 1024
MAX_SIGNERS = 64
_TOP_KEYS = {"threshold", "signers"}
_KEY_FIELDS = {"kind", "public_key"}
_SIGSTORE_FIELDS = {"kind", "identity", "issuer", "trusted_root"}
_OPTIONAL_FIELDS = {"predicates"}
_KEY_OPTIONAL_FIELDS = {"trusted_root"}  # checks a key-signed bundle's log entries and timestamps
MAX_PREDICATES = 64
_TRUSTED_ROOT_MEDIA_TYPES = ("application/vnd.dev.sigstore.trustedroot+json;version=0.1",
                             "application/vnd.dev.sigstore.trustedroot.v0.2+json")


@dataclass(frozen=True, slots=True, eq=False)
class KeySignerSpec:
    """A trusted public key (ed25519 or P-256)."""

    public_key: PublicKey
    source: str
    predicates: tuple[str, ...] = ()  # the statement types it may sign; empty: any
    # A Sigstore trusted root against which the transparency-log entries and RFC 3161
    # timestamps of this key's bundles are checked; None: such a bundle is refused.
    trusted_root: bytes | None = field(default=None, repr=False)
    trusted_root_source: str | None = None

    @property
    def id(self) -> str:
        return "key:sha256:" + key_id(self.public_key)

    def may_sign(self, predicate_type: str | None) -> bool:
        """Whether a signature of this signer counts for a statement of ``predicate_type`` (None: not a statement)."""
        return not self.predicates or predicate_type in self.predicates


@dataclass(frozen=True, slots=True)
class SigstoreSignerSpec:
    """A trusted Sigstore identity: exact SAN, exact OIDC issuer, and a pinned trusted root."""

    identity: str
    issuer: str
    trusted_root: bytes = field(repr=False)
    source: str
    predicates: tuple[str, ...] = ()  # the statement types it may sign; empty: any

    @property
    def id(self) -> str:
        return f"sigstore:{self.issuer}:{self.identity}"

    def may_sign(self, predicate_type: str | None) -> bool:
        """Whether a signature of this signer counts for a statement of ``predicate_type`` (None: not a statement)."""
        return not self.predicates or predicate_type in self.predicates


SignerSpec = KeySignerSpec | SigstoreSignerSpec


@dataclass(frozen=True, slots=True, eq=False)
class Policy:
    threshold: int
    signers: tuple[SignerSpec, ...]
    path: str
    # Every file the policy was built from, resolved: a verifier refuses them inside a tree under review.
    sources: tuple[str, ...]
    digest: str = ""  # sha256:<hex> of the policy and every file it names (:func:`policy_digest`), named by verification summaries
    # Top-level tables a caller allowed (``load_policy(..., extensions=...)``), as parsed; the caller validates them.
    extensions: dict[str, object] = field(default_factory=dict)
    # What ``digest`` is the SHA-256 of (the RFC 8785 bytes of this document; :func:`policy_digest`).
    digest_covers: dict[str, object] = field(default_factory=dict)

    @property
    def signer_ids(self) -> tuple[str, ...]:
        return tuple(s.id for s in self.signers)

    def signer(self, signer_id: str) -> SignerSpec:
        """The signer of ``signer_id`` (an id this policy produced)."""
        return next(s for s in self.signers if s.id == signer_id)


def _bad(code: AttestationCode | CommonCode, detail: str, path: str) -> InputError:
    return InputError(code, detail, path)


def _string(table: Mapping[str, object], key: str, where: str, path: str) -> str:
    value = table.get(key)
    if not isinstance(value, str) or not value.strip() or value != value.strip():
        raise _bad(AttestationCode.BAD_POLICY, f"{where}.{key} must be a non-empty string without surrounding spaces", path)
    if "\0" in value:  # no file has such a name (open() raises ValueError) and no identity or issuer such a string
        raise _bad(AttestationCode.BAD_POLICY, f"{where}.{key} holds a NUL character", path)
    return value


def _resolve(base: Path, value: str) -> Path:
    return (base / value) if not os.path.isabs(value) else Path(value)


@dataclass(frozen=True, slots=True)
class KeySignerRef:
    """A ``kind = "key"`` entry as written: the public key's path (and optional trusted root's), not yet read."""

    public_key: str
    predicates: tuple[str, ...] = ()
    trusted_root: str | None = None


@dataclass(frozen=True, slots=True)
class SigstoreSignerRef:
    """A ``kind = "sigstore"`` entry as written: the trusted root's path, not yet read."""

    identity: str
    issuer: str
    trusted_root: str
    predicates: tuple[str, ...] = ()


SignerRef = KeySignerRef | SigstoreSignerRef


@dataclass(frozen=True, slots=True)
class ParsedPolicy:
    """A policy document that is well-formed: the result of :func:`parse_policy`.

    The files it names are not read yet (paths are as written, relative to the policy file);
    :func:`load_policy` reads them and checks that no signer is listed twice.
    """

    threshold: int
    signers: tuple[SignerRef, ...]
    # (name, parsed value) of each allowed extension table present (``parse_policy(..., extensions=...)``).
    extensions: tuple[tuple[str, object], ...] = ()


#: Every predicate type attest writes or verifies (each layer's ``*_PREDICATE``; a test keeps this list whole). A
#: signer's ``predicates`` naming another type under these namespaces is a typo that would only show up
#: later, as ``SIGNER_NOT_FOR_PREDICATE``: it is refused when the policy is read.
KNOWN_PREDICATES = (
    "https://attest.dev/closed-tree/v1", "https://attest.dev/runtime/v1", "https://attest.dev/installation/v1",
    "https://attest.dev/review-handoff/v1", "https://attest.dev/review-record/v1", "https://attest.dev/ci-result/v1",
    "https://attest.dev/rebuild/v1", "https://attest.dev/rebuild-disagreement/v1", "https://attest.dev/promotion/v1",
    "https://slsa.dev/provenance/v1", "https://slsa.dev/verification_summary/v1",
)
_KNOWN_NAMESPACES = ("https://attest.dev/", "https://slsa.dev/")


def _predicates(raw: Mapping[str, object], at: str, where: str) -> tuple[str, ...]:
    """The optional ``predicates`` of a signer: a non-empty list of distinct predicate-type URIs, none a typo of a known one."""
    if "predicates" not in raw:
        return ()
    value = raw["predicates"]
    if (not isinstance(value, list) or not value or len(value) > MAX_PREDICATES
            or not all(isinstance(p, str) and p.strip() == p and "://" in p for p in value) or len(set(value)) != len(value)):
        raise _bad(AttestationCode.BAD_POLICY, f"{at}.predicates must be a non-empty list of distinct predicate-type URIs "
                   f"(at most {MAX_PREDICATES})", where)
    unknown = [p for p in value if p.startswith(_KNOWN_NAMESPACES) and p not in KNOWN_PREDICATES]
    if unknown:
        raise _bad(AttestationCode.BAD_POLICY, f"{at}.predicates names {', '.join(repr(p) for p in unknown)}, which is no "
                   f"predicate type attest knows (a typo?); the types are: {', '.join(KNOWN_PREDICATES)}", where)
    return tuple(value)


def parse_policy(data: bytes, where: str, *, extensions: Collection[str] = ()) -> ParsedPolicy:
    """Validate the bytes of a policy file; pure (no file is read, ``where`` only names it in errors).

    ``extensions`` names top-level keys another layer defines (the release policy's
    ``rebuilders``): they are returned as parsed, unvalidated, in ``ParsedPolicy.extensions``.

    Raises:
        InputError: ``DUPLICATE_KEY`` for a key or table given twice; ``POLICY_UNKNOWN_KEY``
            for a key the format does not define (top level or in a signer);
            ``POLICY_EMPTY`` when no signer is listed; ``POLICY_THRESHOLD`` for a missing,
            non-integer or non-positive threshold or one above the number of signers;
            ``BAD_POLICY`` for anything else malformed (not UTF-8 or TOML, ``signers`` not
            an array of tables, too many signers, an unknown ``kind``, a missing field, a
            field that is not a non-empty string without surrounding spaces or that holds a NUL, ``predicates``
            that is not a non-empty list of distinct URIs).
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise _bad(AttestationCode.BAD_POLICY, f"the policy is not UTF-8: {e.reason}", where) from e
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        msg = str(e)
        dup = "overwrite" in msg or "twice" in msg or "mutate" in msg
        raise _bad(CommonCode.DUPLICATE_KEY if dup else AttestationCode.BAD_POLICY, f"the policy is not valid TOML: {msg}", where) from e
    except (ValueError, RecursionError) as e:  # tomllib's own: an integer of more than 4300 digits, deep nesting
        raise _bad(AttestationCode.BAD_POLICY, f"the policy is not valid TOML: {str(e)[:200] or type(e).__name__}", where) from e
    unknown = set(doc) - _TOP_KEYS - set(extensions)
    if unknown:
        raise _bad(AttestationCode.POLICY_UNKNOWN_KEY, f"unknown top-level keys {sorted(unknown)}", where)
    raw_signers = doc.get("signers", [])
    if not isinstance(raw_signers, list) or not all(isinstance(s, dict) for s in raw_signers):
        raise _bad(AttestationCode.BAD_POLICY, "signers must be an array of tables ([[signers]])", where)
    if not raw_signers:
        raise _bad(AttestationCode.POLICY_EMPTY, "the policy trusts no signer", where)
    if len(raw_signers) > MAX_SIGNERS:
        raise _bad(AttestationCode.BAD_POLICY, f"{len(raw_signers)} signers; the limit is {MAX_SIGNERS}", where)
    if "threshold" not in doc:
        raise _bad(AttestationCode.POLICY_THRESHOLD, "threshold is required (the number of distinct signers that must agree)", where)
    threshold = doc["threshold"]
    if type(threshold) is not int or threshold < 1:
        raise _bad(AttestationCode.POLICY_THRESHOLD, f"threshold {threshold!r} is not a positive integer", where)
    signers: list[SignerRef] = []
    for i, raw in enumerate(raw_signers):
        at = f"signers[{i}]"
        kind = raw.get("kind")
        allowed = _KEY_FIELDS if kind == "key" else _SIGSTORE_FIELDS if kind == "sigstore" else None
        if allowed is None:
            raise _bad(AttestationCode.BAD_POLICY, f"{at}.kind {kind!r} is not 'key' or 'sigstore'", where)
        unknown = set(raw) - allowed - _OPTIONAL_FIELDS - (_KEY_OPTIONAL_FIELDS if kind == "key" else set())
        if unknown:
            raise _bad(AttestationCode.POLICY_UNKNOWN_KEY, f"{at} has unknown keys {sorted(unknown)}", where)
        missing = allowed - set(raw)
        if missing:
            raise _bad(AttestationCode.BAD_POLICY, f"{at} is missing {sorted(missing)}", where)
        predicates = _predicates(raw, at, where)
        if kind == "key":
            root = _string(raw, "trusted_root", at, where) if "trusted_root" in raw else None
            signers.append(KeySignerRef(_string(raw, "public_key", at, where), predicates, root))
        else:
            signers.append(SigstoreSignerRef(_string(raw, "identity", at, where), _string(raw, "issuer", at, where),
                                              _string(raw, "trusted_root", at, where), predicates))
    # Duplicates count once (load_policy refuses them once the keys are read), so this bound is exact.
    if threshold > len(signers):
        raise _bad(AttestationCode.POLICY_THRESHOLD, f"threshold {threshold} exceeds the {len(signers)} distinct signers", where)
    return ParsedPolicy(threshold, tuple(signers), tuple((k, doc[k]) for k in sorted(set(extensions) & set(doc))))


def load_policy(path: str | os.PathLike[str], *, extensions: Collection[str] = ()) -> Policy:
    """Read and validate a policy file; every referenced key and root is read now, once.

    ``extensions``: see :func:`parse_policy`; ``Policy.extensions`` holds them, read from the same bytes.

    Raises:
        InputError: every code of :func:`parse_policy`; ``UNREADABLE`` / ``TOO_LARGE`` for the
            policy, a key or a trusted root that cannot be read as a bounded regular file;
            ``BAD_KEY`` for a public key that is not an ed25519 or P-256 PEM key;
            ``BAD_POLICY`` for a trusted root that is not strict JSON with a Sigstore
            trusted-root ``mediaType``; ``POLICY_DUPLICATE_SIGNER`` when two entries are the
            same signer (the same key under two paths or spellings counts once).
    """
    name = os.fspath(path)
    data = read_bounded(name, what="policy", max_bytes=MAX_POLICY_BYTES)
    parsed = parse_policy(data, name, extensions=extensions)
    base = Path(os.path.abspath(name)).parent
    sources = [os.path.realpath(name)]
    signers: list[SignerSpec] = []
    # Each file is read once, whatever the number of signers naming it: what a signer checks
    # against and what the digest covers are the same bytes.
    read: dict[str, bytes] = {}
    keys: dict[str, bytes] = {}
    roots: dict[str, bytes] = {}

    def once(written: str, what: str, limit: int, into: dict[str, bytes]) -> tuple[bytes, str]:
        file = _resolve(base, written)
        real = os.path.realpath(file)
        if real not in read:
            read[real] = read_bounded(file, what=what, max_bytes=limit)
            sources.append(real)
        if what == "trusted root":
            _check_trusted_root(read[real], str(file))
        into[written] = read[real]
        return read[real], str(file)

    for ref in parsed.signers:
        if isinstance(ref, KeySignerRef):
            pem, key_path = once(ref.public_key, "public key", MAX_KEY_BYTES, keys)
            root: bytes | None = None
            root_source = None
            if ref.trusted_root is not None:
                root, root_source = once(ref.trusted_root, "trusted root", MAX_TRUSTED_ROOT_BYTES, roots)
            signers.append(KeySignerSpec(load_public_key_pem(pem, key_path), key_path, ref.predicates, root, root_source))
        else:
            root, root_path = once(ref.trusted_root, "trusted root", MAX_TRUSTED_ROOT_BYTES, roots)
            signers.append(SigstoreSignerSpec(ref.identity, ref.issuer, root, root_path, ref.predicates))
    seen: dict[str, int] = {}
    for i, s in enumerate(signers):
        if s.id in seen:
            raise _bad(
                AttestationCode.POLICY_DUPLICATE_SIGNER,
                f"signers[{i}] is the same signer as signers[{seen[s.id]}] ({s.id}); each signer counts once",
                name,
            )
        seen[s.id] = i
    covers = policy_digest_covers(data, keys, roots)
    return Policy(parsed.threshold, tuple(signers), name, tuple(sources), sha256_of(canonical_bytes(covers)),
                  dict(parsed.extensions), covers)


def policy_digest(policy: bytes, keys: Mapping[str, bytes], trusted_roots: Mapping[str, bytes]) -> str:
    """``sha256:<hex>`` of the policy TOML bytes and of every file it names (pure).

    The construction: SHA-256 of the RFC 8785 bytes of ``{"policy": H(policy), "keys": {path:
    H(key file)}, "trusted_roots": {path: H(root file)}}``, with ``H`` the hex SHA-256 and each
    path exactly as the TOML writes it (so the digest does not depend on where the policy
    directory is mounted; the TOML bytes, covered too, bind the paths to their signers).

    Raises:
        Nothing.
    """
    return sha256_of(canonical_bytes(policy_digest_covers(policy, keys, trusted_roots)))


POLICY_DIGEST_V1 = "https://attest.dev/policy-digest/v1"


def policy_digest_covers(policy: bytes, keys: Mapping[str, bytes], trusted_roots: Mapping[str, bytes]) -> dict[str, object]:
    """The document whose RFC 8785 bytes :func:`policy_digest` hashes (pure).

    Raises:
        Nothing.
    """
    def h(data: bytes) -> str:
        return hashlib.sha256(data).hexdigest()

    return {"policy": h(policy), "keys": {k: h(v) for k, v in sorted(keys.items())},
            "trusted_roots": {k: h(v) for k, v in sorted(trusted_roots.items())}}


def _check_trusted_root(data: bytes, where: str) -> None:
    """Cheap strict checks now; sigstore parses the root fully, and only when a certificate bundle needs it."""
    try:
        doc = loads_strict(data, what="trusted root")
    except InputError as e:
        raise InputError(AttestationCode.BAD_POLICY, "the trusted root is not strict JSON", where, findings=e.findings) from e
    if not isinstance(doc, dict) or doc.get("mediaType") not in _TRUSTED_ROOT_MEDIA_TYPES:
        raise InputError(AttestationCode.BAD_POLICY, "the trusted root has no known Sigstore trusted-root mediaType", where)
