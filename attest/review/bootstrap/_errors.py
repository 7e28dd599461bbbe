"""The bootstrap's failure: the lower layer's findings, with the step (1-9) that failed."""

from __future__ import annotations

from ...errors import AttestError


class BootstrapError(AttestError):
    """Step ``step`` of the bootstrap failed; nothing after it ran.

    Carries the findings of the error that stopped it and keeps its exit code (2: bad usage or
    unreadable input, 1: verification failed, or a guarantee could not be established).

    Raises:
        Nothing: it is the exception :func:`bootstrap` raises; constructing and ``to_json``
        raise nothing.
    """

    def __init__(self, step: int, cause: AttestError) -> None:
        super().__init__(findings=cause.findings)
        self.step = step
        self.exit_code = cause.exit_code
        self.cause = cause

    def to_json(self) -> dict[str, object]:
        return {"ok": False, "step": self.step, "errors": [f.to_json() for f in self.findings]}


__all__ = ["BootstrapError"]
