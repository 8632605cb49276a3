"""The report as PDF and Word: headings, text and working citation links, for its owner only, per version."""

import io
import re
from urllib.parse import unquote

import pytest
from docx import Document as WordDocument
from docx.opc.constants import RELATIONSHIP_TYPE
from pypdf import PdfReader

from research.models import Document, DocumentKind, Research, ResearchStatus
from research.text.quotes import PageText
from research.web import exports
from research.web.rendering import render_markdown
from workers.agents.report_writer import SourceNote
from workers.pipeline.citations import render_report

pytestmark = pytest.mark.django_db

PDF_TYPE = "application/pdf"
DOCX_TYPE = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"

TRIAL = "https://a.example/trial"
ODD = "https://b.example/costs_(2024)?a=1&b=2"
TRIAL_QUOTE = "The seasonal coefficient of performance averaged 2.7 across 14 homes."
ODD_QUOTE = 'Installers said: "it costs [about] 30% more (with drilling)" *in 2024*.'
PAGES = {
    TRIAL: PageText(f"Intro. {TRIAL_QUOTE} More text."),
    ODD: PageText(f"Costs. {ODD_QUOTE} The end."),
}
SOURCES = [
    SourceNote(1, TRIAL, "Nordic trial", [("COP 2.7", TRIAL_QUOTE)]),
    SourceNote(2, ODD, "Costs [2024]", [("30% more", ODD_QUOTE)]),
]


def sentence(text: str, sources: list[int], quotes: list[tuple[int, str]] = ()) -> dict:
    return {"text": text, "sources": sources, "quotes": [{"source": s, "quote": q} for s, q in quotes]}


def rendered(title: str = "Cold-climate heat pumps", heading: str = "Field measurements", repeat: int = 1) -> str:
    """A report as the pipeline renders it: sentences citing two pages, each citation with its quote."""
    paragraphs = [
        [
            sentence("The seasonal COP averaged 2.7.", [1], [(1, TRIAL_QUOTE)]),
            sentence("Ground-source systems cost 30% more.", [2], [(2, ODD_QUOTE)]),
            sentence("Both hold in cold climates.", [1, 2]),
        ]
    ] * repeat
    report = {
        "title": title,
        "summary": [sentence("Heat pumps work in the cold.", [1])],
        "sections": [{"heading": heading, "paragraphs": paragraphs, "subsections": []}],
    }
    markdown, _ = render_report(report, SOURCES, PAGES)
    return markdown


@pytest.fixture
def finished(user) -> Research:
    research = Research.objects.create(owner=user, prompt="p", title="t", status=ResearchStatus.COMPLETED)
    Document.objects.create(research=research, kind=DocumentKind.REPORT, markdown=rendered())
    return research


def pdf_text_and_links(content: bytes) -> tuple[str, list[str]]:
    reader = PdfReader(io.BytesIO(content))
    text = "\n".join(page.extract_text() for page in reader.pages)
    links = [
        annotation.get_object()["/A"]["/URI"]
        for page in reader.pages
        for annotation in page.get("/Annots", [])
        if annotation.get_object().get("/Subtype") == "/Link"
    ]
    return text, links


def docx_of(content: bytes):
    document = WordDocument(io.BytesIO(content))
    hyperlinks = [rel.target_ref for rel in document.part.rels.values() if rel.reltype == RELATIONSHIP_TYPE.HYPERLINK]
    return document, hyperlinks


def linked(url: str) -> str:
    # a link target is the URL with what breaks markdown links percent-encoded (research/text/links.py)
    return re.sub(r"[()]", lambda m: "%28" if m.group(0) == "(" else "%29", url)


def test_report_html_citations_carry_their_quote_as_title(api, finished) -> None:
    html = api.get(f"/api/research/{finished.pk}/report.html").content.decode()
    titles = set(re.findall(r'<a href="[^"]*" title="([^"]*)"[^>]*>(\[\d\])</a>', html))
    assert titles == {(TRIAL_QUOTE, "[1]"), (ODD_QUOTE.replace('"', "&quot;"), "[2]")}
    # every citation link (the sentences') has a title; the sources list's links are the pages themselves
    citations = re.findall(r"<a [^>]*>\[\d\]</a>", html)
    assert citations and all(' title="' in link for link in citations)


def test_pdf_export_has_the_headings_text_and_working_citation_links(api, finished) -> None:
    response = api.get(f"/api/research/{finished.pk}/report.pdf")
    assert response.status_code == 200 and response["Content-Type"] == PDF_TYPE
    assert response["Content-Disposition"].startswith('attachment; filename="cold-climate-heat-pumps.pdf"')
    assert response.content.startswith(b"%PDF")
    text, links = pdf_text_and_links(response.content)
    for heading in ("Cold-climate heat pumps", "Summary", "Field measurements", "Sources"):
        assert heading in text
    assert TRIAL in text and "The seasonal COP averaged 2.7." in text
    assert {unquote(link) for link in links} == {TRIAL, ODD}
    assert linked(ODD) in links  # the citation's own target, whole, query string and all


def test_docx_export_has_the_headings_and_hyperlinks(api, finished) -> None:
    response = api.get(f"/api/research/{finished.pk}/report.docx")
    assert response.status_code == 200 and response["Content-Type"] == DOCX_TYPE
    assert response["Content-Disposition"].startswith('attachment; filename="cold-climate-heat-pumps.docx"')
    document, hyperlinks = docx_of(response.content)
    headings = [(p.style.name, p.text) for p in document.paragraphs if p.style.name.startswith(("Heading", "Title"))]
    assert headings == [
        ("Title", "Cold-climate heat pumps"),
        ("Heading 1", "Summary"),
        ("Heading 1", "Field measurements"),
        ("Heading 1", "Sources"),
    ]
    assert {unquote(link) for link in hyperlinks} == {TRIAL, ODD}
    text = "\n".join(p.text for p in document.paragraphs)
    assert "Ground-source systems cost 30% more. [2]" in text
    # the sources list, numbered as the citations are, with the quotes they rest on
    assert f"1. Nordic trial — {TRIAL} — quoted: “{TRIAL_QUOTE}”" in text
    # the citation's hyperlink carries its quote as the tooltip Word shows
    tooltips = re.findall(r'w:tooltip="([^"]*)"', document.element.xml)
    assert TRIAL_QUOTE in tooltips


@pytest.mark.parametrize("extension", ["pdf", "docx"])
def test_exports_are_404_for_another_user_and_before_the_report(api, stranger, user, finished, extension) -> None:
    assert stranger.get(f"/api/research/{finished.pk}/report.{extension}").status_code == 404
    running = Research.objects.create(owner=user, prompt="p", title="t", status=ResearchStatus.RUNNING)
    response = api.get(f"/api/research/{running.pk}/report.{extension}")
    assert response.status_code == 404 and response.json()["error"]["message"].endswith("(yet)")
    assert api.post(f"/api/research/{finished.pk}/report.{extension}").status_code == 405


def test_exports_pick_a_version(api, finished) -> None:
    Document.objects.create(research=finished, kind=DocumentKind.REPORT, version=2, markdown=rendered("Second take"))
    latest = pdf_text_and_links(api.get(f"/api/research/{finished.pk}/report.pdf").content)[0]
    first = pdf_text_and_links(api.get(f"/api/research/{finished.pk}/report.pdf?version=1").content)[0]
    assert "Second take" in latest and "Second take" not in first and "Cold-climate heat pumps" in first
    response = api.get(f"/api/research/{finished.pk}/report.docx?version=1")
    assert 'filename="cold-climate-heat-pumps-v1.docx"' in response["Content-Disposition"]
    assert docx_of(response.content)[0].paragraphs[0].text == "Cold-climate heat pumps"
    assert api.get(f"/api/research/{finished.pk}/report.docx?version=3").status_code == 404
    assert api.get(f"/api/research/{finished.pk}/report.pdf?version=x").status_code == 400


HOSTILE_TITLE = 'Wärmepumpen 热泵 😀 "quoted" <b>/..\\ report'


def test_hostile_and_big_reports_export(api, user) -> None:
    # given a report whose title and heading hold emoji, CJK and markup, with tables, code and control characters,
    # and more than 200 KB of cited sentences
    markdown = rendered(HOSTILE_TITLE, "熱ポンプ 🔥 [x](https://evil.example/) <script>", repeat=400)
    markdown += "\n| a | b |\n|---|---|\n| 1 | 2 | 3 |\n\n```\ncode \x0b 热\n```\n\n> quoted \x01 text\n"
    assert len(markdown.encode()) > 200_000
    research = Research.objects.create(owner=user, prompt="p", title="t", status=ResearchStatus.COMPLETED)
    Document.objects.create(research=research, kind=DocumentKind.REPORT, markdown=markdown)
    # when it is exported, then both exports are whole documents with the citations' links
    pdf = api.get(f"/api/research/{research.pk}/report.pdf")
    assert pdf.status_code == 200 and pdf.content.startswith(b"%PDF")
    text, links = pdf_text_and_links(pdf.content)
    assert "Wärmepumpen" in text and {unquote(link) for link in links} == {TRIAL, ODD}
    docx = api.get(f"/api/research/{research.pk}/report.docx")
    document, hyperlinks = docx_of(docx.content)
    assert document.paragraphs[0].text.startswith("Wärmepumpen 热泵 😀")
    assert {unquote(link) for link in hyperlinks} == {TRIAL, ODD}
    # and the file name is the title, made safe
    disposition = pdf["Content-Disposition"]
    assert disposition.startswith("attachment; filename=\"warmepumpen-quoted-b-report.pdf\"; filename*=UTF-8''")
    assert "/" not in disposition.split("filename*=")[1].replace("%2F", "")


def test_pdf_without_a_unicode_font_falls_back_to_the_core_fonts(monkeypatch) -> None:
    # given a machine with no TrueType font installed
    monkeypatch.setattr(exports, "FONT_DIRS", [])
    markdown = rendered(HOSTILE_TITLE, "Ελληνικά “quotes” — 热泵")
    # when the report is exported, then it is a PDF still, its text transliterated where the core fonts lack it
    text, links = pdf_text_and_links(exports.report_pdf(markdown, HOSTILE_TITLE))
    assert "Wärmepumpen" in text and "Field measurements" not in text and '"quotes"' in text
    assert {unquote(link) for link in links} == {TRIAL, ODD}


def test_the_export_holds_only_what_the_sanitised_page_shows() -> None:
    markdown = "# T\n\nA [trap](javascript:alert(1)) and <script>alert(2)</script> [[1]](https://a.example/x)\n"
    assert "javascript" not in render_markdown(markdown).split("href")[-1]
    document, hyperlinks = docx_of(exports.report_docx(markdown, "T"))
    assert hyperlinks == ["https://a.example/x"]
    assert "<script>alert(2)</script>" in document.paragraphs[1].text  # shown as text, as on the page
    _, links = pdf_text_and_links(exports.report_pdf(markdown, "T"))
    assert links == ["https://a.example/x"]
