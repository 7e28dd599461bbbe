"""The machine markers of a trusted-wrapper review body, parsed and rendered in one place.

A marker is a whole line of the review body, byte for byte one of::

    <!-- opencode-review: clean -->
    <!-- opencode-review: workflow-run id=<GITHUB_RUN_ID> attempt=<GITHUB_RUN_ATTEMPT> -->
    <!-- opencode-review: base sha=<BASE_SHA> -->
    <!-- opencode-review: findings count=<N> -->
    <!-- opencode-review: diagnostic -->

Any other line that mentions ``opencode-review:`` is *malformed*; a review holding one is
never clean (fail closed on near-miss markers such as extra spaces or leading zeros).

The base marker records the base commit the run reviewed (``BASE_SHA...HEAD_SHA``); the head
is bound by the review's own ``commit_id``. It is a line of its own, not a field of the run
marker, so a review posted before it existed still parses (and never qualifies: no base).

    >>> parse_markers("ok\\n<!-- opencode-review: clean -->\\n").clean
    1
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MARKER_TAG = "opencode-review:"
CLEAN = "<!-- opencode-review: clean -->"
DIAGNOSTIC = "<!-- opencode-review: diagnostic -->"
_NUM = r"(0|[1-9][0-9]{0,15})"
_RUN = re.compile(rf"<!-- opencode-review: workflow-run id={_NUM} attempt={_NUM} -->")
_FINDINGS = re.compile(rf"<!-- opencode-review: findings count={_NUM} -->")
_BASE = re.compile(r"<!-- opencode-review: base sha=([0-9a-f]{40}|[0-9a-f]{64}) -->")


def run_marker(run_id: int, attempt: int) -> str:
    return f"<!-- opencode-review: workflow-run id={run_id} attempt={attempt} -->"


def findings_marker(count: int) -> str:
    return f"<!-- opencode-review: findings count={count} -->"


def base_marker(base_sha: str) -> str:
    return f"<!-- opencode-review: base sha={base_sha} -->"


@dataclass(frozen=True, slots=True)
class Markers:
    """What the marker lines of one review body say."""

    clean: int
    diagnostic: int
    findings: tuple[int, ...]
    runs: tuple[tuple[int, int], ...]
    malformed: int
    bases: tuple[str, ...]

    @property
    def is_clean(self) -> bool:
        """Exactly one clean marker and nothing that contradicts it."""
        return self.clean == 1 and not self.diagnostic and not self.findings and not self.malformed


def parse_markers(body: str) -> Markers:
    """Count the ``opencode-review`` marker lines of a review body (one trailing CR allowed).

    Raises:
        Nothing: a marker line that does not parse is counted in ``malformed``.
    """
    clean = diagnostic = malformed = 0
    findings: list[int] = []
    runs: list[tuple[int, int]] = []
    bases: list[str] = []
    for raw in body.split("\n"):
        # GitHub stores bodies typed in a browser with CRLF; one trailing CR is the line ending.
        line = raw[:-1] if raw.endswith("\r") else raw
        if MARKER_TAG not in line:
            continue
        if line == CLEAN:
            clean += 1
        elif line == DIAGNOSTIC:
            diagnostic += 1
        elif m := _RUN.fullmatch(line):
            run_id, attempt = int(m.group(1)), int(m.group(2))
            if run_id < 1 or attempt < 1:
                malformed += 1
            else:
                runs.append((run_id, attempt))
        elif m := _FINDINGS.fullmatch(line):
            findings.append(int(m.group(1)))
        elif m := _BASE.fullmatch(line):
            bases.append(m.group(1))
        else:
            malformed += 1
    return Markers(clean, diagnostic, tuple(findings), tuple(runs), malformed, tuple(bases))
