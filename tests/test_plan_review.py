"""Review the plan: a research started with review_plan waits in awaiting_review once its top-level queries are
planned; its user edits them (1 to 2 × breadth), approves, and the edited plan is what runs."""

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from devtools.processes import wait_until
from research.models import Event, QueryStatus, Research, ResearchStatus, SerpQuery, Website
from tests.support.e2e import start_research, wait_finished
from tests.support.factories import running_research
from workers.steps import sweep

pytestmark = pytest.mark.django_db(transaction=True)


def put_plan(client, research_id, queries):
    body = json.dumps({"queries": queries})
    return client.put(f"/api/research/{research_id}/plan", body, content_type="application/json")


def approve(client, research_id):
    return client.post(f"/api/research/{research_id}/plan/approve")


def wait_for_review(research_id: str) -> None:
    wait_until(
        lambda: Research.objects.get(pk=research_id).status == ResearchStatus.AWAITING_REVIEW,
        timeout=60,
        message="the plan under review",
    )


def under_review(user, breadth: int = 3, depth: int = 2) -> Research:
    research = running_research(user, breadth, depth)
    for position in range(breadth):
        SerpQuery.objects.create(research=research, depth=1, position=position, query=f"q{position}", objective="o")
    Research.objects.filter(pk=research.pk).update(status=ResearchStatus.AWAITING_REVIEW, review_plan=True)
    return research


def test_the_plan_is_edited_within_its_bounds_and_only_while_under_review(api, stranger, user, published) -> None:
    research = under_review(user)
    for queries, field in (
        ([], "queries"),
        ([{"query": f"q{i}"} for i in range(7)], "queries"),  # more than 2 × breadth
        ([{"query": " "}], "query"),
        ([{"query": "q", "objective": "o" * 2001}], "objective"),
        (["q"], "queries"),
        ([{"query": "q", "depth": 2}], "queries"),
    ):
        response = put_plan(api, research.pk, queries)
        assert response.status_code == 400 and response.json()["error"]["field"] == field, (queries, response.content)
    assert put_plan(stranger, research.pk, [{"query": "mine"}]).status_code == 404
    response = put_plan(api, research.pk, [{"query": "first"}, {"query": "second", "objective": "why"}])
    assert response.status_code == 200, response.content
    assert [(q["query"], q["objective"]) for q in response.json()["queries"]] == [("first", "first"), ("second", "why")]
    research.refresh_from_db()
    assert research.pending_queries == 2 * (1 + 2)  # two branches of a 3x2: each query and its 2 children
    snapshot = api.get(f"/api/research/{research.pk}").json()
    assert snapshot["research"]["status"] == "awaiting_review" and snapshot["research"]["review_plan"] is True
    assert snapshot["progress"]["queries_planned"] == 6
    assert published == []  # nothing searched before the approval
    assert approve(stranger, research.pk).status_code == 404
    assert approve(api, research.pk).status_code == 202
    assert sorted(published) == ["workers.tasks.run_query_task"] * 2
    assert approve(api, research.pk).status_code == 409  # running now
    assert put_plan(api, research.pk, [{"query": "late"}]).status_code == 409


def test_review_plan_must_be_a_boolean(api, published) -> None:
    body = {"prompt": "p", "questions": [], "breadth": 2, "depth": 1, "review_plan": "yes"}
    response = api.post("/api/research/start", json.dumps(body), content_type="application/json")
    assert response.status_code == 400 and response.json()["error"]["field"] == "review_plan"


def test_the_reviewed_plan_is_what_runs(api, workers, research_model) -> None:
    # given a 3x2 research started with review_plan
    research_id = start_research(api, 3, 2, review_plan=True)
    # then it waits once its three top-level queries are planned, with nothing searched
    wait_for_review(research_id)
    planned = list(SerpQuery.objects.filter(research_id=research_id).order_by("position"))
    assert [q.depth for q in planned] == [1, 1, 1]
    assert not Website.objects.filter(research_id=research_id).exists()
    assert Event.objects.filter(research_id=research_id, type="plan_ready").count() == 1
    # when its user removes the second query, adds one and approves
    edited = [
        {"query": planned[0].query, "objective": planned[0].objective},
        {"query": planned[2].query, "objective": planned[2].objective},
        {"query": "heat pump defrost cycles in Nordic winters", "objective": "How often they defrost"},
    ]
    assert put_plan(api, research_id, edited).status_code == 200
    approved_at = timezone.now()
    assert approve(api, research_id).status_code == 202
    research = wait_finished(research_id)
    # then the edited plan is what ran, each branch to the research's depth, and the report was written
    assert research.status == ResearchStatus.COMPLETED, research.error
    top = SerpQuery.objects.filter(research_id=research_id, depth=1).order_by("position")
    assert [(q.query, q.objective) for q in top] == [(e["query"], e["objective"]) for e in edited]
    assert all(SerpQuery.objects.filter(parent=q).count() == 2 for q in top)
    assert set(SerpQuery.objects.filter(research_id=research_id).values_list("status", flat=True)) == {QueryStatus.DONE}
    assert research.started_at >= approved_at  # its time budget counts from the approval
    types = list(Event.objects.filter(research_id=research_id).order_by("seq").values_list("type", flat=True))
    assert types.index("plan_ready") < types.index("plan_approved") < types.index("got_websites_from_serp_query")
    snapshot = api.get(f"/api/research/{research_id}").json()
    assert snapshot["progress"]["queries_done"] == snapshot["progress"]["queries_planned"] == 9


def test_a_plan_under_review_can_be_cancelled(api, workers, research_model) -> None:
    research_id = start_research(api, 2, 1, review_plan=True)
    wait_for_review(research_id)
    assert api.post(f"/api/research/{research_id}/cancel").status_code == 200
    assert Research.objects.get(pk=research_id).status == ResearchStatus.CANCELLED
    assert approve(api, research_id).status_code == 409
    assert not Website.objects.filter(research_id=research_id).exists()


def test_a_plan_left_waiting_past_its_age_is_cancelled_by_the_sweeper(user, published, settings) -> None:
    # given two plans under review, one ready 73 hours ago and one just now
    settings.PLAN_REVIEW_MAX_AGE_HOURS = 72
    stale, fresh = under_review(user), under_review(user)
    Research.objects.filter(pk=stale.pk).update(claimed_at=timezone.now() - timedelta(hours=73))
    Research.objects.filter(pk=fresh.pk).update(claimed_at=timezone.now() - timedelta(minutes=5))
    # when the sweeper runs
    done = sweep()
    # then the stale one is cancelled (by expiry) and no longer active; the fresh one still waits
    assert done.get("review_expired") == 1
    stale.refresh_from_db()
    fresh.refresh_from_db()
    assert (stale.status, fresh.status) == (ResearchStatus.CANCELLED, ResearchStatus.AWAITING_REVIEW)
    assert Event.objects.get(research=stale, type="research_cancelled").data == {"by": "expiry"}
    assert not Event.objects.filter(research=fresh, type="research_cancelled").exists()
