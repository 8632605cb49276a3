"""The documents page in the browser: files and a zip uploaded with the progress bar, the result listed by file,
the list redrawn and a document deleted; another user's documents never shown."""

import io
import zipfile

import pytest
from playwright.sync_api import expect

from research.collection import uploads
from research.models import CollectionDocument
from tests.support.logins import sign_in

pytestmark = pytest.mark.django_db(transaction=True)

MARKDOWN = b"# Defrost cycles\n\nA defrost cycle melts the ice on the outdoor coil of an air-source heat pump.\n"


def share_zip() -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("notes/boreholes.txt", "Ground-source heat pumps draw heat from boreholes all winter.")
        archive.writestr("broken.pdf", b"%PDF-1.4 not really a PDF")
    return out.getvalue()


def test_upload_files_and_a_zip_then_delete_one(daphne, open_page, user, other_user) -> None:
    # given a private document of mallory's
    uploads.index_upload(other_user.pk, [("mallory.md", b"# Mallory's notes\n\nMallory's private heat pump notes.")])
    watched = open_page()
    page = watched.page
    sign_in(page, daphne.url, "alice", "/")
    # when alice opens her documents from the sidebar
    page.click("#sidebar a[href='/documents/']")
    expect(page.locator("h1")).to_have_text("Your documents")
    expect(page.locator("#mine-empty")).to_be_visible()
    expect(page.locator("#shared-empty")).to_be_visible()
    # and uploads a Markdown file and a zip holding a broken PDF
    page.set_input_files(
        "#upload-files",
        [
            {"name": "defrost.md", "mimeType": "text/markdown", "buffer": MARKDOWN},
            {"name": "share.zip", "mimeType": "application/zip", "buffer": share_zip()},
        ],
    )
    page.click("#upload-button")
    # then the result names what was indexed and what was not, and why
    expect(page.locator("#upload-status")).to_have_text("Indexed 2 documents; 1 not indexed.")
    expect(page.locator(".upload-indexed li")).to_have_count(2)
    expect(page.locator(".upload-failed li")).to_have_count(1)
    expect(page.locator(".upload-failed li")).to_contain_text("share.zip/broken.pdf: not a readable PDF")
    # and her list holds both, mallory's nowhere
    mine = page.locator("#mine-list li")
    expect(mine).to_have_count(2)
    expect(page.locator("#mine-list")).to_contain_text("share.zip/notes/boreholes.txt")
    expect(page.locator("body")).not_to_contain_text("Mallory")
    expect(page.locator("#upload-progress")).to_be_hidden()
    # when she deletes one
    defrost = CollectionDocument.objects.get(owner=user, title="Defrost cycles")
    page.click(f"#mine-list li[data-document-id='{defrost.pk}'] button")
    # then it is gone from the page and the database; the page reloaded shows the same
    expect(mine).to_have_count(1)
    assert not CollectionDocument.objects.filter(pk=defrost.pk).exists()
    page.reload()
    expect(page.locator("#mine-list li")).to_have_count(1)
    assert watched.errors == [] and watched.failed_requests == []
