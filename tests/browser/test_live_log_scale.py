"""The live log of a large research stays light and still: a 10x5 (810 queries, 5,670 websites) running while
hundreds of events and memory items arrive keeps the page under a bounded number of DOM nodes, and its content
does not jump about (cumulative layout shift, from Chromium's layout-shift entries)."""

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from research.models import Document, MemoryKind, Research, ResearchStatus, SerpQuery, Website
from research.record.events import record_event
from tests.support.browser import LAYOUT_SHIFTS, MAX_LAYOUT_SHIFT
from tests.support.factories import build_tree
from tests.support.logins import sign_in
from workers.pipeline.memory import NewItem, store

pytestmark = pytest.mark.django_db(transaction=True)

# Elements in the whole page (header, sidebar, form and live log) of a 10x5 research with 400 events and 150
# memory items: 10 query cards, the newest EVENTS_SHOWN (200) events, the memory panel folded to its counts.
MAX_DOM_NODES = 4000


def test_a_10x5_live_log_stays_under_a_bounded_dom_and_does_not_shift(daphne, open_page, user) -> None:
    # given a running 10x5 research with its whole tree (as the workers leave it near the end)
    research = build_tree(user, 10, 5)
    Document.objects.filter(research=research).delete()
    Research.objects.filter(pk=research.pk).update(
        status=ResearchStatus.RUNNING, started_at=timezone.now(), pending_queries=1, finished_at=None
    )
    assert SerpQuery.objects.filter(research=research).count() == 810
    websites = list(Website.objects.filter(research=research).order_by("pk").values("pk", "query_id", "url")[:400])
    watched = open_page()
    page = watched.page
    sign_in(page, daphne.url, "alice", f"/research/{research.pk}/")
    expect(page.locator("#tree > li.q")).to_have_count(10, timeout=30_000)
    page.evaluate(LAYOUT_SHIFTS)
    # when 400 events and 150 memory items arrive while alice watches
    for start in range(0, 400, 50):
        for website in websites[start : start + 50]:
            record_event(
                research.pk,
                "analyzed_a_website",
                {"website_id": website["pk"], "url": website["url"], "facts": 1, "quotes_dropped": 0},
            )
        batch = websites[start // 50 * 19 : start // 50 * 19 + 19]
        store(
            research.pk,
            batch[0]["query_id"],
            [
                NewItem(MemoryKind.INSIGHT, f"Insight {start}-{i}: output falls by {i} percent.", [w["pk"]])
                for i, w in enumerate(batch)
            ],
            [],
        )
    last = Research.objects.filter(pk=research.pk).values_list("last_event_seq", flat=True).get()
    expect(page.locator(f"#events li.event[data-seq='{last}']")).to_have_count(1, timeout=30_000)
    # then the page holds the newest events only, the memory folded to one line of counts, the top queries only
    expect(page.locator("#events li.event")).to_have_count(200)
    expect(page.locator(".events-more")).to_be_visible()
    expect(page.locator("#tree li.q")).to_have_count(10)
    expect(page.locator("#memory summary")).to_contain_text("152 insights")
    nodes = page.evaluate("() => document.getElementsByTagName('*').length")
    shift = page.evaluate("() => window.__shift")
    log_shift = page.evaluate("() => window.__logShift")
    print(f"10x5 live log: {nodes} DOM nodes, layout shift {shift:.4f}, inside the events box {log_shift:.4f}")
    assert nodes <= MAX_DOM_NODES, nodes
    # the box follows the newest row (which is why its own rows move)
    box = page.locator("#events-box")
    assert box.evaluate("(b) => b.scrollHeight - b.scrollTop - b.clientHeight") < 40
    assert shift < MAX_LAYOUT_SHIFT, page.evaluate("() => window.__shifts")
    # and a sub-tree opens on request, its websites when their list is opened
    first = page.locator("#tree > li.q").first
    first.locator(".q-children-toggle").click()
    expect(first.locator(":scope > ul.tree-children > li.q")).to_have_count(5)
    assert watched.errors == []
    # earlier events come on request
    page.click(".events-more")
    expect(page.locator("#events li.event")).to_have_count(400)
