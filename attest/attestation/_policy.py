"""The trust policy: which signers a deployment trusts, and how many must agree.

Read only from a path the caller names (never discovered in a tree or the current
directory). Strict TOML: duplicate keys and redefined tables are errors (tomllib), unknown
keys are errors, an empty policy or a threshold above the number of distinct signers is an
error. Paths inside the policy are relative to the policy file.

    threshold = 1
    [[signers]]
    kind = "key"
    public_key = "keys/release.pub.pem"
    [[signers]]
    kind = "sigstore"
    identity = "https://github.com/org/repo/.github/workflows/release.yml@refs/heads/main"
    issuer = "https://token.actions.githubusercontent.com"
    trusted_root = "trusted_root.json"

    >>> policy = load_policy("/etc/attest/policy.toml")
"""

from __future__ import annotations

import hashlib
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._fs import read_bounded
from .._json import loads_strict
from ..errors import CommonCode, InputError
from ._codes import AttestationCode
from ._keys import MAX_KEY_BYTES, PublicKey, key_id, load_public_key_pem

MAX_POLICY_BYTES = 1024 * 1024
MAX_TRUSTED_ROOT_BYTES = 4 * 1024 * 1024
MAX_SIGNERS = 64
_TOP_KEYS = {"threshold", "signers"}
_KEY_FIELDS = {"kind", "public_key"}
_SIGSTORE_FIELDS = {"kind", "identity", "issuer", "trusted_root"}
_TRUSTED_ROOT_MEDIA_TYPES = ("application/vnd.dev.sigstore.trustedroot+json;version=0.1",
                             "application/vnd.dev.sigstore.trustedroot.v0.2+json")


@dataclass(frozen=True, slots=True, eq=False)
class KeySignerSpec:
    """A trusted public key (ed25519 or P-256)."""

    public_key: PublicKey
    source: str

    @property
    def id(self) -> str:
        return "key:sha256:" + key_id(self.public_key)


@dataclass(frozen=True, slots=True)
class SigstoreSignerSpec:
    """A trusted Sigstore identity: exact SAN, exact OIDC issuer, and a pinned trusted root."""

    identity: str
    issuer: str
    trusted_root: bytes = field(repr=False)
    source: str

    @property
    def id(self) -> str:
        return f"sigstore:{self.issuer}:{self.identity}"


SignerSpec = KeySignerSpec | SigstoreSignerSpec


@dataclass(frozen=True, slots=True, eq=False)
class Policy:
    threshold: int
    signers: tuple[SignerSpec, ...]
    path: str
    # Every file the policy was built from, resolved: a verifier refuses them inside a tree under review.
    sources: tuple[str, ...]
    digest: str = ""  # sha256:<hex> of the policy file bytes, named by verification summaries

    @property
    def signer_ids(self) -> tuple[str, ...]:
        return tuple(s.id for s in self.signers)


def _bad(code: AttestationCode | CommonCode, detail: str, path: str) -> InputError:
    return InputError(code, detail, path)


def _string(table: dict[str, Any], key: str, where: str, path: str) -> str:
    value = table.get(key)
    if not isinstance(value, str) or not value.strip() or value != value.strip():
        raise _bad(AttestationCode.BAD_POLICY, f"{where}.{key} must be a non-empty string without surrounding spaces", path)
    return value


def _resolve(base: Path, value: str) -> Path:
    return (base / value) if not os.path.isabs(value) else Path(value)


def load_policy(path: str | os.PathLike[str]) -> Policy:
    """Read and validate a policy file; every referenced key and root is read now, once."""
    name = os.fspath(path)
    data = read_bounded(name, what="policy", max_bytes=MAX_POLICY_BYTES)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise _bad(AttestationCode.BAD_POLICY, f"the policy is not UTF-8: {e.reason}", name) from e
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        msg = str(e)
        dup = "overwrite" in msg or "twice" in msg or "mutate" in msg
        raise _bad(CommonCode.DUPLICATE_KEY if dup else AttestationCode.BAD_POLICY, f"the policy is not valid TOML: {msg}", name) from e
    base = Path(os.path.abspath(name)).parent
    unknown = set(doc) - _TOP_KEYS
    if unknown:
        raise _bad(AttestationCode.POLICY_UNKNOWN_KEY, f"unknown top-level keys {sorted(unknown)}", name)
    raw_signers = doc.get("signers", [])
    if not isinstance(raw_signers, list) or not all(isinstance(s, dict) for s in raw_signers):
        raise _bad(AttestationCode.BAD_POLICY, "signers must be an array of tables ([[signers]])", name)
    if not raw_signers:
        raise _bad(AttestationCode.POLICY_EMPTY, "the policy trusts no signer", name)
    if len(raw_signers) > MAX_SIGNERS:
        raise _bad(AttestationCode.BAD_POLICY, f"{len(raw_signers)} signers; the limit is {MAX_SIGNERS}", name)
    if "threshold" not in doc:
        raise _bad(AttestationCode.POLICY_THRESHOLD, "threshold is required (the number of distinct signers that must agree)", name)
    threshold = doc["threshold"]
    if type(threshold) is not int or threshold < 1:
        raise _bad(AttestationCode.POLICY_THRESHOLD, f"threshold {threshold!r} is not a positive integer", name)
    sources = [os.path.realpath(name)]
    signers: list[SignerSpec] = []
    for i, raw in enumerate(raw_signers):
        where = f"signers[{i}]"
        kind = raw.get("kind")
        allowed = _KEY_FIELDS if kind == "key" else _SIGSTORE_FIELDS if kind == "sigstore" else None
        if allowed is None:
            raise _bad(AttestationCode.BAD_POLICY, f"{where}.kind {kind!r} is not 'key' or 'sigstore'", name)
        unknown = set(raw) - allowed
        if unknown:
            raise _bad(AttestationCode.POLICY_UNKNOWN_KEY, f"{where} has unknown keys {sorted(unknown)}", name)
        missing = allowed - set(raw)
        if missing:
            raise _bad(AttestationCode.BAD_POLICY, f"{where} is missing {sorted(missing)}", name)
        if kind == "key":
            key_path = _resolve(base, _string(raw, "public_key", where, name))
            pem = read_bounded(key_path, what="public key", max_bytes=MAX_KEY_BYTES)
            signers.append(KeySignerSpec(load_public_key_pem(pem, str(key_path)), str(key_path)))
            sources.append(os.path.realpath(key_path))
        else:
            identity = _string(raw, "identity", where, name)
            issuer = _string(raw, "issuer", where, name)
            root_path = _resolve(base, _string(raw, "trusted_root", where, name))
            root = read_bounded(root_path, what="trusted root", max_bytes=MAX_TRUSTED_ROOT_BYTES)
            _check_trusted_root(root, str(root_path))
            signers.append(SigstoreSignerSpec(identity, issuer, root, str(root_path)))
            sources.append(os.path.realpath(root_path))
    seen: dict[str, int] = {}
    for i, s in enumerate(signers):
        if s.id in seen:
            raise _bad(
                AttestationCode.POLICY_DUPLICATE_SIGNER,
                f"signers[{i}] is the same signer as signers[{seen[s.id]}] ({s.id}); each signer counts once",
                name,
            )
        seen[s.id] = i
    if threshold > len(signers):
        raise _bad(AttestationCode.POLICY_THRESHOLD, f"threshold {threshold} exceeds the {len(signers)} distinct signers", name)
    return Policy(threshold, tuple(signers), name, tuple(sources), "sha256:" + hashlib.sha256(data).hexdigest())


def _check_trusted_root(data: bytes, where: str) -> None:
    """Cheap strict checks now; sigstore parses the root fully, and only when a certificate bundle needs it."""
    try:
        doc = loads_strict(data, what="trusted root")
    except InputError as e:
        raise InputError(AttestationCode.BAD_POLICY, "the trusted root is not strict JSON", where, findings=e.findings) from e
    if not isinstance(doc, dict) or doc.get("mediaType") not in _TRUSTED_ROOT_MEDIA_TYPES:
        raise InputError(AttestationCode.BAD_POLICY, "the trusted root has no known Sigstore trusted-root mediaType", where)
