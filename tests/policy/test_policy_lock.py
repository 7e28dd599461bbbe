"""`.agent-policy.lock`: one canonical byte form (checked with the independent rfc8785 encoder), strict fields, agreement."""

from __future__ import annotations

import json
from typing import Any

import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from attest.errors import InputError
from attest.policy import LockedInput, LockedOutput, PolicyConfig, PolicyLock, Toolchain, check_agreement
from attest.policy._render import planned_outputs

REV = "0123456789abcdef0123456789abcdef01234567"
H = "ab" * 32


def lock_doc() -> dict[str, Any]:
    return {
        "config": {"path": ".agent-policy.yml", "sha256": H},
        "inputs": [{"path": "policy/core/evidence.md", "sha256": H}, {"path": "policy/review/findings.md", "sha256": H}],
        "outputs": [
            {"context": None, "path": ".agents/skills/pr-review/SKILL.md", "renderer": "pr-review-skill-v1", "sha256": H},
            {"context": "review", "path": "docs/review/github-review.json", "renderer": "github-review-json-adapter-v1", "sha256": H},
            {"context": "review", "path": "docs/review/policy-context.md", "renderer": "policy-context-md", "sha256": H},
        ],
        "schema": 2,
        "toolchain": {"repository": "https://github.com/attest-dev/attest", "revision": REV},
    }


def test_the_lock_round_trips_through_its_one_canonical_form() -> None:
    data = rfc8785.dumps(lock_doc())
    lock = PolicyLock.from_bytes(data)
    assert lock.to_bytes() == data
    assert lock.toolchain == Toolchain("https://github.com/attest-dev/attest", REV)
    assert lock.output(".agents/skills/pr-review/SKILL.md") == LockedOutput(".agents/skills/pr-review/SKILL.md", "pr-review-skill-v1", None, H)
    assert lock.input("policy/core/evidence.md") == LockedInput("policy/core/evidence.md", H)
    assert lock.output("nope") is None and lock.input("nope") is None


_name = st.text(alphabet=st.characters(codec="utf-8", categories=["L", "N", "So"], include_characters="-_."), min_size=1, max_size=12).filter(
    lambda s: s not in (".", "..") and not s.lower().startswith(".git") and not s.lower().startswith("git~"))


@settings(max_examples=150, deadline=None)
@given(names=st.lists(_name, min_size=1, max_size=6, unique=True), digest=st.text(alphabet="0123456789abcdef", min_size=64, max_size=64))
def test_to_bytes_is_what_an_independent_rfc8785_encoder_writes(names: list[str], digest: str) -> None:
    from attest.inventory import sort_key
    from attest.policy import PathRole, check_authority_path

    paths = sorted({f"docs/{n}.md" for n in names if check_authority_path(f"docs/{n}.md", PathRole.OUTPUT) is None}, key=sort_key)
    lock = PolicyLock(Toolchain("https://github.com/attest-dev/attest", REV), digest,
                      (LockedInput("policy/core/a.md", digest),),
                      tuple(LockedOutput(p, "policy-context-md", "review", digest) for p in paths))
    assert lock.to_bytes() == rfc8785.dumps(lock.to_json())
    assert PolicyLock.from_bytes(lock.to_bytes()) == lock


def _edit(fn: Any) -> bytes:
    doc = lock_doc()
    fn(doc)
    return rfc8785.dumps(doc)


REFUSED = [
    ("trailing newline", rfc8785.dumps(lock_doc()) + b"\n", "NOT_CANONICAL"),
    ("pretty-printed", json.dumps(lock_doc(), indent=1, sort_keys=True).encode(), "NOT_CANONICAL"),
    ("keys unsorted", json.dumps(dict(reversed(lock_doc().items())), separators=(",", ":")).encode(), "NOT_CANONICAL"),
    ("escaped where JCS is literal", rfc8785.dumps(lock_doc()).replace(b"policy/core", b"polic\\u0079/core"), "NOT_CANONICAL"),
    ("duplicate key", rfc8785.dumps(lock_doc()).replace(b'"schema":2', b'"schema":2,"schema":2'), "DUPLICATE_KEY"),
    ("not JSON", b"schema = 2", "BAD_JSON"),
    ("unknown field", _edit(lambda d: d.update(profile="x")), "LOCK_INVALID"),
    ("missing field", _edit(lambda d: d.pop("inputs")), "LOCK_INVALID"),
    ("unknown output field", _edit(lambda d: d["outputs"][0].update(mode=420)), "LOCK_INVALID"),
    ("schema 1", _edit(lambda d: d.update(schema=1)), "CONFIG_SCHEMA"),
    ("schema true", _edit(lambda d: d.update(schema=True)), "CONFIG_SCHEMA"),
    ("config path", _edit(lambda d: d["config"].update(path="x.yml")), "LOCK_INVALID"),
    ("short digest", _edit(lambda d: d["inputs"][0].update(sha256="ab")), "LOCK_INVALID"),
    ("uppercase digest", _edit(lambda d: d["config"].update(sha256=H.upper())), "LOCK_INVALID"),
    ("abbreviated revision", _edit(lambda d: d["toolchain"].update(revision=REV[:7])), "TOOLCHAIN_NOT_FULL_SHA"),
    ("repository not https", _edit(lambda d: d["toolchain"].update(repository="git@github.com:a/b")), "LOCK_INVALID"),
    ("inputs unsorted", _edit(lambda d: d["inputs"].reverse()), "LOCK_INVALID"),
    ("outputs unsorted", _edit(lambda d: d["outputs"].reverse()), "LOCK_INVALID"),
    ("input twice", _edit(lambda d: d["inputs"].append(d["inputs"][-1])), "LOCK_INVALID"),
    ("inputs not a list", _edit(lambda d: d.update(inputs={})), "LOCK_INVALID"),
    ("unknown renderer", _edit(lambda d: d["outputs"][2].update(renderer="policy-context-html")), "UNKNOWN_RENDERER"),
    ("Skill file with a context", _edit(lambda d: d["outputs"][0].update(context="review")), "LOCK_INVALID"),
    ("output without a context", _edit(lambda d: d["outputs"][1].update(context=None)), "LOCK_INVALID"),
    ("input outside the module namespaces", _edit(lambda d: d["inputs"][0].update(path="docs/a.md")), "MODULE_PATH"),
    ("output in .github", _edit(lambda d: d["outputs"][2].update(path=".github/x.md")), "PATH_RESERVED"),
    ("output with ..", _edit(lambda d: d["outputs"][2].update(path="docs/../x.md")), "PATH_NOT_NORMAL"),
    ("Skill file outside its tree", _edit(lambda d: d["outputs"][0].update(path=".agents/skills/other/SKILL.md")), "PATH_OUTSIDE_SKILL"),
    ("path not a string", _edit(lambda d: d["inputs"][0].update(path=1)), "LOCK_INVALID"),
]


@pytest.mark.parametrize(("data", "code"), [(d, c) for _, d, c in REFUSED], ids=[i for i, _, _ in REFUSED])
def test_refusals(data: bytes, code: str) -> None:
    with pytest.raises(InputError) as e:
        PolicyLock.from_bytes(data)
    assert e.value.code == code, e.value
    assert e.value.exit_code == 2


CONFIG = f"""\
schema: 2
toolchain: {{repository: https://github.com/attest-dev/attest, revision: {REV}}}
skills: {{enabled: [pr-review]}}
contexts:
  review: {{modules: [policy/core/evidence.md, policy/review/findings.md]}}
outputs:
  - {{path: docs/review/policy-context.md, renderer: policy-context-md, context: review, enabled: true}}
  - {{path: docs/review/github-review.json, renderer: github-review-json-adapter-v1, context: review, enabled: true}}
"""


def _config(text: str = CONFIG) -> PolicyConfig:
    return PolicyConfig.from_bytes(text.encode())


def _agreeing_lock(config: PolicyConfig) -> dict[str, Any]:
    doc = lock_doc()
    doc["config"]["sha256"] = config.sha256
    doc["outputs"] = [{"context": c, "path": p, "renderer": r, "sha256": H} for p, r, c in planned_outputs(config)]
    return doc


AGREEMENT = [
    ("agrees", lambda d: None, CONFIG, []),
    ("toolchain revision differs", lambda d: d["toolchain"].update(revision="f" * 40), CONFIG, ["LOCK_TOOLCHAIN_MISMATCH"]),
    ("toolchain repository differs", lambda d: d["toolchain"].update(repository="https://example.org/fork"), CONFIG,
     ["LOCK_TOOLCHAIN_MISMATCH"]),
    ("config digest differs", lambda d: d["config"].update(sha256="cd" * 32), CONFIG, ["CONFIG_DIGEST_MISMATCH"]),
    ("an input the config no longer names", lambda d: d["inputs"].append({"path": "policy/security/x.md", "sha256": H}), CONFIG,
     ["LOCK_STALE"]),
    ("an input the lock lacks", lambda d: d["inputs"].pop(), CONFIG, ["LOCK_STALE"]),
    ("an output the lock lacks", lambda d: d["outputs"].pop(), CONFIG, ["LOCK_STALE"]),
    ("an output no longer configured", lambda d: d["outputs"].append(
        {"context": "review", "path": "docs/z.md", "renderer": "policy-context-md", "sha256": H}), CONFIG, ["LOCK_STALE"]),
    ("a renderer swapped", lambda d: [o.update(renderer="policy-context-md") for o in d["outputs"] if o["path"].endswith(".json")], CONFIG,
     ["LOCK_STALE"]),
]


@pytest.mark.parametrize(("edit", "config_text", "codes"), [(e, t, c) for _, e, t, c in AGREEMENT], ids=[i for i, _, _, _ in AGREEMENT])
def test_agreement_is_exact(edit: Any, config_text: str, codes: list[str]) -> None:
    config = _config(config_text)
    doc = _agreeing_lock(config)
    edit(doc)
    from attest.inventory import sort_key

    doc["inputs"].sort(key=lambda i: sort_key(i["path"]))
    doc["outputs"].sort(key=lambda o: sort_key(o["path"]))
    lock = PolicyLock.from_json(doc)
    assert [f.code for f in check_agreement(config, lock, planned_outputs(config))] == codes


def test_a_disabled_skill_leaves_its_files_stale_in_the_lock() -> None:
    config = _config(CONFIG.replace("[pr-review]", "[]"))
    lock = PolicyLock.from_json(_agreeing_lock(_config()) | {"config": {"path": ".agent-policy.yml", "sha256": config.sha256}})
    found = check_agreement(config, lock, planned_outputs(config))
    assert [(f.code, f.path) for f in found] == [("LOCK_STALE", ".agents/skills/pr-review/SKILL.md"),
                                                 ("LOCK_STALE", ".agents/skills/pr-review/references/procedure.md"),
                                                 ("LOCK_STALE", ".agents/skills/pr-review/references/result.md")]
