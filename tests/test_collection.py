"""The local document collection: indexing a folder, full-text search, and the signed links workers fetch."""

import datetime
import html
import io
import re
import time
from pathlib import Path
from urllib.parse import urlencode

import pytest
import requests
import yaml
from django.core import signing
from django.core.management import call_command
from django.test import Client
from django.test.utils import override_settings

from research.collection import documents as collection
from research.collection.documents import TEXT_EXTRACTION
from research.models import (
    CollectionDocument,
    Page,
    PageStatus,
    QueryStatus,
    Research,
    SerpQuery,
    Website,
    WebsiteStatus,
)
from tests.support.collection_files import PDF_LINES, PDF_TITLE, make_pdf, write_mixed_folder
from tests.support.factories import running_research
from workers.clients import local_documents
from workers.clients import search as search_client
from workers.pipeline.scrape import scrape_website

pytestmark = pytest.mark.django_db


def index(folder: Path, *args: str) -> str:
    out = io.StringIO()
    call_command("index_documents", str(folder), *args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def by_name(name: str) -> CollectionDocument:
    return CollectionDocument.objects.get(path__endswith=f"/{name}")


def test_pdf_library_extracts_a_hand_made_pdf() -> None:
    from pypdf import PdfReader

    reader = PdfReader(io.BytesIO(make_pdf(PDF_LINES, PDF_TITLE)))
    assert reader.metadata.title == PDF_TITLE
    assert reader.pages[0].extract_text().split("\n")[:3] == PDF_LINES


def test_index_documents_reads_every_supported_type(tmp_path: Path) -> None:
    # given a folder of HTML, Markdown (nested), text, PDF and an image
    files = write_mixed_folder(tmp_path)
    # when
    summary = index(tmp_path)
    # then
    assert "4 added, 0 updated, 0 unchanged, 0 removed, 1 skipped (unsupported type), 0 failed" in summary
    html = by_name("heat-pumps.html")
    assert (html.title, html.content_type) == ("Heat pumps in cold climates", "text/html")
    assert "seasonal performance factors between 2.5 and 3.2" in " ".join(html.text.split())
    assert "Home | About" not in html.text and "alert" not in html.text  # navigation and scripts are not text
    assert html.source.startswith("<!DOCTYPE html>")
    markdown = by_name("defrost.md")
    assert (markdown.title, markdown.content_type) == ("Defrosting heat pumps", "text/markdown")
    assert markdown.path == str(files["markdown"].resolve())
    text = by_name("ground-source.txt")
    assert (text.title, text.content_type) == ("Notes on ground-source heat pumps", "text/plain")
    pdf = by_name("field-study.pdf")
    assert (pdf.title, pdf.content_type) == (PDF_TITLE, "application/pdf")
    assert all(line in pdf.text for line in PDF_LINES)
    assert pdf.search_vector is not None
    assert len(pdf.sha256) == 64 and pdf.size == files["pdf"].stat().st_size


def test_index_documents_again_is_a_no_op_and_follows_changes(tmp_path: Path) -> None:
    # given an indexed folder
    files = write_mixed_folder(tmp_path)
    index(tmp_path)
    stamps = dict(CollectionDocument.objects.values_list("path", "indexed_at"))
    # when nothing changed
    summary = index(tmp_path)
    # then nothing is written
    assert "0 added, 0 updated, 4 unchanged, 0 removed" in summary
    assert dict(CollectionDocument.objects.values_list("path", "indexed_at")) == stamps
    # when one file changes and one is deleted
    files["text"].write_text("Notes\n\nBorehole heat pumps need a drilling permit in most municipalities.\n")
    files["pdf"].unlink()
    summary = index(tmp_path)
    # then
    assert "0 added, 1 updated, 2 unchanged, 1 removed" in summary
    assert "drilling permit" in by_name("ground-source.txt").text
    assert not CollectionDocument.objects.filter(path__endswith="field-study.pdf").exists()


def test_documents_indexed_by_an_older_text_extraction_are_indexed_again(tmp_path: Path) -> None:
    # given a folder indexed with an earlier text extraction, whose stored text differs from today's
    write_mixed_folder(tmp_path)
    index(tmp_path)
    CollectionDocument.objects.update(extraction=TEXT_EXTRACTION - 1, text="text of the old extraction")
    # when it is indexed again, its files unchanged
    summary = index(tmp_path)
    # then every document is read again with the extraction the workers scrape with
    assert "0 added, 4 updated, 0 unchanged, 0 removed" in summary
    assert set(CollectionDocument.objects.values_list("extraction", flat=True)) == {TEXT_EXTRACTION}
    assert not CollectionDocument.objects.filter(text="text of the old extraction").exists()


def test_index_documents_replace_drops_other_folders(tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    write_mixed_folder(first)
    (second / "only.md").parent.mkdir()
    (second / "only.md").write_text("# Only\n\nThe one document of the second folder is about borehole drilling.\n")
    index(first)
    assert "1 added, 0 updated, 0 unchanged, 0 removed" in index(second)
    assert CollectionDocument.objects.count() == 5
    assert "0 added, 0 updated, 1 unchanged, 4 removed" in index(second, "--replace")
    assert list(CollectionDocument.objects.values_list("title", flat=True)) == ["Only"]


def test_index_documents_reports_unreadable_files(tmp_path: Path) -> None:
    (tmp_path / "broken.pdf").write_bytes(b"%PDF-1.4 this is not really a pdf")
    (tmp_path / "empty.md").write_text("   \n")
    (tmp_path / "good.txt").write_text("A good file about heat pumps in cold climates.\n")
    errors = io.StringIO()
    call_command("index_documents", str(tmp_path), stdout=io.StringIO(), stderr=errors)
    assert CollectionDocument.objects.count() == 1
    assert "broken.pdf" in errors.getvalue() and "empty.md: no text in it" in errors.getvalue()


# The collection's documents here are shared (indexed without an owner): any user's research may find them, even
# one of a user with no documents of their own.
ANY_READER = 0


@pytest.fixture
def heat_pump_collection(tmp_path: Path) -> dict[str, Path]:
    files = write_mixed_folder(tmp_path)
    index(tmp_path)
    return files


def test_search_ranks_the_best_document_first(heat_pump_collection) -> None:
    with override_settings(APP_BASE_URL="http://app.test:8000/"):
        defrost = local_documents.search("defrost cycle ice on the outdoor coil", 7, ANY_READER)
        boreholes = local_documents.search("boreholes ground temperature", 2, ANY_READER)
        nothing = local_documents.search("quantum chromodynamics", 7, ANY_READER)
        stopwords = local_documents.search("what is the", 7, ANY_READER)
    assert [r.title for r in defrost][0] == "Defrosting heat pumps"
    assert "defrost" in defrost[0].snippet.lower()
    assert [r.title for r in boreholes][0] == "Notes on ground-source heat pumps"
    assert len(boreholes) <= 2
    assert nothing == [] and stopwords == []
    document = by_name("defrost.md")
    # each result is its document's stable URL: the same whichever query finds it, so one source per document
    assert defrost[0].url == f"http://app.test:8000/collection/{document.pk}/"
    assert len({r.url for r in defrost}) == len(defrost)
    with override_settings(APP_BASE_URL="http://app.test:8000/"):
        again = local_documents.search("defrosting heat pumps", 7, ANY_READER)
    assert defrost[0].url in {r.url for r in again}


def test_search_mixes_in_documents_with_the_web(heat_pump_collection, monkeypatch) -> None:
    from workers.clients import searxng
    from workers.clients.searxng import SearchResult

    web = [SearchResult(f"http://web.test/{i}", f"web {i}", "") for i in range(7)]
    monkeypatch.setattr(searxng, "search", lambda query, limit: web[:limit])
    with override_settings(SEARCH_PROVIDERS=["searxng", "local"], SEARCH_RESULTS_PER_QUERY=7):
        results = search_client.search("heat pumps cold climates", ANY_READER)
    assert len(results) == 7
    assert results[0].url == web[0].url and "/collection/" in results[1].url
    assert sum("/collection/" in r.url for r in results) == 3  # the collection has 4 documents; 7 places


def test_view_serves_documents_by_signed_link_without_login(heat_pump_collection) -> None:
    anonymous = Client()
    html, markdown, pdf = by_name("heat-pumps.html"), by_name("defrost.md"), by_name("field-study.pdf")

    def get(document: CollectionDocument, signature: str | None = None):
        return anonymous.get(f"/collection/{document.pk}/{signature or collection.signature(document.pk)}/")

    response = get(html)
    assert response.status_code == 200 and response["Content-Type"] == "text/html; charset=utf-8"
    assert response.content.decode() == html.source
    assert response["Content-Security-Policy"].startswith("sandbox")  # the user's markup runs no script here
    response = get(markdown)
    assert response["Content-Type"] == "text/plain; charset=utf-8" and response.content.decode() == markdown.text
    response = get(pdf)
    assert response["Content-Type"] == "text/plain; charset=utf-8" and PDF_LINES[1] in response.content.decode()
    # a bad, foreign or missing signature, or a missing document, is a 404
    assert get(markdown, "not-the-signature").status_code == 404
    assert get(markdown, collection.signature(html.pk)).status_code == 404
    assert anonymous.get(f"/collection/{markdown.pk}//").status_code == 404
    assert get(CollectionDocument(pk=99999)).status_code == 404
    assert anonymous.post(f"/collection/{markdown.pk}/{collection.signature(markdown.pk)}/").status_code in (403, 405)


def test_a_documents_stable_url_opens_for_a_signed_in_reader_at_any_time(
    heat_pump_collection, user, settings, monkeypatch
) -> None:
    # given a document's stable URL, the one a report cites
    document = by_name("defrost.md")
    stable = collection.document_url(document.pk)
    path = stable.removeprefix(settings.APP_BASE_URL)
    assert path == f"/collection/{document.pk}/"
    # then a visitor who is not signed in is sent to the login page
    response = Client().get(path)
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")
    # and a signed-in reader gets the document, now and two hours later (the signed links of that time expired):
    # inside the app, and as the file's own text
    reader = Client()
    reader.force_login(user)
    assert reader.get(path + "?raw=1").content.decode() == document.text
    page = reader.get(path).content.decode()
    assert html.escape(document.title) in page and html.escape(document.text.splitlines()[-1]) in page
    later = time.time() + 2 * 3600
    monkeypatch.setattr(signing.time, "time", lambda: later)
    assert Client().get(collection.signed_url(document.pk).removeprefix(settings.APP_BASE_URL)).status_code == 200
    expired = signed_ago(document.pk, 2 * 3600 + 3600, monkeypatch)
    assert Client().get(expired.removeprefix(settings.APP_BASE_URL)).status_code == 404
    assert reader.get(path + "?raw=1").content.decode() == document.text
    assert reader.get("/collection/99999/").status_code == 404
    # and a worker fetches the stable URL through a freshly signed link
    assert collection.fetch_link(stable).startswith(stable) and collection.fetch_link(stable) != stable


def test_a_cited_document_marks_the_quote_and_links_back_to_its_research(
    heat_pump_collection, user, other_user
) -> None:
    # given a document a report cites, and the research that cites it
    document = by_name("defrost.md")
    research = Research.objects.create(owner=user, prompt="p", title="Defrost losses in Nordic winters")
    sentence = next(line for line in document.text.splitlines() if len(line.split()) > 8)
    quote = " ".join(sentence.split()[1:-1])  # a quote need not start or end where the line does
    reader = Client()
    reader.force_login(user)
    # when its citation is followed
    query = urlencode({"quote": quote, "from": str(research.pk)})
    page = reader.get(f"/collection/{document.pk}/?{query}").content.decode()
    # then the quoted passage is marked, to be scrolled to (#quote), with the way back to the research
    marked = re.search(r'<mark id="quote" tabindex="-1">(.*?)</mark>', page, re.DOTALL)
    assert marked and html.unescape(marked.group(1)).split() == quote.split()
    assert f'href="/research/{research.pk}/"' in page and "Back to the research" in page
    assert "file:" not in page and document.path not in page  # no path of the server's
    # and a quote the text no longer holds says so, and another user's research is no way back
    stranger = Research.objects.create(owner=other_user, prompt="p", title="Mallory's")
    query = urlencode({"quote": "Nothing of the kind is written here at all", "from": str(stranger.pk)})
    page = reader.get(f"/collection/{document.pk}/?{query}").content.decode()
    assert "<mark" not in page and "not in this document" in page
    assert str(stranger.pk) not in page and "Back to the research" not in page


def test_public_links_show_stable_and_old_signed_links_at_the_readers_address(heat_pump_collection, settings) -> None:
    # given a report citing one document by its stable URL and by two links signed at different times (research
    # stored before stable URLs), a forged link and a foreign page
    settings.APP_BASE_URL = "http://web:8000"
    document = by_name("defrost.md")
    signed = collection.signed_url(document.pk)
    forged = f"http://web:8000/collection/{document.pk}/{collection.signature(document.pk + 1)}/"
    markdown = (
        f"A [1]({collection.document_url(document.pk)}) B [2]({signed}) C <{signed}> D [3]({forged}) "
        "E [4](https://example.com/collection/1/)"
    )
    # when they are written for a reader who reached the app at https://research.example.org/
    public = collection.public_links(markdown, "https://research.example.org/")
    # then every link this app made is the stable URL there; the others are left as they are
    stable = f"https://research.example.org/collection/{document.pk}/"
    assert public == (
        f"A [1]({stable}) B [2]({stable}) C <{stable}> D [3]({forged}) E [4](https://example.com/collection/1/)"
    )


def test_workers_in_compose_reach_documents_over_plain_http(heat_pump_collection, settings) -> None:
    # given production's HTTPS settings and compose's hosts: workers fetch http://web:8000/collection/...
    compose = yaml.safe_load((Path(__file__).resolve().parent.parent / "docker-compose.yml").read_text())
    app_env = compose["services"]["worker"]["environment"]
    assert app_env["APP_BASE_URL"] == "http://web:8000" and app_env["ALLOWED_HOSTS"].endswith(",web")
    settings.SECURE_SSL_REDIRECT = True
    settings.ALLOWED_HOSTS = ["localhost", "web"]
    document = by_name("defrost.md")
    # when a worker asks for a signed document link
    response = Client().get(f"/collection/{document.pk}/{collection.signature(document.pk)}/", HTTP_HOST="web:8000")
    # then it is served, not redirected to an HTTPS the internal network does not have; pages still are redirected
    assert response.status_code == 200
    assert Client().get("/accounts/login/", HTTP_HOST="web:8000").status_code == 301


def signed_ago(document_id: int, seconds: float, monkeypatch: pytest.MonkeyPatch) -> str:
    """The document's link as it was signed `seconds` ago."""
    now = time.time()
    with monkeypatch.context() as past:
        past.setattr(signing.time, "time", lambda: now - seconds)
        return collection.signed_url(document_id)


def test_view_refuses_links_older_than_their_max_age(heat_pump_collection, settings, monkeypatch) -> None:
    # given links to one document signed just now, 59 minutes ago and 61 minutes ago (max age: an hour)
    settings.COLLECTION_LINK_MAX_AGE = 3600
    document = by_name("defrost.md")
    fresh, recent, expired = (signed_ago(document.pk, age, monkeypatch) for age in (0, 59 * 60, 61 * 60))
    assert len({fresh, recent, expired}) == 3  # each carries the time it was signed
    # then only the expired one is refused, as a bad signature is
    path = lambda url: url.removeprefix(settings.APP_BASE_URL)  # noqa: E731
    assert Client().get(path(fresh)).status_code == 200
    assert Client().get(path(recent)).status_code == 200
    assert Client().get(path(expired)).status_code == 404
    # and renewing it gives a link that works (for the same document), while foreign URLs stay as they are
    renewed = collection.fetch_link(expired)
    assert renewed.startswith(f"{settings.APP_BASE_URL}/collection/{document.pk}/") and renewed != expired
    assert Client().get(path(renewed)).status_code == 200
    forged = f"{settings.APP_BASE_URL}/collection/{document.pk}/{collection.signature(document.pk + 1)}/"
    for url in (forged, "https://example.com/collection/1/x/", expired.replace("/collection/", "/admin/")):
        assert collection.fetch_link(url) == url


@pytest.mark.django_db(transaction=True)
def test_scrape_reads_a_stored_link_that_expired(
    heat_pump_collection, live_server, settings, user, published, monkeypatch
) -> None:
    # given the web app on a live server, and a research whose search stored a collection link two hours ago
    settings.APP_BASE_URL = live_server.url
    settings.SCRAPE_ALLOWED_PRIVATE_HOSTS = frozenset({live_server.url.removeprefix("http://") + "/collection/"})
    document = by_name("defrost.md")
    stored = signed_ago(document.pk, 2 * 3600, monkeypatch)
    assert requests.get(stored, timeout=10).status_code == 404  # expired for anyone who holds it
    # an archived document: its page carries its date and standing to the writer
    CollectionDocument.objects.filter(pk=document.pk).update(standing="archived", dated=datetime.date(2024, 12, 31))
    research = running_research(user, 1, 1)
    query = SerpQuery.objects.create(
        research=research, depth=1, position=0, query="defrost", objective="o", status=QueryStatus.SCRAPING
    )
    website = Website.objects.create(research=research, query=query, position=0, url=stored)
    # when the scrape step runs
    scrape_website(website.pk)
    # then it read the document through a fresh link, and the page keeps the stored URL as its identity
    page = Page.objects.get(research=research)
    assert page.status == PageStatus.FETCHED, (page.failure_reason, page.error)
    assert (page.url, page.final_url) == (stored, stored)
    assert "defrost cycle" in page.text.lower()
    assert (page.dated, page.standing) == (datetime.date(2024, 12, 31), "archived")
    website.refresh_from_db()
    assert website.status == WebsiteStatus.ANALYZING and website.url == stored
    assert published == ["workers.tasks.analyze_website_task"]


def test_a_web_pages_date_comes_from_its_address_or_opening_and_it_stays_current() -> None:
    assert collection.page_standing("https://news.test/2024/05/plant", "Plant", "It opened.") == (
        datetime.date(2024, 12, 31),
        "current",
    )
    assert collection.page_standing("https://news.test/plant", "Plant", "Archived on 3 May 2025.") == (
        datetime.date(2025, 5, 3),
        "current",
    )


@pytest.mark.django_db
def test_search_weighs_words_by_their_rarity_in_the_collection(tmp_path: Path) -> None:
    # given long reports that name the company in every line, and a short file holding the one asked figure
    report = "Acme Oy reports its revenue, margin, employees and plants. " * 40
    for year in (2023, 2024, 2025):
        (tmp_path / f"report-{year}.md").write_text(f"# Acme Oy report {year}\n\n{report}\n")
    (tmp_path / "board.md").write_text("# Board update\n\nThe Acme order backlog was EUR 27 million at year end.\n")
    index(tmp_path)
    # when a query names several aspects and the company
    found = collection.rank_documents("Acme Oy revenue order backlog Acme", 4, reader_id=ANY_READER)
    titles = list(CollectionDocument.objects.filter(pk__in=found).values_list("pk", "title"))
    by_pk = dict(titles)
    # then the short file holding the rare word comes first: the company's name, in every file, says nothing
    assert by_pk[found[0]] == "Board update"
    # and a query of common words only still finds the documents
    assert len(collection.rank_documents("Acme", 4, reader_id=ANY_READER)) == 4
