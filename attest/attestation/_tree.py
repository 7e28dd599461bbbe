"""`attest verify`: a signed closed-tree attestation, then the tree against its inventory.

    >>> result = verify_tree_attestation("tree", "tree.intoto.json", load_policy("/etc/attest/policy.toml"))
    >>> result.inventory.identity

Steps: (1) the policy and every file it names must lie outside the tree under review;
(2) optionally, the attestation file's digest must equal a pinned one (replay, mix-and-match);
(3) the attestation verifies under the policy; (4) it is a closed-tree statement whose single
subject is the identity of the inventory it carries; (5) the tree matches that inventory
exactly (the codes of `attest check`). With ``summary_out`` a signed VSA records the outcome,
PASSED or FAILED, naming the policy and the input attestation by digest.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .. import __version__
from .._fs import write_atomic
from ..errors import AttestError, CommonCode, Finding, InputError, VerificationError
from ..inventory import Inventory, check_tree
from ._codes import AttestationCode
from ._keys import Signer
from ._policy import Policy
from ._sign import sign_statement
from ._slsa import ResourceRef, verification_summary
from ._statement import VSA_V1, statement, subject
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


def check_policy_outside(policy: Policy, root: str | os.PathLike[str]) -> None:
    """Raise POLICY_IN_TREE if the policy file or any key / trusted root it named resolves inside ``root``."""
    real_root = os.path.realpath(root)
    for source in policy.sources:
        if _inside(source, real_root):
            raise VerificationError(
                AttestationCode.POLICY_IN_TREE, "trust policy inputs must come from outside the tree under review", source
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
    """Verify the tree at ``root`` against a signed closed-tree attestation; raise on any failure."""
    if (summary_out is None) != (summary_signer is None):
        raise InputError(AttestationCode.USAGE, "a verification summary needs both an output path and a signing key")
    data = read_attestation(attestation)
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    verified: VerifiedStatement | None = None
    try:
        check_policy_outside(policy, root)  # (1)
        if expected_attestation_digest is not None and expected_attestation_digest != digest:  # (2)
            raise VerificationError(
                AttestationCode.ATTESTATION_DIGEST_MISMATCH, f"the attestation is {digest}; the pin is {expected_attestation_digest}"
            )
        verified = verify_attestation_bytes(data, policy)  # (3)
        inventory = closed_tree_inventory(verified)  # (4)
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
        policy=ResourceRef(Path(os.path.abspath(policy.path)).as_uri(), {"sha256": policy.digest.removeprefix("sha256:")}),
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
