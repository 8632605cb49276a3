"""The per-user cap on active researches holds for every request that makes a research run again, not only a
start: digging deeper, retrying a branch of a finished research, and writing a cancelled research's report."""

import json

import pytest

from research.models import Document, QueryStatus, Research, ResearchStatus, SerpQuery
from tests.support.factories import build_tree, running_research

pytestmark = pytest.mark.django_db(transaction=True)


def deepen(client, research):
    return client.post(
        f"/api/research/{research.pk}/deepen", json.dumps({"query": "defrost cycles"}), content_type="application/json"
    )


def retry(client, research):
    query = SerpQuery.objects.filter(research=research, depth=1).first()
    SerpQuery.objects.filter(pk=query.pk).update(status=QueryStatus.FAILED)
    return client.post(f"/api/research/{research.pk}/queries/{query.pk}/retry")


def report_found(client, research):
    Document.objects.filter(research=research).delete()
    Research.objects.filter(pk=research.pk).update(status=ResearchStatus.CANCELLED)
    return client.post(f"/api/research/{research.pk}/report")


@pytest.mark.parametrize("request_", [deepen, retry, report_found], ids=["deepen", "retry", "report_found"])
def test_a_research_run_again_counts_against_the_cap_like_a_start(
    api, user, other_user, published, settings, request_
) -> None:
    # given a cap of one, a finished research of alice's, and one of hers running (another user's does not count)
    settings.MAX_ACTIVE_RESEARCH_PER_USER = 1
    finished = build_tree(user, 2, 1)
    busy = running_research(user, 1, 1)
    running_research(other_user, 1, 1)
    before = Research.objects.get(pk=finished.pk)
    # when she asks for the finished one to run again
    response = request_(api, finished)
    # then it is refused as a start would be, and nothing changed or was queued
    assert response.status_code == 429, response.content
    assert "limit is 1" in response.json()["error"]["message"]
    after = Research.objects.get(pk=finished.pk)
    assert (after.pending_queries, after.report_version) == (before.pending_queries, before.report_version)
    assert after.status not in (ResearchStatus.RUNNING, ResearchStatus.QUEUED)
    assert published == []
    # and once her running one has ended, the same request is taken
    Research.objects.filter(pk=busy.pk).update(status=ResearchStatus.COMPLETED)
    assert request_(api, finished).status_code == 202
    assert Research.objects.get(pk=finished.pk).status == ResearchStatus.RUNNING


def test_a_branch_retried_in_a_running_research_is_not_a_new_active_research(api, user, published, settings) -> None:
    # given a cap of one, reached by the running research whose branch failed
    settings.MAX_ACTIVE_RESEARCH_PER_USER = 1
    research = build_tree(user, 2, 1)
    Research.objects.filter(pk=research.pk).update(status=ResearchStatus.RUNNING)
    # when a failed branch of it is retried, then it is taken: the research was active already
    assert retry(api, research).status_code == 202
