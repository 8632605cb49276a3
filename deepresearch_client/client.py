"""The client: one method per thing a caller does with a research, each one or a few JSON API calls."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import requests

# The statuses a research does not leave.
FINISHED = frozenset({"completed", "failed", "cancelled"})
# How often watch() and ask() look again: one small read each time.
POLL_SECONDS = 2.0


class ApiError(Exception):
    """A 4xx or 5xx answer: its status and the API's message (and the field it is about, where it names one)."""

    def __init__(self, status: int, message: str, field: str | None = None) -> None:
        super().__init__(f"{status}: {message}" + (f" ({field})" if field else ""))
        self.status = status
        self.message = message
        self.field = field


class ResearchFailed(Exception):
    """The research ended without the thing asked for (a report, an answer)."""


class Client:
    def __init__(self, base_url: str, token: str, timeout: float = 60.0, session: requests.Session | None = None):
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.session = session or requests.Session()
        self.session.headers["Authorization"] = f"Bearer {token}"

    # --- the calls -------------------------------------------------------------------------------------------

    def start(
        self,
        prompt: str,
        answers: list[tuple[str, str]] | None = None,
        breadth: int = 2,
        depth: int = 2,
        mode: str | None = None,
        budget: dict[str, Any] | None = None,
        report_length: str | None = None,
    ) -> str:
        """Starts a research at once, with no follow-up questions unless `answers` gives (question, answer) pairs;
        its id."""
        body: dict[str, Any] = {
            "prompt": prompt,
            "questions": [{"question": q, "answer": a} for q, a in answers or []],
            "breadth": breadth,
            "depth": depth,
        }
        for key, value in (("mode", mode), ("budget", budget), ("report_length", report_length)):
            if value is not None:
                body[key] = value
        return self._call("POST", "/api/research/start", json=body)["research_id"]

    def status(self, research_id: str) -> dict[str, Any]:
        """{"research": its state, "progress": its counts}."""
        return self._call("GET", f"/api/research/{research_id}/status")

    def snapshot(self, research_id: str) -> dict[str, Any]:
        """Everything the research holds: its tree, memory, report, conversation."""
        return self._call("GET", f"/api/research/{research_id}")

    def researches(self, query: str = "") -> list[dict[str, Any]]:
        """The caller's researches, newest first; with `query`, those whose title or request holds its words."""
        return self._call("GET", "/api/research", params={"q": query} if query else None)["researches"]

    def report(self, research_id: str, kind: str = "md") -> str | bytes:
        """The report: markdown text (`md`), or the bytes of `pdf` or `docx`."""
        response = self._request("GET", f"/api/research/{research_id}/report.{kind}")
        return response.text if kind == "md" else response.content

    def cancel(self, research_id: str) -> dict[str, Any]:
        return self._call("POST", f"/api/research/{research_id}/cancel")

    def deepen(self, research_id: str, query: str, objective: str | None = None) -> dict[str, Any]:
        """Digs deeper into a finished research with one more branch; the report gets a new version."""
        body = {"query": query} if objective is None else {"query": query, "objective": objective}
        return self._call("POST", f"/api/research/{research_id}/deepen", json=body)

    def ask(self, research_id: str, question: str, timeout: float = 300.0) -> dict[str, Any]:
        """Asks the finished research a question and waits for the answer, from its sources only: the conversation
        item ({"question", "status", "answer", "sources_answer", ...})."""
        asked = self._call("POST", f"/api/research/{research_id}/ask", json={"question": question})
        deadline = time.monotonic() + timeout
        while True:
            for item in self.snapshot(research_id).get("conversation", []):
                if item["id"] == asked["id"] and item["status"] in ("answered", "failed"):
                    if item["status"] == "failed":
                        raise ResearchFailed(f"the answer could not be written: {item.get('error') or 'failed'}")
                    return item
            if time.monotonic() > deadline:
                raise TimeoutError(f"no answer after {timeout:.0f} s")
            time.sleep(POLL_SECONDS)

    def watch(
        self,
        research_id: str,
        on_progress: Callable[[dict[str, Any]], None] | None = None,
        timeout: float | None = None,
        poll_seconds: float = POLL_SECONDS,
    ) -> dict[str, Any]:
        """Follows the research until it ends, calling `on_progress` with each new status; the last status."""
        deadline = None if timeout is None else time.monotonic() + timeout
        last = None
        while True:
            current = self.status(research_id)
            if current != last and on_progress is not None:
                on_progress(current)
            last = current
            if current["research"]["status"] in FINISHED:
                return current
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"research {research_id} still {current['research']['status']}")
            time.sleep(poll_seconds)

    # --- HTTP ------------------------------------------------------------------------------------------------

    def _request(self, method: str, path: str, **kwargs: Any) -> requests.Response:
        response = self.session.request(method, self.base_url + path, timeout=self.timeout, **kwargs)
        if response.status_code >= 400:
            try:
                error = response.json()["error"]
                raise ApiError(response.status_code, error.get("message") or response.reason, error.get("field"))
            except (ValueError, KeyError, TypeError, AttributeError):
                raise ApiError(response.status_code, response.reason or "error") from None
        return response

    def _call(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        return self._request(method, path, **kwargs).json()
