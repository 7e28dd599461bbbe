"""Release checks that need the review layer: `attest promote` bootstraps and reviews a fixture consumer with the candidate.

:func:`promote_release` (what ``attest promote`` calls) runs the build layer's promotion
(:func:`attest.builder.run_promote`: k of n independent rebuilders, pinned identities, the
promotion log) with :class:`FixtureRun` as its ``before_write`` hook: the whole
``attest bootstrap`` and ``attest review start`` on the fixture consumer repository shipped in
``builders/fixture-consumer/`` (:func:`load_fixture`), with the candidate runtime and skill,
before the pins are written.

    >>> from attest.review.release import promote_release
    >>> result = promote_release(sha, "pins.toml", "release.pem", "release-policy.toml", runtime_recipe="builders/runtime.toml",
    ...                          skill_recipe="builders/skill.toml", state=".attest-state", rebuild_results=["a.json", "b.json"])
"""

from __future__ import annotations

from ._codes import ReleaseCode
from ._fixture import (
    ADAPTER,
    SEMANTIC,
    FixtureConsumer,
    FixtureRun,
    ImageGenerator,
    PolicyGenerator,
    fixture_trust,
    load_fixture,
    make_consumer,
)
from ._promote import DEFAULT_FIXTURE, promote_release

__all__ = [
    "ADAPTER",
    "DEFAULT_FIXTURE",
    "SEMANTIC",
    "FixtureConsumer",
    "FixtureRun",
    "ImageGenerator",
    "PolicyGenerator",
    "ReleaseCode",
    "fixture_trust",
    "load_fixture",
    "make_consumer",
    "promote_release",
]
