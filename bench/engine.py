"""Runs of the real engine: start a research the way the API does, wait for it, and read its tree back.

The wall time runs from the moment `start_research_task` is queued to the research's `finished_at`, both read
from this machine's clock (the workers stamp rows with `timezone.now()`), so polling adds nothing to it.
"""

from __future__ import annotations

import heapq
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from bench.latency import Latencies
from devtools.processes import wait_until


@dataclass
class EngineRun:
    """One research, measured."""

    breadth: int
    depth: int
    research_id: str
    status: str
    wall: float  # seconds, queued → report stored
    ideal: float  # seconds, the critical path of the tree actually built, at the configured latencies
    queries: int
    websites: int
    analysed: int
    events: int
    tasks: int
    sections: int  # of the report's final version: written in parallel, as many at once as there are slots
    breakdown: dict[str, float]  # seconds of the measured critical chain, by step (see critical_chain)
    # Seconds from the last query done to the first report content a reader sees (the first section written;
    # the whole report where it is written in one piece), and to the report stored.
    to_first_section: float = float("nan")
    to_report: float = float("nan")
    # The tree built, one (query id, parent id, pages analysed, pages failed) per query: what `scheduled_time`
    # schedules.
    tree: list[tuple[int, int | None, int, int]] = field(default_factory=list)

    @property
    def ratio(self) -> float:
        return self.wall / self.ideal if self.ideal else float("nan")


def create_user() -> Any:
    from django.contrib.auth import get_user_model

    user_model = get_user_model()
    user, _ = user_model.objects.get_or_create(username="bench", defaults={"email": "bench@example.com"})
    return user


def queue_research(owner: Any) -> str:
    """A research as the API leaves it before its start (one answered follow-up question); returns its id."""
    from research.control import services

    prompt = "How do heat pumps perform in cold climates?"
    return str(services.create_with_answers(owner, prompt, [("Which climates?", "Nordic")]).pk)


def start(research_id: str, breadth: int, depth: int, mode: str = "fixed") -> datetime:
    """Start the research through the service the API uses; returns when its start was queued."""
    from django.utils import timezone

    from research.control import services
    from research.models import Research

    queued_at = timezone.now()
    services.start_research(Research.objects.get(pk=research_id), None, breadth, depth, mode=mode)
    return queued_at


def wait(research_id: str, timeout: float) -> None:
    from research.models import FINISHED_STATUSES, Research

    def finished() -> bool:
        return Research.objects.filter(pk=research_id).values_list("status", flat=True).first() in FINISHED_STATUSES

    wait_until(finished, timeout, message=f"research {research_id} to finish", interval=0.2)


def measure(
    research_id: str, queued_at: datetime, breadth: int, depth: int, latencies: Latencies, timeout: float
) -> EngineRun:
    """Wait for the research, then read its tree back and compare the wall time with its critical path."""
    from research.models import Event, ReportSection, Research, SerpQuery, Website, WebsiteStatus

    wait(research_id, timeout)
    research = Research.objects.get(pk=research_id)
    queries = list(SerpQuery.objects.filter(research_id=research_id).values("id", "parent_id", "finished_at"))
    websites = list(Website.objects.filter(research_id=research_id).values("query_id", "status"))
    analysed = sum(1 for w in websites if w["status"] == WebsiteStatus.ANALYZED)
    end = research.finished_at or research.updated_at
    return EngineRun(
        breadth=breadth,
        depth=depth,
        research_id=research_id,
        status=research.status,
        wall=(end - queued_at).total_seconds(),
        ideal=ideal_time(queries, websites, latencies),
        queries=len(queries),
        websites=len(websites),
        analysed=analysed,
        events=Event.objects.filter(research_id=research_id).count(),
        tasks=task_count(queries, len(websites)),
        sections=ReportSection.objects.filter(research_id=research_id, version=research.report_version).count(),
        breakdown=critical_chain(research_id, queued_at),
        **report_path(research_id, end),
        tree=tree_of(queries, websites),
    )


def tree_of(
    queries: Sequence[Mapping[str, Any]], websites: Sequence[Mapping[str, Any]]
) -> list[tuple[int, int | None, int, int]]:
    """(query id, parent id, pages analysed, pages failed) for each query of the tree."""
    analysed: dict[int, int] = {}
    failed: dict[int, int] = {}
    for website in websites:
        counts = analysed if website["status"] == "analyzed" else failed
        counts[website["query_id"]] = counts.get(website["query_id"], 0) + 1
    return [(q["id"], q["parent_id"], analysed.get(q["id"], 0), failed.get(q["id"], 0)) for q in queries]


def ideal_time(
    queries: Sequence[Mapping[str, Any]], websites: Sequence[Mapping[str, Any]], latencies: Latencies
) -> float:
    """The longest root-to-report path of latencies through the tree actually built.

    A query costs its planning (the call that wrote it), its search, and its slowest website: page fetch plus
    analysis when analysed, the fetch alone when it failed. Its children's planning starts when it is done; the
    report starts when every query is done. Nothing else is needed for the answer, so no scheduler can beat it.
    """
    slowest: dict[int, float] = {}
    for website in websites:
        cost = latencies.page + (latencies.analysis if website["status"] == "analyzed" else 0.0)
        slowest[website["query_id"]] = max(slowest.get(website["query_id"], 0.0), cost)
    parents = {q["id"]: q["parent_id"] for q in queries}
    done_at: dict[int, float] = {}

    def finish(query_id: int) -> float:
        if query_id not in done_at:
            parent = parents[query_id]
            begin = finish(parent) if parent is not None else 0.0
            done_at[query_id] = begin + latencies.plan + latencies.search + slowest.get(query_id, 0.0)
        return done_at[query_id]

    return max((finish(q) for q in parents), default=0.0) + latencies.report


def task_count(queries: Sequence[Mapping[str, Any]], websites: int) -> int:
    """Celery tasks one research runs: start, top-level planning, one planning per inner query, one search per
    query, one scrape and one analysis per website, the report."""
    inner = len({row["parent_id"] for row in queries if row["parent_id"] is not None})
    return 1 + 1 + inner + len(queries) + 2 * websites + 1


def latency_work(run: EngineRun, latencies: Latencies) -> float:
    """Slot-seconds of latency the calls of the tree `run` built take, its report aside: the top planning and one
    per inner query, one search per query, a fetch per page and an analysis per page analysed (the inverse of
    `task_count`)."""
    plans = run.tasks - 3 - run.queries - 2 * run.websites + 1
    fetched = run.websites * latencies.page  # a page that failed is fetched, not analysed
    return plans * latencies.plan + run.queries * latencies.search + fetched + run.analysed * latencies.analysis


def report_time(run: EngineRun, latencies: Latencies, slots: int) -> float:
    """The least time the report of `run` takes on `slots` worker slots: its outline, then its sections, at most
    `slots` at once (a report written in one piece, or an outline with no section: the report's latency)."""
    if not run.sections:
        return latencies.report
    return latencies.report_part * (1 + math.ceil(run.sections / slots))


def slot_bound(run: EngineRun, latencies: Latencies, slots: int) -> float:
    """max(critical path, work / slots) of the tree, then its report: no scheduler on `slots` worker slots
    finishes what `run` built sooner. The tree needs its critical path, and its work (`latency_work`) spread
    over the slots; the report, which starts when the tree is done, its outline and then its sections, as many
    at a time as there are slots (`report_time`)."""
    tree = max(run.ideal - latencies.report, latency_work(run, latencies) / slots)
    return tree + report_time(run, latencies, slots)


class _Chains:
    """The calls of `run`'s tree as `latency_work` counts them, and the longest chain of latencies behind each: the
    top planning, and one per query with children when it is done (its children's searches wait for it); a search
    per query; a fetch and analysis per page, after its query's search (a query is done when its last page is)."""

    def __init__(self, run: EngineRun, latencies: Latencies) -> None:
        self.latencies = latencies
        self.children: dict[int | None, list[int]] = {}
        self.pages: dict[int, list[float]] = {}
        for query, parent, analysed, failed in run.tree:
            self.children.setdefault(parent, []).append(query)
            page = latencies.page + latencies.analysis
            self.pages[query] = [page] * analysed + [latencies.page] * failed
        self._tails: dict[int, float] = {}

    def after_pages(self, query: int | None) -> float:
        """The longest chain behind a query's last page: its children's planning, and the longest child."""
        kids = self.children.get(query, [])
        return self.latencies.plan + max(self.tail(kid) for kid in kids) if kids else 0.0

    def tail(self, query: int) -> float:
        """The longest chain from a query's search on: the search, its slowest page, and what follows."""
        if query not in self._tails:
            slowest = max(self.pages[query], default=0.0)
            self._tails[query] = self.latencies.search + slowest + self.after_pages(query)
        return self._tails[query]

    def calls(self) -> Counter[tuple[float, float, float]]:
        """(earliest start, seconds, longest chain after it ends) of every call, counted: a call can start no
        sooner than the chain before it, and the tree ends no sooner than the chain after it."""
        lat, found = self.latencies, Counter[tuple[float, float, float]]()

        def plan(query: int | None, start: float) -> None:
            found[(start, lat.plan, self.after_pages(query) - lat.plan)] += 1
            searched = start + lat.plan + lat.search  # when the children's pages can start
            for kid in self.children.get(query, []):
                found[(start + lat.plan, lat.search, self.tail(kid) - lat.search)] += 1
                for seconds in self.pages[kid]:
                    found[(searched, seconds, self.after_pages(kid))] += 1
                if self.children.get(kid):
                    plan(kid, searched + max(self.pages[kid], default=0.0))

        plan(None, 0.0)
        return found


def tree_bound(run: EngineRun, latencies: Latencies, slots: int) -> float:
    """The least time any scheduler on `slots` slots needs for `run`'s tree and report, every call taking its
    latency and nothing else: tighter than `slot_bound`, which lets every call of the tree run from the start.

    A call that can start no sooner than e, lasts d and has a chain of t behind it runs, in any schedule that ends
    at T, inside [e, T - t]; so at least p = min(d, e + d - a, t + d - b) of it, and at most the window's length L,
    falls inside a window [a, T - b]. With n calls of p > 0 and n > slots, the window is not empty (those calls
    would all run at once at its edge), and the sum of min(p, L) is at most slots × L: T ≥ a + b + the least such L
    (`_window`). a = b = 0 gives the work over the slots when no call is longer than that; a chain gives the
    critical path. The report then starts when every query is done (`report_time`).
    """
    if not run.tree:
        return float("nan")
    calls = _Chains(run, latencies).calls()
    best = max(start + seconds + after for start, seconds, after in calls)
    heads = sorted({start for start, _, _ in calls} | {start + seconds for start, seconds, _ in calls})
    tails = sorted({after for _, _, after in calls} | {after + seconds for _, seconds, after in calls})
    for a in heads:
        for b in tails:
            parts = Counter[float]()
            for (start, seconds, after), count in calls.items():
                part = min(seconds, start + seconds - a, after + seconds - b)
                if part > 1e-12:
                    parts[part] += count
            if parts.total() > slots:
                best = max(best, a + b + _window(parts, slots))
    return best + report_time(run, latencies, slots)


def _window(parts: Counter[float], slots: int) -> float:
    """The least L > 0 with sum(min(part, L) for each part) ≤ slots × L, for more parts than slots. Between two
    part lengths the sum is the parts shorter than L plus L for each longer one, so L is where that first meets
    slots × L."""
    done, longer = 0.0, parts.total()  # the sum of the parts shorter than L; how many are longer
    for part in sorted(parts):
        if done + longer * part <= slots * part:  # L ≤ part: the parts this long or longer fill L each
            break
        done += part * parts[part]
        longer -= parts[part]
    # At a break done > 0, so longer < slots; past the last part longer is 0.
    return done / (slots - longer)


def scheduled_time(run: EngineRun, latencies: Latencies, slots: int) -> float:
    """The time of `run`'s tree and report under a list schedule on `slots` slots, every call taking its latency
    and nothing else (no CPU, no queue): whenever a slot is free it starts the ready call with the longest chain of
    latencies still behind it (the calls of `_Chains`). Not a bound (a schedule can beat it), but what a good
    scheduler with free CPU does with the same tree; `tree_bound` is what none can beat. The report starts when
    every query is done (`report_time`).
    """
    if not run.tree:
        return float("nan")
    chains = _Chains(run, latencies)
    children, pages = chains.children, chains.pages
    # Calls: (kind, query). "plan" of a query (None: the top planning) starts its children; "search" of a query;
    # "page" of a query, one per page.
    ready: list[tuple[float, int, str, int | None, float]] = []  # (-chain behind, order, kind, query, seconds)
    order = 0

    def make_ready(kind: str, query: int | None, seconds: float, behind: float) -> None:
        nonlocal order
        heapq.heappush(ready, (-behind, order, kind, query, seconds))
        order += 1

    waiting = {query: len(costs) for query, costs in pages.items()}
    undone = len(pages)
    make_ready("plan", None, latencies.plan, chains.after_pages(None))
    running: list[tuple[float, int, str, int | None]] = []
    now = 0.0
    while undone:
        while ready and len(running) < slots:
            _, number, kind, node, seconds = heapq.heappop(ready)
            heapq.heappush(running, (now + seconds, number, kind, node))
        now, _, kind, node = heapq.heappop(running)
        done: list[int] = []
        if kind == "plan":
            for kid in children.get(node, []):
                make_ready("search", kid, latencies.search, chains.tail(kid))
        elif kind == "search":
            assert node is not None
            for cost in pages[node]:
                make_ready("page", node, cost, cost + chains.after_pages(node))
            if not pages[node]:
                done.append(node)
        else:
            assert node is not None
            waiting[node] -= 1
            if not waiting[node]:
                done.append(node)
        for finished in done:
            undone -= 1
            if children.get(finished):
                make_ready("plan", finished, latencies.plan, chains.after_pages(finished))
    return now + report_time(run, latencies, slots)


def report_path(research_id: str, end: datetime) -> dict[str, float]:
    """How long the reader waits once the last query is done: for the first report content, and for the report."""
    from django.db.models import Max, Min

    from research.models import Event, SerpQuery

    last_query = SerpQuery.objects.filter(research_id=research_id).aggregate(last=Max("finished_at"))["last"]
    events = Event.objects.filter(research_id=research_id)
    first = events.filter(type="report_section_written").aggregate(first=Min("created_at"))["first"]
    if first is None:  # a report written in one piece: its first content is the whole of it
        first = events.filter(type="report_writing_successful").aggregate(first=Min("created_at"))["first"]
    if last_query is None or first is None:
        return {}
    return {"to_first_section": (first - last_query).total_seconds(), "to_report": (end - last_query).total_seconds()}


def critical_chain(research_id: str, queued_at: datetime) -> dict[str, float]:
    """Where the measured time went, along the chain of queries that finished last (root → last leaf).

    Steps: `start` (queued → research running), per level `plan` (parent done, or start, → query stored),
    `queue` (stored → its search task began), `search` (→ websites stored), `pages` (→ last website done, the
    query's end), then `report` (last query done → report stored). Ideal values: plan, search, page + analysis,
    report latencies, and 0 for start and queue.
    """
    from django.db.models import Min

    from research.models import Research, SerpQuery, Website

    research = Research.objects.get(pk=research_id)
    rows = {q["id"]: q for q in SerpQuery.objects.filter(research_id=research_id).values()}
    if not rows or research.started_at is None:
        return {}
    last = max(rows.values(), key=lambda q: q["finished_at"] or q["created_at"])
    chain = []
    node: Mapping[str, Any] | None = last
    while node is not None:
        chain.append(node)
        node = rows.get(node["parent_id"]) if node["parent_id"] else None
    chain.reverse()
    found = {
        w["query_id"]: w["created"]
        for w in Website.objects.filter(query_id__in=[q["id"] for q in chain])
        .values("query_id")
        .annotate(created=Min("created_at"))
    }
    out = {"start": (research.started_at - queued_at).total_seconds()}
    previous_end = research.started_at
    for level, query in enumerate(chain, start=1):
        began = query["started_at"] or query["created_at"]
        stored = found.get(query["id"], query["finished_at"])
        out[f"plan{level}"] = (query["created_at"] - previous_end).total_seconds()
        out[f"queue{level}"] = (began - query["created_at"]).total_seconds()
        out[f"search{level}"] = (stored - began).total_seconds()
        out[f"pages{level}"] = (query["finished_at"] - stored).total_seconds()
        out.update(_last_page(research_id, query, stored, level))
        previous_end = query["finished_at"]
    if research.finished_at:
        out["report"] = (research.finished_at - previous_end).total_seconds()
    return out


def _last_page(research_id: str, query: Mapping[str, Any], stored: datetime, level: int) -> dict[str, float]:
    """`pages` of a chain's query taken apart along its website that finished last: `wait` (websites stored → its
    scrape began), `fetch` (→ its analysis began: the fetch, the store and the analysis's queue), `analysis`
    (→ analysed), `close` (→ the query's end: its review). Ideal: 0, page latency, analysis latency, 0."""
    from research.models import Event, EventType, Website

    last = (
        Website.objects.filter(query_id=query["id"], finished_at__isnull=False)
        .order_by("-finished_at")
        .values("id", "finished_at")
        .first()
    )
    if last is None or query["finished_at"] is None:
        return {}
    times = {
        kind: Event.objects.filter(research_id=research_id, type=kind, data__website_id=last["id"])
        .order_by("created_at")
        .values_list("created_at", flat=True)
        .first()
        for kind in (EventType.SCRAPING, EventType.ANALYZING, EventType.ANALYZED)
    }
    scraping, analyzing, analyzed = (
        times[kind] for kind in (EventType.SCRAPING, EventType.ANALYZING, EventType.ANALYZED)
    )
    if scraping is None or analyzing is None or analyzed is None:
        return {}
    return {
        f"wait{level}": (scraping - stored).total_seconds(),
        f"fetch{level}": (analyzing - scraping).total_seconds(),
        f"analysis{level}": (analyzed - analyzing).total_seconds(),
        f"close{level}": (query["finished_at"] - analyzed).total_seconds(),
    }
