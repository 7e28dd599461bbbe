"""A small, strict HTTP client for the hosting API (standard library only).

Why not urllib's opener: it follows redirects and would carry the ``Authorization`` header
to wherever a redirect points. Here nothing is followed except a ``Link: rel="next"`` URL,
verbatim, and only to the same scheme, host and port as the configured API URL. Every read
has a socket timeout and a whole-response deadline, every response a size cap, every
listing a page cap, and nothing is retried: a failure is reported, never papered over.

The token is sent as ``Authorization: Bearer`` and never appears in a message: it is
validated before use (so ``http.client`` cannot echo it in an error) and scrubbed from
every failure detail.

    >>> client = GitHubClient("https://api.github.com", token=None, limits=HttpLimits())
    >>> client.get_object("/repos/octo/repo/pulls/1")  # doctest: +SKIP
"""

from __future__ import annotations

import http.client
import ipaddress
import re
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import urlsplit

from ..._json import loads_strict
from ...errors import InputError
from ._codes import EvidenceCode as C
from ._model import ShapeError, _printable

DEFAULT_API_URL = "https://api.github.com"
API_VERSION = "2022-11-28"
_T = TypeVar("_T")
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
    timeout: float = 15.0  # seconds per socket operation (connect, each read)
    deadline: float = 60.0  # seconds for one whole response
    max_pages: int = 20  # pages per listing; 100 items each
    max_page_bytes: int = 8 * 1024 * 1024

    def __post_init__(self) -> None:
        if not (0 < self.timeout <= 600 and 0 < self.deadline <= 3600 and 1 <= self.max_pages <= 1000 and 1024 <= self.max_page_bytes <= 256 * 1024 * 1024):
            raise InputError(C.BAD_CONFIG, "HTTP limits are out of range (timeout, deadline, max pages, max page bytes)")


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


class GitHubClient:
    """GET-only JSON client bound to one API origin."""

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

    def _get(self, target: str) -> tuple[Any, str | None]:
        """GET one target on the origin: (parsed JSON, next-page URL or None)."""
        lim = self.limits
        origin = self._origin
        self.requests.append(target)
        headers = {
            "Accept": "application/vnd.github+json",
            "X-GitHub-Api-Version": API_VERSION,
            "User-Agent": "attest-evidence",
            "Accept-Encoding": "identity",
        }
        if self._token is not None:
            headers["Authorization"] = f"Bearer {self._token}"
        conn: http.client.HTTPConnection
        if origin.scheme == "https":
            conn = http.client.HTTPSConnection(origin.host, origin.port, timeout=lim.timeout, context=ssl.create_default_context())
        else:
            conn = http.client.HTTPConnection(origin.host, origin.port, timeout=lim.timeout)
        deadline = time.monotonic() + lim.deadline
        try:
            conn.request("GET", target, headers=headers)
            resp = conn.getresponse()
            length = resp.getheader("Content-Length")
            if length is not None and (not length.strip().isdigit() or int(length) > lim.max_page_bytes):
                raise self._fail(C.RESPONSE_TOO_LARGE, f"GET {target}: Content-Length {_printable(length, 30)} exceeds {lim.max_page_bytes}")
            chunks: list[bytes] = []
            size = 0
            while True:
                if time.monotonic() > deadline:
                    raise self._fail(C.HTTP_ERROR, f"GET {target}: response not complete within {lim.deadline}s")
                chunk = resp.read1(65536)  # returns as soon as data arrives, so the deadline is checked often
                if not chunk:
                    break
                size += len(chunk)
                if size > lim.max_page_bytes:
                    raise self._fail(C.RESPONSE_TOO_LARGE, f"GET {target}: response exceeds {lim.max_page_bytes} bytes")
                chunks.append(chunk)
            status = resp.status
            content_type = resp.getheader("Content-Type") or ""
            links = resp.headers.get_all("Link") or []
        except FetchFailed:
            raise
        except (OSError, http.client.HTTPException, ValueError) as e:
            # Connection refused, timeout, TLS failure, truncated body: reported, never retried.
            raise self._fail(C.HTTP_ERROR, f"GET {target}: {type(e).__name__}: {_printable(str(e), 200)}") from e
        finally:
            conn.close()
        if status != 200:
            raise self._fail(C.HTTP_STATUS, f"GET {target}: HTTP {status}")
        if content_type.split(";", 1)[0].strip().lower() != "application/json":
            raise self._fail(C.RESPONSE_NOT_JSON, f"GET {target}: Content-Type {_printable(content_type, 80)!r} is not application/json")
        try:
            value = loads_strict(b"".join(chunks), what=f"response to GET {target}", max_bytes=lim.max_page_bytes)
        except InputError as e:
            raise self._fail(C.RESPONSE_NOT_JSON, e.detail) from e
        return value, parse_next_link(links)

    # ------------------------------------------------------------------ API shapes
    def target(self, path: str) -> str:
        return self._base_path + path

    def get_object(self, path: str, parse: Callable[[Any], _T]) -> _T:
        value, _ = self._get(self.target(path))
        try:
            return parse(value)
        except ShapeError as e:
            raise self._fail(C.RESPONSE_SHAPE, f"GET {self.target(path)}: {e}") from e

    def get_list(self, path: str, key: str | None, parse: Callable[[Any], _T]) -> tuple[_T, ...]:
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
