"""`attest bootstrap` and `attest install skill` refuse a rolled-back or forked promotion log (TUF's rollback attack).

Each consumer remembers, in its own state directory, the highest log entry it accepted, and only
after its whole verification passed. The deployment is test_bootstrap's (a real promotion, a real
installation, real git repositories and keys); each test copies its pins and log to a path of its
own (a checkpoint is keyed by the pins path) and promotes "release 2" there by hand: an entry signed
by the release key whose pins differ from release 1's by an unmanaged table.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import test_bootstrap
from test_bootstrap import T0, Deployment, _cli, codes, fails, make_consumer, run

from attest.attestation import load_policy, load_signer, sign_statement
from attest.builder import install_skill
from attest.builder._promolog import (
    LogCheckpoint,
    append_entry,
    checkpoint_path,
    entry_statement,
    log_path,
    read_checkpoint,
    sha256_of,
)
from attest.errors import AttestError

RECORD = {"toolchain": {"repository": "https://example.org/toolchain.git", "revision": "a" * 40}, "runtime": {}, "skill": {},
          "policy": "sha256:" + "0" * 64, "rebuilders": {}, "fixture": None, "repinned": [], "changes": 0}


@dataclass
class Copy:
    pins: Path
    release_1: bytes
    entry_1: str   # sha256:<digest> of entry 1's bytes

    @property
    def log(self) -> Path:
        return Path(log_path(self.pins))

    def entry(self, n: int) -> Path:
        return self.log / f"{n:06d}.json"

    def checkpoint(self, n: int) -> LogCheckpoint:
        return LogCheckpoint(n, sha256_of(self.entry(n).read_bytes()))


def copy_deployment(dep: Deployment, where: Path) -> Copy:
    where.mkdir(parents=True)
    pins = where / "pins.toml"
    shutil.copy(dep.pins, pins)
    shutil.copytree(log_path(dep.pins), log_path(pins))
    return Copy(pins, pins.read_bytes(), sha256_of((Path(log_path(pins)) / "000001.json").read_bytes()))


def release_2(dep: Deployment, c: Copy, *, time: Any = T0) -> bytes:
    """Entry 2, signed by the release key, and the pins it wrote (release 1's with one more table)."""
    previous = sha256_of(c.entry(1).read_bytes())
    pins = c.release_1 + b"\n[deployment]\nrelease = 2\n"
    statement = entry_statement(sequence=2, previous=previous, pins_name="pins.toml", pins_data=pins, pins_before=sha256_of(c.release_1),
                                record=RECORD, time=time)
    append_entry(str(c.pins), 2, sign_statement(statement, load_signer(str(dep.release_key))))
    c.pins.write_bytes(pins)
    return pins


def roll_back(c: Copy) -> None:
    """The attack: entry 2 removed, release 1's pins restored. What is left is a valid chain ending at its pins."""
    c.entry(2).unlink()
    c.pins.write_bytes(c.release_1)


def fork(dep: Deployment, c: Copy) -> None:
    """The attack: entry 2 replaced by another entry 2 the release key signed (another chain at a known sequence)."""
    c.entry(2).unlink()
    c.pins.write_bytes(c.release_1)
    import datetime as dt

    release_2(dep, c, time=T0 + dt.timedelta(days=1))


# -- attest bootstrap ------------------------------------------------------------------------------------------------


def test_bootstrap_refuses_the_log_rolled_back_below_what_it_accepted(dep: Deployment, skill: tuple[Path, Path], tmp_path: Path) -> None:
    c = copy_deployment(dep, tmp_path / "deploy")
    release_2(dep, c)
    consumer = make_consumer(tmp_path / "consumer", dep.sha)
    # A bootstrap that fails (step 4 here) remembers nothing: only a whole verification is accepted.
    refused = make_consumer(tmp_path / "refused", dep.sha, config=test_bootstrap.config_text(dep.sha, skills="[]"))
    fails(4, lambda: run(dep, skill, refused, tmp_path, pins=c.pins, out=tmp_path / "refused.json"))
    assert read_checkpoint(dep.state, c.pins) is None
    done = run(dep, skill, consumer, tmp_path, pins=c.pins)
    assert done.promotion_log.head == c.checkpoint(2) and read_checkpoint(dep.state, c.pins) == c.checkpoint(2)
    roll_back(c)
    os.unlink(done.handoff)
    err = fails(1, lambda: run(dep, skill, consumer, tmp_path, pins=c.pins))
    assert codes(err) == {"PROMOTION_LOG_ROLLBACK"} and err.exit_code == 1
    assert not (tmp_path / "handoff.json").exists()


def test_bootstrap_refuses_another_entry_at_a_sequence_it_accepted(dep: Deployment, skill: tuple[Path, Path], tmp_path: Path) -> None:
    c = copy_deployment(dep, tmp_path / "deploy")
    release_2(dep, c)
    consumer = make_consumer(tmp_path / "consumer", dep.sha)
    run(dep, skill, consumer, tmp_path, pins=c.pins)
    accepted = c.checkpoint(2)
    fork(dep, c)
    err = fails(1, lambda: run(dep, skill, consumer, tmp_path, pins=c.pins, out=tmp_path / "h2.json"))
    assert codes(err) == {"PROMOTION_LOG_FORK"} and read_checkpoint(dep.state, c.pins) == accepted


def test_bootstrap_refuses_pins_rolled_back_beside_an_intact_log(dep: Deployment, skill: tuple[Path, Path], tmp_path: Path) -> None:
    """Release 1's pins restored, the log left alone: the pins are not its head."""
    c = copy_deployment(dep, tmp_path / "deploy")
    release_2(dep, c)
    c.pins.write_bytes(c.release_1)
    consumer = make_consumer(tmp_path / "consumer", dep.sha)
    err = fails(1, lambda: run(dep, skill, consumer, tmp_path, pins=c.pins))
    assert codes(err) == {"PROMOTION_LOG_PINS_MISMATCH"}


def test_bootstrap_refuses_the_log_removed_after_it_was_accepted(dep: Deployment, skill: tuple[Path, Path], tmp_path: Path) -> None:
    c = copy_deployment(dep, tmp_path / "deploy")
    consumer = make_consumer(tmp_path / "consumer", dep.sha)
    run(dep, skill, consumer, tmp_path, pins=c.pins)
    shutil.rmtree(c.log)
    err = fails(1, lambda: run(dep, skill, consumer, tmp_path, pins=c.pins, out=tmp_path / "h2.json"))
    assert codes(err) == {"PROMOTION_LOG_ROLLBACK"}


def test_bootstrap_first_use_with_a_checkpoint_instead_of_trust_on_first_use(dep: Deployment, skill: tuple[Path, Path],
                                                                             tmp_path: Path) -> None:
    """A consumer whose state never saw these pins, given release 2's checkpoint, refuses release 1's log and pins."""
    c = copy_deployment(dep, tmp_path / "deploy")
    release_2(dep, c)
    head = str(c.checkpoint(2))
    roll_back(c)
    consumer = make_consumer(tmp_path / "consumer", dep.sha)
    err = fails(1, lambda: run(dep, skill, consumer, tmp_path, pins=c.pins, log_checkpoint=head))
    assert codes(err) == {"PROMOTION_LOG_ROLLBACK"} and read_checkpoint(dep.state, c.pins) is None
    err = fails(1, lambda: run(dep, skill, consumer, tmp_path, pins=c.pins, log_checkpoint=f"1:sha256:{'9' * 64}"))
    assert codes(err) == {"PROMOTION_LOG_FORK"}
    assert codes(fails(1, lambda: run(dep, skill, consumer, tmp_path, pins=c.pins, log_checkpoint="1"))) == {"USAGE"}
    run(dep, skill, consumer, tmp_path, pins=c.pins, log_checkpoint=str(c.checkpoint(1)))
    assert read_checkpoint(dep.state, c.pins) == c.checkpoint(1)


def test_bootstrap_cli_takes_a_checkpoint(dep: Deployment, skill: tuple[Path, Path], tmp_path: Path) -> None:
    c = copy_deployment(dep, tmp_path / "deploy")
    consumer = make_consumer(tmp_path / "consumer", dep.sha)
    ident = test_bootstrap.identity_file(tmp_path / "id.json", consumer)
    code, out = _cli(["bootstrap", "--pins", str(c.pins), "--policy", str(dep.trust), "--state-dir", str(dep.state), "--skill",
                      str(skill[0]), "--installation", str(skill[1]), "--repo", str(consumer.path), "--identity", str(ident),
                      "--key", str(dep.key), "-o", str(tmp_path / "h.json"), "--log-checkpoint", f"2:sha256:{'0' * 64}", "--json"])
    doc = json.loads(out)
    assert code == 1 and doc["step"] == 1 and [e["code"] for e in doc["errors"]] == ["PROMOTION_LOG_ROLLBACK"]


# -- attest install skill ----------------------------------------------------------------------------------------------------


def _install(dep: Deployment, c: Copy, dest: Path, **kw: Any) -> Any:
    kw.setdefault("policy", load_policy(dep.trust))
    return install_skill(c.pins, dep.state, dest, load_signer(str(dep.key)), **kw)


def _refused(fn: Any) -> AttestError:
    with pytest.raises(AttestError) as ei:
        fn()
    return ei.value


def test_install_refuses_the_log_rolled_back_below_what_it_accepted(dep: Deployment, tmp_path: Path) -> None:
    c = copy_deployment(dep, tmp_path / "deploy")
    release_2(dep, c)
    (tmp_path / "skills").mkdir()
    done = _install(dep, c, tmp_path / "skills" / "one")
    assert done.to_json()["promotion_log"] == {"sequence": 2, "digest": c.checkpoint(2).digest, "checkpoint": str(c.checkpoint(2))}
    remembered = Path(checkpoint_path(dep.state, c.pins))
    assert read_checkpoint(dep.state, c.pins) == c.checkpoint(2) and oct(os.lstat(remembered).st_mode & 0o777) == "0o600"
    os.unlink(done.attestation)
    roll_back(c)
    err = _refused(lambda: _install(dep, c, tmp_path / "skills" / "two"))
    assert {f.code for f in err.findings} == {"PROMOTION_LOG_ROLLBACK"} and err.exit_code == 1
    assert not (tmp_path / "skills" / "two").exists()


def test_install_refuses_another_entry_at_a_sequence_it_accepted(dep: Deployment, tmp_path: Path) -> None:
    c = copy_deployment(dep, tmp_path / "deploy")
    release_2(dep, c)
    (tmp_path / "skills").mkdir()
    os.unlink(_install(dep, c, tmp_path / "skills" / "one").attestation)
    fork(dep, c)
    err = _refused(lambda: _install(dep, c, tmp_path / "skills" / "two"))
    assert {f.code for f in err.findings} == {"PROMOTION_LOG_FORK"} and not (tmp_path / "skills" / "two").exists()


def test_install_needs_the_policy_for_a_log_and_refuses_the_log_removed(dep: Deployment, tmp_path: Path) -> None:
    c = copy_deployment(dep, tmp_path / "deploy")
    (tmp_path / "skills").mkdir()
    err = _refused(lambda: _install(dep, c, tmp_path / "skills" / "one", policy=None))
    assert err.code == "USAGE" and err.exit_code == 2 and not (tmp_path / "skills" / "one").exists()
    os.unlink(_install(dep, c, tmp_path / "skills" / "one").attestation)
    # The log removed (and the pins release 1's, as they are): without a log, no policy is needed, and none can excuse it.
    shutil.rmtree(c.log)
    for policy in (None, load_policy(dep.trust)):
        err = _refused(lambda: _install(dep, c, tmp_path / "skills" / "two", policy=policy))  # noqa: B023
        assert {f.code for f in err.findings} == {"PROMOTION_LOG_ROLLBACK"}
    assert not (tmp_path / "skills" / "two").exists()


def test_install_cli_refuses_a_rolled_back_log(dep: Deployment, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from attest.cli import main

    c = copy_deployment(dep, tmp_path / "deploy")
    release_2(dep, c)
    head = str(c.checkpoint(2))
    roll_back(c)
    (tmp_path / "skills").mkdir()
    rc = main(["install", "skill", "--pins", str(c.pins), "--state-dir", str(dep.state), "--dest", str(tmp_path / "skills" / "one"),
               "--key", str(dep.key), "--policy", str(dep.trust), "--log-checkpoint", head, "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 1 and [e["code"] for e in doc["errors"]] == ["PROMOTION_LOG_ROLLBACK"]
    assert not (tmp_path / "skills" / "one").exists()
