// The research app: a sidebar, the start flow and one research at a time, routed by /research/<id>/ URLs.
import { focusHeading, prepareDocument, tabKeys } from "./a11y.js";
import { ResearchView } from "./research-view.js";
import { Sidebar } from "./sidebar.js";
import { StartFlow } from "./start.js";

const RESEARCH_PATH = /^\/research\/([0-9a-fA-F-]{36})\/?$/;
const RESEARCH_HASH = /^#\/research\/([0-9a-fA-F-]{36})\/?$/;

function main() {
  const shell = document.getElementById("app");
  const data = shell.dataset;
  const limits = {
    maxBreadth: Number(data.maxBreadth),
    maxDepth: Number(data.maxDepth),
    maxQuestions: Number(data.maxQuestions),
    maxAnswerChars: Number(data.maxAnswerChars),
  };
  const newView = document.getElementById("view-new");
  const researchView = document.getElementById("view-research");
  const toggle = document.getElementById("sidebar-toggle");
  const scrim = document.getElementById("scrim");
  const drawer = document.getElementById("sidebar");

  function setSidebarOpen(open) {
    // Closing hides the drawer (see app.css): focus inside it would be lost, so it goes back to the toggle.
    if (!open && shell.classList.contains("sidebar-open") && drawer.contains(document.activeElement)) toggle.focus();
    shell.classList.toggle("sidebar-open", open);
    toggle.setAttribute("aria-expanded", String(open));
    scrim.hidden = !open;
  }
  toggle.addEventListener("click", () => setSidebarOpen(!shell.classList.contains("sidebar-open")));
  scrim.addEventListener("click", () => setSidebarOpen(false));
  document.addEventListener("keydown", (event) => {
    if (event.key === "Escape") setSidebarOpen(false);
  });

  const sidebar = new Sidebar(drawer, { onOpen: (id) => navigate(`/research/${id}/`) });
  const view = new ResearchView(researchView, {
    onResume: (snapshot) => {
      navigate("/");
      start.resume(snapshot);
    },
    onStatus: (research) => sidebar.upsert(summary(research)),
    onRenamed: (item) => sidebar.upsert(item),
    onDeleted: (id) => {
      sidebar.remove(id);
      navigate("/");
    },
  });
  const start = new StartFlow(newView, limits, {
    onStarted: (id, title) => {
      sidebar.upsert({ id, title, status: "queued", created_at: new Date().toISOString(), finished_at: null });
      navigate(`/research/${id}/`);
    },
    onDiscarded: (id) => sidebar.remove(id),
  });

  // `moveFocus`: on a change of view (not on the first load, where focus stays at the top of the page so that the
  // first Tab reaches the skip link), focus goes to the new view's heading instead of being lost with the old view.
  function route(moveFocus = true) {
    const match = window.location.pathname.match(RESEARCH_PATH);
    const id = match ? match[1].toLowerCase() : null;
    if (id) {
      newView.hidden = true;
      researchView.hidden = false;
      view.open(id);
    } else {
      view.close();
      researchView.hidden = true;
      newView.hidden = false;
      document.title = "Deep research";
    }
    sidebar.setActive(id);
    setSidebarOpen(false);
    if (moveFocus) focusHeading(document.getElementById(id ? "r-title" : "new-title"));
  }

  function navigate(path) {
    if (window.location.pathname !== path) window.history.pushState({}, "", path);
    route();
  }

  document.getElementById("new-research").addEventListener("click", (event) => {
    if (event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
    event.preventDefault();
    navigate("/");
    document.getElementById("prompt").focus();
  });
  window.addEventListener("popstate", () => route());
  skipLink(document.getElementById("skip-link"));
  // The research view's tabs: a click selects one (research-view.js); the keys move between them.
  tabKeys(researchView.querySelector('[role="tablist"]'), (tab) => tab.click());
  // The report and the error output, each time the research view puts one in (from the server, as HTML).
  for (const body of researchView.querySelectorAll("#report-body, #error-body")) {
    new MutationObserver(() => prepareDocument(body)).observe(body, { childList: true });
  }

  // Old-style links (/#/research/<id>) land on the same view.
  const hash = window.location.hash.match(RESEARCH_HASH);
  if (hash) window.history.replaceState({}, "", `/research/${hash[1]}/`);
  route(false);
}

// The skip link leads to the report when one is shown (past the header, the tabs and the report's versions), and
// otherwise to the main content. Its words say which, from the moment it has focus.
function skipLink(skip) {
  const report = () => {
    const panel = document.getElementById("panel-report");
    if (panel.hidden || panel.closest("[hidden]")) return null;
    return ["report-body", "report-growth"].map((id) => document.getElementById(id)).find((el) => !el.hidden) || null;
  };
  skip.addEventListener("focus", () => {
    skip.textContent = report() ? "Skip to report" : "Skip to main content";
  });
  skip.addEventListener("click", (event) => {
    event.preventDefault();
    const target = report() || document.getElementById("main");
    if (!target.hasAttribute("tabindex")) target.tabIndex = -1;
    target.focus();
  });
}

function summary(research) {
  const { id, title, status, outcome, stop_reason, created_at, finished_at } = research;
  return { id, title, status, outcome, stop_reason, created_at, finished_at };
}

main();
