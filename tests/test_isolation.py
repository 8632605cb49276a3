"""Per-user isolation: a stranger gets 404 on every per-research endpoint; anonymous gets 401 or a login redirect."""

import pytest
from django.test import Client

from research.models import Document, DocumentKind, Research, ResearchStatus

pytestmark = pytest.mark.django_db


@pytest.fixture
def research(user) -> Research:
    research = Research.objects.create(
        owner=user, prompt="p", title="mine", status=ResearchStatus.RUNNING, breadth=1, depth=1
    )
    Document.objects.create(research=research, kind=DocumentKind.REPORT, markdown="# r")
    Document.objects.create(research=research, kind=DocumentKind.ERROR_OUTPUT, markdown="# e")
    return research


def per_research_requests(research_id: str) -> list[tuple[str, str, dict | None]]:
    return [
        ("get", f"/api/research/{research_id}", None),
        ("get", f"/api/research/{research_id}/events", None),
        ("get", f"/api/research/{research_id}/report.md", None),
        ("get", f"/api/research/{research_id}/error-output.md", None),
        ("post", f"/api/research/{research_id}/cancel", None),
        ("post", "/api/research/start", {"research_id": research_id, "answers": [], "breadth": 1, "depth": 1}),
    ]


def test_owner_reaches_every_endpoint(api, research) -> None:
    for method, path, _ in per_research_requests(str(research.pk))[:4]:
        assert getattr(api, method)(path).status_code == 200, path


def test_stranger_gets_404_everywhere(stranger, research) -> None:
    for method, path, body in per_research_requests(str(research.pk)):
        if body is None:
            response = getattr(stranger, method)(path)
        else:
            response = getattr(stranger, method)(path, data=body, content_type="application/json")
        assert response.status_code == 404, path
        assert response.json()["error"]["message"]
    assert stranger.get("/api/research").json() == {"researches": []}
    research.refresh_from_db()
    assert research.status == ResearchStatus.RUNNING


def test_anonymous_api_is_401(research) -> None:
    client = Client()
    paths = [("get", "/api/research", None), ("post", "/api/research/questions", None)]
    for method, path, _ in paths + per_research_requests(str(research.pk)):
        response = getattr(client, method)(path)
        assert response.status_code == 401, path
        assert response.json()["error"]["message"] == "authentication required"


def test_anonymous_pages_redirect_to_login() -> None:
    client = Client()
    for path in ("/", "/admin/"):
        response = client.get(path)
        assert response.status_code == 302
        assert "/login/" in response["Location"]


def test_login_page_and_logged_in_home(api) -> None:
    assert Client().get("/accounts/login/").status_code == 200
    assert api.get("/").status_code == 200


def test_signup_hidden_unless_enabled(settings, django_user_model) -> None:
    settings.ALLOW_SIGNUP = False
    assert Client().get("/accounts/signup/").status_code == 404
    settings.ALLOW_SIGNUP = True
    client = Client()
    response = client.post(
        "/accounts/signup/", {"username": "newbie", "password1": "Zq8!long-passw0rd", "password2": "Zq8!long-passw0rd"}
    )
    assert response.status_code == 302
    assert django_user_model.objects.filter(username="newbie").exists()
    assert client.get("/").status_code == 200


STATE_CHANGING = ["questions", "start", "cancel", "logout", "signup"]


@pytest.mark.parametrize("endpoint", STATE_CHANGING)
def test_post_without_csrf_token_is_refused(endpoint, user, research, settings, django_user_model) -> None:
    # given a signed-in user (an anonymous one for sign-up, which is enabled), and no CSRF token
    settings.ALLOW_SIGNUP = True
    awaiting = Research.objects.create(
        owner=user, prompt="p", title="a", status=ResearchStatus.AWAITING_ANSWERS, breadth=1, depth=1, num_questions=1
    )
    client = Client(enforce_csrf_checks=True)
    if endpoint != "signup":
        client.force_login(user)
    password = "Zq8!long-passw0rd"
    path, body = {
        "questions": ("/api/research/questions", {"prompt": "How do heat pumps work?", "num_questions": 1}),
        "start": ("/api/research/start", {"research_id": str(awaiting.pk), "answers": ["Nordic"], "breadth": 1}),
        "cancel": (f"/api/research/{research.pk}/cancel", {}),
        "logout": ("/accounts/logout/", {}),
        "signup": ("/accounts/signup/", {"username": "newbie", "password1": password, "password2": password}),
    }[endpoint]
    # when
    if path.startswith("/api/"):
        response = client.post(path, data=body, content_type="application/json")
    else:
        response = client.post(path, data=body)
    # then it is refused as a CSRF failure, and nothing changed
    assert response.status_code == 403
    assert "CSRF" in response.content.decode()
    assert Research.objects.filter(owner=user).count() == 2
    research.refresh_from_db()
    awaiting.refresh_from_db()
    assert (research.status, awaiting.status) == (ResearchStatus.RUNNING, ResearchStatus.AWAITING_ANSWERS)
    assert not django_user_model.objects.filter(username="newbie").exists()
    if endpoint != "signup":
        assert client.get("/api/research").status_code == 200  # still signed in
