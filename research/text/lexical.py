"""Lexical analysis for the extractive engine and the local document collection: no model, only word statistics.

Terms are lower-cased words with stop words removed and a light suffix stripping (plurals, -ly), so "threads" and
"thread" match. Key phrases are RAKE-style runs of content words. Sentences are spans of the text itself, so a
sentence found here is a verbatim quote (whitespace aside, as workers/pipeline/quotes.py compares them). BM25
ranks sentences within a page and documents within the collection.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

# English function words, plus the words a research request is phrased with ("how should I ...", "what do the
# docs say about ...") that never name its subject.
STOPWORDS = frozenset(
    """
    a about above after again against all almost also although always am among an and another any anyone anything
    are around as at be became because become been before being below between both but by can cannot could did do
    does doing done down during each either else enough especially etc even ever every few for from further get
    gets getting give given gives go goes going got had has have having he her here hers herself him himself his
    how however i if in into is it its itself just least less like likely lot lots made many may maybe me might
    mine more most much must my myself near need needs neither no nor not now of off often on once one only onto or
    other others otherwise our ours ourselves out over own per perhaps please quite rather really same several shall
    she should since so some something sometimes still such than that the their theirs them themselves then there
    therefore these they thing things this those though through thus to too toward towards under until up upon us
    use used uses using very via was way ways we well were what whatever when where whether which while who whom
    whose why will with within without would yes yet you your yours yourself yourselves
    able according actually answer answers ask asked best better compare compared describe described detail details
    explain explained find found good help i'd i'm know learn let look make makes mean means new overview please say
    says said see show shows tell try want wants work works run runs
    aren't can't couldn't didn't doesn't don't hasn't haven't isn't it's let's that's there's wasn't won't
    wouldn't you're
    """.split()
)

_WORD = re.compile(r"[A-Za-z0-9]+(?:['’_-][A-Za-z0-9]+)*")
_CAMEL = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|[0-9]+")
# Splits candidate phrases: punctuation that ends a thought, and the line structure of the text.
_PHRASE_BREAK = re.compile(r"[.,;:!?()\[\]{}\"“”‘’/|<>=*#•\n\t]+|\s[-–—]\s|'\s|\s'")
# A sentence ends at . ! or ? (perhaps closed by a quote or bracket) before a capital, digit, quote or bracket.
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"'”’)\]]*\s+(?=[\"'“‘(\[]?[A-Z0-9])")
_LIST_MARK = re.compile(r"^(?:[-*•+]\s+|\d{1,3}[.)]\s+|#{1,6}\s+|>\s*)+")
# "bufsize: supplied as ..." starts a new item of a parameter list, even in lower case.
_TERM_LINE = re.compile(r"^[\w.*]+:\s")
_ABBREVIATIONS = frozenset("e.g i.e etc vs cf al approx fig no mr mrs ms dr st jr sr inc ltd co resp".split())


def stem(word: str) -> str:
    """A light, conservative stemmer: plural endings and -ly; enough to match a term to its variants."""
    if len(word) <= 3 or not word.isalpha():
        return word
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith(("sses", "shes", "ches", "xes", "zes")):
        return word[:-2]
    if word.endswith(("ss", "us", "is", "ous")):
        return word
    if word.endswith("s"):
        return word[:-1]
    if word.endswith("ly") and len(word) > 6 and not word.endswith(("bly", "ply")):
        return word[:-2]
    return word


def words(text: str) -> list[str]:
    """The words of a text as written."""
    return _WORD.findall(text)


def is_content_word(word: str) -> bool:
    lower = word.lower().replace("’", "'")
    return len(lower) > 1 and lower not in STOPWORDS and not lower.isdigit()


def terms(text: str) -> list[str]:
    """Content terms, stemmed; a CamelCase or snake_case word also gives its parts (ThreadPoolExecutor: thread,
    pool, executor), so a query in plain words finds identifiers."""
    result = []
    for word in words(text):
        if not is_content_word(word):
            continue
        lower = word.lower().replace("’", "'")
        result.append(stem(lower))
        parts = [p.lower() for chunk in re.split(r"[_'-]", word) for p in _CAMEL.findall(chunk)]
        if len(parts) > 1:
            result.extend(stem(p) for p in parts if is_content_word(p))
    return result


def key_phrases(text: str, limit: int = 20, max_words: int = 3) -> list[str]:
    """The text's key phrases, best first (RAKE: runs of content words between stop words and punctuation,
    scored by the degree and frequency of their words); each at most `max_words` words, as written."""
    candidates: list[list[str]] = []
    for chunk in _PHRASE_BREAK.split(text):
        run: list[str] = []
        for word in words(chunk):
            if is_content_word(word):
                run.append(word)
                continue
            candidates.extend(_chunks(run, max_words))
            run = []
        candidates.extend(_chunks(run, max_words))
    frequency: Counter[str] = Counter()
    degree: Counter[str] = Counter()
    for phrase in candidates:
        for word in phrase:
            frequency[word.lower()] += 1
            degree[word.lower()] += len(phrase)
    scored: dict[str, tuple[float, int, str]] = {}
    for order, phrase in enumerate(candidates):
        key = " ".join(w.lower() for w in phrase)
        score = sum(degree[w.lower()] / frequency[w.lower()] for w in phrase)
        if key in scored:
            # A phrase said again is more central: add a share of its score for every repetition.
            best, first, surface = scored[key]
            scored[key] = (best + score / 2, first, surface)
        else:
            scored[key] = (score, order, " ".join(phrase))
    ranked = sorted(scored.values(), key=lambda item: (-item[0], item[1]))
    return [surface for _, _, surface in ranked[:limit]]


def _chunks(run: list[str], size: int) -> list[list[str]]:
    return [run[i : i + size] for i in range(0, len(run), size)] if run else []


def sentences(text: str) -> list[str]:
    """The text's sentences, each a span of the text with its whitespace collapsed (so a verbatim quote).

    Blocks (blank-line separated) never share a sentence. Inside a block a line break continues the sentence
    when the line before does not end a sentence and either ends in a function word or comma or the next line
    starts in lower case: wrapped prose joins, while headings, list items, signatures and table rows stay apart.
    """
    return [sentence for sentence, _ in headed_sentences(text)]


def headed_sentences(text: str) -> list[tuple[str, str]]:
    """The text's sentences (as `sentences` gives them), each with the heading it stands under: the last line
    before it that reads as a heading (a short line of its own, with no end mark), or "". What a sentence is
    about is often said only by its heading ("Open disputes" above a claim that never says "dispute")."""
    result = []
    heading = ""
    for block in re.split(r"\n\s*\n", text):
        runs: list[list[str]] = []
        for line in block.split("\n"):
            line = " ".join(line.split())
            if not line:
                continue
            if runs and _continues(runs[-1][-1], line):
                runs[-1].append(line)
            else:
                runs.append([line])
        for run in runs:
            pieces = [_LIST_MARK.sub("", piece).strip() for piece in _split_sentences(" ".join(run))]
            pieces = [piece for piece in pieces if piece]
            if len(pieces) == 1 and _is_heading(run[0], pieces[0]):
                result.append((pieces[0], heading))
                heading = pieces[0]
                continue
            result.extend((piece, heading) for piece in pieces)
    return result


def _is_heading(line: str, text: str) -> bool:
    """A line that titles what follows: a Markdown heading, or a short line with no end mark and no cells."""
    if line.startswith("#"):
        return True
    tokens = text.split()
    return (
        0 < len(tokens) <= 10
        and text[-1] not in ".!?:;,"
        and "; " not in text
        and (text[0].isupper() or text[0].isdigit())
    )


def _continues(previous: str, line: str) -> bool:
    if _LIST_MARK.match(line) or line.startswith("|") or _TERM_LINE.match(line):
        return False
    last = previous.rsplit(None, 1)[-1].lower()
    if _is_abbreviation(last):
        return True  # "(e.g." + "IPython), unittest runners ...": not a sentence end
    if previous.endswith((".", "!", "?", ":", ";")):
        return False
    if last in STOPWORDS or previous.endswith(","):
        return True  # "the thread from which the" + "Python interpreter was started.": a wrapped line
    return line[0].islower() or (line[0] in "([\"'“‘" and len(line) > 1 and line[1].islower())


def _split_sentences(run: str) -> list[str]:
    pieces, start = [], 0
    for match in _SENTENCE_END.finditer(run):
        before = run[start : match.start()].rstrip("\"'”’)]")
        if _is_abbreviation(before.rsplit(None, 1)[-1] if before.split() else ""):
            continue  # "e.g. Foo", "J. Smith": not a sentence end
        pieces.append(run[start : match.start()].strip())
        start = match.end()
    pieces.append(run[start:].strip())
    return [piece for piece in pieces if piece]


def _is_abbreviation(word: str) -> bool:
    if not word.endswith("."):
        return False
    token = word.strip("([\"'“‘").rstrip(".").lower()
    return token in _ABBREVIATIONS or (len(token) == 1 and token.isalpha())


def is_prose(sentence: str) -> bool:
    """Whether a sentence reads as a statement worth quoting (not a heading, signature, code or table row)."""
    tokens = sentence.split()
    if not 5 <= len(tokens) <= 120 or len(sentence) > 700:
        return False
    if sentence.count(" | ") >= 2 or sentence.endswith(":"):
        return False
    visible = [c for c in sentence if not c.isspace()]
    letters = sum(c.isalpha() for c in visible)
    if letters < 0.65 * len(visible):
        return False
    if tokens[0].lower() in STOPWORDS and tokens[0][0].islower():
        return False  # "during shutdown when the pool is destroyed.": the tail of a sentence cut in two
    if sum(1 for t in tokens if t.isalpha() and t.lower() in STOPWORDS) == 0:
        return False  # no function word at all: an identifier list or a title, not a statement
    return sentence[-1] in ".!?\"')”’" or len(tokens) >= 8


def weighted_terms(*parts: tuple[str, float]) -> dict[str, float]:
    """Query terms with weights: each text's terms get its weight (the highest, where texts share a term)."""
    weights: dict[str, float] = {}
    for text, weight in parts:
        for term in terms(text):
            weights[term] = max(weights.get(term, 0.0), weight)
    return weights


class BM25:
    """Okapi BM25 over a fixed set of documents, each given as a term-count mapping."""

    def __init__(self, documents: Sequence[Mapping[str, int]], k1: float = 1.2, b: float = 0.75) -> None:
        self.documents = documents
        self.k1, self.b = k1, b
        self.lengths = [sum(doc.values()) for doc in documents]
        self.average = (sum(self.lengths) / len(documents)) if documents else 0.0
        frequency: Counter[str] = Counter()
        for doc in documents:
            frequency.update(doc.keys())
        n = len(documents)
        self.idf = {term: math.log(1 + (n - df + 0.5) / (df + 0.5)) for term, df in frequency.items()}

    def score(self, index: int, query: Mapping[str, float]) -> float:
        doc, length = self.documents[index], self.lengths[index]
        norm = self.k1 * (1 - self.b + self.b * length / self.average) if self.average else self.k1
        total = 0.0
        for term, weight in query.items():
            tf = doc.get(term, 0)
            if tf:
                total += weight * self.idf.get(term, 0.0) * tf * (self.k1 + 1) / (tf + norm)
        return total

    def scores(self, query: Mapping[str, float]) -> list[float]:
        return [self.score(i, query) for i in range(len(self.documents))]


def counts(items: Iterable[str]) -> dict[str, int]:
    return dict(Counter(items))
