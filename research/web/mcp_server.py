"""The MCP server: research as tools for AI assistants (Claude Desktop, Cursor, IDE agents), over streamable HTTP
at /mcp on the app and over stdio (`python manage.py mcp_server`).

Every tool calls the JSON API inside this process, through Django's own ASGI handler, with the caller's token: the
same views, token check, isolation, quotas and rate limits as any API client, and no second copy of them here. A
tool that the API refuses (another user's research: 404; a read-only token starting work: 403; a limit: 429)
returns that refusal as the tool's error, for the assistant to read."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any, Literal
from urllib.parse import urlencode

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.handlers.asgi import ASGIHandler
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.transport_security import TransportSecuritySettings
from pydantic import BaseModel, Field

from research.control import tokens

FINISHED = frozenset({"completed", "failed", "cancelled"})
# How often a waiting tool looks at its research or answer again: one small read each time.
POLL_SECONDS = 1.0
# The longest a tool waits for a research or an answer; it then says where things stand, and waiting again goes on.
MAX_WAIT_SECONDS = 3600

INSTRUCTIONS = """Deep research searches the web (or the user's document collection), reads the pages, and writes a
long report in which every sentence cites the page it came from. Start one with start_research (wait=true follows it
to its end with progress notifications; a 2x2 research takes minutes), follow it with research_status or
wait_for_research, read it with get_report, ask it follow-up questions with ask_research (answered from its sources
only), and add a branch with deepen_research. list_researches shows the user's researches."""


class QuestionAnswer(BaseModel):
    question: str = Field(description="A clarifying question about the request")
    answer: str = Field(description="The user's answer to it")


class Budget(BaseModel):
    seconds: int | None = Field(None, description="How long the research may run")
    tokens: int | None = Field(None, description="How many model tokens it may spend")
    usd: float | None = Field(None, description="How many dollars it may spend")


# --- the API, in this process ------------------------------------------------------------------------------------

_django: ASGIHandler | None = None


def _host() -> bytes:
    """A host name the app accepts (ALLOWED_HOSTS), for requests that never leave this process."""
    named = [host.lstrip(".") for host in settings.ALLOWED_HOSTS if host not in ("*", "")]
    return (named[0] if named else "localhost").encode()


async def asgi_request(
    app: Any, method: str, path: str, headers: list[tuple[bytes, bytes]], body: bytes = b"", query: str = ""
) -> tuple[int, bytes]:
    """One HTTP request to an ASGI app, without a socket: its status and body. The "client" stays connected until
    the answer is complete (Django stops a view whose client has gone)."""
    answered = asyncio.Event()
    status, chunks, body_sent = 500, [], False

    async def receive() -> dict[str, Any]:
        nonlocal body_sent
        if not body_sent:
            body_sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await answered.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                answered.set()

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "https",  # what SECURE_SSL_REDIRECT wants: nothing here travels in clear
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": query.encode(),
        "headers": [(b"host", _host()), (b"content-length", str(len(body)).encode()), *headers],
        "client": ("127.0.0.1", 0),
        "server": ("127.0.0.1", 443),
    }
    try:
        await app(scope, receive, send)
    finally:
        answered.set()
    return status, b"".join(chunks)


async def call_api(
    authorization: str, method: str, path: str, body: dict[str, Any] | None = None, params: dict[str, str] | None = None
) -> Any:
    """The JSON API's answer to the caller: its JSON (or text); a refusal becomes the tool's error."""
    global _django
    if _django is None:
        _django = ASGIHandler()
    headers = [(b"authorization", authorization.encode()), (b"content-type", b"application/json")]
    raw = json.dumps(body).encode() if body is not None else b""
    status, answer = await asgi_request(_django, method, path, headers, raw, urlencode(params or {}))
    text = answer.decode("utf-8", "replace")
    if status >= 400:
        try:
            message = json.loads(text)["error"]["message"]
        except (ValueError, KeyError, TypeError):
            message = text[:300] or "error"
        raise ToolError(f"{status}: {message}")
    try:
        return json.loads(text)
    except ValueError:
        return text


# --- what the tools answer -----------------------------------------------------------------------------------------


def summary(status: dict[str, Any]) -> dict[str, Any]:
    """A research's state in the few words an assistant needs."""
    research, progress = status["research"], status["progress"]
    return {
        "research_id": research["id"],
        "title": research["title"],
        "status": research["status"],
        "outcome": research["outcome"] or None,
        "stop_reason": research["stop_reason"] or None,
        "error": research["error"] or None,
        "queries_done": progress["queries_done"],
        "queries_planned": max(progress["queries_planned"], progress["queries_created"]),
        "pages_found": progress["pages_found"],
        "pages_analysed": progress["pages_analysed"],
        "report_version": research["report_version"],
    }


def progress_message(state: dict[str, Any]) -> str:
    up_to = "" if state["status"] in FINISHED else "up to "
    return (
        f"{state['status']}: {state['queries_done']} of {up_to}{state['queries_planned']} queries done, "
        f"{state['pages_analysed']} of {state['pages_found']} pages analysed"
    )


_SOURCE = re.compile(r"^(\d+)\. \[(.*?)\]\((\S+?)\)(?: — quoted: (.*))?$")


def report_sources(markdown: str) -> list[dict[str, Any]]:
    """The numbered sources listed under the report's "Sources" heading: number, title, URL and the quotes cited."""
    _, found, listed = markdown.partition("\n## Sources\n")
    sources = []
    for line in listed.splitlines() if found else []:
        if line.startswith("## "):
            break
        match = _SOURCE.match(line.strip())
        if match:
            quotes = re.findall(r"“(.*?)”", match.group(4) or "")
            sources.append(
                {"number": int(match.group(1)), "title": match.group(2), "url": match.group(3), "quotes": quotes}
            )
    return sources


async def follow(ctx: Context, authorization: str, research_id: str, timeout: float) -> dict[str, Any]:
    """Waits for the research to end, notifying progress (a value that only grows: queries ended and pages analysed,
    then one for the report and one for the end); where it is after `timeout` seconds if it has not ended."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + min(max(timeout, 0), MAX_WAIT_SECONDS)
    sent = -1.0
    while True:
        status = await call_api(authorization, "GET", f"/api/research/{research_id}/status")
        state, counts = summary(status), status["progress"]
        ended = counts["queries_done"] + counts["queries_failed"] + counts["queries_cancelled"]
        value = (
            ended
            + counts["pages_analysed"]
            + (state["status"] in ("reporting", *FINISHED))
            + (state["status"] in FINISHED)
        )
        total = max(value, state["queries_planned"] + max(counts["pages_found"], counts["pages_analysed"]) + 2)
        if value > sent:
            await ctx.report_progress(value, total, progress_message(state))
            sent = value
        if state["status"] in FINISHED or loop.time() >= deadline:
            return state
        await asyncio.sleep(POLL_SECONDS)


# --- the server ------------------------------------------------------------------------------------------------------


def build_server(authorization: str | None = None) -> MCPServer:
    """The tools, for callers whose token comes with each HTTP request, or (stdio) the one token given here."""
    server = MCPServer("deep-research", instructions=INSTRUCTIONS)

    def caller(ctx: Context) -> str:
        if authorization:
            return authorization
        value = (ctx.headers or {}).get("authorization")
        if not value:
            raise ToolError("401: a token is needed (Authorization: Bearer <token>)")
        return value

    @server.tool()
    async def start_research(
        prompt: str,
        ctx: Context,
        answers: list[QuestionAnswer] | None = None,
        breadth: int = 2,
        depth: int = 2,
        mode: Literal["fixed", "adaptive"] | None = None,
        budget: Budget | None = None,
        report_length: Literal["brief", "standard", "long"] | None = None,
        wait: bool = False,
        wait_seconds: float = 600,
    ) -> dict[str, Any]:
        """Start a research on `prompt` at once (no clarifying questions are asked; give what you know in `answers`).
        breadth: queries per level (1-10); depth: levels (1-5). With wait=true, follow it to its end with progress
        notifications (at most wait_seconds) and answer its state; else answer its id at once."""
        body: dict[str, Any] = {
            "prompt": prompt,
            "questions": [item.model_dump() for item in answers or []],
            "breadth": breadth,
            "depth": depth,
        }
        if mode is not None:
            body["mode"] = mode
        if budget is not None:
            body["budget"] = budget.model_dump(exclude_none=True)
        if report_length is not None:
            body["report_length"] = report_length
        started = await call_api(caller(ctx), "POST", "/api/research/start", body)
        if not wait:
            return {"research_id": started["research_id"], "status": "queued"}
        return await follow(ctx, caller(ctx), started["research_id"], wait_seconds)

    @server.tool()
    async def research_status(research_id: str, ctx: Context) -> dict[str, Any]:
        """Where a research stands: its status, outcome and progress counts."""
        return summary(await call_api(caller(ctx), "GET", f"/api/research/{research_id}/status"))

    @server.tool()
    async def wait_for_research(research_id: str, ctx: Context, wait_seconds: float = 600) -> dict[str, Any]:
        """Follow a research with progress notifications until it ends (or wait_seconds pass); its state."""
        return await follow(ctx, caller(ctx), research_id, wait_seconds)

    @server.tool()
    async def get_report(research_id: str, ctx: Context) -> dict[str, Any]:
        """The research's report as markdown, every sentence cited [n], with its numbered sources and their quotes."""
        markdown = await call_api(caller(ctx), "GET", f"/api/research/{research_id}/report.md")
        markdown = markdown if isinstance(markdown, str) else json.dumps(markdown)
        return {"research_id": research_id, "markdown": markdown, "sources": report_sources(markdown)}

    @server.tool()
    async def ask_research(research_id: str, question: str, ctx: Context, wait_seconds: float = 300) -> dict[str, Any]:
        """Ask a completed research a question; answered from its own sources only (never the web), cited. Waits
        for the answer (at most wait_seconds)."""
        auth = caller(ctx)
        asked = await call_api(auth, "POST", f"/api/research/{research_id}/ask", {"question": question})
        loop = asyncio.get_running_loop()
        deadline = loop.time() + min(max(wait_seconds, 0), MAX_WAIT_SECONDS)
        while True:
            snapshot = await call_api(auth, "GET", f"/api/research/{research_id}")
            item = next((row for row in snapshot["conversation"] if row["id"] == asked["id"]), None)
            if item and item["status"] == "failed":
                raise ToolError("the answer could not be written")
            if item and item["status"] == "answered":
                return {
                    "question": item["question"],
                    "answer": item["answer"],
                    "sources_answer": item["sources_answer"],
                    "suggested_query": item["suggested_query"] or None,
                }
            if loop.time() >= deadline:
                return {"question": question, "status": item["status"] if item else "pending", "answer": None}
            await asyncio.sleep(POLL_SECONDS)

    @server.tool()
    async def deepen_research(
        research_id: str,
        query: str,
        ctx: Context,
        objective: str | None = None,
        wait: bool = False,
        wait_seconds: float = 600,
    ) -> dict[str, Any]:
        """Dig deeper into a completed research: one more branch searching `query` (for `objective`); its report
        gets a new version. With wait=true, follow it to its end with progress notifications."""
        body = {"query": query} if objective is None else {"query": query, "objective": objective}
        await call_api(caller(ctx), "POST", f"/api/research/{research_id}/deepen", body)
        if wait:
            return await follow(ctx, caller(ctx), research_id, wait_seconds)
        return summary(await call_api(caller(ctx), "GET", f"/api/research/{research_id}/status"))

    @server.tool()
    async def list_researches(ctx: Context, search: str = "") -> list[dict[str, Any]]:
        """The user's researches, newest first (id, title, status, outcome, dates); `search` keeps those whose title
        or request holds its words."""
        answer = await call_api(caller(ctx), "GET", "/api/research", params={"q": search} if search else None)
        return answer["researches"]

    return server


# --- over HTTP, at /mcp ------------------------------------------------------------------------------------------


class McpHttp:
    """/mcp: the MCP server over streamable HTTP, stateless (any web process answers any request), for token
    holders only: a request without a live token is refused (401) before the MCP layer reads it.

    The SDK's DNS-rebinding guard is off: it protects servers without authentication from pages in a browser, and
    a page cannot send this server's bearer token (browsers add no Authorization header across origins without a
    CORS preflight, which this app never allows)."""

    def __init__(self) -> None:
        self.server = build_server()
        self.server.streamable_http_app(
            streamable_http_path="/mcp",
            stateless_http=True,
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )
        self.manager = self.server.session_manager
        self._running: asyncio.Event | None = None
        self._task: asyncio.Task | None = None

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        headers = dict(scope.get("headers") or [])
        scheme, _, secret = headers.get(b"authorization", b"").decode("latin-1").partition(" ")
        token = await sync_to_async(tokens.authenticate)(secret.strip()) if scheme.lower() == "bearer" else None
        if token is None:
            await _refuse(send, 401, "a live API token is needed: Authorization: Bearer <token>")
            return
        await self._start()
        await self.manager.handle_request(scope, receive, send)

    async def _start(self) -> None:
        """The session manager runs for the life of the process (daphne sends no ASGI lifespan events), started
        by the first request."""
        if self._running is None:
            self._running = asyncio.Event()
            self._task = asyncio.get_running_loop().create_task(self._run(self._running))
        await self._running.wait()

    async def _run(self, running: asyncio.Event) -> None:
        async with self.manager.run():
            running.set()
            await asyncio.Event().wait()


async def _refuse(send: Any, status: int, message: str) -> None:
    body = json.dumps({"error": {"field": None, "message": message}}).encode()
    headers = [(b"content-type", b"application/json"), (b"www-authenticate", b'Bearer error="invalid_token"')]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
