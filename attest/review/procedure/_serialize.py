"""`attest review serialize` (docs/review.md "attest review serialize"; the adapter's rules: docs/policy.md "The renderers").

:func:`serialize_review` runs these steps in order; a failure raises and nothing is written:

1. **state**: the review state, strictly, refused if an earlier recheck closed it;
2. **run**: the run record ``review exec --review ID`` wrote (``STATE/results/<id>.json``), finished;
   the result given must be the exact bytes that run kept (``REVIEW_RESULT_NOT_OF_REVIEW``): a
   result of another review, of the review before a refresh, or edited afterwards is never
   serialized; and the head's history (every run record of the state, :func:`decide_head_history`):
   while another analysis of the exact head commit in this repository (whatever pull request
   carried it) had blocking findings or failed, a review without blocking findings is not
   serialized (``REVIEW_HEAD_BLOCKED``);
3. **recheck**, immediately before writing (:func:`recheck_review`): only ``proceed`` serializes,
   and ``proceed`` means every identity the analysis used was reproduced: repository, pull
   request, base commit and tree, head, the unique merge base, the four frozen images (verified
   again from the store) and the retained semantic and adapter projection bytes (retained again
   from the frozen base, against the state's digests); then the **authority changes** are
   computed again (:func:`~attest.review.procedure.authority_changes`) from the state's changed
   surface and the re-established frozen base's configuration and lock, and must be the state's
   exactly (``REVIEW_AUTHORITY_CHANGES_MISMATCH``);
4. **adapter**: the retained adapter bytes must be exactly the ``github-review-json-adapter-v1``
   projection bound to the retained semantic projection (:func:`check_adapter`), the transport
   this serializer implements (``REVIEW_ADAPTER_UNSUPPORTED``);
5. **payload**: :func:`render_github_review` (pure) places every finding: inline where its path
   and line are a changed line of the changed surface on its side (LEFT: merge base, RIGHT: head;
   no side means RIGHT), otherwise losslessly in the body (the finding as one fenced JSON object);
   no confidence threshold, nothing suppressed, nothing truncated (``REVIEW_PAYLOAD_TOO_LARGE``);
   and, whatever the result says (clean, failed, or naming the same paths or ids), one attest
   finding per authority change (:func:`authority_findings`: ``attest-authority-N``, ``high``,
   blocking), in a body section of its own that no reviewer text can remove, alter or stand in for;
6. **record**: a signed in-toto statement (:data:`REVIEW_RECORD_PREDICATE`) whose subject is the
   payload, stating the review's status for the exact head (:func:`review_status`: ``complete``,
   ``limited``, ``partial`` or ``failed``), written to ``STATE/records/<id>.json`` (and ``record``).

    >>> done = serialize_review(state_dir="/var/lib/attest", review="0f3c...", result="result.json",
    ...                         out="payload.json", signer=load_signer("deploy.pem"))
    >>> done.status, done.payload_digest
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import re
import shutil
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, TypedDict, Unpack

from ..._digest import sha256_of
from ..._fs import check_output_path, read_bounded, write_atomic
from ..._json import canonical_bytes
from ..._safefs import create_at
from ..._shape import Shape
from ...attestation import sign_statement, statement, subject
from ...errors import AttestError, CommonCode, EnvironmentFailure, Finding, InputError, VerificationError
from ...freeze import FreezeCode, Store
from ...freeze._exec import caller_environment, expand_image_refs
from ...freeze._state import open_state, open_sub, state_lock
from ...git import ChangedPath, Hunk
from ..handoff import (
    IMAGE_NAMES,
    MAX_RESULT_BYTES,
    ResultFinding,
    ReviewResult,
    decide_images,
    parse_result,
    reviewer_command,
    run_review_step,
    verify_can_confine,
    verify_handoff,
    verify_reviewer_image,
)
from ._change import CheckedDoc, decide_change, read_image_file
from ._codes import RecheckCode, ReviewStartCode, SerializeCode
from ._recheck import _read_at, _strict_doc, load_review_state, recheck_review
from ._start import (
    AUTHORITY_FINDING_PREFIX,
    AuthorityChange,
    AuthorityChangeDoc,
    authority_changes,
    read_base_authority,
    write_state_file,
)

if TYPE_CHECKING:
    from ...attestation import KeylessSigner, Policy, Signer, StatementDoc
    from ...freeze import Image
    from ..bootstrap import HostAdapter
    from ..handoff import Handoff, ReviewRun
    from ._recheck import Recheck, ReviewState
    from ._root import ReviewRoot

REVIEW_RECORD_PREDICATE = "https://attest.dev/review-record/v1"
RESULTS_DIR = "results"
RECORDS_DIR = "records"
MAX_RUN_RECORD_BYTES = 64 << 10
BODY_LIMIT = 65536
Status = Literal["complete", "limited", "partial", "failed"]
STATUSES: tuple[Status, ...] = ("complete", "limited", "partial", "failed")
_RUN_KEYS = frozenset({"review", "state", "handoff_digest", "repository_id", "pull_request_id", "head", "outcome", "result",
                       "failure", "blocking", "confinement"})


# -- the status (pure) ------------------------------------------------------------------------------------------


def review_status(result: ReviewResult | None) -> Status:
    """The review record's status (pure).

    ``complete``: the reviewer says the analysis is complete (a complete result has no
    limitations); ``limited``: not complete, with the limitations it states; ``partial``: not
    complete and no limitation stated; ``failed``: no valid result (``None``: the run failed).
    Only ``complete`` can ever authorize a merge.

    Raises:
        Nothing.
    """
    if result is None:
        return "failed"
    if result.complete:
        return "complete"
    return "limited" if result.limitations else "partial"


# -- the adapter (pure) ------------------------------------------------------------------------------------------


def check_adapter(data: bytes, *, context: str, semantic_path: str, semantic_sha256: str) -> CheckedDoc:
    """The adapter document, if ``data`` is exactly the GitHub adapter projection bound to that semantic projection (pure).

    Raises:
        VerificationError: ``REVIEW_ADAPTER_UNSUPPORTED`` for any other bytes: another
            renderer, another binding, another version of the transport rules.
    """
    # lazy: attest.policy, +25 ms to importing review.procedure, which the merge gate imports (run records, the record's constants) and never needs it
    from ...policy import render_github_review_json_adapter_v1

    want = render_github_review_json_adapter_v1(context, semantic_path, semantic_sha256)
    if data != want:
        raise VerificationError(SerializeCode.REVIEW_ADAPTER_UNSUPPORTED, "the retained adapter projection is not the "
                                "github-review-json-adapter-v1 projection of this context bound to the retained semantic "
                                f"projection {semantic_path} (sha256 {semantic_sha256}); this serializer implements only that")
    doc: CheckedDoc = json.loads(data)  # exactly the known projection's bytes
    return doc


# -- placing findings (pure) -----------------------------------------------------------------------------------


def _changed_lines(surface: CheckedDoc) -> dict[str, dict[str, tuple[range, ...]]]:
    """path -> side -> the changed line ranges, from a state's surface document (validated by building the git types)."""

    out: dict[str, dict[str, tuple[range, ...]]] = {}
    statuses: dict[str, str] = {}
    try:
        for p in surface["paths"]:
            hunks = tuple(Hunk(h["left"]["start"], h["left"]["count"], h["right"]["start"], h["right"]["count"]) for h in p["hunks"])
            cp = ChangedPath(p["path"], p["status"], p["old_mode"], p["new_mode"], p["old_oid"], p["new_oid"], p["content"], hunks)
            out[cp.path] = {side: tuple(h.lines(side) for h in cp.hunks) for side in ("LEFT", "RIGHT")}
            statuses[cp.path] = cp.status
    except (KeyError, TypeError, ValueError) as e:
        raise VerificationError(RecheckCode.REVIEW_STATE_MALFORMED, f"the review state's changed surface is malformed: {e!r}") from e
    # Renames are not detected here, but a host's diff does detect them: while the surface both adds
    # and deletes a path, no added or deleted path is anchored (the host may show a pair as one
    # renamed file, whose lines and path differ from ours); their findings go to the body.
    if {"added", "deleted"} <= set(statuses.values()):
        for path, status in statuses.items():
            if status in ("added", "deleted"):
                out[path] = {"LEFT": (), "RIGHT": ()}
    return out


def anchor(finding: ResultFinding, lines: Mapping[str, Mapping[str, Sequence[range]]]) -> tuple[str, str, int] | None:
    """``(path, side, line)`` where ``finding`` can truthfully be an inline comment, or None (pure).

    Inline only when it names a path and a line, and that line is a changed line of that path
    on its side of the changed surface (no side: RIGHT, the head's line numbers). A deleted
    file's lines are changed lines on LEFT only. Renames are not detected, but a host's diff
    detects them, so while the surface both adds and deletes a path no added or deleted path
    anchors at all (``lines`` from :func:`_changed_lines` has no ranges for them).

    Raises:
        Nothing.
    """
    if finding.path is None or finding.line is None:
        return None
    side = finding.side or "RIGHT"
    ranges = lines.get(finding.path, {}).get(side, ())
    if any(finding.line in r for r in ranges):
        return finding.path, side, finding.line
    return None


_MD_PUNCT = frozenset("!\"#$%'()*+,-./:;=?@[\\]^_`{|}~")  # ASCII punctuation CommonMark may read; & < > become entities
_INVISIBLE = frozenset({"Cc", "Cf", "Co", "Cs", "Cn", "Zl", "Zp"})


def _escape(text: str) -> str:
    """Reviewer text shown in Markdown exactly as written, one line, inert (pure).

    ``&``, ``<`` and ``>`` become entities (no HTML comment or tag can hide what follows); every
    other ASCII punctuation character is backslash-escaped (no heading, list item, link, image,
    emphasis, code span, fence or link definition can form); line breaks and tabs become
    spaces; control, format (bidirectional overrides, zero-width characters), private-use and
    unassigned code points become U+FFFD, so nothing reorders or hides the text around it.
    """

    out: list[str] = []
    for ch in text:
        if ch in "\r\n\t":
            out.append(" ")
        elif ch == "&":
            out.append("&amp;")
        elif ch == "<":
            out.append("&lt;")
        elif ch == ">":
            out.append("&gt;")
        elif ch in _MD_PUNCT:
            out.append("\\" + ch)
        elif unicodedata.category(ch) in _INVISIBLE:
            out.append("\ufffd")
        else:
            out.append(ch)
    return "".join(out)


def _fenced(doc: Mapping[str, object]) -> str:
    text = canonical_bytes(doc).decode("utf-8")
    runs = [len(m) for m in re.findall(r"`+", text)]
    fence = "`" * max(3, max(runs, default=0) + 1)
    return f"{fence}json\n{text}\n{fence}"


def _label(f: ResultFinding) -> str:
    return f"[{f.severity}{', blocking' if f.blocking else ''}] {_escape(f.id)}"


@dataclass(frozen=True, slots=True)
class ReviewFacts:
    """What a payload states about the review it serializes (from the review state).

    Raises:
        Nothing.
    """

    review: str
    head: str
    base_commit: str
    merge_base: str
    status: Status
    failure: str | None = None  # "CODE: detail" of a failed run
    authority_changes: tuple[AuthorityChange, ...] = ()  # the state's: each becomes an attest finding


#: An authority change's finding: not a defect, but never authorized without a person (docs/review.md "Authority changes").
AUTHORITY_SEVERITY = "high"
AUTHORITY_BLOCKING = True
_VERB = {"added": "adds", "deleted": "deletes", "modified": "modifies", "type-changed": "changes the type of"}
_WHAT = {"config": "the trusted base's review configuration", "lock": "the trusted base's policy lock",
         "module": "a policy module the trusted base's configuration or lock names",
         "output": "a generated output the trusted base's configuration or lock names",
         "skill": "the Skill namespace .agents/", "workflow": "a GitHub Actions workflow (.github/workflows/)",
         "github": "GitHub's runtime namespace .github/"}


class AuthorityFinding(TypedDict):
    """attest's own finding for one authority change (:func:`authority_findings`)."""

    id: str
    severity: str
    blocking: bool
    message: str
    path: str
    kind: str
    status: str
    source: str


class GitHubReviewPayload(TypedDict):
    """The GitHub review payload (:func:`render_github_review`): what ``attest review publish`` posts."""

    commit_id: str
    event: str
    body: str
    comments: list[dict[str, object]]


def authority_findings(changes: Sequence[AuthorityChange]) -> list[AuthorityFinding]:
    """attest's own finding for each authority change, in order (pure): ``attest-authority-1``, ``-2``, ...

    Each is ``{id, severity, blocking, message, path, kind, status, source: "attest"}``:
    severity ``high``, blocking (the merge gate never authorizes it; a person merges such a
    change), ``source`` a key no reviewer finding can have.

    Raises:
        Nothing.
    """
    return [{"id": f"{AUTHORITY_FINDING_PREFIX}{i}", "severity": AUTHORITY_SEVERITY, "blocking": AUTHORITY_BLOCKING,
             "message": f"the head {_VERB.get(c.status, c.status)} {c.path}, {_WHAT.get(c.kind, c.kind)}. This review used the "
                        "trusted base's authority, never the head's; once merged this change is authority for later reviews and "
                        "automation, so a person must review it: the merge gate never authorizes it",
             "path": c.path, "kind": c.kind, "status": c.status, "source": "attest"}
            for i, c in enumerate(changes, 1)]


def render_github_review(result: ReviewResult | None, facts: ReviewFacts, surface: CheckedDoc,
                         adapter: CheckedDoc) -> GitHubReviewPayload:
    """The GitHub review payload of ``adapter``'s rules (pure): every finding, inline or losslessly in the body.

    Raises:
        VerificationError: ``REVIEW_PAYLOAD_TOO_LARGE`` when the body or an inline comment
            passes the adapter's byte limit: nothing is dropped or truncated to fit;
            ``REVIEW_STATE_MALFORMED`` for a malformed surface.
    """
    limit = int(adapter.get("limits", {}).get("body_bytes", BODY_LIMIT))
    lines = _changed_lines(surface)
    findings = result.findings if result is not None else ()
    inline: list[dict[str, object]] = []
    below: list[ResultFinding] = []
    for f in findings:
        where = anchor(f, lines)
        if where is None:
            below.append(f)
            continue
        body = f"{_label(f)}: {_escape(f.message)}"
        if len(body.encode("utf-8")) > limit:
            raise VerificationError(SerializeCode.REVIEW_PAYLOAD_TOO_LARGE, f"the inline comment of finding {f.id!r} is "
                                    f"{len(body.encode())} bytes; the adapter's limit is {limit}: nothing is truncated")
        inline.append({"path": where[0], "line": where[2], "side": where[1], "body": body})
    ours = authority_findings(facts.authority_changes)
    blocking = sum(f.blocking for f in findings) + sum(a["blocking"] for a in ours)
    total = len(findings) + len(ours)
    theirs = f" ({len(ours)} of them attest's authority changes)" if ours else ""
    parts = [f"**attest review: {facts.status}** of head `{facts.head}` (base `{facts.base_commit}`, merge base "
             f"`{facts.merge_base}`; review `{facts.review}`).",
             "",
             f"{total} finding(s){theirs}, {blocking} blocking: {len(inline)} inline, {len(below) + len(ours)} below."]
    if facts.failure is not None:
        parts += ["", f"The review **failed**: {_escape(facts.failure)}. Nothing was analysed; this review authorizes nothing."]
    if result is not None and result.limitations:
        parts += ["", "Limitations:"] + [f"- {_escape(x)}" for x in result.limitations]
    if ours:
        parts += ["", "Authority changes: found by attest itself in the changed surface, whatever the reviewer's result says. "
                  "This review used the trusted base's authority; each change needs a person before it is merged:"]
        for a in ours:
            parts += ["", f"- **[{a['severity']}{', blocking' if a['blocking'] else ''}] {a['id']}** {_escape(a['message'])}",
                      "", _fenced(a)]
    if below:
        parts += ["", "Findings that do not anchor to a changed line:"]
        for f in below:
            at = f" ({_escape(f.path)}{':' + str(f.line) if f.line is not None else ''}{', ' + f.side if f.side else ''})" \
                if f.path is not None else ""
            parts += ["", f"- **{_label(f)}** {_escape(f.message)}{at}", "", _fenced(f.to_json())]
    body = "\n".join(parts) + "\n"
    if len(body.encode("utf-8")) > limit:
        raise VerificationError(SerializeCode.REVIEW_PAYLOAD_TOO_LARGE, f"the review body is {len(body.encode())} bytes; the "
                                f"adapter's limit is {limit}: a finding is never dropped or truncated to fit")
    event = "REQUEST_CHANGES" if blocking else "COMMENT"
    return {"commit_id": facts.head, "event": event, "body": body, "comments": inline}


# -- the run record ------------------------------------------------------------------------------------------------

RunOutcome = Literal["running", "result", "failed"]
RUN_OUTCOMES: tuple[RunOutcome, ...] = ("running", "result", "failed")
_RESULT_DIGEST = re.compile(r"sha256:[0-9a-f]{64}\Z")
_REVIEW_ID = re.compile(r"[0-9a-f]{32}\Z")
_HEAD = re.compile(r"(?:[0-9a-f]{40}|[0-9a-f]{64})\Z")


@dataclass(frozen=True, slots=True)
class RunRecord:
    """The one run of one review (``STATE/results/<id>.json``), as :func:`parse_run_record` read it.

    ``outcome`` is ``running`` from the moment the run is claimed (before the reviewer starts)
    until it is filled in: ``result`` (the result's digest and its number of blocking findings)
    or ``failed`` (the failure). A record that stays ``running`` is a run whose outcome is
    unknown (still running, or interrupted): it is never run again and never serialized.

    Raises:
        Nothing.
    """

    review: str
    state: str
    handoff_digest: str
    repository_id: int
    pull_request_id: int
    head: str
    outcome: RunOutcome
    result: str | None
    failure: Mapping[str, str] | None
    blocking: int
    confinement: Mapping[str, object] | None

    def to_json(self) -> dict[str, object]:
        return {"review": self.review, "state": self.state, "handoff_digest": self.handoff_digest,
                "repository_id": self.repository_id, "pull_request_id": self.pull_request_id, "head": self.head,
                "outcome": self.outcome, "result": self.result, "failure": None if self.failure is None else dict(self.failure),
                "blocking": self.blocking, "confinement": None if self.confinement is None else dict(self.confinement)}


def run_record(state: ReviewState, handoff_digest: str, outcome: RunOutcome, *, result_digest: str | None = None,
               failure: Finding | None = None, blocking: int = 0, confinement: Mapping[str, object] | None = None) -> RunRecord:
    """The run record of ``state`` with ``outcome`` (pure).

    Raises:
        Nothing.
    """
    return RunRecord(state.review, state.digest, handoff_digest, state.repository_id, state.pull_request_id, state.head, outcome,
                     result_digest, None if failure is None else {"code": str(failure.code), "detail": failure.detail}, blocking,
                     None if confinement is None else dict(confinement))


def parse_run_record(data: bytes, where: str) -> RunRecord:
    """A run record's bytes, strictly (pure): canonical JSON of exactly the documented fields, its outcome consistent.

    Raises:
        VerificationError: ``REVIEW_STATE_MALFORMED``.
    """

    doc = _strict_doc(data, "the run record", where, MAX_RUN_RECORD_BYTES)
    rec = Shape(doc, "run_record", lambda d: VerificationError(RecheckCode.REVIEW_STATE_MALFORMED, d, where)).object(_RUN_KEYS)
    review = rec.string("review", pattern=_REVIEW_ID, expected="a review id (32 lowercase hex digits)")
    state = rec.string("state", pattern=_RESULT_DIGEST, expected="sha256:<64 hex>")
    handoff = rec.string("handoff_digest", pattern=_RESULT_DIGEST, expected="sha256:<64 hex>")
    repository_id, pull_request_id = rec.positive_int("repository_id"), rec.positive_int("pull_request_id")
    head = rec.string("head", pattern=_HEAD, expected="a full lowercase 40- or 64-hex commit id")
    outcome = rec.one_of("outcome", RUN_OUTCOMES)
    blocking = rec.non_negative_int("blocking")
    confinement = rec.optional("confinement")
    if confinement is not None:
        confinement.object()
    failure = rec.optional("failure")
    if failure is not None:
        failure.object(("code", "detail"))
        failure.string("code", empty=True)
        failure.string("detail", empty=True)
    result = rec.optional_string("result", pattern=_RESULT_DIGEST, expected="sha256:<64 hex>")
    consistent = {"running": result is None and failure is None and blocking == 0 and confinement is None,
                  "result": result is not None and failure is None and confinement is not None,
                  "failed": result is None and failure is not None and blocking == 0 and confinement is None}[outcome]
    if not consistent:
        rec.refuse(f"is {outcome!r}, which its result, failure, blocking and confinement contradict", "outcome")
    return RunRecord(review, state, handoff, repository_id, pull_request_id, head, doc["outcome"], result, doc["failure"], blocking,
                     doc["confinement"])


def claim_run(state_dir: str, state: ReviewState, handoff_digest: str) -> str:
    """Claim the one run of ``state``: create ``STATE/results/<id>.json`` exclusively (``running``), before the reviewer starts.

    Exclusive creation (a whole file linked to the name, which fails if it exists) through
    descriptors of the private state directory, so no reader sees a claim without content: of two
    runs of one review started at once, exactly one claims it; a second run, whatever the first's
    outcome (and also while it runs, or after it was interrupted), is refused.

    Raises:
        VerificationError: ``REVIEW_ALREADY_RUN``, ``STATE_SYMLINK``.
        EnvironmentFailure: ``REVIEW_STATE_FAILED`` and the state directory's codes.
    """

    name = f"{state.review}.json"
    where = os.path.join(state_dir, RESULTS_DIR, name)
    data = canonical_bytes(run_record(state, handoff_digest, "running").to_json())
    state_fd = open_state(state_dir, create=False)
    try:
        dfd = open_sub(state_fd, RESULTS_DIR, os.path.join(state_dir, RESULTS_DIR))
    finally:
        os.close(state_fd)
    try:
        try:
            create_at(dfd, name, data)  # written whole, then linked: no reader sees a claim without its content
        except FileExistsError as e:
            raise VerificationError(SerializeCode.REVIEW_ALREADY_RUN, f"review {state.review} was run already (or is running): "
                                    "one review, one analysis; its outcome stands (a new head is a new review)", where) from e
        except OSError as e:
            raise EnvironmentFailure(ReviewStartCode.REVIEW_STATE_FAILED, f"cannot claim the run: {e.strerror}", where) from e
    finally:
        os.close(dfd)
    return where


def write_run_record(state_dir: str, record: RunRecord) -> str:
    """Fill in the outcome of a claimed run (atomically replacing ``STATE/results/<id>.json``).

    Raises:
        EnvironmentFailure: ``REVIEW_STATE_FAILED`` and the state directory's codes.
    """

    return write_state_file(state_dir, RESULTS_DIR, f"{record.review}.json", canonical_bytes(record.to_json()))


def read_run_record(state_dir: str, state: ReviewState) -> RunRecord:
    """The finished run record of ``state``, strictly.

    Raises:
        VerificationError: ``REVIEW_RESULT_NOT_OF_REVIEW`` (none, not of this state, or not
            finished), ``REVIEW_STATE_MALFORMED``.
    """

    where = os.path.join(state_dir, RESULTS_DIR, f"{state.review}.json")
    data = _read_at(state_dir, RESULTS_DIR, f"{state.review}.json", MAX_RUN_RECORD_BYTES)
    if data is None:
        raise VerificationError(SerializeCode.REVIEW_RESULT_NOT_OF_REVIEW, f"no review ran for review {state.review}: run "
                                f"`attest review exec --review {state.review} ...` first", where)
    run = parse_run_record(data, where)
    if run.review != state.review or run.state != state.digest:
        raise VerificationError(SerializeCode.REVIEW_RESULT_NOT_OF_REVIEW, "the run record is not one of this review state", where)
    if run.outcome == "running":
        raise VerificationError(SerializeCode.REVIEW_RESULT_NOT_OF_REVIEW, f"the run of review {state.review} has not finished "
                                "(it is running, or it was interrupted: its outcome is unknown, and it is never run again)", where)
    return run


def read_run_records(state_dir: str | os.PathLike[str]) -> tuple[RunRecord, ...]:
    """Every run record under ``STATE/results``, strictly: the deployment's whole history of analyses.

    Raises:
        VerificationError: ``REVIEW_STATE_MALFORMED`` (any record not of the documented shape,
            or not named for its review), ``STATE_SYMLINK``.
        EnvironmentFailure: ``REVIEW_STATE_FAILED`` and the state directory's codes.
    """

    root = os.path.abspath(os.fspath(state_dir))
    state_fd = open_state(root, create=False)
    try:
        try:
            os.stat(RESULTS_DIR, dir_fd=state_fd, follow_symlinks=False)
        except FileNotFoundError:
            return ()
        dfd = open_sub(state_fd, RESULTS_DIR, os.path.join(root, RESULTS_DIR), create=False)
    finally:
        os.close(state_fd)
    try:
        names = sorted(n for n in os.listdir(dfd) if not n.startswith("."))
    finally:
        os.close(dfd)
    out: list[RunRecord] = []
    for name in names:
        where = os.path.join(root, RESULTS_DIR, name)
        data = _read_at(root, RESULTS_DIR, name, MAX_RUN_RECORD_BYTES)
        if data is None:  # removed while listing: nothing to count
            continue
        run = parse_run_record(data, where)
        if name != f"{run.review}.json":
            raise VerificationError(RecheckCode.REVIEW_STATE_MALFORMED, f"the run record of review {run.review} is named {name}", where)
        out.append(run)
    return tuple(out)


def decide_head_history(run: RunRecord, history: Sequence[RunRecord]) -> list[Finding]:
    """Whether ``run`` may be serialized given every run of the deployment (pure).

    A run that could authorize (a result without a blocking finding) is refused while another
    run of the same head commit in the same repository had blocking findings or failed
    (``REVIEW_HEAD_BLOCKED``), whatever pull request carried it: the head is the commit, so
    another pull request of the same commit does not start a new history. A later clean analysis
    never clears an earlier non-clean one (a failed analysis is one whose findings are unknown);
    only a new head can. Another repository's runs never count. A run that blocks or failed
    itself is never refused here: its record never authorizes, and it is the head's diagnostic.
    A ``limited`` or ``partial`` result is not a failure: it blocks nothing.

    Raises:
        Nothing: the refusal is returned.
    """
    if run.blocking or run.outcome != "result":
        return []
    same = [r for r in history if r.review != run.review
            and (r.repository_id, r.head) == (run.repository_id, run.head)]
    blocking = sorted({r.review for r in same if r.outcome == "result" and r.blocking})
    failed = sorted({r.review for r in same if r.outcome == "failed"})
    if not (blocking or failed):
        return []
    why = [*([f"had blocking findings (review {', '.join(blocking)})"] if blocking else []),
           *([f"failed (review {', '.join(failed)}: what it would have found is unknown)"] if failed else [])]
    return [Finding(SerializeCode.REVIEW_HEAD_BLOCKED, None, f"another analysis of the head {run.head} {' and another '.join(why)}: "
                    "a later review without blocking findings does not clear it, so it is not serialized; only a new head can")]


# -- the record ----------------------------------------------------------------------------------------------------


def _finding_counts(result: ReviewResult | None, ours: int, inline: int) -> dict[str, int]:
    """The record's ``findings``: every finding of the payload, the reviewer's and ``ours`` authority findings (pure).

    Raises:
        Nothing.
    """
    findings = result.findings if result is not None else ()
    return {"total": len(findings) + ours, "blocking": sum(f.blocking for f in findings) + (ours if AUTHORITY_BLOCKING else 0),
            "inline": inline, "in_body": len(findings) + ours - inline}


def review_record_statement(state: ReviewState, *, status: Status, payload: bytes, result_digest: str | None, failure: Mapping[str, str] | None,
                            run: RunRecord, result: ReviewResult | None, placed: GitHubReviewPayload,
                            time: _dt.datetime) -> StatementDoc:
    """The review record's in-toto statement (pure): subject the payload, predicate every identity of the review.

    ``authority_changes`` is the state's list; ``findings`` counts every finding of the payload,
    the reviewer's and attest's authority findings (all in the body, all blocking).

    Raises:
        InputError: ``INTERNAL`` for a naive ``time``.
    """

    if time.tzinfo is None:
        raise InputError(CommonCode.INTERNAL, "the clock must return an aware datetime")
    d = state.doc
    ours = len(d["authority_changes"])  # each is a blocking finding of the payload's body (authority_findings)
    predicate = {
        "review": state.review,
        "state_digest": state.digest,
        "generation": state.generation,
        "status": status,
        "repository": d["repository"],
        "pull_request": d["pull_request"],
        "base": {"commit": state.base_commit, "tree": state.base_tree},
        "head": state.head,
        "merge_base": state.merge_base,
        "handoff_digest": d["handoff"]["digest"],
        "images": {n: i["identity"] for n, i in d["images"].items()},
        "change": {"identity": d["change"]["identity"]},
        "projections": {role: {"path": p["path"], "sha256": "sha256:" + p["sha256"]} for role, p in d["projections"].items()},
        "result": None if result_digest is None else {"sha256": result_digest},
        "failure": None if failure is None else dict(failure),
        "limitations": list(result.limitations) if result is not None else [],
        "authority_changes": [dict(c) for c in d["authority_changes"]],
        "findings": _finding_counts(result, ours, len(placed["comments"])),
        "event": placed["event"],
        "confinement": None if run.confinement is None else dict(run.confinement),
        "time": time.astimezone(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    return statement([subject("review-payload", hashlib.sha256(payload).hexdigest())], REVIEW_RECORD_PREDICATE, predicate)


class FindingCountsDoc(TypedDict):
    """A serialized review's findings: inline comments, in the body, and how many of all of them block."""

    inline: int
    in_body: int
    blocking: int


class SerializedDoc(TypedDict):
    """``attest review serialize --json`` (docs/json.md), which its text output reads by key."""

    ok: bool
    review: str
    status: Status
    head: str
    outcome: Literal["proceed"]
    payload: str
    payload_digest: str
    record: str
    record_digest: str
    event: str
    findings: FindingCountsDoc
    authority_changes: list[AuthorityChangeDoc]


@dataclass(frozen=True, slots=True)
class Serialized:
    """What :func:`serialize_review` wrote.

    Raises:
        Nothing.
    """

    review: str
    status: Status
    head: str
    payload_path: str
    payload_digest: str
    record_path: str
    record_digest: str
    event: str
    inline: int
    in_body: int
    blocking: int
    recheck: Recheck  # the one that said proceed
    authority: tuple[AuthorityChange, ...] = ()  # each also counted in in_body and blocking

    def to_json(self) -> SerializedDoc:
        return {"ok": True, "review": self.review, "status": self.status, "head": self.head, "outcome": "proceed",
                "payload": self.payload_path, "payload_digest": self.payload_digest, "record": self.record_path,
                "record_digest": self.record_digest, "event": self.event,
                "findings": {"inline": self.inline, "in_body": self.in_body, "blocking": self.blocking},
                "authority_changes": [c.to_json() for c in self.authority]}


def _serialized(state_dir: str, review: str) -> bool:
    """Whether ``STATE/records/<review>.json`` exists (a planted link there fails: ``STATE_SYMLINK``)."""

    return _read_at(state_dir, RECORDS_DIR, f"{review}.json", MAX_RUN_RECORD_BYTES * 16) is not None


def _refuse_serialized(state_dir: str, review: str) -> None:
    if _serialized(state_dir, review):
        raise VerificationError(SerializeCode.REVIEW_ALREADY_SERIALIZED, f"review {review} was serialized already: one review, "
                                "one analysis, one record (a new head is a new review)",
                                os.path.join(state_dir, RECORDS_DIR, f"{review}.json"))


def _authority_of(state: ReviewState, root: ReviewRoot) -> tuple[AuthorityChange, ...]:
    """The state's authority changes, if its surface and the re-established frozen base give exactly them.

    Raises:
        VerificationError: ``REVIEW_AUTHORITY_CHANGES_MISMATCH``, ``REVIEW_AUTHORITY_MISMATCH``,
            ``REVIEW_STATE_MALFORMED`` and the codes of :func:`~attest.review.bootstrap.read_authority`.
    """

    d = state.doc
    _changed_lines(d["surface"])  # the surface's paths are of the documented shape (REVIEW_STATE_MALFORMED)
    authority = read_base_authority(root.images["base"], state.base_commit, state.base_tree, state.object_format,
                                    d["config"]["sha256"], d["lock"]["sha256"])
    again = authority_changes([(p["path"], p["status"]) for p in d["surface"]["paths"]], authority.config, authority.lock)
    if again != tuple(state.authority):
        raise VerificationError(SerializeCode.REVIEW_AUTHORITY_CHANGES_MISMATCH, f"the review state lists "
                                f"{[c.path for c in state.authority]} as authority changes; its changed surface and the frozen "
                                f"base's configuration and lock give {[c.path for c in again]}: nothing was written")
    return again


def _output_paths(result: str, out: str, record: str | None) -> tuple[str, str | None]:
    """The payload and record paths, checked before anything is written: distinct from each other and the result, in existing directories.

    Raises:
        InputError: ``BAD_OUTPUT_PATH``.
    """

    def real(path: str) -> str:
        return os.path.join(os.path.realpath(os.path.dirname(os.path.abspath(path))), os.path.basename(path))

    paths = [p for p in (out, record) if p is not None]
    for p in paths:
        parent = os.path.dirname(os.path.abspath(p))
        if not os.path.basename(p) or not os.path.isdir(parent):
            raise InputError(CommonCode.BAD_OUTPUT_PATH, "the directory to write into does not exist (or the path names no file)", p)
        if os.path.isdir(p):
            raise InputError(CommonCode.BAD_OUTPUT_PATH, "a directory is there", p)
    reals = [real(p) for p in (result, *paths)]
    if len(set(reals)) != len(reals):
        raise InputError(CommonCode.BAD_OUTPUT_PATH, "the result, the payload (-o) and the record (--record) must be three "
                         "different files", out)
    return os.path.abspath(out), None if record is None else os.path.abspath(record)


def _now() -> _dt.datetime:
    return _dt.datetime.now(_dt.UTC)


def serialize_review(
    *,
    state_dir: str | os.PathLike[str],
    review: str,
    result: str | os.PathLike[str],
    out: str | os.PathLike[str],
    signer: Signer | KeylessSigner | Sequence[Signer],
    record: str | os.PathLike[str] | None = None,
    token_env: str | None = None,
    environ: Mapping[str, str] = os.environ,
    host: HostAdapter | None = None,
    clock: Callable[[], _dt.datetime] = _now,
) -> Serialized:
    """Run steps 1-6 of the module docstring; write the payload and the signed record only after ``proceed``.

    Raises:
        InputError: ``REVIEW_ID_INVALID``, ``REVIEW_STATE_MISSING``, an unreadable result
            (``UNREADABLE``), ``BAD_OUTPUT_PATH``, ``SIGNING_FAILED``, the host adapter's codes.
        VerificationError: ``REVIEW_ALREADY_SERIALIZED``, ``REVIEW_RESULT_NOT_OF_REVIEW``, ``REVIEW_NOT_PROCEED`` (with the
            recheck's findings: refresh, restart or fail), ``REVIEW_AUTHORITY_CHANGES_MISMATCH``, ``REVIEW_ADAPTER_UNSUPPORTED``,
            ``REVIEW_PAYLOAD_TOO_LARGE``, ``REVIEW_RESULT_INVALID``, the review state's codes.
        EnvironmentFailure: ``REVIEW_STATE_FAILED`` and the layers' environment failures.
    """

    root = os.path.abspath(os.fspath(state_dir))
    # 1. The state (refused when an earlier recheck closed it, or when it was serialized already),
    #    and the outputs, checked before anything is read or written.
    state = load_review_state(root, review)
    _refuse_serialized(root, review)
    out_path, record_path_arg = _output_paths(os.fspath(result), os.fspath(out), None if record is None else os.fspath(record))
    # 2. The run this review's analysis was: the result must be its exact bytes.
    run = read_run_record(root, state)
    parsed: ReviewResult | None = None
    result_digest: str | None = None
    if run.failure is None:
        data = read_bounded(os.fspath(result), what="review result", max_bytes=MAX_RESULT_BYTES)
        result_digest = sha256_of(data)
        if result_digest != run.result:
            raise VerificationError(SerializeCode.REVIEW_RESULT_NOT_OF_REVIEW, f"the result is {result_digest}; the run of review "
                                    f"{review} kept {run.result}", os.fspath(result))
        parsed = parse_result(data)
        if sum(f.blocking for f in parsed.findings) != run.blocking:
            raise VerificationError(RecheckCode.REVIEW_STATE_MALFORMED, f"the run record of review {review} counts {run.blocking} "
                                    "blocking finding(s); its result has another number", os.fspath(result))
    status = review_status(parsed)
    # 2b. The head's history: while another analysis of this exact head had blocking findings or
    #     failed, a review without any is not serialized (a later clean review never clears them).
    refused = decide_head_history(run, read_run_records(root))
    if refused:
        raise VerificationError(findings=refused)
    # 3. The recheck, immediately before writing: proceed only.
    got = recheck_review(state_dir=root, review=review, host=host, token_env=token_env, environ=environ)
    established = _proceeding_root(got)
    # 3b. The authority changes, computed again from the state's surface and the re-established base: the state's exactly.
    changes = _authority_of(state, established)
    # 4. The adapter: the retained bytes, exactly the transport this serializer implements.
    sem, ada = established.semantic, established.adapter
    adapter = check_adapter(ada.data, context=state.doc["context"], semantic_path=sem.path, semantic_sha256=sem.sha256)
    # 5. The payload.
    failure = run.failure
    facts = ReviewFacts(review, state.head, state.base_commit, state.merge_base, status,
                        None if failure is None else f"{failure['code']}: {failure['detail']}", changes)
    placed = render_github_review(parsed, facts, state.doc["surface"], adapter)
    payload = canonical_bytes(placed) + b"\n"
    # 6. The record, signed, then both written (the payload first: a payload without its record authorizes nothing).
    stmt = review_record_statement(state, status=status, payload=payload, result_digest=result_digest, failure=failure, run=run,
                                   result=parsed, placed=placed, time=clock())
    signed = sign_statement(stmt, signer)
    record_path = _write_outputs(root, review, signed, payload, out_path=out_path, record_path=record_path_arg)
    counted = _finding_counts(parsed, len(state.doc["authority_changes"]), len(placed["comments"]))  # the record's
    return Serialized(review, status, state.head, out_path, sha256_of(payload), record_path,
                      sha256_of(signed), placed["event"], len(placed["comments"]),
                      counted["in_body"], counted["blocking"], got, changes)


def _proceeding_root(got: Recheck) -> ReviewRoot:
    """Step 3: the root the recheck re-established when it decided ``proceed``; any other decision refuses, nothing written."""
    if got.outcome.outcome != "proceed" or got.root is None:
        then = {"refresh": f"the review is now {got.current_review}: run the review again for it",
                "restart": "run `attest bootstrap` again; nothing of the old root is reused",
                "fail": "this pull request cannot be reviewed as it is"}.get(got.outcome.outcome, "")
        raise VerificationError(findings=[Finding(SerializeCode.REVIEW_NOT_PROCEED, None, f"the recheck decided "
                                                  f"{got.outcome.outcome} ({got.outcome.reason}): {then}; nothing was written"),
                                          *got.outcome.findings])
    return got.root


def _write_outputs(root: str, review: str, signed: bytes, payload: bytes, *, out_path: str, record_path: str | None) -> str:
    """Step 6's writes; the path of the record the result names (the caller's copy when it asked for one).

    The state's record first (it also proves STATE/records is not a planted link), then the
    caller's copies; a failure removes what this call wrote, so a failed serialize leaves nothing.
    """

    written: list[str] = []
    try:
        state_record = write_state_file(root, RECORDS_DIR, f"{review}.json", signed)
        written.append(state_record)
        if record_path is not None:
            write_atomic(record_path, signed, mode=0o644, what="review record")
            written.append(record_path)
        write_atomic(out_path, payload, mode=0o644, what="review payload")
    except BaseException:
        for path in written:
            try:
                os.unlink(path)
            except OSError:
                pass
        raise
    return state_record if record_path is None else record_path


def check_run_options(state_dir: str, handoff: Handoff, argv: Sequence[str], *, out: str | os.PathLike[str],
                      pass_env: Sequence[str] = (), set_env: Mapping[str, str] | None = None, unsafe_unconfined: bool = False,
                      environ: Mapping[str, str] = os.environ, more_images: Mapping[str, str] | None = None,
                      **_: object) -> dict[str, Image]:
    """Everything about a run of the verified ``handoff`` that can be checked without running the reviewer; raise what is wrong.

    :func:`run_review` calls it before it claims the run, so a refused option leaves the review
    unclaimed and re-runnable: a command (``BAD_EXEC_ENV``); every variable passed or set, by
    :mod:`attest.freeze`'s own check (``ENV_REFUSED``, ``BAD_EXEC_ENV``); every
    ``$ATTEST_IMAGE_<NAME>`` reference of the command naming one of the four images
    (``BAD_IMAGE_REF``); the result's path, a file in an existing directory this process may
    write (``BAD_OUTPUT_PATH``); the confinement (``REVIEWER_NOT_CONFINED``; its tools,
    ``NETWORK_NOT_ISOLATED``); and the four images, taken from the store (verified: seal, every
    byte, seal) and exactly the handoff's (``NOT_IN_STORE``, ``IMAGE_*``, ``HANDOFF_IMAGE_MISMATCH``).
    The run checks all of it again: what changes in between fails the claimed run. Returns the
    verified images, for the run to take (their seals are checked again, their bytes not re-read).

    Raises:
        InputError: ``BAD_EXEC_ENV``, ``ENV_REFUSED``, ``BAD_IMAGE_REF``, ``BAD_OUTPUT_PATH``.
        VerificationError: ``NOT_IN_STORE``, the image codes, ``HANDOFF_IMAGE_MISMATCH``, ``STATE_SYMLINK``.
        EnvironmentFailure: ``REVIEWER_NOT_CONFINED``, ``NETWORK_NOT_ISOLATED``, the state directory's codes.
    """

    # lazy: attest.builder, +84 ms to importing review.procedure, which the merge gate imports (run records, the record's constants) and never needs it
    from ...builder._codes import BuildCode
    from ...builder._sandbox import _TOOLS_PATH, _tools  # lazy: as above

    if not argv:
        raise InputError(FreezeCode.BAD_EXEC_ENV, "no command to run")
    caller_environment(pass_env, set_env or {}, environ)
    target = os.path.abspath(os.fspath(out))
    check_output_path(target, what="review result")
    if not os.access(os.path.dirname(target), os.W_OK | os.X_OK):
        raise InputError(CommonCode.BAD_OUTPUT_PATH, "cannot write the review result there: its directory is not writable", target)
    verify_can_confine(os.geteuid(), unsafe_unconfined=unsafe_unconfined)
    if not unsafe_unconfined:
        if _tools() is None or shutil.which("bash", path=_TOOLS_PATH) is None:
            raise EnvironmentFailure(BuildCode.NETWORK_NOT_ISOLATED, "unshare, chroot, setpriv and bash are needed "
                                     "to confine the reviewer")
    state_fd = open_state(state_dir, create=False)
    try:
        with state_lock(state_fd, exclusive=False):
            store = Store(state_dir)
            images = {name.upper(): store.get(handoff.images[name].identity) for name in IMAGE_NAMES}
            images.update({name: store.get(identity) for name, identity in (more_images or {}).items()})
    finally:
        os.close(state_fd)
    problems = decide_images(handoff, images)
    if problems:
        raise VerificationError(findings=problems)
    expand_image_refs(argv, {name: image.path for name, image in images.items()})
    return images


class RunOptions(TypedDict, total=False):
    """The options :func:`run_review` passes on to :func:`check_run_options` and :func:`~attest.review.handoff.run_review_step`."""

    pass_env: Sequence[str]
    readonly: Sequence[str]
    network: bool
    unsafe_unconfined: bool


def run_review(
    *,
    state_dir: str | os.PathLike[str],
    review: str,
    handoff: str | os.PathLike[str],
    policy: Policy,
    argv: Sequence[str],
    out: str | os.PathLike[str],
    reviewer: str | None = None,
    reviewer_attestation: str | os.PathLike[str] | None = None,
    set_env: Mapping[str, str] | None = None,
    **options: Unpack[RunOptions],
) -> ReviewRun:
    """``review exec --review ID``: the review step for one started review, its outcome recorded for serialize.

    The reviewer gets the review's change image (``$ATTEST_IMAGE_CHANGE``, checked against the
    state before it starts: :func:`~._change.decide_change`) and the two retained projections in
    it (``$ATTEST_REVIEW_SEMANTIC``, ``$ATTEST_REVIEW_ADAPTER``); with ``reviewer`` (an image
    identity, its ``reviewer_attestation`` verified under ``policy``), the deployment's reviewer
    image as ``$ATTEST_IMAGE_REVIEWER``, a relative program of ``argv`` resolved in it.

    The review must be open (no recheck closed it) and of exactly this handoff, and everything
    that can be checked without running the reviewer must hold (:func:`check_run_options`): a
    refused option, a missing image or a result path that cannot be written fails here, and the
    review stays unclaimed (run it again, corrected). Only then is its one run claimed
    (:func:`claim_run`, exclusively), before the reviewer starts: a second run of the review is
    refused (``REVIEW_ALREADY_RUN``), whether the first succeeded, failed, is still running or was
    interrupted. The reviewer gets ``REVIEW_ID``, ``REVIEW_HEAD`` and ``REVIEW_MERGE_BASE``.
    Whatever happens once the run was claimed, the run record says it: the result's digest and
    its number of blocking findings, or the failure (then re-raised; a failed run keeps its head
    blocked, :func:`decide_head_history`); an exception that is no reason code (an interruption)
    leaves it ``running``, an outcome unknown, never run again.

    Raises:
        VerificationError: ``REVIEW_RESULT_NOT_OF_REVIEW`` (the review's handoff is another),
            ``REVIEW_ALREADY_SERIALIZED``, ``REVIEW_ALREADY_RUN`` (one review, one analysis) and
            everything :func:`check_run_options` and :func:`~attest.review.handoff.run_review_step` raise.
    """

    root = os.path.abspath(os.fspath(state_dir))
    state = load_review_state(root, review)
    _refuse_serialized(root, review)
    h = verify_handoff(handoff, policy)
    if h.attestation_digest != state.doc["handoff"]["digest"]:
        raise VerificationError(SerializeCode.REVIEW_RESULT_NOT_OF_REVIEW, f"review {review} was started from the handoff "
                                f"{state.doc['handoff']['digest']}, not {h.attestation_digest}", os.fspath(handoff))
    deployed = verify_reviewer_image(reviewer, reviewer_attestation, policy) if reviewer is not None else None
    change = state.doc["change"]
    caller_set = set_env or {}
    set_env = {**caller_set, "REVIEW_ID": review, "REVIEW_HEAD": state.head, "REVIEW_MERGE_BASE": state.merge_base}
    attest_env = {"ATTEST_REVIEW_SEMANTIC": f"{change['path']}/projections/semantic",
                  "ATTEST_REVIEW_ADAPTER": f"{change['path']}/projections/adapter"}
    more = {"CHANGE": change["identity"], **({"REVIEWER": deployed.identity} if deployed is not None else {})}
    # Nothing claimed yet: a usage error, a missing image or a reviewer that does not verify burns nothing.
    images = check_run_options(root, h, argv, out=out, set_env=set_env, more_images=more, **options)
    command = reviewer_command(argv, images["REVIEWER"].path if deployed is not None else None)

    def require_change(verified: Mapping[str, Image]) -> list[Finding]:
        image = verified["CHANGE"]
        return decide_change(state.doc, review, image, lambda rel: read_image_file(image, rel))

    problems = require_change(images)  # and again under the store lock, right before the reviewer starts
    if problems:
        raise VerificationError(findings=problems)
    claim_run(root, state, h.attestation_digest)  # before the reviewer starts: the marker of the one run
    try:
        ran = run_review_step(handoff, policy, root, command, out=out, set_env=set_env, _verified=images,
                              require_more=require_change, attest_env=attest_env, **options)
    except AttestError as e:  # the run failed, whatever the step: it was this review's one run
        write_run_record(root, run_record(state, h.attestation_digest, "failed", failure=e.findings[0]))
        raise
    confinement = {**ran.confinement.to_json(), "reviewer": None if deployed is None else deployed.to_json(),
                   "environment": sorted({*options.get("pass_env", ()), *caller_set})}
    write_run_record(root, run_record(state, h.attestation_digest, "result", result_digest=ran.result_digest,
                                      blocking=sum(f.blocking for f in ran.result.findings), confinement=confinement))
    return ran


__all__ = [
    "AUTHORITY_BLOCKING",
    "AUTHORITY_SEVERITY",
    "RECORDS_DIR",
    "RESULTS_DIR",
    "REVIEW_RECORD_PREDICATE",
    "RUN_OUTCOMES",
    "STATUSES",
    "ReviewFacts",
    "RunRecord",
    "Serialized",
    "anchor",
    "authority_findings",
    "check_adapter",
    "check_run_options",
    "claim_run",
    "decide_head_history",
    "parse_run_record",
    "read_run_record",
    "read_run_records",
    "render_github_review",
    "review_record_statement",
    "review_status",
    "run_record",
    "run_review",
    "serialize_review",
    "write_run_record",
]
