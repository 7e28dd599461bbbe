"""The one shape of a repository's name in recipes, pins and policies: an https URL."""

from __future__ import annotations

import re
from typing import TypeGuard

_HOST = r"[A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9])?"
_REPOSITORY = re.compile(rf"https://{_HOST}(?::[0-9]{{1,5}})?(?:/[A-Za-z0-9._~-]+)+\Z")


def is_repository_url(value: object) -> TypeGuard[str]:
    """Whether ``value`` is a repository URL: https, host, optional port, a path, no '.' or '..' segment.

    >>> is_repository_url("https://github.com/acme/toolchain.git"), is_repository_url("https://"), is_repository_url("file:///x")
    (True, False, False)
    """
    return (isinstance(value, str) and _REPOSITORY.match(value) is not None
            and not any(s in (".", "..") for s in value.split("/")[3:]))
