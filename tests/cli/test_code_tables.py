"""The reason-code tables of docs/*.md are generated from the code (docs/gen_codes.py) and cannot drift."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from attest.errors import all_reason_codes
from tests.test_reason_codes import _load_everything

ROOT = Path(__file__).parents[2]


def _gen() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_codes", ROOT / "docs" / "gen_codes.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_tables_are_current() -> None:
    out = subprocess.run([sys.executable, str(ROOT / "docs" / "gen_codes.py"), "--check"], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr


def test_every_code_is_in_exactly_one_table_row() -> None:
    _load_everything()
    rows = re.findall(r"^\| `([A-Z0-9_]+)` \|", "\n".join(p.read_text() for p in (ROOT / "docs").glob("*.md")), re.M)
    tabled = [r for r in rows if r in all_reason_codes()]
    assert sorted(tabled) == sorted(all_reason_codes()), "a code is in no table or in two"


@pytest.fixture
def gen(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """The generator over a copy of docs/ (pages and data), so a test can break it."""
    module = _gen()
    docs = tmp_path / "docs"
    docs.mkdir()
    for page in (ROOT / "docs").glob("*.md"):
        (docs / page.name).write_text(page.read_text())
    (docs / "reason-codes.toml").write_text((ROOT / "docs" / "reason-codes.toml").read_text())
    monkeypatch.setattr(module, "DOCS", docs)
    monkeypatch.setattr(module, "DATA", docs / "reason-codes.toml")
    return module


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


def test_a_code_without_a_description_fails(gen: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    data = gen.DATA.read_text()
    line = next(x for x in data.splitlines() if x.startswith("SEAL_FAILED = "))
    gen.DATA.write_text(data.replace(line + "\n", ""))
    assert gen.main(["--check"]) == 1
    assert "SEAL_FAILED (FreezeCode) has no entry" in capsys.readouterr().err


def test_a_description_of_no_code_fails(gen: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    _edit(gen.DATA, "[freeze.codes]\n", '[freeze.codes]\nNO_SUCH_CODE = ["1", "gone"]\n')
    assert gen.main(["--check"]) == 1
    assert "NO_SUCH_CODE is not a reason code" in capsys.readouterr().err


def test_a_hand_edited_table_is_stale_and_regenerated(gen: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    page = gen.DOCS / "freeze.md"
    original = page.read_text()
    row = next(x for x in original.splitlines() if x.startswith("| `SEAL_FAILED` |"))
    page.write_text(original.replace(row + "\n", ""))  # a row dropped by hand
    assert gen.main(["--check"]) == 1
    assert "freeze.md: a reason-code table is stale" in capsys.readouterr().err
    assert gen.main([]) == 0 and page.read_text() == original


def test_a_table_without_its_marker_fails(gen: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    _edit(gen.DOCS / "freeze.md", "<!-- codes:freeze -->\n", "")
    assert gen.main(["--check"]) == 1
    assert "table freeze has no <!-- codes:freeze --> marker" in capsys.readouterr().err
