"""A document's date and standing: when it speaks as of, and whether it is still the current word on its subject.

A company's share keeps old vintages beside the current files (`archive/annual-report-2024.pdf`), drafts that the
published version replaced (`finance/drafts/...-draft-v1.docx`), and says so in their paths and opening lines
("ARCHIVED DOCUMENT: ...", "DRAFT, SUPERSEDED: ..."). A report built from such a share has to tell the figures of
the current files from those of the old ones, so each document is given, once, at indexing time:

- its date (`document_date`): the end of the period its file name gives ("2025" is the 2025 report, as of
  31 December 2025; "2025-Q1" 31 March; "2025-12" 31 December), else the first full date in its title or opening
  lines ("Published 12 March 2026"), else its file's metadata date. The name comes first because it is what the
  owner filed it under; metadata dates are often only when a tool last saved (or copied) the file.
- its standing (`document_standing`): superseded, archived, draft or current, from its path's folders and name
  (`archive/`, `old/`, `drafts/`) and from what its title and opening lines say of it. The strongest word wins:
  a draft that says it was replaced is superseded; an archived file is archived.

Pure functions of text, no Django: the readers and the indexer call them, and so may anything else.
"""

from __future__ import annotations

import calendar
import datetime
import re
from pathlib import PurePath

CURRENT = "current"
DRAFT = "draft"
ARCHIVED = "archived"
SUPERSEDED = "superseded"
STANDINGS = (CURRENT, DRAFT, ARCHIVED, SUPERSEDED)
# How far from current each standing is: the worse one wins when path and text disagree.
_RANK = {CURRENT: 0, DRAFT: 1, ARCHIVED: 2, SUPERSEDED: 3}

# Only the opening of a document says what it is: "superseded" further down is about something else.
OPENING_CHARS = 600
# Dates outside these years are misreadings (a part number, a phone number), not a document's date.
MIN_YEAR, MAX_YEAR = 1900, 2199

_MONTHS = {name.lower(): number for number, name in enumerate(calendar.month_name) if name}
_MONTHS.update({name.lower(): number for number, name in enumerate(calendar.month_abbr) if name})
_MONTHS["sept"] = 9
_MONTH = "|".join(sorted(_MONTHS, key=len, reverse=True))
_YEAR = r"(?:19|20|21)\d\d"

# In a path: 2025-03-31, 2025-12, 2025-Q1, 2025q4, fy2025, 2025 (as a name's token, not inside a longer number).
_PATH_DATE = re.compile(
    rf"(?<![0-9])(?P<year>{_YEAR})"
    r"(?:[-_.](?P<month>0[1-9]|1[0-2])(?:[-_.](?P<day>0[1-9]|[12]\d|3[01]))?|[-_.]?[qQ](?P<quarter>[1-4]))?"
    r"(?![0-9])"
)
# In text: 31 December 2025, December 31, 2025, 2025-12-31, December 2025 (the month's end).
_TEXT_DATES = [
    re.compile(rf"\b(?P<day>[0-3]?\d)(?:st|nd|rd|th)?\.?\s+(?P<month>{_MONTH})\.?,?\s+(?P<year>{_YEAR})\b", re.I),
    re.compile(rf"\b(?P<month>{_MONTH})\.?\s+(?P<day>[0-3]?\d)(?:st|nd|rd|th)?,?\s+(?P<year>{_YEAR})\b", re.I),
    re.compile(rf"\b(?P<year>{_YEAR})-(?P<month>0[1-9]|1[0-2])-(?P<day>0[1-9]|[12]\d|3[01])\b"),
    re.compile(rf"\b(?P<month>{_MONTH})\.?\s+(?P<year>{_YEAR})\b", re.I),
]

_ARCHIVED_FOLDERS = {"archive", "archives", "archived", "old", "obsolete"}
_DRAFT_FOLDERS = {"draft", "drafts", "wip"}
_SUPERSEDED_FOLDERS = {"superseded", "outdated", "deprecated"}
_NAME_WORDS = re.compile(r"[a-z]+")
# What an opening says of its own document. "Replaces all earlier versions" is a current document speaking: only
# the passive ("was replaced by") is said of an old one.
_SUPERSEDED_TEXT = re.compile(
    r"\bsuperseded\b|\b(?:was|were|has been|have been|is|is now|will be)\s+replaced\s+by\b"
    r"|\bno longer (?:valid|current)\b",
    re.I,
)
_ARCHIVED_TEXT = re.compile(r"\barchived\b|\barchive copy\b", re.I)
# "Draft" names the document only in its title or where a line opens with it ("DRAFT v1 - ..."); elsewhere it is
# as likely a draft contract the document is about.
_DRAFT_TITLE = re.compile(r"\bdraft\b", re.I)
_DRAFT_LINE = re.compile(r"^\W*draft\b", re.I | re.M)


def _day(year: int, month: int, day: int | None) -> datetime.date | None:
    """The date, or the month's last day without a day; None when it is no date (31 February, year 9999)."""
    if not MIN_YEAR <= year <= MAX_YEAR:
        return None
    last = calendar.monthrange(year, month)[1]
    if day is None:
        day = last
    if not 1 <= day <= last:
        return None
    return datetime.date(year, month, day)


def path_date(path: str) -> datetime.date | None:
    """The end of the latest period the path's file name (else its folders, nearest first) gives, or None."""
    pure = PurePath(path)
    for part in (pure.stem, *reversed(pure.parent.parts)):
        found = [date for match in _PATH_DATE.finditer(part) if (date := _path_match_date(match))]
        if found:
            return max(found)
    return None


def _path_match_date(match: re.Match[str]) -> datetime.date | None:
    year = int(match["year"])
    if match["quarter"]:
        return _day(year, int(match["quarter"]) * 3, None)
    if match["month"]:
        return _day(year, int(match["month"]), int(match["day"]) if match["day"] else None)
    return _day(year, 12, None)


def text_date(text: str) -> datetime.date | None:
    """The first full date (a day, or a month, with its year) in the text, or None. A bare year is not taken from
    text: "the financial year 2024, published in March 2025" is as of the later date, and a year alone is too
    often a subject ("the 2030 target")."""
    best: tuple[int, datetime.date] | None = None
    for pattern in _TEXT_DATES:
        for match in pattern.finditer(text):
            month_text = match["month"]
            month = int(month_text) if month_text.isdigit() else _MONTHS.get(month_text.lower().rstrip("."))
            day_text = match.groupdict().get("day")
            date = _day(int(match["year"]), month, int(day_text) if day_text else None) if month else None
            if date is not None:
                if best is None or match.start() < best[0]:
                    best = (match.start(), date)
                break  # this pattern's first date; an earlier one of another pattern may still come first
    return best[1] if best else None


def document_date(path: str, title: str, text: str, metadata: datetime.date | None = None) -> datetime.date | None:
    """The date a document speaks as of: its name's period, else its title's or opening's first date, else its
    metadata date."""
    return path_date(path) or text_date(f"{title}\n{text[:OPENING_CHARS]}") or metadata


def document_standing(path: str, title: str, text: str) -> str:
    """superseded, archived, draft or current: the worst its path's folders and name, its title and its opening
    lines say."""
    found = [CURRENT]
    pure = PurePath(path)
    for part in pure.parent.parts:
        name = part.lower()
        if name in _SUPERSEDED_FOLDERS:
            found.append(SUPERSEDED)
        elif name in _ARCHIVED_FOLDERS:
            found.append(ARCHIVED)
        elif name in _DRAFT_FOLDERS:
            found.append(DRAFT)
    name_words = set(_NAME_WORDS.findall(pure.stem.lower()))
    if name_words & {"superseded", "outdated", "obsolete"}:
        found.append(SUPERSEDED)
    if name_words & {"archive", "archived", "old"}:
        found.append(ARCHIVED)
    if name_words & {"draft", "wip"}:
        found.append(DRAFT)
    opening = f"{title}\n{text[:OPENING_CHARS]}"
    if _SUPERSEDED_TEXT.search(opening):
        found.append(SUPERSEDED)
    if _ARCHIVED_TEXT.search(opening):
        found.append(ARCHIVED)
    if _DRAFT_TITLE.search(title) or _DRAFT_LINE.search(text[:OPENING_CHARS]):
        found.append(DRAFT)
    return max(found, key=_RANK.__getitem__)


def is_current(standing: str) -> bool:
    return standing in ("", CURRENT)


def label(standing: str, dated: datetime.date | None) -> str:
    """What follows a source's title in prompts and the sources list: " (archived, 31 Dec 2024)", or ""."""
    said = describe(standing, dated)
    return f" ({said})" if said else ""


def describe(standing: str, dated: datetime.date | None) -> str:
    """How a prompt or a sources list names a document's standing and date: "archived, 31 Dec 2024"."""
    parts = [] if is_current(standing) else [standing]
    if dated is not None:
        parts.append(f"{dated.day} {calendar.month_abbr[dated.month]} {dated.year}")
    return ", ".join(parts)
