"""Helpers of the strict-shape table tests: one bad field of a good document, and what the refusal said."""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from typing import Any

import pytest

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


def rows(parsers: list[tuple[str, Callable[[Any], object], Any, list[tuple[Path_, Any, str, str]]]]) -> list[Any]:
    """One ``pytest.param(parse, doc, at, value, code, field)`` per case of each ``(name, parse, doc, cases)``, with an id
    that names the parser, the field and the value (never an object's address: xdist workers must collect the same ids)."""
    return [pytest.param(parse, doc, at, value, code, field,
                         id=f"{name}: {'.'.join(map(str, at))}={'DROP' if value is DROP else repr(value)[:40]}")
            for name, parse, doc, cases in parsers for at, value, code, field in cases]
