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


def test_password_reset_is_not_routed(user) -> None:
    # no mail is set up: a reset form would answer a known address (alice's) unlike an unknown one
    client = Client()
    for path in ("/accounts/password_reset/", "/accounts/password_reset/done/", "/accounts/reset/done/"):
        assert client.get(path).status_code == 404, path
    for email in ("alice@example.com", "nobody@example.com"):
        assert client.post("/accounts/password_reset/", {"email": email}).status_code == 404, email
    assert client.get("/accounts/reset/MQ/set-password/").status_code == 404


def test_signed_in_user_can_change_her_password(user) -> None:
    # given alice signed in
    client = Client()
    client.force_login(user)
    assert client.get("/accounts/password_change/").status_code == 200
    # when she changes her password
    new = "a-new-long-password-77"
    response = client.post(
        "/accounts/password_change/", {"old_password": PASSWORD, "new_password1": new, "new_password2": new}
    )
    # then the new one signs her in, and her session goes on
    assert response.status_code == 302 and response["Location"] == "/accounts/password_change/done/"
    user.refresh_from_db()
    assert user.check_password(new)
    assert client.get("/api/research").status_code == 200
