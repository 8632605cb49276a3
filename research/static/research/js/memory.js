// The research memory panel: insights, open gaps and contradictions from the snapshot, each citing the analysed
// websites it rests on. A long research gathers hundreds of items, so the panel stays compact: folded into one
// line of counts until opened, a filter over the items' text, and the first ITEMS_SHOWN of each kind until asked
// for more. The websites are numbered once for the whole panel, so one page keeps one number; each link shows the
// page's title. It is rebuilt from each snapshot, keeping what the reader opened and typed.
import { h, link, show } from "./dom.js";
import { shortUrl } from "./lib.js";

const SECTIONS = [
  ["insights", "Insights", "insight", "insights"],
  ["contradictions", "Contradictions", "contradiction", "contradictions"],
  ["gaps", "Open questions", "open question", "open questions"],
];
const ITEMS_SHOWN = 8;

// Website id → {url, title}, from the snapshot's queries: memory items name websites by id.
function websites(snapshot) {
  const byId = new Map();
  for (const query of snapshot.queries || []) {
    for (const website of query.websites || []) byId.set(website.id, website);
  }
  return byId;
}

function counts(memory) {
  return SECTIONS.map(([key, , one, many]) => {
    const n = (memory[key] || []).length;
    return `${n} ${n === 1 ? one : many}`;
  }).join(", ");
}

export class MemoryPanel {
  constructor(container) {
    this.container = container;
    this.open = false;
    this.filter = "";
    this.expanded = new Set(); // kinds shown whole
  }

  reset() {
    this.open = false;
    this.filter = "";
    this.expanded.clear();
  }

  // `growing`: the research is under way, so the panel is shown (folded, "nothing yet") before its first item.
  // `deepen(gapId, button)`, when given: each open question offers to dig deeper into it.
  render(snapshot, growing = false, deepen = null) {
    this.growing = growing;
    this.deepen = deepen;
    const memory = snapshot.memory || { insights: [], gaps: [], contradictions: [] };
    const total = SECTIONS.reduce((sum, [key]) => sum + (memory[key] || []).length, 0);
    show(this.container, total > 0 || growing);
    if (!total) {
      this.container.replaceChildren(
        h("div", { class: "memory-details memory-empty" }, h("h2", { class: "section-title", id: "memory-title", text: "Research memory" }), h("span", { class: "memory-counts", text: "nothing yet" })),
      );
      return;
    }
    const byId = websites(snapshot);
    const numbers = new Map(); // website id → its number in this panel
    const cite = (id) => {
      const website = byId.get(id);
      if (!numbers.has(id)) numbers.set(id, numbers.size + 1);
      const name = website.title || shortUrl(website.url);
      return link(website.url, `[${numbers.get(id)}]`, { class: "memory-source", title: name, "aria-label": `Source ${numbers.get(id)}: ${name}` });
    };
    const wanted = this.filter.trim().toLowerCase();
    const groups = [];
    for (const [key, title] of SECTIONS) {
      const items = memory[key] || [];
      if (!items.length) continue;
      const matching = wanted ? items.filter((item) => String(item.text).toLowerCase().includes(wanted)) : items;
      const whole = this.expanded.has(key) || Boolean(wanted);
      const shown = whole ? matching : matching.slice(0, ITEMS_SHOWN);
      const list = h(
        "ul",
        { class: `memory-list memory-${key}` },
        ...shown.map((item) => {
          const known = (item.website_ids || []).filter((id) => byId.has(id));
          const sources = known.length
            ? h("span", { class: "memory-sources" }, ...known.flatMap((id, index) => (index ? [" ", cite(id)] : [cite(id)])))
            : null;
          const dig =
            key === "gaps" && deepen
              ? h("button", {
                  type: "button",
                  class: "button button-small memory-deepen",
                  text: "Dig deeper",
                  "aria-label": `Dig deeper: ${item.text}`,
                  onclick: (event) => deepen(item.id, event.currentTarget),
                })
              : null;
          return h("li", { class: "memory-item", dataset: { memoryId: String(item.id) } }, h("span", { text: item.text }), " ", sources, dig ? " " : null, dig);
        }),
      );
      const more =
        matching.length > shown.length
          ? h("button", {
              type: "button",
              class: "button button-small memory-more",
              text: `Show all ${matching.length}`,
              onclick: () => {
                this.expanded.add(key);
                this.render(snapshot, this.growing, this.deepen);
              },
            })
          : null;
      const heading = wanted ? `${title} (${matching.length} of ${items.length})` : `${title} (${items.length})`;
      groups.push(h("section", { class: "memory-group", dataset: { kind: key } }, h("h3", { text: heading }), list, more));
    }
    const search = h("input", {
      type: "search",
      class: "memory-filter",
      placeholder: "Filter the memory",
      "aria-label": "Filter the research memory",
      value: this.filter,
    });
    search.value = this.filter;
    search.addEventListener("input", () => {
      this.filter = search.value;
      const at = search.selectionStart;
      this.render(snapshot, this.growing, this.deepen);
      const again = this.container.querySelector(".memory-filter");
      again.focus();
      again.setSelectionRange(at, at);
    });
    const details = h(
      "details",
      { class: "memory-details", open: this.open },
      h("summary", {}, h("h2", { class: "section-title", id: "memory-title", text: "Research memory" }), h("span", { class: "memory-counts", text: counts(memory) })),
      search,
      ...groups,
    );
    details.addEventListener("toggle", () => {
      this.open = details.open;
    });
    this.container.replaceChildren(details);
  }
}
