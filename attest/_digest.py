"""The one spelling of a SHA-256 identity: ``sha256:<64 lowercase hex>``, shared by every layer.

    >>> sha256_of(b"")
    'sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855'
"""

from __future__ import annotations

import hashlib


def sha256_of(data: bytes | bytearray | memoryview) -> str:
    """``sha256:<hex>`` of ``data``."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


__all__ = ["sha256_of"]
