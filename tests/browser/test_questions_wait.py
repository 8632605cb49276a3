"""A model slower than the questions request waits: the start form shows that it is waiting and fills in the
questions when they land, a draft opened from the sidebar resumes into that wait, and a failure shows its reason.
On a daphne of its own that waits 1 s before it answers 202, with the session's worker processes."""

import re
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import expect

from devtools.servers import PLAIN_HTTP, DaphneServer, process_env
from research.models import Research, ResearchStatus
from tests.support.browser import screenshot
from tests.support.e2e import WORKER_ENV
from tests.support.logins import sign_in

pytestmark = pytest.mark.django_db(transaction=True)

PROMPT = "How do heat pumps perform in Nordic winters?"
QUESTIONS = ["Which climates matter most?", "Which years should count?"]
WAITING = re.compile("The model is writing the questions")


@pytest.fixture(scope="module")
def impatient_daphne(django_db_setup, django_db_blocker, internet: dict[str, str]) -> Iterator[DaphneServer]:
    env = process_env({**WORKER_ENV, **internet, **PLAIN_HTTP, "DEBUG": "false", "QUESTIONS_WAIT_SECONDS": "1"})
    env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)  # the server keeps Django's async-safety checks
    with django_db_blocker.unblock():
        server = DaphneServer(env, name="daphne-questions-wait").start()
    yield server
    server.stop()


def these_questions(body: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    return {"questions": QUESTIONS[: schema["properties"]["questions"].get("maxItems", len(QUESTIONS))]}


def ask(page, base_url: str) -> None:
    sign_in(page, base_url, "alice")
    page.fill("#prompt", PROMPT)
    page.fill("#num-questions", str(len(QUESTIONS)))
    page.click("#ask-button")


def test_the_form_waits_for_slow_questions_and_fills_them_in(
    impatient_daphne, workers, research_model, fake_llm, user, open_page, request
) -> None:
    # given a model that writes the questions only once the test lets it, and a server that waits 1 s for them:
    # a second browser signs in and opens the draft meanwhile, however long that takes (a fixed 8 s delay lost that
    # race on a machine loaded with parallel test workers). An attempt the workers give up on (LLM_TIMEOUT) is
    # asked again, and answered once let.
    let_answer = threading.Event()
    request.addfinalizer(let_answer.set)  # a failed test leaves no request of the fake waiting

    def questions_once_let(body: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
        let_answer.wait(timeout=120)
        return these_questions(body, schema)

    fake_llm.handlers["followup_questions"] = questions_once_let
    first = open_page()
    page = first.page
    # when alice asks for them
    ask(page, impatient_daphne.url)
    # then the form says it waits, in a live region, with the button busy, and no questions yet
    status = page.locator("#ask-status")
    expect(status).to_have_text(WAITING)
    assert status.get_attribute("role") == "status"
    expect(page.locator("#ask-button")).to_be_disabled()
    expect(page.locator("#answers-form")).to_be_hidden()
    screenshot(page, "questions-waiting", "#prompt-form")
    draft = Research.objects.get(owner=user)
    assert draft.status == ResearchStatus.DRAFT
    # and in another browser the draft, opened from the sidebar, resumes into the same wait
    second = open_page()
    other = second.page
    sign_in(other, impatient_daphne.url, "alice")
    other.click(f"#group-today a[data-id='{draft.pk}']")
    expect(other.locator("#r-notice")).to_contain_text("being written")
    other.click("#r-notice button")
    expect(other).to_have_url(impatient_daphne.url + "/")
    expect(other.locator("#prompt")).to_have_value(PROMPT)
    expect(other.locator("#ask-status")).to_have_text(WAITING)
    # when the model answers, both forms fill the questions in
    let_answer.set()
    for form in (page, other):
        expect(form.locator("#questions label")).to_have_text(QUESTIONS, timeout=20_000)
        expect(form.locator("#ask-status")).to_have_text("")
        expect(form.locator("#ask-button")).to_be_enabled()
    # and the research starts from them
    page.fill("#answer-0", "Nordic winters, below -20 °C")
    page.fill("#answer-1", "2015 onwards")
    page.fill("#breadth", "1")
    page.fill("#depth", "1")
    page.click("#start-button")
    page.wait_for_url(re.compile(rf"/research/{draft.pk}/$"))
    assert Research.objects.get(pk=draft.pk).status != ResearchStatus.DRAFT
    assert first.errors == [] and second.errors == []


def test_the_form_shows_why_slow_questions_could_not_be_written(
    impatient_daphne, workers, fakes, fake_llm, user, open_page
) -> None:
    # given a model that refuses the request for good, after 3 s: past the server's wait
    fake_llm.delays["followup_questions"] = 3.0
    fake_llm.fail_always(401)
    watched = open_page()
    page = watched.page
    # when alice asks for the questions
    ask(page, impatient_daphne.url)
    expect(page.locator("#ask-status")).to_have_text(WAITING)
    # then the wait ends with the reason, and she may ask again
    error = page.locator("#prompt-form .form-error")
    expect(error).to_contain_text("The model could not write the questions", timeout=20_000)
    expect(error).to_contain_text("HTTP 401")
    expect(page.locator("#ask-status")).to_have_text("")
    expect(page.locator("#ask-button")).to_be_enabled()
    expect(page.locator("#answers-form")).to_be_hidden()
    assert Research.objects.get(owner=user).status == ResearchStatus.FAILED
