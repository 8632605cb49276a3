"""Cheap probes taken while a research runs: CPU time of processes, and who waits on the research row lock."""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass

import psycopg

_TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far; 0 if it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICK


class CpuMeter:
    """CPU seconds used between `start()` and `stop()` by fixed processes (workers, this runner) and by the
    database's backends, which are looked up twice a second (a backend that lives less than that is missed,
    so the database figure is a lower bound)."""

    def __init__(self, pids: dict[str, list[int]], database_url: str, database_name: str) -> None:
        self.pids, self.database_url, self.database_name = pids, database_url, database_name
        self._before: dict[str, float] = {}
        self._backends: dict[int, tuple[float, float]] = {}  # pid -> (CPU when first seen, CPU when last seen)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, name="bench-cpu-meter", daemon=True)
        self.used: dict[str, float] = {}

    def _look(self, conn: psycopg.Connection, first: bool) -> None:
        rows = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()", [self.database_name]
        )
        for (pid,) in rows.fetchall():
            now = cpu_seconds(pid)
            if not now:
                continue  # exited between the query and the read
            began = self._backends[pid][0] if pid in self._backends else (now if first else 0.0)
            self._backends[pid] = (began, now)

    def _poll(self) -> None:
        with psycopg.connect(self.database_url, autocommit=True) as conn:
            self._look(conn, first=True)
            self._started.set()
            while not self._stop.wait(0.5):
                self._look(conn, first=False)
            self._look(conn, first=False)

    def _database_counters(self) -> dict[str, float]:
        with psycopg.connect(self.database_url, autocommit=True) as conn:
            row = conn.execute(
                "SELECT xact_commit, sessions FROM pg_stat_database WHERE datname = %s", [self.database_name]
            ).fetchone()
        return {"commits": float(row[0]), "sessions": float(row[1])} if row else {"commits": 0.0, "sessions": 0.0}

    def start(self) -> None:
        self._counters = self._database_counters()
        self._before = {name: sum(cpu_seconds(p) for p in pids) for name, pids in self.pids.items()}
        self._started = threading.Event()
        self._thread.start()
        self._started.wait(10)

    def stop(self) -> dict[str, float]:
        self._stop.set()
        self._thread.join(10)
        self.used = {name: sum(cpu_seconds(p) for p in pids) - self._before[name] for name, pids in self.pids.items()}
        self.used["postgres"] = sum(last - first for first, last in self._backends.values())
        # Backends report these at most once a second; the caller has waited for the last push by now.
        counters = self._database_counters()
        self.used.update({key: counters[key] - self._counters[key] for key in counters})
        return self.used


@dataclass
class LockSample:
    samples: int = 0
    busy: int = 0  # backend-samples running a statement (or waiting inside one)
    waiting_research_row: int = 0  # backend-samples blocked on a lock while touching the research row

    @property
    def mean_waiting(self) -> float:
        return self.waiting_research_row / self.samples if self.samples else 0.0

    @property
    def mean_busy(self) -> float:
        return self.busy / self.samples if self.samples else 0.0


class LockSampler:
    """Samples pg_stat_activity every `interval` seconds: how many of the bench database's backends are blocked
    on a lock in a statement that touches `research_research` (the research row every tree write locks)."""

    def __init__(self, database_url: str, database_name: str, interval: float = 0.1) -> None:
        self.database_url, self.database_name, self.interval = database_url, database_name, interval
        self.result = LockSample()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-lock-sampler", daemon=True)

    def __enter__(self) -> LockSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)

    def _run(self) -> None:
        with psycopg.connect(self.database_url, autocommit=True) as conn:
            while not self._stop.wait(self.interval):
                row = conn.execute(
                    "SELECT count(*) FILTER (WHERE state = 'active'),"
                    " count(*) FILTER (WHERE wait_event_type = 'Lock' AND query LIKE '%%research_research%%')"
                    " FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
                    [self.database_name],
                ).fetchone()
                if row is None:
                    continue
                self.result.samples += 1
                self.result.busy += row[0]
                self.result.waiting_research_row += row[1]
