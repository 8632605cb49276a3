// The start flow: prompt and number of follow-up questions, then answers, breadth and depth, then start.
import { api, h, show } from "./dom.js";
import { clearMode, readMode, syncModeFields } from "./adaptive.js";
import { clearBudget, readBudget } from "./budget.js";
import { queriesPerLevel, totalQueries } from "./lib.js";

function clampInt(value, min, max) {
  const n = Number.parseInt(value, 10);
  return Number.isInteger(n) && n >= min && n <= max ? n : null;
}

export class StartFlow {
  constructor(root, limits, { onStarted }) {
    this.root = root;
    this.limits = limits;
    this.onStarted = onStarted;
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

    this.promptForm.addEventListener("submit", (event) => {
      event.preventDefault();
      this.ask();
    });
    this.answersForm.addEventListener("submit", (event) => {
      event.preventDefault();
      this.start();
    });
    root.querySelector("#back-button").addEventListener("click", () => this.reset(false));
    for (const input of [this.breadth, this.depth]) input.addEventListener("input", () => this.updatePlan());
    root.querySelector("#mode").addEventListener("change", () => this.updatePlan());
    this.prompt.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && (event.metaKey || event.ctrlKey)) this.promptForm.requestSubmit();
    });
    this.updatePlan();
  }

  error(form, message) {
    const box = form.querySelector(".form-error");
    box.textContent = message || "";
    show(box, Boolean(message));
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
    if (!prompt) return this.error(this.promptForm, "Describe what you want to research.");
    if (count === null) {
      return this.error(this.promptForm, `Choose between 1 and ${this.limits.maxQuestions} follow-up questions.`);
    }
    this.busy(this.askButton, true, "Writing questions…");
    try {
      const answer = await api("/api/research/questions", { method: "POST", body: { prompt, num_questions: count } });
      this.showQuestions(answer.research_id, prompt, answer.questions);
    } catch (error) {
      this.error(this.promptForm, error.message);
    } finally {
      this.busy(this.askButton, false, "Ask follow-up questions");
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
    if (breadth === null || depth === null) {
      return this.error(
        this.answersForm,
        `Breadth must be 1 to ${this.limits.maxBreadth} and depth 1 to ${this.limits.maxDepth}.`,
      );
    }
    const { budget, error } = readBudget(this.answersForm);
    if (error) return this.error(this.answersForm, error);
    const mode = readMode(this.answersForm, depth);
    if (mode.error) return this.error(this.answersForm, mode.error);
    const answers = [...this.questions.querySelectorAll("textarea")].map((field) => field.value.trim());
    this.busy(this.startButton, true, "Starting…");
    try {
      const body = { research_id: this.researchId, answers, breadth, depth, ...mode.fields };
      if (budget) body.budget = budget;
      const answer = await api("/api/research/start", { method: "POST", body });
      const title = this.promptPreview.textContent;
      this.reset(true);
      this.onStarted(answer.research_id, title);
    } catch (error) {
      this.error(this.answersForm, error.message);
    } finally {
      this.busy(this.startButton, false, "Start research");
    }
  }

  reset(clearPrompt) {
    this.researchId = null;
    if (clearPrompt) this.prompt.value = "";
    this.questions.replaceChildren();
    clearBudget(this.answersForm);
    clearMode(this.answersForm);
    show(this.answersForm, false);
    show(this.promptForm, true);
    this.error(this.promptForm, "");
  }
}
