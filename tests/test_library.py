"""The library of a user's researches: search, rename, delete, and drafts that were never started expire."""

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from research.control import services
from research.models import Event, Research, ResearchStatus, SerpQuery
from tests.support.factories import build_tree, running_research
from workers import steps

pytestmark = pytest.mark.django_db


def titles(client, query: str | None = None) -> list[str]:
    response = client.get("/api/research", {"q": query} if query is not None else {})
    assert response.status_code == 200, response.content
    return [r["title"] for r in response.json()["researches"]]


def patch(client, research_id, body) -> object:
    return client.patch(f"/api/research/{research_id}", data=json.dumps(body), content_type="application/json")


def test_search_keeps_researches_whose_title_or_request_holds_every_word(api, user, other_user) -> None:
    heat = Research.objects.create(owner=user, prompt="How do heat pumps work in Nordic winters?", title="Heat pumps")
    Research.objects.create(owner=user, prompt="What limits fusion power plants?", title="Fusion limits")
    Research.objects.create(owner=other_user, prompt="Heat pumps for Mallory", title="Heat pumps too")
    assert titles(api) == ["Fusion limits", "Heat pumps"]
    assert titles(api, "HEAT") == ["Heat pumps"]
    assert titles(api, "nordic pumps") == ["Heat pumps"]  # the request's words count, every word must match
    assert titles(api, "nordic fusion") == []
    assert titles(api, "  ") == ["Fusion limits", "Heat pumps"]
    assert titles(api, "%") == [] and titles(api, "_") == []  # LIKE wildcards are plain characters
    assert api.get("/api/research", {"q": "x" * 201}).status_code == 400
    assert api.get("/api/research", {"q": "a\x00b"}).status_code == 400
    assert heat.title == "Heat pumps"


def test_rename_sets_the_title_and_refuses_what_is_not_one(api, stranger, user) -> None:
    research = build_tree(user, 1, 1)
    response = patch(api, research.pk, {"title": "  Fusion,\n  in short "})
    assert response.status_code == 200, response.content
    assert response.json()["title"] == "Fusion, in short"
    assert titles(api) == ["Fusion, in short"]
    for body, field in (
        ({"title": ""}, "title"),
        ({"title": "x" * 201}, "title"),
        ({}, "title"),
        ({"status": "x"}, "status"),
    ):
        response = patch(api, research.pk, body)
        assert response.status_code == 400 and response.json()["error"]["field"] == field, body
    assert api.patch(f"/api/research/{research.pk}", data="nope", content_type="application/json").status_code == 400
    assert patch(stranger, research.pk, {"title": "Mine now"}).status_code == 404
    assert Research.objects.get(pk=research.pk).title == "Fusion, in short"


def test_delete_takes_a_finished_research_with_all_it_holds_but_not_one_under_way(api, stranger, user) -> None:
    done = build_tree(user, 2, 1)
    running = running_research(user, 1, 1)
    assert api.delete(f"/api/research/{running.pk}").status_code == 409
    assert stranger.delete(f"/api/research/{done.pk}").status_code == 404
    assert SerpQuery.objects.filter(research=done).exists()
    response = api.delete(f"/api/research/{done.pk}")
    assert response.status_code == 204
    assert api.get(f"/api/research/{done.pk}").status_code == 404
    assert not SerpQuery.objects.filter(research_id=done.pk).exists()
    assert not Event.objects.filter(research_id=done.pk).exists()
    assert api.delete(f"/api/research/{done.pk}").status_code == 404
    assert Research.objects.filter(pk=running.pk).exists()


def test_drafts_never_started_expire_and_nothing_else_does(user, settings, published) -> None:
    settings.DRAFT_MAX_AGE_HOURS = 72
    old = timezone.now() - timedelta(hours=73)
    stale_draft = Research.objects.create(owner=user, prompt="p", title="old draft", status=ResearchStatus.DRAFT)
    stale_answers = Research.objects.create(
        owner=user, prompt="p", title="old questions", status=ResearchStatus.AWAITING_ANSWERS
    )
    fresh = Research.objects.create(owner=user, prompt="p", title="new", status=ResearchStatus.AWAITING_ANSWERS)
    finished = build_tree(user, 1, 1)
    Research.objects.filter(pk__in=[stale_draft.pk, stale_answers.pk, finished.pk]).update(created_at=old)
    # when the sweeper runs
    done = steps.sweep()
    # then the two stale drafts are gone; the fresh draft and the old finished research stay
    assert done.get("drafts_expired") == 2
    assert set(Research.objects.values_list("title", flat=True)) == {"new", finished.title}
    assert services.expire_drafts(timedelta(hours=72)) == 0
    assert fresh.pk in set(Research.objects.values_list("pk", flat=True))
