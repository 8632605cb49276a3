"""Searching: one SERP query's results become website rows, each queued for scraping."""

import logging

from django.db.models import Q
from django.utils import timezone

from research import dispatch
from research.events import record_event
from research.lifecycle import fail_research
from research.models import EventType, QueryStatus, SerpQuery, Website
from workers.clients import search as search_client
from workers.pipeline import progress
from workers.pipeline.lifecycle import running_research
from workers.pipeline.locks import claim_owner, claimable, worker_name
from workers.pipeline.tree_writes import tree_transaction

log = logging.getLogger(__name__)


def run_query(query_id: int, task_id: str | None = None) -> None:
    """Search for the query and store up to SEARCH_RESULTS_PER_QUERY websites; no results: the query is done."""
    query = SerpQuery.objects.filter(pk=query_id).first()
    if query is None or query.status not in (QueryStatus.PENDING, QueryStatus.SEARCHING):
        return
    if running_research(query.research_id) is None:
        return
    owner = claim_owner(task_id)
    if not SerpQuery.objects.filter(
        Q(status=QueryStatus.PENDING) | Q(claimable(owner), status=QueryStatus.SEARCHING), pk=query_id
    ).update(
        status=QueryStatus.SEARCHING,
        claimed_at=timezone.now(),
        claimed_by=(owner + worker_name())[:200],
        started_at=query.started_at or timezone.now(),
    ):
        return  # another delivery of this search is under way

    results = search_client.search(query.query)

    with tree_transaction(query.research_id):
        # Only one delivery moves the query on from searching; a duplicate's results are dropped here.
        # attempts=0: the sweeper's re-queues of the search are over; the planning of children counts from zero.
        if not SerpQuery.objects.filter(pk=query_id, status=QueryStatus.SEARCHING).update(
            status=QueryStatus.SCRAPING, pending_websites=len(results), attempts=0
        ):
            return
        websites = Website.objects.bulk_create(
            Website(
                research_id=query.research_id,
                query_id=query_id,
                position=index,
                url=result.url,
                title=result.title,
                snippet=result.snippet,
            )
            for index, result in enumerate(results)
        )
        record_event(
            query.research_id,
            EventType.GOT_WEBSITES,
            {
                "query_id": query_id,
                "query": query.query,
                "urls": [w.url for w in websites],
            },
        )
        if not websites:
            progress.query_finished(query_id, QueryStatus.DONE, from_statuses=[QueryStatus.SCRAPING])
        dispatch.queue_each_on_commit(dispatch.SCRAPE, [website.pk for website in websites])


def search_failed(query_id: int, error: BaseException) -> None:
    """The search engine failed for good (retries exhausted, or a permanent error): critical for the research."""
    query = SerpQuery.objects.filter(pk=query_id).first()
    if query is None:
        return
    with tree_transaction(query.research_id):
        changed = SerpQuery.objects.filter(pk=query_id, status__in=[QueryStatus.PENDING, QueryStatus.SEARCHING]).update(
            status=QueryStatus.FAILED, error=str(error)[:2000], finished_at=timezone.now()
        )
        if changed:
            record_event(
                query.research_id,
                EventType.SERP_QUERY_FAILED,
                {
                    "query_id": query_id,
                    "query": query.query,
                    "error": str(error)[:500],
                },
            )
    fail_research(
        query.research_id,
        reason="search_failed",
        what=f"The search engine failed for the query “{query.query}”: {error}",
        impact="Research cannot go on without search results, so it stopped; nothing found so far is lost.",
    )
