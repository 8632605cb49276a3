// Review the plan: a research started with "Review the plan first" stops once its top-level queries are planned
// (status awaiting_review). Its user edits, removes or adds queries (1 to 2 × breadth), then approves; the
// searches start then (PUT /api/research/<id>/plan, POST /api/research/<id>/plan/approve).
import { api, h, show } from "./dom.js";

export class PlanReview {
  constructor(container, view) {
    this.container = container;
    this.view = view;
    this.key = null; // the plan the rows were built from: rebuilt only when it changes, never under the user's typing
  }

  reset() {
    this.key = null;
    this.container.replaceChildren();
  }

  render(snapshot) {
    const r = snapshot.research;
    const reviewing = r.status === "awaiting_review";
    show(this.container, reviewing);
    if (!reviewing) {
      this.key = null;
      return;
    }
    const top = (snapshot.queries || []).filter((q) => q.depth === 1).sort((a, b) => a.position - b.position);
    const key = top.map((q) => q.id).join(",");
    if (key === this.key) return;
    this.key = key;
    this.max = 2 * (r.breadth || 1);
    this.rows = h("ol", { class: "plan-rows" });
    for (const query of top) this.addRow(query.query, query.objective);
    this.add = h("button", { type: "button", class: "button", text: "Add a query" });
    this.add.addEventListener("click", () => {
      this.addRow("", "");
      this.rows.lastElementChild.querySelector("input").focus();
    });
    this.approve = h("button", { type: "button", class: "button button-primary", id: "plan-approve", text: "Approve and start" });
    this.approve.addEventListener("click", () => this.send());
    this.error = h("p", { class: "form-error", role: "alert", hidden: true });
    this.container.replaceChildren(
      h("h2", { class: "section-title", id: "plan-review-title", text: "Review the plan" }),
      h("p", { class: "hint", text: `Nothing is searched until you approve. Edit, remove or add top-level queries (1 to ${this.max}); each runs to the research's depth.` }),
      this.rows,
      h("div", { class: "form-actions" }, this.add, this.approve),
      this.error,
    );
    this.updateButtons();
  }

  addRow(query, objective) {
    const n = this.rows.childElementCount + 1;
    const queryInput = h("input", { type: "text", class: "plan-query", value: query, maxlength: "500", "aria-label": `Query ${n}` });
    const objectiveInput = h("input", { type: "text", class: "plan-objective", value: objective, maxlength: "2000", "aria-label": `What query ${n} should find out` });
    const remove = h("button", { type: "button", class: "button button-small", text: "Remove", "aria-label": `Remove query ${n}` });
    const row = h("li", { class: "plan-row" }, queryInput, objectiveInput, remove);
    remove.addEventListener("click", () => {
      row.remove();
      this.updateButtons();
    });
    this.rows.append(row);
    this.updateButtons();
  }

  // Buttons allowed by the count, and each row labelled by its place (a removed row renumbers the rest).
  updateButtons() {
    if (!this.add) return;
    [...this.rows.children].forEach((row, index) => {
      row.querySelector(".plan-query").setAttribute("aria-label", `Query ${index + 1}`);
      row.querySelector(".plan-objective").setAttribute("aria-label", `What query ${index + 1} should find out`);
      row.querySelector("button").setAttribute("aria-label", `Remove query ${index + 1}`);
    });
    const count = this.rows.childElementCount;
    this.add.disabled = count >= this.max;
    this.approve.disabled = count < 1;
    for (const button of this.rows.querySelectorAll(".plan-row button")) button.disabled = count <= 1;
  }

  async send() {
    const queries = [...this.rows.children]
      .map((row) => ({ query: row.querySelector(".plan-query").value.trim(), objective: row.querySelector(".plan-objective").value.trim() }))
      .filter((item) => item.query);
    this.approve.disabled = true;
    show(this.error, false);
    try {
      await api(`/api/research/${this.view.id}/plan`, { method: "PUT", body: { queries } });
      await api(`/api/research/${this.view.id}/plan/approve`, { method: "POST" });
    } catch (error) {
      this.error.textContent = `Could not start with this plan: ${error.message}`;
      show(this.error, true);
      this.approve.disabled = false;
    }
  }
}
