"""Token usage is counted with the result it paid for: two deliveries of one step that both reach the model
store one result and count its tokens once."""

from types import SimpleNamespace

import pytest

from research.models import (
    Extract,
    Page,
    PageStatus,
    QueryStatus,
    Research,
    SerpQuery,
    Website,
    WebsiteStatus,
)
from tests.factories import running_research
from workers.agents.query_generator import PlannedQuery
from workers.agents.website_analyzer import Finding
from workers.pipeline.analyze import analyze_website
from workers.pipeline.plan import plan_queries

pytestmark = pytest.mark.django_db(transaction=True)

SENTENCE = "Heat pumps kept working at minus twenty degrees in the Nordic field trial."


@pytest.fixture
def running(user) -> Research:  # noqa: ANN001
    return running_research(user, breadth=2, depth=1)


def usage(research: Research) -> tuple[int, int]:
    research.refresh_from_db()
    return research.prompt_tokens, research.completion_tokens


def test_duplicate_analysis_counts_its_tokens_once(running, published, monkeypatch) -> None:  # noqa: ANN001
    # given a website ready for analysis, and a model call (10 + 5 tokens) during which a second delivery of the
    # same task runs to the end, as two workers can
    query = SerpQuery.objects.create(
        research=running, depth=1, position=0, query="q", objective="o", status=QueryStatus.SCRAPING, pending_websites=1
    )
    page = Page.objects.create(research=running, url="https://x.example/", status=PageStatus.FETCHED, text=SENTENCE)
    website = Website.objects.create(
        research=running, query=query, page=page, position=0, url=page.url, status=WebsiteStatus.ANALYZING
    )
    calls: list[str] = []

    def analyze(objective: str, query: str, url: str, title: str, text: str) -> tuple[list[Finding], int, int]:
        calls.append(url)
        if len(calls) == 1:
            analyze_website(website.pk)
        return [Finding(fact="They work in the cold.", quote=SENTENCE)], 10, 5

    monkeypatch.setattr("workers.pipeline.analyze.engine_for", lambda name: SimpleNamespace(analyze=analyze))
    # when
    analyze_website(website.pk)
    # then both paid for a model call, one result was stored, and its tokens were counted once
    assert len(calls) == 2
    assert Extract.objects.filter(website=website).count() == 1
    assert usage(running) == (10, 5)


def test_duplicate_planning_counts_its_tokens_once(running, published, monkeypatch) -> None:  # noqa: ANN001
    # given a research awaiting its top-level queries, and a second delivery of the planning during the model call
    calls: list[int] = []

    def plan(
        prompt: str, answers: list[tuple[str, str]], ancestors: list[object], count: int
    ) -> tuple[list[PlannedQuery], int, int]:
        calls.append(count)
        if len(calls) == 1:
            plan_queries(str(running.pk), None)
        return [PlannedQuery(query=f"q{i}", objective="o") for i in range(count)], 10, 5

    monkeypatch.setattr("workers.pipeline.plan.engine_for", lambda name: SimpleNamespace(plan_queries=plan))
    # when
    plan_queries(str(running.pk), None)
    # then
    assert calls == [2, 2]
    assert SerpQuery.objects.filter(research=running).count() == 2
    assert usage(running) == (10, 5)
    assert published == ["workers.tasks.run_query_task"] * 2
