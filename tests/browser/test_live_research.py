"""A research started in the browser and watched live, on the real stack: daphne, two Celery worker processes,
PostgreSQL, Redis and the loopback fakes (slowed a little so the live states can be seen)."""

import re
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from devtools.fakes.behaviours import REPORT_TITLE
from devtools.fakes.searx import query_slug
from research.models import Event, Research, ResearchStatus, SerpQuery, Website, WebsiteStatus
from tests.support.browser import screenshot
from tests.support.logins import sign_in
from tests.support.reports import outline_and_sections

pytestmark = pytest.mark.django_db(transaction=True)

PROMPT = "How do heat pumps perform in Nordic winters?"
FINISH_TIMEOUT = 180_000

SCRIPT = "<script>alert('xss-script')</script>"
IMG = "<img src=x onerror=alert('xss-img')>"
JS_URL = "javascript:alert('xss-link')"
HOSTILE_SENTENCE = "Type <script>alert(1)</script> into the search box to see the escaped text."

INJECTED = """() => ({
  inlineScripts: [...document.scripts].filter((s) => !s.src).length,
  foreignScripts: [...document.scripts].filter((s) => s.src && !s.src.startsWith(location.origin + "/static/")).length,
  images: [...document.images].filter((i) => !i.src.startsWith(location.origin + "/static/")).length,
  frames: document.querySelectorAll("iframe, object, embed, svg:not([aria-hidden]), math").length,
  handlers: [...document.querySelectorAll("*")]
    .filter((el) => [...el.attributes].some((a) => a.name.startsWith("on"))).length,
  badLinks: [...document.querySelectorAll("a[href]")]
    .filter((a) => !["http:", "https:"].includes(new URL(a.href).protocol)).length,
})"""
CLEAN = {"inlineScripts": 0, "foreignScripts": 0, "images": 0, "frames": 0, "handlers": 0, "badLinks": 0}

# For each query item: its id, and the id of the depth-1 query whose children list holds it (null if none).
NESTED_UNDER = """items => items.map((li) => {
  const list = li.parentElement;
  const parent = list.classList.contains("tree-children") ? list.closest("li.q[data-depth='1']") : null;
  return [li.dataset.queryId, parent && list.parentElement === parent ? parent.dataset.queryId : null];
})"""


def followups(questions: list[str]):
    def handler(body: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
        count = schema["properties"]["questions"].get("maxItems", len(questions))
        return {
            "questions": [
                questions[i % len(questions)] + ("" if i < len(questions) else f" ({i})") for i in range(count)
            ]
        }

    return handler


def event_seqs(page: Page) -> list[int]:
    return page.eval_on_selector_all("#events li.event", "rows => rows.map((row) => Number(row.dataset.seq))")


def start_in_form(page: Page, prompt: str, answers: list[str], breadth: int, depth: int) -> str:
    page.fill("#prompt", prompt)
    page.fill("#num-questions", str(len(answers)))
    page.click("#ask-button")
    expect(page.locator("#questions textarea")).to_have_count(len(answers))
    for index, answer in enumerate(answers):
        page.fill(f"#answer-{index}", answer)
    page.fill("#breadth", str(breadth))
    page.fill("#depth", str(depth))
    page.click("#start-button")
    page.wait_for_url(re.compile(r"/research/[0-9a-f-]{36}/$"))
    return page.url.rstrip("/").rsplit("/", 1)[-1]


def test_research_started_in_the_form_runs_live_to_a_cited_report(
    daphne, workers, research_model, fake_llm, fake_searx, fake_web, user, open_page
) -> None:
    # given fakes slow enough for the live states to last a few seconds
    fake_searx.delay = 0.6
    fake_llm.delays = {"website_analysis": 0.8, "report_outline": 3.0}
    fake_llm.handlers["followup_questions"] = followups(["Which climates matter most?", "Which years should count?"])
    # and another browser of alice's on the start page, which learns of the research only through its sidebar
    # socket
    watcher = open_page()
    sign_in(watcher.page, daphne.url, "alice")
    expect(watcher.page.locator("#sidebar-empty")).to_be_visible()
    first = open_page()
    page = first.page
    sign_in(page, daphne.url, "alice")

    # when alice asks for questions, answers them and starts a 2×2 research
    page.fill("#prompt", PROMPT)
    page.fill("#num-questions", "2")
    page.click("#ask-button")
    expect(page.locator("#questions label")).to_have_text(["Which climates matter most?", "Which years should count?"])
    page.fill("#answer-0", "Nordic winters, below -20 °C")
    page.fill("#answer-1", "2015 onwards")
    for breadth, depth, total in ((4, 2, "12"), (2, 4, "8"), (3, 3, "15"), (2, 2, "4")):
        page.fill("#breadth", str(breadth))
        page.fill("#depth", str(depth))
        expect(page.locator("#plan-total")).to_have_text(total)
    page.click("#start-button")
    page.wait_for_url(re.compile(r"/research/[0-9a-f-]{36}/$"))
    research_id = page.url.rstrip("/").rsplit("/", 1)[-1]

    # then its skeleton appears under Ongoing research
    ongoing = page.locator(f"#group-ongoing a[data-id='{research_id}']")
    expect(ongoing.locator(".skeleton")).to_be_visible()
    expect(ongoing).to_contain_text(PROMPT)
    screenshot(page, "sidebar-ongoing", "#sidebar")
    # in the other browser too, pushed to its sidebar
    watched_ongoing = watcher.page.locator(f"#group-ongoing a[data-id='{research_id}']")
    expect(watched_ongoing.locator(".skeleton")).to_be_visible()
    expect(watcher.page.locator("#view-new")).to_be_visible()

    # and clicking it (from the start page) shows its live log, growing while it runs
    page.click("#new-research")
    expect(page.locator("#view-new")).to_be_visible()
    ongoing.click()
    expect(page).to_have_url(f"{daphne.url}/research/{research_id}/")
    expect(page.locator("#r-title")).to_have_text(PROMPT)
    expect(page.locator("#r-connection")).to_have_text("Live")
    expect(page.locator("#events li.event").first).to_be_visible()
    seen = len(event_seqs(page))
    page.wait_for_function("n => document.querySelectorAll('#events li.event').length > n", arg=seen)
    expect(page.locator("#tree li.q").first).to_be_visible()
    page.wait_for_function("() => document.querySelectorAll('#tree .site').length >= 3")
    assert Research.objects.get(pk=research_id).status in (ResearchStatus.RUNNING, ResearchStatus.REPORTING)
    expect(page.locator("#cancel-button")).to_be_visible()
    screenshot(page, "live-log")

    # a second browser shows the same history at once
    shown = event_seqs(page)
    second = open_page()
    sign_in(second.page, daphne.url, "alice", f"/research/{research_id}/")
    second.page.wait_for_function(
        "seqs => seqs.every((s) => document.querySelector(`#events li[data-seq='${s}']`))", arg=shown, timeout=5000
    )

    # when it finishes it moves to Today with its title (the report's), in every browser, and the report renders
    # with working citation links
    expect(page.locator("#r-status")).to_have_text("Completed", timeout=FINISH_TIMEOUT)
    assert Research.objects.get(pk=research_id).title == REPORT_TITLE
    expect(page.locator(f"#group-today a[data-id='{research_id}'] .item-title")).to_have_text(REPORT_TITLE)
    expect(page.locator("#r-title")).to_have_text(REPORT_TITLE)
    expect(ongoing).to_have_count(0)
    expect(watcher.page.locator(f"#group-today a[data-id='{research_id}'] .item-title")).to_have_text(REPORT_TITLE)
    expect(watched_ongoing).to_have_count(0)
    expect(watcher.page.locator("#group-ongoing")).to_be_hidden()
    expect(page.locator("#tab-report")).to_have_attribute("aria-selected", "true")
    report = page.locator("#report-body")
    expect(report.locator("h2", has_text="Sources")).to_be_visible()
    citations = report.locator(f"a[href^='{fake_web.url}/page/']")
    assert citations.count() > 0
    for index in range(citations.count()):
        link = citations.nth(index)
        assert link.get_attribute("target") == "_blank", link
        assert link.get_attribute("rel") == "noopener noreferrer", link
    cited = citations.first.get_attribute("href")
    with first.context.expect_page() as opened:
        citations.first.click()
    source = opened.value
    source.wait_for_load_state()
    assert source.url == cited and source.locator("article").count() == 1
    source.close()
    with page.expect_download() as download:
        page.click("#download-report")
    assert "## Sources" in Path(download.value.path()).read_text()
    screenshot(page, "report")

    # both tabs hold the whole history, in order, exactly once, with times; the same tree, nested as the
    # queries are; and the database's counts
    database = list(Event.objects.filter(research_id=research_id).order_by("seq").values_list("seq", flat=True))
    children = sorted([str(q.pk), str(q.parent_id)] for q in SerpQuery.objects.filter(research_id=research_id, depth=2))
    assert len(children) == 2
    websites = Website.objects.filter(research_id=research_id)
    found = websites.count()
    analysed = websites.filter(status=WebsiteStatus.ANALYZED).count()
    failed = websites.filter(status=WebsiteStatus.FAILED).count()
    assert analysed > 0
    for watched in (first, second):
        expect(watched.page.locator("#r-status")).to_have_text("Completed")
        expect(watched.page.locator("#events li.event")).to_have_count(len(database))
        assert event_seqs(watched.page) == database
        times = watched.page.locator("#events li.event time").all_inner_texts()
        assert len(times) == len(database) and all(re.fullmatch(r"\d\d:\d\d:\d\d", t) for t in times), times
        expect(watched.page.locator("#tree li.q")).to_have_count(4)
        expect(watched.page.locator("#tree > li.q[data-depth='1']")).to_have_count(2)
        assert sorted(watched.page.eval_on_selector_all("#tree li.q[data-depth='2']", NESTED_UNDER)) == children
        assert watched.page.locator("#s-queries").inner_text() == "4 / 4"
        assert watched.page.locator("#s-analysed").inner_text() == f"{analysed} / {found}"
        assert watched.page.locator("#s-failed").inner_text() == str(failed)
        expect(watched.page.locator("#s-elapsed")).to_have_text(
            re.compile(r"^\d\d:\d\d of \d+:\d\d:\d\d$")
        )  # of the default time budget
        assert watched.errors == [] and watched.dialogs == []
    assert watcher.errors == []
    page.click("#tab-log")
    screenshot(page, "live-log-finished")


def test_hostile_pages_and_model_output_stay_inert_text(
    daphne, workers, research_model, fake_llm, fake_searx, fake_web, user, open_page
) -> None:
    # given pages, search results and a model that all carry script, handler and javascript: payloads
    title_page = fake_web.add_page(
        "/hostile-title",
        "<!doctype html><html><head><title>&lt;img src=x onerror=alert('xss-title')&gt;</title></head><body>"
        "<article><p>This page carries a hostile title and one plain sentence of measured content.</p></article>"
        "</body></html>",
    )
    fake_searx.results_for = lambda q: [
        {"url": fake_web.url + "/hostile", "title": f"{IMG} hostile result", "content": SCRIPT},
        {"url": title_page, "title": f"{SCRIPT} second"},
        {"url": JS_URL, "title": "a javascript: result"},
        fake_web.page_url(f"plain-{query_slug(q)}"),
    ]
    fake_searx.delay = 0.3
    fake_llm.handlers["followup_questions"] = followups([f"{SCRIPT} which years?", f"{IMG} which places?"])
    research_model.top_names = [f"{SCRIPT} query", f"{IMG} query [x]({JS_URL})"]
    analysis, report = research_model.analysis, research_model.report

    def hostile_analysis(body: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
        result = analysis(body, schema)
        if result["facts"]:
            payload = {"fact": f"Payload {IMG} and [link]({JS_URL})", "quote": result["facts"][0]["quote"]}
            result["facts"].insert(0, payload)
        if HOSTILE_SENTENCE in str(body):  # the hostile page's own text, quoted verbatim
            result["facts"].insert(0, {"fact": f"The page says {SCRIPT}", "quote": HOSTILE_SENTENCE})
        return result

    def hostile_report(body: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
        result = report(body, schema)
        result["title"] = f"Report {SCRIPT}"
        result["summary"].append(
            {"text": f"Inline {SCRIPT} and {IMG} and [a link]({JS_URL}) here.", "sources": [1], "quotes": []}
        )
        return result

    fake_llm.handlers["website_analysis"] = hostile_analysis
    fake_llm.handlers["report_outline"], fake_llm.handlers["report_section"] = outline_and_sections(hostile_report)
    watched = open_page()
    page = watched.page
    sign_in(page, daphne.url, "alice")

    # when the research runs
    research_id = start_in_form(page, f"Research {SCRIPT} and {IMG} then {JS_URL}", ["<b>bold</b>", IMG], 2, 1)
    expect(page.locator("#r-status")).to_have_text("Completed", timeout=FINISH_TIMEOUT)
    expect(page.locator("#report-body h1")).to_be_visible()

    # then nothing ran and nothing was injected, on the report...
    assert page.evaluate(INJECTED) == CLEAN
    expect(page.locator("#report-body h1")).to_have_text(f"Report {SCRIPT}")
    expect(page.locator("#report-body")).to_contain_text(f"Inline {SCRIPT} and {IMG} and a link here.")
    # and the downloaded report.md says the same in markdown, without any raw HTML
    with page.expect_download() as download:
        page.click("#download-report")
    downloaded = Path(download.value.path()).read_text()
    assert downloaded.startswith("# Report &lt;script&gt;alert('xss-script')&lt;/script&gt;\n"), downloaded[:200]
    assert "&lt;img src=x onerror=alert('xss-img')&gt; and a link here." in downloaded
    assert "<script" not in downloaded and "<img" not in downloaded
    screenshot(page, "hostile-report")
    # ...and on the live log, where every payload is visible as text
    page.click("#tab-log")
    page.click("#panel-log .request summary")
    assert page.evaluate(INJECTED) == CLEAN
    expect(page.locator("#r-prompt")).to_have_text(f"Research {SCRIPT} and {IMG} then {JS_URL}")
    title = Research.objects.get(pk=research_id).title
    assert title == f"Report {SCRIPT}"
    expect(page.locator("#r-title")).to_have_text(title)
    expect(page.locator(f"#group-today a[data-id='{research_id}'] .item-title")).to_have_text(title)
    expect(page.locator("#r-questions dt").first).to_have_text(f"{SCRIPT} which years?")
    expect(page.locator("#r-questions dd").first).to_have_text("<b>bold</b>")
    expect(page.locator("#tree .q-text").first).to_have_text(f"{SCRIPT} query")
    expect(page.locator("#tree .fact", has_text=IMG).first).to_be_visible()
    expect(page.locator("#tree .quote", has_text="<script>alert(1)</script>").first).to_be_visible()
    expect(page.locator("#tree .site-title", has_text=f"{IMG} hostile result").first).to_be_visible()
    expect(page.locator("#events .event-text", has_text=SCRIPT).first).to_be_visible()
    for element in page.locator(".site-title").all():
        href = element.get_attribute("href")
        assert href is None or href.startswith("http://127.0.0.1:"), href
    screenshot(page, "hostile-log")
    assert watched.dialogs == []
    assert watched.errors == []
