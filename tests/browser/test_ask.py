"""Ask from the page, on the real stack: the question box under a completed report sends a question, the answer
lands in the thread with its citations, every tab on the research sees the same thread live, and an answer the
sources do not give offers Dig deeper with the search the writer suggested."""

import pytest
from playwright.sync_api import Page, expect

from research.models import AnswerStatus, AskedQuestion, ResearchStatus
from tests.support.browser import screenshot
from tests.support.e2e import start_research, wait_finished
from tests.support.logins import sign_in
from workers.pipeline.ask import UNANSWERED

pytestmark = pytest.mark.django_db(transaction=True)

# Every layout shift from the page's load on that moved a part of the conversation or the Dig deeper form (those
# come after the snapshot, the report and the answers: shown early, they would be pushed down).
SHIFTS_BELOW_REPORT = """() => {
  window.__belowShifts = [];
  new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) {
      if (entry.hadRecentInput) continue;
      for (const source of entry.sources || []) {
        const node = source.node && (source.node.nodeType === 1 ? source.node : source.node.parentElement);
        const part = node && node.closest("#conversation, #deepen");
        if (part) window.__belowShifts.push([part.id, entry.value]);
      }
    }
  }).observe({ type: "layout-shift", buffered: true });
}"""


def ask(page: Page, question: str) -> None:
    page.fill("#question-input", question)
    page.get_by_role("button", name="Ask", exact=True).click()


def test_ask_from_the_page_and_see_the_thread_in_every_tab(
    api, daphne, workers, research_model, user, open_page
) -> None:
    # given a completed 1x1 research, open in two tabs of alice's
    research_id = start_research(api, 1, 1)
    assert wait_finished(research_id, timeout=60).status == ResearchStatus.COMPLETED
    first, second = open_page(), open_page()
    a, b = first.page, second.page
    for page in (a, b):
        sign_in(page, daphne.url, "alice", f"/research/{research_id}/")
        expect(page.locator("#conversation")).to_be_visible(timeout=30_000)
    # when she asks nothing, the page says so by the field and sends nothing
    a.get_by_role("button", name="Ask", exact=True).click()
    expect(a.locator("#question-error")).to_have_text("Write a question first.")
    expect(a.locator("#question-input")).to_be_focused()
    expect(a.locator("#question-input")).to_have_attribute("aria-invalid", "true")
    # when she asks a question in the first tab
    ask(a, "What did the sources measure?")
    # then the error goes, the box is cleared for the next question, and the answer lands with its citations
    expect(a.locator("#question-error")).to_be_hidden()
    expect(a.locator("#question-input")).to_have_value("")
    expect(a.locator("#question-input")).to_be_focused()
    items = a.locator("#conversation-thread > li")
    expect(items).to_have_count(1)
    expect(items.first.locator(".conv-question-text")).to_have_text("What did the sources measure?")
    citation = items.first.locator(".conv-answer-body p a[href][title]").first
    expect(citation).to_be_visible(timeout=30_000)
    expect(citation).to_have_attribute("target", "_blank")
    asked = AskedQuestion.objects.get(research_id=research_id)
    assert asked.status == AnswerStatus.ANSWERED and asked.sources_answer is True
    # (its link goes to the quote on its page: the stored URL, with a text fragment)
    href = citation.get_attribute("href")
    assert "#:~:text=" in href and href.split("#:~:text=")[0] in asked.answer
    # and the downloads can carry the conversation as an appendix
    expect(a.locator("#download-pdf")).to_have_attribute("href", f"/api/research/{research_id}/report.pdf")
    a.locator("#export-conversation").check()
    for name in ("md", "pdf", "docx"):
        expect(a.locator(f"[id^=download-][href*='report.{name}']")).to_have_attribute(
            "href", f"/api/research/{research_id}/report.{name}?conversation=1"
        )
    appendix = a.request.get(f"{a.url.split('/research/')[0]}/api/research/{research_id}/report.md?conversation=1")
    assert appendix.ok and "## Questions and answers" in appendix.text()
    # and the second tab shows the same question and answer without a reload
    other = b.locator("#conversation-thread > li")
    expect(other).to_have_count(1)
    expect(other.first.locator(".conv-question-text")).to_have_text("What did the sources measure?")
    expect(other.first.locator(".conv-answer-body p a[href][title]").first).to_be_visible()
    expect(other.first.locator(".conv-dig")).to_have_count(0)

    # when the sources do not answer the next question
    research_model.answerable = False
    ask(a, "What will it cost in 2040?")
    # then the answer says so and offers to dig deeper with the suggested search, in both tabs
    unanswered = a.locator("#conversation-thread > li").nth(1)
    expect(unanswered.locator(".conv-answer-body")).to_have_text(UNANSWERED, timeout=30_000)
    expect(b.locator("#conversation-thread > li").nth(1).locator(".conv-answer-body")).to_have_text(UNANSWERED)
    suggested = AskedQuestion.objects.get(research_id=research_id, position=2).suggested_query
    assert suggested
    dig = unanswered.get_by_role("button", name=f"Dig deeper: {suggested}")
    expect(b.get_by_role("button", name=f"Dig deeper: {suggested}")).to_be_visible()
    # when she takes it, the Dig deeper form is filled in with it and has the focus, to check and send
    dig.click()
    expect(a.locator("#deepen-query")).to_have_value(suggested)
    expect(a.locator("#deepen-query")).to_be_focused()
    expect(a.locator("#deepen-objective")).to_have_value("What will it cost in 2040?")
    screenshot(a, "ask-thread", "#conversation")

    # and a tab opened now shows the whole thread at once, nothing under the report pushed down as it loads
    late = open_page()
    late.page.add_init_script(f"({SHIFTS_BELOW_REPORT})()")
    sign_in(late.page, daphne.url, "alice", f"/research/{research_id}/")
    expect(late.page.locator("#conversation-thread > li .conv-answer-body")).to_have_count(2, timeout=30_000)
    expect(late.page.locator("#deepen")).to_be_visible()
    late.page.wait_for_timeout(300)
    assert late.page.evaluate("() => window.__belowShifts") == []
    for watched in (first, second, late):
        assert watched.errors == []
        assert [r for r in watched.failed_requests if "/ask" in r or "/conversation/" in r] == []


def test_the_question_check_the_dig_deeper_offer_and_the_log_lines(daphne, open_page) -> None:
    page = open_page().page
    page.goto(daphne.url + "/accounts/login/")
    got = page.evaluate(
        """async () => {
        const ask = await import("/static/research/js/ask.js");
        const lib = await import("/static/research/js/lib.js");
        const item = (status, sources_answer, suggested_query) =>
          ({ id: 1, question: "Why?", status, answer: "", sources_answer, suggested_query, created_at: "" });
        return {
          checks: ["", "   \\n ", "  Why?  ", "x".repeat(2000), ` ${"x".repeat(2001)} `].map(ask.checkQuestion),
          dig: [item("answered", true, ""), item("answered", false, "heat pump prices"), item("answered", false, ""),
                item("answered", null, "partly: costs"), item("writing", null, ""), item("failed", null, "")]
                .map(ask.digQuery),
          events: [{ type: "answer_writing_start", data: { id: 1 } },
                   { type: "answer_written", data: { id: 1, status: "answered", sources_answer: true } },
                   { type: "answer_written", data: { id: 1, status: "answered", sources_answer: false } },
                   { type: "answer_written", data: { id: 1, status: "failed" } }].map((e) => lib.describeEvent(e)),
        };
    }"""
    )
    assert got["checks"][:3] == [
        {"error": "Write a question first."},
        {"error": "Write a question first."},
        {"question": "Why?"},
    ]
    assert got["checks"][3] == {"question": "x" * 2000}
    assert got["checks"][4] == {"error": "A question is at most 2,000 characters (this one is 2,001)."}
    assert got["dig"] == ["", "heat pump prices", "Why?", "partly: costs", "", ""]
    assert [(e["tone"], e["text"]) for e in got["events"]] == [
        ("work", "Writing the answer to a question"),
        ("ok", "Question answered"),
        ("info", "Question answered: the sources of this research do not answer it"),
        ("fail", "The answer to a question could not be written"),
    ]
