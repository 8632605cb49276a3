"""The MCP server, tested with the SDK's own client, on the real stack (daphne, the Celery workers, PostgreSQL,
Redis) and the loopback fakes: over streamable HTTP at /mcp and over stdio (`manage.py mcp_server`), a research is
started, its progress notified while it runs, its report read with its sources, and a question asked of it; another
user's token finds none of it; a read-only token cannot start one; a revoked token is refused at once."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import httpx2
import pytest
import requests
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from devtools.servers import process_env
from research.control import tokens
from research.models import AskedQuestion, Document, DocumentKind, Research, ResearchStatus
from tests.support.e2e import WORKER_ENV

pytestmark = pytest.mark.django_db(transaction=True)

ROOT = Path(__file__).resolve().parent.parent
PROMPT = "How do heat pumps perform in cold climates?"
TOOLS = {
    "start_research",
    "research_status",
    "wait_for_research",
    "get_report",
    "ask_research",
    "deepen_research",
    "list_researches",
}


def over_http(base: str, secret: str) -> Client:
    headers = {"Authorization": f"Bearer {secret}"}
    http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300))
    return Client(streamable_http_client(f"{base}/mcp", http_client=http))


def over_stdio(secret: str, internet: dict[str, str]) -> Client:
    env = process_env({**WORKER_ENV, **internet, "DEEPRESEARCH_TOKEN": secret, "DEBUG": "false"})
    return Client(StdioServerParameters(command=sys.executable, args=["manage.py", "mcp_server"], env=env, cwd=ROOT))


async def call(client: Client, tool: str, arguments: dict[str, Any], progress: list | None = None) -> Any:
    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, total, message))

    result = await client.call_tool(tool, arguments, progress_callback=on_progress if progress is not None else None)
    if result.is_error:
        return RuntimeError(" ".join(getattr(block, "text", "") for block in result.content))
    return result.structured_content


async def research_through(client: Client) -> dict[str, Any]:
    """start (waiting, with progress) → report → status → ask → list, as an assistant would; what each answered."""
    seen: dict[str, Any] = {"progress": []}
    async with client:
        seen["tools"] = {tool.name for tool in (await client.list_tools()).tools}
        arguments = {"prompt": PROMPT, "breadth": 2, "depth": 1, "wait": True}
        seen["state"] = state = await call(client, "start_research", arguments, seen["progress"])
        assert not isinstance(state, Exception), state
        research_id = state["research_id"]
        seen["report"] = await call(client, "get_report", {"research_id": research_id})
        seen["status"] = await call(client, "research_status", {"research_id": research_id})
        seen["answer"] = await call(client, "ask_research", {"research_id": research_id, "question": "Which climates?"})
        listed = await call(client, "list_researches", {})
        seen["listed"] = listed["result"] if isinstance(listed, dict) else listed
    return seen


def assert_research_went_through(seen: dict[str, Any], owner) -> str:
    """The research the assistant ran is the owner's, completed; what it read is what is stored."""
    assert TOOLS <= seen["tools"]
    state = seen["state"]
    assert state["status"] == "completed" and state["outcome"] == "complete", state
    research = Research.objects.get(pk=state["research_id"])
    assert research.owner == owner and research.status == ResearchStatus.COMPLETED
    report = seen["report"]
    assert report["markdown"] == Document.objects.get(research=research, kind=DocumentKind.REPORT).markdown
    assert report["sources"] and all(source["url"].startswith("http") for source in report["sources"])
    assert seen["status"]["status"] == "completed" and seen["status"]["pages_analysed"] > 0
    answer = seen["answer"]
    assert not isinstance(answer, Exception), answer
    assert answer["answer"] == AskedQuestion.objects.get(research=research).answer
    assert str(research.pk) in {row["id"] for row in seen["listed"]}
    assert_progress_notified(seen["progress"])
    return str(research.pk)


def assert_progress_notified(progress: list) -> None:
    values = [value for value, _, _ in progress]
    assert len(values) >= 2 and values == sorted(set(values)), progress  # only ever growing
    assert all(total is None or value <= total for value, total, _ in progress)
    assert progress[-1][2].startswith("completed:"), progress


def test_mcp_over_http_starts_follows_reads_and_asks(daphne, workers, research_model, user, other_user) -> None:
    # given alice's token, and mallory's
    _, secret = tokens.create(user, "assistant", read_only=False)
    _, theirs = tokens.create(other_user, "assistant", read_only=False)
    # when alice's assistant runs a research through /mcp
    seen = asyncio.run(research_through(over_http(daphne.url, secret)))
    # then it is hers, progress was notified while it ran, it ended with its report, and a question was answered
    research_id = assert_research_went_through(seen, user)

    # and mallory's assistant finds none of it
    async def as_mallory() -> list:
        async with over_http(daphne.url, theirs) as client:
            answers = [
                await call(client, tool, {"research_id": research_id, **extra})
                for tool, extra in [
                    ("research_status", {}),
                    ("get_report", {}),
                    ("ask_research", {"question": "Why?"}),
                    ("deepen_research", {"query": "more"}),
                ]
            ]
            return [*answers, await call(client, "list_researches", {})]

    *refused, listed = asyncio.run(as_mallory())
    assert all(isinstance(answer, Exception) and "404" in str(answer) for answer in refused), refused
    assert research_id not in str(listed)
    assert AskedQuestion.objects.filter(research_id=research_id).count() == 1


def test_mcp_over_http_refuses_a_read_only_start_and_a_revoked_token(daphne, user) -> None:
    _, read_only = tokens.create(user, "reader", read_only=True)
    revoked, secret = tokens.create(user, "old", read_only=False)

    async def read_only_start() -> Any:
        async with over_http(daphne.url, read_only) as client:
            return await call(client, "start_research", {"prompt": PROMPT})

    refused = asyncio.run(read_only_start())
    assert isinstance(refused, Exception) and "403" in str(refused) and "read-only" in str(refused)
    assert not Research.objects.exists()
    tokens.revoke(user, revoked.pk)
    answer = requests.post(f"{daphne.url}/mcp", json={}, headers={"Authorization": f"Bearer {secret}"}, timeout=10)
    assert answer.status_code == 401 and answer.headers["WWW-Authenticate"].startswith("Bearer")
    assert requests.post(f"{daphne.url}/mcp", json={}, timeout=10).status_code == 401


def test_mcp_over_stdio_starts_follows_reads_and_asks(workers, research_model, internet, user) -> None:
    _, secret = tokens.create(user, "desktop", read_only=False)
    seen = asyncio.run(research_through(over_stdio(secret, internet)))
    assert_research_went_through(seen, user)
