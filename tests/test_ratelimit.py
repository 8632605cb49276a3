"""The limits shared through Redis, against this run's real Redis: per-host scraping politeness."""

import threading
import time
import uuid

import pytest

from workers.clients.fetch import fetch_page
from workers.clients.ratelimit import host_slot


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
    with pytest.raises(TimeoutError), host_slot(host, 1, lease_seconds=10, max_wait=0.5):
        pass
    # ...and granted once the lease has run out
    started = time.monotonic()
    with host_slot(host, 1, lease_seconds=10, max_wait=5):
        waited = time.monotonic() - started
    assert 0.5 < waited < 2.0
