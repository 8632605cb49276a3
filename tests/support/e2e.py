"""Helpers for end-to-end tests: start a research through the API and wait for the workers to finish it."""

from __future__ import annotations

import json
import time

from research.models import FINISHED_STATUSES, Research
from research.snapshot import build_snapshot
from tests.support.snapshot_schema import validate_snapshot


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
    """Wait for the research to end; its final snapshot, as the engine left it, must match the published schema."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        research = Research.objects.get(pk=research_id)
        if research.status in FINISHED_STATUSES:
            validate_snapshot(build_snapshot(research_id))
            return research
        time.sleep(0.1)
    research = Research.objects.get(pk=research_id)
    raise AssertionError(f"research still {research.status} after {timeout}s (pending={research.pending_queries})")
