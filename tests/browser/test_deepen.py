"""Dig deeper from the page: the form under a completed report adds a branch of the user's own, and an open
question of the research memory offers the same."""

import pytest
from playwright.sync_api import expect

from devtools.processes import wait_until
from research.models import MemoryItem, MemoryKind, Research, SerpQuery
from tests.support.factories import build_tree
from tests.support.logins import sign_in

pytestmark = pytest.mark.django_db(transaction=True)


def test_dig_deeper_from_the_report_and_from_an_open_question(daphne, open_page, user, no_queued_steps) -> None:
    # given two completed researches, the second with an open question in its memory
    first = build_tree(user, 2, 1)
    second = build_tree(user, 2, 1)
    gap = MemoryItem.objects.create(research=second, kind=MemoryKind.GAP, text="How cold is too cold?", key="g")
    watched = open_page()
    page = watched.page
    sign_in(page, daphne.url, "alice", f"/research/{first.pk}/")
    # when alice asks for a branch of her own under the first report
    form = page.locator("#deepen")
    expect(form).to_be_visible(timeout=30_000)
    page.fill("#deepen-query", "defrost cycles below -20 C")
    page.fill("#deepen-objective", "How often they defrost, and what it costs")
    form.get_by_role("button", name="Dig deeper").click()
    # then the branch is added (round 1), the research runs again and the page shows the live log without the form
    wait_until(lambda: SerpQuery.objects.filter(research=first, round=1).exists(), timeout=15, message="the branch")
    branch = SerpQuery.objects.get(research=first, round=1)
    assert (branch.query, branch.objective) == (
        "defrost cycles below -20 C",
        "How often they defrost, and what it costs",
    )
    expect(page.locator("#tab-log")).to_have_attribute("aria-selected", "true", timeout=15_000)
    # The research runs again for its next report version. A worker of the test session (up since an earlier test)
    # may run so small a branch through before a push shows it running, so the log, not the status, is checked.
    assert Research.objects.get(pk=first.pk).report_version == 2
    expect(page.locator("#events")).to_contain_text("Digging deeper: defrost cycles below -20 C", timeout=15_000)
    # when she opens the second research's memory and digs into its open question
    page.goto(f"{daphne.url}/research/{second.pk}/")
    page.click("#tab-log")
    page.locator("#memory summary").click()
    page.get_by_role("button", name=f"Dig deeper: {gap.text}").click()
    # then a branch looks into it
    wait_until(lambda: SerpQuery.objects.filter(research=second, round=1).exists(), timeout=15, message="the gap")
    assert SerpQuery.objects.get(research=second, round=1).query == gap.text
    assert Research.objects.get(pk=second.pk).status == "running"
    assert watched.errors == []
