"""Documents have owners: uploads from the page and the API, per-user isolation of the list, the document page and
the search, sharing by an admin, and the upload's limits (tests on the test database, no worker processes)."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import docx
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.test import Client
from django.test.utils import override_settings

from research.collection import uploads
from research.collection.documents import document_url, may_fetch, rank_documents
from research.models import CollectionDocument, DocumentOrigin
from tests.support.collection_files import write_mixed_folder

pytestmark = pytest.mark.django_db

MARKDOWN = b"# Heat pump defrost\n\nA defrost cycle melts the ice on the outdoor coil of an air-source heat pump.\n"


def make_docx() -> bytes:
    document = docx.Document()
    document.add_heading("Q1 2026 Operations Report", 1)
    document.add_paragraph("The Tampere warehouse shipped 18,400 parcels in the first quarter.")
    table = document.add_table(rows=2, cols=2)
    for r, row in enumerate([("Depot", "Charging points"), ("Rovaniemi", "36")]):
        for c, value in enumerate(row):
            table.cell(r, c).text = value
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def zip_bomb() -> bytes:
    """A zip whose one member inflates 1,000 to 1."""
    return make_zip({"zeros.txt": b"\0" * (4 * 1024 * 1024)})


def file(name: str, data: bytes) -> SimpleUploadedFile:
    return SimpleUploadedFile(name, data, content_type="application/octet-stream")


def make_zip(members: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return out.getvalue()


def upload(client: Client, *files: SimpleUploadedFile, path: str = "/api/documents/", **extra):
    return client.post(path, {"files": list(files)}, **extra)


@pytest.fixture
def staff(django_user_model, password_hash: str) -> Client:
    admin = django_user_model.objects.create(
        username="root", email="root@example.com", password=password_hash, is_staff=True, is_superuser=True
    )
    client = Client()
    client.force_login(admin)
    return client


def test_an_uploaded_docx_is_its_owners_alone(api, stranger, staff, user) -> None:
    # when alice uploads a Word file
    word = make_docx()
    response = upload(api, file("C:\\fakepath\\Q1 report.docx", word))
    # then it is indexed as her document, under an upload key (never a path of a folder)
    assert response.status_code == 201, response.content
    [described] = response.json()["documents"]
    assert described["name"] == "Q1 report.docx" and described["status"] == "added"
    assert described["mine"] is True and described["shared"] is False
    document = CollectionDocument.objects.get(pk=described["id"])
    assert document.owner == user and document.origin == DocumentOrigin.UPLOAD and not document.shared
    assert document.path == f"upload/{user.pk}/{document.sha256}/Q1 report.docx"
    assert "Rovaniemi" in document.text
    # and she sees and reads it; a second upload of the same file changes nothing
    assert [d["id"] for d in api.get("/api/documents/").json()["documents"]] == [document.pk]
    assert api.get(f"/collection/{document.pk}/").status_code == 200
    again = upload(api, file("Q1 report.docx", word))
    assert again.json()["documents"][0]["status"] == "unchanged" and CollectionDocument.objects.count() == 1
    # and another user neither lists, reads, describes nor deletes it: each a 404, as for no document at all
    assert stranger.get("/api/documents/").json() == {"documents": [], "total": 0}
    assert stranger.get(f"/collection/{document.pk}/").status_code == 404
    assert stranger.get(f"/api/documents/{document.pk}/").status_code == 404
    assert stranger.delete(f"/api/documents/{document.pk}/").status_code == 404
    assert stranger.post(f"/documents/{document.pk}/delete/").status_code == 404
    assert document.pk not in {d["id"] for d in _page_documents(stranger)}
    # while staff may open it from a citation
    assert staff.get(f"/collection/{document.pk}/").status_code == 200
    # and its owner deletes it
    assert api.delete(f"/api/documents/{document.pk}/").status_code == 204
    assert not CollectionDocument.objects.exists()


def _page_documents(client: Client) -> list[dict]:
    response = client.get("/documents/")
    assert response.status_code == 200
    return response.context["mine"] + response.context["shared"]


def test_a_zip_lands_its_good_files_together_and_names_each_bad_one(api, user) -> None:
    # given a zip of a Markdown file, a Word file in a folder, a broken PDF, an image and macOS's clutter
    archive = make_zip(
        {
            "notes/defrost.md": MARKDOWN,
            "reports/q1.docx": make_docx(),
            "broken.pdf": b"%PDF-1.4 this is not a PDF",
            "photo.png": b"\x89PNG\r\n",
            "__MACOSX/notes/._defrost.md": b"junk",
            ".DS_Store": b"junk",
        }
    )
    # when it is uploaded with a plain text file beside it
    response = upload(api, file("share.zip", archive), file("plain.txt", b"Ground-source heat pumps use boreholes."))
    # then the good files are indexed, the bad ones reported by name and reason, the clutter ignored
    assert response.status_code == 201, response.content
    body = response.json()
    assert sorted(d["name"] for d in body["documents"]) == [
        "plain.txt",
        "share.zip/notes/defrost.md",
        "share.zip/reports/q1.docx",
    ]
    failed = {f["name"]: f["reason"] for f in body["failed"]}
    assert set(failed) == {"share.zip/broken.pdf", "share.zip/photo.png"}
    assert "pdf" in failed["share.zip/broken.pdf"].lower()
    assert failed["share.zip/photo.png"] == "unsupported file type .png"
    assert set(CollectionDocument.objects.values_list("owner_id", flat=True)) == {user.pk}
    assert CollectionDocument.objects.count() == 3


def test_an_upload_is_written_in_one_transaction(user, monkeypatch) -> None:
    # given a database failure while the second of two documents is written
    store = uploads.store_document
    calls: list[str] = []

    def failing(key, *args, **kwargs):
        calls.append(key)
        if len(calls) == 2:
            raise RuntimeError("the database went away")
        return store(key, *args, **kwargs)

    monkeypatch.setattr(uploads, "store_document", failing)
    # then the first is not left behind either
    with pytest.raises(RuntimeError):
        uploads.index_upload(user.pk, [("a.md", MARKDOWN), ("b.txt", b"Boreholes stay near 8 degrees all winter.")])
    assert len(calls) == 2 and not CollectionDocument.objects.exists()


@pytest.mark.parametrize(
    ("archive", "reason"),
    [
        (make_zip({"../../etc/evil.md": MARKDOWN, "fine.md": MARKDOWN}), "path outside the archive"),
        (make_zip({"/abs/evil.md": MARKDOWN}), "path outside the archive"),
        (make_zip({"C:\\Windows\\evil.md": MARKDOWN}), "path outside the archive"),
        (zip_bomb(), "zip bomb"),
        (b"PK\x03\x04 not really", "not a zip archive"),
    ],
    ids=["traversal", "absolute", "drive", "bomb", "corrupt"],
)
def test_a_hostile_or_broken_zip_is_refused_whole(api, archive: bytes, reason: str) -> None:
    response = upload(api, file("evil.zip", archive))
    assert response.status_code == 400
    body = response.json()
    assert body["error"]["field"] == "files" and body["documents"] == []
    [failure] = body["failed"]
    assert failure["name"] == "evil.zip" and reason in failure["reason"]
    assert not CollectionDocument.objects.exists()


def test_upload_limits_and_bad_requests_are_clear_4xx(api, settings) -> None:
    settings.UPLOAD_MAX_BYTES = 20_000
    settings.UPLOAD_MAX_FILES = 2
    # over the size: 413 by Content-Length, before the body is parsed (the page gets a short HTML answer)
    big = file("big.txt", b"word " * 10_000)
    response = upload(api, big)
    assert response.status_code == 413 and "at most 20,000 bytes" in response.json()["error"]["message"]
    assert upload(api, file("big.txt", b"word " * 10_000), path="/documents/").status_code == 413
    # over the count, as files or as a zip's members
    three = [file(f"{n}.md", MARKDOWN) for n in "abc"]
    assert upload(api, *three).status_code == 413
    response = upload(api, file("many.zip", make_zip({f"{n}.md": MARKDOWN for n in "abc"})))
    assert response.status_code == 413 and "at most 2 documents" in response.json()["error"]["message"]
    # no file, a JSON body, an unreadable or empty file: 400 with the reason
    assert api.post("/api/documents/", {}).status_code == 400
    response = api.post("/api/documents/", data=json.dumps({"files": []}), content_type="application/json")
    assert response.status_code == 400 and "multipart" in response.json()["error"]["message"]
    response = upload(api, file("empty.md", b""))
    assert response.status_code == 400 and response.json()["failed"] == [
        {"name": "empty.md", "reason": "no text in it"}
    ]
    # a malformed multipart body
    response = api.post("/api/documents/", data=b"--x\r\nnonsense", content_type="multipart/form-data; boundary=x")
    assert response.status_code == 400
    # a method the endpoint does not take; an id past any key
    assert api.put("/api/documents/").status_code == 405
    assert api.get("/api/documents/99999999999999999999999/").status_code == 404
    assert api.get("/collection/99999999999999999999999/").status_code == 404
    assert not CollectionDocument.objects.exists()


def test_uploads_need_a_login_and_the_csrf_token(user) -> None:
    assert upload(Client(), file("a.md", MARKDOWN)).status_code == 401
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    refused = upload(client, file("a.md", MARKDOWN))
    assert refused.status_code == 403 and "CSRF" in refused.json()["error"]["message"]
    client.get("/documents/")  # sets the csrftoken cookie
    token = client.cookies["csrftoken"].value
    assert upload(client, file("a.md", MARKDOWN), HTTP_X_CSRFTOKEN=token).status_code == 201
    document = CollectionDocument.objects.get()
    assert client.delete(f"/api/documents/{document.pk}/").status_code == 403
    assert client.delete(f"/api/documents/{document.pk}/", HTTP_X_CSRFTOKEN=token).status_code == 204


def test_shared_documents_are_everyones_and_an_admin_shares_a_users_and_takes_it_back(
    api, stranger, staff, user, other_user, tmp_path: Path
) -> None:
    # given the instance's folder indexed without an owner, and a document of mallory's
    write_mixed_folder(tmp_path)
    call_command("index_documents", str(tmp_path), stdout=io.StringIO())
    shared = CollectionDocument.objects.filter(owner__isnull=True)
    assert shared.count() == 4 and not shared.filter(shared=True).exists()
    assert upload(stranger, file("mallory.md", MARKDOWN)).status_code == 201
    private = CollectionDocument.objects.get(owner=other_user)
    # then every user lists and reads the shared ones, but may not delete them
    listed = {d["id"]: d for d in api.get("/api/documents/").json()["documents"]}
    assert set(listed) == set(shared.values_list("pk", flat=True))
    assert all(d["shared"] and not d["mine"] for d in listed.values())
    one = shared.first()
    assert api.get(f"/collection/{one.pk}/").status_code == 200
    assert api.delete(f"/api/documents/{one.pk}/").status_code == 403
    assert api.post(f"/documents/{one.pk}/delete/").status_code == 404
    # and mallory's is hers until an admin shares it
    assert api.get(f"/collection/{private.pk}/").status_code == 404
    changelist = "/admin/research/collectiondocument/"
    staff.post(changelist, {"action": "share_with_all", "_selected_action": [private.pk]})
    private.refresh_from_db()
    assert private.shared and private.owner == other_user
    assert api.get(f"/collection/{private.pk}/").status_code == 200
    assert private.pk in {d["id"] for d in api.get("/api/documents/").json()["documents"]}
    assert api.delete(f"/api/documents/{private.pk}/").status_code == 403  # still mallory's to delete
    # and makes it private again
    staff.post(changelist, {"action": "make_private", "_selected_action": [private.pk]})
    assert api.get(f"/collection/{private.pk}/").status_code == 404


def test_a_research_search_finds_only_what_its_owner_may_read(user, other_user, tmp_path: Path) -> None:
    # given alice's and mallory's private documents on the same topic, and a shared one
    uploads.index_upload(user.pk, [("alice.md", b"# Alice on defrost\n\nAlice measured defrost cycles every hour.")])
    uploads.index_upload(other_user.pk, [("mallory.md", b"# Mallory on defrost\n\nMallory measured defrost cycles.")])
    folder = tmp_path / "shared"
    folder.mkdir()
    (folder / "shared.md").write_text("# Shared defrost notes\n\nDefrost cycles reverse the refrigerant flow.")
    call_command("index_documents", str(folder), stdout=io.StringIO())
    alice = CollectionDocument.objects.get(owner=user)
    mallory = CollectionDocument.objects.get(owner=other_user)
    common = CollectionDocument.objects.get(owner__isnull=True)
    # then each user's search sees their own and the shared one, never the other's
    assert set(rank_documents("defrost cycles", 10, reader_id=user.pk)) == {alice.pk, common.pk}
    assert set(rank_documents("defrost cycles", 10, reader_id=other_user.pk)) == {mallory.pk, common.pk}
    # and the fetch step refuses another user's document even by its URL
    assert may_fetch(document_url(alice.pk), user.pk) and may_fetch(document_url(common.pk), user.pk)
    assert not may_fetch(document_url(mallory.pk), user.pk)
    assert may_fetch("https://example.com/page", user.pk)


def test_index_documents_owner_makes_a_folder_a_users_and_replace_keeps_uploads(
    user, other_user, tmp_path: Path
) -> None:
    write_mixed_folder(tmp_path)
    uploads.index_upload(other_user.pk, [("mallory.md", MARKDOWN)])
    call_command("index_documents", str(tmp_path), "--owner", "alice", "--replace", stdout=io.StringIO())
    assert CollectionDocument.objects.filter(owner=user, origin=DocumentOrigin.FOLDER).count() == 4
    assert CollectionDocument.objects.filter(owner=other_user, origin=DocumentOrigin.UPLOAD).count() == 1
    # indexed again without --owner: the same rows, now shared with all
    out = io.StringIO()
    call_command("index_documents", str(tmp_path), stdout=out)
    assert "4 updated" in out.getvalue()
    assert CollectionDocument.objects.filter(owner__isnull=True).count() == 4
    with pytest.raises(Exception, match="no user named nobody"):
        call_command("index_documents", str(tmp_path), "--owner", "nobody", stdout=io.StringIO())


def test_the_page_uploads_without_scripts_and_lists_and_deletes(api, stranger, user) -> None:
    page = api.get("/documents/")
    assert page.status_code == 200 and b'enctype="multipart/form-data"' in page.content
    assert b"You have no documents yet." in page.content
    # a form post shows what was indexed and what was not, and why, escaped
    response = upload(api, file("good.md", MARKDOWN), file("<i>bad.pdf", b"nope"), path="/documents/")
    assert response.status_code == 200
    assert b"good.md" in response.content and b"&lt;i&gt;bad.pdf: not a readable PDF" in response.content
    assert b"<i>bad" not in response.content
    document = CollectionDocument.objects.get()
    assert [d["id"] for d in response.context["mine"]] == [document.pk]
    assert stranger.get("/documents/").context["mine"] == []
    # a form with nothing readable is a 400 page with the reason
    response = upload(api, file("empty.txt", b"  "), path="/documents/")
    assert response.status_code == 400 and b"No file of the upload could be indexed." in response.content
    # the delete button
    assert api.post(f"/documents/{document.pk}/delete/").status_code == 302
    assert not CollectionDocument.objects.exists()


@override_settings(UPLOAD_MAX_FILES=5)
def test_safe_names() -> None:
    assert uploads.safe_name("C:\\fakepath\\report.pdf") == "report.pdf"
    assert uploads.safe_name("../../etc/passwd") == "passwd"
    assert uploads.safe_name("a\x00b\nc.md") == "abc.md"
    assert uploads.safe_name("") == "unnamed"
    long = uploads.safe_name("x" * 500 + ".docx")
    assert len(long) == uploads.NAME_CHARS and long.endswith(".docx")
