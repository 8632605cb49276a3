"""Searching: one SERP query's results become website rows, each queued for scraping."""

import json
import logging
from datetime import datetime
from typing import NamedTuple

from django.db import connection
from django.utils import timezone

from research.control import dispatch
from research.control.lifecycle import fail_research
from research.models import EventType, QueryStatus, Research, SerpQuery, Website, WebsiteStatus
from research.record import database
from research.record.events import record_event
from research.record.usage import BudgetState
from research.types import ResearchId
from workers.clients import search as search_client
from workers.clients.searxng import SearchResult
from workers.pipeline import fencing, heartbeat, progress
from workers.pipeline.fencing import Lease
from workers.pipeline.lifecycle import may_start, state_sql, step_row
from workers.pipeline.locks import claim_owner, claimable_sql, lease_token
from workers.pipeline.tree_writes import tree_transaction

log = logging.getLogger(__name__)


class Searching(NamedTuple):
    """What the search step reads of its query."""

    id: int
    research_id: ResearchId
    query: str
    retries: int
    depth: int
    owner_id: int  # the research's owner: whose collection documents it may find


def run_query(query_id: int, task_id: str | None = None) -> None:
    """Search for the query and store up to SEARCH_RESULTS_PER_QUERY websites; no results: the branch fails."""
    # One read, its research's state joined, as a row: no model instance, no second query.
    row = step_row(
        SerpQuery,
        query_id,
        "SELECT q.research_id, q.status, q.query, q.retries, q.depth, q.started_at, r.owner_id, "
        f"{state_sql('r')} FROM {SerpQuery._meta.db_table} q "
        f"JOIN {Research._meta.db_table} r ON r.id = q.research_id WHERE q.id = %s",
    )
    if row is None:
        return
    research_id, status, text, retries, depth, started_at, owner_id, *columns = row
    if status not in (QueryStatus.PENDING, QueryStatus.SEARCHING) or not may_start(research_id, BudgetState(*columns)):
        return
    token = lease_token(claim_owner(task_id))
    if not _claim(query_id, claim_owner(task_id), token, started_at):
        return  # another delivery of this search is under way
    heartbeat.took_up()  # the claim replaced the task's reservation

    # Its store (a tree transaction) is fenced on the query's lease.
    with fencing.holding(Lease(SerpQuery, query_id, token)):
        searching = Searching(query_id, research_id, text, retries, depth, owner_id)
        _store_results(searching, search_client.search(text, owner_id))


def _claim(query_id: int, owner: str, claimed_by: str, started_at: datetime | None) -> bool:
    """Lease the pending query (or the searching one whose lease is free, lapsed or this task's) for this task,
    `claimed_by` its token."""
    now = timezone.now()
    started_at = started_at or now
    # One hand-written statement: the ORM compiled the lease's condition for every search.
    condition, params = claimable_sql(owner)
    with database.prepared_cursor() as cursor:
        cursor.execute(
            f"UPDATE {SerpQuery._meta.db_table} SET status = %s, claimed_at = %s, claimed_by = %s, started_at = %s "
            f"WHERE id = %s AND (status = %s OR (status = %s AND {condition}))",
            [
                *(QueryStatus.SEARCHING, now, claimed_by, started_at, query_id),
                *(QueryStatus.PENDING, QueryStatus.SEARCHING, *params),
            ],
        )
        return cursor.rowcount > 0


def _store_results(query: Searching, results: list[SearchResult]) -> None:
    """The results become website rows queued for scraping; none at all fails the branch."""
    query_id = query.id
    with tree_transaction(query.research_id):
        if query.retries:
            results, reopened, first = _retried(query_id, results)
        else:
            reopened, first = [], 0
        # Only one delivery moves the query on from searching; a duplicate's results are dropped here.
        # attempts=0: the sweeper's re-queues of the search are over; the planning of children counts from zero.
        if not _to_scraping(query_id, len(results) + len(reopened)):
            return
        websites = _insert_websites(query, first, results) + _reopen(reopened)
        record_event(
            query.research_id,
            EventType.GOT_WEBSITES,
            {"query_id": query_id, "query": query.query, "urls": [url for _, url in websites]},
        )
        if not websites:
            if query.retries and Website.objects.filter(query_id=query_id, status=WebsiteStatus.ANALYZED).exists():
                # Nothing new, but its earlier attempt's pages were analysed: the query stands on those.
                progress.query_to_review(query_id, from_statuses=[QueryStatus.SCRAPING])
            else:
                progress.query_failed(query_id, "the search found nothing", from_statuses=[QueryStatus.SCRAPING])
        dispatch.SCRAPE.each_on_commit([pk for pk, _ in websites], query.research_id)
    if not results and query.depth == 1:
        stop_if_every_top_level_search_failed(query.research_id)


def _to_scraping(query_id: int, pending: int) -> bool:
    """The searching query on to scraping, waiting for `pending` websites; whether it was searching."""
    with database.prepared_cursor() as cursor:
        cursor.execute(
            f"UPDATE {SerpQuery._meta.db_table} SET status = %s, pending_websites = %s, attempts = 0 "
            "WHERE id = %s AND status = %s",
            [QueryStatus.SCRAPING, pending, query_id, QueryStatus.SEARCHING],
        )
        return cursor.rowcount > 0


def _insert_websites(query: Searching, first: int, results: list[SearchResult]) -> list[tuple[int, str]]:
    """The results stored as the query's pending websites, numbered from `first`: (id, url) of each, in order."""
    if not results:
        return []
    # One hand-written statement: bulk_create compiled an INSERT of every column for every search. The columns
    # not named by a result take their model defaults.
    rows = json.dumps(
        [[first + index, result.url, result.title, result.snippet] for index, result in enumerate(results)]
    )
    with database.prepared_cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {Website._meta.db_table} (research_id, query_id, position, url, title, snippet, status, "
            "failure_reason, error, content_type, attempts, claimed_by, created_at) "
            "SELECT %s, %s, (item->>0)::int, item->>1, item->>2, item->>3, %s, '', '', '', 0, '', %s "
            "FROM jsonb_array_elements(%s::jsonb) AS item RETURNING id, position, url",
            [
                Research._meta.pk.get_db_prep_value(query.research_id, connection),
                query.id,
                WebsiteStatus.PENDING,
                timezone.now(),
                rows,
            ],
        )
        inserted = cursor.fetchall()
    return [(pk, url) for pk, _, url in sorted(inserted, key=lambda row: row[1])]


def _retried(query_id: int, results: list[SearchResult]) -> tuple[list[SearchResult], list[Website], int]:
    """A retried query keeps its earlier websites (one row per URL): results it analysed already are skipped,
    those it failed or had cancelled are scraped again, and new ones are numbered after the earlier ones."""
    earlier = {website.url: website for website in Website.objects.filter(query_id=query_id).order_by("pk")}
    first = max((website.position for website in earlier.values()), default=-1) + 1
    new = [result for result in results if result.url not in earlier]
    reopened = [
        earlier[result.url]
        for result in results
        if result.url in earlier and earlier[result.url].status in (WebsiteStatus.FAILED, WebsiteStatus.CANCELLED)
    ]
    return new, reopened, first


def _reopen(websites: list[Website]) -> list[tuple[int, str]]:
    if not websites:
        return []
    ids = [website.pk for website in websites]
    Website.objects.filter(pk__in=ids, status__in=[WebsiteStatus.FAILED, WebsiteStatus.CANCELLED]).update(
        status=WebsiteStatus.PENDING,
        page=None,
        failure_reason="",
        error="",
        http_status=None,
        finished_at=None,
        attempts=0,
        claimed_at=None,
        claimed_by="",
    )
    return [(website.pk, website.url) for website in websites]


def search_failed(query_id: int, error: BaseException) -> None:
    """The search engine failed for good (retries exhausted, or a permanent error): the branch fails."""
    query = SerpQuery.objects.filter(pk=query_id).only("research_id", "depth").first()
    if query is None:
        return
    with tree_transaction(query.research_id):
        progress.query_failed(
            query_id, f"search failed: {error}", from_statuses=[QueryStatus.PENDING, QueryStatus.SEARCHING]
        )
    if query.depth == 1:
        stop_if_every_top_level_search_failed(query.research_id)


def stop_if_every_top_level_search_failed(research_id: ResearchId) -> None:
    """Critical: with no top-level branch left, the research has nothing to build on."""
    top_level = SerpQuery.objects.filter(research_id=research_id, depth=1)
    if not top_level.exists() or top_level.exclude(status=QueryStatus.FAILED).exists():
        return
    errors = list(dict.fromkeys(top_level.order_by("position").values_list("error", flat=True)))
    fail_research(
        research_id,
        reason="search_failed",
        what="The search engine failed, or found nothing, for every top-level query: " + "; ".join(errors)[:1000],
        impact="Research cannot go on without search results, so it stopped; nothing found so far is lost.",
    )
