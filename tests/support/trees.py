"""Real trees for the tests (no mocks: real files, flags and processes)."""

from __future__ import annotations

import os
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
    subprocess.run(["chattr", flag, *map(str, paths)], check=True)


def all_paths(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))
