"""Helpers of the strict-shape table tests: one bad field of a good document, and what the refusal said."""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from typing import Any

from attest.errors import AttestError
from attest.review.evidence._model import ShapeError

DROP = object()  # as a row's value: the field is removed
Path_ = tuple[str | int, ...]


def mutated(doc: Any, at: Path_, value: Any) -> Any:
    """A deep copy of ``doc`` with the field at ``at`` set to ``value`` (or removed: DROP)."""
    out = copy.deepcopy(doc)
    parent = out
    for key in at[:-1]:
        parent = parent[key]
    if value is DROP:
        del parent[at[-1]]
    else:
        parent[at[-1]] = value
    return out


def names(message: str, field: str) -> bool:
    """Whether ``message`` names exactly ``field`` (not a longer path it is a prefix of)."""
    return re.search(re.escape(field) + r"(?=[: ]|$)", message) is not None


def refused(parse: Callable[[Any], object], doc: Any) -> tuple[str, str]:
    """(code, message) of the one refusal of ``doc``; a ShapeError (no code of its own) is ``ShapeError``; accepted fails."""
    try:
        parse(doc)
    except AttestError as e:
        assert len(e.findings) == 1, e.findings
        return e.code, e.detail
    except ShapeError as e:
        return "ShapeError", str(e)
    raise AssertionError("accepted")
