"""The demo's trusted review chain (issue 12): promote, install, a consumer repository, `attest bootstrap`, a refusal.

Needs the project's runtime built from its own lock, hence the package registry and the build
sandbox: marked ``registry`` and skipped where either is missing (tests/test_demo.py runs the
rest of the demo offline).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from support.build import registry_reachable

from attest.cli import main


def _sandbox_available() -> bool:
    from attest.build import Sandbox
    from attest.errors import EnvironmentFailure

    try:
        Sandbox.establish(allow_unisolated_network=False)
    except EnvironmentFailure:
        return False
    return True


@pytest.mark.registry
@pytest.mark.skipif(not registry_reachable(), reason="the package registry is unreachable")
@pytest.mark.skipif(not _sandbox_available(), reason="the build sandbox cannot be established here")
def test_the_demo_hands_off_a_pull_request_and_refuses_a_changed_base(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    state = tmp_path / "state"
    assert main(["demo", "--state-dir", str(state)]) == 0
    out = capfd.readouterr().out
    chain = out[out.index("\n12. install the promoted skill"):]
    for name in ("bootstrap", "runtime", "base", "procedure"):
        assert re.search(rf"^   {name} +sha256:[0-9a-f]{{64}} \((immutable|readonly)\)$", chain, re.M), chain
    handoff = re.search(r"^   handoff written: (\S+) \(sha256:[0-9a-f]{64}\)$", chain, re.M)
    assert handoff is not None and Path(handoff.group(1)) == state / "review" / "handoff.json" and Path(handoff.group(1)).is_file()
    assert "refused at step 6, as it must be (a stale authority at the base): CHECK_FAILED" in chain
    assert "INPUT_DIGEST_MISMATCH: policy/core/evidence.md" in chain
    assert out.rstrip().endswith("demo complete: every check ended as it must.")
    # The installed Skill was temporary and outside the state; nothing of it is left.
    assert not list((state / "installations").iterdir())
