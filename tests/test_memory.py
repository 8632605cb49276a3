"""Research memory: the memory agent through FakeLLM (real HTTP), the insert-only writes against the real database,
the extractive twin, the snapshot, and the report's section on contradictions and open questions."""

import html
import re
import threading

import pytest
from django.db import connection

from research.live.snapshot import build_snapshot
from research.models import (
    Document,
    Event,
    EventType,
    Extract,
    LlmCall,
    MemoryItem,
    MemoryKind,
    Page,
    PageStatus,
    QueryStatus,
    Research,
    ResearchStatus,
    SerpQuery,
    Website,
    WebsiteStatus,
)
from research.record.memory import MAX_MEMORY_GAPS, memory_key, open_gaps
from research.record.numbering import number as number_events
from research.web.rendering import render_markdown
from tests.support.e2e import start_research, wait_finished
from tests.support.reports import write_report_now
from tests.support.snapshot_schema import validate_snapshot
from workers.agents import extractive
from workers.agents.memory_agent import KnownMemory, MemorySource
from workers.errors import ResearchStopped
from workers.pipeline.citations import MEMORY_HEADING, cited_urls
from workers.pipeline.memory import NewItem, remember, store

PAGE_TEXTS = [
    "Cold-climate heat pumps keep a coefficient of performance of 2.1 at minus 15 degrees. "
    "Defrost cycles take about 4 percent of the running time in humid cold air.",
    "Field trials in Norway measured a coefficient of performance of 1.6 at minus 15 degrees. "
    "Installers size the backup heater for the coldest design day of the site.",
    "Ground-source systems hold a seasonal performance factor above 3 in the same trials. "
    "Borehole drilling adds most of the installation cost of those systems.",
]


def _research(user, status: str = ResearchStatus.RUNNING, pending_queries: int = 1) -> Research:
    return Research.objects.create(
        owner=user,
        prompt="How do heat pumps perform in cold climates?",
        title="Heat pumps",
        status=status,
        breadth=2,
        depth=1,
        pending_queries=pending_queries,
    )


def _query(research: Research, position: int, texts: list[str], failed: int = 0) -> SerpQuery:
    """A query whose websites are all analysed (one extract per sentence of each page) or failed."""
    query = SerpQuery.objects.create(
        research=research,
        depth=1,
        position=position,
        query=f"heat pump cold climate {position}",
        objective=f"What the sources state about heat pump performance {position}.",
        status=QueryStatus.REVIEWING,
    )
    for index, text in enumerate(texts):
        url = f"https://pages.example/{research.pk}/{position}/{index}"
        page, _ = Page.objects.get_or_create(
            research=research, url=url, defaults={"status": PageStatus.FETCHED, "text": text}
        )
        website = Website.objects.create(
            research=research, query=query, page=page, position=index, url=url, title=f"Page {index}", status="analyzed"
        )
        for number, sentence in enumerate(re.split(r"(?<=\.)\s+", text.strip())):
            Extract.objects.create(research=research, website=website, position=number, fact=sentence, quote=sentence)
    for index in range(failed):
        Website.objects.create(
            research=research,
            query=query,
            position=len(texts) + index,
            url=f"https://failed.example/{position}/{index}",
            status=WebsiteStatus.FAILED,
        )
    return query


def _items(research: Research, kind: str) -> list[MemoryItem]:
    return list(MemoryItem.objects.filter(research=research, kind=kind).order_by("id"))


def test_memory_key_normalises_case_spacing_and_punctuation() -> None:
    assert memory_key("  Cost: 5 %  of   THE total!") == memory_key("cost 5% of the total")
    assert len(memory_key("word " * 100)) <= 200


def test_remember_stores_items_resting_on_analysed_websites(db, user, research_model, fake_llm) -> None:
    # given a query with two analysed websites and a failed one
    research = _research(user)
    query = _query(research, 0, PAGE_TEXTS[:2], failed=1)
    analysed = set(Website.objects.filter(query=query, status="analyzed").values_list("pk", flat=True))
    # when
    remember(query.pk)
    # then insights, a gap and a contradiction were stored, each on analysed websites of this research
    insights = _items(research, MemoryKind.INSIGHT)
    contradictions = _items(research, MemoryKind.CONTRADICTION)
    assert len(insights) == 2 and _items(research, MemoryKind.GAP)
    assert all(item.website_ids and set(item.website_ids) <= analysed for item in insights)
    assert len(contradictions) == 1 and set(contradictions[0].website_ids) == analysed
    assert all(item.query_id == query.pk for item in MemoryItem.objects.filter(research=research))
    event = Event.objects.get(research=research, type=EventType.MEMORY_UPDATED)
    assert event.data == {"query_id": query.pk, "insights": 2, "gaps": 1, "contradictions": 1, "closed": 0}
    # the agent saw the pages' facts fenced, and the call was charged to the research
    sent = fake_llm.calls("memory_update")[-1]["messages"][-1]["content"]
    assert re.search(r"<<<BRANCH-\w+>>>\n\[website \d+\]", sent)
    assert LlmCall.objects.filter(research=research, agent="memory").exists()


def test_remembering_a_query_again_adds_nothing(db, user, research_model) -> None:
    research = _research(user)
    query = _query(research, 0, PAGE_TEXTS[:2])
    remember(query.pk)
    before = list(MemoryItem.objects.filter(research=research).values_list("kind", "key", "closed"))
    # when the same query is remembered again (a repeated delivery)
    remember(query.pk)
    # then nothing was added and no second event recorded
    assert list(MemoryItem.objects.filter(research=research).values_list("kind", "key", "closed")) == before
    assert Event.objects.filter(research=research, type=EventType.MEMORY_UPDATED).count() == 1


def test_items_naming_websites_that_were_not_analysed_here_are_dropped(db, user, fakes, fake_llm) -> None:
    # given a model that names a failed website, one of another research, one no key could be, and a real one
    research = _research(user)
    query = _query(research, 0, PAGE_TEXTS[:1], failed=1)
    good = Website.objects.get(query=query, status="analyzed").pk
    failed = Website.objects.get(query=query, status="failed").pk
    other = Website.objects.get(query=_query(_research(user), 0, PAGE_TEXTS[1:2])).pk
    fake_llm.handlers["memory_update"] = lambda body, schema: {
        "insights": [
            {"text": "Rests on one real page.", "website_ids": [good, failed, other, 10**20, -1]},
            {"text": "Rests on no analysed page of this research.", "website_ids": [failed, other]},
        ],
        "gaps": [{"text": "Nobody measured noise."}],
        "contradictions": [
            {"text": "One real side only.", "website_ids": [good, other]},
            {"text": "One side named twice.", "website_ids": [good, good]},
        ],
        "answered_gaps": [],
    }
    # when
    remember(query.pk)
    # then only the real website stayed, and what rests on nothing (or on one side) is gone
    assert [(i.text, i.website_ids) for i in _items(research, MemoryKind.INSIGHT)] == [
        ("Rests on one real page.", [good])
    ]
    assert _items(research, MemoryKind.CONTRADICTION) == []
    assert [(i.text, i.website_ids) for i in _items(research, MemoryKind.GAP)] == [("Nobody measured noise.", [])]


def test_an_answered_gap_is_closed_and_leaves_planning(db, user, research_model) -> None:
    # given an open gap of an earlier branch
    research = _research(user)
    first, second = _query(research, 0, PAGE_TEXTS[:1]), _query(research, 1, PAGE_TEXTS[2:3])
    remember(first.pk)
    earlier_gap = _items(research, MemoryKind.GAP)[0]
    assert open_gaps(research.pk) == [earlier_gap.text]
    # when a later branch answers it (the fake model answers the first open gap it is shown)
    remember(second.pk)
    # then it is closed: no longer open, not in the snapshot, and counted in the event
    earlier_gap.refresh_from_db()
    assert earlier_gap.closed
    assert earlier_gap.text not in open_gaps(research.pk) and open_gaps(research.pk)
    snapshot = build_snapshot(str(research.pk))
    validate_snapshot(snapshot)
    assert earlier_gap.pk not in [gap["id"] for gap in snapshot["memory"]["gaps"]]
    assert snapshot["memory"]["insights"]
    number_events(research.pk)  # as the push after the commit does: the event went in unnumbered
    last = Event.objects.filter(research=research, type=EventType.MEMORY_UPDATED).order_by("-seq").first()
    assert last.data["closed"] == 1


def test_planning_gets_the_oldest_open_gaps_up_to_the_cap(db, user) -> None:
    # given more open gaps than planning takes, the oldest of them closed
    research = _research(user)
    texts = [f"Nobody measured gap {n}." for n in range(MAX_MEMORY_GAPS + 3)]
    store(research.pk, None, [NewItem(MemoryKind.GAP, text, []) for text in texts], [])
    oldest = MemoryItem.objects.filter(research=research, kind=MemoryKind.GAP).order_by("id").first()
    store(research.pk, None, [], [oldest.pk])
    # then planning (a branch's children, a gap round) reads the oldest open ones, at most MAX_MEMORY_GAPS
    assert open_gaps(research.pk) == texts[1 : MAX_MEMORY_GAPS + 1]


def test_nothing_lands_in_a_cancelled_research(db, user, research_model) -> None:
    research = _research(user)
    query = _query(research, 0, PAGE_TEXTS[:2])
    website = Website.objects.filter(query=query).first().pk
    Research.objects.filter(pk=research.pk).update(status=ResearchStatus.CANCELLED)
    # remember does not even ask the model; a write that raced the cancel is rolled back
    remember(query.pk)
    with pytest.raises(ResearchStopped):
        store(research.pk, query.pk, [NewItem(MemoryKind.INSIGHT, "late", [website])], [])
    assert not MemoryItem.objects.filter(research=research).exists()


def test_concurrent_updates_lose_no_item_and_duplicate_none(transactional_db, user) -> None:
    # given one research with many queries whose updates overlap: each writes the shared items and its own
    research = _research(user, pending_queries=8)
    queries = [_query(research, position, PAGE_TEXTS[:1]) for position in range(8)]
    websites = {q.pk: Website.objects.get(query=q).pk for q in queries}
    shared = [f"Shared insight number {n}." for n in range(10)]
    barrier = threading.Barrier(len(queries))
    errors: list[BaseException] = []

    def update(query: SerpQuery) -> None:
        try:
            site = websites[query.pk]
            items = [NewItem(MemoryKind.INSIGHT, text, [site]) for text in shared]
            items += [NewItem(MemoryKind.INSIGHT, f"Own insight of query {query.pk}.", [site])]
            items += [NewItem(MemoryKind.GAP, "  shared GAP: noise?", [])]
            barrier.wait()
            store(research.pk, query.pk, items, [])
        except BaseException as error:  # noqa: BLE001 - reported by the test below
            errors.append(error)
        finally:
            connection.close()

    # when every query writes at once, each from its own thread and database connection
    threads = [threading.Thread(target=update, args=(query,)) for query in queries]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # then every item is there exactly once
    assert errors == []
    insights = [item.text for item in _items(research, MemoryKind.INSIGHT)]
    assert sorted(insights) == sorted(shared + [f"Own insight of query {q.pk}." for q in queries])
    assert len(_items(research, MemoryKind.GAP)) == 1
    events = Event.objects.filter(research=research, type=EventType.MEMORY_UPDATED)
    assert sum(event.data["insights"] for event in events) == len(insights)
    # and the events, inserted unnumbered beside each other, are numbered without a gap (as the push numbers them)
    number_events(research.pk)
    seqs = sorted(Event.objects.filter(research=research).values_list("seq", flat=True))
    assert seqs == list(range(1, len(seqs) + 1))


def test_extractive_memory_keeps_findings_gaps_and_differing_figures() -> None:
    sources = [
        MemorySource(1, "https://a.example", "A", [("Heat pumps reach a COP of 2.1 at minus 15 degrees.", "q")]),
        MemorySource(2, "https://b.example", "B", [("Field heat pumps reach a COP of 1.6 at minus 15 degrees.", "q")]),
    ]
    known = KnownMemory(
        gaps=[(7, "What do the sources state about COP?"), (8, "What do the sources state about noise?")]
    )
    objective = "What the sources state about heat pumps and refrigerant leakage."
    update = extractive.update_memory("p", objective, sources, known)
    assert [(note.text, note.website_ids) for note in update.insights] == [
        ("Heat pumps reach a COP of 2.1 at minus 15 degrees.", [1]),
        ("Field heat pumps reach a COP of 1.6 at minus 15 degrees.", [2]),
    ]
    assert update.gaps and all("refrigerant" in gap.lower() or "leakage" in gap.lower() for gap in update.gaps)
    assert [note.website_ids for note in update.contradictions] == [[1, 2]]
    assert "2.1" in update.contradictions[0].text and "1.6" in update.contradictions[0].text
    assert update.answered_gaps == [7]


def test_report_cites_both_sides_of_a_contradiction(db, user, research_model, fake_llm) -> None:
    # given a finished tree whose memory holds a contradiction between two analysed pages and an open gap
    research = _research(user, pending_queries=0)
    query = _query(research, 0, PAGE_TEXTS[:2])
    Research.objects.filter(pk=research.pk).update(pending_queries=0)
    SerpQuery.objects.filter(pk=query.pk).update(status=QueryStatus.DONE)
    remember(query.pk)
    contradiction = _items(research, MemoryKind.CONTRADICTION)[0]
    sides = set(Website.objects.filter(pk__in=contradiction.website_ids).values_list("url", flat=True))
    gap = _items(research, MemoryKind.GAP)[0]
    # when the report is written
    write_report_now(research.pk)
    # then its section on contradictions and open questions cites both sides, and lists the gap
    research.refresh_from_db()
    assert research.status == ResearchStatus.COMPLETED, research.error
    markdown = Document.objects.get(research=research, kind="report").markdown
    section = markdown.split(f"## {MEMORY_HEADING}", 1)[1].split("\n## ", 1)[0]
    line = next(line for line in section.splitlines() if contradiction.text.rstrip(".") in line)
    assert set(cited_urls(line, sides)) == sides
    # each side's citation carries, as its title, a quote extracted from that page
    quotes = {
        " ".join(q.split())
        for q in Extract.objects.filter(website_id__in=contradiction.website_ids).values_list("quote", flat=True)
    }
    titles = [html.unescape(title) for title in re.findall(r'<a href="[^"]*" title="([^"]*)"', render_markdown(line))]
    assert len(titles) == len(sides) and set(titles) <= quotes
    assert gap.text in section
    # every cited number is listed among the sources, and every link is an analysed page
    sources_block = markdown.split("## Sources", 1)[1]
    for number in re.findall(r"\[\[(\d+)\]\]", section):
        assert re.search(rf"^{number}\. \[", sources_block, re.MULTILINE)
    analysed = set(Website.objects.filter(research=research, status="analyzed").values_list("url", flat=True))
    assert set(cited_urls(markdown, analysed)) <= analysed


def test_memory_of_a_real_research_rests_on_its_analysed_websites(api, workers, research_model) -> None:
    # when a research runs on the worker processes (each query's review step updates the memory)
    research = wait_finished(start_research(api, 2, 2))
    assert research.status == ResearchStatus.COMPLETED, research.error
    done = SerpQuery.objects.filter(research=research, status=QueryStatus.DONE).count()
    assert Event.objects.filter(research=research, type="memory_updated").count() == done
    # then insights exist, every item rests on analysed websites of this research, a contradiction on two or more
    analysed = set(Website.objects.filter(research=research, status="analyzed").values_list("pk", flat=True))
    items = list(MemoryItem.objects.filter(research=research))
    assert any(item.kind == MemoryKind.INSIGHT for item in items)
    assert all(set(item.website_ids) <= analysed for item in items)
    assert all(item.website_ids for item in items if item.kind != MemoryKind.GAP)
    contradictions = [item for item in items if item.kind == MemoryKind.CONTRADICTION]
    assert contradictions and all(len(set(item.website_ids)) >= 2 for item in contradictions)
    snapshot = build_snapshot(str(research.pk))
    validate_snapshot(snapshot)
    assert len(snapshot["memory"]["insights"]) == sum(item.kind == MemoryKind.INSIGHT for item in items)
    # and the report's section on contradictions cites every side of each
    report = Document.objects.get(research=research, kind="report").markdown
    assert f"## {MEMORY_HEADING}" in report
    section = report.split(f"## {MEMORY_HEADING}", 1)[1]
    urls = dict(Website.objects.filter(research=research).values_list("pk", "url"))
    for item in contradictions:
        assert all(urls[website_id] in section for website_id in item.website_ids)
