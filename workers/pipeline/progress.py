"""The counters that finish nodes exactly once: a website ending finishes its query, a query ending its research.

Every function here runs inside the caller's tree transaction (tree_writes.py), so the counter change, the new
state and the follow-on tasks (queued on commit) stand or fall together; the research's own counters are
applied at the end of that transaction, which queues the report when the last query is counted off. In a
transaction that locked the research row first (locks.research_transaction) they are applied at once.
"""

import logging
from typing import Any

from django.db import connection, transaction
from django.db.models import F
from django.utils import timezone

from research.models import Extract, QueryStatus, Research, ResearchStatus, SerpQuery
from workers.pipeline.tree_writes import open_tally

log = logging.getLogger(__name__)

MAX_LEARNINGS = 40


def _decrement(model: type[Research] | type[SerpQuery], column: str, pk: Any) -> int | None:
    """Decrement a counter and read the new value in one statement (no read-modify-write race)."""
    table, value = model._meta.db_table, model._meta.pk.get_db_prep_value(pk, connection)
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {table} SET {column} = {column} - 1 WHERE id = %s RETURNING {column}", [value])
        row = cursor.fetchone()
    return row[0] if row else None


def website_finished(query_id: int) -> None:
    """A website of the query was analysed or failed: the last one finishes the query."""
    remaining = _decrement(SerpQuery, "pending_websites", query_id)
    if remaining == 0:
        query_finished(query_id, QueryStatus.DONE, from_statuses=[QueryStatus.SCRAPING])


def query_finished(query_id: int, status: str, from_statuses: list[str], error: str = "") -> bool:
    """Mark the query done or failed (once), queue its children's planning, and count it off the research."""
    from workers import tasks  # tasks import the pipeline; the pipeline queues tasks only on commit

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
        transaction.on_commit(lambda: tasks.plan_queries_task.delay(str(research.pk), query_id), robust=True)
    tally = open_tally(research.pk)
    if tally is not None:
        tally.queries_finished += 1  # the tree transaction's end counts it off and queues the report at zero
    elif _decrement(Research, "pending_queries", research.pk) == 0:
        research_id = str(research.pk)
        Research.objects.filter(pk=research.pk).update(claimed_at=now)
        transaction.on_commit(lambda: tasks.write_report_task.delay(research_id), robust=True)
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
