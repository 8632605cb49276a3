"""Races around the slow steps on the real stack: a research cancelled while the model plans or writes, the report
task delivered again while it runs, and a report that fails on every try."""

import time

import pytest

from devtools.processes import wait_until
from research.control import dispatch
from research.models import Document, Event, ReportSection, Research, ResearchStatus, SerpQuery
from research.record.planning import total_queries
from tests.support.e2e import start_research, wait_finished

pytestmark = pytest.mark.django_db(transaction=True)


def status(research_id: str) -> str:
    return Research.objects.values_list("status", flat=True).get(pk=research_id)


def types_after(research_id: str, event_type: str) -> list[str]:
    seq = Event.objects.get(research_id=research_id, type=event_type).seq
    return list(Event.objects.filter(research_id=research_id, seq__gt=seq).values_list("type", flat=True))


def test_cancel_while_planning_adds_no_queries(api, workers, research_model, fake_llm) -> None:
    # given a model that takes 2 s to plan, and a research whose first planning call is under way
    fake_llm.delays["serp_queries"] = 2.0
    research_id = start_research(api, 2, 2)
    wait_until(lambda: fake_llm.count("serp_queries") >= 1)
    # when it is cancelled before the model answers
    assert api.post(f"/api/research/{research_id}/cancel").status_code == 200
    time.sleep(3)
    # then the answer is dropped: no query is added after the cancel, and none is left unfinished
    assert status(research_id) == ResearchStatus.CANCELLED
    assert "new_serp_query" not in types_after(research_id, "research_cancelled")
    assert not SerpQuery.objects.filter(research_id=research_id, status__in=["pending", "searching"]).exists()


def test_cancel_while_the_report_is_written_stores_no_report(api, workers, research_model, fake_llm) -> None:
    # given a research whose report sections the model takes 2 s to write
    fake_llm.delays["report_section"] = 2.0
    research_id = start_research(api, 1, 1)
    # when it is cancelled while a section is being written (a cancel during the outline call would plan no
    # section at all, and prove less)
    wait_until(lambda: fake_llm.count("report_section") >= 1)
    assert status(research_id) == ResearchStatus.REPORTING
    assert api.post(f"/api/research/{research_id}/cancel").status_code == 200
    time.sleep(3)
    # then no report is stored and the research stays cancelled
    assert status(research_id) == ResearchStatus.CANCELLED
    assert not Document.objects.filter(research_id=research_id, kind="report").exists()
    assert "report_writing_successful" not in types_after(research_id, "research_cancelled")


def test_report_task_delivered_again_while_it_runs_writes_once(api, workers, research_model, fake_llm) -> None:
    # given a report whose outline takes 2 s to plan, and is being planned
    fake_llm.delays["report_outline"] = 2.0
    research_id = start_research(api, 1, 1)
    wait_until(lambda: status(research_id) == ResearchStatus.REPORTING)
    # when the report task is delivered three more times meanwhile
    for _ in range(3):
        dispatch.REPORT.now(research_id)
    research = wait_finished(research_id)
    time.sleep(1)  # let the late deliveries run out
    # then one outline, one model call per section, one start, one report
    assert research.status == ResearchStatus.COMPLETED, research.error
    assert fake_llm.count("report_outline") == 1
    assert fake_llm.count("report_section") == ReportSection.objects.filter(research=research).count()
    types = list(research.events.values_list("type", flat=True))
    assert types.count("report_writing_start") == 1 and types.count("report_writing_successful") == 1
    assert Document.objects.filter(research=research, kind="report").count() == 1


def test_report_that_fails_on_every_try_fails_the_research(api, workers, research_model, fake_llm) -> None:
    # given a model that answers every report request with a server error (held 1 s, so the switch is in place
    # before the first of them is answered)
    fake_llm.delays["report_outline"] = 1.0
    research_id = start_research(api, 1, 1)
    wait_until(lambda: status(research_id) == ResearchStatus.REPORTING)
    fake_llm.fail_always(500)
    # when the client's retries and then the task's retry run out
    research = wait_finished(research_id, timeout=90)
    # then the research failed with an error output, after the task's retry took the report up again
    assert research.status == ResearchStatus.FAILED
    output = Document.objects.get(research=research, kind="error_output")
    assert output.stats["reason"] == "report_failed"
    assert not Document.objects.filter(research=research, kind="report").exists()
    llm_tries = 1 + 3  # LLM_MAX_RETRIES in the test workers
    assert fake_llm.count("report_outline") >= 2 * llm_tries  # the task ran twice (TASK_MAX_RETRIES = 1)
    types = list(research.events.values_list("type", flat=True))
    assert types.count("report_writing_start") == 1 and types[-1] == "research_failed"
    assert SerpQuery.objects.filter(research=research, status="done").count() == total_queries(1, 1)
