"""Readers for the local document collection: one function per file format, each giving a title and plain text.

Workers read a collection document as text (research/web/collection_views.py serves everything but HTML as
text/plain), so a format only has to become good text here, once, at indexing time. Each reader keeps the
document's order: headings and paragraphs a line each, and every table as one line per data row with each cell
named by its column header (`table_lines`), so that a row quoted on its own still says what its numbers are.

Office, OpenDocument and EPUB files are zip archives and are checked before any library opens them
(`open_zip`): a small file that inflates to gigabytes would otherwise stall the indexing run. Any exception a
library raises on a malformed file becomes a DocumentError naming the format.
"""

from __future__ import annotations

import csv
import datetime
import io
import itertools
import posixpath
import re
import zipfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from research.text.page_text import PdfError, decode_body, extract_text, pdf_text, published_date
from research.text.storable import storable

if TYPE_CHECKING:
    from docx.table import Table as DocxTable
    from pptx.shapes.base import BaseShape
    from pptx.table import Table as PptxTable


class DocumentError(Exception):
    """A file that cannot be read as a document (a corrupt or oversized file, an unsupported type, no text)."""


@dataclass(frozen=True)
class ParsedDocument:
    title: str
    text: str
    content_type: str
    source: str = ""
    # The date the file's own metadata gives (Office core properties, PDF info, ODF meta, EPUB dc:date), if any:
    # research/collection/standing.py weighs it after the dates its name and opening give.
    metadata_date: datetime.date | None = None


# Limits on what a file may make us read. The zip caps are checked on the archive's central directory before
# any member is inflated; Python's zipfile stops inflating a member at its declared size, so the declared sizes
# bound what the libraries can read.
ZIP_MAX_UNCOMPRESSED = 200 * 1024 * 1024
ZIP_MAX_MEMBERS = 20_000
# Deflate tops out near 1,000:1; real Office XML stays well under 100:1 (a sheet of repeated values ~ 50:1).
ZIP_MAX_RATIO = 200
ZIP_RATIO_FLOOR = 1024 * 1024  # small members may compress absurdly well (a run of spaces) and harm nobody
MAX_TABLE_ROWS = 50_000
# A repeated ODF cell or row (table:number-columns-repeated="16384" pads a sheet to its last column) is expanded
# no further than this.
MAX_REPEAT = 256
TITLE_CHARS = 500


# --- Tables ----------------------------------------------------------------------------------------------


_SPACES = re.compile(r"\s+")
_NUMBER = re.compile(r"[-+−]?[\d.,\s]*\d[\d.,\s]*(%|[eE][-+]?\d+)?")
_YEAR = re.compile(r"(18|19|20|21)\d\d")
# Names spreadsheets and word processors give a sheet or table by default: no information in them.
_DEFAULT_NAME = re.compile(
    r"(sheet|tabelle|feuille|hoja|foglio|blad|planilha|arkusz|taulukko|table|tableau|tabla|tabel)\s*\d*",
    re.IGNORECASE,
)


def _cell(value: object) -> str:
    return _SPACES.sub(" ", str(value)).strip() if value is not None else ""


def informative_name(name: str) -> str:
    """A sheet's or table's name, or "" for the defaults ("Sheet1", "Table 2") that say nothing."""
    name = _cell(name)
    return "" if _DEFAULT_NAME.fullmatch(name) else name


def _is_header(row: Sequence[str], width: int) -> bool:
    """Whether a table's first row names its columns: labels, not data. Most columns named, no name a number
    (years excepted: "2024", "2025" head columns of figures), no name twice, none a sentence."""
    names = [cell for cell in row if cell]
    # Length first: the number pattern backtracks quadratically, harmless on a label, not on a 100 kB cell.
    return (
        len(names) >= max(1, (width + 1) // 2)
        and all(len(name) <= 80 for name in names)
        and len(set(names)) == len(names)
        and not any(_NUMBER.fullmatch(name) and not _YEAR.fullmatch(name) for name in names)
    )


def _sentence(parts: Iterable[str]) -> str:
    line = "; ".join(parts)
    return line if line.endswith((".", "!", "?")) else line + "."


def table_lines(rows: Iterable[Sequence[object]], caption: str = "", *, more_rows: str = "") -> list[str]:
    """A table as text: one line per data row, each cell named by its column header, ending with a full stop:
    `Region: North; Q1 revenue: EUR 1.2 M; Growth: 4 %.` Empty cells are left out. A table whose first row is
    not a header keeps each row's cells joined by "; ". Leading rows with a single cell in a wider table are
    titles above the header (a spreadsheet's usual layout) and stay lines of their own. With a caption, every row
    starts with it: a row is often quoted or found alone, and "Growth: 4 %" alone does not say of what.

    `more_rows` is said after the rows (the caller's note that rows were left out)."""
    cleaned = [[_cell(value) for value in row] for row in rows]
    cleaned = [row for row in cleaned if any(row)]
    lines: list[str] = []
    width = max((len(row) for row in cleaned), default=0)
    while width > 1 and cleaned and sum(1 for cell in cleaned[0] if cell) == 1 and len(cleaned) > 1:
        lines.append(next(cell for cell in cleaned.pop(0) if cell))
    prefix = f"{caption} — " if caption else ""
    header: Sequence[str] = []
    if len(cleaned) > 1 and _is_header(cleaned[0], width):
        header = cleaned.pop(0)
    for row in cleaned:
        parts = []
        for index, value in enumerate(row):
            if not value:
                continue
            name = header[index] if index < len(header) else ""
            parts.append(f"{name}: {value}" if name else value)
        lines.append(prefix + _sentence(parts))
    if more_rows:
        lines.append(more_rows)
    return lines


def _rows_left_out(kept: int, total: int | None) -> str:
    if total is not None and total > kept:
        return f"(Only the first {kept:,} rows of this table are read: about {total - kept:,} more are left out.)"
    return f"(Only the first {kept:,} rows of this table are read: the rest are left out.)"


# --- Titles ----------------------------------------------------------------------------------------------


_HEADING_MARKS = re.compile(r"^\s{0,3}#{1,6}\s+|\s+#+\s*$")
# Asterisks and backticks only: underscores belong to names (`__init__`, snake_case) as often as to emphasis.
_WRAPPING_MARKS = re.compile(r"^(\*\*|\*|`)(.+)\1$")
_INLINE_MARKS = re.compile(r"(\*\*|`)(.+?)\1")
# Titles that authoring tools write into a file's properties by themselves.
_PLACEHOLDER_TITLES = {"untitled", "document", "presentation", "powerpoint presentation", "slide 1", "title"}


def clean_title(title: str) -> str:
    """A title without Markdown marks (a heading's #s, emphasis around it) and on one line."""
    title = _cell(title[: TITLE_CHARS * 4])
    title = _HEADING_MARKS.sub("", title).strip()
    title = _INLINE_MARKS.sub(r"\2", title)
    while match := _WRAPPING_MARKS.fullmatch(title):
        title = match.group(2).strip()
    return title[:TITLE_CHARS]


def _real_title(value: object) -> str:
    """The candidate cleaned, or "" when it is none (empty, not text, a placeholder)."""
    if isinstance(value, bytes):  # PDF metadata may be undecoded
        value = value.decode("utf-16" if value.startswith((b"\xfe\xff", b"\xff\xfe")) else "latin-1", "replace")
    title = clean_title(value) if isinstance(value, str) else ""
    return "" if title.lower() in _PLACEHOLDER_TITLES else title


def first_title(*candidates: object) -> str:
    """The first candidate that is a real title, given in order of preference (the metadata's, then the first
    heading's); "" when none is (the caller then takes the file's name)."""
    for candidate in candidates:
        if title := _real_title(candidate):
            return title
    return ""


# --- Zip archives ----------------------------------------------------------------------------------------


def open_zip(data: bytes, kind: str) -> zipfile.ZipFile:
    """The archive, once its central directory shows it inflates to a sane size; else DocumentError."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        members = archive.infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, OSError, EOFError) as exc:
        raise DocumentError(f"not a readable {kind} file: not a zip archive ({exc})") from exc
    if len(members) > ZIP_MAX_MEMBERS:
        raise DocumentError(f"refused {kind} file: {len(members)} entries in the archive, over {ZIP_MAX_MEMBERS}")
    total = sum(member.file_size for member in members)
    if total > ZIP_MAX_UNCOMPRESSED:
        raise DocumentError(
            f"refused {kind} file: it expands to {_size(total)}, over the {_size(ZIP_MAX_UNCOMPRESSED)} limit"
        )
    for member in members:
        if member.file_size > ZIP_RATIO_FLOOR and member.file_size > ZIP_MAX_RATIO * max(member.compress_size, 1):
            raise DocumentError(
                f"refused {kind} file: {member.filename} is compressed "
                f"{member.file_size // max(member.compress_size, 1)} to 1 (a zip bomb?), over {ZIP_MAX_RATIO} to 1"
            )
    return archive


def _size(count: int) -> str:
    return f"{count // (1024 * 1024):,} MB" if count >= 1024 * 1024 else f"{count:,} bytes"


# --- Readers ---------------------------------------------------------------------------------------------
# Each takes the file's path and bytes and returns (title candidate, text); the title may be "" (the caller
# falls back to the file's name). Paragraph and table lines are joined with newlines, blocks with blank lines.


# (title, text, metadata date)
Read = tuple[str, str, datetime.date | None]

_METADATA_DATE = re.compile(r"(?:D:)?((?:19|20|21)\d\d)-?(\d\d)?-?(\d\d)?")


def metadata_date(*values: object) -> datetime.date | None:
    """The first of the values that is a date: a datetime or date, or text as ISO 8601 or PDF ("D:20260115...")
    write it. Metadata are whatever a tool wrote: anything else is no date."""
    for value in values:
        if isinstance(value, bytes):
            value = value.decode("latin-1", "replace")
        if isinstance(value, datetime.datetime):
            return value.date()
        if isinstance(value, datetime.date):
            return value
        if isinstance(value, str) and (match := _METADATA_DATE.match(value.strip())):
            try:
                return datetime.date(int(match[1]), int(match[2] or 1), int(match[3] or 1))
            except ValueError:
                continue
    return None


def _join(blocks: Iterable[str]) -> str:
    return "\n\n".join(block for block in (b.strip() for b in blocks) if block)


def read_markup(path: Path, data: bytes, content_type: str) -> tuple[str, str, str]:
    """HTML as the scraper extracts it, Markdown and text as they are: (title, text, source)."""
    is_html = content_type == "text/html"
    body = decode_body(data, None, is_html=is_html)
    title, text = extract_text(body, content_type, path.as_uri())
    return title, text, body if is_html else ""


def read_docx(path: Path, data: bytes) -> Read:
    """Word: paragraphs and tables in body order (headers, footers and comments are not the document's text)."""
    import docx
    from docx.table import Table
    from docx.text.paragraph import Paragraph

    document = docx.Document(io.BytesIO(data))
    blocks: list[str] = []
    heading = ""
    caption = ""
    for item in document.iter_inner_content():
        if isinstance(item, Paragraph):
            text = _cell(item.text)
            style = (item.style.name if item.style is not None else "") or ""
            if not text:
                continue
            # A Caption paragraph right above a table names its rows; one below it stays a paragraph.
            caption = text if style.lower() == "caption" else ""
            if not heading and (style.lower() == "title" or style.lower().startswith("heading")):
                heading = text
            blocks.append(text)
        elif isinstance(item, Table):
            blocks.append("\n".join(table_lines(_docx_rows(item), caption)))
            caption = ""
    properties = document.core_properties
    return (
        first_title(properties.title or "", heading),
        _join(blocks),
        metadata_date(properties.modified, properties.created),
    )


def _docx_rows(table: DocxTable) -> Iterator[list[str]]:
    for row in table.rows:
        # A merged cell is returned once per grid column it spans: its text is kept once (lxml gives one proxy
        # per element while it is referenced, so the set of elements recognises the repeats).
        cells: list[str] = []
        seen: set[object] = set()
        for cell in row.cells:
            cells.append("" if cell._tc in seen else cell.text)
            seen.add(cell._tc)
        yield cells


def read_pptx(path: Path, data: bytes) -> Read:
    """PowerPoint: each slide's title, then its text and tables in the slide's shape order, then its notes."""
    import pptx

    presentation = pptx.Presentation(io.BytesIO(data))
    blocks: list[str] = []
    first_slide_title = ""
    for slide in presentation.slides:
        lines: list[str] = []
        title_shape = slide.shapes.title
        title_text = _cell(title_shape.text_frame.text) if title_shape is not None else ""
        if title_text:
            lines.append(title_text)
            first_slide_title = first_slide_title or title_text
        title_id = title_shape.shape_id if title_shape is not None else None
        for shape in slide.shapes:
            if shape.shape_id != title_id:
                lines.extend(_pptx_shape_lines(shape))
        if slide.has_notes_slide and slide.notes_slide.notes_text_frame is not None:
            notes = [_cell(p.text) for p in slide.notes_slide.notes_text_frame.paragraphs]
            notes = [note for note in notes if note]
            if notes:
                lines.append("Speaker notes: " + " ".join(notes))
        blocks.append("\n".join(lines))
    properties = presentation.core_properties
    return (
        first_title(properties.title or "", first_slide_title),
        _join(blocks),
        metadata_date(properties.modified, properties.created),
    )


def _pptx_shape_lines(shape: BaseShape, depth: int = 0) -> list[str]:
    from pptx.enum.shapes import MSO_SHAPE_TYPE

    if shape.shape_type == MSO_SHAPE_TYPE.GROUP and depth < 16:
        return [line for child in shape.shapes for line in _pptx_shape_lines(child, depth + 1)]  # type: ignore[attr-defined]
    if getattr(shape, "has_table", False):
        return table_lines(_pptx_rows(shape.table))  # type: ignore[attr-defined]
    if shape.has_text_frame:
        return [text for p in shape.text_frame.paragraphs if (text := _cell(p.text))]  # type: ignore[attr-defined]
    return []


def _pptx_rows(table: PptxTable) -> Iterator[list[str]]:
    for row in table.rows:
        # The cells a merge hides (is_spanned) repeat nothing of their own.
        yield ["" if cell.is_spanned else cell.text for cell in row.cells]


def read_xlsx(path: Path, data: bytes) -> Read:
    """Excel: every worksheet as a table, its name before each row unless it is a default ("Sheet1"). Values as
    last calculated (formulas are not evaluated); at most MAX_TABLE_ROWS rows a sheet."""
    import openpyxl

    workbook = openpyxl.load_workbook(io.BytesIO(data), read_only=True, data_only=True)
    try:
        blocks = []
        for sheet in workbook.worksheets:
            rows: list[list[str]] = []
            more = ""
            for row in sheet.iter_rows():
                values = [_xlsx_value(cell) for cell in row]
                if not any(values):
                    continue  # a formatted but empty row: not one of the rows the cap counts
                if len(rows) >= MAX_TABLE_ROWS:
                    more = _rows_left_out(MAX_TABLE_ROWS, sheet.max_row)
                    break
                rows.append(values)
            blocks.append("\n".join(table_lines(rows, informative_name(sheet.title), more_rows=more)))
        title = first_title(workbook.properties.title or "")
        dated = metadata_date(workbook.properties.modified, workbook.properties.created)
    finally:
        workbook.close()
    return title, _join(blocks), dated


def _xlsx_value(cell: Any) -> str:
    value = getattr(cell, "value", None)
    if value is None:
        return ""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, datetime.datetime):
        return value.date().isoformat() if value.time() == datetime.time() else value.isoformat(sep=" ")
    if isinstance(value, datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, int | float):
        # As the sheet shows a percentage, not as it stores it (0.04 for 4 %).
        percent = "%" in (getattr(cell, "number_format", "") or "")
        number = value * 100 if percent else value
        text = f"{number:.15g}" if isinstance(number, float) else str(number)
        return f"{text} %" if percent else text
    return str(value)


def read_csv(path: Path, data: bytes) -> Read:
    """CSV (or another delimiter the sniffer recognises) as one table, at most MAX_TABLE_ROWS rows."""
    text = decode_body(data, None, is_html=False)
    sample = text[:20_000]  # the sniffer's regular expressions slow down badly on long samples
    try:
        dialect: type[csv.Dialect] | csv.Dialect = csv.Sniffer().sniff(sample, delimiters=",;\t|")
    except csv.Error:
        dialect = csv.excel  # one column, or too irregular to tell: commas
    rows: list[list[str]] = []
    more = ""
    reader = csv.reader(io.StringIO(text, newline=""), dialect)
    for row in reader:
        if len(rows) >= MAX_TABLE_ROWS:
            more = _rows_left_out(MAX_TABLE_ROWS, None)
            break
        rows.append(row)
    return "", "\n".join(table_lines(rows, more_rows=more)), None


def read_odt(path: Path, data: bytes) -> Read:
    """OpenDocument text: headings, paragraphs, lists and tables in document order."""
    from odf import opendocument
    from odf.namespaces import DCNS, METANS

    document = opendocument.load(io.BytesIO(data))
    if document.text is None:  # odfpy loads an archive without content.xml as an empty document
        raise DocumentError("not a readable ODT file: it has no text body (content.xml)")
    blocks: list[str] = []
    headings: list[str] = []
    _odf_blocks(document.text, blocks, headings, 0)
    metadata_title = ""
    dates: dict[str, str] = {}
    for element in document.meta.childNodes:
        qname = getattr(element, "qname", None)
        if qname == (DCNS, "title"):
            metadata_title = _odf_text(element)
        elif qname == (DCNS, "date") or qname == (METANS, "creation-date"):
            dates[qname[1]] = _odf_text(element)
    return (
        first_title(metadata_title, headings[0] if headings else ""),
        _join(blocks),
        metadata_date(dates.get("date"), dates.get("creation-date")),
    )


def _odf_blocks(element: Any, blocks: list[str], headings: list[str], depth: int) -> None:
    from odf.namespaces import TABLENS, TEXTNS

    if depth > 64:  # nested lists and sections only; a deeper tree is a made-up file
        return
    for child in element.childNodes:
        qname = getattr(child, "qname", None)
        if qname in ((TEXTNS, "p"), (TEXTNS, "h")):
            if text := _cell(_odf_text(child)):
                blocks.append(text)
                if qname == (TEXTNS, "h"):
                    headings.append(text)
        elif qname == (TABLENS, "table"):
            name = informative_name(child.getAttrNS(TABLENS, "name") or "")
            rows = list(itertools.islice(_odf_rows(child), MAX_TABLE_ROWS + 1))
            more = _rows_left_out(MAX_TABLE_ROWS, None) if len(rows) > MAX_TABLE_ROWS else ""
            blocks.append("\n".join(table_lines(rows[:MAX_TABLE_ROWS], name, more_rows=more)))
        elif qname is not None:
            # Lists, list items, sections and the like: containers of paragraphs.
            _odf_blocks(child, blocks, headings, depth + 1)


def _odf_text(element: Any) -> str:
    from odf.namespaces import TEXTNS

    parts: list[str] = []

    def walk(node: Any, depth: int) -> None:
        if node.nodeType == node.TEXT_NODE:
            parts.append(node.data)
            return
        qname = getattr(node, "qname", None)
        if qname == (TEXTNS, "s"):
            parts.append(" ")
        elif qname in ((TEXTNS, "tab"), (TEXTNS, "line-break")):
            parts.append(" ")
        elif qname in ((TEXTNS, "note"), (TEXTNS, "tracked-changes")) or depth > 64:
            return  # footnotes would land mid-sentence; tracked changes are not the text
        for child in node.childNodes:
            walk(child, depth + 1)

    walk(element, 0)
    return "".join(parts)


def _odf_rows(table: Any) -> Iterator[list[str]]:
    from odf.namespaces import TABLENS

    def rows(element: Any) -> Iterator[Any]:
        for child in element.childNodes:
            qname = getattr(child, "qname", None)
            if qname == (TABLENS, "table-row"):
                yield child
            elif qname in ((TABLENS, "table-header-rows"), (TABLENS, "table-rows"), (TABLENS, "table-row-group")):
                yield from rows(child)

    for row in rows(table):
        cells: list[str] = []
        for cell in row.childNodes:
            if getattr(cell, "qname", None) not in ((TABLENS, "table-cell"), (TABLENS, "covered-table-cell")):
                continue
            text = " ".join(_odf_text(p) for p in cell.childNodes if getattr(p, "qname", None) is not None)
            repeat = _odf_repeat(cell, "number-columns-repeated")
            cells.extend([text] * min(repeat, MAX_REPEAT))
        for _ in range(min(_odf_repeat(row, "number-rows-repeated"), MAX_REPEAT)):
            yield cells


def _odf_repeat(element: Any, attribute: str) -> int:
    from odf.namespaces import TABLENS

    try:
        return max(1, int(element.getAttrNS(TABLENS, attribute) or 1))
    except ValueError:
        return 1


_OPF_NS = {
    "c": "urn:oasis:names:tc:opendocument:xmlns:container",
    "opf": "http://www.idpf.org/2007/opf",
    "dc": "http://purl.org/dc/elements/1.1/",
}
_EPUB_DOCUMENTS = {"application/xhtml+xml", "text/html", "application/x-dtbook+xml"}


def read_epub(path: Path, archive: zipfile.ZipFile) -> Read:
    """EPUB, read as the zip it is: META-INF/container.xml names the package (OPF) file, whose spine gives the
    reading order of the XHTML documents, each read as the scraper reads HTML."""
    from lxml import etree

    # No network, no entities expanded, no huge trees: the file is the owner's but may come from anywhere.
    parser = etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=False, recover=False)
    container = etree.fromstring(archive.read("META-INF/container.xml"), parser)
    rootfile = container.find(".//c:rootfile", _OPF_NS)
    if rootfile is None or not rootfile.get("full-path"):
        raise DocumentError("not a readable EPUB file: META-INF/container.xml names no package file")
    opf_path = rootfile.get("full-path", "")
    package = etree.fromstring(archive.read(opf_path), parser)
    base = posixpath.dirname(opf_path)
    manifest = {
        item.get("id"): item
        for item in package.iterfind("opf:manifest/opf:item", _OPF_NS)
        if item.get("id") and item.get("href")
    }
    blocks: list[str] = []
    chapter_titles: list[str] = []
    for itemref in package.iterfind("opf:spine/opf:itemref", _OPF_NS):
        item = manifest.get(itemref.get("idref"))
        if item is None or item.get("media-type") not in _EPUB_DOCUMENTS:
            continue
        member = posixpath.normpath(posixpath.join(base, unquote(item.get("href", "").split("#")[0])))
        try:
            markup = archive.read(member)
        except KeyError:
            continue  # a spine entry the archive lacks: the rest of the book is still worth reading
        body = decode_body(markup, None, is_html=True)
        chapter_title, text = extract_text(body, "text/html", f"{path.as_uri()}#{member}")
        chapter_titles.append(chapter_title)
        blocks.append(text)
    title_element = package.find("opf:metadata/dc:title", _OPF_NS)
    metadata_title = "".join(title_element.itertext()) if title_element is not None else ""
    date_element = package.find("opf:metadata/dc:date", _OPF_NS)
    dated = metadata_date("".join(date_element.itertext())) if date_element is not None else None
    return first_title(metadata_title, *chapter_titles[:3]), _join(blocks), dated


def read_pdf(path: Path, data: bytes) -> Read:
    """PDF through pdfplumber: each page's text outside its tables, and each table as rows, in page order. pypdf
    (the scraper's reader) when pdfplumber cannot read the file or finds no text in it."""
    try:
        title, text, dated = _pdfplumber_text(data)
    except Exception:  # noqa: BLE001 - pdfminer raises anything on malformed files; pypdf gets its own try
        title, text, dated = "", "", None
    if text.strip():
        return title, text, dated
    try:
        # The owner's own files: no page or size limits (those are for PDFs off the web).
        return (*pdf_text(data), None)
    except PdfError as exc:
        raise DocumentError(f"not a readable PDF file: {exc}") from exc


def _pdfplumber_text(data: bytes) -> Read:
    import pdfplumber

    pages: list[str] = []
    with pdfplumber.open(io.BytesIO(data)) as pdf:
        metadata_title = pdf.metadata.get("Title", "")
        dated = metadata_date(pdf.metadata.get("ModDate"), pdf.metadata.get("CreationDate"))
        for page in pdf.pages:
            tables = page.find_tables()
            boxes = [table.bbox for table in tables]

            def outside(obj: dict[str, Any], boxes: list[tuple[float, float, float, float]] = boxes) -> bool:
                if obj.get("object_type") != "char":
                    return True
                x, y = (obj["x0"] + obj["x1"]) / 2, (obj["top"] + obj["bottom"]) / 2
                return not any(x0 <= x <= x1 and top <= y <= bottom for x0, top, x1, bottom in boxes)

            # Lines and tables by their position on the page, so a table stays between the paragraphs around it.
            placed: list[tuple[float, str]] = [
                (line["top"], line["text"]) for line in page.filter(outside).extract_text_lines(return_chars=False)
            ]
            placed += [(table.bbox[1], "\n".join(table_lines(table.extract()))) for table in tables]
            pages.append("\n".join(text for _, text in sorted(placed, key=lambda item: item[0]) if text.strip()))
            page.close()  # pdfplumber caches each page's objects until the file closes
    first_line, text = extract_text(_join(pages), "text/plain", "")
    return first_title(metadata_title, first_line), text, dated


# --- The table of formats --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Format:
    name: str  # as said in a reason: "not a readable DOCX file: ..."
    content_type: str
    read: Callable[[Path, bytes], Read] | None = None  # None: HTML, Markdown and text (read_markup)
    zipped: bool = False


def _epub(path: Path, data: bytes) -> Read:
    with open_zip(data, "EPUB") as archive:
        return read_epub(path, archive)


_HTML = Format("HTML", "text/html")
_MARKDOWN = Format("Markdown", "text/markdown")
_TEXT = Format("text", "text/plain")
FORMATS: dict[str, Format] = {
    ".html": _HTML,
    ".htm": _HTML,
    ".xhtml": _HTML,
    ".md": _MARKDOWN,
    ".markdown": _MARKDOWN,
    ".txt": _TEXT,
    ".text": _TEXT,
    ".rst": _TEXT,
    ".pdf": Format("PDF", "application/pdf", read_pdf),
    ".docx": Format(
        "DOCX", "application/vnd.openxmlformats-officedocument.wordprocessingml.document", read_docx, zipped=True
    ),
    ".pptx": Format(
        "PPTX", "application/vnd.openxmlformats-officedocument.presentationml.presentation", read_pptx, zipped=True
    ),
    ".xlsx": Format(
        "XLSX", "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet", read_xlsx, zipped=True
    ),
    ".csv": Format("CSV", "text/csv", read_csv),
    ".odt": Format("ODT", "application/vnd.oasis.opendocument.text", read_odt, zipped=True),
    ".epub": Format("EPUB", "application/epub+zip", _epub),
}
CONTENT_TYPES = {extension: fmt.content_type for extension, fmt in FORMATS.items()}


def parse_document(path: Path, data: bytes) -> ParsedDocument:
    """Title and text of a file, by its extension. The title: the file's own (metadata) title, else its first
    heading, else the file name, never with Markdown marks."""
    fmt = FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise DocumentError(f"unsupported file type {path.suffix or '(none)'}")
    source = ""
    dated = None
    if fmt.read is None:
        title, text, source = read_markup(path, data, fmt.content_type)
        if source:  # HTML: the date its metadata gives, as a web page's
            dated = published_date(source, "")
    else:
        if fmt.zipped:
            open_zip(data, fmt.name).close()
        try:
            title, text, dated = fmt.read(path, data)
        except DocumentError:
            raise
        # Each library raises its own errors, and on a malformed file also KeyError, ValueError, lxml's and
        # zipfile's: whatever it is, the file is unreadable, and the indexing run goes on to the next one.
        except Exception as exc:  # noqa: BLE001
            raise DocumentError(f"not a readable {fmt.name} file: {_reason(exc)}") from exc
        # The cleaning text files get: no control characters, nothing PostgreSQL cannot store.
        text = extract_text(text, "text/plain", "")[1]
    if not text.strip():
        raise DocumentError("no text in it")
    return ParsedDocument(
        title=clean_title(storable(title)) or path.stem[:TITLE_CHARS],
        text=text,
        content_type=fmt.content_type,
        source=source,
        metadata_date=dated,
    )


def _reason(exc: Exception) -> str:
    message = _cell(exc) or type(exc).__name__
    return message[:300]
