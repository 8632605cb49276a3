"""The one function that builds the whole current state of a research (SPEC §5).

It runs a fixed number of SQL queries whatever the size of the tree (one per table), and never loads page text.
The shape is published in research/schemas/snapshot.v1.json; bump SNAPSHOT_VERSION when it changes.
"""

from collections import defaultdict
from datetime import datetime
from typing import Any

from research.models import (
    Document,
    DocumentKind,
    Extract,
    FollowUpQuestion,
    QueryStatus,
    Research,
    SerpQuery,
    Website,
    WebsiteStatus,
)
from research.planning import total_queries

SNAPSHOT_VERSION = 1


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def research_summary(research: Research) -> dict[str, Any]:
    """The sidebar's view of a research: also what GET /api/research lists."""
    return {
        "id": str(research.id),
        "title": research.title,
        "status": research.status,
        "created_at": _iso(research.created_at),
        "finished_at": _iso(research.finished_at),
    }


def build_snapshot(research_id: Any) -> dict[str, Any]:
    """Load the research, its questions, queries, websites, extracts and documents: six queries in all."""
    research = Research.objects.get(pk=research_id)

    questions = [
        {"position": q["position"], "question": q["question"], "answer": q["answer"]}
        for q in FollowUpQuestion.objects.filter(research_id=research.pk)
        .order_by("position")
        .values("position", "question", "answer")
    ]

    query_rows = list(
        SerpQuery.objects.filter(research_id=research.pk)
        .order_by("depth", "parent_id", "position", "id")
        .values(
            "id",
            "parent_id",
            "depth",
            "position",
            "query",
            "objective",
            "status",
            "error",
            "learnings",
            "created_at",
            "started_at",
            "finished_at",
        )
    )
    website_rows = list(
        Website.objects.filter(research_id=research.pk)
        .order_by("query_id", "position")
        .values(
            "id",
            "query_id",
            "position",
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
    )
    extracts_by_website: dict[int, list[dict[str, str]]] = defaultdict(list)
    for row in (
        Extract.objects.filter(research_id=research.pk)
        .order_by("website_id", "position")
        .values("website_id", "fact", "quote")
    ):
        extracts_by_website[row["website_id"]].append({"fact": row["fact"], "quote": row["quote"]})
    documents = {
        doc["kind"]: doc
        for doc in Document.objects.filter(research_id=research.pk).values("kind", "markdown", "stats", "created_at")
    }

    websites_by_query: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for row in website_rows:
        websites_by_query[row["query_id"]].append(
            {
                "id": row["id"],
                "url": row["url"],
                "title": row["title"],
                "status": row["status"],
                "failure_reason": row["failure_reason"],
                "error": row["error"],
                "http_status": row["http_status"],
                "content_type": row["content_type"],
                "created_at": _iso(row["created_at"]),
                "finished_at": _iso(row["finished_at"]),
                "extracts": extracts_by_website.get(row["id"], []),
            }
        )
    queries = [
        {
            "id": row["id"],
            "parent_id": row["parent_id"],
            "depth": row["depth"],
            "position": row["position"],
            "query": row["query"],
            "objective": row["objective"],
            "status": row["status"],
            "error": row["error"],
            "learnings": row["learnings"] or [],
            "created_at": _iso(row["created_at"]),
            "started_at": _iso(row["started_at"]),
            "finished_at": _iso(row["finished_at"]),
            "websites": websites_by_query.get(row["id"], []),
        }
        for row in query_rows
    ]

    website_statuses = [row["status"] for row in website_rows]
    planned = total_queries(research.breadth, research.depth) if research.breadth and research.depth else 0
    progress = {
        "queries_planned": planned,
        "queries_created": len(query_rows),
        "queries_done": sum(1 for row in query_rows if row["status"] == QueryStatus.DONE),
        "queries_failed": sum(1 for row in query_rows if row["status"] == QueryStatus.FAILED),
        "websites_found": len(website_rows),
        "websites_analysed": website_statuses.count(WebsiteStatus.ANALYZED),
        "websites_failed": website_statuses.count(WebsiteStatus.FAILED),
        "extracts": sum(len(items) for items in extracts_by_website.values()),
    }

    return {
        "version": SNAPSHOT_VERSION,
        "research": {
            **research_summary(research),
            "prompt": research.prompt,
            "num_questions": research.num_questions,
            "breadth": research.breadth,
            "depth": research.depth,
            "engine": research.engine,
            "error": research.error,
            "last_event_seq": research.last_event_seq,
            "updated_at": _iso(research.updated_at),
            "started_at": _iso(research.started_at),
            "usage": {"prompt_tokens": research.prompt_tokens, "completion_tokens": research.completion_tokens},
        },
        "questions": questions,
        "queries": queries,
        "report": _document(documents.get(DocumentKind.REPORT)),
        "error_output": _document(documents.get(DocumentKind.ERROR_OUTPUT)),
        "progress": progress,
    }


def _document(doc: dict[str, Any] | None) -> dict[str, Any] | None:
    if doc is None:
        return None
    return {"markdown": doc["markdown"], "stats": doc["stats"] or {}, "created_at": _iso(doc["created_at"])}
