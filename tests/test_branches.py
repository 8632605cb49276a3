"""Cancelling and retrying one branch of a research: the API's answers, the counting that ends the research, and
the real stack running the rest of the tree (and, after a retry, a second report)."""

import json
import threading

import pytest
from django.db import connection
from django.test import Client

from devtools.processes import wait_until
from research.control.dispatch import REPORT, SEARCH
from research.live.snapshot import build_snapshot
from research.models import (
    Document,
    DocumentKind,
    Event,
    QueryStatus,
    Research,
    ResearchStatus,
    SerpQuery,
    Website,
    WebsiteStatus,
)
from tests.support.e2e import start_research, wait_finished
from tests.support.factories import running_research
from tests.support.snapshot_schema import validate_snapshot
from workers.pipeline.citations import cited_urls

pytestmark = pytest.mark.django_db(transaction=True)


def cancel(client: Client, research_id, query_id):
    return client.post(f"/api/research/{research_id}/queries/{query_id}/cancel")


def retry(client: Client, research_id, query_id):
    return client.post(f"/api/research/{research_id}/queries/{query_id}/retry")


def query(research: Research, depth: int, position: int, status: str, parent=None) -> SerpQuery:
    return SerpQuery.objects.create(
        research=research,
        parent=parent,
        depth=depth,
        position=position,
        query=f"q{depth}-{position}",
        objective="o",
        status=status,
    )


@pytest.fixture
def tree(user):
    """A running 2x2 research: Q1 done with its child C1 scraping one page, Q2 pending (C2 not planned yet)."""
    research = running_research(user, 2, 2)
    q1 = query(research, 1, 0, QueryStatus.DONE)
    q1.children_planned = True
    q1.save()
    c1 = query(research, 2, 0, QueryStatus.SCRAPING, parent=q1)
    Website.objects.create(research=research, query=c1, position=0, url="https://a.example/1", status="scraping")
    q2 = query(research, 1, 1, QueryStatus.PENDING)
    Research.objects.filter(pk=research.pk).update(pending_queries=3)  # Q1 counted off
    return research, q1, c1, q2


def pending(research: Research) -> int:
    return Research.objects.values_list("pending_queries", flat=True).get(pk=research.pk)


def test_cancel_stops_the_branch_and_counts_its_subtree_off(api, published, tree) -> None:
    research, q1, c1, q2 = tree
    # when the done query with a running child is cancelled
    response = cancel(api, research.pk, q1.pk)
    # then it and its unfinished child are cancelled, with its page; only Q1's unfinished slot is counted off
    assert response.status_code == 200, response.content
    assert response.json() == {"query_id": q1.pk, "cancelled": [q1.pk, c1.pk]}
    assert set(SerpQuery.objects.filter(pk__in=[q1.pk, c1.pk]).values_list("status", flat=True)) == {"cancelled"}
    assert Website.objects.get(query=c1).status == WebsiteStatus.CANCELLED
    assert pending(research) == 2 and REPORT.name not in published
    event = Event.objects.get(research=research, type="query_cancelled")
    assert event.data["query_id"] == q1.pk and event.data["cancelled"] == [q1.pk, c1.pk]
    # when the other top-level query is cancelled too, its unplanned child goes with it: the report is queued
    assert cancel(api, research.pk, q2.pk).json()["cancelled"] == [q2.pk]
    assert pending(research) == 0 and REPORT.name in published
    snapshot = build_snapshot(research.pk)
    validate_snapshot(snapshot)
    assert snapshot["progress"]["queries_cancelled"] == 3 and snapshot["progress"]["queries_planned"] == 2


def test_cancel_refusals(api, stranger, published, tree) -> None:
    research, q1, _, q2 = tree
    assert cancel(stranger, research.pk, q1.pk).status_code == 404
    assert cancel(api, research.pk, 999_999_999).status_code == 404
    other = running_research(research.owner, 1, 1)
    assert cancel(api, other.pk, q1.pk).status_code == 404  # the query belongs to another research
    assert cancel(api, research.pk, q1.pk).status_code == 200
    assert cancel(api, research.pk, q1.pk).status_code == 409  # already cancelled
    Research.objects.filter(pk=research.pk).update(status=ResearchStatus.CANCELLED)
    assert cancel(api, research.pk, q2.pk).status_code == 409  # the research has ended
    assert SerpQuery.objects.get(pk=q2.pk).status == QueryStatus.PENDING


def test_retry_refusals(api, stranger, published, tree) -> None:
    research, q1, c1, q2 = tree
    for unfinished in (q1, c1, q2):
        assert retry(api, research.pk, unfinished.pk).status_code == 409  # neither failed nor cancelled
    assert cancel(api, research.pk, q1.pk).status_code == 200
    assert retry(stranger, research.pk, q1.pk).status_code == 404
    assert retry(api, research.pk, c1.pk).status_code == 409  # its parent was cancelled: retry that one
    Research.objects.filter(pk=research.pk).update(stop_reason="token_budget")
    assert retry(api, research.pk, q1.pk).status_code == 409  # a budget stopped the research
    assert SEARCH.name not in published


def test_retry_while_running_puts_the_branch_back(api, published, tree) -> None:
    research, q1, c1, q2 = tree
    cancel(api, research.pk, q1.pk)
    before = pending(research)
    # when
    response = retry(api, research.pk, q1.pk)
    # then Q1 runs again with its subtree counted back in; its earlier child stays cancelled, as history
    assert response.status_code == 202, response.content
    assert response.json() == {"query_id": q1.pk, "status": "pending", "retries": 1}
    retried = SerpQuery.objects.get(pk=q1.pk)
    assert (retried.status, retried.retries, retried.children_planned) == ("pending", 1, False)
    assert pending(research) == before + 2 and SEARCH.name in published
    assert SerpQuery.objects.get(pk=c1.pk).status == QueryStatus.CANCELLED
    assert retry(api, research.pk, q1.pk).status_code == 409  # already being retried
    assert Event.objects.filter(research=research, type="query_retried").count() == 1


def test_retry_after_the_research_ended_opens_a_new_report_version(api, published, user) -> None:
    # given a completed research with one failed query and a report
    research = running_research(user, 2, 1)
    query(research, 1, 0, QueryStatus.DONE)
    failed = query(research, 1, 1, QueryStatus.FAILED)
    Document.objects.create(research=research, kind=DocumentKind.REPORT, markdown="# R", version=1)
    Research.objects.filter(pk=research.pk).update(status=ResearchStatus.COMPLETED, pending_queries=0)
    # when the failed query is retried
    assert retry(api, research.pk, failed.pk).status_code == 202
    # then the research runs again, for that branch alone, towards report version 2
    research.refresh_from_db()
    assert (research.status, research.pending_queries, research.report_version) == ("running", 1, 2)
    assert research.finished_at is None


@pytest.mark.parametrize("action", ["cancel", "retry"])
def test_a_double_click_has_one_effect(user, published, tree, action) -> None:
    research, q1, _, _ = tree
    if action == "retry":
        SerpQuery.objects.filter(pk=q1.pk).update(status=QueryStatus.FAILED)
    clients = []
    for _ in range(2):
        client = Client()
        client.force_login(user)
        clients.append(client)
    start, statuses = threading.Barrier(2), []

    def click(client: Client) -> None:
        try:
            start.wait()
            statuses.append((cancel if action == "cancel" else retry)(client, research.pk, q1.pk).status_code)
        finally:
            connection.close()

    threads = [threading.Thread(target=click, args=(client,)) for client in clients]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(statuses) == ([200, 409] if action == "cancel" else [202, 409])
    assert (
        Event.objects.filter(
            research=research, type="query_cancelled" if action == "cancel" else "query_retried"
        ).count()
        == 1
    )
    assert pending(research) == (2 if action == "cancel" else 3 + 2)


# --- The real stack ------------------------------------------------------------------------------------------


def subtree(root: SerpQuery) -> list[SerpQuery]:
    found, level = [], [SerpQuery.objects.get(pk=root.pk)]
    while level:
        found += level
        level = list(SerpQuery.objects.filter(parent__in=level))
    return found


def test_cancel_a_branch_then_retry_it_after_the_research_completed(
    api, workers, research_model, fake_searx, fake_llm
) -> None:
    # given a running 3x3 whose searches are slow, and a top-level query whose children are planned
    fake_searx.delay = 0.5
    research_id = start_research(api, 3, 3)
    wait_until(
        lambda: SerpQuery.objects.filter(research_id=research_id, depth=2).exists(), timeout=90, message="children"
    )
    branch = SerpQuery.objects.filter(research_id=research_id, depth=2).order_by("pk").first().parent
    # when it is cancelled
    response = cancel(api, research_id, branch.pk)
    assert response.status_code == 200, response.content
    changed = response.json()["cancelled"]
    cancelled_at = Event.objects.get(research_id=research_id, type="query_cancelled").seq
    research = wait_finished(research_id)
    # then its subtree ends cancelled (but for queries that had finished), nothing is planned under it after the
    # cancel, and the rest of the tree completes into a report that cites only analysed pages
    assert research.status == ResearchStatus.COMPLETED, research.error
    assert changed[0] == branch.pk
    inside = {q.pk: q.status for q in subtree(branch)}
    assert all(inside[pk] == QueryStatus.CANCELLED for pk in changed), (changed, inside)
    assert set(inside.values()) <= {QueryStatus.CANCELLED, QueryStatus.DONE}
    later = Event.objects.filter(research_id=research_id, seq__gt=cancelled_at, type="new_serp_query")
    assert not [e for e in later if e.data["parent_id"] in inside]
    outside = SerpQuery.objects.filter(research_id=research_id).exclude(pk__in=inside)
    assert {q.status for q in outside} == {QueryStatus.DONE}
    analysed = set(Website.objects.filter(research_id=research_id, status="analyzed").values_list("url", flat=True))
    report = Document.objects.get(research_id=research_id, kind="report")
    assert report.version == 1 and set(cited_urls(report.markdown, analysed)) <= analysed
    assert research.pending_queries == 0

    # when the branch is retried after the research completed
    response = retry(api, research_id, branch.pk)
    assert response.status_code == 202, response.content
    research = wait_finished(research_id)
    # then the branch ran again, with new children that analysed pages, and a second report was written
    assert research.status == ResearchStatus.COMPLETED, research.error
    assert research.report_version == 2
    assert SerpQuery.objects.get(pk=branch.pk).status == QueryStatus.DONE
    new_children = SerpQuery.objects.filter(parent=branch, position__gte=3)
    assert new_children.count() == 2 and {q.status for q in new_children} == {QueryStatus.DONE}
    assert Website.objects.filter(query__in=new_children, status="analyzed").exists()
    versions = sorted(Document.objects.filter(research_id=research_id, kind="report").values_list("version", flat=True))
    assert versions == [1, 2]
    types = list(Event.objects.filter(research_id=research_id).values_list("type", flat=True))
    assert types.count("report_writing_start") == 2 and types.count("query_retried") == 1
    assert types[-1] == "report_writing_successful"
    latest = api.get(f"/api/research/{research_id}/report.md").content.decode()
    assert latest == Document.objects.get(research_id=research_id, kind="report", version=2).markdown
    first = api.get(f"/api/research/{research_id}/report.md?version=1").content.decode()
    assert first == report.markdown
    snapshot = api.get(f"/api/research/{research_id}").json()
    assert [v["version"] for v in snapshot["report_versions"]] == [1, 2] and snapshot["report"]["version"] == 2
    assert json.dumps(snapshot)  # the snapshot is served whole
