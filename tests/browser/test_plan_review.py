"""Review the plan from the page: the top-level queries of a research awaiting review are edited, removed and
added, then approved, and the edited plan is what the research runs."""

import pytest
from playwright.sync_api import expect

from devtools.processes import wait_until
from research.models import Research, ResearchStatus, SerpQuery
from tests.support.factories import running_research
from tests.support.logins import sign_in

pytestmark = pytest.mark.django_db(transaction=True)


def test_edit_and_approve_the_plan(daphne, open_page, user, no_queued_steps) -> None:
    # given a 3x2 research waiting for its plan to be reviewed
    research = running_research(user, 3, 2)
    for position in range(3):
        SerpQuery.objects.create(
            research=research, depth=1, position=position, query=f"query {position}", objective=f"objective {position}"
        )
    Research.objects.filter(pk=research.pk).update(status=ResearchStatus.AWAITING_REVIEW, review_plan=True)
    watched = open_page()
    page = watched.page
    sign_in(page, daphne.url, "alice", f"/research/{research.pk}/")
    panel = page.locator("#plan-review")
    expect(panel.locator(".plan-row")).to_have_count(3, timeout=30_000)
    expect(page.locator("#r-status")).to_have_text("Waiting for your review")
    # when alice removes the second query, rewrites the first, adds one and approves
    panel.get_by_role("button", name="Remove query 2").click()
    panel.get_by_label("Query 1", exact=True).fill("heat pump efficiency at -25 C")
    panel.get_by_role("button", name="Add a query").click()
    panel.get_by_label("Query 3", exact=True).fill("defrost cycles")
    panel.get_by_label("What query 3 should find out").fill("How often they defrost")
    panel.get_by_role("button", name="Approve and start").click()
    # then the research runs the edited plan
    wait_until(lambda: Research.objects.get(pk=research.pk).status != ResearchStatus.AWAITING_REVIEW, timeout=15)
    top = SerpQuery.objects.filter(research=research, depth=1).order_by("position")
    assert [(q.query, q.objective) for q in top] == [
        ("heat pump efficiency at -25 C", "objective 0"),
        ("query 2", "objective 2"),
        ("defrost cycles", "How often they defrost"),
    ]
    expect(panel).to_be_hidden(timeout=15_000)
    assert watched.errors == []
