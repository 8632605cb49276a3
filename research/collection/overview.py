"""What a user's document collection covers, in a few lines: for a research whose sources did not answer it, so
that its user can tell whether to reword the request or add documents.

The overview is read from the rows the collection already keeps (paths, titles, dates): how many documents the
user may read, how they fall into the share's top folders, which titles come closest to the request by the same
ranking the search uses, and the newest current documents.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field
from datetime import date

from research.collection.documents import rank_documents, readable_by
from research.collection.standing import CURRENT
from research.models import CollectionDocument, DocumentOrigin

# Folders and titles beyond these are counted, not named: the overview is read, not scanned.
MAX_FOLDERS = 8
MAX_TITLES = 6
UPLOADS = "Uploads"
TOP_LEVEL = "Top level of the share"


@dataclass(frozen=True)
class Titled:
    title: str
    dated: date | None


@dataclass(frozen=True)
class Overview:
    documents: int
    # (folder, documents in it), most documents first, then by name.
    folders: list[tuple[str, int]] = field(default_factory=list)
    closest: list[Titled] = field(default_factory=list)
    newest: list[Titled] = field(default_factory=list)


def collection_overview(reader_id: int, request: str) -> Overview:
    """What `reader_id` may read of the collection, as it bears on `request`."""
    readable = CollectionDocument.objects.filter(readable_by(reader_id))
    rows = list(readable.values_list("path", "origin"))
    folders = _folders([path for path, origin in rows if origin == DocumentOrigin.FOLDER])
    uploads = sum(1 for _, origin in rows if origin == DocumentOrigin.UPLOAD)
    if uploads:
        folders[UPLOADS] += uploads
    ranked = rank_documents(request, MAX_TITLES, reader_id=reader_id)
    by_id = readable.in_bulk(ranked)
    closest = [Titled(by_id[pk].title, by_id[pk].dated) for pk in ranked if pk in by_id]
    newest_rows = (
        readable.filter(standing=CURRENT, dated__isnull=False)
        .exclude(pk__in=ranked)
        .order_by("-dated", "title")
        .values_list("title", "dated")[:MAX_TITLES]
    )
    return Overview(
        documents=len(rows),
        folders=sorted(folders.items(), key=lambda item: (-item[1], item[0]))[:MAX_FOLDERS],
        closest=closest,
        newest=[Titled(title, dated) for title, dated in newest_rows],
    )


def _folders(paths: list[str]) -> Counter[str]:
    """Documents per top folder under the share's root (the deepest folder all of them sit in)."""
    counted: Counter[str] = Counter()
    if not paths:
        return counted
    root = os.path.commonpath([os.path.dirname(path) for path in paths])
    for path in paths:
        parts = os.path.relpath(path, root).split(os.sep)
        counted[parts[0] if len(parts) > 1 else TOP_LEVEL] += 1
    return counted
