"""Admission of model requests to a research's budgets: a step's first request is admitted on the state the step
read at its start (no second read), later ones read it again, a reporting research's are admitted without a read,
and `running_research` reads the research and its spending in one statement."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from research.models import Research, ResearchStatus
from research.record.usage import budget_state, state_of
from tests.support.factories import running_research, spend
from workers.clients.llm import _Requests, charged_to
from workers.errors import ResearchStopped
from workers.pipeline import lifecycle

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def research(user) -> Research:
    research = running_research(user, breadth=2, depth=1)
    Research.objects.filter(pk=research.pk).update(budget_tokens=1000)
    spend(research, 100, 20)
    return research


def test_running_research_reads_the_research_and_its_spending_in_one_statement(research) -> None:
    with CaptureQueriesContext(connection) as queries:
        read = lifecycle.running_research(research.pk)
    assert read is not None and len(queries) == 1
    # the state read off it is what the budgets' own read gives
    assert state_of(read) == budget_state(research.pk)
    assert (state_of(read).prompt_tokens, state_of(read).completion_tokens) == (100, 20)


def test_the_first_request_is_admitted_on_the_known_state_and_the_next_reads_it(research) -> None:
    known = budget_state(research.pk)
    requests = _Requests("website_analyzer", "m")
    with charged_to(research.pk, known=known):
        with CaptureQueriesContext(connection) as first:
            requests.admit()
        with CaptureQueriesContext(connection) as second:
            requests.admit()
    assert len(first) == 0
    assert len(second) == 1 and "stop_reason" in second[0]["sql"]


def test_a_known_state_past_the_budget_stops_the_research_before_its_request(research, published) -> None:
    # given a state read when the research had spent its steps' share of the budget
    spend(research, 900)
    known = budget_state(research.pk)
    # when the step's first request is admitted on it
    with charged_to(research.pk, known=known), pytest.raises(ResearchStopped):
        _Requests("website_analyzer", "m").admit()
    # then the research was stopped on its budget
    research.refresh_from_db()
    assert research.stop_reason == "budget_tokens"
    # and its report was queued (recorded here: a worker of the session's pool writing it would race the teardown)
    assert published == ["workers.tasks.write_report_task"]


def test_a_reporting_research_admits_its_requests_without_reading_it(research) -> None:
    Research.objects.filter(pk=research.pk).update(status=ResearchStatus.REPORTING)
    with charged_to(research.pk, reporting=True), CaptureQueriesContext(connection) as queries:
        _Requests("report_writer", "m").admit()
        _Requests("report_writer", "m").admit()
    assert len(queries) == 0


def test_running_research_reads_every_column_as_the_orm_does(research) -> None:
    # given a research with values of every kind a column holds: JSON, a decimal, dates, a UUID key
    Research.objects.filter(pk=research.pk).update(
        budget_usd="1.2500", report_outline={"sections": [{"title": "Ä", "findings": [1, 2]}]}, mode="adaptive"
    )
    # when a step reads it to start
    read = lifecycle.running_research(research.pk)
    # then its instance holds what the ORM's own read gives, field by field, with the spending summed
    expected = Research.objects.get(pk=research.pk)
    assert read is not None and not read._state.adding
    for field in Research._meta.concrete_fields:
        assert getattr(read, field.attname) == getattr(expected, field.attname), field.name
    assert (read.prompt_tokens, read.completion_tokens) == (100, 20)
