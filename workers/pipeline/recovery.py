"""The sweeper: re-queues steps whose lease ran out, so a killed worker or a lost message costs a retry only.

Every step leases its row (`claimed_at`, `attempts`) when it starts. A step that shows no progress for
LEASE_SECONDS — its worker was killed, its message was lost with Redis, its publish never happened — is
re-queued here. Re-leasing is a conditional UPDATE, so concurrent sweeps publish a row once per lease, and
tasks skip rows that are done, so work already stored is never redone. A row still unfinished after
MAX_ATTEMPTS claims is failed with the reason, as its kind of failure demands (docs/reliability.md).
"""

import logging
from contextlib import suppress
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db.models import Exists, F, OuterRef, Q
from django.db.models.functions import Coalesce
from django.utils import timezone

from research.models import (
    Document,
    DocumentKind,
    QueryStatus,
    Research,
    ResearchStatus,
    SerpQuery,
    Website,
    WebsiteStatus,
)
from workers.errors import ResearchStopped
from workers.pipeline import analyze, lifecycle, plan, report, scrape, search
from workers.pipeline.locks import SWEEPER

log = logging.getLogger(__name__)


def _expired(cutoff: Any) -> Q:
    return Q(claimed_at__isnull=True) | Q(claimed_at__lt=cutoff)


def _release(model: type, pk: Any, cutoff: Any, now: Any, **conditions: Any) -> bool:
    """Take a new lease on an expired row; True if this sweep got it (and so must re-queue it)."""
    return bool(
        model.objects.filter(_expired(cutoff), pk=pk, **conditions).update(
            claimed_at=now, claimed_by=SWEEPER, attempts=F("attempts") + 1
        )
    )


def sweep() -> dict[str, int]:
    """One pass over all unfinished work; returns what it did, by kind."""
    from workers import tasks

    now = timezone.now()
    cutoff = now - timedelta(seconds=settings.LEASE_SECONDS)
    done: dict[str, int] = {}

    def count(kind: str) -> None:
        done[kind] = done.get(kind, 0) + 1

    # A research that ended while its worker died before stopping its unfinished rows (lifecycle.stop_unfinished).
    ended = [ResearchStatus.CANCELLED, ResearchStatus.FAILED, ResearchStatus.COMPLETED]
    unfinished_rows = Q(
        Exists(Website.objects.filter(research=OuterRef("pk"), status__in=lifecycle.UNFINISHED_WEBSITES))
    ) | Q(Exists(SerpQuery.objects.filter(research=OuterRef("pk"), status__in=lifecycle.UNFINISHED_QUERIES)))
    for research_id in Research.objects.filter(unfinished_rows, status__in=ended, finished_at__lt=cutoff).values_list(
        "pk", flat=True
    ):
        lifecycle.stop_unfinished(research_id, now)
        count("stopped")

    # Researches: budgets first (running_research fails a research past its time or token budget).
    for research_id in Research.objects.filter(status=ResearchStatus.RUNNING).values_list("pk", flat=True):
        lifecycle.running_research(research_id)

    for research in Research.objects.filter(
        Q(claimed_at__lt=cutoff) | Q(claimed_at__isnull=True, created_at__lt=cutoff), status=ResearchStatus.QUEUED
    ):
        if research.attempts >= settings.MAX_ATTEMPTS:
            error = RuntimeError(f"it was queued {research.attempts + 1} times and no worker took it up")
            lifecycle.start_failed(research.pk, error)
            count("start_failed")
        elif _release(Research, research.pk, cutoff, now, status=ResearchStatus.QUEUED):
            tasks.start_research_task.delay(str(research.pk))
            count("start")

    running = Research.objects.filter(status=ResearchStatus.RUNNING)
    top_missing = running.filter(_expired(cutoff)).exclude(
        Exists(SerpQuery.objects.filter(research=OuterRef("pk"), depth=1))
    )
    for research in top_missing:
        if research.attempts >= settings.MAX_ATTEMPTS:
            error = RuntimeError(f"no top-level queries after {research.attempts} attempts")
            plan.planning_failed(str(research.pk), None, error)
            count("plan_top_failed")
        elif _release(Research, research.pk, cutoff, now, status=ResearchStatus.RUNNING):
            tasks.plan_queries_task.delay(str(research.pk), None)
            count("plan_top")

    for research in running.filter(_expired(cutoff), pending_queries__lte=0):
        if research.attempts >= settings.MAX_ATTEMPTS:
            report.report_failed(str(research.pk), RuntimeError(f"no report after {research.attempts} attempts"))
            count("report_failed")
        elif _release(Research, research.pk, cutoff, now, status=ResearchStatus.RUNNING, pending_queries__lte=0):
            tasks.write_report_task.delay(str(research.pk))
            count("report")

    report_cutoff = now - timedelta(seconds=settings.REPORT_LEASE_SECONDS)
    stuck_reports = Research.objects.filter(status=ResearchStatus.REPORTING, claimed_at__lt=report_cutoff).exclude(
        Exists(Document.objects.filter(research=OuterRef("pk"), kind=DocumentKind.REPORT))
    )
    for research in stuck_reports:
        if research.attempts >= settings.MAX_ATTEMPTS:
            report.report_failed(str(research.pk), RuntimeError(f"no report after {research.attempts} attempts"))
            count("report_failed")
        # Back to running, so write_report can claim it again (and record a new report_writing_start).
        elif Research.objects.filter(
            pk=research.pk, status=ResearchStatus.REPORTING, claimed_at__lt=report_cutoff
        ).update(status=ResearchStatus.RUNNING, claimed_at=now):
            tasks.write_report_task.delay(str(research.pk))
            count("report_retry")

    in_running = Q(research__status=ResearchStatus.RUNNING)
    for query in (
        SerpQuery.objects.filter(in_running, status__in=[QueryStatus.PENDING, QueryStatus.SEARCHING])
        .annotate(leased=Coalesce("claimed_at", "created_at"))
        .filter(leased__lt=cutoff)
    ):
        if query.attempts >= settings.MAX_ATTEMPTS:
            with suppress(ResearchStopped):  # the research ended meanwhile
                search.search_failed(query.pk, RuntimeError(f"no search result after {query.attempts} attempts"))
            count("query_failed")
        elif _release(SerpQuery, query.pk, cutoff, now, status__in=[QueryStatus.PENDING, QueryStatus.SEARCHING]):
            tasks.run_query_task.delay(query.pk)
            count("query")

    unplanned = SerpQuery.objects.filter(
        in_running,
        _expired(cutoff),
        status=QueryStatus.DONE,
        children_planned=False,
        depth__lt=F("research__depth"),
    )
    for query in unplanned:
        if query.attempts >= settings.MAX_ATTEMPTS:
            error = RuntimeError(f"no queries under “{query.query}” after {query.attempts} attempts")
            plan.planning_failed(str(query.research_id), query.pk, error)
            count("plan_children_failed")
        elif _release(SerpQuery, query.pk, cutoff, now, status=QueryStatus.DONE, children_planned=False):
            tasks.plan_queries_task.delay(str(query.research_id), query.pk)
            count("plan_children")

    unfinished = [WebsiteStatus.PENDING, WebsiteStatus.SCRAPING, WebsiteStatus.ANALYZING]
    for website in (
        Website.objects.filter(in_running, status__in=unfinished)
        .annotate(leased=Coalesce("claimed_at", "created_at"))
        .filter(leased__lt=cutoff)
    ):
        analysing = website.status == WebsiteStatus.ANALYZING
        if website.attempts >= settings.MAX_ATTEMPTS:
            error = RuntimeError(f"abandoned after {website.attempts} attempts")
            with suppress(ResearchStopped):  # the research ended meanwhile
                (analyze.analysis_failed if analysing else scrape.scrape_failed)(website.pk, error)
            count("website_failed")
        elif _release(Website, website.pk, cutoff, now, status=website.status):
            (tasks.analyze_website_task if analysing else tasks.scrape_website_task).delay(website.pk)
            count("analyze" if analysing else "scrape")

    if done:
        log.warning("sweep re-queued or failed: %s", done)
    return done
