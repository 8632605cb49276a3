"""Share links: made, listed and revoked by the research's owner alone (404 for anyone else, by session or token);
the link opens that report version without an account, with its sources and quotes and nothing else; revoked,
expired and unknown links are alike (404); opening links is rate-limited per client address, wrong keys included."""

import json
from datetime import timedelta

import pytest
from django.test import Client, override_settings
from django.utils import timezone

from research.control import tokens
from research.models import Document, DocumentKind, Research, ResearchStatus, ShareLink

pytestmark = pytest.mark.django_db

REPORT_V1 = (
    '# Heat pumps\n\nCOP stayed above 2.5. [[1]](https://example.com/a "COP 2.7 measured")\n\n'
    "## Sources\n\n1. [A](https://example.com/a) — quoted: “COP 2.7 measured”\n"
)
REPORT_V2 = "# Heat pumps, revised\n\nA newer finding.\n"


@pytest.fixture
def research(user) -> Research:
    research = Research.objects.create(
        owner=user, prompt="p", title="Heat pumps", status=ResearchStatus.COMPLETED, report_version=2
    )
    Document.objects.create(research=research, kind=DocumentKind.REPORT, version=1, markdown=REPORT_V1)
    Document.objects.create(research=research, kind=DocumentKind.REPORT, version=2, markdown=REPORT_V2)
    return research


def share(api, research, **body):
    return api.post(f"/api/research/{research.pk}/shares", data=body, content_type="application/json")


def test_a_link_opens_its_version_without_an_account(api, research, user) -> None:
    Research.objects.create(owner=user, prompt="q", title="Private notes", status=ResearchStatus.COMPLETED)
    made = share(api, research, version=1)
    assert made.status_code == 201
    url = made.json()["url"]
    page = Client().get(url)
    assert page.status_code == 200
    html = page.content.decode()
    assert "COP stayed above 2.5" in html and "COP 2.7 measured" in html and "#:~:text=" in html
    assert "A newer finding" not in html and "Private notes" not in html and "sidebar" not in html
    assert page["Referrer-Policy"] == "no-referrer" and "noindex" in page["X-Robots-Tag"]
    latest = share(api, research).json()
    assert latest["version"] == 2 and "A newer finding" in Client().get(latest["url"]).content.decode()
    listed = api.get(f"/api/research/{research.pk}/shares").json()["shares"]
    assert {row["url"] for row in listed} == {url, latest["url"]}


def test_revoked_expired_and_unknown_links_are_not_found(api, research) -> None:
    made = share(api, research).json()
    reader = Client()
    assert reader.get(made["url"]).status_code == 200
    assert api.delete(f"/api/research/{research.pk}/shares/{made['id']}").status_code == 204
    assert reader.get(made["url"]).status_code == 404
    expiring = share(api, research, expires_in=60).json()
    assert reader.get(expiring["url"]).status_code == 200
    ShareLink.objects.filter(pk=expiring["id"]).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert reader.get(expiring["url"]).status_code == 404
    assert api.get(f"/api/research/{research.pk}/shares").json()["shares"] == []  # expired ones are gone
    assert reader.get("/share/nope/").status_code == 404
    assert reader.get("/share/" + "x" * 300 + "/").status_code == 404


def test_only_the_owner_makes_lists_or_revokes_links(api, stranger, research, other_user) -> None:
    made = share(api, research).json()
    _, secret = tokens.create(other_user, "cli", False)
    by_token = Client(headers={"Authorization": f"Bearer {secret}"})
    for client in (stranger, by_token):
        assert share(client, research).status_code == 404
        assert client.get(f"/api/research/{research.pk}/shares").status_code == 404
        assert client.delete(f"/api/research/{research.pk}/shares/{made['id']}").status_code == 404
        assert client.get(f"/research/{research.pk}/shares/").status_code in (302, 404)
    assert stranger.post(f"/research/{research.pk}/shares/{made['id']}/revoke/").status_code == 404
    assert ShareLink.objects.count() == 1
    _, read_only = tokens.create(research.owner, "reader", True)
    reader = Client(headers={"Authorization": f"Bearer {read_only}"})
    assert share(reader, research).status_code == 403


def test_share_input_is_checked(api, research, user) -> None:
    assert share(api, research, version=3).status_code == 409
    assert share(api, research, version=True).status_code == 400
    assert share(api, research, expires_in=5).json()["error"]["field"] == "expires_in"
    assert share(api, research, expires_in=10**9).status_code == 400
    assert share(api, research, anyone=True).status_code == 400
    assert api.delete(f"/api/research/{research.pk}/shares/{2**70}").status_code == 404
    draft = Research.objects.create(owner=user, prompt="p", title="t", status=ResearchStatus.RUNNING)
    assert share(api, draft).status_code == 409
    assert not ShareLink.objects.exists()


@override_settings(SHARE_RATE_LIMIT=3)
def test_opening_links_is_rate_limited_per_address_wrong_keys_included(api, research) -> None:
    url = share(api, research).json()["url"]
    reader = Client(REMOTE_ADDR="203.0.113.9")
    assert [reader.get(path).status_code for path in (url, "/share/guess-1/", "/share/guess-2/")] == [200, 404, 404]
    refused = reader.get(url)
    assert refused.status_code == 429 and int(refused["Retry-After"]) >= 1
    assert Client(REMOTE_ADDR="198.51.100.7").get(url).status_code == 200  # another address is not held back


def test_the_share_page_makes_and_revokes(api, research) -> None:
    page = api.get(f"/research/{research.pk}/shares/")
    assert page.status_code == 200 and b"No link shares this research." in page.content
    made = api.post(f"/research/{research.pk}/shares/", {"version": "1", "expires_in": "86400"})
    assert made.status_code == 302
    link = ShareLink.objects.get()
    assert link.version == 1 and link.expires_at > timezone.now() + timedelta(hours=23)
    assert link.key in api.get(f"/research/{research.pk}/shares/").content.decode()
    assert api.post(f"/research/{research.pk}/shares/", {"version": "x"}).status_code == 400
    assert api.post(f"/research/{research.pk}/shares/{link.pk}/revoke/").status_code == 302
    assert not ShareLink.objects.exists()
    assert json.loads(api.get(f"/api/research/{research.pk}/shares").content)["shares"] == []
