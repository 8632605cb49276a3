"""Browser tests: Debian's Chromium driven by Playwright against daphne, the Celery worker processes, PostgreSQL,
Redis and the loopback fakes. Chromium comes from `scripts/ensure-browser.sh` (run by `make test`); Playwright
never downloads a browser here.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field

import pytest
import redis
from playwright.sync_api import Browser, BrowserContext, ConsoleMessage, Dialog, Page, sync_playwright

from tests.support.browser import DESKTOP, chromium, save_failure
from tests.support.e2e import settle

FAILED = pytest.StashKey[bool]()  # set on a test item whose call phase failed


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    # Kept on the test item so that open_page's teardown, which runs after this, knows whether the test failed.
    report = yield
    if report.when == "call":
        item.stash[FAILED] = report.failed
    return report


@pytest.fixture
def no_queued_steps(redis_conn: redis.Redis) -> Iterator[None]:
    """For a test that needs no worker: the steps it queues (a retry, a report asked for) are dropped, not left for
    another test. The session's worker processes may be up (started by an earlier test) and take one first: they are
    left idle before the tables are flushed, as the `workers` fixture leaves them (a worker still reading deadlocks
    the truncation)."""
    yield
    for key in [*redis_conn.scan_iter("celery*"), *redis_conn.scan_iter("control*")]:
        if redis_conn.type(key) == b"list":
            redis_conn.delete(key)
    settle(redis_conn)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    executable = chromium()
    if not executable.exists():
        pytest.fail(f"{executable} is missing: run `bash scripts/ensure-browser.sh` (apt-get install chromium)")
    # Playwright's sync API keeps an event loop marked as running on this thread while it is open, which Django
    # takes for an async context; the ORM calls of these tests are plain sync code, so say so for this module only.
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
        with sync_playwright() as playwright:
            launched = playwright.chromium.launch(executable_path=executable, headless=True)
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
def open_page(browser: Browser, request: pytest.FixtureRequest) -> Iterator[Callable[..., Watched]]:
    """Opens pages in fresh browser contexts (separate cookie jars, like separate browsers); closes them after,
    saving a screenshot and the URL of every open page first if the test failed."""
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
    if request.node.stash.get(FAILED, False):
        save_failure(request.node.name, [page for context in contexts for page in context.pages])
    for context in contexts:
        context.close()
    if contexts:
        quiet_database()


def quiet_database(timeout: float = 5.0) -> None:
    """Until no other session of this test database runs a statement or holds a transaction open: a request the
    closed pages had in flight (the research page's first reads after a last click) is still being served by daphne,
    and the tables' flush after the test deadlocked with it."""
    from django.db import connection

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND pid <> pg_backend_pid() AND state IN ('active', 'idle in transaction')"
            )
            if cursor.fetchone()[0] == 0:
                return
        time.sleep(0.05)
