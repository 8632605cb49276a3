"""Build research trees directly in the database, for tests that need a big or specific tree."""

from django.utils import timezone

from research.models import (
    Document,
    DocumentKind,
    Extract,
    FollowUpQuestion,
    LlmCall,
    Page,
    PageStatus,
    QueryStatus,
    Research,
    ResearchStatus,
    SerpQuery,
    Website,
    WebsiteStatus,
)
from research.record.planning import children_per_query, total_queries


def spend(research: Research, prompt_tokens: int, completion_tokens: int = 0, cost_usd: str | None = None) -> None:
    """A model call the research made (its totals are the sums of its calls)."""
    LlmCall.objects.create(
        research=research,
        user_id=research.owner_id,
        agent="website_analyzer",
        model="m",
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        cost_usd=cost_usd,
        outcome="ok",
    )


def running_research(owner, breadth: int, depth: int) -> Research:
    """A research as a worker leaves it once started: running, every planned query still pending."""
    now = timezone.now()
    return Research.objects.create(
        owner=owner,
        prompt="p",
        title="t",
        status=ResearchStatus.RUNNING,
        breadth=breadth,
        depth=depth,
        pending_queries=total_queries(breadth, depth),
        started_at=now,
        claimed_at=now,
    )


def build_tree(owner, breadth: int, depth: int, websites_per_query: int = 7) -> Research:
    """A completed research with the full tree its breadth and depth call for, websites, extracts and a report."""
    research = Research.objects.create(
        owner=owner,
        prompt="What limits fusion power plants?",
        title="Fusion limits",
        status=ResearchStatus.COMPLETED,
        breadth=breadth,
        depth=depth,
        num_questions=1,
    )
    FollowUpQuestion.objects.create(research=research, position=0, question="Which designs?", answer="Tokamaks")
    level = [
        SerpQuery.objects.create(
            research=research,
            depth=1,
            position=i,
            query=f"q1-{i}",
            objective="o",
            status=QueryStatus.DONE,
            learnings=["l"],
        )
        for i in range(breadth)
    ]
    all_queries = list(level)
    for d in range(2, depth + 1):
        per_parent = children_per_query(breadth, d - 1)
        level = SerpQuery.objects.bulk_create(
            SerpQuery(
                research=research,
                parent=parent,
                depth=d,
                position=i,
                query=f"q{d}-{parent.pk}-{i}",
                objective="o",
                status=QueryStatus.DONE,
            )
            for parent in level
            for i in range(per_parent)
        )
        all_queries.extend(level)
    pages = Page.objects.bulk_create(
        Page(research=research, url=f"https://example.com/{q.pk}/{i}", status=PageStatus.FETCHED, text="t " * 500)
        for q in all_queries
        for i in range(websites_per_query)
    )
    websites = Website.objects.bulk_create(
        Website(
            research=research,
            query=q,
            page=pages[qi * websites_per_query + i],
            position=i,
            url=pages[qi * websites_per_query + i].url,
            title="t",
            status=WebsiteStatus.ANALYZED,
        )
        for qi, q in enumerate(all_queries)
        for i in range(websites_per_query)
    )
    Extract.objects.bulk_create(
        Extract(research=research, website=w, position=0, fact="fact", quote="t t") for w in websites
    )
    Document.objects.create(research=research, kind=DocumentKind.REPORT, markdown="# Report\n")
    return research
