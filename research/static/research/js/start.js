// The start flow: prompt and number of follow-up questions, then answers, breadth and depth, then start.
import { ApiError, api, h, show } from "./dom.js";
import { clearMode, readMode, syncModeFields } from "./adaptive.js";
import { clearBudget, readBudget } from "./budget.js";
import { queriesPerLevel, totalQueries } from "./lib.js";
import { clearReportLength, readReportLength, syncReportLength } from "./report-length.js";

// A slow model: the questions request answers 202 after a while, and the form asks for the research until they land.
const POLL_MS = 1000;
const WAITING_TEXT = "The model is writing the questions… They appear here as soon as they are ready.";

function sleep(ms) {
  return new Promise((resolve) => window.setTimeout(resolve, ms));
}

// A whole number in [min, max], or null: "2.5" or "2x" is refused rather than read as 2.
function clampInt(value, min, max) {
  const text = String(value).trim();
  if (!/^\d+$/.test(text)) return null;
  const n = Number(text);
  return n >= min && n <= max ? n : null;
}

// The field an error names (the server's `field`, or the form's own check), by the id of its input.
const FIELD_INPUTS = {
  prompt: "prompt",
  num_questions: "num-questions",
  breadth: "breadth",
  depth: "depth",
  min_depth: "min-depth",
  quality_threshold: "quality-threshold",
  report_length: "report-words",
  seconds: "budget-seconds",
  tokens: "budget-tokens",
  usd: "budget-usd",
};
// A request of fewer characters than this is refused before any model is asked.
const MIN_PROMPT_CHARS = 10;

export class StartFlow {
  constructor(root, limits, { onStarted, onDiscarded }) {
    this.root = root;
    this.limits = limits;
    this.onStarted = onStarted;
    this.onDiscarded = onDiscarded || (() => {});
    this.researchId = null;
    this.promptForm = root.querySelector("#prompt-form");
    this.answersForm = root.querySelector("#answers-form");
    this.prompt = root.querySelector("#prompt");
    this.numQuestions = root.querySelector("#num-questions");
    this.questions = root.querySelector("#questions");
    this.breadth = root.querySelector("#breadth");
    this.depth = root.querySelector("#depth");
    this.planTotal = root.querySelector("#plan-total");
    this.planLevels = root.querySelector("#plan-levels");
    this.askButton = root.querySelector("#ask-button");
    this.startButton = root.querySelector("#start-button");
    this.promptPreview = root.querySelector("#prompt-preview");
    this.askStatus = root.querySelector("#ask-status");
    // Each wait for questions has its number; a newer one, or a reset, makes an older one stop where it is.
    this.waitNumber = 0;

    this.promptForm.addEventListener("submit", (event) => {
      event.preventDefault();
      this.ask();
    });
    this.answersForm.addEventListener("submit", (event) => {
      event.preventDefault();
      this.start();
    });
    root.querySelector("#back-button").addEventListener("click", () => {
      // Back is for changing the request: the questions asked for this one go with it, rather than stay in the
      // sidebar as a research never started (asking again makes a new one).
      const draft = this.researchId;
      if (draft) {
        api(`/api/research/${draft}`, { method: "DELETE" })
          .then(() => this.onDiscarded(draft))
          .catch(() => {});
      }
      this.reset(false);
      this.prompt.focus(); // the Back button is hidden with its form: focus goes where the user is going back to
    });
    for (const input of [this.breadth, this.depth]) input.addEventListener("input", () => this.updatePlan());
    root.querySelector("#mode").addEventListener("change", () => {
      this.error(this.answersForm, ""); // a message about the other mode's fields no longer applies
      this.updatePlan();
    });
    root.querySelector("#report-length").addEventListener("change", () => syncReportLength(this.answersForm));
    this.prompt.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && (event.metaKey || event.ctrlKey)) this.promptForm.requestSubmit();
    });
    this.updatePlan();
  }

  // The form's message, and the field it is about marked invalid (and focused), so the reader sees which one;
  // a new message, or none, clears the marks of the last.
  error(form, message, field) {
    const box = form.querySelector(".form-error");
    if (!box.id) box.id = `${form.id || "form"}-error`;
    box.textContent = message || "";
    show(box, Boolean(message));
    for (const note of form.querySelectorAll(".field-error")) note.remove();
    for (const input of form.querySelectorAll("[aria-invalid]")) {
      input.removeAttribute("aria-invalid");
      input.removeAttribute("aria-describedby");
    }
    const input = field && FIELD_INPUTS[field] ? form.querySelector(`#${FIELD_INPUTS[field]}`) : null;
    if (message && input) {
      input.setAttribute("aria-invalid", "true");
      input.setAttribute("aria-describedby", box.id);
      input.focus();
    }
  }

  // Several problems at once: each said beside its field (which is marked invalid and described by it), the form's
  // message counting them, the first of those fields focused. One problem is said as `error` says it.
  errors(form, problems, noun = "settings") {
    if (problems.length <= 1) return this.error(form, problems.length ? problems[0].message : "", problems[0]?.field);
    this.error(form, `${problems.length} ${noun} need a change; each is said beside its field.`);
    let first = null;
    for (const { message, field } of problems) {
      const input = field && FIELD_INPUTS[field] ? form.querySelector(`#${FIELD_INPUTS[field]}`) : null;
      if (!input) continue;
      const note = h("p", { class: "field-error", id: `${input.id}-error`, text: message });
      (input.closest("label") || input).after(note); // outside its label: the label stays the field's name
      input.setAttribute("aria-invalid", "true");
      input.setAttribute("aria-describedby", note.id);
      first = first || input;
    }
    if (first) first.focus();
  }

  busy(button, busy, label) {
    button.disabled = busy;
    button.classList.toggle("is-busy", busy);
    if (label) button.textContent = label;
  }

  async ask() {
    this.error(this.promptForm, "");
    const prompt = this.prompt.value.trim();
    const count = clampInt(this.numQuestions.value, 1, this.limits.maxQuestions);
    const problems = [];
    if (!prompt) problems.push({ message: "Describe what you want to research.", field: "prompt" });
    else if (prompt.length < MIN_PROMPT_CHARS) {
      problems.push({ message: "Say a little more about what you want to research (a sentence will do).", field: "prompt" });
    }
    if (count === null) {
      const message = `Choose a whole number from 1 to ${this.limits.maxQuestions} follow-up questions.`;
      problems.push({ message, field: "num_questions" });
    }
    if (problems.length) return this.errors(this.promptForm, problems, "fields"); // all at once, each by its field
    return this.waiting(async (current) => {
      this.askStatus.textContent = WAITING_TEXT; // at once: the server may hold the request while the model writes
      const answer = await api("/api/research/questions", { method: "POST", body: { prompt, num_questions: count } });
      if (!current()) return;
      if (answer.questions) this.showQuestions(answer.research_id, prompt, answer.questions);
      else await this.waitForQuestions(answer.research_id, current);
    });
  }

  // A research opened from the sidebar: its questions to answer, or, while they are still being written, the wait.
  resume(snapshot) {
    const r = snapshot.research;
    if (r.status !== "draft") return this.showQuestions(r.id, r.prompt, snapshot.questions);
    this.reset(false);
    this.prompt.value = r.prompt;
    this.numQuestions.value = String(r.num_questions || snapshot.questions.length || 1);
    return this.waiting((current) => this.waitForQuestions(r.id, current));
  }

  // Runs `task` with the form in its waiting state; `task` gets a function that says whether it is still wanted.
  async waiting(task) {
    const number = ++this.waitNumber;
    const current = () => number === this.waitNumber;
    this.error(this.promptForm, "");
    this.busy(this.askButton, true, "Writing questions…");
    this.prompt.readOnly = true;
    try {
      await task(current);
    } catch (error) {
      if (current()) this.error(this.promptForm, error.message, error.field);
    } finally {
      if (current()) this.stopWaiting();
    }
  }

  stopWaiting() {
    this.askStatus.textContent = "";
    this.prompt.readOnly = false;
    this.busy(this.askButton, false, "Ask follow-up questions");
  }

  // The questions are written by a worker: ask for the research until they are there, or until writing them failed.
  async waitForQuestions(researchId, current) {
    this.askStatus.textContent = WAITING_TEXT;
    while (current()) {
      await sleep(POLL_MS);
      if (!current()) return;
      let snapshot;
      try {
        snapshot = await api(`/api/research/${researchId}`);
      } catch (error) {
        // A lost connection or a restarting server: ask again. A research that is gone or not ours: stop.
        if (error instanceof ApiError && error.status < 500) throw error;
        continue;
      }
      if (!current()) return;
      const r = snapshot.research;
      if (r.status === "draft") continue;
      if (r.status === "failed") throw new Error(`The model could not write the questions: ${r.error || "no details"}`);
      if (r.status === "cancelled") throw new Error("This research was cancelled before its questions were written.");
      this.showQuestions(researchId, r.prompt, snapshot.questions);
      return;
    }
  }

  // Step two, also reached from a research that was never started (its snapshot's questions).
  showQuestions(researchId, prompt, questions) {
    this.researchId = researchId;
    this.promptPreview.textContent = prompt;
    this.questions.replaceChildren(
      ...questions.map((question, index) => {
        const id = `answer-${index}`;
        const text = typeof question === "string" ? question : question.question;
        const value = typeof question === "string" ? "" : question.answer || "";
        const field = h("textarea", { id, name: id, rows: 2, maxlength: this.limits.maxAnswerChars, class: "answer" });
        field.value = value;
        return h("li", { class: "question" }, h("label", { for: id, text }), field);
      }),
    );
    show(this.promptForm, false);
    show(this.answersForm, true);
    this.error(this.answersForm, "");
    const first = this.questions.querySelector("textarea");
    if (first) first.focus();
  }

  updatePlan() {
    const breadth = clampInt(this.breadth.value, 1, this.limits.maxBreadth);
    const depth = clampInt(this.depth.value, 1, this.limits.maxDepth);
    if (breadth === null || depth === null) {
      this.planTotal.textContent = "–";
      this.planLevels.textContent = `breadth 1–${this.limits.maxBreadth}, depth 1–${this.limits.maxDepth}`;
      return;
    }
    const total = totalQueries(breadth, depth);
    // Adaptive: the tree is the most it may run; branches that are good enough stop early.
    this.planTotal.textContent = syncModeFields(this.answersForm) ? `up to ${total}` : String(total);
    const levels = queriesPerLevel(breadth, depth);
    this.planLevels.textContent =
      levels.length > 1 ? `${levels.join(" + ")} across ${levels.length} levels` : "one level";
  }

  async start() {
    this.error(this.answersForm, "");
    const breadth = clampInt(this.breadth.value, 1, this.limits.maxBreadth);
    const depth = clampInt(this.depth.value, 1, this.limits.maxDepth);
    // Every problem of the settings at once, not one per try.
    const problems = [];
    if (breadth === null) {
      problems.push({ message: `Breadth must be a whole number from 1 to ${this.limits.maxBreadth}.`, field: "breadth" });
    }
    if (depth === null) {
      problems.push({ message: `Depth must be a whole number from 1 to ${this.limits.maxDepth}.`, field: "depth" });
    }
    const { budget, error, field } = readBudget(this.answersForm);
    if (error) problems.push({ message: error, field });
    const mode = readMode(this.answersForm, depth === null ? this.limits.maxDepth : depth);
    if (mode.error) problems.push({ message: mode.error, field: mode.field });
    const length = readReportLength(this.answersForm);
    if (length.error) problems.push({ message: length.error, field: "report_length" });
    if (problems.length) return this.errors(this.answersForm, problems);
    const answers = [...this.questions.querySelectorAll("textarea")].map((field) => field.value.trim());
    this.busy(this.startButton, true, "Starting…");
    try {
      const body = {
        research_id: this.researchId,
        answers,
        breadth,
        depth,
        ...mode.fields,
        report_length: length.value,
        review_plan: this.answersForm.querySelector("#review-plan").checked,
      };
      if (budget) body.budget = budget;
      const answer = await api("/api/research/start", { method: "POST", body });
      const title = this.promptPreview.textContent;
      this.reset(true);
      this.onStarted(answer.research_id, title);
    } catch (error) {
      this.error(this.answersForm, error.message, error.field);
    } finally {
      this.busy(this.startButton, false, "Start research");
    }
  }

  reset(clearPrompt) {
    this.waitNumber += 1;
    this.stopWaiting();
    this.researchId = null;
    if (clearPrompt) this.prompt.value = "";
    this.questions.replaceChildren();
    clearBudget(this.answersForm);
    clearMode(this.answersForm);
    clearReportLength(this.answersForm);
    show(this.answersForm, false);
    show(this.promptForm, true);
    this.error(this.promptForm, "");
  }
}
