"""A request the sources answer only in part, or not at all, ends as it really did: completed, with the report
saying first what was not found and how to go on, never a red "Failed" for a research in which nothing broke. On
the real stack: daphne, the session's worker processes, PostgreSQL, Redis and the loopback fakes."""

import json
import re

import pytest
from playwright.sync_api import expect

from research.models import Research, ResearchStatus
from tests.support.browser import screenshot
from tests.support.e2e import start_research, wait_finished
from tests.support.logins import sign_in
from tests.support.seed import seed_research

pytestmark = pytest.mark.django_db(transaction=True)

COVERED, UNCOVERED = "cold-climate efficiency", "noise at night"


def test_a_half_covered_request_says_which_part_the_sources_left_open(
    daphne, workers, api, research_model, fake_llm, open_page
) -> None:
    # given a request in two parts, the second of which no page speaks to (its branch's pages give no fact)
    research_model.top_names = [COVERED, UNCOVERED]
    fake_llm.handlers["website_analysis"] = lambda body, schema: (
        {"facts": []} if UNCOVERED in json.dumps(body) else research_model.analysis(body, schema)
    )
    research = wait_finished(start_research(api, 2, 1))
    assert research.status == ResearchStatus.COMPLETED, research.error
    watched = open_page()
    page = watched.page
    # when alice opens it
    sign_in(page, daphne.url, "alice", f"/research/{research.pk}/")
    # then it is completed, not failed, and says above the report and in it which part found nothing
    expect(page.locator("#r-status")).to_have_text("Completed")
    notice = page.locator("#r-off-topic")
    expect(notice).to_have_text(f"Partly answered: the sources read found nothing on “{UNCOVERED}”.")
    report = page.locator("#report-body")
    expect(report.locator("blockquote").first).to_contain_text(
        f"Partly answered. The sources read found nothing on “{UNCOVERED}”"
    )
    expect(page.locator("#tab-error")).to_be_hidden()
    screenshot(page, "outcome-partly-answered")
    assert watched.errors == []


def test_a_request_no_page_answers_ends_with_no_answer_found_and_the_way_on(
    daphne, workers, api, research_model, fake_llm, open_page
) -> None:
    # given pages that load and are read, none of which holds a fact on the request
    fake_llm.handlers["website_analysis"] = lambda body, schema: {"facts": []}
    research = wait_finished(start_research(api, 2, 1))
    assert research.status == ResearchStatus.COMPLETED, research.error
    watched = open_page()
    page = watched.page
    # when alice opens it
    sign_in(page, daphne.url, "alice", f"/research/{research.pk}/")
    # then it ended without failing, with its true outcome as its badge and above the report: no answer, from
    # pages that were read
    expect(page.locator("#r-status")).to_have_text("No answer found")
    expect(page.locator("#r-off-topic")).to_contain_text(
        re.compile(r"^No answer found: the \d+ pages read hold nothing")
    )
    report = page.locator("#report-body")
    expect(report.locator("h2")).to_have_text(["What was searched", "What was read", "How to go on"])
    expect(report.locator("blockquote").first).to_contain_text("No answer found.")
    # and nothing in it poses as a citation, and no error output is offered: nothing failed
    expect(report.locator("a")).to_have_count(0)
    expect(page.locator("#tab-error")).to_be_hidden()
    # and the way on is open: Dig deeper
    expect(page.locator("#deepen")).to_be_visible()
    screenshot(page, "outcome-no-answer-found")
    assert watched.errors == []


# (title, status, outcome, partial, stop_reason) → the badge's word and class in the sidebar (None: no badge) and
# in the page's header
ENDINGS = [
    ("Whole", "completed", "complete", False, "", None, "Completed"),
    ("Stopped by its budget", "completed", "partial", True, "budget_tokens", "Partial", "Partial"),
    ("Cancelled, then reported", "completed", "partial", True, "cancelled", "Partial", "Partial"),
    ("Branches failed", "completed", "partial", False, "", "Partial", "Partial"),
    ("Nothing on it", "completed", "unanswered", False, "", "No answer found", "No answer found"),
    ("Broke", "failed", "", False, "", "Failed", "Failed"),
    ("Called off", "cancelled", "", False, "", "Cancelled", "Cancelled"),
]


def test_each_ending_has_its_own_badge_in_the_sidebar_and_the_page(daphne, user, open_page, fake_web) -> None:
    # given alice's researches, one for each way a research ends
    seeded = {}
    for title, status, outcome, partial, stop_reason, *_ in ENDINGS:
        research = seed_research(user, title, status, page_url=fake_web.page_url, report=status == "completed")
        Research.objects.filter(pk=research.pk).update(outcome=outcome, partial=partial, stop_reason=stop_reason)
        seeded[title] = research
    watched = open_page()
    page = watched.page
    sign_in(page, daphne.url, "alice")
    # then the sidebar tells each ending apart, in its own word and colour; a whole research needs no badge
    colours = set()
    for title, *_, in_sidebar, _ in ENDINGS:
        badge = page.locator(f".sidebar-nav a[data-id='{seeded[title].pk}'] .badge")
        if in_sidebar is None:
            expect(badge).to_have_count(0)
            continue
        expect(badge).to_have_text(in_sidebar)
        colours.add((in_sidebar, badge.evaluate("el => getComputedStyle(el).color")))
    assert len({colour for _, colour in colours}) == len({word for word, _ in colours}) == 4
    screenshot(page, "sidebar-badges", ".sidebar-nav")
    # and each page's header says the same
    for title, *_, in_page in ENDINGS:
        page.goto(f"{daphne.url}/research/{seeded[title].pk}/")
        expect(page.locator("#r-status")).to_have_text(in_page)
    # and a research whose branches failed says in its banner that work was left
    page.goto(f"{daphne.url}/research/{seeded['Branches failed'].pk}/")
    expect(page.locator("#r-partial")).to_contain_text("some branches failed")
    assert watched.errors == []
