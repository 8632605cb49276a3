"""Documents a user uploads (the documents page, POST /api/documents/): files, or zip archives of files.

Every file is read by the same readers as `manage.py index_documents` (`parse_document`), and becomes a document
of the uploader's, searched and cited only by their research. Its identity (CollectionDocument.path) is
`upload/<user id>/<sha256>/<name>`: it never starts with "/", so it never meets a folder's absolute path, and the
same bytes uploaded again by the same user under the same name are the same document, not a second copy.

Semantics of one upload: every file is read first; those that cannot be read (an unsupported type, a corrupt file,
no text) are reported by name and reason and left out; then all the good ones are written in one transaction, so
they land together or (a database failure) not at all, and none is ever half-indexed. A zip is refused whole when
its directory shows a zip bomb (the readers' limits) or a member path that climbs out of the archive (`..`, an
absolute path): such an archive is hostile, not merely broken. Nothing is ever extracted to disk.
"""

from __future__ import annotations

import hashlib
import posixpath
import re
import stat
import unicodedata
import zipfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from django.conf import settings
from django.db import IntegrityError, transaction

from research.collection.documents import TEXT_EXTRACTION, store_document
from research.collection.readers import (
    CONTENT_TYPES,
    ZIP_MAX_UNCOMPRESSED,
    DocumentError,
    ParsedDocument,
    open_zip,
    parse_document,
)
from research.models import CollectionDocument, DocumentOrigin

NAME_CHARS = 200
UPLOAD_PREFIX = "upload/"
# Entries of an archive that are no one's document: macOS's resource forks, and hidden files (".DS_Store").
_JUNK = re.compile(r"(^|/)(__MACOSX/|\.)")


class UploadRefused(Exception):
    """The upload as a whole is refused: `status` 413 (too many files) or 400 (nothing in it)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass
class Indexed:
    document: CollectionDocument
    name: str
    outcome: str  # "added", "updated" or "unchanged"


@dataclass
class UploadResult:
    indexed: list[Indexed] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)  # (name, reason)


@dataclass
class _Read:
    name: str
    data: bytes
    parsed: ParsedDocument
    digest: str


def safe_name(raw: str) -> str:
    """A file name as the user's browser or archive gave it, made a plain name for display and keys: its last path
    part only (a browser may send "C:\\fakepath\\x.pdf"), no control characters, at most NAME_CHARS characters."""
    name = raw.replace("\\", "/").rsplit("/", 1)[-1]
    name = "".join(ch for ch in name if unicodedata.category(ch)[0] != "C").strip()
    if len(name) > NAME_CHARS:
        stem, dot, suffix = name.rpartition(".")
        name = stem[: NAME_CHARS - len(suffix) - 1] + dot + suffix if dot and len(suffix) < 12 else name[:NAME_CHARS]
    return name or "unnamed"


def upload_key(owner_id: int, digest: str, name: str) -> str:
    return f"{UPLOAD_PREFIX}{owner_id}/{digest}/{name}"


def document_name(document: CollectionDocument) -> str:
    """What the user knows a document by: the uploaded file's name, or the indexed file's."""
    if document.origin == DocumentOrigin.UPLOAD and document.path.startswith(UPLOAD_PREFIX):
        return document.path.split("/", 3)[-1]
    return PurePosixPath(document.path).name


def index_upload(owner_id: int, files: list[tuple[str, bytes]]) -> UploadResult:
    """Index an upload's files (name, bytes) as `owner_id`'s documents; zips are read member by member."""
    result = UploadResult()
    entries: list[tuple[str, bytes]] = []
    for raw_name, data in files:
        name = safe_name(raw_name)
        if PurePosixPath(name).suffix.lower() == ".zip":
            try:
                entries.extend(_members(name, data, result, len(entries), sum(len(d) for _, d in entries)))
            except DocumentError as exc:
                result.failed.append((name, str(exc)))
        else:
            entries.append((name, data))
        if len(entries) > settings.UPLOAD_MAX_FILES:
            raise UploadRefused(413, f"too many files: at most {settings.UPLOAD_MAX_FILES} documents per upload")
    read: list[_Read] = []
    for name, data in entries:
        try:
            read.append(_read(name, data))
        except DocumentError as exc:
            result.failed.append((name, str(exc)))
    if not entries and not result.failed:
        raise UploadRefused(400, "no file in the upload")
    result.indexed = _store(owner_id, read)
    return result


def _members(
    archive_name: str, data: bytes, result: UploadResult, files_before: int, bytes_before: int
) -> list[tuple[str, bytes]]:
    """The files of a zip as (archive/name, bytes): refused whole (DocumentError) if it is a zip bomb or names a
    path outside itself; a member that cannot be read is reported in `result` and left out. The whole upload is
    refused (413) when the archive's directory shows more files than the upload may add, or more bytes, with those
    read before it (`files_before`, `bytes_before`), than one zip may expand to: so several small zips do not
    add up to what one may not be."""
    archive = open_zip(data, "zip")  # the readers' bomb checks: total size, member count, compression ratio
    with archive:
        members = [member for member in archive.infolist() if not member.is_dir()]
        for member in members:
            if _escapes(member.filename):
                raise DocumentError(f"refused zip file: {member.filename!r} is a path outside the archive")
        if files_before + len(members) > settings.UPLOAD_MAX_FILES:
            raise UploadRefused(
                413,
                f"too many files: at most {settings.UPLOAD_MAX_FILES} documents per upload ({archive_name} "
                f"holds {len(members)})",
            )
        if bytes_before + sum(member.file_size for member in members) > ZIP_MAX_UNCOMPRESSED:
            raise UploadRefused(
                413, f"too large: the upload's files expand to over {ZIP_MAX_UNCOMPRESSED // (1024 * 1024)} MB"
            )
        found: list[tuple[str, bytes]] = []
        for member in members:
            path = member.filename.replace("\\", "/")
            if _JUNK.search(path):
                continue
            name = f"{archive_name}/{_clean_path(path)}"
            if stat.S_ISLNK(member.external_attr >> 16):
                result.failed.append((name, "a link, not a file"))
                continue
            if PurePosixPath(path).suffix.lower() == ".zip":
                result.failed.append((name, "a zip inside a zip is not read: upload it on its own"))
                continue
            try:
                # zipfile inflates no more than the declared size, which open_zip has bounded.
                found.append((name, archive.read(member)))
            except (zipfile.BadZipFile, RuntimeError, ValueError, OSError, EOFError) as exc:
                # RuntimeError: an encrypted member; BadZipFile: a bad CRC or a truncated member.
                result.failed.append((name, f"cannot be read from the archive: {exc}"[:300]))
    return found


def _escapes(filename: str) -> bool:
    """Whether an archive member's path leaves the archive: absolute, with a drive, or climbing with "..". We never
    extract, but an archive that tries this was made to attack an unzip, and none of it is trusted."""
    path = filename.replace("\\", "/")
    return path.startswith("/") or bool(re.match(r"[A-Za-z]:", path)) or ".." in path.split("/")


def _clean_path(path: str) -> str:
    parts = [safe_name(part) for part in posixpath.normpath(path).split("/") if part not in ("", ".")]
    return "/".join(parts)[:NAME_CHARS] or "unnamed"


def _read(name: str, data: bytes) -> _Read:
    suffix = PurePosixPath(name).suffix.lower()
    if suffix not in CONTENT_TYPES:
        raise DocumentError(f"unsupported file type {suffix or '(none)'}")
    # The readers take a path for its extension and, for HTML, a base URI: an absolute one, never a real file.
    parsed = parse_document(Path("/", PurePosixPath(name).name), data)
    if len((parsed.source or parsed.text).encode()) > settings.SCRAPE_MAX_BYTES:
        raise DocumentError(f"too large: its text is over SCRAPE_MAX_BYTES ({settings.SCRAPE_MAX_BYTES:,} bytes)")
    return _Read(name, data, parsed, hashlib.sha256(data).hexdigest())


def _store(owner_id: int, read: list[_Read]) -> list[Indexed]:
    """Write the read documents in one transaction. Two uploads of the same file at once race for its key: the
    loser's transaction fails on the unique path and runs once more, finding the winner's row."""
    for attempt in (1, 2):
        try:
            with transaction.atomic():
                return [_store_one(owner_id, item) for item in read]
        except IntegrityError:
            if attempt == 2:
                raise
    return []


def _store_one(owner_id: int, item: _Read) -> Indexed:
    key = upload_key(owner_id, item.digest, item.name)
    existing = CollectionDocument.objects.filter(path=key, extraction=TEXT_EXTRACTION).first()
    if existing is not None:
        return Indexed(existing, item.name, "unchanged")
    document, created = store_document(key, DocumentOrigin.UPLOAD, owner_id, item.data, item.parsed, item.digest)
    return Indexed(document, item.name, "added" if created else "updated")
