"""The report: written once per report version, when every query of the tree is done, from the verified extracts.

The report step plans an outline (title, summary, sections with the sources and learnings each uses); each section
is then written by a task of its own, in parallel, checked and stored (and shown) as it lands; the section that
completes the set queues the assembly, which renders the whole report with the same checks and stores it.
"""

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any, Generic, TypeVar

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import F, Field, Q
from django.utils import timezone

from research.control import budgets, dispatch
from research.control.dispatch import QUEUED
from research.control.lifecycle import fail_research
from research.live.figures import page_counts
from research.models import (
    Document,
    DocumentKind,
    EventType,
    Extract,
    FollowUpQuestion,
    Outcome,
    Page,
    PageStatus,
    QueryStatus,
    ReportSection,
    Research,
    ResearchStatus,
    SectionStatus,
    SerpQuery,
    Website,
)
from research.record import database, transitions
from research.record.events import insert_events, record_event
from research.record.transactions import research_transaction
from research.record.usage import BudgetState, Usage
from research.text.quotes import PageText
from research.types import ResearchId
from workers.agents import report_writer
from workers.agents.common import CHARS_PER_TOKEN
from workers.agents.engines import EXTRACTIVE, engine_for
from workers.agents.report_writer import SourceNote
from workers.clients import model_window
from workers.clients.llm import charged_to
from workers.pipeline import changes, fencing, heartbeat, outcome, relevance
from workers.pipeline.citations import cited_urls, drop_stray_links, render_report, render_section, report_title
from workers.pipeline.fencing import Lease
from workers.pipeline.lifecycle import held_status, state_sql, step_row
from workers.pipeline.locks import claim_owner, claimable, claimable_sql, lease_token
from workers.pipeline.memory import report_notes

log = logging.getLogger(__name__)

# States from which a stored report completes the research.
UNREPORTED = [ResearchStatus.RUNNING, ResearchStatus.REPORTING]


def write_report(research_id: str, task_id: str | None = None) -> None:
    """Claim the report (running → reporting, once per version), plan its outline, and queue its sections.

    `task_id` is the Celery task's id, the same across its retries: a retry of the task that claimed the report
    takes it up again, while any other delivery finds it claimed and does nothing.
    """
    owner = claim_owner(task_id)
    token = lease_token(owner)
    with research_transaction(research_id):
        if transitions.start_reporting(research_id, token):
            record_event(research_id, EventType.REPORT_WRITING_START, {})
        elif not transitions.renew(research_id, owner, token, status=ResearchStatus.REPORTING):
            return  # not finished, claimed by another delivery, or over: nothing to do
    with fencing.holding(Lease(Research, research_id, token)):
        _plan(research_id)


def _context(research: Research) -> tuple[list[tuple[str, str]], list[str]]:
    answers = FollowUpQuestion.answers_of(research.pk)
    objectives = list(
        SerpQuery.objects.filter(research_id=research.pk, depth=1)
        .order_by("position")
        .values_list("objective", flat=True)
    )
    return answers, objectives


# No cut: every finding is given to a writer (the outline's digest, then each section's packet, in parts where a
# prompt would not hold them all).
UNCUT = 10**12


def _sources_allowance(research: Research, used: Usage | None = None) -> tuple[int, float]:
    """(tokens the report's sources may take, characters per token to count them in).

    With a model, every finding reaches a writer: no cut, but what is left of a token or dollar budget still bounds
    what the report may read (budgets.report_prompt_tokens). The extractive engine writes from one pass over the
    sources, cut to REPORT_TOKEN_BUDGET.
    """
    if research.engine == EXTRACTIVE:
        return budgets.report_prompt_tokens(research, used=used), CHARS_PER_TOKEN
    ratio = model_window.chars_per_token(settings.LLM_AGENT_MODELS["report_writer"])
    return budgets.report_prompt_tokens(research, cap=UNCUT, used=used), ratio


def _plan(research_id: str) -> None:
    """Plan the outline (once per version) and queue a task per section still to write."""
    research = Research.objects.get(pk=research_id)
    version = research.report_version
    sections = ReportSection.objects.filter(research_id=research_id, version=version)
    if not sections.exists():
        sources, _ = collect_sources(research_id, *_sources_allowance(research))
        if not sources:
            _without_findings(research)
            return
        answers, objectives = _context(research)
        with charged_to(research_id, reporting=True):
            outline = engine_for(research.engine).outline(research.prompt, answers, objectives, sources)
        with research_transaction(research_id):
            fencing.check()
            if not Research.objects.filter(
                pk=research_id, status=ResearchStatus.REPORTING, report_version=version
            ).exists():
                return  # cancelled or failed while the outline was planned
            if not sections.exists():  # a delivery whose lease ran out may have planned it meanwhile
                kept = {"title": outline.get("title", ""), "summary": outline.get("summary", [])}
                if outline.get("sources_answer_request") in ("yes", "partly", "no"):
                    kept["sources_answer_request"] = outline["sources_answer_request"]
                transitions.keep_outline(research_id, kept)
                items = _outline_sections(outline)
                plans = _with_words([_section_plan(item, sources) for item in items], research.report_words)
                ReportSection.objects.bulk_create(
                    ReportSection(
                        research_id=research_id,
                        version=version,
                        position=position,
                        title=(" ".join(str(item.get("heading", "")).split()) or "Findings")[:200],
                        plan=plan,
                        claimed_by=QUEUED,
                        claimed_at=timezone.now(),
                    )
                    for position, (item, plan) in enumerate(zip(items, plans, strict=True), start=1)
                )
    with research_transaction(research_id):
        fencing.check()
        if not Research.objects.filter(pk=research_id, status=ResearchStatus.REPORTING).exists():
            return
        unwritten = list(sections.exclude(status=SectionStatus.WRITTEN).values_list("pk", flat=True))
        if unwritten:
            # The research row waits for its assembly, which the last section to land queues (_sections_done).
            transitions.hand_on(research_id, status=ResearchStatus.REPORTING)
            dispatch.SECTION.each_on_commit(unwritten, research_id)
        else:  # an outline with no section, or a retry that finds every section written
            _hand_to_assembly(research_id)


def _without_findings(research: Research) -> None:
    """A finished tree with no finding: a failure where no page could be read (its cause named), else the honest
    report that the pages read do not answer the request (workers/pipeline/outcome.py)."""
    found = outcome.tree_outcome(research.pk)
    cause = outcome.failure_cause(research, found)
    if cause is not None:
        fail_research(
            research.pk,
            reason="nothing_analysed",
            what=cause,
            impact="A report needs sources, so none was written; every query and page is listed below with its fate.",
            fence=fencing.check,
        )
        return
    markdown, stats = outcome.unanswered_report(research, found)
    # It links nothing; should a page's title slip a link through, it goes, as from any report.
    markdown, stats["stray_links_dropped"] = drop_stray_links(markdown, [])
    _store(str(research.pk), markdown, stats, research.title)


def _outline_sections(outline: dict[str, Any]) -> list[dict[str, Any]]:
    return [item for item in outline.get("sections", []) if isinstance(item, dict)]


def _section_plan(item: dict[str, Any], sources: list[SourceNote]) -> dict[str, Any]:
    """What a section is written from: its findings (Extract ids), their sources' numbers, and its learnings.

    The model's outline names findings; the extractive engine's names sources, whose findings are then all the
    section's. A section that names neither is written from every source, as a whole report would be.
    """
    numbers = {n for n in item.get("sources", []) if isinstance(n, int) and not isinstance(n, bool)}
    findings = [n for n in item.get("findings", []) if isinstance(n, int) and not isinstance(n, bool)]
    if not findings:
        findings = [pk for source in sources if source.number in numbers for pk in source.ids]
    known = {pk: source.number for source in sources for pk in source.ids}
    findings = [pk for pk in findings if pk in known]
    numbers |= {known[pk] for pk in findings}
    return {
        "sources": sorted(n for n in numbers if any(s.number == n for s in sources)),
        "findings": findings,
        "learnings": [str(x) for x in item.get("learnings", [])],
    }


def _packet(sources: list[SourceNote], plan: dict[str, Any]) -> list[SourceNote]:
    """The sources of a section with only its findings, numbered as in the whole report; every source for a plan
    that names none."""
    wanted = {n for n in plan.get("sources", []) if isinstance(n, int)}
    findings = set(plan.get("findings", []))
    given = [source for source in sources if source.number in wanted] or sources
    if not findings:
        return given
    packet = []
    for source in given:
        kept = [(pk, finding) for pk, finding in zip(source.ids, source.findings, strict=False) if pk in findings]
        packet.append(replace(source, findings=[finding for _, finding in kept], ids=[pk for pk, _ in kept]))
    return [source for source in packet if source.findings] or given


def _hand_to_assembly(research_id: str) -> None:
    """Inside the research transaction: the research row's lease waits for the assembly, queued on commit."""
    transitions.hand_on(research_id, status=ResearchStatus.REPORTING)
    dispatch.ASSEMBLE.on_commit(research_id)


def write_section(section_id: int, task_id: str | None = None) -> None:
    """Write one section of the report, check its citations, and store it (once); the last one queues assembly."""
    owner = claim_owner(task_id)
    token = lease_token(owner)
    claimed = _update_open_section(
        section_id,
        {"status": SectionStatus.WRITING, "claimed_by": token, "claimed_at": timezone.now()},
        claimable_by=owner,
    )
    if not claimed:
        return  # written, claimed by another delivery, or its research is over: nothing to do
    heartbeat.took_up()  # the claim replaced the task's reservation
    with fencing.holding(Lease(ReportSection, section_id, token)):
        read = _section_row(section_id)
        if read is None:
            return  # deleted with its research
        section, research, used = read
        run = (research.pk, section.version, research.started_at)
        sources, page_texts = collect_sources(research.pk, *_sources_allowance(research, used), cache_key=run)
        # The section sees the findings the outline gave it, under their sources numbered as in the whole report,
        # with the request, the follow-up answers and the rest of the outline.
        given = _packet(sources, section.plan)
        page_texts.load(source.url for source in given)  # what the section will cite, in one query
        answers, headings = _section_context(research.pk, section.version, run)
        with charged_to(research.pk, reporting=True):
            content = engine_for(research.engine).write_section(
                research.prompt,
                section.title,
                [str(x) for x in section.plan.get("learnings", [])],
                given,
                answers=answers,
                outline_headings=headings,
                words=_section_words(research, section, headings),
            )
        markdown, stats = render_section(section.title, content, sources, page_texts)
        markdown, stats["stray_links_dropped"] = drop_stray_links(markdown, [source.url for source in sources])
        # The research row is only read, and shared with the other sections: they land side by side, and an
        # ending (cancel, failure), which holds the row exclusively, waits for this transaction, so no section lands
        # in a research that is over. The event is inserted unnumbered and numbered before its push.
        with transaction.atomic():
            if not _still_reporting(research.pk):
                return
            fencing.check()  # after the research's read: the order the section's own update takes its locks in
            stored = _update_open_section(
                section_id,
                {
                    "status": SectionStatus.WRITTEN,
                    "content": content,
                    "markdown": markdown,
                    "written_at": timezone.now(),
                    "claimed_at": timezone.now(),
                },
            )
            if not stored:
                return  # another delivery stored the section first
            written = {"position": section.position, "title": section.title}
            insert_events(research.pk, [(EventType.REPORT_SECTION_WRITTEN, written)])
        _sections_done(str(research.pk), section.version)


def _section_row(section_id: int) -> tuple[ReportSection, Research, Usage] | None:
    """The section, what a section reads of its research, and what the research's calls spent where it has a token
    or dollar budget (0 where not: what the report's allowance reads of them): one hand-written read, as unsaved
    instances. The ORM compiled the join for each of a large report's hundreds of sections, read the research's
    whole outline with it, and the spending took a statement of its own."""
    row = step_row(
        ReportSection,
        section_id,
        "SELECT s.version, s.position, s.title, s.plan, s.research_id, r.engine, r.prompt, r.report_words, "
        f"{state_sql('r')} FROM {ReportSection._meta.db_table} s "
        f"JOIN {Research._meta.db_table} r ON r.id = s.research_id WHERE s.id = %s",
    )
    if row is None:
        return None
    version, position, title, plan, research_id, engine, prompt, report_words, *columns = row
    state = BudgetState(*columns)
    research = Research(
        pk=research_id,
        engine=engine,
        prompt=prompt,
        report_words=report_words,
        started_at=state.started_at,
        budget_tokens=state.budget_tokens,
        budget_usd=state.budget_usd,
    )
    section = ReportSection(
        pk=section_id,
        research_id=research_id,
        version=version,
        position=position,
        title=title,
        plan=database.json_value(plan),
    )
    return section, research, Usage(state.prompt_tokens, state.completion_tokens, state.cost_usd, 0)


def _update_open_section(section_id: int, values: Mapping[str, Any], claimable_by: str | None = None) -> bool:
    """Set `values` on the section if it is pending or being written, in its research's current report version,
    the research still reporting (and, with `claimable_by`, its lease free, lapsed or that owner's); whether it
    was. One hand-written statement: the ORM compiles the join to the research in an UPDATE in 2.5 ms of CPU, and
    each section makes two."""
    fields = [_section_field(name) for name in values]
    assignments = ", ".join(f"{field.column} = %s" for field in fields)
    params = [field.get_db_prep_save(value, connection) for field, value in zip(fields, values.values(), strict=True)]
    lease, lease_params = claimable_sql(claimable_by) if claimable_by is not None else ("1 = 1", [])
    table = ReportSection._meta.db_table
    with database.prepared_cursor() as cursor:
        cursor.execute(
            f"UPDATE {table} SET {assignments} WHERE id = %s AND status IN (%s, %s) AND {lease} AND version = "
            f"(SELECT report_version FROM {Research._meta.db_table} WHERE id = {table}.research_id AND status = %s)",
            [
                *params,
                section_id,
                SectionStatus.PENDING,
                SectionStatus.WRITING,
                *lease_params,
                ResearchStatus.REPORTING,
            ],
        )
        return cursor.rowcount > 0


def _section_field(name: str) -> "Field[Any, Any]":  # stubs-only generic
    field = ReportSection._meta.get_field(name)
    assert isinstance(field, Field)
    return field


def _still_reporting(research_id: ResearchId) -> bool:
    """Inside a section's transaction: whether its research is still writing its report (`held_status`)."""
    held = held_status(research_id)
    return held is not None and held[0] == ResearchStatus.REPORTING


def _sections_done(research_id: str, version: int) -> None:
    """After a section's commit: if every section of the report is written, queue the assembly. Run after the
    commit, this sees every section committed before it, so the last to land finds none unwritten; sections that
    land together may each find so, and each then queues it while the research row still waits for it (an assembly
    delivered twice is claimed once)."""
    # Hand-written: the ORM compiled this read anew for each of a report's hundreds of sections.
    with database.prepared_cursor() as cursor:
        cursor.execute(
            f"SELECT EXISTS (SELECT 1 FROM {ReportSection._meta.db_table} WHERE research_id = %s AND version = %s "
            "AND status <> %s)",
            [Research._meta.pk.get_db_prep_value(research_id, connection), version, SectionStatus.WRITTEN],
        )
        unwritten = cursor.fetchone()[0]
    if not unwritten and transitions.assembly_due(research_id):
        dispatch.ASSEMBLE.now(research_id)


def _with_words(plans: list[dict[str, Any]], report_words: int | None) -> list[dict[str, Any]]:
    """Each plan with its section's share of the report's length (`report_words`), by its share of the findings,
    as "words": set once with the outline, so a section need not read every other section's plan for it."""
    if not report_words or not plans:
        return plans
    total = sum(len(plan.get("findings", [])) for plan in plans)
    for plan in plans:
        share = len(plan.get("findings", [])) / total if total else 1 / len(plans)
        plan["words"] = max(80, round(report_words * share / 10) * 10)
    return plans


def _section_words(research: Research, section: ReportSection, headings: list[str]) -> int | None:
    """The section's share of the report's length: as its outline set it, or, for a section planned before the
    outline did (an upgrade mid-report), by its share of the findings of all the version's sections."""
    words = section.plan.get("words")
    if isinstance(words, int) and not isinstance(words, bool):
        return words
    if not headings:
        return None
    rows = ReportSection.objects.filter(research_id=research.pk, version=section.version).values_list("pk", "plan")
    ids, plans = zip(*rows, strict=True) if rows else ((), ())
    shares = dict(zip(ids, _with_words([dict(plan) for plan in plans], research.report_words), strict=True))
    return shares.get(section.pk, {}).get("words")


def section_failed(section_id: int, error: BaseException) -> None:
    """A section that failed for good fails the report, as a failed report did; the error output lists the
    sections that were written."""
    row = ReportSection.objects.filter(pk=section_id).values("research_id", "title").first()
    if row is None:
        return
    ReportSection.objects.filter(pk=section_id, status__in=[SectionStatus.PENDING, SectionStatus.WRITING]).update(
        status=SectionStatus.FAILED
    )
    report_failed(str(row["research_id"]), RuntimeError(f"section “{row['title']}”: {error}"))


def assemble_report(research_id: str, task_id: str | None = None) -> None:
    """Every section written: assemble the report, check it as a whole, store it and complete the research."""
    owner = claim_owner(task_id)
    token = lease_token(owner)
    if not transitions.claim_assembly(research_id, claimable(owner), token):
        return  # claimed by another delivery, over, or a section is still unwritten (the last one queues this)
    with fencing.holding(Lease(Research, research_id, token)):
        _write(research_id)


def _write(research_id: str) -> None:
    """Assemble the report from the outline and the written sections, check its citations, and store it (once)."""
    research = Research.objects.get(pk=research_id)
    sections = list(ReportSection.objects.filter(research_id=research_id, version=research.report_version))
    if any(section.status != SectionStatus.WRITTEN for section in sections):
        return  # not reached: the claim (claim_assembly) waits for every section; kept so no report is short
    sources, page_texts = collect_sources(research_id, *_sources_allowance(research))
    page_texts.load(source.url for source in sources)  # the report cites most of them: one query
    outline = research.report_outline or {}
    report = {
        "title": outline.get("title", ""),
        "summary": outline.get("summary", []),
        "sections": [{"heading": section.title, **section.content} for section in sections],
    }
    # The memory's contradictions and open questions: rendered from the stored items, after the model's sections.
    memory = report_notes(research_id)
    markdown, counts = render_report(report, sources, page_texts, memory)
    stats: dict[str, Any] = counts  # the renderer's counts, and what is added to them below
    stats["sections"] = len(sections)
    if research.engine == EXTRACTIVE:
        markdown = _offline_note(markdown)
    # The pages analysed, as the page's cards and coverage line count them (research/live/figures.py): every page
    # analysed, whether or not it gave a finding.
    analysed_pages = page_counts(Website.objects.filter(research_id=research_id).values_list("url", "status")).analysed
    if research.partial:
        markdown = _partial_note(markdown, research, analysed_pages)
        stats["stop_reason"] = research.stop_reason
    # First in the report, so first read: sources that do not bear on the request, or else the parts of the request
    # no source spoke to.
    found = _relevance(research)
    if found is not None:
        stats["relevance"] = found.as_stats()
    if found is not None and found.verdict == relevance.OFF_TOPIC:
        markdown = _note_under_title(markdown, relevance.off_topic_note(found, analysed_pages))
    elif open_parts := outcome.unanswered_branches(research_id):
        stats["unanswered_queries"] = open_parts
        markdown = _note_under_title(markdown, outcome.partly_answered_note(open_parts))
    # The renderer admits no link to a page that was not analysed; should one slip through, it goes, not the report.
    analysed = [source.url for source in sources] + [url for note in memory for url, _ in note.pages]
    markdown, stats["stray_links_dropped"] = drop_stray_links(markdown, analysed)
    if not cited_urls(markdown, analysed):
        # A report that cites nothing is not a research result (the model ignored its sources): fail the step.
        raise RuntimeError("the report cites none of the analysed pages")
    # A scheduled run's report says first what changed since the version before, from both runs' findings.
    found_changes = changes.since_last_run(research)
    if found_changes is not None:
        markdown = changes.insert(markdown, changes.render(found_changes))
        stats["changes"] = found_changes.as_stats()
    stats["sources_available"] = len(sources)
    _store(research_id, markdown, stats, research.title)


def _store(research_id: str, markdown: str, stats: dict[str, Any], title: str) -> None:
    """Store the report of the version being written (once) and complete the research, which takes the report's
    title (`title` where it has none) unless its user named it."""
    with research_transaction(research_id, ending=True):
        fencing.check()
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
            stored = Document.objects.get(**key)
            _complete(research_id, report_title(stored.markdown) or title, stored.stats or {})
            return
        _complete(research_id, report_title(markdown)[:200] or title, stats)
        record_event(research_id, EventType.REPORT_WRITING_SUCCESSFUL, stats)


def _complete(research_id: str, title: str, stats: Mapping[str, Any]) -> None:
    # The sweeper may have moved a slow writer's research back to running; either way it is finished now. The
    # research takes the report's title unless its user named it.
    transitions.complete(research_id, title, UNREPORTED, _outcome(research_id, stats))


def _outcome(research_id: str, stats: Mapping[str, Any]) -> str:
    """How the research ends with this report: no answer found, partial (a budget or a cancel stopped it, or a
    branch failed: work was left), or complete. A branch its user cancelled is their choice, not work left."""
    if stats.get("outcome") == outcome.UNANSWERED:
        return Outcome.UNANSWERED
    stopped = Research.objects.filter(pk=research_id, partial=True).exists()
    if stopped or SerpQuery.objects.filter(research_id=research_id, status=QueryStatus.FAILED).exists():
        return Outcome.PARTIAL
    return Outcome.COMPLETE


def _relevance(research: Research) -> relevance.Relevance | None:
    """Whether the findings bear on the request (workers/pipeline/relevance.py); the writer's verdict, when it
    gave one with the outline, settles it."""
    rows = current_findings(research.pk).values_list("fact", "quote", "website__title")
    findings, titles = [], set()
    for fact, quote, title in rows.iterator(chunk_size=2000):
        findings.append(f"{fact} {quote}")
        titles.add(title)
    said = (research.report_outline or {}).get("sources_answer_request")
    model_says = None if said not in ("yes", "partly", "no") else said != "no"
    return relevance.assess(research.prompt, findings, titles, model_says)


def _note_under_title(markdown: str, note: str) -> str:
    title, _, rest = markdown.partition("\n")
    return f"{title}\n\n{note}\n{rest}"


def _offline_note(markdown: str) -> str:
    """Say plainly, under the title, that no language model wrote this report."""
    where = "the local document collection" if settings.SEARCH_PROVIDERS == ["local"] else "the pages it found"
    note = (
        f"> Offline research: written by the extractive engine, without a language model, from {where}. "
        "Every sentence below is a sentence of the document it cites."
    )
    return _note_under_title(markdown, note)


def _partial_note(markdown: str, research: Research, pages: int) -> str:
    """Say first, under the title, that a budget cut the research short, and what the report covers."""
    covers = "the page" if pages == 1 else f"the {pages:,} pages"
    if research.stop_reason == budgets.CANCELLED:
        note = f"> Partial report: the research was cancelled; it covers {covers} analysed by then."
        return _note_under_title(markdown, note)
    budget = budgets.describe(research.stop_reason, research)
    note = f"> Partial report: the research stopped when it reached its {budget}; it covers {covers} analysed by then."
    return _note_under_title(markdown, note)


def report_failed(research_id: str, error: BaseException) -> None:
    fail_research(
        research_id,
        reason="report_failed",
        what=f"The report could not be written: {error}",
        impact="All queries finished and every extract is kept below, but there is no report.",
    )


def _page_texts(research_id: ResearchId, urls: list[str]) -> dict[str, str]:
    """The stored texts of the research's fetched pages with these URLs, by URL. Hand-written on PostgreSQL (one
    array parameter): the ORM compiled the read, its IN list one placeholder per URL, for every section."""
    with database.prepared_cursor() as cursor:
        cursor.execute(
            f"SELECT p.url, p.text FROM {Page._meta.db_table} p "
            f"JOIN {Research._meta.db_table} r ON r.id = p.research_id "
            "WHERE p.research_id = %s AND p.status = %s AND p.url = ANY(%s) AND p.run_round = r.run_round",
            [Research._meta.pk.get_db_prep_value(research_id, connection), PageStatus.FETCHED, urls],
        )
        return dict(cursor.fetchall())


class PageTexts(Mapping[str, PageText]):
    """The texts of a research's analysed pages by URL, each loaded and normalised the first time it is asked for.

    A section cites a handful of the report's sources, and the outline cites none: loading and normalising every
    page of a (5,5) research (770) for each of them was most of the report's CPU. A URL that is not one of the
    sources is not a key; one whose page has no stored text maps to an empty text, as before.
    """

    def __init__(self, research_id: ResearchId, urls: Iterable[str]) -> None:
        self._research_id = research_id
        self._urls = list(dict.fromkeys(urls))
        self._keys = set(self._urls)
        self._loaded: dict[str, PageText] = {}

    def load(self, urls: Iterable[str]) -> None:
        """Load the texts of these URLs not loaded yet, in one query."""
        missing = [url for url in dict.fromkeys(urls) if url in self._keys and url not in self._loaded]
        if not missing:
            return
        texts = _page_texts(self._research_id, missing)
        for url in missing:
            self._loaded[url] = PageText(texts.get(url, ""))

    def __getitem__(self, url: str) -> PageText:
        if url not in self._keys:
            raise KeyError(url)
        if url not in self._loaded:
            self.load([url])
        return self._loaded[url]

    def __contains__(self, url: object) -> bool:
        return url in self._keys

    def __iter__(self) -> Iterator[str]:
        return iter(self._urls)

    def __len__(self) -> int:
        return len(self._urls)


T = TypeVar("T")


class _PerReport(Generic[T]):
    """What every section of a report reads alike, kept in this process for the last few reports, by (research,
    report version, run start): read once per report, not once per section. The sections that start together
    wait for the first one's read instead of each sending the same query (a level's sections are queued at once
    and start on every free thread)."""

    def __init__(self, kept: int = 4) -> None:
        self._kept = kept
        self._values: OrderedDict[tuple[Any, ...], T] = OrderedDict()
        self._lock = threading.Lock()
        self._reading: dict[tuple[Any, ...], threading.Lock] = {}

    def get(self, key: tuple[Any, ...], read: Callable[[], T]) -> T:
        with self._lock:
            if key in self._values:
                return self._values[key]
            reading = self._reading.setdefault(key, threading.Lock())
        with reading:
            with self._lock:
                if key in self._values:
                    return self._values[key]
            value = read()
            with self._lock:
                self._values[key] = value
                self._reading.pop(key, None)
                while len(self._values) > self._kept:
                    self._values.popitem(last=False)
            return value


@dataclass(frozen=True)
class _Collected:
    sources: list[SourceNote]
    sizes: list[int]  # each source's block, as the writer is shown it

    def fits(self, max_chars: int) -> bool:
        return _size(self.sizes) <= max_chars


def collect_sources(
    research_id: ResearchId,
    max_tokens: int,
    chars_per_token: float = CHARS_PER_TOKEN,
    cache_key: tuple[Any, ...] | None = None,
) -> tuple[list[SourceNote], PageTexts]:
    """One numbered source per analysed page with extracts, trimmed to `max_tokens`; their page texts, loaded
    as they are needed. A section passes `cache_key` and, where nothing needs trimming, gets sources shared with
    the others: read only (see _SECTION_SOURCES)."""
    max_chars = int(max_tokens * chars_per_token)
    if cache_key is None:
        collected = _read_sources(research_id)
    else:
        collected = _SECTION_SOURCES.get(cache_key, lambda: _read_sources(research_id))
    urls = [source.url for source in collected.sources]
    if collected.fits(max_chars):
        return collected.sources, PageTexts(research_id, urls)
    sources = collected.sources
    if cache_key is not None:  # trimmed on a copy: the shared sources stay whole
        sources = [replace(source, findings=list(source.findings), ids=list(source.ids)) for source in sources]
    _trim(sources, max_chars)
    return sources, PageTexts(research_id, urls)


# The sources of the reports being written, numbered and untrimmed. Every section needs all of them, to number its
# sources as the whole report does, and a (5,5) report has hundreds of sections; the tree does not change while its
# report is written (every query is counted off; a retried branch starts a new run). The key leaves out the
# allowance: the characters per token move with every call the model answers, and keying on them made nearly every
# section read and number the sources again. Sections only read them; the assembly collects its own.
_SECTION_SOURCES: _PerReport[_Collected] = _PerReport()
# The follow-up answers and the outline's headings, which every section's prompt holds: neither changes once the
# outline is stored.
_SECTION_CONTEXT: _PerReport[tuple[list[tuple[str, str]], list[str]]] = _PerReport()


def _section_context(
    research_id: ResearchId, version: int, key: tuple[Any, ...]
) -> tuple[list[tuple[str, str]], list[str]]:
    def read() -> tuple[list[tuple[str, str]], list[str]]:
        sections = ReportSection.objects.filter(research_id=research_id, version=version).order_by("position")
        return FollowUpQuestion.answers_of(research_id), list(sections.values_list("title", flat=True))

    return _SECTION_CONTEXT.get(key, read)


def current_findings(research_id: ResearchId) -> Any:
    """The research's findings from its latest run: those of pages fetched in it (a scheduled run fetches every
    page anew, and its report rests on what the pages say now). A finding whose website links no page (rows
    written by hand, as the seeded researches of the tests are) counts as the latest run's."""
    this_run = Q(website__page__run_round=F("research__run_round")) | Q(website__page__isnull=True)
    return Extract.objects.filter(this_run, research_id=research_id)


def _read_sources(research_id: ResearchId) -> _Collected:
    rows = (
        current_findings(research_id)
        .order_by("website__query__depth", "website__query_id", "website__position", "position")
        .values_list(
            "pk", "website__url", "website__title", "fact", "quote", "website__page__dated", "website__page__standing"
        )
    )
    by_url: dict[str, SourceNote] = {}
    for pk, url, title, fact, quote, dated, standing in rows:
        note = by_url.get(url)
        if note is None:
            note = by_url[url] = SourceNote(
                number=len(by_url) + 1, url=url, title=title, dated=dated, standing=standing or "current"
            )
        note.findings.append((fact, quote))
        note.ids.append(pk)
    sources = list(by_url.values())
    return _Collected(sources, _sizes(sources))


def _sizes(sources: list[SourceNote]) -> list[int]:
    return [len(report_writer.sources_block([source])) for source in sources]


def _size(each: list[int]) -> int:
    """The size of the sources block: the sources' own blocks joined by newlines."""
    return sum(each) + max(len(each) - 1, 0)


def _trim(sources: list[SourceNote], max_chars: int) -> None:
    """Fewer findings per source until the sources block fits; every source keeps at least one."""
    # The block's size is kept as a sum of the sources' own, not rebuilt for every source dropped (hundreds of
    # times at (5,5)).
    each = _sizes(sources)
    per_source = max((len(s.findings) for s in sources), default=0)
    while per_source > 1 and _size(each) > max_chars:
        per_source -= 1
        for source in sources:
            del source.findings[per_source:]
            del source.ids[per_source:]
        each = _sizes(sources)
    total = _size(each)
    while len(sources) > 1 and total > max_chars:
        sources.pop()
        total -= each.pop() + 1
