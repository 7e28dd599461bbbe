"""A count and its noun in the number it takes, shared by every layer: ``1 entry``, ``2 entries``, ``0 files``.

    >>> count(1, "entry"), count(2, "entry"), count(0, "file"), count(1, "identity"), count(3, "identity")
    ('1 entry', '2 entries', '0 files', '1 identity', '3 identities')
"""

from __future__ import annotations

_VOWELS = frozenset("aeiou")


def plural(noun: str) -> str:
    """The regular English plural of ``noun`` (its last word): entry -> entries, key -> keys, box -> boxes, file -> files."""
    if noun.endswith("y") and len(noun) > 1 and noun[-2] not in _VOWELS:
        return noun[:-1] + "ies"
    if noun.endswith(("s", "x", "z", "ch", "sh")):
        return noun + "es"
    return noun + "s"


def count(n: int, noun: str, nouns: str | None = None) -> str:
    """``n`` and ``noun``, or its plural (``nouns``, else :func:`plural`) unless ``n`` is 1."""
    return f"{n} {noun if n == 1 else (nouns if nouns is not None else plural(noun))}"
