// The research app: a sidebar, the start flow and one research at a time, routed by /research/<id>/ URLs.
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
  });
  const start = new StartFlow(newView, limits, {
    onStarted: (id, title) => {
      sidebar.upsert({ id, title, status: "queued", created_at: new Date().toISOString(), finished_at: null });
      navigate(`/research/${id}/`);
    },
  });

  function route() {
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
    document.getElementById("main").focus({ preventScroll: true });
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
  window.addEventListener("popstate", route);

  // Old-style links (/#/research/<id>) land on the same view.
  const hash = window.location.hash.match(RESEARCH_HASH);
  if (hash) window.history.replaceState({}, "", `/research/${hash[1]}/`);
  route();
}

function summary(research) {
  const { id, title, status, created_at, finished_at } = research;
  return { id, title, status, created_at, finished_at };
}

main();
