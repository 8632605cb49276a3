"""The report as it is written, in the browser, on the real stack: its sections appear in outline order as they
land, each below the ones above it, a line naming those still being written, and the stored report replaces them."""

import re
import threading

import pytest
from playwright.sync_api import expect

from devtools.fakes.llm import message_text
from research.models import ReportSection
from tests.support.browser import screenshot
from tests.support.e2e import start_research
from tests.support.logins import sign_in

pytestmark = pytest.mark.django_db(transaction=True)

FINISH_TIMEOUT = 180_000


def test_the_report_grows_section_by_section(api, daphne, workers, research_model, fake_llm, user, open_page) -> None:
    # given a model whose second section is held back until the test lets it go
    released = threading.Event()
    write = research_model.section

    def section(body, schema):
        if "Section to write: Findings 2\n" in "\n".join(message_text(m) for m in body.get("messages", [])):
            released.wait(timeout=120)
        return write(body, schema)

    fake_llm.handlers["report_section"] = section
    watched = open_page()
    page = watched.page
    sign_in(page, daphne.url, "alice")
    try:
        # when alice watches a 2x2 research reach its report
        research_id = start_research(api, 2, 2)
        page.goto(f"{daphne.url}/research/{research_id}/")
        # then the report tab opens on its own and shows the sections above the held one, in outline order, and a
        # line naming the held one; no section shows below the held one's place, even if written
        growth = page.locator("#report-growth")
        expect(growth).to_be_visible(timeout=FINISH_TIMEOUT)
        expect(growth.locator(".growth-note")).to_contain_text("next: Findings 2", timeout=FINISH_TIMEOUT)
        titles = list(
            ReportSection.objects.filter(research_id=research_id).order_by("position").values_list("title", flat=True)
        )
        above = titles[: titles.index("Findings 2")]
        assert above  # "Findings 1" at least
        shown = growth.locator(".growth-section")
        expect(shown).to_have_count(len(above))
        assert shown.evaluate_all("nodes => nodes.map((n) => n.dataset.title)") == above
        expect(shown.first.locator("a[href]").first).to_be_visible()
        expect(shown.first.locator("h2")).to_have_count(1)  # its own heading, once
        held_back = growth.locator('.growth-section[data-title="Findings 2"]')
        expect(held_back).to_have_count(0)
        expect(page.locator("#report-body")).to_be_hidden()
        screenshot(page, "report-growing-1", "#panel-report")
        first_html = shown.first.inner_html()
    finally:
        released.set()
    # and when the held section lands, the stored report follows and takes the sections' place
    expect(page.locator("#r-status")).to_have_text("Completed", timeout=FINISH_TIMEOUT)
    expect(page.locator("#report-growth")).to_be_hidden()
    expect(page.locator("#report-body h2").first).to_be_visible()
    screenshot(page, "report-growing-2-complete", "#panel-report")
    assert first_html  # what was shown while it grew was real content
    body = page.locator("#report-body").inner_text()
    assert all(title in body for title in titles)
    assert re.search(r"Sources", body)
    assert not watched.errors
