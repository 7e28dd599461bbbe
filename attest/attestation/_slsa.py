"""Small typed builders for SLSA Provenance v1 and SLSA Verification Summary (VSA) v1 predicates.

    >>> pred = verification_summary(
    ...     verifier_id="https://attest.dev/verifier", time_verified=now, resource_uri="file:///srv/tree",
    ...     policy=ResourceRef("file:///etc/attest/policy.toml", {"sha256": "..."}),
    ...     input_attestations=[ResourceRef("file:///a.intoto.json", {"sha256": "..."})], passed=True)
    >>> st = statement([subject("tree", hexdigest)], VSA_V1, pred)

The clock is always injected (``time_verified``, ``started_on``...): outputs depend on no
hidden state.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ..errors import InputError, VerificationError
from ._codes import AttestationCode
from ._statement import check_digest_set


def rfc3339(t: _dt.datetime) -> str:
    """UTC, second precision, ``Z`` suffix; naive datetimes are refused (no guessing the zone)."""
    if t.tzinfo is None:
        raise InputError(AttestationCode.BAD_PREDICATE, "timestamps must be timezone-aware")
    return t.astimezone(_dt.UTC).replace(microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True, slots=True)
class ResourceRef:
    """An in-toto ResourceDescriptor reduced to what these predicates use.

    ``digest`` must carry a sha256 unless the reference only describes (``require_sha256``
    False: a provenance's resolved dependencies, e.g. a git commit by ``gitCommit``).
    """

    uri: str | None = None
    digest: Mapping[str, str] = field(default_factory=dict)
    name: str | None = None
    require_sha256: bool = True
    annotations: Mapping[str, object] = field(default_factory=dict)  # ResourceDescriptor annotations (JSON values)

    def to_json(self) -> dict[str, object]:
        """The ResourceDescriptor object, with only the fields that are set.

        Raises:
            InputError: ``BAD_DIGEST`` for a digest set that is not lowercase hex (or has no
                sha256 where one is required); ``BAD_PREDICATE`` when none of uri, digest and
                name is set.
        """
        out: dict[str, object] = {}
        if self.name is not None:
            out["name"] = self.name
        if self.uri is not None:
            out["uri"] = self.uri
        if self.digest:
            try:
                check_digest_set(dict(self.digest), self.name or self.uri or "resource", require_sha256=self.require_sha256)
            except VerificationError as e:  # from the shared checker: here it is the caller's input
                raise InputError(findings=e.findings) from e
            out["digest"] = dict(self.digest)
        if not out.get("uri") and not out.get("digest") and not out.get("name"):
            raise InputError(AttestationCode.BAD_PREDICATE, "a resource needs a uri, a digest or a name")
        if self.annotations:
            out["annotations"] = dict(self.annotations)
        return out


def git_dependency(repository: str, revision: str, name: str) -> ResourceRef:
    """A git repository at a full commit id, as SLSA writes a resolved dependency.

    ``uri`` is ``git+<repository>@<revision>`` (SPDX download location form), ``digest`` is
    ``{"gitCommit": <revision>}`` (a SHA-1 or SHA-256 repository's full object id).

    Raises:
        InputError: ``BAD_DIGEST`` unless ``revision`` is lowercase hex of whole bytes.
    """
    ref = ResourceRef(uri=f"git+{repository}@{revision}", digest={"gitCommit": revision}, name=name, require_sha256=False)
    ref.to_json()  # checked now, not when the predicate is built
    return ref


def slsa_provenance(
    *,
    build_type: str,
    builder_id: str,
    external_parameters: Mapping[str, object],
    internal_parameters: Mapping[str, object] | None = None,
    resolved_dependencies: Iterable[ResourceRef] = (),
    invocation_id: str | None = None,
    started_on: _dt.datetime | None = None,
    finished_on: _dt.datetime | None = None,
    builder_version: Mapping[str, str] | None = None,
    byproducts: Iterable[ResourceRef] = (),
) -> dict[str, object]:
    """An SLSA Provenance v1 predicate (https://slsa.dev/provenance/v1).

    Raises:
        InputError: ``BAD_PREDICATE`` for an empty build type or builder id, or a naive
            (timezone-less) timestamp; the codes of :meth:`ResourceRef.to_json`.
    """
    if not build_type or not builder_id:
        raise InputError(AttestationCode.BAD_PREDICATE, "buildType and builder.id are required")
    definition: dict[str, object] = {"buildType": build_type, "externalParameters": dict(external_parameters)}
    if internal_parameters:
        definition["internalParameters"] = dict(internal_parameters)
    deps = [r.to_json() for r in resolved_dependencies]
    if deps:
        definition["resolvedDependencies"] = deps
    builder: dict[str, object] = {"id": builder_id}
    if builder_version:
        builder["version"] = dict(builder_version)
    run: dict[str, object] = {"builder": builder}
    metadata: dict[str, object] = {}
    if invocation_id is not None:
        metadata["invocationId"] = invocation_id
    if started_on is not None:
        metadata["startedOn"] = rfc3339(started_on)
    if finished_on is not None:
        metadata["finishedOn"] = rfc3339(finished_on)
    if metadata:
        run["metadata"] = metadata
    extra = [r.to_json() for r in byproducts]
    if extra:
        run["byproducts"] = extra
    return {"buildDefinition": definition, "runDetails": run}


def verification_summary(
    *,
    verifier_id: str,
    time_verified: _dt.datetime,
    resource_uri: str,
    policy: ResourceRef,
    input_attestations: Iterable[ResourceRef],
    passed: bool,
    verified_levels: Iterable[str] = (),
    verifier_version: Mapping[str, str] | None = None,
    slsa_version: str = "1.0",
) -> dict[str, object]:
    """An SLSA VSA v1 predicate (https://slsa.dev/verification_summary/v1).

    A FAILED summary lists exactly `["FAILED"]` as its verified levels (VSA v1 `SlsaResult`), whatever the caller passes.
    Every input attestation is named by a ``uri`` and a ``digest`` with a sha256 (VSA v1:
    where the attestation was read and which bytes were verified).

    Raises:
        InputError: ``BAD_PREDICATE`` for an empty verifier id or resource URI, a naive
            ``time_verified``, or an input attestation without a uri or a digest; the codes of
            :meth:`ResourceRef.to_json`.
    """
    if not verifier_id or not resource_uri:
        raise InputError(AttestationCode.BAD_PREDICATE, "verifier.id and resourceUri are required")
    inputs = tuple(input_attestations)
    for ref in inputs:
        if not ref.uri or not ref.digest or not ref.require_sha256:
            raise InputError(AttestationCode.BAD_PREDICATE, f"input attestation {ref.name or ref.uri or '?'!r} needs a uri and a sha256 digest")
    verifier: dict[str, object] = {"id": verifier_id}
    if verifier_version:
        verifier["version"] = dict(verifier_version)
    levels = sorted(set(verified_levels)) if passed else ["FAILED"]  # VSA v1: SlsaResult "FAILED" when verification failed
    return {
        "verifier": verifier,
        "timeVerified": rfc3339(time_verified),
        "resourceUri": resource_uri,
        "policy": policy.to_json(),
        "inputAttestations": [r.to_json() for r in inputs],
        "verificationResult": "PASSED" if passed else "FAILED",
        "verifiedLevels": levels,
        "slsaVersion": slsa_version,
    }
