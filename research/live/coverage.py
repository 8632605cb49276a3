"""How much of what a research found its report uses: the snapshot's `coverage`.

The report's text is the current report version's: the assembled report once stored, else its sections written so
far. Its words are counted as a reader reads them (link targets, quote tooltips, citation marks and the closing
sources list are not words of the report), and its links are traced back to the analysed pages they cite. The
core may not import the pipeline's citation code (workers/pipeline/citations.py), so the link pattern it writes
is matched here again; links are traced to pages the same way, by encoding each page's URL
(research/text/links.py `pages_by_link`), never by decoding the link.
"""

import re
from collections.abc import Callable, Iterable
from functools import lru_cache
from typing import Any

from research.models import SectionStatus
from research.text.links import pages_by_link

# A markdown link as the report writes one: `[text](target)` or `[text](target "title")`. Link texts may hold one
# level of brackets (citations are `[[1]](url "quote")`), targets one level of parentheses (Wikipedia's URLs).
_LINK = re.compile(
    r"(?<!\\)\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\(\s*<?((?:[^\s()<>]|\([^\s()<>]*\))+)>?(?:\s+\"[^\"]*\")?\s*\)"
)
# What is left of a citation once its link is taken out: `[1]` or `[1, 2]`.
_MARK = re.compile(r"\[\d+(?:\s*,\s*\d+)*\]")
_WORD = re.compile(r"\w+(?:['’-]\w+)*")
# The assembled report ends with its sources, each with the quotes it rests on: a list, not words written.
_SOURCES = re.compile(r"^## Sources\s*$", re.MULTILINE)


def coverage(
    report_words: int,
    findings: int,
    pages_analysed: int,
    sections: list[dict[str, Any]],
    report_markdown: str | None,
    analysed_urls: Callable[[], Iterable[str]],
) -> dict[str, int]:
    """The coverage of a research. `sections` are the current version's sections (status, findings: their plan's
    list of Extract ids, markdown: needed of the written ones only while `report_markdown`, the current version's
    stored report, is None); `analysed_urls` gives the distinct URLs of the analysed websites, and is called only
    when the report has links to trace."""
    written = [section for section in sections if section["status"] == SectionStatus.WRITTEN]
    used: set[int] = set()
    for section in written:
        ids = section.get("findings")
        if isinstance(ids, list):
            used.update(item for item in ids if isinstance(item, int) and not isinstance(item, bool))
    if report_markdown is not None:
        words, targets = _report_figures(report_markdown)
    else:
        figures = [_section_figures(section["markdown"] or "") for section in written]
        words = sum(count for count, _ in figures)
        targets = frozenset().union(*(links for _, links in figures))
    cited: set[str] = set()
    if targets:
        analysed = set(analysed_urls())
        pages = pages_by_link(analysed)
        cited = {pages.get(target, target) for target in targets} & analysed
    return {
        "findings": findings,
        "findings_used": len(used),
        "pages_analysed": pages_analysed,
        "pages_cited": len(cited),
        "words": words,
        "report_words": report_words,
    }


# Words and link targets are passes of regular expressions over the whole report (40 of the 104 ms a finished
# (5,5)'s snapshot took), and every snapshot and delta asks about the same texts again: a text's figures are kept,
# by the text, for the texts asked about last (a few reports; a few researches' sections).
@lru_cache(maxsize=8)
def _report_figures(markdown: str) -> tuple[int, frozenset[str]]:
    """(words, link targets) of an assembled report: its words before its sources list, the links of all of it
    (the sources list's links cite too)."""
    text = _SOURCES.split(markdown, maxsplit=1)[0]
    return count_words(text), frozenset(target for _, target in _LINK.findall(markdown))


@lru_cache(maxsize=2048)
def _section_figures(markdown: str) -> tuple[int, frozenset[str]]:
    """(words, link targets) of one written section."""
    return count_words(markdown), frozenset(target for _, target in _LINK.findall(markdown))


def count_words(markdown: str) -> int:
    """The words of a markdown text as a reader sees them: link texts count, their targets and titles do not."""
    prose = _MARK.sub(" ", _LINK.sub(lambda match: f" {match.group(1)} ", markdown))
    return sum(1 for _ in _WORD.finditer(prose))
