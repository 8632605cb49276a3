// Pure helpers of the research UI: no DOM, so the browser tests can check them directly.

// The tree's arithmetic (research/record/planning.py): level 1 has `breadth` queries; b(k+1) = ceil(b(k) / 2); each query at level k spawns ceil(b(k) / 2)
// children, never fewer than one. A port of research/record/planning.py.
export function levelBreadth(breadth, level) {
  let b = breadth;
  for (let k = 1; k < level; k += 1) b = Math.max(1, Math.ceil(b / 2));
  return b;
}

export function queriesPerLevel(breadth, depth) {
  const counts = [breadth];
  for (let level = 1; level < depth; level += 1) {
    const children = Math.max(1, Math.ceil(levelBreadth(breadth, level) / 2));
    counts.push(counts[counts.length - 1] * children);
  }
  return counts;
}

export function totalQueries(breadth, depth) {
  return queriesPerLevel(breadth, depth).reduce((sum, n) => sum + n, 0);
}

export const ACTIVE_STATUSES = new Set(["queued", "running", "awaiting_review", "reporting"]);
export const FINISHED_STATUSES = new Set(["completed", "failed", "cancelled"]);

export const STATUS_LABELS = {
  draft: "Draft",
  awaiting_answers: "Not started",
  queued: "Queued",
  running: "Researching",
  awaiting_review: "Waiting for your review",
  reporting: "Writing report",
  completed: "Completed",
  failed: "Failed",
  cancelled: "Cancelled",
  pending: "Pending",
  searching: "Searching",
  scraping: "Reading pages",
  reviewing: "Reviewing",
  done: "Done",
  analyzing: "Analysing",
  analyzed: "Analysed",
};

export function statusLabel(status) {
  return STATUS_LABELS[status] || String(status || "");
}

// A completed research that did not end whole says so in its badge, in its own word and colour.
const OUTCOME_LABELS = { partial: "Partial", unanswered: "No answer found" };

// The badge of a research (the page's header, the sidebar): its status, or a completed one's outcome.
export function researchBadge(research) {
  const outcome = research.status === "completed" ? research.outcome : "";
  if (OUTCOME_LABELS[outcome]) return { label: OUTCOME_LABELS[outcome], className: `badge badge-${outcome}` };
  return { label: statusLabel(research.status), className: `badge badge-${research.status}` };
}

function startOfDay(date) {
  return new Date(date.getFullYear(), date.getMonth(), date.getDate());
}

// The sidebar group of a date, by calendar days in the browser's time zone.
export function dateGroup(date, now = new Date()) {
  const days = Math.round((startOfDay(now) - startOfDay(date)) / 86400000);
  if (days <= 0) return "today";
  if (days <= 7) return "week";
  if (days <= 30) return "month";
  return "older";
}

// Every research is filed under the day it was created (as the README says), finished or not, so an entry never
// changes group when it finishes: it leaves Ongoing for its creation day.
export function sidebarTime(item) {
  return new Date(item.created_at);
}

export function sidebarGroup(item, now = new Date()) {
  return ACTIVE_STATUSES.has(item.status) ? "ongoing" : dateGroup(sidebarTime(item), now);
}

// Newest first. Dates, not ISO strings, are compared: the server's and the browser's ISO forms differ.
export function newestFirst(a, b) {
  return sidebarTime(b) - sidebarTime(a);
}

export function formatElapsed(ms) {
  const total = Math.max(0, Math.floor(ms / 1000));
  const h = Math.floor(total / 3600);
  const m = Math.floor((total % 3600) / 60);
  const s = total % 60;
  const pad = (n) => String(n).padStart(2, "0");
  return h ? `${h}:${pad(m)}:${pad(s)}` : `${pad(m)}:${pad(s)}`;
}

// One hour cycle for every time shown, so the header and the events agree; 24-hour, as the event times must fit
// their narrow column.
const HOUR_CYCLE = "h23";
const timeFormat = new Intl.DateTimeFormat(undefined, {
  hour: "2-digit",
  minute: "2-digit",
  second: "2-digit",
  hourCycle: HOUR_CYCLE,
});
const dateTimeFormat = new Intl.DateTimeFormat(undefined, {
  dateStyle: "medium",
  timeStyle: "short",
  hourCycle: HOUR_CYCLE,
});

export function formatTime(iso) {
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? "" : timeFormat.format(date);
}

export function formatDateTime(iso) {
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? "" : dateTimeFormat.format(date);
}

// Only absolute http(s) URLs ever become links; anything else (javascript:, data:, relative) stays text.
export function webUrl(value) {
  try {
    const url = new URL(String(value));
    return url.protocol === "http:" || url.protocol === "https:" ? url.href : null;
  } catch {
    return null;
  }
}

export function hostOf(value) {
  try {
    return new URL(String(value)).host;
  } catch {
    return "";
  }
}

const REASONS = {
  analysis_failed: "analysis failed",
  scrape_error: "scrape error",
  followups_failed: "follow-up questions failed",
  report_failed: "report failed",
};

function reason(value) {
  return REASONS[value] || String(value || "failed").replaceAll("_", " ");
}

function plural(n, one, many = `${one}s`) {
  return `${n} ${n === 1 ? one : many}`;
}

// A page as a reader names it: its host and path, without the query, a fragment or a collection link's signature,
// cut to a readable length ("docs.python.org/3/library/asyncio-task.html").
export function shortUrl(value) {
  try {
    const url = new URL(String(value));
    const path = url.pathname.replace(/^(\/collection\/\d+\/)[^/]+\/$/, "$1").replace(/\/$/, "");
    const text = `${url.host}${path}`;
    return text.length > 70 ? `${text.slice(0, 69)}…` : text;
  } catch {
    return String(value || "");
  }
}

// What the live log says about one event: {tone, text, detail}; tone is info, work, ok or fail. `page(url)` names
// a page for the reader (its title once known); the URL's short form by default.
export function describeEvent(event, page = shortUrl) {
  const d = event.data && typeof event.data === "object" ? event.data : {};
  const at = (url) => (url ? page(url) : "");
  switch (event.type) {
    case "generating_followups":
      return { tone: "work", text: `Writing ${plural(d.num_questions ?? 0, "follow-up question")}` };
    case "followups_generated":
      return { tone: "ok", text: `${plural((d.questions || []).length, "follow-up question")} written` };
    case "research_started":
      return {
        tone: "info",
        text: `Research started: breadth ${d.breadth}, depth ${d.depth}, ${plural(d.queries_planned ?? 0, "query", "queries")} planned`,
      };
    case "new_serp_query":
      return { tone: "info", text: `New query (depth ${d.depth}): ${d.query ?? ""}`, detail: d.objective || "" };
    case "got_websites_from_serp_query":
      return { tone: "ok", text: `${plural((d.urls || []).length, "website")} found for: ${d.query ?? ""}` };
    case "scraping_a_website":
      return { tone: "work", text: `${d.reused ? "Reusing the page already fetched:" : "Reading"} ${at(d.url)}` };
    case "analyzing_a_website":
      return { tone: "work", text: `Analysing ${at(d.url)}` };
    case "analyzed_a_website": {
      const dropped = d.quotes_dropped ? ` (${plural(d.quotes_dropped, "unverifiable quote")} dropped)` : "";
      return { tone: "ok", text: `Analysed ${at(d.url)}: ${plural(d.facts ?? 0, "finding")}${dropped}` };
    }
    case "website_failed":
      return { tone: "fail", text: `Skipped ${at(d.url)}: ${reason(d.reason)}`, detail: d.error || "" };
    case "serp_query_failed":
      return { tone: "fail", text: `Search failed for: ${d.query ?? ""}`, detail: d.error || "" };
    case "report_writing_start":
      return { tone: "work", text: "Writing the report" };
    case "report_section_written":
      return { tone: "ok", text: `Report section written: ${d.title ?? `section ${d.position ?? ""}`}` };
    case "report_writing_successful":
      return {
        tone: "ok",
        text: `Report written: ${plural(d.citations ?? 0, "citation")}, ${plural(d.sources_cited ?? 0, "source")}`,
      };
    case "research_failed":
      return { tone: "fail", text: `Research failed: ${reason(d.reason)}`, detail: d.error || "" };
    case "research_cancelled":
      return { tone: "fail", text: "Research cancelled" };
    case "report_requested":
      return { tone: "work", text: "Writing a report from what was found before the cancel" };
    case "query_cancelled":
      return { tone: "fail", text: `Branch cancelled: ${d.query ?? ""}`, detail: `${plural((d.cancelled || []).length, "query", "queries")} stopped` };
    case "query_retried":
      return { tone: "info", text: `Retrying: ${d.query ?? ""}` };
    case "plan_ready":
      return { tone: "info", text: `Plan ready for your review: ${plural(d.queries ?? 0, "query", "queries")}` };
    case "plan_approved":
      return { tone: "ok", text: `Plan approved: ${plural((d.queries || []).length, "query", "queries")}` };
    case "scheduled_run":
      return { tone: "info", text: `Scheduled run ${d.run ?? ""}: searching again for version ${d.version ?? ""}`, detail: plural(d.queries ?? 0, "query", "queries") };
    case "branch_added":
      return { tone: "info", text: `Digging deeper: ${d.query ?? ""}`, detail: d.section ? `From the section “${d.section}”` : d.gap_id ? "From an open question" : "" };
    case "answer_writing_start":
      return { tone: "work", text: "Writing the answer to a question" };
    case "answer_written":
      if (d.status === "failed") return { tone: "fail", text: "The answer to a question could not be written" };
      return d.sources_answer === false
        ? { tone: "info", text: "Question answered: the sources of this research do not answer it" }
        : { tone: "ok", text: "Question answered" };
    case "query_evaluated":
      return {
        tone: d.decision === "stop" ? "ok" : "info",
        text: `Branch scored ${Number(d.score).toFixed(1)}/10: ${d.decision === "stop" ? "stops" : "goes deeper"}${d.decision_reason ? ` (${String(d.decision_reason).replace(/_/g, " ")})` : ""}`,
        detail: (d.gaps || []).length ? `Gaps: ${d.gaps.join("; ")}` : "",
      };
    case "research_evaluated":
      return {
        tone: "info",
        text: d.round_added
          ? `Coverage scored ${Number(d.score).toFixed(1)}/10: adding gap-filling round ${d.round_added}`
          : `Coverage scored ${Number(d.score).toFixed(1)}/10: writing the report`,
        detail: (d.gaps || []).length ? `Gaps: ${d.gaps.join("; ")}` : "",
      };
    case "memory_updated": {
      const added = [
        plural(d.insights ?? 0, "insight"),
        plural(d.gaps ?? 0, "open question"),
        plural(d.contradictions ?? 0, "contradiction"),
      ];
      const closed = d.closed ? `; ${plural(d.closed, "question")} answered` : "";
      return { tone: "ok", text: `Memory updated: ${added.join(", ")}${closed}` };
    }
    case "budget_reached": {
      const budgets = { budget_seconds: "time", budget_tokens: "token", budget_usd: "dollar" };
      return {
        tone: "info",
        text: `Reached its ${budgets[d.reason] || ""} budget: stopping, and writing the report from what was analysed`,
        detail: d.limit !== undefined ? `spent ${d.spent} of ${d.limit}` : "",
      };
    }
    default:
      return { tone: "info", text: String(event.type || "event") };
  }
}
