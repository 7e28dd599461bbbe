"""A small, strict HTTP client for the hosting API (standard library only).

Why not urllib's opener: it follows redirects and would carry the ``Authorization`` header
to wherever a redirect points. Here nothing is followed except a ``Link: rel="next"`` URL,
verbatim, and only to the same scheme, host and port as the configured API URL. Every
response has one deadline covering all of it (connect, TLS handshake, status line, headers,
body: :class:`_Budget`), every socket operation a timeout, every response a size cap, every
listing a page cap, and nothing is retried: a failure is reported, never papered over.

The token is sent as ``Authorization: Bearer`` and never appears in a message: it is
validated before use (so ``http.client`` cannot echo it in an error) and scrubbed from
every failure detail.

    >>> client = GitHubClient("https://api.github.com", token=None, limits=HttpLimits())
    >>> client.get_object("/repos/octo/repo/pulls/1")  # doctest: +SKIP
"""

from __future__ import annotations

import http.client
import io
import ipaddress
import json
import re
import socket
import ssl
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar
from urllib.parse import urlsplit

from ..._json import loads_strict
from ...errors import InputError
from ._codes import EvidenceCode as C
from ._model import ShapeError, _printable

if TYPE_CHECKING:
    from _typeshed import ReadableBuffer, WriteableBuffer

DEFAULT_API_URL = "https://api.github.com"
API_VERSION = "2022-11-28"
_T = TypeVar("_T")
_NODES_PER_QUERY = 100  # GitHub's limit for nodes(ids:)
_TOKEN = re.compile(r"[\x21-\x7e]{1,4096}")
# One link-value of RFC 8288: <target> followed by ;-separated parameters.
_LINK_VALUE = re.compile(
    r"""\s*<(?P<target>[^<>\s]*)>(?P<params>(?:\s*;\s*[A-Za-z0-9!#$%&'*+.^_`|~-]+\s*(?:=\s*(?:"[^"]*"|[^;,\s"]*))?)*)\s*(?:,|$)"""
)
_PARAM = re.compile(r"""\s*;\s*([A-Za-z0-9!#$%&'*+.^_`|~-]+)\s*(?:=\s*("[^"]*"|[^;,\s"]*))?""")


class FetchFailed(Exception):
    """A read did not produce a complete, well-formed response (becomes ``unknown``)."""

    def __init__(self, code: C, detail: str) -> None:
        super().__init__(f"{code}: {detail}")
        self.code = code
        self.detail = detail


@dataclass(frozen=True, slots=True)
class HttpLimits:
    timeout: float = 15.0  # seconds per socket operation (connect, handshake, each read)
    deadline: float = 60.0  # seconds for one whole response, from connect to the last body byte
    max_pages: int = 20  # pages per listing; 100 items each
    max_page_bytes: int = 8 * 1024 * 1024

    def __post_init__(self) -> None:
        if not (0 < self.timeout <= 600 and 0 < self.deadline <= 3600 and 1 <= self.max_pages <= 1000 and 1024 <= self.max_page_bytes <= 256 * 1024 * 1024):
            raise InputError(C.BAD_CONFIG, "HTTP limits are out of range (timeout, deadline, max pages, max page bytes)")


class _DeadlineExceeded(TimeoutError):
    """The response's budget ran out (raised before a socket operation that would wait)."""


class _Budget:
    """One deadline for one whole response.

    ``http.client`` sets one socket timeout per connection, so each ``recv`` may wait the full
    timeout again: a server that trickles the status line and headers a byte at a time keeps
    ``getresponse()`` waiting indefinitely (observed: 151 s against a 60 s deadline). Here every
    blocking socket operation (connect, handshake, each read, each write) first asks the budget,
    which lets it wait ``min(timeout, time left)`` and refuses once nothing is left.
    """

    def __init__(self, timeout: float, seconds: float) -> None:
        self._timeout = timeout
        self._end = time.monotonic() + seconds

    def wait(self) -> float:
        left = self._end - time.monotonic()
        if left <= 0:
            raise _DeadlineExceeded()
        return min(self._timeout, left)

    @property
    def spent(self) -> bool:
        return time.monotonic() >= self._end


class _BudgetReader(io.RawIOBase):
    """The socket's read side as ``http.client`` sees it (``sock.makefile("rb")``), under the budget."""

    def __init__(self, sock: socket.socket, budget: _Budget) -> None:
        super().__init__()
        self._sock = sock
        # The socket's own reader holds a reference, so closing the connection (http.client
        # does that as soon as it sees "Connection: close") does not cut off the body.
        self._raw = sock.makefile("rb", buffering=0)
        self._budget = budget

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: WriteableBuffer, /) -> int | None:
        self._sock.settimeout(self._budget.wait())
        return self._raw.readinto(buffer)

    def close(self) -> None:
        self._raw.close()
        super().close()


class _BudgetSocket:
    """What ``http.client`` uses of a connected socket (``sendall``, ``makefile``, ``close``), under the budget."""

    def __init__(self, sock: socket.socket, budget: _Budget) -> None:
        self._sock = sock
        self._budget = budget

    def sendall(self, data: ReadableBuffer) -> None:
        self._sock.settimeout(self._budget.wait())
        self._sock.sendall(data)

    def makefile(self, mode: str = "rb") -> io.BufferedReader:
        if mode != "rb":
            raise ValueError(f"only 'rb' is supported, not {mode!r}")
        return io.BufferedReader(_BudgetReader(self._sock, self._budget))

    def close(self) -> None:
        self._sock.close()


def _connect(host: str, port: int, budget: _Budget) -> socket.socket:
    """A TCP connection to the first address that answers; each attempt waits at most what is left.

    Name resolution itself is the system resolver's and is not bounded here.
    """
    last: OSError | None = None
    for family, kind, proto, _, address in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM):
        sock = socket.socket(family, kind, proto)
        try:
            sock.settimeout(budget.wait())
            sock.connect(address)
            return sock
        except _DeadlineExceeded:
            sock.close()
            raise
        except OSError as e:
            sock.close()
            last = e
    raise last if last is not None else OSError(f"no address for {host}")


class _Connection(http.client.HTTPConnection):
    """One GET or POST under one :class:`_Budget`, over TCP or TLS (never a proxy, never a redirect)."""

    def __init__(self, origin: _Origin, budget: _Budget, context: ssl.SSLContext | None) -> None:
        super().__init__(origin.host, origin.port)
        self._budget = budget
        self._tls = context
        if context is not None:
            self.default_port = 443  # the Host header omits the port only for the scheme's default

    def connect(self) -> None:
        sock = _connect(self.host, self.port, self._budget)
        try:
            if self._tls is not None:
                # The handshake as a whole waits at most the socket timeout set here (CPython's
                # ssl module keeps one deadline across the handshake's reads and writes).
                sock.settimeout(self._budget.wait())
                sock = self._tls.wrap_socket(sock, server_hostname=self.host)
        except BaseException:
            sock.close()
            raise
        self.sock = _BudgetSocket(sock, self._budget)


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True, slots=True)
class _Origin:
    scheme: str
    host: str
    port: int


def _origin(url: str, what: str) -> tuple[_Origin, str]:
    """(origin, path?query) of an absolute URL, or ValueError."""
    if any(not c.isascii() or not c.isprintable() or c.isspace() for c in url):
        raise ValueError(f"{what} holds a non-ASCII, control or space character")
    parts = urlsplit(url)
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise ValueError(f"{what} is not an absolute http(s) URL")
    if parts.username is not None or parts.password is not None or parts.fragment:
        raise ValueError(f"{what} must not carry credentials or a fragment")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError as e:
        raise ValueError(f"{what} has an invalid port") from e
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return _Origin(parts.scheme, parts.hostname.lower(), port), target


def parse_next_link(values: list[str]) -> str | None:
    """The single ``rel="next"`` target of the Link header(s), verbatim, or None."""
    found: list[str] = []
    for value in values:
        pos = 0
        text = value.strip()
        while pos < len(text):
            m = _LINK_VALUE.match(text, pos)
            if m is None or m.end() == pos:
                raise FetchFailed(C.BAD_LINK, f"unparseable Link header {_printable(value, 200)!r}")
            pos = m.end()
            rels: list[str] = []
            for p in _PARAM.finditer(m.group("params")):
                if p.group(1).lower() == "rel" and p.group(2) is not None:
                    rels.extend(p.group(2).strip('"').lower().split())
            if "next" in rels:
                found.append(m.group("target"))
    if len(set(found)) > 1:
        raise FetchFailed(C.BAD_LINK, "the Link header names more than one next page")
    return found[0] if found else None


def _api_message(body: bytes) -> str:
    """``: MESSAGE`` of a JSON error answer (GitHub's ``{"message": ...}``), printable and short, else nothing."""
    try:
        doc = json.loads(body[:65536])
    except ValueError:
        return ""
    message = doc.get("message") if isinstance(doc, dict) else None
    return f": {_printable(message, 200)}" if isinstance(message, str) and message else ""


class GitHubClient:
    """A JSON client bound to one API origin: reads, and the few writes the platform adapter makes (:meth:`send`).

    Raises:
        InputError: from the constructor: ``BAD_CONFIG`` (an ``--api-url`` that is not an
            origin, carries a query, or uses http for a non-loopback host), ``TOKEN_MISSING``
            (a token a header cannot carry).
        FetchFailed: (``attest.review.evidence._http``; :func:`collect` turns it into an
            ``unknown`` verdict) from ``get_object`` / ``get_object_or_absent`` (which answers
            None for a 404) / ``get_list`` / ``get_nodes``: ``HTTP_ERROR``, ``HTTP_STATUS``,
            ``RESPONSE_TOO_LARGE``, ``RESPONSE_NOT_JSON``, ``RESPONSE_SHAPE``, ``TOO_MANY_PAGES``,
            ``BAD_LINK``, ``FOREIGN_LINK``, ``GRAPHQL_ERROR``. ``target`` and ``graphql_target``
            raise nothing.
    """

    def __init__(self, api_url: str, *, token: str | None, limits: HttpLimits) -> None:
        try:
            origin, base_path = _origin(api_url, "--api-url")
        except ValueError as e:
            raise InputError(C.BAD_CONFIG, str(e)) from e
        if "?" in base_path:
            raise InputError(C.BAD_CONFIG, "--api-url must not carry a query")
        if origin.scheme == "http" and not _is_loopback(origin.host):
            # A token must never cross the network in clear text; plain http is for local test servers.
            raise InputError(C.BAD_CONFIG, "--api-url may use http only for a loopback host; use https")
        if token is not None and not _TOKEN.fullmatch(token):
            raise InputError(C.TOKEN_MISSING, "the token holds characters a header cannot carry (not shown)")
        self._origin = origin
        self._base_path = base_path.rstrip("/")
        self._token = token
        self.limits = limits
        self.requests: list[str] = []  # request targets, in order (no headers, never the token)

    # ------------------------------------------------------------------ one request
    def _scrub(self, text: str) -> str:
        return text.replace(self._token, "<token>") if self._token else text

    def _fail(self, code: C, detail: str) -> FetchFailed:
        return FetchFailed(code, self._scrub(detail))

    def _get(self, target: str) -> tuple[object, str | None]:
        """GET one target on the origin: (parsed JSON, next-page URL or None)."""
        return self._request("GET", target, None)

    def _request(self, method: str, target: str, payload: bytes | None) -> tuple[object, str | None]:
        """One request on the origin, read under one deadline: (parsed JSON, next-page URL or None)."""
        _status, value, links = self._exchange(method, target, payload, ok=(200,))
        return value, parse_next_link(links)

    def _exchange(self, method: str, target: str, payload: bytes | None, *, ok: Collection[int]) -> tuple[int, object, list[str]]:
        """One request on the origin, read under one deadline: (status, parsed JSON, Link values).

        A status outside ``ok`` fails (``HTTP_STATUS``, with the API's ``message`` when it sent one);
        a redirect is such a status, never followed.
        """
        lim = self.limits
        self.requests.append(target if method == "GET" else f"{method} {target}")
        headers = {
            "Accept": "application/vnd.github+json",
            "X-GitHub-Api-Version": API_VERSION,
            "User-Agent": "attest-evidence",
            "Accept-Encoding": "identity",
        }
        if payload is not None:
            headers["Content-Type"] = "application/json"
        if self._token is not None:
            headers["Authorization"] = f"Bearer {self._token}"
        budget = _Budget(lim.timeout, lim.deadline)
        context = ssl.create_default_context() if self._origin.scheme == "https" else None
        conn = _Connection(self._origin, budget, context)
        try:
            conn.request(method, target, body=payload, headers=headers)
            resp = conn.getresponse()
            length = resp.getheader("Content-Length")
            if length is not None and (not length.strip().isdigit() or int(length) > lim.max_page_bytes):
                raise self._fail(C.RESPONSE_TOO_LARGE, f"{method} {target}: Content-Length {_printable(length, 30)} exceeds {lim.max_page_bytes}")
            chunks: list[bytes] = []
            size = 0
            while True:
                chunk = resp.read1(65536)  # returns as soon as data arrives; every wait asks the budget
                if not chunk:
                    break
                size += len(chunk)
                if size > lim.max_page_bytes:
                    raise self._fail(C.RESPONSE_TOO_LARGE, f"{method} {target}: response exceeds {lim.max_page_bytes} bytes")
                chunks.append(chunk)
            status = resp.status
            content_type = resp.getheader("Content-Type") or ""
            links = resp.headers.get_all("Link") or []
        except FetchFailed:
            raise
        except (OSError, http.client.HTTPException, ValueError) as e:
            if isinstance(e, TimeoutError) and budget.spent:
                # The deadline, not the per-operation timeout: say which limit was hit.
                raise self._fail(C.HTTP_ERROR, f"{method} {target}: response not complete within {lim.deadline}s") from e
            # Connection refused, timeout, TLS failure, truncated body: reported, never retried.
            raise self._fail(C.HTTP_ERROR, f"{method} {target}: {type(e).__name__}: {_printable(str(e), 200)}") from e
        finally:
            conn.close()
        if status not in ok:
            raise self._fail(C.HTTP_STATUS, f"{method} {target}: HTTP {status}{_api_message(b''.join(chunks))}")
        if content_type.split(";", 1)[0].strip().lower() != "application/json":
            raise self._fail(C.RESPONSE_NOT_JSON, f"{method} {target}: Content-Type {_printable(content_type, 80)!r} is not application/json")
        try:
            value = loads_strict(b"".join(chunks), what=f"response to {method} {target}", max_bytes=lim.max_page_bytes)
        except InputError as e:
            raise self._fail(C.RESPONSE_NOT_JSON, e.detail) from e
        return status, value, links

    def send(self, method: str, path: str, body: object, *, ok: Collection[int]) -> tuple[int, object]:
        """One write (``POST``, ``PUT``) of ``body`` as JSON to ``path``: (status, parsed JSON answer), for a status in ``ok``.

        Nothing is retried: an answer that never came fails ``HTTP_ERROR``, and the caller,
        not this client, decides how to find out whether the write took effect.
        """
        payload = json.dumps(body, sort_keys=True).encode("ascii")  # \u escapes: a lone surrogate cannot fail the encoding
        status, value, _ = self._exchange(method, self.target(path), payload, ok=ok)
        return status, value

    # ------------------------------------------------------------------ API shapes
    def target(self, path: str) -> str:
        return self._base_path + path

    def get_object(self, path: str, parse: Callable[[object], _T]) -> _T:
        value, _ = self._get(self.target(path))
        try:
            return parse(value)
        except ShapeError as e:
            raise self._fail(C.RESPONSE_SHAPE, f"GET {self.target(path)}: {e}") from e

    def get_object_or_absent(self, path: str, parse: Callable[[object], _T]) -> _T | None:
        """Like :meth:`get_object`, but a 404 is an answer (None: there is no such object), not a failure.

        Every other status still fails (``HTTP_STATUS``): a 403 says the token cannot look,
        not that the object is absent.
        """
        target = self.target(path)
        status, value, _ = self._exchange("GET", target, None, ok=(200, 404))
        if status == 404:
            return None
        try:
            return parse(value)
        except ShapeError as e:
            raise self._fail(C.RESPONSE_SHAPE, f"GET {target}: {e}") from e

    def graphql_target(self) -> str:
        """The GraphQL endpoint beside the REST base: ``/graphql``, or ``/api/graphql`` beside
        GitHub Enterprise Server's ``/api/v3``."""
        base = self._base_path
        return (base[: -len("/v3")] if base.endswith("/api/v3") else base) + "/graphql"

    def graphql(self, query: str, variables: Mapping[str, object]) -> object:
        """One GraphQL query: its ``data``. Any entry in ``errors`` fails (``GRAPHQL_ERROR``: GraphQL answers errors with HTTP 200)."""
        target = self.graphql_target()
        payload = json.dumps({"query": query, "variables": dict(variables)}, sort_keys=True).encode()
        value, _ = self._request("POST", target, payload)
        errors = value.get("errors") if isinstance(value, dict) else None
        if errors:
            first = errors[0] if isinstance(errors, list) and errors else errors
            message = first.get("message") if isinstance(first, dict) else first
            raise self._fail(C.GRAPHQL_ERROR, f"POST {target}: {_printable(str(message), 200)}")
        if not isinstance(value, dict) or "data" not in value:
            raise self._fail(C.RESPONSE_SHAPE, f"POST {target}: the answer has no data")
        return value["data"]

    def get_nodes(self, ids: Sequence[str], selection: str, parse: Callable[[object], _T]) -> tuple[_T, ...]:
        """The GraphQL nodes with these ids, in order, each parsed (``nodes(ids:)``, 100 per query).

        GraphQL answers errors with HTTP 200: any entry in ``errors`` fails the read
        (``GRAPHQL_ERROR``), and so does a node missing or answered for another id. GitHub's
        GraphQL API needs a token; without one the read fails and the verdict is ``unknown``.
        """
        target = self.graphql_target()
        batches = [ids[i : i + _NODES_PER_QUERY] for i in range(0, len(ids), _NODES_PER_QUERY)]
        if len(batches) > self.limits.max_pages:
            raise self._fail(C.TOO_MANY_PAGES, f"POST {target}: {len(ids)} nodes need more than {self.limits.max_pages} queries")
        query = f"query($ids: [ID!]!) {{ nodes(ids: $ids) {{ __typename id {selection} }} }}"
        items: list[_T] = []
        for batch in batches:
            data = self.graphql(query, {"ids": list(batch)})
            try:
                nodes = data.get("nodes") if isinstance(data, dict) else None
                if not isinstance(nodes, list) or len(nodes) != len(batch):
                    raise ShapeError(f"data.nodes is not an array of {len(batch)} nodes")
                for want, node in zip(batch, nodes, strict=True):
                    if not isinstance(node, dict) or node.get("id") != want:
                        raise ShapeError(f"no node answered for id {_printable(want, 80)!r}")
                    items.append(parse(node))
            except ShapeError as e:
                raise self._fail(C.RESPONSE_SHAPE, f"POST {target}: {e}") from e
        return tuple(items)

    def get_list(self, path: str, key: str | None, parse: Callable[[object], _T]) -> tuple[_T, ...]:
        """Every item of a paginated listing, following ``rel="next"`` verbatim."""
        items: list[_T] = []
        target = self.target(path)
        visited = {target}
        pages = 0
        while True:
            value, next_url = self._get(target)
            pages += 1
            try:
                page = value if key is None else (value.get(key) if isinstance(value, dict) else None)
                if not isinstance(page, list):
                    raise ShapeError(f"the page is not {'an array' if key is None else f'an object with an array {key!r}'}")
                items.extend(parse(item) for item in page)
            except ShapeError as e:
                raise self._fail(C.RESPONSE_SHAPE, f"GET {target}: {e}") from e
            if next_url is None:
                return tuple(items)
            if pages >= self.limits.max_pages:
                raise self._fail(C.TOO_MANY_PAGES, f"GET {self.target(path)}: more than {self.limits.max_pages} pages")
            try:
                origin, next_target = _origin(next_url, "the next-page link")
            except ValueError as e:
                raise self._fail(C.BAD_LINK, f"GET {target}: {e}") from e
            if origin != self._origin:
                # Never send the token (or trust data) from another origin.
                raise self._fail(C.FOREIGN_LINK, f"GET {target}: the next page {_printable(next_url, 200)!r} is not on {self._origin.scheme}://{self._origin.host}:{self._origin.port}")
            if next_target in visited:
                raise self._fail(C.BAD_LINK, f"GET {target}: the next page {next_target} was already read (a loop)")
            visited.add(next_target)
            target = next_target
