"""Event seqs are handed out after the commit: the tree writes of one research do not queue on its row for them,
seqs stay gap-free and in the order readers see them, and an ending's event follows everything that landed."""

from datetime import timedelta

import pytest
from django.db import OperationalError, connection, transaction
from django.utils import timezone

from research.models import Event, Research, ResearchStatus
from research.record.events import record_event
from research.record.numbering import number
from tests.support.factories import running_research
from tests.support.threads import HeldTransaction, cancel_in_background
from workers.pipeline.tree_writes import tree_transaction
from workers.steps import sweep

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def running(user) -> Research:
    return running_research(user, breadth=2, depth=1)


class HeldTreeTransaction(HeldTransaction):
    """A tree transaction that recorded an event and reached its end, held open (not committed) until `release`."""

    def __init__(self, research_id) -> None:
        super().__init__()
        self.research_id = research_id

    def hold(self) -> None:
        with tree_transaction(self.research_id):  # a savepoint here: its end applies, the commit waits
            record_event(self.research_id, "analyzed_a_website", {"by": "held"})


def seqs(research: Research) -> list[tuple[int | None, str]]:
    return list(Event.objects.filter(research=research).order_by("id").values_list("seq", "type"))


def test_tree_transactions_of_one_research_do_not_wait_for_each_other(running) -> None:
    # given a tree transaction of the research at its end, not yet committed
    held = HeldTreeTransaction(running.pk)
    held.start()
    assert held.held.wait(10)
    try:
        # when another one records its events meanwhile, under a lock timeout (waiting on the row would fail)
        with transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute("SET LOCAL lock_timeout = '2s'")
            with tree_transaction(running.pk):
                record_event(running.pk, "analyzed_a_website", {"by": "second"})
    except OperationalError as error:  # the failure this test is for
        pytest.fail(f"a tree transaction waited on the research row: {error}")
    finally:
        held.release()
    # then both landed, unnumbered until the numbering, which hands out gap-free seqs in insertion order
    assert [seq for seq, _ in seqs(running)] == [None, None]
    assert number(running.pk) == 2
    assert sorted(seq for seq, _ in seqs(running)) == [1, 2]
    assert Research.objects.values_list("last_event_seq", flat=True).get(pk=running.pk) == 2
    # and numbering again changes nothing
    assert number(running.pk) == 2


def test_an_ending_waits_for_the_tree_transactions_in_flight_and_its_event_comes_last(running) -> None:
    # given numbered history, and a tree transaction at its end, not yet committed
    record_event(running.pk, "research_started")
    held = HeldTreeTransaction(running.pk)
    held.start()
    assert held.held.wait(10)
    # when the research is cancelled meanwhile
    canceller, cancelled = cancel_in_background(running.pk)
    # then the cancel waits for it (it holds the row exclusively to change the status) ...
    assert cancelled.wait(1.0) is False
    held.release()
    canceller.join(10)
    assert cancelled.is_set()
    # ... so what it wrote landed before the cancel, and the cancel's event is numbered after it, without a gap
    assert Research.objects.get(pk=running.pk).status == ResearchStatus.CANCELLED
    assert seqs(running) == [(1, "research_started"), (2, "analyzed_a_website"), (3, "research_cancelled")]


def test_events_left_unnumbered_by_a_dead_process_are_numbered_by_the_sweeper(running, published) -> None:
    # given an event committed long enough ago whose process died before its push numbered it (rows written
    # directly: an event recorded here would schedule this process's own push, which numbers them all)
    Event.objects.create(research=running, seq=1, type="research_started", data={})
    Research.objects.filter(pk=running.pk).update(last_event_seq=1)
    Event.objects.create(research=running, seq=None, type="analyzed_a_website", data={})
    Event.objects.filter(seq__isnull=True).update(created_at=timezone.now() - timedelta(seconds=30))
    # and a fresh one, which its own push is about to number
    Event.objects.create(research=running, seq=None, type="analyzed_a_website", data={"fresh": True})
    # when the sweeper runs
    done = sweep()
    # then the research's events are numbered, the fresh one with them (numbering takes whatever is committed)
    assert done["events_numbered"] == 1
    assert [seq for seq, _ in seqs(running)] == [1, 2, 3]
    assert "events_numbered" not in sweep()
