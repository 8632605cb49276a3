"""The real stack for a benchmark run: its own PostgreSQL database and Redis db, the fakes, worker processes.

Everything started here is stopped and removed again on exit (database dropped, Redis db flushed, worker
processes terminated), also when the run is interrupted.
"""

from __future__ import annotations

import atexit
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from urllib.parse import urlsplit, urlunsplit

import psycopg
import redis

from bench.latency import DelayedWeb, Latencies, apply
from devtools.fakes import FakeLLM, FakeSearx
from devtools.fakes.behaviours import ResearchModel
from devtools.processes import ARTIFACTS, celery_command, spawn, stop
from devtools.runs import claim_redis_db
from devtools.servers import WorkerPool, log_level, process_env

log = logging.getLogger("bench")

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/deepresearch"
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"

WORKER_ENV = {
    "LOG_LEVEL": "WARNING",
    "LLM_TIMEOUT": "30",
    "SCRAPE_DEADLINE": "10",
    "TASK_MAX_RETRIES": "1",
    # The shared limiters stay in the path (their Redis calls are part of the cost) but do not throttle: the
    # fake web is one host standing in for hundreds, and the fakes are not a provider to protect. The
    # production defaults (20 model calls/s, 5 searches/s, 4 fetches per host) would bound the figures instead
    # of the scheduler; docs/performance.md says by how much.
    "LLM_RATE_LIMIT": "100000",
    "SEARCH_RATE_LIMIT": "100000",
    "SCRAPE_PER_HOST_CONCURRENCY": "100000",
}


@dataclass
class Fakes:
    """The loopback LLM, SearxNG and web, with the plausible research model installed."""

    web: DelayedWeb = field(default_factory=DelayedWeb)
    llm: FakeLLM = field(default_factory=FakeLLM)
    searx: FakeSearx | None = None

    def start(self) -> Fakes:
        self.web.start()
        self.llm.start()
        self.searx = FakeSearx(web=self.web).start()
        return self

    def prepare(self, latencies: Latencies) -> ResearchModel:
        """Fresh request logs (they grow with every call), the research model, and the given latencies; returns
        the model, whose behaviour (the evaluator's scores, say) a part may script."""
        assert self.searx is not None
        for fake in (self.web, self.llm, self.searx):
            fake.reset()
        model = ResearchModel(self.llm).install()
        apply(latencies, self.llm, self.searx, self.web)
        return model

    def stop(self) -> None:
        for fake in (self.searx, self.llm, self.web):
            if fake is not None:
                fake.stop()

    def env(self) -> dict[str, str]:
        assert self.searx is not None
        return {
            "OPENAI_BASE_URL": self.llm.url + "/v1",
            "OPENAI_API_KEY": "sk-bench-never-a-real-key",
            "SEARXNG_URL": self.searx.url,
            "SCRAPE_ALLOWED_PRIVATE_HOSTS": self.web.host_port,
        }


def _with_database(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, parts.fragment))


class Stack:
    """Database, Redis db and fakes for one benchmark run; `with Stack() as stack:` sets Django up on them."""

    def __init__(self) -> None:
        self.run_id = uuid.uuid4().hex[:10]
        self.base_database_url = os.environ.get("DATABASE_URL", DEFAULT_DATABASE_URL)
        self.database_name = f"bench_deepresearch_{self.run_id}"
        self.database_url = _with_database(self.base_database_url, self.database_name)
        self.redis_url = ""
        self.fakes = Fakes()
        # Where every process of the stack writes its SQL statement and Redis command counts (bench/instrument.py).
        self.counts_dir = Path(tempfile.mkdtemp(prefix=f"bench-counts-{self.run_id}-"))
        self._pools: list[WorkerPool] = []
        self._beats: list[subprocess.Popen[bytes]] = []
        self._database_created = False
        self._closed = False

    # --- lifecycle ---

    def __enter__(self) -> Stack:
        atexit.register(self.close)
        # SIGTERM (e.g. from `timeout` or CI) must still run the clean-up: turn it into SystemExit.
        signal.signal(signal.SIGTERM, _exit_on_signal)
        try:
            self._open()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _open(self) -> None:
        # Claimed as test runs claim theirs, which keeps benches and tests apart.
        self.redis_url = claim_redis_db(os.environ.get("REDIS_URL", DEFAULT_REDIS_URL), f"bench-{self.run_id}")
        with psycopg.connect(_with_database(self.base_database_url, "postgres"), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{self.database_name}"')
        self._database_created = True
        self.fakes.start()
        os.environ.update(
            {
                "DJANGO_SETTINGS_MODULE": "researchsite.settings",
                "DATABASE_URL": self.database_url,
                "REDIS_URL": self.redis_url,
                "SECRET_KEY": "bench-secret-key-" + "b" * 40,
                "SECURE_SSL_REDIRECT": "false",
                "SESSION_COOKIE_SECURE": "false",
                "CSRF_COOKIE_SECURE": "false",
                **WORKER_ENV,
                **self.fakes.env(),
                "CELERY_IMPORTS": "bench.instrument",
                "BENCH_COUNTS_DIR": str(self.counts_dir),
            }
        )
        subprocess.run(
            [sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"], cwd=ROOT, env=os.environ, check=True
        )
        import django

        django.setup()

    def close(self) -> None:
        """Stop workers, drop the database, flush the Redis db, stop the fakes; safe to call twice."""
        if self._closed:
            return
        self._closed = True
        for pool in self._pools:
            pool.stop()
        self._pools = []
        stop(*self._beats, timeout=10)
        self._beats = []
        try:
            from django.db import connections

            connections.close_all()
        except Exception:  # noqa: BLE001 - Django may not be set up yet; the drop below forces the rest
            pass
        if self._database_created:
            with psycopg.connect(_with_database(self.base_database_url, "postgres"), autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{self.database_name}" WITH (FORCE)')
        if self.redis_url:
            redis.Redis.from_url(self.redis_url).flushdb()
        self.fakes.stop()
        shutil.rmtree(self.counts_dir, ignore_errors=True)

    # --- workers ---

    @contextmanager
    def workers(
        self, count: int, concurrency: int, name: str, env: dict[str, str] | None = None
    ) -> Iterator[WorkerPool]:
        """`count` Celery worker processes with `-P threads -c concurrency` (devtools.servers.WorkerPool, as the
        tests start them), stopped on exit; `env` is added to their environment."""
        pool = WorkerPool(process_env(env or {}), count=count, concurrency=concurrency, name=name)
        self._pools.append(pool)
        try:
            pool.start()
            yield pool
        finally:
            pool.stop()
            self._pools.remove(pool)

    @contextmanager
    def beat(self, env: dict[str, str] | None = None) -> Iterator[subprocess.Popen[bytes]]:
        """`celery beat`, which sends the sweeper task every SWEEP_INTERVAL seconds (as a deployment runs it),
        stopped on exit; `env` is added to its environment."""
        env = process_env(env or {})
        with tempfile.TemporaryDirectory(prefix="bench-beat-") as folder:
            command = celery_command(sys.executable, "beat", log_level(env), "-s", str(Path(folder) / "schedule"))
            process = spawn(command, ARTIFACTS / "beat-bench.log", env)
            self._beats.append(process)
            try:
                yield process
            finally:
                stop(process, timeout=10)
                self._beats.remove(process)

    def redis(self) -> redis.Redis:
        return redis.Redis.from_url(self.redis_url)


def _exit_on_signal(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)
