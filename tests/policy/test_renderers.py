"""The renderers: the semantic projection, the transport-only adapter, and the pr-review Skill."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest
import rfc8785

from attest.errors import InputError
from attest.policy import (
    PolicyConfig,
    SkillFrontMatter,
    render_github_review_json_adapter_v1,
    render_outputs,
    render_policy_context_md,
    render_pr_review_skill_v1,
)

ROOT = Path(__file__).resolve().parents[2]
BOOTSTRAP_MD = ROOT.parent / "shared" / "BOOTSTRAP.md"
REV = "0123456789abcdef0123456789abcdef01234567"


def _config(contexts: str, outputs: str, skills: str = "[pr-review]") -> PolicyConfig:
    text = (f"schema: 2\ntoolchain: {{repository: https://github.com/attest-dev/attest, revision: {REV}}}\n"
            f"skills: {{enabled: {skills}}}\ncontexts:\n{contexts}outputs:\n{outputs}")
    return PolicyConfig.from_bytes(text.encode())


MODULES = {
    "policy/core/a.md": b"# A\n\nEvery verifier fails closed with a stable reason code.\n",
    "policy/review/b.md": "# B\n\nA finding names its file and line, or says it concerns none. Ünïcödé stays.".encode(),
}
CONFIG = _config(
    "  review: {modules: [policy/core/a.md, policy/review/b.md]}\n",
    "  - {path: docs/review/policy-context.md, renderer: policy-context-md, context: review, enabled: true}\n"
    "  - {path: docs/review/github-review.json, renderer: github-review-json-adapter-v1, context: review, enabled: true}\n",
)


def test_the_semantic_projection_holds_the_modules_in_order_verbatim_with_their_digests() -> None:
    out = render_policy_context_md("review", list(MODULES.items())).decode()
    a, b = (out.index(data.decode().strip()) for data in MODULES.values())
    assert a < b
    for path, data in MODULES.items():
        assert f"| `{path}` | `{hashlib.sha256(data).hexdigest()}` |" in out
    assert out.endswith("Ünïcödé stays.\n")  # a missing final newline is added, nothing else changes
    reversed_out = render_policy_context_md("review", list(reversed(MODULES.items()))).decode()
    assert reversed_out != out


def test_render_outputs_is_in_lock_order_and_the_adapter_is_bound_to_the_semantic_projection() -> None:
    outputs = render_outputs(CONFIG, MODULES)
    assert [o.path for o in outputs] == [".agents/skills/pr-review/SKILL.md", ".agents/skills/pr-review/references/procedure.md",
                                         ".agents/skills/pr-review/references/result.md", "docs/review/github-review.json",
                                         "docs/review/policy-context.md"]
    by_path = {o.path: o for o in outputs}
    adapter = json.loads(by_path["docs/review/github-review.json"].data)
    semantic = by_path["docs/review/policy-context.md"]
    assert adapter["binding"] == {"context": "review", "semantic": {"path": semantic.path, "renderer": "policy-context-md",
                                                                    "sha256": semantic.sha256}}
    assert {o.context for o in outputs if o.renderer == "pr-review-skill-v1"} == {None}


def test_rendering_is_a_pure_function_of_its_arguments() -> None:
    assert render_outputs(CONFIG, MODULES) == render_outputs(CONFIG, dict(reversed(MODULES.items())))


def _module_lines() -> set[str]:
    lines = {line.strip() for data in MODULES.values() for line in data.decode().splitlines()}
    for path in (ROOT / "policy").rglob("*.md"):  # this repository's own modules too
        lines |= {line.strip() for line in path.read_text().splitlines()}
    # A line of markup alone ("#", "-", "|---|") carries no rule.
    return {line for line in lines if len(re.sub(r"[^A-Za-z0-9]", "", line)) >= 3}


def test_the_adapter_copies_no_semantic_module_line() -> None:
    adapter = render_github_review_json_adapter_v1("review", "docs/review/policy-context.md", "ab" * 32).decode()
    text = json.dumps(json.loads(adapter), ensure_ascii=False)
    copied = sorted(line for line in _module_lines() if line in adapter or line in text)
    assert copied == []


def test_the_adapter_depends_on_nothing_but_the_binding() -> None:
    other = dict(MODULES, **{"policy/core/a.md": b"# A\n\nA completely different rule.\n"})
    first = {o.path: o for o in render_outputs(CONFIG, MODULES)}
    second = {o.path: o for o in render_outputs(CONFIG, other)}
    s1, s2 = first["docs/review/policy-context.md"].sha256, second["docs/review/policy-context.md"].sha256
    assert s1 != s2
    assert first["docs/review/github-review.json"].data.replace(s1.encode(), s2.encode()) == second["docs/review/github-review.json"].data


def test_the_adapter_is_canonical_json_and_transport_only() -> None:
    data = render_github_review_json_adapter_v1("review", "docs/review/policy-context.md", "ab" * 32)
    doc = json.loads(data)
    assert data == rfc8785.dumps(doc) + b"\n"
    assert doc["inline"]["sides"] == {"base": "LEFT", "head": "RIGHT"}
    assert {r["event"] for r in doc["events"]["first_match"]} == {"REQUEST_CHANGES", "COMMENT"}
    assert "APPROVE" in doc["events"]["never"] and doc["non_inline"]["lossless"] is True


def test_the_skill_declares_exactly_the_files_it_writes() -> None:
    files = dict(render_pr_review_skill_v1())
    front = SkillFrontMatter.from_bytes(files["SKILL.md"])
    assert front.name == "pr-review" and front.description
    assert set(front.references) == set(files) - {"SKILL.md"}
    assert front.paths()[0] == ".agents/skills/pr-review/SKILL.md"


def _review_commands() -> list[str]:
    """The `attest review start | recheck | serialize` usages BOOTSTRAP.md gives, without their bracketed options."""
    text = BOOTSTRAP_MD.read_text()
    out = []
    for verb in ("start", "recheck", "serialize"):
        usage = re.search(rf"`(attest review {verb} --[^`]*)`", text)
        assert usage is not None, verb
        out.append(re.sub(r"\s*\[[^\]]*\]", "", " ".join(usage.group(1).split())))
    return out


@pytest.mark.skipif(not BOOTSTRAP_MD.exists(), reason="needs ../shared/BOOTSTRAP.md beside the repository")
def test_the_skill_names_the_review_commands_of_bootstrap_md() -> None:
    procedure = dict(render_pr_review_skill_v1())["references/procedure.md"].decode()
    blocks = {b.split()[2]: b for b in re.findall(r"```\n(attest review [^`]*)```", procedure)}
    assert sorted(blocks) == ["recheck", "serialize", "start"]
    for command in _review_commands():
        # Each command is spelled with every option BOOTSTRAP.md gives it, in the same order.
        options = re.findall(r"(?<!\S)(--[a-z-]+|-o)(?!\S)", command)
        got = re.findall(r"(?<!\S)(--[a-z-]+|-o)(?!\S)", blocks[command.split()[2]])
        assert [o for o in got if o in options] == options, (command, got)


def test_the_skill_names_no_context_and_no_configured_path() -> None:
    text = b"".join(data for _, data in render_pr_review_skill_v1()).decode()
    for forbidden in ("docs/review", "policy/core", "policy/review/", "policy/security", "context `", "github-review.json"):
        assert forbidden not in text
    # Whatever the configuration, the Skill's bytes are the same.
    other = _config("  security: {modules: [policy/core/a.md]}\n",
                    "  - {path: out/s.md, renderer: policy-context-md, context: security, enabled: true}\n")
    skill_of = lambda config: [o for o in render_outputs(config, MODULES) if o.renderer == "pr-review-skill-v1"]  # noqa: E731
    assert skill_of(CONFIG) == skill_of(other)


def test_without_pr_review_no_skill_is_rendered() -> None:
    config = _config("  review: {modules: [policy/core/a.md]}\n",
                     "  - {path: docs/p.md, renderer: policy-context-md, context: review, enabled: true}\n", skills="[]")
    assert [o.path for o in render_outputs(config, MODULES)] == ["docs/p.md"]


SKILL = dict(render_pr_review_skill_v1())["SKILL.md"]
FRONT_MATTER_REFUSALS = [
    ("no front matter", b"# pr-review\n", "SKILL_FRONT_MATTER"),
    ("never closed", b"---\nname: pr-review\nreferences: []\n", "SKILL_FRONT_MATTER"),
    ("not a mapping", b"---\n[a]\n---\n", "SKILL_FRONT_MATTER"),
    ("unknown field", b"---\nname: pr-review\nreferences: []\ncontext: review\n---\n", "SKILL_FRONT_MATTER"),
    ("no references", b"---\nname: pr-review\n---\n", "SKILL_FRONT_MATTER"),
    ("bad name", b"---\nname: PR Review\nreferences: []\n---\n", "SKILL_FRONT_MATTER"),
    ("description not a string", b"---\nname: pr-review\ndescription: [x]\nreferences: []\n---\n", "SKILL_FRONT_MATTER"),
    ("references not a list", b"---\nname: pr-review\nreferences: a.md\n---\n", "SKILL_FRONT_MATTER"),
    ("a reference with ..", b"---\nname: pr-review\nreferences: [../../../.github/x.md]\n---\n", "PATH_NOT_NORMAL"),
    ("an absolute reference", b"---\nname: pr-review\nreferences: [/etc/passwd]\n---\n", "PATH_ABSOLUTE"),
    ("a reference in .git", b"---\nname: pr-review\nreferences: [.git/config]\n---\n", "PATH_DOTGIT"),
    ("a reference with a backslash", b"---\nname: pr-review\nreferences: ['..\\\\x.md']\n---\n", "PATH_BACKSLASH"),
    ("SKILL.md as its own reference", b"---\nname: pr-review\nreferences: [SKILL.md]\n---\n", "SKILL_FRONT_MATTER"),
    ("a reference twice", b"---\nname: pr-review\nreferences: [a.md, a.md]\n---\n", "SKILL_FRONT_MATTER"),
    ("an anchor", b"---\nname: &n pr-review\nreferences: []\n---\n", "YAML_ANCHOR"),
    ("too large", b"---\n" + b"#" * (300 * 1024) + b"\n---\n", "SKILL_FRONT_MATTER"),
]


@pytest.mark.parametrize(("data", "code"), [(d, c) for _, d, c in FRONT_MATTER_REFUSALS], ids=[i for i, _, _ in FRONT_MATTER_REFUSALS])
def test_front_matter_refusals(data: bytes, code: str) -> None:
    with pytest.raises(InputError) as e:
        SkillFrontMatter.from_bytes(data)
    assert e.value.code == code, e.value
