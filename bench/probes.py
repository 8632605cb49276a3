"""Cheap probes taken while a research runs: CPU time of processes, and who waits on the research row lock."""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from typing import Any, cast

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


def thread_switches(pid: int) -> int:
    """Context switches so far of every live thread of a process, voluntary (a wait: the interpreter lock, a
    socket, a lock) and not (preempted); 0 if it is gone. A thread that ended took its count with it."""
    total = 0
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0
    for thread in threads:
        try:
            with open(f"/proc/{pid}/task/{thread}/status") as status:
                total += sum(int(line.split()[1]) for line in status if "ctxt_switches:" in line)
        except OSError:
            continue
    return total


def busy_share(seconds: float = 1.0) -> float:
    """The share of this machine's CPU time (every core) spent on anything but idling and waiting for I/O over
    the next `seconds` (/proc/stat)."""

    def read() -> tuple[int, int]:
        with open("/proc/stat") as stat:
            values = [int(field) for field in stat.readline().split()[1:]]
        idle = values[3] + values[4]  # idle, iowait
        return sum(values) - idle, sum(values)

    busy_before, total_before = read()
    time.sleep(seconds)
    busy_after, total_after = read()
    return (busy_after - busy_before) / max(1, total_after - total_before)


def wait_until_quiet(below: float = 0.2, max_wait: float = 60.0) -> tuple[float, float]:
    """Wait until the machine's CPU is busy less than `below` of its time over a second (what the parts before
    left running: a pool's workers shutting down, PostgreSQL's autovacuum after their writes), at most
    `max_wait` seconds; (seconds waited, the last busy share)."""
    began = time.monotonic()
    share = busy_share()
    while share >= below and time.monotonic() - began < max_wait:
        share = busy_share()
    return time.monotonic() - began, share


INTERPRETER_LOOP = 2_000_000


def interpreter_ms(runs: int = 5) -> float:
    """The median CPU time, in ms, of a fixed pure-Python loop (INTERPRETER_LOOP additions) on this machine now.
    This project's 2-core machines are virtual and their speed moves by the hour, unseen from inside (no steal
    time counted, no hardware counters): the same loop measured 55-101 ms on one day, and the stack's CPU per task
    moved with it. Printed at the start and the end of a bench run, it says which state the run's absolute figures
    (CPU per task, wall times) come from."""
    times = []
    for _ in range(runs):
        began, total = time.process_time(), 0
        for number in range(INTERPRETER_LOOP):
            total += number
        times.append((time.process_time() - began) * 1000)
    return sorted(times)[len(times) // 2]


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


class _Sampler:
    """A thread that runs `sample` on its own autocommit connection every `interval` seconds until the `with`
    ends."""

    def __init__(self, database_url: str, database_name: str, interval: float) -> None:
        self.database_url, self.database_name, self.interval = database_url, database_name, interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"bench-{type(self).__name__}", daemon=True)

    def __enter__(self) -> Any:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)

    def _run(self) -> None:
        with psycopg.connect(self.database_url, autocommit=True) as conn:
            while True:
                self.sample(conn)
                if self._stop.wait(self.interval):
                    return

    def sample(self, conn: psycopg.Connection) -> None:
        raise NotImplementedError


class LockSampler(_Sampler):
    """Samples pg_stat_activity every `interval` seconds: how many of the bench database's backends are blocked
    on a lock in a statement that touches `research_research` (the research row every tree write locks)."""

    def __init__(self, database_url: str, database_name: str, interval: float = 0.1) -> None:
        super().__init__(database_url, database_name, interval)
        self.result = LockSample()

    def sample(self, conn: psycopg.Connection) -> None:
        row = conn.execute(
            "SELECT count(*) FILTER (WHERE state = 'active'),"
            " count(*) FILTER (WHERE wait_event_type = 'Lock' AND query LIKE '%%research_research%%')"
            " FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
            [self.database_name],
        ).fetchone()
        if row is None:
            return
        self.result.samples += 1
        self.result.busy += row[0]
        self.result.waiting_research_row += row[1]


class ConnectionSampler(_Sampler):
    """Samples how many PostgreSQL connections the bench database has (pg_stat_activity, this sampler's own
    excluded) every `interval` seconds: peak and mean."""

    def __init__(self, database_url: str, database_name: str, interval: float = 0.25) -> None:
        super().__init__(database_url, database_name, interval)
        self.samples: list[int] = []

    @property
    def peak(self) -> int:
        return max(self.samples, default=0)

    @property
    def mean(self) -> float:
        return sum(self.samples) / len(self.samples) if self.samples else 0.0

    def sample(self, conn: psycopg.Connection) -> None:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
            [self.database_name],
        ).fetchone()
        self.samples.append(int(row[0]) if row else 0)


def redis_commands_processed(url: str) -> int:
    """The Redis server's `total_commands_processed`: every client of the server, every db (the bench's Redis
    is shared with other runs, so a difference of two readings is an upper bound of the bench's commands)."""
    import redis

    stats = cast(dict[str, Any], redis.Redis.from_url(url).info("stats"))  # a sync client: a dict, not an awaitable
    return int(stats["total_commands_processed"])


class RunMeter:
    """Everything metered around one run: CPU by process (CpuMeter), commits and sessions, the SQL statements and
    Redis commands the workers and this runner sent (bench/instrument.py), and the Redis server's commands.

    `used` after the `with`: workers, runner, postgres (CPU seconds), commits, sessions, sql, tasks_run (Celery
    tasks the workers started), redis (the workers' commands), runner_redis (this process: starts and the websocket
    watcher), redis_server (all clients), switches (the workers' threads' context switches)."""

    def __init__(self, stack: Any, worker_pids: list[int]) -> None:
        self.stack, self.worker_pids = stack, worker_pids
        self.cpu = CpuMeter({"workers": worker_pids, "runner": [os.getpid()]}, stack.database_url, stack.database_name)
        self.used: dict[str, float] = {}
        self.sql_kinds: dict[str, int] = {}

    def _counts(self) -> tuple[dict[str, Any], dict[str, Any], int]:
        from bench import instrument

        folder = self.stack.counts_dir
        workers = instrument.snapshot(folder, self.worker_pids)
        return workers, instrument.read(folder, [os.getpid()]), redis_commands_processed(self.stack.redis_url)

    def __enter__(self) -> RunMeter:
        self._before = self._counts()
        self._switches = sum(thread_switches(pid) for pid in self.worker_pids)
        self.cpu.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.used = dict(self.cpu.stop())
        self.used["switches"] = sum(thread_switches(pid) for pid in self.worker_pids) - self._switches
        workers, runner, server = self._counts()
        self.used["sql"] = workers["sql"] - self._before[0]["sql"]
        self.used["tasks_run"] = workers["tasks"] - self._before[0]["tasks"]
        self.used["redis"] = workers["redis"] - self._before[0]["redis"]
        self.used["runner_redis"] = runner["redis"] - self._before[1]["redis"]
        self.used["redis_server"] = server - self._before[2]
        # Statements and commands by kind ("UPDATE research_website", "redis BRPOP"), most frequent first.
        self.sql_kinds = dict((workers["kinds"] - self._before[0]["kinds"]).most_common())
