"""For the browser tests: where Chromium is, the viewports, and screenshots (on request, and of failed tests)."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

from devtools.processes import ARTIFACTS

if TYPE_CHECKING:
    from playwright.sync_api import Page

SCREENSHOTS = ARTIFACTS / "screenshots"
FAILURES = ARTIFACTS / "browser-failures"
DESKTOP = {"width": 1400, "height": 900}
PHONE = {"width": 390, "height": 844}


def chromium() -> Path:
    """Debian's Chromium (scripts/ensure-browser.sh installs it), or the one CHROMIUM names."""
    return Path(os.environ.get("CHROMIUM", "/usr/bin/chromium"))


def screenshot(target: Page, name: str, selector: str | None = None) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    if selector:
        target.locator(selector).screenshot(path=path, animations="disabled")
    else:
        target.screenshot(path=path, animations="disabled")
    return path


def save_failure(test_name: str, pages: list[Page]) -> None:
    """A screenshot and the URL of every page a failed test left open, under test-artifacts/browser-failures/."""
    FAILURES.mkdir(parents=True, exist_ok=True)
    stem = re.sub(r"[^\w.-]+", "_", test_name)
    urls = []
    for index, page in enumerate(pages):
        path = FAILURES / f"{stem}-{index}.png"
        try:
            page.screenshot(path=path, full_page=True, timeout=10_000)
        except Exception as error:  # noqa: BLE001 - a page that cannot be shot must not hide the test's own failure
            path = f"(no screenshot: {error})"
        urls.append(f"{index}: {page.url} {path}")
    (FAILURES / f"{stem}.txt").write_text("\n".join(urls) + "\n")


def answer_one_question(page: Page, breadth: int, depth: int) -> None:
    """On the start page of a signed-in user: ask for one follow-up question, answer it, and set the shape; the
    answers form is left ready to start."""
    from playwright.sync_api import expect

    page.fill("#prompt", "How do heat pumps perform in Nordic winters?")
    page.fill("#num-questions", "1")
    page.click("#ask-button")
    expect(page.locator("#questions textarea")).to_have_count(1)
    page.fill("#answer-0", "Below -20 °C")
    page.fill("#breadth", str(breadth))
    page.fill("#depth", str(depth))


# Chromium's "good" line. Measured 0.014-0.018, idle or with three busy CPU loops beside it; it was 0.145 once on a
# loaded run before the events box kept its scrollbar's gutter from the start (the scrollbar appearing narrowed
# and rewrapped every row) and the actions row its buttons' height (the header grew by 3-6 px at load).
MAX_LAYOUT_SHIFT = 0.1

# Every layout shift not caused by the reader, from the page's load on (the report growing while it is written
# included), with when (ms), what moved and from where to where (y and height of each moved element), for the
# failure message. Shifts of rows inside the events box alone are the log following its newest row (new rows below,
# the oldest leaving above, scrolled to the end): that is its purpose, not a jump, and Chromium counts it when the
# rows leave in the frame a batch arrives in (0.11 once in CI, when the first events came in two pushes); they are
# kept apart in `__logShift`.
LAYOUT_SHIFTS = """() => {
  window.__shift = 0;
  window.__logShift = 0;
  window.__shifts = [];
  const log = document.getElementById("events-box");
  new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) {
      if (entry.hadRecentInput) continue;
      const sources = entry.sources || [];
      if (sources.length && sources.every((s) => s.node && log.contains(s.node))) {
        window.__logShift += entry.value;
        continue;
      }
      window.__shift += entry.value;
      const moved = (entry.sources || []).map((s) => s.node && (s.node.id || s.node.className || s.node.nodeName));
      const rect = (r) => [Math.round(r.y), Math.round(r.height)];
      const rects = (entry.sources || []).map((s) => [...rect(s.previousRect), ...rect(s.currentRect)]);
      window.__shifts.push([entry.value, Math.round(entry.startTime), moved, rects]);
    }
  }).observe({ type: "layout-shift", buffered: true });
}"""
