"""Index a folder of documents (HTML, Markdown, text, PDF) into the local collection the "local" provider searches."""

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from research.collection.documents import CONTENT_TYPES, index_folder


class Command(BaseCommand):
    help = (
        "Index every HTML, Markdown, text and PDF file under FOLDER (recursively) into the local document "
        f"collection ({', '.join(sorted(CONTENT_TYPES))}). Unchanged files are skipped; documents whose files left "
        "the folder are removed."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("folder", type=Path)
        parser.add_argument(
            "--replace", action="store_true", help="make the collection exactly this folder: remove every other"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        folder: Path = options["folder"]
        if not folder.is_dir():
            raise CommandError(f"{folder} is not a folder")
        report = self.stdout.write if options["verbosity"] >= 2 else None
        summary = index_folder(folder, replace=options["replace"], report=report)
        for path, reason in summary.failed:
            self.stderr.write(f"could not index {path}: {reason}")
        self.stdout.write(f"Indexed {folder.resolve()}: {summary.describe()}.")
