"""The counters that finish nodes exactly once: a website ending finishes its query, a query ending its research.

Every function here runs inside the caller's tree transaction (tree_writes.py), so the counter change, the new
state and the follow-on tasks (queued on commit) stand or fall together; the research's own counters are
applied at the end of that transaction, which queues the report when the last query is counted off. In a
transaction that locked the research row first (research/transactions.py) they are applied at once.
"""

import logging
from typing import Any, NamedTuple

from django.db import connection
from django.utils import timezone

from research import dispatch, transitions
from research.dispatch import QUEUED
from research.events import record_event
from research.models import EventType, Extract, QueryStatus, Research, ResearchStatus, SerpQuery, Website, WebsiteStatus
from research.planning import descendants
from research.text.storable import storable
from research.transactions import open_tally
from research.types import ResearchId
from workers.pipeline.tree_writes import tree_transaction

log = logging.getLogger(__name__)

MAX_LEARNINGS = 40
# A branch's review decisions (adaptive mode): go no deeper, or plan its children.
STOP, CONTINUE = "stop", "continue"


def _decrement(model: type[Research] | type[SerpQuery], column: str, pk: Any, by: int = 1) -> int | None:
    """Decrement a counter and read the new value in one statement (no read-modify-write race)."""
    table, value = model._meta.db_table, model._meta.pk.get_db_prep_value(pk, connection)
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {table} SET {column} = {column} - %s WHERE id = %s RETURNING {column}", [by, value])
        row = cursor.fetchone()
    return row[0] if row else None


class FailedWebsite(NamedTuple):
    """A website a step fails, with what the failure event reports of it."""

    pk: int
    url: str
    query_id: int


def websites_failed(
    research_id: ResearchId,
    websites: list[FailedWebsite],
    reason: str,
    error: str,
    from_statuses: list[str],
    http_status: int | None = None,
) -> None:
    """Fail the websites still in `from_statuses` (a minor failure each), record why, and count them off their
    queries, which go on without them."""
    ids = [website.pk for website in websites]
    # Locked, and their status read again under the lock: of two steps failing one website, one counts it off.
    rows = Website.objects.select_for_update().filter(pk__in=ids, status__in=from_statuses).order_by("pk")
    failed = set(rows.values_list("pk", flat=True))
    error = storable(error)  # a message may quote what a page or a model sent
    changes: dict[str, Any] = {"failure_reason": reason[:40], "error": error[:2000], "finished_at": timezone.now()}
    if http_status is not None:
        changes["http_status"] = http_status
    Website.objects.filter(pk__in=failed).update(status=WebsiteStatus.FAILED, **changes)
    for website in websites:
        if website.pk in failed:
            record_event(
                research_id,
                EventType.WEBSITE_FAILED,
                {"website_id": website.pk, "url": website.url, "reason": reason, "error": error[:300]},
            )
    # Queries after websites, in key order (the lock order of tree_writes.py).
    for website in sorted(websites, key=lambda website: website.query_id):
        if website.pk in failed:
            website_finished(website.query_id)


def website_failed(website_id: int, reason: str, error: str, from_statuses: list[str]) -> None:
    """Fail one website whose step gave up, in a tree transaction of its own."""
    website = Website.objects.filter(pk=website_id).only("research_id", "url", "query_id").first()
    if website is None:
        return
    with tree_transaction(website.research_id):
        failed = FailedWebsite(website_id, website.url, website.query_id)
        websites_failed(website.research_id, [failed], reason, error, from_statuses)


def website_finished(query_id: int) -> None:
    """A website of the query was analysed or failed: the last one sends the query to its review."""
    website_settled(query_id, decrement_pending_websites(query_id))


def decrement_pending_websites(query_id: int) -> int | None:
    return _decrement(SerpQuery, "pending_websites", query_id)


def website_settled(query_id: int, remaining: int | None) -> None:
    """The query's `pending_websites` was decremented to `remaining`: at 0 the query goes to its review."""
    if remaining == 0:
        query_to_review(query_id, from_statuses=[QueryStatus.SCRAPING])


def query_to_review(query_id: int, from_statuses: list[str]) -> bool:
    """Every website of the query is settled: it goes to `reviewing` (the research memory's update and, in
    adaptive mode, the branch's evaluation: workers/pipeline/review.py), its lease handed on to that step, which
    finishes it and counts it off."""
    changed = SerpQuery.objects.filter(pk=query_id, status__in=from_statuses).update(
        status=QueryStatus.REVIEWING, claimed_at=timezone.now(), claimed_by=QUEUED, attempts=0
    )
    if changed:
        dispatch.REVIEW.on_commit(query_id)
    return bool(changed)


def query_finished(
    query_id: int, status: str, from_statuses: list[str], error: str = "", review: dict[str, Any] | None = None
) -> bool:
    """Mark the query done or failed (once), queue a done query's children's planning, and count it off the
    research; a failed query plans no children, so its whole unplanned subtree is counted off with it, and so
    does a done query whose review decided to `stop` (adaptive mode: `review` holds the evaluator's verdict)."""
    learnings = _learnings(query_id)
    review = review or {}
    stopped = review.get("decision") == STOP
    changes: dict[str, Any] = {"status": status, "finished_at": timezone.now(), "learnings": learnings}
    changes.update(error=error[:2000], **review)
    if stopped:
        changes["children_planned"] = True  # none will be: the sweeper must not plan them either
    changed = SerpQuery.objects.filter(pk=query_id, status__in=from_statuses).update(**changes)
    if not changed:
        return False
    # A row, not two model instances (the research row's text and JSON columns are not needed here).
    depth, research_id, research_status, breadth, research_depth = (
        SerpQuery.objects.filter(pk=query_id)
        .values_list("depth", "research_id", "research__status", "research__breadth", "research__depth")
        .get()
    )
    if research_status != ResearchStatus.RUNNING:
        return True
    now = timezone.now()
    counted = 1
    if status == QueryStatus.FAILED or stopped:
        counted += descendants(breadth or 1, research_depth or 1, depth)
    elif depth < (research_depth or 0):
        # The query's lease now stands for the planning of its children, handed on to its task.
        SerpQuery.objects.filter(pk=query_id).update(claimed_at=now, claimed_by=QUEUED)
        dispatch.PLAN.on_commit(str(research_id), query_id)
    tally = open_tally(research_id)
    if tally is not None:
        tally.queries_finished += counted  # the tree transaction's end counts them off; at zero, the report
    elif _decrement(Research, "pending_queries", research_id, counted) == 0:
        transitions.hand_on(research_id)
        dispatch.queue_tree_finished_on_commit(research_id)
    return True


def query_failed(query_id: int, error: str, from_statuses: list[str]) -> bool:
    """A branch failure: the query ends `failed` with its reason and plans no children; the research goes on."""
    error = storable(error)  # a search engine's message may carry anything
    query = SerpQuery.objects.filter(pk=query_id).only("research_id", "query").first()
    if query is None or not query_finished(query_id, QueryStatus.FAILED, from_statuses, error):
        return False
    record_event(
        query.research_id,
        EventType.SERP_QUERY_FAILED,
        {"query_id": query_id, "query": query.query, "error": error[:500]},
    )
    return True


def _learnings(query_id: int) -> list[str]:
    facts = Extract.objects.filter(website__query_id=query_id).order_by("website__position", "position")
    return list(facts.values_list("fact", flat=True)[:MAX_LEARNINGS])


def add_dropped_quotes(research_id: ResearchId, count: int) -> None:
    tally = open_tally(research_id)
    if tally is not None:
        tally.quotes_dropped += count
    elif count:
        transitions.add_dropped_quotes(research_id, count)
