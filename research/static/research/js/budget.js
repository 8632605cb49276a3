// Budgets: the start form's optional budget fields, and what the live view shows of spending and partial stops.

const REASONS = {
  budget_seconds: "time budget",
  budget_tokens: "token budget",
  budget_usd: "dollar budget",
};

// The `budget` object of a start from the form's fields (empty ones left out: the server's defaults apply),
// or an error message for the first field that is not a positive number.
export function readBudget(root) {
  const budget = {};
  const fields = [
    ["seconds", "#budget-seconds", "Seconds", true],
    ["tokens", "#budget-tokens", "Tokens", true],
    ["usd", "#budget-usd", "Dollars", false],
  ];
  for (const [key, selector, label, whole] of fields) {
    const raw = root.querySelector(selector).value.trim();
    if (!raw) continue;
    const value = Number(raw);
    if (!Number.isFinite(value) || value <= 0 || (whole && !Number.isInteger(value))) {
      return { error: `${label} budget must be a positive ${whole ? "whole number" : "number"}.`, field: key };
    }
    budget[key] = value;
  }
  return { budget: Object.keys(budget).length ? budget : null };
}

export function clearBudget(root) {
  for (const selector of ["#budget-seconds", "#budget-tokens", "#budget-usd"]) root.querySelector(selector).value = "";
}

export function formatTokens(usage) {
  return (usage.prompt_tokens + usage.completion_tokens).toLocaleString("en-US");
}

// Dollars to the cent, or finer for small sums; "unknown" while a call's model has no known price.
export function formatCost(usage) {
  const cost = usage.cost_usd;
  if (cost === null || cost === undefined) return "unknown";
  return `$${cost.toFixed(cost < 1 ? 4 : 2)}`;
}

// The banner of a research a budget stopped (or cancelled, then reported on request), or of one completed with
// failed branches, or "" for any other.
export function partialText(research) {
  if (!research.partial) {
    return research.status === "completed" && research.outcome === "partial"
      ? "Partial report — some branches failed; it covers the others. Their reasons are in the live log, and each can be retried."
      : "";
  }
  if (research.stop_reason === "cancelled") {
    return research.status === "completed"
      ? "Partial report — the research was cancelled; it covers what was analysed by then."
      : "Cancelled: the report is written from the pages analysed before the cancel.";
  }
  const why = REASONS[research.stop_reason] || "budget";
  return research.status === "completed"
    ? `Partial report — stopped at its ${why}.`
    : `Stopped at its ${why}: the report is written from the pages analysed so far.`;
}
