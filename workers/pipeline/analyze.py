"""Analysis: the website analyzer's facts for the query's objective, kept only with quotes found on the page."""

import logging

from django.db import transaction
from django.utils import timezone

from research.events import record_event
from research.models import EventType, Extract, Website, WebsiteStatus
from research.text.quotes import PageText
from workers.agents.engines import engine_for
from workers.clients.llm import charged_to
from workers.pipeline import heartbeat, progress
from workers.pipeline.heartbeat import holding
from workers.pipeline.lifecycle import running_research
from workers.pipeline.locks import claim_owner, claimable, worker_name
from workers.pipeline.tree_writes import tree_transaction

log = logging.getLogger(__name__)


def analyze_website(website_id: int, task_id: str | None = None) -> None:
    """Extract facts and verbatim quotes from the website's stored page text."""
    website = Website.objects.select_related("query", "page").filter(pk=website_id).first()
    if website is None or website.status != WebsiteStatus.ANALYZING or website.page is None:
        return
    research = running_research(website.research_id)
    if research is None:
        return
    owner = claim_owner(task_id)
    with tree_transaction(website.research_id):
        if not Website.objects.filter(claimable(owner), pk=website_id, status=WebsiteStatus.ANALYZING).update(
            claimed_at=timezone.now(), claimed_by=(owner + worker_name())[:200]
        ):
            return  # another delivery of this analysis is under way
        transaction.on_commit(heartbeat.took_up)  # the claim replaced the task's reservation
        # Recorded as the analysis begins (a worker has taken it up), not when it was queued.
        record_event(website.research_id, EventType.ANALYZING, {"website_id": website_id, "url": website.url})
    text = website.page.text
    research_engine = engine_for(research.engine)
    with holding(Website, website_id), charged_to(website.research_id):
        findings, _, _ = research_engine.analyze(
            website.query.objective, website.query.query, website.url, website.title, text
        )
    page_text = PageText(text)
    kept = [finding for finding in findings if page_text.contains(finding.quote)]
    dropped = len(findings) - len(kept)
    if dropped:
        log.info("dropped %s quotes not found on %s", dropped, website.url)

    with tree_transaction(website.research_id):
        if not Website.objects.filter(pk=website_id, status=WebsiteStatus.ANALYZING).update(
            status=WebsiteStatus.ANALYZED, finished_at=timezone.now()
        ):
            return  # a duplicate delivery got here first
        Extract.objects.bulk_create(
            Extract(
                research_id=website.research_id,
                website_id=website_id,
                position=index,
                fact=finding.fact,
                quote=finding.quote,
            )
            for index, finding in enumerate(kept)
        )
        progress.add_dropped_quotes(website.research_id, dropped)
        record_event(
            website.research_id,
            EventType.ANALYZED,
            {
                "website_id": website_id,
                "url": website.url,
                "facts": len(kept),
                "quotes_dropped": dropped,
            },
        )
        progress.website_finished(website.query_id)


def analysis_failed(website_id: int, error: BaseException) -> None:
    """The model could not analyse the page (after retries): a minor failure; the query goes on."""
    progress.website_failed(website_id, "analysis_failed", str(error), from_statuses=[WebsiteStatus.ANALYZING])
