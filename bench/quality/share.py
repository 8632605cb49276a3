"""The quality bench's document share as the app sees it: built, indexed into the collection, and checked against
the checkpoints. Needs Django set up (the collection's models)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from bench.quality.build_corpus import build
from bench.quality.grade import Benchmark, contains

# How an archived or superseded file says so in its own text: a reader (and a later engine) can tell only from that.
OUTDATED_MARK = re.compile(r"\b(archived|superseded|draft)\b", re.IGNORECASE)
_DOCUMENT_ID = re.compile(r"/collection/(\d+)/")


@dataclass
class IndexedShare:
    folder: Path
    files: list[Path]  # every file written, sorted
    paths: dict[int, str]  # collection document id -> its file, relative to the folder
    texts: dict[str, str]  # relative path -> the text indexed
    failed: list[tuple[str, str]]  # (path, reason) of the files the indexer could not read
    unsupported: list[str]

    def path_of(self, url: str) -> str:
        """The share's file a collection URL (stable or signed) names, or the URL itself when it names none."""
        match = _DOCUMENT_ID.search(url)
        return self.paths.get(int(match.group(1)), url) if match else url


def build_and_index(folder: Path) -> IndexedShare:
    """Build the share into `folder` and make the collection exactly that folder, with the indexer
    `manage.py index_documents --replace` runs."""
    from research.collection.documents import index_folder
    from research.models import CollectionDocument

    files = build(folder)
    summary = index_folder(folder, replace=True)
    root = folder.resolve()
    paths, texts = {}, {}
    for pk, path, text in CollectionDocument.objects.values_list("pk", "path", "text"):
        relative = Path(path).relative_to(root).as_posix()
        paths[pk], texts[relative] = relative, text
    return IndexedShare(folder, files, paths, texts, summary.failed, summary.unsupported)


def consistency_problems(benchmark: Benchmark, texts: Mapping[str, str]) -> list[str]:
    """What would make the grade mean something else than it says, read from the indexed texts: a checkpoint's
    source that lacks its required items, a figure of it (an item holding a digit) found in another file, a stale
    item found outside the outdated files, stale items none of which is in any file, an outdated file that does
    not say it is one."""
    problems = []
    for checkpoint in benchmark.checkpoints:
        source = texts.get(checkpoint.source)
        if source is None:
            problems.append(f"{checkpoint.id}: its source {checkpoint.source} was not indexed")
            continue
        for item in checkpoint.required:
            if not contains(source, item):
                problems.append(f"{checkpoint.id}: {item!r} is not in {checkpoint.source}")
            if any(ch.isdigit() for ch in item):
                elsewhere = [path for path, text in texts.items() if path != checkpoint.source and contains(text, item)]
                if elsewhere:
                    problems.append(f"{checkpoint.id}: the figure {item!r} is also in {', '.join(elsewhere)}")
        stale_found = False
        for item in checkpoint.stale:
            holding = {path for path, text in texts.items() if contains(text, item)}
            stale_found = stale_found or bool(holding)
            if not holding <= benchmark.outdated:
                problems.append(f"{checkpoint.id}: the stale item {item!r} is in {', '.join(sorted(holding))}")
        # An item may be in no file: another way a writer could spell a stale figure ("79,500" for 79500).
        if checkpoint.stale and not stale_found:
            problems.append(f"{checkpoint.id}: none of its stale items is in any file")
    for path in sorted(benchmark.outdated):
        if path not in texts:
            problems.append(f"the outdated file {path} was not indexed")
        elif not OUTDATED_MARK.search(texts[path]):
            problems.append(f"{path} does not say that it is archived, superseded or a draft")
    return problems
