"""The report written as an outline, then sections in parallel: each section stored and pushed as it lands,
exactly once, checked like the whole report, and assembled into the report."""

import threading

import pytest

from devtools.fakes.behaviours import FABRICATED_QUOTE, FABRICATED_URL
from devtools.fakes.llm import message_text
from devtools.processes import wait_until
from research.live.snapshot import build_snapshot
from research.models import Document, Event, ReportSection, Research, ResearchStatus
from tests.support.e2e import start_research, wait_finished
from tests.support.factories import running_research
from workers.pipeline.report import section_failed

pytestmark = pytest.mark.django_db(transaction=True)


def held_sections(research_model, fake_llm, released: threading.Event) -> None:
    """The second section waits for `released` (one only, so the others still find a free worker): the test sees
    the report part-written."""
    write = research_model.section

    def section(body, schema):
        text = "\n".join(message_text(m) for m in body.get("messages", []))
        if "Section to write: Findings 2\n" in text:
            released.wait(timeout=60)
        return write(body, schema)

    fake_llm.handlers["report_section"] = section


def test_sections_land_and_are_pushed_before_the_report(api, workers, research_model, fake_llm) -> None:
    # given a model whose later sections are slow to come
    released = threading.Event()
    held_sections(research_model, fake_llm, released)
    # when a 2x2 research reaches its report
    research_id = start_research(api, 2, 2)
    try:
        wait_until(
            lambda: any(s["status"] == "written" for s in build_snapshot(research_id)["report_sections"]),
            timeout=120,
            message="a section written",
        )
        # then the snapshot pushed meanwhile already holds the written section, and skeletons for the rest
        snapshot = build_snapshot(research_id)
        assert snapshot["research"]["status"] == ResearchStatus.REPORTING
        assert snapshot["report"] is None
        sections = snapshot["report_sections"]
        assert [s["position"] for s in sections] == list(range(1, len(sections) + 1))
        written = [s for s in sections if s["status"] == "written"]
        assert written and "Findings 2" not in [s["title"] for s in written]
        assert all(s["markdown"].startswith(f"## {s['title']}") and "[[" in s["markdown"] for s in written)
        assert all(s["markdown"] == "" for s in sections if s["status"] != "written")
    finally:
        released.set()
    research = wait_finished(research_id)
    assert research.status == ResearchStatus.COMPLETED, research.error
    # every section was written once and pushed before the report
    types = list(Event.objects.filter(research_id=research_id).order_by("seq").values_list("type", "data"))
    names = [name for name, _ in types]
    section_events = [data for name, data in types if name == "report_section_written"]
    assert len(section_events) == len(sections) >= 2
    assert sorted(e["position"] for e in section_events) == [s["position"] for s in sections]
    last_section = max(i for i, name in enumerate(names) if name == "report_section_written")
    assert names.index("report_writing_successful") > last_section
    assert names.count("report_writing_successful") == names.count("report_writing_start") == 1
    # and the report holds every section, in outline order
    report = Document.objects.get(research_id=research_id, kind="report").markdown
    places = [report.index(f"## {s['title']}") for s in sections]
    assert places == sorted(places)
    assert fake_llm.count("report_outline") == 1


def test_a_section_citing_a_fabrication_keeps_none_of_it(api, workers, research_model) -> None:
    # given a model that invents a link, a source number and a quote in every section
    research_model.fabricate = True
    # when
    research = wait_finished(start_research(api, 2, 1))
    # then each section as shown while written, and the report, keep none of it
    assert research.status == ResearchStatus.COMPLETED, research.error
    sections = list(ReportSection.objects.filter(research=research))
    assert sections and all(s.status == "written" for s in sections)
    report = Document.objects.get(research=research, kind="report").markdown
    for markdown in [report, *(s.markdown for s in sections)]:
        assert "fabricated.example" not in markdown
        assert FABRICATED_URL not in markdown and FABRICATED_QUOTE not in markdown
        assert "[[999]]" not in markdown


def test_the_extractive_engine_writes_its_sections_the_same_way(api, workers, research_model, settings) -> None:
    # given an offline research
    research_id = start_research(api, 2, 1)
    Research.objects.filter(pk=research_id).update(engine="extractive")
    # when it runs to its report
    research = wait_finished(research_id)
    # then its report was written section by section, every section once
    assert research.status == ResearchStatus.COMPLETED, research.error
    sections = list(ReportSection.objects.filter(research=research).order_by("position"))
    assert sections and all(s.status == "written" and s.markdown for s in sections)
    events = Event.objects.filter(research=research, type="report_section_written")
    assert sorted(e.data["position"] for e in events) == [s.position for s in sections]
    report = Document.objects.get(research=research, kind="report").markdown
    assert "Offline research" in report
    for section in sections:
        assert f"## {section.title}" in report


def test_a_section_that_fails_for_good_fails_the_report_and_the_error_output_lists_the_sections(user) -> None:
    # given a research writing its report: one section written, one still being written
    research = running_research(user, 2, 1)
    Research.objects.filter(pk=research.pk).update(status=ResearchStatus.REPORTING, pending_queries=0)
    ReportSection.objects.create(
        research=research, version=1, position=1, title="Costs", status="written", markdown="## Costs\n\nText."
    )
    failing = ReportSection.objects.create(research=research, version=1, position=2, title="Risks", status="writing")
    # when the second one fails after its retries
    section_failed(failing.pk, RuntimeError("the model kept failing"))
    # then the research failed, the section with it, and the error output says which sections were written
    research.refresh_from_db()
    assert research.status == ResearchStatus.FAILED
    assert ReportSection.objects.get(pk=failing.pk).status == "failed"
    error_output = Document.objects.get(research=research, kind="error_output").markdown
    assert "## Report sections" in error_output
    assert "- [written] 1. Costs" in error_output and "- [failed] 2. Risks" in error_output
    assert "1 of 2 sections were written." in error_output
    assert "section “Risks”: the model kept failing" in error_output
    assert not Document.objects.filter(research=research, kind="report").exists()


def test_a_report_whose_sources_do_not_answer_the_request_says_so_first(api, workers, research_model) -> None:
    # given a model whose outline judges that the findings are about something else than the request
    research_model.sources_answer = "no"
    # when
    research = wait_finished(start_research(api, 2, 1))
    # then the research completes, its report opens with the verdict, and the stats carry it for the page
    assert research.status == ResearchStatus.COMPLETED, research.error
    document = Document.objects.get(research=research, kind="report")
    title, note = document.markdown.split("\n\n")[:2]
    assert title.startswith("# ") and note.startswith("> **The sources found do not cover this request.**")
    assert "the report writer judged that they do not answer it" in note
    assert document.stats["relevance"]["verdict"] == "off_topic"
    assert document.stats["relevance"]["judged_by"] == "model"
    assert build_snapshot(research.pk)["report"]["stats"]["relevance"]["verdict"] == "off_topic"


def test_a_model_that_gives_no_verdict_is_judged_by_the_words(api, workers, research_model) -> None:
    # given a model that leaves the verdict out, and searches for other things than the request asks
    # ("topic 1.1", whose pages never name heat pumps)
    research_model.sources_answer = None
    off = wait_finished(start_research(api, 2, 1))
    # and the same model searching for what the request asks
    research_model.top_names = ["heat pumps in cold climates", "cold climate heat pump performance"]
    on = wait_finished(start_research(api, 2, 1))
    # then the words decide: the first report says its sources do not cover the request, the second does not
    reports = {}
    for research in (off, on):
        assert research.status == ResearchStatus.COMPLETED, research.error
        reports[research.pk] = Document.objects.get(research=research, kind="report")
    off_stats, on_stats = reports[off.pk].stats["relevance"], reports[on.pk].stats["relevance"]
    assert off_stats["judged_by"] == on_stats["judged_by"] == "words"
    assert off_stats["terms"] == on_stats["terms"] == ["heat", "pump", "perform", "cold", "climate"]
    assert (off_stats["verdict"], off_stats["terms_found"]) == ("off_topic", [])
    assert "their findings name none of what it asks about" in reports[off.pk].markdown.split("\n\n")[1]
    assert on_stats["verdict"] == "on_topic" and {"heat", "pump", "cold", "climate"} <= set(on_stats["terms_found"])
    assert "do not cover this request" not in reports[on.pk].markdown


def test_sections_share_one_read_of_the_sources_whatever_the_characters_per_token(user) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from tests.support.factories import build_tree
    from workers.pipeline import report

    # given a research of 27 pages with extracts, and the key its sections share
    research = build_tree(user, 3, 2, websites_per_query=3)
    key = (research.pk, 1, "run")
    # when sections ask for its sources with the characters per token the model's answers keep moving
    with CaptureQueriesContext(connection) as queries:
        first, _ = report.collect_sources(research.pk, 10**9, 3.5, cache_key=key)
        second, _ = report.collect_sources(research.pk, 10**9, 3.61, cache_key=key)
    # then they were read once and are the same list
    assert len(queries) == 1
    assert second is first and len(first) == 27
    # and a smaller allowance gets a trimmed copy, leaving the shared sources whole
    trimmed, _ = report.collect_sources(research.pk, 50, 3.5, cache_key=key)
    assert 1 <= len(trimmed) < 27 and len(first) == 27
    assert [source.number for source in trimmed] == [source.number for source in first][: len(trimmed)]


def test_sections_read_the_answers_and_headings_once_per_report(user) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from research.models import FollowUpQuestion
    from workers.pipeline import report

    # given a research with a follow-up answer and an outline of two sections
    research = running_research(user, breadth=2, depth=1)
    FollowUpQuestion.objects.create(research=research, position=0, question="Where?", answer="Alps")
    for position, title in enumerate(["Costs", "Winters"], start=1):
        ReportSection.objects.create(research=research, version=1, position=position, title=title, plan={})
    key = (research.pk, 1, "context")
    # when every section asks for them
    with CaptureQueriesContext(connection) as queries:
        contexts = [report._section_context(research.pk, 1, key) for _ in range(5)]
    # then they were read once (two queries) and are the same for each
    assert len(queries) == 2
    assert all(context == ([("Where?", "Alps")], ["Costs", "Winters"]) for context in contexts)


def test_sections_started_together_read_the_sources_once(user) -> None:
    from concurrent.futures import ThreadPoolExecutor

    from django.db import connection

    from tests.support.factories import build_tree
    from workers.pipeline import report

    # given a research's sources not read yet by this process
    research = build_tree(user, 2, 2, websites_per_query=2)
    key = (research.pk, 1, "together")
    reads = []
    read = report._read_sources

    def counted(research_id):
        reads.append(research_id)
        return read(research_id)

    # when eight sections ask for them at the same moment
    def section(_: int):
        try:
            return report.collect_sources(research.pk, 10**9, 3.5, cache_key=key)[0]
        finally:
            connection.close()

    report._read_sources = counted
    try:
        with ThreadPoolExecutor(8) as pool:
            results = list(pool.map(section, range(8)))
    finally:
        report._read_sources = read
    # then one of them read them and every one got that read
    assert len(reads) == 1
    assert all(result is results[0] for result in results)


def test_the_outline_gives_each_section_its_share_of_the_words() -> None:
    from workers.pipeline.report import _with_words

    plans = [{"findings": [1, 2, 3]}, {"findings": [4]}, {"findings": []}]
    assert [plan["words"] for plan in _with_words(plans, 2000)] == [1500, 500, 80]
    assert [plan["words"] for plan in _with_words([{"findings": []}, {"findings": []}], 1000)] == [500, 500]
    assert _with_words([{"findings": [1]}], None) == [{"findings": [1]}]


def test_a_section_planned_without_its_share_works_it_out_from_the_others(user) -> None:
    from workers.pipeline.report import _section_words

    # given a research of 2,000 words whose sections were planned before the outline set their shares
    research = running_research(user, breadth=1, depth=1)
    Research.objects.filter(pk=research.pk).update(report_words=2000)
    research.refresh_from_db()
    plans = [{"findings": [1, 2, 3]}, {"findings": [4]}, {"findings": [], "words": 300}]
    sections = [
        ReportSection.objects.create(research=research, version=1, position=i, title=f"S{i}", plan=plan)
        for i, plan in enumerate(plans, start=1)
    ]
    headings = [section.title for section in sections]
    # then a section without a share gets its share of the findings, and one with a share keeps it
    assert [_section_words(research, section, headings) for section in sections] == [1500, 500, 300]
