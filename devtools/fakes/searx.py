"""FakeSearx: a SearxNG-compatible `/search?q=...&format=json` endpoint whose results point at a FakeWeb."""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from devtools.fakes.server import FakeServer, Request
from devtools.fakes.web import FakeWeb, slug_title

ResultsFor = Callable[[str], "list[dict[str, Any] | str]"]

DEFAULT_COUNT = 8
_ENGINES = ["google", "bing", "duckduckgo", "brave"]


def query_slug(query: str) -> str:
    """'What is Rust?' -> 'what-is-rust' (at most 60 characters, never empty)."""
    slug = re.sub(r"[^a-z0-9]+", "-", query.lower()).strip("-")[:60].strip("-")
    return slug or "query"


class FakeSearx(FakeServer):
    """SearxNG JSON search. `results_for(query)` returns dicts or bare URLs; by default 8 distinct FakeWeb
    pages `/page/<slug-of-query>-<i>` plus one duplicate URL, so the client must de-duplicate.

    Switches: `fail_always(status)`, `fail_next(count, status, retry_after)`, `delay` (seconds, every search) and
    `delays`, a list of `(substring, seconds)` added when the query contains the substring.
    """

    def __init__(self, web: FakeWeb | None = None, results_for: ResultsFor | None = None) -> None:
        super().__init__()
        self.web = web
        self._default_results_for = results_for
        self.reset_switches()

    def reset_switches(self) -> None:
        with self._lock:
            self.results_for: ResultsFor = self._default_results_for or self.default_results
            self.delay = 0.0
            self.delays: list[tuple[str, float]] = []
            self._faults: deque[tuple[int, float | None]] = deque()
            self._always: int | None = None

    def fail_always(self, status: int | None = 500) -> None:
        """Every search fails with `status` until reset (None turns it off)."""
        with self._lock:
            self._always = status

    def fail_next(self, count: int = 1, status: int = 500, retry_after: float | None = None) -> None:
        """The next `count` searches fail with `status`, with a `Retry-After` header when given."""
        with self._lock:
            self._faults.extend([(status, retry_after)] * count)

    def default_results(self, query: str) -> list[dict[str, Any] | str]:
        """8 distinct deterministic pages for the query, then a repeat of the first."""
        slug = query_slug(query)
        base = self.web.url if self.web is not None else "https://example.com"
        pages: list[dict[str, Any]] = []
        for i in range(1, DEFAULT_COUNT + 1):
            page = f"{slug}-{i}"
            pages.append(
                {
                    "url": f"{base}/page/{page}",
                    "title": slug_title(page),
                    "content": FakeWeb.page_text_sentences(page)[0],
                }
            )
        # Same URL from another engine, as a real metasearch result list can contain it.
        return [*pages, {**pages[0], "engine": "duckduckgo"}]

    def queries(self) -> list[str]:
        """The `q` of every search received, oldest first."""
        return [self._param(r.query, r.body, "q") or "" for r in self.requests if r.path == "/search"]

    def count(self, substring: str | None = None) -> int:
        return sum(1 for q in self.queries() if substring is None or substring in q)

    # --- protocol ---

    @staticmethod
    def _param(query: dict[str, str], body: Any, key: str) -> str | None:
        # SearxNG accepts GET parameters and POSTed forms alike.
        if key in query:
            return query[key]
        if isinstance(body, dict) and isinstance(body.get(key), str):
            return body[key]
        return None

    def handle(self, request: Request) -> None:
        record = request.record
        if record.path.rstrip("/") not in ("/search", ""):
            request.send(404, "<!doctype html><title>Not found</title><h1>Not found</h1>")
            return
        if record.path.rstrip("/") == "":
            request.send(200, "<!doctype html><title>FakeSearx</title><h1>FakeSearx</h1>")
            return
        q = self._param(record.query, record.body, "q") or ""
        fmt = self._param(record.query, record.body, "format") or "html"

        self.sleep(self.delay + sum(seconds for sub, seconds in list(self.delays) if sub in q))
        with self._lock:
            if self._always is not None:
                fault: tuple[int, float | None] | None = (self._always, None)
            else:
                fault = self._faults.popleft() if self._faults else None
        if fault is not None:
            status, retry_after = fault
            headers = {"Retry-After": f"{retry_after:g}"} if retry_after is not None else {}
            request.send(status, f"<!doctype html><title>Error</title><h1>Error {status}</h1>", headers=headers)
            return
        if fmt != "json":
            # SearxNG answers 403 when the json format is not enabled in settings.yml.
            request.send(403, "<!doctype html><title>403 Forbidden</title><h1>Forbidden</h1>")
            return
        if not q.strip():
            request.send(400, "<!doctype html><title>Bad request</title><h1>Bad request</h1>")
            return

        results = [self._result(raw, i) for i, raw in enumerate(self.results_for(q))]
        request.send_json(
            200,
            {
                "query": q,
                "number_of_results": len(results),
                "results": results,
                "answers": [],
                "corrections": [],
                "infoboxes": [],
                "suggestions": [],
                "unresponsive_engines": [],
            },
        )

    @staticmethod
    def _result(raw: dict[str, Any] | str, index: int) -> dict[str, Any]:
        """Fill a partial result the way SearxNG shapes its results."""
        item: dict[str, Any] = {"url": raw} if isinstance(raw, str) else dict(raw)
        url = str(item.get("url", ""))
        try:
            split = urlsplit(url)
        except ValueError:  # a hostile result's URL need not parse ("http://[::1")
            split = urlsplit("")
        item.setdefault("title", slug_title(split.path.rstrip("/").rsplit("/", 1)[-1] or split.netloc))
        item.setdefault("content", f"A result about {item['title']}.")
        item.setdefault("engine", _ENGINES[index % len(_ENGINES)])
        item.setdefault("engines", [item["engine"]])
        item.setdefault("score", round(1.0 / (index + 1), 4))
        item.setdefault("category", "general")
        item.setdefault("positions", [index + 1])
        item.setdefault("parsed_url", [split.scheme, split.netloc, split.path, "", split.query, split.fragment])
        return item
