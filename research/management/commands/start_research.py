"""Start a research from the command line, through the same service and checks as POST /api/research/start."""

import time
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from research.control import services
from research.models import FINISHED_STATUSES, Research


class Command(BaseCommand):
    help = "Queue a research for a user; prints its id (with --wait, its final status)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--user", required=True, help="username of the owner")
        parser.add_argument("--prompt", required=True)
        parser.add_argument("--breadth", type=int, default=2)
        parser.add_argument("--depth", type=int, default=2)
        parser.add_argument(
            "--answer",
            action="append",
            default=[],
            metavar="QUESTION=ANSWER",
            help="a follow-up question and its answer (repeatable)",
        )
        parser.add_argument("--wait", action="store_true", help="wait until the research ends")
        # A budget (research/control/budgets.py); the server's defaults stand in for the ones not given.
        parser.add_argument("--budget-seconds", type=int, default=None)
        parser.add_argument("--budget-tokens", type=int, default=None)
        parser.add_argument("--budget-usd", type=float, default=None)
        # Adaptive mode: --depth is the maximum; branches stop once good enough (docs/engine.md, "Two modes").
        parser.add_argument("--mode", choices=["fixed", "adaptive"], default=None)
        parser.add_argument("--min-depth", type=int, default=None)
        parser.add_argument("--quality-threshold", type=int, default=None)
        parser.add_argument(
            "--report-length", default=None, help="brief, standard (default), long, or a number of words"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        user = get_user_model().objects.filter(username=options["user"]).first()
        if user is None:
            raise CommandError(f"no user {options['user']!r}")
        pairs = [tuple(item.split("=", 1)) if "=" in item else (item, "") for item in options["answer"]]
        try:
            with transaction.atomic():  # refused: the new research is not kept either
                research = services.create_with_answers(user, options["prompt"], pairs)
                budget = {key: options[f"budget_{key}"] for key in ("seconds", "tokens", "usd")}
                adaptive = {key: options[key] for key in ("mode", "min_depth", "quality_threshold")}
                length = options["report_length"]
                adaptive["report_length"] = int(length) if length and length.isdigit() else length
                services.start_research(research, None, options["breadth"], options["depth"], budget, **adaptive)
        except services.ServiceError as exc:
            raise CommandError(f"{exc.field or 'research'}: {exc.message}") from exc
        research_id = str(research.pk)
        self.stdout.write(research_id)
        if options["wait"]:
            while Research.objects.get(pk=research_id).status not in FINISHED_STATUSES:
                time.sleep(0.5)
            self.stdout.write(Research.objects.get(pk=research_id).status)
