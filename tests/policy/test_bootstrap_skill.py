"""The bootstrap Skill source (skills/agent-policy): what a dispatcher must do, in ADR order, and the exact invocation."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from attest._json import canonical_bytes, loads_strict
from attest.policy import load_strict_yaml
from attest.policy._skill import split_front_matter

ROOT = Path(__file__).resolve().parents[2]
SKILL = ROOT / "skills" / "agent-policy"
BOOTSTRAP_MD = ROOT.parent / "shared" / "BOOTSTRAP.md"

INVOCATION = """\
attest bootstrap --pins PINS --policy TRUST --state-dir S
    --skill DIR --installation ATT
    --repo GITDIR (--identity FILE | --github OWNER/NAME --pr N [--token-env VAR] [--api-url URL])
    --key KEY -o HANDOFF [--backend B] [--json]
"""

# ADR-0008, "Repository-bound bootstrap", in its order.
ADR_ORDER = ["Authenticate the installed Skill", "Freeze the bootstrap image", "Identify the review", "Identify the base",
             "Freeze the trusted base", "Read the authority", "Freeze the runtime", "Run the managed check",
             "Check the procedure paths", "Freeze the procedure bundle", "Hand off"]
BOOTSTRAP_STEPS = ["skill", "identity", "base", "config", "runtime", "check", "paths", "bundle", "evidence"]


def _text() -> str:
    return (SKILL / "SKILL.md").read_text()


def test_the_front_matter_is_read_by_the_one_yaml_reader() -> None:
    head, body = split_front_matter((SKILL / "SKILL.md").read_bytes(), what="SKILL.md")
    doc = load_strict_yaml(head, what="SKILL.md")
    assert doc["name"] == "agent-policy" and isinstance(doc["description"], str) and set(doc) == {"name", "description"}
    assert body.startswith(b"# agent-policy")


def test_the_dispatcher_steps_are_in_adr_order() -> None:
    items = re.findall(r"^\s*(\d+)\. \*\*(.+?)\.\*\*", _text(), re.MULTILINE)
    assert [int(n) for n, _ in items] == list(range(1, len(ADR_ORDER) + 1))
    assert [title for _, title in items] == ADR_ORDER


def test_the_exact_invocation_is_given() -> None:
    assert f"```\n{INVOCATION}```" in _text()


@pytest.mark.skipif(not BOOTSTRAP_MD.exists(), reason="needs ../shared/BOOTSTRAP.md beside the repository")
def test_the_invocation_and_steps_are_bootstrap_md_s() -> None:
    text = BOOTSTRAP_MD.read_text()
    assert f"```\n{INVOCATION}```" in text
    assert re.findall(r"^(\d+)\. \*\*([a-z]+)\*\*:", text, re.MULTILINE) == [(str(i), s) for i, s in enumerate(BOOTSTRAP_STEPS, 1)]


def test_the_manifest_is_canonical_and_maps_every_bootstrap_step_to_the_actions_in_order() -> None:
    data = (SKILL / "manifest.json").read_bytes()
    manifest = loads_strict(data.rstrip(b"\n"))
    assert canonical_bytes(manifest) + b"\n" == data
    assert manifest["name"] == "agent-policy" and manifest["entry"] == "SKILL.md"
    assert manifest["command"] == ["attest", "bootstrap"]
    assert [s["name"] for s in manifest["steps"]] == BOOTSTRAP_STEPS
    assert [s["step"] for s in manifest["steps"]] == list(range(1, 10))
    actions = [a for s in manifest["steps"] for a in s["actions"]]
    assert actions == list(range(1, len(ADR_ORDER) + 1))
    for option in manifest["required_options"] + manifest["optional_options"] + [o for h in manifest["host_options"] for o in h]:
        assert re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", INVOCATION), option
    assert manifest["handoff"]["procedure"] == ".agents/skills/pr-review/SKILL.md"


def test_the_skill_recipe_installs_this_tree() -> None:
    from attest.builder._recipe import load_recipe
    from attest.inventory import inventory_tree

    recipe = load_recipe(ROOT / "builders" / "skill.toml")
    assert recipe.kind == "skill" and recipe.subtree == "skills/agent-policy" and recipe.root == "agent-policy"
    inv = inventory_tree(SKILL)  # a closed tree: regular files and directories only, good names
    assert sorted(e.path for e in inv.entries) == ["SKILL.md", "manifest.json"]
