"""`attest review publish`: post a signed record's review payload to the pull request, exactly once (docs/github.md).

1. **record**: verify the record under TRUST (a signer named for review records), as the merge
   gate does; it must be of the ``--github`` repository and pull request
   (``PUBLISH_OTHER_PULL_REQUEST``);
2. **payload**: the payload's bytes must be the record's subject (SHA-256), and the payload a
   review of the record's head with the record's event (``PUBLISH_PAYLOAD_MISMATCH``);
3. **head**: the pull request is read again; its head and base must still be the record's
   (``PUBLISH_HEAD_MOVED``): a review of a head that is gone would be noise on the new one;
4. **existing**: every review of the pull request is read; one whose body carries this record's
   marker (:func:`record_marker`) is this record's review, already posted: it is checked
   (:func:`decide_existing`) and nothing is posted again;
5. **post**: otherwise the payload is posted once, its body followed by the marker line. When
   the answer is lost, the reviews are read again and the marker decides whether it was
   created (``PUBLISH_UNCONFIRMED`` when it is not there: nothing is posted twice);
6. **read back**: the created review is read by its id and must be exactly what was posted:
   the record's head as ``commit_id``, the event's state, the body, and with ``--app-login`` that
   author (``PUBLISH_READBACK_MISMATCH``: a token that is not the App's is caught on its first
   post, not by a second review on every run). The reviews are then read once more: another
   review with the marker (a second publisher posting at the same time) is ``PUBLISH_DUPLICATE``;
7. **note**: ``<record>.published.json`` beside the record says which review it is.

The body GitHub holds is the signed payload's body followed by one line, the marker; removing
that line gives back exactly the signed body. The marker names the record's digest, which the
payload cannot (the record names the payload).

    >>> done = publish_review(record="record.json", payload="payload.json", policy=load_policy("trust.toml"), host=host)
    >>> done.review_id, done.posted  # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..._fs import read_bounded, write_atomic
from ..._json import loads_strict
from ...errors import InputError, VerificationError
from ..evidence._model import _printable
from ..merge import ReviewRecord, verify_review_record
from ._api import GitHubPlatform, NoAnswer, PostedReview
from ._codes import PlatformCode as C

if TYPE_CHECKING:
    from ...attestation import StatementDoc
    from ...attestation._policy import Policy
    from ..bootstrap import GitHubIdentity

MAX_PAYLOAD_BYTES = 4 * 1024 * 1024
_STATES = {"COMMENT": "COMMENTED", "REQUEST_CHANGES": "CHANGES_REQUESTED"}
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}\Z")


def record_marker(record_digest: str) -> str:
    """The marker line that ties a posted review to the record it publishes (pure)."""
    if not _DIGEST.match(record_digest):
        raise ValueError(f"not a record digest: {record_digest!r}")
    return f"<!-- attest-review-record: {record_digest} -->"


@dataclass(frozen=True, slots=True)
class Expected:
    """The review GitHub must hold for a record: on its head, in its event's state, with this body (by ``login``, if given)."""

    commit_id: str
    state: str
    body: str
    marker: str
    login: str | None = None

    def differences(self, review: PostedReview) -> list[str]:
        out = []
        if review.commit_id != self.commit_id:
            out.append(f"its commit is {review.commit_id}, not the record's head {self.commit_id}")
        if review.state != self.state:
            out.append(f"its state is {_printable(review.state, 40)!r}, not {self.state!r}")
        if self.login is not None and review.login != self.login:
            out.append(f"it was posted by {_printable(str(review.login), 100)}, not {self.login} (--app-login): the token is "
                       "not the App's")
        if review.body != self.body:
            out.append("its body is not the signed payload's body followed by the marker (edited, or not attest's)")
        return out


def decide_existing(reviews: Sequence[PostedReview], expected: Expected, *, app_login: str | None) -> PostedReview | None:
    """This record's review among ``reviews``, checked; None when it was not posted (pure).

    A review counts as this record's when its body carries the marker (and, with ``app_login``,
    when that exact login wrote it: another author's copy of the marker is ignored).

    Raises:
        VerificationError: ``PUBLISH_DUPLICATE`` (two of them), ``PUBLISH_EXISTING_MISMATCH``
            (one that is not the record's review).
    """
    mine = [r for r in reviews if expected.marker in r.body and (app_login is None or r.login == app_login)]
    if len(mine) > 1:
        raise VerificationError(C.PUBLISH_DUPLICATE, f"reviews {', '.join(str(r.id) for r in mine)} all carry this record's "
                                "marker: attest posts a record once; find out who posted the others")
    if not mine:
        return None
    review = mine[0]
    wrong = expected.differences(review)
    if wrong:
        raise VerificationError(C.PUBLISH_EXISTING_MISMATCH, f"review {review.id} carries this record's marker but "
                                + "; ".join(wrong))
    return review


@dataclass(frozen=True, slots=True)
class _Payload:
    """The review payload's fields publish posts, as :func:`_payload` checked them."""

    commit_id: str
    body: str
    comments: list[object]


def _payload(path: str | os.PathLike[str], statement: StatementDoc, record: ReviewRecord,
             event: str) -> tuple[_Payload, str]:
    """The payload file, checked against the verified record (step 2): (the payload, its digest)."""
    where = os.fspath(path)
    data = read_bounded(path, what="review payload", max_bytes=MAX_PAYLOAD_BYTES)
    digest = hashlib.sha256(data).hexdigest()
    named = [s.get("digest", {}).get("sha256") for s in statement["subject"] if s.get("name") == "review-payload"]
    if named != [digest]:
        raise VerificationError(C.PUBLISH_PAYLOAD_MISMATCH, f"the payload's SHA-256 is {digest}; the record names "
                                f"{', '.join(str(n) for n in named) or 'no review payload'}: publish only the payload "
                                "`attest review serialize` wrote with this record", where)
    try:
        doc = loads_strict(data, what="review payload")
    except InputError as e:
        raise VerificationError(C.PUBLISH_PAYLOAD_MISMATCH, e.detail, where) from e
    if not (isinstance(doc, dict) and set(doc) == {"commit_id", "event", "body", "comments"} and isinstance(doc["body"], str)
            and isinstance(doc["comments"], list)):
        raise VerificationError(C.PUBLISH_PAYLOAD_MISMATCH, "the payload is not a review payload {commit_id, event, body, "
                                "comments}", where)
    if doc["commit_id"] != record.head or doc["event"] != event:
        raise VerificationError(C.PUBLISH_PAYLOAD_MISMATCH, f"the payload is a {doc['event']!r} review of {doc['commit_id']!r}; "
                                f"the record's is a {event!r} review of {record.head}", where)
    return _Payload(record.head, doc["body"], doc["comments"]), "sha256:" + digest


@dataclass(frozen=True, slots=True)
class Published:
    """What :func:`publish_review` established: the review on GitHub that publishes the record.

    Raises:
        Nothing.
    """

    review_id: int
    posted: bool  # False: it was already there (a second publish of the same record)
    commit_id: str
    state: str
    login: str | None
    record_digest: str
    payload_digest: str
    full_name: str
    number: int
    note: str

    def to_json(self) -> dict[str, object]:
        return {"ok": True, "review_id": self.review_id, "posted": self.posted, "commit_id": self.commit_id, "state": self.state,
                "login": self.login, "record_digest": self.record_digest, "payload_digest": self.payload_digest,
                "repository": self.full_name, "pull_request": self.number, "note": self.note}


def _note_path(record: str | os.PathLike[str]) -> str:
    path = os.path.abspath(os.fspath(record))
    stem = path[: -len(".json")] if path.endswith(".json") else path
    return stem + ".published.json"


def _confirm(gh: GitHubPlatform, review: PostedReview, expected: Expected) -> PostedReview:
    """Step 6: the created review, read back by its id, is exactly what was posted."""
    wrong = expected.differences(review)
    if not wrong:
        back = gh.review(review.id)
        wrong = expected.differences(back) if back.id == review.id else [f"reading review {review.id} answered review {back.id}"]
        review = back
    if wrong:
        raise VerificationError(C.PUBLISH_READBACK_MISMATCH, f"GitHub created review {review.id}, but " + "; ".join(wrong)
                                + ": it is not the record's review; investigate before anything relies on it")
    return review


def publish_review(*, record: str | os.PathLike[str], payload: str | os.PathLike[str], policy: Policy,
                   host: GitHubIdentity, app_login: str | None = None) -> Published:
    """Run steps 1-7 of the module docstring.

    Raises:
        VerificationError: the attestation codes, ``MERGE_RECORD_MALFORMED``, and this module's
            ``PUBLISH_*`` codes.
        EnvironmentFailure: ``PLATFORM_REQUEST_FAILED``, ``PLATFORM_RESPONSE_SHAPE``.
        InputError: unreadable files, ``BAD_OUTPUT_PATH`` for the note.
    """
    # 1. The record, verified, of this pull request.
    parsed, statement = verify_review_record(record, policy)
    record_digest = parsed.digest
    if (parsed.full_name.lower(), parsed.number) != (host.full_name.lower(), host.number):
        raise VerificationError(C.PUBLISH_OTHER_PULL_REQUEST, f"the record is of {parsed.full_name} pull request {parsed.number}, "
                                f"not {host.full_name} pull request {host.number}", os.fspath(record))
    event = parsed.event
    # 2. The payload, the record's subject.
    doc, payload_digest = _payload(payload, statement, parsed, event)
    marker = record_marker(record_digest)
    expected = Expected(parsed.head, _STATES[event], doc.body + marker + "\n", marker, app_login)
    gh = GitHubPlatform.for_host(host)
    # 3. The pull request, again: the same repository and pull request, the record's head and base.
    pr = gh.pull()
    if (pr.id, pr.base_repository_id) != (parsed.pull_request_id, parsed.repository_id):
        raise VerificationError(C.PUBLISH_OTHER_PULL_REQUEST, f"{host.full_name} pull request {host.number} is pull request id "
                                f"{pr.id} of repository id {pr.base_repository_id}; the record's are {parsed.pull_request_id} "
                                f"and {parsed.repository_id}")
    if (pr.head_sha, pr.base_sha) != (parsed.head, parsed.base_commit):
        raise VerificationError(C.PUBLISH_HEAD_MOVED, f"the pull request is now head {pr.head_sha} on base {pr.base_sha}; the "
                                f"record reviewed head {parsed.head} on base {parsed.base_commit}: review the new head")
    # 4. Already posted?
    existing = decide_existing(gh.reviews(), expected, app_login=app_login)
    posted = existing is None
    if existing is None:
        # 5. Post once; a lost answer is resolved by reading, never by posting again.
        body = {"commit_id": doc.commit_id, "event": event, "body": expected.body, "comments": doc.comments}
        try:
            created = gh.create_review(body)
        except NoAnswer as e:
            found = decide_existing(gh.reviews(), expected, app_login=app_login)
            if found is None:
                raise VerificationError(C.PUBLISH_UNCONFIRMED, f"posting the review got no answer ({e.detail}) and no review "
                                        "with this record's marker is on the pull request: it was not created, or GitHub has "
                                        "not shown it yet. Run publish again later: it reads first and never posts twice") from e
            created = found
        existing = _confirm(gh, created, expected)
        # Posted once by this run; another run posting at the same time made a second one: say so, now.
        listed = decide_existing(gh.reviews(), expected, app_login=app_login)
        if listed is not None and listed.id != existing.id:
            raise VerificationError(C.PUBLISH_DUPLICATE, f"this run created review {existing.id}, and review {listed.id} "
                                    "also carries this record's marker: another publisher posted it at the same time")
    note = _note_path(record)
    out = Published(existing.id, posted, expected.commit_id, existing.state, existing.login, record_digest, payload_digest,
                    host.full_name, host.number, note)
    # 7. The note beside the record (not evidence: the record is).
    write_atomic(note, json.dumps(out.to_json(), sort_keys=True, indent=2).encode() + b"\n", what="publication note")
    return out


__all__ = ["MAX_PAYLOAD_BYTES", "Expected", "Published", "decide_existing", "publish_review", "record_marker"]
