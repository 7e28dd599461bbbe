"""The public bootstrap takes no override of what runs the managed check or which runtime is trusted (ADR-0008).

"No repository-policy-root override, procedure/toolchain override, alternate loader, or other
out-of-band review-authority path is part of this repository contract": a library caller of
``attest.review.bootstrap.bootstrap`` (or of ``attest promote``'s ``promote_release``) cannot hand in
a step-6 runner, a runtime attestation or a policy generator. Tests that need a seam use the private
functions (``_bootstrap``, ``_promote_release``).
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

import pytest

from attest.review.bootstrap import CheckRun, bootstrap
from attest.review.release import FixtureRun, promote_release

SEAMS = ("runner", "runtime_attestation", "attestation", "generator", "check_runner")


def test_the_public_bootstrap_has_no_runner_or_runtime_override() -> None:
    params = inspect.signature(bootstrap).parameters
    assert not set(SEAMS) & set(params), list(params)
    assert not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


@pytest.mark.parametrize("seam", ["runner", "runtime_attestation"])
def test_passing_a_seam_to_the_public_bootstrap_is_a_type_error(seam: str, tmp_path: Any) -> None:
    ran: list[str] = []

    def runner(runtime: Any, base: Any) -> CheckRun:
        ran.append("runner")
        return CheckRun(0, b"")

    value: Any = runner if seam == "runner" else tmp_path / "runtime.json"
    with pytest.raises(TypeError, match=seam):
        bootstrap(pins=tmp_path / "pins.toml", trust=tmp_path / "trust.toml", state_dir=tmp_path, skill_dir=tmp_path / "skill",  # type: ignore[call-arg]
                  installation=tmp_path / "att.json", repo=tmp_path / "repo", host=object(), key="k.pem",  # type: ignore[arg-type]
                  out=tmp_path / "handoff.json", **{seam: value})
    assert ran == [] and not (tmp_path / "handoff.json").exists()


def test_the_public_promotion_has_no_fixture_runner_or_generator_override(tmp_path: Any) -> None:
    params = inspect.signature(promote_release).parameters
    assert not set(SEAMS) & set(params), list(params)
    assert not set(SEAMS) & {f.name for f in dataclasses.fields(FixtureRun)}
    with pytest.raises(TypeError, match="runner"):
        promote_release("a" * 40, "pins.toml", "k.pem", "p.toml", runtime_recipe="r.toml", skill_recipe="s.toml",  # type: ignore[call-arg]
                        state=str(tmp_path), runner=lambda runtime, base: CheckRun(0, b""))
