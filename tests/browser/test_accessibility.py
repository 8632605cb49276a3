"""Accessibility (WCAG 2.2 AA) in the browser: axe-core on every page and state of the UI, on a desktop and a
phone; a research started, its tabs switched and its report reached with the keyboard only; and the phone layout
(nothing wider than the screen, nothing covering the form's buttons, citations big enough to tap).

axe-core comes bundled in the `axe-playwright-python` package (requirements/dev.txt): nothing is downloaded here."""

from __future__ import annotations

import re
from datetime import timedelta
from urllib.parse import urlencode

import pytest
from django.utils import timezone
from playwright.sync_api import Page, expect

from research.collection.documents import store_document
from research.collection.readers import ParsedDocument
from research.models import AnswerStatus, AskedQuestion, DocumentOrigin, Research, ResearchStatus, SerpQuery
from research.text.links import link_title
from tests.support.accessibility import VIEWPORTS, assert_accessible
from tests.support.browser import PHONE, answer_one_question, screenshot
from tests.support.logins import PASSWORD, sign_in
from tests.support.seed import QUOTE_ONE, seed_research

pytestmark = pytest.mark.django_db(transaction=True)

# --- axe-core on every page ---------------------------------------------------------------------------------


@pytest.mark.parametrize("viewport", VIEWPORTS)
def test_login_page_is_accessible(daphne, open_page, viewport) -> None:
    watched = open_page(viewport)
    page = watched.page
    page.goto(daphne.url + "/accounts/login/")
    expect(page.locator("h1")).to_have_text("Sign in")
    assert_accessible(page)
    # and with the error of a wrong password shown
    page.fill("#id_username", "nobody")
    page.fill("#id_password", "wrong-password")
    page.click("button[type=submit]")
    expect(page.locator(".form-error")).to_be_visible()
    assert_accessible(page)


@pytest.mark.parametrize("viewport", VIEWPORTS)
def test_empty_home_and_the_prompt_step_are_accessible(daphne, open_page, user, viewport) -> None:
    watched = open_page(viewport)
    page = watched.page
    sign_in(page, daphne.url, "alice")
    # once the sidebar has its (empty) list
    page.wait_for_function("() => !document.getElementById('sidebar-empty').hidden")
    assert_accessible(page)
    # step 1 with its error shown: an empty request is refused in the form
    page.click("#ask-button")
    expect(page.locator("#prompt-form .form-error")).to_be_visible()
    page.fill("#prompt", "How do heat pumps perform in Nordic winters?")
    assert_accessible(page)
    if viewport == PHONE:
        # the drawer, opened
        page.click("#sidebar-toggle")
        expect(page.locator("#sidebar")).to_be_visible()
        assert_accessible(page)
    assert watched.errors == []


@pytest.mark.parametrize("viewport", VIEWPORTS)
def test_home_with_research_in_the_sidebar_is_accessible(daphne, open_page, user, viewport) -> None:
    now = timezone.now()
    seed_research(user, "Heat pumps in Nordic winters", "completed", now)
    seed_research(user, "Grid-scale sodium batteries", "failed", now - timedelta(days=3))
    seed_research(user, "Small modular reactors", "cancelled", now - timedelta(days=12))
    seed_research(user, "Hydrogen steel making costs", "running", now)
    watched = open_page(viewport)
    page = watched.page
    sign_in(page, daphne.url, "alice")
    expect(page.locator("#sidebar a.item")).to_have_count(4)
    if viewport == PHONE:
        page.click("#sidebar-toggle")
        expect(page.locator("#sidebar")).to_be_visible()
    assert_accessible(page)
    assert watched.errors == []


@pytest.mark.parametrize("viewport", VIEWPORTS)
def test_the_answers_step_is_accessible(daphne, workers, research_model, open_page, user, viewport) -> None:
    watched = open_page(viewport)
    page = watched.page
    sign_in(page, daphne.url, "alice")
    answer_one_question(page, 2, 1)
    # with every optional field shown
    page.select_option("#mode", "adaptive")
    page.select_option("#report-length", "words")
    expect(page.locator("#min-depth")).to_be_visible()
    expect(page.locator("#report-words")).to_be_visible()
    assert_accessible(page)
    # and with an error
    page.fill("#breadth", "0")
    page.click("#start-button")
    expect(page.locator("#answers-form .form-error")).to_be_visible()
    assert_accessible(page)
    assert watched.errors == []


@pytest.mark.parametrize("viewport", VIEWPORTS)
def test_the_live_log_is_accessible(daphne, open_page, user, viewport) -> None:
    research = seed_research(user, "Hydrogen steel making costs", "running")
    watched = open_page(viewport)
    page = watched.page
    sign_in(page, daphne.url, "alice", f"/research/{research.pk}/")
    expect(page.locator("#r-connection")).to_have_text("Live")
    expect(page.locator("#tree .site").first).to_be_visible()
    expect(page.locator("#events li.event").first).to_be_visible()
    assert_accessible(page)
    assert watched.errors == []


@pytest.mark.parametrize("viewport", VIEWPORTS)
def test_the_report_is_accessible(daphne, open_page, user, viewport) -> None:
    research = seed_research(user, "Heat pumps in Nordic winters", "completed", report=True)
    seed_conversation(research)
    watched = open_page(viewport)
    page = watched.page
    sign_in(page, daphne.url, "alice", f"/research/{research.pk}/")
    expect(page.locator("#report-body h1")).to_have_text("Heat pumps in Nordic winters")
    expect(page.locator("#r-connection")).to_have_text("Live")
    # with its conversation in every state: answered with citations, not answered by the sources, writing, failed
    expect(page.locator("#conversation-thread > li")).to_have_count(4)
    expect(page.locator("#conversation-thread .conv-answer-body")).to_have_count(2)
    expect(page.locator("#conversation .conv-dig")).to_be_visible()
    screenshot(page, f"conversation-{viewport['width']}", "#conversation")
    assert_accessible(page)
    # one H1 on the page: the report's own title is a level-2 heading under the page's
    levels = page.eval_on_selector_all(
        "h1, h2, h3, [role=heading]",
        "els => els.filter((el) => el.getClientRects().length)"
        ".map((el) => Number(el.getAttribute('aria-level') || el.tagName.slice(1)))",
    )
    assert levels.count(1) == 1 and levels[0] == 1, levels
    # and on the log tab
    page.click("#tab-log")
    assert_accessible(page)
    # a failed research's error output
    failed = seed_research(user, "Grid-scale sodium batteries", "failed", error_output=True)
    page.goto(f"{daphne.url}/research/{failed.pk}/")
    expect(page.locator("#error-body h1")).to_contain_text("Research failed")
    assert_accessible(page)
    assert watched.errors == []


def seed_conversation(research) -> None:
    """Questions asked of the research, one in each state the thread shows."""
    url = "https://example.com/report-source-one"
    cited = f'The seasonal COP averaged 2.7. [[1]]({url} "{link_title(QUOTE_ONE)}")\n\nSources:\n\n1. [Part 1]({url})\n'
    rows = [
        ("How efficient were they?", AnswerStatus.ANSWERED, cited, True, ""),
        (
            "What will they cost in 2040?",
            AnswerStatus.ANSWERED,
            "The sources do not answer it.\n",
            False,
            "heat pump prices 2040",
        ),
        ("How loud are they?", AnswerStatus.WRITING, "", None, ""),
        ("Which brands?", AnswerStatus.FAILED, "", None, ""),
    ]
    for position, (question, status, answer, sources_answer, suggested) in enumerate(rows, 1):
        AskedQuestion.objects.create(
            research=research,
            position=position,
            question=question,
            status=status,
            answer=answer,
            sources_answer=sources_answer,
            suggested_query=suggested,
        )


# --- the keyboard only ----------------------------------------------------------------------------------------

FINISH_TIMEOUT = 180_000


def focused(page: Page) -> str:
    """The focused element, as `tag#id` (or `tag.class` without an id)."""
    return page.evaluate(
        "() => { const el = document.activeElement; return el.tagName.toLowerCase() + (el.id ? `#${el.id}` : "
        "el.className ? `.${el.className.split(' ')[0]}` : ''); }"
    )


def tab_to(page: Page, selector: str, most: int = 40, key: str = "Tab") -> None:
    """Press Tab (or `key`: Shift+Tab) until `selector` has focus."""
    for _ in range(most):
        page.keyboard.press(key)
        if page.evaluate("s => document.activeElement.matches(s)", selector):
            return
    raise AssertionError(f"{selector} not reached with {most} Tabs (focus on {focused(page)})")


def test_a_research_started_switched_and_read_with_the_keyboard_only(
    daphne, workers, research_model, open_page, user
) -> None:
    watched = open_page()
    page = watched.page
    # alice signs in: the login page opens with the focus in its first field
    page.goto(daphne.url + "/accounts/login/")
    expect(page.locator("#id_username")).to_be_focused()
    page.keyboard.type("alice")
    page.keyboard.press("Tab")
    page.keyboard.type(PASSWORD)
    page.keyboard.press("Enter")
    page.wait_for_url(daphne.url + "/")
    expect(page.locator("#view-new")).to_be_visible()
    # the first Tab stop is the skip link, shown once it has focus; it leads to the form
    page.keyboard.press("Tab")
    skip = page.locator("#skip-link")
    expect(skip).to_be_focused()
    expect(skip).to_have_text("Skip to main content")
    assert skip.bounding_box()["y"] >= 0
    page.keyboard.press("Enter")
    expect(page.locator("#main")).to_be_focused()
    page.keyboard.press("Tab")
    expect(page.locator("#prompt")).to_be_focused()
    page.keyboard.type("How do heat pumps perform in Nordic winters?")
    page.keyboard.press("Tab")
    expect(page.locator("#num-questions")).to_be_focused()
    page.keyboard.press("Control+A")
    page.keyboard.type("1")
    page.keyboard.press("Tab")
    expect(page.locator("#ask-button")).to_be_focused()
    page.keyboard.press("Enter")
    # the question arrives with the focus in its answer
    expect(page.locator("#answer-0")).to_be_focused()
    page.keyboard.type("Below -20 °C")
    tab_to(page, "#breadth", most=2)
    page.keyboard.press("Control+A")
    page.keyboard.type("2")
    page.keyboard.press("Tab")
    page.keyboard.press("Control+A")
    page.keyboard.type("1")
    tab_to(page, "#start-button")
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(r"/research/[0-9a-f-]{36}/$"))
    # the new view's heading has the focus, not the body
    expect(page.locator("#r-title")).to_be_focused()
    expect(page.locator("#r-title")).to_have_text("How do heat pumps perform in Nordic winters?")
    expect(page.locator("#r-status")).not_to_be_empty()

    # a finished research, opened afresh: the first Tab stop is the skip link, and it leads into the report, past
    # the sidebar and everything above the report
    research = seed_research(user, "Heat pumps in Nordic winters", "completed", report=True)
    page.goto(f"{daphne.url}/research/{research.pk}/")
    expect(page.locator("#report-body h1")).to_be_visible()
    page.keyboard.press("Tab")
    expect(skip).to_be_focused()
    expect(skip).to_have_text("Skip to report")
    screenshot(page, "skip-link")
    page.keyboard.press("Enter")
    expect(page.locator("#report-body")).to_be_focused()
    page.keyboard.press("Tab")
    expect(page.locator("#report-body a").first).to_be_focused()

    # the tabs: one Tab stop (the selected tab); the arrow keys, Home and End move between them and select
    page.keyboard.press("Shift+Tab")
    tab_to(page, "[role=tab]")
    expect(page.locator("#tab-report")).to_be_focused()
    assert page.locator("#tab-log").get_attribute("tabindex") == "-1"
    for key, name in (("ArrowRight", "log"), ("ArrowRight", "report"), ("ArrowLeft", "log"), ("Home", "report")):
        page.keyboard.press(key)
        tab = page.locator(f"#tab-{name}")
        expect(tab).to_be_focused()
        expect(tab).to_have_attribute("aria-selected", "true")
        expect(tab).to_have_attribute("tabindex", "0")
        expect(page.locator(f"#{tab.get_attribute('aria-controls')}")).to_be_visible()
    page.keyboard.press("End")
    expect(page.locator("#tab-log")).to_be_focused()
    expect(page.locator("#panel-report")).to_be_hidden()
    expect(page.locator("#tab-report")).to_have_attribute("aria-selected", "false")
    # Tab leaves the tabs for the panel
    page.keyboard.press("Tab")
    expect(page.locator("#panel-log")).to_be_focused()

    # a change of view: focus goes to the new view's heading, also with the browser's Back
    tab_to(page, "#new-research", key="Shift+Tab")
    page.keyboard.press("Enter")
    expect(page.locator("#prompt")).to_be_focused()
    page.go_back()
    expect(page.locator("#view-research")).to_be_visible()
    expect(page.locator("#r-title")).to_be_focused()
    page.go_forward()
    expect(page.locator("#new-title")).to_be_focused()
    assert watched.errors == []


# --- the phone layout -----------------------------------------------------------------------------------------

WIDER_THAN_THE_SCREEN = """() => [...document.querySelectorAll("body *")]
  .filter((el) => el.getClientRects().length && el.getBoundingClientRect().right > window.innerWidth + 0.5)
  .map((el) => el.tagName.toLowerCase() + (el.id ? `#${el.id}` : ""))"""


def assert_fits_the_screen(page: Page) -> None:
    width = page.evaluate("() => document.documentElement.scrollWidth")
    assert width <= PHONE["width"], (width, page.evaluate(WIDER_THAN_THE_SCREEN))


def assert_not_covered(page: Page, selector: str) -> None:
    """What is under the element's centre is the element (or a part of it): nothing covers it."""
    element = page.locator(selector)
    element.scroll_into_view_if_needed()
    box = element.bounding_box()
    assert box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"], box
    on_top = element.evaluate(
        """(el) => { const r = el.getBoundingClientRect();
          const top = document.elementFromPoint(r.x + r.width / 2, r.y + r.height / 2);
          return el.contains(top) ? "" : top ? top.outerHTML.slice(0, 120) : "nothing"; }"""
    )
    assert on_top == "", f"{selector} is covered by {on_top}"


def test_the_phone_layout_of_the_form_and_the_report(daphne, workers, research_model, open_page, user) -> None:
    watched = open_page(PHONE)
    page = watched.page
    sign_in(page, daphne.url, "alice")
    # step 1
    page.fill("#prompt", "How do heat pumps perform in Nordic winters?")
    assert_fits_the_screen(page)
    assert page.locator(".topbar").bounding_box()["height"] <= 56
    assert_not_covered(page, "#ask-button")
    screenshot(page, "phone-form-prompt")
    # step 2, with its widest options
    answer_one_question(page, 2, 1)
    page.select_option("#mode", "adaptive")
    page.select_option("#report-length", "words")
    assert_fits_the_screen(page)
    for selector in ("#back-button", "#start-button", "#mode", "#budget-usd"):
        assert_not_covered(page, selector)
    # the placeholders show whole
    for selector in ("#budget-seconds", "#budget-tokens", "#budget-usd", "#report-words"):
        field = page.locator(selector)
        assert field.evaluate("el => el.scrollWidth <= el.clientWidth"), selector
    screenshot(page, "phone-form-answers")
    page.locator("#mode-fields").scroll_into_view_if_needed()
    screenshot(page, "phone-form-settings")
    # Back: step 1 again, with the focus in the request
    page.click("#back-button")
    expect(page.locator("#prompt")).to_be_focused()
    assert_fits_the_screen(page)

    # the report: it starts on the first screen, and its citations are big enough to tap
    research = seed_research(user, "Heat pumps in Nordic winters", "completed", report=True)
    page.goto(f"{daphne.url}/research/{research.pk}/")
    title = page.locator("#report-body h1")
    expect(title).to_have_text("Heat pumps in Nordic winters")
    assert_fits_the_screen(page)
    assert title.bounding_box()["y"] + title.bounding_box()["height"] <= PHONE["height"], title.bounding_box()
    citations = page.locator("#report-body p a[href]")
    expect(citations).to_have_count(5)
    for index in range(citations.count()):
        box = citations.nth(index).bounding_box()
        assert box["width"] >= 24 and box["height"] >= 24, (index, box)
    screenshot(page, "phone-report")
    # a citation's quote stays inside the screen
    citations.nth(1).focus()
    page.keyboard.press("Shift+Tab")
    first = citations.nth(0)
    expect(first).to_be_focused()
    tooltip = first.evaluate(
        """el => { const s = getComputedStyle(el, "::after");
          return { position: s.position, left: parseFloat(s.left), right: parseFloat(s.right),
                   content: s.content }; }"""
    )
    assert tooltip["position"] == "fixed" and tooltip["left"] >= 0 and tooltip["right"] >= 0, tooltip
    assert "seasonal coefficient" in tooltip["content"]
    screenshot(page, "phone-report-tooltip")
    assert watched.errors == []


@pytest.mark.parametrize("viewport", VIEWPORTS)
def test_a_deleted_research_is_a_not_found_page_inside_the_app(daphne, open_page, user, viewport) -> None:
    # given alice's research, deleted
    research = seed_research(user, "Heat pumps in Nordic winters", "completed")
    research_id = research.pk
    research.delete()
    watched = open_page(viewport)
    page = watched.page
    sign_in(page, daphne.url, "alice")
    # when she opens its address
    response = page.goto(f"{daphne.url}/research/{research_id}/")
    # then it is a 404 in the app's own look, with the way back, and nothing about it is inaccessible
    assert response is not None and response.status == 404
    expect(page.locator("h1")).to_have_text("Not found")
    expect(page.locator("main .brand")).to_have_attribute("href", "/")
    page.get_by_role("link", name="Back to your research").click()
    expect(page).to_have_url(f"{daphne.url}/")
    page.goto(f"{daphne.url}/research/{research_id}/")
    assert_accessible(page)
    screenshot(page, f"not-found-{viewport['width']}")


def test_the_ask_box_is_a_few_tab_presses_from_the_top(daphne, open_page, user) -> None:
    # given alice's finished research, its report long above the Ask box
    research = seed_research(user, "Heat pumps in Nordic winters", "completed", report=True)
    watched = open_page()
    page = watched.page
    sign_in(page, daphne.url, "alice", f"/research/{research.pk}/")
    expect(page.locator("#question-input")).to_be_visible()
    # when she tabs from the top of the page to the header's "Ask a question", and presses it
    page.locator("#r-title").focus()
    presses = 0
    while focused(page) != "button#ask-shortcut" and presses < 30:
        page.keyboard.press("Tab")
        presses += 1
    assert presses <= 8, f"{presses} Tab presses to reach it"
    page.keyboard.press("Enter")
    # then she is in the Ask box, ready to type
    expect(page.locator("#question-input")).to_be_focused()
    expect(page.locator("#question-input")).to_be_in_viewport()
    assert_accessible(page)


@pytest.mark.parametrize("viewport", VIEWPORTS)
def test_the_plan_review_and_a_cited_document_are_accessible(daphne, open_page, user, viewport) -> None:
    # given alice's research waiting for its plan to be reviewed
    research = seed_research(user, "Heat pumps in Nordic winters", "running")
    SerpQuery.objects.filter(research=research).update(status="pending")
    Research.objects.filter(pk=research.pk).update(status=ResearchStatus.AWAITING_REVIEW, review_plan=True)
    watched = open_page(viewport)
    page = watched.page
    sign_in(page, daphne.url, "alice", f"/research/{research.pk}/")
    expect(page.locator("#plan-review .plan-row").first).to_be_visible()
    # then the plan review has nothing serious or critical for axe-core
    assert_accessible(page)
    screenshot(page, f"plan-review-rows-{viewport['width']}", "#plan-review")
    # and neither has a cited document opened at its quote
    text = f"# Field notes\n\nThe defrost cycle ran every ninety minutes in humid cold weather.\n\n{QUOTE_ONE}\n"
    parsed = ParsedDocument(title="Field notes", text=text, content_type="text/markdown")
    document, _ = store_document("/srv/share/field-notes.md", DocumentOrigin.FOLDER, None, text.encode(), parsed)
    query = urlencode({"quote": QUOTE_ONE, "from": str(research.pk)})
    page.goto(f"{daphne.url}/collection/{document.pk}/?{query}#quote")
    expect(page.locator("mark#quote")).to_have_text(QUOTE_ONE)
    assert_accessible(page)
