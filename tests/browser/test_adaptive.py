"""Adaptive research in the browser, on the real stack: the start form's mode fields, and each branch's score,
decision and gaps in the live log."""

import re

import pytest
from playwright.sync_api import expect

from research.models import Research, SerpQuery
from tests.support.browser import answer_one_question
from tests.support.logins import sign_in

pytestmark = pytest.mark.django_db(transaction=True)

FINISH_TIMEOUT = 180_000


def test_adaptive_research_from_the_form_shows_each_branch_verdict(
    daphne, workers, research_model, user, open_page
) -> None:
    # given an evaluator that finds every branch good enough at once
    research_model.branch_score = lambda depth, round_: 9
    research_model.research_score = lambda rounds: 9
    watched = open_page()
    page = watched.page
    sign_in(page, daphne.url, "alice")
    answer_one_question(page, 2, 3)
    # the adaptive fields appear with the mode, and the plan says the tree is at most
    expect(page.locator("#adaptive-fields")).to_be_hidden()
    page.select_option("#mode", "adaptive")
    expect(page.locator("#adaptive-fields")).to_be_visible()
    expect(page.locator("#plan-total")).to_have_text(re.compile(r"^up to \d+$"))
    # a minimum depth above the depth is refused in the form, and nothing is started
    page.fill("#min-depth", "4")
    page.click("#start-button")
    expect(page.locator("#answers-form .form-error")).to_contain_text("Minimum depth")
    assert not Research.objects.exclude(status="awaiting_answers").exists()

    # when alice starts it adaptive, with a threshold of 8
    page.fill("#min-depth", "1")
    page.fill("#quality-threshold", "8")
    page.click("#start-button")
    page.wait_for_url(re.compile(r"/research/[0-9a-f-]{36}/$"))
    research_id = page.url.rstrip("/").rsplit("/", 1)[-1]
    research = Research.objects.get(pk=research_id)
    assert (research.mode, research.min_depth, research.quality_threshold) == ("adaptive", 1, 8)

    # then each branch shows its score and why it stopped, once evaluated
    expect(page.locator("#r-status")).to_have_text("Completed", timeout=FINISH_TIMEOUT)
    page.click("#tab-log")
    verdicts = page.locator(".q-eval")
    expect(verdicts).to_have_count(2)
    for index in range(2):
        expect(verdicts.nth(index)).to_be_visible()
        expect(verdicts.nth(index)).to_contain_text("Score 9.0/10 · stop (good enough)")
    assert SerpQuery.objects.filter(research=research).count() == 2
    # and the log tells the evaluations
    expect(page.locator("#events li.event[data-type=query_evaluated]")).to_have_count(2)
    expect(page.locator("#events li.event[data-type=query_evaluated]").first).to_contain_text(
        "Branch scored 9.0/10: stops"
    )
    assert not watched.errors
