"""Analysis: the website analyzer's facts for the query's objective, kept only with quotes found on the page."""

import json
import logging
from dataclasses import dataclass

from django.db import connection, transaction
from django.utils import timezone

from research.control import dispatch
from research.control.dispatch import QUEUED
from research.live import push
from research.models import (
    Event,
    EventType,
    Extract,
    Page,
    QueryStatus,
    Research,
    SerpQuery,
    Website,
    WebsiteStatus,
)
from research.record import database
from research.record.events import record_event
from research.record.usage import BudgetState
from research.text.quotes import PageText
from research.types import ResearchId
from workers.agents.engines import engine_for
from workers.clients.llm import charged_to
from workers.pipeline import fencing, heartbeat, progress
from workers.pipeline.fencing import Lease, LeaseLost
from workers.pipeline.lifecycle import may_start, state_sql, step_row
from workers.pipeline.locks import claim_owner, claimable_sql, lease_token
from workers.pipeline.tree_writes import WRITABLE, tree_transaction

log = logging.getLogger(__name__)


def analyze_website(website_id: int, task_id: str | None = None) -> None:
    """Extract facts and verbatim quotes from the website's stored page text."""
    # One read of what the step needs, its research's state joined: no model instances, and no page text before
    # the claim (a duplicate delivery reads none).
    row = step_row(
        Website,
        website_id,
        "SELECT w.status, w.research_id, w.query_id, w.url, w.title, w.page_id, q.objective, q.query, r.engine, "
        f"{state_sql('r')} FROM {Website._meta.db_table} w JOIN {SerpQuery._meta.db_table} q ON q.id = w.query_id "
        f"JOIN {Research._meta.db_table} r ON r.id = w.research_id WHERE w.id = %s",
    )
    if row is None:
        return
    status, research_id, query_id, url, title, page_id, objective, query, engine, *research_state = row
    state = BudgetState(*research_state)
    if status != WebsiteStatus.ANALYZING or page_id is None or not may_start(research_id, state):
        return
    owner = claim_owner(task_id)
    token = lease_token(owner)
    with tree_transaction(research_id):
        text = _claim(website_id, page_id, owner, token)
        if text is None:
            return  # another delivery of this analysis is under way
        transaction.on_commit(heartbeat.took_up)  # the claim replaced the task's reservation
        record_started(research_id, website_id, url)
    # The model request is admitted on the state read above, a claim ago, not on a read of its own.
    analyze_claimed(
        Claimed(research_id, website_id, query_id, url, title, objective, query, engine, state, text, token)
    )


@dataclass(frozen=True)
class Claimed:
    """A website whose analysis its caller has claimed, with what the analysis needs. `state`: the research's
    budget state the model request is admitted on (None: read again before the request)."""

    research_id: ResearchId
    website_id: int
    query_id: int
    url: str
    title: str
    objective: str
    query: str
    engine: str
    state: BudgetState | None
    text: str
    token: str  # the website's `claimed_by` as its claim wrote it: the analysis's store is fenced on it


def record_started(research_id: ResearchId, website_id: int, url: str) -> None:
    """Inside the transaction that claims the website's analysis: recorded as the analysis begins (a worker has
    taken it up), not when it was queued."""
    record_event(research_id, EventType.ANALYZING, {"website_id": website_id, "url": url})


def analyze_claimed(claimed: Claimed) -> None:
    """The analysis of a claimed website: the model's findings, kept where their quotes are on the page, stored
    once with the query's count of websites still pending."""
    with fencing.holding(Lease(Website, claimed.website_id, claimed.token)):
        _analyze(claimed)


def _analyze(claimed: Claimed) -> None:
    research_id, website_id, query_id, url = claimed.research_id, claimed.website_id, claimed.query_id, claimed.url
    with charged_to(research_id, known=claimed.state):
        findings = engine_for(claimed.engine).analyze(
            claimed.objective, claimed.query, url, claimed.title, claimed.text
        )
    page_text = PageText(claimed.text)
    kept = [finding for finding in findings if page_text.contains(finding.quote)]
    dropped = len(findings) - len(kept)
    if dropped:
        log.info("dropped %s quotes not found on %s", dropped, url)

    facts = [(finding.fact, finding.quote) for finding in kept]
    if not dropped:
        _store_analysis_at_once(research_id, website_id, query_id, url, facts, claimed.token)
        return
    with tree_transaction(research_id):
        remaining = _store_analysis(research_id, website_id, query_id, facts)
        if remaining is None:
            return  # a duplicate delivery got here first
        progress.add_dropped_quotes(research_id, dropped)
        record_event(
            research_id,
            EventType.ANALYZED,
            {"website_id": website_id, "url": url, "facts": len(kept), "quotes_dropped": dropped},
        )
        progress.website_settled(query_id, remaining)


def _claim(website_id: int, page_id: int, owner: str, claimed_by: str) -> str | None:
    """Lease the analysing website for this task (`claimed_by`, its token); its page's text if the claim holds, else
    None."""
    now = timezone.now()
    # The claim returns the page text: no statement (and no commit) of its own to read it.
    condition, params = claimable_sql(owner)
    with database.prepared_cursor() as cursor:
        cursor.execute(
            f"UPDATE {Website._meta.db_table} SET claimed_at = %s, claimed_by = %s "
            f"WHERE id = %s AND status = %s AND {condition} "
            f"RETURNING (SELECT text FROM {Page._meta.db_table} WHERE id = %s)",
            [now, claimed_by, website_id, WebsiteStatus.ANALYZING, *params, page_id],
        )
        row = cursor.fetchone()
    return None if row is None else row[0] or ""


# The extracts of the website a statement's `website` CTE just set `analyzed`, from the JSON list of (fact, quote)
# pairs `%(facts)s`.
_INSERT_EXTRACTS = (
    f"extract AS (INSERT INTO {Extract._meta.db_table} (research_id, website_id, position, fact, quote) "
    "SELECT website.research_id, website.id, item.ordinality - 1, item.value->>0, item.value->>1 "
    "FROM website, jsonb_array_elements(%(facts)s::jsonb) WITH ORDINALITY AS item)"
)


def _store_analysis(
    research_id: ResearchId, website_id: int, query_id: int, facts: list[tuple[str, str]]
) -> int | None:
    """Inside the tree transaction: the website `analyzed` (if it still is `analyzing`), its extracts stored and
    its query's `pending_websites` decremented; the websites the query still waits for, None if it was not
    analyzing."""
    now = timezone.now()
    # One statement for the three, in the lock order (the website, then its query).
    with database.prepared_cursor() as cursor:
        cursor.execute(
            f"WITH website AS (UPDATE {Website._meta.db_table} SET status = %(analyzed)s, finished_at = %(now)s "
            "WHERE id = %(website)s AND status = %(analyzing)s RETURNING id, research_id, query_id), "
            f"{_INSERT_EXTRACTS} "
            f"UPDATE {SerpQuery._meta.db_table} AS query SET pending_websites = query.pending_websites - 1 "
            "FROM website WHERE query.id = website.query_id RETURNING query.pending_websites",
            {
                "analyzed": WebsiteStatus.ANALYZED,
                "now": now,
                "website": website_id,
                "analyzing": WebsiteStatus.ANALYZING,
                "facts": json.dumps(facts),
            },
        )
        row = cursor.fetchone()
    return row[0] if row is not None else None


def _store_analysis_at_once(
    research_id: ResearchId, website_id: int, query_id: int, url: str, facts: list[tuple[str, str]], token: str
) -> None:
    """The analysis stored by one statement on its own, its own transaction (PostgreSQL), where no quote was
    dropped (a drop is counted on the research row, which the tree transaction writes): the website `analyzed`, its
    extracts and event inserted, its query counted down, and the query sent to its review by the last of its
    websites. Nothing is written where the website is no longer analysing (a duplicate delivery stored it), no longer
    carries `token` (its lease was taken over: the statement is fenced in its own condition) or the research no
    longer writes its tree (it ended: its rows were stopped, or are being).

    In a tree transaction (BEGIN, the store, the events with the research's state, COMMIT) the query's row stayed
    locked until the commit, across two of the worker's socket waits, and a query's websites, analysed together,
    stored one after another (docs/performance.md, Finding 27). Alone, the statement commits as it ends and holds
    the row for its own execution only.

    Its locks are taken in the order of `scrape._claim_new_page`'s: the research row shared (FOR KEY SHARE, which
    only an ending waits for, and which waits for an ending and then reads its status), the website, its query."""
    now = timezone.now()
    data = {"website_id": website_id, "url": url, "facts": len(facts), "quotes_dropped": 0}
    last = "query.pending_websites = 1 AND query.status = %(scraping)s"  # this website is its query's last
    with database.prepared_cursor() as cursor:
        cursor.execute(
            f"WITH research AS (SELECT id FROM {Research._meta.db_table} WHERE id = %(research)s "
            "AND status = ANY(%(writable)s) AND stop_reason = '' FOR KEY SHARE), "
            f"website AS (UPDATE {Website._meta.db_table} w SET status = %(analyzed)s, finished_at = %(now)s "
            "FROM research WHERE w.id = %(website)s AND w.status = %(analyzing)s AND w.claimed_by = %(token)s "
            "RETURNING w.id, w.research_id, w.query_id), "
            f"{_INSERT_EXTRACTS}, "
            f"event AS (INSERT INTO {Event._meta.db_table} (research_id, seq, type, data, created_at) "
            "SELECT website.research_id, NULL, %(event)s, %(data)s::jsonb, %(now)s FROM website) "
            # The last website counted off hands its query to the review, as `progress.query_to_review` does.
            f"UPDATE {SerpQuery._meta.db_table} AS query SET pending_websites = query.pending_websites - 1, "
            f"status = CASE WHEN {last} THEN %(reviewing)s ELSE query.status END, "
            f"claimed_at = CASE WHEN {last} THEN %(now)s ELSE query.claimed_at END, "
            f"claimed_by = CASE WHEN {last} THEN %(queued)s ELSE query.claimed_by END, "
            f"attempts = CASE WHEN {last} THEN 0 ELSE query.attempts END "
            "FROM website WHERE query.id = website.query_id "
            "RETURNING query.status = %(reviewing)s AND query.claimed_at = %(now)s AND query.claimed_by = %(queued)s",
            {
                "research": Research._meta.pk.get_db_prep_value(research_id, connection),
                "writable": sorted(WRITABLE),
                "website": website_id,
                "analyzing": WebsiteStatus.ANALYZING,
                "token": token,
                "analyzed": WebsiteStatus.ANALYZED,
                "now": now,
                "facts": json.dumps(facts),
                "event": EventType.ANALYZED,
                "data": json.dumps(data),
                "scraping": QueryStatus.SCRAPING,
                "reviewing": QueryStatus.REVIEWING,
                "queued": QUEUED,
            },
        )
        row = cursor.fetchone()
    if row is None:
        # A duplicate delivery stored it first, or the research ended; or its lease was taken over, which ends the
        # step as a fenced transaction's check does (a read only where nothing was stored).
        if Website.objects.filter(pk=website_id).exclude(claimed_by=token).exists():
            raise LeaseLost(f"Website {website_id} is no longer leased to {token}")
        return
    push.push_on_commit(research_id)  # committed already: pushed now
    if row[0]:  # this statement handed the query on (the lease it wrote is its own)
        dispatch.REVIEW.on_commit(query_id)


def analysis_failed(website_id: int, error: BaseException) -> None:
    """The model could not analyse the page (after retries): a minor failure; the query goes on."""
    progress.website_failed(website_id, "analysis_failed", str(error), from_statuses=[WebsiteStatus.ANALYZING])
