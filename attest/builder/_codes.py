"""Reason codes of the build layer (stable wire strings; see docs/build.md)."""

from __future__ import annotations

from ..errors import ReasonCode


class BuildCode(ReasonCode):
    # Locks (pylock.toml / requirements with --hash).
    BAD_LOCK = "BAD_LOCK"                    # does not parse, unknown keys, wrong lock-version
    LOCK_NOT_WHEEL = "LOCK_NOT_WHEEL"        # an sdist, VCS, directory or archive entry
    LOCK_UNHASHED = "LOCK_UNHASHED"          # an entry without a sha256
    LOCK_NOT_PINNED = "LOCK_NOT_PINNED"      # a requirement that is not name==version
    LOCK_DUPLICATE = "LOCK_DUPLICATE"        # one distribution locked twice for one environment
    NO_COMPATIBLE_WHEEL = "NO_COMPATIBLE_WHEEL"  # no locked wheel matches the interpreter's tags
    # Fixed-output fetch and the cache.
    HASH_MISMATCH = "HASH_MISMATCH"          # downloaded or cached bytes differ from the lock
    FETCH_FAILED = "FETCH_FAILED"            # the registry could not be reached or refused
    NOT_IN_CACHE = "NOT_IN_CACHE"            # the build needs a file the cache does not hold
    # Recipes.
    BAD_RECIPE = "BAD_RECIPE"
    # Interpreter identity.
    INTERPRETER_UNUSABLE = "INTERPRETER_UNUSABLE"    # cannot run or probe the interpreter
    INTERPRETER_MISMATCH = "INTERPRETER_MISMATCH"    # a runtime run under another interpreter
    # The hermetic runner.
    NETWORK_NOT_ISOLATED = "NETWORK_NOT_ISOLATED"    # no empty network namespace here
    BUILD_STEP_FAILED = "BUILD_STEP_FAILED"          # the backend or the installer failed
    STEP_OUTPUT_TOO_LARGE = "STEP_OUTPUT_TOO_LARGE"  # a step printed more than the cap; it was killed
    DEPENDENCY_UNSATISFIED = "DEPENDENCY_UNSATISFIED"  # the installed set misses a requirement
    STAGING_PATH_LEAK = "STAGING_PATH_LEAK"          # an output file names the staging path
    UNLOCKED_DISTRIBUTION = "UNLOCKED_DISTRIBUTION"  # an installed distribution the lock does not name
    DISTRIBUTION_OVERLAP = "DISTRIBUTION_OVERLAP"    # one importable name (or a .pth) from another distribution's wheel
    UNSAFE_STEP_OUTPUT = "UNSAFE_STEP_OUTPUT"        # a step left a link, FIFO, device or hard link where the host takes its output
    BUILD_RECORD_CONFLICT = "BUILD_RECORD_CONFLICT"  # a build record that names other inputs or another image
    # Rebuild check and promotion.
    NOT_REPRODUCIBLE = "NOT_REPRODUCIBLE"            # the rebuild differs from the first build
    PROMOTION_REFUSED = "PROMOTION_REFUSED"           # a promotion precondition failed
    BAD_PINS = "BAD_PINS"                            # the pins file does not parse
