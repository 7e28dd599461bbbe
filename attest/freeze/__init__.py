"""Freeze / store layer: private staging, immutability backends, post-freeze verification,
the content-addressed store, running commands from frozen images, retained bytes.

Knows nothing of how trees were built; takes the expected :class:`~attest.inventory.Inventory`
from its caller, or from a signed attestation (:func:`freeze_attested`). The smallest real use:

    >>> from attest.freeze import Store, freeze_tree, run_from_images
    >>> image = freeze_tree("src", expected, "/var/lib/attest", backend="immutable")
    >>> rc = run_from_images("/var/lib/attest", {"TOOL": image.path}, ["sh", "-c", "ls $ATTEST_IMAGE_TOOL"])
"""

from __future__ import annotations

from ._attested import freeze_attested
from ._backends import (
    BACKEND_ENV,
    BACKENDS,
    DEFAULT_BACKEND,
    Backend,
    ErofsBackend,
    ImmutableBackend,
    ReadonlyBackend,
    RoBindBackend,
    get_backend,
    resolve_backend,
)
from ._codes import FreezeCode
from ._exec import expand_image_refs, run_from_images
from ._image import Image, Sealed, check_image
from ._retained import RetainedBytes, retain_file, seal_memfd, sealed_memfd
from ._store import GcResult, Store, StoreEntry, freeze_tree, verify_image

__all__ = [
    "BACKENDS",
    "BACKEND_ENV",
    "DEFAULT_BACKEND",
    "Backend",
    "ErofsBackend",
    "FreezeCode",
    "GcResult",
    "Image",
    "ImmutableBackend",
    "ReadonlyBackend",
    "RetainedBytes",
    "RoBindBackend",
    "Sealed",
    "Store",
    "StoreEntry",
    "check_image",
    "expand_image_refs",
    "freeze_attested",
    "freeze_tree",
    "get_backend",
    "resolve_backend",
    "retain_file",
    "run_from_images",
    "seal_memfd",
    "sealed_memfd",
    "verify_image",
]
