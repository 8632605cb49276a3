// The report as it is written: its sections in outline order as they land, a skeleton for each still being written.
// A section already shown is never fetched or drawn again; the assembled report replaces all of it once stored.
import { ApiError, api, h, setSanitisedHtml, show } from "./dom.js";

export class ReportGrowth {
  constructor(container) {
    this.container = container;
    this.researchId = null;
    this.version = null;
    this.nodes = new Map(); // position -> {el, body, loaded}
  }

  // True while it shows sections (the research is writing its report and none is stored for this version yet).
  render(snapshot) {
    const r = snapshot.research;
    const sections = snapshot.report_sections || [];
    const growing = r.status === "reporting" && sections.length > 0 && !this.isCurrent(snapshot.report, r);
    show(this.container, growing);
    if (!growing) return false;
    if (this.researchId !== r.id || this.version !== r.report_version) {
      this.researchId = r.id;
      this.version = r.report_version;
      this.nodes.clear();
      this.container.replaceChildren(
        h("p", { class: "growth-note", text: "The report is being written: sections appear as they land." }),
      );
    }
    for (const section of sections) this.renderSection(section);
    return true;
  }

  isCurrent(report, research) {
    return Boolean(report) && report.version === research.report_version;
  }

  renderSection(section) {
    let node = this.nodes.get(section.position);
    if (!node) {
      const title = h("h2", { class: "growth-title", text: section.title });
      const body = h("div", { class: "growth-body section-skeleton", "aria-busy": "true" }, skeletonLines());
      const dataset = { position: String(section.position), title: section.title };
      const el = h("section", { class: "growth-section", dataset }, title, body);
      node = { el, title, body, loaded: false };
      this.nodes.set(section.position, node);
      // In outline order, whatever order they arrive in.
      const after = [...this.nodes.entries()]
        .filter(([position]) => position > section.position)
        .sort(([a], [b]) => a - b)[0];
      if (after) this.container.insertBefore(el, after[1].el);
      else this.container.append(el);
    }
    node.el.dataset.status = section.status;
    if (section.status === "written" && !node.loaded) {
      node.loaded = true;
      this.load(node, section.position);
    }
  }

  async load(node, position) {
    const id = this.researchId;
    try {
      const html = await api(`/api/research/${id}/sections/${position}.html`);
      if (this.researchId !== id) return;
      node.body.classList.remove("section-skeleton");
      node.body.removeAttribute("aria-busy");
      setSanitisedHtml(node.body, html);
      node.title.remove(); // the written section carries its own heading
    } catch (error) {
      node.loaded = false; // the next snapshot tries again
      if (!(error instanceof ApiError && error.status === 404)) console.warn("section", position, error.message);
    }
  }
}

function skeletonLines() {
  return [0, 1, 2].map(() => h("span", { class: "skeleton-line" }));
}
