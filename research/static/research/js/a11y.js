import { h } from "./dom.js";

// Keyboard and screen-reader helpers: the WAI-ARIA tabs pattern, headings nested under the page's one H1, focus
// moved to a view's heading when the view changes.

// Left/Right (wrapping), Home and End move between the visible tabs of `tablist` and select the tab they reach
// (automatic activation: each panel is already there, so showing it costs nothing). `select(tab)` shows its panel.
export function tabKeys(tablist, select) {
  tablist.addEventListener("keydown", (event) => {
    const tabs = [...tablist.querySelectorAll('[role="tab"]')].filter((tab) => !tab.hidden);
    const index = tabs.indexOf(document.activeElement);
    if (index < 0 || event.altKey || event.ctrlKey || event.metaKey) return;
    const next = {
      ArrowRight: (index + 1) % tabs.length,
      ArrowLeft: (index - 1 + tabs.length) % tabs.length,
      Home: 0,
      End: tabs.length - 1,
    }[event.key];
    if (next === undefined) return;
    event.preventDefault();
    select(tabs[next]);
    tabs[next].focus();
  });
}

// A document shown inside the page (the report, the error output), made to fit it:
// - it brings its own H1..H6; under the page's H1 they are announced one level deeper, so that the page keeps one
//   H1 and its outline has no jumps. The elements stay what they are (their look and the selectors on them do not
//   change); only their ARIA level does.
// - a table may be wider than the screen and scroll sideways: it goes in a labelled region that is a Tab stop, so
//   that a keyboard can scroll it too.
export function prepareDocument(container) {
  for (const heading of container.querySelectorAll("h1, h2, h3, h4, h5, h6")) {
    const level = Number(heading.tagName.slice(1));
    if (level < 6) heading.setAttribute("aria-level", String(level + 1));
  }
  container.querySelectorAll("table").forEach((table, index) => {
    if (table.parentElement.classList.contains("table-scroll")) return;
    const label = table.caption ? table.caption.textContent : `Table ${index + 1}`;
    const region = h("div", { class: "table-scroll", tabindex: "0", role: "region", "aria-label": label });
    table.replaceWith(region);
    region.append(table);
  });
}

// After a view change the focused element may be gone or hidden: put focus on the new view's heading
// (tabindex=-1), where a screen reader starts reading and the next Tab goes on from.
export function focusHeading(heading) {
  heading.focus({ preventScroll: true });
}
