"""The promotion log: an append-only chain of signed entries beside the pins.

Every promotion that writes the pins (or finds pins that no entry names) appends one entry,
``PINS.promotions/NNNNNN.json`` (six digits, from ``000001``): a signed in-toto statement,
predicate ``https://attest.dev/promotion/v1``, whose subject is the pins file it wrote (its
name, the SHA-256 of its bytes) and whose predicate holds ``sequence`` (the entry's number),
``previous`` (``sha256:`` of the previous entry's file bytes; ``null`` for entry 1), ``pins``
(``name``, ``before``: the SHA-256 of the bytes it replaced, ``null`` if there were none), the
toolchain, runtime and skill promoted, the release policy's digest, the rebuilders that agreed,
the fixture run, the pinned identities changed under ``--repin``, the number of changed pins,
and the time. An entry is created under a new name only (``link``, never over an existing
entry), before the pins are written, and removed again if writing the pins fails.

:func:`verify_promotion_log` (``attest promote --verify-log``) reads every entry once, verifies
each under the release policy and checks the chain (:func:`check_log_chain`, pure): numbers
from 1 without a gap, each entry's sequence its place, each naming its predecessor's digest;
then that the pins file is the one the last entry wrote (:func:`check_log_pins`, pure). Each
failure has its own reason code. That alone cannot see a **rollback**: the newest entries removed
and the older pins restored is again a valid chain ending at its pins.

So every consumer of pins (``attest promote``, ``--verify-log``, ``attest install skill``, ``attest
bootstrap``) remembers in its own state directory the highest entry it accepted
(:func:`remember_log`, after its whole verification passed) and refuses a log that ends below it
or holds another entry at that sequence (:func:`check_promotion_log`, deciding with the pure
:func:`decide_log_checkpoint`: ``PROMOTION_LOG_ROLLBACK``, ``PROMOTION_LOG_FORK``), as a TUF client
refuses metadata older than what it trusted. A first use can be given a checkpoint
(``SEQ:sha256:HEX``, :func:`parse_log_checkpoint`) instead of trusting the log it finds.

    >>> verify_promotion_log("/etc/attest/pins.toml", load_policy("release.toml", extensions=RELEASE_POLICY_EXTENSIONS))
    >>> verify_log_checked("/etc/attest/pins.toml", "release.toml", "/var/lib/attest", checkpoint="3:sha256:...")
"""

from __future__ import annotations

import datetime as _dt
import errno
import fcntl
import hashlib
import os
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._digest import sha256_of
from .._fs import read_bounded
from .._json import canonical_bytes, loads_strict
from .._safefs import O_DIR, O_OWN_RDWR, UnsafeEntry, create_at, open_regular_at, replace_at
from .._shape import Shape
from ..attestation import Policy, StatementDoc, load_policy, statement, subject, verify_attestation_bytes
from ..errors import AttestError, CommonCode, Finding, InputError, VerificationError
from ._promotion_codes import PromotionCode
from ._rebuilders import RELEASE_POLICY_EXTENSIONS, rebuilders_of

PROMOTION_PREDICATE = "https://attest.dev/promotion/v1"
LOG_SUFFIX = ".promotions"
MAX_LOG_ENTRIES = 99_999
MAX_ENTRY_BYTES = 4 << 20
MAX_PINS_BYTES = 1 << 20
_ENTRY = re.compile(r"([0-9]{6})\.json\Z")
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}\Z")
_PREDICATE_FIELDS = {"sequence", "previous", "pins", "toolchain", "runtime", "skill", "policy", "rebuilders", "fixture", "repinned",
                     "changes", "time"}
_MAX_LISTED = 10


def log_path(pins_path: str | os.PathLike[str]) -> str:
    """The log directory of a pins file: ``PINS.promotions``.

    Raises:
        Nothing.
    """
    return os.fspath(pins_path) + LOG_SUFFIX


def entry_name(number: int) -> str:
    return f"{number:06d}.json"


@dataclass(frozen=True, slots=True)
class LogEntry:
    """One verified entry: its place (file name), its digest, and what its predicate says."""

    number: int
    path: str
    digest: str           # sha256:<hex> of the entry's file bytes
    sequence: int
    previous: str | None
    pins_sha256: str      # sha256:<hex> of the pins the entry wrote
    pins_before: str | None
    toolchain_revision: str
    time: str
    signers: tuple[str, ...]
    # Any: the entry's predicate (parse_entry checked its fields), whose records the demo reads by their keys
    predicate: dict[str, Any] = field(hash=False, repr=False)

    def to_json(self) -> dict[str, object]:
        return {"sequence": self.sequence, "path": self.path, "digest": self.digest, "previous": self.previous,
                "pins": self.pins_sha256, "pins_before": self.pins_before, "toolchain": self.toolchain_revision,
                "time": self.time, "signers": list(self.signers)}


def parse_entry(statement: Mapping[str, object], *, number: int, path: str, digest: str, signers: tuple[str, ...]) -> LogEntry:
    """Read a verified entry's statement strictly (pure).

    Raises:
        VerificationError: ``PROMOTION_LOG_BAD_ENTRY`` (another predicate type, missing or
            unknown fields, a sequence that is not a positive integer, a digest that is not
            ``sha256:<hex>``, not exactly one subject).
    """
    def bad(detail: str) -> VerificationError:
        return VerificationError(PromotionCode.PROMOTION_LOG_BAD_ENTRY, f"the log entry {detail}", path)

    if statement.get("predicateType") != PROMOTION_PREDICATE:
        raise bad(f"has predicateType {str(statement.get('predicateType'))[:100]!r}, not {PROMOTION_PREDICATE!r}")
    pred = statement.get("predicate")
    if not isinstance(pred, dict) or set(pred) != _PREDICATE_FIELDS:
        raise bad(f"predicate fields are not exactly {sorted(_PREDICATE_FIELDS)}")
    sequence = pred["sequence"]
    if type(sequence) is not int or sequence < 1:
        raise bad("sequence is not a positive integer")
    previous = pred["previous"]
    if previous is not None and not (isinstance(previous, str) and _DIGEST.match(previous)):
        raise bad("previous is neither null nor sha256:<hex>")
    pins = pred["pins"]
    if not isinstance(pins, dict) or set(pins) != {"name", "before"} or not (
            pins["before"] is None or (isinstance(pins["before"], str) and _DIGEST.match(pins["before"]))):
        raise bad("pins is not {name, before: null or sha256:<hex>}")
    toolchain = pred["toolchain"]
    if not isinstance(toolchain, dict) or not isinstance(toolchain.get("revision"), str) or not isinstance(pred["time"], str):
        raise bad("toolchain.revision or time is not a string")
    subjects = statement.get("subject") or []
    if (not isinstance(subjects, list) or len(subjects) != 1 or not isinstance(subjects[0], dict)
            or set(subjects[0].get("digest", {})) != {"sha256"}):
        raise bad("does not name exactly one pins file by its SHA-256")
    return LogEntry(number, path, digest, sequence, previous, "sha256:" + subjects[0]["digest"]["sha256"], pins["before"],
                    toolchain["revision"], pred["time"], signers, dict(pred))


def _listing(numbers: Sequence[int]) -> str:
    shown = ", ".join(entry_name(n) for n in numbers[:_MAX_LISTED])
    return shown + (f" and {len(numbers) - _MAX_LISTED} more" if len(numbers) > _MAX_LISTED else "")


def check_log_chain(entries: Sequence[LogEntry], *, unverified: Collection[int] = ()) -> list[Finding]:
    """The chain of verified ``entries`` (ordered by number): no gap, each in its place, each linked to its predecessor (pure).

    ``unverified`` are the numbers of entries that exist but did not verify (reported on their
    own): they are no gap, and the links next to them are not judged.

    Raises:
        Nothing: ``PROMOTION_LOG_GAP`` (numbers missing below the highest),
        ``PROMOTION_LOG_OUT_OF_ORDER`` (a sequence that is not the entry's number: moved or
        swapped), ``PROMOTION_LOG_BROKEN_LINK`` (entry 1 names a predecessor, or an entry does not
        name the digest of the entry before it) are returned.
    """
    found: list[Finding] = []
    numbers = [e.number for e in entries]
    if numbers:
        missing = sorted(set(range(1, max(numbers) + 1)) - set(numbers) - set(unverified))
        if missing:
            found.append(Finding(PromotionCode.PROMOTION_LOG_GAP, None, f"{len(missing)} entr{'y is' if len(missing) == 1 else 'ies are'} "
                                 f"missing: {_listing(missing)} (an entry was removed; the log is append-only)"))
    by_number = {e.number: e for e in entries}
    for e in entries:
        if e.sequence != e.number:
            found.append(Finding(PromotionCode.PROMOTION_LOG_OUT_OF_ORDER, e.path, f"the entry says it is number {e.sequence}; it is "
                                 f"stored as number {e.number} (moved or swapped)"))
        if e.number == 1:
            if e.previous is not None:
                found.append(Finding(PromotionCode.PROMOTION_LOG_BROKEN_LINK, e.path, f"the first entry names a predecessor "
                                     f"{e.previous} (entries before it were removed)"))
            continue
        before = by_number.get(e.number - 1)
        if before is not None and e.previous != before.digest:
            found.append(Finding(PromotionCode.PROMOTION_LOG_BROKEN_LINK, e.path, f"the entry names the predecessor {e.previous}; "
                                 f"entry {entry_name(before.number)} is {before.digest} (replaced or rewritten)"))
    return found


def check_log_pins(entries: Sequence[LogEntry], pins_data: bytes | None, pins_path: str) -> list[Finding]:
    """The pins file is what the last entry wrote (pure).

    Raises:
        Nothing: ``PROMOTION_LOG_MISSING`` (no entry at all) and ``PROMOTION_LOG_PINS_MISMATCH``
        (the pins absent, or other bytes than the last entry's) are returned.
    """
    if not entries:
        return [Finding(PromotionCode.PROMOTION_LOG_MISSING, log_path(pins_path), "there is no promotion log entry for these pins "
                        "(no promotion of this version wrote them)")]
    last = entries[-1]
    if pins_data is None:
        return [Finding(PromotionCode.PROMOTION_LOG_PINS_MISMATCH, pins_path, f"the pins file is absent; log entry "
                        f"{entry_name(last.number)} wrote {last.pins_sha256}")]
    have = sha256_of(pins_data)
    if have != last.pins_sha256:
        return [Finding(PromotionCode.PROMOTION_LOG_PINS_MISMATCH, pins_path, f"the pins file is {have}; the last log entry "
                        f"{entry_name(last.number)} wrote {last.pins_sha256} (changed outside `attest promote`)")]
    return []


def read_pins_bytes(pins_path: str) -> bytes | None:
    return read_bounded(pins_path, what="pins file", max_bytes=MAX_PINS_BYTES) if os.path.lexists(pins_path) else None


def read_log(pins_path: str, policy: Policy) -> tuple[list[LogEntry], list[Finding], list[int]]:
    """Every entry of the log, each read once through the log directory's descriptor and verified under ``policy``.

    Returns (verified entries, findings, the numbers of entries that did not verify). An absent
    log is no entry and no finding.

    Raises:
        InputError: ``UNREADABLE`` (the log directory cannot be listed), ``BAD_POLICY`` (a
            pinned trusted root sigstore cannot use).
    """
    where = log_path(pins_path)
    if not os.path.lexists(where):
        return [], [], []
    try:
        dfd = os.open(where, O_DIR)
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.ENOTDIR):
            return [], [Finding(PromotionCode.PROMOTION_LOG_UNEXPECTED_FILE, where, "the promotion log is not a directory (a link or "
                                "a file)")], []
        raise InputError(CommonCode.UNREADABLE, f"cannot open the promotion log: {e.strerror}", where) from e
    found: list[Finding] = []
    entries: list[LogEntry] = []
    unverified: list[int] = []
    try:
        numbered: list[tuple[int, str]] = []
        for name in sorted(os.listdir(dfd)):
            m = _ENTRY.match(name)
            if m is None or int(m.group(1)) == 0:
                found.append(Finding(PromotionCode.PROMOTION_LOG_UNEXPECTED_FILE, os.path.join(where, name), "not a log entry (entries "
                                     "are NNNNNN.json from 000001); nothing else belongs in the log"))
                continue
            numbered.append((int(m.group(1)), name))
        if len(numbered) > MAX_LOG_ENTRIES:
            return [], [*found, Finding(PromotionCode.PROMOTION_LOG_BAD_ENTRY, where, f"{len(numbered)} entries; the limit is "
                                        f"{MAX_LOG_ENTRIES}")], []
        for number, name in numbered:
            path = os.path.join(where, name)
            try:
                fd, st = open_regular_at(dfd, name)
            except UnsafeEntry as e:
                found.append(Finding(PromotionCode.PROMOTION_LOG_UNEXPECTED_FILE, path, f"not a plain regular file: {e}"))
                unverified.append(number)
                continue
            try:
                if st.st_size > MAX_ENTRY_BYTES:
                    found.append(Finding(PromotionCode.PROMOTION_LOG_BAD_ENTRY, path, f"{st.st_size} bytes; the limit is {MAX_ENTRY_BYTES}"))
                    unverified.append(number)
                    continue
                chunks: list[bytes] = []
                while (chunk := os.read(fd, 1 << 20)) and sum(map(len, chunks)) <= MAX_ENTRY_BYTES:
                    chunks.append(chunk)
                data = b"".join(chunks)
                if len(data) > MAX_ENTRY_BYTES:
                    found.append(Finding(PromotionCode.PROMOTION_LOG_BAD_ENTRY, path, f"grew past {MAX_ENTRY_BYTES} bytes"))
                    unverified.append(number)
                    continue
            finally:
                os.close(fd)
            try:
                verified = verify_attestation_bytes(data, policy)
                entries.append(parse_entry(verified.statement, number=number, path=path, digest=sha256_of(data),
                                           signers=verified.signers))
            except VerificationError as e:
                cause = e.findings[0]
                detail = cause.detail if cause.code == PromotionCode.PROMOTION_LOG_BAD_ENTRY else f"it does not verify under the " \
                    f"release policy ({cause})"
                found.append(Finding(PromotionCode.PROMOTION_LOG_BAD_ENTRY, path, detail))
                unverified.append(number)
    except OSError as e:
        raise InputError(CommonCode.UNREADABLE, f"cannot read the promotion log: {e.strerror}", where) from e
    finally:
        os.close(dfd)
    return entries, found, unverified


@dataclass(frozen=True, slots=True)
class LogVerification:
    """A promotion log whose every entry verified and whose chain ends at the current pins."""

    pins_path: str
    log: str
    entries: tuple[LogEntry, ...]
    remembered: str | None = None   # the checkpoint file of the state directory that remembers the head (None: not remembered)

    @property
    def checkpoint(self) -> LogCheckpoint:
        """The head as ``SEQ:sha256:HEX``: what another consumer's first use can be given (``--log-checkpoint``)."""
        return LogCheckpoint(self.entries[-1].sequence, self.entries[-1].digest)

    def to_json(self) -> dict[str, object]:
        """The ``--json`` object of ``attest promote --verify-log``.

        Raises:
            Nothing.
        """
        last = self.entries[-1]
        return {"ok": True, "pins": self.pins_path, "log": self.log, "entries": len(self.entries), "pins_sha256": last.pins_sha256,
                "head": last.to_json(), "checkpoint": str(self.checkpoint), "remembered": self.remembered}


def verify_promotion_log(pins_path: str, policy: Policy) -> LogVerification:
    """Verify the whole log of ``pins_path`` under the release ``policy``; the only way to succeed is the last line.

    Raises:
        VerificationError: every finding at once: ``PROMOTION_LOG_BAD_ENTRY``,
            ``PROMOTION_LOG_UNEXPECTED_FILE``, ``PROMOTION_LOG_GAP``, ``PROMOTION_LOG_OUT_OF_ORDER``,
            ``PROMOTION_LOG_BROKEN_LINK``, ``PROMOTION_LOG_MISSING``, ``PROMOTION_LOG_PINS_MISMATCH``.
        InputError: ``UNREADABLE`` / ``TOO_LARGE`` (the pins file or the log directory).
    """
    pins = read_pins_bytes(pins_path)
    entries, found, unverified = read_log(pins_path, policy)
    found += check_log_chain(entries, unverified=unverified)
    if not found:
        found += check_log_pins(entries, pins, pins_path)
    if found:
        raise VerificationError(findings=found)
    return LogVerification(os.path.abspath(pins_path), os.path.abspath(log_path(pins_path)), tuple(entries))


def _utc(t: _dt.datetime) -> str:
    if t.tzinfo is None:
        raise InputError(CommonCode.INTERNAL, "the clock must return an aware datetime")
    return t.astimezone(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def entry_statement(*, sequence: int, previous: str | None, pins_name: str, pins_data: bytes, pins_before: str | None,
                    record: Mapping[str, object], time: _dt.datetime) -> StatementDoc:
    """A log entry's statement (pure): ``record`` holds toolchain, runtime, skill, policy, rebuilders, fixture, repinned, changes.

    Raises:
        InputError: ``INTERNAL`` (a naive ``time``, or ``record`` without exactly its fields),
            the statement checks' codes.
    """
    predicate = {**record, "sequence": sequence, "previous": previous, "pins": {"name": pins_name, "before": pins_before},
                 "time": _utc(time)}
    if set(predicate) != _PREDICATE_FIELDS:
        raise InputError(CommonCode.INTERNAL, f"a log entry's record has {sorted(record)}")
    return statement([subject(pins_name, hashlib.sha256(pins_data).hexdigest())], PROMOTION_PREDICATE, predicate)


def append_entry(pins_path: str, number: int, data: bytes) -> str:
    """Create entry ``number`` with ``data`` under a name that must be new; return its path.

    The bytes go to a private temporary file first (fsync), which is then linked to the entry
    name: ``link`` fails rather than replace an entry another promotion wrote meanwhile.

    Raises:
        VerificationError: ``PROMOTION_LOG_CONFLICT`` (the entry exists: the log changed during
            the promotion); ``PROMOTION_LOG_UNEXPECTED_FILE`` (the log path is a link or a file).
        InputError: ``BAD_OUTPUT_PATH`` (the log directory cannot be created or written).
    """
    where = log_path(pins_path)
    name = entry_name(number)
    try:
        os.mkdir(where, 0o755)
    except FileExistsError:
        pass
    except OSError as e:
        raise InputError(CommonCode.BAD_OUTPUT_PATH, f"cannot create the promotion log: {e.strerror}", where) from e
    try:
        dfd = os.open(where, O_DIR)
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.ENOTDIR):
            raise VerificationError(PromotionCode.PROMOTION_LOG_UNEXPECTED_FILE, "the promotion log is not a directory", where) from e
        raise InputError(CommonCode.BAD_OUTPUT_PATH, f"cannot open the promotion log: {e.strerror}", where) from e
    try:
        try:
            create_at(dfd, name, data, mode=0o444)
        except FileExistsError as e:
            raise VerificationError(PromotionCode.PROMOTION_LOG_CONFLICT, f"log entry {name} appeared during the promotion (another "
                                    "promotion?); nothing written", os.path.join(where, name)) from e
        except OSError as e:
            raise InputError(CommonCode.BAD_OUTPUT_PATH, f"cannot write the log entry: {e.strerror}", os.path.join(where, name)) from e
    finally:
        os.close(dfd)
    return os.path.join(where, name)


def remove_entry(path: str) -> None:
    """Take back an entry this promotion just created (the pins write failed after it).

    Raises:
        Nothing: a failure to remove it is left for ``--verify-log`` to report.
    """
    try:
        os.unlink(path)
    except OSError:
        pass


# -- the consumer's checkpoint: rollback and fork protection ------------------------------------------
#
# As a TUF client keeps the versions of the metadata it trusted and refuses a lower one (python-tuf's
# TrustedMetadataSet), every consumer of pins remembers, in its own state directory, the highest log
# entry it accepted: ``STATE/promotion-log/<sha256 of the absolute pins path>.json`` (0600, written
# atomically, only after the consumer's whole verification passed). A log that ends below it is a
# rollback; another entry at a sequence it knows is a fork.

CHECKPOINTS = "promotion-log"
CHECKPOINT_FORMAT = "https://attest.dev/promotion-log-checkpoint/v1"
MAX_CHECKPOINT_BYTES = 64 << 10
_CHECKPOINT = re.compile(r"([1-9][0-9]{0,5}):(sha256:[0-9a-f]{64})\Z")
_CHECKPOINT_FIELDS = {"format", "pins", "sequence", "digest"}
_LOCK = ".lock"
REMEMBERED = "this state directory"   # how a finding names the remembered checkpoint
GIVEN = "--log-checkpoint"           # ... and the one the operator gave


@dataclass(frozen=True, slots=True)
class LogCheckpoint:
    """An accepted log entry: its sequence and the ``sha256:`` digest of its file bytes (``SEQ:sha256:HEX``)."""

    sequence: int
    digest: str

    def __str__(self) -> str:
        return f"{self.sequence}:{self.digest}"


def parse_log_checkpoint(text: str) -> LogCheckpoint:
    """``SEQ:sha256:HEX`` (what ``attest promote --verify-log`` prints as ``checkpoint``), strictly.

    Raises:
        InputError: ``USAGE`` for anything else (a sequence that is not 1-999999 without leading
            zeros, a digest that is not ``sha256:<64 lowercase hex>``).
    """
    m = _CHECKPOINT.match(text) if isinstance(text, str) else None
    if m is None:
        raise InputError(CommonCode.USAGE, f"--log-checkpoint {str(text)[:100]!r} is not SEQ:sha256:<64 lowercase hex> (as "
                         "`attest promote --verify-log` prints it)")
    return LogCheckpoint(int(m.group(1)), m.group(2))


def decide_log_checkpoint(chain: Mapping[int, str], highest: int, known: Sequence[tuple[str, LogCheckpoint]], *,
                          where: str | None = None) -> list[Finding]:
    """Whether a log continues every checkpoint ``known`` to this consumer (pure).

    ``chain`` maps the number of each verified entry to its digest, ``highest`` is the highest
    entry number the log holds (verified or not; 0 for no log), ``known`` the (whose, checkpoint)
    pairs: the one this state directory remembers and the one the operator gave.

    Raises:
        Nothing: ``PROMOTION_LOG_ROLLBACK`` (the log ends below a known sequence: newer entries
        were removed, or an older log restored) and ``PROMOTION_LOG_FORK`` (the entry at a known
        sequence has another digest: replaced, or another chain) are returned. An entry at a
        known sequence that did not verify is reported by the log's own check, not here.
    """
    found: list[Finding] = []
    for whose, cp in known:
        if cp.sequence > highest:
            ends = f"ends at entry {highest}" if highest else "holds no entry"
            found.append(Finding(PromotionCode.PROMOTION_LOG_ROLLBACK, where, f"the log {ends}; {whose} accepted entry {cp.sequence} "
                                 f"({cp.digest}): newer entries were removed or an older log restored (never accepted)"))
            continue
        have = chain.get(cp.sequence)
        if have is not None and have != cp.digest:
            found.append(Finding(PromotionCode.PROMOTION_LOG_FORK, os.path.join(where, entry_name(cp.sequence)) if where else None,
                                 f"entry {cp.sequence} is {have}; {whose} accepted {cp.digest} at that sequence (the entry was "
                                 "replaced, or this is another chain)"))
    return found


def checkpoint_path(state_dir: str | os.PathLike[str], pins_path: str | os.PathLike[str]) -> str:
    """Where ``state_dir`` remembers the checkpoint of the pins at ``pins_path`` (keyed by its absolute, unresolved path).

    Raises:
        Nothing.
    """
    key = os.path.abspath(os.fspath(pins_path))
    return os.path.join(os.path.abspath(os.fspath(state_dir)), CHECKPOINTS, hashlib.sha256(key.encode()).hexdigest() + ".json")


def _invalid(detail: str, path: str) -> VerificationError:
    return VerificationError(PromotionCode.PROMOTION_LOG_CHECKPOINT_INVALID, f"{detail}; it is never overwritten: remove it "
                             "deliberately (and give --log-checkpoint) to accept this log again", path)


def _open_checkpoints(state_dir: str, *, create: bool) -> int | None:
    where = os.path.join(os.path.abspath(state_dir), CHECKPOINTS)
    if create:
        try:
            os.makedirs(os.path.abspath(state_dir), mode=0o700, exist_ok=True)
            os.mkdir(where, 0o700)
        except FileExistsError:
            pass
        except OSError as e:
            raise InputError(CommonCode.BAD_OUTPUT_PATH, f"cannot create the checkpoint directory: {e.strerror}", where) from e
    try:
        return os.open(where, O_DIR)
    except FileNotFoundError:
        if create:
            raise
        return None
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.ENOTDIR):
            raise _invalid("the checkpoint directory is not a directory (a link or a file)", where) from e
        raise InputError(CommonCode.UNREADABLE, f"cannot open the checkpoint directory: {e.strerror}", where) from e


def _read_checkpoint_at(dfd: int, path: str, pins_path: str) -> LogCheckpoint | None:
    name = os.path.basename(path)
    try:
        fd, st = open_regular_at(dfd, name)
    except FileNotFoundError:
        return None
    except UnsafeEntry as e:
        raise _invalid(f"the remembered checkpoint is not a plain regular file ({e})", path) from e
    except OSError as e:
        raise InputError(CommonCode.UNREADABLE, f"cannot read the remembered checkpoint: {e.strerror}", path) from e
    try:
        if st.st_mode & 0o7777 != 0o600 or st.st_uid != os.geteuid() or st.st_nlink != 1:
            raise _invalid(f"the remembered checkpoint has mode {st.st_mode & 0o7777:04o}, owner {st.st_uid}, {st.st_nlink} links "
                           "(it must be 0600, this user's, one name)", path)
        if st.st_size > MAX_CHECKPOINT_BYTES:
            raise _invalid(f"the remembered checkpoint is {st.st_size} bytes", path)
        data = os.read(fd, MAX_CHECKPOINT_BYTES + 1)
    finally:
        os.close(fd)
    try:
        doc = loads_strict(data, what="promotion-log checkpoint", max_bytes=MAX_CHECKPOINT_BYTES, max_depth=2)
    except AttestError as e:
        raise _invalid(f"the remembered checkpoint is not JSON ({e.findings[0].detail if e.findings else e})", path) from e
    cp = Shape(doc, "checkpoint", lambda d: _invalid(f"the remembered checkpoint: {d}", path)).object(_CHECKPOINT_FIELDS)
    cp.one_of("format", (CHECKPOINT_FORMAT,))
    pins = os.path.abspath(pins_path)
    cp.check(doc["pins"] == pins, f"{pins!r}, these pins (it is of {str(doc['pins'])[:200]!r})", "pins")
    sequence = cp.integer("sequence", minimum=1, maximum=MAX_LOG_ENTRIES)
    return LogCheckpoint(sequence, cp.string("digest", pattern=_DIGEST, expected="sha256:<64 hex>"))


def read_checkpoint(state_dir: str | os.PathLike[str], pins_path: str | os.PathLike[str]) -> LogCheckpoint | None:
    """The checkpoint ``state_dir`` remembers for ``pins_path`` (None: none yet), read strictly.

    Raises:
        VerificationError: ``PROMOTION_LOG_CHECKPOINT_INVALID`` (a link, a file of another mode,
            owner or link count, not the documented JSON object, another pins path).
        InputError: ``UNREADABLE``.
    """
    path = checkpoint_path(state_dir, pins_path)
    dfd = _open_checkpoints(os.fspath(state_dir), create=False)
    if dfd is None:
        return None
    try:
        return _read_checkpoint_at(dfd, path, os.fspath(pins_path))
    finally:
        os.close(dfd)


@dataclass(frozen=True, slots=True)
class AcceptedLog:
    """A promotion log a consumer verified (or found absent, with nothing known): what it may remember once it is done.

    ``chain`` holds (number, digest) of every entry; ``head`` is the checkpoint to remember (None:
    no log, nothing to remember).
    """

    pins_path: str
    log: str
    chain: tuple[tuple[int, str], ...]
    head: LogCheckpoint | None
    entries: tuple[LogEntry, ...] = field(default=(), repr=False)

    def extended(self, sequence: int, digest: str) -> AcceptedLog:
        """The same log with one more entry (the one a promotion just appended) as its head (pure)."""
        return AcceptedLog(self.pins_path, self.log, (*self.chain, (sequence, digest)), LogCheckpoint(sequence, digest), self.entries)

    def to_json(self) -> dict[str, object] | None:
        """``{"sequence", "digest", "checkpoint"}`` of the head, or None when there is no log.

        Raises:
            Nothing.
        """
        if self.head is None:
            return None
        return {"sequence": self.head.sequence, "digest": self.head.digest, "checkpoint": str(self.head)}


def check_promotion_log(pins_path: str | os.PathLike[str], pins_data: bytes | None, policy: Policy | None,
                        state_dir: str | os.PathLike[str], *, given: str | LogCheckpoint | None = None,
                        require_log: bool = False) -> AcceptedLog:
    """A consumer's check of the log beside the pins it read (``pins_data``, the bytes it uses): nothing is written.

    The log must verify under ``policy`` (every entry, the chain), end at exactly ``pins_data``,
    and continue both the checkpoint ``state_dir`` remembers for these pins and ``given``
    (:func:`decide_log_checkpoint`). Without a log: refused when a checkpoint is known or
    ``require_log``; otherwise there is nothing to check or remember (pins that never had a log).
    Call :func:`remember_log` once the consumer's whole verification passed.

    Raises:
        VerificationError: every finding at once: the codes of :func:`verify_promotion_log`,
            ``PROMOTION_LOG_ROLLBACK``, ``PROMOTION_LOG_FORK``; ``PROMOTION_LOG_CHECKPOINT_INVALID``.
        InputError: ``USAGE`` (a malformed ``given``; a log but no ``policy`` to verify it under),
            ``UNREADABLE`` / ``TOO_LARGE``.
    """
    name = os.fspath(pins_path)
    where = log_path(name)
    cp = parse_log_checkpoint(given) if isinstance(given, str) else given
    remembered = read_checkpoint(state_dir, name)
    known = [(f"{REMEMBERED} ({checkpoint_path(state_dir, name)})", remembered)] if remembered is not None else []
    if cp is not None:
        known.append((GIVEN, cp))
    present = os.path.lexists(where)
    if not present and not require_log:
        _raise_findings(decide_log_checkpoint({}, 0, known, where=where))
        return AcceptedLog(os.path.abspath(name), os.path.abspath(where), (), None)
    if policy is None:
        raise InputError(CommonCode.USAGE, "the pins have a promotion log: give the trust policy its entries verify under "
                         "(--policy) to check it", where)
    entries, found, unverified = read_log(name, policy)
    found += check_log_chain(entries, unverified=unverified)
    chain = {e.number: e.digest for e in entries}
    found += decide_log_checkpoint(chain, max([*chain, *unverified], default=0), known, where=where)
    if not found:
        found += check_log_pins(entries, pins_data, name)
    _raise_findings(found)
    head = LogCheckpoint(entries[-1].sequence, entries[-1].digest)
    return AcceptedLog(os.path.abspath(name), os.path.abspath(where), tuple(sorted(chain.items())), head, tuple(entries))


def _raise_findings(found: Sequence[Finding]) -> None:
    if found:
        raise VerificationError(findings=found)


def _write_checkpoint_at(dfd: int, name: str, data: bytes, path: str) -> None:
    try:
        replace_at(dfd, name, data, mode=0o600)
    except OSError as e:
        raise InputError(CommonCode.BAD_OUTPUT_PATH, f"cannot record the promotion-log checkpoint: {e.strerror}", path) from e


def remember_log(accepted: AcceptedLog, state_dir: str | os.PathLike[str]) -> LogCheckpoint | None:
    """Remember ``accepted.head`` in ``state_dir``: call only after the consumer's whole verification passed.

    Under an exclusive lock of the checkpoint directory the remembered checkpoint is read again
    and judged against ``accepted`` (another run of this state may have accepted more meanwhile:
    then this run's log is a rollback or a fork of it, and it is refused); a higher head replaces
    it atomically (temporary file 0600, fsync, rename, fsync of the directory). Returns what is
    remembered now (None: no log, nothing remembered).

    Raises:
        VerificationError: ``PROMOTION_LOG_ROLLBACK``, ``PROMOTION_LOG_FORK``,
            ``PROMOTION_LOG_CHECKPOINT_INVALID``.
        InputError: ``BAD_OUTPUT_PATH`` (the checkpoint cannot be written), ``UNREADABLE``.
    """
    if accepted.head is None:
        return None
    state = os.fspath(state_dir)
    path = checkpoint_path(state, accepted.pins_path)
    dfd = _open_checkpoints(state, create=True)
    assert dfd is not None
    try:
        try:
            lock = os.open(_LOCK, O_OWN_RDWR, 0o600, dir_fd=dfd)
        except OSError as e:
            if e.errno == errno.ELOOP:
                raise _invalid("the checkpoint directory's lock is a link", os.path.join(os.path.dirname(path), _LOCK)) from e
            raise InputError(CommonCode.BAD_OUTPUT_PATH, f"cannot lock the checkpoint directory: {e.strerror}", path) from e
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)
            remembered = _read_checkpoint_at(dfd, path, accepted.pins_path)
            if remembered is not None:
                _raise_findings(decide_log_checkpoint(dict(accepted.chain), accepted.head.sequence,
                                                      [(f"{REMEMBERED} ({path})", remembered)], where=accepted.log))
                if remembered.sequence >= accepted.head.sequence:
                    return remembered
            doc = {"format": CHECKPOINT_FORMAT, "pins": accepted.pins_path, "sequence": accepted.head.sequence,
                   "digest": accepted.head.digest}
            _write_checkpoint_at(dfd, os.path.basename(path), canonical_bytes(doc) + b"\n", path)
            return accepted.head
        finally:
            os.close(lock)  # releases the lock
    finally:
        os.close(dfd)


def verify_log_checked(pins_path: str, policy_path: str, state_dir: str | os.PathLike[str], *,
                       checkpoint: str | LogCheckpoint | None = None) -> LogVerification:
    """`attest promote --verify-log`: the whole log under the release policy at ``policy_path``, continuing what ``state_dir`` knows.

    :func:`verify_promotion_log`, then the checkpoint this state directory remembers for these
    pins and ``checkpoint`` (a first use's, instead of trusting the log on first use) must be
    continued; only then is the head remembered (:func:`remember_log`).

    Raises:
        VerificationError: the codes of :func:`verify_promotion_log`, ``PROMOTION_LOG_ROLLBACK``,
            ``PROMOTION_LOG_FORK``, ``PROMOTION_LOG_CHECKPOINT_INVALID``.
        InputError: the policy's codes, ``BAD_REBUILDERS``, ``USAGE`` (a malformed checkpoint),
            ``UNREADABLE`` / ``TOO_LARGE``, ``BAD_OUTPUT_PATH`` (the checkpoint cannot be written).
    """
    policy = load_policy(policy_path, extensions=RELEASE_POLICY_EXTENSIONS)
    rebuilders_of(policy)  # a malformed [rebuilders] table is reported here too
    accepted = check_promotion_log(pins_path, read_pins_bytes(pins_path), policy, state_dir, given=checkpoint, require_log=True)
    remember_log(accepted, state_dir)
    return LogVerification(os.path.abspath(pins_path), accepted.log, accepted.entries, checkpoint_path(state_dir, pins_path))
