"""Fixtures for the attestation tests: real keys generated once per session, policies on disk."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from support.keys import Keys


@pytest.fixture(scope="session")
def keys(tmp_path_factory: pytest.TempPathFactory) -> Keys:
    return Keys(tmp_path_factory.mktemp("keys"))


@pytest.fixture
def write_policy(tmp_path: Path, keys: Keys) -> Callable[..., Path]:
    """Write a policy trusting the named session keys (and optional extra TOML) in a fresh dir."""
    counter = iter(range(10_000))

    def make(names: Sequence[str] = ("ed",), threshold: int = 1, extra: str = "", *, where: Path | None = None) -> Path:
        d = where or tmp_path / f"policy{next(counter)}"
        d.mkdir(parents=True, exist_ok=True)
        lines = [f"threshold = {threshold}"]
        for n in names:
            lines += ["[[signers]]", 'kind = "key"', f'public_key = "{keys.pub(n)}"']
        path = d / "policy.toml"
        path.write_text("\n".join(lines) + "\n" + extra)
        return path

    return make

