"""Every review-evidence reason code is provoked by a test and documented."""

from __future__ import annotations

from pathlib import Path

from attest.review.evidence import EvidenceCode

HERE = Path(__file__).parent
DOCS = HERE.parent.parent / "docs" / "evidence.md"


def test_every_code_is_provoked_by_a_test() -> None:
    text = "\n".join(p.read_text() for p in HERE.glob("test_*.py") if p.name != Path(__file__).name)
    missing = [c.value for c in EvidenceCode if f'"{c.value}"' not in text and f"EvidenceCode.{c.name}" not in text]
    assert missing == []


def test_every_code_is_documented() -> None:
    text = DOCS.read_text()
    missing = [c.value for c in EvidenceCode if f"`{c.value}`" not in text]
    assert missing == []
