"""Reference schedulers: small models of how other deep-research tools order the same work.

They make the same calls as the engine, over HTTP, to the same fakes with the same latencies: one planning call
at the top and one per inner query (the query generator, "serp_queries"), one search per query, one fetch and
one analysis ("website_analysis") per page, one report ("research_report"). Within a query, its pages are
fetched and analysed concurrently, as every tool does. They differ from the engine only in scheduling, and they
store nothing (no database, no events), which favours them.

- `level_synchronous`: a model of GPT-Researcher-like deep research: the queries of one depth run with at most
  `limit` (4) at a time, and a depth starts only when the whole previous depth is done.
- `per_branch`: a model of dzhng/deep-research-like recursion: each query, once done, plans and queues its own
  children (no level barrier), but at most `limit` (2) queries run at a time across the whole research.

These are models of scheduling policies, not those projects: they share only the policy.
"""

from __future__ import annotations

import heapq
import json
import re
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import requests

from research.record.planning import children_per_query

PER_QUERY = 7  # websites per query, as SEARCH_RESULTS_PER_QUERY
_QUERIES_SCHEMA = {
    "type": "object",
    "properties": {
        "queries": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"query": {"type": "string"}, "objective": {"type": "string"}},
                "required": ["query", "objective"],
            },
        }
    },
    "required": ["queries"],
}
_FACTS_SCHEMA = {
    "type": "object",
    "properties": {
        "facts": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"fact": {"type": "string"}, "quote": {"type": "string"}},
                "required": ["fact", "quote"],
            },
        }
    },
    "required": ["facts"],
}
_REPORT_SCHEMA = {"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]}
_TAGS = re.compile(r"<[^>]+>")


@dataclass
class Node:
    """One search query of the reference tree."""

    depth: int
    query: str
    chain: list[str]  # the queries of its ancestors, top first
    learnings: list[str] = field(default_factory=list)


class Calls:
    """The network calls of one research, to the fakes; one keep-alive session per thread, as the engine has."""

    def __init__(self, llm_url: str, searx_url: str) -> None:
        self.llm_url, self.searx_url = llm_url.rstrip("/"), searx_url.rstrip("/")
        self._local = threading.local()
        self.calls = 0
        self._lock = threading.Lock()

    def _session(self) -> requests.Session:
        session = getattr(self._local, "session", None)
        if session is None:
            session = self._local.session = requests.Session()
        return session

    def _count(self) -> None:
        with self._lock:
            self.calls += 1

    def _llm(self, name: str, schema: dict[str, Any], text: str) -> Any:
        self._count()
        body = {
            "model": "reference",
            "messages": [
                {"role": "system", "content": "You are a research assistant."},
                {"role": "user", "content": text},
            ],
            "response_format": {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}},
        }
        response = self._session().post(f"{self.llm_url}/v1/chat/completions", json=body, timeout=60)
        response.raise_for_status()
        return json.loads(response.json()["choices"][0]["message"]["content"])

    def plan(self, prompt: str, parent: Node | None, count: int) -> list[str]:
        chain = [] if parent is None else [*parent.chain, parent.query]
        lines = "\n".join(f"Depth {depth} query: {query}" for depth, query in enumerate(chain, start=1))
        text = f"{prompt}\n{lines}\nLearnings: {' '.join(parent.learnings[:20]) if parent else ''}\n"
        text += f"Write exactly {count} search queries."
        answer = self._llm("serp_queries", _QUERIES_SCHEMA, text)
        return [item["query"] for item in answer["queries"]][:count]

    def search(self, query: str) -> list[str]:
        self._count()
        response = self._session().get(f"{self.searx_url}/search", params={"q": query, "format": "json"}, timeout=30)
        response.raise_for_status()
        urls: list[str] = []
        for item in response.json()["results"]:
            if item["url"] not in urls:
                urls.append(item["url"])
        return urls[:PER_QUERY]

    def page(self, url: str, objective: str) -> list[str]:
        """Fetch one page and analyse it for the objective; returns the facts."""
        self._count()
        response = self._session().get(url, timeout=30)
        if response.status_code != 200:
            return []
        text = " ".join(_TAGS.sub(" ", response.text).split())
        answer = self._llm("website_analysis", _FACTS_SCHEMA, f"Objective: {objective}\n<<<PAGE\n{text}\nPAGE>>>")
        return [item["fact"] for item in answer["facts"]]

    def report(self, prompt: str, learnings: list[str]) -> None:
        sources = "\n".join(
            f"[{n}] https://example.com/{n} — source\n  - {fact}" for n, fact in enumerate(learnings, 1)
        )
        self._llm("research_report", _REPORT_SCHEMA, f"{prompt}\nSources:\n{sources[:200_000]}")


@dataclass
class ReferenceRun:
    scheduler: str
    breadth: int
    depth: int
    wall: float
    queries: int
    calls: int


PROMPT = "How do heat pumps perform in cold climates?"


def _run_query(calls: Calls, pages: ThreadPoolExecutor, node: Node) -> None:
    """Search, then fetch and analyse the query's pages concurrently; the query is done when all are."""
    urls = calls.search(node.query)
    for facts in pages.map(lambda url: calls.page(url, f"Find measured figures about {node.query}"), urls):
        node.learnings.extend(facts)


def _children(calls: Calls, breadth: int, depth: int, node: Node) -> list[Node]:
    if node.depth >= depth:
        return []
    names = calls.plan(PROMPT, node, children_per_query(breadth, node.depth))
    return [Node(node.depth + 1, name, [*node.chain, node.query]) for name in names]


def level_synchronous(calls: Calls, breadth: int, depth: int, limit: int = 4) -> ReferenceRun:
    """Each depth's queries (each planning its children when done) run `limit` at a time; then the next depth."""
    began = time.monotonic()
    done: list[Node] = []
    with ThreadPoolExecutor(limit) as queries, ThreadPoolExecutor(limit * PER_QUERY) as pages:

        def job(node: Node) -> list[Node]:
            _run_query(calls, pages, node)
            return _children(calls, breadth, depth, node)

        level = [Node(1, name, []) for name in calls.plan(PROMPT, None, breadth)]
        while level:
            done.extend(level)
            # The barrier: the next depth starts only once every query of this one (and its planning) is done.
            level = [child for children in queries.map(job, level) for child in children]
    calls.report(PROMPT, [fact for node in done for fact in node.learnings])
    return ReferenceRun("level-synchronous", breadth, depth, time.monotonic() - began, len(done), calls.calls)


@dataclass
class _ReadyQueues:
    """The per-branch scheduler's shared state, guarded by `cond`."""

    cond: threading.Condition = field(default_factory=threading.Condition)
    ready: list[tuple[int, int, Node]] = field(default_factory=list)  # (-depth, serial, node): deepest first
    serial: int = 0
    running: int = 0
    error: Exception | None = None

    def push(self, node: Node) -> None:
        self.serial += 1
        heapq.heappush(self.ready, (-node.depth, self.serial, node))


def per_branch(calls: Calls, breadth: int, depth: int, limit: int = 2) -> ReferenceRun:
    """Each query plans and queues its own children when done; at most `limit` queries run at once, deepest
    first (a branch is followed down before its siblings, as recursion does)."""
    began = time.monotonic()
    done: list[Node] = []
    state = _ReadyQueues()

    def worker(pages: ThreadPoolExecutor) -> None:
        while True:
            with state.cond:
                while not state.ready and state.running and state.error is None:
                    state.cond.wait()
                if not state.ready or state.error is not None:
                    state.cond.notify_all()  # nothing left to start: wake the other worker so it can see that too
                    return
                _, _, node = heapq.heappop(state.ready)
                state.running += 1
            children: list[Node] = []
            try:
                _run_query(calls, pages, node)
                children = _children(calls, breadth, depth, node)
            except Exception as exc:  # noqa: BLE001 - reported by the caller after the workers stop
                state.error = exc
            with state.cond:
                done.append(node)
                for child in children:
                    state.push(child)
                state.running -= 1
                state.cond.notify_all()

    with ThreadPoolExecutor(limit * PER_QUERY) as pages:
        for name in calls.plan(PROMPT, None, breadth):
            state.push(Node(1, name, []))
        threads = [threading.Thread(target=worker, args=(pages,), daemon=True) for _ in range(limit)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    if state.error is not None:
        raise RuntimeError(f"per-branch reference failed: {state.error}")
    calls.report(PROMPT, [fact for node in done for fact in node.learnings])
    return ReferenceRun(f"per-branch-{limit}", breadth, depth, time.monotonic() - began, len(done), calls.calls)


SCHEDULERS: dict[str, Callable[[Calls, int, int], ReferenceRun]] = {
    "level-synchronous-4": level_synchronous,
    "per-branch-2": per_branch,
}


def model_time(scheduler: str, breadth: int, depth: int, plan: float, query: float, report: float) -> float:
    """The reference's wall time at zero overhead (pure latencies), to check the measured runs against.

    `query` is one query's own time (search + page + analysis).
    """
    from research.record.planning import queries_per_level

    counts = queries_per_level(breadth, depth)
    if scheduler.startswith("level"):
        total = plan
        for level, count in enumerate(counts, start=1):
            batches = -(-count // 4)
            total += batches * (query + (plan if level < depth else 0.0))
        return total + report
    inner = sum(counts[:-1])
    work = inner * (query + plan) + counts[-1] * query
    return plan + work / 2 + report
