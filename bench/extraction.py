"""Main-text extraction measured on the annotated corpus of tests/corpus (bench part `extraction`).

A page's segments are sentences of its main text (must be kept) and strings of its furniture (must be dropped:
menus, cookie notices, share bars, related links, comments, newsletter boxes, footers). A segment is kept when
it occurs in the extracted text, whitespace and case aside. Over a set of pages, counting segments:
precision = main-text segments kept / all segments kept, recall = main-text segments kept / main-text segments.
A page fails when the extractor keeps none of its main text.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

CORPUS = Path(__file__).resolve().parent.parent / "tests" / "corpus"
Extractor = Callable[[str], str]


@dataclass(frozen=True)
class Page:
    name: str
    part: str  # "dev" or "held-out"
    html: str
    keep: tuple[str, ...]
    drop: tuple[str, ...]


@dataclass(frozen=True)
class Score:
    pages: int
    precision: float
    recall: float
    f1: float
    chars_per_page: float
    seconds_per_page: float
    failed: tuple[str, ...]  # pages with main text of which nothing was kept

    def describe(self) -> str:
        return (
            f"precision {self.precision:.3f}  recall {self.recall:.3f}  F1 {self.f1:.3f}  "
            f"{self.chars_per_page:,.0f} chars/page  {self.seconds_per_page * 1000:.1f} ms/page  "
            f"failed {len(self.failed)}/{self.pages}"
        )


def load_corpus(part: str | None = None) -> list[Page]:
    """The corpus pages, of one part ("dev", "held-out") or all of them, in name order."""
    annotations = json.loads((CORPUS / "annotations.json").read_text())
    return [
        Page(name, entry["part"], (CORPUS / "pages" / name).read_text(), tuple(entry["keep"]), tuple(entry["drop"]))
        for name, entry in sorted(annotations.items())
        if part is None or entry["part"] == part
    ]


def normalise(text: str) -> str:
    return " ".join(text.split()).casefold()


def score(extract: Extractor, pages: Iterable[Page]) -> Score:
    """Segment precision, recall and F1 of `extract` over `pages`, with characters and time per page."""
    kept_text = kept_boiler = total_text = chars = count = 0
    failed = []
    began = time.perf_counter()
    for page in pages:
        text = extract(page.html)
        found = normalise(text)
        kept = sum(normalise(segment) in found for segment in page.keep)
        kept_text += kept
        total_text += len(page.keep)
        kept_boiler += sum(normalise(segment) in found for segment in page.drop)
        chars += len(text)
        count += 1
        if page.keep and not kept:
            failed.append(page.name)
    seconds = time.perf_counter() - began
    precision = kept_text / (kept_text + kept_boiler) if kept_text + kept_boiler else 0.0
    recall = kept_text / total_text if total_text else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return Score(count, precision, recall, f1, chars / max(count, 1), seconds / max(count, 1), tuple(failed))


def bare_soup(html: str) -> str:
    """The baseline: every string of the page, BeautifulSoup's get_text with scripts and styles dropped."""
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(html, "lxml")
    for tag in soup(["script", "style", "noscript", "template"]):
        tag.decompose()
    return re.sub(r"\n\s*\n+", "\n\n", soup.get_text("\n"))


def previous(html: str) -> str:
    """The extractor before trafilatura: the cleaning rules alone (<main>/<article> and tag-name boilerplate)."""
    from research.text.page_text import extract_page_soup

    return extract_page_soup(html, "https://corpus.test/")[1]


def current(html: str) -> str:
    """What the app stores today (research.text.page_text.extract_page)."""
    from research.text.page_text import extract_page

    return extract_page(html, "https://corpus.test/")[1]


EXTRACTORS: dict[str, Extractor] = {
    "bare BeautifulSoup get_text": bare_soup,
    "previous (cleaning rules alone)": previous,
    "trafilatura (page_text today)": current,
}


def table() -> list[tuple[str, str, Score]]:
    """(extractor, part, score) for every extractor on the dev and the held-out part."""
    parts = {part: load_corpus(part) for part in ("dev", "held-out")}
    return [
        (name, part, score(extract, pages)) for name, extract in EXTRACTORS.items() for part, pages in parts.items()
    ]


if __name__ == "__main__":
    for name, part, result in table():
        print(f"{name:32} {part:9} {result.describe()}")
