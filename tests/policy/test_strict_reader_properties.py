"""Hostile bytes into every strict reader: a parsed result or a documented refusal, never another exception.

Finding 9: ``"\\U00110000"`` in ``.agent-policy.yml`` (or a SKILL.md front matter) reached the
CLI's catch-all as ``INTERNAL`` (ruamel.yaml's scanner raised ``ValueError``), and so did the
other inputs of ``HOSTILE`` below: a refusal must carry a reason code a reader can act on. The
properties feed each reader random bytes, random text, byte-level mutations of a real document
of this repository and, for the JSON readers, structural mutations (a subtree replaced, dropped
or added), and require either a result or an :class:`AttestError` whose codes are all
documented in docs/reason-codes.toml and none ``INTERNAL``. Any other exception fails the test.

The runs are derandomized and database-less, so CI sees the same examples every time.
"""

from __future__ import annotations

import copy
import json
import re
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from attest._json import canonical_bytes, loads_strict
from attest.attestation import generate_key, load_policy, parse_policy, parse_statement
from attest.builder import load_recipe, parse_pins, parse_pylock, parse_requirements
from attest.errors import AttestError, CommonCode
from attest.policy import PolicyConfig, PolicyLock, SkillFrontMatter, load_strict_yaml
from attest.review.bootstrap import load_identity
from attest.review.handoff import IMAGE_NAMES, parse_handoff, parse_result
from attest.review.procedure import parse_review_state, review_id

ROOT = Path(__file__).resolve().parents[2]

PROPERTY = settings(
    max_examples=120,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)


def _documented_codes() -> frozenset[str]:
    tables = tomllib.loads((ROOT / "docs" / "reason-codes.toml").read_text())
    return frozenset(code for table in tables.values() if isinstance(table, dict) for code in table.get("codes", {}))


DOCUMENTED = _documented_codes() - {CommonCode.INTERNAL.value}


def outcome(read: Callable[[bytes], object], data: bytes) -> list[str]:
    """The codes ``read(data)`` refuses with ([] when it parses); anything but a documented refusal fails."""
    try:
        read(data)
    except AttestError as e:
        codes = [f.code for f in e.findings]
        assert codes and set(codes) <= DOCUMENTED, f"undocumented or INTERNAL refusal {codes} of {data[:200]!r}: {e}"
        return codes
    return []


# -- real documents of this repository, and documents built like the product builds them --------------

_HEX40 = "0123456789abcdef0123456789abcdef01234567"
_HEX64 = "0123456789abcdef" * 4


def _skill_md() -> bytes:
    data = (ROOT / ".agents/skills/pr-review/SKILL.md").read_bytes()
    end = data.index(b"\n---\n", 3) + 5
    return data[: end + 200]  # the front matter and the start of the body: mutations of the rest change nothing


# The trust policy of docs/attestation.md ("Trust policy"), its files beside it.
TRUST_POLICY = b"""threshold = 1                       # distinct trusted signers required (required, >= 1)
[[signers]]
kind = "key"
public_key = "keys/release.pub.pem" # relative to the policy file; ed25519 or ECDSA P-256 PEM
trusted_root = "trusted_root.json"  # optional: checks its bundles' log entries and timestamps
[[signers]]
kind = "sigstore"
identity = "https://github.com/org/repo/.github/workflows/release.yml@refs/heads/main"
issuer = "https://token.actions.githubusercontent.com"
trusted_root = "trusted_root.json"  # Sigstore trusted root, used offline
predicates = ["https://attest.dev/runtime/v1"]  # optional: the only statement types it may sign
"""

PINS = f"""[toolchain]
repository = "https://github.com/attest-dev/attest"
revision = "{_HEX40}"

[runtime]
name = "attest-runtime"
lock_sha256 = "{_HEX64}"
""".encode()

IDENTITY = {"repository": {"id": 1296269, "full_name": "octo/hello"}, "pull_request": {"id": 2, "number": 7},
            "base": {"sha": _HEX40}, "head": {"sha": _HEX40[::-1]}}

# The result format of the pr-review Skill's references/result.md.
RESULT = {"complete": False, "limitations": ["the CI definitions were not examined"],
          "findings": [{"id": "F1", "severity": "high", "blocking": True, "message": "what is wrong and why",
                        "path": "attest/x.py", "line": 42, "side": "RIGHT"},
                       {"id": "F2", "severity": "info", "blocking": False, "message": "a note about no single line"}]}


def _handoff_statement() -> dict[str, Any]:
    """A handoff statement of the shape attest.review.bootstrap.handoff_statement writes."""
    images = {n: {"identity": f"sha256:{i:064x}", "path": f"/var/lib/attest/images/{n}", "backend": "immutable"}
              for i, n in enumerate(IMAGE_NAMES, 1)}
    predicate = {
        "repository": {"id": 1296269, "full_name": "octo/hello"},
        "pull_request": {"id": 2, "number": 7},
        "base": {"commit": _HEX40, "tree": _HEX40[::-1], "object_format": "sha1"},
        "images": images,
        "installation": {"attestation_digest": "sha256:" + _HEX64, "installed_root": "/home/ci/.agents/skills/agent-policy",
                         "installer": {"repository": "https://github.com/attest-dev/attest", "revision": _HEX40},
                         "source": {"repository": "https://github.com/attest-dev/attest", "revision": _HEX40}},
        "runtime": {"name": "0dd3270e44d25b6d4a4d06276571b0f7-attest-runtime", "attestation_digest": "sha256:" + _HEX64},
        "config": {"path": ".agent-policy.yml", "sha256": _HEX64},
        "lock": {"path": ".agent-policy.lock", "sha256": _HEX64},
        "toolchain": {"repository": "https://github.com/attest-dev/attest", "revision": _HEX40},
        "outputs": [],
        "procedure": {"revision": _HEX40, "files": [{"path": "SKILL.md", "sha256": _HEX64},
                                                    {"path": "references/procedure.md", "sha256": _HEX64}]},
        "time": "2026-05-09T07:35:25Z",
    }
    return {"_type": "https://in-toto.io/Statement/v1",
            "subject": [{"name": n, "digest": {"sha256": images[n]["identity"].removeprefix("sha256:")}} for n in IMAGE_NAMES],
            "predicateType": "https://attest.dev/review-handoff/v1", "predicate": predicate}


def _review_state() -> dict[str, Any]:
    """A review state of the shape `attest review start` writes (without its ``review`` id)."""
    head, merge_base = _HEX40[::-1], "f" * 40
    return {
        "format": "https://attest.dev/review-state/v1",
        "handoff": {"path": "/var/lib/attest/handoff.json", "digest": "sha256:" + _HEX64},
        "repo": "/srv/checkout", "host": {"adapter": "identity", "path": "/srv/identity.json"},
        "repository": {"id": 1296269, "full_name": "octo/hello"}, "pull_request": {"id": 2, "number": 7},
        "base": {"commit": _HEX40, "tree": "e" * 40, "object_format": "sha1"}, "head": head, "merge_base": merge_base,
        "images": {n: {"identity": "sha256:" + _HEX64, "path": f"/var/lib/attest/store/{_HEX64}/tree", "backend": "immutable"}
                   for n in IMAGE_NAMES},
        "config": {"sha256": _HEX64}, "lock": {"sha256": _HEX64}, "context": "review",
        "projections": {role: {"path": f"docs/review/{role}.md", "renderer": renderer, "context": "review", "sha256": _HEX64,
                               "image": "sha256:" + _HEX64, "retained": "sha256:" + _HEX64}
                        for role, renderer in (("semantic", "policy-context-md"), ("adapter", "github-review-json-adapter-v1"))},
        "surface": {"base": merge_base, "head": head, "base_tree": "e" * 40, "head_tree": "d" * 40, "paths": [
            {"path": "attest/x.py", "status": "modified", "old_mode": "100644", "new_mode": "100644", "old_oid": "1" * 40,
             "new_oid": "2" * 40, "content": "text", "hunks": [{"left": {"start": 42, "count": 1}, "right": {"start": 42, "count": 1}}]}]},
        "authority_changes": [],
        "change_content": "sha256:" + _HEX64,
        "change": {"identity": "sha256:" + _HEX64, "path": "/var/lib/attest/store/x/tree", "backend": "immutable"},
    }


def _with_review_id(doc: Any) -> bytes:
    """The canonical bytes of a state whose ``review`` is its content's id (so parsing gets past the hash)."""
    if isinstance(doc, dict):
        rest = {k: v for k, v in doc.items() if k != "review"}
        doc = {**rest, "review": review_id(rest)}
    return canonical_bytes(doc)


_REVIEW_ID = re.compile(rb'"review":"([0-9a-f]{32})"')


def _read_review_state(data: bytes) -> object:
    claimed = _REVIEW_ID.search(data)
    return parse_review_state(data, claimed.group(1).decode() if claimed else "0" * 32, "state.json")


def _read_handoff(data: bytes) -> object:
    """What verify_handoff does with a signed payload: strict JSON, a valid statement, a handoff predicate."""
    statement = parse_statement(data)
    return parse_handoff(statement, attestation_digest="sha256:" + _HEX64, signers=("key:sha256:" + _HEX64,))


# -- tokens the mutations splice in: each format's syntax, and the inputs that once ended in INTERNAL ---------

_HUGE = b"1" * 5000  # int() refuses more than 4300 digits with a bare ValueError
YAML_TOKENS = [
    b"\n", b" ", b"  ", b"- ", b": ", b"{", b"}", b"[", b"]", b", ", b"? ", b"!", b"!!str ", b"&a ", b"*a", b"#", b"|", b">-",
    b"|9", b"'", b'"', b"\\", b"---\n", b"...\n", b"%YAML 1.1\n", b"%TAG ! !x\n", b"\t", b"\r", b"~", b"<<", b"yes", b"1.0",
    b"0x1F", b"true", b"12:30", b"\x00", "\u2028".encode(), b"\xc2\x85", b"\xff", b"\xef\xbb\xbf",
    b'"\\U00110000"', b'"\\UFFFFFFFF"', b'"\\uD800"', b'"\\uD83D\\uDE00"', b"%YAML 1.3\n", b"%YAML 1.0\n", b"%YAML 1." + _HUGE + b"\n",
    _HUGE, b"[" * 40, b"{a: " * 20,
]
TOML_TOKENS = [
    b"\n", b" ", b"[", b"]", b"[[", b"]]", b"=", b" = ", b'"', b"'", b'"""', b"'''", b".", b",", b"{", b"}", b"#", b"a", b"1",
    b"true", b"inf", b"nan", b"1979-05-27T07:32:00Z", b"2000-02-30", b"0x", b"\\", b"\\u", b"\\U00110000", b"\\uD800", b"\x00",
    b"\xff", b"\r", _HUGE, b"0x" + b"f" * 5000, b"[" * 2000, b"{a=" * 1000, b"version = \"" + _HUGE + b"\"", b"-" + _HUGE + b".whl",
    b"\\u0000", b"((((", b"python_version > '", b"; ",
]
JSON_TOKENS = [
    b"{", b"}", b"[", b"]", b",", b":", b'"', b"\\", b"\\u", b"\\uD800", b"\\uDFFF", b"\\u0000", b"null", b"true", b"NaN",
    b"Infinity", b"-", b"1e999", b"0.1", b"9007199254740993", _HUGE, b"[" * 3000, b'{"a":' * 100, b"\xff", b"\xef\xbb\xbf",
    b" ", b"\n", b'"review"', b'"sha256:', b"/", b"..", b"\x00",
]


@st.composite
def _mutant(draw: st.DrawFn, sample: bytes, tokens: list[bytes]) -> bytes:
    """``sample`` after 1 to 6 splices: insert, replace or delete a span, duplicate or drop a line, truncate."""
    data = bytearray(sample)
    token = st.sampled_from(tokens) | st.binary(min_size=1, max_size=4)
    for _ in range(draw(st.integers(1, 6))):
        i = draw(st.integers(0, len(data)))
        op = draw(st.sampled_from(["insert", "replace", "delete", "line", "truncate"]))
        if op == "insert":
            data[i:i] = draw(token)
        elif op == "replace":
            data[i : i + draw(st.integers(1, 12))] = draw(token)
        elif op == "delete":
            del data[i : i + draw(st.integers(1, 40))]
        elif op == "line":
            start = data.rfind(b"\n", 0, i) + 1
            end = data.find(b"\n", i)
            end = len(data) if end < 0 else end + 1
            data[start:start] = data[start:end] if draw(st.booleans()) else b""
            if not draw(st.booleans()):
                del data[start:end]
        else:
            del data[i:]
    return bytes(data)


_JSON_LEAF = (st.none() | st.booleans() | st.integers(-(2**53) + 1, 2**53 - 1) | st.text(max_size=12)
              | st.sampled_from(["", "/", "..", "a/../b", "sha256:" + _HEX64, _HEX40, "0" * 32, "LEFT", "high", "sha1",
                                 "identity", "github", "https://in-toto.io/Statement/v1", "https://attest.dev/review-handoff/v1"]))
JSON_VALUES = st.recursive(_JSON_LEAF, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
                           max_leaves=8)


def _slots(doc: Any) -> list[tuple[Any, Any]]:
    """Every (container, key or index) of ``doc``, depth first."""
    out: list[tuple[Any, Any]] = []
    stack = [doc]
    while stack:
        node = stack.pop()
        items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for key, child in items:
            out.append((node, key))
            stack.append(child)
    return out


@st.composite
def _tree_mutant(draw: st.DrawFn, sample: Any) -> Any:
    """``sample`` (a JSON document) with 1 to 3 subtrees replaced, removed or given a sibling."""
    doc = copy.deepcopy(sample)
    for _ in range(draw(st.integers(1, 3))):
        slots = _slots(doc)
        if not slots:
            return draw(JSON_VALUES)
        container, key = draw(st.sampled_from(slots))
        op = draw(st.sampled_from(["replace", "replace", "remove", "add"]))
        if op == "replace":
            container[key] = draw(JSON_VALUES)
        elif op == "remove":
            del container[key]
        elif isinstance(container, dict):
            container[draw(st.text(max_size=8))] = draw(JSON_VALUES)
        else:
            container.append(draw(JSON_VALUES))
    return doc


# -- the readers -----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Reader:
    read: Callable[[bytes], object]
    samples: tuple[bytes, ...]
    tokens: list[bytes]
    tree: Callable[[Any], bytes] | None = None   # how a structurally mutated document is encoded (JSON readers)


def _in_file(directory: Path, name: str, load: Callable[[str], object]) -> Callable[[bytes], object]:
    path = directory / name
    path.parent.mkdir(parents=True, exist_ok=True)

    def read(data: bytes) -> object:
        path.write_bytes(data)
        return load(str(path))

    return read


@pytest.fixture(scope="module")
def readers(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Reader]:
    work = tmp_path_factory.mktemp("strict-readers")
    trust = work / "trust"
    (trust / "keys").mkdir(parents=True)
    generate_key("ed25519", trust / "keys" / "release.pem")
    shutil.copyfile(ROOT / "tests/data/sigstore/staging_trusted_root.json", trust / "trusted_root.json")
    config = (ROOT / ".agent-policy.yml").read_bytes()
    skill = _skill_md()
    yaml_samples = (config, skill[4 : skill.index(b"\n---\n") + 1])
    return {
        "strict YAML": Reader(lambda d: load_strict_yaml(d, what="document"), yaml_samples, YAML_TOKENS),
        ".agent-policy.yml": Reader(PolicyConfig.from_bytes, (config,), YAML_TOKENS),
        "SKILL.md front matter": Reader(SkillFrontMatter.from_bytes, (skill,), YAML_TOKENS),
        "strict JSON": Reader(loads_strict, ((ROOT / ".agent-policy.lock").read_bytes(), canonical_bytes(_handoff_statement())),
                              JSON_TOKENS, lambda doc: json.dumps(doc).encode()),
        ".agent-policy.lock": Reader(PolicyLock.from_bytes, ((ROOT / ".agent-policy.lock").read_bytes(),), JSON_TOKENS, canonical_bytes),
        "identity file": Reader(_in_file(work, "identity.json", load_identity), (json.dumps(IDENTITY).encode(),), JSON_TOKENS,
                                lambda doc: json.dumps(doc).encode()),
        "handoff statement": Reader(_read_handoff, (canonical_bytes(_handoff_statement()),), JSON_TOKENS, canonical_bytes),
        "review state": Reader(_read_review_state, (_with_review_id(_review_state()),), JSON_TOKENS, _with_review_id),
        "review result": Reader(parse_result, (json.dumps(RESULT).encode(),), JSON_TOKENS, lambda doc: json.dumps(doc).encode()),
        "pylock.toml": Reader(parse_pylock, ((ROOT / "lockfiles/pylock.toml").read_bytes(),), TOML_TOKENS),
        "requirements lock": Reader(parse_requirements, (b"idna==3.10 --hash=sha256:" + _HEX64.encode() + b" ; python_version >= '3.8'\n",),
                                    TOML_TOKENS),
        "recipe": Reader(_in_file(work, "builders/recipe.toml", load_recipe),
                         tuple(p.read_bytes() for p in sorted((ROOT / "builders").glob("*.toml"))), TOML_TOKENS),
        "trust policy": Reader(lambda d: parse_policy(d, "policy.toml"), (TRUST_POLICY,), TOML_TOKENS),
        "trust policy and its files": Reader(_in_file(trust, "policy.toml", load_policy), (TRUST_POLICY,), TOML_TOKENS),
        "pins": Reader(lambda d: parse_pins(d, "pins.toml"), (PINS,), TOML_TOKENS),
    }


READERS = ["strict YAML", ".agent-policy.yml", "SKILL.md front matter", "strict JSON", ".agent-policy.lock", "identity file",
           "handoff statement", "review state", "review result", "pylock.toml", "requirements lock", "recipe", "trust policy",
           "trust policy and its files", "pins"]


@pytest.mark.parametrize("name", READERS)
def test_the_real_samples_parse(readers: dict[str, Reader], name: str) -> None:
    """The mutations start from documents the reader accepts (else they would test only the first refusal)."""
    for sample in readers[name].samples:
        assert outcome(readers[name].read, sample) == [], name


@pytest.mark.parametrize("name", READERS)
@PROPERTY
@given(data=st.data())
def test_random_bytes_and_text_parse_or_are_refused(readers: dict[str, Reader], name: str, data: st.DataObject) -> None:
    reader = readers[name]
    raw = data.draw(st.binary(max_size=400) | st.text(max_size=200).map(lambda s: s.encode("utf-8", "surrogatepass"))
                    | st.lists(st.sampled_from(reader.tokens), max_size=24).map(b"".join))
    outcome(reader.read, raw)


@pytest.mark.parametrize("name", READERS)
@PROPERTY
@given(data=st.data())
def test_mutated_real_documents_parse_or_are_refused(readers: dict[str, Reader], name: str, data: st.DataObject) -> None:
    reader = readers[name]
    sample = data.draw(st.sampled_from(reader.samples))
    outcome(reader.read, data.draw(_mutant(sample, reader.tokens)))


@pytest.mark.parametrize("name", [n for n in READERS if n in {"strict JSON", ".agent-policy.lock", "identity file", "handoff statement",
                                                              "review state", "review result"}])
@PROPERTY
@given(data=st.data())
def test_structurally_mutated_json_documents_parse_or_are_refused(readers: dict[str, Reader], name: str, data: st.DataObject) -> None:
    reader = readers[name]
    assert reader.tree is not None
    doc = json.loads(data.draw(st.sampled_from(reader.samples)))
    outcome(reader.read, reader.tree(data.draw(_tree_mutant(doc))))


# -- the inputs that ended in INTERNAL, each refused with its code ---------------------------------------------------

HOSTILE = [
    # (id, reader, bytes, the codes it may be refused with)
    ("YAML escape beyond U+10FFFF", "strict YAML", b'a: "\\U00110000"\n', {"YAML_SYNTAX"}),
    ("YAML escape beyond U+10FFFF in a key", "strict YAML", b'"\\U00110000": a\n', {"YAML_SYNTAX"}),
    ("YAML escape beyond U+10FFFF in a flow sequence", "strict YAML", b'a: ["\\U00110000"]\n', {"YAML_SYNTAX"}),
    ("YAML escape beyond 2^31", "strict YAML", b'a: "\\UFFFFFFFF"\n', {"YAML_SYNTAX"}),
    ("YAML lone surrogate escape", "strict YAML", b'a: "\\uD800"\n', {"YAML_SYNTAX"}),
    ("YAML surrogate pair escapes", "strict YAML", b'"\\uD83D\\uDE00": a\n', {"YAML_SYNTAX"}),
    # ruamel asserts the version; under python -O the directive is refused as one
    ("%YAML 1.3", "strict YAML", b"%YAML 1.3\n---\na: 1\n", {"YAML_SYNTAX", "YAML_DIRECTIVE"}),
    ("%YAML 1.0", "strict YAML", b"%YAML 1.0\n---\na: 1\n", {"YAML_SYNTAX", "YAML_DIRECTIVE"}),
    ("%YAML with a 5000-digit number", "strict YAML", b"%YAML 1." + _HUGE + b"\n---\na: 1\n", {"YAML_SYNTAX", "YAML_DIRECTIVE"}),
    ("YAML 5000-digit integer", "strict YAML", b"a: " + _HUGE + b"\n", {"YAML_AMBIGUOUS_SCALAR"}),
    ("YAML 5000-digit negative integer", "strict YAML", b"a: [-" + _HUGE + b"]\n", {"YAML_AMBIGUOUS_SCALAR"}),
    ("config escape beyond U+10FFFF", ".agent-policy.yml", b'schema: 2\ntoolchain:\n  repository: "\\U00110000"\n', {"YAML_SYNTAX"}),
    ("SKILL.md escape beyond U+10FFFF", "SKILL.md front matter",
     b'---\nname: pr-review\ndescription: "\\U00110000"\nreferences: [references/procedure.md]\n---\n# x\n', {"YAML_SYNTAX"}),
    ("SKILL.md lone surrogate escape", "SKILL.md front matter",
     b'---\nname: pr-review\ndescription: "\\uDFFF"\nreferences: [references/procedure.md]\n---\n# x\n', {"YAML_SYNTAX"}),
    ("pylock 5000-digit integer", "pylock.toml", b"lock-version = " + _HUGE + b"\n", {"BAD_LOCK"}),
    ("pylock deep array", "pylock.toml", b"a = " + b"[" * 3000 + b"]" * 3000 + b"\n", {"BAD_LOCK"}),
    ("pylock deep inline table", "pylock.toml", b"a = " + b"{b = " * 2000 + b"1" + b"}" * 2000 + b"\n", {"BAD_LOCK"}),
    ("pylock 5000-digit version", "pylock.toml",
     b'lock-version = "1.0"\n[[packages]]\nname = "a"\nversion = "' + _HUGE + b'"\n', {"LOCK_NOT_PINNED"}),
    ("pylock wheel of a 5000-digit version", "pylock.toml",
     b'lock-version = "1.0"\n[[packages]]\nname = "a"\nversion = "1"\n[[packages.wheels]]\nname = "a-' + _HUGE
     + b'-py3-none-any.whl"\nurl = "https://x.invalid/a.whl"\nhashes = {sha256 = "' + _HEX64.encode() + b'"}\n', {"LOCK_NOT_WHEEL"}),
    ("requirements 5000-digit version", "requirements lock", b"a==" + _HUGE + b" --hash=sha256:" + _HEX64.encode() + b"\n",
     {"LOCK_NOT_PINNED"}),
    ("recipe 5000-digit integer", "recipe", b"schema = " + _HUGE + b"\n", {"BAD_RECIPE"}),
    ("recipe deep array", "recipe", b"a = " + b"[" * 3000 + b"]" * 3000 + b"\n", {"BAD_RECIPE"}),
    ("trust policy 5000-digit threshold", "trust policy", b"threshold = " + _HUGE + b"\n", {"BAD_POLICY"}),
    ("trust policy deep array", "trust policy", b"a = " + b"[" * 3000 + b"]" * 3000 + b"\n", {"BAD_POLICY"}),
    ("trust policy NUL in a key path", "trust policy and its files",
     b'threshold = 1\n[[signers]]\nkind = "key"\npublic_key = "keys/release.pub.pem\\u0000"\n', {"BAD_POLICY"}),
    ("pins 5000-digit integer", "pins", b"a = " + _HUGE + b"\n", {"BAD_PINS"}),
    ("pins deep inline table", "pins", b"a = " + b"{b = " * 2000 + b"1" + b"}" * 2000 + b"\n", {"BAD_PINS"}),
]


@pytest.mark.parametrize(("reader", "data", "codes"), [pytest.param(*h[1:], id=h[0]) for h in HOSTILE])
def test_input_that_ended_in_internal_is_refused_with_its_code(readers: dict[str, Reader], reader: str, data: bytes,
                                                               codes: set[str]) -> None:
    got = outcome(readers[reader].read, data)
    assert got and got[0] in codes, got


HOSTILE_CONFIGS = [
    pytest.param(b'"\\U00110000"', "YAML_SYNTAX", id="escape beyond U+10FFFF"),
    pytest.param(b'"\\UFFFFFFFF"', "YAML_SYNTAX", id="escape beyond 2^31"),
    pytest.param(b'"\\uD800"', "YAML_SYNTAX", id="lone surrogate escape"),
    pytest.param(_HUGE, "YAML_AMBIGUOUS_SCALAR", id="5000-digit integer"),
]


@pytest.mark.parametrize(("value", "code"), HOSTILE_CONFIGS)
def test_policy_check_refuses_a_hostile_config_with_its_code(repo: Any, cli: Any, value: bytes, code: str) -> None:
    config = repo.read(".agent-policy.yml")
    repo.write(".agent-policy.yml", config.replace(b"repository: https://github.com/attest-dev/attest", b"repository: " + value, 1))
    rc, out = cli("policy", "check", "--root", str(repo.root), "--json")
    codes = [e["code"] for e in out["errors"]]
    assert rc in (1, 2) and out["ok"] is False and code in codes and "INTERNAL" not in codes, out


def test_attest_policy_check_process_refuses_an_out_of_range_escape(repo: Any) -> None:
    """The installed entry point, in its own process: exit 2, ``YAML_SYNTAX``, never the catch-all."""
    repo.write(".agent-policy.yml", repo.read(".agent-policy.yml") + b'extra: "\\U00110000"\n')
    run = subprocess.run([sys.executable, "-m", "attest", "policy", "check", "--root", str(repo.root), "--json"],
                         capture_output=True, text=True, timeout=120)
    doc = json.loads(run.stdout)
    codes = [e["code"] for e in doc["errors"]]
    assert run.returncode == 2 and codes == ["YAML_SYNTAX"], (run.returncode, run.stdout, run.stderr[-2000:])
