"""Signed evidence of a build: the runtime or installation predicate and SLSA Provenance v1.

Statements carry no clock reading, so two honest builds of the same inputs sign the same
statement bytes. Files land beside the build record: ``STATE/builds/<name>.<kind>.json``
and ``STATE/builds/<name>.provenance.json``.

    >>> result = attest_build(result, load_signer("release.pem"), state)
    >>> result.attestations      # paths of the signed statements
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence

from .._digest import sha256_of
from .._fs import write_atomic
from ..attestation import (
    INSTALLATION_PREDICATE,
    RUNTIME_PREDICATE,
    SLSA_PROVENANCE_V1,
    KeylessSigner,
    ResourceRef,
    Signer,
    git_dependency,
    sign_statement,
    slsa_provenance,
    statement,
    subject,
)
from ._common import BUILDER_ID
from ._outputs import BuildResult, input_digest, write_manifest

BUILD_TYPES = {
    "runtime": "https://attest.dev/build-types/runtime/v1",
    "skill": "https://attest.dev/build-types/skill/v1",
}


def build_predicate(result: BuildResult) -> tuple[str, dict[str, object]]:
    """The project's own predicate for ``result`` (docs/attestation.md "Predicate types").

    Its fields are those docs/build.md "The build" lists for ``<name>.runtime.json`` and
    ``<name>.skill.json``: everything the build was selected from (toolchain, lock, interpreter,
    wheels, or installer and source) and the closed inventory it produced.
    """
    if result.kind == "runtime":
        d = result.details
        return RUNTIME_PREDICATE, {
            "name": result.name,
            "inputs_digest": result.inputs_digest,
            "toolchain": {k: d["toolchain"][k] for k in ("repository", "revision", "tree")},
            "lock": d["lock"],
            "interpreter": d["interpreter"],
            # What the image's interpreter loads from the host (libc, libssl, the loader, ...),
            # by path and SHA-256: re-verified before every use (attest.freeze._hostlibs).
            "host_libraries": d.get("host_libraries", []),
            "distributions": d["distributions"],
            "wheels": result.inputs["wheels"],
            "inventory": result.inventory.to_json(),
        }
    s = result.details["skill"]
    return INSTALLATION_PREDICATE, {
        "name": result.name,
        "inputs_digest": result.inputs_digest,
        "installer": {"repository": s["installer_repository"], "revision": s["installer_revision"]},
        "source": {"repository": s["source_repository"], "revision": s["source_revision"], "tree": s["tree"],
                   "subtree": s["subtree"], "subtree_tree": s["subtree_tree"]},
        "root": s["root"],
        "inventory": result.inventory.to_json(),
    }


def provenance_predicate(result: BuildResult) -> dict[str, object]:
    """SLSA Provenance v1 of ``result``: every resolved dependency named, git ones by ``gitCommit``, wheels by SHA-256 and URL.

    Raises:
        InputError: ``BAD_DIGEST`` for a revision that is not a full hex object id.
    """
    inputs = result.inputs
    deps: list[ResourceRef] = []
    if result.kind == "runtime":
        tc = inputs["toolchain"]
        deps.append(git_dependency(tc["repository"], tc["revision"], "toolchain"))
        # Each wheel by its SHA-256 and, where the lock names one, the URL it is downloaded from.
        deps.extend(ResourceRef(uri=w.get("url"), name=w["filename"], digest={"sha256": w["sha256"]})
                    for w in [*inputs["wheels"], *inputs["build_backend"]])
        external = {"recipe": inputs["recipe"], "toolchain_revision": tc["revision"], "lock": inputs["lock"], "options": inputs["options"]}
        internal = {"interpreter_sha256": input_digest(inputs["interpreter"]), "network_isolated": result.network_isolated,
                    "sandbox": inputs.get("sandbox")}
    else:
        src = inputs["source"]
        deps.append(git_dependency(src["repository"], src["revision"], "source"))
        installer = inputs["installer"]
        if installer.get("revision") is not None:
            deps.append(git_dependency(installer["repository"], installer["revision"], "installer"))
        external = {"recipe": inputs["recipe"], "source_revision": src["revision"], "subtree": src["subtree"], "root": inputs["root"],
                    "installer": inputs["installer"]}
        internal = {"network_isolated": result.network_isolated}
    return slsa_provenance(
        build_type=BUILD_TYPES[result.kind],
        builder_id=BUILDER_ID,
        external_parameters=external,
        internal_parameters=internal,
        resolved_dependencies=deps,
        builder_version={"code_sha256": inputs["builder"]["code_sha256"]},
    )


def attest_build(result: BuildResult, signer: Signer | KeylessSigner | Sequence[Signer], state: str, *, fmt: str = "dsse") -> BuildResult:
    """Sign the build's predicate and provenance; record them in the build record.

    ``signer`` is one signer or several (each statement is then one DSSE envelope with one
    signature per key; see :func:`attest.attestation.sign_statement`).
    """
    subj = [subject(result.name, result.inventory.digest_hex)]
    ptype, predicate = build_predicate(result)
    builds = os.path.join(state, "builds")
    paths = []
    for suffix, pt, pred in ((result.kind, ptype, predicate), ("provenance", SLSA_PROVENANCE_V1, provenance_predicate(result))):
        data = sign_statement(statement(subj, pt, pred), signer, fmt=fmt)
        path = os.path.join(builds, f"{result.name}.{suffix}.json")
        write_atomic(path, data, mode=0o444)
        paths.append(path)
    signed = dataclasses.replace(result, attestations=tuple(paths))
    write_manifest(signed, state)
    return signed


def file_digest(path: str) -> str:
    with open(path, "rb") as f:
        return sha256_of(f.read())
