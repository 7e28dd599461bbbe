"""Every reason code the product can emit is provoked by at least one test.

Imports every module of the package so each layer's ReasonCode enum is loaded, then requires
each code's wire string to appear, quoted or as an enum member, in some test file.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from pathlib import Path

import attest
from attest.errors import AttestError, CommonCode, all_reason_codes

TESTS = Path(__file__).parent


def _load_everything() -> None:
    for mod in pkgutil.walk_packages(attest.__path__, "attest."):
        if not mod.name.endswith("__main__"):
            importlib.import_module(mod.name)


def test_every_reason_code_appears_in_a_test() -> None:
    _load_everything()
    codes = all_reason_codes()
    assert "SYMLINK" in codes and "MISSING" in codes
    corpus = "\n".join(p.read_text() for p in TESTS.rglob("*.py"))
    missing = sorted(
        code
        for code in codes
        if not re.search(rf"[\"']{re.escape(code)}[\"']|\.{re.escape(code)}\b", corpus)
    )
    assert missing == [], f"reason codes no test provokes: {missing}"


def test_an_error_without_a_reason_is_internal() -> None:
    err = AttestError()
    assert err.code == "INTERNAL" == CommonCode.INTERNAL and err.to_json()["ok"] is False
