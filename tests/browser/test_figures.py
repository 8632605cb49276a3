"""One definition of each figure: a completed, a budget-stopped and a cancelled-then-reported research each show
the same number of analysed pages on their card, in the coverage line, in the report's preface and in its export,
and their query totals say what was left. On the real stack: daphne, the session's worker processes, PostgreSQL,
Redis and the loopback fakes."""

import re

import pytest
from playwright.sync_api import Page, expect

from research.live.snapshot import build_snapshot
from research.models import Research, ResearchStatus
from tests.support.browser import DESKTOP, PHONE, screenshot
from tests.support.e2e import start_research, wait_finished
from tests.support.logins import sign_in
from tests.support.seed import seed_research

pytestmark = pytest.mark.django_db(transaction=True)

# About a quarter of what a 3x3 research spends on the fake model: it stops part-way (tests/test_engine_budgets.py).
TOKEN_BUDGET = 18_000
_NUMBER = r"(\d[\d,]*)"


def number(text: str, pattern: str) -> int:
    match = re.search(pattern, text)
    assert match, f"{pattern!r} not in {text!r}"
    return int(match.group(1).replace(",", ""))


def shown_figures(page: Page, daphne_url: str, research: Research) -> dict[str, int]:
    """The analysed pages as each place shows them, and the query card's text."""
    page.goto(f"{daphne_url}/research/{research.pk}/")
    expect(page.locator("#report-body h1")).to_be_visible()
    card = page.locator("#s-analysed").inner_text()
    shown = {
        "card": number(card, rf"^{_NUMBER} / "),
        "coverage line": number(page.locator("#report-coverage").inner_text(), rf"of {_NUMBER} analysed page"),
    }
    if research.partial:
        preface = page.locator("#report-body blockquote").first.inner_text()
        shown["preface"] = 1 if "covers the page analysed" in preface else number(preface, rf"the {_NUMBER} pages")
    return shown


@pytest.mark.parametrize("viewport", [pytest.param(DESKTOP, id="desktop"), pytest.param(PHONE, id="phone")])
def test_every_place_shows_the_same_page_figures_for_each_ending(
    daphne, workers, api, research_model, fake_web, user, open_page, viewport
) -> None:
    # given a completed research, one its token budget stopped, and one cancelled and then reported on
    completed = wait_finished(start_research(api, 2, 2))
    stopped = wait_finished(start_research(api, 3, 3, budget={"tokens": TOKEN_BUDGET}))
    cancelled = seed_research(user, "Heat pumps in Nordic winters", "cancelled", page_url=fake_web.page_url)
    assert api.post(f"/api/research/{cancelled.pk}/report").status_code == 202
    cancelled = wait_finished(str(cancelled.pk))
    assert stopped.partial and stopped.stop_reason == "budget_tokens", stopped.error
    assert cancelled.partial and cancelled.stop_reason == "cancelled", cancelled.error
    watched = open_page(viewport)
    page = watched.page
    sign_in(page, daphne.url, "alice")
    for research in (completed, stopped, cancelled):
        assert research.status == ResearchStatus.COMPLETED, research.error
        progress = build_snapshot(research.pk)["progress"]
        # when alice opens it
        shown = shown_figures(page, daphne.url, research)
        # then every place shows the snapshot's one count of analysed pages (distinct pages, not search results)
        assert set(shown.values()) == {progress["pages_analysed"]}, (research.title, shown, progress)
        assert progress["pages_analysed"] <= progress["pages_found"] <= progress["websites_found"]
        # and so does the exported report
        export = api.get(f"/api/research/{research.pk}/report.md").content.decode()
        if research.partial:
            assert f"the {progress['pages_analysed']:,} pages analysed" in export
        # and its query total is final: no "up to", with what did not finish named
        queries = page.locator("#s-queries").inner_text()
        assert "up to" not in queries
        assert queries.startswith(f"{progress['queries_done']} / {progress['queries_planned']}")
        if progress["queries_cancelled"]:
            assert f"{progress['queries_cancelled']} cancelled" in queries
        expect(page.locator("#progress-bar")).to_have_attribute("style", re.compile(r"width: 100%"))
    screenshot(page, f"figures-cancelled-then-reported-{viewport['width']}")
    assert watched.errors == []
