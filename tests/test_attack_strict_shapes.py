"""Attacks on the strict readers: each row an input the docs say is refused, and was accepted (or refused unnamed).

For each reader: one valid document (the docs' shape), then a table of one-bad-field mutations,
each asserting the exact reason code and that the message names the field by its dotted path.
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.shapes import DROP, Path_, mutated, names, refused, rows

from attest._json import canonical_bytes
from attest.builder import load_recipe
from attest.builder._lock import parse_pylock
from attest.review.bootstrap import HostIdentity
from attest.review.bootstrap._deploy import DeploymentPins
from attest.review.handoff import HANDOFF_PREDICATE, IMAGE_NAMES, parse_handoff, parse_result
from attest.review.merge import parse_review_record
from attest.review.procedure import parse_reproduced_outputs
from attest.review.procedure._recheck import parse_review_state
from attest.review.procedure._start import STATE_FORMAT, review_id

A, B, C = "a" * 40, "b" * 40, "c" * 40
H = {n: str(i) * 64 for i, n in enumerate(IMAGE_NAMES, 1)}


# -- the pins' [runtime] table (docs/formats.md "Pins": name is <32 hex>-<recipe>) -------------------------------------

PINS = {
    "runtime": {"attestation": "sha256:" + "6" * 64, "interpreter": "/usr/bin/python3.11", "interpreter_sha256": "f" * 64,
                "inventory": "sha256:" + "3" * 64, "lock_sha256": "a" * 64, "name": "0dd3270e44d25b6d4a4d06276571b0f7-attest-runtime",
                "provenance": "sha256:" + "8" * 64, "python": "3.11.7"},
    "skill": {"attestation": "sha256:" + "7" * 64, "installer_repository": "https://github.com/attest-dev/attest",
              "installer_revision": C, "inventory": "sha256:" + "5" * 64, "name": "94f793f7ba4825123f3507ea628ee5d5-attest-skill",
              "provenance": "sha256:" + "6" * 64, "root": "agent-policy", "source_repository": "https://github.com/attest-dev/attest",
              "source_revision": C},
    "toolchain": {"repository": "https://github.com/attest-dev/attest", "revision": C},
}


def _toml(doc: dict[str, dict[str, str]]) -> bytes:
    lines = []
    for table, fields in doc.items():
        lines.append(f"[{table}]")
        lines += [f"{k} = {_toml_string(v)}" for k, v in fields.items()]
    return "\n".join(lines).encode() + b"\n"


def _toml_string(value: str) -> str:
    return '"' + "".join(c if c.isprintable() and c not in '"\\' else f"\\u{ord(c):04x}" for c in value) + '"'


def _pins(doc: Any) -> object:
    return DeploymentPins.from_bytes(_toml(doc), "/etc/attest/pins.toml")


PINS_CASES = [
    # runtime.name names the file STATE/builds/<name>.runtime.json the bootstrap reads: one input-addressed name.
    (("runtime", "name"), "../../../tmp/evil", "BAD_RUNTIME_PINS", "runtime.name"),
    (("runtime", "name"), "0dd3270e44d25b6d4a4d06276571b0f7-attest/runtime", "BAD_RUNTIME_PINS", "runtime.name"),
    (("runtime", "name"), "attest-runtime", "BAD_RUNTIME_PINS", "runtime.name"),
    (("runtime", "name"), " 0dd3270e44d25b6d4a4d06276571b0f7-attest-runtime", "BAD_RUNTIME_PINS", "runtime.name"),
    (("runtime", "name"), "0dd3270e44d25b6d4a4d06276571b0f7-attest-runtime\n", "BAD_RUNTIME_PINS", "runtime.name"),
    (("runtime", "name"), "0dd3270e44d25b6d4a4d06276571b0f7-attest\x00runtime", "BAD_RUNTIME_PINS", "runtime.name"),
    # every value a non-empty string "without surrounding spaces", as [skill] reads them
    (("runtime", "python"), " 3.11.7", "BAD_RUNTIME_PINS", "runtime.python"),
    (("runtime", "interpreter"), "/usr/bin/python3.11\n", "BAD_RUNTIME_PINS", "runtime.interpreter"),
    (("runtime", "interpreter"), "python3.11", "BAD_RUNTIME_PINS", "runtime.interpreter"),
    (("runtime", "interpreter"), "/usr/bin/py\x00thon", "BAD_RUNTIME_PINS", "runtime.interpreter"),
    # a control character in a pin reaches a terminal as it is (`install skill` prints the repositories)
    (("runtime", "python"), "3.11.7\x1b[2J", "BAD_RUNTIME_PINS", "runtime.python"),
    (("skill", "source_repository"), "https://github.com/attest-dev/attest\x1b[2J", "BAD_PINS", "skill.source_repository"),
    (("skill", "installer_repository"), "https://github.com/attest-dev/\nattest", "BAD_PINS", "skill.installer_repository"),
    # [toolchain] repository: "an https:// URL" (what the lock's toolchain must equal), not just its first 8 characters
    (("toolchain", "repository"), "https://", "BAD_RUNTIME_PINS", "toolchain.repository"),
    (("toolchain", "repository"), "https://github.com/attest dev/attest", "BAD_RUNTIME_PINS", "toolchain.repository"),
    (("toolchain", "repository"), "https://github.com/attest-dev/../x", "BAD_RUNTIME_PINS", "toolchain.repository"),
]

# -- the identity file (docs/formats.md "Identity file": OWNER/NAME, as --github reads it) -----------------------------

IDENTITY = {"repository": {"id": 4242, "full_name": "acme/widgets"}, "pull_request": {"id": 99001, "number": 7},
            "base": {"sha": A}, "head": {"sha": C}}

IDENTITY_CASES = [
    (("repository", "full_name"), "acme/..", "BAD_IDENTITY", "identity.repository.full_name"),
    (("repository", "full_name"), "acme/.", "BAD_IDENTITY", "identity.repository.full_name"),
]

# -- the handoff (docs/formats.md "Handoff") ---------------------------------------------------------------------------

HANDOFF = {
    "predicateType": HANDOFF_PREDICATE,
    "subject": [{"name": n, "digest": {"sha256": H[n]}} for n in IMAGE_NAMES],
    "predicate": {
        "repository": {"id": 4242, "full_name": "acme/widgets"}, "pull_request": {"id": 99001, "number": 7},
        "base": {"commit": A, "tree": B, "object_format": "sha1"},
        "toolchain": {"repository": "https://github.com/attest-dev/attest", "revision": C},
        "images": {n: {"identity": "sha256:" + H[n], "path": f"/var/lib/attest/store/{H[n]}/tree", "backend": "immutable"}
                   for n in IMAGE_NAMES},
        "installation": {"attestation_digest": "sha256:" + "4" * 64, "installed_root": "/home/ci/.agents/skills/agent-policy",
                         "installer": {"repository": "https://github.com/attest-dev/attest", "revision": C},
                         "source": {"repository": "https://github.com/attest-dev/attest", "revision": C}},
        "runtime": {"name": "0dd3270e44d25b6d4a4d06276571b0f7-attest-runtime", "attestation_digest": "sha256:" + "6" * 64},
        "config": {"path": ".agent-policy.yml", "sha256": "c" * 64}, "lock": {"path": ".agent-policy.lock", "sha256": "d" * 64},
        "outputs": [{"context": None, "path": ".agents/skills/pr-review/SKILL.md", "renderer": "pr-review-skill-v1", "sha256": "e" * 64},
                    {"context": "review", "path": "docs/review/policy-context.md", "renderer": "policy-context-md",
                     "sha256": "f" * 64}],
        "procedure": {"revision": C, "files": [{"path": "SKILL.md", "sha256": "e" * 64},
                                               {"path": "references/procedure.md", "sha256": "a" * 64}]},
        "time": "2026-09-02T12:00:00Z",
    },
}


def _handoff(doc: Any) -> object:
    return parse_handoff(doc, attestation_digest="sha256:" + "0" * 64, signers=("k",))


P = ("predicate",)
HANDOFF_CASES = [
    # "the host's identities, as in the identity file": OWNER/NAME, JSON-safe positive integers
    ((*P, "repository", "full_name"), "../x", "HANDOFF_MALFORMED", "handoff.repository.full_name"),
    ((*P, "repository", "full_name"), "acme/..", "HANDOFF_MALFORMED", "handoff.repository.full_name"),
    ((*P, "repository", "full_name"), "acme widgets", "HANDOFF_MALFORMED", "handoff.repository.full_name"),
    ((*P, "repository", "full_name"), "acme/wid\x00gets", "HANDOFF_MALFORMED", "handoff.repository.full_name"),
    ((*P, "repository", "id"), 2**53, "HANDOFF_MALFORMED", "handoff.repository.id"),
    ((*P, "pull_request", "id"), 2**60, "HANDOFF_MALFORMED", "handoff.pull_request.id"),
    ((*P, "pull_request", "number"), 2**53, "HANDOFF_MALFORMED", "handoff.pull_request.number"),
    # images: "its absolute store path and its immutability backend"
    ((*P, "images", "base", "path"), "/var/lib/attest/store/../../../etc/tree", "HANDOFF_MALFORMED", "handoff.images.base.path"),
    ((*P, "images", "base", "path"), "/var/lib/attest/store/x\x00/tree", "HANDOFF_MALFORMED", "handoff.images.base.path"),
    ((*P, "images", "base", "path"), "//var/lib/attest/store/x/tree", "HANDOFF_MALFORMED", "handoff.images.base.path"),
    ((*P, "images", "base", "path"), "/var/lib/attest/./store/x/tree", "HANDOFF_MALFORMED", "handoff.images.base.path"),
    ((*P, "images", "base", "path"), "/var/lib/attest/store/x/tree/", "HANDOFF_MALFORMED", "handoff.images.base.path"),
    ((*P, "images", "runtime", "backend"), "writable", "HANDOFF_MALFORMED", "handoff.images.runtime.backend"),
    ((*P, "images", "runtime", "backend"), "Immutable", "HANDOFF_MALFORMED", "handoff.images.runtime.backend"),
    # installation.installed_root: a resolved absolute path
    ((*P, "installation", "installed_root"), "skills/agent-policy", "HANDOFF_MALFORMED", "handoff.installation.installed_root"),
    ((*P, "installation", "installed_root"), "/home/ci/../x", "HANDOFF_MALFORMED", "handoff.installation.installed_root"),
    ((*P, "installation", "installed_root"), "/home/ci/x\x00", "HANDOFF_MALFORMED", "handoff.installation.installed_root"),
    # runtime.name: the pinned runtime's input-addressed name
    ((*P, "runtime", "name"), "attest-runtime", "HANDOFF_MALFORMED", "handoff.runtime.name"),
    # the repositories are https:// URLs, as the pins hold them
    ((*P, "toolchain", "repository"), "", "HANDOFF_MALFORMED", "handoff.toolchain.repository"),
    ((*P, "toolchain", "repository"), "file:///srv/attest.git", "HANDOFF_MALFORMED", "handoff.toolchain.repository"),
    ((*P, "installation", "source", "repository"), "x", "HANDOFF_MALFORMED", "handoff.installation.source.repository"),
    # config and lock are the base's .agent-policy.yml and .agent-policy.lock
    ((*P, "config", "path"), "/etc/passwd", "HANDOFF_MALFORMED", "handoff.config.path"),
    ((*P, "lock", "path"), "../.agent-policy.lock", "HANDOFF_MALFORMED", "handoff.lock.path"),
    # outputs and procedure files are repository- (bundle-) relative paths, by the inventory's name rules
    ((*P, "outputs", 0, "path"), "../AGENTS.md", "HANDOFF_MALFORMED", "handoff.outputs[0].path"),
    ((*P, "outputs", 1, "path"), "/docs/review/policy-context.md", "HANDOFF_MALFORMED", "handoff.outputs[1].path"),
    ((*P, "outputs", 0, "path"), "docs/a\x00b", "HANDOFF_MALFORMED", "handoff.outputs[0].path"),
    ((*P, "outputs", 0, "renderer"), "pr-review\nskill", "HANDOFF_MALFORMED", "handoff.outputs[0].renderer"),
    ((*P, "outputs", 1, "context"), "", "HANDOFF_MALFORMED", "handoff.outputs[1].context"),
    ((*P, "procedure", "files", 0, "path"), "../SKILL.md", "HANDOFF_MALFORMED", "handoff.procedure.files[0].path"),
    ((*P, "procedure", "files", 0, "path"), "/SKILL.md", "HANDOFF_MALFORMED", "handoff.procedure.files[0].path"),
    ((*P, "procedure", "files", 1, "path"), "references/./procedure.md", "HANDOFF_MALFORMED", "handoff.procedure.files[1].path"),
    ((*P, "procedure", "files", 1, "path"), "references/pro\x00cedure.md", "HANDOFF_MALFORMED",
     "handoff.procedure.files[1].path"),
    ((*P, "time"), "2026-02-31T12:00:00Z", "HANDOFF_MALFORMED", "handoff.time"),  # a day that does not exist
    ((*P, "time"), "2025-02-29T12:00:00Z", "HANDOFF_MALFORMED", "handoff.time"),
]

# -- the review result (docs/formats.md "Review result": the optional fields "may be left out", never null) ----------

RESULT = {"complete": True, "limitations": [], "findings": [
    {"id": "F1", "severity": "high", "blocking": True, "message": "eval() on input", "path": "src/calc.py", "line": 6, "side": "RIGHT"},
    {"id": "F2", "severity": "low", "blocking": False, "message": "no test covers the new branch", "path": "src/calc.py"},
    {"id": "F3", "severity": "info", "blocking": False, "message": "the change is otherwise clean"}]}


def _result(doc: Any) -> object:
    return parse_result(json.dumps(doc).encode())


F = ("findings",)
RESULT_CASES = [
    # an optional field is left out or has a value: null is neither
    ((*F, 2, "path"), None, "REVIEW_RESULT_INVALID", "result.findings[2].path"),
    ((*F, 1, "line"), None, "REVIEW_RESULT_INVALID", "result.findings[1].line"),
    ((*F, 0, "side"), None, "REVIEW_RESULT_INVALID", "result.findings[0].side"),
    # every refusal names its field
    ((*F, 1, "id"), "", "REVIEW_RESULT_INVALID", "result.findings[1].id"),
    ((*F, 1, "id"), 7, "REVIEW_RESULT_INVALID", "result.findings[1].id"),
    ((*F, 2, "message"), "", "REVIEW_RESULT_INVALID", "result.findings[2].message"),
    ((*F, 0, "severity"), "HIGH", "REVIEW_RESULT_INVALID", "result.findings[0].severity"),
    ((*F, 0, "blocking"), 1, "REVIEW_RESULT_INVALID", "result.findings[0].blocking"),
    ((*F, 0, "blocking"), DROP, "REVIEW_RESULT_INVALID", "result.findings[0]"),
    ((*F, 0, "column"), 3, "REVIEW_RESULT_INVALID", "result.findings[0]"),
    ((*F, 0, "path"), "../etc/passwd", "REVIEW_RESULT_INVALID", "result.findings[0].path"),
    ((*F, 0, "path"), 5, "REVIEW_RESULT_INVALID", "result.findings[0].path"),
    ((*F, 0, "line"), True, "REVIEW_RESULT_INVALID", "result.findings[0].line"),
    ((*F, 0, "line"), 0, "REVIEW_RESULT_INVALID", "result.findings[0].line"),
    ((*F, 2, "line"), 3, "REVIEW_RESULT_INVALID", "result.findings[2].line"),  # a line without a path
    ((*F, 1, "side"), "LEFT", "REVIEW_RESULT_INVALID", "result.findings[1].side"),  # a side without a line
    ((*F, 0, "side"), "right", "REVIEW_RESULT_INVALID", "result.findings[0].side"),
    (("limitations",), ["ran out of time", ""], "REVIEW_RESULT_INVALID", "result.limitations[1]"),
    (("limitations",), ["ran out of time"], "REVIEW_RESULT_INVALID", "result.limitations"),  # complete with a limitation
    (("complete",), "true", "REVIEW_RESULT_INVALID", "result.complete"),
    (("findings",), {}, "REVIEW_RESULT_INVALID", "result.findings"),
    (("findings",), [RESULT["findings"][2]] * 10_001, "REVIEW_RESULT_INVALID", "result.findings"),
    (("extra",), 1, "REVIEW_RESULT_INVALID", "result"),
    ((*F, 2, "message"), "clean\x1b[2J", "REVIEW_RESULT_INVALID", "result.findings[2].message"),
]

# -- the review state (docs/formats.md "Review state": "Anything else is REVIEW_STATE_MALFORMED") -----------------------

_PROJECTION = {"context": "review", "image": "sha256:" + H["base"], "renderer": "policy-context-md", "sha256": "6" * 64,
               "retained": "sha256:" + "6" * 64, "path": "docs/review/policy-context.md"}
STATE = {
    "format": STATE_FORMAT, "handoff": {"path": "/home/ci/handoff.json", "digest": "sha256:" + "9" * 64},
    "repo": "/srv/git/widgets.git", "host": {"adapter": "identity", "path": "/home/ci/identity.json"},
    "repository": {"id": 4242, "full_name": "acme/widgets"}, "pull_request": {"id": 99001, "number": 7},
    "base": {"commit": A, "tree": B, "object_format": "sha1"}, "head": C, "merge_base": A,
    "images": copy.deepcopy(HANDOFF["predicate"]["images"]), "config": {"sha256": "c" * 64}, "lock": {"sha256": "d" * 64},
    "context": "review",
    "projections": {"semantic": _PROJECTION, "adapter": {**_PROJECTION, "path": "docs/review/github-review.json", "sha256": "7" * 64,
                                                          "retained": "sha256:" + "7" * 64,
                                                          "renderer": "github-review-json-adapter-v1"}},
    "surface": {"base": A, "head": C, "base_tree": B, "head_tree": B, "paths": [
        {"path": ".agent-policy.yml", "status": "modified", "old_mode": "100644", "new_mode": "100644", "old_oid": "1" * 40,
         "new_oid": "2" * 40, "content": "text", "hunks": [{"left": {"start": 1, "count": 1}, "right": {"start": 1, "count": 1}}]},
        {"path": "notes.txt", "status": "added", "old_mode": None, "new_mode": "100644", "old_oid": None, "new_oid": "3" * 40,
         "content": "text", "hunks": [{"left": {"start": 0, "count": 0}, "right": {"start": 1, "count": 3}}]}]},
    "authority_changes": [{"path": ".agent-policy.yml", "status": "modified", "kind": "config"}],
    "change_content": "sha256:" + "5" * 64,
    "change": {"identity": "sha256:" + "8" * 64, "path": f"/var/lib/attest/store/{'8' * 64}/tree", "backend": "immutable"},
}


def _state(doc: Any) -> object:
    rest = {k: v for k, v in doc.items() if k != "review"}
    review = review_id(rest)
    return parse_review_state(canonical_bytes({**rest, "review": review}), review, "/var/lib/attest/reviews/x.json")


GITHUB_HOST = {"adapter": "github", "repository": "acme/widgets", "pr": 7, "api_url": "https://api.github.com"}
STATE_CASES = [
    # host: what recheck and serialize make the adapter from again (a null path was BAD_HOST_OPTIONS "no adapter")
    (("host", "path"), None, "REVIEW_STATE_MALFORMED", "state.host.path"),
    (("host", "path"), "identity.json", "REVIEW_STATE_MALFORMED", "state.host.path"),
    (("host",), {**GITHUB_HOST, "pr": "7"}, "REVIEW_STATE_MALFORMED", "state.host.pr"),
    (("host",), {**GITHUB_HOST, "pr": True}, "REVIEW_STATE_MALFORMED", "state.host.pr"),
    (("host",), {**GITHUB_HOST, "repository": None}, "REVIEW_STATE_MALFORMED", "state.host.repository"),
    (("host",), {**GITHUB_HOST, "api_url": None}, "REVIEW_STATE_MALFORMED", "state.host.api_url"),
    # images: each {identity, path, backend} (a bare identity string was a TypeError in reestablish_root: INTERNAL)
    (("images", "base"), "sha256:" + H["base"], "REVIEW_STATE_MALFORMED", "state.images.base"),
    (("images", "runtime", "identity"), None, "REVIEW_STATE_MALFORMED", "state.images.runtime.identity"),
    (("images", "runtime", "path"), "/var/lib/attest/store/../x/tree", "REVIEW_STATE_MALFORMED", "state.images.runtime.path"),
    (("images", "procedure", "backend"), "erofs", "REVIEW_STATE_MALFORMED", "state.images.procedure.backend"),
    (("images", "procedure", "extra"), 1, "REVIEW_STATE_MALFORMED", "state.images.procedure"),
    # projections: each exactly {path, renderer, context, sha256, image, retained}
    (("projections", "semantic"), 5, "REVIEW_STATE_MALFORMED", "state.projections.semantic"),
    (("projections", "semantic"), {}, "REVIEW_STATE_MALFORMED", "state.projections.semantic"),
    (("projections", "adapter", "path"), "../github-review.json", "REVIEW_STATE_MALFORMED", "state.projections.adapter.path"),
    (("projections", "adapter", "path"), None, "REVIEW_STATE_MALFORMED", "state.projections.adapter.path"),
    (("projections", "adapter", "sha256"), "sha256:" + "7" * 64, "REVIEW_STATE_MALFORMED", "state.projections.adapter.sha256"),
    (("projections", "adapter", "image"), None, "REVIEW_STATE_MALFORMED", "state.projections.adapter.image"),
    (("projections", "semantic", "retained"), "6" * 64, "REVIEW_STATE_MALFORMED", "state.projections.semantic.retained"),
    (("projections", "semantic", "context"), "other", "REVIEW_STATE_MALFORMED", "state.projections.semantic.context"),
    (("projections", "semantic", "renderer"), 1, "REVIEW_STATE_MALFORMED", "state.projections.semantic.renderer"),
    # the rest of what the state records
    (("handoff", "digest"), "x", "REVIEW_STATE_MALFORMED", "state.handoff.digest"),
    (("handoff", "path"), None, "REVIEW_STATE_MALFORMED", "state.handoff.path"),
    (("config", "sha256"), None, "REVIEW_STATE_MALFORMED", "state.config.sha256"),
    (("lock", "sha256"), "D" * 64, "REVIEW_STATE_MALFORMED", "state.lock.sha256"),
    (("context",), "Review Context", "REVIEW_STATE_MALFORMED", "state.context"),
    (("change", "path"), "change", "REVIEW_STATE_MALFORMED", "state.change.path"),
    (("change", "backend"), "dir", "REVIEW_STATE_MALFORMED", "state.change.backend"),
    (("repo",), "/srv/git/../widgets.git", "REVIEW_STATE_MALFORMED", "state.repo"),
    # authority_changes: refused by index and field, not "must each be exactly {path, status, kind}"
    (("authority_changes",), {}, "REVIEW_STATE_MALFORMED", "state.authority_changes"),
    (("authority_changes", 0, "kind"), "policy", "REVIEW_STATE_MALFORMED", "state.authority_changes[0].kind"),
    (("authority_changes", 0, "status"), "renamed", "REVIEW_STATE_MALFORMED", "state.authority_changes[0].status"),
    (("authority_changes", 0, "status"), "added", "REVIEW_STATE_MALFORMED", "state.authority_changes[0].path"),  # not the surface's
    (("authority_changes", 0, "source"), "x", "REVIEW_STATE_MALFORMED", "state.authority_changes[0]"),
    (("authority_changes", 0, "path"), "src.txt", "REVIEW_STATE_MALFORMED", "state.authority_changes[0].path"),
    (("authority_changes", 0, "path"), None, "REVIEW_STATE_MALFORMED", "state.authority_changes[0].path"),
    (("refresh",), None, "REVIEW_STATE_MALFORMED", "state.refresh"),  # only after a refresh, and then an object
    # surface.paths: serialize read them later, as "the review state's changed surface is malformed: KeyError('hunks')"
    (("surface", "paths", 1), "notes.txt", "REVIEW_STATE_MALFORMED", "state.surface.paths[1]"),
    (("surface", "paths", 1, "hunks"), DROP, "REVIEW_STATE_MALFORMED", "state.surface.paths[1]"),
    (("surface", "paths", 1, "path"), "../notes.txt", "REVIEW_STATE_MALFORMED", "state.surface.paths[1].path"),
    (("surface", "paths", 1, "path"), ".agent-policy.yml", "REVIEW_STATE_MALFORMED", "state.surface.paths[1].path"),  # twice
    (("surface", "paths", 1, "path"), ".a", "REVIEW_STATE_MALFORMED", "state.surface.paths[1].path"),  # out of order
    (("surface", "paths", 1, "status"), "renamed", "REVIEW_STATE_MALFORMED", "state.surface.paths[1].status"),
    (("surface", "paths", 1, "status"), "modified", "REVIEW_STATE_MALFORMED", "state.surface.paths[1]"),  # no old side
    (("surface", "paths", 1, "old_mode"), "644", "REVIEW_STATE_MALFORMED", "state.surface.paths[1].old_mode"),
    (("surface", "paths", 1, "new_oid"), "3" * 64, "REVIEW_STATE_MALFORMED", "state.surface.paths[1].new_oid"),
    (("surface", "paths", 1, "content"), "binary", "REVIEW_STATE_MALFORMED", "state.surface.paths[1]"),  # hunks, not text
    (("surface", "paths", 1, "content"), "source", "REVIEW_STATE_MALFORMED", "state.surface.paths[1].content"),
    (("surface", "paths", 1, "hunks", 0, "right", "count"), -1, "REVIEW_STATE_MALFORMED",
     "state.surface.paths[1].hunks[0].right.count"),
    (("surface", "paths", 1, "hunks", 0, "right", "start"), 0, "REVIEW_STATE_MALFORMED", "state.surface.paths[1].hunks[0]"),
    (("surface", "paths", 1, "hunks", 0, "left"), None, "REVIEW_STATE_MALFORMED", "state.surface.paths[1].hunks[0].left"),
]

# -- the merge gate's review record (docs/formats.md "Review record"): each check refuses by the field's name ----------

RECORD = {
    "review": "7" * 32, "state_digest": "sha256:" + "e" * 64, "generation": 0, "status": "complete",
    "repository": {"id": 4242, "full_name": "acme/widgets"}, "pull_request": {"id": 99001, "number": 7},
    "base": {"commit": A, "tree": B}, "head": C, "merge_base": A, "handoff_digest": "sha256:" + "a" * 64,
    "images": {n: "sha256:" + H[n] for n in IMAGE_NAMES}, "change": {"identity": "sha256:" + "4" * 64},
    "projections": {"adapter": {"path": "docs/review/github-review.json", "sha256": "sha256:" + "a" * 64},
                    "semantic": {"path": "docs/review/policy-context.md", "sha256": "sha256:" + "6" * 64}},
    "result": {"sha256": "sha256:" + "b" * 64}, "failure": None, "limitations": [],
    "authority_changes": [{"path": ".agent-policy.yml", "status": "modified", "kind": "config"}],
    "findings": {"blocking": 4, "in_body": 5, "inline": 3, "total": 8}, "event": "REQUEST_CHANGES",
    "confinement": {"confined": True}, "time": "2026-12-02T16:31:28Z",
}
FAILURE = {"code": "REVIEWER_FAILED", "detail": "exit 3"}


def _record(doc: Any) -> object:
    return parse_review_record(doc, "sha256:" + "9" * 64, "record.json")


RECORD_CASES = [
    # fields the gate did not read at all
    (("state_digest",), "x", "MERGE_RECORD_MALFORMED", "record.state_digest"),
    (("handoff_digest",), None, "MERGE_RECORD_MALFORMED", "record.handoff_digest"),
    (("generation",), True, "MERGE_RECORD_MALFORMED", "record.generation"),
    (("generation",), -1, "MERGE_RECORD_MALFORMED", "record.generation"),
    (("generation",), "0", "MERGE_RECORD_MALFORMED", "record.generation"),
    (("time",), "yesterday", "MERGE_RECORD_MALFORMED", "record.time"),
    (("time",), None, "MERGE_RECORD_MALFORMED", "record.time"),
    (("time",), "2026-04-31T16:31:28Z", "MERGE_RECORD_MALFORMED", "record.time"),
    (("projections",), {}, "MERGE_RECORD_MALFORMED", "record.projections"),
    (("projections", "semantic"), None, "MERGE_RECORD_MALFORMED", "record.projections.semantic"),
    (("projections", "semantic", "sha256"), "6" * 64, "MERGE_RECORD_MALFORMED", "record.projections.semantic.sha256"),
    (("projections", "adapter", "path"), 7, "MERGE_RECORD_MALFORMED", "record.projections.adapter.path"),
    (("result",), "sha256:" + "b" * 64, "MERGE_RECORD_MALFORMED", "record.result"),
    (("result",), {"sha256": "b" * 64}, "MERGE_RECORD_MALFORMED", "record.result.sha256"),
    (("result",), {"sha256": "sha256:" + "b" * 64, "size": 1}, "MERGE_RECORD_MALFORMED", "record.result"),
    (("failure",), 5, "MERGE_RECORD_MALFORMED", "record.failure"),
    (("confinement",), 5, "MERGE_RECORD_MALFORMED", "record.confinement"),
    # the contradictions: each by the field that contradicts (was one "the review record contradicts itself")
    (("event",), "COMMENT", "MERGE_RECORD_MALFORMED", "record.event"),
    (("event",), "APPROVE", "MERGE_RECORD_MALFORMED", "record.event"),
    (("findings", "inline"), 4, "MERGE_RECORD_MALFORMED", "record.findings.total"),
    (("findings", "blocking"), 9, "MERGE_RECORD_MALFORMED", "record.findings.blocking"),
    (("findings", "blocking"), 0, "MERGE_RECORD_MALFORMED", "record.findings.blocking"),  # < its one authority change
    (("findings",), {"blocking": 4, "in_body": 0, "inline": 8, "total": 8}, "MERGE_RECORD_MALFORMED", "record.findings.in_body"),
    (("limitations",), ["analysed nothing"], "MERGE_RECORD_MALFORMED", "record.limitations"),  # complete, limited
    (("status",), "limited", "MERGE_RECORD_MALFORMED", "record.limitations"),  # limited, no limitation
    (("result",), None, "MERGE_RECORD_MALFORMED", "record.result"),  # complete, no result
    (("failure",), FAILURE, "MERGE_RECORD_MALFORMED", "record.failure"),  # complete, failed
    (("status",), "failed", "MERGE_RECORD_MALFORMED", "record.result"),  # failed, with a result
    (("confinement",), None, "MERGE_RECORD_MALFORMED", "record.confinement"),  # a result, and no word of how its reviewer ran
]
FAILED = {**RECORD, "status": "failed", "result": None, "failure": FAILURE, "confinement": None,
          "findings": {"blocking": 1, "in_body": 1, "inline": 0, "total": 1}}
FAILED_CASES = [
    (("failure",), None, "MERGE_RECORD_MALFORMED", "record.failure"),
    (("failure",), {"code": "REVIEWER_FAILED"}, "MERGE_RECORD_MALFORMED", "record.failure"),
    (("failure", "code"), "", "MERGE_RECORD_MALFORMED", "record.failure.code"),
    (("failure", "detail"), None, "MERGE_RECORD_MALFORMED", "record.failure.detail"),
    (("findings",), {"blocking": 2, "in_body": 2, "inline": 0, "total": 2}, "MERGE_RECORD_MALFORMED", "record.findings.total"),
    (("confinement",), {"confined": True}, "MERGE_RECORD_MALFORMED", "record.confinement"),  # no reviewer ran to a result
]

# -- the PEP 751 lock (docs/build.md "Locks"): names, exact versions, specifiers, each refusal by its field ------------

WHEEL = "foo-1.0-py3-none-any.whl"
PYLOCK = {"lock-version": "1.0", "requires-python": ">=3.11", "packages": [
    {"name": "foo", "version": "1.0", "requires-python": ">=3.11", "marker": "python_version >= '3.11'", "wheels": [
        {"name": WHEEL, "url": f"https://files.example/{WHEEL}", "size": 10, "hashes": {"sha256": "a" * 64}}]}]}


def _inline_toml(doc: dict[str, Any]) -> bytes:
    """``doc`` as TOML, every table inline (what tomllib reads back as the same dict)."""
    def value(v: Any) -> str:
        if isinstance(v, (bool, int, str)):
            return json.dumps(v)
        if isinstance(v, list):
            return "[" + ", ".join(value(x) for x in v) + "]"
        return "{" + ", ".join(f"{json.dumps(k)} = {value(x)}" for k, x in v.items()) + "}"

    return "".join(f"{json.dumps(k)} = {value(v)}\n" for k, v in doc.items()).encode()


def _pylock(doc: Any) -> object:
    return parse_pylock(_inline_toml(doc), where="pylock.toml")


PK, WH = ("packages", 0), ("packages", 0, "wheels", 0)
PYLOCK_CASES = [
    ((*PK, "name"), "../foo", "BAD_LOCK", "lock.packages[0].name"),
    ((*PK, "name"), "foo/bar", "BAD_LOCK", "lock.packages[0].name"),
    ((*PK, "name"), " foo", "BAD_LOCK", "lock.packages[0].name"),
    ((*PK, "name"), "foo\n", "BAD_LOCK", "lock.packages[0].name"),
    ((*PK, "name"), "bar", "BAD_LOCK", "lock.packages[0].wheels[0].name"),  # the wheel is another distribution's
    ((*PK, "version"), ">=1.0", "LOCK_NOT_PINNED", "lock.packages[0].version"),
    ((*PK, "version"), "1.0 ", "LOCK_NOT_PINNED", "lock.packages[0].version"),
    ((*PK, "marker"), "python_version >", "BAD_LOCK", "lock.packages[0].marker"),
    ((*PK, "requires-python"), ">=>3", "BAD_LOCK", "lock.packages[0].requires-python"),
    (("requires-python",), ">=>3", "BAD_LOCK", "lock.requires-python"),
    ((*WH, "name"), "foo-2.0-py3-none-any.whl", "BAD_LOCK", "lock.packages[0].wheels[0].name"),
    ((*WH, "name"), f"../{WHEEL}", "LOCK_NOT_WHEEL", "lock.packages[0].wheels[0].name"),
    ((*WH, "name"), "foo-1.0.tar.gz", "LOCK_NOT_WHEEL", "lock.packages[0].wheels[0].name"),
    ((*WH, "name"), "foo-1.0-x.whl", "LOCK_NOT_WHEEL", "lock.packages[0].wheels[0].name"),
    # a URL with credentials (a lock is published, its URLs recorded in attestations), or one that is not a host's
    ((*WH, "url"), f"https://user:token@files.example.org/{WHEEL}", "BAD_LOCK", "lock.packages[0].wheels[0].url"),
    ((*WH, "url"), f"https://token@files.example.org/{WHEEL}", "BAD_LOCK", "lock.packages[0].wheels[0].url"),
    ((*WH, "url"), f"https:///{WHEEL}", "BAD_LOCK", "lock.packages[0].wheels[0].url"),
    ((*WH, "url"), f"https://files.example.org:99999/{WHEEL}", "BAD_LOCK", "lock.packages[0].wheels[0].url"),
    ((*WH, "url"), f"http://files.example.org/{WHEEL}", "BAD_LOCK", "lock.packages[0].wheels[0].url"),
    # a name that is not the file the URL fetches: which one is the wheel installed?
    ((*WH, "url"), "https://files.example.org/foo-1.0-py2.py3-none-any.whl", "BAD_LOCK", "lock.packages[0].wheels[0].url"),
]

# parse_reproduced_outputs, the review's own reader of the handoff's outputs: each refusal named (it was one sentence,
# "each of the handoff's outputs must be {path, renderer, context, sha256}", and a sha256 of any 64 characters passed)
OUTPUTS_CASES = [
    (("outputs", 1, "sha256"), "F" * 64, "HANDOFF_MALFORMED", "handoff.outputs[1].sha256"),
    (("outputs", 1, "sha256"), "sha256:" + "f" * 57, "HANDOFF_MALFORMED", "handoff.outputs[1].sha256"),
    (("outputs", 0, "renderer"), None, "HANDOFF_MALFORMED", "handoff.outputs[0].renderer"),
    (("outputs", 0, "context"), DROP, "HANDOFF_MALFORMED", "handoff.outputs[0]"),
    (("outputs", 0, "path"), 7, "HANDOFF_MALFORMED", "handoff.outputs[0].path"),
    (("outputs",), {}, "HANDOFF_MALFORMED", "handoff.outputs"),
]

PARSERS: list[tuple[str, Callable[[Any], object], Any, list[Any]]] = [
    ("pins", _pins, PINS, PINS_CASES),
    ("identity file", lambda d: HostIdentity.from_json(d, "identity.json"), IDENTITY, IDENTITY_CASES),
    ("handoff", _handoff, HANDOFF, HANDOFF_CASES),
    ("review result", _result, RESULT, RESULT_CASES),
    ("review state", _state, STATE, STATE_CASES),
    ("review record", _record, RECORD, RECORD_CASES),
    ("failed review record", _record, FAILED, FAILED_CASES),
    ("pylock", _pylock, PYLOCK, PYLOCK_CASES),
    ("reproduced outputs", parse_reproduced_outputs, HANDOFF["predicate"], OUTPUTS_CASES),
]

ROWS = rows(PARSERS)


@pytest.mark.parametrize(("name", "parse", "doc"), [(n, p, d) for n, p, d, _ in PARSERS], ids=[n for n, *_ in PARSERS])
def test_the_valid_document_parses(name: str, parse: Callable[[Any], object], doc: Any) -> None:
    assert parse(copy.deepcopy(doc)) is not None, name


@pytest.mark.parametrize(("parse", "doc", "at", "value", "code", "field"), ROWS)
def test_one_bad_field_is_refused_with_its_code_naming_it(parse: Callable[[Any], object], doc: Any, at: Path_, value: Any,
                                                          code: str, field: str) -> None:
    got, message = refused(parse, mutated(doc, at, value))
    assert got == code, message
    assert names(message, field), message


def test_a_leap_day_is_a_time() -> None:
    doc = mutated(HANDOFF, (*P, "time"), "2028-02-29T23:59:59Z")
    assert _handoff(doc) is not None


def test_the_handoff_backends_are_the_review_chains() -> None:
    """The handoff reads backends without importing the freeze layer: its list is the freeze layer's, less erofs
    (which the review chain refuses: EROFS_UNSUPPORTED), and the workflow's ``--backend`` choices."""
    from attest.freeze import BACKENDS
    from attest.review.handoff._handoff import BACKEND_NAMES
    from attest.review.platform._workflow import BACKENDS as WORKFLOW_BACKENDS

    assert BACKEND_NAMES == tuple(k for k in BACKENDS if k != "erofs") == WORKFLOW_BACKENDS


# -- the recipe (docs/build.md "Recipes": entry points "must exist in bin/ after the install") --------------------------

RECIPE = ('schema = "attest-recipe/v1"\nkind = "runtime"\nname = "attest-runtime"\n[toolchain]\nrepository = "https://github.com/attest-dev/attest"\n'
          'source = ".."\n[lock]\npath = "pylock.toml"\n[interpreter]\nrequires = "==3.11.*"\n[expose]\nentry_points = [{}]\n')

RECIPE_CASES = [
    # os.path.join(root, "bin", "/bin/sh") is /bin/sh: the host's file was taken as an exposed entry point
    ('"attest", "/bin/sh"', "recipe.expose.entry_points[1]"),
    ('"../lib/python3.11/site-packages/attest/__init__.py"', "recipe.expose.entry_points[0]"),
    ('"bin/attest"', "recipe.expose.entry_points[0]"),
    ('".."', "recipe.expose.entry_points[0]"),
    ('"attest\\u0000"', "recipe.expose.entry_points[0]"),
]


@pytest.mark.parametrize(("entry_points", "field"), RECIPE_CASES, ids=[c[0] for c in RECIPE_CASES])
def test_a_recipe_entry_point_is_one_name_in_bin(tmp_path: Path, entry_points: str, field: str) -> None:
    path = tmp_path / "runtime.toml"
    path.write_text(RECIPE.replace("{}", '"attest"'))
    assert load_recipe(path).name == "attest-runtime"
    path.write_text(RECIPE.replace("{}", entry_points))
    got, message = refused(load_recipe, path)
    assert got == "BAD_RECIPE", message
    assert names(message, field), message


REPOSITORY_CASES = [
    ("runtime", "toolchain", "file:///srv/toolchain.git"),
    ("runtime", "toolchain", "https://"),
    ("runtime", "toolchain", "https://github.com/acme/../other"),
    ("runtime", "toolchain", "/srv/toolchain.git"),
    ("skill", "source", "git@github.com:acme/skill.git"),
    ("skill", "installer", "https://github.com/acme/tool chain"),
]


@pytest.mark.parametrize(("kind", "table", "value"), REPOSITORY_CASES, ids=[f"{c[1]}-{c[2]}" for c in REPOSITORY_CASES])
def test_a_recipe_repository_is_an_https_url(tmp_path: Path, kind: str, table: str, value: str) -> None:
    """What a promotion writes into the pins the bootstrap reads (BAD_RUNTIME_PINS otherwise): refused at the recipe."""
    good = "https://github.com/attest-dev/attest"
    skill = ('schema = "attest-recipe/v1"\nkind = "skill"\nname = "attest-skill"\n[source]\nrepository = "{source}"\npath = ".."\n'
             'subtree = "docs"\n[install]\nroot = "agent-policy"\n[installer]\nrepository = "{installer}"\n')
    def recipe(bad: str) -> str:
        if kind == "runtime":
            return RECIPE.replace("{}", '"attest"').replace(good, bad)
        return skill.format(source=bad if table == "source" else good, installer=bad if table == "installer" else good)

    path = tmp_path / "recipe.toml"
    path.write_text(recipe(good))
    assert load_recipe(path).name in ("attest-runtime", "attest-skill")
    path.write_text(recipe(value))
    got, message = refused(load_recipe, path)
    assert got == "BAD_RECIPE" and names(message, f"recipe.{table}.repository"), message


def test_a_recipe_of_another_kind_names_the_field(tmp_path: Path) -> None:
    path = tmp_path / "runtime.toml"
    path.write_text(RECIPE.replace("{}", '"attest"').replace('kind = "runtime"', 'kind = "image"'))
    got, message = refused(load_recipe, path)
    assert got == "BAD_RECIPE" and names(message, "recipe.kind"), message


# -- .agent-policy.yml (docs/formats.md): a module refused by its index, not by the list --------------------------------

CONFIG_YML = """schema: 2
toolchain:
  repository: https://github.com/attest-dev/attest
  revision: 84ef0981e95899769f21df15c6f36b9299763f97
skills:
  enabled: [pr-review]
contexts:
  review:
    modules:
      - policy/core/evidence.md
      - policy/core/layers.md
outputs:
  - {path: docs/review/policy-context.md, renderer: policy-context-md, context: review, enabled: true}
"""

CONFIG_CASES = [
    ("policy/core/layers.md", "../layers.md", "PATH_NOT_NORMAL", "contexts.review.modules[1]"),
    ("policy/core/layers.md", "/etc/passwd", "PATH_ABSOLUTE", "contexts.review.modules[1]"),
    ("policy/core/layers.md", '"policy/core/lay\\x1bers.md"', "PATH_BAD_NAME", "contexts.review.modules[1]"),
    ("policy/core/layers.md", "policy/core/evidence.md", "PATH_CONFLICT", "contexts.review.modules[1]"),
]


@pytest.mark.parametrize(("old", "new", "code", "field"), CONFIG_CASES, ids=[c[1] for c in CONFIG_CASES])
def test_a_config_refusal_names_the_module_by_its_index(old: str, new: str, code: str, field: str) -> None:
    from attest.policy import PolicyConfig

    assert PolicyConfig.from_bytes(CONFIG_YML.encode()) is not None
    got, message = refused(PolicyConfig.from_bytes, CONFIG_YML.replace(old, new, 1).encode())
    assert got == code, message
    assert names(message, field), message


# -- the recheck record (docs/review.md: {"review", "state", "outcome", "reason": CODE, "superseded_by": NEW_ID|null}) --

def _closed_review(tmp_path: Path, record: dict[str, Any]) -> tuple[str, str]:
    from attest._digest import sha256_of
    from attest.review.procedure._recheck import RECHECKS_DIR
    from attest.review.procedure._start import REVIEWS_DIR, write_review_state, write_state_file

    state_dir = tmp_path / "state"
    state_dir.mkdir(mode=0o700)
    review, path = write_review_state(str(state_dir), {k: v for k, v in STATE.items() if k != "review"})
    digest = sha256_of(Path(path).read_bytes())
    assert os.path.dirname(path).endswith(REVIEWS_DIR)
    doc = {"review": review, "state": digest, "outcome": "refresh", "reason": "REVIEW_HEAD_MOVED", "superseded_by": "f" * 32,
           **record}
    write_state_file(str(state_dir), RECHECKS_DIR, f"{review}.json", canonical_bytes(doc))
    return str(state_dir), review


RECHECK_RECORD_CASES = [
    ({"superseded_by": "\x1b[2J" + "f" * 28}, "recheck_record.superseded_by"),  # printed in the refusal as it is
    ({"superseded_by": None}, "recheck_record.superseded_by"),  # a refresh names the review that replaced it
    ({"superseded_by": 7}, "recheck_record.superseded_by"),
    ({"outcome": "fail", "reason": "HOST_MISMATCH", "superseded_by": "f" * 32}, "recheck_record.superseded_by"),  # null
    ({"reason": ""}, "recheck_record.reason"),
    ({"reason": "head moved\nREVIEW_UNCHANGED"}, "recheck_record.reason"),
]


@pytest.mark.parametrize(("record", "field"), RECHECK_RECORD_CASES, ids=[repr(r)[:40] for r, _ in RECHECK_RECORD_CASES])
def test_a_recheck_record_of_another_shape_is_malformed_by_its_field(tmp_path: Path, record: dict[str, Any], field: str) -> None:
    from attest.review.procedure._recheck import load_review_state

    state_dir, review = _closed_review(tmp_path, record)
    got, message = refused(lambda _: load_review_state(state_dir, review), None)
    assert got == "REVIEW_STATE_MALFORMED", message
    assert names(message, field), message


def test_a_well_formed_recheck_record_closes_the_review(tmp_path: Path) -> None:
    from attest.review.procedure._recheck import load_review_state

    state_dir, review = _closed_review(tmp_path, {})
    assert refused(lambda _: load_review_state(state_dir, review), None)[0] == "REVIEW_SUPERSEDED"
    (tmp_path / "b").mkdir()
    state_dir, review = _closed_review(tmp_path / "b", {"outcome": "restart", "reason": "REVIEW_BASE_TREE_MISMATCH",
                                                        "superseded_by": None})
    assert refused(lambda _: load_review_state(state_dir, review), None)[0] == "REVIEW_DISCARDED"


def test_the_result_writer_leaves_an_absent_optional_field_out() -> None:
    """The writer side of "left out, never null": what review exec and the agent write reads back as itself."""
    from attest.review.handoff import ResultFinding, ReviewResult

    result = ReviewResult(False, ("ran out of time",), (ResultFinding("F1", "low", False, "m"),
                                                        ResultFinding("F2", "high", True, "m", "src/a.py"),
                                                        ResultFinding("F3", "high", True, "m", "src/a.py", 3)))
    doc = result.to_json()
    assert [sorted(f) for f in doc["findings"]] == [["blocking", "id", "message", "severity"],
                                                    ["blocking", "id", "message", "path", "severity"],
                                                    ["blocking", "id", "line", "message", "path", "severity"]]
    assert parse_result(json.dumps(doc).encode()) == result


# -- the promotion-log checkpoint (docs/formats.md "Promotion-log checkpoint"): each refusal by its field --------------

CHECKPOINT = {"digest": "sha256:" + "5" * 64, "format": "https://attest.dev/promotion-log-checkpoint/v1",
              "pins": "/etc/attest/pins.toml", "sequence": 1}

CHECKPOINT_CASES = [
    (("sequence",), 0, "checkpoint.sequence"),
    (("sequence",), True, "checkpoint.sequence"),
    (("sequence",), "1", "checkpoint.sequence"),
    (("digest",), "5" * 64, "checkpoint.digest"),
    (("format",), "https://attest.dev/promotion-log-checkpoint/v2", "checkpoint.format"),
    (("pins",), "/etc/attest/other.toml", "checkpoint.pins"),
    (("head",), 1, "checkpoint"),
]


@pytest.mark.parametrize(("at", "value", "field"), CHECKPOINT_CASES, ids=[f"{a[0]}={v!r}" for a, v, _ in CHECKPOINT_CASES])
def test_a_remembered_checkpoint_is_refused_by_its_field(tmp_path: Path, at: Path_, value: Any, field: str) -> None:
    from attest.builder._promolog import checkpoint_path, read_checkpoint

    state = tmp_path / "state"
    pins = "/etc/attest/pins.toml"
    where = Path(checkpoint_path(state, pins))
    where.parent.mkdir(parents=True, mode=0o700)
    state.chmod(0o700)
    for doc, ok in ((CHECKPOINT, True), (mutated(CHECKPOINT, at, value), False)):
        where.unlink(missing_ok=True)
        fd = os.open(where, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.write(fd, canonical_bytes(doc))
        os.close(fd)
        if ok:
            assert read_checkpoint(state, pins) is not None
            continue
        got, message = refused(lambda _: read_checkpoint(state, pins), None)
        assert got == "PROMOTION_LOG_CHECKPOINT_INVALID", message
        assert names(message, field), message
