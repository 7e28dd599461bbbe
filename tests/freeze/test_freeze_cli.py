"""The CLI end to end with real keys: attest keygen / attest, then freeze, exec, store ls / gc."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.caps import BACKEND

from attest.cli import main

ATTEST = [sys.executable, "-m", "attest"]


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ATTEST, *args], capture_output=True, text=True, cwd=cwd)


@pytest.fixture
def signed(tmp_path: Path, src: Path) -> tuple[Path, Path]:
    """(attestation, policy) for ``src``, signed with a key generated for this test, kept outside src."""
    keys = tmp_path / "keys"
    keys.mkdir()
    assert main(["keygen", "-o", str(keys / "k.pem")]) == 0
    policy = keys / "policy.toml"
    policy.write_text('threshold = 1\n[[signers]]\nkind = "key"\npublic_key = "k.pub.pem"\n')
    attestation = keys / "src.att.json"
    assert main(["attest", str(src), "--key", str(keys / "k.pem"), "-o", str(attestation)]) == 0
    return attestation, policy


def test_freeze_exec_ls_gc_end_to_end(src: Path, state: Path, signed: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    attestation, policy = signed
    capsys.readouterr()
    args = ["freeze", str(src), "--attestation", str(attestation), "--policy", str(policy), "--state-dir", str(state), "--json"]
    assert main(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["ok"] is True and out["backend"] == BACKEND  # the default: $ATTEST_BACKEND where the flag is unavailable and out["reused"] is False
    assert out["image"].endswith(f"/store/{out['identity'][7:]}/tree")
    assert main(args) == 0
    assert json.loads(capsys.readouterr().out)["reused"] is True

    done = run("exec", "--state-dir", str(state), "--image", f"tool={out['image']}", "--cwd", "tool", "--", "sh", "bin/tool")
    assert done.returncode == 0 and done.stdout == "tool ran\n"
    done = run("exec", "--state-dir", str(state), "--image", f"tool={out['identity']}", "--", "sh", "-c", "exit 5")
    assert done.returncode == 5

    assert main(["store", "ls", "--state-dir", str(state), "--check", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [(i["identity"], i["holds"]) for i in listed["images"]] == [(out["identity"], True)]
    assert main(["store", "gc", "--state-dir", str(state), "--keep", out["identity"], "--recent", "0", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["removed"] == []
    assert main(["store", "gc", "--state-dir", str(state), "--dry-run", "--recent", "0"]) == 0
    got = capsys.readouterr()  # text, piped: it says when it starts and ends (the kept images are verified: seconds)
    assert got.out.startswith(f"would remove {out['identity']}\n"), got.out
    assert got.err.startswith(f"attest: checking the store of {state}: started\n") and ": done after " in got.err, got.err
    assert main(["store", "gc", "--state-dir", str(state), "--recent", "0", "--json"]) == 0
    got = capsys.readouterr()
    assert json.loads(got.out)["removed"] == [out["identity"]] and got.err == ""  # --json: stdout only
    assert not Path(out["image"]).exists()


def test_a_tampered_source_is_refused(src: Path, state: Path, signed: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    attestation, policy = signed
    (src / "lib" / "pkg" / "mod.py").write_bytes(b"VALUE = 0 + 1\n")
    capsys.readouterr()
    rc = main(["freeze", str(src), "--attestation", str(attestation), "--policy", str(policy), "--state-dir", str(state), "--json"])
    assert rc == 1
    out = json.loads(capsys.readouterr().out)
    assert out["ok"] is False and [(e["code"], e["path"]) for e in out["errors"]] == [("DIGEST_MISMATCH", "lib/pkg/mod.py")]
    assert os.listdir(state / "store") == [] and os.listdir(state / "staging") == []


def test_an_attestation_from_an_untrusted_key_is_refused_before_any_copy(
    tmp_path: Path, src: Path, state: Path, signed: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    attestation, _ = signed
    other = tmp_path / "other"
    other.mkdir()
    assert main(["keygen", "-o", str(other / "o.pem")]) == 0
    policy = other / "policy.toml"
    policy.write_text('threshold = 1\n[[signers]]\nkind = "key"\npublic_key = "o.pub.pem"\n')
    capsys.readouterr()
    rc = main(["freeze", str(src), "--attestation", str(attestation), "--policy", str(policy), "--state-dir", str(state), "--json"])
    assert rc == 1 and json.loads(capsys.readouterr().out)["ok"] is False
    assert not state.exists()


def test_a_policy_inside_the_source_is_refused(src: Path, state: Path, signed: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    attestation, policy = signed
    inside = src / "policy.toml"
    inside.write_text(policy.read_text().replace("k.pub.pem", str(policy.parent / "k.pub.pem")))
    rc = main(["freeze", str(src), "--attestation", str(attestation), "--policy", str(inside), "--state-dir", str(state), "--json"])
    assert rc != 0 and json.loads(capsys.readouterr().out)["ok"] is False


def test_cli_usage_errors_exit_2_without_traceback(state: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # exec's own failures are 125 (its exit status is otherwise the command's, as with env(1))
    assert main(["exec", "--state-dir", str(state), "--image", "noequals", "--", "true"]) == 125
    err = capsys.readouterr().err
    assert "BAD_IMAGE_REF" in err and "Traceback" not in err
    assert main(["freeze", ".", "--attestation", "x", "--policy", "y", "--state-dir", str(state), "--backend", "nope"]) == 2
    assert "UNKNOWN_BACKEND" in capsys.readouterr().err
    done = run("store", "ls", "--state-dir", str(state / "absent"))
    assert done.returncode != 0 and "Traceback" not in done.stderr


def test_the_readme_freeze_example_is_true(tmp_path: Path, src: Path, state: Path, signed: tuple[Path, Path],
                                           capsys: pytest.CaptureFixture[str]) -> None:
    """README "Freeze before verify", line by line."""
    import shutil

    attestation, policy = signed
    capsys.readouterr()
    common = ["--attestation", str(attestation), "--policy", str(policy), "--state-dir", str(state)]
    tampered = tmp_path / "tampered"
    shutil.copytree(src, tampered, symlinks=True)
    with open(tampered / "README", "ab") as f:
        f.write(b"tampered\n")
    assert main(["freeze", str(tampered), *common, "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert ("DIGEST_MISMATCH", "README") in {(e["code"], e.get("path")) for e in doc["errors"]}
    assert not [p for p in (state / "store").iterdir()]  # nothing published
    assert main(["freeze", str(src), *common]) == 0
    assert capsys.readouterr().out.startswith("frozen sha256:")
    with open(src / "README", "ab") as f:  # the source changes after the freeze: a reuse never reads it
        f.write(b"changed later\n")
    assert main(["freeze", str(src), *common, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["reused"] is True and doc["source_read"] is False
    assert main(["freeze", str(src), *common]) == 0
    assert "the source was not read" in capsys.readouterr().out
    # A source that does not exist is a mistake even when the identity is stored.
    assert main(["freeze", str(tmp_path / "nowhere"), *common, "--json"]) == 2
    assert json.loads(capsys.readouterr().out)["errors"][0]["code"] == "UNREADABLE"
