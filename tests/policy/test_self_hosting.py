"""This repository carries its own review authority, and it never drifts: `attest policy check` passes on the committed tree.

The root is found from this file, never from the current directory, so the test means the
same thing wherever pytest runs (a fresh clone's CI included).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from attest.policy import PolicyConfig, PolicyLock, SkillFrontMatter, check_policy

ROOT = Path(__file__).resolve().parents[2]


def test_policy_check_passes_on_this_repository(capsys: pytest.CaptureFixture[str]) -> None:
    from attest.cli import main

    rc = main(["policy", "check", "--root", str(ROOT), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out["ok"] is True, out
    paths = [o["path"] for o in out["outputs"]]
    assert {"docs/review/policy-context.md", "docs/review/github-review.json", ".agents/skills/pr-review/SKILL.md"} <= set(paths)


def test_policy_check_passes_from_any_working_directory(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "attest", "policy", "check", "--root", str(ROOT)], cwd=tmp_path,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr


def test_the_authority_names_this_repository_at_a_full_sha_of_one_of_its_commits() -> None:
    config = PolicyConfig.from_bytes((ROOT / ".agent-policy.yml").read_bytes())
    lock = PolicyLock.from_bytes((ROOT / ".agent-policy.lock").read_bytes())
    assert config.toolchain == lock.toolchain
    assert config.toolchain.repository == "https://github.com/attest-dev/attest"
    assert config.pr_review
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    shallow = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--is-shallow-repository"], capture_output=True, text=True)
    if shallow.stdout.strip() != "false":
        pytest.skip("a shallow clone may lack the named commit")
    found = subprocess.run(["git", "-C", str(ROOT), "cat-file", "-e", f"{config.toolchain.revision}^{{commit}}"], capture_output=True)
    assert found.returncode == 0, f"{config.toolchain.revision} is not a commit of this repository"


def test_every_module_namespace_holds_real_rules() -> None:
    config = PolicyConfig.from_bytes((ROOT / ".agent-policy.yml").read_bytes())
    for namespace in ("policy/core/", "policy/review/", "policy/security/"):
        assert any(m.startswith(namespace) for m in config.inputs), namespace
    on_disk = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "policy").rglob("*.md"))
    assert on_disk == sorted(config.inputs), "a module on disk that no context names, or the reverse"


def test_the_generated_skill_declares_only_reproduced_files() -> None:
    report = check_policy(ROOT)
    front = SkillFrontMatter.from_bytes((ROOT / ".agents/skills/pr-review/SKILL.md").read_bytes())
    assert set(front.paths()) == {o.path for o in report.outputs if o.renderer == "pr-review-skill-v1"}
