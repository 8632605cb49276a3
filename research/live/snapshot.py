"""The whole current state of a research, as the API returns it and every push carries it.

It runs a fixed number of SQL queries whatever the size of the tree (one per table), and never loads page text.
The shape is published in research/schemas/snapshot.v<N>.json; bump SNAPSHOT_VERSION when it changes.
"""

from collections import Counter, defaultdict
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from django.db import connection, transaction
from django.db.models.fields.json import KeyTransform

from research.live.coverage import coverage
from research.live.figures import PageCounts, page_counts
from research.models import (
    AskedQuestion,
    Document,
    DocumentKind,
    Event,
    Extract,
    FollowUpQuestion,
    MemoryItem,
    MemoryKind,
    QueryStatus,
    ReportSection,
    Research,
    SerpQuery,
    Website,
    WebsiteStatus,
)
from research.record import database
from research.record.planning import descendants, gap_round_queries
from research.record.usage import research_cost, usage_of, with_usage
from research.types import ResearchId

SNAPSHOT_VERSION = 4


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def research_summary(research: Research) -> dict[str, Any]:
    """The sidebar's view of a research: also what GET /api/research lists."""
    return {
        "id": str(research.id),
        "title": research.title,
        "status": research.status,
        "outcome": research.outcome,
        "stop_reason": research.stop_reason,
        "created_at": _iso(research.created_at),
        "finished_at": _iso(research.finished_at),
    }


def build_snapshot(research_id: ResearchId) -> dict[str, Any]:
    """Load the research, its questions, queries, websites, extracts, memory, documents, report sections and
    conversation: nine queries in all (the coverage is counted from what they load)."""
    research = with_usage(research_id)
    query_rows = list(
        SerpQuery.objects.filter(research_id=research.pk)
        .order_by("depth", "parent_id", "position", "id")
        .values(*QUERY_FIELDS, "learnings")
    )
    website_rows = list(
        Website.objects.filter(research_id=research.pk).order_by("query_id", "position").values(*WEBSITE_FIELDS)
    )
    extracts: dict[int, list[dict[str, str]]] = defaultdict(list)
    for row in (
        Extract.objects.filter(research_id=research.pk)
        .order_by("website_id", "position")
        .values("website_id", "fact", "quote")
    ):
        extracts[row["website_id"]].append({"fact": row["fact"], "quote": row["quote"]})
    website_statuses = Counter(row["status"] for row in website_rows)
    extract_count = sum(len(items) for items in extracts.values())
    docs, report = documents(research.pk, research.report_version)
    sections = _report_sections(research)
    analysed_urls = {row["url"] for row in website_rows if row["status"] == WebsiteStatus.ANALYZED}
    pages = page_counts((row["url"], row["status"]) for row in website_rows)
    return {
        "version": SNAPSHOT_VERSION,
        "research": research_state(research),
        "questions": questions(research.pk),
        "queries": _queries(query_rows, website_rows, extracts),
        "memory": _memory(research),
        **docs,
        "report_sections": [{key: section[key] for key in SECTION_FIELDS} for section in sections],
        "conversation": conversation(research.pk),
        "progress": progress(research, query_rows, website_statuses, extract_count, pages),
        "coverage": coverage(
            research.report_words, extract_count, pages.analysed, sections, report, lambda: analysed_urls
        ),
    }


def research_status(research_id: ResearchId) -> dict[str, Any]:
    """What a client following a research asks for every few seconds: its state and its progress counts, as the
    snapshot gives them, from four small reads (no texts, no extracts, no report). Raises Research.DoesNotExist."""
    research = with_usage(research_id)
    query_rows = list(SerpQuery.objects.filter(research_id=research.pk).values(*QUERY_FIELDS))
    website_rows = list(Website.objects.filter(research_id=research.pk).values_list("url", "status"))
    extract_count = Extract.objects.filter(research_id=research.pk).count()
    statuses = Counter(status for _, status in website_rows)
    return {
        "research": research_state(research),
        "progress": progress(research, query_rows, statuses, extract_count, page_counts(website_rows)),
    }


def questions(research_id: ResearchId) -> list[dict[str, Any]]:
    """The follow-up questions asked before the research began, in order, with the user's answers."""
    rows = FollowUpQuestion.objects.filter(research_id=research_id).order_by("position")
    return [dict(row) for row in rows.values("position", "question", "answer")]


def documents(research_id: ResearchId, report_version: int) -> tuple[dict[str, Any], str | None]:
    """The latest report and error output, and the list of report versions: the snapshot's document keys; and the
    markdown of the report of `report_version` (the version being written or last written), None until stored."""
    latest: dict[str, Mapping[str, Any]] = {}
    report_versions = []
    current = None
    # In version order, so the latest of each kind is the one kept.
    for doc in (
        Document.objects.filter(research_id=research_id)
        .order_by("version")
        .values("kind", "version", "markdown", "stats", "created_at")
    ):
        latest[doc["kind"]] = doc
        if doc["kind"] == DocumentKind.REPORT:
            report_versions.append({"version": doc["version"], "created_at": _iso(doc["created_at"])})
            if doc["version"] == report_version:
                current = doc["markdown"]
    keys = {
        "report": _document(latest.get(DocumentKind.REPORT)),
        "report_versions": report_versions,
        "error_output": _document(latest.get(DocumentKind.ERROR_OUTPUT)),
    }
    return keys, current


QUERY_FIELDS = (
    "id",
    "parent_id",
    "depth",
    "position",
    "query",
    "objective",
    "retries",
    "round",
    "score",
    "dimensions",
    "gaps",
    "decision",
    "decision_reason",
    "status",
    "error",
    "created_at",
    "started_at",
    "finished_at",
)
WEBSITE_FIELDS = (
    "id",
    "query_id",
    "url",
    "title",
    "status",
    "failure_reason",
    "error",
    "http_status",
    "content_type",
    "created_at",
    "finished_at",
)
TIMES = ("created_at", "started_at", "finished_at")


SECTION_FIELDS = ("position", "title", "status", "markdown")


def _report_sections(research: Research) -> list[dict[str, Any]]:
    """The sections of the report version being written (or last written), in outline order, as they land; each
    with SECTION_FIELDS and `findings`, the Extract ids its writer was given (for the coverage)."""
    return list(
        ReportSection.objects.filter(research_id=research.pk, version=research.report_version)
        .order_by("position")
        .values(*SECTION_FIELDS, findings=KeyTransform("findings", "plan"))
    )


CONVERSATION_FIELDS = ("id", "question", "status", "answer", "sources_answer", "suggested_query", "created_at")


def conversation(research_id: ResearchId) -> list[dict[str, Any]]:
    """The questions asked of the research, in order, with their answers (markdown) as they land."""
    rows = AskedQuestion.objects.filter(research_id=research_id).order_by("position").values(*CONVERSATION_FIELDS)
    return [{**row, "created_at": _iso(row["created_at"])} for row in rows]


def research_state(research: Research) -> dict[str, Any]:
    """`research` read with the totals of its calls (`Research.objects.with_usage()`)."""
    used = usage_of(research)
    return {
        **research_summary(research),
        "prompt": research.prompt,
        "num_questions": research.num_questions,
        "breadth": research.breadth,
        "depth": research.depth,
        "engine": research.engine,
        "mode": research.mode,
        "min_depth": research.min_depth,
        "quality_threshold": research.quality_threshold,
        "gap_rounds": research.gap_rounds,
        "score": research.score,
        "error": research.error,
        "last_event_seq": research.last_event_seq,
        "updated_at": _iso(research.updated_at),
        "started_at": _iso(research.started_at),
        "budget": {
            "seconds": research.budget_seconds,
            "tokens": research.budget_tokens,
            "usd": float(research.budget_usd) if research.budget_usd is not None else None,
        },
        "partial": research.partial,
        "stop_reason": research.stop_reason,
        "outcome": research.outcome,
        "report_version": research.report_version,
        "report_words": research.report_words,
        "review_plan": research.review_plan,
        "usage": {
            "prompt_tokens": used.prompt_tokens,
            "completion_tokens": used.completion_tokens,
            "cost_usd": research_cost(used),
        },
    }


def _with_times(row: dict[str, Any], fields: tuple[str, ...]) -> dict[str, Any]:
    return {key: _iso(row[key]) if key in TIMES else row[key] for key in fields}


def _queries(
    query_rows: list[dict[str, Any]], website_rows: list[dict[str, Any]], extracts: dict[int, list[dict[str, str]]]
) -> list[dict[str, Any]]:
    websites: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for row in website_rows:
        websites[row["query_id"]].append(website_state(row, extracts.get(row["id"], [])))
    return [{**query_state(row), "websites": websites.get(row["id"], [])} for row in query_rows]


def query_state(row: dict[str, Any]) -> dict[str, Any]:
    """A query as the snapshot shows it, without its websites; `row` has QUERY_FIELDS and learnings."""
    return {**_with_times(row, QUERY_FIELDS), "learnings": row["learnings"] or []}


_WEBSITE_STATE_FIELDS = tuple(field for field in WEBSITE_FIELDS if field != "query_id")


def website_state(row: dict[str, Any], extracts: list[dict[str, str]]) -> dict[str, Any]:
    """A website as the snapshot shows it (under its query); `row` has WEBSITE_FIELDS."""
    return {**_with_times(row, _WEBSITE_STATE_FIELDS), "extracts": extracts}


MEMORY_SECTIONS: dict[str, str] = {
    MemoryKind.INSIGHT: "insights",
    MemoryKind.GAP: "gaps",
    MemoryKind.CONTRADICTION: "contradictions",
}


def _memory(research: Research) -> dict[str, list[dict[str, Any]]]:
    """Insights, open gaps and contradictions, oldest first; a gap a later branch answered is no longer listed."""
    memory: dict[str, list[dict[str, Any]]] = {section: [] for section in MEMORY_SECTIONS.values()}
    rows = MemoryItem.objects.filter(research_id=research.pk, closed=False).order_by("id")
    for row in rows.values(*MEMORY_FIELDS):
        memory[MEMORY_SECTIONS[row["kind"]]].append(memory_state(row))
    return memory


MEMORY_FIELDS = ("id", "kind", "text", "query_id", "website_ids")


def memory_state(row: dict[str, Any]) -> dict[str, Any]:
    return {"id": row["id"], "text": row["text"], "query_id": row["query_id"], "website_ids": row["website_ids"]}


def progress(
    research: Research,
    query_rows: list[dict[str, Any]],
    website_statuses: Counter[str],
    extract_count: int,
    pages: PageCounts,
) -> dict[str, int]:
    """Counts for the progress bar and the cards. `query_rows` need id, parent_id, depth, position, retries, round,
    status and decision; `website_statuses` counts the research's websites (one per query and result) by status;
    `pages` counts its pages (distinct URLs, research/live/figures.py), the figures the page shows."""
    planned = 0
    if research.breadth and research.depth:
        # Each gap-filling round (adaptive mode) adds depth-1 branches, each with its whole subtree.
        per_round = gap_round_queries(research.breadth) * (1 + descendants(research.breadth, research.depth, 1))
        per_branch = 1 + descendants(research.breadth, research.depth, 1)
        # The top-level queries as planned (breadth of them; a reviewed plan may hold another number), then a branch
        # its user added to the finished research (dig deeper): a round of its own, after the gap rounds.
        top = sum(1 for row in query_rows if row["depth"] == 1 and row["round"] == 0) or research.breadth
        added = sum(1 for row in query_rows if row["depth"] == 1 and row["round"] > (research.gap_rounds or 0))
        planned = (
            top * per_branch
            + (research.gap_rounds or 0) * per_round
            + added * per_branch
            - _pruned(research, query_rows)
        )
    return {
        "queries_planned": planned,
        "queries_created": len(query_rows),
        "queries_done": sum(1 for row in query_rows if row["status"] == QueryStatus.DONE),
        "queries_failed": sum(1 for row in query_rows if row["status"] == QueryStatus.FAILED),
        "queries_cancelled": sum(1 for row in query_rows if row["status"] == QueryStatus.CANCELLED),
        "websites_found": sum(website_statuses.values()),
        "websites_analysed": website_statuses[WebsiteStatus.ANALYZED],
        "websites_failed": website_statuses[WebsiteStatus.FAILED],
        "pages_found": pages.found,
        "pages_analysed": pages.analysed,
        "pages_failed": pages.failed,
        "extracts": extract_count,
    }


def _pruned(research: Research, query_rows: list[dict[str, Any]]) -> int:
    """Planned queries that will not run: the subtrees below failed and cancelled queries, and below done ones
    whose review stopped their branch (the outermost ones;
    a retried query's children of earlier attempts are history, not part of the tree)."""
    breadth, depth = research.breadth or 1, research.depth or 1
    rows = {row["id"]: row for row in query_rows}
    children: dict[Any, list[dict[str, Any]]] = defaultdict(list)
    for row in query_rows:
        parent = rows.get(row["parent_id"])
        if row["parent_id"] is None or (parent is not None and row["position"] // breadth == parent["retries"]):
            children[row["parent_id"]].append(row)
    pruned, stack = 0, list(children[None])
    while stack:
        row = stack.pop()
        stopped = row["status"] == QueryStatus.DONE and row["decision"] == "stop"
        if stopped or row["status"] in (QueryStatus.FAILED, QueryStatus.CANCELLED):
            pruned += descendants(breadth, depth, row["depth"])
        else:
            stack.extend(children[row["id"]])
    return pruned


def _document(doc: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if doc is None:
        return None
    return {
        "version": doc["version"],
        "markdown": doc["markdown"],
        "stats": doc["stats"] or {},
        "created_at": _iso(doc["created_at"]),
    }


def events_after(research_id: ResearchId, after: int, limit: int) -> list[dict[str, Any]]:
    """The research's events after seq `after`, at most `limit`, in order, as the pushes and catch-up carry them."""
    rows = database.read_values(
        Event,
        ("seq", "type", "data", "created_at"),
        "research_id = %s AND seq > %s ORDER BY seq LIMIT %s",
        [Research._meta.pk.get_db_prep_value(research_id, connection), after, limit],
    )
    return [{**row, "created_at": row["created_at"].isoformat()} for row in rows]


@contextmanager
def consistent_view(lock_timeout_ms: int | None = None) -> Iterator[int]:
    """A transaction in which every read sees one moment (REPEATABLE READ); yields the oldest transaction id still
    running at that moment.

    `lock_timeout_ms`: a read that waits longer than this for a table lock fails (LockNotAvailable) instead of
    waiting. Reads only wait behind an exclusive lock (a migration, a TRUNCATE); a reader that can give up, as a
    push can, then steps aside at once rather than hold its other tables and deadlock the exclusive locker."""
    with transaction.atomic():
        yield database.begin_consistent_view(lock_timeout_ms)


def read_history(research_id: ResearchId, after: int, limit: int) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The events after seq `after` (at most `limit`) and the snapshot, read in one consistent view.

    Both are read in one REPEATABLE READ transaction on PostgreSQL: an event committed between two separate
    reads would otherwise be in the snapshot but not among the events sent with it. Raises Research.DoesNotExist.
    """
    with consistent_view():
        return events_after(research_id, after, limit), build_snapshot(research_id)
