"""Scraping: fetch a website's page once per research, then hand every website with that URL to analysis."""

import logging
from datetime import timedelta
from typing import Any, NamedTuple
from urllib.parse import urlparse

from django.conf import settings
from django.db import transaction
from django.db.models import Case, F, TextField, Value, When
from django.utils import timezone

from research.events import record_event
from research.models import EventType, Page, PageStatus, Website, WebsiteStatus
from workers.clients.fetch import FetchedPage, FetchError, fetch_page
from workers.clients.ratelimit import host_slot
from workers.pipeline import progress
from workers.pipeline.lifecycle import running_research
from workers.pipeline.locks import QUEUED, worker_name
from workers.pipeline.tree_writes import tree_transaction

log = logging.getLogger(__name__)


def scrape_website(website_id: int) -> None:
    """Fetch the website's page unless this research has it (or is fetching it) already."""
    website = Website.objects.filter(pk=website_id).only("research_id", "query_id", "url", "status").first()
    if website is None or website.status not in (WebsiteStatus.PENDING, WebsiteStatus.SCRAPING):
        return
    if running_research(website.research_id) is None:
        return
    this = Waiting(website_id, website.url, website.query_id)

    with tree_transaction(website.research_id):
        # Lock order everywhere: the page, then its websites; so fetchers and waiters never deadlock.
        page, created = (
            Page.objects.select_for_update()
            .only("status", "claimed_at", "title", "http_status", "content_type", "failure_reason", "error")
            .get_or_create(research_id=website.research_id, url=website.url)
        )
        if not Website.objects.filter(pk=website_id, status__in=(WebsiteStatus.PENDING, WebsiteStatus.SCRAPING)).update(
            status=WebsiteStatus.SCRAPING, page=page, claimed_at=timezone.now(), claimed_by=worker_name()
        ):
            return
        if page.status == PageStatus.FETCHED:
            record_event(
                website.research_id, EventType.SCRAPING, {"website_id": website_id, "url": website.url, "reused": True}
            )
            _to_analysis(website.research_id, page, [this])
            return
        if page.status == PageStatus.FAILED:
            _fail(website.research_id, page, [this])
            return
        stale = page.claimed_at is None or timezone.now() - page.claimed_at > timedelta(
            seconds=settings.SCRAPE_DEADLINE + 60
        )
        if not (created or stale):
            # Another website of this research is fetching the URL; it will move this one on.
            record_event(
                website.research_id, EventType.SCRAPING, {"website_id": website_id, "url": website.url, "reused": True}
            )
            return
        Page.objects.filter(pk=page.pk).update(claimed_at=timezone.now())
        record_event(website.research_id, EventType.SCRAPING, {"website_id": website_id, "url": website.url})

    try:
        # Politeness: a few fetches at a time per host, across all workers.
        with host_slot(
            urlparse(website.url).netloc.lower(),
            settings.SCRAPE_PER_HOST_CONCURRENCY,
            lease_seconds=settings.SCRAPE_DEADLINE + 10,
            max_wait=settings.LEASE_SECONDS,
        ):
            fetched: FetchedPage | None = fetch_page(
                website.url,
                allowed_private=settings.SCRAPE_ALLOWED_PRIVATE_HOSTS,
                max_bytes=settings.SCRAPE_MAX_BYTES,
                deadline=settings.SCRAPE_DEADLINE,
            )
        error = None
    except FetchError as exc:
        fetched, error = None, exc
        log.info("fetch of %s failed: %s (%s)", website.url, exc.reason, exc.message)

    with tree_transaction(website.research_id):
        if not Page.objects.select_for_update().filter(pk=page.pk, status=PageStatus.FETCHING).exists():
            return  # a takeover finished it first
        now = timezone.now()
        if fetched is not None:
            page.title, page.http_status = fetched.title[:1000], fetched.status_code
            page.content_type = fetched.content_type[:200]
            Page.objects.filter(pk=page.pk).update(
                status=PageStatus.FETCHED,
                final_url=fetched.final_url,
                title=page.title,
                text=fetched.text,
                http_status=page.http_status,
                content_type=page.content_type,
                bytes_read=fetched.bytes_read,
                fetched_at=now,
            )
        else:
            assert error is not None
            page.failure_reason, page.error = error.reason[:40], error.message[:2000]
            page.http_status = error.status_code
            Page.objects.filter(pk=page.pk).update(
                status=PageStatus.FAILED,
                failure_reason=page.failure_reason,
                error=page.error,
                http_status=page.http_status,
                fetched_at=now,
            )
        waiting = [
            Waiting(*row)
            for row in Website.objects.select_for_update()
            .filter(page=page, status=WebsiteStatus.SCRAPING)
            .order_by("pk")
            .values_list("pk", "url", "query_id")
        ]
        if fetched is not None:
            _to_analysis(website.research_id, page, waiting)
        else:
            _fail(website.research_id, page, waiting)


class Waiting(NamedTuple):
    """A website in `scraping` whose page this transaction settles."""

    pk: int
    url: str
    query_id: int


def _to_analysis(research_id: Any, page: Page, websites: list[Waiting]) -> None:
    from workers import tasks

    ids = [website.pk for website in websites]
    Website.objects.filter(pk__in=ids).update(
        status=WebsiteStatus.ANALYZING,
        # Handed on: the analysis task queued below may claim it.
        claimed_at=timezone.now(),
        claimed_by=QUEUED,
        title=Case(When(title="", then=Value(page.title[:1000])), default=F("title"), output_field=TextField()),
        http_status=page.http_status,
        content_type=page.content_type,
    )
    for website in websites:
        record_event(research_id, EventType.ANALYZING, {"website_id": website.pk, "url": website.url})
    transaction.on_commit(lambda: [tasks.analyze_website_task.delay(website_id) for website_id in ids], robust=True)


def _fail(research_id: Any, page: Page, websites: list[Waiting]) -> None:
    Website.objects.filter(pk__in=[website.pk for website in websites], status=WebsiteStatus.SCRAPING).update(
        status=WebsiteStatus.FAILED,
        failure_reason=page.failure_reason,
        error=page.error,
        http_status=page.http_status,
        finished_at=timezone.now(),
    )
    for website in websites:
        record_event(
            research_id,
            EventType.WEBSITE_FAILED,
            {"website_id": website.pk, "url": website.url, "reason": page.failure_reason, "error": page.error[:300]},
        )
    # Queries after websites, in key order (the lock order of tree_writes.py).
    for website in sorted(websites, key=lambda website: website.query_id):
        progress.website_finished(website.query_id)


def scrape_failed(website_id: int, error: BaseException) -> None:
    """An unexpected error while scraping (not a page failure): fail this website; the query goes on."""
    research_id = Website.objects.filter(pk=website_id).values_list("research_id", flat=True).first()
    if research_id is None:
        return
    with tree_transaction(research_id):
        website = Website.objects.select_for_update().filter(pk=website_id).only("url", "status", "query_id").first()
        if website is None or website.status not in (WebsiteStatus.PENDING, WebsiteStatus.SCRAPING):
            return
        Website.objects.filter(pk=website_id).update(
            status=WebsiteStatus.FAILED,
            failure_reason="scrape_error",
            error=str(error)[:2000],
            finished_at=timezone.now(),
        )
        record_event(
            research_id,
            EventType.WEBSITE_FAILED,
            {
                "website_id": website_id,
                "url": website.url,
                "reason": "scrape_error",
                "error": str(error)[:300],
            },
        )
        progress.website_finished(website.query_id)
