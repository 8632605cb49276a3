"""Snapshot figures: build time, size and SQL queries at 110 queries × 7 pages, and what one watching client
receives over a whole research."""

from __future__ import annotations

import asyncio
import json
import statistics
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from research.planning import children_per_query

# Texts as long as those the fakes' research model makes the engine store.
FACT = "The page reports: Heat pump adoption rose to 41 percent in 2021, up from 22 percent two years earlier."
QUOTE = "Heat pump adoption rose to 41 percent in 2021, up from 22 percent two years earlier."
PAGE_TEXT = ("Heat pumps keep working at minus twenty five degrees with a lower coefficient of performance. " * 40)[
    :3000
]


def build_tree(owner: Any, breadth: int, depth: int, per_query: int = 7, facts: int = 2) -> str:
    """A completed research with the full tree, `per_query` analysed websites per query, `facts` extracts each,
    page text and a report; returns its id. Written with bulk inserts, one level at a time."""
    from research.models import (
        Document,
        DocumentKind,
        Extract,
        FollowUpQuestion,
        Page,
        PageStatus,
        QueryStatus,
        Research,
        ResearchStatus,
        SerpQuery,
        Website,
        WebsiteStatus,
    )

    research = Research.objects.create(
        owner=owner,
        prompt="How do heat pumps perform in cold climates?",
        title="Heat pumps in cold climates",
        status=ResearchStatus.COMPLETED,
        num_questions=1,
        breadth=breadth,
        depth=depth,
    )
    FollowUpQuestion.objects.create(research=research, position=0, question="Which climates?", answer="Nordic")

    def query(parent: Any, level: int, position: int) -> Any:
        name = f"heat pump cold climate performance {level}.{position}" + ("" if parent is None else f" / {parent.pk}")
        return SerpQuery(
            research=research,
            parent=parent,
            depth=level,
            position=position,
            query=name,
            objective=f"Find measured figures about {name}",
            status=QueryStatus.DONE,
            learnings=[FACT] * (per_query * facts),
        )

    level_rows = SerpQuery.objects.bulk_create(query(None, 1, i) for i in range(breadth))
    queries = list(level_rows)
    for level in range(2, depth + 1):
        count = children_per_query(breadth, level - 1)
        level_rows = SerpQuery.objects.bulk_create(
            query(parent, level, i) for parent in level_rows for i in range(count)
        )
        queries.extend(level_rows)
    urls = [
        (q, f"http://127.0.0.1:8000/page/heat-pump-cold-climate-{q.pk}-{i}") for q in queries for i in range(per_query)
    ]
    pages = Page.objects.bulk_create(
        Page(research=research, url=url, status=PageStatus.FETCHED, title="Heat Pump Cold Climate", text=PAGE_TEXT)
        for _, url in urls
    )
    websites = Website.objects.bulk_create(
        Website(
            research=research,
            query=q,
            page=page,
            position=i % per_query,
            url=url,
            title="Heat Pump Cold Climate",
            snippet=QUOTE,
            status=WebsiteStatus.ANALYZED,
            http_status=200,
            content_type="text/html; charset=utf-8",
        )
        for i, ((q, url), page) in enumerate(zip(urls, pages, strict=True))
    )
    Extract.objects.bulk_create(
        Extract(research=research, website=w, position=k, fact=FACT, quote=QUOTE)
        for w in websites
        for k in range(facts)
    )
    report = "# Heat pumps in cold climates\n\n" + "\n".join(f"{FACT} [{n}]" for n in range(1, 300))
    Document.objects.create(research=research, kind=DocumentKind.REPORT, markdown=report, stats={})
    return str(research.pk)


@dataclass
class SnapshotFigures:
    label: str
    queries: int
    websites: int
    build_ms: float  # median over `repeat` builds
    json_bytes: int
    sql_queries: int


def measure_snapshot(label: str, research_id: str, repeat: int = 20) -> SnapshotFigures:
    """Median build time of `build_snapshot`, its JSON size, and the SQL queries one build runs."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from research.snapshot import build_snapshot

    build_snapshot(research_id)  # warm: imports, connection
    times = []
    for _ in range(repeat):
        began = time.perf_counter()
        snapshot = build_snapshot(research_id)
        times.append(time.perf_counter() - began)
    with CaptureQueriesContext(connection) as captured:
        build_snapshot(research_id)
    return SnapshotFigures(
        label=label,
        queries=len(snapshot["queries"]),
        websites=sum(len(q["websites"]) for q in snapshot["queries"]),
        build_ms=statistics.median(times) * 1000,
        json_bytes=len(json.dumps(snapshot).encode()),
        sql_queries=len(captured.captured_queries),
    )


@dataclass
class Watched:
    """What one websocket client of the research page would have received."""

    messages: int = 0
    bytes: int = 0
    events: int = 0
    seqs: list[int] = field(default_factory=list)

    @property
    def in_order(self) -> bool:
        return self.seqs == sorted(self.seqs) and len(set(self.seqs)) == len(self.seqs)


class Watcher:
    """Joins the research's channel group through the channels_redis layer, as the consumer does, and counts
    the bytes the consumer would send for each `research.update` (its exact JSON text)."""

    def __init__(self, research_id: str) -> None:
        from research.push import research_group

        self.group = research_group(research_id)
        self.result = Watched()
        self._joined = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._listen()), name="bench-watcher", daemon=True)
        self.error: BaseException | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._layer: Any = None
        self._channel = ""

    def __enter__(self) -> Watcher:
        self._thread.start()
        if not self._joined.wait(10):
            raise RuntimeError("the watcher could not join the channel group")
        return self

    def __exit__(self, *exc: object) -> None:
        # A stop message rather than a receive timeout: cancelling a channels_redis receive can lose the message
        # it was taking, which would show up here as an event the engine never lost.
        if self._loop is not None:
            asyncio.run_coroutine_threadsafe(self._layer.send(self._channel, {"type": "bench.stop"}), self._loop)
        self._thread.join(10)

    async def _listen(self) -> None:
        from channels.layers import get_channel_layer

        self._loop = asyncio.get_running_loop()
        self._layer = layer = get_channel_layer()
        self._channel = channel = await layer.new_channel()
        await layer.group_add(self.group, channel)
        self._joined.set()
        try:
            while True:
                message = await layer.receive(channel)
                if message.get("type") == "bench.stop":
                    return
                if message.get("type") != "research.update":
                    continue
                text = json.dumps({"type": "update", "events": message["events"], "snapshot": message["snapshot"]})
                self.result.messages += 1
                self.result.bytes += len(text.encode())
                self.result.events += len(message["events"])
                self.result.seqs.extend(e["seq"] for e in message["events"])
        except BaseException as exc:  # noqa: BLE001 - surfaced to the runner after the run
            self.error = exc
        finally:
            await layer.group_discard(self.group, channel)

    def settle(self, research_id: str, timeout: float = 15) -> None:
        """Wait until the last event of the research has been pushed and received."""
        from research.models import Research

        last = Research.objects.get(pk=research_id).last_event_seq
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and (not self.result.seqs or self.result.seqs[-1] < last):
            time.sleep(0.1)
