"""Scraping: fetch a website's page once per research, then hand every website with that URL to analysis."""

import json
import logging
from dataclasses import replace
from datetime import datetime, timedelta
from typing import NamedTuple
from urllib.parse import urlparse

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Case, F, TextField, Value, When
from django.utils import timezone

from research.collection.documents import fetch_link, may_fetch, page_standing
from research.control import dispatch
from research.control.dispatch import QUEUED
from research.live import push
from research.models import (
    Event,
    EventType,
    Page,
    PageStatus,
    Research,
    SerpQuery,
    Website,
    WebsiteStatus,
)
from research.record import database
from research.record.events import record_event
from research.record.usage import BudgetState
from research.types import ResearchId
from workers.clients.fetch import FetchedPage, FetchError, fetch_page
from workers.clients.ratelimit import host_slot
from workers.errors import TransientError
from workers.pipeline import analyze, fencing, heartbeat, progress
from workers.pipeline.fencing import Lease
from workers.pipeline.lifecycle import may_start, state_sql, step_row
from workers.pipeline.locks import claim_owner, lease_token
from workers.pipeline.progress import FailedWebsite
from workers.pipeline.tree_writes import WRITABLE, tree_transaction

log = logging.getLogger(__name__)


def fetch_and_analyze(website_id: int, task_id: str | None = None) -> None:
    """The scrape step: fetch the website's page, then analyse it in the same task.

    The analysis is the page's next step anyway: taken up here, it skips a broker message (its publish, delivery
    and acknowledgement), the wait behind the research's backlog, a task's start, and the analysis step's read and
    claim (the transaction that stores the page leases the website to this task). A delivery of this task that
    finds the website handed to analysis (run again after an error, or redelivered) runs the analysis step on it,
    which takes it up where its lease allows; other websites waiting on the same page go to analysis steps of
    their own."""
    kept = scrape_website(website_id, task_id, analyze_here=True)
    if isinstance(kept, analyze.Claimed):
        analyze.analyze_claimed(kept)
    elif kept:
        analyze.analyze_website(website_id, task_id)


def fetch_or_analysis_failed(website_id: int, error: BaseException) -> None:
    """The scrape step gave up: the website failed in its fetch, or in its analysis when the page was stored."""
    scrape_failed(website_id, error)
    analyze.analysis_failed(website_id, error)


def scrape_website(website_id: int, task_id: str | None = None, analyze_here: bool = False) -> analyze.Claimed | bool:
    """Fetch the website's page unless this research has it (or is fetching it) already.

    With `analyze_here` the website's own analysis is left to the caller, not queued: what this returns is that
    analysis, claimed for the caller where this step stored the page, True where the website may be waiting for
    its analysis otherwise (handed on before, or with a page fetched before), False where it is not."""
    # One read, its research's state joined, as a row: no model instance, no second query.
    row = step_row(
        Website,
        website_id,
        "SELECT w.research_id, w.query_id, w.url, w.status, w.title, q.objective, q.query, r.engine, r.owner_id, "
        "r.run_round, "
        f"{state_sql('r')} FROM {Website._meta.db_table} w JOIN {SerpQuery._meta.db_table} q ON q.id = w.query_id "
        f"JOIN {Research._meta.db_table} r ON r.id = w.research_id WHERE w.id = %s",
    )
    if row is None:
        return False
    research_id, query_id, url, status, title, objective, query, engine, owner_id, run_round, *columns = row
    state = BudgetState(*columns)
    if status == WebsiteStatus.ANALYZING:
        return analyze_here
    if status not in (WebsiteStatus.PENDING, WebsiteStatus.SCRAPING) or not may_start(research_id, state):
        return False
    website = Waiting(website_id, url, query_id)
    owner = claim_owner(task_id)
    fetcher = lease_token(owner)
    keep = website_id if analyze_here else None
    page = _claim_page(research_id, website, owner, keep, run_round)
    if page is None:
        return analyze_here
    # The page's lease, renewed while this fetch runs, stands for every website waiting on it: the sweeper hands a
    # website waiting on a page to a new delivery only once the page's lease has lapsed, and that delivery must
    # take the page over to fetch it. So the store is fenced on the page alone, the first row it locks (the
    # websites are locked after the page, in key order: fenced too, they would be locked out of that order).
    with fencing.holding(Lease(Page, page.pk, fetcher)), heartbeat.holding(Website, website.pk, fetcher):
        try:
            if may_fetch(website.url, owner_id):
                fetched, error = _fetch(website.url)
            else:
                # A collection document its owner may not read (another user's, made private or deleted since the
                # search): never fetched, so never analysed or cited; to the research it is a page that is gone.
                fetched, error = None, FetchError("http_error", "document not found", 404)
        except TransientError:
            # No slot for the host in time: the page is given up, so the retry (or a website waiting on it) takes it.
            Page.objects.filter(pk=page.pk, status=PageStatus.FETCHING, claimed_by=fetcher).update(claimed_at=None)
            raise
        # The analysis is leased to this task by the store: its lease is renewed from here on by the analysis.
        stored = _store_page(research_id, page, fetched, error, keep, fetcher)
    if not stored.claimed or fetched is None:
        return False
    # The model request is admitted on the research's state as the store read it, where it did (PostgreSQL); else
    # on the state read before the fetch where the research spends without a budget of tokens or dollars (its
    # time budget is reckoned from the clock); with one, its sums are read again before the request (a state
    # from before the fetch would miss what other steps spent meanwhile).
    unbudgeted = state.budget_tokens is None and state.budget_usd is None
    return analyze.Claimed(
        research_id,
        website_id,
        query_id,
        url,
        title or page.title,
        objective,
        query,
        engine,
        stored.state or (state if unbudgeted else None),
        fetched.text,
        fetcher,
    )


def _claim_page(
    research_id: ResearchId, website: FailedWebsite, owner: str, keep: int | None = None, run_round: int = 0
) -> Page | None:
    """Link the website to its research's page for the URL in this run (`run_round`); the page if this step
    (`owner`, its task's claim owner) must fetch it, else None (the website handed to analysis where the page is
    stored, not queued if it is `keep`)."""
    fetcher = lease_token(owner)
    page = _claim_new_page(research_id, website, fetcher, run_round)
    if page is not None:
        return page
    with tree_transaction(research_id):
        # Lock order everywhere: the page, then its websites; so fetchers and waiters never deadlock.
        page, created = _lock_page(research_id, website.url, fetcher, run_round)
        leased_by_insert = created and page.claimed_at is not None
        if not _claim_website(website.pk, page.pk, fetcher):
            if leased_by_insert:  # no fetch here: the next website of the URL fetches the page at once
                Page.objects.filter(pk=page.pk).update(claimed_at=None, claimed_by="")
            return None
        transaction.on_commit(heartbeat.took_up)  # the claim replaced the task's reservation
        reused = {"website_id": website.pk, "url": website.url, "reused": True}
        if page.status == PageStatus.FETCHED:
            record_event(research_id, EventType.SCRAPING, reused)
            _to_analysis(research_id, page, [website], keep)
            return None
        if page.status == PageStatus.FAILED:
            _fail(research_id, page, [website])
            return None
        # A fetcher renews its page's lease while it runs: a lapsed one is a dead worker's, to be taken over.
        stale = page.claimed_at is None or timezone.now() - page.claimed_at > timedelta(seconds=settings.LEASE_SECONDS)
        # This task's own fetch, not stored (its database connection was lost, or Celery retries the task): its
        # run again takes it up, where waiting for "another" fetcher would wait for its lease to lapse. (Redis
        # redelivering the message while the first still fetches means a second fetch; only one store lands.)
        ours = page.claimed_by.startswith(owner)
        if not (created or stale or ours):
            # Another website of this research is fetching the URL; it will move this one on.
            record_event(research_id, EventType.SCRAPING, reused)
            return None
        if not leased_by_insert:
            Page.objects.filter(pk=page.pk).update(claimed_at=timezone.now(), claimed_by=fetcher)
        record_event(research_id, EventType.SCRAPING, {"website_id": website.pk, "url": website.url})
    return page


def _claim_new_page(research_id: ResearchId, website: FailedWebsite, fetcher: str, run_round: int) -> Page | None:
    """The usual claim in one statement (PostgreSQL): a URL none of the research's websites had, and a website still
    waiting for its fetch, in a research still writing its tree. The page is inserted leased to `fetcher`, the
    website claimed and linked to it, and its event recorded, where the transaction of `_claim_page` took five round
    trips (its BEGIN and COMMIT, the insert, the claim, the events with the research's state). None where any of
    that does not hold (the URL's page exists, the website was taken or stopped, the research is over or gone):
    nothing was written, and the full claim decides.

    Its locks are taken in this order: the research row shared (FOR KEY SHARE, as every tree transaction's end
    takes it, which only an ending waits for), the website, then the page's insert. A page's other users lock the
    page first and then its websites, never a website not yet linked to it, and only such a website is taken here
    (`page_id IS NULL`): the only wait here (on another insert or update of the same URL's page) is then for a
    transaction that waits on no lock of this one's. A website already linked (a duplicate delivery of its fetch)
    goes to the full claim, which locks the page first: locked here, it deadlocked with the page's store, which
    updates the page and then locks its websites."""
    now = timezone.now()
    key = Research._meta.pk.get_db_prep_value(research_id, connection)
    with database.prepared_cursor() as cursor:
        cursor.execute(
            f"WITH research AS (SELECT id FROM {Research._meta.db_table} WHERE id = %(research)s "
            "AND status = ANY(%(writable)s) AND stop_reason = '' FOR KEY SHARE), "
            f"website AS (SELECT w.id FROM {Website._meta.db_table} w, research WHERE w.id = %(website)s "
            "AND w.status IN (%(pending)s, %(scraping)s) AND w.page_id IS NULL FOR UPDATE OF w), "
            f"page AS ({_INSERT_LEASED_PAGE} SELECT {_LEASED_PAGE_VALUES} FROM website "
            "ON CONFLICT (research_id, url, run_round) DO NOTHING RETURNING id), "
            f"claimed AS (UPDATE {Website._meta.db_table} SET status = %(scraping)s, page_id = page.id, "
            f"claimed_at = %(now)s, claimed_by = %(fetcher)s FROM page WHERE {Website._meta.db_table}.id = %(website)s "
            "RETURNING page.id), "
            f"event AS (INSERT INTO {Event._meta.db_table} (research_id, seq, type, data, created_at) "
            "SELECT %(research)s, NULL, %(event)s, %(data)s::jsonb, %(now)s FROM claimed) "
            "SELECT id FROM claimed",
            {
                "research": key,
                "writable": sorted(WRITABLE),
                "website": website.pk,
                "pending": WebsiteStatus.PENDING,
                "scraping": WebsiteStatus.SCRAPING,
                "url": website.url,
                "run_round": run_round,
                "fetching": PageStatus.FETCHING,
                "fetcher": fetcher,
                "now": now,
                "event": EventType.SCRAPING,
                "data": json.dumps({"website_id": website.pk, "url": website.url}),
            },
        )
        row = cursor.fetchone()
    if row is None:
        return None
    heartbeat.took_up()  # the claim replaced the task's reservation
    push.push_on_commit(research_id)  # committed already: pushed now
    return _leased_page(row[0], research_id, website.url, fetcher, now)


# A page inserted for its first website, leased to that website's fetch by the insert itself.
_INSERT_LEASED_PAGE = (
    f"INSERT INTO {Page._meta.db_table} (research_id, url, final_url, status, title, text, content_type, bytes_read, "
    "failure_reason, error, claimed_by, claimed_at, created_at, run_round)"
)
_LEASED_PAGE_VALUES = (
    "%(research)s, %(url)s, '', %(fetching)s, '', '', '', 0, '', '', %(fetcher)s, %(now)s, %(now)s, %(run_round)s"
)


def _leased_page(pk: int, research_id: ResearchId, url: str, fetcher: str, now: datetime) -> Page:
    """The page such an insert wrote, as an instance, without reading it back."""
    return Page(pk=pk, research_id=research_id, url=url, status=PageStatus.FETCHING, claimed_at=now, claimed_by=fetcher)


def _lock_page(research_id: ResearchId, url: str, fetcher: str, run_round: int) -> tuple[Page, bool]:
    """The research's page for the URL in this run, locked, and whether this transaction inserted it (then leased
    to `fetcher`)."""
    # The usual case, a URL no website of the research had: one statement instead of get_or_create's four
    # (select, savepoint, insert, release), which also takes the fetch's lease (no update of its own).
    now = timezone.now()
    with database.prepared_cursor() as cursor:
        cursor.execute(
            f"{_INSERT_LEASED_PAGE} VALUES ({_LEASED_PAGE_VALUES}) "
            "ON CONFLICT (research_id, url, run_round) DO NOTHING RETURNING id",
            {
                "research": Research._meta.pk.get_db_prep_value(research_id, connection),
                "url": url,
                "run_round": run_round,
                "fetching": PageStatus.FETCHING,
                "fetcher": fetcher,
                "now": now,
            },
        )
        row = cursor.fetchone()
    if row is not None:
        return _leased_page(row[0], research_id, url, fetcher, now), True
    # A URL the research had already (the insert above did nothing): the page, locked.
    return (
        Page.objects.select_for_update()
        .only("status", "claimed_at", "claimed_by", "title", "http_status", "content_type", "failure_reason", "error")
        .get_or_create(research_id=research_id, url=url, run_round=run_round)
    )


def _claim_website(website_id: int, page_id: int, fetcher: str) -> bool:
    with database.prepared_cursor() as cursor:
        cursor.execute(
            f"UPDATE {Website._meta.db_table} SET status = %s, page_id = %s, claimed_at = %s, claimed_by = %s "
            "WHERE id = %s AND status IN (%s, %s)",
            [
                WebsiteStatus.SCRAPING,
                page_id,
                timezone.now(),
                fetcher,
                website_id,
                WebsiteStatus.PENDING,
                WebsiteStatus.SCRAPING,
            ],
        )
        return cursor.rowcount > 0


def _fetch(url: str) -> tuple[FetchedPage | None, FetchError | None]:
    # A collection document is fetched through a freshly signed link (workers have no session); the stored URL
    # stays the page's identity (research/collection/documents.py).
    fetch_url = fetch_link(url)
    try:
        # Politeness: a few fetches at a time per host, across all workers.
        with host_slot(
            urlparse(url).netloc.lower(),
            settings.SCRAPE_PER_HOST_CONCURRENCY,
            lease_seconds=settings.SCRAPE_DEADLINE + 10,
            max_wait=settings.LEASE_SECONDS,
        ):
            fetched = fetch_page(
                fetch_url,
                allowed_private=settings.SCRAPE_ALLOWED_PRIVATE_HOSTS,
                max_bytes=settings.SCRAPE_MAX_BYTES,
                deadline=settings.SCRAPE_DEADLINE,
                max_pdf_pages=settings.SCRAPE_PDF_MAX_PAGES,
            )
        if fetched.final_url == fetch_url:
            fetched = replace(fetched, url=url, final_url=url)
        return fetched, None
    except FetchError as exc:
        log.info("fetch of %s failed: %s (%s)", url, exc.reason, exc.message)
        return None, exc


class Stored(NamedTuple):
    """What a page's store did for the website `keep`: whether it was handed to analysis (`claimed`), and the
    research's budget state as the store's transaction read it, where it read it (None: not read)."""

    claimed: bool
    state: BudgetState | None = None


def _store_page(
    research_id: ResearchId,
    page: Page,
    fetched: FetchedPage | None,
    error: FetchError | None,
    keep: int | None = None,
    claimed_by: str = QUEUED,
) -> Stored:
    """Store the fetched page (or its failure) and move on every website waiting on it; `keep`'s analysis is not
    queued but leased to `claimed_by`, its caller."""
    with tree_transaction(research_id):
        now = timezone.now()
        if fetched is not None:
            page.title, page.http_status = fetched.title[:1000], fetched.status_code
            page.content_type = fetched.content_type[:200]
            page.dated, page.standing = page_standing(page.url, page.title, fetched.text, fetched.published)
            if not _page_fetched(page, fetched, now):
                return Stored(False)  # a takeover finished it first
            return _fetched_to_analysis(research_id, page, keep, claimed_by)
        # The failure is conditional on the page still fetching, and locks it: it changes no page a takeover
        # finished first.
        assert error is not None
        page.failure_reason, page.error = error.reason[:40], error.message[:2000]
        page.http_status = error.status_code
        stored = Page.objects.filter(pk=page.pk, status=PageStatus.FETCHING).update(
            status=PageStatus.FAILED,
            failure_reason=page.failure_reason,
            error=page.error,
            http_status=page.http_status,
            fetched_at=now,
        )
        if not stored:
            return Stored(False)  # a takeover finished it first
        waiting = [
            Waiting(*row)
            for row in Website.objects.select_for_update()
            .filter(page=page, status=WebsiteStatus.SCRAPING)
            .order_by("pk")
            .values_list("pk", "url", "query_id")
        ]
        _fail(research_id, page, waiting)
        return Stored(False)


Waiting = FailedWebsite  # a website in `scraping` whose page this transaction settles


def _to_analysis(
    research_id: ResearchId, page: Page, websites: list[Waiting], keep: int | None, claimed_by: str = QUEUED
) -> bool:
    """The websites handed to analysis, each queued but `keep`, which is leased to `claimed_by`; whether `keep` was
    among them."""
    ids = [website.pk for website in websites]
    Website.objects.filter(pk__in=ids).update(
        status=WebsiteStatus.ANALYZING,
        # Handed on: the analysis task queued below may claim it.
        claimed_at=timezone.now(),
        claimed_by=Case(When(pk=keep, then=Value(claimed_by)), default=Value(QUEUED), output_field=TextField()),
        title=Case(When(title="", then=Value(page.title[:1000])), default=F("title"), output_field=TextField()),
        http_status=page.http_status,
        content_type=page.content_type,
    )
    return _handed_on(research_id, page, ids, keep, claimed_by)


def _handed_on(research_id: ResearchId, page: Page, ids: list[int], keep: int | None, claimed_by: str) -> bool:
    """Queue the analyses of the websites `ids` handed on, but `keep`'s (its analysis begins now where it is
    leased to a task); whether `keep` was handed on."""
    dispatch.ANALYZE.each_on_commit([pk for pk in ids if pk != keep], research_id)
    if keep not in ids:
        return False
    if claimed_by != QUEUED:
        analyze.record_started(research_id, keep, page.url)
    return True


def _page_fetched(page: Page, fetched: FetchedPage, now: datetime) -> bool:
    """The fetched page stored if it is still fetching, by a hand-written statement (PostgreSQL): the ORM compiled
    this update anew for every page. Its own statement, not a part of `_fetched_to_analysis`'s: the page's lock,
    taken here, waits for a website's claim of the page to commit, and the websites' read must begin after that
    (a statement reads the rows committed before it began) to move that website on too."""
    with database.prepared_cursor() as cursor:
        cursor.execute(
            f"UPDATE {Page._meta.db_table} SET status = %s, final_url = %s, title = %s, text = %s, http_status = %s, "
            "content_type = %s, bytes_read = %s, fetched_at = %s, dated = %s, standing = %s "
            "WHERE id = %s AND status = %s",
            [
                PageStatus.FETCHED,
                fetched.final_url,
                page.title,
                fetched.text,
                page.http_status,
                page.content_type,
                fetched.bytes_read,
                now,
                page.dated,
                page.standing,
                page.pk,
                PageStatus.FETCHING,
            ],
        )
        return cursor.rowcount > 0


def _fetched_to_analysis(research_id: ResearchId, page: Page, keep: int | None, claimed_by: str = QUEUED) -> Stored:
    """`_to_analysis` for every website waiting on the page, in one statement: locked in key order, moved on, and
    returned, each with the research's budget state (PostgreSQL): the state the analysis leased to `claimed_by` is
    admitted on, with no read of its own."""
    table = Website._meta.db_table
    with database.prepared_cursor() as cursor:
        cursor.execute(
            f"WITH moved AS (UPDATE {table} SET status = %s, claimed_at = %s, "
            "claimed_by = CASE WHEN id = %s THEN %s ELSE %s END, "
            "title = CASE WHEN title = '' THEN %s ELSE title END, http_status = %s, content_type = %s "
            f"WHERE id IN (SELECT id FROM {table} WHERE page_id = %s AND status = %s ORDER BY id FOR UPDATE) "
            f"RETURNING id) SELECT moved.id, state.* FROM moved, (SELECT {state_sql('r')} "
            f"FROM {Research._meta.db_table} r WHERE r.id = %s) AS state",
            [
                WebsiteStatus.ANALYZING,
                timezone.now(),
                keep,
                claimed_by,
                QUEUED,
                page.title[:1000],
                page.http_status,
                page.content_type,
                page.pk,
                WebsiteStatus.SCRAPING,
                Research._meta.pk.get_db_prep_value(research_id, connection),
            ],
        )
        rows = cursor.fetchall()
    claimed = _handed_on(research_id, page, sorted(row[0] for row in rows), keep, claimed_by)
    return Stored(claimed, BudgetState(*rows[0][1:]) if claimed else None)


def _fail(research_id: ResearchId, page: Page, websites: list[Waiting]) -> None:
    progress.websites_failed(
        research_id,
        websites,
        page.failure_reason,
        page.error,
        from_statuses=[WebsiteStatus.SCRAPING],
        http_status=page.http_status,
    )


def scrape_failed(website_id: int, error: BaseException) -> None:
    """An unexpected error while scraping (not a page failure): fail this website; the query goes on."""
    progress.website_failed(
        website_id, "scrape_error", str(error), from_statuses=[WebsiteStatus.PENDING, WebsiteStatus.SCRAPING]
    )
