"""Render the report writer's structured output as markdown, keeping only citations and quotes that hold.

A citation holds when its number is one of the research's analysed pages; a quote holds when it occurs in the
cited page's stored text. A sentence left with no valid citation is dropped: every sentence must cite. URLs the
model wrote into the text itself are removed, and a last pass over the markdown removes any link that is not an
analysed page. Everything dropped is counted in the stats. The research memory's contradictions and open gaps
follow the model's sections in a section of their own, rendered here rather than by the model, each contradiction
citing every page it names in the report's own citation format. Links are written with `research/text/links.py`, so a
URL holding `)`, spaces or `<` stays one link. Every citation carries the quote it rests on as its link title,
`[[n]](url "quote")`, which the report page shows as the link's tooltip; every quote so used is listed with its
source at the end, where exports that have no tooltips show it.
"""

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from research.collection.standing import label
from research.text.links import inert_text, link_target, link_title, pages_by_link
from research.text.quotes import PageText
from workers.agents.report_writer import SourceNote

# URLs may hold one level of balanced parentheses, as Wikipedia's do: /wiki/Heat_pump_(disambiguation); link
# texts one level of brackets, as the report's own citations do: [[1]](url).
_LINK_TEXT = r"(?:[^\[\]]|\[[^\[\]]*\])*"
_LINK_TARGET = r"(?:[^\s()<>]|\([^\s()<>]*\))+"
_BARE_URL_TAIL = r"(?:[^\s()<>\[\]]|\([^\s()<>\[\]]*\))+"
_MD_LINK = re.compile(rf"(?<!\\)!?\[({_LINK_TEXT})\]\(\s*<?({_LINK_TARGET})>?(?:\s+\"[^\"]*\")?\s*\)")
# Not before a backtick: Sphinx roles (":py:data:`~socket.SO_REUSEPORT`") are text quoted from documentation.
_BARE_URL = re.compile(rf"(?:https?|ftp|javascript|data|file):(?!`){_BARE_URL_TAIL}", re.IGNORECASE)
_INLINE_MARK = re.compile(r"\s*\[\d+(?:\s*,\s*\d+)*\]")
_WORD = re.compile(r"\w+")
# A tooltip, not a page: a longer quote is cut there (the sources list keeps it whole).
TITLE_MAX_CHARS = 600


@dataclass
class Stats:
    sentences: int = 0
    sentences_dropped: int = 0
    citations: int = 0
    citations_dropped: int = 0
    quotes: int = 0
    quotes_dropped: int = 0
    sources_cited: int = 0

    def as_dict(self) -> dict[str, int]:
        return dict(self.__dict__)


@dataclass
class _Renderer:
    sources: dict[int, SourceNote]
    page_texts: Mapping[str, PageText]
    stats: Stats = field(default_factory=Stats)
    numbers: dict[int, int] = field(default_factory=dict)  # writer's number → number in the report
    quotes_used: dict[int, list[str]] = field(default_factory=dict)
    # The analysed URLs and their link targets, by the number of sources they were computed for: sources only grow
    # (the memory section adds some), and computing them for every sentence was a large part of rendering.
    _analysed: tuple[int, set[str]] = (-1, set())

    def analysed(self) -> set[str]:
        if self._analysed[0] != len(self.sources):
            urls = [source.url for source in self.sources.values()]
            self._analysed = (len(self.sources), {*urls, *pages_by_link(urls)})
        return self._analysed[1]

    def clean_text(self, text: str) -> str:
        analysed = self.analysed()

        def unlink(match: re.Match[str]) -> str:
            if match.group(2) not in analysed:
                self.stats.citations_dropped += 1
            return match.group(1)

        def drop_url(match: re.Match[str]) -> str:
            if match.group(0).rstrip(".,;:") not in analysed:
                self.stats.citations_dropped += 1
            return ""

        text = _MD_LINK.sub(unlink, str(text))
        text = _BARE_URL.sub(drop_url, text)
        text = _INLINE_MARK.sub("", text)
        # The renderer adds the only links; brackets left in the text could form new ones, and a backslash could
        # escape the bracket that closes a link's text. Angle brackets become entities: the reader sees "< 5 ms"
        # as written, and no markdown renderer takes them for HTML.
        text = text.replace("\\", "\\\\").replace("[", "(").replace("]", ")")
        text = text.replace("<", "&lt;").replace(">", "&gt;")
        return " ".join(text.split())

    def sentence(self, item: dict[str, Any]) -> str | None:
        self.stats.sentences += 1
        text = self.clean_text(item.get("text", ""))
        cited: list[int] = []
        quoted_here: dict[int, list[str]] = {}
        for number in item.get("sources", []):
            if isinstance(number, int) and number in self.sources:
                if number not in cited:
                    cited.append(number)
            else:
                self.stats.citations_dropped += 1
        for quote in item.get("quotes", []):
            self.stats.quotes += 1
            number, text_of_quote = quote.get("source"), str(quote.get("quote", ""))
            source = self.sources.get(number) if isinstance(number, int) else None
            if source is None or not self.page_texts[source.url].contains(text_of_quote):
                self.stats.quotes_dropped += 1
                continue
            self.quotes_used.setdefault(number, [])
            normalised = " ".join(text_of_quote.split())
            if normalised not in self.quotes_used[number]:
                self.quotes_used[number].append(normalised)
            quoted_here.setdefault(number, []).append(normalised)
            if number not in cited:
                cited.append(number)
        if not text or not cited:
            self.stats.sentences_dropped += 1
            return None
        marks = []
        for number in cited:
            quote = " … ".join(dict.fromkeys(quoted_here.get(number, []))) or self.finding_quote(number, text)
            marks.append(self.mark(number, quote))
        return f"{text} {''.join(marks)}"

    # --- Citation titles: the quote each citation rests on ---

    def finding_quote(self, number: int, text: str, candidates: Iterable[str] = ()) -> str:
        """For a citation the sentence gave no quote for: the quote of the source's finding (or of `candidates`)
        closest in words to the sentence, if it is on the page; it joins the quotes the sources list shows."""
        source = self.sources[number]
        page = self.page_texts.get(source.url)
        quotes = [q for q in (*candidates, *(quote for _, quote in source.findings)) if q and q.strip()]
        quotes = [q for q in quotes if page is None or page.contains(q)]
        if not quotes:
            return ""
        words = set(_WORD.findall(text.lower()))
        best = " ".join(max(quotes, key=lambda q: len(words & set(_WORD.findall(q.lower())))).split())
        used = self.quotes_used.setdefault(number, [])
        if best not in used:
            used.append(best)
        return best

    def mark(self, number: int, quote: str) -> str:
        """`[[n]](url "quote")`, numbered in order of first citation; no title when there is no quote."""
        report_number = self.numbers.setdefault(number, len(self.numbers) + 1)
        self.stats.citations += 1
        target = link_target(self.sources[number].url)
        if len(quote) > TITLE_MAX_CHARS:
            quote = quote[: TITLE_MAX_CHARS - 1].rstrip() + "…"
        return f'[[{report_number}]]({target} "{link_title(quote)}")' if quote else f"[[{report_number}]]({target})"

    def paragraphs(self, paragraphs: list[Any]) -> list[str]:
        rendered = []
        for paragraph in paragraphs:
            sentences = [s for s in (self.sentence(item) for item in paragraph if isinstance(item, dict)) if s]
            if sentences:
                rendered.append(" ".join(sentences))
        return rendered


MEMORY_HEADING = "Contradictions and open questions"
# Under the heading of a section the model could not write within its window or answer limit (all of it, or some
# of its findings), which the extractive writer wrote from the findings themselves.
OFFLINE_SECTION_NOTES = {
    "all": "> Written without the model: it could not write this section within its limits, so each sentence below "
    "is a finding as it was extracted, with its quote.",
    "part": "> Partly written without the model: some of this section's findings it could not write within its "
    "limits are given as they were extracted, with their quotes.",
}


@dataclass(frozen=True)
class MemoryNote:
    """A contradiction or an open gap of the research memory, with the analysed pages it rests on."""

    kind: str  # "contradiction" or "gap"
    text: str
    pages: list[tuple[str, str]] = field(default_factory=list)  # (url, title) of each analysed page it names
    quotes: dict[str, list[str]] = field(default_factory=dict)  # url → the verified quotes extracted from that page


def render_report(
    report: dict[str, Any],
    sources: list[SourceNote],
    page_texts: Mapping[str, PageText],
    memory: list[MemoryNote] | None = None,
) -> tuple[str, dict[str, int]]:
    renderer = _Renderer({source.number: source for source in sources}, page_texts)
    title = renderer.clean_text(report.get("title", "")) or "Research report"
    lines = [f"# {title}", ""]
    summary = renderer.paragraphs([report.get("summary", [])])
    if summary:
        lines += ["## Summary", "", *summary, ""]
    for section in report.get("sections", []):
        lines += _section_lines(renderer, section)
    lines += _memory_section(renderer, memory or [])
    lines += ["## Sources", "", *_sources_list(renderer)]
    markdown = "\n".join(lines).rstrip() + "\n"
    return markdown, renderer.stats.as_dict()


def render_answer(
    paragraphs: list[Any], sources: list[SourceNote], page_texts: Mapping[str, PageText]
) -> tuple[str, dict[str, int]]:
    """An answer to a question about the research: its paragraphs with the report's checks, each citation numbered
    in order of first citation, then the sources it cites; empty when no sentence held."""
    renderer = _Renderer({source.number: source for source in sources}, page_texts)
    body = renderer.paragraphs(paragraphs)
    if not body:
        return "", renderer.stats.as_dict()
    lines = [*_spaced(body), "Sources:", "", *_sources_list(renderer)]
    return "\n".join(lines).rstrip() + "\n", renderer.stats.as_dict()


def _sources_list(renderer: _Renderer) -> list[str]:
    """The cited sources in order of their numbers, each with the quotes its citations rest on."""
    lines = []
    by_report_number = sorted(renderer.numbers.items(), key=lambda item: item[1])
    for number, report_number in by_report_number:
        source = renderer.sources[number]
        title_text = renderer.clean_text(source.title) or inert_text(source.url)
        # Its date and standing, so a reader sees at once which sources are old: "(archived, 31 Dec 2024)".
        entry = f"{report_number}. [{title_text}]({link_target(source.url)}){label(source.standing, source.dated)}"
        quoted = renderer.quotes_used.get(number)
        if quoted:
            # A page's words as written: they form no link and no tag.
            # Every quote a citation rests on: the tooltips' text, for readers (and exports) without them.
            entry += " — quoted: " + "; ".join(f"“{inert_text(q)}”" for q in quoted)
        lines.append(entry)
    renderer.stats.sources_cited = len(by_report_number)
    return lines


def render_section(
    heading: str, section: dict[str, Any], sources: list[SourceNote], page_texts: Mapping[str, PageText]
) -> tuple[str, dict[str, int]]:
    """One section on its own, as the reader sees it while the rest of the report is written: the same checks as
    render_report, but each citation keeps its source's number, so sections rendered apart cite alike."""
    renderer = _Renderer({source.number: source for source in sources}, page_texts)
    renderer.numbers = {source.number: source.number for source in sources}
    lines = _section_lines(renderer, {**section, "heading": heading})
    renderer.stats.sources_cited = len(renderer.quotes_used)
    return "\n".join(lines).rstrip() + "\n" if lines else "", renderer.stats.as_dict()


def _section_lines(renderer: _Renderer, section: dict[str, Any]) -> list[str]:
    body = renderer.paragraphs(section.get("paragraphs", []))
    subsections = []
    for sub in section.get("subsections", []):
        sub_body = renderer.paragraphs(sub.get("paragraphs", []))
        if sub_body:
            subsections += [
                f"### {renderer.clean_text(sub.get('heading', '')) or 'Details'}",
                "",
                *_spaced(sub_body),
            ]
    if not body and not subsections:
        return []
    heading = [f"## {renderer.clean_text(section.get('heading', '')) or 'Findings'}", ""]
    offline = OFFLINE_SECTION_NOTES.get(str(section.get("extractive")))
    if offline:
        heading += [offline, ""]
    return [*heading, *_spaced(body), *subsections]


def _memory_section(renderer: _Renderer, memory: list[MemoryNote]) -> list[str]:
    """Contradictions, each citing every side (at least two pages), then the open gaps as open questions."""
    by_url = {source.url: number for number, source in renderer.sources.items()}
    contradictions, questions = [], []
    for note in memory:
        text = renderer.clean_text(note.text)
        for url, title in note.pages:
            if url not in by_url:
                # An analysed page the writer's sources left out (trimmed to its budget): a source from here on,
                # numbered after the writer's, so no number the model wrote could have pointed at it.
                number = max(renderer.sources, default=0) + 1
                renderer.sources[number] = SourceNote(number=number, url=url, title=title)
                by_url[url] = number
        numbers = list(dict.fromkeys(by_url[url] for url, _ in note.pages))
        if not text:
            continue
        if note.kind == "gap":
            questions.append(f"- {text}")
        elif len(numbers) >= 2:
            marks = []
            for number in numbers:
                url = renderer.sources[number].url
                marks.append(renderer.mark(number, renderer.finding_quote(number, text, note.quotes.get(url, []))))
            contradictions.append(f"- {text} {''.join(marks)}")
    if not contradictions and not questions:
        return []
    lines = [f"## {MEMORY_HEADING}", ""]
    if contradictions:
        lines += ["### Where the sources disagree", "", *contradictions, ""]
    if questions:
        lines += ["### Open questions", "", *questions, ""]
    return lines


def _spaced(paragraphs: list[str]) -> list[str]:
    result = []
    for paragraph in paragraphs:
        result += [paragraph, ""]
    return result


def report_title(markdown: str) -> str:
    """The report's title as plain text: its first line, with what clean_text escaped put back."""
    title = markdown.splitlines()[0].removeprefix("# ").strip() if markdown else ""
    return title.replace("&lt;", "<").replace("&gt;", ">").replace("\\\\", "\\")


def cited_urls(markdown: str, analysed: Iterable[str] = ()) -> list[str]:
    """Every link target in a markdown document, in order; a link written for one of the `analysed` URLs as that
    URL (links are percent-encoded, research/text/links.py), any other as it is written."""
    pages = pages_by_link(analysed)
    return [pages.get(match.group(2), match.group(2)) for match in _MD_LINK.finditer(markdown)]


def drop_stray_links(markdown: str, analysed: Iterable[str]) -> tuple[str, int]:
    """The markdown without links to pages that were not analysed (their text stays, as plain text), and how many
    were dropped. The renderer writes no such link; this keeps the guarantee should one slip through."""
    pages = set(analysed)
    links = pages_by_link(pages)
    dropped = 0

    def unlink(match: re.Match[str]) -> str:
        nonlocal dropped
        if links.get(match.group(2), match.group(2)) in pages:
            return match.group(0)
        dropped += 1
        return match.group(1).replace("[", "(").replace("]", ")")

    return _MD_LINK.sub(unlink, markdown), dropped
