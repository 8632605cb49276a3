"""Accounts: Django's login and logout; every page and API call needs a signed-in user."""

import uuid

import pytest
from django.test import Client

from research.models import Research
from tests.support.logins import PASSWORD

pytestmark = pytest.mark.django_db


def test_login_then_logout_ends_the_session(user) -> None:
    # given a user signed in through the login form
    client = Client(enforce_csrf_checks=True)
    page = client.get("/accounts/login/")
    token = page.cookies["csrftoken"].value
    response = client.post(
        "/accounts/login/", {"username": "alice", "password": PASSWORD, "csrfmiddlewaretoken": token}
    )
    assert response.status_code == 302
    assert client.get("/api/research").status_code == 200
    # when she logs out (a POST with the CSRF token, as Django 5 requires)
    token = client.cookies["csrftoken"].value
    response = client.post("/accounts/logout/", {"csrfmiddlewaretoken": token})
    # then the session is over
    assert response.status_code in (200, 302)
    assert client.get("/api/research").status_code in (401, 403)
    assert client.get("/").status_code == 302


def test_wrong_password_does_not_sign_in(user) -> None:
    client = Client()
    response = client.post("/accounts/login/", {"username": "alice", "password": "not-the-password"})
    assert response.status_code == 200  # the form again, with its error
    assert client.get("/api/research").status_code in (401, 403)


def test_anonymous_research_page_redirects_to_login(user) -> None:
    research = Research.objects.create(owner=user, prompt="p", title="t")
    for path in (f"/research/{research.pk}/", f"/research/{uuid.uuid4()}/"):
        response = Client().get(path)
        assert response.status_code == 302
        assert response["Location"].startswith("/accounts/login/?next=")
