"""The one YAML reader of attest: a strict subset that every YAML reader reads the same way.

``.agent-policy.yml`` and the front matter of a generated ``SKILL.md`` are read here and
nowhere else (no second parser may read the same bytes differently). The document is built
from ruamel.yaml's *event* stream, never by its constructor, so nothing is resolved behind
our back. Refused, each with its own code: duplicate keys, anchors, aliases (and so merge
keys' usual companions), tags (``!!str``, ``!foo``, ``!``), ``%YAML`` / ``%TAG`` directives,
more than one document, keys that are not strings, and plain scalars that a YAML 1.1 or 1.2
reader could take for something other than a string (``yes``, ``~``, an empty value,
``1.0``, ``0o17``, ``2001-12-14``, ``<<``...). Accepted scalars: strings, ``true``/``false``
and decimal integers. Size, depth and node count are bounded.

    >>> load_strict_yaml(b"schema: 2\\nskills: {enabled: [pr-review]}\\n", what="config")
    {'schema': 2, 'skills': {'enabled': ['pr-review']}}
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterator
from typing import TYPE_CHECKING

from .._json import MAX_SAFE_INT, strict_text
from ..errors import CommonCode, InputError
from ._codes import PolicyCode

if TYPE_CHECKING:
    from ruamel.yaml.events import CollectionEndEvent, CollectionStartEvent, DocumentStartEvent, Event, ScalarEvent
    from ruamel.yaml.resolver import VersionedResolver

MAX_YAML_BYTES = 256 * 1024
MAX_YAML_DEPTH = 16
MAX_YAML_NODES = 20_000

_DECIMAL = re.compile(r"-?(?:0|[1-9][0-9]*)\Z")
_SAFE_INT_DIGITS = len(str(MAX_SAFE_INT))
# A double-quoted scalar's \uD800-\uDFFF escapes give lone UTF-16 surrogates: no Unicode
# character, refused by libyaml and by the JSON reader (and not encodable as UTF-8 downstream).
_SURROGATE = re.compile("[\ud800-\udfff]")
# What ruamel.yaml's scanner and parser raise, besides YAMLError, on bytes they cannot read:
# ValueError for an escape beyond U+10FFFF ("\U00110000") or a directive number of more than
# 4300 digits, OverflowError for an escape beyond 2^31 ("\UFFFFFFFF"), AssertionError for
# "%YAML 1.0" or "%YAML 1.3"; LookupError and TypeError on principle. Only the parser runs where
# they are caught, so each is a refusal of the input (YAML_SYNTAX), never INTERNAL.
_PARSER_FAILURES = (ValueError, ArithmeticError, AssertionError, LookupError, TypeError)
# YAML 1.1 reads U+0085, U+2028 and U+2029 as line breaks (ending a comment), YAML 1.2 as
# ordinary characters: one file, two documents. Refused anywhere in the text.
_BREAK_AMBIGUOUS = re.compile("[\x85\u2028\u2029]")
# A directive line of any name: ruamel.yaml ignores a reserved one (%FOO) that libyaml refuses.
_DIRECTIVE_LINE = re.compile(r"^%", re.M)
# Number-shaped plain scalars. Readers disagree about numbers far beyond the YAML tables
# (go-yaml strips '_' and takes 0X/0B/0O; the 1.2 core schema has '.1e1'), so the rule is
# conservative: starting like a number and made only of characters some number syntax uses,
# and either hex-prefixed or free of the letters no unprefixed number has (a c d f x). A
# commit SHA with any of those letters stays a string; quoting fixes everything else.
_NUMBER_SHAPED = re.compile(r"[-+]?[0-9.][0-9a-fA-FxXoObB._+\-:]*\Z")
_HEX_PREFIXED = re.compile(r"[-+]?0[xX]")
_HEX_ONLY_LETTERS = frozenset("acdfACDFxX")


def _number_shaped(value: str) -> bool:
    """Whether some YAML (or YAML-ish) reader may resolve the plain scalar ``value`` as a number."""
    if not _NUMBER_SHAPED.match(value):
        return False
    return bool(_HEX_PREFIXED.match(value)) or not (_HEX_ONLY_LETTERS & set(value))
_STR_TAG = "tag:yaml.org,2002:str"
_resolvers: tuple[VersionedResolver, VersionedResolver] | None = None


def _yaml_resolvers() -> tuple[VersionedResolver, VersionedResolver]:
    """ruamel.yaml's implicit-type tables for YAML 1.1 and 1.2 (built once)."""
    global _resolvers
    if _resolvers is None:
        from ruamel.yaml.resolver import VersionedResolver  # lazy: ruamel.yaml adds ~10 ms to attest.policy (-X importtime)

        _resolvers = (VersionedResolver(version=(1, 1)), VersionedResolver(version=(1, 2)))
    return _resolvers


def _other_readings(value: str) -> list[str]:
    """The non-string types a YAML 1.1 or 1.2 reader gives the plain scalar ``value``."""
    from ruamel.yaml.nodes import ScalarNode  # lazy: ruamel.yaml, only when YAML is read (see _yaml_resolvers)

    tags = {str(r.resolve(ScalarNode, value, (True, False))) for r in _yaml_resolvers()}
    return sorted(t.rsplit(":", 1)[-1] for t in tags if t != _STR_TAG)


def _plain_value(value: str, where: str, what: str) -> str | bool | int:
    """The one meaning of a plain (unquoted) scalar, or a refusal when readers could disagree."""
    if value in ("true", "false"):
        return value == "true"
    if _DECIMAL.match(value):
        # Length first: int() of more than 4300 digits raises ValueError (and is slow before that).
        if len(value.lstrip("-")) > _SAFE_INT_DIGITS or abs(number := int(value)) > MAX_SAFE_INT:
            raise InputError(PolicyCode.YAML_AMBIGUOUS_SCALAR, f"{what}: the integer {value[:30]} at {where} is out of range")
        return number
    others = _other_readings(value)
    if not others and _number_shaped(value):
        others = ["a number"]
    if others:
        shown = repr(value) if value else "an empty value"
        hint = "write true or false for a yes/no value, or quote it if a string is meant" if "bool" in others else \
            "quote it if a string is meant"
        raise InputError(
            PolicyCode.YAML_AMBIGUOUS_SCALAR,
            f"{what}: {shown} at {where} reads as {'/'.join(others)} to some YAML readers; {hint}",
        )
    return value


def _where(event: Event) -> str:
    mark = getattr(event, "start_mark", None)
    return f"line {mark.line + 1}, column {mark.column + 1}" if mark is not None else "?"


def _events(parser: Iterator[Event], what: str) -> Iterator[Event]:
    """ruamel.yaml's events; its failures that are not YAMLError refusals too (only the parser runs in this try)."""
    while True:
        try:
            event = next(parser, None)
        except _PARSER_FAILURES as e:
            raise InputError(PolicyCode.YAML_SYNTAX, f"{what} is not valid YAML: {type(e).__name__}: {str(e)[:200]}") from e
        if event is None:
            return
        yield event


class _Frame:
    __slots__ = ("container", "key", "lines")

    def __init__(self, container: dict[str, object] | list[object]) -> None:
        self.container = container
        self.key: str | None = None  # a mapping's key waiting for its value
        self.lines: dict[str, str] = {}


def _yaml_text(data: bytes, what: str, max_bytes: int) -> str:
    """Step 1: the text (the strict readers' one prelude), without a character YAML 1.1 and 1.2 break differently."""
    text = strict_text(data, what=what, max_bytes=max_bytes, code=PolicyCode.YAML_SYNTAX)
    odd = _BREAK_AMBIGUOUS.search(text)
    if odd is not None:
        line = text.count("\n", 0, odd.start()) + 1
        raise InputError(
            PolicyCode.YAML_SYNTAX,
            f"{what}: U+{ord(odd.group()):04X} on line {line} is a line break to YAML 1.1 readers and not to YAML 1.2 readers",
        )
    if "\ufeff" in text:  # at the start the prelude refused it; elsewhere readers differ (a key's first character or none)
        line = text.count("\n", 0, text.index("\ufeff")) + 1
        raise InputError(PolicyCode.YAML_SYNTAX, f"{what}: a byte order mark (U+FEFF) on line {line}, which YAML readers "
                         "read differently")
    directive = _DIRECTIVE_LINE.search(text)
    if directive is not None:
        line = text.count("\n", 0, directive.start()) + 1
        raise InputError(PolicyCode.YAML_DIRECTIVE, f"{what}: a directive (a line starting with %) on line {line}")
    return text


def _plain_key(value: str, event: Event, what: str) -> str:
    """A plain scalar in a key's place: a string to every reader, or a refusal."""
    if _other_readings(value) or value in ("true", "false") or _DECIMAL.match(value) or _number_shaped(value):
        raise InputError(PolicyCode.YAML_NON_STRING_KEY, f"{what}: the key {value!r} at {_where(event)} is not a string")
    return value


class _Builder:
    """Step 3: the document, built from the events one node at a time (bounded in nodes and depth)."""

    def __init__(self, what: str, max_depth: int, max_nodes: int) -> None:
        self.what = what
        self.max_depth = max_depth
        self.max_nodes = max_nodes
        self.stack: list[_Frame] = []
        self.root: list[object] = []
        self.documents = 0
        self.nodes = 0

    def add(self, node: object, event: Event, *, container: bool) -> None:
        what = self.what
        self.nodes += 1
        if self.nodes > self.max_nodes:
            raise InputError(CommonCode.TOO_LARGE, f"{what} has more than {self.max_nodes} nodes")
        if not self.stack:
            self.root.append(node)
            return
        frame = self.stack[-1]
        if isinstance(frame.container, list):
            frame.container.append(node)
        elif frame.key is None:
            if container or not isinstance(node, str):
                raise InputError(PolicyCode.YAML_NON_STRING_KEY, f"{what}: the key at {_where(event)} is not a string")
            if node in frame.container:
                raise InputError(
                    PolicyCode.YAML_DUPLICATE_KEY,
                    f"{what}: the key {node!r} at {_where(event)} is already set at {frame.lines[node]}",
                )
            frame.key = node
            frame.lines[node] = _where(event)
        else:
            frame.container[frame.key] = node
            frame.key = None

    def is_key_position(self) -> bool:
        return bool(self.stack) and isinstance(self.stack[-1].container, dict) and self.stack[-1].key is None

    def document(self, event: DocumentStartEvent) -> None:
        self.documents += 1
        if self.documents > 1:
            raise InputError(PolicyCode.YAML_MULTIPLE_DOCUMENTS, f"{self.what}: a second document at {_where(event)}")
        if event.version is not None or event.tags:
            raise InputError(PolicyCode.YAML_DIRECTIVE, f"{self.what}: a %YAML or %TAG directive before the document")

    def scalar(self, event: ScalarEvent) -> None:
        what = self.what
        if event.style == '"' and _SURROGATE.search(event.value):
            raise InputError(PolicyCode.YAML_SYNTAX,
                             f"{what}: the escape of a UTF-16 surrogate at {_where(event)} is not a Unicode character")
        plain = event.style is None and event.implicit[0]
        if plain and self.is_key_position():
            self.add(_plain_key(event.value, event, what), event, container=False)
        else:
            self.add(_plain_value(event.value, _where(event), what) if plain else event.value, event, container=False)

    def start(self, event: CollectionStartEvent, mapping: bool) -> None:
        if self.is_key_position():
            raise InputError(PolicyCode.YAML_NON_STRING_KEY, f"{self.what}: the key at {_where(event)} is a collection")
        if len(self.stack) >= self.max_depth:
            raise InputError(CommonCode.TOO_DEEP, f"{self.what} nests deeper than {self.max_depth} levels")
        self.stack.append(_Frame({} if mapping else []))

    def end(self, event: CollectionEndEvent) -> None:
        done = self.stack.pop()
        self.add(done.container, event, container=True)


def _no_anchor_or_tag(event: ScalarEvent | CollectionStartEvent, what: str) -> None:
    """Step 2b: a node event carries neither an anchor nor a tag."""
    if event.anchor is not None:
        raise InputError(PolicyCode.YAML_ANCHOR, f"{what}: an anchor (&{event.anchor}) at {_where(event)}")
    if event.tag is not None:
        raise InputError(PolicyCode.YAML_TAG, f"{what}: the tag {str(event.tag)!r} at {_where(event)}")


def _build(text: str, builder: _Builder) -> None:
    """Step 2: each event of ruamel.yaml's parser judged (aliases, directives, anchors, tags) and given to ``builder``."""
    from ruamel.yaml import YAML, events  # lazy: ruamel.yaml, only when YAML is read (see _yaml_resolvers)

    what = builder.what
    for event in _events(YAML(typ="safe", pure=True).parse(text), what):
        if isinstance(event, events.AliasEvent):
            raise InputError(PolicyCode.YAML_ALIAS, f"{what}: an alias (*{event.anchor}) at {_where(event)}")
        if isinstance(event, events.DocumentStartEvent):
            builder.document(event)
        elif isinstance(event, (events.MappingEndEvent, events.SequenceEndEvent)):
            builder.end(event)
        elif isinstance(event, events.ScalarEvent):
            _no_anchor_or_tag(event, what)
            builder.scalar(event)
        elif isinstance(event, (events.MappingStartEvent, events.SequenceStartEvent)):
            _no_anchor_or_tag(event, what)
            builder.start(event, isinstance(event, events.MappingStartEvent))


def load_strict_yaml(
    data: bytes,
    *,
    what: str,
    max_bytes: int = MAX_YAML_BYTES,
    max_depth: int = MAX_YAML_DEPTH,
    max_nodes: int = MAX_YAML_NODES,
) -> object:
    """Parse one YAML document of ``data`` into dicts, lists, str, bool and int, or raise InputError.

    Raises:
        InputError: ``YAML_SYNTAX`` (not UTF-8, a byte-order mark, not YAML, no document, an
            escape that is no Unicode character such as ``"\\U00110000"`` or ``"\\uD800"``),
            ``YAML_DUPLICATE_KEY``, ``YAML_ANCHOR``, ``YAML_ALIAS``, ``YAML_TAG``,
            ``YAML_DIRECTIVE``, ``YAML_MULTIPLE_DOCUMENTS``, ``YAML_NON_STRING_KEY``,
            ``YAML_AMBIGUOUS_SCALAR`` (a plain scalar other readers type differently),
            ``TOO_LARGE`` (bytes or nodes), ``TOO_DEEP``.
        TypeError: ``data`` is not bytes.
    """
    if not isinstance(data, (bytes, bytearray)):
        raise TypeError("load_strict_yaml takes bytes")
    text = _yaml_text(data, what, max_bytes)
    from ruamel.yaml.error import YAMLError  # lazy: ruamel.yaml, only when YAML is read (see _yaml_resolvers)

    builder = _Builder(what, max_depth, max_nodes)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            _build(text, builder)
    except YAMLError as e:
        raise InputError(PolicyCode.YAML_SYNTAX, f"{what} is not valid YAML: {' '.join(str(e).split())}") from e
    except Warning as e:  # ruamel's warnings (a reused anchor, ...) are refusals here, never noise
        raise InputError(PolicyCode.YAML_SYNTAX, f"{what}: {e}") from e
    except RecursionError as e:
        raise InputError(CommonCode.TOO_DEEP, f"{what} nests too deeply") from e
    if not builder.root:
        raise InputError(PolicyCode.YAML_SYNTAX, f"{what} holds no YAML document")
    return builder.root[0]


__all__ = ["MAX_YAML_BYTES", "load_strict_yaml"]
