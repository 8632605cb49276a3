// Cancel or retry one branch of the query tree, and the list of a research's report versions.
import { api, appLink, h, show } from "./dom.js";

const UNFINISHED = new Set(["pending", "searching", "scraping"]);
const RETRYABLE = new Set(["failed", "cancelled"]);
// A retry is refused while the research is queued or writing its report (the server says why).
const RETRY_WHILE = new Set(["running", "completed", "failed", "cancelled"]);

// The buttons of one query card; `view.notice` shows what the server refused.
export function queryActions(view, query) {
  const cancel = h("button", { type: "button", class: "button button-small q-cancel", text: "Cancel", hidden: true });
  const retry = h("button", { type: "button", class: "button button-small q-retry", text: "Retry", hidden: true });
  const act = async (button, action, label) => {
    button.disabled = true; // a double click sends one request
    try {
      await api(`/api/research/${view.id}/queries/${query.id}/${action}`, { method: "POST" });
    } catch (error) {
      view.notice(`Could not ${label} the query: ${error.message}`);
    } finally {
      button.disabled = false;
    }
  };
  cancel.addEventListener("click", () => act(cancel, "cancel", "cancel"));
  retry.addEventListener("click", () => act(retry, "retry", "retry"));
  return { el: h("span", { class: "q-actions" }, cancel, retry), cancel, retry };
}

// Which buttons the query's state (and its research's) allows: the live snapshot keeps them current.
export function updateQueryActions(actions, query, research) {
  const status = research ? research.status : "";
  show(actions.cancel, status === "running" && UNFINISHED.has(query.status));
  show(actions.retry, RETRYABLE.has(query.status) && RETRY_WHILE.has(status) && !(research && research.stop_reason));
}

// Earlier report versions, each downloadable; the report shown is the latest.
export function renderReportVersions(container, snapshot) {
  const versions = snapshot.report_versions || [];
  const id = snapshot.research.id;
  show(container, versions.length > 1);
  if (versions.length < 2) return;
  const latest = versions[versions.length - 1].version;
  const items = versions
    .filter((v) => v.version !== latest)
    .map((v) =>
      appLink(`/api/research/${id}/report.md?version=${v.version}`, `version ${v.version}`, {
        download: `report-v${v.version}.md`,
      }),
    );
  container.replaceChildren(
    `Report version ${latest}. Earlier versions: `,
    ...items.flatMap((item, index) => (index ? [", ", item] : [item])),
  );
}
