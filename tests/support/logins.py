"""Signing in as a test user: over HTTP (a requests session), on a websocket with that session, in the browser."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import requests
    import websocket
    from playwright.sync_api import Page

# The password of the users the fixtures create (tests/conftest.py).
PASSWORD = "a-long-test-password-42"


def login(base: str, username: str) -> requests.Session:
    """A session signed in through the login form of the server at `base`."""
    import requests

    session = requests.Session()
    session.get(f"{base}/accounts/login/", timeout=10)
    response = session.post(
        f"{base}/accounts/login/",
        data={"username": username, "password": PASSWORD, "csrfmiddlewaretoken": session.cookies["csrftoken"]},
        headers={"Referer": f"{base}/accounts/login/"},
        timeout=10,
    )
    assert response.status_code == 200 and "sessionid" in session.cookies, response.status_code
    return session


def research_socket(base: str, session: requests.Session, research_id: str, timeout: float = 20) -> websocket.WebSocket:
    """The research page's websocket on the server at `base` (http://host:port), as the signed-in `session`."""
    import websocket

    return websocket.create_connection(
        f"{base.replace('http://', 'ws://', 1)}/ws/research/{research_id}/",
        cookie=f"sessionid={session.cookies['sessionid']}",
        origin=base,
        timeout=timeout,
    )


def sign_in(page: Page, base_url: str, username: str, path: str = "/") -> None:
    """Through the real login form in the browser, landing on `path`."""
    page.goto(base_url + path)
    page.wait_for_url("**/accounts/login/**")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    # The page's own scripts and sockets are the tests' business: waiting for the full "load" of a busy second
    # context timed out now and then on a loaded machine.
    page.wait_for_url(base_url + path, wait_until="domcontentloaded", timeout=60_000)


def session_cookie(user) -> bytes:
    """A `Cookie` header value for a session of `user`, for sockets opened in-process (channels' communicator)."""
    from django.conf import settings
    from django.test import Client

    client = Client()
    client.force_login(user)
    return f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}".encode()
