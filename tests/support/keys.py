"""Helpers shared by the attestation tests ."""


from __future__ import annotations

import base64
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from attest._json import canonical_bytes
from attest.attestation import Signer, generate_key, load_signer, pae

VECTORS = Path(__file__).resolve().parent.parent / "data" / "sigstore"
BEACON = "https://github.com/sigstore-conformance/extremely-dangerous-public-oidc-beacon/.github/workflows/extremely-dangerous-oidc-beacon.yml@refs/heads/main"
GHA_ISSUER = "https://token.actions.githubusercontent.com"


class Keys:
    """Key files generated in the session: name -> (private path, public path, signer)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.paths: dict[str, tuple[Path, Path]] = {}
        self.signers: dict[str, Signer] = {}
        for name, kind in (("ed", "ed25519"), ("ec", "ecdsa-p256"), ("ed2", "ed25519"), ("ec2", "ecdsa-p256"), ("evil", "ed25519")):
            priv = root / f"{name}.pem"
            generate_key(kind, priv)
            self.paths[name] = (priv, root / f"{name}.pub.pem")
            self.signers[name] = load_signer(str(priv))

    def pub(self, name: str) -> Path:
        return self.paths[name][1]

    def priv(self, name: str) -> Path:
        return self.paths[name][0]



def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def raw_envelope(payload: bytes, signers: Sequence[Signer], *, payload_type: str = "application/vnd.in-toto+json",
                 sign_over: Callable[[bytes], bytes] | None = None) -> dict[str, Any]:
    """A DSSE envelope built by hand, so tests can sign payloads our builder would refuse."""
    message = sign_over(payload) if sign_over else pae(payload_type, payload)
    return {
        "payload": b64(payload),
        "payloadType": payload_type,
        "signatures": [{"keyid": s.key_id, "sig": b64(s.sign(message))} for s in signers],
    }


def dumps(doc: Any) -> bytes:
    return canonical_bytes(doc)


def as_json(data: bytes) -> Any:
    return json.loads(data)
