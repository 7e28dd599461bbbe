"""The machine markers of a trusted-wrapper body (a review, or the same body as an issue comment), parsed and rendered in one place.

A marker is a whole line of the body, byte for byte one of::

    <!-- opencode-review: clean -->
    <!-- opencode-review: workflow-run id=<GITHUB_RUN_ID> attempt=<GITHUB_RUN_ATTEMPT> -->
    <!-- opencode-review: base sha=<BASE_SHA> -->
    <!-- opencode-review: head sha=<HEAD_SHA> -->
    <!-- opencode-review: findings count=<N> -->
    <!-- opencode-review: diagnostic -->

Any other line that mentions ``opencode-review:`` is *malformed*; a review holding one is
never clean (fail closed on near-miss markers such as extra spaces or leading zeros).

The base marker records the base commit the run reviewed (``BASE_SHA...HEAD_SHA``). A review's
head is bound by its own ``commit_id``; the head marker says the same in the body, so that the
body posted as an issue comment (which has no ``commit_id``) still names its head. Each is a
line of its own, not a field of the run marker, so a body written before it existed still
parses (a review without a base marker never qualifies; one without a head marker is bound
by its ``commit_id`` alone).

What a body *is* follows from its markers alone (docs/evidence.md "Markers"):

- a **diagnostic** body carries the diagnostic marker (the model result was not one valid
  findings block);
- a **findings** body carries a findings marker (action required). Posted as an issue
  comment, because the review could not be posted, it is a **fallback comment**;
- a **no-findings** (clean) body carries the clean marker and nothing actionable.

:attr:`Markers.actionable` is true for the first two, and for any malformed marker line.

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
_HEAD = re.compile(r"<!-- opencode-review: head sha=([0-9a-f]{40}|[0-9a-f]{64}) -->")


def run_marker(run_id: int, attempt: int) -> str:
    return f"<!-- opencode-review: workflow-run id={run_id} attempt={attempt} -->"


def findings_marker(count: int) -> str:
    return f"<!-- opencode-review: findings count={count} -->"


def base_marker(base_sha: str) -> str:
    return f"<!-- opencode-review: base sha={base_sha} -->"


def head_marker(head_sha: str) -> str:
    return f"<!-- opencode-review: head sha={head_sha} -->"


@dataclass(frozen=True, slots=True)
class Markers:
    """What the marker lines of one body (a review's, or an issue comment's) say."""

    clean: int
    diagnostic: int
    findings: tuple[int, ...]
    runs: tuple[tuple[int, int], ...]
    malformed: int
    bases: tuple[str, ...]
    heads: tuple[str, ...] = ()

    @property
    def is_clean(self) -> bool:
        """Exactly one clean marker and nothing that contradicts it."""
        return self.clean == 1 and not self.actionable

    @property
    def actionable(self) -> bool:
        """A diagnostic or findings marker, or a malformed marker line: the body asks for action."""
        return bool(self.diagnostic or self.findings or self.malformed)


def parse_markers(body: str) -> Markers:
    """Count the ``opencode-review`` marker lines of a body (one trailing CR allowed).

    Raises:
        Nothing: a marker line that does not parse is counted in ``malformed``.
    """
    clean = diagnostic = malformed = 0
    findings: list[int] = []
    runs: list[tuple[int, int]] = []
    bases: list[str] = []
    heads: list[str] = []
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
        elif m := _HEAD.fullmatch(line):
            heads.append(m.group(1))
        else:
            malformed += 1
    return Markers(clean, diagnostic, tuple(findings), tuple(runs), malformed, tuple(bases), tuple(heads))
