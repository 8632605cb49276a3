"""Research memory: what one finished query's analysed websites add to the research's insights, gaps and
contradictions.

`remember(query_id)` runs once a query's websites are all analysed or failed. The model call happens outside any
transaction; then every new item is inserted with ON CONFLICT DO NOTHING on (research, kind, key), the key being
the normalised text (research/record/memory.py). Nothing is ever read, changed and written back, so many workers
remembering branches of one research at once can neither lose an item nor store one twice, and remembering the
same query again adds nothing. An answered gap is closed by a conditional UPDATE. The event `memory_updated` is
recorded only when something changed, in the same transaction as the change.
"""

import json
import logging
from dataclasses import dataclass
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from research.models import (
    EventType,
    Extract,
    MemoryItem,
    MemoryKind,
    Page,
    Research,
    ResearchStatus,
    SerpQuery,
    Website,
    WebsiteStatus,
)
from research.record import database
from research.record.events import insert_events
from research.record.memory import memory_key
from research.record.usage import BudgetState
from research.types import ResearchId
from workers.agents.engines import engine_for
from workers.agents.memory_agent import KnownMemory, MemorySource, MemoryUpdate
from workers.clients.llm import charged_to
from workers.errors import ResearchStopped
from workers.pipeline import fencing
from workers.pipeline.citations import MemoryNote
from workers.pipeline.lifecycle import held_status

log = logging.getLogger(__name__)

# A research over by cancel or failure takes no more memory; a completed one may (a retried branch of it).
STOPPED = (ResearchStatus.CANCELLED, ResearchStatus.FAILED)
# A contradiction is two or more sources that disagree.
MIN_CONTRADICTION_SITES = 2
# What of the memory a report lists: the section is a digest, not a dump.
MAX_REPORT_CONTRADICTIONS = 20
MAX_REPORT_QUESTIONS = 12


@dataclass(frozen=True)
class NewItem:
    kind: str
    text: str
    website_ids: list[int]


def remember(
    query_id: int, research: Research | None = None, objective: str | None = None, state: BudgetState | None = None
) -> None:
    """Ask the memory agent what the query's analysed websites add, and store it (see the module's docstring).

    The review step, which has just read the research and the query, passes them (`research`, the query's
    `objective`, and the research's budget `state` its model request is admitted on); otherwise they are read
    here."""
    if research is None or objective is None:
        query = SerpQuery.objects.select_related("research").filter(pk=query_id).first()
        if query is None:
            return
        research, objective = query.research, query.objective
    if research.status in STOPPED:
        return
    sources = _sources(query_id)
    if not sources:
        return  # nothing was analysed: the branch has nothing to say, and the model call would be wasted
    known = _known(research.pk)
    with charged_to(research.pk, known=state):
        update = engine_for(research.engine).update_memory(research.prompt, objective, sources, known)
    shown_gaps = {pk for pk, _ in known.gaps}
    store(research.pk, query_id, _items(research.pk, update), [pk for pk in update.answered_gaps if pk in shown_gaps])


def _sources(query_id: int) -> list[MemorySource]:
    """The query's analysed websites that have findings, in order, each with its findings: one hand-written read
    (the ORM compiled two, with a join for the order, for every review)."""
    by_id: dict[int, MemorySource] = {}
    with database.prepared_cursor() as cursor:
        cursor.execute(
            f"SELECT w.id, w.url, w.title, e.fact, e.quote, p.dated, p.standing FROM {Website._meta.db_table} w "
            f"JOIN {Extract._meta.db_table} e ON e.website_id = w.id "
            f"LEFT JOIN {Page._meta.db_table} p ON p.id = w.page_id WHERE w.query_id = %s AND w.status = %s "
            "ORDER BY w.position, w.id, e.position, e.id",
            [query_id, WebsiteStatus.ANALYZED],
        )
        for pk, url, title, fact, quote, dated, standing in cursor.fetchall():
            source = by_id.get(pk)
            if source is None:
                source = by_id[pk] = MemorySource(pk, url, title, dated=dated, standing=standing or "current")
            source.findings.append((fact, quote))
    return list(by_id.values())


def _known(research_id: ResearchId) -> KnownMemory:
    gaps, insights, contradictions = [], [], []
    with database.prepared_cursor() as cursor:
        cursor.execute(
            f"SELECT id, kind, text FROM {MemoryItem._meta.db_table} WHERE research_id = %s AND closed = %s "
            "ORDER BY id",
            [Research._meta.pk.get_db_prep_value(research_id, connection), False],
        )
        rows = cursor.fetchall()
    for pk, kind, text in rows:
        if kind == MemoryKind.GAP:
            gaps.append((pk, text))
        elif kind == MemoryKind.INSIGHT:
            insights.append(text)
        else:
            contradictions.append(text)
    return KnownMemory(gaps, insights, contradictions)


def _items(research_id: ResearchId, update: MemoryUpdate) -> list[NewItem]:
    """The update's items that rest on analysed websites of this research, each website named once.

    An insight left with no such website is dropped (it would rest on nothing), a contradiction left with fewer
    than two is no disagreement; a gap is what no source answered, so it may name none."""
    # The ids as the model gave them: one no website key could be (out of a bigint's range) names none.
    notes = [*update.insights, *update.contradictions]
    named = sorted({pk for note in notes for pk in note.website_ids if 0 < pk < 2**63})
    analysed: set[int] = set()
    if named:
        with database.prepared_cursor() as cursor:
            cursor.execute(
                f"SELECT id FROM {Website._meta.db_table} WHERE research_id = %s AND status = %s "
                f"AND id IN ({', '.join(['%s'] * len(named))})",
                [Research._meta.pk.get_db_prep_value(research_id, connection), WebsiteStatus.ANALYZED, *named],
            )
            analysed = {row[0] for row in cursor.fetchall()}
    items = []
    for kind, notes, least in (
        (MemoryKind.INSIGHT, update.insights, 1),
        (MemoryKind.CONTRADICTION, update.contradictions, MIN_CONTRADICTION_SITES),
    ):
        for note in notes:
            ids = sorted({pk for pk in note.website_ids if pk in analysed})
            if note.text and len(ids) >= least:
                items.append(NewItem(kind, note.text, ids))
    items += [NewItem(MemoryKind.GAP, text, []) for text in update.gaps if text]
    return items


def store(
    research_id: ResearchId, query_id: int | None, items: list[NewItem], answered_gaps: list[int]
) -> dict[str, int | None]:
    """Insert the items no earlier update holds and close the answered gaps, in one transaction; record
    `memory_updated` when anything changed. Returns the counts the event carries."""
    counts: dict[str, Any] = {"query_id": query_id, "insights": 0, "gaps": 0, "contradictions": 0, "closed": 0}
    research_pk = Research._meta.pk.get_db_prep_value(research_id, connection)
    with transaction.atomic():
        fencing.check()  # the review's lease: its query, the first row this transaction locks
        now = timezone.now()
        _insert_items(research_pk, query_id, items, now, counts)
        if answered_gaps:
            counts["closed"] = _close_gaps(research_id, research_pk, answered_gaps)
        if not any(counts[name] for name in ("insights", "gaps", "contradictions", "closed")):
            return counts  # a repeat: nothing new, no event
        # The research row is only read (`held_status`), last, in the tree's lock order: the reviews of one
        # research store their memory side by side, and a cancel or failure that came first is seen here, so
        # nothing lands in a research that is over. The event goes in unnumbered, numbered after the commit.
        held = held_status(research_id)
        if held is None or held[0] in STOPPED:
            raise ResearchStopped(f"research {research_id} is over")
        insert_events(research_id, [(EventType.MEMORY_UPDATED, counts)])
    return counts


def _close_gaps(research_id: ResearchId, research_pk: Any, gap_ids: list[int]) -> int:
    """Close the research's open gaps `gap_ids` (ids the review was shown); how many were open. On PostgreSQL one
    hand-written statement, where the ORM compiled its `IN` list for every review that answered a gap."""
    with database.prepared_cursor() as cursor:
        cursor.execute(
            f"UPDATE {MemoryItem._meta.db_table} SET closed = true "
            "WHERE research_id = %s AND kind = %s AND NOT closed AND id = ANY(%s)",
            [research_pk, MemoryKind.GAP, list(gap_ids)],
        )
        return cursor.rowcount


def _insert_items(
    research_pk: Any, query_id: int | None, items: list[NewItem], now: Any, counts: dict[str, Any]
) -> None:
    """`store`'s inserts in one statement (PostgreSQL): the unique (research, kind, key) still decides, and an item
    given twice in one update is inserted once."""
    plural = {MemoryKind.INSIGHT: "insights", MemoryKind.GAP: "gaps", MemoryKind.CONTRADICTION: "contradictions"}
    rows = [[item.kind, item.text, key, item.website_ids] for item in items if (key := memory_key(item.text))]
    if not rows:
        return
    with database.prepared_cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {MemoryItem._meta.db_table} (research_id, kind, text, key, query_id, website_ids, closed, "
            "created_at) SELECT %s, item.value->>0, item.value->>1, item.value->>2, %s, item.value->3, false, %s "
            "FROM jsonb_array_elements(%s::jsonb) WITH ORDINALITY AS item ORDER BY item.ordinality "
            "ON CONFLICT (research_id, kind, key) DO NOTHING RETURNING kind",
            [research_pk, query_id, now, json.dumps(rows)],
        )
        for (kind,) in cursor.fetchall():
            counts[plural[kind]] += 1


def report_notes(research_id: ResearchId) -> list[MemoryNote]:
    """The memory's contradictions, each with the analysed pages it names, and its open gaps, for the report."""
    rows = MemoryItem.objects.filter(research_id=research_id, closed=False)
    contradictions = list(rows.filter(kind=MemoryKind.CONTRADICTION).order_by("id")[:MAX_REPORT_CONTRADICTIONS])
    gaps = list(rows.filter(kind=MemoryKind.GAP).order_by("id")[:MAX_REPORT_QUESTIONS])
    named = {pk for item in contradictions for pk in item.website_ids}
    websites = Website.objects.filter(research_id=research_id, status=WebsiteStatus.ANALYZED, pk__in=named)
    pages = {pk: (url, title) for pk, url, title in websites.values_list("pk", "url", "title")}
    # The verified quotes of each named page: what each side of a contradiction's citation rests on.
    quotes: dict[str, list[str]] = {}
    for pk, quote in Extract.objects.filter(website_id__in=pages).order_by("id").values_list("website_id", "quote"):
        quotes.setdefault(pages[pk][0], []).append(quote)
    notes = [
        MemoryNote(
            "contradiction",
            item.text,
            [pages[pk] for pk in item.website_ids if pk in pages],
            {pages[pk][0]: quotes.get(pages[pk][0], []) for pk in item.website_ids if pk in pages},
        )
        for item in contradictions
    ]
    return notes + [MemoryNote("gap", item.text) for item in gaps]
