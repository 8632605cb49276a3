"""The page fetcher against real loopback servers: extraction, failures, size and time limits, SSRF guard."""

from __future__ import annotations

import gzip
import ipaddress
import pickle
import random
import socket
import threading
import time
import tracemalloc
from collections.abc import Callable, Iterator
from datetime import date
from functools import partial
from typing import Any

import pytest

from devtools.fakes import Canary, FakeWeb
from devtools.fakes.web import gzip_bomb
from research.text.page_text import decode_body, extract_page, extract_text
from tests.support.collection_files import PDF_LINES, PDF_TITLE, make_pdf
from workers.clients import netguard
from workers.clients.fetch import FetchedPage, FetchError, fetch_page
from workers.clients.netguard import endpoint_key, is_public_address, normalize_allowed

MB = 1 << 20

Fetch = Callable[..., FetchedPage]


@pytest.fixture(scope="module")
def web() -> Iterator[FakeWeb]:
    with FakeWeb() as server:
        yield server


@pytest.fixture(scope="module")
def canary() -> Iterator[Canary]:
    with Canary() as listener:
        yield listener


@pytest.fixture
def fetch(web: FakeWeb) -> Fetch:
    """fetch_page with only the FakeWeb endpoint allowed (it lives on loopback), short limits."""
    return partial(fetch_page, allowed_private=frozenset({web.host_port}), deadline=5.0, read_timeout=3.0)


def fetch_error(fetch: Fetch, url: str, **kwargs: Any) -> FetchError:
    with pytest.raises(FetchError) as info:
        fetch(url, **kwargs)
    return info.value


def peak_memory(action: Callable[[], object]) -> int:
    """Peak bytes allocated by Python (all threads) while `action` runs."""
    tracemalloc.start()
    try:
        action()
    except FetchError:
        pass
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return peak


# --- extraction ---------------------------------------------------------------------------------------------


def test_fetch_page_extracts_article_text(web: FakeWeb, fetch: Fetch) -> None:
    # when
    page = fetch(web.page_url("solid-state-batteries"))

    # then
    assert page.status_code == 200
    assert page.content_type == "text/html"
    assert page.title == "Solid State Batteries"
    assert page.final_url == page.url == web.page_url("solid-state-batteries")
    for sentence in web.page_text_sentences("solid-state-batteries"):
        assert sentence in page.text
    for junk in (web.HIDDEN_MARKER, web.SCRIPT_MARKER, "Copyright 2024", "Contact", "newsroom", "color: red"):
        assert junk not in page.text
    assert "\n\n" in page.text  # paragraphs stay apart
    assert page.bytes_read == len(web.page_html("solid-state-batteries").encode())


def test_fetch_page_reads_the_date_an_html_page_gives_itself(web: FakeWeb, fetch: Fetch) -> None:
    # given an article whose metadata says when it was published and updated, one whose address is dated, and one
    # that names no date (its text only a bare URL: htmldate reads the parsed page, and never fetches a URL)
    paragraph = "<p>Heat pumps kept a seasonal performance factor of 3.1 in the Nordic trial of the year.</p>"
    dated = web.add_page(
        "/news/heat-pumps",
        "<html><head><title>Trial</title>"
        '<meta property="article:published_time" content="2025-03-04T10:00:00Z">'
        '<meta property="article:modified_time" content="2025-06-30T08:00:00Z">'
        f"</head><body><article>{paragraph}</article></body></html>",
    )
    in_address = web.add_page("/2024/05/17/trial", f"<html><body><article>{paragraph}</article></body></html>")
    undated = web.add_page(
        "/undated", f"<html><body><article>{paragraph}<p>https://192.0.2.1/calendar</p></article></body></html>"
    )
    # then the newest date it gives is the page's, then its address's, and none is invented
    assert fetch(dated).published == date(2025, 6, 30)
    assert fetch(in_address).published == date(2024, 5, 17)
    assert fetch(undated).published is None
    # and a page that is not HTML has none from here (its date comes from its address or opening)
    plain = web.add_page("/notes.txt", "Field notes of 2023-02-01\n\nLine two", content_type="text/plain")
    assert fetch(plain).published is None


def test_fetch_page_keeps_hostile_markup_as_literal_text(web: FakeWeb, fetch: Fetch) -> None:
    page = fetch(web.url + "/hostile")

    assert "Type <script>alert(1)</script> into the search box" in page.text
    assert "javascript:" not in page.text
    assert "onerror" not in page.text
    assert web.INJECTION in page.text  # it is page data; the analyser treats it as such


def test_fetch_page_plain_text_and_markdown_pass_through(web: FakeWeb, fetch: Fetch) -> None:
    plain = web.add_page("/notes.txt", "Field notes\r\n\r\n\r\n\r\nLine two  \n", content_type="text/plain")
    markdown = web.add_page("/readme.md", "Intro\n\n# The Title\n\n* item <b>x</b>\n", content_type="text/markdown")

    assert (fetch(plain).title, fetch(plain).text) == ("Field notes", "Field notes\n\nLine two")
    page = fetch(markdown)
    assert page.title == "The Title"
    assert page.text == "Intro\n\n# The Title\n\n* item <b>x</b>"
    assert page.content_type == "text/markdown"


def test_fetch_page_decodes_http_and_meta_charsets(web: FakeWeb, fetch: Fetch) -> None:
    body = "<html><head><title>Café</title></head><body><p>Crème brûlée à la française</p></body></html>"
    http = web.add_page("/latin1", body.encode("latin-1"), content_type="text/html; charset=ISO-8859-1")
    meta_body = body.replace("<head>", '<head><meta charset="windows-1252">').encode("cp1252")
    meta = web.add_page("/meta-charset", meta_body, content_type="text/html")

    assert fetch(http).text == "Crème brûlée à la française"
    assert fetch(meta).title == "Café"
    assert fetch(meta).text == "Crème brûlée à la française"


def test_fetch_page_decodes_gzip_bodies(web: FakeWeb, fetch: Fetch) -> None:
    html = web.page_html("compressed").encode()
    url = web.add_page("/gzipped", gzip.compress(html), headers={"Content-Encoding": "gzip"})

    page = fetch(url)

    assert page.title == "Compressed"
    assert page.bytes_read == len(html)  # counted after decompression


@pytest.mark.parametrize(
    ("path", "body", "headers", "reason"),
    [
        ("/only-script", "<html><body><script>var x = 1;</script><nav>Home</nav></body></html>", {}, "empty"),
        ("/random-bytes", random.Random(1).randbytes(20_000), {}, "decode"),
        ("/bad-gzip", b"\x1f\x8b\x08\x00not really gzip at all", {"Content-Encoding": "gzip"}, "decode"),
        ("/brotli", b"<p>x</p>", {"Content-Encoding": "compress"}, "decode"),
    ],
)
def test_fetch_page_refuses_pages_without_text(
    web: FakeWeb, fetch: Fetch, path: str, body: str | bytes, headers: dict[str, str], reason: str
) -> None:
    url = web.add_page(path, body, headers=headers)

    assert fetch_error(fetch, url).reason == reason


# --- HTTP failures, types, redirects ------------------------------------------------------------------------


@pytest.mark.parametrize("code", [404, 403, 500, 503, 429])
def test_fetch_page_http_error_keeps_status(web: FakeWeb, fetch: Fetch, code: int) -> None:
    error = fetch_error(fetch, f"{web.url}/status/{code}")

    assert (error.reason, error.status_code) == ("http_error", code)


@pytest.mark.parametrize("path", ["/binary", "/image.png", "/no-content-type"])
def test_fetch_page_refuses_non_text_content_types(web: FakeWeb, fetch: Fetch, path: str) -> None:
    assert fetch_error(fetch, web.url + path).reason == "content_type"


# --- PDFs -----------------------------------------------------------------------------------------------------


def test_fetch_page_reads_a_pdf(web: FakeWeb, fetch: Fetch) -> None:
    # given a PDF made here, with a title in its metadata, and a three-page one from the fake web
    made = web.add_page("/field-study.pdf", make_pdf(PDF_LINES, PDF_TITLE), content_type="application/pdf")

    page = fetch(made)
    pages = fetch(web.url + "/pdf?pages=3")

    assert (page.content_type, page.title) == ("application/pdf", PDF_TITLE)
    assert page.text.splitlines()[:3] == PDF_LINES
    assert page.bytes_read == len(make_pdf(PDF_LINES, PDF_TITLE))
    assert pages.title == "Page 1: solid state batteries hold their charge for years."
    assert pages.text.split("\n\n") == [
        f"Page {n}: solid state batteries hold their charge for years." for n in (1, 2, 3)
    ]


def test_fetch_page_refuses_pdfs_past_the_page_or_byte_limit(web: FakeWeb, fetch: Fetch) -> None:
    many = fetch_error(fetch, web.url + "/pdf?pages=6", max_pdf_pages=5)
    large = fetch_error(fetch, web.url + "/pdf?pages=3", max_bytes=1000)

    assert (many.reason, many.message) == ("too_many_pages", "the PDF has 6 pages, over the limit of 5")
    assert large.reason == "too_large"
    assert fetch(web.url + "/pdf?pages=5", max_pdf_pages=5).text.count("Page ") == 5


def test_fetch_page_refuses_a_pdf_bomb_in_bounded_memory(web: FakeWeb, fetch: Fetch) -> None:
    # given a PDF of 460 KB whose 40 pages of streams inflate to 400 MB, each page under pypdf's own limits
    errors: list[FetchError] = []

    def run() -> None:
        errors.append(fetch_error(fetch, web.url + "/pdf-bomb?mb=400", max_bytes=5 * MB))

    # when
    peak = peak_memory(run)

    # then its streams were cut off at four times the byte cap in all (20 MB; read whole, the peak is over 400 MB)
    assert errors[0].reason == "too_large" and "decoding budget" in errors[0].message
    assert peak < 64 * MB


def test_fetch_page_corrupt_pdf_is_a_decode_failure(web: FakeWeb, fetch: Fetch) -> None:
    url = web.add_page("/broken.pdf", b"%PDF-1.4 this is not really a pdf", content_type="application/pdf")

    assert fetch_error(fetch, url).reason == "decode"


def test_fetch_page_follows_redirect_chain(web: FakeWeb, fetch: Fetch) -> None:
    page = fetch(web.url + "/redirect-chain?n=3")

    assert page.final_url == web.url + "/redirect-chain?n=0"
    assert page.title == "Redirect Chain End"


@pytest.mark.parametrize(
    ("path", "max_redirects"),
    [("/redirect-loop", 5), ("/redirect-cycle/a", 5), ("/redirect-chain?n=6", 5), ("/redirect-chain?n=1", 0)],
)
def test_fetch_page_stops_redirect_loops(web: FakeWeb, fetch: Fetch, path: str, max_redirects: int) -> None:
    error = fetch_error(fetch, web.url + path, max_redirects=max_redirects)

    assert error.reason == "too_many_redirects"


# --- time and size limits -----------------------------------------------------------------------------------


def test_fetch_page_slow_headers_hit_the_deadline(web: FakeWeb, fetch: Fetch) -> None:
    started = time.monotonic()

    error = fetch_error(fetch, web.url + "/slow?seconds=5", deadline=0.5)

    assert error.reason == "timeout"
    assert time.monotonic() - started < 1.5


def test_fetch_page_read_timeout(web: FakeWeb, fetch: Fetch) -> None:
    started = time.monotonic()

    assert fetch_error(fetch, web.url + "/slow?seconds=5", read_timeout=0.3).reason == "timeout"
    assert time.monotonic() - started < 1.5


def test_fetch_page_slow_drip_hits_the_deadline(web: FakeWeb, fetch: Fetch) -> None:
    # given a body that sends a chunk every second, so no single read ever times out
    started = time.monotonic()

    # when
    error = fetch_error(fetch, web.url + "/drip?seconds=10", deadline=1.5, read_timeout=3.0)

    # then the wall-clock deadline ends it, not the per-read timeout
    assert error.reason == "timeout"
    assert 1.4 < time.monotonic() - started < 2.5


def test_fetch_page_refuses_declared_oversize_body_unread(web: FakeWeb, fetch: Fetch) -> None:
    started = time.monotonic()

    error = fetch_error(fetch, web.url + "/huge?mb=50&length=1", max_bytes=MB)

    assert error.reason == "too_large"
    assert time.monotonic() - started < 1.0


def test_fetch_page_stops_reading_at_the_cap(web: FakeWeb, fetch: Fetch) -> None:
    errors: list[FetchError] = []

    def run() -> None:
        errors.append(fetch_error(fetch, web.url + "/huge?mb=20", max_bytes=MB))

    peak = peak_memory(run)

    assert errors[0].reason == "too_large"
    assert peak < 3 * MB


@pytest.mark.parametrize(("inflated_mb", "cap"), [(64, MB), (1024, 2 * MB)])
def test_fetch_page_gzip_bomb_never_inflates_past_the_cap(
    web: FakeWeb, fetch: Fetch, inflated_mb: int, cap: int
) -> None:
    # given a bomb (built before measuring, it is the server's memory) whose compressed size is under the cap
    assert len(gzip_bomb(inflated_mb)) < cap
    errors: list[FetchError] = []

    def run() -> None:
        errors.append(fetch_error(fetch, f"{web.url}/gzip-bomb?mb={inflated_mb}", max_bytes=cap))

    # when
    started = time.monotonic()
    peak = peak_memory(run)

    # then
    assert errors[0].reason == "too_large"
    assert peak < cap + 2 * MB
    assert time.monotonic() - started < 3.0


# --- SSRF guard ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("template", "reason"),
    [
        ("http://127.0.0.1:{port}/", "blocked_address"),
        ("http://localhost:{port}/", "blocked_address"),
        ("http://10.0.0.1/", "blocked_address"),
        ("http://192.168.1.1:{port}/", "blocked_address"),
        ("http://169.254.169.254/latest/meta-data/", "blocked_address"),
        ("http://100.64.0.1/", "blocked_address"),
        ("http://0.0.0.0:{port}/", "blocked_address"),
        ("http://2130706433:{port}/", "blocked_address"),
        ("http://0x7f000001:{port}/", "blocked_address"),
        ("http://017700000001:{port}/", "blocked_address"),
        ("http://127.1:{port}/", "blocked_address"),
        ("http://[::ffff:127.0.0.1]:{port}/", "blocked_address"),
        ("http://[::127.0.0.1]:{port}/", "blocked_address"),
        ("http://[::1]:{port}/", "blocked_address"),
        ("http://[fe80::1]:{port}/", "blocked_address"),
        ("file:///etc/passwd", "bad_scheme"),
        ("gopher://127.0.0.1:{port}/_GET%20/", "bad_scheme"),
        ("ftp://127.0.0.1:{port}/", "bad_scheme"),
        ("data:text/html,<p>hi</p>", "bad_scheme"),
        ("http://user:secret@127.0.0.1:{port}/", "bad_url"),
        ("http:///nohost", "bad_url"),
    ],
)
def test_fetch_page_blocks_private_targets_without_connecting(
    web: FakeWeb, canary: Canary, fetch: Fetch, template: str, reason: str
) -> None:
    canary.reset()

    error = fetch_error(fetch, template.format(port=canary.port))

    assert error.reason == reason
    assert canary.hits == 0


@pytest.mark.parametrize(
    "target",
    ["http://127.0.0.1:{port}/", "http://localhost:{port}/", "http://[::1]:{port}/", "file:///etc/passwd"],
)
def test_fetch_page_checks_every_redirect_hop(web: FakeWeb, canary: Canary, fetch: Fetch, target: str) -> None:
    # given FakeWeb is allowed but the canary, on the same loopback host, is not
    canary.reset()

    # when FakeWeb redirects to it
    error = fetch_error(fetch, f"{web.url}/redirect?to={target.format(port=canary.port)}")

    # then
    assert error.reason in ("blocked_address", "bad_scheme")
    assert canary.hits == 0


def test_fetch_page_allow_list_matches_the_literal_endpoint(web: FakeWeb, canary: Canary) -> None:
    path = "/page/allow-list"
    by_name = f"http://localhost:{web.port}{path}"
    canary.reset()

    # 127.0.0.1:<port> does not allow another spelling of it, nor another port on it
    assert fetch_error(fetch_page, by_name, allowed_private=frozenset({web.host_port})).reason == "blocked_address"
    error = fetch_error(fetch_page, canary.url, allowed_private=frozenset({web.host_port}))
    assert error.reason == "blocked_address"
    assert canary.hits == 0
    # the name itself can be allowed
    assert fetch_page(by_name, allowed_private=frozenset({f"LOCALHOST:{web.port}"})).title == "Allow List"


@pytest.fixture(scope="module")
def app() -> Iterator[FakeWeb]:
    """A private service allowed only under /collection/ and only as the first URL, as compose lists web:8000."""
    with FakeWeb() as server:
        yield server


@pytest.fixture
def fetch_scoped(web: FakeWeb, app: FakeWeb) -> Fetch:
    """fetch_page allowing FakeWeb whole and the app under /collection/ only."""
    app.reset()
    allowed = frozenset({web.host_port, f"{app.host_port}/collection/"})
    return partial(fetch_page, allowed_private=allowed, deadline=5.0, read_timeout=3.0)


def test_fetch_page_path_scoped_endpoint_serves_its_path_to_the_first_url(app: FakeWeb, fetch_scoped: Fetch) -> None:
    url = app.add_page("/collection/1/signed/", "<title>Defrost</title><p>A defrost cycle melts the ice.</p>")

    page = fetch_scoped(url)

    assert (page.title, page.text) == ("Defrost", "A defrost cycle melts the ice.")


@pytest.mark.parametrize(
    "path",
    ["/admin/", "/page/x", "/collection", "/collectionx/1/", "/collection/../admin/", "/collection/%2e%2e/admin/"],
)
def test_fetch_page_path_scoped_endpoint_refuses_other_paths(app: FakeWeb, fetch_scoped: Fetch, path: str) -> None:
    error = fetch_error(fetch_scoped, app.url + path)

    assert error.reason == "blocked_address" and "/collection/" in error.message
    assert app.count() == 0


def test_fetch_page_path_scoped_endpoint_is_never_a_redirect_target(
    web: FakeWeb, app: FakeWeb, canary: Canary, fetch_scoped: Fetch
) -> None:
    canary.reset()
    document = app.add_page("/collection/1/signed/", "<title>Defrost</title><p>A defrost cycle.</p>")
    # given the app redirecting from its collection path to another private address, and to itself
    to_canary = app.add_page("/collection/2/signed/", "", status=302, headers={"Location": canary.url})
    to_itself = app.add_page("/collection/3/signed/", "", status=302, headers={"Location": document})

    # then the first URL is fetched, but no redirect reaches a private address or the app again
    assert fetch_error(fetch_scoped, to_canary).reason == "blocked_address"
    assert canary.hits == 0
    assert fetch_error(fetch_scoped, to_itself).reason == "blocked_address"
    # nor does a redirect from elsewhere (a page on the web) lead to it
    assert fetch_error(fetch_scoped, f"{web.url}/redirect?to={document}").reason == "blocked_address"
    assert [r.path for r in app.requests] == ["/collection/2/signed/", "/collection/3/signed/"]


def _fake_resolver(monkeypatch: pytest.MonkeyPatch, answers: dict[str, list[str]]) -> list[str]:
    """Answer getaddrinfo for the given names from `answers`; returns the log of names looked up."""
    real = socket.getaddrinfo
    lookups: list[str] = []

    def getaddrinfo(host: str, port: Any, *args: Any, **kwargs: Any) -> Any:
        if host in answers:
            lookups.append(host)
            return [
                (
                    socket.AF_INET6 if ipaddress.ip_address(a).version == 6 else socket.AF_INET,
                    socket.SOCK_STREAM,
                    6,
                    "",
                    (a, int(port)),
                )
                for a in answers[host]
            ]
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(netguard.socket, "getaddrinfo", getaddrinfo)
    return lookups


def test_fetch_page_refuses_a_name_with_any_private_answer(
    monkeypatch: pytest.MonkeyPatch, canary: Canary, fetch: Fetch
) -> None:
    # given a name whose records mix a public and a private address, as a rebinding attack serves them
    _fake_resolver(monkeypatch, {"mixed.example": ["93.184.215.14", "127.0.0.1"]})
    canary.reset()

    # when / then: refused before any connection, the public address included
    assert fetch_error(fetch, f"http://mixed.example:{canary.port}/").reason == "blocked_address"
    assert canary.hits == 0


def test_fetch_page_connects_to_the_address_it_vetted(monkeypatch: pytest.MonkeyPatch, web: FakeWeb) -> None:
    # given an allow-listed name that resolves to the FakeWeb address
    lookups = _fake_resolver(monkeypatch, {"docs.internal": ["127.0.0.1"]})
    web.reset()

    # when
    page = fetch_page(
        f"http://docs.internal:{web.port}/page/pinned",
        allowed_private=frozenset({f"docs.internal:{web.port}"}),
    )

    # then one lookup fed both the check and the connection, and the server still saw the name
    assert page.title == "Pinned"
    assert lookups == ["docs.internal"]
    assert web.requests[-1].headers["Host"] == f"docs.internal:{web.port}"


def test_an_address_is_not_looked_up_on_a_thread_of_its_own(monkeypatch: pytest.MonkeyPatch, web: FakeWeb) -> None:
    # given a record of the threads that resolve hosts
    real = socket.getaddrinfo
    resolved_on: dict[str, int] = {}

    def getaddrinfo(host: str, *args: Any, **kwargs: Any) -> Any:
        resolved_on[host] = threading.get_ident()
        return real("127.0.0.1" if host == "web.internal" else host, *args, **kwargs)

    monkeypatch.setattr(netguard.socket, "getaddrinfo", getaddrinfo)
    allowed = frozenset({f"127.0.0.1:{web.port}", f"web.internal:{web.port}"})

    # when a page is fetched by address, and one by name
    fetch_page(f"http://127.0.0.1:{web.port}/page/by-address", allowed_private=allowed)
    fetch_page(f"http://web.internal:{web.port}/page/by-name", allowed_private=allowed)

    # then the address was only parsed, on the fetching thread (it cannot hang: no deadline thread needed), and
    # the name went to a resolver thread, whose wait the fetch can give up on
    assert resolved_on["127.0.0.1"] == threading.get_ident()
    assert resolved_on["web.internal"] != threading.get_ident()


# --- units --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("address", "public"),
    [
        ("8.8.8.8", True),
        ("93.184.215.14", True),
        ("2606:4700:4700::1111", True),
        ("127.0.0.1", False),
        ("10.1.2.3", False),
        ("172.16.0.1", False),
        ("172.31.255.255", False),
        ("192.168.0.1", False),
        ("169.254.169.254", False),
        ("100.64.0.1", False),
        ("0.0.0.0", False),
        ("224.0.0.1", False),
        ("239.255.255.250", False),
        ("240.0.0.1", False),
        ("255.255.255.255", False),
        ("198.18.0.1", False),
        ("::1", False),
        ("::", False),
        ("fe80::1", False),
        ("fc00::1", False),
        ("fd12:3456::1", False),
        ("ff02::1", False),
        ("::ffff:127.0.0.1", False),
        ("::ffff:10.0.0.1", False),
        ("::127.0.0.1", False),
        ("64:ff9b::a9fe:a9fe", False),
        ("2002:7f00:1::", False),
        ("2001:db8::1", False),
    ],
)
def test_is_public_address(address: str, public: bool) -> None:
    assert is_public_address(ipaddress.ip_address(address)) is public


def test_normalize_allowed_endpoints() -> None:
    assert normalize_allowed(["127.0.0.1:8123", "Docs.Local.:80", "[::1]:9000"]) == {
        "127.0.0.1:8123",
        "docs.local:80",
        "[::1]:9000",
    }
    assert endpoint_key("::1", 9000) == "[::1]:9000"
    for bad in ("127.0.0.1", "host:", ":80", "host:0", "host:70000", "host:http"):
        with pytest.raises(ValueError):
            normalize_allowed([bad])


def test_fetch_error_pickles_for_celery() -> None:
    error = pickle.loads(pickle.dumps(FetchError("http_error", "HTTP 503", status_code=503)))

    assert (error.reason, error.message, error.status_code) == ("http_error", "HTTP 503", 503)
    assert str(error) == "http_error: HTTP 503"


def test_extract_page_structure_and_hidden_content() -> None:
    html = """<html><head><title> A &amp; B </title></head><body>
    <div id="cookie-banner">We use cookies to improve your experience.</div>
    <div role="navigation">Menu entries</div>
    <form action="/postback"><div>
      <p>First paragraph with <b>bold</b>text and a<br>line break.</p>
      <ul><li>one</li><li>two</li></ul>
      <table><tr><th>Name</th><th>Value</th></tr><tr><td>x</td><td>42</td></tr></table>
      <h2>Heading</h2>
      <p aria-hidden="true">Decorative duplicate.</p>
      <p style="visibility: hidden">Invisible.</p>
      <div hidden="until-found">Collapsed but findable section.</div>
      <p>Entity &lt;b&gt; stays text&nbsp;here.</p>
    </div></form></body></html>"""

    title, text = extract_page(html, "http://example.test/")

    assert title == "A & B"
    assert text == (
        "First paragraph with boldtext and a\nline break.\n\n- one\n- two\n\nName | Value\n\nx | 42\n\n"
        "Heading\n\nCollapsed but findable section.\n\nEntity <b> stays text here."
    )


def test_extract_page_prefers_main_content_and_survives_deep_nesting() -> None:
    sidebar = "<div>" + "Unrelated sidebar link. " * 50 + "</div>"
    article = "<main><p>" + "Main content sentence. " * 30 + "</p></main>"
    deep = "<div>" * 5000 + "deep text" + "</div>" * 5000

    _, text = extract_page(f"<html><body>{sidebar}{article}</body></html>", "u")
    _, nested = extract_page(f"<html><body>{deep}</body></html>", "u")

    assert text.startswith("Main content sentence.") and "sidebar" not in text
    assert "deep text" in nested


def test_decode_body_prefers_bom_then_http_then_meta() -> None:
    meta = '<meta charset="iso-8859-7"><p>\xe1</p>'.encode("latin-1")

    assert decode_body("é".encode("utf-8-sig"), "latin-1", is_html=False) == "é"
    assert decode_body("é".encode("latin-1"), "latin-1", is_html=False) == "é"
    assert "α" in decode_body(meta, None, is_html=True)
    assert decode_body("é".encode(), None, is_html=False) == "é"
    assert decode_body(b"x", "no-such-charset", is_html=False) == "x"


def test_extract_text_plain_title_is_first_line() -> None:
    assert extract_text("\n\n  Report   title \nbody", "text/plain", "u") == (
        "Report title",
        "Report   title\nbody",
    )
