"""Dig deeper into a completed research (POST /api/research/<id>/deepen): a branch of the user's own, the next
round, planned below by the same rule as every branch, read from the pages the research stored, and a new report
version."""

import json
from urllib.parse import urlsplit

import pytest

from research.models import (
    Document,
    Event,
    MemoryItem,
    MemoryKind,
    Page,
    QueryStatus,
    Research,
    ResearchStatus,
    SerpQuery,
    Website,
)
from research.record.planning import descendants
from tests.support.e2e import start_research, wait_finished
from tests.support.factories import build_tree, running_research
from workers.pipeline.citations import cited_urls

pytestmark = pytest.mark.django_db(transaction=True)


def deepen(client, research_id, **body):
    return client.post(f"/api/research/{research_id}/deepen", json.dumps(body), content_type="application/json")


def test_deepen_adds_the_next_round_and_runs_the_research_again(api, user, published) -> None:
    # given a completed 2x2 research with its report
    research = build_tree(user, 2, 2)
    assert Document.objects.filter(research=research, kind="report", version=1).exists()
    # when its owner digs deeper with a query of their own
    response = deepen(api, research.pk, query="heat pump defrost cycles", section="Performance")
    # then a depth-1 branch of the next round waits for its search, and the research runs for it alone
    assert response.status_code == 202, response.content
    branch = SerpQuery.objects.get(pk=response.json()["query_id"])
    assert (branch.depth, branch.round, branch.status, branch.position) == (1, 1, QueryStatus.PENDING, 2)
    assert branch.objective == "heat pump defrost cycles"  # the query, when no objective is given
    research.refresh_from_db()
    assert research.status == ResearchStatus.RUNNING and research.pending_queries == 1 + descendants(2, 2, 1)
    assert research.report_version == 2
    assert published == ["workers.tasks.run_query_task"]
    event = Event.objects.get(research=research, type="branch_added")
    assert event.data == {
        "query_id": branch.pk,
        "query": branch.query,
        "round": 1,
        "by": "user",
        "section": "Performance",
    }
    # and the progress counts the branch's planned subtree
    snapshot = api.get(f"/api/research/{research.pk}").json()
    assert snapshot["progress"]["queries_planned"] == 4 + 1 + descendants(2, 2, 1)
    # and while it runs, digging deeper again waits
    assert deepen(api, research.pk, query="again").status_code == 409


def test_deepen_from_an_open_gap_uses_its_text(api, user, published) -> None:
    research = build_tree(user, 2, 1)
    gap = MemoryItem.objects.create(research=research, kind=MemoryKind.GAP, text="How cold is too cold?", key="k")
    insight = MemoryItem.objects.create(research=research, kind=MemoryKind.INSIGHT, text="Insight", key="i")
    assert deepen(api, research.pk, gap_id=insight.pk).status_code == 404  # not a gap
    response = deepen(api, research.pk, gap_id=gap.pk)
    assert response.status_code == 202, response.content
    branch = SerpQuery.objects.get(pk=response.json()["query_id"])
    assert branch.query == "How cold is too cold?" and "How cold is too cold?" in branch.objective
    assert Event.objects.get(research=research, type="branch_added").data["gap_id"] == gap.pk


def test_deepen_refuses_what_it_cannot_do(api, stranger, user, published) -> None:
    done = build_tree(user, 2, 1)
    for body, field in (
        ({}, "query"),
        ({"query": "  "}, "query"),
        ({"query": "x" * 501}, "query"),
        ({"query": "q", "objective": "o" * 2001}, "objective"),
        ({"query": "q", "gap_id": 1}, "gap_id"),
        ({"gap_id": "1"}, "gap_id"),
        ({"query": "q", "depth": 3}, "depth"),
    ):
        response = deepen(api, done.pk, **body)
        assert response.status_code == 400 and response.json()["error"]["field"] == field, (body, response.content)
    assert api.post(f"/api/research/{done.pk}/deepen", "nope", content_type="application/json").status_code == 400
    assert deepen(stranger, done.pk, query="mine").status_code == 404
    assert deepen(api, running_research(user, 1, 1).pk, query="q").status_code == 409
    Research.objects.filter(pk=done.pk).update(stop_reason="budget_tokens", partial=True)
    assert deepen(api, done.pk, query="q").status_code == 409
    assert not SerpQuery.objects.filter(research=done, round__gt=0).exists()


def test_a_deepened_research_runs_the_branch_and_writes_its_next_report(api, workers, research_model, fake_web):
    # given a completed 2x2 research
    research_id = start_research(api, 2, 2)
    research = wait_finished(research_id)
    assert research.status == ResearchStatus.COMPLETED, research.error
    fetched = {
        urlsplit(url).path: fake_web.count(urlsplit(url).path) for url in Page.objects.values_list("url", flat=True)
    }
    first = SerpQuery.objects.filter(research_id=research_id, depth=1).order_by("position").first()
    # when its owner digs deeper with the query of one of its branches (the search finds the same pages again)
    response = deepen(api, research_id, query=first.query, objective="The same ground, looked at again")
    assert response.status_code == 202, response.content
    research = wait_finished(research_id)
    # then the branch (round 1) ran with its children by the ceil rule, and a second report version was written
    assert research.status == ResearchStatus.COMPLETED, research.error
    branch = SerpQuery.objects.get(pk=response.json()["query_id"])
    assert (branch.round, branch.status) == (1, QueryStatus.DONE)
    children = SerpQuery.objects.filter(parent=branch)
    assert children.count() == 1 and {q.status for q in children} == {QueryStatus.DONE}
    assert research.pending_queries == 0 and research.report_version == 2
    versions = sorted(Document.objects.filter(research_id=research_id, kind="report").values_list("version", flat=True))
    assert versions == [1, 2]
    types = list(Event.objects.filter(research_id=research_id).values_list("type", flat=True))
    assert types.count("report_writing_start") == 2 and types[-1] == "report_writing_successful"
    # and no page was fetched twice: the branch read what the research had stored
    again = Website.objects.filter(query=branch, status="analyzed")
    assert again.exists()
    for url in again.values_list("url", flat=True):
        path = urlsplit(url).path
        assert fake_web.count(path) == fetched.get(path, 1), url
    analysed = set(Website.objects.filter(research_id=research_id, status="analyzed").values_list("url", flat=True))
    report = Document.objects.get(research_id=research_id, kind="report", version=2)
    assert set(cited_urls(report.markdown, analysed)) <= analysed
    snapshot = api.get(f"/api/research/{research_id}").json()
    assert snapshot["progress"]["queries_done"] == snapshot["progress"]["queries_planned"] == 4 + 2
