"""The report as a PDF (fpdf2) or a Word document (python-docx), with working citation links.

Both are built from the report's markdown the way the report page is: rendered by Python-Markdown with raw HTML off
and cleaned by the same allow-list (research/web/rendering.py), so an export holds exactly what the page shows and
nothing a model or a page wrote can become markup in it. The cleaned HTML is then walked: fpdf2 lays it out itself
(`write_html`), and for Word each element becomes its paragraph, list item, table or hyperlink run.

Both libraries are pure Python (fpdf2 needs fonttools and Pillow, python-docx lxml, all wheels), so an export needs no
system package but a TrueType font for text beyond Latin-1. The PDF uses the first font family found (DejaVu Sans,
then Liberation Sans); with none it falls back to the PDF core fonts and writes each character they lack as its
closest ASCII form or "?", so an export never fails on the text it holds. Exports are built per request: nothing is
cached, a report version never changes, and building one takes well under a second for a typical report.
"""

import io
import logging
import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from bs4 import BeautifulSoup, NavigableString, Tag
from django.utils.text import slugify
from docx import Document as WordDocument
from docx.enum.text import WD_COLOR_INDEX
from docx.opc.constants import RELATIONSHIP_TYPE
from docx.oxml import OxmlElement
from docx.oxml.ns import qn
from docx.shared import Pt, RGBColor
from docx.text.paragraph import Paragraph
from fpdf import FPDF, FontFace, TextStyle

from research.web.rendering import render_markdown

PDF_CONTENT_TYPE = "application/pdf"
DOCX_CONTENT_TYPE = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"

FONT_DIRS = [
    Path("/usr/share/fonts/truetype/dejavu"),
    Path("/usr/share/fonts/dejavu"),
    Path("/usr/share/fonts/TTF"),
    Path("/usr/share/fonts/truetype/liberation"),
    Path("/usr/share/fonts/liberation"),
    Path("/usr/share/fonts/truetype/liberation2"),
]
# (regular, bold, italic, bold italic, monospace) file names of each family, in order of preference.
FONT_FAMILIES = [
    (
        "DejaVuSans.ttf",
        "DejaVuSans-Bold.ttf",
        "DejaVuSans-Oblique.ttf",
        "DejaVuSans-BoldOblique.ttf",
        "DejaVuSansMono.ttf",
    ),
    (
        "LiberationSans-Regular.ttf",
        "LiberationSans-Bold.ttf",
        "LiberationSans-Italic.ttf",
        "LiberationSans-BoldItalic.ttf",
        "LiberationMono-Regular.ttf",
    ),
]
# Scripts the families above lack (Chinese, Japanese, Korean), used glyph by glyph where installed
# (Debian: fonts-droid-fallback); without one such characters are left out of the PDF, and the export still works.
FALLBACK_FONTS = [
    Path("/usr/share/fonts/truetype/droid/DroidSansFallbackFull.ttf"),
    Path("/usr/share/fonts/truetype/droid/DroidSansFallback.ttf"),
]
# fontTools logs every font subset it makes at INFO: a dozen lines per export.
logging.getLogger("fontTools").setLevel(logging.WARNING)

# XML 1.0 admits no control characters but tab and line breaks; python-docx refuses strings holding them.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")
_CITATION = re.compile(r"\[\d+\]")


@dataclass(frozen=True)
class Fonts:
    regular: Path
    bold: Path
    italic: Path
    bold_italic: Path
    mono: Path


def find_fonts() -> Fonts | None:
    """The first font family installed whole (all five files in one folder), or None."""
    for directory in FONT_DIRS:
        for names in FONT_FAMILIES:
            paths = [directory / name for name in names]
            if all(path.is_file() for path in paths):
                return Fonts(*paths)
    return None


def export_filename(title: str, extension: str, version: int | None = None) -> tuple[str, str]:
    """(ASCII file name, UTF-8 file name) for Content-Disposition, from the report's title."""
    suffix = f"-v{version}" if version else ""
    ascii_name = slugify(unicodedata.normalize("NFKD", title))[:80].strip("-") or "report"
    unicode_name = slugify(title, allow_unicode=True)[:80].strip("-") or ascii_name
    return f"{ascii_name}{suffix}.{extension}", f"{unicode_name}{suffix}.{extension}"


def content_disposition(title: str, extension: str, version: int | None = None) -> str:
    ascii_name, unicode_name = export_filename(title, extension, version)
    return f"attachment; filename=\"{ascii_name}\"; filename*=UTF-8''{quote(unicode_name)}"


def _report_tree(markdown: str) -> BeautifulSoup:
    """The report as the page shows it, with each source's URL written out after its link: a printed page has no
    link to hover, and the sources list is where a reader looks a citation up."""
    soup = BeautifulSoup(render_markdown(markdown), "html.parser")
    for link in soup.find_all("a"):
        href = link.get("href", "")
        if not href:  # a link the sanitiser took the target from: its text stays
            link.unwrap()
            continue
        text = link.get_text()
        if href and not _CITATION.fullmatch(text.strip()) and text.strip() != href:
            link.insert_after(NavigableString(f" — {href}"))
    return soup


# --- PDF -----------------------------------------------------------------------------------------------------------


def _ascii_only(text: str) -> str:
    """Text the PDF core fonts can show: Latin-1 kept, anything else as its closest ASCII form, else "?"."""
    replaced = {"“": '"', "”": '"', "‘": "'", "’": "'", "—": "-", "–": "-", "…": "...", "•": "*"}
    out = []
    for char in text:
        char = replaced.get(char, char)
        if len(char) > 1 or ord(char) < 256:
            out.append(char)
            continue
        ascii_form = unicodedata.normalize("NFKD", char).encode("ascii", "ignore").decode()
        out.append(ascii_form or "?")
    return "".join(out)


def _flatten_tables(soup: BeautifulSoup) -> None:
    # fpdf2's tables want every row to have the same cells; a model's table need not. Rows become paragraphs.
    for table in soup.find_all("table"):
        rows = []
        for row in table.find_all("tr"):
            paragraph = soup.new_tag("p")
            paragraph.string = " | ".join(cell.get_text(" ", strip=True) for cell in row.find_all(["td", "th"]))
            rows.append(paragraph)
        table.replace_with(*rows) if rows else table.decompose()


def report_pdf(markdown: str, title: str) -> bytes:
    soup = _report_tree(markdown)
    _flatten_tables(soup)
    pdf = FPDF(format="A4")
    pdf.set_title(title)
    pdf.set_creator("deep research")
    pdf.set_auto_page_break(auto=True, margin=15)
    fonts = find_fonts()
    if fonts is not None:
        pdf.add_font("report", "", str(fonts.regular))
        pdf.add_font("report", "B", str(fonts.bold))
        pdf.add_font("report", "I", str(fonts.italic))
        pdf.add_font("report", "BI", str(fonts.bold_italic))
        pdf.add_font("reportmono", "", str(fonts.mono))
        family, mono = "report", "reportmono"
        fallbacks = [path for path in FALLBACK_FONTS if path.is_file()][:1]
        for path in fallbacks:
            pdf.add_font("fallback", "", str(path))
        pdf.set_fallback_fonts(["fallback"] if fallbacks else [])
    else:
        for text in soup.find_all(string=True):
            text.replace_with(_ascii_only(str(text)))
        family, mono = "helvetica", "courier"
    pdf.add_page()
    pdf.set_font(family, size=11)
    styles = {"code": FontFace(family=mono), "pre": TextStyle(t_margin=4, font_family=mono)}
    pdf.write_html(str(soup), font_family=family, tag_styles=styles, warn_on_tags_not_matching=False)
    return bytes(pdf.output())


# --- Word ----------------------------------------------------------------------------------------------------------


def _xml_text(text: str) -> str:
    return _NOT_XML.sub("", text)


def _hyperlink(paragraph: Paragraph, text: str, url: str, title: str = "") -> None:
    """A real w:hyperlink to an external URL, blue and underlined, with the quote it rests on as its tooltip."""
    rel_id = paragraph.part.relate_to(url, RELATIONSHIP_TYPE.HYPERLINK, is_external=True)
    link = OxmlElement("w:hyperlink")
    link.set(qn("r:id"), rel_id)
    if title:
        link.set(qn("w:tooltip"), _xml_text(title)[:250])
    run = OxmlElement("w:r")
    properties = OxmlElement("w:rPr")
    color = OxmlElement("w:color")
    color.set(qn("w:val"), "1155CC")
    underline = OxmlElement("w:u")
    underline.set(qn("w:val"), "single")
    properties.append(color)
    properties.append(underline)
    run.append(properties)
    text_element = OxmlElement("w:t")
    text_element.text = _xml_text(text)
    text_element.set(qn("xml:space"), "preserve")
    run.append(text_element)
    link.append(run)
    paragraph._p.append(link)


def _inline(paragraph: Paragraph, node: Tag, bold: bool = False, italic: bool = False, code: bool = False) -> None:
    """The node's text into the paragraph: runs carrying emphasis and code, links as hyperlinks."""
    for child in node.children:
        if isinstance(child, NavigableString):
            text = _xml_text(str(child))
            if text:
                run = paragraph.add_run(text)
                run.bold, run.italic = bold or None, italic or None
                if code:
                    run.font.name = "Courier New"
                    run.font.highlight_color = WD_COLOR_INDEX.GRAY_25
        elif child.name == "a" and child.get("href"):
            _hyperlink(paragraph, child.get_text(), child["href"], child.get("title", ""))
        elif child.name == "br":
            paragraph.add_run().add_break()
        elif child.name in ("ul", "ol"):
            continue  # a nested list is written after its item's own text
        else:
            _inline(
                paragraph,
                child,
                bold or child.name in ("strong", "b", "th"),
                italic or child.name in ("em", "i"),
                code or child.name == "code",
            )


def _list(document: WordDocument, node: Tag, depth: int = 0) -> None:
    # Numbers are written as text: Word would otherwise continue one numbering across the document's lists, and the
    # sources list's numbers must be the ones the citations show.
    start = int(node.get("start", "1")) if str(node.get("start", "1")).isdigit() else 1
    style = "List Bullet" if node.name == "ul" else "List Number"
    style += f" {depth + 1}" if depth else ""
    for number, item in enumerate(node.find_all("li", recursive=False), start=start):
        if node.name == "ol":
            paragraph = document.add_paragraph(style="List Paragraph" if depth == 0 else f"List Continue {depth + 1}")
            paragraph.add_run(f"{number}. ")
        else:
            paragraph = document.add_paragraph(style=style if depth < 3 else "List Bullet 3")
        if node.name == "ol":
            paragraph.paragraph_format.left_indent = Pt(18 * (depth + 1))
        blocks = [child for child in item.children if isinstance(child, Tag) and child.name == "p"]
        if blocks:  # a loose list: its items hold paragraphs
            for block in blocks:
                _inline(paragraph, block)
        else:
            _inline(paragraph, item)
        for nested in item.find_all(["ul", "ol"], recursive=False):
            _list(document, nested, min(depth + 1, 2))


def _blocks(document: WordDocument, parent: Tag) -> None:
    for node in parent.children:
        if isinstance(node, NavigableString):
            if node.strip():
                document.add_paragraph(_xml_text(node.strip()))
            continue
        if node.name in ("h1", "h2", "h3", "h4", "h5", "h6"):
            heading = document.add_heading(level=int(node.name[1]) - 1 if node.name != "h1" else 0)
            _inline(heading, node)
        elif node.name == "p":
            _inline(document.add_paragraph(), node)
        elif node.name in ("ul", "ol"):
            _list(document, node)
        elif node.name == "blockquote":
            for child in node.find_all("p") or [node]:
                _inline(document.add_paragraph(style="Quote"), child)
        elif node.name == "pre":
            paragraph = document.add_paragraph()
            run = paragraph.add_run(_xml_text(node.get_text()))
            run.font.name = "Courier New"
            run.font.size = Pt(9)
        elif node.name == "table":
            _table(document, node)
        elif node.name == "hr":
            document.add_paragraph("* * *")
        else:
            _inline(document.add_paragraph(), node)


def _table(document: WordDocument, node: Tag) -> None:
    rows = node.find_all("tr")
    columns = max((len(row.find_all(["td", "th"])) for row in rows), default=0)
    if not rows or not columns:
        return
    table = document.add_table(rows=len(rows), cols=columns)
    table.style = "Table Grid"
    for row_index, row in enumerate(rows):
        for column_index, cell in enumerate(row.find_all(["td", "th"])):
            paragraph = table.cell(row_index, column_index).paragraphs[0]
            _inline(paragraph, cell, bold=cell.name == "th")


def report_docx(markdown: str, title: str) -> bytes:
    document = WordDocument()
    document.core_properties.title = _xml_text(title)[:255]
    document.core_properties.author = "deep research"
    for style in ("Normal", "List Paragraph"):
        document.styles[style].font.size = Pt(11)
    document.styles["Title"].font.color.rgb = RGBColor(0x1F, 0x1F, 0x1F)
    _blocks(document, _report_tree(markdown))
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()
