// "Dig deeper" under a completed report: a branch of the user's own, from a free query, one of the report's
// sections or one of the research memory's open questions (POST /api/research/<id>/deepen). The research then
// runs that branch and writes its next report version; the live log shows it like any branch.
import { api, h, show } from "./dom.js";

export class DeepenPanel {
  constructor(container, view) {
    this.container = container;
    this.view = view;
    this.section = "";
    this.query = h("input", { type: "text", id: "deepen-query", maxlength: "500", required: true, autocomplete: "off" });
    this.objective = h("input", { type: "text", id: "deepen-objective", maxlength: "2000", autocomplete: "off" });
    this.sections = h("select", { id: "deepen-section" });
    this.error = h("p", { class: "form-error", role: "alert", hidden: true });
    this.submit = h("button", { type: "submit", class: "button button-primary", text: "Dig deeper" });
    this.sections.addEventListener("change", () => {
      this.section = this.sections.value;
      if (this.section) this.query.value = this.section;
    });
    this.form = h(
      "form",
      { class: "deepen-form", "aria-labelledby": "deepen-title" },
      h("h2", { class: "section-title", id: "deepen-title", text: "Dig deeper" }),
      h("p", { class: "hint", text: "A new branch of searches below this research; it runs, then writes the next report version." }),
      h("label", { class: "deepen-field", for: "deepen-section" }, "Start from a section", this.sections),
      h("label", { class: "deepen-field", for: "deepen-query" }, "Search for", this.query),
      h("label", { class: "deepen-field", for: "deepen-objective" }, "What it should find out (optional)", this.objective),
      h("div", { class: "form-actions" }, this.submit),
      this.error,
    );
    this.form.addEventListener("submit", (event) => {
      event.preventDefault();
      const body = { query: this.query.value };
      if (this.objective.value.trim()) body.objective = this.objective.value;
      if (this.section) body.section = this.section;
      this.send(body);
    });
    this.container.replaceChildren(this.form);
  }

  // Another research opened in the page: nothing typed for the last one stays.
  reset() {
    this.form.reset();
    this.section = "";
    show(this.error, false);
  }

  // Offered on a completed research that no budget or cancel stopped, once it has a report.
  static allowed(snapshot) {
    const r = snapshot.research;
    return r.status === "completed" && !r.stop_reason && Boolean(snapshot.report);
  }

  // `ready`: what stands above it (the report, the conversation) is in the page, so showing it moves nothing.
  render(snapshot, ready = true) {
    const allowed = DeepenPanel.allowed(snapshot);
    show(this.container, allowed && ready);
    if (!allowed) return;
    const titles = (snapshot.report_sections || []).map((section) => section.title);
    const current = [...this.sections.options].map((o) => o.value).slice(1);
    if (current.join("\n") !== titles.join("\n")) {
      this.sections.replaceChildren(h("option", { value: "", text: "— none —" }), ...titles.map((t) => h("option", { value: t, text: t })));
      this.sections.value = titles.includes(this.section) ? this.section : "";
    }
  }

  // From a question the research's sources do not answer (ask.js): the form filled in with the search suggested
  // for it, for the user to check and send; nothing is searched until they do.
  prefill(query, objective = "") {
    this.reset();
    this.sections.value = "";
    this.query.value = query.slice(0, 500);
    this.objective.value = objective.slice(0, 2000);
    this.form.scrollIntoView({ block: "nearest" });
    this.query.focus();
  }

  // From an open question of the research memory.
  fromGap(gapId, button) {
    return this.send({ gap_id: gapId }, button);
  }

  async send(body, button = this.submit) {
    button.disabled = true; // a double click sends one request
    show(this.error, false);
    try {
      await api(`/api/research/${this.view.id}/deepen`, { method: "POST", body });
      this.query.value = "";
      this.objective.value = "";
      this.section = "";
      this.sections.value = "";
      this.view.select("log");
    } catch (error) {
      this.error.textContent = `Could not dig deeper: ${error.message}`;
      show(this.error, true);
    } finally {
      button.disabled = false;
    }
  }
}
