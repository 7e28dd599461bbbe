"""Ignore patterns: gitignore style (pathspec), only ever the ones an inventory records.

The walker, the inventory parser and the freeze copier compile the same recorded patterns
here, so a verifier skips exactly what the producer skipped (docs/inventory.md "Format (a contract)":
``check`` applies exactly the recorded ``ignore`` patterns, never the caller's).

    >>> spec = compile_ignore(("__pycache__/", "*.pyc"))
    >>> spec.match_file("pkg/__pycache__/")
    True
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..errors import InputError
from ._codes import InventoryCode

if TYPE_CHECKING:
    from pathspec import GitIgnoreSpec


def compile_ignore(patterns: Sequence[str]) -> GitIgnoreSpec | None:
    """Compile gitignore-style patterns with pathspec, or None when there are none.

    Raises :class:`InputError` (``BAD_IGNORE``) for a pattern that is not one line or does not
    compile. pathspec is imported only when there are patterns.
    """
    if not patterns:
        return None
    for p in patterns:
        if not isinstance(p, str) or "\n" in p or "\r" in p or "\x00" in p:
            raise InputError(InventoryCode.BAD_IGNORE, f"ignore pattern {p!r} is not a single line")
    import pathspec  # lazy: pathspec adds ~9 ms to attest.inventory (-X importtime); only ignore patterns need it

    try:
        return pathspec.GitIgnoreSpec.from_lines(list(patterns))
    except Exception as e:  # pathspec raises several types for malformed patterns
        raise InputError(InventoryCode.BAD_IGNORE, f"ignore patterns do not compile: {e}") from e
