"""Budgets in the browser, on the real stack: the start form's budget fields, the live tokens and cost, and the
banner of a research its budget stopped."""

import re
import time

import pytest
from playwright.sync_api import expect

from research.models import LlmCall, Research, ResearchStatus
from research.record.usage import totals
from tests.support.browser import answer_one_question
from tests.support.logins import sign_in

pytestmark = pytest.mark.django_db(transaction=True)

FINISH_TIMEOUT = 180_000
# About a quarter of what a 3x3 research spends on the fake model (tests/test_engine_budgets.py).
TOKEN_BUDGET = 18_000


def settle_calls(research: Research, quiet: float = 2.0, timeout: float = 60.0) -> None:
    """Wait until no model call of the research has been recorded for `quiet` seconds."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        count = LlmCall.objects.filter(research=research).count()
        if count == last:
            return
        last = count
        time.sleep(quiet)


def test_budget_from_the_form_live_cost_and_partial_banner(
    daphne, workers, research_model, fake_llm, user, open_page
) -> None:
    # given a model slow enough for the spending to be seen growing
    fake_llm.delays = {"website_analysis": 0.3}
    watched = open_page()
    page = watched.page
    sign_in(page, daphne.url, "alice")
    answer_one_question(page, 3, 3)
    # a budget that is no positive number is refused in the form, and nothing is started
    page.fill("#budget-usd", "-1")
    page.click("#start-button")
    expect(page.locator("#answers-form .form-error")).to_have_text("Dollars budget must be a positive number.")
    assert not Research.objects.exclude(status="awaiting_answers").exists()

    # when alice starts it with a token budget
    page.fill("#budget-usd", "")
    page.fill("#budget-tokens", str(TOKEN_BUDGET))
    page.click("#start-button")
    page.wait_for_url(re.compile(r"/research/[0-9a-f-]{36}/$"))
    research_id = page.url.rstrip("/").rsplit("/", 1)[-1]

    # then the budget was sent and stored, the others left to the server's defaults
    research = Research.objects.get(pk=research_id)
    assert research.budget_tokens == TOKEN_BUDGET and research.budget_usd is None
    # and the live view shows the tokens and the cost growing with the snapshot
    tokens, cost = page.locator("#s-tokens"), page.locator("#s-cost")
    # (spent "of" the budget)
    page.wait_for_function("() => /^[0-9,]+ of [0-9,]+$/.test(document.querySelector('#s-tokens').textContent)")
    seen = int(tokens.inner_text().split(" of ")[0].replace(",", ""))
    page.wait_for_function(
        "n => Number(document.querySelector('#s-tokens').textContent.split(' of ')[0].replace(/,/g, '')) > n",
        arg=seen,
    )
    assert tokens.inner_text().endswith(f" of {TOKEN_BUDGET:,}")
    expect(cost).to_have_text(re.compile(r"^\$[0-9]+\.[0-9]{2,4}$"))

    # and once the budget stopped it, the finished research is partial, in its badge and in the banner above its
    # report
    expect(page.locator("#r-status")).to_have_text("Partial", timeout=FINISH_TIMEOUT)
    expect(page.locator("#r-partial")).to_be_visible()
    expect(page.locator("#r-partial")).to_have_text("Partial report — stopped at its token budget.")
    expect(page.locator("#report-body blockquote").first).to_contain_text("Partial report: the research stopped")
    research.refresh_from_db()
    assert research.status == ResearchStatus.COMPLETED and research.partial
    # the totals are pushed with events: a call in flight at the stop may land after the last one, so the final
    # figures are those of a fresh load (they no longer change once every step has ended)
    settle_calls(research)
    page.reload()
    used = totals(research.pk)
    spent = used.prompt_tokens + used.completion_tokens
    expect(tokens).to_have_text(f"{spent:,} of {TOKEN_BUDGET:,}")
    expect(cost).to_have_text(f"${float(used.cost_usd):.4f}")
    assert not watched.errors
