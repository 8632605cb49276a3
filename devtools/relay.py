"""A simulated host for tests and benchmarks: its workers reach PostgreSQL and Redis through TCP relays that the
test cuts and restores, as a network partition cuts a real host off.

A cut relay forwards nothing either way and connects no new client onward, but closes nothing: the host's
connections hang as they do behind a dead switch (a send fills buffers, a read waits), its heartbeats stop renewing
its leases, and when the relay is restored what was held flows on and the host finishes its steps late. Network
namespaces would show the same from the kernel's side; a relay needs no privileges, runs the same on every machine
and CI, and leaves nothing behind once closed (its sockets and threads are this process's).
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from urllib.parse import urlsplit, urlunsplit

CHUNK = 65536


class Relay:
    """Forwards connections made to `127.0.0.1:<port>` to `target`, until it is cut."""

    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self._open = threading.Event()
        self._open.set()
        self._closed = threading.Event()
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._acceptor = threading.Thread(target=self._accept, name=f"relay-{self.port}", daemon=True)
        self._acceptor.start()

    def cut(self) -> None:
        self._open.clear()

    def restore(self) -> None:
        self._open.set()

    def close(self) -> None:
        """Close the listener and every connection; the threads end with them."""
        self._closed.set()
        self._open.set()  # wake every waiting pump, which then finds the relay closed
        # Closing the listener alone leaves the thread blocked in accept(), and the kernel's socket with it (still
        # accepting connections); shutting it down first wakes that thread.
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            self._listener.close()
        self._acceptor.join(timeout=5)
        with self._lock:
            for sock in self._sockets:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                with contextlib.suppress(OSError):
                    sock.close()
            self._sockets.clear()

    def _track(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.append(sock)

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            self._track(client)
            threading.Thread(target=self._connect, args=(client,), daemon=True).start()

    def _connect(self, client: socket.socket) -> None:
        self._open.wait()  # a cut host reaches nothing: the connection is held, neither refused nor made
        if self._closed.is_set():
            return
        try:
            upstream = socket.create_connection(self.target, timeout=10)
        except OSError:
            with contextlib.suppress(OSError):
                client.close()
            return
        upstream.settimeout(None)
        self._track(upstream)
        threading.Thread(target=self._pump, args=(client, upstream), daemon=True).start()
        threading.Thread(target=self._pump, args=(upstream, client), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while True:
                data = source.recv(CHUNK)
                if not data:
                    break
                self._open.wait()  # held while cut, passed on once restored
                if self._closed.is_set():
                    break
                sink.sendall(data)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                sink.shutdown(socket.SHUT_WR)


class SimulatedHost:
    """A host of the fleet: its own relays to PostgreSQL and Redis, and the environment its processes run with
    (the database and broker through the relays, and its own name in every lease it takes)."""

    def __init__(self, name: str, database_url: str, redis_url: str) -> None:
        self.name = name
        self.database = _relay_for(database_url, 5432)
        self.redis = _relay_for(redis_url, 6379)
        self.database_url = _through(database_url, self.database)
        self.redis_url = _through(redis_url, self.redis)

    def env(self, base: dict[str, str]) -> dict[str, str]:
        return {**base, "DATABASE_URL": self.database_url, "REDIS_URL": self.redis_url, "WORKER_HOST": self.name}

    def cut(self, database: bool = True, redis: bool = True) -> None:
        """Cut the host off from the database, the broker, or both."""
        if database:
            self.database.cut()
        if redis:
            self.redis.cut()

    def restore(self) -> None:
        self.database.restore()
        self.redis.restore()

    def close(self) -> None:
        self.database.close()
        self.redis.close()


@contextlib.contextmanager
def simulated_host(name: str, database_url: str, redis_url: str) -> Iterator[SimulatedHost]:
    host = SimulatedHost(name, database_url, redis_url)
    try:
        yield host
    finally:
        host.close()


def _relay_for(url: str, default_port: int) -> Relay:
    parts = urlsplit(url)
    return Relay(parts.hostname or "127.0.0.1", parts.port or default_port)


def _through(url: str, relay: Relay) -> str:
    """The URL with its host and port replaced by the relay's, its credentials kept."""
    parts = urlsplit(url)
    credentials = parts.netloc.rpartition("@")[0]
    netloc = f"{credentials}@127.0.0.1:{relay.port}" if credentials else f"127.0.0.1:{relay.port}"
    return urlunsplit(parts._replace(netloc=netloc))
