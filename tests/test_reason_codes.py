"""Every reason code the product can emit is produced by at least one test.

``support.reason_record`` records each reason code the package actually constructs while the
suite runs (findings, errors, evidence verdicts, wrapper results); when the whole suite has run,
the session fails unless every code of every layer's ``ReasonCode`` enum was produced.
"""

from __future__ import annotations

import importlib
import pkgutil

import attest
from attest.errors import AttestError, CommonCode, Finding, all_reason_codes


def _load_everything() -> None:
    for mod in pkgutil.walk_packages(attest.__path__, "attest."):
        if not mod.name.endswith("__main__"):
            importlib.import_module(mod.name)


def unproduced_codes(produced: set[str]) -> list[str]:
    """The reason codes of every layer that are not in ``produced``."""
    _load_everything()
    return sorted(set(all_reason_codes()) - produced)


def test_every_layer_declares_its_codes() -> None:
    _load_everything()
    codes = all_reason_codes()
    assert {"SYMLINK", "MISSING", "DIGEST_MISMATCH", "INTERNAL"} <= set(codes)


def test_the_record_sees_what_is_constructed() -> None:
    from support.reason_record import PRODUCED

    Finding("MISSING", "a", "absent")
    assert "MISSING" in PRODUCED
    _load_everything()
    everything = set(all_reason_codes())
    assert unproduced_codes(everything) == []
    assert unproduced_codes(everything - {"MISSING"}) == ["MISSING"]


def test_an_error_without_a_reason_is_internal() -> None:
    err = AttestError()
    assert err.code == "INTERNAL" == CommonCode.INTERNAL and err.to_json()["ok"] is False


def test_two_layers_declaring_one_code_is_an_error() -> None:
    import pytest

    from attest.errors import ReasonCode

    class _Clash(ReasonCode):
        MISSING = "MISSING"  # the inventory layer's

    try:
        with pytest.raises(TypeError, match="MISSING"):
            all_reason_codes()
    finally:
        # __subclasses__ holds weak references: once collected, no later enumeration sees it.
        del _Clash
        import gc

        gc.collect()
    _load_everything()
    assert "MISSING" in all_reason_codes()
