"""The SearxNG client: JSON search results, at most N distinct http(s) URLs per query.

One search, its retries and their backoff included, ends by SEARCH_DEADLINE; each request runs in a thread the
search stops waiting for after SEARCH_TIMEOUT (or what is left of the deadline), since `requests` times only
single socket operations and resolves the engine's name with no timeout at all (workers/clients/deadline.py).
"""

import functools
import logging
import time
from dataclasses import dataclass
from urllib.parse import urldefrag, urlparse

import requests
from django.conf import settings

from research.text.storable import MAX_SNIPPET_CHARS, MAX_TITLE_CHARS, storable, storable_url
from workers.clients import ratelimit
from workers.clients.backoff import backoff_delay, parse_retry_after
from workers.clients.deadline import call_within, expiry, time_left
from workers.errors import DeadlineExceeded, PermanentError, TransientError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SearchResult:
    url: str
    title: str
    snippet: str


def storable_result(url: str, title: object, snippet: object) -> SearchResult | None:
    """A result as it can be stored: title and snippet cleaned and capped; None for a URL that cannot be stored
    (skipped, so one odd result never fails the query)."""
    if not storable_url(url):
        return None
    return SearchResult(
        url=url,
        title=storable(str(title or ""), MAX_TITLE_CHARS),
        snippet=storable(str(snippet or ""), MAX_SNIPPET_CHARS),
    )


def normalise_url(url: str) -> str:
    """Drop the fragment: `page#a` and `page#b` are one page to fetch."""
    return urldefrag(url.strip())[0]


def search(query: str, limit: int | None = None, deadline: float | None = None) -> list[SearchResult]:
    """Search SearxNG; retries transient failures (after Retry-After when given), then raises TransientError.

    Ends by SEARCH_DEADLINE seconds from now, or by `deadline` (a `time.monotonic()` value) if that comes first,
    with DeadlineExceeded when the engine did not answer in time.
    """
    limit = limit or settings.SEARCH_RESULTS_PER_QUERY
    expires_at = expiry(settings.SEARCH_DEADLINE, deadline)
    attempt = 0
    while True:
        ratelimit.wait_for_rate_until(
            f"search:{urlparse(settings.SEARXNG_URL).netloc}", settings.SEARCH_RATE_LIMIT, expires_at, "search"
        )
        seconds = min(settings.SEARCH_TIMEOUT, time_left(expires_at, "search"))
        try:
            get = functools.partial(
                requests.get,
                f"{settings.SEARXNG_URL}/search",
                params={"q": query, "format": "json"},
                timeout=(min(5, seconds), seconds),
                headers={"Accept": "application/json"},
            )
            response = call_within(get, seconds, "search")
            if response.status_code == 429 or response.status_code >= 500:
                raise TransientError(
                    f"search engine answered HTTP {response.status_code}",
                    parse_retry_after(response.headers.get("Retry-After")),
                )
            if response.status_code != 200:
                # 403 is what SearxNG answers when the JSON format is not enabled in its settings.
                raise PermanentError(f"search engine answered HTTP {response.status_code} (is format=json enabled?)")
            payload = response.json()
        except (requests.Timeout, requests.ConnectionError) as exc:
            error: TransientError = TransientError(f"search engine unreachable: {type(exc).__name__}")
            timed_out = isinstance(exc, requests.Timeout)
        except TransientError as exc:
            error, timed_out = exc, isinstance(exc, DeadlineExceeded)
        except ValueError as exc:
            raise PermanentError(f"search engine answered with invalid JSON: {exc}") from exc
        else:
            return _results(payload, limit)
        delay = backoff_delay(attempt, error.retry_after, cap=20.0)
        if time.monotonic() + delay >= expires_at:
            # No time for another attempt: an engine that did not answer ran out of time; one that answered with
            # errors failed.
            if timed_out:
                raise DeadlineExceeded(f"search not answered by its deadline ({attempt + 1} attempts)")
            raise error
        if attempt >= settings.SEARCH_MAX_RETRIES:
            raise error
        log.warning("search failed (%s); retry %s in %.1fs", error, attempt + 1, delay)
        time.sleep(delay)
        attempt += 1


def _results(payload: object, limit: int) -> list[SearchResult]:
    if not isinstance(payload, dict) or not isinstance(payload.get("results"), list):
        raise PermanentError("search engine answer has no results list")
    seen: set[str] = set()
    results = []
    for item in payload["results"]:
        if not isinstance(item, dict) or not isinstance(item.get("url"), str):
            continue
        try:
            url = normalise_url(item["url"])
            parsed = urlparse(url)
        except ValueError:  # "http://[::1": one unparseable result is skipped, not the whole answer refused
            continue
        if parsed.scheme not in ("http", "https") or not parsed.netloc or url in seen:
            continue
        seen.add(url)
        result = storable_result(url, item.get("title"), item.get("content"))
        if result is None:
            log.info("skipped a search result whose URL cannot be stored: %.200r", url)
            continue
        results.append(result)
        if len(results) == limit:
            break
    return results
