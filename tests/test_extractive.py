"""The extractive engine: the LLM agents' interface, with no model; every sentence a document's own."""

import re
from datetime import date
from typing import Any

import jsonschema
import pytest

from research.text import lexical
from research.text.page_text import extract_page
from research.text.quotes import PageText, normalise
from workers.agents import extractive, report_writer
from workers.agents.query_generator import Ancestor
from workers.agents.report_writer import SourceNote
from workers.agents.types import KnownMemory, MemorySource
from workers.pipeline.citations import cited_urls, render_report

PROMPT = (
    "How should a Python program run work concurrently: threads, processes or asyncio, and what do the standard "
    "library docs say about their trade-offs?"
)
THREADING_PAGE = """<html><head><title>threading</title></head><body>
<p>Thread module emulating a subset of Java's threading model.</p>
<dl><dt>class Thread(builtins.object)</dt>
<dd>A class that represents a thread of control.<br>
This class can be safely subclassed in a limited fashion. There are two ways<br>
to specify the activity: by passing a callable object to the constructor, or<br>
by overriding the run() method in a subclass.</dd>
<dt>daemon</dt><dd>A boolean value indicating whether this thread is a daemon thread.<br>
The entire Python program exits when only daemon threads are left.</dd>
<dt>start(self)</dt><dd>Start the thread's activity.<br>
It must be called at most once per thread object. It arranges for the<br>
object's run() method to be invoked in a separate thread of control.</dd>
<dt>Lock = allocate_lock(...)</dt>
<dd>Create a new lock object. See help(type(threading.Lock())) for information about locks.</dd>
</dl>
<table><tr><td>os</td><td>sys</td><td>functools</td></tr></table>
</body></html>"""


def page_text() -> str:
    return extract_page(THREADING_PAGE, "http://docs.test/threading")[1]


@pytest.mark.parametrize("count", [1, 2, 3, 5, 10, 20])
@pytest.mark.parametrize("prompt", [PROMPT, "How do heat pumps perform in cold climates?", "?", "Rust"])
def test_ask_questions_exact_and_distinct(prompt: str, count: int) -> None:
    questions = extractive.ask_questions(prompt, count)
    assert len(questions) == count
    assert len({q.casefold() for q in questions}) == count
    assert all(q.strip().endswith("?") for q in questions)


def test_ask_questions_name_the_request_s_phrases() -> None:
    questions = extractive.ask_questions(PROMPT, 3)
    # The alternatives the request lists come first.
    assert [any(word in q for q in questions) for word in ("threads", "processes", "asyncio")] == [True] * 3


@pytest.mark.parametrize("count", [1, 2, 4, 7, 10])
@pytest.mark.parametrize("prompt", [PROMPT, "How do heat pumps perform in cold climates?", "?"])
def test_plan_queries_exact_and_distinct(prompt: str, count: int) -> None:
    queries = extractive.plan_queries(prompt, [("Which?", "Nordic homes")], [], count)
    assert len(queries) == count
    assert len({" ".join(q.query.casefold().split()) for q in queries}) == count
    assert all(q.query.strip() and q.objective.strip().endswith(".") for q in queries)


def test_plan_queries_cover_the_listed_alternatives() -> None:
    queries = extractive.plan_queries(PROMPT, [], [], 3)
    assert [q.query.split()[0] for q in queries] == ["threads", "processes", "asyncio"]
    assert "threads" in queries[0].objective


def test_plan_queries_deeper_follow_the_parent_s_learnings() -> None:
    # given a parent query whose pages taught the branch about daemon threads and locks
    parent = Ancestor(
        "threads Python program",
        "What the sources state about threads in the context of Python program.",
        [
            "The entire Python program exits when only daemon threads are left.",
            "Create a new lock object.",
            "A daemon thread is killed abruptly at shutdown.",
        ],
    )
    # when
    queries = extractive.plan_queries(PROMPT, [], [parent], 3)
    # then every child searches for something the branch learned and has not searched for yet
    assert len(queries) == 3
    learned = " ".join(parent.learnings).casefold()
    searched = set(lexical.terms(PROMPT)) | set(lexical.terms(parent.query))
    for query in queries:
        new_terms = set(lexical.terms(query.query)) - searched
        assert new_terms, query
        assert all(term in lexical.terms(learned) for term in new_terms), query
    assert any("daemon" in q.query for q in queries)


def test_plan_queries_deeper_without_learnings_still_exact() -> None:
    parent = Ancestor("heat pumps", "What the sources state about heat pumps.", [])
    queries = extractive.plan_queries("heat pumps", [], [parent], 5)
    assert len(queries) == 5 and len({q.query for q in queries}) == 5


def test_analyze_quotes_are_the_page_s_own_sentences() -> None:
    # given
    text = page_text()
    # when
    findings = extractive.analyze(
        "What the sources state about daemon threads.", "daemon threads program exit", "u", "threading", text
    )
    # then
    assert findings and len(findings) <= extractive.MAX_FINDINGS
    page = PageText(text)
    for finding in findings:
        assert page.contains(finding.quote), finding.quote
        assert re.sub(r"\s+", " ", finding.quote) in re.sub(r"\s+", " ", text)
        assert normalise(finding.fact) == normalise(finding.quote)
    assert findings[0].quote == "The entire Python program exits when only daemon threads are left."
    # A sentence wrapped over several lines (<br>) is quoted whole.
    joined = "It arranges for the object's run() method to be invoked in a separate thread of control."
    findings = extractive.analyze("", "run method separate thread", "u", "t", text)
    assert joined in [f.quote for f in findings]


def test_analyze_finds_nothing_when_nothing_matches() -> None:
    findings = extractive.analyze(
        "What the sources state about heat pumps.", "heat pumps cold climates", "u", "t", page_text()
    )
    assert findings == []
    assert extractive.analyze("x", "the of and", "u", "t", page_text()) == []


def test_analyze_caps_findings_and_skips_duplicates() -> None:
    sentence = "Each worker thread takes one task from the shared queue and runs it to completion."
    kinds = "image audio video text log metric trace email invoice report backup index".split()
    others = [f"The {kind} worker thread takes {kind} tasks from the {kind} queue until it is empty." for kind in kinds]
    text = "\n\n".join([sentence, sentence, *others])
    findings = extractive.analyze("", "worker thread queue tasks", "u", "t", text)
    assert len(findings) == extractive.MAX_FINDINGS
    assert len({f.quote for f in findings}) == len(findings)


def sources_for(objectives_queries: list[tuple[str, str]]) -> tuple[list[SourceNote], dict[str, PageText]]:
    pages = {
        "http://docs.test/threading": page_text(),
        "http://docs.test/process": (
            "Process objects represent activity that is run in a separate process.\n\n"
            "The process pool executor runs each call in one of a pool of worker processes.\n\n"
            "Shared memory lets several processes read the same block of data without copying it."
        ),
        "http://docs.test/asyncio": (
            "The asyncio event loop runs coroutines and callbacks in a single thread.\n\n"
            "A coroutine waits for the result of another coroutine with the await keyword."
        ),
    }
    sources = []
    for url, text in pages.items():
        note = SourceNote(number=len(sources) + 1, url=url, title=url.rsplit("/", 1)[-1])
        for objective, query in objectives_queries:
            for finding in extractive.analyze(objective, query, url, note.title, text):
                if (finding.fact, finding.quote) not in note.findings:
                    note.findings.append((finding.fact, finding.quote))
        sources.append(note)
    return sources, {url: PageText(text) for url, text in pages.items()}


def report_of(
    prompt: str, answers: list[tuple[str, str]], objectives: list[str], sources: list[SourceNote]
) -> dict[str, Any]:
    """The report as the pipeline makes it (workers/pipeline/report.py): the outline, then each section written
    from its sources, assembled under the outline's title and summary."""
    outline = extractive.outline(prompt, answers, objectives, sources)
    headings = [item["heading"] for item in outline["sections"]]
    sections = []
    for item in outline["sections"]:
        given = [source for source in sources if source.number in item["sources"]]
        content = extractive.write_section(
            prompt, item["heading"], item["learnings"], given, answers=answers, outline_headings=headings
        )
        jsonschema.validate(content, report_writer.SECTION_SCHEMA)
        sections.append({"heading": item["heading"], **content})
    return {"title": outline["title"], "summary": outline["summary"], "sections": sections}


def test_write_report_is_valid_and_keeps_every_citation() -> None:
    # given the queries the engine plans and the findings it extracts from three pages
    planned = extractive.plan_queries(PROMPT, [], [], 3)
    sources, texts = sources_for([(q.objective, q.query) for q in planned])
    assert all(source.findings for source in sources)
    # when
    report = report_of(PROMPT, [("Which?", "Standard library only")], [q.objective for q in planned], sources)
    # then the report has the writer's schema, a section per objective, and loses nothing when rendered
    jsonschema.validate(report, report_writer.SCHEMA)
    assert report["title"] == "How should a Python program run work concurrently?"
    headings = [section["heading"] for section in report["sections"]]
    assert headings[:3] == ["Threads", "Processes", "Asyncio"]
    markdown, stats = render_report(report, sources, texts)
    assert stats["sentences_dropped"] == 0 and stats["citations_dropped"] == 0 and stats["quotes_dropped"] == 0
    assert stats["citations"] >= stats["sentences"] > 0
    assert set(cited_urls(markdown)) == {source.url for source in sources}
    # every sentence of the report is an extracted fact, so traceable to its page
    facts = {" ".join(fact.split()) for source in sources for fact, _ in source.findings}
    for section in report["sections"]:
        for paragraph in section["paragraphs"]:
            for sentence in paragraph:
                assert sentence["text"] in facts
                assert len(sentence["quotes"]) == len(sentence["sources"]) >= 1
    assert "daemon threads" in markdown.split("## Processes")[0]


def test_write_cites_every_source_of_a_shared_sentence() -> None:
    shared = "The event loop runs in the main thread unless told otherwise."
    sources = [
        SourceNote(1, "http://a.test/", "A", [(shared, shared)]),
        SourceNote(2, "http://b.test/", "B", [(shared, shared)]),
    ]
    report = report_of("event loop threads", [], ["What the sources state about event loop."], sources)
    sentence = report["sections"][0]["paragraphs"][0][0]
    assert sentence["sources"] == [1, 2] and [q["source"] for q in sentence["quotes"]] == [1, 2]
    markdown, stats = render_report(report, sources, {s.url: PageText(shared) for s in sources})
    assert stats["citations"] == 2 * stats["sentences"]


def test_write_puts_unmatched_findings_last_and_handles_no_sources() -> None:
    banana = "Bananas are rich in potassium."
    sources = [SourceNote(1, "http://a.test/", "A", [(banana, banana)])]
    report = report_of("threads", [], ["What the sources state about threads."], sources)
    assert [s["heading"] for s in report["sections"]] == [extractive.LEFTOVER_HEADING]
    empty = report_of("threads", [], ["What the sources state about threads."], [])
    jsonschema.validate(empty, report_writer.SCHEMA)
    assert empty["sections"] == [] and empty["summary"] == []


def test_sentences_are_spans_of_the_text() -> None:
    text = page_text() + "\n\n- A list item sentence stays apart from the next one.\n- Next item here, e.g. this one."
    for sentence in lexical.sentences(text):
        assert normalise(sentence) in normalise(text)
    assert "e.g. this one." in lexical.sentences(text)[-1]


# --- The newest truth: current sources over drafts, archived and superseded ones -----------------------------


def _texts(report: dict[str, Any]) -> list[tuple[str, list[int]]]:
    return [
        (sentence["text"], sentence["sources"])
        for section in report["sections"]
        for paragraph in section["paragraphs"]
        for sentence in paragraph
    ]


def test_an_archived_figure_gives_way_to_the_current_one_on_the_same_aspect() -> None:
    current = "Gross margin was 44 % of revenue in 2025 as compressor prices rose."
    old = "Gross margin was 52 % of revenue in 2024, supported by a favourable product mix."
    draft = "Gross margin is estimated at 47 % of revenue before inventory write-downs."
    sources = [
        SourceNote(1, "http://a.test/2024", "Report 2024", [(old, old)], dated=date(2024, 12, 31), standing="archived"),
        SourceNote(2, "http://a.test/draft", "Draft 2025", [(draft, draft)], standing="superseded"),
        SourceNote(3, "http://a.test/2025", "Report 2025", [(current, current)], dated=date(2025, 12, 31)),
    ]
    report = report_of("gross margin", [], ["What the sources state about gross margin."], sources)
    # the current figure answers the aspect, in the summary too; the older ones are listed apart, each named
    # superseded with the document it comes from
    assert [section["heading"] for section in report["sections"]] == ["Gross margin", "Superseded figures"]
    assert _texts(report) == [
        (current, [3]),
        (f"{old} (from an archived document of 31 Dec 2024; superseded)", [1]),
        (f"{draft} (from a superseded document)", [2]),
    ]
    assert [s["text"] for s in report["summary"]] == [current]


def test_an_old_figure_no_current_source_gives_is_kept_and_said_to_be_old() -> None:
    old = "The list price of the Aurora HX 400 was EUR 79,500 throughout the year."
    sources = [
        SourceNote(1, "http://a.test/p", "Price list 2024", [(old, old)], dated=date(2024, 12, 31), standing="archived")
    ]
    report = report_of("list price", [], ["What the sources state about list price."], sources)
    assert _texts(report) == [(f"{old} (from an archived document of 31 Dec 2024)", [1])]
    markdown, _ = render_report(report, sources, {s.url: PageText(old) for s in sources})
    assert "(from an archived document of 31 Dec 2024)" in markdown


def test_outdated_sentences_without_figures_stay_and_current_ones_are_never_dropped() -> None:
    words_only = "The plant moved production to Rovaniemi after the lease in the old town ended."
    current = "The Rovaniemi plant can assemble 1,400 units a year in two shifts."
    sources = [
        SourceNote(1, "http://a.test/old", "Old", [(words_only, words_only)], standing="archived"),
        SourceNote(2, "http://a.test/new", "New", [(current, current)]),
    ]
    report = report_of("plant", [], ["What the sources state about Rovaniemi plant."], sources)
    assert sorted(_texts(report)) == sorted([(words_only, [1]), (current, [2])])


def test_a_current_and_an_archived_page_do_not_contradict_each_other() -> None:
    new = "Measure: Logo churn (sites that cancelled during the year); 2025: 6.4 %."
    old = "Measure: Logo churn (sites that cancelled during the year); 2024: 9.1 %."
    known = KnownMemory([], [])
    both_current = [
        MemorySource(1, "http://a.test/1", "A", [(new, new)]),
        MemorySource(2, "http://a.test/2", "B", [(old, old)]),
    ]
    assert extractive.update_memory("churn", "o", both_current, known).contradictions
    one_archived = [both_current[0], MemorySource(2, "http://a.test/2", "B", [(old, old)], standing="archived")]
    assert extractive.update_memory("churn", "o", one_archived, known).contradictions == []


def test_an_answer_says_when_its_figure_comes_from_an_archived_document() -> None:
    old = "The term loan from Kaleva Bank stood at EUR 10.5 million."
    sources = [
        SourceNote(1, "http://a.test/2024", "Report 2024", [(old, old)], dated=date(2024, 12, 31), standing="archived")
    ]
    found = extractive.answer("term loan Kaleva Bank", "due diligence", sources)
    assert found.paragraphs[0][0]["text"] == f"{old} (from an archived document of 31 Dec 2024)"


def test_among_current_sources_the_newest_figure_wins() -> None:
    old = "The Rovaniemi plant can assemble 900 units a year in one shift."
    new = "The Rovaniemi plant can assemble 1,400 units a year in two shifts."
    unrelated = "The head office in Helsinki has 58 employees."
    sources = [
        SourceNote(1, "http://a.test/press", "Press release 2024", [(old, old)], dated=date(2024, 9, 30)),
        SourceNote(2, "http://a.test/plant", "Plant", [(new, new), (unrelated, unrelated)], dated=date(2026, 1, 31)),
    ]
    report = report_of("plant capacity", [], ["What the sources state about Rovaniemi plant capacity."], sources)
    texts = [text for text, _ in _texts(report)]
    assert new in texts and old not in texts and unrelated in texts
    # the same dates half a year apart at most: both stay (two documents of one period)
    sources[0].dated = date(2025, 12, 31)
    report = report_of("plant capacity", [], ["What the sources state about Rovaniemi plant capacity."], sources)
    assert old in [text for text, _ in _texts(report)]
