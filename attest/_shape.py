"""One strict reader of parsed documents (JSON, TOML, API answers), shared by every parser.

A :class:`Shape` is a value and the dotted path it was found at. Each accessor reads one field
(or the value itself), checks it, and returns it typed; a refusal is the caller's own exception,
built by its ``error`` factory from a message that names the field::

    handoff.images.procedure.identity: expected sha256:<64 hex>
    lock.packages[3].wheels[0].size: expected a non-negative integer

so the exception type and reason code stay the parser's, only the detail gains the field.

    >>> s = Shape({"id": 0}, "repository", error=ValueError)
    >>> s.positive_int("id")   # ValueError("repository.id: expected a positive integer")
"""

from __future__ import annotations

import datetime
import os
import re
from collections.abc import Callable, Collection
from typing import NoReturn

from ._json import MAX_SAFE_INT

__all__ = ["MAX_SAFE_INT", "ErrorFactory", "Shape"]
#: A parsed value, not yet judged (the class's method ``object`` would shadow the builtin in its annotations).
Raw = object
#: Builds the parser's own exception from a detail that names the field.
ErrorFactory = Callable[[str], Exception]


_END = "\\Z"
# ASCII digits only (a str pattern's \d matches every Unicode digit), each field in its range; strptime then refuses 02-31.
_UTC_TIME = re.compile(r"[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]Z\Z")


def _describe(pattern: re.Pattern[str]) -> str:
    return "a string matching " + pattern.pattern.removesuffix(_END)


class Shape:
    """A value at ``where`` (a dotted path: ``state.base.commit``, ``record.authority_changes[2]``).

    Accessors with a ``key`` read that field of this object (a missing field is refused as
    missing); with ``key`` None they read the value itself.

    Raises:
        Whatever ``error`` builds, for every refusal.
    """

    __slots__ = ("_error", "value", "where")

    def __init__(self, value: Raw, where: str, error: ErrorFactory) -> None:
        self.value = value
        self.where = where
        self._error = error

    # -- paths and refusals -------------------------------------------------------------------------------------

    def path(self, key: str | None = None) -> str:
        """The dotted path of this value (or of its field ``key``); the root of an unnamed value is ``the value``."""
        if key is None:
            return self.where or "the value"
        return f"{self.where}.{key}" if self.where else key

    def fail(self, expected: str, key: str | None = None) -> NoReturn:
        """Refuse this value (or its field ``key``): ``<path>: expected <expected>``."""
        raise self._error(f"{self.path(key)}: expected {expected}")

    def refuse(self, detail: str, key: str | None = None) -> NoReturn:
        """Refuse this value (or its field ``key``) with a detail of the caller's: ``<path> <detail>``."""
        raise self._error(f"{self.path(key)} {detail}")

    def check(self, ok: bool, expected: str, key: str | None = None) -> None:
        """Refuse unless ``ok``: a condition of the caller's on this value or its field ``key``."""
        if not ok:
            self.fail(expected, key)

    def with_error(self, error: ErrorFactory) -> Shape:
        """This value, refused with another factory (a field whose failure has a code of its own)."""
        return Shape(self.value, self.where, error)

    # -- objects ------------------------------------------------------------------------------------------------

    def _dict(self) -> dict[str, object]:
        if not isinstance(self.value, dict):
            self.fail("an object")
        return self.value

    def object(self, exact: Collection[str] | None = None, *, allowed: Collection[str] | None = None,
               required: Collection[str] = ()) -> Shape:
        """This value as an object: of exactly the fields ``exact``, or of no field outside ``allowed``,
        with every field of ``required``."""
        obj = self._dict()
        if exact is not None and set(obj) != set(exact):
            self.fail(f"an object of exactly {sorted(exact)}")
        if allowed is not None and not set(obj) <= set(allowed):
            self.refuse(f"has unknown keys {sorted(set(obj) - set(allowed))}")
        missing = [k for k in required if k not in obj]
        if missing:
            self.refuse(f"lacks {sorted(missing)}")
        return self

    def exact_keys(self, *keys: str) -> Shape:
        return self.object(keys)

    def has(self, key: str) -> bool:
        return key in self._dict()

    def get(self, key: str) -> Raw:
        """The raw field ``key`` of this object (None when absent), for a check of the caller's own."""
        return self._dict().get(key)

    def keys(self) -> frozenset[str]:
        return frozenset(self._dict())

    def at(self, *keys: str) -> Shape:
        """The field ``keys[0]`` of this object, its field ``keys[1]``, ...; a missing one is refused."""
        here = self
        for key in keys:
            obj = here._dict()
            if key not in obj:
                here.refuse("is missing", key)
            here = Shape(obj[key], here.path(key), here._error)
        return here

    def _of(self, key: str | None) -> Shape:
        return self if key is None else self.at(key)

    def nested(self, key: str, exact: Collection[str] | None = None, *, allowed: Collection[str] | None = None,
               required: Collection[str] = ()) -> Shape:
        """The field ``key`` as an object (see :meth:`object`)."""
        return self.at(key).object(exact, allowed=allowed, required=required)

    def optional(self, key: str) -> Shape | None:
        """The field ``key``, or None when it is absent or null."""
        obj = self._dict()
        if obj.get(key) is None:
            return None
        return Shape(obj[key], self.path(key), self._error)

    def entries(self) -> list[tuple[str, Shape]]:
        """Each field of this object, as (name, value)."""
        return [(k, Shape(v, self.path(k), self._error)) for k, v in self._dict().items()]

    # -- scalars ------------------------------------------------------------------------------------------------

    def string(self, key: str | None = None, *, pattern: re.Pattern[str] | None = None, expected: str | None = None,
               empty: bool = False) -> str:
        """A string (non-empty unless ``empty``) matching ``pattern`` (``re.match``: anchor its end)."""
        s = self._of(key)
        value = s.value
        if not isinstance(value, str) or (not value and not empty) or (pattern is not None and not pattern.match(value)):
            s.fail(expected or (_describe(pattern) if pattern is not None else "a string" if empty else "a non-empty string"))
        return value

    def absolute_path(self, key: str | None = None) -> str:
        """A normalized absolute path (no '.', '..', '//' or trailing '/', no NUL): one spelling of one place."""
        s = self._of(key)
        path = s.value
        if not (isinstance(path, str) and os.path.isabs(path) and os.path.normpath(path) == path and not path.startswith("//")
                and "\0" not in path):
            s.fail("a normalized absolute path")
        return path

    def utc_time(self, key: str | None = None) -> str:
        """A UTC time ``YYYY-MM-DDTHH:MM:SSZ`` of a day that exists (not 2026-02-31)."""
        s = self._of(key)
        value = s.value
        ok = isinstance(value, str) and _UTC_TIME.match(value) is not None
        if ok:
            try:
                datetime.datetime.strptime(str(value), "%Y-%m-%dT%H:%M:%SZ")
            except ValueError:
                ok = False
        if not ok:
            s.fail("a UTC time YYYY-MM-DDTHH:MM:SSZ")
        return str(value)

    def optional_string(self, key: str, *, pattern: re.Pattern[str] | None = None, expected: str | None = None,
                        empty: bool = True, present: bool = False) -> str | None:
        """A string or null (None); an absent field is None too, unless ``present`` (then it is refused)."""
        if present:
            self.at(key)
        s = self.optional(key)
        return None if s is None else s.string(pattern=pattern, expected=expected, empty=empty)

    def one_of(self, key: str | None, choices: Collection[str]) -> str:
        """One of the strings ``choices``."""
        s = self._of(key)
        value = s.value
        if not isinstance(value, str) or value not in choices:
            s.fail(f"one of {sorted(choices)}")
        return value

    def integer(self, key: str | None = None, *, minimum: int = 1, maximum: int | None = None) -> int:
        """An integer (never a boolean) of at least ``minimum`` and at most ``maximum`` (None: no bound;
        :data:`MAX_SAFE_INT` is JSON's interoperable one)."""
        s = self._of(key)
        value = s.value
        if type(value) is not int or value < minimum or (maximum is not None and value > maximum):
            kind = "a positive integer" if minimum == 1 else "a non-negative integer" if minimum == 0 else \
                f"an integer of at least {minimum}"
            s.fail(kind if maximum is None else f"{kind} of at most {maximum}")
        return value

    def positive_int(self, key: str | None = None, *, maximum: int | None = None) -> int:
        return self.integer(key, minimum=1, maximum=maximum)

    def non_negative_int(self, key: str | None = None, *, maximum: int | None = None) -> int:
        return self.integer(key, minimum=0, maximum=maximum)

    def optional_int(self, key: str, *, minimum: int = 1, maximum: int | None = None, present: bool = False) -> int | None:
        """An integer or null (None); an absent field is None too, unless ``present``."""
        if present:
            self.at(key)
        s = self.optional(key)
        return None if s is None else s.integer(minimum=minimum, maximum=maximum)

    def boolean(self, key: str | None = None) -> bool:
        s = self._of(key)
        if type(s.value) is not bool:
            s.fail("a boolean")
        return s.value is True

    def optional_boolean(self, key: str, *, present: bool = False) -> bool | None:
        if present:
            self.at(key)
        s = self.optional(key)
        return None if s is None else s.boolean()

    # -- lists --------------------------------------------------------------------------------------------------

    def list_of(self, key: str | None = None, *, non_empty: bool = False, maximum: int | None = None) -> list[Shape]:
        """A list (non-empty if asked, of at most ``maximum`` items), each item a Shape at ``<path>[i]``."""
        s = self._of(key)
        value = s.value
        if not isinstance(value, list):
            s.fail("a list")
        if non_empty and not value:
            s.fail("a non-empty list")
        if maximum is not None and len(value) > maximum:
            s.fail(f"a list of at most {maximum} items")
        return [Shape(item, f"{s.path()}[{i}]", s._error) for i, item in enumerate(value)]

    def strings(self, key: str | None = None, *, pattern: re.Pattern[str] | None = None, expected: str | None = None,
                empty: bool = False) -> tuple[str, ...]:
        """A list of strings (each non-empty unless ``empty``, each matching ``pattern``)."""
        return tuple(item.string(pattern=pattern, expected=expected, empty=empty) for item in self.list_of(key))

