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

from research.record.planning import children_per_query

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

    from research.live.snapshot import build_snapshot

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
class DeltaFigures:
    label: str
    build_ms: float  # median over `repeat` reads of one push: its events and its delta
    json_bytes: int
    sql_queries: int


def measure_delta(label: str, research_id: str, repeat: int = 20) -> DeltaFigures:
    """What the pusher spends on a push of one event in a big research: one website analysed (its row and a new
    extract) and its event, read as a delta since the view before them."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from research.live.delta import Since, consistent_view, read_push
    from research.models import Extract, Research, Website
    from research.record.events import record_event

    # The view the push follows: taken once every transaction running when the tree was written has ended, as a
    # push a second later would find it (until then a delta also carries the rows those may have written).
    newest = _newest_xid(research_id)
    for _ in range(100):
        with consistent_view() as xmin:
            seq = Research.objects.get(pk=research_id).last_event_seq
        if xmin is None or xmin > newest:  # None: no transaction ids to wait for (not PostgreSQL)
            break
        time.sleep(0.1)
    since = Since(seq, xmin)
    website = Website.objects.filter(research_id=research_id).order_by("id")[0]
    Website.objects.filter(pk=website.pk).update(title="Analysed again")
    Extract.objects.create(research_id=research_id, website=website, position=99, fact=FACT, quote=QUOTE)
    record_event(research_id, "analyzed_a_website", {"website_id": website.pk, "url": website.url})
    times = []
    for _ in range(repeat):
        began = time.perf_counter()
        events, delta, _, _ = read_push(research_id, seq, 500, since)
        times.append(time.perf_counter() - began)
    with CaptureQueriesContext(connection) as captured:
        read_push(research_id, seq, 500, since)
    return DeltaFigures(
        label=label,
        build_ms=statistics.median(times) * 1000,
        json_bytes=len(json.dumps({"type": "update", "events": events, "delta": delta}).encode()),
        sql_queries=len(captured.captured_queries),
    )


def _newest_xid(research_id: str) -> int:
    """The newest transaction id among the research's websites, 64-bit (with the epoch), as views' ids are."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT max(xmin::text::bigint) FROM research_website WHERE research_id = %s", [research_id])
        newest = cursor.fetchone()[0]
        cursor.execute("SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint")
        epoch = cursor.fetchone()[0] >> 32
    return newest + (epoch << 32)


@dataclass
class Watched:
    """What one websocket client of the research page would have received: the history on connect (the whole
    state), then every push; `matches` says whether the state it built from them equals the final snapshot."""

    messages: int = 0
    bytes: int = 0
    events: int = 0
    seqs: list[int] = field(default_factory=list)
    matches: bool | None = None
    by_part: dict[str, int] = field(default_factory=dict)  # bytes of the pushes by part: events, and each delta key
    resent: int = 0  # bytes of rows sent again unchanged (see _unchanged_bytes)

    @property
    def in_order(self) -> bool:
        return self.seqs == sorted(self.seqs) and len(set(self.seqs)) == len(self.seqs)


class Watcher:
    """Joins the research's channel group through the channels_redis layer, as the consumer does, and counts
    the bytes the consumer would send for each `research.update` (its exact JSON text)."""

    def __init__(self, research_id: str) -> None:
        from research.live.push import research_group

        self.research_id = research_id
        self.group = research_group(research_id)
        self.result = Watched()
        self.state: dict[str, Any] | None = None
        self._updates: list[dict[str, Any]] = []
        self._joined = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._listen()), name="bench-watcher", daemon=True)
        self.error: BaseException | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._layer: Any = None
        self._channel = ""

    def __enter__(self) -> Watcher:
        from research.live.snapshot import read_history
        from research.web.consumers import encode

        self._thread.start()
        if not self._joined.wait(10):
            raise RuntimeError("the watcher could not join the channel group")
        # As a page opening now: the history and the whole state first, then the pushes.
        events, snapshot = read_history(self.research_id, 0, 20_000)
        self.state = snapshot
        history = {"type": "history", "after": 0, "events": events, "snapshot": snapshot}
        self.result.bytes += len(encode(history).encode())
        return self

    def __exit__(self, *exc: object) -> None:
        # A stop message rather than a receive timeout: cancelling a channels_redis receive can lose the message
        # it was taking, which would show up here as an event the engine never lost.
        if self._loop is not None:
            asyncio.run_coroutine_threadsafe(self._layer.send(self._channel, {"type": "bench.stop"}), self._loop)
        self._thread.join(10)

    async def _listen(self) -> None:
        from channels.layers import get_channel_layer

        from research.web.consumers import encode, update_message

        self._loop = asyncio.get_running_loop()
        self._layer = layer = get_channel_layer()
        assert layer is not None, "the bench's settings configure a channel layer"
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
                update = update_message(message)
                self.result.messages += 1
                self.result.bytes += len(encode(update).encode())
                parts = {"events": update["events"], **{f"delta.{k}": v for k, v in update["delta"].items()}}
                for part, value in parts.items():
                    self.result.by_part[part] = self.result.by_part.get(part, 0) + len(encode(value).encode())
                self.result.events += len(message["events"])
                self.result.seqs.extend(e["seq"] for e in message["events"])
                self._updates.append(update)
        except BaseException as exc:  # noqa: BLE001 - surfaced to the runner after the run
            self.error = exc
        finally:
            await layer.group_discard(self.group, channel)

    def settle(self, research_id: str, timeout: float = 15) -> None:
        """Wait until the last event of the research has been pushed and received, then check that the state a
        page would hold equals the final snapshot."""
        from research.live.snapshot import build_snapshot
        from research.models import Research

        last = Research.objects.get(pk=research_id).last_event_seq
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self._last_pushed() < last:
            time.sleep(0.1)
        self.result.matches = self._replay() == json.loads(json.dumps(build_snapshot(research_id)))

    def _last_pushed(self) -> int:
        return self.result.seqs[-1] if self.result.seqs else 0

    def _replay(self) -> dict[str, Any] | None:
        """The state a page builds from the history and the pushes (after the run: applying is the page's work,
        not the watcher's); None if a delta did not follow the state."""
        from devtools.deltas import DeltaMismatch, apply_delta

        state = json.loads(json.dumps(self.state))
        for update in self._updates:
            delta = json.loads(json.dumps(update["delta"]))
            if delta["research"]["last_event_seq"] < state["research"]["last_event_seq"]:
                continue  # read before the history this client started from
            if delta["base"] > state["research"]["last_event_seq"]:
                return None
            self.result.resent += _unchanged_bytes(state, delta)
            try:
                state = apply_delta(state, delta)
            except DeltaMismatch:
                return None
        return state


def _unchanged_bytes(state: dict[str, Any], delta: dict[str, Any]) -> int:
    """Bytes of the rows a delta carries that the state already holds as they are (rows written just before the
    previous push's view, or written again with the same values, such as a renewed lease)."""
    from research.web.consumers import encode

    held: dict[tuple[str, Any], Any] = {}
    for query in state["queries"]:
        held[("q", query["id"])] = {k: v for k, v in query.items() if k != "websites"}
        for website in query["websites"]:
            held[("w", website["id"])] = website
    for section in state["report_sections"]:
        held[("s", section["position"])] = section
    rows = [("q", row["id"], row) for row in delta.get("queries", {}).get("rows", [])]
    rows += [("w", row["id"], row) for group in delta.get("websites", []) for row in group["rows"]]
    rows += [("s", row["position"], row) for row in delta["report_sections"]["rows"]]
    return sum(len(encode(row).encode()) for kind, key, row in rows if held.get((kind, key)) == row)
