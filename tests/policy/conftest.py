"""A small repository with a review authority, built for real in tmp_path (no mocks)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from attest.errors import AttestError
from attest.policy import CheckReport, GenerateReport, check_policy, generate_policy

REV = "0123456789abcdef0123456789abcdef01234567"

CONFIG = f"""\
schema: 2
toolchain:
  repository: https://github.com/attest-dev/attest
  revision: {REV}
skills:
  enabled: [pr-review]
contexts:
  review:
    modules: [policy/core/evidence.md, policy/review/findings.md, policy/security/secrets.md]
outputs:
  - {{path: docs/review/policy-context.md, renderer: policy-context-md, context: review, enabled: true}}
  - {{path: docs/review/github-review.json, renderer: github-review-json-adapter-v1, context: review, enabled: true}}
"""

MODULES = {
    "policy/core/evidence.md": b"# Evidence\n\nBehaviour is established from code that runs and tests that exercise it.\n",
    "policy/review/findings.md": b"# Findings\n\nA finding blocks when it lets a verifier pass what it must refuse.\n",
    "policy/security/secrets.md": b"# Secrets\n\nNo token is ever printed, logged or written into an output.\n",
}

OUTPUTS = (
    ".agents/skills/pr-review/SKILL.md",
    ".agents/skills/pr-review/references/procedure.md",
    ".agents/skills/pr-review/references/result.md",
    "docs/review/github-review.json",
    "docs/review/policy-context.md",
)


class Repo:
    """A repository root under tmp_path and the few things the tests do to it."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def write(self, rel: str, data: bytes | str) -> Path:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data.encode() if isinstance(data, str) else data)
        return path

    def read(self, rel: str) -> bytes:
        return (self.root / rel).read_bytes()

    def config(self, text: str) -> None:
        self.write(".agent-policy.yml", text)

    def edit_config(self, old: str, new: str) -> None:
        text = self.read(".agent-policy.yml").decode()
        assert old in text, old
        self.config(text.replace(old, new))

    def generate(self) -> GenerateReport:
        return generate_policy(self.root)

    def check(self) -> CheckReport:
        return check_policy(self.root)

    def check_codes(self) -> list[str]:
        """The codes ``check`` fails with, in order; [] when it passes."""
        try:
            check_policy(self.root)
        except AttestError as e:
            return [f.code for f in e.findings]
        return []

    def generate_codes(self) -> list[str]:
        try:
            generate_policy(self.root)
        except AttestError as e:
            return [f.code for f in e.findings]
        return []

    def files(self) -> dict[str, bytes]:
        """Every regular file below the root, by relative path."""
        return {str(p.relative_to(self.root)): p.read_bytes() for p in sorted(self.root.rglob("*")) if p.is_file() and not p.is_symlink()}


@pytest.fixture
def bare_repo(tmp_path: Path) -> Repo:
    """Config and modules, nothing generated yet."""
    repo = Repo(tmp_path / "repo")
    repo.root.mkdir()
    repo.config(CONFIG)
    for rel, data in MODULES.items():
        repo.write(rel, data)
    return repo


@pytest.fixture
def repo(bare_repo: Repo) -> Repo:
    """A generated repository on which ``check`` passes."""
    bare_repo.generate()
    return bare_repo


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, Any]:
    from attest.cli import main

    rc = main(list(args))
    out = capsys.readouterr().out
    return rc, (json.loads(out) if "--json" in args and out.strip() else out)


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Any:
    return lambda *args: run_cli(capsys, *args)
