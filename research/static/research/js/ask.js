// Ask under a completed report: questions about the research, answered by a worker from its own sources
// (POST /api/research/<id>/ask). The thread is the snapshot's conversation, so every tab on the research shows
// the same questions and answers as they land; an answer's HTML is fetched once, when it is answered. An answer the
// sources do not give offers to dig deeper with the search the writer suggested, in the Dig deeper form.
import { DeepenPanel } from "./deepen.js";
import { ApiError, api, h, setSanitisedHtml, show } from "./dom.js";

export const MAX_QUESTION_CHARS = 2000;
const OPEN = new Set(["pending", "writing"]);
const WRITING = "Writing the answer…";
const FAILED = "The answer could not be written. Ask again, perhaps in other words.";

// The question box is offered on a completed research only (the server refuses others with 409); the thread is
// shown whenever there is one, so a research digging deeper keeps its conversation in view.
export function askable(snapshot) {
  return snapshot.research.status === "completed" && Boolean(snapshot.report);
}

// What the user typed, as the server will take it, or why it will not.
export function checkQuestion(text) {
  const question = String(text || "").trim();
  if (!question) return { error: "Write a question first." };
  if (question.length > MAX_QUESTION_CHARS) {
    return { error: `A question is at most ${MAX_QUESTION_CHARS.toLocaleString("en-US")} characters (this one is ${question.length.toLocaleString("en-US")}).` };
  }
  return { question };
}

// Whether an answered question offers to dig deeper, and with what search.
export function digQuery(item) {
  if (item.status !== "answered") return "";
  const suggested = String(item.suggested_query || "").trim();
  if (suggested) return suggested;
  return item.sources_answer === false ? item.question : "";
}

export class AskPanel {
  // `deepen`: the Dig deeper panel, whose form an unanswered question fills in; `onSettled`: called once the
  // answers there were on opening are in the page (until then the panel stays hidden, see render).
  constructor(container, deepen, onSettled) {
    this.container = container;
    this.deepen = deepen;
    this.onSettled = onSettled || (() => {});
    this.heading = h("h2", { class: "section-title", id: "conversation-title", tabindex: "-1", text: "Questions about this research" });
    this.thread = h("ol", { class: "conv-thread", id: "conversation-thread" });
    this.input = h("textarea", {
      id: "question-input",
      rows: "3",
      maxlength: String(MAX_QUESTION_CHARS),
      autocomplete: "off",
      "aria-describedby": "question-hint",
    });
    this.submit = h("button", { type: "submit", class: "button button-primary", id: "question-submit", text: "Ask" });
    this.error = h("p", { class: "form-error", id: "question-error", role: "alert", hidden: true });
    // Announcements only (what a sighted reader sees in the thread), in a live region that is always in the page:
    // one inserted with its text is not reliably read.
    this.status = h("p", { class: "visually-hidden", id: "question-status", role: "status" });
    this.form = h(
      "form",
      { class: "conv-form", novalidate: true },
      h("label", { for: "question-input", text: "Ask a question about this research" }),
      h("p", { class: "hint", id: "question-hint", text: "Answered from the sources this research analysed, never the web, with citations; up to 2,000 characters." }),
      this.input,
      this.error,
      h("div", { class: "form-actions" }, this.submit),
    );
    this.form.addEventListener("submit", (event) => {
      event.preventDefault();
      this.send();
    });
    // Ctrl+Enter (⌘+Enter) sends, as in other message boxes; Enter alone is a new line.
    this.input.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
        event.preventDefault();
        this.send();
      }
    });
    this.input.addEventListener("input", () => {
      if (!this.error.hidden) this.setError("");
    });
    this.container.replaceChildren(this.heading, this.thread, this.form, this.status);
    this.reset();
  }

  // Another research opened in the page: nothing of the last one's thread or typing stays.
  reset() {
    this.researchId = null;
    this.nodes = new Map(); // question id -> {li, answer, sig, loaded}
    this.sent = []; // questions this page asked that no snapshot holds yet
    this.settled = false;
    this.waiting = false;
    this.generation = (this.generation || 0) + 1; // a settle of the research opened before is ignored
    this.announcing = false; // not on opening: only what changes while the reader is here is announced
    this.thread.replaceChildren();
    this.form.reset();
    this.setError("");
    this.status.textContent = "";
    show(this.container, false);
  }

  // `ready`: the report is in the page above, so the panel, shown now, moves nothing that is already there.
  render(snapshot, ready = true) {
    const r = snapshot.research;
    this.researchId = r.id;
    const held = new Set((snapshot.conversation || []).map((item) => item.id));
    this.sent = this.sent.filter((item) => !held.has(item.id));
    const items = [...(snapshot.conversation || []), ...this.sent];
    const canDig = DeepenPanel.allowed(snapshot);
    const loads = [];
    for (const item of items) {
      const load = this.renderItem(item, canDig);
      if (load) loads.push(load);
    }
    const wanted = new Set(items.map((item) => item.id));
    for (const [id, node] of this.nodes) {
      if (wanted.has(id)) continue;
      node.li.remove();
      this.nodes.delete(id);
    }
    if (!this.settled && !this.waiting) {
      // The answers already there on opening go in before the panel shows, so it does not grow under the reader.
      this.waiting = true;
      const generation = this.generation;
      Promise.allSettled(loads).then(() => {
        if (this.generation !== generation) return;
        this.waiting = false;
        this.settled = true;
        this.announcing = true;
        this.onSettled();
      });
    }
    const asking = askable(snapshot);
    const visible = ready && this.settled && (asking || items.length > 0);
    // The box goes when the research runs again (dug deeper from another tab): focus in it would be lost with it.
    const focused = !asking && this.form.contains(document.activeElement);
    show(this.form, asking);
    show(this.container, visible);
    if (focused) (visible ? this.heading : this.container.closest("[role=tabpanel]") || document.body).focus();
  }

  // The thread's item for one question, made or brought up to date; a promise while its answer is being fetched.
  renderItem(item, canDig) {
    let node = this.nodes.get(item.id);
    if (!node) {
      const answer = h("div", { class: "conv-answer" });
      const li = h(
        "li",
        { class: "conv-item", dataset: { questionId: String(item.id) } },
        h("p", { class: "conv-question" }, h("span", { class: "conv-label", text: "Question" }), h("span", { class: "conv-question-text", text: item.question })),
        answer,
      );
      node = { li, answer, sig: null, loaded: false };
      this.nodes.set(item.id, node);
      this.place(item.id, li);
    }
    const dig = canDig ? digQuery(item) : "";
    const sig = JSON.stringify([item.status, dig]);
    if (node.sig === sig) return null;
    const was = node.sig === null ? null : JSON.parse(node.sig)[0];
    node.sig = sig;
    node.li.dataset.status = item.status;
    if (OPEN.has(item.status)) {
      node.answer.className = "conv-answer conv-writing";
      node.answer.replaceChildren(h("span", { class: "live-dot", "aria-hidden": "true" }), h("span", { text: WRITING }));
      if (!OPEN.has(was)) this.announce(WRITING); // a question new here, from this tab or another
      return null;
    }
    if (item.status === "failed") {
      node.answer.className = "conv-answer conv-failed";
      node.answer.replaceChildren(h("p", { class: "form-error", text: FAILED }));
      if (was !== null) this.announce(FAILED);
      return null;
    }
    if (item.status !== "answered") return null;
    if (was !== null && was !== "answered") this.announce("The answer is written.");
    const load = node.loaded ? null : this.load(node, item.id);
    this.renderDig(node, item, dig);
    return load;
  }

  // In the snapshot's order (oldest first): a question this page sent waits at the end until the snapshot has it.
  place(id, li) {
    const after = [...this.nodes.entries()].filter(([other]) => other > id).sort(([a], [b]) => a - b)[0];
    if (after) this.thread.insertBefore(li, after[1].li);
    else this.thread.append(li);
  }

  async load(node, questionId) {
    node.loaded = true;
    const id = this.researchId;
    node.answer.className = "conv-answer document";
    try {
      const html = await api(`/api/research/${id}/conversation/${questionId}.html`);
      if (this.researchId !== id) return;
      const body = h("div", { class: "conv-answer-body" });
      setSanitisedHtml(body, html);
      node.answer.replaceChildren(body, node.dig || "");
    } catch (error) {
      if (this.researchId !== id) return;
      node.loaded = false; // the next snapshot tries again
      if (!(error instanceof ApiError && error.status === 404)) {
        node.answer.replaceChildren(h("p", { class: "form-error", text: `Could not load the answer: ${error.message}` }));
      }
    }
  }

  // "Dig deeper" under an answer the sources do not give: the Dig deeper form below, filled in to check and send.
  renderDig(node, item, query) {
    if (node.dig) node.dig.remove();
    node.dig = null;
    if (!query) return;
    const button = h("button", { type: "button", class: "button conv-dig", text: "Dig deeper", "aria-label": `Dig deeper: ${query}` });
    button.addEventListener("click", () => this.deepen.prefill(query, item.question));
    node.dig = h("p", { class: "conv-suggestion" }, h("span", { text: `A search that could answer it: “${query}”` }), " ", button);
    if (node.answer.querySelector(".conv-answer-body")) node.answer.append(node.dig);
  }

  announce(text) {
    if (!this.announcing) return;
    // The same words twice in a row are not read again by some screen readers: cleared first.
    this.status.textContent = "";
    window.setTimeout(() => {
      this.status.textContent = text;
    }, 50);
  }

  setError(text) {
    this.error.textContent = text;
    show(this.error, Boolean(text));
    if (text) {
      this.input.setAttribute("aria-invalid", "true");
      this.input.setAttribute("aria-describedby", "question-error question-hint");
    } else {
      this.input.removeAttribute("aria-invalid");
      this.input.setAttribute("aria-describedby", "question-hint");
    }
  }

  async send() {
    if (this.submit.disabled) return; // a double click (or Ctrl+Enter held) sends one request
    const { question, error } = checkQuestion(this.input.value);
    if (error) {
      this.setError(error);
      this.input.focus();
      return;
    }
    this.submit.disabled = true;
    this.setError("");
    const id = this.researchId;
    try {
      const asked = await api(`/api/research/${id}/ask`, { method: "POST", body: { question } });
      if (this.researchId !== id) return;
      this.input.value = "";
      const item = { id: asked.id, question, status: asked.status || "pending", answer: "", sources_answer: null, suggested_query: "", created_at: "" };
      if (!this.nodes.has(item.id)) {
        this.sent.push(item);
        this.renderItem(item, false);
      }
      this.input.focus(); // ready for the next question; the answer is announced when it is written
    } catch (failure) {
      if (this.researchId !== id) return;
      this.setError(`Could not ask: ${failure.message}`);
      this.input.focus();
    } finally {
      this.submit.disabled = false;
    }
  }
}
