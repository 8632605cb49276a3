// Adaptive research: the start form's mode fields, and what the live log shows of each branch's evaluation.
import { h, show } from "./dom.js";

const REASONS = {
  threshold: "good enough",
  diminishing_returns: "no longer improving",
  max_depth: "maximum depth",
  continue: "going deeper",
};

// The mode fields of a start: {mode} for fixed, {mode, min_depth, quality_threshold} for adaptive (empty fields
// left out: the server's defaults apply), or an error message for a field out of range.
export function readMode(root, depth) {
  const mode = root.querySelector("#mode").value === "adaptive" ? "adaptive" : "fixed";
  if (mode === "fixed") return { fields: { mode } };
  const fields = { mode };
  const minDepth = root.querySelector("#min-depth").value.trim();
  if (minDepth) {
    const value = Number(minDepth);
    if (!Number.isInteger(value) || value < 1 || value > depth) {
      return { error: `Minimum depth must be a whole number from 1 to the depth (${depth}).`, field: "min_depth" };
    }
    fields.min_depth = value;
  }
  const threshold = root.querySelector("#quality-threshold").value.trim();
  if (threshold) {
    const value = Number(threshold);
    if (!Number.isInteger(value) || value < 1 || value > 10) {
      return { error: "Quality threshold must be a whole number from 1 to 10.", field: "quality_threshold" };
    }
    fields.quality_threshold = value;
  }
  return { fields };
}

// Shows the adaptive fields only in adaptive mode; returns whether it is on.
export function syncModeFields(root) {
  const adaptive = root.querySelector("#mode").value === "adaptive";
  show(root.querySelector("#adaptive-fields"), adaptive);
  return adaptive;
}

export function clearMode(root) {
  root.querySelector("#mode").value = "fixed";
  root.querySelector("#min-depth").value = "";
  root.querySelector("#quality-threshold").value = "";
  syncModeFields(root);
}

// The line under a query with its evaluation: score, decision and the gaps it named.
export function evaluationNode() {
  const score = h("span", { class: "q-score" });
  const decision = h("span", { class: "q-decision" });
  const gaps = h("ul", { class: "q-gaps" });
  const el = h("div", { class: "q-eval", hidden: true }, h("p", {}, score, decision), gaps);
  return { el, score, decision, gaps };
}

export function updateEvaluation(node, query) {
  const evaluated = query.score !== null && query.score !== undefined;
  show(node.el, evaluated);
  if (!evaluated) return;
  node.score.textContent = `Score ${Number(query.score).toFixed(1)}/10`;
  node.score.title = Object.entries(query.dimensions || {})
    .map(([name, value]) => `${name} ${value}`)
    .join(" · ");
  const why = REASONS[query.decision_reason] || query.decision_reason || "";
  node.decision.textContent = query.decision ? ` · ${query.decision}${why ? ` (${why})` : ""}` : "";
  node.decision.className = `q-decision q-decision-${query.decision || "none"}`;
  node.gaps.replaceChildren(...(query.gaps || []).map((gap) => h("li", { text: `Gap: ${gap}` })));
}

// "Round 2" for a gap-filling branch, "" for the initial ones.
export function roundLabel(query) {
  return query.round ? `Round ${query.round}` : "";
}
