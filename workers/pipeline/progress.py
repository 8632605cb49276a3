"""The counters that finish nodes exactly once: a website ending finishes its query, a query ending its research.

Every function here runs inside the caller's tree transaction (tree_writes.py), so the counter change, the new
state and the follow-on tasks (queued on commit) stand or fall together; the research's own counters are
applied at the end of that transaction, which queues the report when the last query is counted off. In a
transaction that locked the research row first (research/record/transactions.py) they are applied at once.
"""

import logging
from typing import Any, NamedTuple

from django.db import connection
from django.db.models import Field
from django.utils import timezone

from research.control import dispatch
from research.control.dispatch import QUEUED
from research.models import EventType, Extract, QueryStatus, Research, ResearchStatus, SerpQuery, Website, WebsiteStatus
from research.record import database, transitions
from research.record.events import record_event
from research.record.planning import descendants
from research.record.transactions import open_tally
from research.text.storable import storable
from research.types import ResearchId
from workers.pipeline.tree_writes import tree_transaction

log = logging.getLogger(__name__)

MAX_LEARNINGS = 40
# A branch's review decisions (adaptive mode): go no deeper, or plan its children.
STOP, CONTINUE = "stop", "continue"


def _decrement(model: type[SerpQuery], column: str, pk: Any, by: int = 1) -> int | None:
    """Decrement a query's counter and read the new value in one statement (no read-modify-write race); the
    research's are written in research/record/transitions.py."""
    table, value = model._meta.db_table, model._meta.pk.get_db_prep_value(pk, connection)
    with database.prepared_cursor() as cursor:
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


class Finished(NamedTuple):
    """What a query's end reads of it and its research (the same statement, on PostgreSQL)."""

    depth: int
    research_id: ResearchId
    research_status: str
    breadth: int | None
    research_depth: int | None
    planning_handed_on: bool  # the query's lease now stands for its children's planning


def query_finished(
    query_id: int, status: str, from_statuses: list[str], error: str = "", review: dict[str, Any] | None = None
) -> bool:
    """Mark the query done or failed (once), queue a done query's children's planning, and count it off the
    research; a failed query plans no children, so its whole unplanned subtree is counted off with it, and so
    does a done query whose review decided to `stop` (adaptive mode: `review` holds the evaluator's verdict)."""
    review = review or {}
    stopped = review.get("decision") == STOP
    changes: dict[str, Any] = {"status": status, "finished_at": timezone.now(), "error": error[:2000], **review}
    if stopped:
        changes["children_planned"] = True  # none will be: the sweeper must not plan them either
    finished = _finish(query_id, from_statuses, changes, plans=status != QueryStatus.FAILED and not stopped)
    if finished is None:
        return False
    if finished.research_status != ResearchStatus.RUNNING:
        return True
    counted = 1
    if status == QueryStatus.FAILED or stopped:
        counted += descendants(finished.breadth or 1, finished.research_depth or 1, finished.depth)
    elif finished.planning_handed_on:
        dispatch.PLAN.on_commit(str(finished.research_id), query_id)
    tally = open_tally(finished.research_id)
    if tally is not None:
        tally.queries_finished += counted  # the tree transaction's end counts them off; at zero, the report
    elif transitions.count_off(finished.research_id, counted) == 0:
        transitions.hand_on(finished.research_id)
        dispatch.queue_tree_finished_on_commit(finished.research_id)
    return True


def _finish(query_id: int, from_statuses: list[str], changes: dict[str, Any], plans: bool) -> Finished | None:
    """Set `changes` and the query's learnings (its first facts, in page order) on the query if it is in one of
    `from_statuses`; what it and its research read then, None if it was in none of them. `plans`: a query that
    plans children (done, not stopped) hands its lease on to that planning, where its research runs and the
    tree goes deeper.

    On PostgreSQL one hand-written statement: the ORM read the learnings, updated the query, read it with its
    research and handed the lease on in four, each compiled anew for every query."""
    fields = [_query_field(name) for name in changes]
    assignments = "".join(f"{field.column} = %s, " for field in fields)
    values = [field.get_db_prep_save(value, connection) for field, value in zip(fields, changes.values(), strict=True)]
    # The planning's lease is handed on in the same statement, on the research's row as this statement reads it.
    hands_on = "%s AND r.status = %s AND q.depth < COALESCE(r.depth, 0)"
    statuses = ", ".join(["%s"] * len(from_statuses))
    with database.prepared_cursor() as cursor:
        cursor.execute(
            f"UPDATE {SerpQuery._meta.db_table} AS q SET {assignments}"
            "learnings = (SELECT COALESCE(jsonb_agg(f.fact ORDER BY f.page, f.position), '[]'::jsonb) FROM ("
            f"SELECT e.fact, w.position AS page, e.position FROM {Extract._meta.db_table} e "
            f"JOIN {Website._meta.db_table} w ON w.id = e.website_id WHERE w.query_id = q.id "
            "ORDER BY w.position, e.position LIMIT %s) AS f), "
            f"claimed_at = CASE WHEN {hands_on} THEN %s ELSE q.claimed_at END, "
            f"claimed_by = CASE WHEN {hands_on} THEN %s ELSE q.claimed_by END "
            f"FROM {Research._meta.db_table} AS r "
            f"WHERE q.id = %s AND q.status IN ({statuses}) AND r.id = q.research_id "
            f"RETURNING q.depth, q.research_id, r.status, r.breadth, r.depth, {hands_on}",
            [
                *values,
                MAX_LEARNINGS,
                *(plans, ResearchStatus.RUNNING, timezone.now()),
                *(plans, ResearchStatus.RUNNING, QUEUED),
                query_id,
                *from_statuses,
                *(plans, ResearchStatus.RUNNING),
            ],
        )
        row = cursor.fetchone()
    return None if row is None else Finished(*row)


def _query_field(name: str) -> "Field[Any, Any]":  # stubs-only generic
    field = SerpQuery._meta.get_field(name)
    assert isinstance(field, Field)
    return field


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


def add_dropped_quotes(research_id: ResearchId, count: int) -> None:
    tally = open_tally(research_id)
    if tally is not None:
        tally.quotes_dropped += count
    elif count:
        transitions.add_dropped_quotes(research_id, count)
