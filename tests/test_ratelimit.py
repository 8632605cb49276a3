"""The limits shared through Redis, against this run's real Redis: per-host scraping politeness, and what giving
up a wait means."""

import threading
import time
import uuid

import pytest

from research.models import Page, PageStatus, QueryStatus, SerpQuery, Website, WebsiteStatus
from tests.support.factories import running_research
from workers.clients.fetch import fetch_page
from workers.clients.ratelimit import host_slot, wait_for_rate
from workers.errors import TransientError
from workers.pipeline.scrape import scrape_website


def test_host_slot_caps_concurrent_fetches_of_one_host(fakes, fake_web) -> None:
    # given six threads (as from several workers) fetching a page that takes 0.5 s, two at a time per host
    url = fake_web.add_page("/polite", fake_web.page_html("polite"), delay=0.5)
    host = f"{fake_web.host_port}-{uuid.uuid4().hex}"  # a key of this test's own
    fetched: list[str] = []

    def fetch() -> None:
        with host_slot(host, 2, lease_seconds=30, max_wait=30):
            page = fetch_page(url, allowed_private=frozenset({fake_web.host_port}), deadline=10)
        fetched.append(page.title)

    threads = [threading.Thread(target=fetch) for _ in range(6)]
    # when
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    # then all were fetched, in three rounds of two: the fake never answered more than two at once
    assert fetched == ["Polite"] * 6
    assert fake_web.count("/polite") == 6
    assert fake_web.max_in_flight == 2
    assert time.monotonic() - started >= 1.5


def test_slot_of_a_dead_holder_expires(fakes) -> None:
    # given the only slot of a host taken by a holder that died before giving it back (its `finally` never runs)
    host = f"dead-holder-{uuid.uuid4().hex}.example"
    dead = host_slot(host, 1, lease_seconds=1.5, max_wait=1)
    dead.__enter__()
    # when another worker asks for it, it is refused while the lease lasts...
    with pytest.raises(TransientError), host_slot(host, 1, lease_seconds=10, max_wait=0.5):
        pass
    # ...and granted once the lease has run out
    started = time.monotonic()
    with host_slot(host, 1, lease_seconds=10, max_wait=5):
        waited = time.monotonic() - started
    assert 0.5 < waited < 2.0


def test_rate_limit_wait_given_up_is_transient(fakes) -> None:
    # given a service whose one call a second was just taken
    service = f"busy-{uuid.uuid4().hex}"
    wait_for_rate(service, 1)
    # when another call may wait no more than 0.2 s
    with pytest.raises(TransientError) as raised:
        wait_for_rate(service, 1, max_wait=0.2)
    # then it gives up as a transient error (the task is retried), saying when a call would fit
    assert 0 < raised.value.retry_after <= 1.0


@pytest.mark.django_db(transaction=True)
def test_scrape_that_finds_no_host_slot_is_retried_not_failed(user, fakes, fake_web, published, settings) -> None:
    # given a website whose host's only slot is held by another worker for longer than a scrape may wait
    settings.SCRAPE_PER_HOST_CONCURRENCY = 1
    settings.LEASE_SECONDS = 1  # how long a scrape waits for a slot
    research = running_research(user, breadth=1, depth=1)
    query = SerpQuery.objects.create(
        research=research, depth=1, position=0, query="q", objective="o", status=QueryStatus.SCRAPING
    )
    url = fake_web.page_url("busy-host")
    website = Website.objects.create(research=research, query=query, position=0, url=url)
    held = host_slot(fake_web.host_port, 1, lease_seconds=30, max_wait=1)
    held.__enter__()
    # when the scrape runs, it gives up with a transient error (what Celery retries), failing nothing
    try:
        with pytest.raises(TransientError):
            scrape_website(website.pk)
    finally:
        held.__exit__(None, None, None)
    assert Website.objects.get(pk=website.pk).status == WebsiteStatus.SCRAPING
    assert Page.objects.get(research=research, url=url).claimed_at is None  # the page is free to take over
    # and its retry, once the slot is free, fetches the page and hands the website on to analysis
    scrape_website(website.pk)
    assert Page.objects.get(research=research, url=url).status == PageStatus.FETCHED
    assert Website.objects.get(pk=website.pk).status == WebsiteStatus.ANALYZING
    assert published == ["workers.tasks.analyze_website_task"]


@pytest.mark.django_db
def test_a_late_heartbeat_never_leases_again_a_page_its_fetch_gave_up(user, fake_web) -> None:
    from workers.pipeline.heartbeat import Heartbeat

    # given a page its fetch holds, then gives up (no host slot: its lease cleared for the retry)
    research = running_research(user, breadth=1, depth=1)
    page = Page.objects.create(research=research, url=fake_web.page_url("given-up"), status=PageStatus.FETCHING)
    heartbeat = Heartbeat()
    heartbeat.hold(Page, page.pk)
    Page.objects.filter(pk=page.pk).update(claimed_at=None)
    # when a beat that read the held rows before the release renews them
    renewed = heartbeat.beat()
    heartbeat.release(Page, page.pk)
    # then the page stays free for the retry to take at once
    assert renewed == 0
    assert Page.objects.get(pk=page.pk).claimed_at is None
