"""The promotion log: the pure chain checks (table-driven), then real logs of signed entries in tmp_path, tampered with.

End-to-end promotions that append to the log are in tests/review/test_release_promotion.py.
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from attest.attestation import generate_key, load_policy, load_signer, sign_statement
from attest.builder import LogEntry, check_log_chain, check_log_pins, log_path, verify_promotion_log
from attest.builder._promolog import append_entry, entry_statement, sha256_of
from attest.errors import VerificationError

T0 = dt.datetime(2026, 9, 2, 12, 0, 0, tzinfo=dt.UTC)


def entry(number: int, *, sequence: int | None = None, previous: str | None = "auto", pins: bytes = b"pins") -> LogEntry:
    prev = (None if number == 1 else f"sha256:{number - 1:064d}") if previous == "auto" else previous
    return LogEntry(number, f"/log/{number:06d}.json", f"sha256:{number:064d}", sequence or number, prev, sha256_of(pins),
                    None, "a" * 40, "2026-09-02T12:00:00Z", ("key:sha256:" + "e" * 64,), {})


CHAINS: list[tuple[str, list[LogEntry], list[tuple[str, str | None]]]] = [
    # (id, the verified entries by number, the (code, path) findings)
    ("empty", [], []),
    ("one", [entry(1)], []),
    ("three", [entry(1), entry(2), entry(3)], []),
    ("middle-removed", [entry(1), entry(3)], [("PROMOTION_LOG_GAP", None)]),
    ("first-removed", [entry(2), entry(3)], [("PROMOTION_LOG_GAP", None)]),
    ("first-names-a-predecessor", [entry(1, previous="sha256:" + "9" * 64)], [("PROMOTION_LOG_BROKEN_LINK", "/log/000001.json")]),
    ("link-replaced", [entry(1), entry(2, previous="sha256:" + "9" * 64), entry(3)], [("PROMOTION_LOG_BROKEN_LINK", "/log/000002.json")]),
    ("swapped", [entry(1), entry(2, sequence=3, previous="sha256:" + f"{2:064d}"), entry(3, sequence=2, previous="sha256:" + f"{1:064d}")],
     [("PROMOTION_LOG_OUT_OF_ORDER", "/log/000002.json"), ("PROMOTION_LOG_BROKEN_LINK", "/log/000002.json"),
      ("PROMOTION_LOG_OUT_OF_ORDER", "/log/000003.json"), ("PROMOTION_LOG_BROKEN_LINK", "/log/000003.json")]),
]


@pytest.mark.parametrize(("entries", "findings"), [c[1:] for c in CHAINS], ids=[c[0] for c in CHAINS])
def test_check_log_chain(entries: list[LogEntry], findings: list[tuple[str, str | None]]) -> None:
    assert [(f.code, f.path) for f in check_log_chain(entries)] == findings


PINS_CASES: list[tuple[str, list[LogEntry], bytes | None, list[str]]] = [
    ("matches", [entry(1), entry(2)], b"pins", []),
    ("an-older-entry-wrote-them", [entry(1), entry(2, pins=b"new")], b"pins", ["PROMOTION_LOG_PINS_MISMATCH"]),
    ("no-entry", [], b"pins", ["PROMOTION_LOG_MISSING"]),
    ("pins-absent", [entry(1)], None, ["PROMOTION_LOG_PINS_MISMATCH"]),
    ("pins-edited", [entry(1)], b"edited", ["PROMOTION_LOG_PINS_MISMATCH"]),
]


@pytest.mark.parametrize(("entries", "pins", "codes"), [c[1:] for c in PINS_CASES], ids=[c[0] for c in PINS_CASES])
def test_check_log_pins(entries: list[LogEntry], pins: bytes | None, codes: list[str]) -> None:
    assert [f.code for f in check_log_pins(entries, pins, "/etc/pins.toml")] == codes


# -- real logs ------------------------------------------------------------------------------------------

RECORD = {"toolchain": {"repository": "https://example.org/t.git", "revision": "a" * 40}, "runtime": {}, "skill": {},
          "policy": "sha256:" + "0" * 64, "rebuilders": {}, "fixture": None, "repinned": [], "changes": 1}


class Log:
    def __init__(self, root: Path) -> None:
        keys = root / "keys"
        keys.mkdir()
        generate_key("ed25519", keys / "release.pem")
        generate_key("ed25519", keys / "evil.pem")
        self.release, self.evil = load_signer(str(keys / "release.pem")), load_signer(str(keys / "evil.pem"))
        (keys / "release.toml").write_text('threshold = 1\n[[signers]]\nkind = "key"\npublic_key = "release.pub.pem"\n')
        self.policy = load_policy(keys / "release.toml")
        self.pins = root / "deploy" / "pins.toml"
        self.pins.parent.mkdir()
        self.entries: list[Path] = []

    @property
    def dir(self) -> Path:
        return Path(log_path(self.pins))

    def promote(self, pins: bytes, *, signer: object = None) -> Path:
        """Append an entry as `attest promote` does, then write the pins."""
        before = sha256_of(self.pins.read_bytes()) if self.pins.exists() else None
        previous = sha256_of(self.entries[-1].read_bytes()) if self.entries else None
        statement = entry_statement(sequence=len(self.entries) + 1, previous=previous, pins_name="pins.toml", pins_data=pins,
                                    pins_before=before, record=RECORD, time=T0)
        path = Path(append_entry(str(self.pins), len(self.entries) + 1, sign_statement(statement, signer or self.release)))
        self.pins.write_bytes(pins)
        self.entries.append(path)
        return path

    def verify(self) -> list[tuple[str, str | None]]:
        try:
            verify_promotion_log(str(self.pins), self.policy)
        except VerificationError as e:
            return [(f.code, f.path and os.path.basename(f.path)) for f in e.findings]
        return []


@pytest.fixture
def log(tmp_path: Path) -> Log:
    it = Log(tmp_path)
    for i in range(3):
        it.promote(f"[toolchain]\nrevision = \"{i}\"\n".encode())
    return it


def _swap(log: Log) -> None:
    a, b = log.entries[1], log.entries[2]
    tmp = a.with_suffix(".swap")
    os.rename(a, tmp)
    os.rename(b, a)
    os.rename(tmp, b)


def _rewrite_middle(log: Log) -> None:
    """Entry 2 replaced by a validly signed entry with other content: entry 3 no longer links to it."""
    statement = entry_statement(sequence=2, previous=sha256_of(log.entries[0].read_bytes()), pins_name="pins.toml",
                                pins_data=b"forged", pins_before=None, record=RECORD, time=T0)
    os.chmod(log.entries[1], 0o644)
    log.entries[1].write_bytes(sign_statement(statement, log.release))


TAMPERING: list[tuple[str, Callable[[Log], object], list[tuple[str, str | None]]]] = [
    ("untouched", lambda log: None, []),
    ("middle-entry-removed", lambda log: log.entries[1].unlink(), [("PROMOTION_LOG_GAP", None)]),
    ("last-entry-removed", lambda log: log.entries[2].unlink(), [("PROMOTION_LOG_PINS_MISMATCH", "pins.toml")]),
    ("two-entries-swapped", _swap, [("PROMOTION_LOG_OUT_OF_ORDER", "000002.json"), ("PROMOTION_LOG_BROKEN_LINK", "000002.json"),
                                    ("PROMOTION_LOG_OUT_OF_ORDER", "000003.json"), ("PROMOTION_LOG_BROKEN_LINK", "000003.json")]),
    ("middle-entry-rewritten", _rewrite_middle, [("PROMOTION_LOG_BROKEN_LINK", "000003.json")]),
    ("pins-edited-by-hand", lambda log: log.pins.write_bytes(b"# edited\n"), [("PROMOTION_LOG_PINS_MISMATCH", "pins.toml")]),
    ("pins-removed", lambda log: log.pins.unlink(), [("PROMOTION_LOG_PINS_MISMATCH", "pins.toml")]),
    ("log-removed", lambda log: shutil.rmtree(log.dir), [("PROMOTION_LOG_MISSING", "pins.toml.promotions")]),
    ("an-extra-file", lambda log: (log.dir / "notes.txt").write_bytes(b"x"), [("PROMOTION_LOG_UNEXPECTED_FILE", "notes.txt")]),
    ("entry-zero", lambda log: (log.dir / "000000.json").write_bytes(b"x"), [("PROMOTION_LOG_UNEXPECTED_FILE", "000000.json")]),
    ("an-entry-is-a-symlink", lambda log: (log.entries[2].unlink(), log.entries[2].symlink_to(log.entries[1])),
     [("PROMOTION_LOG_UNEXPECTED_FILE", "000003.json")]),
    ("an-entry-is-garbage", lambda log: (os.chmod(log.entries[1], 0o644), log.entries[1].write_bytes(b"{}")),
     [("PROMOTION_LOG_BAD_ENTRY", "000002.json")]),
]


@pytest.mark.parametrize(("tamper", "findings"), [t[1:] for t in TAMPERING], ids=[t[0] for t in TAMPERING])
def test_verify_promotion_log(log: Log, tamper: Callable[[Log], object], findings: list[tuple[str, str | None]]) -> None:
    tamper(log)
    assert log.verify() == findings


def test_an_entry_by_an_untrusted_key_does_not_verify(log: Log) -> None:
    log.promote(b"evil pins", signer=log.evil)
    assert log.verify() == [("PROMOTION_LOG_BAD_ENTRY", "000004.json")]


def test_the_log_directory_as_a_symlink_is_refused(log: Log, tmp_path: Path) -> None:
    real = tmp_path / "elsewhere"
    log.dir.rename(real)
    log.dir.symlink_to(real)
    assert log.verify() == [("PROMOTION_LOG_UNEXPECTED_FILE", "pins.toml.promotions")]
    with pytest.raises(VerificationError) as caught:
        append_entry(str(log.pins), 4, b"x")
    assert caught.value.code == "PROMOTION_LOG_UNEXPECTED_FILE"


def test_an_existing_entry_is_never_replaced(log: Log) -> None:
    before = log.entries[2].read_bytes()
    with pytest.raises(VerificationError) as caught:
        append_entry(str(log.pins), 3, b"another promotion")
    assert caught.value.code == "PROMOTION_LOG_CONFLICT"
    assert log.entries[2].read_bytes() == before and sorted(p.name for p in log.dir.iterdir()) == ["000001.json", "000002.json",
                                                                                                    "000003.json"]


def test_a_verified_log_reports_its_head(log: Log) -> None:
    checked = verify_promotion_log(str(log.pins), log.policy)
    doc = checked.to_json()
    assert doc["entries"] == 3 and doc["head"]["sequence"] == 3 and doc["pins_sha256"] == sha256_of(log.pins.read_bytes())
    assert [e.previous for e in checked.entries] == [None, *(sha256_of(p.read_bytes()) for p in log.entries[:2])]
    assert all(os.stat(p).st_nlink == 1 and os.stat(p).st_mode & 0o777 == 0o444 for p in log.entries)


def test_an_entry_that_did_not_verify_is_no_gap() -> None:
    """It is reported on its own (PROMOTION_LOG_BAD_ENTRY); the chain around it is not judged twice."""
    assert check_log_chain([entry(1), entry(3, previous="sha256:" + "9" * 64)], unverified=[2]) == []
    assert [f.code for f in check_log_chain([entry(1), entry(4)], unverified=[2])] == ["PROMOTION_LOG_GAP"]
