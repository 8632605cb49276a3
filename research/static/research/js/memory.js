// The research memory panel: insights, open gaps and contradictions from the snapshot, each linking to the
// analysed websites it rests on. Rebuilt from each snapshot (a few dozen items at most); text goes in as text.
import { h, link, show } from "./dom.js";

const SECTIONS = [
  ["insights", "Insights"],
  ["contradictions", "Contradictions"],
  ["gaps", "Open questions"],
];

// Website id → URL, from the snapshot's queries: memory items name websites by id.
function websiteUrls(snapshot) {
  const urls = new Map();
  for (const query of snapshot.queries || []) {
    for (const website of query.websites || []) urls.set(website.id, website.url);
  }
  return urls;
}

function sourceLinks(item, urls) {
  const known = (item.website_ids || []).filter((id) => urls.has(id));
  if (!known.length) return null;
  const links = known.map((id, index) => link(urls.get(id), `[${index + 1}]`, { class: "memory-source", title: urls.get(id) }));
  return h("span", { class: "memory-sources" }, ...links.flatMap((a, index) => (index ? [" ", a] : [a])));
}

export function renderMemory(container, snapshot) {
  const memory = snapshot.memory || { insights: [], gaps: [], contradictions: [] };
  const total = SECTIONS.reduce((sum, [key]) => sum + (memory[key] || []).length, 0);
  show(container, total > 0);
  if (!total) {
    container.replaceChildren();
    return;
  }
  const urls = websiteUrls(snapshot);
  const blocks = [h("h2", { class: "section-title", id: "memory-title", text: "Research memory" })];
  for (const [key, title] of SECTIONS) {
    const items = memory[key] || [];
    if (!items.length) continue;
    const list = h(
      "ul",
      { class: `memory-list memory-${key}` },
      ...items.map((item) =>
        h("li", { class: "memory-item", dataset: { memoryId: String(item.id) } }, h("span", { text: item.text }), " ", sourceLinks(item, urls)),
      ),
    );
    blocks.push(h("section", { class: "memory-group", dataset: { kind: key } }, h("h3", { text: `${title} (${items.length})` }), list));
  }
  container.replaceChildren(...blocks);
}
