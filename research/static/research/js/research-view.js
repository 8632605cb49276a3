// One research: header, progress, the live log (query tree and events) and the report or error output.
import { evaluationNode, roundLabel, updateEvaluation } from "./adaptive.js";
import { formatCost, formatTokens, partialText } from "./budget.js";
import { ApiError, api, h, link, setSanitisedHtml, show } from "./dom.js";
import {
  ACTIVE_STATUSES,
  describeEvent,
  formatDateTime,
  formatElapsed,
  formatTime,
  hostOf,
  statusLabel,
} from "./lib.js";
import { queryActions, renderReportVersions, updateQueryActions } from "./branches.js";
import { ResearchFeed } from "./live.js";
import { renderMemory } from "./memory.js";
import { ReportGrowth } from "./report-growth.js";
import { coverageText } from "./coverage.js";

export class ResearchView {
  constructor(root, { onResume, onStatus }) {
    this.root = root;
    this.onResume = onResume;
    this.onStatus = onStatus || (() => {});
    const $ = (selector) => root.querySelector(selector);
    this.el = {
      title: $("#r-title"),
      status: $("#r-status"),
      created: $("#r-created"),
      connection: $("#r-connection"),
      cancel: $("#cancel-button"),
      downloadReport: $("#download-report"),
      downloadError: $("#download-error"),
      downloadPdf: $("#download-pdf"),
      downloadDocx: $("#download-docx"),
      queries: $("#s-queries"),
      analysed: $("#s-analysed"),
      failed: $("#s-failed"),
      extracts: $("#s-extracts"),
      elapsed: $("#s-elapsed"),
      tokens: $("#s-tokens"),
      cost: $("#s-cost"),
      partial: $("#r-partial"),
      bar: $("#progress-bar"),
      progress: $("#progress"),
      notice: $("#r-notice"),
      prompt: $("#r-prompt"),
      questions: $("#r-questions"),
      tree: $("#tree"),
      treeEmpty: $("#tree-empty"),
      events: $("#events"),
      eventsBox: $("#events-box"),
      eventsCount: $("#events-count"),
      reportBody: $("#report-body"),
      reportGrowth: $("#report-growth"),
      reportVersions: $("#report-versions"),
      reportCoverage: $("#report-coverage"),
      errorBody: $("#error-body"),
    };
    this.tabs = {
      report: { tab: $("#tab-report"), panel: $("#panel-report") },
      error: { tab: $("#tab-error"), panel: $("#panel-error") },
      log: { tab: $("#tab-log"), panel: $("#panel-log") },
    };
    for (const [name, { tab }] of Object.entries(this.tabs)) {
      tab.addEventListener("click", () => {
        this.tabChosen = true;
        this.select(name);
      });
    }
    this.el.cancel.addEventListener("click", () => this.cancel());
    this.feed = null;
    this.id = null;
    window.setInterval(() => this.tick(), 1000);
  }

  open(id) {
    if (this.id === id) return;
    this.close();
    this.id = id;
    this.snapshot = null;
    this.eventCount = 0;
    this.queryNodes = new Map();
    this.websiteNodes = new Map();
    this.documents = { report: null, error: null };
    this.tabChosen = false;
    this.currentTab = null;
    this.lastStatus = null;
    this.el.title.textContent = "Loading…";
    show(this.el.partial, false);
    this.el.status.textContent = "";
    this.el.status.className = "badge";
    this.el.created.textContent = "";
    this.el.events.replaceChildren();
    this.el.tree.replaceChildren();
    show(this.root.querySelector("#memory"), false); // another research's memory must not linger
    this.el.reportBody.replaceChildren();
    this.growth = new ReportGrowth(this.el.reportGrowth);
    show(this.el.reportGrowth, false);
    this.el.errorBody.replaceChildren();
    this.el.eventsCount.textContent = "";
    show(this.el.notice, false);
    show(this.el.cancel, false);
    show(this.el.downloadReport, false);
    show(this.el.downloadError, false);
    show(this.el.downloadPdf, false);
    show(this.el.downloadDocx, false);
    show(this.tabs.report.tab, false);
    show(this.tabs.error.tab, false);
    this.select("log");
    this.setConnection("connecting");
    this.feed = new ResearchFeed(id, {
      onEvents: (events) => this.addEvents(events),
      onSnapshot: (snapshot) => this.render(snapshot),
      onStatus: (status) => this.setConnection(status),
    }).start();
  }

  close() {
    if (this.feed) this.feed.close();
    this.feed = null;
    this.id = null;
  }

  setConnection(status) {
    const labels = { connecting: "Connecting…", live: "Live", reconnecting: "Reconnecting…", gone: "Not found" };
    this.el.connection.textContent = labels[status] || status;
    this.el.connection.dataset.state = status;
    if (status === "gone") {
      this.el.title.textContent = "Research not found";
      this.notice("This research does not exist or belongs to someone else.");
    }
  }

  notice(text, action) {
    this.el.notice.replaceChildren(h("p", { text }), action || "");
    show(this.el.notice, Boolean(text));
  }

  select(name) {
    this.currentTab = name;
    for (const [tabName, { tab, panel }] of Object.entries(this.tabs)) {
      const selected = tabName === name;
      tab.setAttribute("aria-selected", String(selected));
      tab.tabIndex = selected ? 0 : -1;
      show(panel, selected);
    }
  }

  // --- snapshot -----------------------------------------------------------------------------------------

  render(snapshot) {
    this.snapshot = snapshot;
    const r = snapshot.research;
    this.el.title.textContent = r.title || "Untitled research";
    document.title = `${r.title} · Deep research`;
    this.el.status.textContent = statusLabel(r.status);
    this.el.status.className = `badge badge-${r.status}`;
    const started = `Started ${formatDateTime(r.started_at || r.created_at)}`;
    const when = r.finished_at ? `${started} · ended ${formatDateTime(r.finished_at)}` : started;
    // Say plainly when no language model was involved.
    const engine = r.engine === "extractive" ? "offline: extractive engine, no language model" : "language model";
    this.el.created.textContent = `${when} · ${engine}`;
    this.el.prompt.textContent = r.prompt;
    this.renderQuestions(snapshot.questions);
    this.renderProgress(snapshot.progress, r);
    this.renderUsage(r);
    this.renderTree(snapshot.queries);
    this.renderActions(r, snapshot);
    this.renderDocuments(snapshot);
    renderMemory(this.root.querySelector("#memory"), snapshot);
    if (this.lastStatus !== r.status) this.onStatus(r);
    this.lastStatus = r.status;
    this.tick();
  }

  renderUsage(r) {
    this.el.tokens.textContent = formatTokens(r.usage);
    this.el.cost.textContent = formatCost(r.usage);
    const partial = partialText(r);
    this.el.partial.textContent = partial;
    show(this.el.partial, Boolean(partial));
  }

  renderQuestions(questions) {
    this.el.questions.replaceChildren(
      ...questions.flatMap((q) => [h("dt", { text: q.question }), h("dd", { text: q.answer || "—" })]),
    );
  }

  renderProgress(p, r) {
    this.el.queries.textContent = `${p.queries_done} / ${p.queries_planned}`;
    this.el.analysed.textContent = `${p.websites_analysed} / ${p.websites_found}`;
    this.el.failed.textContent = String(p.websites_failed);
    this.el.extracts.textContent = String(p.extracts);
    let fraction = p.queries_planned ? (p.queries_done + p.queries_failed) / p.queries_planned : 0;
    if (r.status === "reporting") fraction = Math.max(fraction, 0.97);
    if (r.status === "completed") fraction = 1;
    this.el.bar.style.width = `${Math.round(Math.min(1, fraction) * 100)}%`;
    this.el.progress.setAttribute("aria-valuenow", String(Math.round(fraction * 100)));
    this.el.progress.dataset.status = r.status;
  }

  renderActions(r, snapshot) {
    show(this.el.cancel, ACTIVE_STATUSES.has(r.status));
    this.el.downloadReport.href = `/api/research/${r.id}/report.md`;
    this.el.downloadError.href = `/api/research/${r.id}/error-output.md`;
    show(this.el.downloadReport, Boolean(snapshot.report));
    show(this.el.downloadError, Boolean(snapshot.error_output));
    // Exports of the latest report, built by the server per request (research/web/exports.py).
    this.el.downloadPdf.href = `/api/research/${r.id}/report.pdf`;
    this.el.downloadDocx.href = `/api/research/${r.id}/report.docx`;
    show(this.el.downloadPdf, Boolean(snapshot.report));
    show(this.el.downloadDocx, Boolean(snapshot.report));
    if (r.status === "awaiting_answers") {
      const resume = h("button", { type: "button", class: "button button-primary", text: "Answer and start" });
      resume.addEventListener("click", () => this.onResume(snapshot));
      this.notice("This research has not started yet: its follow-up questions are waiting for answers.", resume);
    } else if (r.status === "draft") {
      const wait = h("button", { type: "button", class: "button", text: "Wait for them in the form" });
      wait.addEventListener("click", () => this.onResume(snapshot));
      this.notice("The follow-up questions are being written.", wait);
    } else if (r.status === "cancelled") {
      this.notice("This research was cancelled. Everything found until then is kept below.");
    } else if (r.status === "failed" && !snapshot.error_output) {
      this.notice(`This research failed: ${r.error || "no details"}`);
    } else if (r.status !== "gone") {
      show(this.el.notice, false);
    }
  }

  renderDocuments(snapshot) {
    const r = snapshot.research;
    // While the report is written, its sections as they land; then the stored report.
    const growing = this.growth.render(snapshot);
    show(this.el.reportBody, !growing);
    show(this.tabs.report.tab, Boolean(snapshot.report) || growing);
    show(this.tabs.error.tab, Boolean(snapshot.error_output));
    this.loadDocument("report", snapshot.report, `/api/research/${r.id}/report.html`, this.el.reportBody);
    renderReportVersions(this.el.reportVersions, snapshot);
    // The coverage is the current version's: a retried research's older report is not what it counts.
    const current = Boolean(snapshot.report) && snapshot.report.version === r.report_version;
    const coverage = coverageText(snapshot.coverage, current);
    this.el.reportCoverage.textContent = coverage;
    show(this.el.reportCoverage, Boolean(coverage));
    this.loadDocument("error", snapshot.error_output, `/api/research/${r.id}/error-output.html`, this.el.errorBody);
    if (!this.tabChosen) {
      if (snapshot.report || growing) this.select("report");
      else if (snapshot.error_output) this.select("error");
    }
  }

  async loadDocument(name, document, url, container) {
    if (!document || this.documents[name] === document.created_at) return;
    this.documents[name] = document.created_at;
    const id = this.id;
    try {
      const html = await api(url);
      if (this.id === id) setSanitisedHtml(container, html);
    } catch (error) {
      this.documents[name] = null;
      if (this.id === id && !(error instanceof ApiError && error.status === 404)) {
        container.replaceChildren(h("p", { class: "form-error", text: `Could not load: ${error.message}` }));
      }
    }
  }

  tick() {
    const r = this.snapshot && this.snapshot.research;
    if (!r) return;
    const start = new Date(r.started_at || r.created_at).getTime();
    const end = r.finished_at ? new Date(r.finished_at).getTime() : Date.now();
    this.el.elapsed.textContent = formatElapsed(end - start);
  }

  // --- the query tree: nodes are kept and updated in place, so open/closed details survive updates ----------

  renderTree(queries) {
    show(this.el.treeEmpty, queries.length === 0);
    for (const query of queries) {
      let node = this.queryNodes.get(query.id);
      if (!node) {
        node = this.queryNode(query);
        this.queryNodes.set(query.id, node);
        const parent = query.parent_id === null ? null : this.queryNodes.get(query.parent_id);
        (parent ? parent.children : this.el.tree).append(node.li);
      }
      const research = this.snapshot && this.snapshot.research;
      const sig = JSON.stringify([
        query.status,
        query.error,
        query.score,
        query.decision,
        query.websites.map((w) => [w.id, w.status]),
        research && [research.status, research.stop_reason],
      ]);
      if (node.sig !== sig) {
        node.sig = sig;
        this.updateQuery(node, query);
      }
      for (const website of query.websites) this.renderWebsite(node, website);
    }
  }

  queryNode(query) {
    const status = h("span", { class: "badge" });
    const counts = h("span", { class: "q-counts" });
    const error = h("p", { class: "q-error", hidden: true });
    const sites = h("ul", { class: "sites" });
    const summary = h("summary", { class: "q-sites-summary" });
    const details = h("details", { class: "q-sites", open: true }, summary, sites);
    const children = h("ul", { class: "tree-children" });
    const actions = queryActions(this, query);
    const evaluation = evaluationNode();
    const round = roundLabel(query);
    const li = h(
      "li",
      { class: "q", dataset: { queryId: String(query.id), depth: String(query.depth) } },
      h(
        "div",
        { class: "q-card" },
        h(
          "div",
          { class: "q-head" },
          h("span", { class: "q-depth", text: `L${query.depth}`, title: `Depth ${query.depth}` }),
          h("span", { class: "q-text", text: query.query }),
          round ? h("span", { class: "q-round", text: round, title: "Added by a gap-filling round" }) : null,
          status,
          actions.el,
        ),
        h("p", { class: "q-objective", text: query.objective }),
        evaluation.el,
        error,
        details,
        counts,
      ),
      children,
    );
    return { li, status, counts, error, sites, summary, details, children, actions, evaluation, sig: null };
  }

  updateQuery(node, query) {
    node.li.dataset.status = query.status;
    node.status.textContent = statusLabel(query.status);
    node.status.className = `badge badge-${query.status}`;
    node.error.textContent = query.error;
    show(node.error, Boolean(query.error));
    updateQueryActions(node.actions, query, this.snapshot && this.snapshot.research);
    updateEvaluation(node.evaluation, query);
    const total = query.websites.length;
    const analysed = query.websites.filter((w) => w.status === "analyzed").length;
    const failed = query.websites.filter((w) => w.status === "failed").length;
    node.summary.textContent = total
      ? `${total} website${total === 1 ? "" : "s"} · ${analysed} analysed${failed ? ` · ${failed} failed` : ""}`
      : "";
    show(node.details, total > 0);
  }

  renderWebsite(queryNode, website) {
    const sig = JSON.stringify(website);
    const known = this.websiteNodes.get(website.id);
    if (known && known.sig === sig) return;
    const li = this.websiteItem(website);
    if (known) known.li.replaceWith(li);
    else queryNode.sites.append(li);
    this.websiteNodes.set(website.id, { li, sig });
  }

  websiteItem(w) {
    const title = w.title || w.url;
    const reason = w.status === "failed" ? [w.failure_reason, w.error].filter(Boolean).join(": ") : "";
    return h(
      "li",
      { class: "site", dataset: { websiteId: String(w.id), status: w.status } },
      h(
        "div",
        { class: "site-head" },
        h("span", { class: `site-dot site-dot-${w.status}`, "aria-hidden": "true" }),
        link(w.url, title, { class: "site-title" }),
        h("span", { class: "site-host", text: hostOf(w.url) }),
        h("span", { class: `badge badge-${w.status}`, text: statusLabel(w.status) }),
      ),
      reason ? h("p", { class: "site-error", text: reason }) : null,
      w.extracts.length
        ? h(
            "ul",
            { class: "extracts" },
            w.extracts.map((x) =>
              h(
                "li",
                { class: "extract" },
                h("p", { class: "fact", text: x.fact }),
                x.quote ? h("blockquote", { class: "quote", text: x.quote }) : null,
              ),
            ),
          )
        : null,
    );
  }

  // --- events -----------------------------------------------------------------------------------------------

  // Newest first: what is happening now is at the top of the box without scrolling.
  addEvents(events) {
    const box = this.el.eventsBox;
    const before = box.scrollHeight;
    const rows = events.map((event) => {
      const { tone, text, detail } = describeEvent(event);
      return h(
        "li",
        { class: `event event-${tone}`, dataset: { seq: String(event.seq), type: event.type } },
        h("time", { class: "event-time", datetime: event.created_at, text: formatTime(event.created_at) }),
        h("span", { class: "event-dot", "aria-hidden": "true" }),
        h("div", { class: "event-body" }, h("p", { class: "event-text", text }), detail ? h("p", { class: "event-detail", text: detail }) : null),
      );
    });
    this.el.events.prepend(...rows.reverse());
    this.eventCount += events.length;
    this.el.eventsCount.textContent = String(this.eventCount);
    // Someone reading older events keeps their place.
    if (box.scrollTop > 0) box.scrollTop += box.scrollHeight - before;
  }

  async cancel() {
    if (!this.id || !window.confirm("Cancel this research? Everything found so far is kept.")) return;
    this.el.cancel.disabled = true;
    try {
      await api(`/api/research/${this.id}/cancel`, { method: "POST" });
    } catch (error) {
      this.notice(`Could not cancel: ${error.message}`);
    } finally {
      this.el.cancel.disabled = false;
    }
  }
}
