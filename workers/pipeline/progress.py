"""The counters that finish nodes exactly once: a website ending finishes its query, a query ending its research.

Every function here runs inside the caller's tree transaction (tree_writes.py), so the counter change, the new
state and the follow-on tasks (queued on commit) stand or fall together; the research's own counters are
applied at the end of that transaction, which queues the report when the last query is counted off. In a
transaction that locked the research row first (research/transactions.py) they are applied at once.
"""

import logging
from typing import Any, NamedTuple

from django.db import connection
from django.db.models import F
from django.utils import timezone

from research import dispatch
from research.events import record_event
from research.models import EventType, Extract, QueryStatus, Research, ResearchStatus, SerpQuery, Website, WebsiteStatus
from research.text.storable import storable
from research.transactions import open_tally
from workers.pipeline.tree_writes import tree_transaction

log = logging.getLogger(__name__)

MAX_LEARNINGS = 40


def _decrement(model: type[Research] | type[SerpQuery], column: str, pk: Any) -> int | None:
    """Decrement a counter and read the new value in one statement (no read-modify-write race)."""
    table, value = model._meta.db_table, model._meta.pk.get_db_prep_value(pk, connection)
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {table} SET {column} = {column} - 1 WHERE id = %s RETURNING {column}", [value])
        row = cursor.fetchone()
    return row[0] if row else None


class FailedWebsite(NamedTuple):
    """A website a step fails, with what the failure event reports of it."""

    pk: int
    url: str
    query_id: int


def websites_failed(
    research_id: Any,
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
    """A website of the query was analysed or failed: the last one finishes the query."""
    remaining = _decrement(SerpQuery, "pending_websites", query_id)
    if remaining == 0:
        query_finished(query_id, QueryStatus.DONE, from_statuses=[QueryStatus.SCRAPING])


def query_finished(query_id: int, status: str, from_statuses: list[str], error: str = "") -> bool:
    """Mark the query done or failed (once), queue its children's planning, and count it off the research."""
    learnings = _learnings(query_id)
    changed = SerpQuery.objects.filter(pk=query_id, status__in=from_statuses).update(
        status=status, finished_at=timezone.now(), learnings=learnings, error=error[:2000]
    )
    if not changed:
        return False
    query = SerpQuery.objects.select_related("research").get(pk=query_id)
    research = query.research
    if research.status != ResearchStatus.RUNNING:
        return True
    now = timezone.now()
    if query.depth < (research.depth or 0):
        # The query now leases the planning of its children (the sweeper re-queues it if that is lost).
        SerpQuery.objects.filter(pk=query_id).update(claimed_at=now)
        dispatch.queue_on_commit(dispatch.PLAN, str(research.pk), query_id)
    tally = open_tally(research.pk)
    if tally is not None:
        tally.queries_finished += 1  # the tree transaction's end counts it off and queues the report at zero
    elif _decrement(Research, "pending_queries", research.pk) == 0:
        Research.objects.filter(pk=research.pk).update(claimed_at=now)
        dispatch.queue_on_commit(dispatch.REPORT, str(research.pk))
    return True


def _learnings(query_id: int) -> list[str]:
    facts = Extract.objects.filter(website__query_id=query_id).order_by("website__position", "position")
    return list(facts.values_list("fact", flat=True)[:MAX_LEARNINGS])


def add_dropped_quotes(research_id: Any, count: int) -> None:
    tally = open_tally(research_id)
    if tally is not None:
        tally.quotes_dropped += count
    elif count:
        Research.objects.filter(pk=research_id).update(quotes_dropped=F("quotes_dropped") + count)
