"""A shared report in the browser, without a session: the report of that version with its sources and quotes,
nothing else of the owner's, accessible; the owner's Share page makes and revokes links; a revoked or expired link
is the app's 404 page. The tokens and schedule pages, which serve the same other tools, are checked here too."""

from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from research.models import Schedule, ShareLink
from tests.support.accessibility import VIEWPORTS, assert_accessible
from tests.support.browser import screenshot
from tests.support.logins import sign_in
from tests.support.seed import QUOTE_ONE, seed_research

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize("viewport", VIEWPORTS)
def test_a_share_link_shows_the_report_without_a_session_until_revoked(
    daphne, open_page, user, other_user, fake_web, viewport
) -> None:
    # given alice's completed research, and another of hers that is not shared
    research = seed_research(user, "Heat pumps in Nordic winters", "completed", page_url=fake_web.page_url, report=True)
    seed_research(user, "Private hydrogen notes", "completed")
    owner = open_page(viewport).page
    sign_in(owner, daphne.url, "alice", f"/research/{research.pk}/")
    # when she shares it from the research's Share button, a link that never expires
    owner.click("#share-button")
    expect(owner.locator("h1")).to_contain_text("Share")
    owner.get_by_role("button", name="Make link").click()
    url = owner.locator(".share-url").first.input_value()
    assert "/share/" in url
    assert_accessible(owner)
    screenshot(owner, f"share-page-{viewport['width']}")
    # then anyone with the link, signed in or not, reads the report with its sources and quotes
    reader = open_page(viewport).page
    reader.goto(url)
    body = reader.locator("#shared-body")
    expect(body.locator("h1")).to_have_text("Heat pumps in Nordic winters")
    expect(body.locator("h2", has_text="Sources")).to_be_visible()
    expect(body).to_contain_text(QUOTE_ONE)
    expect(reader.locator(".shared-banner")).to_contain_text("read-only, version 1")
    # and nothing else of alice's: no sidebar, no other research, no link into the app but its home
    assert "Private hydrogen notes" not in reader.content()
    expect(reader.locator("#sidebar")).to_have_count(0)
    app_links = reader.locator("a[href^='/']").evaluate_all("links => links.map((a) => a.getAttribute('href'))")
    assert app_links == [], app_links
    assert_accessible(reader)
    screenshot(reader, f"shared-report-{viewport['width']}")
    # when alice revokes it, the link is the app's 404 at once
    owner.get_by_role("button", name="Revoke the link to version 1").click()
    expect(owner.locator(".share-url")).to_have_count(0)
    response = reader.goto(url)
    assert response is not None and response.status == 404
    expect(reader.locator("h1")).to_have_text("Not found")
    assert_accessible(reader)


def test_an_expired_share_link_is_not_found(daphne, open_page, user, fake_web) -> None:
    research = seed_research(user, "Heat pumps in Nordic winters", "completed", page_url=fake_web.page_url, report=True)
    link = ShareLink.objects.create(
        research=research, version=1, key="k" * 32, expires_at=timezone.now() + timedelta(minutes=5)
    )
    page = open_page().page
    assert page.goto(f"{daphne.url}/share/{link.key}/").status == 200
    expect(page.locator(".shared-banner")).to_contain_text("this link stops working")
    ShareLink.objects.filter(pk=link.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert page.goto(f"{daphne.url}/share/{link.key}/").status == 404


@pytest.mark.parametrize("viewport", VIEWPORTS)
def test_the_tokens_page_shows_a_new_token_once_and_revokes_it(daphne, open_page, user, viewport) -> None:
    page = open_page(viewport).page
    sign_in(page, daphne.url, "alice")
    if page.locator("#sidebar-toggle").is_visible():  # on a phone the sidebar opens from the top bar
        page.click("#sidebar-toggle")
    page.get_by_role("link", name="API tokens").click()
    expect(page.locator("h1")).to_have_text("API tokens")
    page.get_by_label("Name").fill("laptop CLI")
    page.get_by_label("Read-only", exact=False).check()
    page.get_by_role("button", name="Make token").click()
    secret = page.get_by_label("Your token (read-only)").input_value()
    assert secret.startswith("drt_")
    expect(page.locator("#token-list")).to_contain_text("read-only")
    assert_accessible(page)
    screenshot(page, f"tokens-page-{viewport['width']}")
    page.goto(f"{daphne.url}/tokens/")  # shown once: the page again shows the list, not the secret
    assert secret not in page.content()
    page.get_by_role("button", name="Revoke laptop CLI").click()
    expect(page.locator("#token-list li")).to_have_count(0)


@pytest.mark.parametrize("viewport", VIEWPORTS)
def test_the_schedule_pages_set_pause_and_end_a_schedule(daphne, open_page, user, fake_web, viewport) -> None:
    # given alice's completed research
    research = seed_research(user, "Heat pumps in Nordic winters", "completed", page_url=fake_web.page_url, report=True)
    page = open_page(viewport).page
    sign_in(page, daphne.url, "alice", f"/research/{research.pk}/")
    # when she opens its Schedule page from the research and gives a cron line it cannot read
    page.click("#schedule-button")
    expect(page.locator("h1")).to_contain_text("on a schedule")
    page.select_option("#schedule-every", "cron")
    page.fill("#schedule-cron", "0 25 * * *")
    page.get_by_role("button", name="Schedule").click()
    # then the page says why, beside the field, and keeps what she wrote
    expect(page.locator("#schedule-error")).to_contain_text("not a cron line")
    expect(page.locator("#schedule-cron")).to_have_value("0 25 * * *")
    assert_accessible(page)
    # when she gives one it reads, with a webhook
    page.fill("#schedule-cron", "0 6 * * mon")
    page.fill("#schedule-webhook", "https://hooks.example.com/research")
    page.get_by_role("button", name="Schedule").click()
    # then the schedule shows its next run (a Monday, 06:00 UTC) and the key that signs the webhook's calls
    expect(page.locator("#current-schedule")).to_contain_text("0 6 * * mon")
    expect(page.locator("#next-run")).to_contain_text("06:00 UTC")
    expect(page.get_by_label("Webhook signing key")).to_have_value(Schedule.objects.get().secret)
    assert_accessible(page)
    screenshot(page, f"schedule-page-{viewport['width']}")
    # and the Schedules page lists it, to pause and end
    page.goto(f"{daphne.url}/schedules/")
    row = page.locator("#schedule-list li")
    expect(row).to_contain_text("Heat pumps in Nordic winters")
    assert_accessible(page)
    page.get_by_role("button", name="Pause the schedule of Heat pumps in Nordic winters").click()
    expect(row).to_contain_text("paused")
    page.get_by_role("button", name="End the schedule of Heat pumps in Nordic winters").click()
    expect(page.locator("#schedule-list li")).to_have_count(0)
    expect(page.locator("main")).to_contain_text("No research runs on a schedule.")
