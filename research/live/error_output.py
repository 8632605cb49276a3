"""error-output.md: what went wrong, its impact, and every bit of progress, so a failed research loses nothing.

Built from the snapshot, so it shows exactly the state and the counts a watching client sees. What pages and
models wrote is written as inert text, and links to analysed pages stay whole whatever their URL holds
(research/text/links.py).
"""

from typing import Any

from research.live.snapshot import build_snapshot
from research.models import WebsiteStatus
from research.text.links import inert_text, markdown_link
from research.types import ResearchId


def build_error_output(research_id: ResearchId, what: str, impact: str) -> str:
    snapshot = build_snapshot(research_id)
    research, progress, queries = snapshot["research"], snapshot["progress"], snapshot["queries"]
    websites = [(query, website) for query in queries for website in query["websites"]]
    lines = [f"# Research failed: {research['title']}", "", "## What went wrong", "", what, "", "## Impact", "", impact]
    lines += ["", "## Progress", "", *_progress_lines(progress), "", "## Request", "", research["prompt"], ""]
    if snapshot["questions"]:
        lines += ["### Follow-up questions", ""]
        lines += [f"- **{q['question']}** {q['answer'] or '(no answer)'}" for q in snapshot["questions"]]
        lines.append("")
    sections = snapshot["report_sections"]
    if sections:
        # A report that failed part-way: which of its sections were written before it did.
        written = [s for s in sections if s["status"] == "written"]
        lines += ["## Report sections", ""]
        lines += [f"- [{s['status']}] {s['position']}. {inert_text(s['title'])}" for s in sections]
        lines += ["", f"{len(written)} of {len(sections)} sections were written.", ""]
    lines += ["## Queries and their states", ""]
    for query in queries:
        error = f" — error: {inert_text(query['error'])}" if query["error"] else ""
        indent = "  " * (query["depth"] - 1)
        text, objective = inert_text(query["query"]), inert_text(query["objective"])
        lines.append(f"{indent}- [{query['status']}] {text} — objective: {objective}{error}")
    if not queries:
        lines.append("No query was created.")
    lines += ["", "## Pages scraped, with their extracts and citations", ""]
    lines += _analysed_lines(websites)
    lines += ["## Pages that failed", ""]
    failed = [w for _, w in websites if w["status"] == WebsiteStatus.FAILED]
    lines += [
        f"- {inert_text(w['url'])} — {w['failure_reason'] or 'failed'}: {inert_text(w['error'] or 'no detail')}"
        for w in failed
    ] or ["No page failed."]
    unfinished = [w for _, w in websites if w["status"] not in (WebsiteStatus.ANALYZED, WebsiteStatus.FAILED)]
    if unfinished:
        lines += ["", "## Pages not finished when the research stopped", ""]
        lines += [f"- {inert_text(w['url'])} — {w['status']}" for w in unfinished]
    return "\n".join(lines).rstrip() + "\n"


def _progress_lines(progress: dict[str, Any]) -> list[str]:
    found, analysed, failed = progress["websites_found"], progress["websites_analysed"], progress["websites_failed"]
    return [
        f"- Queries: {progress['queries_created']} of {progress['queries_planned']} planned were created; "
        f"{progress['queries_done']} done, {progress['queries_failed']} failed.",
        f"- Websites: {found} found, {analysed} analysed, {failed} failed, {found - analysed - failed} unfinished.",
        f"- Extracts: {progress['extracts']} facts with verified quotes.",
    ]


def _analysed_lines(websites: list[tuple[dict[str, Any], dict[str, Any]]]) -> list[str]:
    lines: list[str] = []
    for query, website in websites:
        if website["status"] != WebsiteStatus.ANALYZED:
            continue
        url = website["url"]
        lines += [f"### {markdown_link(website['title'] or url, url)}", "", f"Query: {inert_text(query['query'])}", ""]
        source = markdown_link("source", url)
        facts = [f"- {inert_text(e['fact'])} — “{inert_text(e['quote'])}” ({source})" for e in website["extracts"]]
        lines += facts or ["- No relevant facts."]
        lines.append("")
    return lines or ["No page was analysed.", ""]
