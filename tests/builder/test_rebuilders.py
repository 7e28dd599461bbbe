"""The pure cores of k-of-n rebuilds: the ``[rebuilders]`` table and :func:`decide_rebuilders`, table-driven.

No build, no key: claims are values. Signed results, their verification and the negative result
written on a disagreement are covered end to end in tests/review/test_release_promotion.py.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from attest.builder import (
    RebuildClaim,
    RebuildersRequirement,
    RebuildSubject,
    RebuiltArtifact,
    decide_rebuilders,
    parse_rebuilders,
)
from attest.errors import Finding, InputError
from attest.inventory import Entry, EntryType, Inventory

A, B, C = ("key:sha256:" + c * 64 for c in "abc")
PROMOTER = "key:sha256:" + "f" * 64
RT_INV = Inventory.from_entries([Entry("bin", EntryType.DIR, 0o555), Entry("bin/python", EntryType.FILE, 0o555, 3, "1" * 64),
                                 Entry("lib", EntryType.DIR, 0o555), Entry("lib/z.py", EntryType.FILE, 0o444, 2, "2" * 64)])
SK_INV = Inventory.from_entries([Entry("SKILL.md", EntryType.FILE, 0o444, 5, "3" * 64)])
CANDIDATE = RebuildSubject("https://example.org/t.git", "a" * 40, "https://example.org/t.git", "a" * 40, "https://example.org/t.git",
                           "a" * 40, RebuiltArtifact("0" * 32 + "-attest-runtime", "4" * 64, RT_INV),
                           RebuiltArtifact("5" * 32 + "-attest-skill", "6" * 64, SK_INV))
TWO_OF_TWO = RebuildersRequirement(2, (A, B))


def claim(*signers: str, n: int = 1, **change: Any) -> RebuildClaim:
    subject = dataclasses.replace(CANDIDATE, **change)
    return RebuildClaim(subject, signers, f"sha256:{str(n) * 64}", f"/results/{n}.json")


OTHER_BYTES = RebuiltArtifact(CANDIDATE.runtime.name, CANDIDATE.runtime.inputs_digest, Inventory.from_entries([
    Entry("bin", EntryType.DIR, 0o555), Entry("bin/python", EntryType.FILE, 0o555, 3, "9" * 64),
    Entry("lib", EntryType.DIR, 0o555), Entry("lib/z.py", EntryType.FILE, 0o444, 2, "8" * 64)]))
OTHER_INPUTS = RebuiltArtifact("7" * 32 + "-attest-runtime", "7" * 64, RT_INV)
EXTRA_FILE = RebuiltArtifact(CANDIDATE.skill.name, CANDIDATE.skill.inputs_digest,
                             Inventory.from_entries([*SK_INV.entries, Entry("extra.md", EntryType.FILE, 0o444, 1, "4" * 64)]))
PROBLEM = Finding("REBUILD_RESULT_UNTRUSTED", "/results/x.json", "no rebuilder signed it")

CASES: list[tuple[str, RebuildersRequirement | None, list[RebuildClaim], dict[str, Any], list[tuple[str, str | None]], list[str]]] = [
    # (id, requirement, claims, keywords, the verdict's (code, path) findings, the identities that count)
    ("two-of-two", TWO_OF_TWO, [claim(A), claim(B, n=2)], {}, [], [A, B]),
    ("one-result-signed-by-both", TWO_OF_TWO, [claim(B, A)], {}, [], [A, B]),
    ("one-of-two-is-enough-for-k1", RebuildersRequirement(1, (A, B)), [claim(B)], {}, [], [B]),
    ("one-of-two", TWO_OF_TWO, [claim(A)], {}, [("REBUILDERS_THRESHOLD_NOT_MET", None)], [A]),
    ("none", TWO_OF_TWO, [], {}, [("REBUILDERS_THRESHOLD_NOT_MET", None)], []),
    ("two-results-one-identity", TWO_OF_TWO, [claim(A), claim(A, n=2)], {}, [("REBUILDERS_THRESHOLD_NOT_MET", None)], [A]),
    ("two-signatures-one-identity", TWO_OF_TWO, [claim(A, A)], {}, [("REBUILDERS_THRESHOLD_NOT_MET", None)], [A]),
    ("the-promoter-is-not-independent", RebuildersRequirement(2, (A, PROMOTER)), [claim(A), claim(PROMOTER, n=2)],
     {"promoter": (PROMOTER,)}, [("REBUILD_RESULT_UNTRUSTED", "/results/2.json"), ("REBUILDERS_THRESHOLD_NOT_MET", None)], [A]),
    ("other-bytes", TWO_OF_TWO, [claim(A), claim(B, n=2, runtime=OTHER_BYTES)], {},
     [("REBUILD_DISAGREEMENT", "bin/python"), ("REBUILDERS_THRESHOLD_NOT_MET", None)], [A]),
    ("other-inputs", TWO_OF_TWO, [claim(A), claim(B, n=2, runtime=OTHER_INPUTS)], {},
     [("REBUILD_DISAGREEMENT", None), ("REBUILDERS_THRESHOLD_NOT_MET", None)], [A]),
    ("an-extra-skill-file", TWO_OF_TWO, [claim(A), claim(B, n=2, skill=EXTRA_FILE)], {},
     [("REBUILD_DISAGREEMENT", "extra.md"), ("REBUILDERS_THRESHOLD_NOT_MET", None)], [A]),
    ("agrees-once-disagrees-once", RebuildersRequirement(1, (A, B)), [claim(A), claim(A, n=2, runtime=OTHER_BYTES)], {},
     [("REBUILD_DISAGREEMENT", "bin/python"), ("REBUILDERS_THRESHOLD_NOT_MET", None)], []),
    ("a-disagreement-refuses-even-above-k", RebuildersRequirement(2, (A, B, C)), [claim(A), claim(B, n=2), claim(C, n=3, runtime=OTHER_BYTES)],
     {}, [("REBUILD_DISAGREEMENT", "bin/python")], [A, B]),
    ("both-artifacts-differ", RebuildersRequirement(1, (A,)), [claim(A, runtime=OTHER_BYTES, skill=EXTRA_FILE)], {},
     [("REBUILD_DISAGREEMENT", "bin/python"), ("REBUILD_DISAGREEMENT", "extra.md"), ("REBUILDERS_THRESHOLD_NOT_MET", None)], []),
    ("another-toolchain-revision", TWO_OF_TWO, [claim(A), claim(B, n=2, toolchain_revision="b" * 40)], {},
     [("REBUILD_RESULT_OTHER_CANDIDATE", "/results/2.json"), ("REBUILDERS_THRESHOLD_NOT_MET", None)], [A]),
    ("another-skill-source", RebuildersRequirement(1, (A,)), [claim(A, skill_source_repository="https://example.org/fork.git")], {},
     [("REBUILD_RESULT_OTHER_CANDIDATE", "/results/1.json"), ("REBUILDERS_THRESHOLD_NOT_MET", None)], []),
    ("an-unverified-result-refuses", TWO_OF_TWO, [claim(A), claim(B, n=2)], {"problems": [PROBLEM]},
     [("REBUILD_RESULT_UNTRUSTED", "/results/x.json")], [A, B]),
    ("no-table", None, [], {}, [("REBUILDERS_NOT_CONFIGURED", None)], []),
    ("no-table-unsafe", None, [], {"unsafe": True}, [], []),
    ("no-table-but-results", None, [claim(A)], {"unsafe": True}, [("REBUILDERS_NOT_CONFIGURED", "/results/1.json")], []),
    ("no-table-but-unverified-results", None, [], {"unsafe": True, "problems": [
        Finding("REBUILDERS_NOT_CONFIGURED", "/results/x.json", "given without a table")]},
     [("REBUILDERS_NOT_CONFIGURED", "/results/x.json")], []),
]


@pytest.mark.parametrize(("requirement", "claims", "kw", "findings", "counted"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_decide_rebuilders(requirement: RebuildersRequirement | None, claims: list[RebuildClaim], kw: dict[str, Any],
                           findings: list[tuple[str, str | None]], counted: list[str]) -> None:
    verdict = decide_rebuilders(requirement, claims, CANDIDATE, **kw)
    assert [(f.code, f.path) for f in verdict.findings] == findings
    assert [i for i, _ in verdict.agreed] == counted
    assert verdict.ok is (not findings)


def test_a_disagreement_names_the_first_differing_entry_and_both_inventories() -> None:
    verdict = decide_rebuilders(TWO_OF_TWO, [claim(A), claim(B, n=2, runtime=OTHER_BYTES)], CANDIDATE)
    (d,) = verdict.disagreements
    assert (d.identity, d.kind, d.first.code, d.first.path) == (B, "runtime", "DIGEST_MISMATCH", "bin/python")
    doc = d.to_json()
    assert doc["promoted"]["inventory"] == RT_INV.identity and doc["rebuilt"]["inventory"] == OTHER_BYTES.inventory.identity
    assert doc["first_difference"]["path"] == "bin/python" and doc["result"] == "sha256:" + "2" * 64
    assert "first difference: DIGEST_MISMATCH: bin/python" in verdict.findings[0].detail


def test_the_threshold_finding_says_who_is_missing_and_that_each_counts_once() -> None:
    verdict = decide_rebuilders(TWO_OF_TWO, [claim(A), claim(A, n=2)], CANDIDATE)
    detail = verdict.findings[0].detail
    assert detail.startswith("1 of the 2 required") and "counts once" in detail and detail.endswith(f"no agreeing result from {B}")


REBUILDERS_TABLES: list[tuple[str, Any, str | None]] = [
    # (id, the [rebuilders] value, a word of the refusal; None: valid)
    ("valid", {"threshold": 2, "identities": [A, B]}, None),
    ("k-is-n", {"threshold": 1, "identities": [A]}, None),
    ("not-a-table", [A], "must be a table"),
    ("unknown-key", {"threshold": 1, "identities": [A], "quorum": 1}, "exactly"),
    ("no-threshold", {"identities": [A]}, "exactly"),
    ("no-identities", {"threshold": 1, "identities": []}, "non-empty"),
    ("identity-not-a-string", {"threshold": 1, "identities": [1]}, "non-empty"),
    ("identity-twice", {"threshold": 1, "identities": [A, A]}, "twice"),
    ("not-a-signer", {"threshold": 1, "identities": [A, C]}, "is not a signer"),
    ("threshold-zero", {"threshold": 0, "identities": [A]}, "threshold"),
    ("threshold-above-n", {"threshold": 3, "identities": [A, B]}, "threshold"),
    ("threshold-bool", {"threshold": True, "identities": [A]}, "threshold"),
    ("threshold-string", {"threshold": "2", "identities": [A, B]}, "threshold"),
]


@pytest.mark.parametrize(("raw", "word"), [r[1:] for r in REBUILDERS_TABLES], ids=[r[0] for r in REBUILDERS_TABLES])
def test_parse_rebuilders(raw: Any, word: str | None) -> None:
    if word is None:
        assert parse_rebuilders(raw, [A, B, PROMOTER], "release.toml") == RebuildersRequirement(raw["threshold"], tuple(raw["identities"]))
        return
    with pytest.raises(InputError) as caught:
        parse_rebuilders(raw, [A, B, PROMOTER], "release.toml")
    assert caught.value.code == "BAD_REBUILDERS" and word in caught.value.detail and caught.value.path == "release.toml"


def test_a_rebuild_statement_round_trips_and_is_strict() -> None:
    doc = CANDIDATE.statement()
    assert RebuildSubject.from_statement(doc, "r.json") == CANDIDATE
    assert [s["name"] for s in doc["subject"]] == [CANDIDATE.runtime.name, CANDIDATE.skill.name]
    from attest.errors import VerificationError

    for broken in ({**doc, "predicateType": "https://attest.dev/runtime/v1"},
                   {**doc, "predicate": {**doc["predicate"], "extra": 1}},
                   {**doc, "predicate": {**doc["predicate"], "toolchain": {"repository": "r", "revision": "main"}}},
                   {**doc, "subject": doc["subject"][:1]},
                   {**doc, "subject": [doc["subject"][1], doc["subject"][0]]},
                   {**doc, "predicate": {**doc["predicate"], "runtime": {**doc["predicate"]["runtime"], "inventory": {}}}}):
        with pytest.raises(VerificationError) as caught:
            RebuildSubject.from_statement(broken, "r.json")
        assert caught.value.code == "REBUILD_RESULT_MALFORMED"


def test_the_rebuilders_table_is_an_extension_only_the_release_policy_allows() -> None:
    from attest.attestation import parse_policy
    from attest.builder import RELEASE_POLICY_EXTENSIONS

    data = (b'threshold = 1\n[[signers]]\nkind = "key"\npublic_key = "k.pem"\n'
            b'[rebuilders]\nthreshold = 1\nidentities = ["key:sha256:' + b"a" * 64 + b'"]\n')
    with pytest.raises(InputError) as caught:
        parse_policy(data, "trust.toml")  # a deployment's trust policy knows no rebuilders
    assert caught.value.code == "POLICY_UNKNOWN_KEY"
    parsed = parse_policy(data, "release.toml", extensions=RELEASE_POLICY_EXTENSIONS)
    assert parsed.extensions == (("rebuilders", {"threshold": 1, "identities": [A]}),)
    assert parse_policy(data.split(b"[rebuilders]")[0], "release.toml", extensions=RELEASE_POLICY_EXTENSIONS).extensions == ()


BEFORE_BUILD: list[tuple[str, RebuildersRequirement | None, list[RebuildClaim], dict[str, Any], list[tuple[str, str | None]]]] = [
    # (id, requirement, claims, keywords, the (code, path) findings known before anything is built)
    ("two-of-two-may-agree", TWO_OF_TWO, [claim(A), claim(B, n=2)], {}, []),
    ("no-table", None, [], {}, [("REBUILDERS_NOT_CONFIGURED", None)]),
    ("no-table-unsafe", None, [], {"unsafe": True}, []),
    ("no-table-but-results", None, [claim(A)], {"unsafe": True}, [("REBUILDERS_NOT_CONFIGURED", "/results/1.json")]),
    ("no-results", TWO_OF_TWO, [], {}, [("REBUILDERS_THRESHOLD_NOT_MET", None)]),
    ("one-of-two", TWO_OF_TWO, [claim(A)], {}, [("REBUILDERS_THRESHOLD_NOT_MET", None)]),
    ("two-results-one-identity", TWO_OF_TWO, [claim(A), claim(A, n=2)], {}, [("REBUILDERS_THRESHOLD_NOT_MET", None)]),
    ("the-promoter-is-not-independent", RebuildersRequirement(2, (A, PROMOTER)), [claim(A), claim(PROMOTER, n=2)],
     {"promoter": (PROMOTER,)}, [("REBUILD_RESULT_UNTRUSTED", "/results/2.json"), ("REBUILDERS_THRESHOLD_NOT_MET", None)]),
    ("another-toolchain-revision", TWO_OF_TWO, [claim(A), claim(B, n=2, toolchain_revision="b" * 40)], {},
     [("REBUILD_RESULT_OTHER_CANDIDATE", "/results/2.json"), ("REBUILDERS_THRESHOLD_NOT_MET", None)]),
    ("an-unverified-result", TWO_OF_TWO, [claim(A), claim(B, n=2)], {"problems": [PROBLEM]}, [("REBUILD_RESULT_UNTRUSTED", "/results/x.json")]),
    # Other bytes are a disagreement only once the promoter's own build exists: nothing to refuse yet.
    ("other-bytes-are-not-known-yet", TWO_OF_TWO, [claim(A), claim(B, n=2, runtime=OTHER_BYTES)], {}, []),
]


@pytest.mark.parametrize(("requirement", "claims", "kw", "findings"), [c[1:] for c in BEFORE_BUILD], ids=[c[0] for c in BEFORE_BUILD])
def test_decide_before_build(requirement: RebuildersRequirement | None, claims: list[RebuildClaim], kw: dict[str, Any],
                             findings: list[tuple[str, str | None]]) -> None:
    from attest.builder import decide_before_build

    assert [(f.code, f.path) for f in decide_before_build(requirement, claims, CANDIDATE.candidate, **kw)] == findings


@pytest.mark.parametrize(("requirement", "claims", "kw", "findings", "counted"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_what_refuses_before_the_build_refuses_after_it(requirement: RebuildersRequirement | None, claims: list[RebuildClaim],
                                                        kw: dict[str, Any], findings: list[tuple[str, str | None]],
                                                        counted: list[str]) -> None:
    """An early refusal is never one the builds could have turned into a promotion, and each of its findings is the verdict's."""
    from attest.builder import decide_before_build

    early = [(f.code, f.path) for f in decide_before_build(requirement, claims, CANDIDATE.candidate, **kw)]
    assert set(early) <= set(findings)
    if not findings:
        assert early == []


def test_the_early_threshold_finding_names_who_gave_no_result() -> None:
    from attest.builder import decide_before_build

    (finding,) = decide_before_build(TWO_OF_TWO, [claim(A)], CANDIDATE.candidate)
    assert finding.detail.startswith("1 of the 2 required independent rebuilders gave a result of this candidate")
    assert finding.detail.endswith(f"no agreeing result from {B}")
