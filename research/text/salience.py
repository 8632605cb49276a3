"""What makes a sentence worth quoting, beyond matching the question: the extractive engine's reader's eye.

A reader of a research report wants the sentences that state things: figures with their units, names, dates,
table rows with their headers. They skip what only sounds related: policy and rules ("employees must ...",
"do not ..."), contact and legal footers, headings and navigation, fragments. These are word-level signals, no
model: `weight` multiplies a sentence's relevance (BM25, research/text/lexical.py), so it reorders the sentences
that answer the question and never lets one that does not answer it win on figures alone.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass

from research.text.lexical import STOPWORDS, is_prose, terms

# Currency before or after an amount ("EUR 48.6 million", "€12", "86,000 EUR"); units after a number.
_CURRENCY = r"(?:EUR|USD|GBP|SEK|NOK|DKK|CHF|JPY|CNY|CAD|AUD|€|\$|£|¥)"
_SCALE = r"(?:million|billion|thousand|trillion|bn|mn|m|k|M|B|K)"
_UNIT = (
    r"(?:%|‰|percent|per\s?cent|percentage points?|pp|°\s?[CF]|degrees?|"
    r"[kMGT]?W(?:h|p)?|[kMG]?Wh|kg|tonnes?|tons?|[km]?m|cm|mm|km/h|m2|m²|m3|m³|l|litres?|liters?|"
    r"units?|pieces?|pcs|people|persons?|employees|staff|FTEs?|customers?|users?|sites?|sales|orders?|"
    r"seconds?|s|ms|minutes?|min|hours?|h|days?|weeks?|months?|years?|shifts?|times|x|" + _SCALE + r")"
)
_FIGURE = re.compile(
    rf"(?:{_CURRENCY}\s?\d[\d,.\s]*\d|{_CURRENCY}\s?\d)(?:\s?{_SCALE}(?![A-Za-z]))?"
    rf"|(?<![\w.])\d+(?:[.,]\d+)*\s?{_UNIT}(?![A-Za-z])"
    rf"|(?<![\w.])\d+(?:[.,]\d+)*\s?{_CURRENCY}(?![A-Za-z])"
)
_NUMBER = re.compile(r"(?<![\w.])\d+(?:[.,]\d+)*(?![\w])")
_YEAR = re.compile(r"^(?:1[89]|20|21)\d\d$")
_MONTHS = (
    "january february march april may june july august september october november december "
    "jan feb mar apr jun jul aug sep sept oct nov dec"
)
_DATE = re.compile(
    rf"\b(?:(?:1[89]|20|21)\d\d|Q[1-4]|H[12]|FY\s?\d{{2,4}}|\d{{4}}-\d\d-\d\d|(?:{'|'.join(_MONTHS.split())})\.?)\b",
    re.IGNORECASE,
)
# A name: a capitalised word that is not the sentence's first and not a function word ("Nordhavn Energi",
# "Liisa Marttinen", "Rovaniemi"). Crude (it counts a table row's headers too), so it weighs little.
_CAPITALISED = re.compile(r"(?<=[\s(“\"‘'])[A-ZÅÄÖÜ][\w’'-]*[a-zåäöü0-9][\w’'-]*")

# A table row as the collection's readers write it (research/collection/readers.py): an optional caption and
# " — ", then "Header: value" cells joined by "; ", ending with a full stop.
_CELL = r"[^:;\n]{1,80}:\s[^;\n]+"
_TABLE_ROW = re.compile(rf"^(?:[^—\n]{{1,160}}\s—\s)?{_CELL}(?:;\s{_CELL})*[.!?]$")
_ROW_CAPTION = re.compile(r"^[^—\n]{1,160}\s—\s")

# Rules and instructions: a reader of findings wants what is, not what staff must do (unless that is the question).
_RULE = re.compile(
    r"\b(?:must|mustn't|should|shouldn't|shall|do not|don't|does not apply|never|may not|cannot be|"
    r"(?:is|are) (?:not )?(?:allowed|permitted|prohibited|forbidden|required|expected|obliged|entitled)|"
    r"(?:is|are) responsible for|in line with this policy|this policy|these rules|policy|policies|guidelines?|"
    r"rules?|procedures?|approval|approved by your manager|reimburs\w*)\b",
    re.IGNORECASE,
)
# Words that make a sentence about staff conduct; they count only when the question is not about them.
_STAFF = re.compile(r"\b(?:employees?|staff|managers?|colleagues|every one of us|each of us|you|your)\b", re.IGNORECASE)
# Footers and site furniture: contact lines, legal notices, calls to action.
_BOILERPLATE = re.compile(
    r"(?:\S+@\S+\.\w+|\+\d[\d\s()-]{6,}\d|©|\ball rights reserved\b|\bprivacy\b|\bcookies?\b|"
    r"\bterms of (?:use|service)\b|"
    r"\bcontact us\b|\bsubscribe\b|\bnewsletter\b|\bclick\b|\bfollow us\b|\bread more\b|\blearn more\b|\bsign up\b|"
    r"\blog ?in\b|\bconfidential\b|\bdisclaimer\b)",
    re.IGNORECASE,
)
# A sentence opening with one of these is an instruction to its reader.
_IMPERATIVES = frozenset(
    """use keep report submit send ensure make do don't never always contact click read follow check ask book forward
    store lock return avoid register sign log please note remember call email write visit choose select enter open
    install update apply attach fill inform notify request save share tell turn wear bring take""".split()
)
# What a question about rules is phrased with: then rules are what it asks for.
_POLICY_WORDS = frozenset(
    terms(
        "policy policies rule rules guideline guidelines requirement requirements allowed permitted prohibited "
        "compliance procedure procedures conduct must should obligation obligations regulation regulations "
        "reimbursement approval"
    )
)


@dataclass(frozen=True)
class Traits:
    """What a sentence carries, counted."""

    figures: int  # numbers with a unit, percentage or currency
    numbers: int  # other numbers, years left out
    dates: int
    names: int
    rules: int  # signs of a rule, an instruction or staff conduct
    boilerplate: bool
    row: bool  # a table row with its headers

    @property
    def informative(self) -> bool:
        return bool(self.figures or self.numbers)


def is_table_row(sentence: str) -> bool:
    """Whether the sentence is a table row as the collection's readers write it: `Header: value; Header: value.`,
    perhaps after a caption and " — ". A row is a fact with its header: whole, though it reads like no prose."""
    sentence = sentence.strip()
    if len(sentence) > 1500 or not _TABLE_ROW.match(sentence):
        return False
    body = _ROW_CAPTION.sub("", sentence, count=1)
    cells = body.count("; ") + 1
    # One named cell says what it is only with a caption ("Headcount — Team: Support."): then one is enough.
    return cells >= 2 or body != sentence


def is_whole(sentence: str) -> bool:
    """Whether the sentence is a whole statement a reader can quote: a table row with its headers, or prose that is
    neither a heading (no full stop, most words capitalised), nor a fragment, nor a line of navigation."""
    if is_table_row(sentence):
        return True
    tokens = sentence.split()
    if sentence.rstrip("\"')”’")[-1:] not in ".!?":
        # A slide's or list's line that states a figure is whole without its full stop ("Deliveries in Q4: 96
        # Aurora HX units"); it is held to prose's other tests.
        found = traits(sentence)
        if (found.figures or found.numbers) and not sentence.endswith(":") and is_prose(sentence + "."):
            return True
        if not is_prose(sentence):
            return False
        # No end mark: a heading or a title run into its first line ("Why customers choose us Trusted by ..."),
        # unless it is long and reads as prose (most words in lower case).
        lower = sum(1 for token in tokens if token[:1].islower())
        return len(tokens) >= 12 and lower >= 0.6 * len(tokens)
    return is_prose(sentence)


def traits(sentence: str, asked: Collection[str] = ()) -> Traits:
    """The sentence's traits; `asked`: the question's terms (a rule word the question uses is no sign of a rule)."""
    figure_spans = [match.span() for match in _FIGURE.finditer(sentence)]
    numbers = 0
    for match in _NUMBER.finditer(sentence):
        if _YEAR.match(match.group()) or any(start <= match.start() < end for start, end in figure_spans):
            continue
        numbers += 1
    row = is_table_row(sentence)
    names = sum(1 for word in _CAPITALISED.findall(sentence) if word.lower() not in STOPWORDS)
    rules = sum(1 for match in _RULE.finditer(sentence) if not set(terms(match.group())) & set(asked))
    rules += sum(1 for match in _STAFF.finditer(sentence) if not set(terms(match.group())) & set(asked))
    first = sentence.split(None, 1)[0].strip("\"'“‘(").lower() if sentence.split() else ""
    if first in _IMPERATIVES and not row:
        rules += 1
    return Traits(
        figures=len(figure_spans),
        numbers=numbers,
        dates=len(_DATE.findall(sentence)),
        names=names,
        # A row with figures is a fact ("Employees: 212"), whatever its headers say.
        rules=0 if row and (figure_spans or numbers) else rules,
        boilerplate=bool(_BOILERPLATE.search(sentence)),
        row=row,
    )


def asks_about_rules(text: str) -> bool:
    """Whether a question is about policy or rules, so that sentences stating them are what it wants."""
    return bool(set(terms(text)) & _POLICY_WORDS)


def weight(sentence: str, asked: Collection[str] = (), rules_wanted: bool = False) -> float:
    """How much a reader would rather quote this sentence than another that answers the question as well: figures
    (with units most), dates and names raise it; rules, instructions and boilerplate lower it, unless the
    question asks about rules. A multiplier of the sentence's relevance, from about 0.2 to 2.2."""
    found = traits(sentence, asked)
    value = 1.0
    value += 0.5 * min(found.figures, 2) + 0.15 * min(found.numbers, 2)
    value += 0.1 * min(found.dates, 2) + 0.05 * min(found.names, 4)
    if found.row and found.informative:
        value += 0.2  # a row is a figure with the header that says what it measures
    if not rules_wanted:
        value /= 1 + 0.8 * min(found.rules, 3)
    if found.boilerplate:
        value *= 0.4
    return value
