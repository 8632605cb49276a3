// The sidebar: ongoing research as skeleton loaders, past research grouped by day, live from /ws/research/.
import { h } from "./dom.js";
import { ACTIVE_STATUSES, formatDateTime, newestFirst, researchBadge, sidebarGroup, statusLabel } from "./lib.js";
import { SidebarFeed } from "./live.js";

const GROUPS = ["ongoing", "today", "week", "month", "older"];
// Pushes are delivered at most once: while something runs, ask for the whole list now and then, so a lost
// "completed" does not leave a skeleton until a reload. (A reconnect gets the list from the server anyway.)
const LIST_REFRESH_MS = 10000;

export class Sidebar {
  constructor(root, { onOpen }) {
    this.root = root;
    this.onOpen = onOpen;
    this.items = new Map(); // id -> summary
    // Research deleted from this page: a push or a list sent before the delete landed must not bring it back.
    this.gone = new Set();
    this.nodes = new Map(); // id -> {li, group, sig}
    this.activeId = null;
    this.loaded = false;
    this.lists = {};
    for (const group of GROUPS) {
      const section = root.querySelector(`[data-group="${group}"]`);
      this.lists[group] = { section, list: section.querySelector("ul") };
    }
    this.empty = root.querySelector("#sidebar-empty");
    this.noMatch = root.querySelector("#sidebar-no-match");
    // The search keeps the items whose title holds every word typed, in any case.
    this.words = [];
    const search = root.querySelector("#sidebar-search");
    search.addEventListener("input", () => {
      this.words = search.value.toLowerCase().split(/\s+/).filter(Boolean);
      this.render();
    });
    this.connection = root.querySelector("#sidebar-connection");
    this.feed = new SidebarFeed({
      onList: (list) => this.replace(list),
      onItem: (item) => this.upsert(item),
      onStatus: (status) => {
        this.connection.hidden = status === "live";
      },
    }).start();
    // Days roll over while the page stays open.
    window.setInterval(() => this.render(), 60000);
    window.setInterval(() => {
      if (this.ongoing()) this.feed.refresh();
    }, LIST_REFRESH_MS);
  }

  ongoing() {
    return [...this.items.values()].some((item) => ACTIVE_STATUSES.has(item.status));
  }

  replace(list) {
    this.items = new Map(list.filter((item) => !this.gone.has(item.id)).map((item) => [item.id, item]));
    this.loaded = true;
    this.render();
  }

  upsert(item) {
    if (this.gone.has(item.id)) return;
    const known = this.items.get(item.id);
    this.items.set(item.id, { ...(known || {}), ...item });
    this.render();
  }

  remove(id) {
    this.gone.add(id);
    this.items.delete(id);
    this.render();
  }

  matches(item) {
    const title = String(item.title || "").toLowerCase();
    return this.words.every((word) => title.includes(word));
  }

  setActive(id) {
    this.activeId = id;
    for (const [itemId, node] of this.nodes) {
      const link = node.li.querySelector("a");
      if (itemId === id) link.setAttribute("aria-current", "page");
      else link.removeAttribute("aria-current");
    }
  }

  render() {
    const now = new Date();
    const byGroup = Object.fromEntries(GROUPS.map((group) => [group, []]));
    let shown = 0;
    for (const item of this.items.values()) {
      if (!this.matches(item)) continue;
      byGroup[sidebarGroup(item, now)].push(item);
      shown += 1;
    }
    for (const [id, node] of this.nodes) {
      if (!this.items.has(id) || !this.matches(this.items.get(id))) {
        node.li.remove();
        this.nodes.delete(id);
      }
    }
    for (const group of GROUPS) {
      const items = byGroup[group].sort(newestFirst);
      const { section, list } = this.lists[group];
      const wanted = items.map((item) => this.node(item, group));
      // Move nodes only when the order changed: re-inserting a node restarts its loader animation.
      const current = [...list.children];
      if (current.length !== wanted.length || current.some((li, i) => li !== wanted[i])) {
        list.replaceChildren(...wanted);
      }
      section.hidden = wanted.length === 0;
    }
    this.empty.hidden = !this.loaded || this.items.size > 0;
    this.noMatch.hidden = !this.loaded || this.items.size === 0 || shown > 0;
  }

  node(item, group) {
    const sig = JSON.stringify([group, item.title, item.status, item.created_at]);
    const known = this.nodes.get(item.id);
    if (known && known.sig === sig) return known.li;
    const li = h("li", {}, group === "ongoing" ? this.ongoingLink(item) : this.pastLink(item));
    if (known) known.li.replaceWith(li);
    this.nodes.set(item.id, { li, sig });
    if (item.id === this.activeId) li.querySelector("a").setAttribute("aria-current", "page");
    return li;
  }

  // Named by what it shows (no aria-label): a name that differed from the visible words would fail voice control.
  link(item, className, children) {
    const a = h("a", { class: className, dataset: { id: item.id } }, children);
    a.href = `/research/${encodeURIComponent(item.id)}/`;
    a.addEventListener("click", (event) => {
      if (event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
      event.preventDefault();
      this.onOpen(item.id);
    });
    return a;
  }

  // A skeleton loader shaped like the report title it will become.
  ongoingLink(item) {
    return this.link(item, "item item-ongoing", [
      h(
        "span",
        { class: "skeleton", "aria-hidden": "true" },
        h("span", { class: "skeleton-bar" }),
        h("span", { class: "skeleton-bar skeleton-bar-short" }),
      ),
      h(
        "span",
        { class: "item-caption" },
        h("span", { class: "live-dot", "aria-hidden": "true" }),
        h("span", { class: "item-caption-text", text: `${statusLabel(item.status)} · ${item.title}` }),
      ),
    ]);
  }

  // The title may be cut to two lines: its whole text and the day it was made show beneath and on hover.
  pastLink(item) {
    // A whole completed research needs no badge; any other ending says what it was.
    const { label, className } = researchBadge(item);
    const whole = item.status === "completed" && !["partial", "unanswered"].includes(item.outcome);
    const badge = whole ? null : h("span", { class: className, text: label });
    const made = formatDateTime(item.created_at);
    const link = this.link(item, "item", [
      h("span", { class: "item-title", text: item.title }),
      badge,
      made ? h("span", { class: "item-date", text: made }) : null,
    ]);
    link.title = made ? `${item.title} (${made})` : item.title;
    return link;
  }
}
