"""Pages, static files, the Content-Security-Policy, and the sanitised report HTML."""

import re
from html.parser import HTMLParser

import pytest
from django.test import Client

from research.models import Document, DocumentKind, Research, ResearchStatus
from research.web.middleware import CONTENT_SECURITY_POLICY
from research.web.rendering import render_markdown

pytestmark = pytest.mark.django_db

HOSTILE_MARKDOWN = """# Report <script>alert('title')</script>

A finding. [[1]](https://example.com/a) <img src=x onerror=alert(1)> and <b onclick="alert(2)">bold</b>.
A [trap](javascript:alert(3)) and a [data link](data:text/html;base64,PHNjcmlwdD4=) and a [local](/admin/).

<script>alert(4)</script>
<iframe src="javascript:alert(5)"></iframe>
<div style="position:fixed">styled</div>

## Sources

1. [Example](https://example.com/a) — quoted: “<svg onload=alert(6)>”
"""


class Tags(HTMLParser):
    """Every start tag with its attributes."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))


def tags_of(html: str) -> list[tuple[str, dict[str, str | None]]]:
    parser = Tags()
    parser.feed(html)
    return parser.tags


def assert_inert(html: str) -> None:
    for tag, attrs in tags_of(html):
        assert tag in {"h1", "h2", "h3", "p", "a", "ol", "ul", "li", "strong", "em", "blockquote", "code", "pre"}, tag
        assert not [name for name in attrs if name.startswith("on") or name == "style"], (tag, attrs)
        if tag == "a" and "href" in attrs:
            assert re.match(r"https?://", attrs["href"] or ""), attrs
            assert attrs["target"] == "_blank" and attrs["rel"] == "noopener noreferrer", attrs


@pytest.fixture
def research(user) -> Research:
    research = Research.objects.create(owner=user, prompt="p", title="t", status=ResearchStatus.COMPLETED)
    Document.objects.create(research=research, kind=DocumentKind.REPORT, markdown=HOSTILE_MARKDOWN)
    Document.objects.create(
        research=research, kind=DocumentKind.ERROR_OUTPUT, markdown="# Failed\n\n" + HOSTILE_MARKDOWN
    )
    return research


def test_render_markdown_keeps_structure_and_links() -> None:
    html = render_markdown(
        "# Title\n\n## Part\n\nText [[1]](https://example.com/x?a=1&b=2).\n\n1. [Src](https://example.com/x)\n"
    )
    assert "<h1>Title</h1>" in html and "<h2>Part</h2>" in html and "<ol>" in html
    assert '<a href="https://example.com/x?a=1&amp;b=2" target="_blank" rel="noopener noreferrer">[1]</a>' in html
    assert_inert(html)


def test_render_markdown_makes_hostile_content_inert_text() -> None:
    html = render_markdown(HOSTILE_MARKDOWN)
    assert_inert(html)
    assert "<script" not in html and "<img" not in html and "<iframe" not in html and "<svg" not in html
    assert 'href="javascript' not in html and 'href="data:' not in html and 'href="/admin/' not in html
    # what the model wrote stays visible, as text
    assert "&lt;script&gt;alert(4)&lt;/script&gt;" in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html


def test_report_html_for_the_owner_only(api, stranger, research) -> None:
    for path in (f"/api/research/{research.pk}/report.html", f"/api/research/{research.pk}/error-output.html"):
        response = api.get(path)
        assert response.status_code == 200, path
        assert response["Content-Type"] == "text/html; charset=utf-8"
        assert_inert(response.content.decode())
        assert stranger.get(path).status_code == 404
        assert Client().get(path).status_code == 401


def test_report_html_is_404_until_written(api, user) -> None:
    research = Research.objects.create(owner=user, prompt="p", title="t", status=ResearchStatus.RUNNING)
    assert api.get(f"/api/research/{research.pk}/report.html").status_code == 404
    assert api.get(f"/api/research/{research.pk}/error-output.html").status_code == 404


def test_research_page_for_the_owner_only(api, stranger, research) -> None:
    path = f"/research/{research.pk}/"
    response = api.get(path)
    assert response.status_code == 200
    assert f'data-research-id="{research.pk}"' in response.content.decode()
    assert stranger.get(path).status_code == 404
    anonymous = Client().get(path)
    assert anonymous.status_code == 302 and "/accounts/login/" in anonymous["Location"]


def test_every_response_carries_the_content_security_policy(api, research, admin_client) -> None:
    responses = [
        api.get("/"),
        api.get(f"/research/{research.pk}/"),
        api.get("/api/research"),
        api.get(f"/api/research/{research.pk}/report.html"),
        api.get("/api/research/not-a-uuid"),
        Client().get("/accounts/login/"),
        Client().get("/static/research/js/app.js"),
        Client().get("/no-such-page/"),
        admin_client.get("/admin/"),
    ]
    for response in responses:
        assert response["Content-Security-Policy"] == CONTENT_SECURITY_POLICY, response
    for directive in ("script-src 'self'", "style-src 'self'", "frame-ancestors 'none'", "base-uri 'none'"):
        assert directive in CONTENT_SECURITY_POLICY
    assert "unsafe-inline" not in CONTENT_SECURITY_POLICY and "unsafe-eval" not in CONTENT_SECURITY_POLICY


def test_pages_have_no_inline_script_style_or_handler(api) -> None:
    pages = [api.get("/").content.decode(), Client().get("/accounts/login/").content.decode()]
    for html in pages:
        tags = tags_of(html)
        assert not [t for t, _ in tags if t == "style"]
        for tag, attrs in tags:
            assert "style" not in attrs and not [n for n in attrs if n.startswith("on")], (tag, attrs)
            if tag == "script":
                assert attrs.get("src", "").startswith("/static/"), attrs


def test_static_files_are_served_by_the_app() -> None:
    client = Client()
    for path, kind in [
        ("/static/research/js/app.js", "text/javascript"),
        ("/static/research/js/lib.js", "text/javascript"),
        ("/static/research/css/app.css", "text/css"),
        ("/static/admin/css/base.css", "text/css"),
    ]:
        response = client.get(path)
        assert response.status_code == 200, path
        assert response["Content-Type"].startswith(kind), response["Content-Type"]
        assert len(response.content) == int(response["Content-Length"]) > 100
    assert client.head("/static/research/js/app.js").status_code == 200
    assert client.get("/static/research/js/missing.js").status_code == 404
