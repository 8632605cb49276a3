"""Fixtures: users and API clients, the loopback fakes, and the real Redis of this run."""

import shutil
from collections.abc import Iterator

import pytest
import redis
from celery import Task
from django.conf import settings
from django.contrib.auth.hashers import make_password
from django.test import Client
from django.test.utils import override_settings

from devtools.fakes import FakeLLM, FakeSearx, FakeWeb
from devtools.fakes.behaviours import ResearchModel
from devtools.servers import PLAIN_HTTP, DaphneServer, WorkerPool, process_env
from tests.support.browser import FAILURES, SCREENSHOTS
from tests.support.e2e import WORKER_ENV, settle
from tests.support.lanes import lane_of
from tests.support.logins import PASSWORD
from tests.support.testrun import release_test_run
from workers.clients import model_window


@pytest.fixture(scope="session")
def fake_web() -> Iterator[FakeWeb]:
    with FakeWeb() as web:
        yield web


@pytest.fixture(scope="session")
def fake_searx(fake_web: FakeWeb) -> Iterator[FakeSearx]:
    with FakeSearx(web=fake_web) as searx:
        yield searx


@pytest.fixture(scope="session")
def fake_llm() -> Iterator[FakeLLM]:
    with FakeLLM() as llm:
        yield llm


@pytest.fixture(scope="session")
def internet(fake_web: FakeWeb, fake_searx: FakeSearx, fake_llm: FakeLLM) -> Iterator[dict[str, str]]:
    """Point the app at the fakes for the whole session; yields the settings a subprocess needs."""
    env = {
        "OPENAI_BASE_URL": fake_llm.url + "/v1",
        "SEARXNG_URL": fake_searx.url,
        "SCRAPE_ALLOWED_PRIVATE_HOSTS": fake_web.host_port,
        # A schedule's webhook is called on the fake web (tests/test_schedules.py).
        "WEBHOOK_ALLOWED_PRIVATE_HOSTS": fake_web.host_port,
        "LLM_TIMEOUT": "10",
    }
    overrides = override_settings(
        OPENAI_BASE_URL=env["OPENAI_BASE_URL"],
        SEARXNG_URL=env["SEARXNG_URL"],
        SEARCH_PROVIDERS=["searxng"],
        RESEARCH_ENGINE="llm",
        SCRAPE_ALLOWED_PRIVATE_HOSTS=frozenset([fake_web.host_port]),
        WEBHOOK_ALLOWED_PRIVATE_HOSTS=frozenset([fake_web.host_port]),
        LLM_TIMEOUT=10.0,
    )
    overrides.enable()
    yield env
    overrides.disable()


@pytest.fixture
def fakes(internet: dict[str, str], fake_web: FakeWeb, fake_searx: FakeSearx, fake_llm: FakeLLM) -> Iterator[None]:
    """A test that uses the fakes starts with clean switches and logs, and leaves them clean; what this process
    learned of the model server (its formats, window, tokens, speed) is forgotten with them."""
    for fake in (fake_web, fake_searx, fake_llm):
        fake.reset()
    forget_model_servers()
    yield
    for fake in (fake_web, fake_searx, fake_llm):
        fake.reset()
    forget_model_servers()


def forget_model_servers() -> None:
    """What every process learned of the model server (kept in Redis), so the next test meets it afresh."""
    model_window.forget()


@pytest.fixture
def redis_conn() -> redis.Redis:
    return redis.Redis.from_url(settings.REDIS_URL)


@pytest.fixture
def published(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Names of the tasks the code under test queues, recorded instead of sent: unit tests of the API and the
    sweeper must not hand work to a worker pool that may be running for other tests (the end-to-end tests cover
    real publishing)."""
    names: list[str] = []

    def record(task: Task, args: object = None, kwargs: object = None, **options: object) -> None:
        names.append(task.name)

    monkeypatch.setattr(Task, "apply_async", record)
    return names


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup: None) -> Iterator[None]:
    """pytest-django's test database, dropped only once this process's event pusher has pushed what the last
    tests recorded and closed its connection (else the drop fails on it and the database is left behind)."""
    yield
    from research.live.push import _pusher

    _pusher.wait_idle(timeout=10)


@pytest.fixture(autouse=True)
def no_stray_tasks(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A test without worker processes (the unit and database lanes) queues nothing on this run's broker: the
    session's worker pool, started by an earlier test, would run the task while the test's tables are flushed (a
    report written during the TRUNCATE deadlocked it). Such a test records what it queues with `published`, or
    runs tasks eagerly (or is marked `broker`, queueing messages no worker can act on); one that queues for real
    fails here, and what it queued is not sent."""
    lane = next((mark.name for mark in request.node.iter_markers() if mark.name in ("unit", "database")), None)
    if lane is None or "published" in request.fixturenames or request.node.get_closest_marker("broker"):
        yield
        return
    stray: list[str] = []
    send = Task.apply_async

    def guarded(task: Task, args: object = None, kwargs: object = None, **options: object) -> object:
        if task.app.conf.task_always_eager:
            return send(task, args, kwargs, **options)
        stray.append(task.name)
        return None

    monkeypatch.setattr(Task, "apply_async", guarded)
    yield
    if stray:
        pytest.fail(f"a {lane}-lane test queued {stray} on the shared broker: use the `published` fixture")


@pytest.fixture(scope="session")
def password_hash() -> str:
    """PASSWORD hashed once for the session: hashing it again for each test's users (PBKDF2, about 0.4 s here) cost
    more than the rest of many a test. Each user still has a real hash that the login form and daphne check."""
    return make_password(PASSWORD)


@pytest.fixture
def user(django_user_model, password_hash: str):
    return django_user_model.objects.create(username="alice", email="alice@example.com", password=password_hash)


@pytest.fixture
def other_user(django_user_model, password_hash: str):
    return django_user_model.objects.create(username="mallory", email="mallory@example.com", password=password_hash)


@pytest.fixture
def api(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def stranger(other_user) -> Client:
    client = Client()
    client.force_login(other_user)
    return client


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Each test gets its lane's mark (unit, database, stack, browser, faults: tests/support/lanes.py) before `-m`
    selects by marks; `make test-fast` runs the unit and database lanes."""
    for item in items:
        item.add_marker(getattr(pytest.mark, lane_of(item)))


def pytest_sessionstart(session: pytest.Session) -> None:
    """The controller of a pytest-xdist run runs no test: it gives back the Redis db its settings claimed at once,
    and each xdist worker claims one of its own (tests/support/testrun.py)."""
    if session.config.pluginmanager.has_plugin("dsession") and settings.configured:
        release_test_run(settings.REDIS_URL, settings.RUN_ID)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Give this run's Redis db back (the claim key goes with it), if the run still holds it."""
    if settings.configured:
        release_test_run(settings.REDIS_URL, settings.RUN_ID)


SCREENSHOTS_CLEARED = pytest.StashKey[bool]()


def clear_screenshots(config: pytest.Config, nodeids: list[str]) -> None:
    """Screenshots of this run only: one left over from an older run would pass for a current one. Cleared once a
    run that has browser tests, before any test runs, by the process that runs or hands out the tests (the only one,
    or the xdist controller): an xdist worker clearing them would delete those another worker had saved."""
    if config.stash.get(SCREENSHOTS_CLEARED, False) or not any(n.startswith("tests/browser/") for n in nodeids):
        return
    config.stash[SCREENSHOTS_CLEARED] = True
    for folder in (SCREENSHOTS, FAILURES):
        shutil.rmtree(folder, ignore_errors=True)


def pytest_collection_finish(session: pytest.Session) -> None:
    if not hasattr(session.config, "workerinput"):  # a run without xdist (an xdist worker leaves it to the controller)
        clear_screenshots(session.config, [item.nodeid for item in session.items])


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node: object, ids: list[str]) -> None:
    """The xdist controller, once a worker has collected (and deselected): no test has been handed out yet."""
    clear_screenshots(node.config, ids)  # type: ignore[attr-defined]


# --- The real stack: worker processes against this run's database and Redis --------------------------------


@pytest.fixture(scope="session")
def worker_pool(django_db_setup, django_db_blocker, internet: dict[str, str]) -> Iterator[WorkerPool]:
    """Two Celery worker processes (threads pool) for the whole session."""
    with django_db_blocker.unblock():
        pool = WorkerPool(process_env({**WORKER_ENV, **internet}), count=2, concurrency=8).start()
    yield pool
    pool.stop()


@pytest.fixture
def workers(worker_pool: WorkerPool, transactional_db: None, redis_conn: redis.Redis) -> Iterator[WorkerPool]:
    """The worker processes, for one transactional test; they are left idle before the tables are flushed
    (a worker still reading while Django truncates the tables deadlocks the truncation)."""
    yield worker_pool
    settle(redis_conn)


@pytest.fixture(scope="session")
def daphne(django_db_setup, django_db_blocker, internet: dict[str, str]) -> Iterator[DaphneServer]:
    """The web process, with the environment the workers get, on plain HTTP: for the browser tests and the tests
    of the API's clients (the command line client, the MCP server over HTTP)."""
    env = process_env({**WORKER_ENV, **internet, **PLAIN_HTTP, "DEBUG": "false"})
    env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)  # the server keeps Django's async-safety checks
    with django_db_blocker.unblock():
        server = DaphneServer(env).start()
    yield server
    server.stop()


@pytest.fixture
def research_model(fakes, fake_llm: FakeLLM) -> ResearchModel:
    """The fake model behaving like a working model (see devtools/fakes/behaviours.py)."""
    return ResearchModel(fake_llm).install()
