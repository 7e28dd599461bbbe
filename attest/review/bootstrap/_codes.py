"""Reason codes of the trusted bootstrap (stable wire strings; see docs/bootstrap.md).

Failures of the layers below keep their own codes (``SHALLOW_REPOSITORY``, ``OBJECT_HASH_MISMATCH``,
``IMAGE_CHANGED``, ``DIGEST_MISMATCH``, ...); these name what only the bootstrap decides.
"""

from __future__ import annotations

from ...errors import ReasonCode


class BootstrapCode(ReasonCode):
    BOOTSTRAP_IO = "BOOTSTRAP_IO"  # an I/O failure inside a step (the step fails closed with it)
    # Step 3: the trusted-base snapshot.
    BASE_SYMLINK = "BASE_SYMLINK"                # a symbolic link (mode 120000) anywhere in the base tree
    BASE_GITLINK = "BASE_GITLINK"                # a submodule (gitlink, mode 160000) anywhere in the base tree
    BASE_TREE_MISMATCH = "BASE_TREE_MISMATCH"    # the root tree recomputed from the frozen bytes is not the base commit's tree
    BASE_OBJECT_MISMATCH = "BASE_OBJECT_MISMATCH"  # a blob or tree recomputed from the frozen bytes differs from the base tree's at that path

    # Before step 1 (reported as step 1): where the deployment's own inputs lie.
    BOOTSTRAP_INPUT_IN_TREE = "BOOTSTRAP_INPUT_IN_TREE"  # PINS, TRUST (or a key it names), ATT or KEY inside GITDIR, an image or the installed Skill
    BAD_RUNTIME_PINS = "BAD_RUNTIME_PINS"        # the pins' [toolchain] or [runtime] table is missing or malformed
    # Step 1: the bootstrap image.
    SKILL_IMAGE_MISMATCH = "SKILL_IMAGE_MISMATCH"  # the frozen bootstrap image is not the attested installed inventory
    # Before step 1 (no step): the host options.
    BAD_HOST_OPTIONS = "BAD_HOST_OPTIONS"        # not exactly one host adapter, --github without --pr, a malformed --github/--pr/--api-url, an unset --token-env variable
    # Step 2: identity.
    BAD_IDENTITY = "BAD_IDENTITY"                # the identity file, or a hosting-API response, is not the documented shape
    HOST_READ_FAILED = "HOST_READ_FAILED"        # a hosting-API read gave no complete JSON answer (transport, timeout, status, size, content)
    HOST_MISMATCH = "HOST_MISMATCH"              # the API's answers disagree with the request or with each other (name, number, base repository, commit)
    API_TREE_MISMATCH = "API_TREE_MISMATCH"      # the API's base tree is not the base commit's tree in GITDIR's objects
    # Step 4: config.
    PR_REVIEW_NOT_ENABLED = "PR_REVIEW_NOT_ENABLED"  # `pr-review` is not in the trusted base's skills.enabled
    # Step 5: runtime.
    LOCK_TOOLCHAIN_NOT_PINNED = "LOCK_TOOLCHAIN_NOT_PINNED"  # the base lock's toolchain repository/revision differs from the pins
    RUNTIME_ATTESTATION_MISSING = "RUNTIME_ATTESTATION_MISSING"  # no runtime attestation of the pinned runtime in the state directory
    RUNTIME_ATTESTATION_MISMATCH = "RUNTIME_ATTESTATION_MISMATCH"  # the runtime attestation is not the pinned bytes
    RUNTIME_PREDICATE_MISMATCH = "RUNTIME_PREDICATE_MISMATCH"  # a field of the runtime attestation differs from the pins (name, inventory, toolchain, lock, interpreter)
    RUNTIME_IMAGE_MISMATCH = "RUNTIME_IMAGE_MISMATCH"  # the stored runtime image is not the attested inventory
    # Step 6: check.
    CHECK_FAILED = "CHECK_FAILED"                # the managed check from the runtime image did not succeed
    CHECK_BAD_OUTPUT = "CHECK_BAD_OUTPUT"        # the managed check printed no valid --json report
    CHECK_MISMATCH = "CHECK_MISMATCH"            # the check's report names another config, lock or set of outputs than step 4 read
    # Step 7: paths.
    PROCEDURE_NOT_REPRODUCED = "PROCEDURE_NOT_REPRODUCED"  # SKILL.md or a declared reference is not among the check's reproduced outputs (or differs)
    # Step 8: bundle.
    BUNDLE_MISMATCH = "BUNDLE_MISMATCH"          # the procedure bundle's bytes differ from the reproduced digests or the lock
