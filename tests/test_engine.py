"""The research engine on the real stack: worker processes, PostgreSQL, Redis and the loopback fakes."""

import math
from collections import Counter

import pytest

from research.models import (
    Document,
    Event,
    Extract,
    QueryStatus,
    ResearchStatus,
    SerpQuery,
    Website,
    WebsiteStatus,
)
from research.record.planning import level_breadth
from research.record.usage import totals
from tests.support.e2e import start_research, wait_finished

pytestmark = pytest.mark.django_db(transaction=True)

# (breadth, depth, SERP queries): the product's table of tree sizes, written out rather than computed by the
# code under test.
SHAPES = [(1, 1, 1), (2, 2, 4), (4, 2, 12), (2, 4, 8), (3, 3, 15)]


def assert_tree_shape(research_id: str, breadth: int, depth: int, total: int) -> None:
    queries = list(SerpQuery.objects.filter(research_id=research_id))
    assert len(queries) == total
    assert Counter(q.depth for q in queries)[1] == breadth
    children = Counter(q.parent_id for q in queries if q.parent_id)
    for query in queries:
        expected = math.ceil(level_breadth(breadth, query.depth) / 2) if query.depth < depth else 0
        assert children.get(query.pk, 0) == expected, (query.depth, query.query)
    assert {q.status for q in queries} == {QueryStatus.DONE}


@pytest.mark.parametrize(("breadth", "depth", "total"), SHAPES)
@pytest.mark.parametrize("model", ["exact", "too_many", "too_few"])
def test_query_totals_are_exact(api, workers, research_model, fake_llm, breadth, depth, total, model) -> None:
    # given a model that may return more or fewer queries than asked
    fake_llm.array_len = {"exact": None, "too_many": lambda name, path, n: n + 2, "too_few": 1}[model]
    # when
    research_id = start_research(api, breadth, depth)
    research = wait_finished(research_id)
    # then
    assert research.status == ResearchStatus.COMPLETED, research.error
    assert_tree_shape(research_id, breadth, depth, total)
    types = list(Event.objects.filter(research_id=research_id).order_by("seq").values_list("type", flat=True))
    assert types.count("new_serp_query") == total
    assert types.count("got_websites_from_serp_query") == total
    assert types.count("report_writing_start") == 1 and types[-1] == "report_writing_successful"
    assert Document.objects.filter(research_id=research_id, kind="report").count() == 1
    assert (
        not Website.objects.filter(research_id=research_id)
        .exclude(status__in=[WebsiteStatus.ANALYZED, WebsiteStatus.FAILED])
        .exists()
    )


def test_research_runs_to_a_cited_report(api, workers, research_model, fake_web) -> None:
    # when
    research_id = start_research(api, 2, 2)
    research = wait_finished(research_id)
    # then
    assert research.status == ResearchStatus.COMPLETED, research.error
    report = Document.objects.get(research_id=research_id, kind="report")
    assert "## Sources" in report.markdown
    assert report.stats["citations"] > 0 and report.stats["citations_dropped"] == 0
    analysed = set(Website.objects.filter(research_id=research_id, status="analyzed").values_list("url", flat=True))
    assert analysed
    for extract in Extract.objects.filter(research_id=research_id).select_related("website__page"):
        assert " ".join(extract.quote.split()) in " ".join(extract.website.page.text.split())
    seqs = list(Event.objects.filter(research_id=research_id).order_by("seq").values_list("seq", flat=True))
    assert seqs == list(range(1, len(seqs) + 1))
    used = totals(research.pk)
    assert used.prompt_tokens > 0 and used.completion_tokens > 0


def test_url_is_fetched_once_per_research_and_analysed_per_objective(
    api, workers, research_model, fake_web, fake_searx, fake_llm
) -> None:
    # given a search engine that returns the same three pages for every query
    paths = ["/page/shared-one", "/page/shared-two", "/page/shared-three"]
    fake_searx.results_for = lambda q: [fake_web.url + p for p in paths]
    # when
    research = wait_finished(start_research(api, 2, 2))
    # then
    assert research.status == ResearchStatus.COMPLETED, research.error
    for path in paths:
        assert fake_web.count(path) == 1, path
    websites = Website.objects.filter(research=research)
    assert websites.count() == 4 * 3 and {w.status for w in websites} == {WebsiteStatus.ANALYZED}
    analyses = fake_llm.calls("website_analysis")
    assert len(analyses) == 12
    objectives = {call["messages"][-1]["content"].split("\n", 1)[0] for call in analyses}
    assert len(objectives) == 4  # each query's objective was used on the shared pages
    # every website has its scraping and analysis events, whether it fetched the page or reused it
    for event_type in ("scraping_a_website", "analyzing_a_website", "analyzed_a_website"):
        per_website = research.events.filter(type=event_type).values_list("data__website_id", flat=True)
        assert sorted(per_website) == sorted(websites.values_list("pk", flat=True)), event_type


def test_a_depth_4_planning_prompt_holds_its_parents_learnings(api, workers, research_model, fake_llm) -> None:
    # given a research four levels deep
    research = wait_finished(start_research(api, 1, 4))
    assert research.status == ResearchStatus.COMPLETED, research.error
    # when its depth-4 query was planned
    parent = SerpQuery.objects.get(research=research, depth=3)
    assert parent.learnings, "the parent's pages gave no learnings to pass on"
    prompts = [
        call["messages"][-1]["content"]
        for call in fake_llm.calls("serp_queries")
        if f"Depth 3 query: {parent.query}" in call["messages"][-1]["content"]
    ]
    # then the prompt carried the learnings of its parent's pages
    assert prompts and all(learning in prompts[-1] for learning in parent.learnings)
