"""The finished report in the browser: each citation shows the quote it rests on, on hover and on keyboard focus,
and the report downloads as PDF and as Word."""

import io
from pathlib import Path

import pytest
from docx import Document as WordDocument
from playwright.sync_api import expect
from pypdf import PdfReader

from tests.support.browser import screenshot
from tests.support.logins import sign_in
from tests.support.seed import QUOTE_ONE, QUOTE_TWO, seed_research

pytestmark = pytest.mark.django_db(transaction=True)

TITLE = "Heat pumps in Nordic winters"


def tooltip(link) -> str:
    """What the citation's tooltip shows now: its ::after box, when it is displayed."""
    return link.evaluate(
        """el => {
          const style = getComputedStyle(el, "::after");
          if (style.content === "none" || style.display === "none") return "";
          return JSON.parse(style.content);  // a CSS string: quoted, its quotes escaped
        }"""
    )


def test_citations_show_their_quote_and_the_report_downloads_as_pdf_and_word(daphne, open_page, user, fake_web) -> None:
    # given alice's finished research, with a report whose citations carry their quotes
    research = seed_research(user, TITLE, "completed", page_url=fake_web.page_url, report=True)
    watched = open_page()
    page = watched.page
    # when she opens it
    sign_in(page, daphne.url, "alice", f"/research/{research.pk}/")
    report = page.locator("#report-body")
    expect(report.locator("h1")).to_have_text(TITLE)
    citations = report.locator("p a")
    expect(citations).to_have_count(5)
    # then every citation link carries the quote it rests on
    assert [citations.nth(i).get_attribute("title") for i in range(5)] == [
        QUOTE_ONE,
        QUOTE_TWO,
        QUOTE_ONE,
        QUOTE_ONE,
        QUOTE_TWO,
    ]
    first, second = citations.nth(0), citations.nth(1)
    assert tooltip(first) == ""  # nothing shown until asked for
    # and a keyboard user reaching a citation sees its quote
    second.focus()
    page.keyboard.press("Shift+Tab")
    expect(first).to_be_focused()
    assert QUOTE_ONE in tooltip(first)
    page.keyboard.press("Tab")
    assert QUOTE_TWO in tooltip(second) and tooltip(first) == ""
    # and so does a mouse user, on hover
    page.locator("#r-title").focus()
    second.hover()
    assert QUOTE_TWO in tooltip(second)
    screenshot(page, "report-citation-tooltip")
    # the report downloads as PDF, named after its title, with the citations' links
    with page.expect_download() as download:
        page.click("#download-pdf")
    assert download.value.suggested_filename == "heat-pumps-in-nordic-winters.pdf"
    pdf = PdfReader(io.BytesIO(Path(download.value.path()).read_bytes()))
    assert TITLE in pdf.pages[0].extract_text()
    links = {a.get_object()["/A"]["/URI"] for a in pdf.pages[0].get("/Annots", [])}
    assert fake_web.page_url("report-source-one") in links
    # and as Word
    with page.expect_download() as download:
        page.click("#download-docx")
    assert download.value.suggested_filename == "heat-pumps-in-nordic-winters.docx"
    document = WordDocument(io.BytesIO(Path(download.value.path()).read_bytes()))
    assert document.paragraphs[0].text == TITLE
    targets = {rel.target_ref for rel in document.part.rels.values() if rel.is_external}
    assert fake_web.page_url("report-source-two") in targets
    assert watched.errors == [], watched.failed_requests
