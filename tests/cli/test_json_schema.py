"""Every command with `--json` prints one object carrying `"schema"` (docs/json.md), on success and on failure.

The commands are enumerated from the typer app: a new command with `--json` fails here until it
has a case. Most cases are the cheapest failure (a missing input, no network, no build); the
cheap successes are run too, and checked for the key names docs/json.md fixes.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import typer

from attest.cli import build_app, main
from attest.cli._app import JSON_SCHEMA

SHA = "0" * 40
DEAD = "http://127.0.0.1:9"  # loopback, nothing listens: never the network


def _json_commands() -> list[str]:
    root = typer.main.get_command(build_app())
    out: list[str] = []

    def walk(cmd: Any, path: list[str]) -> None:
        subs = getattr(cmd, "commands", None)
        if subs:
            for name, sub in subs.items():
                walk(sub, [*path, name])
        elif any("--json" in getattr(p, "opts", ()) for p in cmd.params):
            out.append(" ".join(path))

    walk(root, [])
    return sorted(out)


Case = Callable[[Path], list[str]]

# The cheapest run of each command; `m` is a path that does not exist.
CASES: dict[str, Case] = {
    "inventory": lambda t: ["inventory", str(t / "m")],
    "check": lambda t: ["check", str(t / "m"), "--inventory", str(t / "m.json")],
    "keygen": lambda t: ["keygen", "--type", "rsa-1024", "-o", str(t / "k.pem")],
    "attest": lambda t: ["attest", str(t / "m"), "--key", str(t / "m.pem"), "-o", str(t / "a.json")],
    "sign": lambda t: ["sign", str(t / "m.json"), "--add", str(t / "m.pem"), "-o", str(t / "s.json")],
    "verify-attestation": lambda t: ["verify-attestation", str(t / "m.json"), "--policy", str(t / "m.toml")],
    "verify": lambda t: ["verify", str(t / "m"), "--attestation", str(t / "m.json"), "--policy", str(t / "m.toml")],
    "freeze": lambda t: ["freeze", str(t / "m"), "--attestation", str(t / "m.json"), "--policy", str(t / "m.toml"), "--state-dir", str(t / "s")],
    "exec": lambda t: ["exec", "--state-dir", str(t / "m"), "--image", "X=sha256:" + "0" * 64, "--", "true"],
    "fetch": lambda t: ["fetch", "--lock", str(t / "m.toml"), "--cache", str(t / "cache"), "--state-dir", str(t / "s")],
    "rebuild": lambda t: ["rebuild", str(t / "m.toml"), "--rev", SHA, "--state-dir", str(t / "s")],
    "rebuild-release": lambda t: ["rebuild-release", "--toolchain-rev", SHA, "--key", str(t / "m.pem"), "-o", str(t / "r.json"),
                                  "--runtime-recipe", str(t / "m.toml"), "--state-dir", str(t / "s")],
    "promote": lambda t: ["promote", "--pins", str(t / "pins.toml"), "--policy", str(t / "m.toml"), "--toolchain-rev", SHA],
    "bootstrap": lambda t: ["bootstrap", "--pins", str(t / "m.toml"), "--policy", str(t / "m.toml"), "--state-dir", str(t / "s"),
                            "--skill", str(t / "m"), "--installation", str(t / "m.json"), "--repo", str(t / "m"),
                            "--identity", str(t / "m.json"), "--key", str(t / "m.pem"), "-o", str(t / "h.json")],
    "store ls": lambda t: ["store", "ls", "--state-dir", str(t / "m")],
    "store gc": lambda t: ["store", "gc", "--state-dir", str(t / "m")],
    "build runtime": lambda t: ["build", "runtime", str(t / "m.toml"), "--toolchain-rev", SHA, "--state-dir", str(t / "s")],
    "build skill": lambda t: ["build", "skill", str(t / "m.toml"), "--skill-rev", SHA, "--state-dir", str(t / "s")],
    "init github": lambda t: ["init", "github", "--repo", str(t / "m")],
    "install skill": lambda t: ["install", "skill", "--pins", str(t / "m.toml"), "--state-dir", str(t / "m"), "--dest", str(t / "d"),
                                "--key", str(t / "m.pem")],
    "review start": lambda t: ["review", "start", "--handoff", str(t / "m.json"), "--policy", str(t / "m.toml"), "--state-dir", str(t / "m"),
                               "--repo", str(t / "m"), "--semantic", "a.md", "--adapter", "a.json", "--identity", str(t / "m.json")],
    "review recheck": lambda t: ["review", "recheck", "--state-dir", str(t / "m"), "--review", "x"],
    "review serialize": lambda t: ["review", "serialize", "--state-dir", str(t / "m"), "--review", "x", "--result", str(t / "m.json"),
                                   "-o", str(t / "p.json"), "--key", str(t / "m.pem")],
    "review exec": lambda t: ["review", "exec", "--handoff", str(t / "m.json"), "--policy", str(t / "m.toml"), "--state-dir", str(t / "m"),
                              "-o", str(t / "r.json"), "--", "true"],
    "merge-gate check": lambda t: ["merge-gate", "check", "--record", str(t / "m.json"), "--policy", str(t / "m.toml"),
                                   "--identity", str(t / "m.json"), "--require-check", "ci", "--state-dir", str(t / "m")],
    "merge-gate merge": lambda t: ["merge-gate", "merge", "--record", str(t / "m.json"), "--policy", str(t / "m.toml"),
                                   "--github", "o/n", "--pr", "1", "--api-url", DEAD, "--require-check", "ci", "--state-dir", str(t / "m")],
    "review publish": lambda t: ["review", "publish", "--record", str(t / "m.json"), "--payload", str(t / "p.json"), "--policy",
                                 str(t / "m.toml"), "--github", "o/n", "--pr", "1", "--api-url", DEAD],
    "merge-gate ci-result": lambda t: ["merge-gate", "ci-result", "--repository-id", "1", "--full-name", "o/n", "--head", SHA,
                                       "--base", SHA, "--check", "ci", "--conclusion", "success", "--run", "1", "--key", str(t / "m.pem"),
                                       "-o", str(t / "ci.json")],
    "evidence trusted-producer": lambda t: ["evidence", "trusted-producer", "--repo", "o/n", "--pr", "1", "--app-login", "a[bot]",
                                            "--api-url", DEAD, "--timeout", "0.5"],
    "evidence wrap": lambda t: ["evidence", "wrap", "--head-sha", SHA, "--base-sha", SHA, "--run-id", "1", "--run-attempt", "1",
                                "-i", str(t / "m.txt")],
    "policy generate": lambda t: ["policy", "generate", "--root", str(t / "m")],
    "policy check": lambda t: ["policy", "check", "--root", str(t / "m")],
}


def test_every_json_command_has_a_case() -> None:
    assert _json_commands() == sorted(CASES)


def _run(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, dict[str, Any]]:
    # --json is attest's word only before "--" (after it, the command's).
    rc = main([*argv[:argv.index("--")], "--json", *argv[argv.index("--"):]] if "--" in argv else [*argv, "--json"])
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1, lines
    doc = json.loads(lines[0])
    assert isinstance(doc, dict)
    return rc, doc


@pytest.mark.parametrize("command", sorted(CASES))
def test_every_json_object_carries_the_schema(command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # default recipes and state directories: absent here
    monkeypatch.delenv("ATTEST_STATE_DIR", raising=False)
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    rc, doc = _run(capsys, CASES[command](tmp_path))
    assert doc["schema"] == JSON_SCHEMA and isinstance(doc["ok"], bool), doc
    assert rc != 0 and doc["ok"] is False and doc["errors"], doc


def test_the_cheap_successes_carry_the_schema_and_the_shared_key_names(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "f").write_text("x\n")
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    key = tmp_path / "k.pem"
    runs: dict[str, dict[str, Any]] = {}
    for name, argv in [
        ("inventory", ["inventory", str(tree)]),
        ("keygen", ["keygen", "-o", str(key)]),
        ("attest", ["attest", str(tree), "--key", str(key), "-o", str(tmp_path / "a.json")]),
        ("store ls", ["store", "ls", "--state-dir", str(state)]),
        ("store gc", ["store", "gc", "--state-dir", str(state), "--dry-run"]),
    ]:
        rc, doc = _run(capsys, argv)
        assert rc == 0 and doc["ok"] is True and doc["schema"] == JSON_SCHEMA, (name, doc)
        runs[name] = doc
    policy = tmp_path / "policy.toml"
    policy.write_text(f'threshold = 1\n[[signers]]\nkind = "key"\npublic_key = "{tmp_path / "k.pub.pem"}"\n')
    for name, argv in [
        ("verify", ["verify", str(tree), "--attestation", str(tmp_path / "a.json"), "--policy", str(policy)]),
        ("check", ["check", str(tree), "--inventory", str(tmp_path / "i.json")]),
    ]:
        if name == "check":
            assert main(["inventory", str(tree), "-o", str(tmp_path / "i.json")]) == 0
            capsys.readouterr()
        rc, doc = _run(capsys, argv)
        assert rc == 0 and doc["schema"] == JSON_SCHEMA, (name, doc)
        runs[name] = doc
    identity = runs["inventory"]["identity"]
    # One key per concept: a tree's closed-inventory identity is `identity` wherever it is printed.
    assert runs["attest"]["identity"] == runs["verify"]["identity"] == runs["check"]["identity"] == identity
    assert runs["attest"]["output"] == str(tmp_path / "a.json") and runs["attest"]["attestation_digest"].startswith("sha256:")


@pytest.mark.parametrize("argv", [["verify"], ["verify", "--no-such-option", "x"], ["review", "exec", "--handoff"],
                                  ["keygen"], ["store", "gc", "--recent", "-1"]])  # (store ls: its --state-dir has a default now)
def test_a_usage_error_under_json_is_the_error_document_too(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    # typer's own usage errors (a missing argument, an unknown option): exit 2 and, with --json, one JSON object on stdout.
    rc = main([*argv, "--json"])
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    assert rc == 2 and doc["ok"] is False and doc["schema"] == JSON_SCHEMA and doc["errors"][0]["code"] == "USAGE", doc
    assert "Usage: attest" in captured.err  # the usage text itself stays on stderr, for a person


def test_a_json_word_after_the_double_dash_is_the_commands_not_attests(capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["exec", "--state-dir", "/nonexistent-attest-state", "--image", "X=/nonexistent", "--", "cmd", "--json"])
    captured = capsys.readouterr()
    assert rc != 0 and captured.out == "" and "attest:" in captured.err
