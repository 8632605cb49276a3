// The report as it is written: its sections in outline order as they land; the assembled report replaces all of
// it once stored. A section is only ever added at the end of what is shown (a section written before the ones above
// it waits for them), and nothing stands below it, so a landing section never moves what the reader is reading:
// skeletons for the sections still to come would be pushed down by every section landing above them, by a height
// nobody knows before the section is written. One line above the sections says which are still being written.
import { ApiError, api, h, setSanitisedHtml, show } from "./dom.js";

export class ReportGrowth {
  constructor(container) {
    this.container = container;
    this.researchId = null;
    this.version = null;
    this.note = null;
    this.sections = []; // the outline as the snapshot gives it: {position, title, status}
    this.nodes = new Map(); // position -> {html, shown, loading}
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
      this.note = h("p", { class: "growth-note" });
      this.container.replaceChildren(this.note);
    }
    this.sections = [...sections].sort((a, b) => a.position - b.position);
    for (const section of this.sections) {
      const node = this.nodes.get(section.position) || { html: null, shown: false, loading: false };
      this.nodes.set(section.position, node);
      if (section.status === "written" && node.html === null && !node.loading) this.load(node, section.position);
    }
    this.flush();
    return true;
  }

  isCurrent(report, research) {
    return Boolean(report) && report.version === research.report_version;
  }

  async load(node, position) {
    const id = this.researchId;
    node.loading = true;
    try {
      const html = await api(`/api/research/${id}/sections/${position}.html`);
      if (this.researchId !== id) return;
      node.html = html;
      this.flush();
    } catch (error) {
      if (!(error instanceof ApiError && error.status === 404)) console.warn("section", position, error.message);
    } finally {
      node.loading = false; // on a failure, the next snapshot tries again
    }
  }

  // Shows, at the end, each section whose sections above are all shown; then says what is still being written.
  flush() {
    const waiting = [];
    for (const section of this.sections) {
      const node = this.nodes.get(section.position);
      if (!waiting.length && node.html !== null && !node.shown) {
        const dataset = { position: String(section.position), title: section.title, status: "written" };
        const el = h("section", { class: "growth-section", dataset });
        setSanitisedHtml(el, node.html); // the written section carries its own heading
        this.container.append(el);
        node.shown = true;
      }
      if (!node.shown) waiting.push(section.title);
    }
    const done = this.sections.length - waiting.length;
    this.note.textContent = waiting.length
      ? `The report is being written: ${done} of ${this.sections.length} sections shown; next: ${waiting.join(", ")}.`
      : "The report is being put together.";
    this.note.title = this.note.textContent; // whole, where one line cuts it
  }
}
