"""Shared base for the loopback fakes: a threaded HTTP server on 127.0.0.1 with a request log.

Subclasses implement `handle(request)` and answer through the helpers on `Request`
(`send`, `send_json`, `start_chunked`/`write_chunk`/`end_chunked`, `start_stream`/`write`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
import traceback
from collections.abc import Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Self
from urllib.parse import parse_qs, urlsplit

logger = logging.getLogger(__name__)

# Errors that only mean "the client went away"; clients that abort big or slow bodies are expected here.
CLIENT_GONE = (BrokenPipeError, ConnectionResetError, ConnectionAbortedError, TimeoutError)


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the fake saw it, before it answered."""

    method: str
    path: str  # URL path without the query string
    target: str  # the raw request target, with the query string
    query: dict[str, str]  # last value of each query parameter
    headers: dict[str, str]
    raw_body: bytes
    body: Any  # parsed JSON, a form dict, or None when empty or unparseable
    time: float = field(default_factory=time.time)


def parse_body(raw: bytes, content_type: str) -> Any:
    """Parse a request body as JSON or a urlencoded form; None when it is neither."""
    if not raw:
        return None
    if "application/x-www-form-urlencoded" in content_type:
        return {k: v[-1] for k, v in parse_qs(raw.decode("utf-8", "replace")).items()}
    try:
        return json.loads(raw)
    except ValueError:
        return None


class Request(BaseHTTPRequestHandler):
    """The request handler; one per connection, reused for keep-alive requests."""

    protocol_version = "HTTP/1.1"  # keep-alive and chunked bodies, as real servers speak
    timeout = 30  # idle keep-alive connections must not pin a thread forever
    # Headers and body go out in separate writes; with Nagle on, delayed ACKs add ~40 ms to every response.
    disable_nagle_algorithm = True
    server: _Server
    record: RecordedRequest

    def log_message(self, format: str, *args: Any) -> None:
        """Stay quiet: one stderr line per request drowns test output."""

    def do_GET(self) -> None:
        self._dispatch()

    do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = do_GET

    @property
    def query(self) -> dict[str, str]:
        return self.record.query

    @property
    def body(self) -> Any:
        return self.record.body

    def _dispatch(self) -> None:
        owner = self.server.owner
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length > 0 else b""
        split = urlsplit(self.path)
        self.record = RecordedRequest(
            method=self.command,
            path=split.path,
            target=self.path,
            query={k: v[-1] for k, v in parse_qs(split.query, keep_blank_values=True).items()},
            headers={k: v for k, v in self.headers.items()},
            raw_body=raw,
            body=parse_body(raw, self.headers.get("Content-Type", "")),
        )
        owner._log(self.record)
        self._headers_sent = False
        owner._enter()
        try:
            owner.handle(self)
        except CLIENT_GONE:
            self.close_connection = True
        except Exception as exc:  # noqa: BLE001 - a bug in a fake must show up in the test, not hang the client
            owner._error(exc)
            self.close_connection = True
            if not self._headers_sent:
                text = "fake server error\n" + traceback.format_exc()
                with contextlib.suppress(*CLIENT_GONE):
                    self.send(500, text, "text/plain; charset=utf-8")
        finally:
            owner._leave()

    # --- response helpers ---

    def start(self, status: int, headers: Mapping[str, str] | None = None) -> None:
        """Send the status line and headers (no Content-Length added here)."""
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self._headers_sent = True

    def send(
        self,
        status: int,
        body: bytes | str = b"",
        content_type: str | None = "text/html; charset=utf-8",
        headers: Mapping[str, str] | None = None,
    ) -> None:
        """Send a complete response with a Content-Length; content_type None sends no Content-Type at all."""
        data = body.encode("utf-8") if isinstance(body, str) else body
        merged: dict[str, str] = {}
        if content_type is not None:
            merged["Content-Type"] = content_type
        merged.update(headers or {})
        # 1xx, 204 and 304 responses cannot carry a body.
        if status < 200 or status in (204, 304):
            data = b""
        else:
            merged["Content-Length"] = str(len(data))
        self.start(status, merged)
        self.write(data)

    def send_json(self, status: int, obj: Any, headers: Mapping[str, str] | None = None) -> None:
        self.send(status, json.dumps(obj), "application/json", headers)

    def write(self, data: bytes) -> None:
        """Write raw body bytes (nothing for HEAD)."""
        if data and self.command != "HEAD":
            self.wfile.write(data)
            self.wfile.flush()

    def start_stream(
        self,
        status: int,
        content_type: str,
        length: int | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        """Start a streamed body; without a length the connection closes at the end, like HTTP/1.0."""
        merged = {"Content-Type": content_type, **(headers or {})}
        if length is None:
            merged["Connection"] = "close"
            self.close_connection = True
        else:
            merged["Content-Length"] = str(length)
        self.start(status, merged)

    def start_chunked(self, status: int, content_type: str, headers: Mapping[str, str] | None = None) -> None:
        self.start(status, {"Content-Type": content_type, "Transfer-Encoding": "chunked", **(headers or {})})

    def write_chunk(self, data: bytes) -> None:
        if data:
            self.write(b"%x\r\n%s\r\n" % (len(data), data))

    def end_chunked(self) -> None:
        self.write(b"0\r\n\r\n")


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # Do not join handler threads on close: keep-alive connections would make stop() wait for their timeout.
    block_on_close = False
    # The stdlib default backlog of 5 resets connections when many workers call at once.
    request_queue_size = 512
    owner: FakeServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Quiet: errors inside handlers are already recorded by the owner."""


class FakeServer:
    """Base for the loopback fakes: start/stop, url, request log, reset."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._requests: list[RecordedRequest] = []
        self._in_flight = 0
        self.max_in_flight = 0  # the most requests it was answering at once since the last reset
        self.errors: list[str] = []  # exceptions raised inside the fake, to debug fakes
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()

    # --- lifecycle ---

    def start(self) -> Self:
        """Bind 127.0.0.1 on a free port and serve in a daemon thread; idempotent."""
        if self._httpd is not None:
            return self
        self._stopping.clear()
        httpd = _Server(("127.0.0.1", 0), Request)
        httpd.owner = self
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, name=type(self).__name__, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving; sleeping handlers wake up and give up."""
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        self._stopping.set()
        httpd.shutdown()
        httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError(f"{type(self).__name__} is not started")
        return int(self._httpd.server_address[1])

    @property
    def host_port(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"http://{self.host_port}"

    # --- log and switches ---

    @property
    def requests(self) -> list[RecordedRequest]:
        """A copy of the request log, oldest first."""
        with self._lock:
            return list(self._requests)

    def reset(self) -> None:
        """Clear the request log, the recorded errors and every switch."""
        with self._lock:
            self._requests.clear()
            self.errors.clear()
            self.max_in_flight = self._in_flight
            self.reset_switches()

    def reset_switches(self) -> None:
        """Put every switch back to its default; subclasses extend it."""

    def sleep(self, seconds: float) -> bool:
        """Sleep unless the server is stopping; True when the full time elapsed."""
        if seconds <= 0:
            return True
        return not self._stopping.wait(seconds)

    def handle(self, request: Request) -> None:
        """Answer one request; subclasses override."""
        request.send(404, "not found\n", "text/plain; charset=utf-8")

    def _enter(self) -> None:
        with self._lock:
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)

    def _leave(self) -> None:
        with self._lock:
            self._in_flight -= 1

    def _log(self, record: RecordedRequest) -> None:
        with self._lock:
            self._requests.append(record)

    def _error(self, exc: BaseException) -> None:
        logger.error("%s handler failed: %r", type(self).__name__, exc, exc_info=exc)
        with self._lock:
            self.errors.append(f"{type(exc).__name__}: {exc}")
