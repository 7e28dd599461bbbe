"""`.agent-policy.yml`: every field validated, every problem with its own code, all of them reported."""

from __future__ import annotations

import hashlib

import pytest

from attest.errors import InputError
from attest.policy import PolicyConfig

REV = "0123456789abcdef0123456789abcdef01234567"
GOOD = f"""\
schema: 2
toolchain:
  repository: https://github.com/attest-dev/attest
  revision: {REV}
skills:
  enabled: [pr-review]
contexts:
  review:
    modules: [policy/core/evidence.md, policy/review/findings.md]
  security:
    modules: [policy/security/secrets.md]
outputs:
  - {{path: docs/review/policy-context.md, renderer: policy-context-md, context: review, enabled: true}}
  - {{path: docs/review/github-review.json, renderer: github-review-json-adapter-v1, context: review, enabled: true}}
  - {{path: docs/security.md, renderer: policy-context-md, context: security, enabled: false}}
"""

SEMANTIC = "{path: docs/review/policy-context.md, renderer: policy-context-md, context: review, enabled: true}"
ADAPTER = "{path: docs/review/github-review.json, renderer: github-review-json-adapter-v1, context: review, enabled: true}"


def test_the_good_config_parses_into_its_model() -> None:
    data = GOOD.encode()
    config = PolicyConfig.from_bytes(data)
    assert config.sha256 == hashlib.sha256(data).hexdigest()
    assert config.toolchain.revision == REV and config.pr_review
    assert [c.name for c in config.contexts] == ["review", "security"]
    assert config.inputs == ("policy/core/evidence.md", "policy/review/findings.md", "policy/security/secrets.md")
    assert [o.path for o in config.enabled_outputs] == ["docs/review/policy-context.md", "docs/review/github-review.json"]
    assert config.semantic_output("review").path == "docs/review/policy-context.md"


def test_a_64_hex_sha256_revision_is_a_full_sha() -> None:
    config = PolicyConfig.from_bytes(GOOD.replace(REV, "ab" * 32).encode())
    assert config.toolchain.revision == "ab" * 32


def test_no_skill_and_no_output_is_a_valid_config() -> None:
    text = GOOD.replace("[pr-review]", "[]")
    text = text[: text.index("outputs:")] + "outputs: []\n"
    config = PolicyConfig.from_bytes(text.encode())
    assert not config.pr_review and config.outputs == ()


CASES = [
    # (id, old, new, codes)
    ("schema 1", "schema: 2", "schema: 1", ["CONFIG_SCHEMA"]),
    ("schema as a string", "schema: 2", "schema: '2'", ["CONFIG_SCHEMA"]),
    ("schema missing", "schema: 2\n", "", ["CONFIG_MISSING_FIELD"]),
    ("unknown top field", "schema: 2\n", "schema: 2\nprofile: strict\n", ["CONFIG_UNKNOWN_FIELD"]),
    ("unknown toolchain field", "  revision:", "  branch: main\n  revision:", ["CONFIG_UNKNOWN_FIELD"]),
    ("unknown output field", "enabled: true}\n  - {path: docs/review/github", "enabled: true, mode: 644}\n  - {path: docs/review/github",
     ["CONFIG_UNKNOWN_FIELD"]),
    ("unknown context field", "  security:\n    modules:", "  security:\n    order: 1\n    modules:", ["CONFIG_UNKNOWN_FIELD"]),
    ("output field missing", ", context: security, enabled: false}", ", context: security}", ["CONFIG_MISSING_FIELD"]),
    ("toolchain missing", "toolchain:\n  repository: https://github.com/attest-dev/attest\n  revision: " + REV + "\n", "",
     ["CONFIG_MISSING_FIELD"]),
    ("not a mapping", "schema: 2\n", "- schema: 2\n", None),
    ("abbreviated sha", REV, REV[:12], ["TOOLCHAIN_NOT_FULL_SHA"]),
    ("uppercase sha", REV, REV.upper(), ["TOOLCHAIN_NOT_FULL_SHA"]),
    ("branch name", REV, "main", ["TOOLCHAIN_NOT_FULL_SHA"]),
    ("41 hex", REV, REV + "0", ["TOOLCHAIN_NOT_FULL_SHA"]),
    ("http repository", "https://github.com/attest-dev/attest", "http://github.com/attest-dev/attest", ["CONFIG_BAD_VALUE"]),
    ("repository with userinfo", "https://github.com/attest-dev/attest", "https://me@github.com/attest-dev/attest", ["CONFIG_BAD_VALUE"]),
    ("repository with ..", "https://github.com/attest-dev/attest", "https://github.com/attest-dev/../x", ["CONFIG_BAD_VALUE"]),
    ("unknown skill", "[pr-review]", "[pr-review, pr-merge-gate]", ["UNKNOWN_SKILL"]),
    ("skill twice", "[pr-review]", "[pr-review, pr-review]", ["CONFIG_BAD_VALUE"]),
    ("skills not a list", "[pr-review]", "pr-review", ["CONFIG_BAD_VALUE"]),
    ("empty context", "modules: [policy/security/secrets.md]", "modules: []", ["CONFIG_BAD_VALUE"]),
    ("bad context name", "  security:", "  Security:", ["CONFIG_BAD_VALUE", "UNKNOWN_CONTEXT"]),
    ("module outside the namespaces", "policy/security/secrets.md", "docs/secrets.md", ["MODULE_PATH"]),
    ("module not markdown", "policy/security/secrets.md", "policy/security/secrets.txt", ["MODULE_PATH"]),
    ("module with ..", "policy/security/secrets.md", "policy/security/../../etc/x.md", ["PATH_NOT_NORMAL"]),
    ("module absolute", "policy/security/secrets.md", "/policy/security/secrets.md", ["PATH_ABSOLUTE"]),
    ("module in .git", "policy/security/secrets.md", "policy/security/.git/x.md", ["PATH_DOTGIT"]),
    ("module twice", "[policy/security/secrets.md]", "[policy/security/secrets.md, policy/security/secrets.md]", ["PATH_CONFLICT"]),
    ("unknown renderer", "renderer: policy-context-md, context: security", "renderer: policy-context-html, context: security",
     ["UNKNOWN_RENDERER"]),
    ("the Skill renderer as an output", "renderer: policy-context-md, context: security", "renderer: pr-review-skill-v1, context: security",
     ["UNKNOWN_RENDERER"]),
    ("unknown context", "context: security, enabled: false", "context: nosuch, enabled: false", ["UNKNOWN_CONTEXT"]),
    ("enabled not a boolean", "context: security, enabled: false", "context: security, enabled: 'false'", ["CONFIG_BAD_VALUE"]),
    ("output in .github", "path: docs/security.md", "path: .github/REVIEW_GUIDELINES.md", ["PATH_RESERVED"]),
    ("output under .agents", "path: docs/security.md", "path: .agents/skills/pr-review/extra.md", ["PATH_RESERVED"]),
    ("output with ..", "path: docs/security.md", "path: docs/../security.md", ["PATH_NOT_NORMAL"]),
    ("output with backslash", "path: docs/security.md", "path: 'docs\\security.md'", ["PATH_BACKSLASH"]),
    ("output on the config", "path: docs/security.md", "path: .agent-policy.yml", ["PATH_RESERVED"]),
    ("output on the lock", "path: docs/security.md", "path: .agent-policy.lock", ["PATH_RESERVED"]),
    ("output in a module namespace", "path: docs/security.md", "path: policy/security/generated.md", ["PATH_RESERVED"]),
    ("two outputs on one path", "path: docs/security.md", "path: docs/review/policy-context.md", ["PATH_CONFLICT"]),
    ("two outputs on one path by case", "path: docs/security.md", "path: docs/Review/Policy-Context.md", ["PATH_CONFLICT"]),
    ("an output where another needs a directory", "path: docs/security.md", "path: docs/review/policy-context.md/x.md", ["PATH_CONFLICT"]),
    ("adapter without semantic projection", SEMANTIC, SEMANTIC.replace("enabled: true", "enabled: false"), ["ADAPTER_UNBOUND"]),
    ("adapter with two semantic projections", SEMANTIC, SEMANTIC + "\n  - " + SEMANTIC.replace("policy-context.md", "again.md"),
     ["ADAPTER_UNBOUND"]),
    ("outputs not a list", "outputs:\n", "outputs: {}\nx:\n", None),
    ("a YAML refusal", "schema: 2", "schema: 2\nschema: 2", ["YAML_DUPLICATE_KEY"]),
]


@pytest.mark.parametrize(("old", "new", "codes"), [(o, n, c) for _, o, n, c in CASES], ids=[i for i, _, _, _ in CASES])
def test_refusals(old: str, new: str, codes: list[str] | None) -> None:
    assert old in GOOD, old
    with pytest.raises(InputError) as e:
        PolicyConfig.from_bytes(GOOD.replace(old, new, 1).encode())
    got = [f.code for f in e.value.findings]
    if codes is None:
        assert got and all(c.startswith("CONFIG_") or c.startswith("YAML_") for c in got), got
    else:
        assert got == codes, e.value
    assert e.value.exit_code == 2


def test_every_problem_is_reported_at_once() -> None:
    text = GOOD.replace(REV, "main").replace("[pr-review]", "[nope]").replace("path: docs/security.md", "path: .github/x.md")
    with pytest.raises(InputError) as e:
        PolicyConfig.from_bytes(text.encode())
    assert {f.code for f in e.value.findings} == {"TOOLCHAIN_NOT_FULL_SHA", "UNKNOWN_SKILL", "PATH_RESERVED"}


def test_too_many_outputs_is_a_bounded_refusal() -> None:
    line = "  - {path: docs/o%d.md, renderer: policy-context-md, context: review, enabled: false}\n"
    text = GOOD[: GOOD.index("outputs:")] + "outputs:\n" + "".join(line % i for i in range(65))
    with pytest.raises(InputError) as e:
        PolicyConfig.from_bytes(text.encode())
    assert e.value.code == "CONFIG_BAD_VALUE" and "limit" in e.value.detail
