"""Helpers for end-to-end tests: start a research through the API and wait for the workers to finish it."""

from __future__ import annotations

import json
import time

from research.models import FINISHED_STATUSES, Research


def start_research(api, breadth: int, depth: int, prompt: str = "How do heat pumps perform in cold climates?") -> str:  # noqa: ANN001
    response = api.post(
        "/api/research/start",
        data=json.dumps(
            {
                "prompt": prompt,
                "questions": [{"question": "Which climates?", "answer": "Nordic"}],
                "breadth": breadth,
                "depth": depth,
            }
        ),
        content_type="application/json",
    )
    assert response.status_code == 202, response.content
    return response.json()["research_id"]


def wait_finished(research_id: str, timeout: float = 120) -> Research:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        research = Research.objects.get(pk=research_id)
        if research.status in FINISHED_STATUSES:
            return research
        time.sleep(0.1)
    research = Research.objects.get(pk=research_id)
    raise AssertionError(f"research still {research.status} after {timeout}s (pending={research.pending_queries})")
