"""The UI on researches written straight into the database (no workers): the sidebar's groups, the report and
error-output views, the phone layout, cancelling, resuming a draft, the JavaScript helpers, and the admin under the
Content-Security-Policy."""

import re
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from research.models import FollowUpQuestion, MemoryItem, ReportSection, Research, ResearchStatus, SerpQuery, Website
from research.record.events import record_event
from tests.support.browser import PHONE, screenshot
from tests.support.deltas import Watcher
from tests.support.factories import build_tree
from tests.support.logins import sign_in
from tests.support.seed import QUOTE_ONE, seed_research

pytestmark = pytest.mark.django_db(transaction=True)

CHECK_DOM_IS_CLEAN = """() => ({
  inlineScripts: [...document.scripts].filter((s) => !s.src).length,
  handlers: [...document.querySelectorAll("*")]
    .filter((el) => [...el.attributes].some((a) => a.name.startsWith("on"))).length,
  styled: document.querySelectorAll("[style]").length,
  badLinks: [...document.querySelectorAll("a[href]")].filter((a) => !/^https?:$/.test(new URL(a.href).protocol)).length,
})"""


# A stand-in for the browser's WebSocket that records what the page sends and lets a test emit events.
SCRIPTED_SOCKET = """
        class Socket {
          constructor(url) { this.url = url; this.sent = []; this.readyState = 1; this.on = {}; Socket.all.push(this); }
          addEventListener(type, handler) { (this.on[type] ||= []).push(handler); }
          send(data) { this.sent.push(JSON.parse(data)); }
          close() {}
          emit(type, event) { (this.on[type] || []).forEach((handler) => handler(event)); }
        }
        Socket.OPEN = 1;
        Socket.all = [];
        window.WebSocket = Socket;"""


def test_sidebar_groups_past_research_by_day_and_shows_ongoing_skeletons(daphne, open_page, user) -> None:
    # given research of every age and state
    now = timezone.now()
    seed_research(user, "Heat pumps in Nordic winters", "completed", now)
    seed_research(user, "Grid-scale sodium batteries", "failed", now - timedelta(days=3))
    seed_research(user, "Small modular reactors", "cancelled", now - timedelta(days=12))
    seed_research(user, "Perovskite solar cell lifetimes", "completed", now - timedelta(days=90))
    # a long research created two days ago that finished today: filed by its creation day, as the README says
    long = seed_research(user, "Offshore wind curtailment", "completed", now - timedelta(days=2))
    Research.objects.filter(pk=long.pk).update(finished_at=now)
    ongoing = [
        seed_research(user, "Hydrogen steel making costs", status, now - timedelta(minutes=m))
        for m, status in ((3, "running"), (2, "queued"), (1, "reporting"))
    ]
    # when alice opens the app
    watched = open_page()
    page = watched.page
    sign_in(page, daphne.url, "alice")
    # then
    groups = {
        "#group-ongoing": ("Ongoing research", 3),
        "#group-today": ("Today", 1),
        "#group-week": ("Previous 7 Days", 2),
        "#group-month": ("Previous 30 Days", 1),
        "#group-older": ("Older", 1),
    }
    for selector, (heading, count) in groups.items():
        expect(page.locator(f"{selector} .group-title")).to_have_text(heading)
        expect(page.locator(f"{selector} li")).to_have_count(count)
    expect(page.locator("#group-today")).to_contain_text("Heat pumps in Nordic winters")
    expect(page.locator("#group-week")).to_contain_text("Grid-scale sodium batteries")
    expect(page.locator("#group-week")).to_contain_text("Offshore wind curtailment")
    expect(page.locator("#group-week .badge")).to_have_text("Failed")
    expect(page.locator("#group-month")).to_contain_text("Small modular reactors")
    expect(page.locator("#group-older")).to_contain_text("Perovskite solar cell lifetimes")
    for research in ongoing:
        item = page.locator(f"#group-ongoing a[data-id='{research.pk}']")
        expect(item.locator(".skeleton .skeleton-bar")).to_have_count(2)
        expect(item).to_contain_text("Hydrogen steel making costs")
    bar = page.locator("#group-ongoing .skeleton-bar").first
    assert bar.evaluate("el => getComputedStyle(el).animationName") == "shimmer"
    # (before any screenshot: Playwright hides the text caret with style attributes)
    assert page.evaluate(CHECK_DOM_IS_CLEAN) == {"inlineScripts": 0, "handlers": 0, "styled": 0, "badLinks": 0}
    screenshot(page, "sidebar", "#sidebar")
    assert watched.errors == []


def test_report_view_renders_the_report_with_citation_links(daphne, open_page, user, fake_web) -> None:
    research = seed_research(user, "Heat pumps in Nordic winters", "completed", page_url=fake_web.page_url, report=True)
    watched = open_page()
    page = watched.page
    sign_in(page, daphne.url, "alice", f"/research/{research.pk}/")
    expect(page.locator("#tab-report")).to_have_attribute("aria-selected", "true")
    report = page.locator("#report-body")
    expect(report.locator("h1")).to_have_text("Heat pumps in Nordic winters")
    expect(page.locator("#r-created")).to_contain_text("language model")
    expect(report.locator("h2", has_text="Sources")).to_be_visible()
    citations = report.locator("p a")
    expect(citations).to_have_count(5)
    expect(citations.first).to_have_text("[1]")
    for index in range(citations.count()):
        link = citations.nth(index)
        assert link.get_attribute("href").startswith(fake_web.url + "/page/report-source-")
        assert link.get_attribute("target") == "_blank"
        assert link.get_attribute("rel") == "noopener noreferrer"
    # a citation opens its page in a new tab, at its quote (a text fragment the browser scrolls to)
    with watched.context.expect_page() as opened:
        citations.first.click()
    source = opened.value
    source.wait_for_load_state()
    assert source.url.startswith(fake_web.page_url("report-source-one") + "#:~:text=")
    assert source.title() == "Report Source One"
    assert source.evaluate("window.opener") is None
    # the markdown downloads named after the report's title, as the PDF and Word exports are
    with page.expect_download() as download:
        page.click("#download-report")
    assert download.value.suggested_filename == "heat-pumps-in-nordic-winters.md"
    assert Path(download.value.path()).read_text().startswith("# Heat pumps in Nordic winters")
    # the live log is one click away and holds the whole history
    page.click("#tab-log")
    expect(page.locator("#events li.event")).to_have_count(research.last_event_seq)
    expect(page.locator("#tree li.q")).to_have_count(4)
    assert watched.errors == []


def test_a_web_citation_opens_its_page_scrolled_to_the_quote(daphne, open_page, user, fake_web, fakes) -> None:
    # given a report citing a long page whose quoted sentence is far below its first screen
    filler = "".join(f"<p>Background note {n} on heat pump installation practice.</p>" for n in range(150))
    fake_web.add_page(
        "/page/report-source-one",
        f"<html><head><title>Long source</title></head><body><article>{filler}"
        f'<p id="quoted">{QUOTE_ONE}</p>{filler}</article></body></html>',
    )
    research = seed_research(user, "Heat pumps in Nordic winters", "completed", page_url=fake_web.page_url, report=True)
    watched = open_page()
    page = watched.page
    sign_in(page, daphne.url, "alice", f"/research/{research.pk}/")
    # when alice clicks its first citation
    with watched.context.expect_page() as opened:
        page.locator("#report-body p a").first.click()
    source = opened.value
    source.wait_for_load_state()
    # then the page opens scrolled to the quoted sentence, which the browser marks (a text fragment)
    assert "#:~:text=" in source.url
    source.wait_for_function("() => window.scrollY > 0", timeout=10_000)
    top, bottom, height = source.locator("#quoted").evaluate(
        "el => { const r = el.getBoundingClientRect(); return [r.top, r.bottom, window.innerHeight]; }"
    )
    assert 0 <= top and bottom <= height, (top, bottom, height)
    screenshot(source, "citation-web-page-at-quote")
    assert watched.errors == []


def test_offline_research_says_so(daphne, open_page, user, fake_web) -> None:
    research = seed_research(user, "Python concurrency", "completed", page_url=fake_web.page_url, report=True)
    Research.objects.filter(pk=research.pk).update(engine="extractive")
    page = open_page().page
    sign_in(page, daphne.url, "alice", f"/research/{research.pk}/")
    expect(page.locator("#r-created")).to_contain_text("offline: extractive engine, no language model")


def test_failed_research_shows_its_error_output(daphne, open_page, user, fake_web) -> None:
    research = seed_research(
        user, "Grid-scale sodium batteries", "failed", page_url=fake_web.page_url, error_output=True
    )
    watched = open_page()
    page = watched.page
    sign_in(page, daphne.url, "alice", f"/research/{research.pk}/")
    expect(page.locator("#tab-error")).to_have_attribute("aria-selected", "true")
    expect(page.locator("#tab-report")).to_be_hidden()
    body = page.locator("#error-body")
    expect(body.locator("h2", has_text="What went wrong")).to_be_visible()
    link = body.locator("a")
    assert link.get_attribute("target") == "_blank" and link.get_attribute("rel") == "noopener noreferrer"
    expect(page.locator("#r-status")).to_have_text("Failed")
    expect(page.locator("#download-error")).to_have_attribute("href", f"/api/research/{research.pk}/error-output.md")
    expect(page.locator("#cancel-button")).to_be_hidden()
    screenshot(page, "error-output")
    assert watched.errors == []


def test_cancel_stops_a_running_research_and_updates_every_view(daphne, open_page, user) -> None:
    research = seed_research(user, "Hydrogen steel making costs", "running")
    watched = open_page(accept_dialogs=True)
    page = watched.page
    sign_in(page, daphne.url, "alice", f"/research/{research.pk}/")
    expect(page.locator(f"#group-ongoing a[data-id='{research.pk}']")).to_be_visible()
    expect(page.locator("#events li.event")).to_have_count(research.last_event_seq)
    page.click("#cancel-button")
    # the cancellation is recorded, pushed, and shown: status, event, sidebar
    expect(page.locator("#r-status")).to_have_text("Cancelled")
    expect(page.locator("#events li.event").last).to_have_attribute("data-type", "research_cancelled")
    expect(page.locator("#cancel-button")).to_be_hidden()
    expect(page.locator(f"#group-today a[data-id='{research.pk}']")).to_be_visible()
    expect(page.locator("#group-ongoing")).to_be_hidden()
    assert watched.dialogs == ["confirm: Cancel this research? Everything found so far is kept."]
    assert Research.objects.get(pk=research.pk).status == ResearchStatus.CANCELLED


def test_phone_layout_collapses_the_sidebar(daphne, open_page, user) -> None:
    running = seed_research(user, "Hydrogen steel making costs", "running")
    seed_research(user, "Heat pumps in Nordic winters", "completed", report=True)
    watched = open_page(PHONE)
    page = watched.page
    sign_in(page, daphne.url, "alice")
    sidebar = page.locator("#sidebar")
    expect(page.locator("#sidebar-toggle")).to_be_visible()
    expect(sidebar).not_to_be_in_viewport()
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    # closed, the drawer casts no shadow onto the page and none of its links takes the keyboard focus
    expect(page.locator(f"#group-ongoing a[data-id='{running.pk}']")).to_be_attached()
    assert sidebar.evaluate("el => getComputedStyle(el).boxShadow") == "none"
    assert tab_stops_in_sidebar(page) == []
    page.click("#sidebar-toggle")
    expect(sidebar).to_be_in_viewport()
    page.wait_for_timeout(300)  # the slide-in transition
    assert sidebar.evaluate("el => getComputedStyle(el).boxShadow") != "none"
    screenshot(page, "phone-sidebar")
    assert "#new-research" in tab_stops_in_sidebar(page)
    page.click(f"#group-ongoing a[data-id='{running.pk}']")
    expect(sidebar).not_to_be_in_viewport()
    expect(sidebar).to_be_hidden()  # visibility: hidden, once it has slid out
    expect(page.locator("#r-title")).to_have_text("Hydrogen steel making costs")
    expect(page.locator("#events li.event")).to_have_count(running.last_event_seq)
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    screenshot(page, "phone-live-log")
    assert watched.errors == []


def tab_stops_in_sidebar(page) -> list[str]:
    """Where Tab goes from the phone's sidebar toggle (the sidebar follows it in the page): the stops inside the
    sidebar, by id or tag."""
    page.focus("#sidebar-toggle")
    stops = []
    for _ in range(6):
        page.keyboard.press("Tab")
        stops.append(
            page.evaluate(
                """() => {
                const el = document.activeElement;
                return el && el.closest("#sidebar") ? (el.id ? `#${el.id}` : el.tagName.toLowerCase()) : null;
            }"""
            )
        )
    return [stop for stop in stops if stop]


def test_live_log_shows_only_the_research_open(daphne, open_page, user) -> None:
    # given two running researches, A opened and then B in the same page, and A in a second browser
    a = seed_research(user, "Hydrogen steel making costs", "running")
    b = seed_research(user, "Grid-scale sodium batteries", "running")
    watched = open_page()
    page = watched.page
    sign_in(page, daphne.url, "alice", f"/research/{a.pk}/")
    expect(page.locator("#events li.event")).to_have_count(a.last_event_seq)
    expect(page.locator("#r-connection")).to_have_text("Live")
    page.click(f"#group-ongoing a[data-id='{b.pk}']")
    expect(page.locator("#r-title")).to_have_text("Grid-scale sodium batteries")
    expect(page.locator("#events li.event")).to_have_count(b.last_event_seq)
    expect(page.locator("#r-connection")).to_have_text("Live")
    shown = page.locator("#events").inner_text()
    other = open_page()
    sign_in(other.page, daphne.url, "alice", f"/research/{a.pk}/")
    expect(other.page.locator("#events li.event")).to_have_count(a.last_event_seq)
    expect(other.page.locator("#r-connection")).to_have_text("Live")
    # when an event is recorded on A
    record_event(a.pk, "serp_query_failed", {"query": "isolation probe", "error": "HTTP 503"})
    # then A's log shows it at once, and B's, given a moment more, does not change
    expect(other.page.locator("#events li.event").last).to_contain_text("isolation probe")
    page.wait_for_timeout(1000)
    expect(page.locator("#events li.event")).to_have_count(b.last_event_seq)
    assert page.locator("#events").inner_text() == shown
    expect(page.locator("#r-title")).to_have_text("Grid-scale sodium batteries")
    assert watched.errors == [] and other.errors == []


def test_unstarted_research_resumes_in_the_start_form(daphne, open_page, user) -> None:
    research = Research.objects.create(
        owner=user, prompt="Tidal power costs", title="Tidal power costs", status=ResearchStatus.AWAITING_ANSWERS
    )
    FollowUpQuestion.objects.create(research=research, position=0, question="Which countries?")
    watched = open_page()
    page = watched.page
    sign_in(page, daphne.url, "alice")
    page.click(f"#group-today a[data-id='{research.pk}']")
    expect(page.locator("#r-notice")).to_contain_text("waiting for answers")
    page.click("#r-notice button")
    expect(page).to_have_url(daphne.url + "/")
    expect(page.locator("#answers-form")).to_be_visible()
    expect(page.locator("#prompt-preview")).to_have_text("Tidal power costs")
    expect(page.locator("#questions label")).to_have_text(["Which countries?"])
    # the plan follows breadth and depth
    for breadth, depth, total in ((4, 3, "20"), (6, 4, "96"), (5, 5, "110"), (1, 1, "1")):
        page.fill("#breadth", str(breadth))
        page.fill("#depth", str(depth))
        expect(page.locator("#plan-total")).to_have_text(total)
    page.fill("#breadth", "99")
    expect(page.locator("#plan-total")).to_have_text("–")
    page.click("#start-button")
    expect(page.locator("#answers-form .form-error")).to_contain_text("Breadth must be a whole number from 1 to")
    assert watched.errors == []


def test_start_form_reports_errors(daphne, open_page, user) -> None:
    watched = open_page()
    page = watched.page
    sign_in(page, daphne.url, "alice")
    page.click("#ask-button")
    expect(page.locator("#prompt-form .form-error")).to_have_text("Describe what you want to research.")
    page.fill("#prompt", "x" * 20)
    page.fill("#num-questions", "0")
    page.click("#ask-button")
    expect(page.locator("#prompt-form .form-error")).to_contain_text("Choose a whole number from 1 to")
    assert watched.errors == []


def test_js_helpers_match_the_spec(daphne, open_page) -> None:
    page = open_page().page
    page.goto(daphne.url + "/accounts/login/")
    got = page.evaluate(
        """async () => {
        const lib = await import("/static/research/js/lib.js");
        const spec = [[1, 1], [2, 2], [4, 2], [2, 4], [3, 3], [4, 3], [6, 4], [5, 5]];
        const now = new Date(2026, 4, 20, 0, 30);
        const afternoon = new Date(2026, 4, 19, 14, 41, 4).toISOString();
        const local = (...parts) => new Date(...parts).toISOString();
        const items = [
          // a long research created 49 days ago that finished today: filed under its creation day
          { id: "a", status: "completed", created_at: local(2026, 3, 1), finished_at: local(2026, 4, 20, 0, 10) },
          { id: "b", status: "failed", created_at: local(2026, 4, 12), finished_at: local(2026, 4, 13, 9) },
          { id: "c", status: "running", created_at: local(2026, 1, 1), finished_at: null },
          // the browser's ISO form and another (microseconds, an offset): e is the earlier, though its string
          // sorts after d's
          { id: "d", status: "awaiting_answers", created_at: "2026-05-19T12:00:00.000Z", finished_at: null },
          { id: "e", status: "draft", created_at: "2026-05-19T13:00:00.000000+02:00", finished_at: null },
        ];
        return {
          totals: spec.map(([b, d]) => lib.totalQueries(b, d)),
          levels: lib.queriesPerLevel(6, 4),
          groups: [new Date(2026, 4, 20, 0, 1), new Date(2026, 4, 19, 23, 59), new Date(2026, 4, 13, 1),
                   new Date(2026, 4, 12, 23), new Date(2026, 3, 20, 1), new Date(2026, 3, 19, 12)]
                  .map((d) => lib.dateGroup(d, now)),
          urls: ["https://a.example/x", "http://b.example", "javascript:alert(1)", "data:text/html,x", "/local"]
                  .map(lib.webUrl),
          elapsed: [lib.formatElapsed(65000), lib.formatElapsed(3723000)],
          event: lib.describeEvent({ type: "website_failed", data: { url: "https://x.example", reason: "timeout" } }),
          named: lib.describeEvent({ type: "analyzed_a_website", data: { url: "https://x.example/a?b=1", facts: 1 } },
                                   (url) => `title of ${url}`).text,
          section: lib.describeEvent({ type: "report_section_written", data: { position: 2, title: "Costs" } }).text,
          short: ["http://web:8000/collection/12/1712345678.AbCdEf_signature/", "https://x.example/a/b/?q=1#f",
                  `https://x.example/${"p".repeat(100)}`].map(lib.shortUrl),
          times: [lib.formatTime(afternoon), lib.formatDateTime(afternoon)],
          sidebar: items.map((item) => lib.sidebarGroup(item, now)),
          newestFirst: [...items].sort(lib.newestFirst).map((item) => item.id),
        };
    }"""
    )
    assert got["totals"] == [1, 4, 12, 8, 15, 20, 96, 110]
    assert got["levels"] == [6, 18, 36, 36]
    assert got["groups"] == ["today", "week", "week", "month", "month", "older"]
    assert got["urls"] == ["https://a.example/x", "http://b.example/", None, None, None]
    assert got["elapsed"] == ["01:05", "1:02:03"]
    assert got["event"] == {"tone": "fail", "text": "Skipped x.example: timeout", "detail": ""}
    assert got["named"] == "Analysed title of https://x.example/a?b=1: 1 finding"
    assert got["section"] == "Report section written: Costs"
    assert got["short"] == ["web:8000/collection/12", "x.example/a/b", f"x.example/{'p' * 59}…"]
    # one hour cycle (24-hour) for the header's date-time and the events' times
    assert got["times"][0] == "14:41:04"
    assert "14:41" in got["times"][1] and not re.search(r"\b[AP]\.?M\b", got["times"][1], re.IGNORECASE)
    # research is filed and ordered by the day it was created, finished or not (README: "by creation day")
    assert got["sidebar"] == ["older", "month", "ongoing", "week", "week"]
    assert got["newestFirst"] == ["d", "e", "b", "a", "c"]


def test_feed_catches_up_after_a_gap_and_reconnects_after_its_last_seq(daphne, open_page) -> None:
    # given the page's websocket client wired to a scripted socket
    page = open_page().page
    page.goto(daphne.url + "/accounts/login/")
    got = page.evaluate(
        """async () => {"""
        + SCRIPTED_SOCKET
        + """
        const { ResearchFeed } = await import("/static/research/js/live.js");
        const seqs = [];
        const feed = new ResearchFeed("abc", {
          onEvents: (events) => seqs.push(...events.map((e) => e.seq)), onSnapshot: () => {}, onStatus: () => {},
        }).start();
        const ws = Socket.all[0];
        ws.emit("open", {});
        const push = (message) => ws.emit("message", { data: JSON.stringify(message) });
        const snapshot = (seq) => ({
          research: { last_event_seq: seq }, questions: [], queries: [], report_sections: [],
          memory: { insights: [], gaps: [], contradictions: [] },
        });
        const delta = (base, seq) => ({
          version: 3, snapshot_version: 4, base, research: { last_event_seq: seq }, progress: {},
          report_sections: { order: [], rows: [] },
        });
        push({ type: "history", after: 0, events: [{ seq: 1 }, { seq: 2 }], snapshot: snapshot(2) });
        push({ type: "update", events: [{ seq: 2 }, { seq: 3 }], delta: delta(2, 3) });  // overlaps
        push({ type: "update", events: [{ seq: 5 }, { seq: 6 }], delta: delta(4, 6) });  // 4 was lost
        push({ type: "update", events: [{ seq: 7 }], delta: delta(6, 7) });  // still behind: no second ask
        const asked = [...ws.sent];
        const shown = feed.state.research.last_event_seq;
        push({ type: "history", after: 3, events: [4, 5, 6, 7].map((seq) => ({ seq })), snapshot: snapshot(7) });
        ws.readyState = 3;
        ws.emit("close", {});
        await new Promise((resolve) => setTimeout(resolve, 1600));
        feed.close();
        return {
          seqs, asked, shown, sockets: Socket.all.map((s) => new URL(s.url).pathname + new URL(s.url).search),
        };
    }"""
    )
    # then every event is delivered once, in order; the gap is asked for once (the state stays at the last delta
    # it could follow until the catch-up brings it whole); the reconnect asks after seq 7
    assert got["seqs"] == [1, 2, 3, 4, 5, 6, 7]
    assert got["asked"] == [{"type": "catch_up", "after": 3}]
    assert got["shown"] == 3
    assert got["sockets"] == ["/ws/research/abc/", "/ws/research/abc/?after=7"]


def test_sidebar_asks_for_the_list_while_research_runs(daphne, open_page) -> None:
    # given the sidebar wired to a scripted socket, with its timers run by hand
    page = open_page().page
    page.goto(daphne.url + "/accounts/login/")
    got = page.evaluate(
        """async () => {"""
        + SCRIPTED_SOCKET
        + """
        const timers = [];
        window.setInterval = (handler) => timers.push(handler);
        const root = document.createElement("div");
        for (const group of ["ongoing", "today", "week", "month", "older"]) {
          const section = document.createElement("section");
          section.dataset.group = group;
          section.append(document.createElement("ul"));
          root.append(section);
        }
        for (const id of ["sidebar-empty", "sidebar-connection", "sidebar-no-match"]) {
          const p = document.createElement("p");
          p.id = id;
          root.append(p);
        }
        const search = document.createElement("input");
        search.id = "sidebar-search";
        root.append(search);
        document.body.append(root);
        const { Sidebar } = await import("/static/research/js/sidebar.js");
        new Sidebar(root, { onOpen: () => {} });
        const ws = Socket.all[0];
        ws.emit("open", {});
        const push = (message) => ws.emit("message", { data: JSON.stringify(message) });
        const tick = () => timers.forEach((handler) => handler());
        const where = () => Object.fromEntries(
          [...root.querySelectorAll("a[data-id]")].map((a) => [a.dataset.id, a.closest("section").dataset.group]),
        );
        const asked = () => ws.sent.filter((m) => m.type === "list").length;
        const now = new Date().toISOString();
        const done = { id: "done", title: "Done", status: "completed", created_at: now, finished_at: now };
        const running = { id: "new", title: "New", status: "running", created_at: now, finished_at: null };
        const steps = [];
        push({ type: "researches", researches: [done] });
        tick();
        steps.push({ asked: asked(), where: where() });
        push({ type: "research", research: running });
        tick();
        steps.push({ asked: asked(), where: where() });
        // its "completed" push is lost: the sidebar keeps asking until the list says so
        tick();
        steps.push({ asked: asked(), where: where() });
        push({ type: "researches", researches: [done, { ...running, status: "completed", finished_at: now }] });
        tick();
        steps.push({ asked: asked(), where: where() });
        return steps;
    }"""
    )
    # then it asks only while something runs, and the answer moves the finished research to Today
    assert got == [
        {"asked": 0, "where": {"done": "today"}},
        {"asked": 1, "where": {"done": "today", "new": "ongoing"}},
        {"asked": 2, "where": {"done": "today", "new": "ongoing"}},
        {"asked": 2, "where": {"done": "today", "new": "today"}},
    ]


def test_admin_works_under_the_content_security_policy(daphne, open_page, django_user_model, user) -> None:
    django_user_model.objects.create_superuser("root", "root@example.com", "a-long-test-password-42")
    seed_research(user, "Heat pumps in Nordic winters", "completed")
    watched = open_page()
    page = watched.page
    page.goto(daphne.url + "/admin/")
    page.fill("#id_username", "root")
    page.fill("#id_password", "a-long-test-password-42")
    page.click("input[type=submit]")
    expect(page.locator("#site-name")).to_be_visible()
    page.goto(daphne.url + "/admin/research/research/")
    expect(page.locator("#result_list")).to_contain_text("Heat pumps in Nordic winters")
    # the admin's own scripts run: "select all" ticks every row and counts them
    page.check("#action-toggle")
    expect(page.locator("input.action-select:checked")).to_have_count(1)
    expect(page.locator(".action-counter")).to_contain_text("1 of 1 selected")
    page.locator("#result_list tbody th a").first.click()
    expect(page).to_have_url(re.compile(r"/admin/research/research/[0-9a-f-]+/change/$"))
    assert watched.csp_violations == [] and watched.errors == [], watched.failed_requests


def test_the_page_applies_deltas_as_the_reference_implementation_does(daphne, open_page, user) -> None:
    # given a research changed step by step, with the deltas a pusher would send and the snapshot after each
    research = build_tree(user, 2, 2, websites_per_query=2)
    client = Watcher(research.pk)
    steps = [client.pull()]
    expected = [client.state]
    query = research.queries.order_by("id").first()
    website = query.websites.order_by("id").first()
    changes = [
        lambda: MemoryItem.objects.create(research=research, kind="gap", text="g", key="g", website_ids=[website.pk]),
        lambda: SerpQuery.objects.create(
            research=research, parent=query, depth=2, position=9, query="n", objective="o"
        ),
        lambda: Website.objects.filter(pk=website.pk).update(title="Retitled", status="failed"),
        lambda: MemoryItem.objects.filter(research=research, kind="gap").update(closed=True),
        lambda: ReportSection.objects.create(research=research, version=1, position=1, title="S1"),
        lambda: Research.objects.filter(pk=research.pk).update(report_version=2),
    ]
    for change in changes:
        change()
        steps.append(client.pull())
        expected.append(client.state)
    # when the page's state.js applies the same deltas, from no state
    page = open_page().page
    page.goto(daphne.url + "/accounts/login/")
    got = page.evaluate(
        """async (deltas) => {
        const { applyDelta } = await import("/static/research/js/state.js");
        const states = [];
        let state = null;
        for (const delta of deltas) states.push((state = applyDelta(state, delta)));
        const stale = applyDelta({ ...state, queries: [] }, { ...deltas[2], base: 0 });
        return { states, stale };
    }""",
        steps,
    )
    # then it holds the same state after every delta, and refuses one that does not follow its state
    assert got["states"] == expected
    assert got["stale"] is None
