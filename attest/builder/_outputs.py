"""The input-addressed store: naming, normalizing, publishing and reusing build outputs.

A build's inputs (every digest that can change its bytes) are hashed into its name,
``<32 hex>-<recipe name>``. ``STATE/builds/<name>.build.json`` records the inputs, the
closed inventory and how the build ran (network isolation, the immutability backend).

Order (attest's one invariant, docs/freeze.md "What freeze does, step by step"; for builds
docs/build.md "The build", steps 4-8): the output is produced in private staging and its
modes and mtimes are normalized; the freeze layer then materializes it into the
content-addressed store, seals it, and verifies the sealed bytes against the inventory
computed in staging before publishing. The build record, under ``STATE/builds/``, maps
the input-addressed name to that frozen image.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._fs import read_bounded, write_atomic
from .._json import canonical_bytes, loads_strict
from .._safefs import AT_FDCWD, O_DIR, UnsafeEntry, copy_regular_at, open_dir_at
from ..errors import AttestError, EnvironmentFailure, Finding, VerificationError
from ..freeze import FreezeCode, Store, freeze_tree, resolve_backend
from ..freeze._materialize import materialize
from ..freeze._state import remove_tree as remove_at
from ..inventory import Entry, EntryType, Inventory, inventory_tree
from ._codes import BuildCode

MANIFEST_FORMAT = "https://attest.dev/build-record/v1"

#: A JSON object the builder wrote and reads back by its documented keys: a build's inputs, the
#: details of its record (docs/build.md). Any, because its readers (the predicates, promotion, the
#: CLI, the demo) index it by those keys, which the build that wrote it put there.
BuildDoc = dict[str, Any]


def input_digest(inputs: Mapping[str, object]) -> str:
    return hashlib.sha256(canonical_bytes(inputs)).hexdigest()


def store_name(digest: str, name: str) -> str:
    """The input-addressed name of a build output."""
    return f"{digest[:32]}-{name}"


@dataclass(frozen=True, slots=True)
class BuildResult:
    """One build's output: its input-addressed ``name`` and the frozen image at ``store_path``."""

    kind: str
    name: str
    store_path: str
    inputs: BuildDoc = field(hash=False)
    inputs_digest: str
    inventory: Inventory = field(hash=False)
    reused: bool
    network_isolated: bool
    immutability: str
    attestations: tuple[str, ...] = ()
    details: BuildDoc = field(default_factory=dict, hash=False)

    def to_json(self) -> dict[str, object]:
        """The build's ``--json`` fields (name, image, inventory identity, isolation, attestations, details).

        Keys as docs/json.md names them everywhere: ``image`` (the frozen image's path),
        ``identity`` (its closed inventory's), ``backend`` (its immutability backend).

        Raises:
            Nothing: it only reads fields.
        """
        return {
            "kind": self.kind,
            "name": self.name,
            "image": self.store_path,
            "inputs_digest": self.inputs_digest,
            "identity": self.inventory.identity,
            "entries": len(self.inventory.entries),
            "reused": self.reused,
            "network_isolated": self.network_isolated,
            "backend": self.immutability,
            "attestations": list(self.attestations),
            **self.details,
        }


def require_confined(result: BuildResult) -> None:
    """Refuse a runtime whose build (or reused record) was not isolated and confined (promotion, a rebuild result)."""
    sandbox = result.inputs.get("sandbox") or {}
    if not (result.network_isolated and result.details.get("filesystem_confined") is True
            and sandbox.get("network_isolated") is True and sandbox.get("filesystem_confined") is True):
        raise VerificationError(BuildCode.PROMOTION_REFUSED, "the runtime was not built network-isolated and confined; "
                                "the pins are unchanged", result.name)


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
    keep = max((len(n) for n in needles), default=1) - 1
    for dirpath, _, filenames in os.walk(root):
        for name in filenames:
            p = os.path.join(dirpath, name)
            # In chunks (memory stays bounded whatever the file's size), each searched together
            # with the tail of the one before, so a needle across a chunk boundary is found.
            found = None
            tail = b""
            with open(p, "rb") as f:
                while found is None and (chunk := f.read(1 << 20)):
                    window = tail + chunk
                    found = next((n for n in needles if n in window), None)
                    tail = window[-keep:] if keep else b""
            if found is not None:
                rel = os.path.relpath(p, root)
                out.append(Finding(BuildCode.STAGING_PATH_LEAK, rel, f"contains the staging path {found.decode(errors='replace')!r}"))
    return out


def remove_tree(root: str) -> None:
    """Remove a staging tree through descriptors (:func:`attest.freeze._state.remove_tree`): a step
    may have written below it, so nothing under it is resolved by path, and however deep it made
    its directories only a bounded number of descriptors is held.

    Raises:
        EnvironmentFailure: ``REMOVAL_FAILED`` when an entry cannot be removed (the rest is;
            ``attest store gc`` tries again once no build holds it).
    """
    parent, name = os.path.split(os.path.abspath(root))
    try:
        pfd = os.open(parent, O_DIR)  # the host's own path, above anything a step could write
    except FileNotFoundError:
        return
    try:
        remove_at(pfd, name, os.path.abspath(root))
    finally:
        os.close(pfd)


class _Unsealed:
    """The freeze layer's copier without a seal: how the host takes a step's output."""

    name = "none"
    guarantee = "none: a host-only copy"
    mode_mask = 0
    needs_fd = False
    statx_attr = 0
    seal_writes_back = False

    def probe(self, scratch_fd: int, scratch_path: str) -> None:
        return None

    def seal(self, fd: int) -> None:
        return None

    def holds(self, fd: int | None, st: os.stat_result) -> str | None:
        return None

    def wrap(self, argv: Sequence[str], images: Sequence[str], cwd: str | None) -> list[str]:
        raise NotImplementedError


def take_output(step_dir: str, into: str) -> str:
    """Copy the tree a build step wrote at ``step_dir`` into the new, host-only directory ``into``.

    The safe walker inventories ``step_dir`` (directory descriptors, ``O_NOFOLLOW|O_NONBLOCK``,
    decisions from ``fstat``): a link, FIFO, socket, device, hard link or setuid/setgid/sticky
    mode fails the build (``UNSAFE_STEP_OUTPUT``, with the walker's own codes). The freeze
    layer's copier then copies exactly those entries as new inodes. Every later read of the
    output (validation, normalization, the leak scan, the inventory, the freeze) reads the copy,
    which no step can reach. Returns ``into``.
    """
    try:
        inventory = inventory_tree(step_dir)
    except AttestError as e:
        raise VerificationError(
            findings=[Finding(BuildCode.UNSAFE_STEP_OUTPUT, None, f"a build step left an entry the host does not take: {e}"),
                      *e.findings]) from e
    os.mkdir(into, 0o700)
    dfd = os.open(into, O_DIR)
    try:
        findings, _ = materialize(step_dir, inventory, dfd, _Unsealed())  # type: ignore[arg-type]
    finally:
        os.close(dfd)
    if findings:
        raise VerificationError(findings=[Finding(BuildCode.UNSAFE_STEP_OUTPUT, None, "the step's output changed while it was taken"),
                                          *findings])
    return into


def take_single_file(step_dir: str, into_dir: str, *, suffix: str, what: str, max_bytes: int = 1 << 30) -> tuple[str, str]:
    """The one file ``*suffix`` a step left in ``step_dir``, copied into ``into_dir``: ``(name, sha256 hex)``.

    ``step_dir`` is listed through its descriptor and the file opened ``O_NOFOLLOW|O_NONBLOCK``
    and judged from ``fstat``: a link, FIFO or hard link is ``UNSAFE_STEP_OUTPUT``, never
    followed or waited on.
    """
    sfd = open_dir_at(AT_FDCWD, step_dir)
    try:
        names = sorted(os.listdir(sfd))
        if len(names) != 1 or not names[0].endswith(suffix) or "/" in names[0] or names[0].startswith("."):
            raise EnvironmentFailure(BuildCode.BUILD_STEP_FAILED, f"{what} is {names[:5]}, not one *{suffix} file")
        dfd = open_dir_at(AT_FDCWD, into_dir)
        try:
            digest = copy_regular_at(sfd, names[0], dfd, names[0], max_bytes=max_bytes)
        except UnsafeEntry as e:
            raise VerificationError(BuildCode.UNSAFE_STEP_OUTPUT, f"{what}: {e.strerror}", names[0]) from e
        finally:
            os.close(dfd)
    finally:
        os.close(sfd)
    return names[0], digest


def publish(staging_out: str, state: str, inventory: Inventory, backend: str | None) -> tuple[str, str]:
    """Freeze the normalized staging tree into the store; return ``(image path, backend)``.

    The freeze layer copies the tree into its private staging, seals every inode, verifies
    the sealed copy against ``inventory`` and only then publishes it under its identity.

    Raises:
        VerificationError: ``EROFS_UNSUPPORTED`` for the ``erofs`` backend: what consumes a build's
            image (the installer, the bootstrap) reads its tree by path, and an erofs image's tree
            is an empty mount point outside a mount namespace.
    """
    if resolve_backend(backend) == "erofs":
        raise VerificationError(FreezeCode.EROFS_UNSUPPORTED, "build outputs cannot be frozen into erofs images yet (their consumers "
                                "read the tree by path); choose another backend (--backend immutable or $ATTEST_BACKEND)", staging_out)
    image = freeze_tree(staging_out, inventory, state, backend=backend)
    return image.path, image.backend


def write_manifest(result: BuildResult, state: str) -> None:
    doc = {"format": MANIFEST_FORMAT, **result.to_json(), "inputs": result.inputs, "inventory": result.inventory.to_json()}
    builds = os.path.join(state, "builds")
    os.makedirs(builds, mode=0o700, exist_ok=True)
    write_atomic(os.path.join(builds, result.name + ".build.json"), canonical_bytes(doc) + b"\n", mode=0o444)


def manifest_path(state: str, name: str) -> str:
    return os.path.join(os.path.abspath(state), "builds", name + ".build.json")


def read_manifest(path: str) -> BuildDoc:
    doc = loads_strict(read_bounded(path, what="build record", max_bytes=256 << 20), what="build record")
    if not isinstance(doc, dict) or doc.get("format") != MANIFEST_FORMAT:
        raise VerificationError(BuildCode.BUILD_RECORD_CONFLICT, "not a build record", path)
    return doc


def reuse(state: str, name: str, kind: str, inputs: BuildDoc, digest: str, backend: str | None = None) -> BuildResult | None:
    """The stored output of these inputs, if its record exists and its frozen image's seal holds.

    A record whose image is gone or whose seal no longer holds is not reused: the caller
    builds again and the freeze layer replaces the stale image. An image sealed with another
    backend than ``backend`` (resolved as the freeze layer does) is never reused silently:
    ``STORE_CONFLICT``, as ``freeze`` refuses it, before anything is signed.

    Raises:
        VerificationError: ``BUILD_RECORD_CONFLICT`` (a record of other inputs, or whose
            inventory is not its image's), ``STORE_CONFLICT`` (another backend).
    """
    wanted = resolve_backend(backend)

    path = manifest_path(state, name)
    if not os.path.exists(path):
        return None
    doc = read_manifest(path)
    if doc.get("inputs_digest") != digest or doc.get("name") != name:
        raise VerificationError(BuildCode.BUILD_RECORD_CONFLICT, "the build record names other inputs", path)
    identity = doc.get("identity", doc.get("inventory_identity"))  # records written before the keys were unified
    if not isinstance(identity, str):
        raise VerificationError(BuildCode.BUILD_RECORD_CONFLICT, "the build record names no inventory identity", path)
    try:
        image = Store(state).get(identity)
    except VerificationError:
        return None  # gone or unsealed: never reused, rebuilt
    # The image was verified against exactly the inventory whose canonical bytes hash to its
    # identity; the record's copy is accepted only if it hashes to the same identity.
    inventory = _inventory_from_record(doc.get("inventory"), path)
    if inventory.identity != identity or image.identity != identity:
        raise VerificationError(BuildCode.BUILD_RECORD_CONFLICT, "the build record's inventory is not the frozen image's", path)
    # The record must not claim a weaker sandbox than the one these inputs require.
    required = inputs.get("sandbox")
    if isinstance(required, dict):
        for key in ("network_isolated", "filesystem_confined"):
            if required.get(key) and doc.get(key) is not True:
                raise VerificationError(BuildCode.BUILD_RECORD_CONFLICT, f"the build record was not built with {key} as these inputs require", path)
    if image.backend != wanted:
        raise VerificationError(FreezeCode.STORE_CONFLICT, f"the store holds this build's image sealed with {image.backend!r}, "
                                f"not {wanted!r}; choose that backend (--backend {image.backend} or $ATTEST_BACKEND={image.backend}), or remove the image with `attest store gc`", image.path)
    details: BuildDoc = {k: doc[k] for k in ("toolchain", "distributions", "interpreter", "host_libraries", "lock", "skill",
                                             "network", "filesystem_confined", "sandbox") if k in doc}
    return BuildResult(kind, name, image.path, inputs, digest, inventory, True, bool(doc.get("network_isolated")),
                       image.backend, tuple(doc.get("attestations", ())), details)




def _inventory_from_record(raw: object, where: str) -> Inventory:
    """The inventory of a build record, rebuilt without re-checking every name.

    Sound only because the caller then requires its identity to equal the identity of a
    sealed image, which the freeze layer verified entry by entry (names included).
    """
    if not isinstance(raw, dict):
        raise VerificationError(BuildCode.BUILD_RECORD_CONFLICT, "the build record's inventory is malformed: not an object", where)
    try:
        entries = tuple(
            Entry(e["path"], EntryType.DIR, e["mode"]) if e["type"] == "dir"
            else Entry(e["path"], EntryType.FILE, e["mode"], e["size"], e["digest"]["sha256"])
            for e in raw["entries"]
        )
        return Inventory(entries, tuple(raw["ignore"]))
    except (KeyError, TypeError, ValueError) as e:
        raise VerificationError(BuildCode.BUILD_RECORD_CONFLICT, f"the build record's inventory is malformed: {e}", where) from e
