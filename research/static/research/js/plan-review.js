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
    // Once approved, the panel stays as one line saying so (it does not vanish and pull the page up under the
    // reader); a research that never waited for a review has no panel.
    show(this.container, reviewing || (r.review_plan && r.status !== "draft" && r.status !== "awaiting_answers"));
    if (!reviewing) {
      if (r.review_plan && this.key !== "approved") this.showApproved(snapshot);
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

  // The one line the panel becomes once the plan is approved.
  showApproved(snapshot) {
    this.key = "approved";
    const top = (snapshot.queries || []).filter((q) => q.depth === 1 && !q.round).length;
    this.container.replaceChildren(approvedLine(top));
  }

  // A numbered row: its number, the query and what it should find out (a few lines), each with a visible label,
  // and its Remove button. On a phone the row is one card, its fields stacked.
  addRow(query, objective) {
    this.rowCount = (this.rowCount || 0) + 1;
    const id = `plan-${this.rowCount}`;
    const queryInput = h("input", { type: "text", class: "plan-query", id: `${id}-query`, value: query, maxlength: "500" });
    const objectiveInput = h("textarea", { class: "plan-objective", id: `${id}-objective`, rows: 2, maxlength: "2000" });
    objectiveInput.value = objective;
    const remove = h("button", { type: "button", class: "button button-small plan-remove", text: "Remove" });
    const row = h(
      "li",
      { class: "plan-row" },
      h("span", { class: "plan-number", "aria-hidden": "true" }),
      h("div", { class: "plan-field" }, h("label", { class: "plan-query-label", for: queryInput.id }), queryInput),
      h("div", { class: "plan-field" }, h("label", { class: "plan-objective-label", for: objectiveInput.id }), objectiveInput),
      remove,
    );
    remove.addEventListener("click", () => {
      row.remove();
      this.updateButtons();
    });
    this.rows.append(row);
    this.updateButtons();
  }

  // Buttons allowed by the count, and each row numbered and labelled by its place (a removed row renumbers the rest).
  updateButtons() {
    if (!this.add) return;
    [...this.rows.children].forEach((row, index) => {
      const n = index + 1;
      row.querySelector(".plan-number").textContent = `${n}.`;
      row.querySelector(".plan-query-label").textContent = `Query ${n}`;
      row.querySelector(".plan-objective-label").textContent = `What query ${n} should find out`;
      row.querySelector(".plan-remove").setAttribute("aria-label", `Remove query ${n}`);
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
    // At once, while the click is the reason the page changes (the rows going later, after two requests, would
    // pull the page up under the reader): the panel becomes its one line, and comes back if the plan is refused.
    const rows = [...this.container.childNodes];
    const key = this.key;
    this.key = "approved";
    this.container.replaceChildren(approvedLine(queries.length));
    try {
      await api(`/api/research/${this.view.id}/plan`, { method: "PUT", body: { queries } });
      await api(`/api/research/${this.view.id}/plan/approve`, { method: "POST" });
    } catch (error) {
      this.key = key;
      this.container.replaceChildren(...rows);
      this.error.textContent = `Could not start with this plan: ${error.message}`;
      show(this.error, true);
      this.approve.disabled = false;
    }
  }
}

function approvedLine(count) {
  const queries = count === 1 ? "1 top-level query" : `${count} top-level queries`;
  return h("p", { class: "plan-approved", id: "plan-review-title", text: `Plan reviewed and approved: ${queries}.` });
}
