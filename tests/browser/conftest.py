"""Browser tests: Debian's Chromium driven by Playwright against daphne, the Celery worker processes, PostgreSQL,
Redis and the loopback fakes. Chromium comes from `scripts/ensure-browser.sh` (run by `make test`); Playwright
never downloads a browser here.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from playwright.sync_api import Browser, BrowserContext, ConsoleMessage, Dialog, Page, sync_playwright

from tests.conftest import PASSWORD, WORKER_ENV
from tests.processes import ARTIFACTS, DaphneServer, process_env

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
SCREENSHOTS = ARTIFACTS / "screenshots"
DESKTOP = {"width": 1400, "height": 900}
PHONE = {"width": 390, "height": 844}


@pytest.fixture(scope="session")
def daphne(django_db_setup, django_db_blocker, internet: dict[str, str]) -> Iterator[DaphneServer]:  # noqa: ANN001
    """The web process, with the environment the workers get, on plain HTTP."""
    env = process_env(
        {
            **WORKER_ENV,
            **internet,
            "ALLOWED_HOSTS": "127.0.0.1,localhost",
            "DEBUG": "false",
            "SECURE_SSL_REDIRECT": "false",
            "SESSION_COOKIE_SECURE": "false",
            "CSRF_COOKIE_SECURE": "false",
            "SECURE_HSTS_SECONDS": "0",
        }
    )
    env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)  # the server keeps Django's async-safety checks
    with django_db_blocker.unblock():
        server = DaphneServer(env).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: run `bash scripts/ensure-browser.sh` (apt-get install chromium)")
    # Playwright's sync API keeps an event loop marked as running on this thread while it is open, which Django
    # takes for an async context; the ORM calls of these tests are plain sync code, so say so for this module only.
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
        with sync_playwright() as playwright:
            launched = playwright.chromium.launch(executable_path=CHROMIUM, headless=True)
            yield launched
            launched.close()


@dataclass
class Watched:
    """A page with what it reported: dialogs (alert/confirm), console errors, CSP violations."""

    page: Page
    context: BrowserContext
    dialogs: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    failed_requests: list[str] = field(default_factory=list)
    accept_dialogs: bool = False

    @property
    def csp_violations(self) -> list[str]:
        return [e for e in self.errors if "Content Security Policy" in e]


@pytest.fixture
def open_page(browser: Browser) -> Iterator[Callable[..., Watched]]:
    """Opens pages in fresh browser contexts (separate cookie jars, like separate browsers); closes them after."""
    contexts: list[BrowserContext] = []

    def open_(viewport: dict[str, int] | None = None, accept_dialogs: bool = False) -> Watched:
        context = browser.new_context(viewport=viewport or DESKTOP, accept_downloads=True)
        context.set_default_timeout(20_000)
        contexts.append(context)
        page = context.new_page()
        watched = Watched(page, context, accept_dialogs=accept_dialogs)

        def on_dialog(dialog: Dialog) -> None:
            watched.dialogs.append(f"{dialog.type}: {dialog.message}")
            if watched.accept_dialogs:
                dialog.accept()
            else:
                dialog.dismiss()

        def on_console(message: ConsoleMessage) -> None:
            if message.type == "error":
                watched.errors.append(message.text)

        page.on("dialog", on_dialog)
        page.on("console", on_console)
        page.on("pageerror", lambda error: watched.errors.append(f"page error: {error}"))
        page.on(
            "response",
            lambda response: (
                watched.failed_requests.append(f"{response.status} {response.url}") if response.status >= 400 else None
            ),
        )
        return watched

    yield open_
    for context in contexts:
        context.close()


def sign_in(page: Page, base_url: str, username: str, path: str = "/") -> None:
    """Through the real login form, landing on `path`."""
    page.goto(base_url + path)
    page.wait_for_url("**/accounts/login/**")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(base_url + path)


def screenshot(target: Page, name: str, selector: str | None = None) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    if selector:
        target.locator(selector).screenshot(path=path, animations="disabled")
    else:
        target.screenshot(path=path, animations="disabled")
    return path
