"""`make demo DEMO_EXIT=1` (scripts/demo.py) completes a breadth-2, depth-2 research offline, on PostgreSQL + Redis
when they answer and on PostgreSQL and Valkey from the pip-installed wheels when they do not; every citation of its
report is a document of the collection and every quote appears in that document. It then asks the research a
question, answered offline."""

import os
import re
import subprocess
import sys
from pathlib import Path

import psutil
import psycopg
import pytest
from django.contrib.auth.hashers import check_password

from devtools.local_servers import LocalServers
from devtools.processes import ROOT, free_port
from devtools.servers import database_url
from scripts.build_demo_collection import DEMO_QUESTION
from tests.support.demo import load_demo_script
from tests.support.private_services import PrivateRedis

pytestmark = pytest.mark.slow

# A link may carry its quote as a title: `[[n]](url "quote")` (the title's own quotes and brackets are entities).
CITATION = re.compile(r'\]\((http://127\.0\.0\.1:\d+/collection/(\d+)/)(?: "[^"]*")?\)')
ANY_LINK = re.compile(r'\]\((https?://[^)\s]+)(?: "[^"]*")?\)')
QUOTED = re.compile(r"“([^”]+)”")
WATCH = re.compile(r"Watch it live: http://127\.0\.0\.1:\d+/  \(user: demo, password: (\S+)\)")


def unescape_markdown(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text).replace("&lt;", "<").replace("&gt;", ">")


def run_demo(var: Path, extra: dict[str, str]) -> str:
    env = {key: value for key, value in os.environ.items() if not key.startswith(("PYTEST", "DJANGO_SETTINGS"))}
    for key in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "SEARXNG_URL", "SECRET_KEY", "DEEPRESEARCH_TEST_RUN"):
        env.pop(key, None)  # a fresh machine: no model, no search engine
    env.update({"DEMO_EXIT": "1", "DEMO_VAR": str(var), "DEMO_PORT": str(free_port()), **extra})
    result = subprocess.run(
        [sys.executable, "scripts/demo.py"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result.stdout


def check_output(output: str, password_hash: str) -> None:
    """The terminal shows where to watch with working credentials, the progress bar filled, and the report's path."""
    watch = WATCH.search(output)
    assert watch, output[-2000:]
    assert check_password(watch.group(1), password_hash)
    assert "[##############################] queries 4/4" in output
    assert re.search(r"report\.md: /\S+/report\.md", output)
    # then the question asked of the research, the start of its answer with its citations as numbers, and how
    asked = output.split(f"Asked the research: {DEMO_QUESTION}\n", 1)
    assert len(asked) == 2, output[-2000:]
    answer = asked[1].splitlines()[0].strip()
    assert re.search(r"\w.*\[1\]", answer) and "](" not in answer and "do not answer" not in answer, answer
    assert "Answered offline by the extractive engine, without a language model" in output


def check_report(var: Path, documents: dict[int, str]) -> None:
    """Every citation resolves to a collection document; every quote appears in the document it cites."""
    report = (var / "report.md").read_text()
    assert report.startswith("# ") and "Offline research: written by the extractive engine" in report
    cited = CITATION.findall(report)
    assert len(cited) >= 5
    assert len(ANY_LINK.findall(report)) == len(cited)  # no link that is not a collection document
    for _, document_id in cited:
        assert int(document_id) in documents, document_id
    sources = report.split("## Sources", 1)[1]
    # one source per document: every search that found a document gave its one stable URL
    source_documents = [CITATION.search(line).group(2) for line in sources.strip().splitlines()]
    assert len(source_documents) == len(set(source_documents))
    quotes = 0
    for line in sources.strip().splitlines():
        match = CITATION.search(line)
        assert match, line
        text = " ".join(documents[int(match.group(2))].split())
        for quote in QUOTED.findall(line):
            quote = unescape_markdown(quote)  # the report escapes what markdown or HTML would read as markup
            assert " ".join(quote.split()) in text, quote
            quotes += 1
    assert quotes >= 5


def test_demo_uses_its_own_database_and_redis_db_on_the_configured_servers() -> None:
    # a deployment's .env loaded in the shell: the demo must not touch its collection, users or queues
    demo = load_demo_script()
    deployment = {"DATABASE_URL": "postgres://app:secret@db.internal:5432/production", "REDIS_URL": "redis://r:6379/0"}
    assert demo.demo_service_urls(deployment) == (
        "postgres://app:secret@db.internal:5432/deepresearch_demo",
        "redis://r:6379/15",
    )
    assert demo.demo_service_urls({}) == (
        "postgres://postgres@127.0.0.1:5432/deepresearch_demo",
        "redis://127.0.0.1:6379/15",
    )
    explicit = {**deployment, "DEMO_DATABASE_URL": "postgres://x@h/d", "DEMO_REDIS_URL": "redis://h:1/3"}
    assert demo.demo_service_urls(explicit) == ("postgres://x@h/d", "redis://h:1/3")


def test_the_terminal_shows_the_start_of_an_answer_with_its_citations_as_numbers() -> None:
    demo = load_demo_script()
    answer = (
        'Threads share data. [[1]](http://127.0.0.1:8000/collection/3/ "Threads share &quot;data&quot;.")[[2]]'
        '(http://127.0.0.1:8000/collection/9/)\nA lock guards it. [[2]](http://127.0.0.1:8000/collection/9/ "q")'
        "\n\nSources:\n\n1. [threading](http://127.0.0.1:8000/collection/3/) — quoted: “Threads share data.”\n"
    )
    assert demo.answer_preview(answer) == "Threads share data. [1][2] A lock guards it. [2]"
    long = demo.answer_preview("word " * 200)
    assert long.endswith("…") and len(long) <= demo.ANSWER_PREVIEW_CHARS
    assert demo.answer_preview("The sources of this research do not answer this question.\n") == (
        "The sources of this research do not answer this question."
    )


def test_demo_on_postgresql_and_redis(tmp_path) -> None:
    redis_server = PrivateRedis().start()  # its own broker: the test run's workers must not take its tasks
    name = f"test_demo_{os.getpid()}"
    server = database_url().rsplit("/", 1)[0]  # the test run's server: the machine's, or the wheels'
    url = f"{server}/{name}"
    try:
        output = run_demo(tmp_path, {"DEMO_DATABASE_URL": url, "DEMO_REDIS_URL": redis_server.url})
        assert f"Mode: PostgreSQL ({name}) and Redis" in output
        assert "Research completed with the extractive engine" in output
        with psycopg.connect(url) as conn:
            documents = dict(conn.execute("select id, text from research_collectiondocument").fetchall())
            statuses = conn.execute("select status, breadth, depth from research_research").fetchall()
            queries = conn.execute("select count(*) from research_serpquery where status = 'done'").fetchone()[0]
            password_hash = conn.execute("select password from auth_user where username = 'demo'").fetchone()[0]
            asked = conn.execute("select question, status, sources_answer from research_askedquestion").fetchall()
        assert statuses == [("completed", 2, 2)] and queries == 4
        assert asked == [(DEMO_QUESTION, "answered", True)]
        check_output(output, password_hash)
        check_report(tmp_path, documents)
    finally:
        redis_server.stop()
        with psycopg.connect(f"{server}/postgres", autocommit=True) as conn:
            conn.execute(f'drop database if exists "{name}" with (force)')


def test_demo_on_embedded_servers_when_the_configured_ones_do_not_answer(tmp_path) -> None:
    closed = free_port()  # nothing listens there: as if PostgreSQL and Redis were stopped
    output = run_demo(
        tmp_path,
        {
            "DATABASE_URL": f"postgres://postgres@127.0.0.1:{closed}/deepresearch",
            "REDIS_URL": f"redis://127.0.0.1:{closed}/0",
        },
    )
    # the first line it prints says so
    assert "Mode: embedded: PostgreSQL and Valkey from the pip-installed wheels" in output.splitlines()[0], output[:300]
    # and it left no server running: both were stopped on exit
    assert not [p for p in psutil.process_iter(["cmdline"]) if str(tmp_path) in " ".join(p.info["cmdline"] or [])]
    # what it stored is in its own PostgreSQL, started again here to read it
    with LocalServers(tmp_path / "servers") as servers:
        with psycopg.connect(servers.database_url.rsplit("/", 1)[0] + "/deepresearch_demo") as conn:
            documents = dict(conn.execute("select id, text from research_collectiondocument").fetchall())
            assert conn.execute("select status from research_research").fetchall() == [("completed",)]
            done = conn.execute("select count(*) from research_serpquery where status = 'done'").fetchone()[0]
            password_hash = conn.execute("select password from auth_user where username = 'demo'").fetchone()[0]
            asked = conn.execute("select question, status, sources_answer from research_askedquestion").fetchall()
    assert done == 4
    assert asked == [(DEMO_QUESTION, "answered", True)]
    check_output(output, password_hash)
    check_report(tmp_path, documents)
