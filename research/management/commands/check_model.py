"""Probe the configured model server for each agent's model; print a table, a verdict per agent and the settings
to use. The probes and the verdicts are workers/clients/model_check.py; the run is stored for the admin."""

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from research.models import ModelCheck, ModelVerdict
from workers.clients import model_check


class Command(BaseCommand):
    help = (
        "Check each agent's model on the configured server (OPENAI_BASE_URL): reachable, latency, context window, "
        "structured output, reasoning noise, tokens per second, silent prompt truncation. Prints a verdict per "
        "agent and the settings to use; exits 1 when an agent's model will not work."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--json", action="store_true", help="print the report as JSON")
        parser.add_argument("--brief", action="store_true", help="print the verdicts and settings only")
        parser.add_argument(
            "--timeout",
            type=float,
            default=None,
            help="seconds one probe may wait for an answer (default: the larger of LLM_TIMEOUT and LLM_CALL_DEADLINE)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        report = model_check.check(timeout=options["timeout"])
        text = model_check.render(report)
        ModelCheck.objects.create(
            base_url=report.base_url[:500],
            model_names=", ".join(probe.model for probe in report.models)[:500],
            verdict=report.verdict,
            report=report.as_dict(),
            output=text,
        )
        if options["json"]:
            self.stdout.write(model_check.as_json(report))
        elif options["brief"]:
            self.stdout.write(f"Model check: {ModelVerdict(report.verdict).label}")
            self.stdout.write(model_check.render_verdicts(report))
            if report.settings:
                self.stdout.write("Settings to use (paste into .env):\n" + "\n".join(report.settings))
        else:
            if settings.RESEARCH_ENGINE != "llm":
                self.stdout.write(f"(RESEARCH_ENGINE is {settings.RESEARCH_ENGINE}: research does not use this model)")
            self.stdout.write(text)
        if report.verdict == ModelVerdict.WILL_NOT_WORK:
            raise CommandError("an agent's model will not work (see the verdicts)", returncode=1)
