"""SLSA Provenance v1 and VSA v1 builders: shapes, injected clock, refusals."""

from __future__ import annotations

import datetime as dt

import pytest
from support.keys import Keys

from attest.attestation import (
    SLSA_PROVENANCE_V1,
    VSA_V1,
    ResourceRef,
    load_policy,
    sign_statement,
    slsa_provenance,
    statement,
    subject,
    verification_summary,
    verify_attestation_bytes,
)
from attest.errors import InputError

T0 = dt.datetime(2026, 5, 1, 12, 0, 0, 123456, tzinfo=dt.UTC)
T1 = dt.datetime(2026, 5, 1, 14, 30, 0, tzinfo=dt.timezone(dt.timedelta(hours=2)))
HEX = "ab" * 32


def test_provenance_shape_and_signing(keys: Keys, write_policy) -> None:
    pred = slsa_provenance(
        build_type="https://attest.dev/build/runtime/v1",
        builder_id="https://attest.dev/builder/runtime",
        external_parameters={"lock": "pylock.toml"},
        resolved_dependencies=[ResourceRef("git+https://example.org/repo@" + "1" * 40, {"sha256": HEX}, "repo")],
        invocation_id="run-1",
        started_on=T0,
        finished_on=T1,
        builder_version={"attest": "0.1.0"},
    )
    assert pred == {
        "buildDefinition": {
            "buildType": "https://attest.dev/build/runtime/v1",
            "externalParameters": {"lock": "pylock.toml"},
            "resolvedDependencies": [{"name": "repo", "uri": "git+https://example.org/repo@" + "1" * 40, "digest": {"sha256": HEX}}],
        },
        "runDetails": {
            "builder": {"id": "https://attest.dev/builder/runtime", "version": {"attest": "0.1.0"}},
            "metadata": {"invocationId": "run-1", "startedOn": "2026-05-01T12:00:00Z", "finishedOn": "2026-05-01T12:30:00Z"},
        },
    }
    data = sign_statement(statement([subject("out", HEX)], SLSA_PROVENANCE_V1, pred), keys.signers["ed"])
    assert verify_attestation_bytes(data, load_policy(write_policy(["ed"]))).predicate_type == SLSA_PROVENANCE_V1


def test_vsa_shape() -> None:
    pred = verification_summary(
        verifier_id="https://attest.dev/verifier/v1",
        time_verified=T0,
        resource_uri="file:///srv/tree",
        policy=ResourceRef("file:///etc/attest/policy.toml", {"sha256": HEX}),
        input_attestations=[ResourceRef("file:///a.json", {"sha256": HEX})],
        passed=True,
        verified_levels=["ATTEST_CLOSED_TREE_V1"],
    )
    assert pred["verificationResult"] == "PASSED" and pred["verifiedLevels"] == ["ATTEST_CLOSED_TREE_V1"]
    assert pred["slsaVersion"] == "1.0" and pred["timeVerified"] == "2026-05-01T12:00:00Z"
    assert VSA_V1 == "https://slsa.dev/verification_summary/v1"
    failed = verification_summary(
        verifier_id="v", time_verified=T0, resource_uri="r", policy=ResourceRef("p"),
        input_attestations=[], passed=False, verified_levels=["ATTEST_CLOSED_TREE_V1"],
    )
    assert failed["verificationResult"] == "FAILED" and failed["verifiedLevels"] == ["FAILED"]


def test_builder_refusals() -> None:
    with pytest.raises(InputError) as caught:
        slsa_provenance(build_type="b", builder_id="i", external_parameters={}, started_on=dt.datetime(2026, 1, 1))
    assert caught.value.code == "BAD_PREDICATE"  # naive datetime: no guessing the zone
    with pytest.raises(InputError) as caught:
        slsa_provenance(build_type="", builder_id="i", external_parameters={})
    assert caught.value.code == "BAD_PREDICATE"
    with pytest.raises(InputError) as caught:
        ResourceRef("u", {"md5": "00" * 16}).to_json()
    assert caught.value.code == "BAD_DIGEST"
    with pytest.raises(InputError) as caught:
        ResourceRef().to_json()
    assert caught.value.code == "BAD_PREDICATE"
    with pytest.raises(InputError) as caught:
        subject("x", "not-hex")
    assert caught.value.code == "BAD_DIGEST"
