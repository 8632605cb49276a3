"""Schedules: a research run again daily, weekly, by a cron line or every so many seconds; each run a new report
version that starts with what changed (from both runs' stored findings), a signed webhook once it lands, never two
runs at once; set, read, paused and ended by the owner alone (API and pages)."""

import hashlib
import hmac
import json
import threading
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.test import Client, override_settings
from django.utils import timezone

from devtools.processes import wait_until
from devtools.servers import process_env
from research.control import schedules, tokens
from research.control.services import InvalidInput
from research.models import (
    Document,
    DocumentKind,
    Event,
    EventType,
    Page,
    Research,
    ResearchStatus,
    Schedule,
    SerpQuery,
)
from research.record.planning import descendants
from tests.support.e2e import WORKER_ENV, start_research, wait_finished
from tests.support.factories import build_tree
from tests.support.private_services import Beat
from workers.pipeline import changes, webhooks
from workers.pipeline.changes import Finding

NOW = datetime(2026, 12, 6, 17, 33, 12, tzinfo=UTC)


# --- how often ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("every", "after"),
    [
        ("daily", datetime(2026, 12, 7, 17, 33, 12, tzinfo=UTC)),
        ("weekly", datetime(2026, 12, 13, 17, 33, 12, tzinfo=UTC)),
        ("*/15 9 * * mon-fri", datetime(2026, 12, 7, 9, 0, tzinfo=UTC)),  # 6 December 2026 is a Sunday
        ("0 0 29 2 *", datetime(2028, 2, 29, tzinfo=UTC)),
        # Both day fields given: either matches, as cron has it (13 December is a Sunday, before 1 January).
        ("0 12 1 * sun", datetime(2026, 12, 13, 12, 0, tzinfo=UTC)),
        ("  0   6 * *  MON ", datetime(2026, 12, 7, 6, 0, tzinfo=UTC)),
        ("7200", datetime(2026, 12, 6, 19, 33, 12, tzinfo=UTC)),
        (7200, datetime(2026, 12, 6, 19, 33, 12, tzinfo=UTC)),
    ],
)
def test_every_names_its_next_time(every, after) -> None:
    assert schedules.parse_every(every).next_after(NOW) == after


@pytest.mark.parametrize(
    "every", ["0 0 30 2 *", "61 * * * *", "a b c d e", "* * *", "* * * * * *", "", True, None, 5, 10**9, 1.5, []]
)
def test_what_is_not_a_schedule_is_refused(every) -> None:
    with pytest.raises(InvalidInput) as refused:
        schedules.parse_every(every)
    assert refused.value.field == "every"


def test_an_interval_keeps_to_its_times_when_ticks_come_late() -> None:
    hourly = schedules.parse_every(3600)
    due = NOW
    late = NOW + timedelta(seconds=50)
    assert hourly.next_after(late, due) == NOW + timedelta(hours=1)
    # a beat down for hours catches up once, at the next time from now, not with a run for each missed one
    assert hourly.next_after(NOW + timedelta(hours=5, minutes=1), due) == NOW + timedelta(hours=6)


# --- what changed ------------------------------------------------------------------------------------------------


def test_what_changed_names_moved_figures_new_findings_and_sources() -> None:
    before = [
        Finding("https://a.example/sales", "Sales", "Installations reached 4.2 million units in 2025."),
        Finding("https://a.example/sales", "Sales", "Prices fell slightly."),
        Finding("https://b.example/old", "Old page", "The old page said 12 things."),
    ]
    now = [
        Finding("https://a.example/sales", "Sales", "Installations reached  4.9 million units in 2025."),
        Finding("https://a.example/sales", "Sales", "Prices fell slightly."),
        Finding("https://c.example/new", "New *page*", "A new survey found 3 causes."),
    ]
    found = changes.compare(before, now, 1, NOW.isoformat())
    assert [(old.text, new.text) for old, new in found.moved] == [
        ("Installations reached 4.2 million units in 2025.", "Installations reached 4.9 million units in 2025.")
    ]
    assert [f.url for f in found.new] == ["https://c.example/new"]
    assert [f.url for f in found.new_sources] == ["https://c.example/new"]
    assert [f.url for f in found.gone_sources] == ["https://b.example/old"]
    assert found.unchanged == 1
    section = changes.render(found)
    assert section.startswith("## What changed\n")
    assert "from 4.2 to 4.9:" in section
    assert '(https://a.example/sales "Installations reached 4.9 million units in 2025.")' in section
    assert "New \\*page\\*" in section  # a title is text, never markup
    assert "https://b.example/old" not in section and "(`b.example/old`)" in section  # gone: named, not linked
    assert found.as_stats() == {
        "since_version": 1,
        "moved_figures": 1,
        "new_findings": 1,
        "new_sources": 1,
        "gone_sources": 1,
        "unchanged_findings": 1,
    }
    same = changes.compare(before, before, 1, NOW.isoformat())
    assert "Nothing changed: the same 3 findings" in changes.render(same)
    report = "# Title\n\n> A note.\n\n## Summary\n\nText.\n"
    assert changes.insert(report, "## What changed\n\n- x\n") == (
        "# Title\n\n> A note.\n\n## What changed\n\n- x\n\n## Summary\n\nText.\n"
    )


# --- the API and the pages ---------------------------------------------------------------------------------------


def schedule_api(client, research_id, method="post", **body):
    call = getattr(client, method)
    return call(f"/api/research/{research_id}/schedule", data=json.dumps(body), content_type="application/json")


@pytest.mark.django_db
def test_the_owner_sets_reads_pauses_and_ends_a_schedule(api, user) -> None:
    research = build_tree(user, 1, 1)
    assert api.get(f"/api/research/{research.pk}/schedule").status_code == 404
    made = schedule_api(api, research.pk, every="weekly", webhook="https://hooks.example.com/r")
    assert made.status_code == 201, made.content
    body = made.json()
    assert body["every"] == "weekly" and body["webhook"] == "https://hooks.example.com/r"
    assert body["webhook_secret"].startswith("whsec_") and body["paused"] is False and body["runs"] == 0
    next_run = datetime.fromisoformat(body["next_run_at"])
    assert timedelta(days=6, hours=23) < next_run - timezone.now() <= timedelta(days=7)
    assert api.get(f"/api/research/{research.pk}/schedule").json() == body
    # replaced: a cron line, the webhook's key kept
    again = schedule_api(api, research.pk, every="0 6 * * mon").json()
    assert (
        again["every"] == "0 6 * * mon" and again["webhook"] == "" and again["webhook_secret"] == body["webhook_secret"]
    )
    paused = schedule_api(api, research.pk, "patch", paused=True)
    assert paused.status_code == 200 and paused.json()["paused"] is True
    assert schedule_api(api, research.pk, "patch", paused=False).json()["paused"] is False
    assert schedule_api(api, research.pk, "delete").status_code == 204
    assert api.get(f"/api/research/{research.pk}/schedule").status_code == 404
    assert schedule_api(api, research.pk, "delete").status_code == 404


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "every"),
        ({"every": "hourly"}, "every"),
        ({"every": 60}, "every"),
        ({"every": "daily", "webhook": "ftp://example.com/x"}, "webhook"),
        ({"every": "daily", "webhook": "https://user:pw@example.com/x"}, "webhook"),
        ({"every": "daily", "webhook": 5}, "webhook"),
        ({"every": "daily", "webhook": "https://example.com/" + "x" * 2000}, "webhook"),
        ({"every": "daily", "when": "now"}, "when"),
    ],
)
def test_a_bad_schedule_is_a_400_naming_its_field(api, user, body, field) -> None:
    research = build_tree(user, 1, 1)
    refused = schedule_api(api, research.pk, **body)
    assert refused.status_code == 400, refused.content
    assert refused.json()["error"]["field"] == field
    assert not Schedule.objects.exists()


@pytest.mark.django_db
def test_a_draft_cannot_be_scheduled_and_paused_must_be_a_bool(api, user) -> None:
    draft = Research.objects.create(owner=user, prompt="p", title="t", status=ResearchStatus.AWAITING_ANSWERS)
    assert schedule_api(api, draft.pk, every="daily").status_code == 400
    research = build_tree(user, 1, 1)
    schedule_api(api, research.pk, every="daily")
    assert schedule_api(api, research.pk, "patch", paused="yes").status_code == 400


@pytest.mark.django_db
def test_another_users_schedule_is_404_through_every_door(api, stranger, user, other_user) -> None:
    research = build_tree(user, 1, 1)
    schedule_api(api, research.pk, every="daily")
    _, secret = tokens.create(other_user, "cli", False)
    by_token = Client(headers={"Authorization": f"Bearer {secret}"})
    for client in (stranger, by_token):
        assert client.get(f"/api/research/{research.pk}/schedule").status_code == 404
        assert schedule_api(client, research.pk, every="weekly").status_code == 404
        assert schedule_api(client, research.pk, "patch", paused=True).status_code == 404
        assert schedule_api(client, research.pk, "delete").status_code == 404
    assert stranger.get(f"/research/{research.pk}/schedule/").status_code == 404
    assert stranger.post(f"/research/{research.pk}/schedule/delete/").status_code == 404
    assert research.pk.hex not in stranger.get("/schedules/").content.decode().replace("-", "")
    schedule = Schedule.objects.get()
    assert schedule.every == "daily" and not schedule.paused


@pytest.mark.django_db
def test_a_read_only_token_reads_a_schedule_and_changes_nothing(api, user) -> None:
    research = build_tree(user, 1, 1)
    schedule_api(api, research.pk, every="daily")
    _, secret = tokens.create(user, "reader", True)
    reader = Client(headers={"Authorization": f"Bearer {secret}"})
    assert reader.get(f"/api/research/{research.pk}/schedule").status_code == 200
    assert schedule_api(reader, research.pk, every="weekly").status_code == 403
    assert schedule_api(reader, research.pk, "patch", paused=True).status_code == 403
    assert schedule_api(reader, research.pk, "delete").status_code == 403
    assert Schedule.objects.get().every == "daily"


@pytest.mark.django_db
def test_the_pages_set_list_pause_and_end_a_schedule(api, user) -> None:
    research = build_tree(user, 1, 1)
    page = api.get(f"/research/{research.pk}/schedule/")
    assert page.status_code == 200 and "New schedule" in page.content.decode()
    wrong = api.post(f"/research/{research.pk}/schedule/", {"every": "cron", "cron": "99 * * * *"})
    assert wrong.status_code == 400 and 'aria-invalid="true"' in wrong.content.decode()
    made = api.post(f"/research/{research.pk}/schedule/", {"every": "cron", "cron": "0 6 * * mon", "webhook": ""})
    assert made.status_code == 302 and Schedule.objects.get().every == "0 6 * * mon"
    listed = api.get("/schedules/").content.decode()
    assert "Fusion limits" in listed and "0 6 * * mon" in listed
    assert api.post(f"/research/{research.pk}/schedule/pause/", {"next": "list"})["Location"] == "/schedules/"
    assert Schedule.objects.get().paused
    api.post(f"/research/{research.pk}/schedule/resume/")
    assert not Schedule.objects.get().paused
    api.post(f"/research/{research.pk}/schedule/delete/")
    assert not Schedule.objects.exists()
    assert api.post(f"/research/{research.pk}/schedule/explode/").status_code == 404


# --- the tick ------------------------------------------------------------------------------------------------------


def due_schedule(research: Research, every: str = "daily", **fields) -> Schedule:
    return Schedule.objects.create(
        research=research, every=every, secret="whsec_test", next_run_at=timezone.now() - timedelta(seconds=1), **fields
    )


@pytest.mark.django_db
def test_a_due_schedule_runs_the_research_again_in_a_new_round(
    user, published, django_capture_on_commit_callbacks
) -> None:
    research = build_tree(user, 2, 2)
    schedule = due_schedule(research)
    with django_capture_on_commit_callbacks(execute=True):
        assert schedules.run_due() == {"started": 1}
    research.refresh_from_db()
    assert research.status == ResearchStatus.RUNNING and research.report_version == 2 and research.run_round == 1
    again = SerpQuery.objects.filter(research=research, round=1).order_by("position")
    assert [q.query for q in again] == ["q1-0", "q1-1"] and {q.depth for q in again} == {1}
    # each top-level query and the children it will plan (half the breadth below it, rounded up)
    assert research.pending_queries == 2 * (1 + descendants(2, 2, 1)) == 4
    assert published.count("workers.tasks.run_query_task") == 2
    schedule.refresh_from_db()
    assert schedule.runs == 1 and schedule.run_version == 2 and schedule.last_result == "started"
    assert timedelta(hours=23) < schedule.next_run_at - timezone.now() <= timedelta(days=1)
    event = Event.objects.get(research=research, type=EventType.SCHEDULED_RUN)
    assert event.data == {"run": 1, "round": 1, "version": 2, "queries": 2}
    assert schedules.run_due() == {}  # not due again


@pytest.mark.django_db
def test_a_stored_interval_runs_as_it_was_set(user, published) -> None:
    research = build_tree(user, 1, 1)
    due_schedule(research, every="60")  # accepted when the shortest interval allowed was shorter
    assert schedules.run_due() == {"started": 1}
    assert Schedule.objects.get().next_run_at - timezone.now() <= timedelta(seconds=60)


@pytest.mark.django_db
def test_a_run_that_has_not_ended_is_not_doubled(user, published) -> None:
    research = build_tree(user, 1, 1)
    schedule = due_schedule(research)
    schedules.run_due()
    Schedule.objects.filter(pk=schedule.pk).update(next_run_at=timezone.now() - timedelta(seconds=1))
    assert schedules.run_due() == {"running": 1}
    assert SerpQuery.objects.filter(research=research, round=1).count() == 1
    assert SerpQuery.objects.filter(research=research, round=2).count() == 0
    schedule.refresh_from_db()
    assert schedule.runs == 1 and schedule.last_result == "running" and schedule.next_run_at > timezone.now()


@pytest.mark.django_db
def test_a_landed_version_is_announced_before_the_next_run_starts(user, published, fakes, fake_web) -> None:
    research = build_tree(user, 1, 1)
    Document.objects.create(research=research, kind=DocumentKind.REPORT, version=2, markdown="# v2\n", stats={})
    url = fake_web.add_page("/hooks/first", "{}", content_type="application/json")
    due_schedule(research, webhook=url, run_version=2)
    assert schedules.run_due() == {"announcing": 1}
    assert SerpQuery.objects.filter(research=research, round=1).count() == 0
    assert webhooks.deliver_due() == {"delivered": 1, "failed": 0}
    Schedule.objects.update(next_run_at=timezone.now() - timedelta(seconds=1))
    assert schedules.run_due() == {"started": 1}


@pytest.mark.django_db
def test_paused_cancelled_and_capped_schedules_do_not_run(user, published, settings) -> None:
    paused = due_schedule(build_tree(user, 1, 1), paused=True)
    cancelled = build_tree(user, 1, 1)
    Research.objects.filter(pk=cancelled.pk).update(status=ResearchStatus.CANCELLED)
    due_schedule(cancelled)
    assert schedules.run_due() == {"cancelled": 1}
    assert Schedule.objects.get(pk=paused.pk).runs == 0
    settings.MAX_ACTIVE_RESEARCH_PER_USER = 1
    Research.objects.create(owner=user, prompt="p", title="busy", status=ResearchStatus.RUNNING)
    due_schedule(build_tree(user, 1, 1))
    assert schedules.run_due() == {"at_cap": 1}
    assert not published


@pytest.mark.django_db(transaction=True)
def test_two_ticks_at_once_start_one_run(user, published) -> None:
    research = build_tree(user, 1, 1)
    due_schedule(research)
    results: list[dict[str, int]] = []
    barrier = threading.Barrier(2)

    def tick() -> None:
        barrier.wait()
        try:
            results.append(schedules.run_due())
        finally:
            connection.close()

    threads = [threading.Thread(target=tick) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(result.get("started", 0) for result in results) == 1
    assert SerpQuery.objects.filter(research=research, round=1).count() == 1
    assert Schedule.objects.get().runs == 1


# --- the webhook ---------------------------------------------------------------------------------------------------


def signed_ok(secret: str, request) -> bool:
    timestamp = request.headers["X-DeepResearch-Timestamp"]
    expected = hmac.new(secret.encode(), timestamp.encode() + b"." + request.raw_body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(request.headers["X-DeepResearch-Signature"], f"sha256={expected}")


@pytest.mark.django_db
def test_a_landed_version_is_announced_once_signed(user, fakes, fake_web) -> None:
    research = build_tree(user, 1, 1)
    Document.objects.create(research=research, kind=DocumentKind.REPORT, version=2, markdown="# v2\n", stats={})
    url = fake_web.add_page("/hooks/landed", '{"ok": true}', content_type="application/json")
    schedule = Schedule.objects.create(
        research=research, every="daily", secret="whsec_k", webhook=url, next_run_at=timezone.now(), run_version=2
    )
    assert webhooks.deliver_due() == {"delivered": 1, "failed": 0}
    assert webhooks.deliver_due() == {"delivered": 0, "failed": 0}  # once per version
    [call] = [r for r in fake_web.requests if r.path == "/hooks/landed"]
    assert call.method == "POST" and signed_ok("whsec_k", call)
    assert call.body["event"] == "report.ready" and call.body["version"] == 2
    assert call.body["research_id"] == str(research.pk) and call.body["report_url"].endswith("report.md?version=2")
    schedule.refresh_from_db()
    assert schedule.notified_version == 2 and schedule.webhook_result == "200"


@pytest.mark.django_db
def test_a_webhook_never_reaches_a_private_address(user, fakes, fake_web) -> None:
    research = build_tree(user, 1, 1)
    url = fake_web.add_page("/hooks/private", "ok")
    Schedule.objects.create(
        research=research, every="daily", secret="k", webhook=url, next_run_at=timezone.now(), run_version=1
    )
    with override_settings(WEBHOOK_ALLOWED_PRIVATE_HOSTS=frozenset()):
        assert webhooks.deliver_due() == {"delivered": 0, "failed": 1}
    assert fake_web.count("/hooks/private") == 0
    assert Schedule.objects.get().webhook_result == "blocked: private address"


# --- on the real stack: celery beat, the workers, the fake web whose page changes ----------------------------------


FIGURE_PAGE = "/reports/heat-pump-sales"


def figure_page(units: str) -> str:
    return (
        "<!doctype html><html><head><title>Nordic heat pump sales</title></head><body><main><article>"
        f"<h1>Nordic heat pump sales</h1><p>Installations in the Nordic countries reached {units} units in 2025."
        "</p><p>Cold-climate models kept a seasonal COP above 2.5 in every survey.</p>"
        "</article></main></body></html>"
    )


@pytest.mark.timeout(240)
def test_a_short_schedule_runs_twice_and_says_what_moved(
    api, user, workers, research_model, internet, fake_web, fake_searx, fake_llm, settings
) -> None:
    settings.SCHEDULE_MIN_INTERVAL = 1
    page_url = fake_web.add_page(FIGURE_PAGE, figure_page("42000"))
    hook = fake_web.add_page("/hooks/schedule", '{"ok": true}', content_type="application/json")
    fake_searx.results_for = lambda query: [
        {"url": page_url, "title": "Nordic heat pump sales", "content": "Installations reached"},
        {"url": fake_web.page_url("cold-climate-field-study"), "title": "Field study", "content": "COP"},
    ]
    research_id = start_research(api, 1, 1)
    first = wait_finished(research_id)
    assert first.status == ResearchStatus.COMPLETED, first.error
    # A run takes longer than the period: each due time while it runs is passed over, never doubled.
    # (each page's analysis takes 2 s, the period and beat's tick 1 s: a tick finds the schedule due mid-run)
    fake_llm.delays["website_analysis"] = 2.0
    made = schedule_api(api, research_id, every=1, webhook=hook)
    assert made.status_code == 201, made.content
    secret = made.json()["webhook_secret"]
    beat = Beat(process_env({**WORKER_ENV, **internet, "SCHEDULE_TICK": "1"})).start()
    try:
        # the first scheduled run has fetched the page; from now on the page reads 49000
        wait_until(
            lambda: Page.objects.filter(
                research_id=research_id, url=page_url, run_round__gt=0, status="fetched"
            ).exists(),
            90,
            "the first scheduled run's fetch of the figure page",
        )
        fake_web.add_page(FIGURE_PAGE, figure_page("49000"))
        seen: set[str] = set()

        def third_version() -> bool:
            seen.add(Schedule.objects.get(research_id=research_id).last_result)
            return Document.objects.filter(research_id=research_id, kind=DocumentKind.REPORT, version=3).exists()

        wait_until(third_version, 120, "the second scheduled run's report (version 3)")
        schedule_api(api, research_id, "patch", paused=True)  # no third run; the version landed is still announced
        wait_until(lambda: fake_web.count("/hooks/schedule") >= 2, 30, "the webhook calls")
    finally:
        beat.stop()
    research = wait_finished(research_id)
    assert research.status == ResearchStatus.COMPLETED, research.error
    second = Document.objects.get(research_id=research_id, kind=DocumentKind.REPORT, version=2)
    third = Document.objects.get(research_id=research_id, kind=DocumentKind.REPORT, version=3)
    assert "## What changed" in second.markdown and "Nothing changed" in second.markdown
    assert second.stats["changes"]["moved_figures"] == 0
    moved = third.markdown.split("## What changed", 1)[1].split("\n## ", 1)[0]
    assert "A figure moved** from 42000 to 49000:" in moved, third.markdown
    assert third.stats["changes"]["moved_figures"] == 1 and third.stats["changes"]["since_version"] == 2
    # the report of a run cites the page as it reads now, never the earlier figure
    body = third.markdown.split("## What changed", 1)[1]
    assert "reached 49000 units" in body and "42000" not in body.split("\n## ", 1)[1]
    # never two runs at once: each scheduled run began after the run before it had stored its report
    events = list(
        Event.objects.filter(
            research_id=research_id, type__in=[EventType.SCHEDULED_RUN, EventType.REPORT_WRITING_SUCCESSFUL]
        )
        .order_by("seq")
        .values_list("type", flat=True)
    )
    assert events[:5] == [
        EventType.REPORT_WRITING_SUCCESSFUL,
        EventType.SCHEDULED_RUN,
        EventType.REPORT_WRITING_SUCCESSFUL,
        EventType.SCHEDULED_RUN,
        EventType.REPORT_WRITING_SUCCESSFUL,
    ]
    assert "running" in seen  # a due time came while a run was going, and was passed over
    # the webhook was called, signed, for each version the schedule wrote
    calls = [r for r in fake_web.requests if r.path == "/hooks/schedule"]
    assert [call.body["version"] for call in calls][:2] == [2, 3]
    assert all(signed_ok(secret, call) for call in calls)
    assert calls[1].body["changes"]["moved_figures"] == 1
