"""Grade a research report against the quality bench's checkpoints, without a language model.

A report's markdown writes each sentence it cites as its text followed by its citations,
`text [[1]](url "quote")[[2]](url "quote")` (workers/pipeline/citations.py), sentences of a paragraph joined by
spaces, and ends with a `## Sources` list. The grader reads the body before that list: every run of text that ends
in citations is one cited sentence, carrying those citations' URLs; text after a paragraph's last citation is not
cited. Only cited sentences count as the report's claims, since a report's every claim must cite its source.

Each checkpoint (checkpoints.json) names the figures and names that state a fact (`required`) and the figures of
archived or superseded documents that would make it wrong (`stale`). Per checkpoint:
  wrong    a stale figure appears in a cited sentence (whatever else the report says: a reader cannot tell which
           figure is current);
  correct  every required item appears in one cited sentence, or in two adjacent cited sentences of a paragraph,
           and no stale figure appears anywhere in the report;
  partial  some required items appear in cited sentences, but never all together (or all together, with a stale
           figure elsewhere in the report's uncited text);
  missing  none appears in a cited sentence.

A sentence that names itself superseded ("... (from an archived document of 31 Dec 2024; superseded)", or a
writer's "the 2024 report's 52 % is superseded") is not a claim of the report: it tells the reader which figure is
not current, as a careful report does beside the current one. It neither makes a checkpoint wrong nor states it.

Items match as written, with case, spacing and the forms of "%" aside ("44%" is "44 %"), and never inside a longer
number or word ("18 %" is not in "118 %", "212" not in "2,212" or "212.5", "Oulu" not in "Ouluntie").
"""

from __future__ import annotations

import html
import json
import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

CHECKPOINTS = Path(__file__).resolve().parent / "checkpoints.json"
VERDICTS = ("correct", "partial", "missing", "wrong")

# `[[n]](url "title")`: a citation as the report renders it (the title is the quote, its `"` written as a
# reference, so it holds none).
_CITATION = re.compile(r'\[\[\d+\]\]\(\s*<?([^\s<>()]+(?:\([^\s<>()]*\)[^\s<>()]*)*)>?(?:\s+"[^"]*")?\s*\)')
_CITATION_RUN = re.compile(rf"(?:\s*{_CITATION.pattern})+")
_SOURCES_HEADING = re.compile(r"^## Sources\s*$", re.MULTILINE)
_SPACES = re.compile(r"\s+")
_ESCAPED = re.compile(r"\\([\\\[\]()*_`#&<>!~|.-])")


@dataclass(frozen=True)
class Checkpoint:
    id: str
    description: str
    required: tuple[str, ...]
    stale: tuple[str, ...]
    source: str  # the share's file that holds the current truth, relative to the share's root


@dataclass(frozen=True)
class Benchmark:
    prompt: str
    answers: tuple[tuple[str, str], ...]  # the follow-up questions the research asks, and what the user answers
    outdated: frozenset[str]  # the share's archived and superseded files
    checkpoints: tuple[Checkpoint, ...]


def load(path: Path = CHECKPOINTS) -> Benchmark:
    data = json.loads(path.read_text(encoding="utf-8"))
    checkpoints = tuple(
        Checkpoint(
            id=item["id"],
            description=item["description"],
            required=tuple(item["required"]),
            stale=tuple(item["stale"]),
            source=item["source"],
        )
        for item in data["checkpoints"]
    )
    return Benchmark(
        prompt=data["prompt"],
        answers=tuple((question, answer) for question, answer in data["answers"]),
        outdated=frozenset(data["outdated"]),
        checkpoints=checkpoints,
    )


# --- Matching ---------------------------------------------------------------------------------------------


def normalise(text: str) -> str:
    """Text as items are matched in it: markdown escapes and entities undone, compatibility forms folded (a
    no-break space is a space), whitespace collapsed, no space before "%", lower case."""
    text = html.unescape(_ESCAPED.sub(r"\1", text))
    text = unicodedata.normalize("NFKC", text).replace("\u2212", "-")
    text = _SPACES.sub(" ", text)
    return re.sub(r"(\d) ?%", r"\1%", text).strip().lower()


@cache
def _item(item: str) -> re.Pattern[str]:
    # Not inside a longer word or number: no letter or digit either side, and no "1," or "2." before it (2,212 and
    # 8.25 hold 212 and 25) or ",5" / ".5" after it (212.5, 212,000).
    return re.compile(rf"(?<![\w])(?<!\d[.,]){re.escape(normalise(item))}(?![\w])(?![.,]\d)")


def contains(text: str, item: str) -> bool:
    """Whether `item` occurs in `text` as a whole figure or name (both as written, normalised here)."""
    return _item(item).search(normalise(text)) is not None


# --- The report's cited sentences -------------------------------------------------------------------------


@dataclass(frozen=True)
class Sentence:
    text: str  # as the report writes it, its citations taken out
    urls: tuple[str, ...]  # the URLs it cites, in order; empty for text that cites nothing
    block: int  # the paragraph or list item it is in, counted from the top


def body(markdown: str) -> str:
    """The report without its closing sources list (its quotes are the sources' words, not the report's)."""
    match = _SOURCES_HEADING.search(markdown)
    return markdown[: match.start()] if match else markdown


def sentences(markdown: str) -> list[Sentence]:
    """Every sentence of the report's body, cited or not, in order. Headings are not sentences."""
    found: list[Sentence] = []
    for block, text in enumerate(_blocks(body(markdown))):
        at = 0
        for run in _CITATION_RUN.finditer(text):
            cited = text[at : run.start()].strip()
            if cited:
                found.append(Sentence(cited, tuple(_CITATION.findall(run.group(0))), block))
            at = run.end()
        rest = text[at:].strip()
        if rest:
            found.append(Sentence(rest, (), block))
    return found


def cited_sentences(markdown: str) -> list[Sentence]:
    return [sentence for sentence in sentences(markdown) if sentence.urls]


_SUPERSEDED = re.compile(r"\bsuperseded\b", re.IGNORECASE)


def named_superseded(sentence: Sentence) -> bool:
    """Whether the sentence says that what it states is superseded: not the report's claim."""
    return bool(_SUPERSEDED.search(sentence.text))


def _blocks(text: str) -> Iterable[str]:
    """Paragraphs and list items, each on one line; headings left out."""
    lines: list[str] = []
    for line in [*text.splitlines(), ""]:
        stripped = line.strip()
        starts_item = re.match(r"^(?:[-*+]|\d+\.)\s+", stripped)
        if not stripped or stripped.startswith("#") or starts_item:
            if lines:
                yield " ".join(lines)
                lines = []
            if stripped.startswith("#"):
                continue
            stripped = stripped[starts_item.end() :] if starts_item else stripped
        stripped = stripped.lstrip("> ").strip() if stripped.startswith(">") else stripped
        if stripped:
            lines.append(stripped)


# --- Verdicts ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Verdict:
    checkpoint: str
    verdict: str  # one of VERDICTS
    found: tuple[str, ...]  # the required items found in cited sentences
    stale: tuple[str, ...]  # the stale items found in cited sentences
    evidence: str  # the cited sentence(s) the verdict rests on ("" when missing)
    urls: tuple[str, ...]  # what the evidence cites


def windows(cited: Sequence[Sentence]) -> Iterable[tuple[Sentence, ...]]:
    """Each cited sentence, then each two adjacent cited sentences of one paragraph."""
    for sentence in cited:
        yield (sentence,)
    for first, second in zip(cited, cited[1:], strict=False):
        if first.block == second.block:
            yield (first, second)


def grade_checkpoint(checkpoint: Checkpoint, markdown: str) -> Verdict:
    every = [sentence for sentence in sentences(markdown) if not named_superseded(sentence)]
    cited = [sentence for sentence in every if sentence.urls]

    def urls_of(found: Iterable[Sentence]) -> tuple[str, ...]:
        return tuple(dict.fromkeys(url for sentence in found for url in sentence.urls))

    stale_cited = [s for s in cited if any(contains(s.text, item) for item in checkpoint.stale)]
    if stale_cited:
        stale = tuple(item for item in checkpoint.stale if any(contains(s.text, item) for s in stale_cited))
        found = tuple(item for item in checkpoint.required if any(contains(s.text, item) for s in cited))
        return Verdict(checkpoint.id, "wrong", found, stale, stale_cited[0].text, urls_of(stale_cited))
    for window in windows(cited):
        joined = " ".join(sentence.text for sentence in window)
        if all(contains(joined, item) for item in checkpoint.required):
            # The title, headings and uncited text are the report's too: a stale figure there leaves a reader
            # with two figures.
            headings = [line for line in body(markdown).splitlines() if line.lstrip().startswith("#")]
            whole = normalise(" ".join([*headings, *(sentence.text for sentence in every)]))
            stale_anywhere = tuple(item for item in checkpoint.stale if _item(item).search(whole))
            verdict = "partial" if stale_anywhere else "correct"
            return Verdict(checkpoint.id, verdict, checkpoint.required, stale_anywhere, joined, urls_of(window))
    holding = [s for s in cited if any(contains(s.text, item) for item in checkpoint.required)]
    if holding:
        found = tuple(item for item in checkpoint.required if any(contains(s.text, item) for s in holding))
        return Verdict(checkpoint.id, "partial", found, (), holding[0].text, urls_of(holding))
    return Verdict(checkpoint.id, "missing", (), (), "", ())


def grade(checkpoints: Iterable[Checkpoint], markdown: str) -> list[Verdict]:
    return [grade_checkpoint(checkpoint, markdown) for checkpoint in checkpoints]


def totals(verdicts: Iterable[Verdict]) -> dict[str, int]:
    counts = dict.fromkeys(VERDICTS, 0)
    for verdict in verdicts:
        counts[verdict.verdict] += 1
    return counts


def current_figure_urls(checkpoint: Checkpoint, markdown: str) -> tuple[str, ...]:
    """The URLs cited by the sentences that state one of the checkpoint's current figures (a required item
    holding a digit; names alone are no figure): where the report says its current figures come from."""
    figures = [item for item in checkpoint.required if any(ch.isdigit() for ch in item)] or list(checkpoint.required)
    return tuple(
        dict.fromkeys(
            url
            for sentence in cited_sentences(markdown)
            if any(contains(sentence.text, item) for item in figures)
            for url in sentence.urls
        )
    )
