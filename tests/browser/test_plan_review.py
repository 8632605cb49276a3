"""Review the plan from the page: the top-level queries of a research awaiting review are edited, removed and
added, then approved, and the edited plan is what the research runs."""

import pytest
from playwright.sync_api import expect

from devtools.processes import wait_until
from research.models import Research, ResearchStatus, SerpQuery
from tests.support.browser import DESKTOP, LAYOUT_SHIFTS, MAX_LAYOUT_SHIFT, PHONE, screenshot
from tests.support.e2e import start_research
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
    # and the panel, numbered rows gone, says in one line what was approved
    expect(panel).to_have_text("Plan reviewed and approved: 3 top-level queries.", timeout=15_000)
    assert watched.errors == []


@pytest.mark.parametrize("viewport", [pytest.param(DESKTOP, id="desktop"), pytest.param(PHONE, id="phone")])
def test_a_whole_research_with_plan_review_does_not_jump(
    daphne, workers, api, research_model, user, open_page, viewport
) -> None:
    # given a 2x2 research started with "Review the plan first", waiting for its review
    research_id = start_research(api, 2, 2, review_plan=True)
    wait_until(lambda: Research.objects.get(pk=research_id).status == ResearchStatus.AWAITING_REVIEW, timeout=30)
    watched = open_page(viewport)
    page = watched.page
    sign_in(page, daphne.url, "alice", f"/research/{research_id}/")
    panel = page.locator("#plan-review")
    rows = panel.locator(".plan-row")
    expect(rows).to_have_count(2, timeout=30_000)
    page.evaluate(LAYOUT_SHIFTS)
    # then each row is numbered, and its fields are labelled where they can be seen, its objective a few lines
    expect(panel.locator(".plan-number")).to_have_text(["1.", "2."])
    expect(panel.locator("label")).to_have_text(
        ["Query 1", "What query 1 should find out", "Query 2", "What query 2 should find out"]
    )
    assert panel.get_by_label("What query 1 should find out").evaluate("el => el.tagName") == "TEXTAREA"
    screenshot(page, f"plan-review-{viewport['width']}", "#plan-review")
    # when alice approves it, and it runs to its report
    panel.get_by_role("button", name="Approve and start").click()
    expect(page.locator("#r-status")).to_have_text("Completed", timeout=120_000)
    expect(page.locator("#report-body > *").first).to_be_visible()
    page.wait_for_timeout(500)  # the last frames' shifts are reported
    # then nothing on the page jumped under her: cumulative layout shift under Chromium's "good" line
    shift, shifts = page.evaluate("[window.__shift, window.__shifts]")
    assert shift < MAX_LAYOUT_SHIFT, "\n".join(map(str, shifts))
    print(f"layout shift {shift:.3f}")
    expect(panel).to_have_text("Plan reviewed and approved: 2 top-level queries.")
    assert watched.errors == []
