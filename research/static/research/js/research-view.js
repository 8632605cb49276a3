// One research: header, progress, the live log (query tree and events) and the report or error output.
import { evaluationNode, roundLabel, updateEvaluation } from "./adaptive.js";
import { formatCost, formatTokens, partialText } from "./budget.js";
import { ApiError, api, h, link, setSanitisedHtml, show } from "./dom.js";
import {
  ACTIVE_STATUSES,
  FINISHED_STATUSES,
  describeEvent,
  formatDateTime,
  formatElapsed,
  formatTime,
  hostOf,
  shortUrl,
  researchBadge,
  statusLabel,
} from "./lib.js";
import { queryActions, renderReportVersions, updateQueryActions } from "./branches.js";
import { ResearchFeed } from "./live.js";
import { AskPanel } from "./ask.js";
import { DeepenPanel } from "./deepen.js";
import { MemoryPanel } from "./memory.js";
import { PlanReview } from "./plan-review.js";
import { ReportGrowth } from "./report-growth.js";
import { coverageText } from "./coverage.js";

// Queries: a tree this small is shown whole. Events: how many the page holds until earlier ones are asked for.
const SMALL_TREE = 40;
const EVENTS_SHOWN = 200;

export class ResearchView {
  constructor(root, { onResume, onStatus, onRenamed, onDeleted }) {
    this.root = root;
    this.onResume = onResume;
    this.onStatus = onStatus || (() => {});
    this.onRenamed = onRenamed || (() => {});
    this.onDeleted = onDeleted || (() => {});
    const $ = (selector) => root.querySelector(selector);
    this.el = {
      title: $("#r-title"),
      status: $("#r-status"),
      created: $("#r-created"),
      connection: $("#r-connection"),
      cancel: $("#cancel-button"),
      rename: $("#rename-button"),
      renameForm: $("#rename-form"),
      renameInput: $("#rename-input"),
      renameError: $("#rename-error"),
      delete: $("#delete-button"),
      downloadReport: $("#download-report"),
      downloadError: $("#download-error"),
      downloadPdf: $("#download-pdf"),
      downloadDocx: $("#download-docx"),
      exportConversation: $("#export-conversation"),
      askShortcut: $("#ask-shortcut"),
      share: $("#share-button"),
      schedule: $("#schedule-button"),
      exportConversationField: $("#export-conversation-field"),
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
    this.el.askShortcut.addEventListener("click", () => {
      this.select("report");
      const input = document.getElementById("question-input");
      if (input && !input.closest("[hidden]")) {
        input.scrollIntoView({ block: "center" });
        input.focus();
      }
    });
    // The downloads carry the conversation as an appendix when asked to (the server's ?conversation=1).
    this.el.exportConversation.addEventListener("change", () => this.exportLinks());
    this.el.rename.addEventListener("click", () => this.startRename());
    this.el.renameForm.addEventListener("submit", (event) => {
      event.preventDefault();
      this.rename();
    });
    $("#rename-cancel").addEventListener("click", () => this.endRename());
    this.el.delete.addEventListener("click", () => this.delete());
    this.memory = new MemoryPanel($("#memory"));
    this.deepen = new DeepenPanel($("#deepen"), this);
    this.conversation = new AskPanel($("#conversation"), this.deepen, () => this.renderBelowReport());
    this.planReview = new PlanReview($("#plan-review"), this);
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
    this.expanded = new Set(); // queries whose sub-queries the reader opened
    this.events = []; // every event received, oldest first; the newest EVENTS_SHOWN are in the page
    this.eventsShown = EVENTS_SHOWN;
    this.pageTitles = new Map(); // website URL → its title, to name pages in the events
    this.memory.reset();
    this.deepen.reset();
    this.conversation.reset();
    this.planReview.reset();
    this.documents = { report: null, error: null };
    this.reportShown = false; // the report's HTML (or why it could not load) is in the page
    this.tabChosen = false;
    this.currentTab = null;
    this.lastStatus = null;
    // The page served for this research holds its title already (the header keeps its height); any other opens
    // with "Loading…".
    const served = this.root.closest("[data-research-id]");
    if (!(served && served.dataset.researchId === id && !this.openedBefore)) this.el.title.textContent = "Loading…";
    this.openedBefore = true;
    // Until its first snapshot, what sits below the figures is not laid out: the notices and the plan review that
    // snapshot may bring come in above the tabs, and would push them down under the reader.
    this.root.dataset.loading = "";
    show(this.el.partial, false);
    if (this.el.offTopic) show(this.el.offTopic, false);
    this.el.status.textContent = "";
    this.el.status.className = "badge";
    this.el.created.textContent = "";
    this.el.events.replaceChildren();
    if (this.el.eventsMore) show(this.el.eventsMore, false);
    this.el.tree.replaceChildren();
    show(this.root.querySelector("#memory"), false); // another research's memory must not linger
    this.el.reportBody.replaceChildren();
    this.growth = new ReportGrowth(this.el.reportGrowth);
    show(this.el.reportGrowth, false);
    this.el.errorBody.replaceChildren();
    this.el.eventsCount.textContent = "";
    show(this.el.notice, false);
    show(this.el.cancel, false);
    show(this.el.rename, false);
    show(this.el.delete, false);
    this.endRename(false);
    show(this.el.downloadReport, false);
    show(this.el.downloadError, false);
    show(this.el.downloadPdf, false);
    show(this.el.downloadDocx, false);
    show(this.el.exportConversationField, false);
    this.el.exportConversation.checked = false;
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
      delete this.root.dataset.loading; // no snapshot will come: the notice below says why
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
    delete this.root.dataset.loading;
    this.el.title.textContent = r.title || "Untitled research";
    for (const query of snapshot.queries) {
      for (const website of query.websites) if (website.title) this.pageTitles.set(website.url, website.title);
    }
    document.title = `${r.title} · Deep research`;
    const badge = researchBadge(r);
    this.el.status.textContent = badge.label;
    this.el.status.className = badge.className;
    // A research never started (a draft, one cancelled in the queue) says when it was made, not "Started".
    const started = r.started_at
      ? `Started ${formatDateTime(r.started_at)}`
      : `Created ${formatDateTime(r.created_at)} · not started`;
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
    this.planReview.render(snapshot);
    // While a research runs its memory grows: the panel holds its place from the start, so nothing below jumps.
    const dig = DeepenPanel.allowed(snapshot) ? (gapId, button) => this.deepen.fromGap(gapId, button) : null;
    this.memory.render(snapshot, ACTIVE_STATUSES.has(r.status), dig);
    if (this.lastStatus !== r.status) this.onStatus(r);
    this.lastStatus = r.status;
    this.tick();
  }

  renderUsage(r) {
    // The extractive engine calls no model: "none" says so, where 0 would read as a count that is not moving.
    const offline = r.engine === "extractive";
    const budget = r.budget || {};
    this.el.tokens.textContent = offline
      ? "none (no model)"
      : `${formatTokens(r.usage)}${budget.tokens ? ` of ${budget.tokens.toLocaleString("en-US")}` : ""}`;
    this.el.cost.textContent = offline
      ? "$0 (no model)"
      : `${formatCost(r.usage)}${budget.usd ? ` of $${budget.usd}` : ""}`;
    const partial = partialText(r);
    this.el.partial.textContent = partial;
    show(this.el.partial, Boolean(partial));
  }

  renderQuestions(questions) {
    this.el.questions.replaceChildren(
      ...questions.flatMap((q) => [h("dt", { text: q.question }), h("dd", { text: q.answer || "—" })]),
    );
  }

  // The figures are the snapshot's, each defined once on the server (pages are distinct URLs: research/live/figures.py).
  // While the research runs, its planned total is an upper bound (a failed or stopped branch takes its subtree
  // off), so it says "up to"; once it ended, the queries that did not finish are named beside it.
  renderProgress(p, r) {
    const ended = FINISHED_STATUSES.has(r.status);
    const left = [
      p.queries_failed ? `${p.queries_failed} failed` : "",
      p.queries_cancelled ? `${p.queries_cancelled} cancelled` : "",
    ].filter(Boolean);
    this.el.queries.textContent = ended
      ? `${p.queries_done} / ${p.queries_planned}${left.length ? ` (${left.join(", ")})` : ""}`
      : `${p.queries_done} / up to ${p.queries_planned}`;
    this.el.analysed.textContent = `${p.pages_analysed} / ${p.pages_found}`;
    this.el.failed.textContent = String(p.pages_failed);
    this.el.extracts.textContent = String(p.extracts);
    let fraction = p.queries_planned ? (p.queries_done + p.queries_failed) / p.queries_planned : 0;
    // Full only once the research ended: its report is the last of the work.
    if (!ended) fraction = Math.min(fraction, 0.97);
    if (r.status === "reporting") fraction = 0.97;
    if (r.status === "completed") fraction = 1;
    this.el.bar.style.width = `${Math.round(Math.min(1, fraction) * 100)}%`;
    this.el.progress.setAttribute("aria-valuenow", String(Math.round(fraction * 100)));
    this.el.progress.dataset.status = r.status;
  }

  // The report's downloads, with the conversation as an appendix when its box is ticked.
  exportLinks(id = this.exportId) {
    this.exportId = id;
    if (!id) return;
    const suffix = this.el.exportConversation.checked ? "?conversation=1" : "";
    this.el.downloadReport.href = `/api/research/${id}/report.md${suffix}`;
    this.el.downloadPdf.href = `/api/research/${id}/report.pdf${suffix}`;
    this.el.downloadDocx.href = `/api/research/${id}/report.docx${suffix}`;
  }

  renderActions(r, snapshot) {
    show(this.el.cancel, ACTIVE_STATUSES.has(r.status));
    // The Ask box is below the whole report: one step from the top to it, not a hundred Tab presses.
    show(this.el.askShortcut, r.status === "completed" && Boolean(snapshot.report));
    // Share links are made, listed and revoked on a page of their own (research/web/shares.py).
    this.el.share.href = `/research/${r.id}/shares/`;
    show(this.el.share, Boolean(snapshot.report));
    // So are its schedule's settings (research/web/schedules.py): a research that has run can run again.
    this.el.schedule.href = `/research/${r.id}/schedule/`;
    show(this.el.schedule, Boolean(snapshot.report));
    show(this.el.rename, true);
    // A research under way is cancelled before it is deleted (the server refuses otherwise).
    show(this.el.delete, !ACTIVE_STATUSES.has(r.status));
    this.el.downloadError.href = `/api/research/${r.id}/error-output.md`;
    show(this.el.downloadReport, Boolean(snapshot.report));
    show(this.el.downloadError, Boolean(snapshot.error_output));
    // Exports of the latest report, built by the server per request (research/web/exports.py).
    show(this.el.downloadPdf, Boolean(snapshot.report));
    show(this.el.downloadDocx, Boolean(snapshot.report));
    const answered = (snapshot.conversation || []).some((item) => item.status === "answered");
    show(this.el.exportConversationField, Boolean(snapshot.report) && answered);
    if (!answered) this.el.exportConversation.checked = false;
    this.exportLinks(r.id);
    if (r.status === "awaiting_answers") {
      const resume = h("button", { type: "button", class: "button button-primary", text: "Answer and start" });
      resume.addEventListener("click", () => this.onResume(snapshot));
      this.notice("This research has not started yet: its follow-up questions are waiting for answers.", resume);
    } else if (r.status === "draft") {
      const wait = h("button", { type: "button", class: "button", text: "Wait for them in the form" });
      wait.addEventListener("click", () => this.onResume(snapshot));
      this.notice("The follow-up questions are being written.", wait);
    } else if (r.status === "cancelled" && !snapshot.report && snapshot.progress.extracts > 0) {
      // What it found before the cancel can still make a report, as a budget stop does.
      const write = h("button", { type: "button", class: "button button-primary", id: "report-found", text: "Write a report from what was found" });
      write.addEventListener("click", () => this.reportFound(write));
      this.notice("This research was cancelled. Everything found until then is kept below.", write);
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
    this.renderBelowReport();
    this.renderOffTopic(snapshot.report);
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

  // The conversation and the Dig deeper form under the report: each shown once what stands above it is in the page
  // (the report's HTML comes after the snapshot, the conversation's answers after it), so none of them appears
  // first and is then pushed down.
  renderBelowReport() {
    const snapshot = this.snapshot;
    if (!snapshot) return;
    const ready = this.reportShown || !this.el.reportGrowth.hidden;
    this.conversation.render(snapshot, ready);
    this.deepen.render(snapshot, ready && this.conversation.settled);
  }

  // A report whose sources do not bear on the request, or that found no answer at all, says so above the header's
  // status, not only in its text.
  renderOffTopic(report) {
    const stats = report && report.stats ? report.stats : {};
    const text = outcomeText(stats);
    if (!this.el.offTopic) {
      if (!text) return;
      this.el.offTopic = h("div", { class: "notice notice-off-topic", id: "r-off-topic", role: "status" });
      this.el.partial.after(this.el.offTopic);
    }
    this.el.offTopic.textContent = text;
    show(this.el.offTopic, Boolean(text));
  }

  async loadDocument(name, document, url, container) {
    if (!document || this.documents[name] === document.created_at) return;
    this.documents[name] = document.created_at;
    const id = this.id;
    try {
      const html = await api(url);
      if (this.id !== id) return;
      setSanitisedHtml(container, html);
      if (name === "report") {
        this.hideRepeatedTitle(container);
        this.reportLanded();
      }
    } catch (error) {
      this.documents[name] = null;
      if (this.id === id && !(error instanceof ApiError && error.status === 404)) {
        container.replaceChildren(h("p", { class: "form-error", text: `Could not load: ${error.message}` }));
        if (name === "report") this.reportLanded();
      }
    }
  }

  // The report's own title says again what the page's title says just above it: it is left to screen readers (a
  // heading to jump to), not shown twice. A title the user renamed away from the report's stays in view.
  hideRepeatedTitle(container) {
    const first = container.firstElementChild;
    const same = first && first.tagName === "H1" && first.textContent.trim() === this.el.title.textContent.trim();
    if (same) first.classList.add("visually-hidden");
  }

  reportLanded() {
    if (this.reportShown) return;
    this.reportShown = true;
    this.renderBelowReport();
  }

  tick() {
    const r = this.snapshot && this.snapshot.research;
    if (!r) return;
    if (!r.started_at) {
      this.el.elapsed.textContent = "—";
      return;
    }
    const start = new Date(r.started_at).getTime();
    const end = r.finished_at ? new Date(r.finished_at).getTime() : Date.now();
    // With a time budget, how much of it is spent: the research stops when it runs out.
    const seconds = r.budget && r.budget.seconds;
    this.el.elapsed.textContent = seconds
      ? `${formatElapsed(end - start)} of ${formatElapsed(seconds * 1000)}`
      : formatElapsed(end - start);
  }

  // --- the query tree: nodes are kept and updated in place, so open/closed details survive updates ----------
  // A large tree (a 10x5 plans 810 queries and thousands of websites) is not put in the page whole: the top
  // queries are, each sub-tree when its parent is opened, and a query's websites when its list is opened. A tree
  // of up to SMALL_TREE queries is shown whole and open, as a reader expects of a small research.

  renderTree(queries) {
    show(this.el.treeEmpty, queries.length === 0);
    this.smallTree = queries.length <= SMALL_TREE;
    this.childQueries = new Map();
    for (const query of queries) {
      if (query.parent_id === null) continue;
      if (!this.childQueries.has(query.parent_id)) this.childQueries.set(query.parent_id, []);
      this.childQueries.get(query.parent_id).push(query);
    }
    for (const query of queries) {
      const parent = query.parent_id === null ? null : this.queryNodes.get(query.parent_id);
      let node = this.queryNodes.get(query.id);
      if (!node) {
        const shown = query.parent_id === null || (parent && (this.smallTree || this.expanded.has(query.parent_id)));
        if (!shown) continue;
        node = this.queryNode(query);
        this.queryNodes.set(query.id, node);
        (parent ? parent.children : this.el.tree).append(node.li);
      }
      node.query = query;
      const research = this.snapshot && this.snapshot.research;
      const children = this.childQueries.get(query.id) || [];
      const sig = JSON.stringify([
        query.status,
        query.error,
        query.score,
        query.decision,
        query.websites.map((w) => [w.id, w.status]),
        children.map((c) => c.status),
        research && [research.status, research.stop_reason],
      ]);
      if (node.sig !== sig) {
        node.sig = sig;
        this.updateQuery(node, query);
      }
      if (node.details.open) for (const website of query.websites) this.renderWebsite(node, website);
    }
  }

  queryNode(query) {
    const status = h("span", { class: "badge" });
    const counts = h("span", { class: "q-counts" });
    const error = h("p", { class: "q-error", hidden: true });
    const sites = h("ul", { class: "sites" });
    const summary = h("summary", { class: "q-sites-summary" });
    const details = h("details", { class: "q-sites", open: this.smallTree }, summary, sites);
    const children = h("ul", { class: "tree-children" });
    const toggle = h("button", { type: "button", class: "button button-small q-children-toggle", hidden: true });
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
        toggle,
      ),
      children,
    );
    const node = { li, status, counts, error, sites, summary, details, children, toggle, actions, evaluation, sig: null, query };
    // Websites are put in the page when their list is first opened, and kept up to date from then on.
    details.addEventListener("toggle", () => {
      if (details.open) for (const website of node.query.websites) this.renderWebsite(node, website);
    });
    toggle.addEventListener("click", () => {
      if (this.expanded.has(query.id)) this.expanded.delete(query.id);
      else this.expanded.add(query.id);
      show(children, this.expanded.has(query.id));
      node.sig = null;
      if (this.snapshot) this.renderTree(this.snapshot.queries);
    });
    return node;
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
    const children = this.childQueries.get(query.id) || [];
    const folding = !this.smallTree && children.length > 0;
    show(node.toggle, folding);
    if (folding) {
      const open = this.expanded.has(query.id);
      const done = children.filter((c) => c.status === "done").length;
      node.toggle.textContent = `${open ? "Hide" : "Show"} ${children.length} sub-quer${children.length === 1 ? "y" : "ies"} (${done} done)`;
      node.toggle.setAttribute("aria-expanded", String(open));
      show(node.children, open);
    }
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
    const title = w.title || shortUrl(w.url);
    const reason = w.status === "failed" ? [w.failure_reason, w.error].filter(Boolean).join(": ") : "";
    return h(
      "li",
      { class: "site", dataset: { websiteId: String(w.id), status: w.status } },
      h(
        "div",
        { class: "site-head" },
        h("span", { class: `site-dot site-dot-${w.status}`, "aria-hidden": "true" }),
        link(w.url, title, { class: "site-title", title: w.url }),
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
                // The extractive engine's finding is its quote: said once.
                x.quote && x.quote.trim() !== x.fact.trim() ? h("blockquote", { class: "quote", text: x.quote }) : null,
              ),
            ),
          )
        : null,
    );
  }

  // --- events -----------------------------------------------------------------------------------------------
  // Oldest first, as a log reads; the box follows the newest while the reader is at its end, and keeps its place
  // while they read earlier ones. New rows go at the end and old ones leave from the top, so nothing the reader
  // sees jumps (rows put above others would push every visible row down). Only the newest EVENTS_SHOWN are in the
  // page until the reader asks for earlier ones (a 10x5 records thousands).

  eventRow(event) {
    const { tone, text, detail } = describeEvent(event, (url) => this.pageTitles.get(url) || shortUrl(url));
    return h(
      "li",
      { class: `event event-${tone}`, dataset: { seq: String(event.seq), type: event.type } },
      h("time", { class: "event-time", datetime: event.created_at, text: formatTime(event.created_at) }),
      h("span", { class: "event-dot", "aria-hidden": "true" }),
      h("div", { class: "event-body" }, h("p", { class: "event-text", text }), detail ? h("p", { class: "event-detail", text: detail }) : null),
    );
  }

  addEvents(events) {
    const box = this.el.eventsBox;
    const following = box.scrollHeight - box.scrollTop - box.clientHeight < 40;
    this.events.push(...events);
    this.el.events.append(...events.slice(-this.eventsShown).map((event) => this.eventRow(event)));
    // Old rows leave only while the box follows the newest: taken from above a reader's place, they would move the
    // rows being read (the browser's scroll anchoring does not hold them at the box's very top).
    if (following) while (this.el.events.childElementCount > this.eventsShown) this.el.events.firstElementChild.remove();
    this.eventCount += events.length;
    this.el.eventsCount.textContent = String(this.eventCount);
    this.renderEventsMore();
    if (following) box.scrollTop = box.scrollHeight;
  }

  renderEventsMore() {
    if (!this.el.eventsMore) {
      this.el.eventsMore = h("button", { type: "button", class: "button button-small events-more", hidden: true });
      this.el.eventsMore.addEventListener("click", () => {
        const shown = this.el.events.childElementCount;
        this.eventsShown = shown + EVENTS_SHOWN;
        const older = this.events.slice(Math.max(0, this.events.length - this.eventsShown), this.events.length - shown);
        this.el.events.prepend(...older.map((event) => this.eventRow(event)));
        this.renderEventsMore();
      });
      this.el.events.before(this.el.eventsMore);
    }
    const hidden = this.events.length - this.el.events.childElementCount;
    this.el.eventsMore.textContent = `Show ${Math.min(hidden, EVENTS_SHOWN)} earlier events (${hidden} not shown)`;
    show(this.el.eventsMore, hidden > 0);
  }

  async reportFound(button) {
    button.disabled = true;
    try {
      await api(`/api/research/${this.id}/report`, { method: "POST" });
    } catch (error) {
      button.disabled = false;
      this.notice(`Could not write the report: ${error.message}`);
    }
  }

  startRename() {
    this.el.renameInput.value = this.snapshot ? this.snapshot.research.title : "";
    show(this.el.renameError, false);
    show(this.el.renameForm, true);
    this.el.renameInput.focus();
    this.el.renameInput.select();
  }

  endRename(focus = true) {
    show(this.el.renameForm, false);
    if (focus) this.el.rename.focus();
  }

  async rename() {
    const title = this.el.renameInput.value.trim();
    try {
      const summary = await api(`/api/research/${this.id}`, { method: "PATCH", body: { title } });
      this.el.title.textContent = summary.title;
      if (this.snapshot) this.snapshot.research.title = summary.title;
      document.title = `${summary.title} · Deep research`;
      this.onRenamed(summary);
      this.endRename();
    } catch (error) {
      this.el.renameError.textContent = error.message;
      show(this.el.renameError, true);
    }
  }

  async delete() {
    if (!this.id || !window.confirm("Delete this research, its report and everything it found? This cannot be undone.")) return;
    const id = this.id;
    this.el.delete.disabled = true;
    try {
      await api(`/api/research/${id}`, { method: "DELETE" });
      this.onDeleted(id);
    } catch (error) {
      this.notice(`Could not delete: ${error.message}`);
    } finally {
      this.el.delete.disabled = false;
    }
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

// What the report's outcome tells a reader before its text: no answer found, or sources that do not cover the request.
function outcomeText(stats) {
  if (stats.outcome === "unanswered") {
    const pages = stats.pages_analysed === 1 ? "the page" : `the ${stats.pages_analysed} pages`;
    return `No answer found: ${pages} read hold nothing on this request. The report says what was searched and read, and how to go on.`;
  }
  const relevance = stats.relevance;
  if (relevance && relevance.verdict === "off_topic") {
    return "The sources found do not cover this request: the report says what they contain, not an answer.";
  }
  const open = stats.unanswered_queries || [];
  if (open.length) {
    return `Partly answered: the sources read found nothing on ${open.map((q) => `“${q}”`).join("; ")}.`;
  }
  return "";
}
