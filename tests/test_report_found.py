"""A cancelled research writes its report from what it found, on request: a partial report, as a budget stop
writes one, and nothing searched or analysed after the cancel."""

import pytest

from devtools.processes import wait_until
from research.models import Document, Event, Extract, Research, ResearchStatus, SerpQuery, Website
from tests.support.e2e import settle, start_research, wait_finished
from tests.support.factories import build_tree, running_research

pytestmark = pytest.mark.django_db(transaction=True)


def report_found(client, research_id):
    return client.post(f"/api/research/{research_id}/report")


def test_a_cancelled_research_writes_a_partial_report_of_what_it_found(
    api, workers, research_model, fake_searx, redis_conn
) -> None:
    # given a research cancelled mid-way, once it had analysed something
    fake_searx.delay = 0.5
    research_id = start_research(api, 3, 3)
    wait_until(lambda: Extract.objects.filter(research_id=research_id).exists(), timeout=60, message="a finding")
    assert api.post(f"/api/research/{research_id}/cancel").status_code == 200
    settle(redis_conn)  # the steps under way at the cancel are over
    queries = SerpQuery.objects.filter(research_id=research_id).count()
    websites = Website.objects.filter(research_id=research_id).count()
    # when its owner names it and asks for the report of what it found
    response = api.patch(f"/api/research/{research_id}", {"title": "My fusion notes"}, content_type="application/json")
    assert response.status_code == 200, response.content
    response = report_found(api, research_id)
    assert response.status_code == 202, response.content
    assert response.json()["status"] == "running"
    # then it writes one, marked partial, and searches and analyses nothing more
    research = wait_finished(research_id)
    assert research.status == ResearchStatus.COMPLETED, research.error
    assert research.partial and research.stop_reason == "cancelled"
    assert research.title == "My fusion notes"  # the report's own title does not replace its user's
    report = Document.objects.get(research=research, kind="report").markdown
    assert "> Partial report: the research was cancelled; it covers" in report
    assert SerpQuery.objects.filter(research=research).count() == queries
    assert Website.objects.filter(research=research).count() == websites
    types = list(Event.objects.filter(research=research).order_by("seq").values_list("type", flat=True))
    after = types[types.index("research_cancelled") :]
    assert after[:3] == ["research_cancelled", "report_requested", "report_writing_start"]
    assert after[-1] == "report_writing_successful"
    # and asked again, it is refused: the report is there
    assert report_found(api, research_id).status_code == 409


def test_only_a_cancelled_research_with_findings_and_no_report_is_reported_on_request(
    api, stranger, user, published
) -> None:
    # a running research, a cancelled one that analysed nothing, a completed one: refused, and nothing queued
    running = running_research(user, 1, 1)
    empty = running_research(user, 1, 1)
    Research.objects.filter(pk=empty.pk).update(status=ResearchStatus.CANCELLED)
    done = build_tree(user, 1, 1)
    for research in (running, empty, done):
        response = report_found(api, research.pk)
        assert response.status_code == 409, (research.status, response.content)
        assert response.json()["error"]["message"]
    cancelled = build_tree(user, 1, 1)
    Document.objects.filter(research=cancelled).delete()
    Research.objects.filter(pk=cancelled.pk).update(status=ResearchStatus.CANCELLED)
    # another user's research is not found; a GET is not allowed
    assert report_found(stranger, cancelled.pk).status_code == 404
    assert api.get(f"/api/research/{cancelled.pk}/report").status_code == 405
    assert published == []
    # the owner's request for a cancelled research with findings is taken, once
    assert report_found(api, cancelled.pk).status_code == 202
    assert report_found(api, cancelled.pk).status_code == 409
    assert published == ["workers.tasks.write_report_task"]
    state = Research.objects.get(pk=cancelled.pk)
    assert (state.status, state.partial, state.stop_reason, state.pending_queries) == ("running", True, "cancelled", 0)
