"""The composed freeze workflow: verify a closed-tree attestation, then freeze the tree against it.

A library caller of :func:`freeze_tree` must establish the expected inventory itself; this is
the one function that does it with every precondition, so the CLI and the demo cannot forget
one (``check_policy_outside`` among them).

    >>> image = freeze_attested("src", "src.intoto.json", load_policy("/etc/attest/policy.toml"), "/var/lib/attest")
"""

from __future__ import annotations

import os

from ..attestation import Policy, closed_tree_inventory, verify_attestation_file
from ..attestation._tree import check_policy_outside
from ._image import Image
from ._materialize import Progress
from ._store import freeze_tree


def freeze_attested(
    source: str | os.PathLike[str],
    attestation: str | os.PathLike[str],
    policy: Policy,
    state_dir: str | os.PathLike[str],
    *,
    backend: str | None = None,
    progress: Progress | None = None,
) -> Image:
    """Freeze ``source`` into the store under ``state_dir``, verified against its signed attestation.

    1. every input of ``policy`` (the policy file, its keys and trusted roots) lies outside
       ``source`` (a tree must not carry the policy that trusts it);
    2. the attestation verifies under ``policy`` and holds a closed-tree inventory;
    3. :func:`freeze_tree`: private copy, seal, verification of the frozen bytes, publication.

    Raises:
        VerificationError: ``POLICY_IN_TREE``, any attestation failure, any difference between
            the frozen copy and the attested inventory.
        InputError: an unreadable or malformed attestation, an unknown backend.
        EnvironmentFailure: the backend or staging cannot be established.
    """
    check_policy_outside(policy, source)
    expected = closed_tree_inventory(verify_attestation_file(attestation, policy))
    return freeze_tree(source, expected, state_dir, backend=backend, progress=progress)
