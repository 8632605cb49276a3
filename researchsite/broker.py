"""kombu's transports with two failures mended: the filesystem broker's half-written messages, and the Redis
broker's crash when a worker closes its channels after losing Redis.

Filesystem (the embedded mode): kombu creates a message file under its final name and then writes into it, so a
worker polling the folder can take the file in between, read nothing and die on the JSON error (it happened in
the demo's embedded runs). Here a message is written under a name no queue matches and then renamed into place:
a rename within a folder is atomic, so a consumer finds a whole message or none.

Redis: when the connection to Redis drops, the worker releases the connection and then closes its channels; the
close tries to restore unacknowledged messages through a new client built from the released connection, whose
`client` is None by then. The AttributeError is not a connection error, so kombu does not ignore it and the
worker exits ("Unrecoverable error", seen in the Redis-restart fault test; celery/kombu#582 has the same trace).
Raising a connection error there lets the worker reconnect; the messages it could not restore are the sweeper's.

Redis, also: kombu builds a new redis client for each operation it does outside its event loop (a message's entry
in the unacknowledged index, its ack, a publish), and redis-py's constructor fills a case-insensitive table of about
160 response callbacks every time: 0.2 ms of CPU each, several times a step. A client holds no connection of its
own (each command borrows one from the pool) and may be shared between threads, so the channel keeps one per pool.
"""

import os
import uuid
from time import monotonic
from typing import Any

import redis.exceptions
from kombu.exceptions import ChannelError
from kombu.transport import filesystem
from kombu.transport import redis as kombu_redis
from kombu.utils.encoding import str_to_bytes
from kombu.utils.json import dumps


class FilesystemChannel(filesystem.Channel):
    def _put(self, queue: str, payload: Any, **kwargs: Any) -> None:
        # The same name kombu gives a message (its consumers sort and match on it).
        name = f"{int(round(monotonic() * 1000))}_{uuid.uuid4()}.{queue}.msg"
        # No dot: `_get` takes what follows the first dot as the queue, so no queue matches a partial file.
        partial = os.path.join(self.data_folder_out, f"partial-{uuid.uuid4().hex}")
        try:
            with open(partial, "wb") as file:
                file.write(str_to_bytes(dumps(payload)))
            os.replace(partial, os.path.join(self.data_folder_out, name))
        except OSError as exc:
            raise ChannelError(f"Cannot add message {name!r} to {self.data_folder_out!r}") from exc


class FilesystemTransport(filesystem.Transport):
    Channel = FilesystemChannel


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
