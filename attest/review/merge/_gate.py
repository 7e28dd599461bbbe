"""`attest merge-gate check` (docs/review.md "attest merge-gate check").

Merge authorization is its own context: a review result is evidence, never a merge. The gate
authorizes only when every piece holds, and explains every piece that does not:

1. **review record**: a signed review record (``attest review serialize``) verifying under TRUST
   by a signer allowed for :data:`~attest.review.procedure.REVIEW_RECORD_PREDICATE`; a
   provider's review object alone is never read as evidence;
2. **exact head**: the host is asked again (the same adapters as the bootstrap); the record's
   repository, pull request, base and head must be the host's current ones
   (``MERGE_REVIEW_OTHER_PULL_REQUEST``, ``MERGE_REVIEW_STALE_BASE``, ``MERGE_REVIEW_STALE_HEAD``);
3. **complete**: the record's status is ``complete`` (``limited``, ``partial`` and ``failed``
   never authorize: ``MERGE_REVIEW_NOT_COMPLETE``) and it has no blocking finding
   (``MERGE_BLOCKING_FINDINGS``; attest's own finding for each of the head's authority changes
   is one, so a head that changes the base's authority is never authorized by the gate);
4. **the head's history**: the deployment's state directory is always read, whatever record is
   given: every review record under ``STATE/records`` (each must verify) and every run under
   ``STATE/results`` (each must parse). Any of them of the exact current head commit in this
   repository, whatever pull request carried it (the head is the commit), with blocking findings
   keeps the head blocked (``MERGE_BLOCKING_FINDINGS``), and so does a failed
   one (``MERGE_HEAD_FAILED_ANALYSIS``: the run record says ``failed``, or the record's status is
   ``failed``) and a run of that head whose outcome is not known yet (``MERGE_ANALYSIS_UNFINISHED``).
   A ``limited`` or ``partial`` one is not a failure: it never authorizes itself
   (``MERGE_REVIEW_NOT_COMPLETE``) and does not block another review of the head;
5. **CI**: every required check has a signed CI result (:data:`CI_RESULT_PREDICATE`, ``attest
   merge-gate ci-result``) for exactly this repository and head (``MERGE_CI_MISSING``), run
   against exactly the record's base (``MERGE_CI_STALE_BASE``: a result of another base, or
   naming none, does not count), and every such result is ``success`` (``MERGE_CI_FAILED``);
6. **trusted producer** (when the deployment asks): ``attest evidence trusted-producer``'s
   verdict is ``true`` (``MERGE_TRUSTED_PRODUCER_MISSING``).

:func:`decide_merge` is the decision, pure; :func:`merge_gate_check` reads and verifies around it.

    >>> gate = merge_gate_check(record="record.json", policy=load_policy("trust.toml"), host=IdentityFile("identity.json"),
    ...                         ci=["ci-test.json"], required_checks=("test",), state_dir="/var/lib/attest")
    >>> gate.authorized, [f.code for f in gate.findings]
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from ..._digest import sha256_of
from ..._fs import write_atomic
from ..._shape import MAX_SAFE_INT, Shape
from ...attestation import AttestationCode, sign_statement, statement, verify_attestation_file
from ...errors import Finding, InputError, VerificationError
from ...freeze._state import open_state, open_sub
from ..bootstrap._identity import FULL_NAME
from ..evidence import PullRequest, collect
from ..handoff import IMAGE_NAMES
from ..procedure import (
    AUTHORITY_KINDS,
    AUTHORITY_STATUSES,
    RECORDS_DIR,
    REVIEW_RECORD_PREDICATE,
    STATUSES,
    read_run_records,
)
from ._codes import MergeGateCode

if TYPE_CHECKING:
    from ...attestation import Policy, Signer, StatementDoc
    from ..bootstrap import HostAdapter, HostIdentity
    from ..evidence import GitHubClient, TrustConfig
    from ..procedure import RunRecord

#: What ``trusted_producer`` returns: the evidence verdict's ``trusted`` value and the head it was evaluated for.
TrustedProducer = Callable[[], tuple[str, str | None]]

CI_RESULT_PREDICATE = "https://attest.dev/ci-result/v1"
CONCLUSIONS = ("success", "failure", "cancelled", "skipped", "timed_out", "neutral", "action_required", "stale")
_CI_KEYS = frozenset({"repository", "head", "check", "conclusion", "run"})
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._ /:()-]{0,199}\Z")
_SHA = re.compile(r"(?:[0-9a-f]{40}|[0-9a-f]{64})\Z")
_SHA_EXPECTED = "a full lowercase 40- or 64-hex commit id"


@dataclass(frozen=True, slots=True)
class ReviewRecord:
    """The fields of a verified review record the gate decides on.

    Raises:
        Nothing: made by :func:`parse_review_record`.
    """

    review: str
    status: str
    repository_id: int
    full_name: str
    pull_request_id: int
    number: int
    base_commit: str
    head: str
    blocking: int
    digest: str
    confined: bool = True
    #: The record's ``authority_changes`` as ``(path, status, kind)``: each is one of its blocking findings.
    authority: tuple[tuple[str, str, str], ...] = ()

    @property
    def event(self) -> str:
        """The record's ``event``: :func:`parse_review_record` checked it is exactly the one its blocking count gives."""
        return "REQUEST_CHANGES" if self.blocking else "COMMENT"


@dataclass(frozen=True, slots=True)
class CiResult:
    """One verified CI result: which check, for which repository, head and base, with which conclusion.

    ``base`` is the base commit the check ran against (None: a result that names no base, which
    never counts).

    Raises:
        Nothing: made by :func:`parse_ci_result`.
    """

    check: str
    repository_id: int
    full_name: str
    head: str
    base: str | None
    conclusion: str
    run: str
    digest: str


def _bad(detail: str, where: str | None) -> VerificationError:
    return VerificationError(MergeGateCode.MERGE_RECORD_MALFORMED, detail, where)


_RECORD_KEYS = frozenset({"review", "state_digest", "generation", "status", "repository", "pull_request", "base", "head",
                          "merge_base", "handoff_digest", "images", "change", "projections", "result", "failure", "limitations",
                          "authority_changes", "findings", "event", "confinement", "time"})
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}\Z")
_REVIEW_ID = re.compile(r"[0-9a-f]{32}\Z")


def parse_review_record(predicate: object, digest: str, where: str | None = None) -> ReviewRecord:
    """The gate's view of a verified review record's predicate, strictly and for consistency (pure).

    Exactly the documented fields; a ``complete`` record has a result, no failure and no
    limitation; a ``failed`` one a failure and no result; the finding counts add up; the event
    is the one the adapter gives for them (``REQUEST_CHANGES`` exactly when something blocks).
    ``authority_changes`` is exactly ``[{path, status, kind}]`` (no path twice, ``status`` one of
    :data:`~attest.review.procedure.AUTHORITY_STATUSES`, ``kind`` one of
    :data:`~attest.review.procedure.AUTHORITY_KINDS`), and each is one of the record's blocking
    findings in the body: with n of them, ``blocking`` and ``in_body`` are at least n, and a
    ``failed`` record's ``total`` is exactly n (attest's findings, none of a reviewer).

    Raises:
        VerificationError: ``MERGE_RECORD_MALFORMED``.
    """
    rec = Shape(predicate, "record", lambda d: _bad(d, where)).object(_RECORD_KEYS)
    repo = rec.nested("repository", ("id", "full_name"))
    pr = rec.nested("pull_request", ("id", "number"))
    base = rec.nested("base", ("commit", "tree"))
    findings = rec.nested("findings", ("total", "blocking", "inline", "in_body"))
    record = ReviewRecord(rec.string("review", pattern=_REVIEW_ID, expected="a review id (32 lowercase hex digits)"),
                          rec.one_of("status", STATUSES), repo.positive_int("id"),
                          repo.string("full_name", pattern=FULL_NAME, expected="OWNER/NAME"),
                          pr.positive_int("id"), pr.positive_int("number"),
                          base.string("commit", pattern=_SHA, expected=_SHA_EXPECTED),
                          rec.string("head", pattern=_SHA, expected=_SHA_EXPECTED), findings.non_negative_int("blocking"),
                          digest)
    rec.string("merge_base", pattern=_SHA, expected=_SHA_EXPECTED)
    base.string("tree", pattern=_SHA, expected=_SHA_EXPECTED)
    counts = [findings.non_negative_int(k) for k in ("total", "blocking", "inline", "in_body")]
    changes = []
    for c in rec.list_of("authority_changes"):
        c.object(("path", "status", "kind"))
        changes.append((c.string("path"), c.one_of("status", AUTHORITY_STATUSES), c.one_of("kind", AUTHORITY_KINDS)))
    rec.check(len({path for path, _, _ in changes}) == len(changes), "no path twice", "authority_changes")
    record = replace(record, authority=tuple(changes))
    images = rec.nested("images", IMAGE_NAMES)
    for name in IMAGE_NAMES:
        images.string(name, pattern=_DIGEST, expected="sha256:<64 hex>")
    rec.nested("change", ("identity",)).string("identity", pattern=_DIGEST, expected="sha256:<64 hex>")
    limitations = rec.strings("limitations")
    rec.string("state_digest", pattern=_DIGEST, expected="sha256:<64 hex>")
    rec.string("handoff_digest", pattern=_DIGEST, expected="sha256:<64 hex>")
    rec.non_negative_int("generation", maximum=MAX_SAFE_INT)
    rec.utc_time("time")
    projections = rec.nested("projections", ("semantic", "adapter"))
    for role in ("semantic", "adapter"):
        projection = projections.nested(role, ("path", "sha256"))
        projection.string("path")
        projection.string("sha256", pattern=_DIGEST, expected="sha256:<64 hex>")
    confinement = rec.optional("confinement")
    if confinement is not None:
        confinement.object()
    status = record.status
    result, failure = rec.optional("result"), rec.optional("failure")
    if result is not None:
        result.object(("sha256",)).string("sha256", pattern=_DIGEST, expected="sha256:<64 hex>")
    if failure is not None:
        failure.object(("code", "detail"))
        failure.string("code")
        failure.string("detail", empty=True)
    # Each contradiction refused by the field that contradicts the others (the status decides result and failure).
    rec.check((result is None) == (status == "failed"), f"{'null' if status == 'failed' else '{sha256}'} for a {status} record",
              "result")
    rec.check((failure is None) == (status != "failed"), f"{'{code, detail}' if status == 'failed' else 'null'} for a {status} "
              "record", "failure")
    rec.check((confinement is None) == (status == "failed"), f"{'null' if status == 'failed' else 'how the reviewer ran'} for a "
              f"{status} record", "confinement")
    total, blocking, inline, in_body = counts
    n = len(changes)  # attest's authority findings: each blocking, each in the body
    rec.check(inline + in_body == total, "total = inline + in_body", "findings.total")
    rec.check(blocking <= total, "at most findings.total", "findings.blocking")
    rec.check(blocking >= n, f"at least {n}: each authority change is a blocking finding", "findings.blocking")
    rec.check(in_body >= n, f"at least {n}: each authority change is a finding in the body", "findings.in_body")
    rec.check(status != "failed" or total == n, f"{n}, the authority changes: a failed run has no reviewer finding", "findings.total")
    event = "REQUEST_CHANGES" if blocking else "COMMENT"
    rec.check(rec.get("event") == event, f"{event!r}, as findings.blocking is {blocking}", "event")
    rec.check(bool(limitations) == (status == "limited") or status == "failed",
              f"{'non-empty' if status == 'limited' else 'empty'} for a {status} record", "limitations")
    return record


def record_confined(predicate: Mapping[str, object]) -> bool:
    """Whether the record says its reviewer ran confined (pure)."""
    c = predicate.get("confinement")
    return isinstance(c, dict) and c.get("confined") is True


def ci_result_predicate(*, repository_id: int, full_name: str, head: str, base: str, check: str, conclusion: str,
                        run: str) -> dict[str, object]:
    """A CI result's predicate, checked (pure): ``base`` is the pull request's base commit the check ran against.

    Raises:
        InputError: ``MERGE_RECORD_MALFORMED`` for a field that is not of the documented shape.
    """
    doc: dict[str, object] = {"repository": {"id": repository_id, "full_name": full_name}, "head": head, "base": base, "check": check,
           "conclusion": conclusion, "run": run}
    try:
        parse_ci_result(doc, "sha256:" + "0" * 64)
    except VerificationError as e:
        raise InputError(findings=e.findings) from e
    return doc


def parse_ci_result(predicate: object, digest: str, where: str | None = None) -> CiResult:
    """A verified CI result's predicate, strictly (pure).

    A result without ``base`` (the shape before the base was recorded) is read with ``base``
    None: it is the decision that refuses it (``MERGE_CI_STALE_BASE``), with its own code.

    Raises:
        VerificationError: ``MERGE_RECORD_MALFORMED``.
    """
    ci = Shape(predicate, "ci_result", lambda d: _bad(d, where))
    ci.object(allowed=_CI_KEYS | {"base"}, required=_CI_KEYS)
    r = ci.nested("repository", ("id", "full_name"))
    repository_id, full_name = r.positive_int("id"), r.string("full_name", pattern=FULL_NAME, expected="OWNER/NAME")
    head = ci.string("head", pattern=_SHA, expected=_SHA_EXPECTED)
    check = ci.string("check", pattern=_NAME, expected="a check name")
    base = ci.string("base", pattern=_SHA, expected=_SHA_EXPECTED) if ci.has("base") else None
    conclusion = ci.one_of("conclusion", CONCLUSIONS)
    run = ci.string("run")
    ci.check(len(run) <= 2000 and run.isprintable(), "at most 2000 printable characters", "run")
    return CiResult(check, repository_id, full_name, head, base, conclusion, run, digest)


# -- the decision (pure) ------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MergeDecision:
    """Authorized, or every missing piece.

    Raises:
        Nothing.
    """

    authorized: bool
    findings: tuple[Finding, ...]

    def to_json(self) -> dict[str, object]:
        return {"ok": self.authorized, "authorized": self.authorized, "findings": [f.to_json() for f in self.findings]}


def decide_merge(record: ReviewRecord, now: HostIdentity, ci: Sequence[CiResult], required_checks: Sequence[str], *,
                 same_head: Sequence[ReviewRecord], runs: Sequence[RunRecord],
                 trusted_producer: tuple[str, str | None] | None = None,
                 host_findings: Sequence[Finding] = ()) -> MergeDecision:
    """The merge decision (pure): every piece of the module docstring, every failing one a finding.

    ``now`` is the host's :class:`~attest.review.bootstrap.HostIdentity` read after the record;
    ``trusted_producer`` is None when the deployment does not ask for it, else the verdict
    (``"true"``, ``"false"`` or ``"unknown"``) and the head it was evaluated for. ``same_head``
    (every review record of the deployment's state, any head) and ``runs`` (every run record
    there) are required: one of the current head commit in this repository, whatever pull
    request carried it, with blocking findings keeps the head blocked, and so does a failed one
    and a run of that head still ``running`` (its outcome unknown). Another repository's never
    count. ``host_findings`` are what only the hosting platform knows (unresolved threads,
    mergeability, a head that moved on its final read: ``attest.review.platform``), decided
    there and counted here like every other missing piece.

    Raises:
        InputError: ``MERGE_NO_REQUIRED_CHECK`` when ``required_checks`` is empty.
    """
    if not required_checks:
        raise InputError(MergeGateCode.MERGE_NO_REQUIRED_CHECK, "name at least one required CI check (--require-check): a merge "
                         "gate without exact-head CI evidence is refused")
    found: list[Finding] = []
    if (record.repository_id, record.full_name, record.pull_request_id, record.number) != \
            (now.repository_id, now.full_name, now.pull_request_id, now.number):
        found.append(Finding(MergeGateCode.MERGE_REVIEW_OTHER_PULL_REQUEST, None, f"the review record is of {record.full_name} "
                             f"(id {record.repository_id}) pull request {record.number} (id {record.pull_request_id}); the host's is "
                             f"{now.full_name} (id {now.repository_id}) pull request {now.number} (id {now.pull_request_id})"))
    if record.base_commit != now.base_sha:
        found.append(Finding(MergeGateCode.MERGE_REVIEW_STALE_BASE, None, f"the review is of the base {record.base_commit}; the "
                             f"base is now {now.base_sha}: review again"))
    if record.head != now.head_sha:
        found.append(Finding(MergeGateCode.MERGE_REVIEW_STALE_HEAD, None, f"the review is of the head {record.head}; the head is "
                             f"now {now.head_sha}: review the exact head again"))
    if record.status != "complete":
        found.append(Finding(MergeGateCode.MERGE_REVIEW_NOT_COMPLETE, None, f"the review was {record.status}: only a complete "
                             "review can authorize a merge"))
    if not record.confined:
        found.append(Finding(MergeGateCode.MERGE_REVIEW_UNCONFINED, None, "the reviewer ran unconfined (--unsafe-unconfined): "
                             "its review never authorizes a merge"))
    if record.blocking:
        ours = "; ".join(f"{kind} {status} {path}" for path, status, kind in record.authority)
        found.append(Finding(MergeGateCode.MERGE_BLOCKING_FINDINGS, None, f"the review has {record.blocking} blocking finding(s)"
                             + (f", {len(record.authority)} of them attest's for the head's authority changes ({ours}): "
                                "a person reviews and merges such a change, never the gate" if record.authority else "")))
    here = (now.repository_id, now.head_sha)  # the head is the commit of this repository, whatever pull request carries it
    earlier = {r.review for r in same_head if r.blocking and r.digest != record.digest
               and (r.repository_id, r.head) == here}
    earlier |= {r.review for r in runs if r.outcome == "result" and r.blocking and r.review != record.review
                and (r.repository_id, r.head) == here}
    if earlier:
        found.append(Finding(MergeGateCode.MERGE_BLOCKING_FINDINGS, None, f"another analysis of this head had blocking findings "
                             f"(review {', '.join(sorted(earlier))}): a later clean review does not clear them; only a new head can"))
    failed = {r.review for r in same_head if r.status == "failed" and r.review != record.review
              and (r.repository_id, r.head) == here}
    failed |= {r.review for r in runs if r.outcome == "failed" and r.review != record.review
               and (r.repository_id, r.head) == here}
    if failed:
        found.append(Finding(MergeGateCode.MERGE_HEAD_FAILED_ANALYSIS, None, f"another analysis of this head failed (review "
                             f"{', '.join(sorted(failed))}: the reviewer failed, or what it printed was no result): what it "
                             "would have found is unknown, so a later clean review does not clear it; only a new head can"))
    unfinished = sorted({r.review for r in runs if r.outcome == "running" and (r.repository_id, r.head) == here})
    if unfinished:
        found.append(Finding(MergeGateCode.MERGE_ANALYSIS_UNFINISHED, None, f"an analysis of this head has no outcome yet "
                             f"(review {', '.join(unfinished)}: running, or interrupted): what it finds could block the head"))
    for check in dict.fromkeys(required_checks):
        mine = [c for c in ci if c.check == check and c.head == now.head_sha and c.repository_id == now.repository_id
                and c.full_name == now.full_name]
        if not mine:
            others = sorted({c.head for c in ci if c.check == check})
            found.append(Finding(MergeGateCode.MERGE_CI_MISSING, None, f"no signed result of the required check {check!r} for "
                                 f"the head {now.head_sha}" + (f" (only for {', '.join(others)})" if others else "")))
            continue
        if not (mine := [c for c in mine if c.base == record.base_commit]):
            bases = sorted({c.base or "none" for c in ci if c.check == check and c.head == now.head_sha})
            found.append(Finding(MergeGateCode.MERGE_CI_STALE_BASE, None, f"the results of the required check {check!r} for the "
                                 f"head {now.head_sha} ran against the base {', '.join(bases)} ('none': the result names no "
                                 f"base), not the review's base {record.base_commit}: run the check again against it"))
            continue
        bad = sorted({c.conclusion for c in mine if c.conclusion != "success"})
        if bad:
            found.append(Finding(MergeGateCode.MERGE_CI_FAILED, None, f"the required check {check!r} of the head {now.head_sha} "
                                 f"concluded {', '.join(bad)}"))
    if trusted_producer is not None:
        verdict, evaluated = trusted_producer
        if verdict != "true":
            found.append(Finding(MergeGateCode.MERGE_TRUSTED_PRODUCER_MISSING, None, f"the deployment asks for trusted-producer "
                                 f"review evidence; it is {verdict}"))
        elif evaluated != now.head_sha:
            found.append(Finding(MergeGateCode.MERGE_TRUSTED_PRODUCER_MISSING, None, f"the trusted-producer evidence was "
                                 f"evaluated for the head {evaluated}, not {now.head_sha}"))
    found += host_findings
    if found:
        return MergeDecision(False, tuple(found))
    return MergeDecision(True, (Finding(MergeGateCode.MERGE_AUTHORIZED, None, f"a complete review with no blocking finding and "
                                        f"every required check ({', '.join(required_checks)}) succeeded, for the exact head "
                                        f"{now.head_sha}"),))


# -- reading and verifying ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MergeGate:
    """What :func:`merge_gate_check` read and decided.

    Raises:
        Nothing.
    """

    decision: MergeDecision
    record: ReviewRecord
    head: str
    ci: tuple[CiResult, ...]
    base: str  # the host's base commit read last, with the head: what a merge must merge into

    @property
    def authorized(self) -> bool:
        return self.decision.authorized

    @property
    def findings(self) -> tuple[Finding, ...]:
        return self.decision.findings

    def to_json(self) -> dict[str, object]:
        return {**self.decision.to_json(), "review": self.record.review, "status": self.record.status,
                "record_digest": self.record.digest, "head": self.head,
                "ci": [{"check": c.check, "head": c.head, "base": c.base, "conclusion": c.conclusion, "run": c.run,
                        "digest": c.digest}
                       for c in self.ci]}


def verify_review_record(path: str | os.PathLike[str], policy: Policy) -> tuple[ReviewRecord, StatementDoc]:
    """A review record verified under TRUST (by signers named for its type) and parsed: (the record, its statement).

    Raises:
        VerificationError: the attestation codes, ``SIGNER_NOT_FOR_PREDICATE``, ``BAD_PREDICATE_TYPE``,
            ``MERGE_RECORD_MALFORMED``.
        InputError: an unreadable file.
    """
    verified, digest = _verified_statement(path, policy, REVIEW_RECORD_PREDICATE)
    predicate = verified.get("predicate")  # a statement may carry none: the parser refuses that by name, as any other shape
    record = parse_review_record(predicate, digest, os.fspath(path))
    assert predicate is not None  # parse_review_record accepts only an object
    return replace(record, confined=record_confined(predicate)), verified


def _verified(path: str | os.PathLike[str], policy: Policy, predicate_type: str) -> tuple[object, str]:
    verified, digest = _verified_statement(path, policy, predicate_type)
    return verified.get("predicate"), digest  # None for a statement of no predicate, which every parser of one refuses


def _verified_statement(path: str | os.PathLike[str], policy: Policy, predicate_type: str) -> tuple[StatementDoc, str]:
    verified = verify_attestation_file(path, policy)
    if verified.predicate_type != predicate_type:
        raise VerificationError(AttestationCode.BAD_PREDICATE_TYPE, f"a {verified.predicate_type} statement, not a "
                                f"{predicate_type}", os.fspath(path))
    # Merge authority only from signers TRUST names for exactly this type: an any-type signer (a CI
    # key listed without `predicates`) never signs a review record or a CI result that counts.
    explicit = [sid for sid in dict.fromkeys(verified.signers) if predicate_type in policy.signer(sid).predicates]
    if len(explicit) < policy.threshold:
        raise VerificationError(AttestationCode.SIGNER_NOT_FOR_PREDICATE, f"{len(explicit)} of its signers are named in TRUST for "
                                f"{predicate_type} (`predicates`); the merge gate needs {policy.threshold}", os.fspath(path))
    return verified.statement, verified.attestation_digest


def merge_gate_check(
    *,
    record: str | os.PathLike[str],
    policy: Policy,
    host: HostAdapter,
    ci: Sequence[str | os.PathLike[str]],
    required_checks: Sequence[str],
    state_dir: str | os.PathLike[str],
    trusted_producer: TrustedProducer | None = None,
    host_facts: Callable[[HostIdentity], Sequence[Finding]] | None = None,
) -> MergeGate:
    """Verify the record and every CI result under TRUST, read the head's history, ask the host again, then :func:`decide_merge`.

    ``state_dir`` (required): the deployment's state directory; every review record under
    ``STATE/records`` must verify and every run record under ``STATE/results`` must parse, and
    each of them of the current head counts (whatever record is given). ``trusted_producer``:
    None, or a callable returning the evidence verdict's ``trusted`` value (``"true"``,
    ``"false"``, ``"unknown"``) and the head it was evaluated for
    (:func:`github_trusted_producer`); it is called after the record and CI results verified
    and before the host's final read. ``host_facts``: None, or a callable given the host's
    identity read last, returning the platform's own findings (``attest.review.platform.github_gate_facts``:
    threads, mergeability, and its own final read of the head).

    Raises:
        InputError: ``MERGE_NO_REQUIRED_CHECK``, unreadable files, the host adapter's codes.
        VerificationError: the attestation codes (``NO_TRUSTED_SIGNATURE``,
            ``SIGNER_NOT_FOR_PREDICATE``, ``BAD_PREDICATE_TYPE``, ...), ``MERGE_RECORD_MALFORMED``,
            ``REVIEW_STATE_MALFORMED`` (a run record), ``STATE_SYMLINK``.
        EnvironmentFailure: the state directory's codes.
    """
    if not required_checks:
        raise InputError(MergeGateCode.MERGE_NO_REQUIRED_CHECK, "name at least one required CI check (--require-check)")
    # 1. The review record, verified; nothing of it is read before.
    parsed, _ = verify_review_record(record, policy)
    others = _state_records(state_dir, policy)
    runs = read_run_records(state_dir)
    results: list[CiResult] = []
    for path in ci:
        p, d = _verified(path, policy, CI_RESULT_PREDICATE)
        results.append(parse_ci_result(p, d, os.fspath(path)))
    verdict = None if trusted_producer is None else trusted_producer()
    # 2. The host, asked last: the head that would be merged is the one decided on.
    now = host.resolve()
    extra = tuple(host_facts(now)) if host_facts is not None else ()
    return MergeGate(decide_merge(parsed, now, results, required_checks, same_head=others, runs=runs, trusted_producer=verdict,
                                  host_findings=extra),
                     parsed, now.head_sha, tuple(results), now.base_sha)


def _state_records(state_dir: str | os.PathLike[str], policy: Policy) -> tuple[ReviewRecord, ...]:
    """Every review record under ``STATE/records`` that verifies under TRUST (a planted link fails).

    Raises:
        VerificationError: ``STATE_SYMLINK``, and any record's verification failure: the
            deployment's own records must all verify.
    """
    root = os.path.abspath(os.fspath(state_dir))
    state_fd = open_state(root, create=False)
    try:
        try:
            os.stat(RECORDS_DIR, dir_fd=state_fd, follow_symlinks=False)
        except FileNotFoundError:
            return ()
        dfd = open_sub(state_fd, RECORDS_DIR, os.path.join(root, RECORDS_DIR), create=False)
    finally:
        os.close(state_fd)
    try:
        names = sorted(n for n in os.listdir(dfd) if n.endswith(".json") and not n.startswith("."))
    finally:
        os.close(dfd)
    out = []
    for name in names:
        path = os.path.join(root, RECORDS_DIR, name)
        p, d = _verified(path, policy, REVIEW_RECORD_PREDICATE)
        out.append(parse_review_record(p, d, path))
    return tuple(out)


def github_trusted_producer(config: TrustConfig, client: GitHubClient) -> TrustedProducer:
    """A ``trusted_producer`` callable for :func:`merge_gate_check`: ``attest evidence trusted-producer``'s verdict and its head.

    Raises:
        Nothing itself; the callable raises nothing either (every failure is an ``unknown`` verdict).
    """
    def producer() -> tuple[str, str | None]:
        ev, verdict = collect(config, client)
        pr = ev.final_pull_request if isinstance(ev.final_pull_request, PullRequest) else None
        return str(verdict.trusted.value), pr.head_sha if pr is not None else None

    return producer


def sign_ci_result(predicate: Mapping[str, object], signer: Signer | Sequence[Signer],
                   out: str | os.PathLike[str]) -> tuple[str, str]:
    """Sign a CI result (subject: the head commit, by the SHA-256 of its id and ``gitCommit``); write it atomically.

    Raises:
        InputError: ``SIGNING_FAILED``, ``BAD_OUTPUT_PATH``.
    """
    head = predicate["head"]
    if not isinstance(head, str):
        raise InputError(MergeGateCode.MERGE_RECORD_MALFORMED, f"the CI result's head is {head!r}, not a commit id")
    subj = {"name": f"git-commit:{head}", "digest": {"sha256": hashlib.sha256(head.encode()).hexdigest(), "gitCommit": head}}
    data = sign_statement(statement([subj], CI_RESULT_PREDICATE, predicate), signer)
    path = os.path.abspath(os.fspath(out))
    write_atomic(path, data, mode=0o644, what="CI result")
    return path, sha256_of(data)


__all__ = [
    "CI_RESULT_PREDICATE",
    "CONCLUSIONS",
    "CiResult",
    "MergeDecision",
    "MergeGate",
    "ReviewRecord",
    "ci_result_predicate",
    "decide_merge",
    "github_trusted_producer",
    "merge_gate_check",
    "parse_ci_result",
    "parse_review_record",
    "record_confined",
    "sign_ci_result",
    "verify_review_record",
]
