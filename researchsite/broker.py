"""kombu's Redis transport with a crash mended and a cost cut.

When the connection to Redis drops, the worker releases the connection and then closes its channels; the
close tries to restore unacknowledged messages through a new client built from the released connection, whose
`client` is None by then. The AttributeError is not a connection error, so kombu does not ignore it and the
worker exits ("Unrecoverable error", seen in the Redis-restart fault test; celery/kombu#582 has the same trace).
Raising a connection error there lets the worker reconnect; the messages it could not restore are the sweeper's.

And kombu builds a new redis client for each operation it does outside its event loop (a message's entry
in the unacknowledged index, its ack, a publish), and redis-py's constructor fills a case-insensitive table of about
160 response callbacks every time: 0.2 ms of CPU each, several times a step. A client holds no connection of its
own (each command borrows one from the pool) and may be shared between threads, so the channel keeps one per pool.
"""

from typing import Any

import redis.exceptions
from kombu.transport import redis as kombu_redis


class RedisChannel(kombu_redis.Channel):
    def _connparams(self, asynchronous: bool = False) -> dict[str, Any]:
        if self.connection.client is None:
            raise redis.exceptions.ConnectionError("the broker connection was released; reconnecting")
        return super()._connparams(asynchronous)

    _shared_client: tuple[Any, Any] | None = None  # (pool, client)

    def _create_client(self, asynchronous: bool = False) -> Any:
        if asynchronous:
            return super()._create_client(asynchronous=True)  # the event loop's: kombu already keeps it
        pool = self.pool
        shared = self._shared_client
        if shared is None or shared[0] is not pool:  # a new pool after a reconnection gets its own client
            shared = self._shared_client = (pool, super()._create_client())
        return shared[1]


class RedisTransport(kombu_redis.Transport):
    Channel = RedisChannel
