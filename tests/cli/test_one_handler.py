"""Every failure of `evidence` and `rebuild` goes through the one handler in ``attest.cli.main``.

Those commands used to end themselves (``raise typer.Exit(1)`` after printing, or catching an
error and printing their own JSON). Now they raise, and the handler prints and picks the exit
code: 1 for a verification failure (fail closed), 2 for bad usage or unreadable input. Each
command's documented output is kept: without ``--json`` a message on stderr, with ``--json``
one JSON object on stdout (``ok: false``, ``errors``, and the command's own fields) and a quiet
stderr. No traceback in either mode.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from attest.builder import BuildResult, RebuildReport
from attest.cli import main
from attest.cli._app import ReportedFailure, render_error
from attest.errors import EnvironmentFailure, Finding, InputError, VerificationError
from attest.inventory import Entry, EntryType, Inventory

ROOT = Path(__file__).parents[2]
HEAD, BASE = "a" * 40, "b" * 40
TP = ["evidence", "trusted-producer", "--repo", "acme/widgets", "--pr", "7", "--app-login", "opencode-review[bot]"]
WRAP = ["evidence", "wrap", "--head-sha", HEAD, "--base-sha", BASE, "--run-id", "1", "--run-attempt", "1"]
# Nothing listens on port 1 of the loopback address: the first read fails at once, and offline.
DEAD_API = ["--api-url", "http://127.0.0.1:1", "--timeout", "2"]


def _fake_rebuild(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[str]:
    """``attest.builder.run_rebuild`` reporting an unreproducible build (the real one: tests/builder)."""
    inv = Inventory.from_entries([Entry("f", EntryType.FILE, 0o444, 1, "1" * 64)])
    first = BuildResult("skill", "0" * 32 + "-s", str(tmp_path / "tree"), {}, "2" * 64, inv, False, False, "immutable")
    found = (Finding("NOT_REPRODUCIBLE", first.name, "the rebuilt inventory differs"),
             Finding("DIGEST_MISMATCH", "f", "sha256 differs"))
    report = RebuildReport("skill", first, first.name, "sha256:" + "3" * 64, found, {"f": "--- first/f\n+++ second/f\n"})
    monkeypatch.setattr("attest.builder.run_rebuild", lambda *a, **k: (report, None))
    return ["rebuild", "builders/skill.toml", "--rev", HEAD, "--state-dir", str(tmp_path / "state")]


def _model_output(tmp_path: Path) -> Path:
    p = tmp_path / "model.txt"
    p.write_text("Sure! Here is my review: looks fine.")
    return p


Setup = Callable[[pytest.MonkeyPatch, Path], list[str]]
CASES: list[tuple[str, Setup, int, str]] = [
    # (id, argv (after any setup), exit code, the reason code reported)
    ("trusted-producer-unknown", lambda mp, tmp: [*TP, *DEAD_API], 1, "HTTP_ERROR"),
    ("trusted-producer-bad-config", lambda mp, tmp: [*TP[:-1], "github-actions[bot]"], 2, "BAD_CONFIG"),
    ("trusted-producer-token-missing", lambda mp, tmp: (mp.delenv("NO_SUCH_TOKEN", raising=False),
                                                        [*TP, "--token-env", "NO_SUCH_TOKEN"])[1], 2, "TOKEN_MISSING"),
    ("wrap-diagnostic", lambda mp, tmp: [*WRAP, "-i", str(_model_output(tmp))], 1, "NO_FINDINGS_BLOCK"),
    ("wrap-bad-head", lambda mp, tmp: ["evidence", "wrap", "--head-sha", "main", *WRAP[4:], "-i", "/dev/null"], 2, "BAD_CONFIG"),
    ("wrap-bad-output-path", lambda mp, tmp: [*WRAP, "-i", "/dev/null", "-o", str(tmp)], 2, "BAD_OUTPUT_PATH"),
    ("rebuild-not-reproducible", _fake_rebuild, 1, "NOT_REPRODUCIBLE"),
    ("rebuild-unreadable-recipe", lambda mp, tmp: ["rebuild", str(tmp / "missing.toml"), "--rev", HEAD,
                                                   "--state-dir", str(tmp / "state")], 2, "UNREADABLE"),
]
IDS = [c[0] for c in CASES]


def _no_traceback(*texts: str) -> None:
    for text in texts:
        assert "Traceback" not in text and 'File "' not in text, text


@pytest.mark.parametrize(("setup", "rc", "code"), [c[1:] for c in CASES], ids=IDS)
def test_text_mode(setup: Setup, rc: int, code: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                   capsys: pytest.CaptureFixture[str]) -> None:
    argv = setup(monkeypatch, tmp_path)
    assert main(argv) == rc
    out, err = capsys.readouterr()
    _no_traceback(out, err)
    assert code in err, err
    if argv[:2] == ["evidence", "wrap"] and rc == 1:
        assert json.loads(out)["commit_id"] == HEAD  # the diagnostic review is still printed, for the job to post
    else:
        assert out == ""


@pytest.mark.parametrize(("setup", "rc", "code"), [c[1:] for c in CASES], ids=IDS)
def test_json_mode(setup: Setup, rc: int, code: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                   capsys: pytest.CaptureFixture[str]) -> None:
    argv = setup(monkeypatch, tmp_path)
    assert main([*argv, "--json"]) == rc
    out, err = capsys.readouterr()
    _no_traceback(out, err)
    assert err == ""  # --json is quiet on stderr
    lines = out.splitlines()
    assert len(lines) == 1, out
    doc = json.loads(lines[0])
    assert doc["ok"] is False and code in [e["code"] for e in doc["errors"]]
    assert all(set(e) <= {"code", "path", "detail"} and e["detail"] for e in doc["errors"])


def test_each_command_keeps_its_documented_json_shape(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    verdict = {"schema", "ok", "trusted_producer", "reason_code", "reason", "errors"}
    for argv, rc in (([*TP, *DEAD_API], 1), ([*TP[:-1], "github-actions[bot]"], 2)):
        assert main([*argv, "--json"]) == rc
        doc = json.loads(capsys.readouterr().out)
        assert set(doc) == verdict and doc["trusted_producer"] == "unknown" and doc["reason_code"] == doc["errors"][0]["code"]
    assert main([*WRAP, "-i", str(_model_output(tmp_path)), "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert set(doc) == {"schema", "ok", "outcome", "reason_code", "reason", "findings", "review", "errors"} and doc["outcome"] == "diagnostic"
    assert main([*_fake_rebuild(monkeypatch, tmp_path), "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert {"kind", "name", "rebuilt_identity", "diffs"} <= set(doc) and doc["diffs"]["f"].startswith("--- first/f")


def test_rebuild_text_mode_prints_the_diffs_then_the_findings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    assert main(_fake_rebuild(monkeypatch, tmp_path)) == 1
    err = capsys.readouterr().err
    assert err.index("--- first/f") < err.index("attest: FAILED: 2 problems") < err.index("DIGEST_MISMATCH f: sha256 differs")


@pytest.mark.parametrize("argv", [
    [*TP[:-1], "github-actions[bot]"],
    ["evidence", "wrap", "--head-sha", "main", *WRAP[4:], "-i", "/dev/null"],
    ["rebuild", "no/such/recipe.toml", "--rev", HEAD, "--state-dir", "{tmp}/state"],
], ids=["trusted-producer", "wrap", "rebuild"])
def test_as_a_process(argv: list[str], tmp_path: Path) -> None:
    """The real entry point: exit status 2, one message on stderr, no traceback."""
    args = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    proc = subprocess.run([sys.executable, "-m", "attest", *args], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert proc.returncode == 2, proc.stderr
    # A long step (rebuild) says it started and how it ended, then the one message.
    message = proc.stderr[proc.stderr.index("attest: error:"):]
    assert proc.stdout == "" and all(line.startswith("attest: rebuilding ") for line in proc.stderr[: -len(message)].splitlines())
    _no_traceback(proc.stdout, proc.stderr)


def test_these_commands_never_exit_on_their_own() -> None:
    """No ``typer.Exit`` / ``sys.exit`` / ``exit()`` left in the command modules: only the handler exits."""
    for name in ("_evidence.py", "_build.py"):
        tree = ast.parse((ROOT / "attest" / "cli" / name).read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute):
                assert node.attr not in {"Exit", "exit", "Abort"}, f"{name}:{node.lineno}"
            if isinstance(node, ast.Name):
                assert node.id not in {"exit", "quit"}, f"{name}:{node.lineno}"


@pytest.mark.parametrize(("error", "rc"), [(InputError("X", "d"), 2), (VerificationError("X", "d"), 1),
                                           (EnvironmentFailure("X", "d"), 1)])
def test_a_reported_failure_takes_its_exit_code_and_findings_from_its_error(
        error: InputError, rc: int, capsys: pytest.CaptureFixture[str]) -> None:
    plain = ReportedFailure(error)
    assert plain.exit_code == rc and plain.findings == error.findings and plain.to_json() == error.to_json()
    own = ReportedFailure(error, document={"ok": False, "extra": 1, "errors": []}, text="one line\n")
    render_error(own, json_mode=True)
    render_error(own, json_mode=False)
    out, err = capsys.readouterr()
    assert json.loads(out) == {"schema": 1, "ok": False, "extra": 1, "errors": []} and err == "one line\n"
    render_error(plain, json_mode=False)
    assert capsys.readouterr().err == f"attest: {'error' if rc == 2 else 'FAILED'}: 1 problem\n  X: d\n"
