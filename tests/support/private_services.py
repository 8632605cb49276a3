"""Private PostgreSQL and Redis servers on free ports, and a Celery beat process, for fault tests.

Restarting the machine's shared services would disturb everything else on it, so tests that
restart or flush a service start their own, and stop them by PID when done. They run the servers of the
pip-installed wheels (PostgreSQL 18, Valkey 9: devtools/local_servers.py), so no test needs the machine's packages.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psycopg
import redis

from devtools.local_servers import hand_to, pg_user, run_pg, valkey_bin
from devtools.processes import free_port, log_folder, spawn, stop
from devtools.servers import log_level


class PrivateRedis:
    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> PrivateRedis:
        self.process = subprocess.Popen(
            [str(valkey_bin()), "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        client = redis.Redis.from_url(self.url)
        for _ in range(100):
            try:
                client.ping()
                return self
            except redis.ConnectionError:
                time.sleep(0.05)
        raise RuntimeError("private redis did not start")

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.kill()
            self.process.wait()


class PrivatePostgres:
    """A throwaway cluster (initdb as the postgres user) on a free port, with trust auth on loopback."""

    def __init__(self) -> None:
        self.port = free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="private-pg-"))
        self.data = self.dir / "data"
        self.url = f"postgres://postgres@127.0.0.1:{self.port}/deepresearch"

    def start(self) -> PrivatePostgres:
        user = pg_user()
        if user is not None:
            hand_to(self.dir, user)
        run_pg("initdb", ["-D", str(self.data), "-A", "trust", "-U", "postgres"], user)
        self._pg_ctl("start")
        with psycopg.connect(f"postgres://postgres@127.0.0.1:{self.port}/postgres", autocommit=True) as conn:
            conn.execute("CREATE DATABASE deepresearch")
        return self

    def _pg_ctl(self, action: str, *extra: str) -> None:
        options = f"-c listen_addresses=127.0.0.1 -p {self.port} -c unix_socket_directories={self.dir}"
        run_pg(
            "pg_ctl",
            ["-D", str(self.data), "-o", options, "-w", "-l", str(self.dir / "log"), action, *extra],
            pg_user(),
        )

    def restart(self) -> None:
        self._pg_ctl("restart", "-m", "fast")

    def stop(self) -> None:
        try:
            self._pg_ctl("stop", "-m", "immediate")
        except RuntimeError:
            pass
        shutil.rmtree(self.dir, ignore_errors=True)

    def query(self, sql: str, *params: object) -> list[tuple]:
        with psycopg.connect(self.url, connect_timeout=5) as conn:
            return conn.execute(sql, params).fetchall()


class Beat:
    """`celery beat`, which sends the sweeper task every SWEEP_INTERVAL seconds."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env
        self.dir = Path(tempfile.mkdtemp(prefix="beat-"))
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> Beat:
        command = [sys.executable, "-m", "celery", "-A", "researchsite", "beat", "-l", log_level(self.env)]
        self.process = spawn([*command, "-s", str(self.dir / "schedule")], log_folder() / "beat.log", self.env)
        return self

    def stop(self) -> None:
        stop(self.process, timeout=10)
        shutil.rmtree(self.dir, ignore_errors=True)


def peak_rss_mb(pid: int) -> float:
    """The process's peak resident memory (VmHWM), in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmHWM for {pid}")
