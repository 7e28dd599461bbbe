"""`attest store ls` and `store gc` say what they know: a broken image is a failure, an
unchecked one is not said to hold, a kept (pinned) image that no longer holds is reported, and a malformed
--keep is bad usage."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from attest.cli import main
from attest.freeze import freeze_tree
from attest.inventory import Inventory


def _broken(src: Path, expected: Inventory, state: Path) -> str:
    """A real image of the readonly backend, then a byte changed by its owner (who can: readonly holds only against others)."""
    image = freeze_tree(src, expected, state, backend="readonly")
    victim = Path(image.path) / "README"
    os.chmod(victim, 0o644)
    victim.write_bytes(b"tampered\n")
    return image.identity


def test_ls_without_check_does_not_claim_an_image_holds(src: Path, expected: Inventory, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    state = tmp_path / "state"
    ident = _broken(src, expected, state)
    assert main(["store", "ls", "--state-dir", str(state), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["ok"] is True and [(i["identity"], i["holds"]) for i in doc["images"]] == [(ident, None)]


@pytest.mark.parametrize("json_mode", [True, False])
def test_ls_check_fails_on_a_broken_image(src: Path, expected: Inventory, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                          json_mode: bool) -> None:
    state = tmp_path / "state"
    ident = _broken(src, expected, state)
    rc = main(["store", "ls", "--state-dir", str(state), "--check", *(["--json"] if json_mode else [])])
    out, err = capsys.readouterr()
    assert rc == 1
    if json_mode:
        doc = json.loads(out)
        assert doc["ok"] is False and doc["images"][0]["identity"] == ident and doc["images"][0]["holds"] is False
        assert doc["errors"] and all(e["code"] for e in doc["errors"])
    else:
        assert f"{ident}" in out and "BROKEN" in out and "FAILED" in err


def test_gc_reports_a_kept_image_that_no_longer_holds(src: Path, expected: Inventory, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    state = tmp_path / "state"
    ident = _broken(src, expected, state)
    absent = "sha256:" + "0" * 64
    rc = main(["store", "gc", "--state-dir", str(state), "--keep", ident, "--keep", absent, "--recent", "0", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 1 and doc["ok"] is False and doc["kept"] == [ident] and doc["removed"] == []
    assert {e.get("path") for e in doc["broken"]} >= {absent} and "NOT_IN_STORE" in {e["code"] for e in doc["broken"]}
    assert len(doc["broken"]) >= 2  # the tampered image's own findings, and the absent one


@pytest.mark.parametrize("bad", ["3f1c", "sha256:XYZ", "sha256:" + "0" * 63])
def test_gc_with_a_malformed_keep_is_bad_usage(tmp_path: Path, capsys: pytest.CaptureFixture[str], bad: str) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    assert main(["store", "gc", "--state-dir", str(state), "--keep", bad, "--json"]) == 2
    assert json.loads(capsys.readouterr().out)["errors"][0]["code"] == "BAD_IMAGE_REF"
