"""Searching: one SERP query's results become website rows, each queued for scraping."""

import logging

from django.db.models import Q
from django.utils import timezone

from research import dispatch
from research.events import record_event
from research.lifecycle import fail_research
from research.models import EventType, QueryStatus, SerpQuery, Website, WebsiteStatus
from research.types import ResearchId
from workers.clients import search as search_client
from workers.clients.searxng import SearchResult
from workers.pipeline import heartbeat, progress
from workers.pipeline.heartbeat import holding
from workers.pipeline.lifecycle import running_research
from workers.pipeline.locks import claim_owner, claimable, worker_name
from workers.pipeline.tree_writes import tree_transaction

log = logging.getLogger(__name__)


def run_query(query_id: int, task_id: str | None = None) -> None:
    """Search for the query and store up to SEARCH_RESULTS_PER_QUERY websites; no results: the branch fails."""
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
    heartbeat.took_up()  # the claim replaced the task's reservation

    with holding(SerpQuery, query_id):
        _store_results(query, search_client.search(query.query))


def _store_results(query: SerpQuery, results: list[SearchResult]) -> None:
    """The results become website rows queued for scraping; none at all fails the branch."""
    query_id = query.pk
    with tree_transaction(query.research_id):
        if query.retries:
            results, reopened, first = _retried(query, results)
        else:
            reopened, first = [], 0
        # Only one delivery moves the query on from searching; a duplicate's results are dropped here.
        # attempts=0: the sweeper's re-queues of the search are over; the planning of children counts from zero.
        if not SerpQuery.objects.filter(pk=query_id, status=QueryStatus.SEARCHING).update(
            status=QueryStatus.SCRAPING, pending_websites=len(results) + len(reopened), attempts=0
        ):
            return
        websites = Website.objects.bulk_create(
            Website(
                research_id=query.research_id,
                query_id=query_id,
                position=first + index,
                url=result.url,
                title=result.title,
                snippet=result.snippet,
            )
            for index, result in enumerate(results)
        )
        websites += _reopen(reopened)
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
            if query.retries and Website.objects.filter(query_id=query_id, status=WebsiteStatus.ANALYZED).exists():
                # Nothing new, but its earlier attempt's pages were analysed: the query stands on those.
                progress.query_to_review(query_id, from_statuses=[QueryStatus.SCRAPING])
            else:
                progress.query_failed(query_id, "the search found nothing", from_statuses=[QueryStatus.SCRAPING])
        dispatch.SCRAPE.each_on_commit([website.pk for website in websites], query.research_id)
    if not results and query.depth == 1:
        stop_if_every_top_level_search_failed(query.research_id)


def _retried(query: SerpQuery, results: list[SearchResult]) -> tuple[list[SearchResult], list[Website], int]:
    """A retried query keeps its earlier websites (one row per URL): results it analysed already are skipped,
    those it failed or had cancelled are scraped again, and new ones are numbered after the earlier ones."""
    earlier = {website.url: website for website in Website.objects.filter(query_id=query.pk).order_by("pk")}
    first = max((website.position for website in earlier.values()), default=-1) + 1
    new = [result for result in results if result.url not in earlier]
    reopened = [
        earlier[result.url]
        for result in results
        if result.url in earlier and earlier[result.url].status in (WebsiteStatus.FAILED, WebsiteStatus.CANCELLED)
    ]
    return new, reopened, first


def _reopen(websites: list[Website]) -> list[Website]:
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
    return websites


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
