"""Reservations of the rows of messages a worker took from the queue: none for a message started at once, one
statement per kind of row for those that wait, and a row handed back when its task ended while it was reserved."""

from collections.abc import Iterator

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from research.control.dispatch import QUEUED
from research.models import Research, SerpQuery, Website
from tests.support.factories import running_research
from workers.pipeline import heartbeat as heartbeat_module
from workers.pipeline.heartbeat import RESERVE_AFTER, Heartbeat, Reservations

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def running(user) -> Research:
    return running_research(user, breadth=2, depth=2)


@pytest.fixture
def beats() -> Iterator[Heartbeat]:
    """A heartbeat of the test's own. What it still holds at the end is released: its thread would otherwise
    renew those rows every quarter of a lease for the rest of the run, and log a failure, with its traceback, each
    time it is refused the database (by a test without one), on whichever test is running then."""
    heartbeat = Heartbeat()
    yield heartbeat
    while held := heartbeat.held():
        for model, pk, token in held:
            heartbeat.release(model, pk, token)


@pytest.fixture
def websites(running) -> list[Website]:
    query = SerpQuery.objects.create(research=running, depth=1, position=0, query="q", objective="o", claimed_by=QUEUED)
    return [
        Website.objects.create(
            research=running, query=query, position=i, url=f"https://x{i}.example/", claimed_by=QUEUED
        )
        for i in range(3)
    ]


def claimed_by(row) -> str:
    row.refresh_from_db()
    return row.claimed_by


def test_a_message_started_at_once_reserves_nothing(websites, beats) -> None:
    # given a message received and started within RESERVE_AFTER
    reservations = Reservations(beats, background=False)
    reservations.received("task-a", Website, websites[0].pk, now=100.0)
    reservations.started("task-a")
    # when the reservations come due
    with CaptureQueriesContext(connection) as queries:
        assert reservations.reserve_due(now=100.0 + 2 * RESERVE_AFTER) == 0
    # then no statement was sent and the row still waits for the step's own claim
    assert len(queries) == 0
    assert claimed_by(websites[0]) == QUEUED
    assert reservations.ended("task-a") is None


def test_messages_that_wait_are_reserved_in_one_statement_per_kind_of_row(websites, beats) -> None:
    # given three website messages and a query message received, one website row already claimed elsewhere
    reservations = Reservations(beats, background=False)
    Website.objects.filter(pk=websites[2].pk).update(claimed_by="other-task host:1:thread")
    query = websites[0].query
    for i, website in enumerate(websites):
        reservations.received(f"task-{i}", Website, website.pk, now=100.0)
    reservations.received("task-q", SerpQuery, query.pk, now=100.0)
    # when they are not started before RESERVE_AFTER
    assert reservations.reserve_due(now=100.0 + RESERVE_AFTER / 2) == 0  # not due yet
    with CaptureQueriesContext(connection) as queries:
        assert reservations.reserve_due(now=100.0 + RESERVE_AFTER) == 3
    # then one UPDATE per table reserved each waiting row for its own task, and left the claimed one alone
    assert sorted(q["sql"].split()[1] for q in queries.captured_queries) == ["research_serpquery", "research_website"]
    assert claimed_by(websites[0]).startswith("task-0 reserved by ")
    assert claimed_by(websites[1]).startswith("task-1 reserved by ")
    assert claimed_by(websites[2]) == "other-task host:1:thread"
    assert claimed_by(query).startswith("task-q reserved by ")
    # and the heartbeat renews the reserved rows until their tasks end, which hand them over
    assert sorted(pk for model, pk, _ in beats.held() if model is Website) == sorted([websites[0].pk, websites[1].pk])
    assert reservations.ended("task-0") == (Website, websites[0].pk, claimed_by(websites[0]))
    assert reservations.ended("task-2") is None  # its row was not reserved
    assert reservations.reserve_due(now=200.0) == 0  # nothing is due twice


def test_a_task_that_ends_while_its_row_is_reserved_hands_it_back(websites, beats, monkeypatch) -> None:
    # given a message due whose task ends while the statement reserving its row runs
    reservations = Reservations(beats, background=False)
    reservations.received("task-a", Website, websites[0].pk, now=100.0)
    real = heartbeat_module.reserve_rows

    def reserve_while_the_task_ends(model, rows):
        reserved = real(model, rows)
        assert reservations.ended("task-a") is None  # the task ends before the reservation is recorded
        return reserved

    monkeypatch.setattr(heartbeat_module, "reserve_rows", reserve_while_the_task_ends)
    # when the reservation is made
    assert reservations.reserve_due(now=101.0) == 1
    # then the row waits in the queue again and nothing holds it
    assert claimed_by(websites[0]) == QUEUED
    assert reservations.ended("task-a") is None
