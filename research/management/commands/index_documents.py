"""Index a folder of documents (HTML, Markdown, text, PDF, Word, PowerPoint, Excel, CSV, OpenDocument text, EPUB)
into the local collection the "local" provider searches."""

from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from research.collection.documents import CONTENT_TYPES, index_folder, unsupported_reason


class Command(BaseCommand):
    help = (
        "Index every HTML, Markdown, text, PDF, Word (DOCX), PowerPoint (PPTX), Excel (XLSX), CSV, OpenDocument text "
        "(ODT) and EPUB file under FOLDER (recursively) into the local document collection "
        f"({', '.join(sorted(CONTENT_TYPES))}); tables become one line per row, each cell named by its column header. "
        "Unchanged files are skipped; documents whose files left the folder are removed. Each file that is "
        "unsupported or unreadable is printed with its reason and listed in the admin (Unreadable files). "
        "The documents are shared with every user unless --owner names the user they belong to."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("folder", type=Path)
        parser.add_argument(
            "--replace",
            action="store_true",
            help="make the owner's folder documents exactly this folder: remove every other (uploads stay)",
        )
        parser.add_argument(
            "--owner",
            metavar="USERNAME",
            help="index the files as this user's documents, which only that user's research searches and cites "
            "(default: shared with all users)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        folder: Path = options["folder"]
        if not folder.is_dir():
            raise CommandError(f"{folder} is not a folder")
        owner_id = None
        if options["owner"]:
            owner = get_user_model().objects.filter(username=options["owner"]).first()
            if owner is None:
                raise CommandError(f"no user named {options['owner']}")
            owner_id = owner.pk
        report = self.stdout.write if options["verbosity"] >= 2 else None
        summary = index_folder(folder, replace=options["replace"], report=report, owner_id=owner_id)
        # A folder of documents often holds images and the like: those are not errors, but each is named, so a
        # format the owner expected to be read is noticed.
        for path in summary.unsupported:
            self.stdout.write(f"skipped {path}: {unsupported_reason(Path(path))}")
        for path, reason in summary.failed:
            self.stderr.write(f"could not index {path}: {reason}")
        self.stdout.write(f"Indexed {folder.resolve()}: {summary.describe()}.")
