"""Build the quality bench's document share: a fictional company's files, from text sources in this folder.

`bench/quality/corpus/` holds the share as reviewable text. A file whose name ends in `.src` is rendered into the
format its name gives before that suffix (`finance/annual-report-2025.pdf.src` becomes `finance/annual-report-2025.pdf`)
by the library that format's users write it with: python-docx, python-pptx, openpyxl, fpdf2, odfpy, and for EPUB
the zip of XHTML it is. Every other file (Markdown, text, HTML, CSV) is copied as it is. Nothing binary is kept in
the repository, and the clock never reaches a document: its metadata dates are fixed, and so are its zip members'
times, so the share's files (and the sha256 the indexer keeps of each) do not change from one build to the next.

The source markup, line by line:
  @title TEXT       the document's metadata title (only at the top)
  # / ## / ###      a heading; in a workbook, a part's `#` heading names its sheet; in a deck, the slide's title
  | a | b |         a table row (the first row of a table is its header; `|---|` rows are skipped)
  caption: TEXT     a caption, right above the table it names (Word's "Caption" style)
  - TEXT            a bullet
  notes: TEXT       a slide's speaker notes
  ===               the end of a part: a page (PDF, Word), a slide, a sheet, a chapter (EPUB)
  anything else     paragraph text; consecutive lines are one paragraph

Usage: python -m bench.quality.build_corpus FOLDER
"""

from __future__ import annotations

import datetime
import io
import re
import shutil
import sys
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from html import escape
from pathlib import Path

SOURCES = Path(__file__).resolve().parent / "corpus"
SUFFIX = ".src"
# Every date the libraries would take from the clock: the share's documents are all dated by their text.
FIXED_TIME = datetime.datetime(2026, 1, 15, 9, 0, 0)
ZIP_TIME = (2026, 1, 15, 9, 0, 0)

_PERCENT = re.compile(r"^-?\d+(?:\.\d+)? %$")
_NUMBER = re.compile(r"^-?\d+(?:\.\d+)?$")
_MODIFIED = re.compile(rb"(<dcterms:modified[^>]*>)[^<]*")


@dataclass
class Block:
    kind: str  # heading, para, bullet, caption, table, notes
    text: str = ""
    level: int = 1
    rows: list[list[str]] = field(default_factory=list)


@dataclass
class Source:
    title: str
    parts: list[list[Block]]


def parse(text: str) -> Source:
    """The markup above as parts of blocks."""
    title = ""
    parts: list[list[Block]] = [[]]
    paragraph: list[str] = []

    def close_paragraph() -> None:
        if paragraph:
            parts[-1].append(Block("para", " ".join(paragraph)))
            paragraph.clear()

    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("@title ") and not any(parts) and not paragraph:
            title = line.removeprefix("@title ").strip()
            continue
        if not line:
            close_paragraph()
            continue
        if line == "===":
            close_paragraph()
            parts.append([])
            continue
        if line.startswith("|"):
            close_paragraph()
            cells = [cell.strip() for cell in line.strip("|").split("|")]
            if all(re.fullmatch(r":?-+:?", cell) for cell in cells):
                continue
            blocks = parts[-1]
            if blocks and blocks[-1].kind == "table":
                blocks[-1].rows.append(cells)
            else:
                blocks.append(Block("table", rows=[cells]))
            continue
        heading = re.match(r"^(#{1,3}) (.+)$", line)
        marked = re.match(r"^(caption|notes): (.+)$", line)
        if heading or marked or line.startswith("- "):
            close_paragraph()
            if heading:
                parts[-1].append(Block("heading", heading.group(2).strip(), level=len(heading.group(1))))
            elif marked:
                parts[-1].append(Block(marked.group(1), marked.group(2).strip()))
            else:
                parts[-1].append(Block("bullet", line[2:].strip()))
            continue
        paragraph.append(line)
    close_paragraph()
    return Source(title, [part for part in parts if part])


# --- Renderers: one per format, each the library that format is usually written with -----------------------


def render_docx(source: Source) -> bytes:
    import docx
    from docx.enum.text import WD_BREAK

    document = docx.Document()
    properties = document.core_properties
    properties.title, properties.author = source.title, "Borealis Thermal Oy"
    properties.created = properties.modified = FIXED_TIME
    properties.last_printed = FIXED_TIME
    properties.revision = 1
    for index, part in enumerate(source.parts):
        if index:
            document.add_paragraph().add_run().add_break(WD_BREAK.PAGE)
        for block in part:
            if block.kind == "heading":
                document.add_heading(block.text, level=block.level)
            elif block.kind == "caption":
                document.add_paragraph(block.text, style="Caption")
            elif block.kind == "bullet":
                document.add_paragraph(block.text, style="List Bullet")
            elif block.kind == "table":
                width = max(len(row) for row in block.rows)
                table = document.add_table(rows=len(block.rows), cols=width)
                table.style = "Table Grid"
                for row, cells in zip(table.rows, block.rows, strict=True):
                    for cell, value in zip(row.cells, cells, strict=False):
                        cell.text = value
            else:
                document.add_paragraph(block.text)
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def render_pptx(source: Source) -> bytes:
    import pptx
    from pptx.util import Inches, Pt

    deck = pptx.Presentation()
    deck.core_properties.title = source.title
    deck.core_properties.author = "Borealis Thermal Oy"
    deck.core_properties.created = deck.core_properties.modified = FIXED_TIME
    deck.core_properties.revision = 1
    title_only = deck.slide_layouts[5]
    for part in source.parts:
        slide = deck.slides.add_slide(title_only)
        top = int(Inches(1.5))  # EMU, as the shapes' positions are given
        lines: list[str] = []
        for block in part:
            if block.kind == "heading" and slide.shapes.title is not None and not slide.shapes.title.text:
                slide.shapes.title.text = block.text
            elif block.kind == "notes":
                slide.notes_slide.notes_text_frame.text = block.text
            elif block.kind == "table":
                if lines:
                    top = _pptx_text(slide, lines, top)
                    lines = []
                rows, width = len(block.rows), max(len(row) for row in block.rows)
                height = int(Inches(0.4)) * rows
                shape = slide.shapes.add_table(rows, width, Inches(0.5), top, Inches(9), height)
                for r, cells in enumerate(block.rows):
                    for c, value in enumerate(cells):
                        cell = shape.table.cell(r, c)
                        cell.text = value
                        for paragraph in cell.text_frame.paragraphs:
                            for run in paragraph.runs:
                                run.font.size = Pt(14)
                top += height + int(Inches(0.2))
            else:
                lines.append(block.text)
        if lines:
            _pptx_text(slide, lines, top)
    out = io.BytesIO()
    deck.save(out)
    return out.getvalue()


def _pptx_text(slide: object, lines: list[str], top: int) -> int:
    from pptx.util import Inches, Pt

    height = int(Inches(0.45)) * len(lines)
    box = slide.shapes.add_textbox(Inches(0.5), top, Inches(9), height)  # type: ignore[attr-defined]
    frame = box.text_frame
    frame.word_wrap = True
    for index, line in enumerate(lines):
        paragraph = frame.paragraphs[0] if index == 0 else frame.add_paragraph()
        paragraph.text = line
        paragraph.font.size = Pt(16)
    return top + height + int(Inches(0.2))


def render_xlsx(source: Source) -> bytes:
    import openpyxl

    workbook = openpyxl.Workbook()
    for default in list(workbook.worksheets):  # the empty "Sheet" a new workbook starts with
        workbook.remove(default)
    workbook.properties.title = source.title
    workbook.properties.creator = "Borealis Thermal Oy"
    workbook.properties.created = workbook.properties.modified = FIXED_TIME
    for part in source.parts:
        name = next((block.text for block in part if block.kind == "heading"), f"Sheet{len(workbook.worksheets) + 1}")
        sheet = workbook.create_sheet(name[:31])
        for block in part:
            if block.kind == "table":
                for cells in block.rows:
                    sheet.append([_xlsx_cell(value) for value in cells])
                    for cell, value in zip(sheet[sheet.max_row], cells, strict=False):
                        if _PERCENT.match(value):
                            cell.number_format = "0.0%" if "." in value else "0%"
            elif block.kind != "heading":
                sheet.append([block.text])
    out = io.BytesIO()
    workbook.save(out)
    return out.getvalue()


def _xlsx_cell(value: str) -> object:
    """A spreadsheet's cell as its author typed it: numbers as numbers, a percentage as its fraction."""
    if _PERCENT.match(value):
        return float(value.removesuffix(" %")) / 100
    if _NUMBER.match(value):
        return float(value) if "." in value else int(value)
    return value or None


def render_pdf(source: Source) -> bytes:
    from fpdf import FPDF

    pdf = FPDF(format="A4")
    pdf.set_title(source.title)
    pdf.set_author("Borealis Thermal Oy")
    pdf.set_creation_date(FIXED_TIME)
    pdf.set_margins(20, 20, 20)
    for part in source.parts:
        pdf.add_page()
        for block in part:
            if block.kind == "heading":
                pdf.set_font("Helvetica", "B", {1: 16, 2: 13, 3: 11}[block.level])
                pdf.multi_cell(0, 8, block.text, new_x="LMARGIN", new_y="NEXT")
                pdf.ln(2)
            elif block.kind == "table":
                pdf.set_font("Helvetica", "", 10)
                with pdf.table(first_row_as_headings=True, line_height=6) as table:
                    for cells in block.rows:
                        row = table.row()
                        for value in cells:
                            row.cell(value)
                pdf.ln(4)
            else:
                pdf.set_font("Helvetica", "I" if block.kind == "caption" else "", 11)
                text = f"- {block.text}" if block.kind == "bullet" else block.text
                pdf.multi_cell(0, 6, text, new_x="LMARGIN", new_y="NEXT")
                pdf.ln(2)
    return bytes(pdf.output())


def render_odt(source: Source) -> bytes:
    from odf import dc, meta, table, text
    from odf.opendocument import OpenDocumentText

    document = OpenDocumentText()
    document.meta.addElement(dc.Title(text=source.title))
    document.meta.addElement(meta.CreationDate(text=FIXED_TIME.isoformat()))
    document.meta.addElement(dc.Date(text=FIXED_TIME.isoformat()))
    for part in source.parts:
        for block in part:
            if block.kind == "heading":
                document.text.addElement(text.H(outlinelevel=block.level, text=block.text))
            elif block.kind == "table":
                width = max(len(row) for row in block.rows)
                grid = table.Table(name=f"Table{len(document.text.childNodes)}")
                grid.addElement(table.TableColumn(numbercolumnsrepeated=width))
                for cells in block.rows:
                    row = table.TableRow()
                    for value in cells:
                        cell = table.TableCell(valuetype="string")
                        cell.addElement(text.P(text=value))
                        row.addElement(cell)
                    grid.addElement(row)
                document.text.addElement(grid)
            else:
                prefix = "- " if block.kind == "bullet" else ""
                document.text.addElement(text.P(text=prefix + block.text))
    out = io.BytesIO()
    document.write(out)
    return out.getvalue()


def render_epub(source: Source) -> bytes:
    """An EPUB 3 as a publisher's tool writes it: the mimetype first and stored, the container, the package, one
    XHTML chapter per part."""
    chapters = []
    for index, part in enumerate(source.parts, start=1):
        body = []
        for block in part:
            if block.kind == "heading":
                body.append(f"<h{block.level}>{escape(block.text)}</h{block.level}>")
            elif block.kind == "table":
                rows = "".join(
                    "<tr>" + "".join(f"<td>{escape(value)}</td>" for value in cells) + "</tr>" for cells in block.rows
                )
                body.append(f"<table>{rows}</table>")
            elif block.kind == "bullet":
                body.append(f"<ul><li>{escape(block.text)}</li></ul>")
            else:
                body.append(f"<p>{escape(block.text)}</p>")
        heading = next((block.text for block in part if block.kind == "heading"), f"Chapter {index}")
        chapters.append(
            (
                f"chapter{index}.xhtml",
                '<?xml version="1.0" encoding="utf-8"?>\n<html xmlns="http://www.w3.org/1999/xhtml"><head>'
                f"<title>{escape(heading)}</title></head><body><article>{''.join(body)}</article></body></html>\n",
            )
        )
    manifest = "".join(
        f'<item id="c{i}" href="{name}" media-type="application/xhtml+xml"/>' for i, (name, _) in enumerate(chapters)
    )
    spine = "".join(f'<itemref idref="c{i}"/>' for i in range(len(chapters)))
    package = (
        '<?xml version="1.0" encoding="utf-8"?>\n<package xmlns="http://www.idpf.org/2007/opf" version="3.0" '
        'unique-identifier="id"><metadata xmlns:dc="http://purl.org/dc/elements/1.1/">'
        f'<dc:identifier id="id">urn:borealis:{escape(source.title)}</dc:identifier>'
        f"<dc:title>{escape(source.title)}</dc:title><dc:language>en</dc:language></metadata>"
        f"<manifest>{manifest}</manifest><spine>{spine}</spine></package>\n"
    )
    container = (
        '<?xml version="1.0"?>\n<container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container">'
        '<rootfiles><rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/>'
        "</rootfiles></container>\n"
    )
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr(zipfile.ZipInfo("mimetype", ZIP_TIME), "application/epub+zip", zipfile.ZIP_STORED)
        members = [("META-INF/container.xml", container), ("OEBPS/content.opf", package)]
        members += [(f"OEBPS/{name}", markup) for name, markup in chapters]
        for name, content in members:
            archive.writestr(zipfile.ZipInfo(name, ZIP_TIME), content, zipfile.ZIP_DEFLATED)
    return out.getvalue()


RENDERERS: dict[str, Callable[[Source], bytes]] = {
    ".docx": render_docx,
    ".pptx": render_pptx,
    ".xlsx": render_xlsx,
    ".pdf": render_pdf,
    ".odt": render_odt,
    ".epub": render_epub,
}


def restamped(data: bytes) -> bytes:
    """A zip with every member stamped ZIP_TIME, in its order and compression: the Office libraries stamp members
    with the clock, which would make each build's bytes (and the indexer's sha256) differ."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as source, zipfile.ZipFile(out, "w") as target:
        for info in source.infolist():
            stamped = zipfile.ZipInfo(info.filename, ZIP_TIME)
            stamped.compress_type = info.compress_type
            stamped.external_attr = info.external_attr
            content = source.read(info)
            if info.filename == "docProps/core.xml":  # openpyxl stamps the time of saving, whatever it was given
                content = _MODIFIED.sub(rb"\g<1>" + FIXED_TIME.isoformat().encode() + b"Z", content)
            target.writestr(stamped, content)
    return out.getvalue()


def render(path: Path) -> bytes:
    """The document a `.src` file describes."""
    target = Path(path.name.removesuffix(SUFFIX))
    renderer = RENDERERS.get(target.suffix.lower())
    if renderer is None:
        raise ValueError(f"{path}: no renderer for {target.suffix or '(no extension)'}")
    data = renderer(parse(path.read_text(encoding="utf-8")))
    return restamped(data) if zipfile.is_zipfile(io.BytesIO(data)) else data


def sources(root: Path = SOURCES) -> list[Path]:
    return sorted(path for path in root.rglob("*") if path.is_file() and not path.name.startswith("."))


def build(folder: Path, root: Path = SOURCES) -> list[Path]:
    """The share under `folder` (created); returns the files written, sorted."""
    written = []
    for path in sources(root):
        relative = path.relative_to(root)
        if path.name.endswith(SUFFIX):
            target = folder / relative.parent / path.name.removesuffix(SUFFIX)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(render(path))
        else:
            target = folder / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)
        written.append(target)
    return sorted(written)


def main() -> None:
    if len(sys.argv) != 2:
        raise SystemExit("usage: python -m bench.quality.build_corpus FOLDER")
    folder = Path(sys.argv[1])
    written = build(folder)
    print(f"wrote {len(written)} files to {folder}")


if __name__ == "__main__":
    main()
