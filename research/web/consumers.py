"""Websocket consumers: the sidebar list and the live log of one research.

A research socket gets the whole state (the snapshot) with the history on connect and on catch-up, and after that
each push's events with the delta of the state since the push before (research/live/delta.py).

Ownership is checked before a socket joins any group; a stranger's or an anonymous socket is closed with no
data (asgi.py refuses foreign origins before that). Channel layers deliver at most once, so a client that sees a
seq gap sends {"type": "catch_up", "after": <last seq>} and gets the missing events from the database; a client
that reconnects opens `/ws/research/<id>/?after=<last seq>` and gets only what it missed. The sidebar has no
seqs to spot a gap with: its client sends {"type": "list"} now and then while something runs, and gets the
whole list again. A logout closes the sockets its session opened (research/live/push.py: session_group).
"""

import json
import uuid
from typing import Any, cast
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from research.live.push import research_group, session_group, user_group
from research.live.snapshot import read_history, research_summary
from research.models import Research
from research.web.validation import MAX_SEQ, seq_param

HISTORY_LIMIT = 20_000


class _JsonConsumer(AsyncJsonWebsocketConsumer):
    joined: list[str]

    async def join(self, group: str) -> None:
        """Listen to `group`, and to this socket's session group, where a logout says the session has ended."""
        # Only signed-in sockets join, and a signed-in session is saved: it has a key.
        self.joined = [group, session_group(cast(str, self.scope["session"].session_key))]
        for name in self.joined:
            await self.channel_layer.group_add(name, self.channel_name)

    async def disconnect(self, code: int) -> None:
        for name in getattr(self, "joined", []):
            await self.channel_layer.group_discard(name, self.channel_name)

    async def session_ended(self, message: dict[str, Any]) -> None:
        # Logged out in this browser: what the socket was let in to see ends with the session it was let in by.
        await self.close(code=4401)

    @classmethod
    async def encode_json(cls, content: Any) -> str:
        return encode(content)

    async def send_json(self, content: Any, close: bool = False) -> None:
        """Send a message, in parts where it is larger than a websocket message may be: daphne's server refuses
        messages over 1 MiB, and the state of a large research (a 10x5's is about 2 MB) is more than that."""
        text = encode(content)
        if len(text) <= PART_CHARS:
            await self.send(text_data=text, close=close)
            return
        message_id = uuid.uuid4().hex
        parts = [text[start : start + PART_CHARS] for start in range(0, len(text), PART_CHARS)]
        for index, part in enumerate(parts):
            last = index == len(parts) - 1
            piece = {"type": "part", "id": message_id, "index": index, "count": len(parts), "text": part}
            await self.send(text_data=encode(piece), close=close and last)

    @classmethod
    async def decode_json(cls, text_data: str) -> Any:
        # A malformed message is ignored rather than allowed to crash the consumer (and drop the socket).
        try:
            return json.loads(text_data)
        except ValueError:
            return None


class SidebarConsumer(_JsonConsumer):
    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=4401)
            return
        await self.join(user_group(user.pk))
        await self.accept()
        await self._send_list()

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        # A lost push (a missed "completed", say) would leave the sidebar wrong until a reload; the list from the
        # database repairs it.
        if isinstance(content, dict) and content.get("type") == "list":
            await self._send_list()

    async def _send_list(self) -> None:
        user = self.scope["user"]
        assert user is not None  # connect lets in signed-in users only
        await self.send_json({"type": "researches", "researches": await self._researches(user.pk)})

    async def sidebar_update(self, message: dict[str, Any]) -> None:
        await self.send_json({"type": "research", "research": message["research"]})

    @database_sync_to_async
    def _researches(self, user_id: int) -> list[dict[str, Any]]:
        return [research_summary(r) for r in Research.objects.filter(owner_id=user_id).order_by("-created_at")[:500]]


class ResearchConsumer(_JsonConsumer):
    async def connect(self) -> None:
        user = self.scope.get("user")
        research_id = self.scope["url_route"]["kwargs"]["research_id"]
        if user is None or not user.is_authenticated or not await self._owns(user.pk, research_id):
            await self.close(code=4404)
            return
        self.research_id = research_id
        # Join first, then read: an event committed in between arrives twice (clients drop seqs they have)
        # rather than not at all.
        await self.join(research_group(uuid.UUID(research_id)))
        await self.accept()
        await self._send_history(_after_from_query(self.scope.get("query_string", b"")))

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        if isinstance(content, dict) and content.get("type") == "catch_up":
            after = content.get("after")
            if isinstance(after, int) and not isinstance(after, bool) and after >= 0:
                await self._send_history(after)

    async def _send_history(self, after: int) -> None:
        after = min(after, MAX_SEQ)
        try:
            events, snapshot = await self._history(after)
        except Research.DoesNotExist:  # deleted while watched
            await self.close(code=4404)
            return
        await self.send_json({"type": "history", "after": after, "events": events, "snapshot": snapshot})

    async def research_update(self, message: dict[str, Any]) -> None:
        await self.send_json(update_message(message))

    @database_sync_to_async
    def _owns(self, user_id: int, research_id: str) -> bool:
        try:
            pk = uuid.UUID(research_id)
        except ValueError:
            return False
        return Research.objects.filter(pk=pk, owner_id=user_id).exists()

    @database_sync_to_async
    def _history(self, after: int) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        return read_history(self.research_id, after, HISTORY_LIMIT)


# Characters of a message sent whole; a longer one goes in parts of this many characters. A part's JSON is at most
# 6 bytes per character (a control character escaped as \u00XX), so 150,000 stay well under daphne's 1 MiB.
PART_CHARS = 150_000


def encode(content: Any) -> str:
    """The JSON text of a message: compact (no spaces after separators) and UTF-8 rather than \\u escapes, about a
    tenth fewer bytes than json.dumps' default on a research's pushes."""
    return json.dumps(content, separators=(",", ":"), ensure_ascii=False)


def update_message(message: dict[str, Any]) -> dict[str, Any]:
    """What a browser gets for a push: its events and the delta of the state (research/live/delta.py), and the
    checksum of the state when pushes carry one."""
    update = {"type": "update", "events": message["events"], "delta": message["delta"]}
    if "checksum" in message:
        update["checksum"] = message["checksum"]
    return update


def _after_from_query(query_string: bytes) -> int:
    """The `after` of `?after=<seq>` (a reconnecting client's last seq); larger values mean "nothing newer" (as
    `catch_up` clamps them); 0, the whole history, otherwise."""
    values = parse_qs(query_string.decode("latin-1")).get("after", [])
    if not values or not (values[-1].isascii() and values[-1].isdigit()):
        return 0
    after = seq_param(values[-1])
    return MAX_SEQ if after is None else after
