"""The report as PDF and Word: typeset for reading, with a title block, page numbers and working citation links, for
its owner only, per version. The PDF's first pages are saved as PNG under test-artifacts/exports/ to look at."""

import io
import re
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import unquote

import pypdfium2
import pytest
from django.utils.text import slugify
from docx import Document as WordDocument
from docx.opc.constants import RELATIONSHIP_TYPE
from docx.shared import Mm
from hypothesis import given
from hypothesis import strategies as st
from pypdf import PdfReader

from research.models import AnswerStatus, AskedQuestion, Document, DocumentKind, Research, ResearchStatus
from research.text.quotes import PageText
from research.web import exports
from research.web.rendering import render_markdown
from tests.support.reports import sentence
from workers.agents.report_writer import SourceNote
from workers.pipeline.citations import render_answer, render_report

pytestmark = pytest.mark.django_db

ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts" / "exports"
PROMPT = "How well do air-source heat pumps work in Nordic winters, and what do they cost?"
META = exports.ExportMeta("Cold-climate heat pumps", PROMPT, datetime(2025, 5, 5, 9, 30, tzinfo=UTC), 1)

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
    research = Research.objects.create(owner=user, prompt=PROMPT, title="t", status=ResearchStatus.COMPLETED)
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
    assert "The seasonal COP averaged 2.7." in text
    # a source shows its title and site, not its URL
    assert "Nordic trial (a.example)" in text and TRIAL not in text
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
    assert "Ground-source systems cost 30% more.[2]" in text  # the citation raised against its sentence
    # the sources list, numbered by Word as the citations are, with the quotes they rest on
    sources = [(p.style.name, p.text) for p in document.paragraphs if p.style.name == "List Number"]
    assert sources[0] == ("List Number", f"Nordic trial (a.example) — quoted: “{TRIAL_QUOTE}”")
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
    meta = exports.ExportMeta(HOSTILE_TITLE, "Ελληνικά {nb} 热泵", META.written_at)
    text, links = pdf_text_and_links(exports.report_pdf(markdown, meta))
    assert "Wärmepumpen" in text and "Field measurements" not in text and '"quotes"' in text
    assert "Page 1 of 1" in text and "{nb}" in text  # the page count alias in the request stays text
    assert {unquote(link) for link in links} == {TRIAL, ODD}


def test_the_export_holds_only_what_the_sanitised_page_shows() -> None:
    markdown = "# T\n\nA [trap](javascript:alert(1)) and <script>alert(2)</script> [[1]](https://a.example/x)\n"
    assert "javascript" not in render_markdown(markdown).split("href")[-1]
    meta = exports.ExportMeta("T", "<b>request</b> **not bold**", META.written_at)
    document, hyperlinks = docx_of(exports.report_docx(markdown, meta))
    assert hyperlinks == ["https://a.example/x"]
    text = "\n".join(p.text for p in document.paragraphs)
    # shown as text, as on the page
    assert "<script>alert(2)</script>" in text and "Request: <b>request</b> **not bold**" in text
    text, links = pdf_text_and_links(exports.report_pdf(markdown, meta))
    assert links == ["https://a.example/x"]
    assert "<script>alert(2)</script>" in text and "Request: <b>request</b> **not bold**" in text


def annotations(content: bytes) -> list[list[tuple[str, float]]]:
    """Each page's link annotations: (URI, width in pt)."""
    pages = []
    for page in PdfReader(io.BytesIO(content)).pages:
        links = [annotation.get_object() for annotation in page.get("/Annots", [])]
        pages.append([(link["/A"]["/URI"], float(link["/Rect"][2]) - float(link["/Rect"][0])) for link in links])
    return pages


def save_png(content: bytes, name: str, page: int = 0) -> Path:
    """One page of the PDF as a PNG under test-artifacts/exports/, to look at how it is typeset."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    document = pypdfium2.PdfDocument(content)
    try:
        image = document[page].render(scale=1.6).to_pil()
    finally:
        document.close()
    path = ARTIFACTS / name
    image.save(path)
    assert image.size[0] > 900 and image.convert("L").getextrema()[0] < 60  # a page, with dark text on it
    return path


def test_pdf_gives_each_adjacent_citation_its_own_link() -> None:
    # given a sentence with three adjacent citations, as the report writes them
    urls = ["https://a.example/one", "https://b.example/two", "https://c.example/three"]
    cited = "".join(f"[[{n}]]({url})" for n, url in enumerate(urls, start=1))
    markdown = f"# Cold-climate heat pumps\n\nHeat pumps work in the cold. {cited}\n"
    # when it is exported, then each marker is a link annotation of its own, to its own source, in order
    pages = annotations(exports.report_pdf(markdown, META))
    assert [url for url, _ in pages[0]] == urls
    assert all(width < 20 for _, width in pages[0])  # a marker wide, not one link over all three


def test_pdf_has_a_title_block_and_page_n_of_m_on_every_page(api, user) -> None:
    # given a long report
    research = Research.objects.create(owner=user, prompt=PROMPT, title="t", status=ResearchStatus.COMPLETED)
    document = Document.objects.create(
        research=research, kind=DocumentKind.REPORT, markdown=rendered(repeat=40), version=1
    )
    content = api.get(f"/api/research/{research.pk}/report.pdf").content
    reader = PdfReader(io.BytesIO(content))
    total = len(reader.pages)
    assert total > 2
    texts = [page.extract_text() for page in reader.pages]
    # then page 1 opens with the title, the date the report was written and the request
    written = exports.written_on(document.created_at)
    assert texts[0].startswith("Cold-climate heat pumps") and f"Written {written}" in texts[0]
    assert f"Request: {PROMPT}" in " ".join(texts[0].split())
    # and every page says which it is, the pages after the first under a running header with the title
    for number, text in enumerate(texts, start=1):
        assert f"Page {number} of {total}" in text
        assert number == 1 or ("Cold-climate heat pumps" in text and written in text)
    assert reader.metadata.title == "Cold-climate heat pumps" and reader.metadata.author == "deep research"
    # and every citation is one link annotation: as many on a page as markers printed on it (sources: one per line)
    for page, text in zip(annotations(content)[:-1], texts[:-1], strict=True):
        assert len(page) == len(re.findall(r"\[\d\]", text))
    save_png(content, "long-report-page-2.png", page=1)


def test_pdf_first_page_looks_typeset(api, finished) -> None:
    content = api.get(f"/api/research/{finished.pk}/report.pdf").content
    path = save_png(content, "report-page-1.png")
    assert path.stat().st_size > 10_000


def test_docx_is_a4_with_its_own_properties_real_lists_and_page_numbers(api, finished) -> None:
    markdown = rendered() + "\n## Steps\n\n1. Survey the house\n2. Size the pump\n\n- a bullet\n- another\n"
    Document.objects.filter(research=finished).update(markdown=markdown)
    written = Document.objects.get(research=finished).created_at
    document, _ = docx_of(api.get(f"/api/research/{finished.pk}/report.docx").content)
    # A4 with the PDF's margins
    section = document.sections[0]
    assert abs(section.page_width - Mm(210)) < Mm(1) and abs(section.page_height - Mm(297)) < Mm(1)
    assert abs(section.left_margin - Mm(24)) < Mm(1) and abs(section.right_margin - Mm(24)) < Mm(1)
    # its properties are the report's, none python-docx's template left
    properties = document.core_properties
    assert properties.title == "Cold-climate heat pumps" and properties.subject == PROMPT == properties.comments
    assert properties.author == "deep research" and properties.revision == 1
    assert properties.created.year != 2013 and abs((properties.created - written).total_seconds()) < 1
    assert "python-docx" not in document.part.package.core_properties._element.xml
    # the title block: title, date, request
    assert [p.text for p in document.paragraphs[:3]] == [
        "Cold-climate heat pumps",
        f"Written {exports.written_on(written)}",
        f"Request: {PROMPT}",
    ]
    # lists are Word's numbered and bulleted lists, numbered by Word, each numbered list from 1
    items = [(p.style.name, p.text) for p in document.paragraphs if p.style.name.startswith("List")]
    assert ("List Number", "Survey the house") in items and ("List Bullet", "a bullet") in items
    assert not any(re.match(r"\d+\. ", text) for _, text in items)
    numbered = [p for p in document.paragraphs if p.style.name == "List Number"]
    num_ids = {p._p.pPr.numPr.numId.val for p in numbered}
    assert len(num_ids) == 2  # the sources and the steps: two lists, each restarting at 1
    # every page's footer counts the pages with Word's PAGE and NUMPAGES fields
    for footer in (section.footer, section.first_page_footer):
        assert "PAGE" in footer._element.xml and "NUMPAGES" in footer._element.xml
        assert footer.paragraphs[0].text.startswith("Page ")


def test_markdown_download_is_named_after_the_title(api, finished) -> None:
    response = api.get(f"/api/research/{finished.pk}/report.md")
    assert response.status_code == 200 and response.content.decode().startswith("# Cold-climate heat pumps")
    assert response["Content-Disposition"] == (
        "attachment; filename=\"cold-climate-heat-pumps.md\"; filename*=UTF-8''cold-climate-heat-pumps.md"
    )
    versioned = api.get(f"/api/research/{finished.pk}/report.md?version=1")
    assert 'filename="cold-climate-heat-pumps-v1.md"' in versioned["Content-Disposition"]
    # the error output keeps its own name
    assert api.get(f"/api/research/{finished.pk}/error-output.md").status_code == 404


# --- The conversation as an appendix: `?conversation=1` --------------------------------------------------------------

COST_QUESTION = "What does drilling add to the cost?"
# A user's question holding markup: it must read as written, and its link must not become one.
MARKUP_QUESTION = "Is *COP* [worth it](https://evil.example/) for C#?"
UNANSWERED = "The sources of this research do not answer this question.\n"


def answer_markdown(text: str, number: int, quote: str) -> str:
    """An answer as the ask step stores it: its sentences cited, then its own sources list, numbered from 1."""
    markdown, _ = render_answer([[sentence(text, [number], [(number, quote)])]], SOURCES, PAGES)
    assert markdown.startswith(text)
    return markdown


@pytest.fixture
def conversation(finished) -> Research:
    """Two answered questions, one the sources do not answer, one still being written and one that failed."""
    rows = [
        (COST_QUESTION, AnswerStatus.ANSWERED, answer_markdown("Drilling adds about 30%.", 2, ODD_QUOTE)),
        ("Is this one still being written?", AnswerStatus.WRITING, ""),
        (MARKUP_QUESTION, AnswerStatus.ANSWERED, answer_markdown("The COP averaged 2.7.", 1, TRIAL_QUOTE)),
        ("Did this one fail?", AnswerStatus.FAILED, ""),
        ("What about geothermal?", AnswerStatus.ANSWERED, UNANSWERED),
    ]
    for position, (question, status, answer) in enumerate(rows, start=1):
        AskedQuestion.objects.create(
            research=finished, position=position, question=question, status=status, answer=answer
        )
    return finished


def test_markdown_export_appends_the_answered_questions_only_when_asked(api, conversation) -> None:
    url = f"/api/research/{conversation.pk}/report.md"
    report = Document.objects.get(research=conversation).markdown
    plain = api.get(url)
    assert plain.content.decode() == report and api.get(f"{url}?conversation=0").content == plain.content
    with_qa = api.get(f"{url}?conversation=1")
    assert with_qa.status_code == 200 and with_qa["Content-Disposition"] == plain["Content-Disposition"]
    text = with_qa.content.decode()
    assert text.startswith(report.rstrip("\n"))
    appendix = text[len(report.rstrip("\n")) :]
    # the answered questions, in the order asked, each a subsection with its answer and that answer's own sources
    headings = re.findall(r"^(#+) (.*)$", appendix, re.MULTILINE)
    assert headings == [
        ("##", "Questions and answers"),
        ("###", "What does drilling add to the cost?"),
        ("###", r"Is \*COP\* \[worth it\]\(https://evil\.example/\) for C\#?"),
        ("###", "What about geothermal?"),
    ]
    assert "still being written" not in appendix and "fail" not in appendix
    assert appendix.count("Sources:") == 2 and appendix.count("\n1. [") == 2  # each answer's list from 1
    assert UNANSWERED.strip() in appendix
    # the question's markup is text on the page: no emphasis, no link to where it pointed
    html = render_markdown(text)
    assert "<h3>Is *COP* [worth it](https://evil.example/) for C#?</h3>" in html
    assert 'evil.example/"' not in html and 'href="https://evil.example' not in html


@pytest.mark.parametrize("extension", ["md", "pdf", "docx"])
def test_the_conversation_parameter_is_0_or_1(api, conversation, extension) -> None:
    for value in ("2", "yes", "true", ""):
        response = api.get(f"/api/research/{conversation.pk}/report.{extension}?conversation={value}")
        assert response.status_code == 400 and response.json()["error"]["field"] == "conversation"


def test_pdf_export_has_the_questions_and_answers_appendix_only_when_asked(api, conversation) -> None:
    url = f"/api/research/{conversation.pk}/report.pdf"
    plain = api.get(url).content
    assert api.get(f"{url}?conversation=0").content == plain
    text, links = pdf_text_and_links(plain)
    assert "Questions and answers" not in text and COST_QUESTION not in text and "Drilling adds" not in text
    response = api.get(f"{url}?conversation=1")
    assert response.status_code == 200 and response.content.startswith(b"%PDF")
    assert response["Content-Disposition"].startswith('attachment; filename="cold-climate-heat-pumps.pdf"')
    text_qa, links_qa = pdf_text_and_links(response.content)
    flat = " ".join(text_qa.split())
    # the report first, then the appendix: each question, its answer and its own sources, in the order asked
    order = [
        "Field measurements",
        "Questions and answers",
        COST_QUESTION,
        "Drilling adds about 30%.",
        "Costs (b.example) — quoted: “Installers said:",
        "Is *COP* [worth it](https://evil.example/) for C#?",
        "The COP averaged 2.7.",
        "Nordic trial (a.example)",
        "What about geothermal?",
        UNANSWERED.strip(),
    ]
    at = 0
    for part in order:
        at = flat.find(part, at)
        assert at >= 0, part
    assert "still being written" not in text_qa and "Did this one fail" not in text_qa
    # the answers' citations are links to their pages, as the report's are; the question's link is none
    assert len(links_qa) > len(links) and {unquote(link) for link in links_qa} == {TRIAL, ODD}
    # the appendix and each question are in the bookmark outline, under the report's headings
    outline = [item.title for item in PdfReader(io.BytesIO(response.content)).outline if not isinstance(item, list)]
    assert "Questions and answers" in outline


def test_docx_export_has_the_questions_and_answers_appendix_only_when_asked(api, conversation) -> None:
    url = f"/api/research/{conversation.pk}/report.docx"
    plain, _ = docx_of(api.get(url).content)
    # the same document (a .docx zip carries the time it was built, so its bytes differ from build to build)
    assert plain.element.xml == docx_of(api.get(f"{url}?conversation=0").content)[0].element.xml
    assert not any("Questions and answers" in p.text or COST_QUESTION in p.text for p in plain.paragraphs)
    document, hyperlinks = docx_of(api.get(f"{url}?conversation=1").content)
    headings = [(p.style.name, p.text) for p in document.paragraphs if p.style.name.startswith("Heading")]
    assert headings[-4:] == [
        ("Heading 1", "Questions and answers"),
        ("Heading 2", COST_QUESTION),
        ("Heading 2", "Is *COP* [worth it](https://evil.example/) for C#?"),
        ("Heading 2", "What about geothermal?"),
    ]
    texts = [p.text for p in document.paragraphs]
    start = texts.index("Questions and answers")
    appendix = texts[start:]
    assert "Drilling adds about 30%.[1]" in appendix and "The COP averaged 2.7.[1]" in appendix
    assert UNANSWERED.strip() in appendix
    # each answer's sources are a Word numbered list of their own, restarting at 1 as its citations do
    lists = [p for p in document.paragraphs[start:] if p.style.name == "List Number"]
    assert [p.text.split(" (")[0] for p in lists] == ["Costs", "Nordic trial"]
    assert len({p._p.pPr.numPr.numId.val for p in lists}) == 2
    assert {unquote(link) for link in hyperlinks} == {TRIAL, ODD}


def test_nothing_is_appended_when_no_question_is_answered(api, finished) -> None:
    AskedQuestion.objects.create(research=finished, position=1, question="Pending?", status=AnswerStatus.PENDING)
    url = f"/api/research/{finished.pk}/report.md"
    assert api.get(f"{url}?conversation=1").content == api.get(url).content


def test_a_long_question_heads_its_subsection_shortened_and_follows_whole() -> None:
    question = "Which " + "very " * 300 + "long question?\nOn two lines."
    markdown = exports.with_conversation("# T\n\nText.\n", [(question, "An answer.\n")])
    html = render_markdown(markdown)
    heading = re.search(r"<h3>(.*?)</h3>", html).group(1)
    assert heading.endswith("…") and len(heading) <= exports.MAX_QUESTION_HEADING_CHARS
    assert f"<blockquote>\n<p>{' '.join(question.split())}</p>\n</blockquote>" in html
    assert html.index("<h3>") < html.index("An answer.")


def test_a_long_title_names_its_file_whole_or_cut_after_a_whole_word() -> None:
    title = (
        "How do air-source heat pumps perform in Nordic winters below minus twenty degrees, what limits their "
        "efficiency, and which of the measured designs from Finland, Sweden and Norway hold up best over time"
    )
    ascii_name, unicode_name = exports.export_filename(title, "pdf", 2)
    assert ascii_name == unicode_name
    assert ascii_name.startswith("how-do-air-source-heat-pumps-perform-in-nordic-winters-below-minus-twenty-degrees")
    assert ascii_name.endswith("-hold-up-best-over-time-v2.pdf")  # 198 characters: whole, no longer cut at 80
    longer = exports.export_filename(title + ", with more years of data", "md")[0]
    assert longer == ascii_name.removesuffix("-v2.pdf") + ".md"  # "-with" would pass 200 bytes: cut before it


@given(st.text(min_size=1, max_size=200))
def test_a_file_name_is_never_cut_inside_a_word(title: str) -> None:
    for name, slug in zip(
        exports.export_filename(title, "pdf"),
        (slugify(exports.unicodedata.normalize("NFKD", title)), slugify(title, allow_unicode=True)),
        strict=True,
    ):
        stem = name.removesuffix(".pdf")
        assert len(stem.encode()) <= exports.MAX_NAME_BYTES
        if stem != "report" and len(slug.encode()) > exports.MAX_NAME_BYTES and "-" in slug[: len(stem) + 1]:
            assert slug.startswith(stem) and slug[len(stem)] == "-"
