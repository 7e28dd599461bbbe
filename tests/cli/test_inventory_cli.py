"""`attest inventory` / `attest check` as a user runs them: exit codes, --json, no tracebacks."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import rfc8785

from attest.cli import main


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_inventory_prints_canonical_line(capsys, sample_tree: Path) -> None:  # type: ignore[no-untyped-def]
    code, out, _ = run(capsys, "inventory", str(sample_tree))
    assert code == 0
    line = out.encode()
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    doc = json.loads(line)
    assert rfc8785.dumps(doc) == line[:-1]
    code, digest, _ = run(capsys, "inventory", str(sample_tree), "--digest")
    assert digest.strip() == "sha256:" + hashlib.sha256(line[:-1]).hexdigest()


def test_inventory_to_file_then_check(capsys, sample_tree: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    inv = tmp_path / "inv.json"
    code, out, _ = run(capsys, "inventory", str(sample_tree), "-o", str(inv), "--json")
    assert code == 0 and json.loads(out)["ok"] is True
    assert inv.read_bytes().endswith(b"\n")
    assert run(capsys, "check", str(sample_tree), "--inventory", str(inv))[0] == 0
    (sample_tree / "README").write_bytes(b"hellO\n")
    (sample_tree / "new").write_bytes(b"")
    code, out, _ = run(capsys, "check", str(sample_tree), "--inventory", str(inv), "--json")
    assert code == 1
    result = json.loads(out)
    assert result["ok"] is False
    assert [(e["code"], e["path"]) for e in result["errors"]] == [("DIGEST_MISMATCH", "README"), ("EXTRA", "new")]
    code, _, err = run(capsys, "check", str(sample_tree), "--inventory", str(inv))
    assert code == 1 and "DIGEST_MISMATCH README" in err and "EXTRA new" in err


def test_inventory_of_a_rejected_tree_fails_with_codes(capsys, sample_tree: Path) -> None:  # type: ignore[no-untyped-def]
    os.symlink("README", sample_tree / "link")
    code, out, _ = run(capsys, "inventory", str(sample_tree), "--json")
    assert code == 1
    assert json.loads(out)["errors"] == [{"code": "SYMLINK", "path": "link", "detail": "symbolic links are not allowed in a closed tree (to leave it out, give an ignore "
                                                  "pattern for its path, e.g. `--ignore PATH`; the inventory records the pattern)"}]


@pytest.mark.parametrize(
    "inventory_bytes",
    [b"", b"not json", b'{"a":1,"a":1}', b"[]", b"\xff\xfe", json.dumps({"entries": []}).encode()],
)
def test_unreadable_or_malformed_inventory_is_exit_2(capsys, sample_tree: Path, tmp_path: Path, inventory_bytes: bytes) -> None:  # type: ignore[no-untyped-def]
    inv = tmp_path / "inv.json"
    inv.write_bytes(inventory_bytes)
    code, out, err = run(capsys, "check", str(sample_tree), "--inventory", str(inv))
    assert code == 2
    assert "Traceback" not in out + err and "attest: error" in err


def test_inventory_file_that_is_a_fifo_is_refused_without_blocking(capsys, sample_tree: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    os.mkfifo(tmp_path / "fifo")
    code, out, _ = run(capsys, "check", str(sample_tree), "--inventory", str(tmp_path / "fifo"), "--json")
    assert code == 2 and json.loads(out)["errors"][0]["code"] == "UNREADABLE"


def test_missing_root_and_usage_errors_are_exit_2(capsys, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    code, out, _ = run(capsys, "inventory", str(tmp_path / "nope"), "--json")
    assert code == 2 and json.loads(out)["errors"][0]["code"] == "BAD_ROOT"
    assert run(capsys, "check", str(tmp_path))[0] == 2  # --inventory missing
    assert run(capsys, "no-such-command")[0] == 2


def test_console_script_end_to_end(sample_tree: Path, tmp_path: Path) -> None:
    exe = Path(sys.executable).with_name("attest")
    if not exe.exists():
        pytest.fail("the attest console script is not installed next to the interpreter")
    inv = tmp_path / "inv.json"
    ok = subprocess.run([exe, "inventory", sample_tree, "-o", inv], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    (sample_tree / "lib" / "pkg" / "mod.py").write_bytes(b"X = 2\n")
    bad = subprocess.run([exe, "check", sample_tree, "--inventory", inv], capture_output=True, text=True)
    assert bad.returncode == 1 and "DIGEST_MISMATCH lib/pkg/mod.py" in bad.stderr
    assert "Traceback" not in bad.stderr
