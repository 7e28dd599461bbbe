"""Rollback and fork of the promotion log (TUF's rollback attack): every consumer remembers the highest entry it accepted.

The pure decision first (table-driven), then real logs of signed entries in tmp_path, attacked and
checked by `attest promote --verify-log` through the CLI with a state directory of its own, then a
real `attest promote` (build layer) over a rolled-back and a forked log.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import stat
from pathlib import Path

import pytest
from test_promotion_log import RECORD, T0, Log

from attest.attestation import generate_key, load_policy, load_signer, sign_statement
from attest.builder import Sandbox, fetch, load_lock, load_recipe, verify_promotion_log
from attest.builder._promolog import (
    LogCheckpoint,
    checkpoint_path,
    decide_log_checkpoint,
    entry_statement,
    log_path,
    parse_log_checkpoint,
    read_checkpoint,
    sha256_of,
)
from attest.builder._promote import promote
from attest.errors import InputError, VerificationError

D = {n: f"sha256:{n:064d}" for n in range(1, 6)}
OTHER = "sha256:" + "9" * 64


def cp(sequence: int, digest: str | None = None) -> LogCheckpoint:
    return LogCheckpoint(sequence, digest or D[sequence])


DECISIONS: list[tuple[str, dict[int, str], int, list[tuple[str, LogCheckpoint]], list[str]]] = [
    # (id, the verified chain, the highest entry number, what the consumer knows, the codes)
    ("first-use-nothing-known", {1: D[1], 2: D[2]}, 2, [], []),
    ("the-log-ends-at-the-checkpoint", {1: D[1], 2: D[2]}, 2, [("state", cp(2))], []),
    ("the-log-grew-past-it", {1: D[1], 2: D[2], 3: D[3]}, 3, [("state", cp(2))], []),
    ("newest-entry-removed", {1: D[1], 2: D[2]}, 2, [("state", cp(3))], ["PROMOTION_LOG_ROLLBACK"]),
    ("the-log-removed", {}, 0, [("state", cp(1))], ["PROMOTION_LOG_ROLLBACK"]),
    ("another-entry-at-the-known-sequence", {1: D[1], 2: OTHER}, 2, [("state", cp(2))], ["PROMOTION_LOG_FORK"]),
    ("a-fork-below-that-grew-past-it", {1: D[1], 2: OTHER, 3: D[3], 4: D[4]}, 4, [("state", cp(2))], ["PROMOTION_LOG_FORK"]),
    ("an-unverified-entry-at-the-sequence-is-not-judged-here", {1: D[1], 3: D[3]}, 3, [("state", cp(2))], []),
    ("given-checkpoint-above-the-log", {1: D[1]}, 1, [("given", cp(2))], ["PROMOTION_LOG_ROLLBACK"]),
    ("given-checkpoint-of-another-chain", {1: D[1]}, 1, [("given", cp(1, OTHER))], ["PROMOTION_LOG_FORK"]),
    ("both-known-both-judged", {1: D[1], 2: D[2]}, 2, [("state", cp(3)), ("given", cp(1, OTHER))],
     ["PROMOTION_LOG_ROLLBACK", "PROMOTION_LOG_FORK"]),
]


@pytest.mark.parametrize(("chain", "highest", "known", "codes"), [d[1:] for d in DECISIONS], ids=[d[0] for d in DECISIONS])
def test_decide_log_checkpoint(chain: dict[int, str], highest: int, known: list[tuple[str, LogCheckpoint]], codes: list[str]) -> None:
    assert [f.code for f in decide_log_checkpoint(chain, highest, known, where="/log")] == codes


@pytest.mark.parametrize("text", ["", "3", "0:" + D[1], "01:" + D[1], "3:" + D[1].upper(), "3:sha256:abc", "3:" + D[1] + "\n",
                                  "-1:" + D[1], "1234567:" + D[1]])
def test_a_malformed_checkpoint_is_usage(text: str) -> None:
    with pytest.raises(InputError) as ei:
        parse_log_checkpoint(text)
    assert ei.value.code == "USAGE"


def test_a_checkpoint_round_trips() -> None:
    assert parse_log_checkpoint(f"12:{D[3]}") == LogCheckpoint(12, D[3]) and str(LogCheckpoint(12, D[3])) == f"12:{D[3]}"


# -- `attest promote --verify-log` over real logs ---------------------------------------------------------------------


def _cli(args: list[str]) -> tuple[int, str, str]:
    from attest.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(args)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def log(tmp_path: Path) -> Log:
    it = Log(tmp_path)
    for i in range(3):
        it.promote(f"[toolchain]\nrevision = \"{i}\"\n".encode())
    return it


def verify_log(log: Log, state: Path, *extra: str) -> tuple[int, dict]:
    code, out, _ = _cli(["promote", "--verify-log", "--pins", str(log.pins), "--policy", str(log.pins.parent.parent / "keys" /
                           "release.toml"), "--state-dir", str(state), "--json", *extra])
    return code, json.loads(out)


def _codes(doc: dict) -> list[str]:
    return [e["code"] for e in doc.get("errors", [])]


def _roll_back(log: Log) -> None:
    """The attack: the newest entry removed and the pins it replaced restored. The rest is a valid chain."""
    pins_before = f"[toolchain]\nrevision = \"{len(log.entries) - 2}\"\n".encode()
    log.entries[-1].unlink()
    log.entries.pop()
    log.pins.write_bytes(pins_before)


def _fork(log: Log) -> None:
    """The attack: the newest entry replaced by another validly signed entry at its sequence, with its own pins."""
    last = log.entries.pop()
    last.unlink()
    log.promote(b"[toolchain]\nrevision = \"forked\"\n")


def test_verify_log_remembers_the_head_then_refuses_a_rollback(log: Log, tmp_path: Path) -> None:
    state = tmp_path / "state"
    code, doc = verify_log(log, state)
    assert code == 0 and doc["checkpoint"] == f"3:{sha256_of(log.entries[2].read_bytes())}", doc
    remembered = Path(doc["remembered"])
    assert remembered == Path(checkpoint_path(state, log.pins))
    assert stat.S_IMODE(os.lstat(remembered).st_mode) == 0o600 and stat.S_IMODE(os.lstat(remembered.parent).st_mode) == 0o700
    assert json.loads(remembered.read_bytes()) == {"format": "https://attest.dev/promotion-log-checkpoint/v1",
                                                   "pins": str(log.pins), "sequence": 3, "digest": sha256_of(log.entries[2].read_bytes())}
    assert sorted(p.name for p in remembered.parent.iterdir()) == [".lock", remembered.name]  # no temporary file left
    _roll_back(log)
    assert log.verify() == []  # the log alone cannot tell: a valid chain ending at its pins
    code, doc = verify_log(log, state)
    assert code == 1 and _codes(doc) == ["PROMOTION_LOG_ROLLBACK"], doc
    assert read_checkpoint(state, log.pins) == LogCheckpoint(3, json.loads(remembered.read_bytes())["digest"])  # not lowered


def test_verify_log_refuses_another_entry_at_a_sequence_it_accepted(log: Log, tmp_path: Path) -> None:
    state = tmp_path / "state"
    assert verify_log(log, state)[0] == 0
    _fork(log)
    assert log.verify() == []
    code, doc = verify_log(log, state)
    assert code == 1 and _codes(doc) == ["PROMOTION_LOG_FORK"] and doc["errors"][0]["path"].endswith("000003.json"), doc


def test_the_log_removed_after_it_was_accepted_is_a_rollback(log: Log, tmp_path: Path) -> None:
    state = tmp_path / "state"
    assert verify_log(log, state)[0] == 0
    for p in log.entries:
        p.unlink()
    log.dir.rmdir()
    code, doc = verify_log(log, state)
    assert code == 1 and _codes(doc) == ["PROMOTION_LOG_ROLLBACK"], doc


def test_the_log_continued_is_accepted_and_remembered_higher(log: Log, tmp_path: Path) -> None:
    state = tmp_path / "state"
    assert verify_log(log, state)[0] == 0
    log.promote(b"[toolchain]\nrevision = \"4\"\n")
    code, doc = verify_log(log, state)
    assert code == 0 and doc["head"]["sequence"] == 4 and read_checkpoint(state, log.pins) == parse_log_checkpoint(doc["checkpoint"])


def test_a_first_use_given_a_checkpoint_refuses_a_rolled_back_log(log: Log, tmp_path: Path) -> None:
    """A consumer whose state never saw the log: the operator's checkpoint instead of trust on first use."""
    head = f"3:{sha256_of(log.entries[2].read_bytes())}"
    _roll_back(log)
    code, doc = verify_log(log, tmp_path / "fresh", "--log-checkpoint", head)
    assert code == 1 and _codes(doc) == ["PROMOTION_LOG_ROLLBACK"] and not Path(checkpoint_path(tmp_path / "fresh", log.pins)).exists()
    code, doc = verify_log(log, tmp_path / "fresh", "--log-checkpoint", f"2:{OTHER}")
    assert code == 1 and _codes(doc) == ["PROMOTION_LOG_FORK"]
    code, doc = verify_log(log, tmp_path / "fresh", "--log-checkpoint", f"2:{sha256_of(log.entries[1].read_bytes())}")
    assert code == 0 and read_checkpoint(tmp_path / "fresh", log.pins) == LogCheckpoint(2, sha256_of(log.entries[1].read_bytes()))
    code, doc = verify_log(log, tmp_path / "fresh", "--log-checkpoint", "two")
    assert code == 2 and _codes(doc) == ["USAGE"]


def test_the_checkpoint_option_goes_with_verify_log(log: Log, tmp_path: Path) -> None:
    code, _, err = _cli(["promote", "--pins", str(log.pins), "--policy", "p.toml", "--toolchain-rev", "a" * 40, "--key", "k.pem",
                         "--log-checkpoint", f"1:{D[1]}"])
    assert code == 2 and "USAGE" in err


def test_the_text_output_prints_the_checkpoint(log: Log, tmp_path: Path) -> None:
    code, out, _ = _cli(["promote", "--verify-log", "--pins", str(log.pins), "--policy", str(tmp_path / "keys" / "release.toml"),
                         "--state-dir", str(tmp_path / "state")])
    assert code == 0 and f"  checkpoint 3:{sha256_of(log.entries[2].read_bytes())} (remembered in " in out


INVALID: list[tuple[str, object]] = [
    ("garbage", lambda p: p.write_bytes(b"not json")),
    ("readable-by-others", lambda p: os.chmod(p, 0o644)),
    ("a-symlink", lambda p: (p.rename(p.with_suffix(".real")), p.symlink_to(p.with_suffix(".real")))),
    ("another-pins-path", lambda p: p.write_bytes(p.read_bytes().replace(b'"pins":"', b'"pins":"/elsewhere'))),
    ("a-hard-link", lambda p: os.link(p, p.with_suffix(".alias"))),
    ("extra-field", lambda p: p.write_bytes(p.read_bytes().replace(b'{"digest"', b'{"a":1,"digest"'))),
]


@pytest.mark.parametrize("tamper", [t[1] for t in INVALID], ids=[t[0] for t in INVALID])
def test_a_tampered_checkpoint_fails_closed_and_is_not_overwritten(log: Log, tmp_path: Path, tamper: object) -> None:
    state = tmp_path / "state"
    assert verify_log(log, state)[0] == 0
    path = Path(checkpoint_path(state, log.pins))
    tamper(path)  # type: ignore[operator]
    before = os.lstat(path)
    code, doc = verify_log(log, state)
    assert code == 1 and _codes(doc) == ["PROMOTION_LOG_CHECKPOINT_INVALID"], doc
    assert os.lstat(path).st_ino == before.st_ino


def test_a_checkpoint_directory_that_is_a_link_fails_closed(log: Log, tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    (tmp_path / "elsewhere").mkdir()
    (state / "promotion-log").symlink_to(tmp_path / "elsewhere")
    code, doc = verify_log(log, state)
    assert code == 1 and _codes(doc) == ["PROMOTION_LOG_CHECKPOINT_INVALID"] and not list((tmp_path / "elsewhere").iterdir())


def test_the_checkpoint_is_keyed_by_the_pins_path(log: Log, tmp_path: Path) -> None:
    """Each pins path has its own checkpoint in one state directory: other pins are another log."""
    state = tmp_path / "state"
    (tmp_path / "other").mkdir()
    other = Log(tmp_path / "other")
    other.promote(b"[toolchain]\nrevision = \"x\"\n")
    assert verify_log(log, state)[0] == 0 and verify_log(other, state)[0] == 0
    assert read_checkpoint(state, log.pins) == LogCheckpoint(3, sha256_of(log.entries[2].read_bytes()))
    assert read_checkpoint(state, other.pins) == LogCheckpoint(1, sha256_of(other.entries[0].read_bytes()))


# -- `attest promote` (the build layer's promote) over a rolled-back and a forked log --------------------------------------------


def test_promote_refuses_to_fork_a_rolled_back_log(project, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from support.build import make_toolchain_repo

    recipe = load_recipe(project.recipe)
    fetch(load_lock(recipe.lock_path), project.cache, lock_path=recipe.lock_path)
    key, policy = tmp_path / "keys" / "release.pem", tmp_path / "keys" / "policy.toml"
    key.parent.mkdir()
    generate_key("ed25519", key)
    policy.write_text('threshold = 1\n[[signers]]\nkind = "key"\npublic_key = "release.pub.pem"\n')
    pins = tmp_path / "deploy" / "pins.toml"
    pins.parent.mkdir()
    sandbox = Sandbox.establish(allow_unisolated_network=False)

    def run(rev: str) -> object:
        return promote(toolchain_rev=rev, pins_path=str(pins), signer=load_signer(str(key)), policy_path=str(policy),
                       runtime_recipe=recipe, skill_recipe=load_recipe(project.skill_recipe),  # type: ignore[arg-type]
                       state=str(project.store), cache=str(project.cache), sandbox=sandbox, unsafe_without_rebuilders=True)

    run(project.sha)
    entries = Path(log_path(pins))
    assert read_checkpoint(project.store, pins) == LogCheckpoint(1, sha256_of((entries / "000001.json").read_bytes()))
    pins_1 = pins.read_bytes()
    sha2 = make_toolchain_repo(project.repo, message=b"release 2")
    run(sha2)
    entry_2 = (entries / "000002.json").read_bytes()
    assert read_checkpoint(project.store, pins) == LogCheckpoint(2, sha256_of(entry_2))
    # The attack: entry 2 removed, release 1's pins restored. The log alone verifies.
    (entries / "000002.json").unlink()
    pins.write_bytes(pins_1)
    verify_promotion_log(str(pins), load_policy(policy))
    with pytest.raises(VerificationError) as ei:
        run(sha2)  # today this appends another entry 2: a fork of the chain
    assert [f.code for f in ei.value.findings] == ["PROMOTION_LOG_ROLLBACK"]
    assert pins.read_bytes() == pins_1 and sorted(p.name for p in entries.iterdir()) == ["000001.json"]
    # The fork, directly: another validly signed entry 2 at the sequence this state accepted.
    statement = entry_statement(sequence=2, previous=sha256_of((entries / "000001.json").read_bytes()), pins_name="pins.toml",
                                pins_data=pins_1, pins_before=sha256_of(pins_1), record=RECORD, time=T0)
    (entries / "000002.json").write_bytes(sign_statement(statement, load_signer(str(key))))
    verify_promotion_log(str(pins), load_policy(policy))
    with pytest.raises(VerificationError) as ei:
        run(sha2)
    assert [f.code for f in ei.value.findings] == ["PROMOTION_LOG_FORK"]
    assert read_checkpoint(project.store, pins) == LogCheckpoint(2, sha256_of(entry_2))
