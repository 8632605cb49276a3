"""The report as a PDF (fpdf2) or a Word document (python-docx), typeset for reading, with working citation links.

Both are built from the report's markdown the way the report page is: rendered by Python-Markdown with raw HTML off
and cleaned by the same allow-list (research/web/rendering.py), so an export holds exactly what the page shows and
nothing a model or a page wrote can become markup in it. The cleaned HTML is then walked element by element: for the
PDF each block becomes a paragraph of styled runs that fpdf2's text regions lay out (our own type styles rather than
`write_html`'s), for Word each element becomes its paragraph, list item, table or hyperlink run. The title, the
request and the report are only ever written as text.

Both open with a title block (the title, the date the report was written, the request it answers) and number their
pages ("Page N of M" in the footer, the short title as a running header from page 2). Each citation "[n]" is a link
of its own to its source (in the PDF one link annotation per marker), and the sources list shows each page's title
as the link text with its site after it, not the URL.

The PDF is not a tagged (structure-tagged, accessible) PDF: fpdf2 2.8 tags images and links only, not headings,
paragraphs or lists. It carries a bookmark outline of the headings and its language instead; a screen reader is
better served by the Word document or the report page.

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
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import cast
from urllib.parse import quote, urlsplit

from bs4 import BeautifulSoup, NavigableString, Tag
from django.utils import timezone
from django.utils.text import slugify
from docx import Document as WordDocument
from docx.document import Document as DocxDocument
from docx.enum.text import WD_ALIGN_PARAGRAPH, WD_COLOR_INDEX
from docx.opc.constants import RELATIONSHIP_TYPE
from docx.oxml import OxmlElement
from docx.oxml.ns import qn
from docx.shared import Mm, Pt, RGBColor
from docx.text.paragraph import Paragraph
from fpdf import FPDF
from fpdf.enums import WrapMode
from fpdf.text_region import TextColumns

from research.web.rendering import render_markdown

PDF_CONTENT_TYPE = "application/pdf"
DOCX_CONTENT_TYPE = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
AUTHOR = "deep research"

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

# XML 1.0 admits no control characters but tab and line breaks; python-docx refuses strings holding them, and a
# PDF has no glyph for them either.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")
_CITATION = re.compile(r"\[\d+\]")
_SPACES = re.compile(r"\s+")

# The page, shared by both exports so they print alike: A4, margins in mm.
PAGE_WIDTH_MM, PAGE_HEIGHT_MM = 210, 297
MARGIN_SIDE_MM, MARGIN_TOP_MM, MARGIN_BOTTOM_MM = 24, 24, 22
HEADER_FOOTER_MM = 12  # from the paper's edge to the running header's and the footer's text
BODY_PT = 10.5
LEADING = 1.45  # line height as a multiple of the font size
# Colours (RGB): near-black text, a neutral dark for headings, grey for what frames the text, one dark blue for links.
INK = (34, 34, 34)
HEADING_INK = (17, 17, 17)
MUTED = (105, 105, 105)
RULE = (200, 200, 200)
LINK = (26, 74, 140)
# fpdf2 joins neighbouring text of one style into one fragment when it breaks lines, link and all: "[1][2][3]" became
# one annotation to the first source. Every other link is therefore one unit bluer, which no eye tells apart.
LINK_ALTERNATE = (26, 74, 141)
# (size in pt, space above in mm, space below in mm) of h1 to h6; the report's own title is the title block's.
HEADINGS = {
    1: (16, 9, 2.5),
    2: (13.5, 8, 2.2),
    3: (11.5, 5.5, 1.5),
    4: (10.5, 4.5, 1.2),
    5: (10.5, 4, 1),
    6: (10.5, 4, 1),
}


@dataclass(frozen=True)
class ExportMeta:
    """What an export's title block and properties show besides the report: its title, the request it answers,
    when that report version was written, and its version number."""

    title: str
    request: str
    written_at: datetime
    version: int = 1


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


# A file name's bytes before its version and extension: file systems allow 255 bytes, and a title (at most 200
# characters) rarely needs more than this whole.
MAX_NAME_BYTES = 200


def export_filename(title: str, extension: str, version: int | None = None) -> tuple[str, str]:
    """(ASCII file name, UTF-8 file name) for Content-Disposition, from the report's title: whole where it fits,
    else cut after its last whole word that does."""
    suffix = f"-v{version}" if version else ""
    ascii_name = _whole_words(slugify(unicodedata.normalize("NFKD", title))) or "report"
    unicode_name = _whole_words(slugify(title, allow_unicode=True)) or ascii_name
    return f"{ascii_name}{suffix}.{extension}", f"{unicode_name}{suffix}.{extension}"


def _whole_words(slug: str) -> str:
    """The slug within MAX_NAME_BYTES of UTF-8, cut at a hyphen rather than inside a word."""
    if len(slug.encode()) <= MAX_NAME_BYTES:
        return slug.strip("-")
    cut = slug.encode()[: MAX_NAME_BYTES + 1].decode(errors="ignore")
    return (cut.rsplit("-", 1)[0] if "-" in cut else cut[:-1]).strip("-")


def content_disposition(title: str, extension: str, version: int | None = None) -> str:
    ascii_name, unicode_name = export_filename(title, extension, version)
    return f"attachment; filename=\"{ascii_name}\"; filename*=UTF-8''{quote(unicode_name)}"


# --- The conversation as an appendix (`?conversation=1`) ------------------------------------------------------------

APPENDIX_HEADING = "Questions and answers"
# A question is the user's own text of up to 2,000 characters: a heading holds its start, the question follows whole.
MAX_QUESTION_HEADING_CHARS = 200
# What Python-Markdown (with the tables extension) reads as markup when backslash-escaped; `&` and `<` are written as
# entities instead, so that neither an entity nor an autolink forms.
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()>#+\-.!|])")


def plain_markdown(text: str) -> str:
    """Text on one line that markdown shows exactly as written: no link, emphasis, heading or list forms in it."""
    text = _SPACES.sub(" ", _NOT_XML.sub("", text)).strip()
    return _MARKDOWN_SPECIAL.sub(r"\\\1", text.replace("&", "&amp;").replace("<", "&lt;"))


def with_conversation(markdown: str, conversation: list[tuple[str, str]]) -> str:
    """The report with its answered questions appended, in the order they were asked: under one heading, each
    question a subsection of its own holding its answer's markdown, so each answer's sources list (numbered from 1
    in every answer) stays with the answer it belongs to. The report unchanged when nothing was answered."""
    if not conversation:
        return markdown
    lines = [markdown.rstrip("\n"), "", f"## {APPENDIX_HEADING}", ""]
    for question, answer in conversation:
        one_line = _SPACES.sub(" ", _NOT_XML.sub("", question)).strip()
        heading = _shorten(one_line, MAX_QUESTION_HEADING_CHARS)
        lines += [f"### {plain_markdown(heading)}", ""]
        if heading != one_line:
            lines += [f"> {plain_markdown(one_line)}", ""]
        lines += [answer.strip("\n"), ""]
    return "\n".join(lines)


def _shorten(text: str, limit: int) -> str:
    """One line of at most `limit` characters, cut at a word with "…" where it was longer."""
    text = _SPACES.sub(" ", _NOT_XML.sub("", text)).strip()
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    cut = cut.rsplit(" ", 1)[0] if " " in cut[limit // 2 :] else cut
    return cut.rstrip(" ,;:.-—") + "…"


def written_on(moment: datetime) -> str:
    """The date in words ("5 May 2025"), in the site's time zone: a reader's date, not a timestamp."""
    local = timezone.localtime(moment) if timezone.is_aware(moment) else moment
    return f"{local.day} {local:%B %Y}"


def _date_line(meta: ExportMeta) -> str:
    return f"Written {written_on(meta.written_at)}" + (f" · version {meta.version}" if meta.version > 1 else "")


def _site(url: str) -> str:
    host = (urlsplit(url).hostname or "").removeprefix("www.")
    return host or url


def _short_url(url: str) -> str:
    """A URL as a reader reads it: its site and path, without the scheme, at most 60 characters."""
    parts = urlsplit(url)
    return _shorten(f"{_site(url)}{parts.path}".rstrip("/") or url, 60)


def _report_tree(markdown: str) -> BeautifulSoup:
    """The report as the page shows it, for print: its title left to the title block, and each link that is not a
    citation followed by its site (a printed page has no link to hover), a bare URL shortened to its site and path.
    The site goes in a <site> element, which the sanitiser never lets through, so only this code makes one."""
    soup = BeautifulSoup(render_markdown(markdown), "html.parser")
    first = soup.find(True)
    if first is not None and first.name == "h1":
        first.decompose()
    for link in soup.find_all("a"):
        href = cast(str, link.get("href", ""))  # one value: href is no multi-valued attribute
        if not href:  # a link the sanitiser took the target from: its text stays
            link.unwrap()
            continue
        text = link.get_text().strip()
        if _CITATION.fullmatch(text):
            continue
        if text in (href, ""):
            link.string = _short_url(href)
            continue
        site = soup.new_tag("site")
        site.string = f"({_site(href)})"
        link.insert_after(site)
        link.insert_after(NavigableString(" "))
    return soup


def _flatten_tables(soup: BeautifulSoup) -> None:
    # A model's table need not have the same cells in every row, and a wide one would not fit the page:
    # each row becomes a paragraph of its cells, the header row bold.
    for table in soup.find_all("table"):
        rows = []
        for row in table.find_all("tr"):
            paragraph = soup.new_tag("p")
            cells = " | ".join(cell.get_text(" ", strip=True) for cell in row.find_all(["td", "th"]))
            if row.find("th") is not None:
                strong = soup.new_tag("strong")
                strong.string = cells
                paragraph.append(strong)
            else:
                paragraph.string = cells
            rows.append(paragraph)
        table.replace_with(*rows) if rows else table.decompose()


# --- Inline text: runs of one style, shared by both exports ---------------------------------------------------------


@dataclass(frozen=True)
class Run:
    text: str
    bold: bool = False
    italic: bool = False
    mono: bool = False
    strike: bool = False
    vpos: str = ""  # "SUP" or "SUB"
    link: str = ""
    title: str = ""  # a citation's quote: the Word tooltip
    citation: bool = False
    site: bool = False


def _children(node: Tag) -> Iterator[NavigableString | Tag]:
    """`node.children`, typed: bs4 makes a tag's children of strings (comments included) and tags only."""
    return iter(cast(list[NavigableString | Tag], node.contents))


def runs(node: Tag, style: Run = Run("")) -> list[Run]:
    """The node's text as styled runs, white space collapsed as a browser does; nested lists are left to the
    list code, which writes them after their item's own text."""
    out: list[Run] = []
    for child in _children(node):
        if isinstance(child, NavigableString):
            text = _SPACES.sub(" ", _NOT_XML.sub("", str(child)))
            if text:
                out.append(replace(style, text=text))
            continue
        name = child.name
        if name == "a" and child.get("href"):
            text = child.get_text()
            # One value each: neither is a multi-valued attribute.
            link, title = cast(str, child["href"]), cast(str, child.get("title", ""))
            if _CITATION.fullmatch(text.strip()):
                out.append(replace(style, text=text.strip(), link=link, citation=True, title=title))
            else:
                out += runs(child, replace(style, link=link, title=title))
        elif name == "br":
            out.append(replace(style, text="\n"))
        elif name in ("ul", "ol"):
            continue
        else:
            out += runs(
                child,
                replace(
                    style,
                    bold=style.bold or name in ("strong", "b", "th"),
                    italic=style.italic or name in ("em", "i"),
                    mono=style.mono or name == "code",
                    strike=style.strike or name == "del",
                    vpos={"sup": "SUP", "sub": "SUB"}.get(name, style.vpos),
                    site=style.site or name == "site",
                ),
            )
    return out


def _trimmed(items: list[Run]) -> list[Run]:
    """Runs without white space at their start and end, nor twice in a row where one run ends and the next begins,
    nor before a citation."""
    out: list[Run] = []
    for run in items:
        text = run.text
        if not out or out[-1].text.endswith((" ", "\n")):
            text = text.lstrip(" ")
        if run.citation and out and out[-1].text.endswith(" ") and not out[-1].link:
            # a raised citation sits against its sentence, and never begins a line of its own
            out[-1] = replace(out[-1], text=out[-1].text.rstrip(" "))
        if text:
            out.append(replace(run, text=text))
    while out and not out[-1].text.rstrip():
        out.pop()
    if out:
        out[-1] = replace(out[-1], text=out[-1].text.rstrip())
    return out


# --- PDF -----------------------------------------------------------------------------------------------------------


def _ascii_only(text: str) -> str:
    """Text the PDF core fonts can show: Latin-1 kept, anything else as its closest ASCII form, else "?"."""
    replaced = {"“": '"', "”": '"', "‘": "'", "’": "'", "—": "-", "–": "-", "…": "...", "•": "-"}
    out = []
    for char in text:
        char = replaced.get(char, char)
        if len(char) > 1 or ord(char) < 256:
            out.append(char)
            continue
        ascii_form = unicodedata.normalize("NFKD", char).encode("ascii", "ignore").decode()
        out.append(ascii_form or "?")
    return "".join(out)


class ReportPDF(FPDF):
    """A4 pages with the running header (from page 2) and the "Page N of M" footer (every page)."""

    # fpdf2 writes the page count where this alias stands, in any text written while it is set: it is set only
    # while the footer is written, so a report holding the alias keeps it as text.
    PAGE_COUNT_ALIAS = "{nb}"

    def __init__(self, meta: ExportMeta) -> None:
        super().__init__(format="A4", unit="mm")
        self.meta = meta
        self.family, self.mono = "helvetica", "courier"
        self.clean: Callable[[str], str] = _ascii_only
        self.set_margins(MARGIN_SIDE_MM, MARGIN_TOP_MM, MARGIN_SIDE_MM)
        self.set_auto_page_break(auto=True, margin=MARGIN_BOTTOM_MM)
        self.alias_nb_pages(None)  # type: ignore[arg-type]  # fpdf's documented way to turn the alias off
        self.c_margin = 0  # text starts at the margin, where the rules do

    def use_fonts(self, fonts: Fonts | None) -> None:
        if fonts is None:
            return  # the core fonts, and text written as they can show it
        self.add_font("report", "", str(fonts.regular))
        self.add_font("report", "B", str(fonts.bold))
        self.add_font("report", "I", str(fonts.italic))
        self.add_font("report", "BI", str(fonts.bold_italic))
        self.add_font("reportmono", "", str(fonts.mono))
        self.family, self.mono = "report", "reportmono"
        self.clean = str
        fallbacks = [path for path in FALLBACK_FONTS if path.is_file()][:1]
        for path in fallbacks:
            self.add_font("fallback", "", str(path))
        self.set_fallback_fonts(["fallback"] if fallbacks else [])

    def text_of(self, text: str) -> str:
        return self.clean(_NOT_XML.sub("", text))

    def header(self) -> None:
        self.str_alias_nb_pages = None  # type: ignore[assignment]  # as in __init__
        if self.page_no() == 1:
            return  # the title block heads the first page
        self.char_vpos = "LINE"  # a page breaks wherever the text is, a raised citation's included
        self.set_font(self.family, "", 8.5)
        self.set_text_color(*MUTED)
        self.set_xy(MARGIN_SIDE_MM, HEADER_FOOTER_MM)
        width = self.w - 2 * MARGIN_SIDE_MM
        date = self.text_of(written_on(self.meta.written_at))
        date_width = self.get_string_width(date) + 2
        self.cell(width - date_width, 5, self.text_of(_shorten(self.meta.title, 80)))
        self.cell(date_width, 5, date, align="R")
        self.set_draw_color(*RULE)
        self.set_line_width(0.2)
        self.line(MARGIN_SIDE_MM, HEADER_FOOTER_MM + 6, self.w - MARGIN_SIDE_MM, HEADER_FOOTER_MM + 6)
        self.set_xy(self.l_margin, self.t_margin)  # the page's text goes on below the header, at the top margin

    def footer(self) -> None:
        self.str_alias_nb_pages = self.PAGE_COUNT_ALIAS  # and left set: the count is written in when the PDF is output
        self.char_vpos = "LINE"
        self.set_font(self.family, "", 8.5)
        self.set_text_color(*MUTED)
        self.set_xy(MARGIN_SIDE_MM, self.h - HEADER_FOOTER_MM - 4)
        self.cell(self.w - 2 * MARGIN_SIDE_MM, 5, f"Page {self.page_no()} of {self.PAGE_COUNT_ALIAS}", align="C")


class PdfWriter:
    """The report's blocks onto the pages: one fpdf2 text region, each block a paragraph of runs, rendered as it is
    written so a heading can look at the room left on its page."""

    def __init__(self, pdf: ReportPDF) -> None:
        self.pdf = pdf
        self.region: TextColumns = pdf.text_columns(text_align="LEFT", line_height=LEADING)
        self.links = 0

    def font(self, run: Run, size: float, colour: tuple[int, int, int]) -> None:
        pdf = self.pdf
        style = "" if run.mono else ("B" if run.bold else "") + ("I" if run.italic else "")
        pdf.set_font(pdf.mono if run.mono else pdf.family, style + ("S" if run.strike else ""), size)
        pdf.set_text_color(*colour)
        pdf.char_vpos = run.vpos or ("SUP" if run.citation else "LINE")

    def paragraph(
        self,
        items: list[Run],
        size: float = BODY_PT,
        colour: tuple[int, int, int] = INK,
        above: float = 0,
        below: float = 2.8,
        indent: float = 0,
        bullet: str = "",
        leading: float = LEADING,
        wrap: WrapMode = WrapMode.WORD,
        trim: bool = True,
    ) -> None:
        pdf = self.pdf
        items = _trimmed(items) if trim else items
        if not items:
            return
        if pdf.y <= pdf.t_margin + 0.5:
            above = 0  # a page's first block starts at its top margin
        self.font(Run(""), size, MUTED if bullet in ("•", "-") else colour)  # the bullet is set in the font now
        paragraph = self.region.paragraph(
            top_margin=above,
            bottom_margin=below,
            indent=indent,
            bullet_string=pdf.text_of(bullet),
            bullet_r_margin=2.2,
            line_height=leading,
            skip_leading_spaces=trim,
            wrapmode=wrap,
        )
        pdf.str_alias_nb_pages = None  # type: ignore[assignment]  # as in __init__
        for run in items:
            if run.link:
                self.links += 1
            run_colour = (LINK if self.links % 2 else LINK_ALTERNATE) if run.link else MUTED if run.site else colour
            run_size = size * 0.88 if (run.mono or run.site) and not run.vpos else size
            self.font(run, run_size, run_colour)
            paragraph.write(pdf.text_of(run.text), link=run.link or None)
        self.region.end_paragraph()
        self.region.render()
        pdf.char_vpos = "LINE"

    def rule(self, above: float = 2, below: float = 5) -> None:
        pdf = self.pdf
        y = pdf.y + above
        pdf.set_draw_color(*RULE)
        pdf.set_line_width(0.25)
        pdf.line(pdf.l_margin, y, pdf.w - pdf.r_margin, y)
        pdf.set_y(y + below)

    def title_block(self, meta: ExportMeta) -> None:
        self.paragraph([Run(meta.title, bold=True)], size=21, colour=HEADING_INK, below=3.5, leading=1.2)
        self.paragraph([Run(_date_line(meta))], size=9.5, colour=MUTED, below=1.2)
        request = _shorten(meta.request, 900)
        if request:
            self.paragraph([Run("Request: ", bold=True), Run(request)], size=9.5, colour=MUTED, below=0, leading=1.4)
        self.rule(above=4, below=2)

    def heading(self, level: int, items: list[Run]) -> None:
        pdf = self.pdf
        items = [replace(run, bold=True) for run in _trimmed(items)]
        if not items:
            return
        size, above, below = HEADINGS[level]
        # A heading keeps with its next lines: with less room than itself and three lines of text, a new page.
        if pdf.y + above + 30 > pdf.page_break_trigger:
            pdf.add_page()
        name = _shorten("".join(run.text for run in items), 120)
        if name:
            pdf.start_section(pdf.text_of(name) or "?", level=max(level - 2, 0), strict=False)
        self.paragraph(items, size=size, colour=HEADING_INK, above=above, below=below, leading=1.25)

    def list(self, node: Tag, depth: int = 0) -> None:
        start = int(str(node.get("start", "1"))) if str(node.get("start", "1")).isdigit() else 1
        indent = 7.0 * (depth + 1)
        for number, item in enumerate(node.find_all("li", recursive=False), start=start):
            bullet = f"{number}." if node.name == "ol" else "•" if self.pdf.clean is str else "-"
            blocks = [child for child in item.children if isinstance(child, Tag) and child.name == "p"]
            for index, block in enumerate(blocks or [item]):  # a loose list's items hold paragraphs
                self.paragraph(runs(block), indent=indent, bullet=bullet if index == 0 else "", below=1.4)
            for nested in item.find_all(["ul", "ol"], recursive=False):
                self.list(nested, min(depth + 1, 3))
        if depth == 0:
            self.pdf.set_y(self.pdf.y + 1.6)

    def blocks(self, parent: Tag) -> None:
        for node in _children(parent):
            if isinstance(node, NavigableString):
                self.paragraph([Run(str(node))])
            elif node.name in ("h1", "h2", "h3", "h4", "h5", "h6"):
                self.heading(int(node.name[1]), runs(node))
            elif node.name in ("ul", "ol"):
                self.list(node)
            elif node.name == "blockquote":
                for child in node.find_all("p") or [node]:
                    self.paragraph(runs(child, Run("", italic=True)), colour=MUTED, indent=6)
            elif node.name == "pre":
                text = _NOT_XML.sub("", node.get_text()).rstrip("\n")
                self.paragraph([Run(text, mono=True)], size=9.5, indent=4, leading=1.3, wrap=WrapMode.CHAR, trim=False)
            elif node.name == "hr":
                self.rule(above=1, below=4)
            else:
                self.paragraph(runs(node))


def report_pdf(markdown: str, meta: ExportMeta) -> bytes:
    soup = _report_tree(markdown)
    _flatten_tables(soup)
    pdf = ReportPDF(meta)
    pdf.use_fonts(find_fonts())
    pdf.set_title(pdf.text_of(meta.title))
    pdf.set_subject(pdf.text_of(_shorten(meta.request, 300)))
    pdf.set_author(AUTHOR)
    pdf.set_creator(AUTHOR)
    pdf.set_creation_date(meta.written_at)
    pdf.set_lang("en")
    pdf.set_display_mode("fullwidth")
    pdf.add_page()
    writer = PdfWriter(pdf)
    writer.title_block(meta)
    writer.blocks(soup)
    return bytes(pdf.output())


# --- Word ----------------------------------------------------------------------------------------------------------


def _xml_text(text: str) -> str:
    return _NOT_XML.sub("", text)


def _colour(rgb: tuple[int, int, int]) -> RGBColor:
    return RGBColor(*rgb)


def _hyperlink(paragraph: Paragraph, run: Run) -> None:
    """A real w:hyperlink to an external URL, with the quote it rests on as its tooltip; a citation set raised and
    smaller, as on the report page."""
    rel_id = paragraph.part.relate_to(run.link, RELATIONSHIP_TYPE.HYPERLINK, is_external=True)
    link = OxmlElement("w:hyperlink")
    link.set(qn("r:id"), rel_id)
    if run.title:
        link.set(qn("w:tooltip"), _xml_text(run.title)[:250])
    element = OxmlElement("w:r")
    properties = OxmlElement("w:rPr")
    for tag, on in (("w:b", run.bold), ("w:i", run.italic)):
        if on:
            properties.append(OxmlElement(tag))
    color = OxmlElement("w:color")
    color.set(qn("w:val"), "{:02X}{:02X}{:02X}".format(*LINK))
    properties.append(color)
    if run.citation:
        vertical = OxmlElement("w:vertAlign")
        vertical.set(qn("w:val"), "superscript")
        properties.append(vertical)
    else:
        underline = OxmlElement("w:u")
        underline.set(qn("w:val"), "single")
        properties.append(underline)
    element.append(properties)
    text_element = OxmlElement("w:t")
    text_element.text = _xml_text(run.text)
    text_element.set(qn("xml:space"), "preserve")
    element.append(text_element)
    link.append(element)
    paragraph._p.append(link)  # type: ignore[arg-type]  # python-docx types OxmlElement() as a bare element


def _write_runs(paragraph: Paragraph, items: list[Run]) -> None:
    for item in _trimmed(items):
        if item.link:
            _hyperlink(paragraph, item)
            continue
        if item.text == "\n":
            paragraph.add_run().add_break()
            continue
        run = paragraph.add_run(item.text)
        run.bold, run.italic = item.bold or None, item.italic or None
        run.font.strike = item.strike or None
        run.font.superscript = item.vpos == "SUP" or None
        run.font.subscript = item.vpos == "SUB" or None
        if item.mono:
            run.font.name = "Courier New"
            run.font.highlight_color = WD_COLOR_INDEX.GRAY_25
        if item.site:
            run.font.color.rgb = _colour(MUTED)
            run.font.size = Pt(BODY_PT - 1)


def _restarted_numbering(document: DocxDocument, style: str, start: int) -> str:
    """A numbering of its own for one numbered list, counting from `start`: the list style's numbering continues
    across every list of the document, and the sources list's numbers must be the ones the citations show."""
    numbering = document.part.numbering_part.element
    style_num = document.styles[style]._element.pPr.numPr.numId.val
    num = numbering.add_num(numbering.num_having_numId(style_num).abstractNumId.val)
    num.add_lvlOverride(ilvl=0).add_startOverride(start)
    return num.numId


def _list(document: DocxDocument, node: Tag, depth: int = 0) -> None:
    start = int(str(node.get("start", "1"))) if str(node.get("start", "1")).isdigit() else 1
    style = ("List Bullet" if node.name == "ul" else "List Number") + (f" {depth + 1}" if depth else "")
    num_id = _restarted_numbering(document, style, start) if node.name == "ol" else None
    for item in node.find_all("li", recursive=False):
        paragraph = document.add_paragraph(style=style)
        if num_id is not None:
            numbering = paragraph._p.get_or_add_pPr().get_or_add_numPr()  # type: ignore[attr-defined]  # made at run time
            numbering.get_or_add_ilvl().val = 0
            numbering.get_or_add_numId().val = num_id
        blocks = [child for child in item.children if isinstance(child, Tag) and child.name == "p"]
        for index, block in enumerate(blocks or [item]):  # a loose list: its items hold paragraphs
            if index:
                paragraph.add_run().add_break()
            _write_runs(paragraph, runs(block))
        for nested in item.find_all(["ul", "ol"], recursive=False):
            _list(document, nested, min(depth + 1, 2))


def _blocks(document: DocxDocument, parent: Tag) -> None:
    for node in _children(parent):
        if isinstance(node, NavigableString):
            if node.strip():
                document.add_paragraph(_xml_text(node.strip()))
            continue
        if node.name in ("h1", "h2", "h3", "h4", "h5", "h6"):
            # the title block holds the report's title: its h2 sections are Word's Heading 1
            heading = document.add_heading(level=max(int(node.name[1]) - 1, 1))
            _write_runs(heading, runs(node))
        elif node.name == "p":
            _write_runs(document.add_paragraph(), runs(node))
        elif node.name in ("ul", "ol"):
            _list(document, node)
        elif node.name == "blockquote":
            for child in node.find_all("p") or [node]:
                _write_runs(document.add_paragraph(style="Quote"), runs(child))
        elif node.name == "pre":
            paragraph = document.add_paragraph()
            run = paragraph.add_run(_xml_text(node.get_text()))
            run.font.name = "Courier New"
            run.font.size = Pt(9)
        elif node.name == "table":
            _table(document, node)
        elif node.name == "hr":
            document.add_paragraph("* * *").alignment = WD_ALIGN_PARAGRAPH.CENTER
        else:
            _write_runs(document.add_paragraph(), runs(node))


def _table(document: DocxDocument, node: Tag) -> None:
    rows = node.find_all("tr")
    columns = max((len(row.find_all(["td", "th"])) for row in rows), default=0)
    if not rows or not columns:
        return
    table = document.add_table(rows=len(rows), cols=columns)
    table.style = "Table Grid"
    for row_index, row in enumerate(rows):
        for column_index, cell in enumerate(row.find_all(["td", "th"])):
            paragraph = table.cell(row_index, column_index).paragraphs[0]
            _write_runs(paragraph, runs(cell, Run("", bold=cell.name == "th")))


def _field(paragraph: Paragraph, instruction: str) -> None:
    """A Word field (PAGE, NUMPAGES): Word fills it in as it lays the pages out."""
    for kind, text in (("begin", None), ("instr", instruction), ("separate", None), ("text", "1"), ("end", None)):
        run = paragraph.add_run()
        if kind == "instr":
            element = OxmlElement("w:instrText")
            element.set(qn("xml:space"), "preserve")
            element.text = f" {text} "
        elif kind == "text":
            element = OxmlElement("w:t")
            element.text = text
        else:
            element = OxmlElement("w:fldChar")
            element.set(qn("w:fldCharType"), kind)
        run._r.append(element)  # type: ignore[arg-type]  # as in _hyperlink


def _page_furniture(document: DocxDocument, meta: ExportMeta) -> None:
    """A4 with the PDF's margins; "Page N of M" in every footer, the short title as the header from page 2."""
    section = document.sections[0]
    section.page_width, section.page_height = Mm(PAGE_WIDTH_MM), Mm(PAGE_HEIGHT_MM)
    section.left_margin = section.right_margin = Mm(MARGIN_SIDE_MM)
    section.top_margin, section.bottom_margin = Mm(MARGIN_TOP_MM), Mm(MARGIN_BOTTOM_MM)
    section.header_distance = section.footer_distance = Mm(HEADER_FOOTER_MM)
    section.different_first_page_header_footer = True
    header = section.header.paragraphs[0]
    header.add_run(_xml_text(_shorten(meta.title, 80)))
    for footer in (section.footer, section.first_page_footer):
        paragraph = footer.paragraphs[0]
        paragraph.alignment = WD_ALIGN_PARAGRAPH.CENTER
        paragraph.add_run("Page ")
        _field(paragraph, "PAGE")
        paragraph.add_run(" of ")
        _field(paragraph, "NUMPAGES")
    for paragraph in (header, *section.footer.paragraphs, *section.first_page_footer.paragraphs):
        for run in paragraph.runs:
            run.font.size = Pt(8.5)
            run.font.color.rgb = _colour(MUTED)


def _properties(document: DocxDocument, meta: ExportMeta) -> None:
    """The file's own properties, none left from python-docx's template (its 2013 dates, "generated by
    python-docx")."""
    properties = document.core_properties
    written = meta.written_at.astimezone(UTC) if timezone.is_aware(meta.written_at) else meta.written_at
    properties.title = _xml_text(meta.title)[:255]
    properties.subject = _xml_text(_shorten(meta.request, 255))
    properties.comments = _xml_text(_shorten(meta.request, 255))  # python-docx holds each property to 255
    properties.author = properties.last_modified_by = AUTHOR
    properties.created = properties.modified = written.replace(tzinfo=None)
    properties.revision = 1
    for name in ("category", "content_status", "identifier", "keywords", "language", "version"):
        setattr(properties, name, "")


def _styles(document: DocxDocument) -> None:
    styles = document.styles
    normal = styles["Normal"]
    normal.font.size = Pt(BODY_PT)
    normal.font.color.rgb = _colour(INK)
    normal.paragraph_format.line_spacing = 1.3  # Word's "multiple" spacing is of a font's own, taller, line height
    normal.paragraph_format.space_after = Pt(6)
    for name in ("Title", "Heading 1", "Heading 2", "Heading 3", "Heading 4", "Heading 5"):
        styles[name].font.color.rgb = _colour(HEADING_INK)
    styles["Title"].font.size = Pt(22)


def report_docx(markdown: str, meta: ExportMeta) -> bytes:
    document = WordDocument()
    _properties(document, meta)
    _styles(document)
    _page_furniture(document, meta)
    document.add_heading(_xml_text(meta.title), level=0)
    date = document.add_paragraph()
    date.add_run(_date_line(meta)).font.color.rgb = _colour(MUTED)
    request = _shorten(meta.request, 900)
    if request:
        paragraph = document.add_paragraph()
        label = paragraph.add_run("Request: ")
        label.bold = True
        for run in (label, paragraph.add_run(request)):
            run.font.color.rgb = _colour(MUTED)
    _blocks(document, _report_tree(markdown))
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()
