"""Budgets on the real stack: a research that reaches its seconds, token or dollar budget stops starting steps,
and completes with a partial report written from the pages analysed by then."""

import json
import time
from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from research.models import Document, Event, QueryStatus, Research, ResearchStatus, SerpQuery, Website, WebsiteStatus
from research.record.planning import total_queries
from research.record.usage import totals
from tests.support.e2e import wait_finished
from workers.pipeline.citations import cited_urls, report_title

pytestmark = pytest.mark.django_db(transaction=True)

# What a 3x3 research spends on the fake model, all told, is about 75,000 tokens and $0.02 at gpt-4o-mini's
# price (most of it the website analyses); the budgets below are about a quarter of that.
TOKEN_BUDGET = 18_000
USD_BUDGET = 0.005


def start(api, budget: dict) -> str:
    body = {
        "prompt": "How do heat pumps perform in cold climates?",
        "questions": [{"question": "Which climates?", "answer": "Nordic"}],
        "breadth": 3,
        "depth": 3,
        "budget": budget,
    }
    response = api.post("/api/research/start", data=json.dumps(body), content_type="application/json")
    assert response.status_code == 202, response.content
    return response.json()["research_id"]


def assert_partial(research: Research, reason: str) -> str:
    """The research completed from what it had analysed, said so, and stopped its tree; its report's markdown."""
    assert research.status == ResearchStatus.COMPLETED, research.error
    assert (research.partial, research.stop_reason, research.outcome) == (True, reason, "partial")
    assert research.pending_queries == 0
    # it stopped early: not every planned query ran, and nothing is left unfinished
    done = SerpQuery.objects.filter(research=research, status=QueryStatus.DONE).count()
    assert done < total_queries(3, 3)
    assert not SerpQuery.objects.filter(research=research, status__in=["pending", "searching", "scraping"]).exists()
    assert not Website.objects.filter(research=research, status__in=["pending", "scraping", "analyzing"]).exists()
    # one budget_reached, with what was spent, and no query planned after it
    reached = Event.objects.get(research=research, type="budget_reached")
    assert reached.data["reason"] == reason and reached.data["spent"] > 0
    assert not Event.objects.filter(research=research, type="new_serp_query", seq__gt=reached.seq).exists()
    assert Event.objects.filter(research=research, type="report_writing_successful").count() == 1
    # the report cites analysed pages only, and its first paragraph says it is partial, and why
    report = Document.objects.get(research=research, kind="report").markdown
    analysed = set(
        Website.objects.filter(research=research, status=WebsiteStatus.ANALYZED).values_list("url", flat=True)
    )
    assert cited_urls(report) and set(cited_urls(report)) <= analysed
    title, _, rest = report.partition("\n")
    assert report_title(report)
    first_paragraph = rest.strip().split("\n\n")[0]
    assert first_paragraph.startswith("> Partial report: the research stopped when it reached its")
    return first_paragraph


def test_token_budget_stops_the_research_with_a_partial_report(api, workers, research_model) -> None:
    # when a 3x3 research starts with about a quarter of the tokens it needs
    research = wait_finished(start(api, {"tokens": TOKEN_BUDGET}))
    # then
    note = assert_partial(research, "budget_tokens")
    assert f"token budget ({TOKEN_BUDGET:,} tokens)" in note
    assert research.budget_tokens == TOKEN_BUDGET
    # what it spent past the budget is the calls in flight when it was reached, and the report
    used = totals(research.pk)
    assert used.prompt_tokens + used.completion_tokens <= 1.5 * TOKEN_BUDGET


def test_usd_budget_stops_the_research_with_a_partial_report(api, workers, research_model) -> None:
    research = wait_finished(start(api, {"usd": USD_BUDGET}))
    note = assert_partial(research, "budget_usd")
    assert "dollar budget ($0.005)" in note
    assert research.budget_usd == Decimal("0.005")
    used = totals(research.pk)
    assert used.cost_usd <= Decimal("1.5") * Decimal(str(USD_BUDGET))
    assert used.unpriced_calls == 0


def test_seconds_budget_stops_the_research_with_a_partial_report(api, workers, research_model, fake_searx) -> None:
    # given a slowed-down 3x3 research with an hour's budget, that has analysed a page
    fake_searx.delay = 0.5
    research_id = start(api, {"seconds": 3600})
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if Website.objects.filter(research_id=research_id, status=WebsiteStatus.ANALYZED).exists():
            break
        time.sleep(0.05)
    # when (as far as the database says) the hour is over
    Research.objects.filter(pk=research_id).update(started_at=timezone.now() - timedelta(seconds=3601))
    research = wait_finished(research_id)
    # then the next step to start noticed it
    note = assert_partial(research, "budget_seconds")
    assert "time budget (3,600 seconds)" in note
