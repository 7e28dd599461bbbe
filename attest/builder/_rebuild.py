"""The rebuild check: build again in another staging context and compare, entry by entry.

The second build runs under another temporary directory (outside the store), another
``umask`` and extra environment noise, from a private copy of nothing but the same
inputs. It passes only when the input-addressed name and the inventory identity are
identical; otherwise every differing entry is reported (type, mode, size, digest) and text
files get a short unified diff.

    >>> report = rebuild_check_runtime(recipe, sha, "state", "cache", sandbox)
    >>> report.ok, [str(f) for f in report.findings]
"""

from __future__ import annotations

import datetime as _dt
import difflib
import hashlib
import os
import secrets
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .._fs import write_atomic
from .._plural import count
from ..attestation import VSA_V1, KeylessSigner, ResourceRef, Signer, sign_statement, statement, subject, verification_summary
from ..errors import Finding
from ..inventory import diff_inventories
from ._codes import BuildCode
from ._common import BUILDER_ID
from ._outputs import BuildResult, remove_tree
from ._recipe import RuntimeRecipe, SkillRecipe
from ._runtime import build_runtime
from ._sandbox import Sandbox
from ._skill import build_skill

REBUILD_UMASK = 0o077
MAX_DIFF_BYTES = 256 * 1024
MAX_DIFF_LINES = 40


@dataclass(frozen=True, slots=True)
class RebuildReport:
    kind: str
    first: BuildResult
    second_name: str
    second_identity: str
    findings: tuple[Finding, ...]
    diffs: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.findings

    def to_json(self) -> dict[str, object]:
        """The ``--json`` object of ``attest rebuild``; on a difference also ``errors`` and ``diffs``.

        Raises:
            Nothing: it only reads fields.
        """
        out: dict[str, object] = {
            "ok": self.ok,
            "kind": self.kind,
            "name": self.first.name,
            "rebuilt_name": self.second_name,
            "identity": self.first.inventory.identity,
            "rebuilt_identity": self.second_identity,
            "image": self.first.store_path,
        }
        if not self.ok:
            out["errors"] = [f.to_json() for f in self.findings]
            out["diffs"] = self.diffs
        return out


def _text_diff(a_root: str, b_root: str, rel: str) -> str | None:
    try:
        with open(os.path.join(a_root, rel), "rb") as f:
            a = f.read(MAX_DIFF_BYTES + 1)
        with open(os.path.join(b_root, rel), "rb") as f:
            b = f.read(MAX_DIFF_BYTES + 1)
    except OSError:
        return None
    if len(a) > MAX_DIFF_BYTES or len(b) > MAX_DIFF_BYTES or b"\0" in a or b"\0" in b:
        return None
    try:
        at, bt = a.decode("utf-8"), b.decode("utf-8")
    except UnicodeDecodeError:
        return None
    lines = list(difflib.unified_diff(at.splitlines(), bt.splitlines(), f"first/{rel}", f"rebuild/{rel}", lineterm="", n=2))
    if len(lines) > MAX_DIFF_LINES:
        lines = [*lines[:MAX_DIFF_LINES], f"... ({len(lines) - MAX_DIFF_LINES} more lines)"]
    return "\n".join(lines)


def compare(first: BuildResult, second: BuildResult, second_root: str) -> RebuildReport:
    """Pure comparison of two builds of one recipe; reads files only to render text diffs."""
    findings: list[Finding] = []
    diffs: dict[str, str] = {}
    if first.name != second.name:
        findings.append(Finding(BuildCode.NOT_REPRODUCIBLE, None, f"the inputs differ: {first.name} vs {second.name}"))
    if first.inventory.canonical != second.inventory.canonical:
        differences = diff_inventories(first.inventory, second.inventory)
        findings.append(Finding(BuildCode.NOT_REPRODUCIBLE, None,
                                f"inventory {first.inventory.identity} vs {second.inventory.identity}: {count(len(differences), 'entry')} {'differs' if len(differences) == 1 else 'differ'}"))
        findings.extend(differences)
        for f in differences:
            if f.code == "DIGEST_MISMATCH" and f.path is not None:
                text = _text_diff(first.store_path, second_root, f.path)
                if text:
                    diffs[f.path] = text
    return RebuildReport(first.kind, first, second.name, second.inventory.identity, tuple(findings), diffs)


def rebuild_check(
    recipe: RuntimeRecipe | SkillRecipe,
    rev: str,
    state: str,
    *,
    cache: str | None = None,
    sandbox: Sandbox | None = None,
    python: str | None = None,
    installer_rev: str | None = None,
    first: BuildResult | None = None,
    freeze_backend: str | None = None,
) -> RebuildReport:
    """Build (or reuse) the published output (frozen with ``freeze_backend``), build again elsewhere, compare."""
    tmp = tempfile.mkdtemp(prefix="attest-rebuild-")
    try:
        staging = os.path.join(tmp, "elsewhere", secrets.token_hex(4))
        if isinstance(recipe, RuntimeRecipe):
            assert sandbox is not None and cache is not None
            if first is None:
                first = build_runtime(recipe, rev, state, cache, sandbox, python=python, freeze_backend=freeze_backend)
            noisy = sandbox.with_umask(REBUILD_UMASK).with_env({"ATTEST_REBUILD_NONCE": secrets.token_hex(8), "LANGUAGE": "de"})
            second = build_runtime(recipe, rev, state, cache, noisy, python=python, staging_parent=staging,
                                   publish_output=False, keep_staging=True)
        else:
            if first is None:
                first = build_skill(recipe, rev, state, installer_rev=installer_rev, freeze_backend=freeze_backend)
            second = build_skill(recipe, rev, state, installer_rev=installer_rev, staging_parent=staging,
                                 publish_output=False, umask=REBUILD_UMASK)
        return compare(first, second, second.store_path)
    finally:
        remove_tree(tmp)


def sign_vsa(report: RebuildReport, signer: Signer | KeylessSigner | Sequence[Signer], out: str, *, fmt: str = "dsse", now: _dt.datetime | None = None) -> str:
    """A signed SLSA VSA v1 with the rebuild verdict, about the first build's tree."""
    when = now or _dt.datetime.now(_dt.UTC)
    inputs = [ResourceRef(uri=Path(os.path.abspath(p)).as_uri(), name=os.path.basename(p), digest={"sha256": _sha256(p)})
              for p in report.first.attestations]
    predicate = verification_summary(
        verifier_id=BUILDER_ID + "#rebuild-check",
        time_verified=when,
        resource_uri=f"attest:{report.first.name}",
        policy=ResourceRef(uri="https://attest.dev/policies/rebuild-identical/v1"),
        input_attestations=inputs,
        passed=report.ok,
        verified_levels=["ATTEST_REPRODUCIBLE"] if report.ok else [],
    )
    data = sign_statement(statement([subject(report.first.name, report.first.inventory.digest_hex)], VSA_V1, predicate), signer, fmt=fmt)
    write_atomic(out, data, mode=0o444)
    return out


def _sha256(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()
