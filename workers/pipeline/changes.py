"""What changed between two runs of a research, from the findings each stored: never a model's guess.

A scheduled run fetches every page anew (Page.run_round), so each run's findings are the verified quotes its own
pages gave. Two quotes that read the same once their numbers are masked are one statement: where their numbers
differ, a figure moved. A quote the earlier run did not have is a new finding; a page that gave findings in one
run and none in the other is a source new or gone.
"""

import re
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Max

from research.models import Document, DocumentKind, Extract, Page, Research
from research.text.links import link_target, link_title
from research.types import ResearchId

HEADING = "What changed"
# Items of each kind listed at most; the rest are counted.
MAX_LISTED = 12
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")


@dataclass(frozen=True)
class Finding:
    url: str
    title: str
    quote: str

    @property
    def text(self) -> str:
        return " ".join(self.quote.split())

    @property
    def shape(self) -> str:
        """The quote with its numbers masked: the statement, whatever its figures say."""
        return _NUMBER.sub("#", self.text.lower())

    @property
    def figures(self) -> list[str]:
        return _NUMBER.findall(self.text)


@dataclass
class Changes:
    since_version: int
    since: str  # when that version was written, ISO 8601
    moved: list[tuple[Finding, Finding]] = field(default_factory=list)  # (before, now)
    new: list[Finding] = field(default_factory=list)
    new_sources: list[Finding] = field(default_factory=list)  # one finding of each, for its title and a quote
    gone_sources: list[Finding] = field(default_factory=list)
    unchanged: int = 0

    def as_stats(self) -> dict[str, Any]:
        return {
            "since_version": self.since_version,
            "moved_figures": len(self.moved),
            "new_findings": len(self.new),
            "new_sources": len(self.new_sources),
            "gone_sources": len(self.gone_sources),
            "unchanged_findings": self.unchanged,
        }


def _findings(research_id: ResearchId, run_round: int) -> list[Finding]:
    rows = (
        Extract.objects.filter(research_id=research_id, website__page__run_round=run_round)
        .order_by("website__query__depth", "website_id", "position")
        .values_list("website__url", "website__title", "quote")
    )
    return [Finding(url, title or url, quote) for url, title, quote in rows]


def compare(before: list[Finding], now: list[Finding], since_version: int, since: str) -> Changes:
    """What `now` says that `before` did not: figures moved, findings new, sources new or gone."""
    changes = Changes(since_version, since)
    earlier_texts = {finding.text for finding in before}
    by_shape: dict[str, list[Finding]] = {}
    for finding in before:
        if finding.figures:
            by_shape.setdefault(finding.shape, []).append(finding)
    seen: set[str] = set()
    for finding in now:
        if finding.text in seen:
            continue
        seen.add(finding.text)
        if finding.text in earlier_texts:
            changes.unchanged += 1
            continue
        same = by_shape.get(finding.shape, []) if finding.figures else []
        # The same statement from the same page first, else from any page of the earlier run.
        match = next((old for old in same if old.url == finding.url), same[0] if same else None)
        if match is not None:
            changes.moved.append((match, finding))
        else:
            changes.new.append(finding)
    earlier_urls = {finding.url: finding for finding in before}
    now_urls = {finding.url: finding for finding in now}
    changes.new_sources = [finding for url, finding in now_urls.items() if url not in earlier_urls]
    changes.gone_sources = [finding for url, finding in earlier_urls.items() if url not in now_urls]
    return changes


def since_last_run(research: Research) -> Changes | None:
    """The changes of the research's latest run against the run before it; None for a research's first run."""
    if research.run_round == 0:
        return None
    earlier = Page.objects.filter(research_id=research.pk, run_round__lt=research.run_round).aggregate(
        round=Max("run_round")
    )["round"]
    if earlier is None:
        return None
    previous = (
        Document.objects.filter(research_id=research.pk, kind=DocumentKind.REPORT, version__lt=research.report_version)
        .order_by("-version")
        .values_list("version", "created_at")
        .first()
    )
    if previous is None:
        return None
    version, created_at = previous
    return compare(
        _findings(research.pk, earlier), _findings(research.pk, research.run_round), version, created_at.isoformat()
    )


def render(changes: Changes) -> str:
    """The report's "What changed" section: each item cites the page it rests on, with the quote that shows it."""
    lines = [f"## {HEADING}", "", f"Against version {changes.since_version}, from the pages as they read now."]
    items: list[str] = []
    for before, now in changes.moved[:MAX_LISTED]:
        # The same statement, so the same number of figures in the same places: the ones that differ.
        differ = [(old, new) for old, new in zip(before.figures, now.figures, strict=False) if old != new]
        was, is_now = ", ".join(old for old, _ in differ), ", ".join(new for _, new in differ)
        items.append(f"- **A figure moved** from {was} to {is_now}: “{_plain(now.text)}” {_cite(now)}")
    items += _more(len(changes.moved), "figures moved")
    for finding in changes.new[:MAX_LISTED]:
        items.append(f"- **New finding:** “{_plain(finding.text)}” {_cite(finding)}")
    items += _more(len(changes.new), "new findings")
    for finding in changes.new_sources[:MAX_LISTED]:
        items.append(f"- **New source:** {_cite(finding, finding.title)}")
    items += _more(len(changes.new_sources), "new sources")
    for finding in changes.gone_sources[:MAX_LISTED]:
        # Not linked: the page gave nothing this time, and a report links only pages it analysed in this run.
        address = finding.url.split("://", 1)[-1].replace("`", "%60")
        items.append(f"- **Source gone:** {_plain(finding.title)} (`{address}`) gave no finding this time.")
    items += _more(len(changes.gone_sources), "sources gone")
    if not items:
        unchanged = "finding" if changes.unchanged == 1 else "findings"
        items = [f"- Nothing changed: the same {changes.unchanged} {unchanged} from the same sources."]
    return "\n".join([*lines, "", *items, ""])


def _more(count: int, what: str) -> list[str]:
    return [f"- …and {count - MAX_LISTED} more {what}."] if count > MAX_LISTED else []


def _cite(finding: Finding, label: str = "source") -> str:
    return f'[{_plain(label)}]({link_target(finding.url)} "{link_title(finding.text)}")'


def _plain(text: str) -> str:
    """Text shown as it is in markdown: no link, emphasis or heading made of it."""
    return re.sub(r"([\\`*_{}\[\]()#+!<>|])", r"\\\1", " ".join(text.split()))


def insert(markdown: str, section: str) -> str:
    """The section after the report's title and the notes under it, before its first section."""
    match = re.search(r"^## ", markdown, flags=re.MULTILINE)
    if match is None:
        return markdown.rstrip("\n") + "\n\n" + section
    return markdown[: match.start()] + section + "\n" + markdown[match.start() :]
