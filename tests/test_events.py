"""record_event: gap-free seqs under concurrency, and a push of {event, snapshot} after commit."""

import threading

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import connection, transaction

from research.events import record_event, research_group, user_group
from research.models import Event, Research

pytestmark = pytest.mark.django_db(transaction=True)


def test_50_concurrent_record_event_calls_give_seq_1_to_50(user) -> None:  # noqa: ANN001
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


def test_rolled_back_event_leaves_no_gap(user) -> None:  # noqa: ANN001
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


def test_event_is_pushed_with_snapshot_after_commit(user) -> None:  # noqa: ANN001
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
    assert message["snapshot"]["research"]["id"] == str(research.pk)
    assert message["snapshot"]["research"]["last_event_seq"] == 1
    sidebar = async_to_sync(layer.receive)(sidebar_channel)
    assert sidebar == {
        "type": "sidebar.update",
        "research": {**sidebar["research"], "id": str(research.pk), "title": "pushed"},
    }
