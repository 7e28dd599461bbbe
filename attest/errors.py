"""The one exception hierarchy of attest, and the shape of a finding.

Every failure the product reports is an :class:`AttestError` carrying a stable reason
``code``, an optional ``path`` and a ``detail`` a person can act on. Who is at fault
decides the class, and the class decides the exit code:

- :class:`InputError` (exit 2): bad usage or unreadable / malformed input;
- :class:`VerificationError` (exit 1): the input was read and does not verify;
- :class:`EnvironmentFailure` (exit 1): a guarantee could not be established here
  (missing capability, no network namespace, ...); it fails closed like a verification.

Reason codes are closed sets: each layer declares its codes as a :class:`ReasonCode`
subclass, so tests can enumerate every code the product can emit.

    >>> raise VerificationError(findings=[Finding("MISSING", "a/b", "expected file is absent")])
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass


class ReasonCode(enum.StrEnum):
    """Base of every layer's reason-code enum. Values are the stable wire strings."""


class CommonCode(ReasonCode):
    UNREADABLE = "UNREADABLE"
    BAD_JSON = "BAD_JSON"
    DUPLICATE_KEY = "DUPLICATE_KEY"
    TOO_LARGE = "TOO_LARGE"
    TOO_DEEP = "TOO_DEEP"
    NOT_CANONICAL = "NOT_CANONICAL"
    BAD_OUTPUT_PATH = "BAD_OUTPUT_PATH"
    # A command-line usage mistake: contradictory options, or an option without its required companion.
    USAGE = "USAGE"
    INTERNAL = "INTERNAL"


@dataclass(frozen=True, slots=True)
class Finding:
    """One thing that is wrong, with a stable code and the path it concerns."""

    code: str
    path: str | None
    detail: str

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {"code": str(self.code), "detail": self.detail}
        if self.path is not None:
            out["path"] = self.path
        return out

    def __str__(self) -> str:
        where = f"{self.path}: " if self.path is not None else ""
        return f"{self.code}: {where}{self.detail}"


class AttestError(Exception):
    """Root of every error attest raises on purpose."""

    exit_code = 2

    def __init__(
        self,
        code: str | None = None,
        detail: str = "",
        path: str | None = None,
        *,
        findings: Iterable[Finding] = (),
    ) -> None:
        found = tuple(findings)
        if code is not None:
            found = (Finding(str(code), path, detail), *found)
        if not found:
            # An error without a reason would render as an empty failure: refuse to build one.
            found = (Finding(CommonCode.INTERNAL, path, detail or "unspecified failure"),)
        self.findings: tuple[Finding, ...] = found
        super().__init__("; ".join(str(f) for f in found[:5]) + (" ..." if len(found) > 5 else ""))

    @property
    def code(self) -> str:
        return self.findings[0].code

    @property
    def path(self) -> str | None:
        return self.findings[0].path

    @property
    def detail(self) -> str:
        return self.findings[0].detail

    def to_json(self) -> dict[str, object]:
        return {"ok": False, "errors": [f.to_json() for f in self.findings]}


class InputError(AttestError):
    """Bad usage or input that cannot be read or parsed (exit 2)."""

    exit_code = 2


class VerificationError(AttestError):
    """The input was read and does not verify (exit 1)."""

    exit_code = 1


class EnvironmentFailure(AttestError):
    """A required guarantee cannot be established on this machine (exit 1, fail closed)."""

    exit_code = 1


def all_reason_codes() -> dict[str, type[ReasonCode]]:
    """Every reason code of every loaded layer, mapped to the enum that declares it."""
    out: dict[str, type[ReasonCode]] = {}
    pending: list[type[ReasonCode]] = list(ReasonCode.__subclasses__())
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        for member in cls:
            if member.value in out and out[member.value] is not cls:
                # One wire string, two meanings: a reader could not tell which layer failed.
                raise TypeError(f"reason code {member.value!r} is declared by both {out[member.value].__name__} and {cls.__name__}")
            out[member.value] = cls
    return out
