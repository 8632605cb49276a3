"""Pushes: a research's new events and what they changed, sent over the channel layer a moment after they commit.

Pushes are coalesced, as live updates may be: after a commit the research is marked dirty, and a flusher thread
in this process sends, once per PUSH_INTERVAL, one message per dirty research carrying every event since the
last push and the delta of its state since the last push (research/live/delta.py). A Redis lock per research and a
Redis record of the last push (its seq and its view) make processes take turns, so events go out once and in
order whichever worker recorded them, and each delta follows the one before. The database stays the record: a lost
push costs nothing, because a client that sees a seq gap or reconnects reads the missing events and the whole
state back.
"""

import logging
import threading
import uuid
from dataclasses import dataclass
from typing import Any, cast

import redis
from asgiref.sync import async_to_sync
from channels.layers import BaseChannelLayer, get_channel_layer
from django.conf import settings
from django.db import OperationalError, close_old_connections, connections, transaction
from psycopg.errors import LockNotAvailable

from research.live.delta import PUSH_LOCK_TIMEOUT_MS, Since, drop_rows, read_push, row_digests
from research.models import Research
from research.record.numbering import number
from research.types import ResearchId

# What the sidebar shows of a research (research_summary in research/live/snapshot.py), from each push's delta.
SIDEBAR_FIELDS = ("id", "title", "status", "outcome", "stop_reason", "created_at", "finished_at")
log = logging.getLogger(__name__)

MAX_EVENTS_PER_PUSH = 500
# Without a record of the last push (new research, or Redis was emptied), push at most this many old events.
FRESH_HISTORY = 200
PUSH_RECORD_SECONDS = 7 * 24 * 3600


def research_group(research_id: ResearchId) -> str:
    return f"research-{research_id}"


def user_group(user_id: int) -> str:
    return f"user-{user_id}"


def session_group(session_key: str) -> str:
    """The websockets opened by one browser session: a logout closes them (`close_session_sockets`)."""
    return f"session-{session_key}"


def _channel_layer() -> BaseChannelLayer:
    layer = get_channel_layer()
    if layer is None:  # CHANNEL_LAYERS always names one (researchsite/settings.py)
        raise RuntimeError("no channel layer is configured")
    return layer


def close_session_sockets(sender: Any, request: Any, user: Any, **kwargs: Any) -> None:
    """On logout (Django's user_logged_out, sent before the session is flushed): tell the session's sockets to
    close, so an open tab stops receiving the moment its user signs out. Best effort, like every push."""
    session_key = getattr(getattr(request, "session", None), "session_key", None)
    if not session_key:
        return
    try:
        async_to_sync(_channel_layer().group_send)(session_group(session_key), {"type": "session.ended"})
    except Exception:
        log.warning("could not close the websockets of a logged-out session", exc_info=True)


def push_on_commit(research_id: ResearchId) -> None:
    """Queue the push of the research's new events for when the current transaction commits."""
    transaction.on_commit(lambda: _pusher.mark(str(research_id)))


class _Pusher:
    """Per-process flusher: coalesces the pushes of every research this process recorded events for."""

    def __init__(self) -> None:
        self._dirty: set[str] = set()
        self._wake = threading.Condition()
        self._thread: threading.Thread | None = None
        self._state: PushState | None = None
        # Set while nothing is marked and the flusher holds no database connection.
        self._idle = threading.Event()
        self._idle.set()

    def mark(self, research_id: str) -> None:
        with self._wake:
            self._idle.clear()
            self._dirty.add(research_id)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="event-pusher", daemon=True)
                self._thread.start()
            self._wake.notify()

    def _run(self) -> None:
        while True:
            with self._wake:
                if not self._dirty:
                    # Idle: give the connection back rather than hold it open between bursts.
                    connections.close_all()
                    self._idle.set()
                while not self._dirty:
                    self._wake.wait()
            # Let the events of a busy moment gather into one push.
            threading.Event().wait(settings.PUSH_INTERVAL)
            with self._wake:
                batch, self._dirty = self._dirty, set()
            close_old_connections()
            for research_id in batch:
                try:
                    if not flush(research_id, self._push_state()):
                        self.mark(research_id)  # another process holds the turn: try again next round
                except OperationalError as error:
                    if not isinstance(error.__cause__, LockNotAvailable):
                        log.warning("push for research %s failed", research_id, exc_info=True)
                        continue
                    # A table was locked exclusively (a migration, a TRUNCATE): this push stepped aside.
                    log.info("push for research %s waits for a table lock; trying again next round", research_id)
                    self.mark(research_id)
                except Exception:  # pushing is best effort; clients catch up from the database
                    log.warning("push for research %s failed", research_id, exc_info=True)

    def wait_idle(self, timeout: float) -> bool:
        """Wait until every marked research is pushed and the connection given back (a test database about to
        be dropped); False if that took longer than `timeout` seconds."""
        return self._idle.wait(timeout)

    def _push_state(self) -> "PushState":
        if self._state is None:
            self._state = RedisPushState()
        return self._state


@dataclass(frozen=True)
class Pushed:
    """The last push of a research: its last event's seq, and where its state was (the next delta's base)."""

    seq: int
    state: Since


class PushState:
    """Whose turn it is to push a research, and its last push."""

    def acquire(self, research_id: str) -> str | None:
        raise NotImplementedError

    def release(self, research_id: str, token: str) -> None:
        raise NotImplementedError

    def pushed(self, research_id: str) -> Pushed | None:
        raise NotImplementedError

    def set_pushed(self, research_id: str, pushed: Pushed, digests: dict[str, str], whole: bool) -> None:
        """Record the push, and the digests of the rows it carried (`whole`: of every row, replacing the rest)."""
        raise NotImplementedError

    def sent_digests(self, research_id: str, keys: list[str]) -> dict[str, str]:
        """The digests of these rows as the pushes last carried them (unknown ones left out)."""
        return {}


class RedisPushState(PushState):
    """Shared by every process, so processes take turns per research and never push an event twice."""

    def __init__(self) -> None:
        self.client = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=5)

    def acquire(self, research_id: str) -> str | None:
        token = uuid.uuid4().hex
        return token if self.client.set(f"push-lock:{research_id}", token, nx=True, px=10_000) else None

    def release(self, research_id: str, token: str) -> None:
        # Release only our own lock (it may have expired and been taken by another process).
        if self.client.get(f"push-lock:{research_id}") == token.encode():
            self.client.delete(f"push-lock:{research_id}")

    def pushed(self, research_id: str) -> Pushed | None:
        # The synchronous client: its replies are values, never awaitables.
        seq, state = cast(list[bytes | None], self.client.mget(f"push-seq:{research_id}", f"push-state:{research_id}"))
        if seq is None:
            return None
        # "<state seq>:<xmin>"; without it (an older record, or lost) the next delta is a whole one.
        state_seq, _, xmin = (state or b"").decode().partition(":")
        if not (state_seq.isdigit() and xmin.isdigit()):
            return Pushed(int(seq), Since())
        return Pushed(int(seq), Since(int(state_seq), int(xmin)))

    def set_pushed(self, research_id: str, pushed: Pushed, digests: dict[str, str], whole: bool) -> None:
        xmin = "" if pushed.state.xmin is None else pushed.state.xmin
        rows = f"push-rows:{research_id}"
        with self.client.pipeline() as record:  # MULTI/EXEC: a reader sees all of it or none
            record.set(f"push-seq:{research_id}", pushed.seq, ex=PUSH_RECORD_SECONDS)
            record.set(f"push-state:{research_id}", f"{pushed.state.seq}:{xmin}", ex=PUSH_RECORD_SECONDS)
            if whole:
                record.delete(rows)
            if digests:
                record.hset(rows, mapping=digests)
                record.expire(rows, PUSH_RECORD_SECONDS)
            record.execute()

    def sent_digests(self, research_id: str, keys: list[str]) -> dict[str, str]:
        values = cast(list[bytes | None], self.client.hmget(f"push-rows:{research_id}", keys))
        return {key: value.decode() for key, value in zip(keys, values, strict=True) if value is not None}


_pusher = _Pusher()


def flush(research_id: str, state: PushState) -> bool:
    """Push the research's events since the last push, with the delta of its state. False if not our turn."""
    token = state.acquire(research_id)
    if token is None:
        return False
    try:
        try:
            # The events this push is for were committed unnumbered (research/record/events.py). Like the push's read,
            # the numbering steps aside from a table locked exclusively (a migration, a TRUNCATE): holding the research
            # row, it would wait for the events table while the other waited for the research table, a deadlock.
            number(research_id, lock_timeout_ms=PUSH_LOCK_TIMEOUT_MS)
        except Research.DoesNotExist:
            return True
        research = Research.objects.filter(pk=research_id).values("last_event_seq", "owner_id").first()
        if research is None:
            return True
        pushed = state.pushed(research_id)
        after = pushed.seq if pushed is not None else max(0, research["last_event_seq"] - FRESH_HISTORY)
        try:
            since = pushed.state if pushed is not None else None
            # With PUSH_CHECKSUMS the push also carries the checksum of the whole snapshot read in the same view,
            # so a test can check that a client applying the delta holds exactly that snapshot.
            events, delta, xmin, checksum = read_push(
                research_id, after, MAX_EVENTS_PER_PUSH, since, checksum=settings.PUSH_CHECKSUMS
            )
        except Research.DoesNotExist:
            return True
        if not events:
            return True
        # A row can come again unchanged (written just before the last push's view, or written with the same
        # values, as a renewed lease is): rows whose digest is the one last pushed are left out. A client that
        # missed that push sees the gap in the events and gets the whole state.
        digests = row_digests(delta)
        whole = delta["base"] == 0
        if digests and not whole:
            sent = state.sent_digests(research_id, list(digests))
            drop_rows(delta, {key for key, digest in digests.items() if sent.get(key) == digest})
        message = {"type": "research.update", "events": events, "delta": delta}
        if checksum is not None:
            message["checksum"] = checksum
        send = async_to_sync(_channel_layer().group_send)
        send(research_group(research_id), message)
        summary = {key: delta["research"][key] for key in SIDEBAR_FIELDS}
        send(user_group(research["owner_id"]), {"type": "sidebar.update", "research": summary})
        state_seq = delta["research"]["last_event_seq"]
        state.set_pushed(research_id, Pushed(events[-1]["seq"], Since(state_seq, xmin)), digests, whole)
        if events[-1]["seq"] < state_seq:
            _pusher.mark(research_id)  # more than one message's worth: the rest next round
        return True
    finally:
        state.release(research_id, token)
