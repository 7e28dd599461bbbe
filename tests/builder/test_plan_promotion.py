"""The pure core of promotion: ``plan_promotion`` decides the new pins from verified facts.

No build, no key, no file: the facts are built here as values. One row per refusal branch of
:func:`attest.builder.plan_promotion` (each reason code it can produce appears), then the
decisions of a successful plan: which pins change, which are kept, whether to write at all.
``promote`` (the I/O around it) is covered end to end by test_promote.py.
"""

from __future__ import annotations

import dataclasses
import datetime
import tomllib
from collections.abc import Callable
from typing import Any

import pytest

from attest.attestation import VerifiedStatement
from attest.builder import (
    BuildResult,
    PromotionFacts,
    PromotionPlan,
    RebuildersRequirement,
    RebuildersVerdict,
    RebuildReport,
    dump_pins,
    parse_pins,
    plan_promotion,
)
from attest.errors import AttestError, Finding, InputError, VerificationError
from attest.inventory import Entry, EntryType, Inventory

PINS = "/etc/attest/pins.toml"
REV, SKILL_REV, INSTALLER_REV = "a" * 40, "b" * 64, "c" * 40
RT_INV = Inventory.from_entries([Entry("bin", EntryType.DIR, 0o555), Entry("bin/python", EntryType.FILE, 0o555, 3, "1" * 64)])
SK_INV = Inventory.from_entries([Entry("SKILL.md", EntryType.FILE, 0o444, 5, "2" * 64)])
RUNTIME = BuildResult(
    kind="runtime",
    name="0" * 32 + "-attest-runtime",
    store_path="/state/store/rt/tree",
    inputs={
        "interpreter": {"executable": "/usr/bin/python3.11", "executable_sha256": "3" * 64, "version": "3.11.9"},
        "lock": {"sha256": "4" * 64},
        "sandbox": {"network_isolated": True, "filesystem_confined": True},
    },
    inputs_digest="5" * 64,
    inventory=RT_INV,
    reused=False,
    network_isolated=True,
    immutability="immutable",
    attestations=("/state/builds/rt.runtime.json", "/state/builds/rt.provenance.json"),
    details={"filesystem_confined": True},
)
SKILL = BuildResult(
    kind="skill",
    name="6" * 32 + "-attest-skill",
    store_path="/state/store/sk/tree",
    inputs={},
    inputs_digest="7" * 64,
    inventory=SK_INV,
    reused=True,
    network_isolated=False,  # a skill is installed from git objects, not in the sandbox
    immutability="immutable",
    attestations=("/state/builds/sk.skill.json", "/state/builds/sk.provenance.json"),
)


def verified(result: BuildResult, digest_hex: str, n: str) -> VerifiedStatement:
    statement = {"subject": [{"name": result.name, "digest": {"sha256": digest_hex}}]}
    return VerifiedStatement(b"{}", statement, "https://attest.dev/runtime/v1", ("key:sha256:" + "9" * 64,), f"sha256:{n * 64}", "dsse")


def both(result: BuildResult, *, digest_hex: str | None = None) -> tuple[VerifiedStatement, ...]:
    hex_ = digest_hex or result.inventory.digest_hex
    return verified(result, hex_, "d" if result.kind == "runtime" else "e"), verified(result, hex_, "f")


def report(result: BuildResult, *findings: Finding) -> RebuildReport:
    return RebuildReport(result.kind, result, result.name, result.inventory.identity, tuple(findings))


REBUILDER_A, REBUILDER_B = "key:sha256:" + "a" * 64, "key:sha256:" + "b" * 64
TWO_OF_TWO = RebuildersRequirement(2, (REBUILDER_A, REBUILDER_B))
RESULT_A, RESULT_B = "sha256:" + "1" * 64, "sha256:" + "2" * 64
AGREED = RebuildersVerdict(TWO_OF_TWO, ((REBUILDER_A, RESULT_A), (REBUILDER_B, RESULT_B)), (), ())

FACTS = PromotionFacts(
    toolchain_repository="https://github.com/attest-dev/attest",
    toolchain_rev=REV,
    runtime=RUNTIME,
    runtime_attestations=both(RUNTIME),
    skill=SKILL,
    skill_attestations=both(SKILL),
    skill_root="agent-policy",
    skill_source_repository="https://github.com/attest-dev/skills",
    skill_source_rev=SKILL_REV,
    installer_repository="https://github.com/attest-dev/installer",
    installer_rev=INSTALLER_REV,
    rebuilds=(report(RUNTIME), report(SKILL)),
    rebuilders=AGREED,
)


def with_runtime(**changes: Any) -> Callable[[PromotionFacts], PromotionFacts]:
    return lambda f: dataclasses.replace(f, runtime=dataclasses.replace(f.runtime, **changes))


def with_sandbox(**changes: Any) -> Callable[[PromotionFacts], PromotionFacts]:
    def change(f: PromotionFacts) -> PromotionFacts:
        inputs = {**f.runtime.inputs, "sandbox": {**f.runtime.inputs["sandbox"], **changes}}
        return dataclasses.replace(f, runtime=dataclasses.replace(f.runtime, inputs=inputs))

    return change


def facts(**changes: Any) -> Callable[[PromotionFacts], PromotionFacts]:
    return lambda f: dataclasses.replace(f, **changes)


DIFFERENT = Finding("DIGEST_MISMATCH", "bin/python", "the rebuilt file differs")
OTHER_HEX = "8" * 64
REFUSALS: list[tuple[str, Callable[[PromotionFacts], PromotionFacts], type[AttestError], str, str | None]] = [
    # (id, how the facts differ from a good promotion, error class, first reason code, its path)
    ("toolchain-rev-short", facts(toolchain_rev=REV[:12]), InputError, "NOT_FULL_SHA", None),
    ("toolchain-rev-branch", facts(toolchain_rev="main"), InputError, "NOT_FULL_SHA", None),
    ("skill-rev-uppercase", facts(skill_source_rev=SKILL_REV.upper()), InputError, "NOT_FULL_SHA", None),
    ("installer-rev-head", facts(installer_rev="HEAD"), InputError, "NOT_FULL_SHA", None),
    ("runtime-is-a-skill", facts(runtime=SKILL), VerificationError, "PROMOTION_REFUSED", SKILL.name),
    ("skill-is-a-runtime", facts(skill=RUNTIME), VerificationError, "PROMOTION_REFUSED", RUNTIME.name),
    ("runtime-not-network-isolated", with_runtime(network_isolated=False), VerificationError, "PROMOTION_REFUSED", RUNTIME.name),
    ("runtime-not-confined", with_runtime(details={}), VerificationError, "PROMOTION_REFUSED", RUNTIME.name),
    ("runtime-confined-not-true", with_runtime(details={"filesystem_confined": "yes"}), VerificationError, "PROMOTION_REFUSED",
     RUNTIME.name),
    ("runtime-no-sandbox-record", with_runtime(inputs={k: v for k, v in RUNTIME.inputs.items() if k != "sandbox"}),
     VerificationError, "PROMOTION_REFUSED", RUNTIME.name),
    ("sandbox-record-not-isolated", with_sandbox(network_isolated=False), VerificationError, "PROMOTION_REFUSED", RUNTIME.name),
    ("sandbox-record-not-confined", with_sandbox(filesystem_confined=False), VerificationError, "PROMOTION_REFUSED", RUNTIME.name),
    ("rebuild-differs", facts(rebuilds=(report(RUNTIME, DIFFERENT), report(SKILL))), VerificationError, "PROMOTION_REFUSED", None),
    ("no-rebuild-at-all", facts(rebuilds=()), VerificationError, "PROMOTION_REFUSED", RUNTIME.name),
    ("skill-not-rebuilt", facts(rebuilds=(report(RUNTIME),)), VerificationError, "PROMOTION_REFUSED", SKILL.name),
    ("runtime-unsigned", facts(runtime_attestations=()), VerificationError, "PROMOTION_REFUSED", RUNTIME.name),
    ("runtime-one-attestation", with_runtime(attestations=RUNTIME.attestations[:1]), VerificationError, "PROMOTION_REFUSED",
     RUNTIME.name),
    ("skill-provenance-unverified", facts(skill_attestations=both(SKILL)[:1]), VerificationError, "PROMOTION_REFUSED", SKILL.name),
    ("runtime-attestation-other-tree", facts(runtime_attestations=both(RUNTIME, digest_hex=OTHER_HEX)), VerificationError,
     "PROMOTION_REFUSED", RUNTIME.attestations[0]),
    ("skill-provenance-other-tree", facts(skill_attestations=(both(SKILL)[0], verified(SKILL, OTHER_HEX, "f"))), VerificationError,
     "PROMOTION_REFUSED", SKILL.attestations[1]),
    # k of n independent rebuilders: the verdict's findings refuse, and so does a verdict that does not add up.
    ("rebuilders-disagree", facts(rebuilders=RebuildersVerdict(TWO_OF_TWO, ((REBUILDER_A, RESULT_A),), (), (
        Finding("REBUILD_DISAGREEMENT", "bin/python", "b rebuilt other bytes"),))), VerificationError, "REBUILD_DISAGREEMENT",
     "bin/python"),
    ("rebuilders-one-of-two-reported", facts(rebuilders=RebuildersVerdict(TWO_OF_TWO, ((REBUILDER_A, RESULT_A),), (), (
        Finding("REBUILDERS_THRESHOLD_NOT_MET", None, "1 of 2"),))), VerificationError, "REBUILDERS_THRESHOLD_NOT_MET", None),
    ("rebuilders-one-of-two-unreported", facts(rebuilders=RebuildersVerdict(TWO_OF_TWO, ((REBUILDER_A, RESULT_A),), (), ())),
     VerificationError, "REBUILDERS_THRESHOLD_NOT_MET", None),
    ("rebuilders-one-identity-twice", facts(rebuilders=RebuildersVerdict(TWO_OF_TWO, ((REBUILDER_A, RESULT_A), (REBUILDER_A, RESULT_B)),
                                                                          (), ())), VerificationError, "REBUILDERS_THRESHOLD_NOT_MET", None),
    ("rebuilders-not-in-the-requirement", facts(rebuilders=RebuildersVerdict(TWO_OF_TWO, ((REBUILDER_A, RESULT_A), ("key:x", RESULT_B)),
                                                                              (), ())), VerificationError, "REBUILDERS_THRESHOLD_NOT_MET", None),
    ("no-rebuilders-table", facts(rebuilders=RebuildersVerdict(None, (), (), ())), VerificationError, "REBUILDERS_NOT_CONFIGURED", None),
]


@pytest.mark.parametrize(("change", "error", "code", "path"), [r[1:] for r in REFUSALS], ids=[r[0] for r in REFUSALS])
def test_refusals(change: Callable[[PromotionFacts], PromotionFacts], error: type[AttestError], code: str, path: str | None) -> None:
    with pytest.raises(AttestError) as caught:
        plan_promotion({}, change(FACTS), original=None, where=PINS)
    assert type(caught.value) is error
    assert (caught.value.code, caught.value.path) == (code, path)


def test_a_failed_rebuild_carries_its_findings() -> None:
    with pytest.raises(VerificationError) as caught:
        plan_promotion({}, dataclasses.replace(FACTS, rebuilds=(report(RUNTIME), report(SKILL, DIFFERENT))), original=None, where=PINS)
    assert DIFFERENT in caught.value.findings


def test_every_attestation_problem_is_reported_at_once() -> None:
    f = dataclasses.replace(FACTS, runtime_attestations=both(RUNTIME, digest_hex=OTHER_HEX), skill_attestations=())
    with pytest.raises(VerificationError) as caught:
        plan_promotion({}, f, original=None, where=PINS)
    assert [(x.code, x.path) for x in caught.value.findings] == [
        ("PROMOTION_REFUSED", RUNTIME.attestations[0]), ("PROMOTION_REFUSED", RUNTIME.attestations[1]),
        ("PROMOTION_REFUSED", SKILL.name)]


def test_a_subject_list_of_two_does_not_name_the_tree() -> None:
    two = {"subject": [{"name": "a", "digest": {"sha256": RT_INV.digest_hex}}] * 2}
    statements = tuple(dataclasses.replace(v, statement=two) for v in both(RUNTIME))
    with pytest.raises(VerificationError) as caught:
        plan_promotion({}, dataclasses.replace(FACTS, runtime_attestations=statements), original=None, where=PINS)
    assert caught.value.code == "PROMOTION_REFUSED" and caught.value.path == RUNTIME.attestations[0]


KEPT_PINS_REFUSED: list[tuple[str, dict[str, Any], str]] = [
    # Kept (unmanaged) pins the writer cannot write back faithfully: refused, nothing is written.
    ("float", {"deployment": {"ratio": 0.5}}, "float"),
    ("date", {"deployment": {"since": datetime.date(2026, 1, 1)}}, "date"),
    ("control-character", {"deployment": {"name": "a\tb"}}, "control characters"),
    ("array-of-tables", {"deployment": {"hosts": [{"name": "x"}]}}, "dict"),
]


@pytest.mark.parametrize(("pins", "word"), [r[1:] for r in KEPT_PINS_REFUSED], ids=[r[0] for r in KEPT_PINS_REFUSED])
def test_kept_pins_that_cannot_be_written_back(pins: dict[str, Any], word: str) -> None:
    with pytest.raises(InputError) as caught:
        plan_promotion(pins, FACTS, original=b"x", where=PINS)
    assert caught.value.code == "BAD_PINS" and word in caught.value.detail


def test_a_writer_that_does_not_round_trip_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """Defence in depth: the planned bytes must parse back to exactly the planned pins."""
    import attest.builder._promote as promote_module

    monkeypatch.setattr(promote_module, "dump_pins", lambda doc: b'toolchain = {revision = "other"}\n')
    with pytest.raises(VerificationError) as caught:
        plan_promotion({}, FACTS, original=None, where=PINS)
    assert (caught.value.code, caught.value.path) == ("BAD_PINS", PINS)


EXPECTED_MANAGED = {
    "toolchain": {"repository": "https://github.com/attest-dev/attest", "revision": REV},
    "runtime": {
        "name": RUNTIME.name, "inventory": RT_INV.identity, "interpreter": "/usr/bin/python3.11", "interpreter_sha256": "3" * 64,
        "python": "3.11.9", "lock_sha256": "4" * 64, "attestation": "sha256:" + "d" * 64, "provenance": "sha256:" + "f" * 64,
    },
    "skill": {
        "name": SKILL.name, "inventory": SK_INV.identity, "root": "agent-policy",
        "source_repository": "https://github.com/attest-dev/skills", "source_revision": SKILL_REV,
        "installer_repository": "https://github.com/attest-dev/installer", "installer_revision": INSTALLER_REV,
        "attestation": "sha256:" + "e" * 64, "provenance": "sha256:" + "f" * 64,
    },
}


def test_first_promotion_writes_every_managed_pin() -> None:
    plan = plan_promotion({}, FACTS, original=None, where=PINS)
    assert isinstance(plan, PromotionPlan) and plan.write is True
    assert plan.pins == EXPECTED_MANAGED and tomllib.loads(plan.data.decode()) == EXPECTED_MANAGED
    assert ("toolchain.revision", None, REV) in plan.changes and all(old is None for _, old, _ in plan.changes)
    assert [k for k, _, _ in plan.changes] == sorted(k for k, _, _ in plan.changes)


def test_unmanaged_pins_are_kept_and_managed_ones_replaced() -> None:
    old = {"deployment": {"name": "prod", "signers": ["a", "b"], "strict": True, "n": 3},
           "toolchain": {"repository": "https://github.com/attest-dev/attest", "revision": "0" * 40},
           "runtime": {**EXPECTED_MANAGED["runtime"], "stale": "gone"}}
    data = dump_pins(old)
    plan = plan_promotion(parse_pins(data, PINS), FACTS, original=data, where=PINS)
    assert plan.write is True and plan.pins["deployment"] == old["deployment"]
    assert plan.pins["runtime"] == EXPECTED_MANAGED["runtime"]  # a managed table is replaced whole, not merged
    changes = {k: (o, n) for k, o, n in plan.changes}
    assert changes["toolchain.revision"] == ("0" * 40, REV)
    assert changes["runtime.stale"] == ("gone", None)
    assert changes["skill.name"] == (None, SKILL.name)
    assert not any(k.startswith("deployment.") or k == "runtime.name" for k in changes)


def test_the_same_promotion_again_writes_nothing() -> None:
    first = plan_promotion({}, FACTS, original=None, where=PINS)
    again = plan_promotion(parse_pins(first.data, PINS), FACTS, original=first.data, where=PINS)
    assert again.write is False and again.changes == () and again.data == first.data


def test_same_pins_in_other_bytes_are_rewritten_without_changes() -> None:
    """A hand-edited file (comments, order) that already says the same is rewritten canonically."""
    first = plan_promotion({}, FACTS, original=None, where=PINS)
    hand = b"# edited by hand\n" + first.data
    plan = plan_promotion(parse_pins(hand, PINS), FACTS, original=hand, where=PINS)
    assert plan.write is True and plan.changes == () and plan.data == first.data


def test_the_plan_does_not_alter_its_inputs() -> None:
    old = {"deployment": {"name": "prod"}, "toolchain": {"revision": "0" * 40}}
    snapshot = repr(old)
    plan_promotion(old, FACTS, original=None, where=PINS)
    assert repr(old) == snapshot


def test_no_rebuilders_table_is_accepted_only_as_unsafe() -> None:
    unsafe = RebuildersVerdict(None, (), (), (), unsafe=True)
    plan = plan_promotion({}, dataclasses.replace(FACTS, rebuilders=unsafe), original=None, where=PINS)
    assert plan.pins == EXPECTED_MANAGED


# -- pinned identities other than the toolchain SHA -------------------------------------

def _pinned(**changes: Any) -> dict[str, Any]:
    """The pins of FACTS's promotion, with some pins as an earlier promotion left them."""
    doc = {k: dict(v) for k, v in EXPECTED_MANAGED.items()}
    for dotted, value in changes.items():
        table, key = dotted.split("__")
        doc[table][key] = value
    return doc


IDENTITY_CHANGES: list[tuple[str, dict[str, Any], str, str]] = [
    # (id, the earlier pins that differ, the pin reported, the --repin group that allows it)
    ("python-3.11.2-to-3.11.9", {"runtime__python": "3.11.2"}, "runtime.python", "interpreter"),
    ("interpreter-path", {"runtime__interpreter": "/opt/python/bin/python3.11"}, "runtime.interpreter", "interpreter"),
    ("interpreter-binary", {"runtime__interpreter_sha256": "0" * 64}, "runtime.interpreter_sha256", "interpreter"),
    ("lock", {"runtime__lock_sha256": "0" * 64}, "runtime.lock_sha256", "lock"),
    ("toolchain-repository", {"toolchain__repository": "https://example.org/fork.git"}, "toolchain.repository", "toolchain-repository"),
    ("skill-root", {"skill__root": "other-root"}, "skill.root", "skill-source"),
    ("skill-source-repository", {"skill__source_repository": "https://example.org/s.git"}, "skill.source_repository", "skill-source"),
    ("installer-repository", {"skill__installer_repository": "https://example.org/i.git"}, "skill.installer_repository",
     "skill-source"),
]


@pytest.mark.parametrize(("old", "key", "group"), [r[1:] for r in IDENTITY_CHANGES], ids=[r[0] for r in IDENTITY_CHANGES])
def test_a_pinned_identity_changes_only_with_repin(old: dict[str, Any], key: str, group: str) -> None:
    pins = _pinned(**old)
    with pytest.raises(VerificationError) as caught:
        plan_promotion(pins, FACTS, original=dump_pins(pins), where=PINS)
    assert [(f.code, f.path) for f in caught.value.findings] == [("PINNED_IDENTITY_CHANGED", key)]
    assert f"--repin {group}" in caught.value.detail
    other = next(g for g in ("interpreter", "lock", "toolchain-repository", "skill-source") if g != group)
    with pytest.raises(VerificationError):
        plan_promotion(pins, FACTS, original=dump_pins(pins), where=PINS, repin={other})  # another group does not allow it
    plan = plan_promotion(pins, FACTS, original=dump_pins(pins), where=PINS, repin={group})
    flat_old = next(iter(old.values()))
    assert [(k, o) for k, o, _ in plan.repinned] == [(key, flat_old)] and plan.write is True


def test_an_interpreter_change_reports_every_pin_it_moves() -> None:
    pins = _pinned(runtime__python="3.11.2", runtime__interpreter_sha256="0" * 64)
    with pytest.raises(VerificationError) as caught:
        plan_promotion(pins, FACTS, original=None, where=PINS)
    assert [f.path for f in caught.value.findings] == ["runtime.interpreter_sha256", "runtime.python"]


def test_revisions_and_derived_pins_move_without_repin() -> None:
    """The toolchain SHA (and what it derives: names, inventories, attestations, skill revisions) is what promotion moves."""
    pins = _pinned(toolchain__revision="0" * 40, runtime__name="x-attest-runtime", runtime__inventory="sha256:" + "0" * 64,
                   runtime__attestation="sha256:" + "0" * 64, skill__source_revision="0" * 40, skill__installer_revision="0" * 40)
    plan = plan_promotion(pins, FACTS, original=None, where=PINS)
    assert plan.repinned == () and len(plan.changes) == 6


def test_an_identity_pinned_for_the_first_time_is_no_change() -> None:
    pins = _pinned()
    del pins["runtime"]["python"], pins["toolchain"]["repository"]
    plan = plan_promotion(pins, FACTS, original=None, where=PINS)
    assert plan.repinned == () and {k for k, _, _ in plan.changes} == {"runtime.python", "toolchain.repository"}


def test_an_unknown_repin_group_is_usage() -> None:
    with pytest.raises(InputError) as caught:
        plan_promotion({}, FACTS, original=None, where=PINS, repin={"python"})
    assert caught.value.code == "USAGE"
