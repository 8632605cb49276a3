"""The websocket consumers through the real ASGI app, the Redis channel layer and PostgreSQL."""

import asyncio
import json
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
import redis
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.db import connections
from django.test import Client

from research.live import snapshot as snapshot_module
from research.models import Research, ResearchStatus
from research.record.events import record_event
from researchsite.asgi import application
from tests.support.logins import session_cookie

pytestmark = pytest.mark.django_db(transaction=True)

ORIGIN = b"http://127.0.0.1"
TIMEOUT = 10


def wait_pushed(research: Research, timeout: float = 10) -> None:
    """Until the coalesced push of every event recorded so far has gone out, so it cannot arrive later."""
    conn = redis.Redis.from_url(settings.REDIS_URL)
    research.refresh_from_db(fields=["last_event_seq"])
    deadline = time.monotonic() + timeout
    while int(conn.get(f"push-seq:{research.pk}") or 0) < research.last_event_seq:
        assert time.monotonic() < deadline, "events were not pushed in time"
        time.sleep(0.05)


@pytest.fixture(autouse=True)
async def close_connections():
    """database_sync_to_async keeps a connection open on its worker thread; give it back after each test."""
    yield
    await database_sync_to_async(connections.close_all)()


@pytest.fixture
def alice(user) -> list[tuple[bytes, bytes]]:
    return [(b"cookie", session_cookie(user)), (b"origin", ORIGIN)]


@pytest.fixture
def mallory(other_user) -> list[tuple[bytes, bytes]]:
    return [(b"cookie", session_cookie(other_user)), (b"origin", ORIGIN)]


@pytest.fixture
def research(user) -> Research:
    """Alice's running research with three events, all pushed already."""
    research = Research.objects.create(
        owner=user, prompt="How fast do glaciers move?", title="Glaciers", status=ResearchStatus.RUNNING
    )
    for index in range(3):
        record_event(research.pk, "new_serp_query", {"query": f"glaciers {index}"})
    wait_pushed(research)
    return research


async def connect(path: str, headers: list[tuple[bytes, bytes]]) -> tuple[WebsocketCommunicator, bool]:
    communicator = WebsocketCommunicator(application, path, headers=headers)
    connected, _ = await communicator.connect(timeout=TIMEOUT)
    return communicator, connected


async def receive_until(communicator: WebsocketCommunicator, done: Callable[[list[dict[str, Any]]], bool]) -> list:
    messages: list[dict[str, Any]] = []
    while not done(messages):
        messages.append(await communicator.receive_json_from(timeout=TIMEOUT))
    return messages


def record(research_id: Any, count: int, start: int = 0) -> None:
    for index in range(start, start + count):
        record_event(research_id, "scraping_a_website", {"url": f"https://example.com/{index}"})


async def test_research_socket_sends_history_and_snapshot_on_connect(alice, research) -> None:
    communicator, connected = await connect(f"/ws/research/{research.pk}/", alice)
    assert connected
    message = await communicator.receive_json_from(timeout=TIMEOUT)
    assert message["type"] == "history" and message["after"] == 0
    assert [(e["seq"], e["type"]) for e in message["events"]] == [(n, "new_serp_query") for n in (1, 2, 3)]
    assert message["events"][0]["data"] == {"query": "glaciers 0"}
    assert message["snapshot"]["research"]["id"] == str(research.pk)
    assert message["snapshot"]["research"]["last_event_seq"] == 3
    assert await communicator.receive_nothing(timeout=0.5)
    await communicator.disconnect()


async def test_research_socket_pushes_live_events_in_order_coalesced(alice, research) -> None:
    # given a client holding the history
    communicator, connected = await connect(f"/ws/research/{research.pk}/", alice)
    assert connected
    history = await communicator.receive_json_from(timeout=TIMEOUT)
    assert history["events"][-1]["seq"] == 3
    # when a worker records eight events in a burst
    await database_sync_to_async(record)(research.pk, 8)
    # then they arrive in order, each once, several to a message, each message with its delta
    updates = await receive_until(communicator, lambda got: bool(got) and got[-1]["events"][-1]["seq"] >= 11)
    assert {m["type"] for m in updates} == {"update"}
    seqs = [e["seq"] for m in updates for e in m["events"]]
    assert seqs == list(range(4, 12))
    assert [e["data"]["url"] for m in updates for e in m["events"]] == [f"https://example.com/{i}" for i in range(8)]
    assert len(updates) < 8 and any(len(m["events"]) > 1 for m in updates)
    for message in updates:
        assert "snapshot" not in message
        assert message["delta"]["research"]["last_event_seq"] == message["events"][-1]["seq"]
    # each delta follows the state of the push before it
    assert [m["delta"]["base"] for m in updates[1:]] == [m["delta"]["research"]["last_event_seq"] for m in updates[:-1]]
    assert await communicator.receive_nothing(timeout=1)
    await communicator.disconnect()


async def test_catch_up_after_a_gap_returns_the_missing_events(alice, research) -> None:
    # given a client that has seen only seq 1 (it missed the push of 2 and 3)
    communicator, connected = await connect(f"/ws/research/{research.pk}/", alice)
    assert connected
    await communicator.receive_json_from(timeout=TIMEOUT)
    await database_sync_to_async(record)(research.pk, 2)
    await receive_until(communicator, lambda got: bool(got) and got[-1]["events"][-1]["seq"] >= 5)
    # when it asks for what came after its last seq
    await communicator.send_json_to({"type": "catch_up", "after": 1})
    # then it gets exactly the events after that, and the current snapshot
    message = await communicator.receive_json_from(timeout=TIMEOUT)
    assert message["type"] == "history" and message["after"] == 1
    assert [e["seq"] for e in message["events"]] == [2, 3, 4, 5]
    assert message["snapshot"]["research"]["last_event_seq"] == 5
    await communicator.disconnect()


async def test_bad_catch_up_messages_are_ignored_and_the_socket_stays(alice, research) -> None:
    communicator, connected = await connect(f"/ws/research/{research.pk}/", alice)
    assert connected
    await communicator.receive_json_from(timeout=TIMEOUT)
    for bad in ({"type": "catch_up", "after": -1}, {"type": "catch_up", "after": "2"}, {"type": "catch_up"}):
        await communicator.send_json_to(bad)
    await communicator.send_json_to({"type": "catch_up", "after": True})
    await communicator.send_to(text_data="{not json")
    await communicator.send_json_to(["catch_up", 1])
    assert await communicator.receive_nothing(timeout=0.5)
    await communicator.send_json_to({"type": "catch_up", "after": 2})
    message = await communicator.receive_json_from(timeout=TIMEOUT)
    assert [e["seq"] for e in message["events"]] == [3]
    await communicator.disconnect()


async def test_reconnect_with_after_gets_only_the_missed_events(alice, research) -> None:
    communicator, connected = await connect(f"/ws/research/{research.pk}/?after=2", alice)
    assert connected
    message = await communicator.receive_json_from(timeout=TIMEOUT)
    assert message["type"] == "history" and message["after"] == 2
    assert [e["seq"] for e in message["events"]] == [3]
    await communicator.disconnect()


async def test_reconnect_with_a_huge_after_gets_nothing_older(alice, research) -> None:
    # given an `after` of thousands of digits (int() refuses more than 4300) or past the seq column
    for after in ("9" * 5000, "2147483648"):
        communicator, connected = await connect(f"/ws/research/{research.pk}/?after={after}", alice)
        assert connected
        # then it means "nothing newer", as a catch_up's does: no events, the current snapshot
        message = await communicator.receive_json_from(timeout=TIMEOUT)
        assert message["type"] == "history" and message["after"] == 2**31 - 1 and message["events"] == []
        assert message["snapshot"]["research"]["last_event_seq"] == 3
        await communicator.disconnect()


async def test_strangers_socket_is_closed_without_data(mallory, research) -> None:
    communicator, connected = await connect(f"/ws/research/{research.pk}/", mallory)
    assert not connected
    assert await communicator.receive_nothing(timeout=0.5)
    # and a push of the research does not reach it either
    await database_sync_to_async(record)(research.pk, 1)
    assert await communicator.receive_nothing(timeout=1)


async def test_anonymous_sockets_are_closed_without_data(research) -> None:
    for path in (f"/ws/research/{research.pk}/", "/ws/research/"):
        communicator, connected = await connect(path, [(b"origin", ORIGIN)])
        assert not connected, path
        assert await communicator.receive_nothing(timeout=0.3)


async def test_unknown_or_malformed_research_ids_are_refused(alice) -> None:
    for research_id in (str(uuid.uuid4()), "not-a-uuid", "1"):
        communicator, connected = await connect(f"/ws/research/{research_id}/", alice)
        assert not connected, research_id


async def test_foreign_or_missing_origin_is_refused(user, research) -> None:
    cookie = (b"cookie", await database_sync_to_async(session_cookie)(user))
    for headers in ([cookie, (b"origin", b"http://evil.example")], [cookie, (b"origin", b"null")], [cookie]):
        for path in (f"/ws/research/{research.pk}/", "/ws/research/"):
            communicator, connected = await connect(path, headers)
            assert not connected, (path, headers)
            assert await communicator.receive_nothing(timeout=0.2)


async def test_sidebar_lists_own_research_and_follows_changes(alice, research, other_user) -> None:
    # given someone else's research
    theirs = await database_sync_to_async(Research.objects.create)(owner=other_user, prompt="p", title="not yours")
    communicator, connected = await connect("/ws/research/", alice)
    assert connected
    message = await communicator.receive_json_from(timeout=TIMEOUT)
    assert message["type"] == "researches"
    assert [(r["id"], r["title"], r["status"]) for r in message["researches"]] == [
        (str(research.pk), "Glaciers", "running")
    ]
    # when both researches change
    await database_sync_to_async(record)(theirs.pk, 1)
    await database_sync_to_async(Research.objects.filter(pk=research.pk).update)(status=ResearchStatus.COMPLETED)
    await database_sync_to_async(record)(research.pk, 1)
    # then only hers is pushed to her
    update = await communicator.receive_json_from(timeout=TIMEOUT)
    assert update["type"] == "research"
    assert update["research"]["id"] == str(research.pk) and update["research"]["status"] == "completed"
    assert await communicator.receive_nothing(timeout=1)
    await communicator.disconnect()


async def test_sidebar_asks_for_the_list_again_after_a_lost_push(alice, research) -> None:
    # given a sidebar socket holding the list
    communicator, connected = await connect("/ws/research/", alice)
    assert connected
    await communicator.receive_json_from(timeout=TIMEOUT)
    # when the research finishes but its push is lost (here: never sent), and the client asks for the list
    await database_sync_to_async(Research.objects.filter(pk=research.pk).update)(
        status=ResearchStatus.COMPLETED, title="Glacier speeds"
    )
    assert await communicator.receive_nothing(timeout=0.5)
    for ignored in ({"type": "lists"}, {"list": True}, ["list"]):
        await communicator.send_json_to(ignored)
    await communicator.send_to(text_data="{not json")
    assert await communicator.receive_nothing(timeout=0.5)
    await communicator.send_json_to({"type": "list"})
    # then it gets the whole list as the database has it
    message = await communicator.receive_json_from(timeout=TIMEOUT)
    assert message["type"] == "researches"
    assert [(r["id"], r["title"], r["status"]) for r in message["researches"]] == [
        (str(research.pk), "Glacier speeds", "completed")
    ]
    await communicator.disconnect()


async def test_history_snapshot_is_read_with_its_events(alice, research, monkeypatch) -> None:
    # given an event committed by another connection between the read of the events and that of the snapshot
    real_build_snapshot = snapshot_module.build_snapshot

    def build_snapshot_after_a_commit(research_id: Any) -> dict[str, Any]:
        def worker() -> None:
            record(research_id, 1)
            connections.close_all()

        thread = threading.Thread(target=worker)
        thread.start()
        thread.join()
        return real_build_snapshot(research_id)

    monkeypatch.setattr(snapshot_module, "build_snapshot", build_snapshot_after_a_commit)
    # when a client connects
    communicator, connected = await connect(f"/ws/research/{research.pk}/", alice)
    assert connected
    # then the snapshot it gets is as of the last event it gets, not newer
    message = await communicator.receive_json_from(timeout=TIMEOUT)
    assert [e["seq"] for e in message["events"]] == [1, 2, 3]
    assert message["snapshot"]["research"]["last_event_seq"] == 3
    await communicator.disconnect()


async def test_logout_closes_the_sessions_sockets_and_only_those(user, research) -> None:
    # given alice signed in twice (two browsers), with the sidebar and the live log open in the first
    first, second = Client(), Client()
    for client in (first, second):
        await database_sync_to_async(client.force_login)(user)

    def headers(client: Client) -> list[tuple[bytes, bytes]]:
        cookie = f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"
        return [(b"cookie", cookie.encode()), (b"origin", ORIGIN)]

    sockets = []
    for client, path in ((first, "/ws/research/"), (first, f"/ws/research/{research.pk}/"), (second, "/ws/research/")):
        communicator, connected = await connect(path, headers(client))
        assert connected, path
        await communicator.receive_json_from(timeout=TIMEOUT)
        sockets.append(communicator)
    sidebar, log, other_browser = sockets
    # when she logs out in the first browser (the POST the Sign out button sends)
    response = await database_sync_to_async(first.post)("/accounts/logout/")
    assert response.status_code == 302
    # then that browser's sockets are closed as unauthenticated...
    for communicator in (sidebar, log):
        assert await communicator.receive_output(timeout=TIMEOUT) == {"type": "websocket.close", "code": 4401}
    # ...while the other browser's session, still signed in, keeps its socket and its pushes
    assert await other_browser.receive_nothing(timeout=0.5)
    await database_sync_to_async(Research.objects.filter(pk=research.pk).update)(status=ResearchStatus.COMPLETED)
    await database_sync_to_async(record)(research.pk, 1)
    update = await other_browser.receive_json_from(timeout=TIMEOUT)
    assert update["type"] == "research" and update["research"]["status"] == "completed"
    await other_browser.disconnect()


async def test_two_clients_get_the_same_pushes(alice, research) -> None:
    first, _ = await connect(f"/ws/research/{research.pk}/", alice)
    second, _ = await connect(f"/ws/research/{research.pk}/", alice)
    await asyncio.gather(first.receive_json_from(timeout=TIMEOUT), second.receive_json_from(timeout=TIMEOUT))
    await database_sync_to_async(record)(research.pk, 3)
    got = []
    for communicator in (first, second):
        updates = await receive_until(communicator, lambda m: bool(m) and m[-1]["events"][-1]["seq"] >= 6)
        got.append([e["seq"] for m in updates for e in m["events"]])
        await communicator.disconnect()
    assert got == [[4, 5, 6], [4, 5, 6]]


async def test_a_state_larger_than_a_websocket_message_comes_in_parts(alice, research) -> None:
    # given a research whose state is larger than daphne sends in one message (a prompt of 400,000 characters,
    # some of them escaped in JSON, and some beyond the BMP)
    prompt = ('Glaciers "move" \\ slowly\n\U0001f9ca ' * 12_000)[:400_000]
    await database_sync_to_async(Research.objects.filter(pk=research.pk).update)(prompt=prompt)
    communicator, connected = await connect(f"/ws/research/{research.pk}/", alice)
    assert connected
    # then the history comes as parts, each under 1 MiB, that join into the whole message
    parts = []
    while not parts or len(parts) < parts[0]["count"]:
        output = await communicator.receive_output(timeout=TIMEOUT)
        assert len(output["text"].encode()) < 1024 * 1024
        parts.append(json.loads(output["text"]))
    assert {part["type"] for part in parts} == {"part"} and len({part["id"] for part in parts}) == 1
    assert [part["index"] for part in parts] == list(range(parts[0]["count"])) and parts[0]["count"] >= 3
    message = json.loads("".join(part["text"] for part in parts))
    assert message["type"] == "history" and message["snapshot"]["research"]["prompt"] == prompt
    assert [e["seq"] for e in message["events"]] == [1, 2, 3]
    await communicator.disconnect()
