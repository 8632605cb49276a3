"""Start a research from the command line (the same path as POST /api/research/start), optionally waiting."""

import time
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction
from django.utils import timezone

from research.api import make_title
from research.models import FINISHED_STATUSES, FollowUpQuestion, Research, ResearchStatus
from workers.agents.engines import default_engine
from workers.tasks import start_research_task


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

    def handle(self, *args: Any, **options: Any) -> None:
        if not 1 <= options["breadth"] <= settings.MAX_BREADTH or not 1 <= options["depth"] <= settings.MAX_DEPTH:
            raise CommandError(f"breadth must be 1..{settings.MAX_BREADTH} and depth 1..{settings.MAX_DEPTH}")
        user = get_user_model().objects.filter(username=options["user"]).first()
        if user is None:
            raise CommandError(f"no user {options['user']!r}")
        pairs = [item.split("=", 1) if "=" in item else (item, "") for item in options["answer"]]
        with transaction.atomic():
            research = Research.objects.create(
                owner=user,
                prompt=options["prompt"],
                title=make_title(options["prompt"]),
                num_questions=len(pairs),
                status=ResearchStatus.QUEUED,
                breadth=options["breadth"],
                depth=options["depth"],
                claimed_at=timezone.now(),
                engine=default_engine(),
            )
            FollowUpQuestion.objects.bulk_create(
                FollowUpQuestion(research=research, position=i, question=q, answer=a) for i, (q, a) in enumerate(pairs)
            )
            research_id = str(research.pk)
            transaction.on_commit(lambda: start_research_task.delay(research_id), robust=True)
        self.stdout.write(research_id)
        if options["wait"]:
            while Research.objects.get(pk=research_id).status not in FINISHED_STATUSES:
                time.sleep(0.5)
            self.stdout.write(Research.objects.get(pk=research_id).status)
