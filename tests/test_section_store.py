"""A report section is stored without taking its research row: sections land side by side, an ending waits for the
ones in flight (and its event comes after theirs), and the last section to land queues the assembly."""

import threading
from types import SimpleNamespace

import pytest
from django.db import OperationalError, connection

from research.control.dispatch import QUEUED
from research.models import Event, ReportSection, Research, ResearchStatus, SectionStatus
from research.record.numbering import number
from tests.support.factories import build_tree
from tests.support.threads import cancel_in_background
from workers.pipeline import report

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def reporting(user, monkeypatch) -> Research:
    """A research writing its report: three sections planned, the research row waiting for the assembly, and a
    model that writes an empty section at once."""
    research = build_tree(user, 2, 1, websites_per_query=2)
    Research.objects.filter(pk=research.pk).update(
        status=ResearchStatus.REPORTING, finished_at=None, claimed_by=QUEUED, last_event_seq=0
    )
    Event.objects.filter(research=research).delete()
    for position in (1, 2, 3):
        ReportSection.objects.create(
            research=research, version=1, position=position, title=f"Part {position}", plan={}, claimed_by=QUEUED
        )
    writer = SimpleNamespace(write_section=lambda *args, **kwargs: {"paragraphs": [], "subsections": []})
    monkeypatch.setattr(report, "engine_for", lambda name: writer)
    return research


def section_ids(research: Research) -> list[int]:
    return list(ReportSection.objects.filter(research=research).order_by("position").values_list("pk", flat=True))


class HeldStore(threading.Thread):
    """`write_section` of one section, held inside its store's transaction (after its event) until `finish`."""

    def __init__(self, section_id: int, monkeypatch) -> None:
        super().__init__(daemon=True)
        self.section_id = section_id
        self.inside, self.release = threading.Event(), threading.Event()
        real = report.insert_events

        def held_insert(research_id, recorded):
            real(research_id, recorded)
            if threading.current_thread() is self:
                self.inside.set()
                self.release.wait(30)

        monkeypatch.setattr(report, "insert_events", held_insert)

    def run(self) -> None:
        try:
            report.write_section(self.section_id)
        finally:
            connection.close()

    def finish(self) -> None:
        self.release.set()
        self.join(10)


def test_sections_of_one_report_are_stored_side_by_side(reporting, published, monkeypatch) -> None:
    first, second, _ = section_ids(reporting)
    # given one section's store in flight, not yet committed
    held = HeldStore(first, monkeypatch)
    held.start()
    assert held.inside.wait(10)
    try:
        # when another section is stored meanwhile, under a lock timeout (waiting on the research row would fail)
        with connection.cursor() as cursor:
            cursor.execute("SET lock_timeout = '2s'")
        report.write_section(second)
    except OperationalError as error:  # the failure this test is for
        pytest.fail(f"a section's store waited on another's: {error}")
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SET lock_timeout = 0")
        held.finish()
    # then both landed, their events numbered in the order they were inserted, and no assembly is due yet
    statuses = dict(ReportSection.objects.filter(research=reporting).values_list("pk", "status"))
    assert statuses[first] == statuses[second] == SectionStatus.WRITTEN
    number(reporting.pk)
    events = list(Event.objects.filter(research=reporting).order_by("seq").values_list("seq", "type"))
    assert events == [(1, "report_section_written"), (2, "report_section_written")]
    assert "workers.tasks.assemble_report_task" not in published


def test_a_cancel_waits_for_a_section_in_flight_and_its_event_comes_last(reporting, published, monkeypatch) -> None:
    # given a section's store in flight
    held = HeldStore(section_ids(reporting)[0], monkeypatch)
    held.start()
    assert held.inside.wait(10)
    # when the research is cancelled meanwhile
    canceller, cancelled = cancel_in_background(reporting.pk)
    # then the cancel waits for the section, which lands first, and the cancel's event is numbered after its
    assert cancelled.wait(1.0) is False
    held.finish()
    canceller.join(10)
    assert cancelled.is_set()
    assert Research.objects.get(pk=reporting.pk).status == ResearchStatus.CANCELLED
    events = list(Event.objects.filter(research=reporting).order_by("seq").values_list("seq", "type"))
    assert events == [(1, "report_section_written"), (2, "research_cancelled")]


def test_a_section_of_a_research_that_is_over_is_not_stored(reporting, published) -> None:
    Research.objects.filter(pk=reporting.pk).update(status=ResearchStatus.CANCELLED)
    report.write_section(section_ids(reporting)[0])
    assert not ReportSection.objects.filter(research=reporting, status=SectionStatus.WRITTEN).exists()
    assert not Event.objects.filter(research=reporting).exists()


def test_the_last_section_to_land_queues_the_assembly_until_the_assembly_claims(reporting, published) -> None:
    first, second, third = section_ids(reporting)
    # when all but one section land, nothing is queued; when the last lands, the assembly is
    report.write_section(first)
    report.write_section(second)
    assert published == []
    report.write_section(third)
    assert published == ["workers.tasks.assemble_report_task"]
    # and a section that finds every section written too (they landed together) queues it again while the
    # research row still waits for it (an assembly delivered twice is claimed once) ...
    report._sections_done(str(reporting.pk), 1)
    assert published == ["workers.tasks.assemble_report_task"] * 2
    # ... but not once the assembly has taken the research row
    Research.objects.filter(pk=reporting.pk).update(claimed_by="assembly-task host:1:thread")
    report._sections_done(str(reporting.pk), 1)
    assert published == ["workers.tasks.assemble_report_task"] * 2


def test_an_assembly_delivered_before_the_last_section_leaves_the_row_waiting(reporting, published) -> None:
    first, second, third = section_ids(reporting)
    report.write_section(first)
    report.write_section(second)
    documents = list(reporting.documents.values_list("pk", flat=True))
    # when an assembly is delivered early (a duplicate or a redelivery) while a section is still unwritten
    report.assemble_report(str(reporting.pk), "early-assembly")
    # then it does not take the research row, and stores nothing
    assert Research.objects.get(pk=reporting.pk).claimed_by == QUEUED
    assert list(reporting.documents.values_list("pk", flat=True)) == documents
    # so the last section to land still finds the row waiting and queues the assembly at once (had the early
    # delivery kept the row, the report would have waited a whole lease for the sweeper)
    report.write_section(third)
    assert published == ["workers.tasks.assemble_report_task"]


def test_a_section_reads_its_row_and_research_in_one_statement_without_the_outline(reporting, published) -> None:
    from django.test.utils import CaptureQueriesContext

    # given a research with a token budget, whose outline is large (every section's findings and learnings), as a
    # big research's is
    outline = {
        "sections": [
            {"heading": f"Part {n}", "findings": list(range(40)), "learnings": ["x" * 200]} for n in range(300)
        ]
    }
    Research.objects.filter(pk=reporting.pk).update(report_outline=outline, budget_tokens=10**6)
    # when a section is written
    with CaptureQueriesContext(connection) as queries:
        report.write_section(section_ids(reporting)[0])
    # then it is written without the outline ever being read: each section has its own plan
    assert ReportSection.objects.get(pk=section_ids(reporting)[0]).status == SectionStatus.WRITTEN
    statements = [query["sql"] for query in queries.captured_queries]
    assert not [sql for sql in statements if "report_outline" in sql]
    # and its research's spending came with its row, not from a sum of its own
    assert sum("FROM research_reportsection s JOIN" in sql for sql in statements) == 1
    assert not [sql for sql in statements if "FROM research_llmcall WHERE" in sql]
