"""error-output.md: what went wrong, its impact, and every bit of progress, so a failed research loses nothing."""

from typing import Any

from research.models import Extract, FollowUpQuestion, Research, SerpQuery, Website, WebsiteStatus
from research.planning import total_queries


def build_error_output(research_id: Any, what: str, impact: str) -> str:
    research = Research.objects.get(pk=research_id)
    queries = list(SerpQuery.objects.filter(research_id=research_id).order_by("depth", "parent_id", "position"))
    websites = list(Website.objects.filter(research_id=research_id).order_by("query_id", "position"))
    extracts: dict[int, list[Extract]] = {}
    for extract in Extract.objects.filter(research_id=research_id).order_by("website_id", "position"):
        extracts.setdefault(extract.website_id, []).append(extract)
    query_text = {query.pk: query.query for query in queries}
    analysed = [w for w in websites if w.status == WebsiteStatus.ANALYZED]
    failed = [w for w in websites if w.status == WebsiteStatus.FAILED]
    planned = total_queries(research.breadth, research.depth) if research.breadth and research.depth else 0

    lines = [
        f"# Research failed: {research.title}",
        "",
        "## What went wrong",
        "",
        what,
        "",
        "## Impact",
        "",
        impact,
        "",
        "## Progress",
        "",
        f"- Queries: {len(queries)} of {planned} planned were created; "
        f"{sum(q.status == 'done' for q in queries)} done, {sum(q.status == 'failed' for q in queries)} failed.",
        f"- Websites: {len(websites)} found, {len(analysed)} analysed, {len(failed)} failed, "
        f"{len(websites) - len(analysed) - len(failed)} unfinished.",
        f"- Extracts: {sum(len(items) for items in extracts.values())} facts with verified quotes.",
        "",
        "## Request",
        "",
        research.prompt,
        "",
    ]
    questions = list(FollowUpQuestion.objects.filter(research_id=research_id).order_by("position"))
    if questions:
        lines += ["### Follow-up questions", ""]
        lines += [f"- **{q.question}** {q.answer or '(no answer)'}" for q in questions]
        lines.append("")
    lines += ["## Queries and their states", ""]
    for query in queries:
        indent = "  " * (query.depth - 1)
        error = f" — error: {query.error}" if query.error else ""
        lines.append(f"{indent}- [{query.status}] {query.query} — objective: {query.objective}{error}")
    if not queries:
        lines.append("No query was created.")
    lines += ["", "## Pages scraped, with their extracts and citations", ""]
    for website in analysed:
        lines += [
            f"### [{website.title or website.url}]({website.url})",
            "",
            f"Query: {query_text.get(website.query_id, '')}",
            "",
        ]
        items = extracts.get(website.pk, [])
        lines += [f"- {e.fact} — “{e.quote}” ([source]({website.url}))" for e in items] or ["- No relevant facts."]
        lines.append("")
    if not analysed:
        lines += ["No page was analysed.", ""]
    lines += ["## Pages that failed", ""]
    lines += [f"- {w.url} — {w.failure_reason or 'failed'}: {w.error or 'no detail'}" for w in failed] or [
        "No page failed."
    ]
    unfinished = [w for w in websites if w.status not in (WebsiteStatus.ANALYZED, WebsiteStatus.FAILED)]
    if unfinished:
        lines += ["", "## Pages not finished when the research stopped", ""]
        lines += [f"- {w.url} — {w.status}" for w in unfinished]
    return "\n".join(lines).rstrip() + "\n"
