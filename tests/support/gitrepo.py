"""git with a fixed environment: no system or global configuration, fixed identities and dates."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

GIT_ENV = {"PATH": "/usr/bin:/bin", "HOME": "/nonexistent", "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null",
           "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.org", "GIT_AUTHOR_DATE": "2020-01-01T00:00:00Z",
           "GIT_COMMITTER_DATE": "2020-01-01T00:00:00Z"}


def git(repo: Path, *args: str, input: bytes | None = None) -> str:
    """Run git in ``repo`` and return its stripped standard output; a failure raises."""
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, env=GIT_ENV,
                          input=input).stdout.decode().strip()


def make_repo(path: Path, files: dict[str, bytes], *, fmt: str = "sha1", execs: tuple[str, ...] = (),
              message: str = "init") -> str:
    """A new repository at ``path`` (object format ``fmt``) with one commit of ``files``; its SHA."""
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", f"--object-format={fmt}")
    for rel, data in files.items():
        p = path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
        os.chmod(p, 0o755 if rel in execs else 0o644)
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", message)
    return git(path, "rev-parse", "HEAD")
