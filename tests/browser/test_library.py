"""The library in the browser: the sidebar searched, a research renamed and deleted, a cancelled research's report
asked for, and the start form's checks naming the field at fault."""

import pytest
from playwright.sync_api import expect

from devtools.processes import wait_until
from research.models import Research, ResearchStatus
from tests.support.browser import answer_one_question, screenshot
from tests.support.logins import sign_in
from tests.support.seed import seed_research

pytestmark = pytest.mark.django_db(transaction=True)


def test_search_rename_and_delete_from_the_library(daphne, open_page, user) -> None:
    # given alice's finished researches and one under way
    heat = seed_research(user, "Heat pumps in Nordic winters", "completed", report=True)
    seed_research(user, "Hydrogen steel making costs", "completed")
    running = seed_research(user, "Grid-scale sodium batteries", "running")
    watched = open_page(accept_dialogs=True)
    page = watched.page
    sign_in(page, daphne.url, "alice", "/")
    items = page.locator("#sidebar a.item")
    expect(items).to_have_count(3)
    # each past item shows the day it was made, and its whole title on hover
    first = page.locator(f"#sidebar a[data-id='{heat.pk}']")
    expect(first.locator(".item-date")).not_to_be_empty()
    assert first.get_attribute("title").startswith("Heat pumps in Nordic winters (")
    # when she searches the library
    page.fill("#sidebar-search", "heat NORDIC")
    expect(items).to_have_count(1)
    expect(first).to_be_visible()
    page.fill("#sidebar-search", "fusion")
    expect(items).to_have_count(0)
    expect(page.locator("#sidebar-no-match")).to_be_visible()
    page.fill("#sidebar-search", "")
    expect(items).to_have_count(3)
    # a research under way offers no delete
    first.click()
    expect(page.locator("#r-title")).to_have_text("Heat pumps in Nordic winters")
    expect(page.locator("#delete-button")).to_be_visible()
    page.locator(f"#sidebar a[data-id='{running.pk}']").click()
    expect(page.locator("#r-title")).to_have_text("Grid-scale sodium batteries")
    expect(page.locator("#delete-button")).to_be_hidden()
    # when she renames one; an empty title is refused, with the reason
    page.locator(f"#sidebar a[data-id='{heat.pk}']").click()
    page.click("#rename-button")
    expect(page.locator("#rename-input")).to_be_focused()
    page.fill("#rename-input", "   ")
    page.click("#rename-form button[type=submit]")
    expect(page.locator("#rename-error")).to_contain_text("must not be empty")
    page.fill("#rename-input", "Nordic heat pumps, measured")
    page.keyboard.press("Enter")
    # then the page, the sidebar and the database have the new title
    expect(page.locator("#r-title")).to_have_text("Nordic heat pumps, measured")
    expect(page.locator("#rename-form")).to_be_hidden()
    expect(first.locator(".item-title")).to_have_text("Nordic heat pumps, measured")
    assert Research.objects.get(pk=heat.pk).title == "Nordic heat pumps, measured"
    # when she deletes it (and confirms)
    page.click("#delete-button")
    # then it is gone from the page, the sidebar and the database, and she is back at the start
    expect(page).to_have_url(f"{daphne.url}/")
    expect(items).to_have_count(2)
    assert not Research.objects.filter(pk=heat.pk).exists()
    assert any("cannot be undone" in dialog for dialog in watched.dialogs)
    # and Back to it says at once that it is gone, not "Reconnecting…" for seconds
    page.go_back()
    expect(page).to_have_url(f"{daphne.url}/research/{heat.pk}/")
    expect(page.locator("#r-connection")).to_have_text("Not found", timeout=2_000)
    expect(page.locator("#r-notice")).to_contain_text("does not exist")
    # (the refused empty title, and the deleted research's address and socket, are the failed requests the browser
    # logs)
    expected = ("400 (Bad Request)", "404 (Not Found)", "Unexpected response code: 403")
    assert [error for error in watched.errors if not any(e in error for e in expected)] == []


def test_a_cancelled_research_offers_a_report_of_what_it_found(daphne, open_page, user, no_queued_steps) -> None:
    # given alice's research cancelled after it had analysed pages (seeded with findings, no report)
    research = seed_research(user, "Heat pumps in Nordic winters", "cancelled")
    watched = open_page()
    page = watched.page
    sign_in(page, daphne.url, "alice", f"/research/{research.pk}/")
    button = page.locator("#report-found")
    expect(button).to_be_visible()
    # when she asks for it
    button.click()
    # then the research is taken up again to write a partial report from its findings, and the page says why
    expect(page.locator("#events li.event[data-type=report_requested]")).to_have_count(1)
    expect(page.locator("#r-partial")).to_contain_text("cancelled", ignore_case=True)
    research.refresh_from_db()
    assert research.stop_reason == "cancelled" and research.partial
    assert research.status in (ResearchStatus.RUNNING, ResearchStatus.REPORTING, ResearchStatus.COMPLETED)
    assert watched.errors == []


def test_the_start_form_marks_every_field_at_fault(daphne, open_page, user) -> None:
    watched = open_page()
    page = watched.page
    sign_in(page, daphne.url, "alice", "/")
    error = page.locator("#prompt-form .form-error")
    # a one-letter request is refused, the request field marked and focused
    page.fill("#prompt", "x")
    page.click("#ask-button")
    expect(error).to_contain_text("Say a little more")
    expect(page.locator("#prompt")).to_have_attribute("aria-invalid", "true")
    expect(page.locator("#prompt")).to_be_focused()
    # 2.5 questions are refused rather than read as 2, and the mark moves to that field
    page.fill("#prompt", "How do heat pumps perform in Nordic winters?")
    page.fill("#num-questions", "2.5")
    page.click("#ask-button")
    expect(error).to_contain_text("whole number")
    expect(page.locator("#num-questions")).to_have_attribute("aria-invalid", "true")
    assert page.locator("#prompt").get_attribute("aria-invalid") is None
    # both wrong at once: both said, each beside its field, the first focused
    page.fill("#prompt", "x")
    page.click("#ask-button")
    expect(error).to_contain_text("2 fields need a change")
    for field, words in (("prompt", "Say a little more"), ("num-questions", "whole number")):
        expect(page.locator(f"#{field}")).to_have_attribute("aria-invalid", "true")
        expect(page.locator(f"#{field}")).to_have_attribute("aria-describedby", f"{field}-error")
        expect(page.locator(f"#{field}-error")).to_contain_text(words)
    expect(page.locator("#prompt")).to_be_focused()
    assert watched.errors == []


def test_going_back_from_the_questions_leaves_no_draft_behind(daphne, workers, research_model, open_page, user) -> None:
    # given alice's follow-up questions, asked for a request she then wants to change
    watched = open_page()
    page = watched.page
    sign_in(page, daphne.url, "alice")
    answer_one_question(page, 2, 1)
    assert Research.objects.filter(owner=user).count() == 1
    # when she goes back to her request, and asks again with other words
    page.click("#back-button")
    expect(page.locator("#prompt")).to_be_focused()
    wait_until(lambda: not Research.objects.filter(owner=user).exists(), timeout=10, message="the draft deleted")
    page.fill("#prompt", "How do heat pumps perform in Nordic winters, measured in the field?")
    page.click("#ask-button")
    expect(page.locator("#questions textarea")).to_have_count(1)
    # then only the research she is answering is in the sidebar and the database: no pile of "Not started"
    assert Research.objects.filter(owner=user).count() == 1
    expect(page.locator(".sidebar-nav a.item")).to_have_count(1)
    assert watched.errors == []


def test_every_problem_of_the_settings_is_said_beside_its_field(
    daphne, workers, research_model, open_page, user
) -> None:
    # given alice's answered questions, and settings wrong in three places
    watched = open_page()
    page = watched.page
    sign_in(page, daphne.url, "alice")
    answer_one_question(page, 0, 99)
    page.fill("#budget-tokens", "-5")
    # when she starts
    page.click("#start-button")
    # then each problem is said beside its field, which is marked and described by it, and the first is focused
    expect(page.locator("#answers-form .form-error")).to_contain_text("3 settings need a change")
    notes = page.locator("#answers-form .field-error")
    expect(notes).to_have_count(3)
    for field in ("breadth", "depth", "budget-tokens"):
        expect(page.locator(f"#{field}")).to_have_attribute("aria-invalid", "true")
        expect(page.locator(f"#{field}")).to_have_attribute("aria-describedby", f"{field}-error")
        expect(page.locator(f"#{field}-error")).to_be_visible()
    expect(page.locator("#breadth")).to_be_focused()
    assert page.locator("#breadth").evaluate("el => getComputedStyle(el).borderColor") == "rgb(180, 35, 24)"
    screenshot(page, "form-errors-by-field", "#answers-form")
    # when she fixes two of them, the one left is said alone, and nothing was started meanwhile
    page.fill("#breadth", "2")
    page.fill("#depth", "1")
    page.click("#start-button")
    expect(notes).to_have_count(0)
    expect(page.locator("#answers-form .form-error")).to_contain_text("budget")
    expect(page.locator("#budget-tokens")).to_have_attribute("aria-invalid", "true")
    assert page.locator("#breadth").get_attribute("aria-invalid") is None
    assert Research.objects.get(owner=user).status == ResearchStatus.AWAITING_ANSWERS
    assert watched.errors == []
