"""Real trees for the tests (no mocks: real files, flags and processes)."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path
from typing import Union

from attest.freeze._backends import FS_IMMUTABLE_FL, get_flags

Spec = dict[str, Union[bytes, tuple[bytes, int], "Spec", None]]


def make_tree(root: Path, spec: Spec) -> Path:
    """Files are bytes (mode 0644) or (bytes, mode); directories are dicts (0755), or None when empty."""
    root.mkdir(parents=True, exist_ok=True)
    for name, content in spec.items():
        path = root / name
        if isinstance(content, (bytes, tuple)):
            data, mode = content if isinstance(content, tuple) else (content, 0o644)
            path.write_bytes(data)
            os.chmod(path, mode)
        else:
            path.mkdir()
            os.chmod(path, 0o755)
            if content:
                make_tree(path, content)
    return root


def is_immutable(path: Path) -> bool:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        return bool(get_flags(fd) & FS_IMMUTABLE_FL)
    finally:
        os.close(fd)


def chattr(flag: str, *paths: Path) -> None:
    """Break (``-i``) or restore (``+i``) an image entry's seal, as an attacker who may would.

    Where the immutable flag can be set this is chattr(1). Where it cannot (an ordinary user,
    whose images use the ``readonly`` backend: see support/caps.py) the seal is the missing
    write bits, and the same attack is the owner's chmod: ``-i`` gives the owner write
    permission back, ``+i`` takes every write bit away again.
    """
    from support.caps import HAS_IMMUTABLE

    if HAS_IMMUTABLE:
        subprocess.run(["chattr", flag, *map(str, paths)], check=True)
        return
    if flag not in ("-i", "+i"):
        raise ValueError(f"chattr emulation knows -i and +i, not {flag!r}")
    for path in paths:
        mode = stat.S_IMODE(os.lstat(path).st_mode)
        os.chmod(path, mode | 0o200 if flag == "-i" else mode & ~0o222)


def all_paths(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))
