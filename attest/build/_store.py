"""The input-addressed store: naming, normalizing, publishing and reusing build outputs.

A build's inputs (every digest that can change its bytes) are hashed into its name,
``<32 hex>-<recipe name>``. Next to the tree the store keeps ``<name>.build.json``: the
inputs, the closed inventory identity and how the build ran (network isolation, the
immutability that was established).

Order (DESIGN.md "The one invariant"): the output is produced in private staging, its
modes and mtimes are normalized, it is renamed into the store, made immutable, and only
then verified against the inventory computed in staging; a mismatch removes it.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._fs import read_bounded, write_atomic
from .._json import canonical_bytes, loads_strict
from ..errors import Finding, VerificationError
from ..inventory import Inventory, inventory_tree, verify_tree
from ._codes import BuildCode

MANIFEST_FORMAT = "https://attest.dev/build-record/v1"


def input_digest(inputs: dict[str, Any]) -> str:
    return hashlib.sha256(canonical_bytes(inputs)).hexdigest()


def store_name(digest: str, name: str) -> str:
    return f"{digest[:32]}-{name}"


@dataclass(frozen=True, slots=True)
class BuildResult:
    kind: str
    store_path: str
    inputs: dict[str, Any] = field(hash=False)
    inputs_digest: str
    inventory: Inventory = field(hash=False)
    reused: bool
    network_isolated: bool
    immutability: str
    attestations: tuple[str, ...] = ()
    details: dict[str, Any] = field(default_factory=dict, hash=False)

    @property
    def manifest_path(self) -> str:
        return self.store_path + ".build.json"

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "store_path": self.store_path,
            "inputs_digest": self.inputs_digest,
            "inventory_identity": self.inventory.identity,
            "entries": len(self.inventory.entries),
            "reused": self.reused,
            "network_isolated": self.network_isolated,
            "immutability": self.immutability,
            "attestations": list(self.attestations),
            **self.details,
        }


def normalize_tree(root: str, epoch: int) -> None:
    """Fixed modes (0555 directories and executables, 0444 other files) and mtimes."""
    for dirpath, dirnames, filenames in os.walk(root, topdown=False):
        for name in filenames:
            p = os.path.join(dirpath, name)
            st = os.lstat(p)
            if not stat.S_ISREG(st.st_mode):
                continue  # the inventory refuses it with its own code
            os.chmod(p, 0o555 if st.st_mode & 0o111 else 0o444)
            os.utime(p, (epoch, epoch))
        for name in dirnames:
            p = os.path.join(dirpath, name)
            if not os.path.islink(p):
                os.chmod(p, 0o555)
                os.utime(p, (epoch, epoch))
    os.chmod(root, 0o555)
    os.utime(root, (epoch, epoch))


def find_leaks(root: str, needles: list[bytes]) -> list[Finding]:
    """Files whose bytes name a staging path: such a tree would differ per build."""
    out: list[Finding] = []
    for dirpath, _, filenames in os.walk(root):
        for name in filenames:
            p = os.path.join(dirpath, name)
            with open(p, "rb") as f:
                data = f.read()
            for needle in needles:
                if needle in data:
                    rel = os.path.relpath(p, root)
                    out.append(Finding(BuildCode.STAGING_PATH_LEAK, rel, f"contains the staging path {needle.decode(errors='replace')!r}"))
                    break
    return out


def make_writable(root: str) -> None:
    """Undo read-only modes on a staging tree so it can be removed."""
    if not os.path.isdir(root) or os.path.islink(root):
        return
    os.chmod(root, 0o700)
    for dirpath, dirnames, _ in os.walk(root):
        for d in dirnames:
            p = os.path.join(dirpath, d)
            if not os.path.islink(p):
                os.chmod(p, 0o700)


def remove_tree(root: str) -> None:
    import shutil

    if os.path.lexists(root):
        _clear_immutable(root)
        make_writable(root)
        shutil.rmtree(root)


def _clear_immutable(root: str) -> None:
    import subprocess

    if os.path.isdir(root) and not os.path.islink(root):
        subprocess.run(["chattr", "-R", "-i", root], capture_output=True, env={"PATH": "/usr/bin:/bin"})


def freeze_published(path: str, inventory: Inventory) -> str:
    """Make a published store entry immutable; return the guarantee that was established.

    The Linux immutable flag (``chattr +i``) when this process may set it; otherwise the
    read-only modes already applied, reported as the weaker ``readonly`` guarantee.
    """
    import subprocess

    proc = subprocess.run(["chattr", "-R", "+i", path], capture_output=True, env={"PATH": "/usr/bin:/bin"})
    if proc.returncode == 0:
        return "immutable"
    return "readonly"


def publish(staging_out: str, final: str, inventory: Inventory) -> str:
    """Rename the normalized staging tree to ``final``, freeze it, verify the frozen bytes."""
    if os.path.lexists(final):
        raise VerificationError(BuildCode.STORE_CONFLICT, "the store path already exists", final)
    os.rename(staging_out, final)
    try:
        immutability = freeze_published(final, inventory)
        verify_tree(final, inventory)
    except BaseException:
        remove_tree(final)
        raise
    return immutability


def write_manifest(result: BuildResult) -> None:
    doc = {"format": MANIFEST_FORMAT, **result.to_json(), "inputs": result.inputs, "inventory": result.inventory.to_json()}
    write_atomic(result.manifest_path, canonical_bytes(doc) + b"\n", mode=0o444)


def read_manifest(path: str) -> dict[str, Any]:
    doc = loads_strict(read_bounded(path, what="build record", max_bytes=256 << 20), what="build record")
    if not isinstance(doc, dict) or doc.get("format") != MANIFEST_FORMAT:
        raise VerificationError(BuildCode.STORE_CONFLICT, "not a build record", path)
    return doc


def reuse(store_path: str, kind: str, inputs: dict[str, Any], digest: str, *, full_verify: bool = True) -> BuildResult | None:
    """The existing store entry for these inputs, after checking it still holds its inventory."""
    manifest = store_path + ".build.json"
    if not os.path.exists(manifest) or not os.path.isdir(store_path):
        return None
    doc = read_manifest(manifest)
    if doc.get("inputs_digest") != digest:
        raise VerificationError(BuildCode.STORE_CONFLICT, "the store entry's build record names other inputs", store_path)
    inventory = Inventory.from_json(doc["inventory"])
    if inventory.identity != doc.get("inventory_identity"):
        raise VerificationError(BuildCode.STORE_CONFLICT, "the build record's inventory does not match its identity", manifest)
    if full_verify:
        verify_tree(store_path, inventory)
    details = {k: doc[k] for k in ("toolchain", "distributions", "interpreter", "skill") if k in doc}
    return BuildResult(kind, store_path, inputs, digest, inventory, True, bool(doc.get("network_isolated")),
                       str(doc.get("immutability")), tuple(doc.get("attestations", ())), details)


def inventory_of(root: str) -> Inventory:
    return inventory_tree(root)


def path_for(store: str, digest: str, name: str) -> str:
    return str(Path(os.path.abspath(store)) / store_name(digest, name))


def dump(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True)
