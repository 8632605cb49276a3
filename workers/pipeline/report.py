"""The report: written once per report version, when every query of the tree is done, from the verified extracts."""

import logging
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from research import budgets
from research.events import record_event
from research.lifecycle import fail_research
from research.models import (
    Document,
    DocumentKind,
    EventType,
    Extract,
    FollowUpQuestion,
    Page,
    PageStatus,
    Research,
    ResearchStatus,
    SerpQuery,
)
from research.text.quotes import PageText
from research.transactions import research_transaction
from workers.agents import report_writer
from workers.agents.common import CHARS_PER_TOKEN
from workers.agents.engines import EXTRACTIVE, engine_for
from workers.agents.report_writer import SourceNote
from workers.clients.llm import charged_to
from workers.pipeline.citations import cited_urls, drop_stray_links, render_report, report_title
from workers.pipeline.heartbeat import holding
from workers.pipeline.locks import claim_owner, worker_name
from workers.pipeline.memory import report_notes

log = logging.getLogger(__name__)

# States from which a stored report completes the research.
UNREPORTED = [ResearchStatus.RUNNING, ResearchStatus.REPORTING]


def write_report(research_id: str, task_id: str | None = None) -> None:
    """Claim the report (running → reporting, once), write it, verify its citations, store it.

    `task_id` is the Celery task's id, the same across its retries: a retry of the task that claimed the report
    takes it up again, while any other delivery finds it claimed and does nothing.
    """
    owner = claim_owner(task_id)
    with research_transaction(research_id):
        claimed = Research.objects.filter(pk=research_id, status=ResearchStatus.RUNNING, pending_queries__lte=0).update(
            status=ResearchStatus.REPORTING,
            claimed_at=timezone.now(),
            claimed_by=(owner + worker_name())[:200],
            attempts=F("attempts") + 1,
        )
        if claimed:
            record_event(research_id, EventType.REPORT_WRITING_START, {})
        elif not Research.objects.filter(
            pk=research_id, status=ResearchStatus.REPORTING, claimed_by__startswith=owner
        ).update(claimed_at=timezone.now()):
            return  # not finished, claimed by another delivery, or over: nothing to do
    with holding(Research, research_id):
        _write(research_id)


def _write(research_id: str) -> None:
    """Write the report from the verified extracts, check its citations, and store it (once)."""
    research = Research.objects.get(pk=research_id)
    answers = list(
        FollowUpQuestion.objects.filter(research_id=research_id).order_by("position").values_list("question", "answer")
    )
    objectives = list(
        SerpQuery.objects.filter(research_id=research_id, depth=1)
        .order_by("position")
        .values_list("objective", flat=True)
    )
    sources, page_texts = collect_sources(research_id, budgets.report_prompt_tokens(research))
    if not sources:
        fail_research(
            research_id,
            reason="nothing_analysed",
            what="No page could be analysed: every search failed or found nothing usable, or every page failed.",
            impact="A report needs sources, so none was written; every query and page is listed below with its fate.",
        )
        return

    with charged_to(research_id):
        report, _, _ = engine_for(research.engine).write(research.prompt, answers, objectives, sources)
    # The memory's contradictions and open questions: rendered from the stored items, after the model's sections.
    memory = report_notes(research_id)
    markdown, stats = render_report(report, sources, page_texts, memory)
    if research.engine == EXTRACTIVE:
        markdown = _offline_note(markdown)
    if research.partial:
        markdown = _partial_note(markdown, research, len(sources))
        stats["stop_reason"] = research.stop_reason
    # The renderer admits no link to a page that was not analysed; should one slip through, it goes, not the report.
    analysed = [source.url for source in sources] + [url for note in memory for url, _ in note.pages]
    markdown, stats["stray_links_dropped"] = drop_stray_links(markdown, analysed)
    if not cited_urls(markdown, analysed):
        # A report that cites nothing is not a research result (the model ignored its sources): fail the step.
        raise RuntimeError("the report cites none of the analysed pages")
    stats["sources_available"] = len(sources)

    with research_transaction(research_id):
        # Cancelled or failed while the report was being written: it is not stored.
        version = (
            Research.objects.filter(pk=research_id, status__in=UNREPORTED, pending_queries__lte=0)
            .values_list("report_version", flat=True)
            .first()
        )
        if version is None:
            return
        # A retried branch of a finished research writes the next version; the earlier ones are kept.
        key = {"research_id": research_id, "kind": DocumentKind.REPORT, "version": version}
        try:
            with transaction.atomic():
                Document.objects.create(**key, markdown=markdown, stats=stats)
        except IntegrityError:
            # Another writer stored one first (a lease that ran out while this one wrote): that one stands, and
            # the research must not stay unfinished because of it.
            markdown = Document.objects.get(**key).markdown
            _complete(research_id, report_title(markdown) or research.title)
            return
        _complete(research_id, report_title(markdown)[:200] or research.title)
        record_event(research_id, EventType.REPORT_WRITING_SUCCESSFUL, stats)


def _complete(research_id: str, title: str) -> None:
    # The sweeper may have moved a slow writer's research back to running; either way it is finished now.
    Research.objects.filter(pk=research_id, status__in=UNREPORTED).update(
        status=ResearchStatus.COMPLETED, finished_at=timezone.now(), title=title[:200]
    )


def _offline_note(markdown: str) -> str:
    """Say plainly, under the title, that no language model wrote this report."""
    where = "the local document collection" if settings.SEARCH_PROVIDERS == ["local"] else "the pages it found"
    title, _, rest = markdown.partition("\n")
    note = (
        f"> Offline research: written by the extractive engine, without a language model, from {where}. "
        "Every sentence below is a sentence of the document it cites."
    )
    return f"{title}\n\n{note}\n{rest}"


def _partial_note(markdown: str, research: Research, pages: int) -> str:
    """Say first, under the title, that a budget cut the research short, and what the report covers."""
    title, _, rest = markdown.partition("\n")
    covers = "the page" if pages == 1 else f"the {pages:,} pages"
    budget = budgets.describe(research.stop_reason, research)
    note = f"> Partial report: the research stopped when it reached its {budget}; it covers {covers} analysed by then."
    return f"{title}\n\n{note}\n{rest}"


def report_failed(research_id: str, error: BaseException) -> None:
    fail_research(
        research_id,
        reason="report_failed",
        what=f"The report could not be written: {error}",
        impact="All queries finished and every extract is kept below, but there is no report.",
    )


def collect_sources(research_id: Any, max_tokens: int) -> tuple[list[SourceNote], dict[str, PageText]]:
    """One numbered source per analysed page with extracts, trimmed to `max_tokens`."""
    rows = (
        Extract.objects.filter(research_id=research_id)
        .order_by("website__query__depth", "website__query_id", "website__position", "position")
        .values_list("website__url", "website__title", "fact", "quote")
    )
    by_url: dict[str, SourceNote] = {}
    for url, title, fact, quote in rows:
        note = by_url.get(url)
        if note is None:
            note = by_url[url] = SourceNote(number=len(by_url) + 1, url=url, title=title)
        note.findings.append((fact, quote))
    sources = list(by_url.values())
    _trim(sources, max_tokens * CHARS_PER_TOKEN)
    texts = dict(
        Page.objects.filter(research_id=research_id, url__in=by_url, status=PageStatus.FETCHED).values_list(
            "url", "text"
        )
    )
    return sources, {url: PageText(texts.get(url, "")) for url in by_url}


def _trim(sources: list[SourceNote], max_chars: int) -> None:
    """Fewer findings per source until the sources block fits; every source keeps at least one."""

    def size() -> int:
        return len(report_writer.sources_block(sources))

    per_source = max((len(s.findings) for s in sources), default=0)
    while per_source > 1 and size() > max_chars:
        per_source -= 1
        for source in sources:
            del source.findings[per_source:]
    while len(sources) > 1 and size() > max_chars:
        sources.pop()
