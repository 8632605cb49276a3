"""The collection reads every format a team keeps: Word, PowerPoint, Excel, CSV, OpenDocument text, EPUB and PDF
(tables included, as rows named by their headers), each file built here with the libraries that write it; broken
files are reported, never fatal."""

from __future__ import annotations

import datetime
import io
import zipfile
from collections.abc import Callable
from pathlib import Path

import docx
import openpyxl
import pptx
import pytest
from django.core.management import call_command
from django.test.utils import override_settings
from fpdf import FPDF
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from odf import dc
from odf import table as odf_table
from odf import text as odf_text
from odf.opendocument import OpenDocumentText
from pptx.util import Inches

from research.collection import readers
from research.collection.documents import DocumentError, ParsedDocument, parse_document, rank_documents
from research.models import CollectionDocument, UnreadableFile
from workers.clients import local_documents

# --- The files --------------------------------------------------------------------------------------------

REVENUE = [("Region", "Q1 revenue", "Growth"), ("North", "EUR 1.2 M", "4 %"), ("South", "EUR 0.8 M", "")]
REVENUE_ROWS = ["Region: North; Q1 revenue: EUR 1.2 M; Growth: 4 %.", "Region: South; Q1 revenue: EUR 0.8 M."]


def make_docx(title: str = "") -> bytes:
    document = docx.Document()
    document.core_properties.title = title
    document.add_heading("Q1 2026 Operations Report", 1)
    document.add_paragraph("The Tampere warehouse shipped 18,400 parcels in the first quarter.")
    document.add_paragraph("Charging points by depot", style="Caption")
    table = document.add_table(rows=3, cols=2)
    for r, row in enumerate([("Depot", "Charging points"), ("Rovaniemi", "36"), ("Kuopio", "")]):
        for c, value in enumerate(row):
            table.cell(r, c).text = value
    document.add_paragraph("Revenue grew in every region but one.")
    revenue = document.add_table(rows=3, cols=3)
    for r, row in enumerate(REVENUE):
        for c, value in enumerate(row):
            revenue.cell(r, c).text = value
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def make_pptx() -> bytes:
    presentation = pptx.Presentation()
    first = presentation.slides.add_slide(presentation.slide_layouts[1])
    first.shapes.title.text = "Fleet review"
    first.placeholders[1].text_frame.text = "Electric vans now cover 40 percent of delivery routes."
    first.notes_slide.notes_text_frame.text = "Mention the Lahti charging pilot."
    second = presentation.slides.add_slide(presentation.slide_layouts[5])
    second.shapes.title.text = "Vans per depot"
    frame = second.shapes.add_table(3, 2, Inches(1), Inches(2), Inches(6), Inches(1.5))
    for r, row in enumerate([("Depot", "Electric vans"), ("Oulu", "12"), ("Turku", "9")]):
        for c, value in enumerate(row):
            frame.table.cell(r, c).text = value
    out = io.BytesIO()
    presentation.save(out)
    return out.getvalue()


def make_xlsx(rows: int = 0) -> bytes:
    workbook = openpyxl.Workbook()
    sheet = workbook.active
    sheet.title = "Sheet1"
    sheet.append(["Region", "Q1 revenue", "Growth"])
    sheet.append(["North", 1200000, 0.04])
    sheet["C2"].number_format = "0%"
    sheet.append(["South", 800000, None])
    for n in range(rows):
        sheet.append([f"Region {n}", n, None])
    headcount = workbook.create_sheet("Headcount")
    headcount.append(["Team", "People", "Site"])
    headcount.append(["Customer support", 14, "Joensuu"])
    workbook.properties.title = "Finance workbook 2026"
    out = io.BytesIO()
    workbook.save(out)
    return out.getvalue()


CSV = "Item;Cost;Note\nDiesel;EUR 3,400;\nWinter tyres;EUR 800;studded set for the Oulu vans\n"


def make_odt(rows: int = 0) -> bytes:
    document = OpenDocumentText()
    document.meta.addElement(dc.Title(text="Safety audit"))
    document.text.addElement(odf_text.H(outlinelevel=1, text="Safety audit March 2026"))
    document.text.addElement(odf_text.P(text="No lost-time incidents were recorded at any depot in March."))
    table = odf_table.Table(name="Incidents by site")
    for row in [("Site", "Near misses"), ("Oulu", "0"), ("Turku", "2"), *[(f"Site {n}", str(n)) for n in range(rows)]]:
        table_row = odf_table.TableRow()
        for value in row:
            cell = odf_table.TableCell()
            cell.addElement(odf_text.P(text=value))
            table_row.addElement(cell)
        table.addElement(table_row)
    document.text.addElement(table)
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def make_epub(title: str = "Field handbook") -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("mimetype", "application/epub+zip")
        archive.writestr(
            "META-INF/container.xml",
            '<?xml version="1.0"?><container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container">'
            '<rootfiles><rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/>'
            "</rootfiles></container>",
        )
        # The manifest lists the chapters out of order: the spine decides the reading order.
        archive.writestr(
            "OEBPS/content.opf",
            '<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" version="3.0">'
            f'<metadata xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>{title}</dc:title></metadata>'
            '<manifest><item id="two" href="text/two.xhtml" media-type="application/xhtml+xml"/>'
            '<item id="one" href="text/one.xhtml" media-type="application/xhtml+xml"/>'
            '<item id="css" href="style.css" media-type="text/css"/></manifest>'
            '<spine><itemref idref="one"/><itemref idref="css"/><itemref idref="two"/></spine></package>',
        )
        archive.writestr("OEBPS/style.css", "body { color: black }")
        for name, heading, sentence in [
            ("one", "Chapter one", "Inspect the heat exchanger of each van every spring before the cooling season."),
            ("two", "Chapter two", "Replace the cabin filters after 2,000 operating hours or once a year."),
        ]:
            archive.writestr(
                f"OEBPS/text/{name}.xhtml",
                f'<html xmlns="http://www.w3.org/1999/xhtml"><head><title>{heading}</title></head>'
                f"<body><h1>{heading}</h1><p>{sentence}</p></body></html>",
            )
    return out.getvalue()


def make_pdf(title: str = "") -> bytes:
    pdf = FPDF()
    if title:
        pdf.set_title(title)
    pdf.add_page()
    pdf.set_font("Helvetica", size=12)
    pdf.multi_cell(0, 8, "# Q1 2026 Operations Report", new_x="LMARGIN", new_y="NEXT")
    pdf.multi_cell(0, 8, "Parcel volumes rose in every region this quarter.", new_x="LMARGIN", new_y="NEXT")
    with pdf.table() as table:  # ruled: the borders are what pdfplumber finds the table by
        for row in REVENUE:
            cells = table.row()
            for value in row:
                cells.cell(value)
    pdf.multi_cell(0, 8, "The South region opens a second depot in June.", new_x="LMARGIN", new_y="NEXT")
    return bytes(pdf.output())


VALID: dict[str, Callable[[], bytes]] = {
    ".docx": make_docx,
    ".pptx": make_pptx,
    ".xlsx": make_xlsx,
    ".csv": CSV.encode,
    ".odt": make_odt,
    ".epub": make_epub,
    ".pdf": make_pdf,
}


def zip_bomb() -> bytes:
    """A 'Word file' whose one member inflates 1,000 to 1."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("word/document.xml", b"\0" * (4 * 1024 * 1024))
    return out.getvalue()


def write_all_formats(folder: Path) -> dict[str, Path]:
    """One good file of each format, a broken file of each, and an unsupported one."""
    folder.mkdir(parents=True, exist_ok=True)
    good = {
        "docx": ("operations.docx", make_docx()),
        "pptx": ("fleet.pptx", make_pptx()),
        "xlsx": ("finance.xlsx", make_xlsx()),
        "csv": ("running-costs.csv", CSV.encode()),
        "odt": ("audit.odt", make_odt()),
        "epub": ("handbook.epub", make_epub()),
        "pdf": ("operations.pdf", make_pdf()),
    }
    broken = {
        "broken docx": ("broken.docx", make_docx()[:2000]),  # cut short: no central directory
        "bomb docx": ("bomb.docx", zip_bomb()),
        "broken pptx": ("broken.pptx", b"PK\x03\x04 not really a presentation"),
        "broken xlsx": ("broken.xlsx", _without(make_xlsx(), "xl/workbook.xml")),
        "broken csv": ("broken.csv", b"name,notes\nA," + b"x" * 200_000 + b"\n"),  # past csv's field limit
        "broken odt": ("broken.odt", _without(make_odt(), "content.xml")),
        "broken epub": ("broken.epub", _without(make_epub(), "META-INF/container.xml")),
        "broken pdf": ("broken.pdf", b"%PDF-1.7\n1 0 obj << /Type /Catalog >> endobj\ntrailer << >>\n%%EOF\n"),
        "unsupported": ("photo.heic", b"\x00\x00\x00\x18ftypheic"),
    }
    files = {}
    for key, (name, data) in {**good, **broken}.items():
        files[key] = folder / name
        files[key].write_bytes(data)
    return files


def _without(data: bytes, member: str) -> bytes:
    """The archive less one of its members: a zip that opens but is not the document it claims to be."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as source, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as target:
        for info in source.infolist():
            if info.filename != member:
                target.writestr(info, source.read(info))
    return out.getvalue()


# --- Indexing a folder of every format ------------------------------------------------------------------


def by_name(name: str) -> CollectionDocument:
    return CollectionDocument.objects.get(path__endswith=f"/{name}")


def run_index(folder: Path) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command("index_documents", str(folder), stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


EXPECTED_FAILURES = {
    "broken.docx": "not a readable DOCX file",
    "bomb.docx": "refused DOCX file: word/document.xml is compressed",
    "broken.pptx": "not a readable PPTX file",
    "broken.xlsx": "not a readable XLSX file",
    "broken.csv": "not a readable CSV file: field larger than field limit",
    "broken.odt": "not a readable ODT file",
    "broken.epub": "not a readable EPUB file",
    "broken.pdf": "not a readable PDF file",
}


@pytest.mark.django_db
def test_index_documents_reads_every_format_with_tables_as_rows(tmp_path: Path) -> None:
    # given a folder with a file of every format, a broken file of each kind and an unsupported one
    files = write_all_formats(tmp_path)
    # when it is indexed
    out, err = run_index(tmp_path)
    # then every good file is a document, and the run went on past every broken one
    assert (
        f"7 added, 0 updated, 0 unchanged, 0 removed, 1 skipped (unsupported type), {len(EXPECTED_FAILURES)} failed"
        in out
    )
    word = by_name("operations.docx")
    assert word.title == "Q1 2026 Operations Report"
    assert word.content_type == "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
    lines = word.text.split("\n")
    assert "Charging points by depot — Depot: Rovaniemi; Charging points: 36." in lines
    assert "Charging points by depot — Depot: Kuopio." in lines  # the empty cell left out
    assert all(row in lines for row in REVENUE_ROWS)
    order = [word.text.index(s) for s in ("Tampere warehouse", "Rovaniemi", "grew in every region", "North")]
    assert order == sorted(order)  # paragraphs and tables in document order
    slides = by_name("fleet.pptx")
    assert slides.title == "Fleet review"
    assert slides.text.split("\n") == [
        "Fleet review",
        "Electric vans now cover 40 percent of delivery routes.",
        "Speaker notes: Mention the Lahti charging pilot.",
        "",
        "Vans per depot",
        "Depot: Oulu; Electric vans: 12.",
        "Depot: Turku; Electric vans: 9.",
    ]
    sheet = by_name("finance.xlsx")
    assert sheet.title == "Finance workbook 2026"
    # "Sheet1" says nothing and is left out; "Headcount" names its rows; 0.04 formatted as a percentage is 4 %
    assert "Region: North; Q1 revenue: 1200000; Growth: 4 %." in sheet.text.split("\n")
    assert "Region: South; Q1 revenue: 800000." in sheet.text.split("\n")
    assert "Headcount — Team: Customer support; People: 14; Site: Joensuu." in sheet.text.split("\n")
    assert "Sheet1" not in sheet.text
    costs = by_name("running-costs.csv")
    assert (costs.title, costs.content_type) == ("running-costs", "text/csv")
    assert costs.text.split("\n") == [
        "Item: Diesel; Cost: EUR 3,400.",
        "Item: Winter tyres; Cost: EUR 800; Note: studded set for the Oulu vans.",
    ]
    audit = by_name("audit.odt")
    assert audit.title == "Safety audit"
    assert "No lost-time incidents were recorded at any depot in March." in audit.text
    assert "Incidents by site — Site: Turku; Near misses: 2." in audit.text.split("\n")
    book = by_name("handbook.epub")
    assert book.title == "Field handbook"
    assert book.text.index("heat exchanger") < book.text.index("cabin filters")  # spine order, not manifest order
    assert "body { color" not in book.text
    pdf = by_name("operations.pdf")
    assert pdf.title == "Q1 2026 Operations Report"  # its first line, without the Markdown heading mark
    pdf_lines = pdf.text.split("\n")
    assert all(row in pdf_lines for row in REVENUE_ROWS)
    assert pdf_lines.index(REVENUE_ROWS[0]) > pdf_lines.index("Parcel volumes rose in every region this quarter.")
    assert pdf_lines.index(REVENUE_ROWS[1]) < pdf_lines.index("The South region opens a second depot in June.")
    assert "Region Q1 revenue Growth" not in pdf.text  # the table's cells are not repeated as loose text
    # and every broken or unsupported file is printed with its reason and listed for the admin
    for name, reason in EXPECTED_FAILURES.items():
        assert f"could not index {tmp_path / name}: {reason}" in err, name
    assert f"skipped {files['unsupported']}: unsupported file type .heic" in out
    listed = dict(UnreadableFile.objects.values_list("path", "reason"))
    assert set(listed) == {str(tmp_path / name) for name in [*EXPECTED_FAILURES, "photo.heic"]}
    for name, reason in EXPECTED_FAILURES.items():
        assert listed[str(tmp_path / name)].startswith(reason), (name, listed[str(tmp_path / name)])
    assert listed[str(files["unsupported"])] == "unsupported file type .heic"
    assert UnreadableFile.objects.get(path=str(files["bomb docx"])).size == files["bomb docx"].stat().st_size


@pytest.mark.django_db
def test_an_unreadable_file_is_no_longer_listed_once_indexed_or_gone(tmp_path: Path) -> None:
    # given an indexed folder with broken files
    files = write_all_formats(tmp_path)
    run_index(tmp_path)
    # when one is repaired, one deleted and the folder indexed again
    files["broken docx"].write_bytes(make_docx())
    files["broken pdf"].unlink()
    out, err = run_index(tmp_path)
    # then neither is listed any more; the others still are, checked again
    assert "1 added" in out and f"{len(EXPECTED_FAILURES) - 2} failed" in out
    listed = set(UnreadableFile.objects.values_list("path", flat=True))
    assert str(files["broken docx"]) not in listed and str(files["broken pdf"]) not in listed
    assert str(files["bomb docx"]) in listed and str(files["unsupported"]) in listed
    assert by_name("broken.docx").title == "Q1 2026 Operations Report"
    assert "broken.docx" not in err


# The documents indexed here are shared (no owner): every user may read them, one who has none of their own too.
ANY_READER = 0


@pytest.mark.django_db
def test_search_finds_a_fact_that_is_only_in_a_word_table_row(tmp_path: Path) -> None:
    # given every format indexed; Rovaniemi's charging points are only in a row of the Word file's table
    write_all_formats(tmp_path)
    run_index(tmp_path)
    word = by_name("operations.docx")
    assert CollectionDocument.objects.filter(text__icontains="Rovaniemi").count() == 1
    # when the collection is searched for them
    ranked = rank_documents("charging points Rovaniemi depot", 3, reader_id=ANY_READER)
    with override_settings(APP_BASE_URL="http://app.test:8000"):
        results = local_documents.search("How many charging points does the Rovaniemi depot have?", 3, ANY_READER)
    # then the Word document comes first, its row in the snippet
    assert ranked[0] == word.pk
    assert results[0].url == f"http://app.test:8000/collection/{word.pk}/"
    assert results[0].title == "Q1 2026 Operations Report"
    assert "Rovaniemi; Charging points: 36" in results[0].snippet


# --- Tables, titles, limits -----------------------------------------------------------------------------


def test_table_rows_are_named_by_their_header() -> None:
    # a header row, empty cells, a caption, a title row above the header, and a year as a column name
    assert readers.table_lines(REVENUE) == REVENUE_ROWS
    assert readers.table_lines(REVENUE, "Revenue by region")[0] == (
        "Revenue by region — Region: North; Q1 revenue: EUR 1.2 M; Growth: 4 %."
    )
    assert readers.table_lines([["Fleet 2026", "", ""], ["Depot", "2025", "2026"], ["Oulu", "10", "12"]]) == [
        "Fleet 2026",
        "Depot: Oulu; 2025: 10; 2026: 12.",
    ]
    # no header: numbers in the first row, or only one row; the cells are kept, joined
    assert readers.table_lines([["1", "2.5"], ["3", "4"]]) == ["1; 2.5.", "3; 4."]
    assert readers.table_lines([["Oulu", "Turku"]]) == ["Oulu; Turku."]
    assert readers.table_lines([["Name", "Name"], ["a", "b"]]) == ["Name; Name.", "a; b."]
    assert readers.table_lines([["", ""], [None, " "]]) == []
    assert readers.informative_name("Sheet1") == "" and readers.informative_name("Table 3") == ""
    assert readers.informative_name(" Headcount ") == "Headcount"


@pytest.mark.parametrize(
    ("title", "clean"),
    [
        ("# Q1 2026 Operations Report", "Q1 2026 Operations Report"),
        ("## **Fleet review** ##", "Fleet review"),
        ("`index_documents` guide", "index_documents guide"),
        ("snake_case_names and __init__ stay", "snake_case_names and __init__ stay"),
        ("  C# in  practice ", "C# in practice"),
    ],
)
def test_titles_lose_their_markdown_marks(title: str, clean: str) -> None:
    assert readers.clean_title(title) == clean


def test_titles_come_from_metadata_then_the_first_heading_then_the_file_name() -> None:
    assert parse_document(Path("/d/a.docx"), make_docx("Board pack")).title == "Board pack"
    assert parse_document(Path("/d/a.docx"), make_docx()).title == "Q1 2026 Operations Report"
    assert parse_document(Path("/d/a.pdf"), make_pdf("# Quarterly report")).title == "Quarterly report"
    assert parse_document(Path("/d/a.epub"), make_epub(title="")).title == "Chapter one"
    assert parse_document(Path("/d/q1-costs.csv"), CSV.encode()).title == "q1-costs"
    text = parse_document(Path("/d/notes.txt"), b"# Notes on the Oulu depot\n\nThe roof was repaired.\n")
    assert text.title == "Notes on the Oulu depot"


def test_an_html_document_takes_the_date_its_metadata_gives() -> None:
    page = (
        '<html><head><title>Depot note</title><meta name="date" content="2025-11-20"></head>'
        "<body><p>The Oulu depot closed its cold store for repairs during the autumn.</p></body></html>"
    )
    assert parse_document(Path("/d/depot.html"), page.encode()).metadata_date == datetime.date(2025, 11, 20)
    undated = page.replace('<meta name="date" content="2025-11-20">', "")
    assert parse_document(Path("/d/depot.html"), undated.encode()).metadata_date is None


def test_pdf_falls_back_to_pypdf_when_pdfplumber_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    import pdfplumber

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("pdfplumber is broken today")

    monkeypatch.setattr(pdfplumber, "open", broken)
    parsed = parse_document(Path("/d/ops.pdf"), make_pdf("Operations"))
    assert parsed.title == "Operations"
    assert "The South region opens a second depot in June." in parsed.text
    assert "North" in parsed.text  # pypdf reads the table's cells as loose text


def test_rows_past_the_cap_are_left_out_and_said_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(readers, "MAX_TABLE_ROWS", 4)
    # the header and three rows of the first sheet are read, of its 13
    sheet = parse_document(Path("/d/big.xlsx"), make_xlsx(rows=10)).text.split("\n")
    assert sheet[:4] == [
        "Region: North; Q1 revenue: 1200000; Growth: 4 %.",
        "Region: South; Q1 revenue: 800000.",
        "Region: Region 0; Q1 revenue: 0.",
        "(Only the first 4 rows of this table are read: about 9 more are left out.)",
    ]
    assert "Region: Region 1; Q1 revenue: 1." not in sheet
    assert "Headcount — Team: Customer support; People: 14; Site: Joensuu." in sheet  # each sheet has its cap
    odt = parse_document(Path("/d/big.odt"), make_odt(rows=10)).text.split("\n")
    assert odt[-4:] == [
        "Incidents by site — Site: Oulu; Near misses: 0.",
        "Incidents by site — Site: Turku; Near misses: 2.",
        "Incidents by site — Site: Site 0; Near misses: 0.",
        "(Only the first 4 rows of this table are read: the rest are left out.)",
    ]
    rows = "".join(f"Depot {n},{n}\n" for n in range(10))
    csv = parse_document(Path("/d/big.csv"), f"Depot,Vans\n{rows}".encode()).text.split("\n")
    assert csv[:4] == ["Depot: Depot 0; Vans: 0.", "Depot: Depot 1; Vans: 1.", "Depot: Depot 2; Vans: 2."] + [
        "(Only the first 4 rows of this table are read: the rest are left out.)"
    ]


def test_zip_archives_that_expand_too_far_are_refused_before_parsing(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(DocumentError, match="compressed [0-9]+ to 1"):
        parse_document(Path("/d/bomb.docx"), zip_bomb())
    monkeypatch.setattr(readers, "ZIP_MAX_UNCOMPRESSED", 20_000)
    with pytest.raises(DocumentError, match=r"refused XLSX file: it expands to [0-9,]+ bytes, over the 20,000 bytes"):
        parse_document(Path("/d/a.xlsx"), make_xlsx(rows=2000))
    with pytest.raises(DocumentError, match="not a readable ODT file: not a zip archive"):
        parse_document(Path("/d/a.odt"), b"plain text, not a zip")


# --- Any bytes at all -----------------------------------------------------------------------------------

EXTENSIONS = sorted(readers.FORMATS)
_valid_files: dict[str, bytes] = {}


def valid_file(extension: str) -> bytes:
    if extension not in _valid_files:
        _valid_files[extension] = VALID[extension]() if extension in VALID else b"<p>Heat pumps in Oulu.</p>"
    return _valid_files[extension]


def parsed_or_refused(extension: str, data: bytes) -> None:
    """The property: a ParsedDocument with text, or a DocumentError with a reason; any other exception fails."""
    try:
        parsed = parse_document(Path(f"/d/file{extension}"), data)
    except DocumentError as exc:
        assert str(exc)
        return
    assert isinstance(parsed, ParsedDocument) and parsed.text.strip() and parsed.title
    assert "\x00" not in parsed.text + parsed.title


FUZZ = hypothesis_settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("extension", EXTENSIONS)
@FUZZ
@given(data=st.binary(max_size=3000))
def test_arbitrary_bytes_are_a_document_or_a_document_error(extension: str, data: bytes) -> None:
    parsed_or_refused(extension, data)


@pytest.mark.parametrize("extension", sorted(VALID))
@FUZZ
@given(cut=st.floats(0, 1), flip=st.none() | st.tuples(st.floats(0, 1), st.integers(0, 255)))
def test_truncated_or_damaged_files_are_a_document_or_a_document_error(
    extension: str, cut: float, flip: tuple[float, int] | None
) -> None:
    # a valid file cut short, with or without one byte changed (in a zip: a member that fails its CRC)
    data = bytearray(valid_file(extension))
    if flip is not None:
        data[int(flip[0] * (len(data) - 1))] = flip[1]
    parsed_or_refused(extension, bytes(data[: max(1, int(cut * len(data)))]))


@pytest.mark.parametrize("extension", sorted(VALID))
def test_every_valid_fixture_parses(extension: str) -> None:
    # the fuzzing above starts from files that do parse
    assert parse_document(Path(f"/d/file{extension}"), valid_file(extension)).text


# --- Dates and standing ------------------------------------------------------------------------------------


def test_metadata_dates_come_from_each_format_that_has_them() -> None:
    document = docx.Document()
    document.core_properties.modified = datetime.datetime(2025, 6, 30, 12, 0)
    document.add_paragraph("The Tampere warehouse shipped 18,400 parcels.")
    out = io.BytesIO()
    document.save(out)
    assert parse_document(Path("/d/a.docx"), out.getvalue()).metadata_date == datetime.date(2025, 6, 30)
    assert parse_document(Path("/d/q1-costs.csv"), CSV.encode()).metadata_date is None
    assert readers.metadata_date("D:20260115090000+00'00'") == datetime.date(2026, 1, 15)
    assert readers.metadata_date("2024-05-02T10:00:00Z", None) == datetime.date(2024, 5, 2)
    assert readers.metadata_date("yesterday", b"D:2025") == datetime.date(2025, 1, 1)
    assert readers.metadata_date("D:20251399") is None


@pytest.mark.django_db
def test_indexing_stores_each_documents_date_and_standing(tmp_path: Path) -> None:
    (tmp_path / "archive").mkdir()
    (tmp_path / "archive" / "headcount-2024-12.csv").write_text("Site,Employees\nPlant,96\n")
    (tmp_path / "headcount-2025-12.csv").write_text("Site,Employees\nPlant,131\n")
    (tmp_path / "plan.md").write_text("# Plan\n\nDRAFT: updated 3 March 2026.\n\nWe open a second plant.\n")
    run_index(tmp_path)
    stored = {Path(d.path).name: (d.dated, d.standing) for d in CollectionDocument.objects.all()}
    assert stored == {
        "headcount-2024-12.csv": (datetime.date(2024, 12, 31), "archived"),
        "headcount-2025-12.csv": (datetime.date(2025, 12, 31), "current"),
        "plan.md": (datetime.date(2026, 3, 3), "draft"),
    }
