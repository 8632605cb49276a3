"""Canary: a TCP listener that counts connections, to prove that blocked fetches never connect."""

from __future__ import annotations

import contextlib
import select
import socket
import threading
import time
from types import TracebackType
from typing import Self


class Canary:
    """Listens on 127.0.0.1 (port 0), accepts and immediately closes every connection, counting them.

    Reading `.hits` first accepts whatever the kernel already queued, so a connection completed before
    the read is always counted, with no sleep needed in the test.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._hits = 0
        self.peers: list[tuple[str, int]] = []
        self._sock: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()

    def start(self) -> Self:
        if self._sock is not None:
            return self
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        sock.listen(128)
        sock.setblocking(False)
        self._sock = sock
        self._stopping.clear()
        self._thread = threading.Thread(target=self._serve, name="Canary", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        sock, self._sock = self._sock, None
        if sock is not None:
            sock.close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._sock is None:
            raise RuntimeError("Canary is not started")
        return int(self._sock.getsockname()[1])

    @property
    def host_port(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"http://{self.host_port}"

    @property
    def hits(self) -> int:
        """Connections accepted so far, including any the kernel has queued but the thread has not taken."""
        self._drain()
        with self._lock:
            return self._hits

    def wait_for_hits(self, n: int, timeout: float = 5.0) -> bool:
        """True once at least `n` connections arrived, False after `timeout`."""
        deadline = time.monotonic() + timeout
        while self.hits < n:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.01)
        return True

    def reset(self) -> None:
        self._drain()
        with self._lock:
            self._hits = 0
            self.peers.clear()

    def _serve(self) -> None:
        while not self._stopping.is_set():
            sock = self._sock
            if sock is None:
                return
            with contextlib.suppress(OSError, ValueError):
                ready, _, _ = select.select([sock], [], [], 0.05)
                if ready:
                    self._drain()

    def _drain(self) -> None:
        sock = self._sock
        if sock is None:
            return
        with self._lock:
            while True:
                try:
                    conn, peer = sock.accept()
                except (BlockingIOError, OSError):
                    return
                self._hits += 1
                self.peers.append(peer[:2])
                conn.close()
