"""Ordinary bad output paths are usage errors with their own code, never ``INTERNAL``.

Regression (review finding C): ``-o`` naming a directory or a path in a missing directory, and
``--store`` / ``--state-dir`` naming a regular file, escaped as an ``OSError`` and were
reported as ``INTERNAL``. Every command that takes one of these options is run in-process
through ``attest.cli.main`` on real paths under ``tmp_path``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from attest._fs import check_directory_path, check_output_path, write_atomic
from attest.attestation import generate_key
from attest.cli import main
from attest.errors import InputError

SHA = "3f786850e387550fdab836ed7e6dc881de23001b"
ROOT = Path(__file__).parents[2]


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, object]]:
    rc = main([*argv, "--json"])
    out = capsys.readouterr().out
    return rc, json.loads(out)


def assert_bad_output_path(rc: int, out: dict[str, object]) -> None:
    assert rc == 2, out
    assert out["ok"] is False
    errors = out["errors"]
    assert isinstance(errors, list) and errors[0]["code"] == "BAD_OUTPUT_PATH", errors
    assert "INTERNAL" not in json.dumps(out)


@pytest.fixture
def place(tmp_path: Path) -> dict[str, Path]:
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "a.txt").write_bytes(b"a\n")
    directory = tmp_path / "existing-dir"
    directory.mkdir()
    regular = tmp_path / "regular-file"
    regular.write_bytes(b"not a directory\n")
    key = tmp_path / "keys" / "signing.pem"
    key.parent.mkdir()
    generate_key("ed25519", key)
    model = tmp_path / "model.txt"
    model.write_bytes(b"<findings>[]</findings>")
    return {"tmp": tmp_path, "tree": tree, "dir": directory, "file": regular, "key": key, "model": model}


def bad_outputs(place: dict[str, Path]) -> dict[str, Path]:
    return {
        "a directory": place["dir"],
        "in a missing directory": place["tmp"] / "no-such-dir" / "out.json",
        "below a regular file": place["file"] / "out.json",
    }


OUTPUT_COMMANDS = {
    "inventory": lambda p: ["inventory", str(p["tree"])],
    "attest": lambda p: ["attest", str(p["tree"]), "--key", str(p["key"])],
    "keygen": lambda p: ["keygen"],
    "evidence wrap": lambda p: ["evidence", "wrap", "--head-sha", SHA, "--base-sha", SHA, "--run-id", "1", "--run-attempt", "1",
                                "-i", str(p["model"])],
}


@pytest.mark.parametrize("where", ["a directory", "in a missing directory", "below a regular file"])
@pytest.mark.parametrize("command", sorted(OUTPUT_COMMANDS))
def test_output_option_naming_a_bad_path_is_usage_error(capsys: pytest.CaptureFixture[str], place: dict[str, Path], command: str, where: str) -> None:
    target = bad_outputs(place)[where]
    before = sorted(os.listdir(place["tmp"]))
    rc, out = run_json(capsys, *OUTPUT_COMMANDS[command](place), "-o", str(target))
    assert_bad_output_path(rc, out)
    assert out["errors"][0]["path"] == str(target)  # type: ignore[index]
    # Nothing half-written is left behind: no temp file, no key beside a refused one.
    assert sorted(os.listdir(place["tmp"])) == before and os.listdir(place["dir"]) == []


STORE_COMMANDS = {
    "fetch": ["fetch", "--lock", str(ROOT / "lockfiles" / "pylock.toml")],
    "build runtime": ["build", "runtime", "--toolchain-rev", SHA, str(ROOT / "builders" / "runtime.toml")],
    "build skill": ["build", "skill", "--skill-rev", SHA, str(ROOT / "builders" / "skill.toml")],
    "rebuild": ["rebuild", str(ROOT / "builders" / "skill.toml"), "--rev", SHA],
    "promote": ["promote", "--toolchain-rev", SHA, "--pins", "pins.toml", "--key", "k.pem", "--policy", "policy.toml"],
}


@pytest.mark.parametrize("below", [False, True], ids=["the file", "below the file"])
@pytest.mark.parametrize("command", sorted(STORE_COMMANDS))
def test_store_naming_a_regular_file_is_usage_error(capsys: pytest.CaptureFixture[str], place: dict[str, Path], command: str, below: bool) -> None:
    store = place["file"] / "state" if below else place["file"]
    rc, out = run_json(capsys, *STORE_COMMANDS[command], "--state-dir", str(store))
    assert_bad_output_path(rc, out)
    assert place["file"].read_bytes() == b"not a directory\n"


def test_default_store_from_the_environment_is_checked_too(capsys: pytest.CaptureFixture[str], place: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ATTEST_STATE_DIR", str(place["file"]))
    rc, out = run_json(capsys, *STORE_COMMANDS["build skill"])
    assert_bad_output_path(rc, out)


STATE_DIR_COMMANDS = {
    "freeze": lambda p: ["freeze", str(p["tree"]), "--attestation", str(p["tmp"] / "a.json"), "--policy", str(p["tmp"] / "policy.toml")],
    "store ls": lambda p: ["store", "ls"],
    "store gc": lambda p: ["store", "gc", "--dry-run"],
}


@pytest.mark.parametrize("command", sorted(STATE_DIR_COMMANDS))
def test_state_dir_naming_a_regular_file_is_usage_error(capsys: pytest.CaptureFixture[str], place: dict[str, Path], command: str) -> None:
    rc, out = run_json(capsys, *STATE_DIR_COMMANDS[command](place), "--state-dir", str(place["file"]))
    assert_bad_output_path(rc, out)


def test_demo_state_dir_naming_a_regular_file_is_usage_error(capsys: pytest.CaptureFixture[str], place: dict[str, Path]) -> None:
    # `demo` has no --json: the same code, in text.
    rc = main(["demo", "--offline", "--state-dir", str(place["file"])])
    err = capsys.readouterr().err
    assert rc == 2 and "BAD_OUTPUT_PATH" in err and "INTERNAL" not in err


# ------------------------------------------------------------------ the helpers themselves


def test_write_atomic_refuses_a_directory_and_leaves_no_temp_file(tmp_path: Path) -> None:
    target = tmp_path / "out"
    target.mkdir()
    with pytest.raises(InputError) as e:
        write_atomic(target, b"data", what="inventory")
    assert (e.value.code, e.value.path, e.value.exit_code) == ("BAD_OUTPUT_PATH", str(target), 2)
    assert "inventory" in e.value.detail and "directory" in e.value.detail
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"] and list(target.iterdir()) == []


def test_write_atomic_still_replaces_a_file(tmp_path: Path) -> None:
    target = tmp_path / "out.json"
    target.write_bytes(b"old")
    write_atomic(target, b"new")
    assert target.read_bytes() == b"new" and sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]


def test_directory_paths_that_may_still_be_created_pass(tmp_path: Path) -> None:
    check_directory_path(tmp_path, what="--state-dir")
    check_directory_path(tmp_path / "new" / "deeper", what="--state-dir")
    (tmp_path / "link").symlink_to(tmp_path)
    check_directory_path(tmp_path / "link", what="--state-dir")  # a symlink is the owning layer's to judge
    check_output_path(tmp_path / "new-file", what="key file")
