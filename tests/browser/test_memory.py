"""The research memory panel in the browser: insights, open questions and contradictions with links to the
websites they rest on, updated live as the memory step stores new items."""

import pytest
from playwright.sync_api import expect

from research.models import MemoryItem, MemoryKind, Website
from tests.support.logins import sign_in
from tests.support.seed import seed_research
from workers.pipeline.memory import NewItem, store

pytestmark = pytest.mark.django_db(transaction=True)

HOSTILE = 'Pumps <img src=x onerror="window.pwned=1"> lose heat.'


def test_memory_panel_links_items_to_their_websites_and_updates_live(daphne, open_page, user) -> None:
    # given a running research whose memory holds an insight (with markup in its text) and an open gap
    research = seed_research(user, "Heat pumps in Nordic winters", "running")
    first, second = Website.objects.filter(research=research, status="analyzed").order_by("pk")[:2]
    store(research.pk, first.query_id, [NewItem(MemoryKind.INSIGHT, HOSTILE, [first.pk])], [])
    store(research.pk, first.query_id, [NewItem(MemoryKind.GAP, "How loud are they at night?", [])], [])
    watched = open_page()
    page = watched.page
    # when alice opens it
    sign_in(page, daphne.url, "alice", f"/research/{research.pk}/")
    memory = page.locator("#memory")
    # then the panel shows the insight as text, linked to its website, and the open question
    expect(memory).to_be_visible()
    insight = memory.locator(".memory-insights li")
    expect(insight).to_have_count(1)
    expect(insight.locator("span").first).to_have_text(HOSTILE)
    expect(insight.locator("a.memory-source")).to_have_attribute("href", first.url)
    expect(memory.locator(".memory-gaps li")).to_have_text(["How loud are they at night?"])
    assert page.evaluate("() => window.pwned") is None and memory.locator("img").count() == 0
    # when the memory step stores a contradiction between two websites (and its event is pushed)
    store(
        research.pk,
        second.query_id,
        [NewItem(MemoryKind.CONTRADICTION, "Field COP differs between the two trials.", [first.pk, second.pk])],
        [],
    )
    # then it appears without a reload, citing both sides, and the log says what changed
    contradiction = memory.locator(".memory-contradictions li")
    expect(contradiction).to_contain_text("Field COP differs between the two trials.")
    links = contradiction.locator("a.memory-source")
    expect(links).to_have_count(2)
    assert {links.nth(0).get_attribute("href"), links.nth(1).get_attribute("href")} == {first.url, second.url}
    expect(page.locator("#events li.event").last).to_contain_text("Memory updated: 0 insights, 0 open questions")
    assert MemoryItem.objects.filter(research=research).count() == 3
    assert watched.errors == []
