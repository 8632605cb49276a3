"""The finished report in the browser: each citation shows the quote it rests on, on hover and on keyboard focus,
and the report downloads as PDF and as Word."""

import io
import re
from pathlib import Path

import pytest
from docx import Document as WordDocument
from playwright.sync_api import expect
from pypdf import PdfReader

from research.collection.documents import store_document
from research.collection.readers import ParsedDocument
from research.models import DocumentOrigin
from tests.support.browser import DESKTOP, PHONE, screenshot
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


@pytest.mark.parametrize("viewport", [pytest.param(DESKTOP, id="desktop"), pytest.param(PHONE, id="phone")])
def test_the_report_starts_on_the_first_screen_under_a_title_shown_once(
    daphne, open_page, user, fake_web, viewport
) -> None:
    # given alice's finished research with a long title, and its report, whose own title is the same
    title = "Heat pumps in Nordic winters: field measurements, defrost losses and what limits efficiency below -20 °C"
    research = seed_research(user, title, "completed", page_url=fake_web.page_url, report=True)
    watched = open_page(viewport)
    page = watched.page
    # when she opens it
    sign_in(page, daphne.url, "alice", f"/research/{research.pk}/")
    report = page.locator("#report-body")
    expect(report.locator("h1")).to_have_text(title)
    # then the page's title has the width (at most two lines on a desktop, not squeezed beside the actions)...
    heading = page.locator("#r-title")
    lines = heading.bounding_box()["height"] / float(
        heading.evaluate("el => parseFloat(getComputedStyle(el).lineHeight)")
    )
    assert lines <= (2.2 if viewport is DESKTOP else 4.2), lines
    # ...the report's own copy of it is not shown again (it stays a heading for screen readers)...
    assert report.locator("h1").evaluate("el => el.getBoundingClientRect().height") <= 1
    # ...and the report's first words are on the first screen
    first = report.locator("> :not(.visually-hidden)").first
    top = first.bounding_box()["y"]
    assert top + 20 <= viewport["height"], (top, viewport)
    screenshot(page, f"report-first-{viewport['width']}")
    assert watched.errors == []


def test_a_citation_opens_its_document_at_the_quote_highlighted_with_the_way_back(daphne, open_page, user) -> None:
    # given a long document of the collection, the quote far down it, and a report citing it
    filler = "\n\n".join(f"Paragraph {n} of the field notes records the weather of that week." for n in range(120))
    text = f"# Field notes\n\n{filler}\n\n{QUOTE_ONE}\n\n{filler}"
    parsed = ParsedDocument(title="Field notes", text=text, content_type="text/markdown")
    document, _ = store_document("/srv/share/notes/field-notes.md", DocumentOrigin.FOLDER, None, text.encode(), parsed)
    cited = f"{daphne.url}/collection/{document.pk}/"
    research = seed_research(
        user,
        TITLE,
        "completed",
        page_url=lambda slug: cited if slug == "report-source-one" else f"https://example.com/{slug}",
        report=True,
    )
    watched = open_page()
    page = watched.page
    sign_in(page, daphne.url, "alice", f"/research/{research.pk}/")
    citation = page.locator("#report-body p a").first
    expect(citation).to_have_attribute("title", QUOTE_ONE)
    # when she follows the citation (it opens beside the report)
    with page.context.expect_page() as opened:
        citation.click()
    reader = opened.value
    # then the document opens inside the app, at the quoted sentence, highlighted
    mark = reader.locator("mark#quote")
    expect(mark).to_have_text(QUOTE_ONE)
    expect(mark).to_be_in_viewport()
    assert reader.evaluate("window.scrollY") > 1000  # scrolled down to it, not left at the top
    assert mark.evaluate("el => getComputedStyle(el).backgroundColor") != "rgba(0, 0, 0, 0)"
    screenshot(reader, "citation-lands-on-the-quote")
    # and the way back leads to the research
    reader.get_by_role("link", name=re.compile("Back to the research")).click()
    expect(reader).to_have_url(f"{daphne.url}/research/{research.pk}/")
    assert watched.errors == []
