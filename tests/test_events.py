"""record_event: gap-free seqs under concurrency, and a push of {event, snapshot} after commit."""

import asyncio
import threading
import time
from collections.abc import Callable

import psycopg
import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import OperationalError, connection, transaction
from django.test.utils import CaptureQueriesContext
from psycopg.errors import LockNotAvailable

from devtools.processes import wait_until
from research.live.delta import read_push
from research.live.push import research_group, user_group
from research.models import Event, Research
from research.record.events import insert_events, record_event
from tests.support.databases import database_dsn

pytestmark = pytest.mark.django_db(transaction=True)


def test_50_concurrent_record_event_calls_give_seq_1_to_50(user) -> None:
    # given
    research = Research.objects.create(owner=user, prompt="p", title="t")
    start = threading.Barrier(50)
    errors: list[BaseException] = []

    def record(i: int) -> None:
        try:
            start.wait()
            record_event(research.pk, "new_serp_query", {"i": i})
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            connection.close()

    # when
    threads = [threading.Thread(target=record, args=(i,)) for i in range(50)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # then
    assert errors == []
    seqs = list(Event.objects.filter(research=research).order_by("seq").values_list("seq", flat=True))
    assert seqs == list(range(1, 51))
    assert sorted(e["i"] for e in Event.objects.filter(research=research).values_list("data", flat=True)) == list(
        range(50)
    )
    research.refresh_from_db()
    assert research.last_event_seq == 50


def test_rolled_back_event_leaves_no_gap(user) -> None:
    research = Research.objects.create(owner=user, prompt="p", title="t")
    record_event(research.pk, "research_started")
    with pytest.raises(RuntimeError), transaction.atomic():
        record_event(research.pk, "new_serp_query")
        raise RuntimeError("step failed after recording")
    record_event(research.pk, "new_serp_query")
    assert list(Event.objects.filter(research=research).values_list("seq", "type")) == [
        (1, "research_started"),
        (2, "new_serp_query"),
    ]


def test_event_is_pushed_with_its_delta_after_commit(user) -> None:
    # given two listeners on the research group and the owner's group
    research = Research.objects.create(owner=user, prompt="p", title="pushed")
    layer = get_channel_layer()
    research_channel = async_to_sync(layer.new_channel)()
    sidebar_channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(research_group(research.pk), research_channel)
    async_to_sync(layer.group_add)(user_group(user.pk), sidebar_channel)
    # when
    record_event(research.pk, "research_started", {"hello": "world"})
    # then
    message = async_to_sync(layer.receive)(research_channel)
    assert message["type"] == "research.update"
    assert [(e["seq"], e["type"], e["data"]) for e in message["events"]] == [
        (1, "research_started", {"hello": "world"})
    ]
    assert message["delta"]["research"]["id"] == str(research.pk)
    assert message["delta"]["research"]["last_event_seq"] == 1
    assert message["delta"]["base"] == 0  # the research's first push: a whole delta
    sidebar = async_to_sync(layer.receive)(sidebar_channel)
    assert sidebar == {
        "type": "sidebar.update",
        "research": {**sidebar["research"], "id": str(research.pk), "title": "pushed"},
    }


def listener(research: Research) -> tuple[Callable[[float], dict | None], asyncio.AbstractEventLoop]:
    """A listener on the research's group: `received(timeout)` gives the next push or None; close the loop after.
    One loop for every receive: a receive cancelled by its timeout leaves state bound to its loop."""
    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(research_group(research.pk), channel)
    loop = asyncio.new_event_loop()

    def received(timeout: float) -> dict | None:
        try:
            return loop.run_until_complete(asyncio.wait_for(layer.receive(channel), timeout))
        except TimeoutError:
            return None

    return received, loop


def test_push_waits_for_commit_and_a_rolled_back_event_is_never_pushed(user, settings) -> None:
    # given a listener on the research's group
    settings.PUSH_INTERVAL = 0.05
    research = Research.objects.create(owner=user, prompt="p", title="t")
    received, loop = listener(research)

    # when an event is recorded in a transaction that rolls back
    with pytest.raises(RuntimeError), transaction.atomic():
        record_event(research.pk, "research_started")
        raise RuntimeError("rolled back")
    # then nothing is pushed
    assert received(1.0) is None
    # when an event is recorded in a transaction that stays open for a while
    with transaction.atomic():
        record_event(research.pk, "research_started", {"n": 1})
        # then nothing is pushed before the commit
        assert received(1.0) is None
    # and it is pushed after it, with the seq the rollback did not use up
    message = received(5.0)
    assert message is not None
    assert [(e["seq"], e["data"]) for e in message["events"]] == [(1, {"n": 1})]
    loop.close()


def test_a_push_steps_aside_from_an_exclusive_lock_and_goes_out_after_it(user, settings) -> None:
    # given a listener, and a table the push reads locked exclusively by another session (as a migration or a
    # TRUNCATE does, which would deadlock against a push holding the tables it has read so far)
    settings.PUSH_INTERVAL = 0.05
    research = Research.objects.create(owner=user, prompt="p", title="t")
    received, loop = listener(research)
    # (an event already pushed: a push with events to send reads the tables of its delta)
    record_event(research.pk, "research_started", {"n": 0})
    assert received(5.0) is not None

    with psycopg.connect(**database_dsn()) as locker:
        locker.execute("LOCK TABLE research_website IN ACCESS EXCLUSIVE MODE")
        # when the push reads while the lock is held
        with pytest.raises(OperationalError) as failed:
            read_push(research.pk, 0, 10, None)
        record_event(research.pk, "research_started", {"n": 1})
        # then it gives up rather than waits (and holds what it read), and nothing is pushed meanwhile
        assert isinstance(failed.value.__cause__, LockNotAvailable)
        assert received(1.0) is None
        locker.rollback()
    # and once the lock is gone the push goes out, the event not lost
    message = received(5.0)
    assert message is not None
    assert [(e["seq"], e["data"]) for e in message["events"]] == [(2, {"n": 1})]
    loop.close()


def test_the_numbering_before_a_push_steps_aside_from_an_exclusive_lock(user) -> None:
    from research.live.push import RedisPushState, flush

    # given an event recorded unnumbered, and the events table locked exclusively by another session, as a TRUNCATE
    # that holds it and waits for the research table does (the numbering, holding the research row, would then
    # deadlock with it)
    research = Research.objects.create(owner=user, prompt="p", title="t")
    insert_events(research.pk, [("research_started", {"n": 1})])
    with psycopg.connect(**database_dsn()) as locker:
        locker.execute("LOCK TABLE research_event IN ACCESS EXCLUSIVE MODE")
        # when a push numbers it while the lock is held
        with connection.cursor() as cursor:
            cursor.execute("SET lock_timeout = '20s'")  # the connection's own limit, far above the push's
        began = time.monotonic()
        try:
            with pytest.raises(OperationalError) as failed:
                flush(str(research.pk), RedisPushState())
        finally:
            with connection.cursor() as cursor:
                cursor.execute("RESET lock_timeout")
        waited = time.monotonic() - began
        # then it gives up rather than waits, holding nothing, for the pusher to try again next round: the push's
        # own limit ended the wait, not the connection's (which the numbering waited out before)
        assert isinstance(failed.value.__cause__, LockNotAvailable)
        assert waited < 10, waited
        locker.rollback()

    # and once the lock is gone the event is numbered and pushed (by this flush, or by this process's pusher where
    # that one holds the research's turn at the moment: the flush then returns False and leaves it to it)
    def numbered() -> bool:
        flush(str(research.pk), RedisPushState())
        return Event.objects.get(research=research).seq == 1

    wait_until(numbered, timeout=15, message="the event numbered once the lock is gone")


def test_a_push_whose_events_another_process_sent_reads_no_delta(user) -> None:
    # given a research whose one event was pushed already (by another worker process, say)
    research = Research.objects.create(owner=user, prompt="p", title="t")
    record_event(research.pk, "research_started", {"n": 1})
    # when a process marked dirty by it reads its push
    with CaptureQueriesContext(connection) as captured:
        events, delta, _, _ = read_push(research.pk, 1, 10, None)
    # then there is nothing to send, and it read the events only, none of the tables of a delta
    assert (events, delta) == ([], {})
    read = " ".join(query["sql"] for query in captured.captured_queries)
    assert "research_event" in read
    assert not any(table in read for table in ("research_website", "research_serpquery", "research_reportsection"))
    # and with an event after that seq, the same read carries it and its delta
    record_event(research.pk, "research_started", {"n": 2})
    events, delta, _, _ = read_push(research.pk, 1, 10, None)
    assert [event["data"] for event in events] == [{"n": 2}]
    assert delta["research"]["id"] == str(research.pk)
