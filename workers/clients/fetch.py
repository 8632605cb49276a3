"""The page fetcher: the only code that downloads web pages.

One call, one fresh session mounted with the SSRF-guarded adapter (see `netguard`). Redirects are followed
here, hop by hop, so each hop passes the URL check and every new connection passes the address check. The body
is streamed and counted after decompression, so neither a huge page nor a gzip bomb is ever held beyond
`max_bytes`. A wall-clock deadline covers the whole download: per-hop timeouts shrink to the time left, and a
watchdog shuts the sockets down when it runs out, so a server that drips bytes cannot hold a worker.
"""

from __future__ import annotations

import datetime
import logging
import re
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Self
from urllib.parse import unquote, urljoin

import requests
import urllib3.exceptions
from urllib3.response import HTTPResponse
from urllib3.util import parse_url

from research.text.page_text import (
    HTML_TYPES,
    PDF_TYPES,
    TEXT_TYPES,
    PdfError,
    decode_body,
    extract_text,
    pdf_text,
    published_date,
)
from workers.clients.deadline import Alarm
from workers.clients.netguard import (
    BlockedAddressError,
    BlockedURLError,
    GuardedAdapter,
    check_url,
    endpoint_key,
    normalize_allowed,
)

log = logging.getLogger(__name__)

REASONS = frozenset(
    {
        "blocked_address",
        "bad_scheme",
        "bad_url",
        "http_error",
        "timeout",
        "too_large",
        "too_many_pages",
        "content_type",
        "too_many_redirects",
        "connection",
        "decode",
        "empty",
    }
)
_REDIRECT_CODES = frozenset({301, 302, 303, 307, 308})
_CHUNK = 64 * 1024
_ACCEPT = "text/html,application/xhtml+xml,text/markdown;q=0.9,text/plain;q=0.8,application/pdf;q=0.7"
# Text where control characters and U+FFFD are this common was binary, or in no charset we could find.
_GARBLED = dict.fromkeys([*range(0x00, 0x09), *range(0x0E, 0x20), 0xFFFD])
_MAX_GARBLED_SHARE = 0.1
_CHARSET = re.compile(r";\s*charset\s*=\s*[\"']?([\w.:+-]+)", re.IGNORECASE)


class FetchError(Exception):
    """A page could not be fetched; `reason` is one of REASONS, stable enough to store and count."""

    def __init__(self, reason: str, message: str, status_code: int | None = None) -> None:
        # All three in args so the exception pickles (Celery moves it between processes).
        super().__init__(reason, message, status_code)
        self.reason = reason
        self.message = message
        self.status_code = status_code

    def __str__(self) -> str:
        return f"{self.reason}: {self.message}"


@dataclass(frozen=True)
class FetchedPage:
    url: str
    final_url: str
    status_code: int
    content_type: str  # the media type only, lower case, e.g. "text/html"
    title: str
    text: str
    bytes_read: int  # body bytes after content decoding (gzip/deflate), as counted against max_bytes
    published: datetime.date | None = None  # the date an HTML page gives itself (page_text.published_date)


@dataclass(frozen=True)
class _Download:
    final_url: str
    status_code: int
    content_type: str
    charset: str | None
    body: bytes


def fetch_page(
    url: str,
    *,
    allowed_private: frozenset[str] = frozenset(),
    max_bytes: int = 5_000_000,
    deadline: float = 20.0,
    connect_timeout: float = 5.0,
    read_timeout: float = 10.0,
    max_redirects: int = 5,
    max_pdf_pages: int = 50,
    user_agent: str = "deep-research/1.0",
) -> FetchedPage:
    """Fetch `url` and extract its title and main text; raises FetchError for every failure.

    `allowed_private` lists `host:port` endpoints that may be reached although they are not public
    (matched against the URL's literal host and port, 80/443 when absent); an entry `host:port/path/` allows
    the endpoint only under that path and only for `url` itself, never for a redirect's target (compose's
    `web:8000/collection/`: the web app serves workers nothing else, and nothing should lead them to it). A
    malformed entry is a configuration error and raises ValueError. `deadline` bounds the whole download in
    seconds, redirects included; text extraction runs after it. A PDF is read through pypdf, refused beyond
    `max_pdf_pages` pages, and its streams may inflate to a few times `max_bytes` at most.
    """
    published: datetime.date | None = None
    try:
        download = _download(
            url,
            allowed_private=allowed_private,
            max_bytes=max_bytes,
            deadline=deadline,
            connect_timeout=connect_timeout,
            read_timeout=read_timeout,
            max_redirects=max_redirects,
            user_agent=user_agent,
        )
        if download.content_type in PDF_TYPES:
            try:
                title, main_text = pdf_text(download.body, max_pages=max_pdf_pages, max_bytes=max_bytes)
            except PdfError as exc:
                raise FetchError(exc.reason, exc.message) from exc
        else:
            text = decode_body(download.body, download.charset, is_html=download.content_type in HTML_TYPES)
            if text and len(text) - len(text.translate(_GARBLED)) > _MAX_GARBLED_SHARE * len(text):
                raise FetchError("decode", f"body is not text (charset {download.charset or 'detected'})")
            title, main_text = extract_text(text, download.content_type, download.final_url)
            if download.content_type in HTML_TYPES and main_text.strip():
                published = published_date(text, download.final_url)
        if not main_text.strip():
            raise FetchError("empty", "no text could be extracted")
    except FetchError as exc:
        log.info("fetch of %s failed: %s", url, exc)
        raise
    return FetchedPage(
        url=url,
        final_url=download.final_url,
        status_code=download.status_code,
        content_type=download.content_type,
        title=title,
        text=main_text,
        bytes_read=len(download.body),
        published=published,
    )


def _download(
    url: str,
    *,
    allowed_private: frozenset[str],
    max_bytes: int,
    deadline: float,
    connect_timeout: float,
    read_timeout: float,
    max_redirects: int,
    user_agent: str,
) -> _Download:
    """The body of `url` after redirects, within `deadline`; one fresh guarded session per call."""
    scoped = _path_scoped(allowed_private)
    adapter = GuardedAdapter({entry.partition("/")[0] for entry in allowed_private})
    with requests.Session() as session, _Watchdog(deadline, adapter.abort) as watchdog:
        session.trust_env = False  # no proxies from the environment, no .netrc credentials
        session.mount("http://", adapter)
        session.mount("https://", adapter)
        session.headers.update({"User-Agent": user_agent, "Accept": _ACCEPT, "Accept-Encoding": "gzip, deflate"})
        try:
            download = _follow(
                session,
                url,
                scoped=scoped,
                expires_at=time.monotonic() + deadline,
                max_bytes=max_bytes,
                connect_timeout=connect_timeout,
                read_timeout=read_timeout,
                max_redirects=max_redirects,
            )
        except FetchError as exc:
            # Errors after the watchdog cut the sockets are its doing, whatever they look like.
            if watchdog.fired and exc.reason != "too_large":
                raise FetchError("timeout", f"deadline of {deadline}s exceeded") from exc
            raise
        if watchdog.fired:
            # Cutting a body that has no declared length looks like its clean end; it was not.
            raise FetchError("timeout", f"deadline of {deadline}s exceeded")
    return download


def _follow(
    session: requests.Session,
    url: str,
    *,
    scoped: Mapping[str, str],
    expires_at: float,
    max_bytes: int,
    connect_timeout: float,
    read_timeout: float,
    max_redirects: int,
) -> _Download:
    """Follow redirects by hand, so every hop's URL is checked before its request is made."""
    current = url
    for hop in range(max_redirects + 1):
        try:
            check_url(current)
        except BlockedURLError as exc:
            raise FetchError(exc.reason, f"{exc.message}: {current}") from exc
        _check_scope(current, scoped, first_hop=hop == 0)
        remaining = _remaining(expires_at)
        response = _get(session, current, (min(connect_timeout, remaining), min(read_timeout, remaining)))
        with response:
            target = session.get_redirect_target(response) if response.status_code in _REDIRECT_CODES else None
            if target:
                current = urljoin(response.url, target)
                continue
            return _read_response(response, max_bytes=max_bytes, expires_at=expires_at)
    raise FetchError("too_many_redirects", f"more than {max_redirects} redirects from {url}")


def _path_scoped(allowed_private: Iterable[str]) -> dict[str, str]:
    """{endpoint: path prefix} of the allow-list's `host:port/path/` entries (an endpoint also listed bare is open)."""
    scoped, whole = {}, set()
    for entry in allowed_private:
        endpoint, slash, path = entry.partition("/")
        key = next(iter(normalize_allowed([endpoint])))
        if slash:
            scoped[key] = f"/{path.strip('/')}/" if path.strip("/") else "/"
        else:
            whole.add(key)
    return {key: prefix for key, prefix in scoped.items() if key not in whole}


def _check_scope(url: str, scoped: Mapping[str, str], *, first_hop: bool) -> None:
    """Refuse a path-scoped endpoint outside its path, or reached through a redirect.

    Checked on the URL, before the request: a redirect to the same endpoint would reuse the pooled connection,
    which the adapter's address check never sees again. The path is urllib3's, dot segments removed, as sent.
    """
    if not scoped:
        return
    parsed = parse_url(url)
    key = endpoint_key(parsed.host or "", parsed.port or (443 if parsed.scheme == "https" else 80))
    prefix = scoped.get(key)
    if prefix is None:
        return
    if not first_hop:
        raise FetchError("blocked_address", f"{key} is allowed as the first URL only, not a redirect's: {url}")
    path = unquote(parsed.path or "/")
    if not path.startswith(prefix) or ".." in path.split("/"):
        raise FetchError("blocked_address", f"{key} is allowed under {prefix} only: {url}")


def _get(session: requests.Session, url: str, timeout: tuple[float, float]) -> requests.Response:
    """One GET, no redirects, body not read yet; transport failures become FetchErrors."""
    try:
        return session.get(url, stream=True, allow_redirects=False, timeout=timeout)
    except BlockedAddressError as exc:
        raise FetchError("blocked_address", str(exc)) from exc
    except BlockedURLError as exc:
        raise FetchError(exc.reason, exc.message) from exc
    except requests.Timeout as exc:  # ConnectTimeout and ReadTimeout (waiting for the headers)
        raise FetchError("timeout", f"{url}: {exc}") from exc
    except (requests.exceptions.InvalidURL, requests.exceptions.MissingSchema, ValueError) as exc:
        raise FetchError("bad_url", f"{url}: {exc}") from exc
    except requests.exceptions.InvalidSchema as exc:
        raise FetchError("bad_scheme", f"{url}: {exc}") from exc
    except requests.RequestException as exc:
        raise FetchError("connection", f"{url}: {exc}") from exc


def _read_response(response: requests.Response, *, max_bytes: int, expires_at: float) -> _Download:
    """Check status, type and size, then stream the decoded body up to `max_bytes`."""
    status = response.status_code
    if not 200 <= status < 300:
        raise FetchError("http_error", f"HTTP {status} from {response.url}", status_code=status)
    media_type, charset = _parse_content_type(response.headers.get("Content-Type"))
    if media_type not in TEXT_TYPES | PDF_TYPES:
        raise FetchError("content_type", f"{media_type or 'no content type'} is not a text page or a PDF")
    declared = response.headers.get("Content-Length", "")
    if declared.isdigit() and int(declared) > max_bytes:
        raise FetchError("too_large", f"Content-Length {declared} is over the {max_bytes} byte limit")
    # urllib3 passes unknown encodings through undecoded; we asked for gzip/deflate only, refuse the rest.
    for coding in response.headers.get("Content-Encoding", "").lower().split(","):
        if coding.strip() not in ("", "identity", *HTTPResponse.CONTENT_DECODERS):
            raise FetchError("decode", f"unsupported Content-Encoding {coding.strip()!r}")
    body = _read_body(response.raw, max_bytes=max_bytes, expires_at=expires_at)
    return _Download(response.url, status, media_type, charset, body)


def _read_body(raw: HTTPResponse, *, max_bytes: int, expires_at: float) -> bytes:
    """Read the decoded body, never holding more than `max_bytes` of it.

    `read1` rather than `iter_content`: it returns whatever has arrived instead of blocking until a whole
    chunk is in, so the deadline is checked while a server drips. urllib3 (>= 2.6) bounds each read's
    decompression to the amount asked for, so asking for at most one byte over the cap is what keeps a
    gzip bomb from inflating.
    """
    body = bytearray()
    try:
        while True:
            _remaining(expires_at)
            chunk = raw.read1(min(_CHUNK, max_bytes - len(body) + 1), decode_content=True)
            if not chunk:
                return bytes(body)
            if len(body) + len(chunk) > max_bytes:
                raise FetchError("too_large", f"body is over the {max_bytes} byte limit")
            body += chunk
    except urllib3.exceptions.DecodeError as exc:
        raise FetchError("decode", f"body could not be decompressed: {exc}") from exc
    except (urllib3.exceptions.ReadTimeoutError, TimeoutError) as exc:
        raise FetchError("timeout", f"reading the body timed out: {exc}") from exc
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        raise FetchError("connection", f"reading the body failed: {exc}") from exc


def _parse_content_type(value: str | None) -> tuple[str, str | None]:
    """('text/html', 'utf-8') from a Content-Type header; ('', None) when absent."""
    if not value:
        return "", None
    media_type = value.split(";", 1)[0].strip().lower()
    match = _CHARSET.search(value)
    return media_type, match.group(1) if match else None


def _remaining(expires_at: float) -> float:
    remaining = expires_at - time.monotonic()
    if remaining <= 0:
        raise FetchError("timeout", "deadline exceeded")
    return remaining


class _Watchdog:
    """Calls `on_expire` once `seconds` have passed, unless the `with` block ended first."""

    def __init__(self, seconds: float, on_expire: Callable[[], None]) -> None:
        self._on_expire = on_expire
        self._alarm = Alarm(seconds, self._fire)

    @property
    def fired(self) -> bool:
        return self._alarm.fired

    def _fire(self) -> None:
        log.info("fetch deadline reached, aborting its connections")
        self._on_expire()

    def __enter__(self) -> Self:
        self._alarm.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._alarm.cancel()
