"""Pushes as deltas: a client that holds the state and applies each push's delta holds the database snapshot.

The first tests change a research's rows one committed transaction at a time, as workers do, and after each
change take a delta as the pusher does: applied to the state before, it must give exactly the snapshot read in
the same view, and carry only the rows that changed. The last test replays the pushes of real researches, run by
real workers, as a browser receives them, and checks the state after every push against the checksum of the
snapshot the pusher read.
"""

import asyncio
import json
from typing import Any

import pytest
import redis
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.db import connection, connections
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from devtools.deltas import DeltaMismatch, apply_delta
from research.live.delta import Since, build_delta, consistent_view, read_push, state_checksum
from research.live.push import Pushed, RedisPushState, flush, research_group
from research.live.snapshot import build_snapshot
from research.models import (
    Document,
    Event,
    Extract,
    FollowUpQuestion,
    MemoryItem,
    QueryStatus,
    ReportSection,
    Research,
    ResearchStatus,
    SerpQuery,
    Website,
    WebsiteStatus,
)
from researchsite.asgi import application
from tests.support.deltas import Watcher, touched
from tests.support.e2e import start_research, wait_finished
from tests.support.factories import running_research
from tests.support.logins import session_cookie

pytestmark = pytest.mark.django_db(transaction=True)


def test_each_delta_carries_only_what_changed_and_adds_up_to_the_snapshot(user) -> None:
    research = running_research(user, 2, 2)
    FollowUpQuestion.objects.create(research=research, position=0, question="Which climates?", answer="Nordic")
    client = Watcher(research.pk)
    first = client.pull()
    assert first["base"] == 0 and touched(first)["questions"]

    # nothing changed: nothing but the research and the counts
    client.carries(client.pull())

    # the top-level queries are planned
    tops = [
        SerpQuery.objects.create(research=research, depth=1, position=i, query=f"q{i}", objective="o") for i in range(2)
    ]
    client.carries(client.pull(), queries=sorted(q.pk for q in tops))

    # a search stores websites for the first query
    websites = [
        Website.objects.create(research=research, query=tops[0], position=i, url=f"https://example.com/{i}")
        for i in range(3)
    ]
    SerpQuery.objects.filter(pk=tops[0].pk).update(status=QueryStatus.SCRAPING, started_at=timezone.now())
    client.carries(client.pull(), queries=[tops[0].pk], websites=[w.pk for w in websites])

    # one website is analysed: that website alone, with its extracts
    Website.objects.filter(pk=websites[1].pk).update(status=WebsiteStatus.ANALYZED, finished_at=timezone.now())
    Extract.objects.create(research=research, website=websites[1], position=0, fact="f", quote="q")
    client.carries(client.pull(), websites=[websites[1].pk])
    assert client.state["queries"][0]["websites"][1]["extracts"] == [{"fact": "f", "quote": "q"}]

    # an extract written alone still brings its website
    Extract.objects.create(research=research, website=websites[1], position=1, fact="f2", quote="q2")
    client.carries(client.pull(), websites=[websites[1].pk])

    # memory: an insight and two gaps, then one gap closed (it leaves the state)
    items = [
        MemoryItem.objects.create(research=research, kind=kind, text=text, key=text, website_ids=[websites[1].pk])
        for kind, text in (("insight", "i1"), ("gap", "g1"), ("gap", "g2"))
    ]
    client.carries(client.pull(), memory={"insights": [items[0].pk], "gaps": [items[1].pk, items[2].pk]})
    MemoryItem.objects.filter(pk=items[1].pk).update(closed=True)
    client.carries(client.pull(), memory={"gaps": []})
    assert [g["id"] for g in client.state["memory"]["gaps"]] == [items[2].pk]

    # a child query, a failed website, a cancelled query
    child = SerpQuery.objects.create(research=research, parent=tops[0], depth=2, position=0, query="c", objective="o")
    Website.objects.filter(pk=websites[0].pk).update(status=WebsiteStatus.FAILED, failure_reason="http_error")
    SerpQuery.objects.filter(pk=tops[1].pk).update(status=QueryStatus.CANCELLED)
    client.carries(client.pull(), queries=sorted([child.pk, tops[1].pk]), websites=[websites[0].pk])

    # the report: sections land one at a time, then a new version replaces them, then the documents
    Research.objects.filter(pk=research.pk).update(status=ResearchStatus.REPORTING)
    for position in (1, 2):
        ReportSection.objects.create(research=research, version=1, position=position, title=f"S{position}")
    client.carries(client.pull(), sections=[1, 2])
    ReportSection.objects.filter(research=research, position=2).update(status="written", markdown="## S2\ntext")
    client.carries(client.pull(), sections=[2])
    Document.objects.create(research=research, kind="report", version=1, markdown="# Report")
    Research.objects.filter(pk=research.pk).update(report_version=2)
    client.carries(client.pull(), documents=True)
    assert client.state["report_sections"] == [] and client.state["report"]["markdown"] == "# Report"
    ReportSection.objects.create(research=research, version=2, position=1, title="Only")
    Research.objects.filter(pk=research.pk).update(
        status=ResearchStatus.COMPLETED, finished_at=timezone.now(), last_event_seq=9
    )
    client.carries(client.pull(), sections=[1])
    assert client.state["research"]["status"] == "completed"


def test_a_delta_on_a_state_it_does_not_follow_is_refused(user) -> None:
    research = running_research(user, 2, 1)
    client = Watcher(research.pk)
    client.pull()
    query = SerpQuery.objects.create(research=research, depth=1, position=0, query="q", objective="o")
    client.pull()
    Website.objects.create(research=research, query=query, position=0, url="https://example.com/a")
    with consistent_view():
        delta = json.loads(json.dumps(build_delta(research.pk, client.since)))
    # a state that never saw the query cannot take its websites
    stale = {**client.state, "queries": []}
    with pytest.raises(DeltaMismatch):
        apply_delta(stale, delta)
    with pytest.raises(DeltaMismatch):
        apply_delta(None, delta)


def test_a_whole_delta_rebuilds_any_state(user) -> None:
    # given a client whose state is out of date in every way
    research = running_research(user, 2, 1)
    old = Watcher(research.pk)
    old.pull()
    query = SerpQuery.objects.create(research=research, depth=1, position=0, query="q", objective="o")
    Website.objects.create(research=research, query=query, position=0, url="https://example.com/a")
    MemoryItem.objects.create(research=research, kind="insight", text="i", key="i")
    # when it gets a delta with no base (the pusher lost its record)
    with consistent_view():
        delta = json.loads(json.dumps(build_delta(research.pk, None)))
        expected = build_snapshot(research.pk)
    # then applying it gives the snapshot
    assert delta["base"] == 0
    assert apply_delta(old.state, delta) == json.loads(json.dumps(expected))
    assert apply_delta(None, delta) == json.loads(json.dumps(expected))


# --- the real stack: pushes from real workers, as a browser receives them ----------------------------------------


async def replay(research_id: str, headers: list[tuple[bytes, bytes]], finished) -> tuple[int, dict[str, Any]]:
    """Watch the research from its start to its last push, applying every delta and checking the state against
    the checksum of the snapshot the pusher read; returns the number of pushes and the final state."""
    communicator = WebsocketCommunicator(application, f"/ws/research/{research_id}/", headers=headers)
    connected, _ = await communicator.connect(timeout=10)
    assert connected
    history = await communicator.receive_json_from(timeout=10)
    state, seq, pushes = history["snapshot"], history["snapshot"]["research"]["last_event_seq"], 0
    while True:
        # (a receive that times out would cancel the consumer: look first)
        if await communicator.receive_nothing(timeout=1):
            if await database_sync_to_async(finished)():
                break
            continue
        message = await communicator.receive_json_from(timeout=10)
        assert message["type"] == "update" and "snapshot" not in message
        delta = message["delta"]
        if delta["research"]["last_event_seq"] < seq:
            continue  # a push read before the history it overlaps
        assert delta["base"] <= seq, "a push was lost"
        state = apply_delta(state, delta)
        seq = delta["research"]["last_event_seq"]
        assert state_checksum(state) == message["checksum"], f"the state after push {pushes + 1} differs"
        pushes += 1
    await communicator.disconnect()
    await database_sync_to_async(connections.close_all)()  # the connection of database_sync_to_async's thread
    return pushes, state


@pytest.mark.parametrize("mode", ["fixed", "adaptive"])
def test_replayed_pushes_of_a_real_research_equal_the_snapshot_after_every_push(
    api, user, workers, research_model, fake_llm, mode
) -> None:
    # every model answer takes a moment, so the research spans many push intervals however fast the engine is
    fake_llm.delay = 0.2
    headers = [(b"cookie", session_cookie(user)), (b"origin", b"http://127.0.0.1")]
    research_id = start_research(api, 2, 2, mode=mode)

    def finished() -> bool:
        research = Research.objects.get(pk=research_id)
        return research.finished_at is not None and research.last_event_seq == _pushed_seq(research_id)

    pushes, state = asyncio.run(replay(research_id, headers, finished))
    research = wait_finished(research_id)
    assert research.status == ResearchStatus.COMPLETED, research.error
    connections.close_all()
    # many pushes, each checked; and the final state is what the API returns
    assert pushes >= 5
    assert state == api.get(f"/api/research/{research_id}").json()
    assert sum(len(q["websites"]) for q in state["queries"]) > 0 and state["report"] is not None


def _pushed_seq(research_id: str) -> int:
    return int(redis.Redis.from_url(settings.REDIS_URL).get(f"push-seq:{research_id}") or 0)


def test_rows_a_push_would_send_again_unchanged_are_left_out(user) -> None:
    # given a research whose first push carried every row, listened to on its channel group
    research = running_research(user, 2, 1)
    query = SerpQuery.objects.create(research=research, depth=1, position=0, query="q", objective="o")
    websites = [
        Website.objects.create(research=research, query=query, position=i, url=f"https://example.com/{i}")
        for i in range(2)
    ]
    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(research_group(research.pk), channel)
    state = RedisPushState()

    def push_one_event(seq: int) -> dict[str, Any]:
        # events written as a worker's transaction would, without the in-process pusher being told of them
        Research.objects.filter(pk=research.pk).update(last_event_seq=seq)
        Event.objects.create(research=research, seq=seq, type="scraping_a_website", data={})
        assert flush(str(research.pk), state)
        return async_to_sync(layer.receive)(channel)

    first = push_one_event(1)
    assert first["delta"]["base"] == 0
    # when one website changes, and the next delta reads from a view so old that every row comes again
    Website.objects.filter(pk=websites[1].pk).update(status=WebsiteStatus.SCRAPING)
    pushed = state.pushed(str(research.pk))
    state.set_pushed(str(research.pk), Pushed(pushed.seq, Since(pushed.state.seq, 3)), {}, whole=False)
    second = push_one_event(2)
    # then only that website is carried, and the state still adds up
    assert touched(second["delta"])["websites"] == [websites[1].pk] and touched(second["delta"])["queries"] == []
    after = apply_delta(apply_delta(None, first["delta"]), second["delta"])
    assert state_checksum(after) == second["checksum"]


def test_a_push_of_one_change_costs_the_same_statements_whatever_the_tree(user) -> None:
    statements = []
    for size in (1, 8):
        # given a research of `size` queries with 3 websites each and a report being written, followed by a client
        research = running_research(user, size, 1)
        for i in range(size):
            query = SerpQuery.objects.create(research=research, depth=1, position=i, query=f"q{i}", objective="o")
            for j in range(3):
                Website.objects.create(research=research, query=query, position=j, url=f"https://example.com/{i}/{j}")
        ReportSection.objects.create(research=research, version=1, position=1, title="S1")
        client = Watcher(research.pk)
        client.pull()
        # when one website is analysed and its event recorded
        website = Website.objects.filter(research=research).order_by("id").first()
        Website.objects.filter(pk=website.pk).update(status=WebsiteStatus.ANALYZED)
        Extract.objects.create(research=research, website=website, position=0, fact="f", quote="q")
        Research.objects.filter(pk=research.pk).update(last_event_seq=1)
        Event.objects.create(research=research, seq=1, type="analyzed_a_website", data={})
        with CaptureQueriesContext(connection) as captured:
            events, delta, _, _ = read_push(research.pk, 0, 500, client.since)
        # then the push reads that website alone, in as many statements at 8 queries as at 1
        assert client.quiet, "another test run's open transaction: more rows would count as changed"
        assert [event["seq"] for event in events] == [1]
        assert touched(delta)["websites"] == [website.pk] and touched(delta)["queries"] == []
        statements.append(len(captured.captured_queries))
    # (the view, the events, the research, one statement for the changed rows and what every push reads, the
    # changed website's query's websites with its extracts, and the commit)
    assert statements[0] == statements[1] == 7
