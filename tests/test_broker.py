"""The Redis broker (researchsite/broker.py): a channel closed after its connection was released raises a
connection error that kombu ignores, not a crash; one client per pool; batches in one round trip."""

import pytest
from django.conf import settings
from kombu import Connection

from researchsite.broker import RedisTransport


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
    from research.control import dispatch

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

    from research.control import dispatch

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
