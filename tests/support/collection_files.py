"""Small document folders for the local-collection tests: HTML, Markdown, text and a real (hand-made) PDF."""

from __future__ import annotations

from pathlib import Path


def make_pdf(lines: list[str], title: str = "") -> bytes:
    """A one-page PDF 1.4 with the lines in Helvetica, built by hand (objects, xref table, trailer)."""

    def escape(text: str) -> str:
        return text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")

    stream = "BT /F1 11 Tf 72 740 Td 14 TL " + " ".join(f"({escape(line)}) Tj T*" for line in lines) + " ET"
    objects = [
        "<< /Type /Catalog /Pages 2 0 R >>",
        "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        "/Resources << /Font << /F1 5 0 R >> >> >>",
        f"<< /Length {len(stream.encode('latin-1'))} >>\nstream\n{stream}\nendstream",
        "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
        f"<< /Title ({escape(title)}) /Producer (tests) >>",
    ]
    out = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n{body}\nendobj\n".encode("latin-1")
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += "".join(f"{offset:010d} 00000 n \n" for offset in offsets).encode()
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R /Info 6 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return bytes(out)


HTML = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>Heat pumps in cold climates</title></head>
<body><nav>Home | About</nav>
<main>
<h1>Heat pumps in cold climates</h1>
<p>Modern cold-climate heat pumps keep heating at outdoor temperatures of minus 25 degrees Celsius.
Their coefficient of performance falls as the outdoor air gets colder, but it stays above 1.5 at minus 15 degrees.</p>
<p>Field trials in Nordic homes measured seasonal performance factors between 2.5 and 3.2 for air-source heat
pumps.</p>
<script>alert("never run")</script>
</main></body></html>
"""

MARKDOWN = """# Defrosting heat pumps

Frost builds up on the outdoor coil of an air-source heat pump when the air is cold and humid.
A defrost cycle reverses the refrigerant flow for a few minutes to melt the ice on the outdoor coil.

- Defrost cycles cost between 5 and 10 percent of the heat pump's seasonal output in humid cold climates.
- Demand-based defrost control starts a cycle only when sensors detect ice on the coil.
"""

TEXT = """Notes on ground-source heat pumps

Ground-source heat pumps draw heat from boreholes, where the ground stays near 8 degrees all winter.
Their performance in cold climates therefore hardly depends on the outdoor air temperature.
"""

PDF_LINES = [
    "Cold climate heat pump field study.",
    "Heat pumps installed in Finland delivered a seasonal performance factor of 2.9 in cold climates.",
    "Backup resistance heaters ran for less than 3 percent of the heating hours.",
]
PDF_TITLE = "Cold climate heat pump field study"


def write_mixed_folder(folder: Path) -> dict[str, Path]:
    """HTML, Markdown, text and PDF files about heat pumps (one nested), plus a file of an unsupported type."""
    files = {
        "html": folder / "heat-pumps.html",
        "markdown": folder / "guides" / "defrost.md",
        "text": folder / "ground-source.txt",
        "pdf": folder / "field-study.pdf",
        "unsupported": folder / "photo.png",
    }
    files["markdown"].parent.mkdir(parents=True, exist_ok=True)
    files["html"].write_text(HTML, encoding="utf-8")
    files["markdown"].write_text(MARKDOWN, encoding="utf-8")
    files["text"].write_text(TEXT, encoding="utf-8")
    files["pdf"].write_bytes(make_pdf(PDF_LINES, PDF_TITLE))
    files["unsupported"].write_bytes(b"\x89PNG\r\n\x1a\n")
    return files
