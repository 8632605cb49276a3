"""Schedules: a research run again daily, weekly, by a cron line or every so many seconds.

Each schedule is a row with its next due time. Celery beat sends `run_schedules_task` every SCHEDULE_TICK seconds;
the tick takes each due row under a row lock that other ticks skip (SKIP LOCKED), moves its due time on and, in
the same transaction, starts the run with a conditional update of the research's status. So two beats, a tick
delivered twice or a tick that overlaps a slow one never start a run twice, and a run that has not ended when the
next is due is not doubled: that due time is passed over ("running").

Why not django-celery-beat: its database scheduler lives inside the one beat process and sends a task at each due
time whatever the research is doing; what must hold here (one run at a time per research, nothing missed or
doubled when beat restarts) has to be decided by the database anyway, and the same beat already sends the
sweeper. The cron line is read by Celery's own `crontab` (the same field syntax), evaluated in UTC.
"""

import re
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from celery.schedules import crontab
from django.conf import settings
from django.db import transaction
from django.db.models import Max
from django.utils import timezone
from urllib3.util import parse_url

from research.control import dispatch
from research.control.dispatch import QUEUED
from research.control.services import InvalidInput, TooManyActive, hold_active_slot, lock_owner
from research.models import (
    Document,
    DocumentKind,
    EventType,
    QueryStatus,
    Research,
    ResearchStatus,
    Schedule,
    SerpQuery,
)
from research.record import transitions
from research.record.events import record_event
from research.record.planning import descendants

NAMED = {"daily": timedelta(days=1), "weekly": timedelta(weeks=1)}
# A research ended this way runs again when due; a cancelled one waits for its user.
RUNNABLE = (ResearchStatus.COMPLETED, ResearchStatus.FAILED)
MAX_WEBHOOK_CHARS = 2000
# How far ahead a cron line's next time is looked for: a line that matches nothing in that time (30 February)
# is refused.
CRON_HORIZON_DAYS = 366 * 4 + 1
# Due schedules a tick takes at most; the rest wait for the next tick.
MAX_PER_TICK = 100


@dataclass(frozen=True)
class Cron:
    """A cron line's fields, each expanded to the values it allows (weekdays: Sunday is 0)."""

    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]
    # Both day fields restricted: a day matches either, as cron has it.
    either_day: bool


@dataclass(frozen=True)
class Every:
    """How often a schedule runs: a fixed interval, or a cron line."""

    text: str
    interval: timedelta | None = None
    cron: Cron | None = None

    def next_after(self, moment: datetime, due: datetime | None = None) -> datetime:
        """The first run time after `moment`: for an interval, the last due time moved on by whole intervals
        (so late ticks do not make it drift), for a cron line its next matching minute (UTC)."""
        if self.interval is not None:
            start = due or moment
            if start > moment:
                return start
            steps = (moment - start) // self.interval + 1
            return start + steps * self.interval
        assert self.cron is not None
        return _next_cron(self.cron, moment)


def _next_cron(cron: Cron, moment: datetime) -> datetime:
    """The line's first minute after `moment`, looked for day by day (a line that runs once a year is found in a
    few hundred steps)."""
    start = moment.astimezone(UTC).replace(second=0, microsecond=0) + timedelta(minutes=1)
    day = start.replace(hour=0, minute=0)
    for _ in range(CRON_HORIZON_DAYS):
        in_month, in_week = day.day in cron.days, (day.isoweekday() % 7) in cron.weekdays
        if day.month in cron.months and ((in_month or in_week) if cron.either_day else (in_month and in_week)):
            for hour in cron.hours:
                for minute in cron.minutes:
                    time = day.replace(hour=hour, minute=minute)
                    if time >= start:
                        return time
        day += timedelta(days=1)
    raise InvalidInput("this cron line never comes round", "every")


def parse_every(value: object, stored: bool = False) -> Every:
    """How often: "daily", "weekly", a five-field cron line, or a whole number of seconds (at least
    SCHEDULE_MIN_INTERVAL, unless `stored`: a schedule accepted once runs as it was set, whatever the setting says
    now)."""
    if isinstance(value, bool) or value is None:
        raise InvalidInput('must be "daily", "weekly", a cron line or a number of seconds', "every")
    if isinstance(value, int):
        return _seconds(value, stored)
    if not isinstance(value, str):
        raise InvalidInput('must be "daily", "weekly", a cron line or a number of seconds', "every")
    text = " ".join(value.split()).lower()
    if text in NAMED:
        return Every(text, interval=NAMED[text])
    if text.isdigit():
        return _seconds(int(text), stored)
    fields = text.split(" ")
    if len(fields) != 5 or len(text) > 100 or not re.fullmatch(r"[0-9a-z*/,\- ]+", text):
        raise InvalidInput('must be "daily", "weekly", a cron line of five fields or a number of seconds', "every")
    minute, hour, day_of_month, month, day_of_week = fields
    try:
        # Celery's parser of the five fields (names, ranges, steps, lists); an impossible one ("61") raises.
        parsed = crontab(
            minute=minute, hour=hour, day_of_month=day_of_month, month_of_year=month, day_of_week=day_of_week
        )
        values = {name: getattr(parsed, name) for name in ("minute", "hour", "day_of_month", "month_of_year")}
        weekdays = getattr(parsed, "day_of_week")  # noqa: B009  # set by its parser: unknown to the type checker
    except (ValueError, TypeError, KeyError) as exc:
        raise InvalidInput(f"not a cron line: {exc}", "every") from None
    cron = Cron(
        minutes=tuple(sorted(values["minute"])),
        hours=tuple(sorted(values["hour"])),
        days=frozenset(values["day_of_month"]),
        months=frozenset(values["month_of_year"]),
        weekdays=frozenset(weekdays),
        either_day=day_of_month != "*" and day_of_week != "*",
    )
    every = Every(text, cron=cron)
    every.next_after(timezone.now())  # a line that never comes round is refused now, not at its first tick
    return every


def _seconds(value: int, stored: bool) -> Every:
    low, high = 1 if stored else settings.SCHEDULE_MIN_INTERVAL, 366 * 86400
    if not low <= value <= high:
        raise InvalidInput(f"an interval must be {low}..{high} seconds", "every")
    return Every(str(value), interval=timedelta(seconds=value))


def check_webhook(value: object) -> str:
    """An http(s) URL without credentials, or "" for none. Where it points is checked when it is called: the call
    connects only to public addresses."""
    if value is None or value == "":
        return ""
    if not isinstance(value, str) or len(value) > MAX_WEBHOOK_CHARS:
        raise InvalidInput(f"must be an http or https URL of at most {MAX_WEBHOOK_CHARS} characters", "webhook")
    try:
        parsed = parse_url(value.strip())
    except ValueError:
        raise InvalidInput("not a URL", "webhook") from None
    if (parsed.scheme or "").lower() not in ("http", "https") or not parsed.host or parsed.auth:
        raise InvalidInput("must be an http or https URL with a host and no credentials", "webhook")
    return value.strip()


def set_schedule(research: Research, every_value: object, webhook_value: object) -> tuple[Schedule, bool]:
    """Schedule the research (replacing its schedule, if it has one; its webhook key is kept); the schedule and
    whether it is new. Its first run is one period from now."""
    every = parse_every(every_value)
    webhook = check_webhook(webhook_value)
    if research.status == ResearchStatus.DRAFT or research.status == ResearchStatus.AWAITING_ANSWERS:
        raise InvalidInput("start the research first: a schedule runs it again", "research_id")
    now = timezone.now()
    with transaction.atomic():
        schedule, created = Schedule.objects.select_for_update().get_or_create(
            research=research,
            defaults={"every": every.text, "webhook": webhook, "secret": new_secret(), "next_run_at": now},
        )
        schedule.every, schedule.webhook, schedule.paused = every.text, webhook, False
        schedule.next_run_at = every.next_after(now)
        schedule.save()
    return schedule, created


def new_secret() -> str:
    return "whsec_" + secrets.token_urlsafe(32)


def pause(schedule: Schedule, paused: bool) -> Schedule:
    """Pause or resume; a resumed schedule runs next at its next time from now, not at once for what it missed."""
    with transaction.atomic():
        locked = Schedule.objects.select_for_update().get(pk=schedule.pk)
        locked.paused = paused
        if not paused:
            locked.next_run_at = parse_every(locked.every, stored=True).next_after(timezone.now(), locked.next_run_at)
        locked.save(update_fields=["paused", "next_run_at"])
    return locked


def run_due(now: datetime | None = None) -> dict[str, int]:
    """Start the run of every schedule due at `now` (one tick of beat); how many of each result."""
    now = now or timezone.now()
    results: dict[str, int] = {}
    for _ in range(MAX_PER_TICK):
        with transaction.atomic():
            schedule = (
                Schedule.objects.select_for_update(skip_locked=True)
                .filter(paused=False, next_run_at__lte=now)
                .order_by("next_run_at")
                .first()
            )
            if schedule is None:
                break
            result = run_again(schedule)
            schedule.next_run_at = parse_every(schedule.every, stored=True).next_after(now, schedule.next_run_at)
            schedule.last_run_at, schedule.last_result = now, result
            schedule.save()
        results[result] = results.get(result, 0) + 1
    return results


def run_again(schedule: Schedule) -> str:
    """Run the scheduled research again, inside the caller's transaction (which holds the schedule row): its
    top-level queries of its latest run searched anew in a new round, so that its next report version says what
    the pages say now. "started", or why not: "running" (its last run has not ended), "at_cap" (its owner runs
    as many researches as they may), "cancelled" (its user cancelled it: it waits for them), "no_queries" (it
    ended before it planned any), "announcing" (the last run's webhook call is still to be made)."""
    research = Research.objects.only("owner_id").get(pk=schedule.research_id)
    lock_owner(research.owner_id)  # before the research row (see services.lock_owner)
    locked = Research.objects.select_for_update(no_key=True).get(pk=research.pk)
    if locked.status == ResearchStatus.CANCELLED:
        return "cancelled"
    if locked.status not in RUNNABLE:
        return "running"
    if schedule.webhook and schedule.run_version > schedule.notified_version:
        return "announcing"  # the last run's version is not announced yet: the next tick calls the webhook first
    try:
        hold_active_slot(locked.owner_id)
    except TooManyActive:
        return "at_cap"
    queries = _queries_to_run_again(locked)
    if not queries:
        return "no_queries"  # it ended before it planned any: nothing to search again
    breadth, depth = locked.breadth or 1, locked.depth or 1
    last = SerpQuery.objects.filter(research_id=locked.pk, depth=1).aggregate(position=Max("position"))
    rounds = SerpQuery.objects.filter(research_id=locked.pk).aggregate(round=Max("round"))
    run_round = max(rounds["round"] or 0, locked.gap_rounds or 0) + 1
    reported = Document.objects.filter(
        research_id=locked.pk, kind=DocumentKind.REPORT, version=locked.report_version
    ).exists()
    planned = len(queries) * (1 + descendants(breadth, depth, 1))
    if not transitions.run_again(locked.pk, planned, run_round, list(RUNNABLE), next_version=reported):
        return "running"
    first = (last["position"] if last["position"] is not None else -1) + 1
    now = timezone.now()
    created = SerpQuery.objects.bulk_create(
        SerpQuery(
            research_id=locked.pk,
            depth=1,
            position=first + index,
            round=run_round,
            query=query,
            objective=objective,
            claimed_at=now,
            claimed_by=QUEUED,  # handed on to its search
        )
        for index, (query, objective) in enumerate(queries)
    )
    schedule.runs += 1
    schedule.run_version = locked.report_version + int(reported)
    record_event(
        locked.pk,
        EventType.SCHEDULED_RUN,
        {"run": schedule.runs, "round": run_round, "version": schedule.run_version, "queries": len(created)},
    )
    dispatch.SEARCH.each_on_commit([query.pk for query in created], locked.pk)
    return "started"


def _queries_to_run_again(research: Research) -> list[tuple[str, str]]:
    """The distinct top-level queries of the research's latest run (its own and those added to it since: gap
    rounds, branches its user added), in the order they were planned; those of every run where that one has
    none."""
    top = SerpQuery.objects.filter(research_id=research.pk, depth=1).exclude(status=QueryStatus.CANCELLED)
    latest = top.filter(round__gte=research.run_round)
    rows = (latest if latest.exists() else top).order_by("round", "position").values_list("query", "objective")
    return list(dict.fromkeys(rows))
