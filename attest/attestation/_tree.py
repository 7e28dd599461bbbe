"""`attest verify`: a signed attestation carrying a closed inventory, then the tree against it.

    >>> result = verify_tree_attestation("tree", "tree.intoto.json", load_policy("/etc/attest/policy.toml"))
    >>> result.inventory.identity

Steps: (1) the policy and every file it names must lie outside the tree under review;
(2) optionally, the attestation file's digest must equal a pinned one (replay, mix-and-match);
(3) the attestation verifies under the policy; (4) its predicate carries a closed inventory
(closed-tree, runtime or installation: :data:`INVENTORY_PREDICATES`) and its single subject is
the identity of that inventory; (5) the tree matches that inventory
exactly (the codes of `attest check`). With ``summary_out`` a signed VSA records the outcome,
PASSED or FAILED, naming the policy and the input attestation by digest.
"""

from __future__ import annotations

import datetime as _dt
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from .. import __version__
from .._digest import sha256_of
from .._fs import read_bounded, write_atomic
from ..errors import AttestError, CommonCode, Finding, InputError, VerificationError
from ..inventory import Inventory, check_tree
from ._codes import AttestationCode
from ._keys import Signer
from ._policy import POLICY_DIGEST_V1, Policy
from ._sign import sign_statement
from ._slsa import ResourceRef, verification_summary
from ._statement import INVENTORY_PREDICATES, VSA_V1, statement, subject
from ._verify import VerifiedStatement, closed_tree_inventory, read_attestation, verify_attestation_bytes

VERIFIER_ID = "https://attest.dev/verifier/v1"
CLOSED_TREE_LEVEL = "ATTEST_CLOSED_TREE_V1"


@dataclass(frozen=True, slots=True)
class TreeVerification:
    verified: VerifiedStatement
    inventory: Inventory
    summary: str | None = None


def _inside(path: str, root: str) -> bool:
    """Whole-component containment of two resolved paths (never a string prefix)."""
    p, r = Path(path).parts, Path(root).parts
    return p[: len(r)] == r


MOUNTINFO = "/proc/self/mountinfo"
_MAX_MOUNTINFO_BYTES = 64 * 1024 * 1024
_OCTAL_ESCAPE = re.compile(rb"\\([0-7]{3})")

FileId = tuple[int, int]


@dataclass(frozen=True, slots=True)
class Mount:
    """One line of /proc/self/mountinfo: the directory ``root`` of filesystem ``dev`` is seen at ``mount_point``."""

    dev: str
    root: str
    mount_point: str


@dataclass(frozen=True, slots=True)
class Placement:
    """Where a resolved path lies, three ways.

    ``ids`` is the (st_dev, st_ino) of the path itself first, then of each ancestor up to ``/``;
    ``location`` is (filesystem device, path inside that filesystem) from the mount table,
    None when no mount table is available.
    """

    path: str
    ids: tuple[FileId, ...]
    location: tuple[str, str] | None


def parse_mountinfo(data: bytes) -> tuple[Mount, ...]:
    """The mounts of /proc/self/mountinfo, in the kernel's order (see proc(5))."""

    def unescape(field: bytes) -> str:
        # The kernel writes space, tab, newline and backslash in paths as \ooo.
        return os.fsdecode(_OCTAL_ESCAPE.sub(lambda m: bytes([int(m[1], 8)]), field))

    mounts: list[Mount] = []
    for line in data.splitlines():
        fields = line.split(b" ")
        if len(fields) < 10 or b"-" not in fields[6:]:
            raise InputError(CommonCode.UNREADABLE, "the mount table has a line this version cannot read", MOUNTINFO)
        mounts.append(Mount(fields[2].decode("ascii", "replace"), unescape(fields[3]), unescape(fields[4])))
    return tuple(mounts)


def locate(path: str, mounts: Sequence[Mount]) -> tuple[str, str] | None:
    """(device, path inside that filesystem) of the resolved ``path``, or None if no mount holds it.

    The mount is the one with the longest mount point that contains ``path``; of several on one
    mount point, the last listed, which is the one on top.
    """
    best: Mount | None = None
    depth = -1
    for mount in mounts:
        parts = len(Path(mount.mount_point).parts)
        if parts >= depth and _inside(path, mount.mount_point):
            best, depth = mount, parts
    if best is None:
        return None
    rest = Path(path).parts[depth:]
    return best.dev, str(Path(best.root, *rest))


def policy_source_inside(source: Placement, root: Placement) -> str | None:
    """Why a policy input at ``source`` lies inside the tree at ``root``, or None if it lies outside.

    Three independent tests, any one of which suffices: (a) its resolved path is inside the
    resolved root; (b) it or one of its ancestor directories is the root directory itself, by
    (st_dev, st_ino), which catches a bind mount of the whole tree (or the tree reached
    through one); (c) on the same filesystem, its path inside that filesystem is inside the
    root's, which catches a bind mount of a directory within the tree (whose inode is not the
    root's).
    """
    if _inside(source.path, root.path):
        return "it resolves inside the tree"
    if root.ids and root.ids[0] in source.ids:
        return "one of its directories is the tree's root directory (a bind mount or another path to it)"
    if source.location is not None and root.location is not None:
        (source_dev, source_fs_path), (root_dev, root_fs_path) = source.location, root.location
        if source_dev == root_dev and _inside(source_fs_path, root_fs_path):
            return "it is inside the tree on the same filesystem, reached through a bind mount of part of the tree"
    return None


def _read_mounts() -> tuple[Mount, ...] | None:
    if not os.path.exists(MOUNTINFO):
        return None  # no procfs mount table (not Linux): tests (a) and (b) still apply
    return parse_mountinfo(read_bounded(MOUNTINFO, what="mount table", max_bytes=_MAX_MOUNTINFO_BYTES))


def _placement(real: str, mounts: tuple[Mount, ...] | None, *, ancestors: bool) -> Placement:
    ids: list[FileId] = []
    at = real
    while True:
        st = os.stat(at)
        ids.append((st.st_dev, st.st_ino))
        parent = os.path.dirname(at)
        if not ancestors or parent == at:
            break
        at = parent
    return Placement(real, tuple(ids), None if mounts is None else locate(real, mounts))


def check_policy_outside(policy: Policy, root: str | os.PathLike[str]) -> None:
    """Raise POLICY_IN_TREE if the policy file or any key / trusted root it named lies inside ``root``.

    Inside means any of :func:`policy_source_inside`'s tests: by resolved path, by the
    (st_dev, st_ino) of every ancestor directory against the root's, and by location in the
    filesystem through the mount table; a bind mount of the tree or of part of it is no way out.

    Raises despite its name (a ``verify_*`` in the naming rule).

    Raises:
        VerificationError: ``POLICY_IN_TREE``.
        InputError: ``UNREADABLE`` when a policy input cannot be examined, or the mount
            table cannot be read or parsed.
    """
    real_root = os.path.realpath(root)
    mounts = _read_mounts()
    try:
        root_place = _placement(real_root, mounts, ancestors=False)
    except OSError:
        # A root that cannot be examined cannot be verified either (check_tree reports it); the
        # path and mount-table tests still run.
        root_place = Placement(real_root, (), None if mounts is None else locate(real_root, mounts))
    for source in policy.sources:
        real = os.path.realpath(source)
        try:
            place = _placement(real, mounts, ancestors=True)
        except OSError as e:
            raise InputError(
                CommonCode.UNREADABLE, f"cannot examine a policy input to confirm it lies outside the tree: {e.strerror}", source
            ) from e
        why = policy_source_inside(place, root_place)
        if why is not None:
            raise VerificationError(
                AttestationCode.POLICY_IN_TREE, f"trust policy inputs must come from outside the tree under review: {why}", source
            )


def verify_tree_attestation(
    root: str | os.PathLike[str],
    attestation: str | os.PathLike[str],
    policy: Policy,
    *,
    expected_attestation_digest: str | None = None,
    summary_out: str | os.PathLike[str] | None = None,
    summary_signer: Signer | None = None,
    summary_format: str = "dsse",
    clock: Callable[[], _dt.datetime] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> TreeVerification:
    """Verify the tree at ``root`` against a signed attestation carrying a closed inventory; raise on any failure.

    Raises:
        InputError: ``USAGE`` (a summary path without a signer, or the reverse); the
            attestation's ``UNREADABLE`` / ``TOO_LARGE``; the mount table's ``UNREADABLE``.
        VerificationError: (1) ``POLICY_IN_TREE``; (2) ``ATTESTATION_DIGEST_MISMATCH``;
            (3) every code of :func:`verify_attestation_bytes`; (4) the codes of
            :func:`closed_tree_inventory`; (5) every code of ``attest check`` (``MISSING``,
            ``EXTRA``, ``DIGEST_MISMATCH``, ``SYMLINK``, ...). With a summary requested, a
            FAILED summary that cannot be written adds a ``SIGNING_FAILED`` finding.
    """
    if (summary_out is None) != (summary_signer is None):
        raise InputError(CommonCode.USAGE, "a verification summary needs both an output path and a signing key")
    data = read_attestation(attestation)
    digest = sha256_of(data)
    verified: VerifiedStatement | None = None
    try:
        check_policy_outside(policy, root)  # (1)
        if expected_attestation_digest is not None and expected_attestation_digest != digest:  # (2)
            raise VerificationError(
                AttestationCode.ATTESTATION_DIGEST_MISMATCH, f"the attestation is {digest}; the pin is {expected_attestation_digest}"
            )
        verified = verify_attestation_bytes(data, policy)  # (3)
        inventory = closed_tree_inventory(verified, predicate_type=INVENTORY_PREDICATES)  # (4)
        findings = check_tree(root, inventory, progress=progress)  # (5)
        if findings:
            raise VerificationError(findings=findings)
    except AttestError as err:
        if summary_out is not None and summary_signer is not None:
            extra = _write_summary(root, attestation, digest, policy, verified, None, False, summary_out, summary_signer, summary_format, clock)
            if extra is not None:
                raise type(err)(findings=(*err.findings, extra)) from err
        raise
    written = None
    if summary_out is not None and summary_signer is not None:
        _write_summary(root, attestation, digest, policy, verified, inventory, True, summary_out, summary_signer, summary_format, clock)
        written = os.fspath(summary_out)
    return TreeVerification(verified, inventory, written)


def _write_summary(
    root: str | os.PathLike[str],
    attestation: str | os.PathLike[str],
    digest: str,
    policy: Policy,
    verified: VerifiedStatement | None,
    inventory: Inventory | None,
    passed: bool,
    out: str | os.PathLike[str],
    signer: Signer,
    fmt: str,
    clock: Callable[[], _dt.datetime] | None,
) -> Finding | None:
    """Sign and write the VSA. On a failed verification, returns a finding instead of raising."""
    name = Path(os.path.abspath(root)).name or "/"
    if inventory is not None:
        subject_hex = inventory.digest_hex
    elif verified is not None and len(verified.statement["subject"]) == 1:
        subject_hex = verified.statement["subject"][0]["digest"]["sha256"]  # the digest the failed claim named
    else:
        # Nothing names the tree: summarize the attestation that failed instead.
        name, subject_hex = f"attestation:{Path(attestation).name}", digest.removeprefix("sha256:")
    now = (clock or (lambda: _dt.datetime.now(_dt.UTC)))()
    predicate = verification_summary(
        verifier_id=VERIFIER_ID,
        verifier_version={"attest": __version__},
        time_verified=now,
        resource_uri=Path(os.path.abspath(root)).as_uri(),
        # The digest covers the policy file and every key and trusted root it names
        # (``policy_digest``); the annotations carry what it is the digest of, so a reader can
        # recompute it from the files.
        policy=ResourceRef(Path(os.path.abspath(policy.path)).as_uri(), {"sha256": policy.digest.removeprefix("sha256:")},
                           annotations={"digestOf": POLICY_DIGEST_V1, "covers": policy.digest_covers} if policy.digest_covers else {}),
        input_attestations=[ResourceRef(Path(os.path.abspath(attestation)).as_uri(), {"sha256": digest.removeprefix("sha256:")})],
        passed=passed,
        verified_levels=[CLOSED_TREE_LEVEL],
    )
    try:
        data = sign_statement(statement([subject(name, subject_hex)], VSA_V1, predicate), signer, fmt=fmt)
        try:
            write_atomic(out, data)
        except OSError as e:
            raise InputError(CommonCode.UNREADABLE, f"cannot write the verification summary: {e.strerror}", os.fspath(out)) from e
    except AttestError as e:
        if passed:
            raise
        return Finding(AttestationCode.SIGNING_FAILED, os.fspath(out), f"the FAILED verification summary was not written: {e}")
    return None
