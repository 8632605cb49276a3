"""Report length in the browser, on the real stack: the start form's length choice, stored as the research's
report_words, and the coverage line beside the finished report."""

import re

import pytest
from playwright.sync_api import expect

from research.live.snapshot import build_snapshot
from research.models import Extract, Research, ResearchStatus, Website, WebsiteStatus
from tests.support.browser import answer_one_question, screenshot
from tests.support.logins import sign_in

pytestmark = pytest.mark.django_db(transaction=True)

FINISH_TIMEOUT = 180_000


def test_report_length_from_the_form_and_coverage_beside_the_report(
    daphne, workers, research_model, user, open_page
) -> None:
    # given alice's answered questions
    page = open_page().page
    sign_in(page, daphne.url, "alice")
    answer_one_question(page, 2, 1)
    length = page.locator("#report-length")
    expect(length).to_have_value("standard")
    assert length.locator("option").all_inner_texts() == [
        "Brief: about 1,500 words",
        "Standard: about 4,000 words",
        "Long: about 10,000 words",
        "A number of words",
    ]
    # a number of words out of range is refused in the form, and nothing is started
    expect(page.locator("#report-words")).to_be_hidden()
    length.select_option("words")
    page.fill("#report-words", "100")
    page.click("#start-button")
    expect(page.locator("#answers-form .form-error")).to_have_text(
        "Report length must be a whole number of words from 300 to 30,000."
    )
    assert not Research.objects.exclude(status=ResearchStatus.AWAITING_ANSWERS).exists()

    # when she asks for a brief report and starts
    length.select_option("brief")
    expect(page.locator("#report-words")).to_be_hidden()
    page.click("#start-button")
    page.wait_for_url(re.compile(r"/research/[0-9a-f-]{36}/$"))
    research = Research.objects.get(pk=page.url.rstrip("/").rsplit("/", 1)[-1])

    # then the length was stored
    assert research.report_words == 1500
    # and once it is done, the coverage line beside the report gives the database's counts
    expect(page.locator("#r-status")).to_have_text("Completed", timeout=FINISH_TIMEOUT)
    coverage = build_snapshot(research.pk)["coverage"]
    analysed = Website.objects.filter(research=research, status=WebsiteStatus.ANALYZED)
    assert coverage["findings"] == Extract.objects.filter(research=research).count() > 0
    assert coverage["pages_analysed"] == analysed.values("url").distinct().count() > 0
    assert 0 < coverage["pages_cited"] <= coverage["pages_analysed"] and coverage["words"] > 0
    assert coverage["report_words"] == 1500
    line = page.locator("#report-coverage")
    expect(line).to_be_visible()
    found = "finding" if coverage["findings"] == 1 else "findings"
    verb = "was" if coverage["findings_used"] == 1 else "were"
    expect(line).to_have_text(
        f"Cites {coverage['pages_cited']:,} of {coverage['pages_analysed']:,} analysed pages; "
        f"{coverage['findings_used']:,} of {coverage['findings']:,} {found} {verb} given to the writer; "
        f"{coverage['words']:,} of about 1,500 words."
    )
    # plain text in the page's soft text colour, readable on its background (WCAG AA: 4.5:1)
    assert page.evaluate(CONTRAST, "#report-coverage") >= 4.5
    screenshot(page, "report-coverage")


# The contrast ratio of an element's text colour on the page background (both opaque here), per WCAG 2.
CONTRAST = """(selector) => {
  const rgb = (css) => css.match(/[0-9.]+/g).slice(0, 3).map(Number);
  const lum = (c) => {
    const [r, g, b] = c.map((v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; });
    return 0.2126 * r + 0.7152 * g + 0.0722 * b;
  };
  const fg = lum(rgb(getComputedStyle(document.querySelector(selector)).color));
  const bg = lum(rgb(getComputedStyle(document.body).backgroundColor));
  return (Math.max(fg, bg) + 0.05) / (Math.min(fg, bg) + 0.05);
}"""
