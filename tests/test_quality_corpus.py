"""The quality bench's document share (bench/quality): it builds, and the collection's indexer reads every file of
it; its checkpoints' figures are where checkpoints.json says, and only there."""

from collections import Counter
from pathlib import Path

import pytest

from bench.quality.grade import load
from bench.quality.share import build_and_index, consistency_problems
from research.models import CollectionDocument, UnreadableFile

pytestmark = pytest.mark.django_db


def test_the_share_builds_and_indexes_completely(tmp_path: Path) -> None:
    # when the share is built and indexed as `index_documents --replace` indexes a folder
    share = build_and_index(tmp_path)
    # then every file is a document, none unreadable or skipped
    assert share.failed == [] and share.unsupported == []
    assert not UnreadableFile.objects.exists()
    assert len(share.files) >= 25
    assert CollectionDocument.objects.count() == len(share.files)
    assert sorted(share.texts) == sorted(path.relative_to(tmp_path).as_posix() for path in share.files)
    # in at least five formats, each read by its own reader, and with text in every file
    formats = Counter(CollectionDocument.objects.values_list("content_type", flat=True))
    assert len(formats) >= 5, formats
    assert all(text.strip() for text in share.texts.values())
    # across the departments' folders, with an archive
    folders = {path.split("/", 1)[0] for path in share.texts}
    assert {"finance", "product", "operations", "hr", "it", "marketing", "archive"} <= folders


def test_the_checkpoints_figures_are_in_their_sources_and_stale_ones_only_in_outdated_files(tmp_path: Path) -> None:
    benchmark = load()
    share = build_and_index(tmp_path)
    assert consistency_problems(benchmark, share.texts) == []
    # the share keeps at least two archived vintages and a superseded draft
    assert sum(1 for path in benchmark.outdated if path.startswith("archive/")) >= 2
    assert any("draft" in path for path in benchmark.outdated)
    # the facts sit in varied places: a PDF, a Word table, a workbook, a deck, Markdown
    sources = {Path(checkpoint.source).suffix for checkpoint in benchmark.checkpoints}
    assert {".pdf", ".docx", ".xlsx", ".pptx", ".md"} <= sources
