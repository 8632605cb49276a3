"""The frequent steps that change no counter of their research only read its row: a review's memory update and a
branch's planning land while another transaction holds the row for an update (a query counted off, an event
numbering), and insert their events unnumbered; an ending, which holds the row exclusively, still comes first or
last, never in between."""

import threading
from types import SimpleNamespace

import pytest
from django.db import OperationalError, connection

from research.models import Event, MemoryItem, MemoryKind, QueryStatus, Research, ResearchStatus, SerpQuery
from research.record.memory import memory_key
from research.record.numbering import number
from tests.support.factories import running_research
from tests.support.threads import RowHolder
from workers.agents.query_generator import PlannedQuery
from workers.errors import ResearchStopped
from workers.pipeline import memory
from workers.pipeline.plan import plan_queries

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def running(user) -> Research:
    return running_research(user, breadth=2, depth=2)


def under_lock_timeout(step, *args) -> None:
    """Run the step as a worker would, but fail at once (2 s) rather than wait on a lock."""
    with connection.cursor() as cursor:
        cursor.execute("SET lock_timeout = '2s'")
    try:
        step(*args)
    except OperationalError as error:  # the failure these tests are for
        pytest.fail(f"the step waited on the research row: {error}")
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SET lock_timeout = 0")


def test_a_memory_update_lands_while_the_research_row_is_held_for_an_update(running) -> None:
    # given the research row held as a query's count-off holds it, until its commit
    holder = RowHolder(running.pk)
    holder.start()
    assert holder.held.wait(10)
    try:
        # when a review stores what a branch found meanwhile
        items = [memory.NewItem(MemoryKind.GAP, "Nobody measured the noise.", [])]
        under_lock_timeout(memory.store, running.pk, None, items, [])
    finally:
        holder.release()
    # then it landed, and its event went in unnumbered, for the push after the commit to number
    assert MemoryItem.objects.filter(research=running, key=memory_key("Nobody measured the noise.")).exists()
    event = Event.objects.get(research=running, type="memory_updated")
    assert event.seq is None or event.seq == 1  # the in-process push may have numbered it already
    assert number(running.pk) == 1


def test_a_memory_update_waits_for_an_ending_in_flight_and_stores_nothing_after_it(running) -> None:
    # given a cancel in flight: the research row held exclusively, its status changed, not yet committed
    holder = RowHolder(running.pk, strength="UPDATE", status=ResearchStatus.CANCELLED)
    holder.start()
    assert holder.held.wait(10)
    outcome: list[BaseException | None] = []

    def store() -> None:
        try:
            memory.store(running.pk, None, [memory.NewItem(MemoryKind.GAP, "Late gap.", [])], [])
            outcome.append(None)
        except BaseException as error:  # noqa: BLE001 - checked below
            outcome.append(error)
        finally:
            connection.close()

    # when a review stores its memory meanwhile
    storing = threading.Thread(target=store, daemon=True)
    storing.start()
    # then it waits for the cancel, finds the research over once it commits, and nothing lands
    storing.join(1.0)
    assert storing.is_alive()
    holder.release()
    storing.join(10)
    assert len(outcome) == 1 and isinstance(outcome[0], ResearchStopped)
    assert not MemoryItem.objects.filter(research=running).exists()
    assert not Event.objects.filter(research=running).exists()


def test_a_branch_s_planning_lands_while_the_research_row_is_held_for_an_update(
    running, published, monkeypatch
) -> None:
    # given a finished top-level query whose children are due, and the research row held for an update
    parent = SerpQuery.objects.create(
        research=running, depth=1, position=0, query="q", objective="o", status=QueryStatus.DONE
    )
    plan = SimpleNamespace(
        plan_queries=lambda *args, **kwargs: [PlannedQuery(query=f"child {i}", objective="o") for i in range(2)]
    )
    monkeypatch.setattr("workers.pipeline.plan.engine_for", lambda name: plan)
    holder = RowHolder(running.pk)
    holder.start()
    assert holder.held.wait(10)
    try:
        # when the branch's children are planned meanwhile
        under_lock_timeout(plan_queries, str(running.pk), parent.pk)
    finally:
        holder.release()
    # then they landed and their searches are queued; their events are numbered after the commit, in order
    children = list(SerpQuery.objects.filter(parent=parent).order_by("position").values_list("query", flat=True))
    assert children == ["child 0", "child 1"]
    assert published == ["workers.tasks.run_query_task"] * 2
    number(running.pk)
    events = Event.objects.filter(research=running).order_by("seq")
    assert [(e.seq, e.data["query"]) for e in events] == [(1, "child 0"), (2, "child 1")]
