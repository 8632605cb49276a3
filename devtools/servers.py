"""The app's processes on a test or benchmark stack: Celery workers and daphne, on this process's database and
Redis. Django and Celery are imported where they are used, so importing this module starts nothing."""

from __future__ import annotations

import os
import sys
import time
from typing import TYPE_CHECKING, Any

from devtools.processes import free_port, log_folder, spawn, stop, worker_command

if TYPE_CHECKING:
    import subprocess

# What a web process needs to serve plain HTTP on loopback (production settings insist on HTTPS).
PLAIN_HTTP = {
    "ALLOWED_HOSTS": "127.0.0.1,localhost",
    "SECURE_SSL_REDIRECT": "false",
    "SESSION_COOKIE_SECURE": "false",
    "CSRF_COOKIE_SECURE": "false",
    "SECURE_HSTS_SECONDS": "0",
}


def database_url() -> str:
    """The URL of the database this process uses (in a test run, the test database pytest-django created)."""
    from django.db import connection

    db = connection.settings_dict
    auth = db["USER"] + (f":{db['PASSWORD']}" if db.get("PASSWORD") else "")
    return f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


def process_env(extra: dict[str, str]) -> dict[str, str]:
    """The environment of an app process on this process's database and Redis, with production settings, plus
    `extra`."""
    from django.conf import settings

    env = {key: value for key, value in os.environ.items() if not key.startswith("PYTEST")}
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "researchsite.settings",
            "DATABASE_URL": database_url(),
            "REDIS_URL": settings.REDIS_URL,
            "PYTHONUNBUFFERED": "1",
        }
    )
    env.update(extra)
    return env


def log_level(env: dict[str, str]) -> str:
    """Celery's `-l` for a process: its env's LOG_LEVEL (default WARNING), since `-l` overrides the level that
    settings.LOGGING reads from the same variable (the key-leak test must grep INFO logs, not WARNING ones)."""
    return (env.get("LOG_LEVEL") or "WARNING").upper()


def celery_app_for(broker_url: str) -> Any:  # a celery.Celery
    """A Celery client bound to another broker (a private Redis), to send tasks and ping workers there."""
    from celery import Celery

    return Celery("researchsite", broker=broker_url, set_as_current=False)


class WorkerPool:
    """N Celery worker processes (threads pool), logging to worker-<name><index>.log in `log_folder()`
    (test-artifacts/, or test-artifacts/gw0/ ... under pytest-xdist)."""

    def __init__(self, env: dict[str, str], count: int = 2, concurrency: int = 8, name: str = "w") -> None:
        self.env, self.count, self.concurrency, self.name = env, count, concurrency, name
        self.processes: list[subprocess.Popen[bytes]] = []

    def start(self, ping: bool = True) -> WorkerPool:
        """Start the processes; with `ping`, wait until each answers (brokers without broadcast cannot ping)."""
        for index in range(self.count):
            command = worker_command(
                sys.executable,
                self.concurrency,
                log_level(self.env),
                "-n",
                f"{self.name}{index}-{os.getpid()}@{self.env.get('WORKER_HOST') or '%h'}",
                "--without-heartbeat",
            )
            self.processes.append(spawn(command, log_folder() / f"worker-{self.name}{index}.log", self.env))
        if ping:
            self.wait_ready()
        return self

    def wait_ready(self, timeout: float = 60) -> None:
        from django.conf import settings

        from researchsite.celery import app as default_app

        app = default_app
        if self.env.get("REDIS_URL") != settings.REDIS_URL:
            app = celery_app_for(self.env["REDIS_URL"])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for process in self.processes:
                if process.poll() is not None:
                    raise RuntimeError(f"a worker exited at start with code {process.returncode}; see {log_folder()}")
            replies = app.control.ping(timeout=0.5) or []
            names = {name for reply in replies for name in reply}
            if sum(1 for n in names if n.startswith(f"{self.name}") and f"-{os.getpid()}@" in n) >= self.count:
                return
        raise RuntimeError(f"workers did not answer a ping in time; see {log_folder()}")

    def kill(self, index: int) -> None:
        """SIGKILL one worker process: no shutdown, no acks, its in-flight tasks are simply gone."""
        self.processes[index].kill()
        self.processes[index].wait()

    def stop(self) -> None:
        stop(*self.processes, timeout=15)
        self.processes = []


class DaphneServer:
    """daphne serving the app (HTTP, websockets, static files) on a free loopback port, as in production; logs to
    <name>.log in `log_folder()`."""

    def __init__(self, env: dict[str, str], name: str = "daphne") -> None:
        self.env, self.name = env, name
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, attempts: int = 3) -> DaphneServer:
        for _ in range(attempts):
            self.launch(free_port())
            if self.wait_ready():
                return self
            self.stop()  # most likely the port was taken in between: try another
        raise RuntimeError(f"daphne did not start; see {log_folder() / self.name}.log")

    def launch(self, port: int) -> None:
        """Start daphne on `port` without waiting for it (`wait_ready` does)."""
        command = [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "researchsite.asgi:application"]
        self.port, self.process = port, spawn(command, log_folder() / f"{self.name}.log", self.env)

    def wait_ready(self, timeout: float = 60) -> bool:
        import urllib.error
        import urllib.request

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process is None or self.process.poll() is not None:
                return False
            try:
                with urllib.request.urlopen(self.url + "/accounts/login/", timeout=2) as response:
                    if response.status == 200:
                        return True
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.2)
        return False

    def stop(self) -> None:
        process, self.process = self.process, None
        stop(process, timeout=15)
