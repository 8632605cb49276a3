"""Researches written straight into the database, in every state the UI shows, for browser tests that need no
workers (the sidebar's date groups, a phone layout, the report and error-output views, cancelling)."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db.models import F
from django.utils import timezone

from research.control import services
from research.live import push
from research.models import (
    Document,
    DocumentKind,
    Event,
    Extract,
    Research,
    ResearchStatus,
    SerpQuery,
    Website,
)
from research.text.links import link_title
from tests.support.factories import spend


def add_event(research: Research, event_type: str, data: dict, at: datetime) -> None:
    Research.objects.filter(pk=research.pk).update(last_event_seq=F("last_event_seq") + 1)
    research.refresh_from_db(fields=["last_event_seq"])
    event = Event.objects.create(research=research, seq=research.last_event_seq, type=event_type, data=data)
    Event.objects.filter(pk=event.pk).update(created_at=at)
    # Pushed as a recorded event is: a test that also runs workers waits at its end until every research's events
    # went out, and waited its whole 30 s for seeded events that never would.
    push.push_on_commit(research.pk)


def seed_research(
    owner,
    title: str,
    status: str,
    created_at: datetime | None = None,
    page_url=None,
    report: bool = False,
    error_output: bool = False,
) -> Research:
    """A 2×2 research in `status`, with questions, queries, websites (one failed), extracts and events."""
    created = created_at or timezone.now() - timedelta(minutes=6)
    url = page_url or (lambda slug: f"https://example.com/{slug}")
    # Created as the API creates one (research/control/services.py), then moved into the state the test needs.
    research = services.create_with_answers(
        owner,
        f"{title}: what do the measurements say, and which designs work best?",
        [("Which climates?", "Nordic winters"), ("Which years?", "2015 onwards")],
    )
    Research.objects.filter(pk=research.pk).update(
        title=title,
        status=status,
        created_at=created,
        breadth=2,
        depth=2,
        started_at=created + timedelta(seconds=20),
        finished_at=created + timedelta(minutes=4) if status in ("completed", "failed", "cancelled") else None,
    )
    research.refresh_from_db()
    spend(research, 12_000, 3_400)
    at = created
    add_event(research, "generating_followups", {"num_questions": 2}, at)
    add_event(research, "followups_generated", {"questions": ["Which climates?", "Which years?"]}, at)
    add_event(research, "research_started", {"breadth": 2, "depth": 2, "queries_planned": 4}, at)
    finished = status in ("completed", "failed", "cancelled")
    top = []
    for i, topic in enumerate(["cold climate heat pump field trials", "heat pump defrost energy losses"]):
        query = SerpQuery.objects.create(
            research=research,
            depth=1,
            position=i,
            query=topic,
            objective=f"Find measured seasonal performance figures about {topic}",
            status="done",
        )
        top.append(query)
        add_event(
            research,
            "new_serp_query",
            {"query_id": query.pk, "parent_id": None, "depth": 1, "query": query.query, "objective": query.objective},
            at,
        )
    queries = list(top)
    for parent in top:
        child = SerpQuery.objects.create(
            research=research,
            parent=parent,
            depth=2,
            position=0,
            query=f"{parent.query} / below -20 C",
            objective="Find COP figures measured below -20 °C",
            status="done" if finished else "scraping",
        )
        queries.append(child)
        add_event(
            research,
            "new_serp_query",
            {
                "query_id": child.pk,
                "parent_id": parent.pk,
                "depth": 2,
                "query": child.query,
                "objective": child.objective,
            },
            at,
        )
    for query in queries:
        slugs = [f"{query.pk}-heat-pumps-{k}" for k in range(3)]
        add_event(
            research,
            "got_websites_from_serp_query",
            {"query_id": query.pk, "query": query.query, "urls": [url(s) for s in slugs]},
            at,
        )
        for k, slug in enumerate(slugs):
            failed = k == 2
            website = Website.objects.create(
                research=research,
                query=query,
                position=k,
                url=url(slug),
                title=f"Heat pumps in the cold, part {k + 1}",
                status="failed" if failed else "analyzed" if finished or query.depth == 1 else "analyzing",
                failure_reason="http_status" if failed else "",
                error="HTTP 503 from the server" if failed else "",
            )
            add_event(research, "scraping_a_website", {"website_id": website.pk, "url": website.url}, at)
            if failed:
                add_event(
                    research,
                    "website_failed",
                    {"website_id": website.pk, "url": website.url, "reason": "http_status", "error": "HTTP 503"},
                    at,
                )
                continue
            Extract.objects.create(
                research=research,
                website=website,
                position=0,
                fact="Seasonal COP stayed above 2.5 in the field trial.",
                quote="The seasonal coefficient of performance averaged 2.7 across 14 homes.",
            )
            add_event(research, "analyzing_a_website", {"website_id": website.pk, "url": website.url}, at)
            add_event(
                research,
                "analyzed_a_website",
                {"website_id": website.pk, "url": website.url, "facts": 1, "quotes_dropped": 0},
                at,
            )
            at += timedelta(seconds=7)
    if report:
        add_event(research, "report_writing_start", {}, at)
        Document.objects.create(research=research, kind=DocumentKind.REPORT, markdown=report_markdown(title, url))
        add_event(research, "report_writing_successful", {"citations": 4, "sources_cited": 2}, at)
    if error_output:
        Document.objects.create(
            research=research,
            kind=DocumentKind.ERROR_OUTPUT,
            markdown=f"# Research failed: {title}\n\n## What went wrong\n\nThe search engine failed for good "
            "(HTTP 503 after 4 retries).\n\n## Impact\n\nNo report was written; everything found is below.\n\n"
            f"## Pages analysed\n\n- [Heat pumps in the cold]({url('a-heat-pumps-0')}): seasonal COP 2.7\n",
        )
        add_event(research, "research_failed", {"reason": "search_failed", "error": "HTTP 503"}, at)
    if status == ResearchStatus.CANCELLED:
        add_event(research, "research_cancelled", {"by": "user"}, at)
    Research.objects.filter(pk=research.pk).update(created_at=created)
    research.refresh_from_db()
    return research


QUOTE_ONE = "The seasonal coefficient of performance averaged 2.7."
QUOTE_TWO = 'Defrost cycles took 5 to 12 percent of the "heating energy" (below -15 °C).'


def report_markdown(title: str, url) -> str:
    first, second = url("report-source-one"), url("report-source-two")
    # Each citation carries the quote it rests on as its link title, as the renderer writes it (citations.py).
    q1, q2 = link_title(QUOTE_ONE), link_title(QUOTE_TWO)
    return f"""# {title}

## Summary

Cold-climate heat pumps kept a seasonal COP above 2.5 in every field trial found. [[1]]({first} "{q1}") Defrost cycles
cost between 5 and 12 percent of the heating energy below -15 °C. [[2]]({second} "{q2}")

## Field measurements

### Nordic trials

Across 14 homes the seasonal coefficient of performance averaged 2.7. [[1]]({first} "{q1}") Output fell by a third at
-25 °C but no home needed its backup heater for more than 40 hours. [[1]]({first} "{q1}") [[2]]({second} "{q2}")

## Sources

1. [Heat pumps in the cold, part 1]({first}) — quoted: “{QUOTE_ONE}”
2. [Defrost losses measured]({second}) — quoted: “{QUOTE_TWO}”
"""
