"""Reason codes of ``attest review agent`` (stable wire strings; see docs/review-agent.md)."""

from __future__ import annotations

from ...errors import ReasonCode


class AgentCode(ReasonCode):
    AGENT_INPUT_MISSING = "AGENT_INPUT_MISSING"      # a variable of the confinement or a file of the change image is missing or unreadable
    AGENT_INPUT_MALFORMED = "AGENT_INPUT_MALFORMED"  # review.json, surface.json or a projection is not the documented shape, or they disagree
    AGENT_FAILED = "AGENT_FAILED"                    # CMD could not start, exited non-zero or was killed by a signal
    AGENT_TIMEOUT = "AGENT_TIMEOUT"                  # CMD ran past --timeout: its whole process group was killed
    AGENT_OUTPUT_TOO_LARGE = "AGENT_OUTPUT_TOO_LARGE"  # CMD printed more than 1 MiB on stdout: reading stopped, its group was killed
    AGENT_OUTPUT_INVALID = "AGENT_OUTPUT_INVALID"    # CMD's stdout is not exactly one well-formed findings block


__all__ = ["AgentCode"]
