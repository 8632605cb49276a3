"""The brokers (researchsite/broker.py): a filesystem message is never visible before it is whole, and a Redis
channel closed after its connection was released raises a connection error that kombu ignores, not a crash."""

import os
from pathlib import Path

import pytest
from django.conf import settings
from kombu import Connection

from devtools.processes import ROOT
from researchsite.broker import FilesystemTransport, RedisTransport


@pytest.fixture
def connection(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Connection:
    folder = str(tmp_path)
    # Every folder the transport writes, the exchange tables' control folder included (beside the messages' folder,
    # which holds messages only): kombu's default for it is "control" in the working directory, which wrote
    # control/tasks.exchange into the checkout.
    options = {
        "data_folder_in": folder,
        "data_folder_out": folder,
        "control_folder": str(tmp_path_factory.mktemp("control")),
        "store_processed": False,
    }
    outside = {Path.cwd() / "control", ROOT / "control"}
    there = {path for path in outside if path.exists()}
    with Connection("filesystem://", transport_options=options) as conn:
        yield conn
    # Nothing was written outside the test's folder: no control folder appeared in the working directory or the
    # repository root.
    assert {path for path in outside if path.exists()} == there


def test_filesystem_urls_use_the_atomic_transport(connection: Connection) -> None:
    assert type(connection.transport) is FilesystemTransport


def test_a_message_appears_whole_and_round_trips(
    connection: Connection, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # given a watch on the folder at the moment the message file gets its final name
    seen: list[list[str]] = []
    rename = os.replace

    def watched(source: str, target: str) -> None:
        seen.append(sorted(os.listdir(tmp_path)))
        assert Path(source).read_bytes()  # written before it is renamed into place
        rename(source, target)

    monkeypatch.setattr(os, "replace", watched)
    queue = connection.SimpleQueue("tasks")
    # when a message is published
    queue.put({"task": "workers.tasks.scrape_website_task", "id": 7})
    # then, until the rename, the folder held only a file no queue reads
    assert len(seen) == 1 and len(seen[0]) == 1 and "." not in seen[0][0]
    # and the consumer gets the message whole
    message = queue.get(timeout=2)
    assert message.payload == {"task": "workers.tasks.scrape_website_task", "id": 7}
    message.ack()
    queue.close()
    # and the queue's exchange table went to the test's control folder
    assert (Path(connection.transport_options["control_folder"]) / "tasks.exchange").exists()


def test_redis_channel_closed_after_release_is_a_connection_error() -> None:
    # given a channel on this run's Redis whose connection has been released (as a worker does on losing Redis)
    with Connection(settings.REDIS_URL) as conn:
        assert type(conn.transport) is RedisTransport
        channel = conn.channel()
        channel.connection.client = None
        # when the channel builds a client, as closing it does to restore unacknowledged messages
        with pytest.raises(conn.connection_errors) as raised:
            channel._connparams()
        # then kombu sees a connection error (which its close ignores), not an AttributeError
        assert not isinstance(raised.value, AttributeError)


def test_a_redis_channel_builds_one_client_per_pool_not_per_operation(monkeypatch: pytest.MonkeyPatch) -> None:
    import uuid

    import redis

    built: list[object] = []
    init = redis.Redis.__init__

    def counted_init(self, *args, **kwargs):
        built.append(kwargs.get("connection_pool"))
        init(self, *args, **kwargs)

    monkeypatch.setattr(redis.Redis, "__init__", counted_init)
    with Connection(settings.REDIS_URL) as conn:
        queue = conn.SimpleQueue(f"clients-{uuid.uuid4().hex}")
        # when five messages are published, taken and acknowledged (each an operation kombu does with a client)
        for n in range(5):
            queue.put({"n": n})
        for n in range(5):
            message = queue.get(timeout=2)
            assert message.payload == {"n": n}
            message.ack()
        channel = queue.channel
        sync_clients = [pool for pool in built if pool is channel.pool]
        # then the channel built one client for its pool, not one per operation
        assert len(sync_clients) == 1
        # and a channel whose pools were dropped (as on a lost connection) builds one for its new pool
        channel._disconnect_pools()
        with channel.conn_or_acquire() as client:
            assert client.connection_pool is channel.pool and client.ping()
        assert built[-1] is channel.pool
        queue.close()


def lpushes(monkeypatch: pytest.MonkeyPatch) -> tuple[list[int], list[str]]:
    """Spy on this process's Redis commands: the LPUSHes of each pipeline executed, and the single commands."""
    import redis
    from redis.client import Pipeline

    batches: list[int] = []
    singles: list[str] = []
    execute, command = Pipeline.execute, redis.Redis.execute_command

    def counted_execute(self, *args, **kwargs):
        batches.append(sum(1 for args_, _ in self.command_stack if str(args_[0]).upper() == "LPUSH"))
        return execute(self, *args, **kwargs)

    def counted_command(self, *args, **kwargs):
        singles.append(str(args[0]).upper())
        return command(self, *args, **kwargs)

    monkeypatch.setattr(Pipeline, "execute", counted_execute)
    monkeypatch.setattr(redis.Redis, "execute_command", counted_command)
    return batches, singles


# Keys no row has: a worker of another test that takes these messages finds nothing to do.
NO_ROWS = [-11, -12, -13, -14, -15]


@pytest.mark.broker
def test_a_batch_of_steps_reaches_redis_in_one_round_trip(monkeypatch: pytest.MonkeyPatch) -> None:
    from research import dispatch

    assert settings.CELERY_BROKER_URL.startswith("redis://")
    dispatch.publish_batch(dispatch.SCRAPE.name, [-1], priority=3)  # the producer's connection, opened beforehand
    batches, singles = lpushes(monkeypatch)
    # when a step hands on five steps
    dispatch.publish_batch(dispatch.SCRAPE.name, NO_ROWS, priority=3)
    # then their five messages went in one pipeline, and none on its own
    assert batches == [5]
    assert "LPUSH" not in singles


@pytest.mark.broker
def test_a_batch_that_fails_to_send_is_published_step_by_step(monkeypatch: pytest.MonkeyPatch) -> None:
    from kombu.exceptions import KombuError
    from kombu.transport import redis as kombu_redis

    from research import dispatch

    # given a broker that fails every batch as it is sent (delivery uncertain)
    def failing(self) -> None:
        if self._buffered:
            raise KombuError("Redis publish batch failed; delivery is uncertain")

    monkeypatch.setattr(kombu_redis.PublishBatch, "flush", failing)
    batches, singles = lpushes(monkeypatch)
    # when a step hands on five steps
    dispatch.publish_batch(dispatch.SCRAPE.name, NO_ROWS, priority=3)
    # then each went to the broker on its own
    assert sum(batches) == 0 and singles.count("LPUSH") == 5
