"""Offline research on the real stack: no model, no SearxNG; the extractive engine over the local collection.

daphne serves the collection's signed links; a worker process (on a private Redis, so no other test's worker
takes these tasks) searches the collection, fetches the documents from daphne like web pages, extracts their
sentences and writes the report.
"""

import hashlib
import html
import io
import json
import re
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis
from django.conf import settings
from django.core import signing
from django.core.management import call_command
from django.test import Client
from django.utils import timezone

from devtools.processes import ARTIFACTS, ROOT, wait_until
from devtools.servers import PLAIN_HTTP, DaphneServer, WorkerPool, celery_app_for, process_env
from research.collection.documents import rank_documents, signature
from research.control import dispatch
from research.models import (
    AnswerStatus,
    AskedQuestion,
    CollectionDocument,
    Document,
    Extract,
    FollowUpQuestion,
    Page,
    Research,
    ResearchStatus,
    Website,
    WebsiteStatus,
)
from research.record.usage import totals
from research.text.quotes import PageText, normalise
from tests.support.collection_files import write_mixed_folder
from tests.support.e2e import WORKER_ENV, settle, wait_finished
from tests.support.logins import login
from tests.support.private_services import PrivateRedis
from workers.clients.fetch import fetch_page
from workers.pipeline.ask import UNANSWERED
from workers.pipeline.citations import cited_urls
from workers.pipeline.followups import generate_followups

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

OFFLINE_ENV = {
    "RESEARCH_ENGINE": "extractive",
    "SEARCH_PROVIDERS": "local",
    "SEARXNG_URL": "",
    "OPENAI_BASE_URL": "",
    "OPENAI_API_KEY": "",
}
_DOCUMENT_ID = re.compile(r"/collection/(\d+)/$")
PAGE_TEXT = ROOT / "research" / "text" / "page_text.py"


def _page_text_digest() -> str:
    return hashlib.sha256(PAGE_TEXT.read_bytes()).hexdigest()


# Documents are indexed in this process and scraped in the worker, each with the page_text its process loaded: this
# one with the imports above, the worker's when it starts. The file must not change in between (a working tree
# edited while the tests run): two versions extract two texts from one page, and quotes miss one of them.
LOADED_PAGE_TEXT = _page_text_digest()


@dataclass
class OfflineStack:
    redis: PrivateRedis
    daphne: DaphneServer
    pool: WorkerPool

    def run(self, owner, prompt: str, breadth: int, depth: int, questions: int = 2) -> Research:
        """Ask the engine's questions, answer them, queue the research and wait for it to end."""
        research = Research.objects.create(
            owner=owner, prompt=prompt, title=prompt[:200], num_questions=questions, engine="extractive"
        )
        asked = generate_followups(research.pk)
        assert len(asked) == questions
        FollowUpQuestion.objects.filter(research=research).update(answer="Whatever the documents cover.")
        Research.objects.filter(pk=research.pk).update(
            status=ResearchStatus.QUEUED, breadth=breadth, depth=depth, claimed_at=timezone.now()
        )
        celery_app_for(self.redis.url).send_task("workers.tasks.start_research_task", args=[str(research.pk)])
        return wait_finished(str(research.pk), timeout=180)


@pytest.fixture(scope="module")
def offline_stack(django_db_setup, django_db_blocker) -> Iterator[OfflineStack]:
    private = PrivateRedis().start()
    base = {**WORKER_ENV, **OFFLINE_ENV, "REDIS_URL": private.url}
    with django_db_blocker.unblock():
        daphne = DaphneServer(process_env({**base, **PLAIN_HTTP, "DEBUG": "false"}), name="daphne-offline").start()
        host_port = f"127.0.0.1:{daphne.port}"
        env = process_env({**base, "APP_BASE_URL": daphne.url, "SCRAPE_ALLOWED_PRIVATE_HOSTS": host_port})
        pool = WorkerPool(env, count=1, concurrency=6, name="offline").start()
    if _page_text_digest() != LOADED_PAGE_TEXT:
        pool.stop()
        daphne.stop()
        private.stop()
        pytest.fail(f"{PAGE_TEXT} changed during the run: the worker and the tests would extract with different code")
    yield OfflineStack(private, daphne, pool)
    pool.stop()
    daphne.stop()
    private.stop()


@pytest.fixture
def offline(offline_stack: OfflineStack, transactional_db: None) -> Iterator[OfflineStack]:
    yield offline_stack
    settle(redis.Redis.from_url(offline_stack.redis.url))  # pushes done before the tables are flushed


def assert_report_rests_on_the_collection(research: Research, daphne_url: str) -> str:
    """Completed, every cited URL an analysed collection document, every quote in its document's text."""
    assert research.status == ResearchStatus.COMPLETED, research.error
    assert research.engine == "extractive"
    assert totals(research.pk)[:2] == (0, 0)
    websites = Website.objects.filter(research=research)
    assert websites.exists()
    assert {w.status for w in websites} == {WebsiteStatus.ANALYZED}, list(websites.values("url", "error"))
    analysed = set(websites.values_list("url", flat=True))
    assert all(url.startswith(f"{daphne_url}/collection/") and _DOCUMENT_ID.search(url) for url in analysed)

    report = Document.objects.get(research=research, kind="report")
    cited = set(cited_urls(report.markdown))
    assert cited and cited <= analysed
    assert report.stats["citations"] > 0
    assert report.stats["citations_dropped"] == 0 and report.stats["quotes_dropped"] == 0
    assert research.quotes_dropped == 0

    extracts = list(Extract.objects.filter(research=research).select_related("website__page"))
    assert extracts
    documents = CollectionDocument.objects.in_bulk([int(_DOCUMENT_ID.search(e.website.url).group(1)) for e in extracts])
    for extract in extracts:
        document = documents[int(_DOCUMENT_ID.search(extract.website.url).group(1))]
        assert PageText(extract.website.page.text).contains(extract.quote)
        assert normalise(extract.quote) in normalise(document.text), (document.path, extract.quote)
    return report.markdown


def assert_scraped_as_indexed(daphne: DaphneServer) -> None:
    """Every HTML document, fetched from daphne as the worker fetches it, reads as the text stored when indexed."""
    documents = list(CollectionDocument.objects.filter(content_type="text/html"))
    assert documents
    allowed = frozenset({f"127.0.0.1:{daphne.port}"})
    for document in documents:
        page = fetch_page(f"{daphne.url}/collection/{document.pk}/{signature(document.pk)}/", allowed_private=allowed)
        assert page.text == document.text, document.path


def test_offline_research_over_a_folder_of_mixed_files(offline, user, tmp_path: Path) -> None:
    # given a collection of HTML, Markdown, text and PDF files
    write_mixed_folder(tmp_path)
    call_command("index_documents", str(tmp_path), stdout=io.StringIO())
    # when a research runs with no model and no search engine
    research = offline.run(user, "How do heat pumps perform in cold climates?", breadth=2, depth=2)
    # then its report cites only those documents, with quotes found in them, from every kind of file
    markdown = assert_report_rests_on_the_collection(research, offline.daphne.url)
    cited_ids = {int(_DOCUMENT_ID.search(url).group(1)) for url in cited_urls(markdown)}
    cited_types = set(CollectionDocument.objects.filter(pk__in=cited_ids).values_list("content_type", flat=True))
    assert {"text/html", "text/markdown", "application/pdf"} <= cited_types
    assert "seasonal performance factor" in markdown


ALICE_NOTES = """# Alice's heat pump field notes

Alice's cold-climate heat pumps kept a coefficient of performance of 2.1 at minus 20 degrees Celsius in her trial.
Her air-source heat pumps ran a defrost cycle every ninety minutes in humid cold weather.
"""
MALLORY_NOTES = """# Mallory's confidential heat pump trial

Mallory's confidential trial measured a seasonal performance factor of 4.7 for cold-climate heat pumps.
The heat pumps in Mallory's trial kept heating at minus 30 degrees Celsius in cold climates.
"""


def test_a_research_cites_only_its_owners_and_shared_documents(offline, user, other_user, tmp_path: Path) -> None:
    # given a shared folder on heat pumps, and a private document of each user's on the same topic, uploaded
    # through daphne's API as each user
    write_mixed_folder(tmp_path)
    call_command("index_documents", str(tmp_path), stdout=io.StringIO())
    for username, name, text in (("alice", "alice.md", ALICE_NOTES), ("mallory", "mallory.md", MALLORY_NOTES)):
        session = login(offline.daphne.url, username)
        response = session.post(
            f"{offline.daphne.url}/api/documents/",
            files={"files": (name, text.encode())},
            headers={"X-CSRFToken": session.cookies["csrftoken"]},
            timeout=30,
        )
        assert response.status_code == 201, response.text
    alices = CollectionDocument.objects.get(owner=user)
    mallorys = CollectionDocument.objects.get(owner=other_user)
    prompt = "How do heat pumps perform in cold climates?"
    # mallory's document does match the request: her own research would find it
    assert mallorys.pk in rank_documents(prompt, 20, reader_id=other_user.pk)
    # when alice's research runs over the collection on the worker processes
    research = offline.run(user, prompt, breadth=2, depth=1)
    # then it rests on the collection, found and analysed alice's own document and shared ones, and never
    # searched, fetched or cited mallory's
    markdown = assert_report_rests_on_the_collection(research, offline.daphne.url)
    analysed = {
        int(_DOCUMENT_ID.search(url).group(1))
        for url in Website.objects.filter(research=research).values_list("url", flat=True)
    }
    cited = {int(_DOCUMENT_ID.search(url).group(1)) for url in cited_urls(markdown)}
    shared = set(CollectionDocument.objects.filter(owner__isnull=True).values_list("pk", flat=True))
    assert alices.pk in analysed
    assert mallorys.pk not in analysed and analysed <= shared | {alices.pk}
    assert cited <= shared | {alices.pk} and cited & shared
    assert "Mallory" not in markdown and "4.7" not in markdown
    assert not Page.objects.filter(research=research, url__endswith=f"/collection/{mallorys.pk}/").exists()
    # and the document's page answers mallory's citation link for her only
    assert login(offline.daphne.url, "alice").get(f"{offline.daphne.url}/collection/{mallorys.pk}/").status_code == 404
    assert (
        login(offline.daphne.url, "mallory").get(f"{offline.daphne.url}/collection/{mallorys.pk}/").status_code == 200
    )


def demo_collection(folder: Path):
    """The demo's collection, the standard library's documentation rendered by pydoc, indexed; its module."""
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import build_demo_collection as demo
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    demo.build(folder)
    call_command("index_documents", str(folder), "--replace", stdout=io.StringIO())
    return demo


def test_demo_collection_answers_the_demo_prompt(offline, user, tmp_path: Path, monkeypatch) -> None:
    # given the demo's collection: the standard library's documentation, rendered by pydoc
    demo = demo_collection(tmp_path)
    assert_scraped_as_indexed(offline.daphne)
    # when
    research = offline.run(user, demo.DEMO_PROMPT, breadth=3, depth=2)
    # then a sectioned report on threads, processes and asyncio, citing many of the documents
    markdown = assert_report_rests_on_the_collection(research, offline.daphne.url)
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / "offline-demo-report.md").write_text(markdown)
    headings = re.findall(r"^## (.+)$", markdown, re.MULTILINE)
    assert headings[:4] == ["Summary", "Threads", "Processes", "Asyncio"], headings
    assert len(set(cited_urls(markdown))) >= 8
    # and its sources bear on the request, so nothing says otherwise
    stats = Document.objects.get(research=research, kind="report").stats
    assert stats["relevance"]["verdict"] == "on_topic" and "do not cover this request" not in markdown
    assert_questions_are_answered_offline(offline, research, user, demo.DEMO_QUESTION, monkeypatch)
    assert_citations_open_an_hour_later(research, user, monkeypatch)


def test_an_off_topic_request_over_the_demo_collection_says_the_sources_do_not_cover_it(
    offline, user, tmp_path: Path
) -> None:
    # given the demo's collection (Python's documentation) and the start form's own example question
    demo_collection(tmp_path)
    prompt = (
        "How do air-source heat pumps perform below −20 °C? I know the basics of COP; I want measured field data "
        "and what limits efficiency."
    )
    # when it is researched offline
    research = offline.run(user, prompt, breadth=2, depth=1)
    # then the research completes, and its report says first that its sources do not cover the request
    assert research.status == ResearchStatus.COMPLETED, research.error
    document = Document.objects.get(research=research, kind="report")
    note = document.markdown.split("\n\n")[1]
    assert note.startswith("> **The sources found do not cover this request.**"), document.markdown[:600]
    assert document.stats["relevance"]["verdict"] == "off_topic"
    assert document.stats["relevance"]["judged_by"] == "words"
    assert not {"heat", "pump"} & set(document.stats["relevance"]["terms_found"])


def research_base_url(research: Research) -> str:
    url = Website.objects.filter(research=research).values_list("url", flat=True).first()
    return url.split("/collection/", 1)[0]


def assert_citations_open_an_hour_later(research: Research, user, monkeypatch: pytest.MonkeyPatch) -> None:
    """The report's sources are one per document, and each citation opens that document for its reader an hour
    after the research ended (when every link a worker was given has expired)."""
    # The web app and the workers share APP_BASE_URL, as in production: the workers here were given daphne's.
    monkeypatch.setattr(settings, "APP_BASE_URL", research_base_url(research))
    reader = Client()
    reader.force_login(user)
    html = reader.get(f"/api/research/{research.pk}/report.html").content.decode()
    sources = html.split(">Sources</h2>", 1)[1]
    source_links = re.findall(r'href="http://testserver/collection/(\d+)/"', sources)
    assert source_links and len(source_links) == len(set(source_links))
    # (each citation's link opens its document at the quote: ?quote=...&from=...#quote)
    cited = set(re.findall(r'href="(http://testserver/collection/\d+/)\?[^"]*#quote"', html))
    assert {int(_DOCUMENT_ID.search(url).group(1)) for url in cited} == {int(i) for i in source_links}
    an_hour_later = time.time() + settings.COLLECTION_LINK_MAX_AGE + 60
    monkeypatch.setattr(signing.time, "time", lambda: an_hour_later)
    documents = CollectionDocument.objects.in_bulk([int(i) for i in source_links])
    for url in sorted(cited):
        response = reader.get(url.removeprefix("http://testserver") + "?raw=1")
        assert response.status_code == 200, url
        document = documents[int(_DOCUMENT_ID.search(url).group(1))]
        assert response.content.decode() == (document.source or document.text)


# The start form's example question: nothing in Python's documentation answers it.
OFF_TOPIC_QUESTION = "How do air-source heat pumps perform below −20 °C, and what limits their efficiency?"
# A citation with the quote it rests on as its link title, and a sources-list entry's quotes.
_CITATION = re.compile(r'\[\[\d+\]\]\((\S+) "([^"]*)"\)')
_QUOTED = re.compile(r"“([^”]+)”")


def ask_offline(reader: Client, research: Research, question: str) -> AskedQuestion:
    """Ask through the API, as the page does; the offline stack's worker answers."""
    response = reader.post(
        f"/api/research/{research.pk}/ask", json.dumps({"question": question}), content_type="application/json"
    )
    assert response.status_code == 202, response.content
    question_id = response.json()["id"]
    done = (AnswerStatus.ANSWERED, AnswerStatus.FAILED)
    wait_until(lambda: AskedQuestion.objects.get(pk=question_id).status in done, timeout=60, message="the answer")
    return AskedQuestion.objects.get(pk=question_id)


def assert_questions_are_answered_offline(
    offline: OfflineStack, research: Research, user, question: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A question the collection answers gets an extractive answer resting on the research's analysed pages, with
    quotes verbatim on them; one about what it never mentions is told so, cites nothing and gets a query to dig
    deeper with. No model is called for either."""
    # This process publishes to the test run's broker; the offline stack's worker listens on its private Redis.
    app = celery_app_for(offline.redis.url)
    monkeypatch.setattr(dispatch, "queue", lambda name, *args, priority=None: app.send_task(name, args=list(args)))
    reader = Client()
    reader.force_login(user)
    analysed = set(
        Website.objects.filter(research=research, status=WebsiteStatus.ANALYZED).values_list("url", flat=True)
    )
    texts = {url: PageText(text) for url, text in Page.objects.filter(research=research).values_list("url", "text")}

    answered = ask_offline(reader, research, question)
    assert answered.status == AnswerStatus.ANSWERED and answered.sources_answer is True, answered.error
    assert not answered.answer.startswith(UNANSWERED)
    (ARTIFACTS / "offline-demo-answer.md").write_text(f"# {question}\n\n{answered.answer}")
    cited = cited_urls(answered.answer, analysed)
    assert cited and set(cited) <= analysed
    assert answered.stats["citations_dropped"] == 0 and answered.stats["quotes_dropped"] == 0
    # every citation's quote (its link title, long ones shortened) is on the page it cites
    citations = _CITATION.findall(answered.answer)
    assert citations
    for url, title in citations:
        for part in html.unescape(title).split(" … "):
            assert texts[url].contains(part.removesuffix("…")), (url, part)
    # and so is every quote the answer's sources list gives, whole
    sources = answered.answer.split("\nSources:\n", 1)[1].strip().splitlines()
    assert len(sources) == len(set(cited))
    for line in sources:
        url = cited_urls(line, analysed)[0]
        quotes = _QUOTED.findall(line)
        assert quotes, line
        for quote in quotes:
            quote = re.sub(r"\\(.)", r"\1", quote).replace("&lt;", "<").replace("&gt;", ">")
            assert texts[url].contains(quote), (url, quote)

    unanswered = ask_offline(reader, research, OFF_TOPIC_QUESTION)
    assert unanswered.status == AnswerStatus.ANSWERED and unanswered.sources_answer is False, unanswered.error
    assert unanswered.answer == UNANSWERED + "\n" and cited_urls(unanswered.answer) == []
    assert unanswered.suggested_query.strip()

    assert totals(research.pk)[:2] == (0, 0)
