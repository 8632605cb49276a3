"""Benchmark runner: `python -m bench.run [--parts ...] [--reps N]`; prints the tables of docs/performance.md.

Parts (all by default, in this order, one stack for all of them):
  critical   wall time / critical-path ideal for (2,2) (4,2) (3,3) (4,3) (5,5), and wall time / max(critical
             path, work / slots) with the report's sections as many at a time as there are slots, the bound of any
             scheduler on the part's worker slots (bench/engine.py slot_bound), beside the time a longest-chain-first
             schedule of the same tree takes on those slots with free CPU (scheduled_time) and the least time any
             scheduler needs for it there (tree_bound); every run also counts what one websocket client receives
             (against the final snapshot)
  overhead   zero-latency (5,5): wall time, CPU (workers, PostgreSQL, fakes and runner), commits, SQL statements
             and Redis commands per task (bench/instrument.py counts them in the workers), events per second
  many       --many researches (default 20 × (3,3), from 5 users) started together on the critical part's
             workers, against one alone: throughput, each user's share, PostgreSQL connections, CPU per task
  reference  the level-synchronous-4 and per-branch-2 reference schedulers at (4,3) and (5,5), against the
             engine's critical-part runs (so `reference` needs `critical` in the same run)
  scaling    (4,3) on 1, 2, 4, 8 worker processes of a few slots each (latency-bound: slots are the limit)
  scale      zero-latency (5,5) on 1, 2, 4, 8 worker processes of 16 threads each (CPU-bound: cores and the
             research row are the limit): tasks/s and speed-up, busy PostgreSQL backends and how many of them
             wait on the research row, CPU per task by process, the cores kept busy; a count whose threads would
             not get a PostgreSQL connection each (max_connections) is skipped
  snapshots  snapshot build time, size and SQL queries at 110 queries × 7 pages, and the delta of one event there
  adaptive   adaptive against fixed mode at (4,3) on a "simple" and a "complex" request (bench/adaptive.py):
             model calls, cost, wall time and depth reached; the target is 30 %+ fewer calls on the simple one
             at no more than 10 % extra cost on average
  resilience the figures tests/test_faults.py holds, on the bench stack (bench/resilience.py): another user's
             1x1 beside a 6x3's backlog, and a 3x3 with one of two workers killed, production leases (about
             2 minutes, most of it the lease that must lapse)
  partitions one of two hosts of workers cut off in the middle of a 3x3 (bench/partitions.py), at production
             leases: whole, from the broker only, from the database only, and the host of one of two beats; the
             delay each cost against the undisturbed run, and whether the cut host's late steps changed anything
             once it was let back (about 6 minutes, most of it leases that must lapse)
  extraction main-text extraction on the annotated corpus of tests/corpus (bench/extraction.py): precision,
             recall, F1 and characters per page of a bare get_text, the previous cleaning rules alone and
             trafilatura, on the dev and the held-out part; needs no stack (seconds when run alone)
  quality    a (4,2) due-diligence research over a fictional company's document share (bench/quality/), with the
             extractive engine, graded against 13 checkpoints (correct, partial, missing, wrong: a stale figure of
             an archived or superseded file cited); then with the loopback model, where each checkpoint's current
             passage got to: analysed, in a report writer's prompt, cited only from outdated files (bench/quality/
             part.py; about 2 minutes)

A final Targets section lists every figure that has a target (and the reference models beside each wall/ideal
ratio), with whether it holds. A full run takes about 20 minutes on 2 cores, and the scale part about 6 more (336 s
for 1, 2 and 4 workers in one run; 8 × 16 threads need more PostgreSQL connections than the default 100 and are
skipped).

Every figure is the median of the repetitions, with the 1-minute load average beside it (other work on this
machine slows the stack down; look at the load before trusting a figure). Raw runs go to var/bench/*.json.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from bench.latency import ZERO, Latencies
from bench.quality.grade import VERDICTS

log = logging.getLogger("bench")

PARTS = (
    "critical",
    "overhead",
    "many",
    "reference",
    "scaling",
    "scale",
    "snapshots",
    "adaptive",
    "resilience",
    "partitions",
    "extraction",
    "quality",
)
DEFAULT_PARTS = PARTS
SHAPES = ((2, 2), (4, 2), (3, 3), (4, 3), (5, 5))
# Wall time / critical-path ideal a shape must stay within.
RATIO_TARGETS = {(2, 2): 1.10}
# Wall time / max(critical path, work / slots) (bench/engine.py slot_bound) a shape must stay within.
BOUND_TARGETS = {(4, 3): 1.15, (5, 5): 1.15}
# CPU per task, all processes, at zero latency on an idle machine (it was 12 ms before the review step, the memory
# updates and the report in sections added work to every research).
CPU_TARGET_MS = 15.0
# The research that warms a fresh pool of workers before the parts that measure CPU or throughput on it.
WARM_UP_SHAPE = (3, 3)
# CPU by process, as bench/probes.py RunMeter reports it, in the order the tables give it.
CPU_PROCESSES = ("workers", "postgres", "runner")
# Groups of the final Targets section, in order: each shape's target ratio (wall / ideal, or wall / bound) with
# the reference models beside it.
TARGET_ORDER = (
    "ratio 2x2",
    "ratio 4x3",
    "reference 4x3",
    "ratio 5x5",
    "reference 5x5",
    "first section",
    "bytes",
    "scaling",
    "scale",
    "cpu",
    "statements",
    "snapshots",
    "fairness",
    "recovery",
    "partitions",
    "extraction",
)
OUT_DIR = Path(__file__).resolve().parent.parent / "var" / "bench"


@dataclass
class Row:
    """One line of a printed table."""

    figure: str
    value: str
    detail: str = ""
    target: str = ""
    holds: bool | None = None
    load: float | None = None


@dataclass
class Measured:
    """An engine run with what was observed around it."""

    run: Any  # bench.engine.EngineRun
    watched: Any  # bench.snapshots.Watched
    lock: Any  # bench.probes.LockSample
    load: float
    snapshot_bytes: int = 0  # the research's final snapshot as JSON (len(json.dumps(build_snapshot(id))))

    def as_dict(self) -> dict[str, Any]:
        watched = {k: v for k, v in asdict(self.watched).items() if k != "seqs"}
        watched["missing"] = sorted(set(range(1, self.run.events + 1)) - set(self.watched.seqs))[:50]
        return {
            **asdict(self.run),
            "watched": watched,
            "in_order": self.watched.in_order,
            "lock": asdict(self.lock),
            "load": self.load,
            "snapshot_bytes": self.snapshot_bytes,
        }


@dataclass
class Section:
    title: str
    rows: list[Row] = field(default_factory=list)


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def load() -> float:
    return os.getloadavg()[0]


def cpu_per_task(used: dict[str, float], tasks: int) -> dict[str, float]:
    """Milliseconds of CPU per task by process (CPU_PROCESSES) from a RunMeter's `used` over `tasks` tasks."""
    return {name: used[name] / tasks * 1000 for name in CPU_PROCESSES}


def describe_cpu(ms: dict[str, float]) -> str:
    """`ms` (cpu_per_task, or medians of it) as the tables give it."""
    return (
        f"{ms['workers']:.1f} ms workers + {ms['postgres']:.1f} ms PostgreSQL (at least) + {ms['runner']:.1f} ms "
        "fakes and runner"
    )


def free_connections(database_url: str) -> tuple[int, int]:
    """(connections a client can still open, max_connections) on the PostgreSQL server: its max_connections less
    the superuser-reserved ones and the client backends open now (every database's, other runs' included)."""
    import psycopg

    with psycopg.connect(database_url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT current_setting('max_connections')::int, current_setting('superuser_reserved_connections')::int,"
            " (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend')"
        ).fetchone()
    assert row is not None
    return row[0] - row[1] - row[2], row[0]


class Bench:
    """Runs the chosen parts on one stack and keeps every raw measurement."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.latencies = Latencies(args.plan, args.search, args.page, args.analysis, args.report)
        self.raw: dict[str, Any] = {"latencies": self.latencies.as_dict(), "args": vars(args), "runs": {}}
        self.sections: list[Section] = []
        self.engine_runs: dict[tuple[int, int], list[Measured]] = {}
        self.real_5x5: str | None = None
        # Every target's figure, by group, gathered by the parts for the final section (shown in TARGET_ORDER).
        self.targets: dict[str, list[Row]] = {}
        self.warm_pools: list[Any] = []  # the worker pools that have run a research already

    def target(self, group: str, row: Row) -> Row:
        """`row`, also listed in the final Targets section under `group` (one of TARGET_ORDER)."""
        self.targets.setdefault(group, []).append(row)
        return row

    # --- plumbing ---

    def record(self, key: str, value: Any) -> None:
        self.raw["runs"].setdefault(key, []).append(value)

    def say(self, message: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')} load {load():.2f}] {message}", file=sys.stderr, flush=True)

    def engine_run(self, stack: Any, owner: Any, breadth: int, depth: int, latencies: Latencies) -> Measured:
        """One research on the running workers, with a websocket watcher and the lock sampler attached."""
        from bench import engine
        from bench.probes import LockSampler
        from bench.snapshots import Watcher

        research_id = engine.queue_research(owner)
        with Watcher(research_id) as watcher, LockSampler(stack.database_url, stack.database_name) as sampler:
            run = engine.measure(
                research_id,
                engine.start(research_id, breadth, depth),
                breadth,
                depth,
                latencies,
                timeout=self.args.timeout,
            )
            watcher.settle(research_id)
        if run.status != "completed":
            raise RuntimeError(f"research {research_id} ({breadth},{depth}) ended {run.status}")
        if watcher.error is not None:
            raise RuntimeError(f"the websocket watcher failed: {watcher.error!r}")
        from research.live.snapshot import build_snapshot

        final = len(json.dumps(build_snapshot(research_id)))
        return Measured(run, watcher.result, sampler.result, load(), final)

    def warm(self, stack: Any, owner: Any, pool: Any) -> None:
        """An uncounted zero-latency research on a pool that has run none. Fresh workers pay once what no later
        research pays: each thread opens its database connection (a PostgreSQL backend's start-up and catalog
        reads), and the first model call of each process imports the HTTP client's transport while its other
        threads wait on the import lock. On 2 cores a zero-latency (5,5) on 4 cold workers took 21-25 s against
        19-20 s for the next one, and up to 4.5 ms more CPU a task; the scale part, which starts a pool per worker
        count, compared start-ups as much as steps. A (3,3) is enough: the (5,5) after it costs what a second one
        does."""
        if any(warm is pool for warm in self.warm_pools):
            return
        stack.fakes.prepare(ZERO)
        breadth, depth = WARM_UP_SHAPE
        warm_up = self.engine_run(stack, owner, breadth, depth, ZERO)
        self.warm_pools.append(pool)
        processes = len(pool.processes)
        self.record("warm-up", {**warm_up.as_dict(), "processes": processes})
        self.say(f"warm-up ({breadth},{depth}) on a fresh pool of {processes}: {warm_up.run.wall:.2f} s (not counted)")

    # --- parts ---

    def critical(self, stack: Any, owner: Any) -> None:
        from bench.engine import latency_work, report_time, scheduled_time, slot_bound, tree_bound

        stack.fakes.prepare(self.latencies)
        # Fresh workers open a database connection and their clients in each thread on the first steps it runs: a
        # research of the smallest shape goes first, not counted, so every measured run starts on warm workers,
        # as a deployment's do. Its time is printed beside the others.
        warm_up = self.engine_run(stack, owner, 2, 2, self.latencies)
        self.record("critical warm-up 2x2", warm_up.as_dict())
        self.say(f"critical warm-up (2,2) on fresh workers: {warm_up.run.wall:.2f} s (not counted)")
        for rep in range(self.args.reps):
            for breadth, depth in self.args.shapes:
                if (breadth, depth) == (5, 5) and rep >= self.args.big_reps:
                    continue  # the longest run: fewer repetitions keep a full bench near 13 minutes
                measured = self.engine_run(stack, owner, breadth, depth, self.latencies)
                run = measured.run
                self.engine_runs.setdefault((breadth, depth), []).append(measured)
                self.record(f"critical {breadth}x{depth}", measured.as_dict())
                if (breadth, depth) == (5, 5):
                    self.real_5x5 = run.research_id
                self.say(
                    f"critical rep {rep + 1} ({breadth},{depth}): {run.wall:.2f} s, ideal {run.ideal:.1f} s, "
                    f"ratio {run.ratio:.3f}, tasks waiting on the research row {measured.lock.mean_waiting:.1f}"
                )
        lat, slots = self.latencies, self.args.workers * self.args.concurrency
        section = Section(
            f"Critical path ({self.args.workers} workers × {self.args.concurrency} threads; latencies "
            f"{lat.describe()}; bound: max(tree's critical path, its work / {slots} slots) + its report, "
            f"sections {slots} at a time)"
        )
        for shape in self.args.shapes:
            shown = self.engine_runs.get(shape, [])
            runs = [m.run for m in shown]
            ratios = [r.ratio for r in runs]
            bounds = [slot_bound(r, lat, slots) for r in runs]
            to_bound = [r.wall / b if b else float("nan") for r, b in zip(runs, bounds, strict=True)]
            waiting = median([m.lock.mean_waiting for m in shown])
            wall, at = median([r.wall for r in runs]), median([m.load for m in shown])
            name, limit = f"({shape[0]},{shape[1]})", RATIO_TARGETS.get(shape)
            row = Row(
                f"{name} wall / ideal",
                f"{median(ratios):.2f}×",
                f"{wall:.1f} s / {runs[0].ideal:.1f} s (bound {median(bounds):.1f} s); range {min(ratios):.2f}–"
                f"{max(ratios):.2f}; {runs[0].queries} queries, {runs[0].websites} pages; "
                f"{waiting:.1f} tasks waiting on the research row",
                f"≤ {limit:.2f}×" if limit else "",
                median(ratios) <= limit if limit else None,
                at,
            )
            section.rows.append(self.target(f"ratio {shape[0]}x{shape[1]}", row) if limit else row)
            limit = BOUND_TARGETS.get(shape)
            if limit:
                first, work = runs[0], latency_work(runs[0], lat)
                report = report_time(first, lat, slots)
                scheduled = median([scheduled_time(r, lat, slots) for r in runs])
                least = median([tree_bound(r, lat, slots) for r in runs])
                row = Row(
                    f"{name} wall / max(critical path, work / slots)",
                    f"{median(to_bound):.2f}×",
                    f"{wall:.1f} s / {median(bounds):.1f} s; range {min(to_bound):.2f}–{max(to_bound):.2f}; tree: "
                    f"critical path {first.ideal - lat.report:.1f} s, work {work:.0f} slot-s / {slots} slots = "
                    f"{work / slots:.1f} s; then the report {report:.1f} s (outline, {first.sections} sections "
                    f"{slots} at a time); a longest-chain-first schedule of the same tree on {slots} slots, every "
                    f"call its latency and no CPU: {scheduled:.1f} s, the engine {wall / scheduled:.2f}× that",
                    f"≤ {limit:.2f}×",
                    median(to_bound) <= limit,
                    at,
                )
                section.rows.append(self.target(f"ratio {shape[0]}x{shape[1]}", row))
                row = Row(
                    f"{name} wall / least time on {slots} slots",
                    f"{wall / least:.2f}×",
                    f"{wall:.1f} s / {least:.1f} s: no scheduler on {slots} slots, every call its latency and no "
                    f"CPU, does this tree and report sooner (bench/engine.py tree_bound: the calls that must fall "
                    f"inside any window of the run fill it); that is {least / median(bounds):.2f}× max(critical "
                    f"path, work / slots)"
                    + (", the tree's shape leaving slots idle as its levels open" if least > median(bounds) else ""),
                    load=at,
                )
                section.rows.append(self.target(f"ratio {shape[0]}x{shape[1]}", row))
        section.rows.append(
            Row(
                "(2,2) on fresh workers (a warm-up, not counted)",
                f"{warm_up.run.wall:.1f} s",
                f"ideal {warm_up.run.ideal:.1f} s: {warm_up.run.ratio:.2f}×, the first research's threads opening "
                "their connections",
                load=warm_up.load,
            )
        )
        if (4, 3) in self.engine_runs:
            medium = self.engine_runs[(4, 3)]
            runs = [m.run for m in medium]
            section.rows.append(
                self.target(
                    "first section",
                    Row(
                        "(4,3) last query done → first report section shown / report done",
                        f"{median([r.to_first_section for r in runs]):.2f} s / "
                        f"{median([r.to_report for r in runs]):.2f} s",
                        "outline, then sections in parallel (first content: the first section written)",
                        load=median([m.load for m in medium]),
                    ),
                )
            )
            sent = median([m.watched.bytes for m in medium])
            final = median([m.snapshot_bytes for m in medium])
            section.rows.append(
                self.target(
                    "bytes",
                    Row(
                        "(4,3) pushed to one websocket client / final snapshot",
                        f"{sent / final:.2f}×",
                        f"{sent / 1e6:.2f} MB in {median([m.watched.messages for m in medium]):.0f} messages; "
                        f"final snapshot {final / 1e3:.0f} KB (len(json.dumps(build_snapshot(id)))); the state "
                        f"built from the pushes equals it: {all(m.watched.matches for m in medium)}",
                        "≤ 3×",
                        sent <= 3 * final,
                        median([m.load for m in medium]),
                    ),
                )
            )
            middle = sorted((m.run for m in self.engine_runs[(4, 3)]), key=lambda r: r.wall)
            steps = " ".join(f"{k} {v:.2f}" for k, v in middle[len(middle) // 2].breakdown.items())
            section.rows.append(Row("(4,3) median run, chain that ended last (s)", "", steps))
        big = self.engine_runs.get((5, 5), [])
        if big:
            watched = [m.watched for m in big]
            sent = median([w.bytes for w in watched])
            section.rows.append(
                self.target(
                    "bytes",
                    Row(
                        "(5,5) pushed to one websocket client",
                        f"{sent / 1e6:.1f} MB",
                        f"{median([w.messages for w in watched]):.0f} messages carrying "
                        f"{median([w.events for w in watched]):.0f} events; every event once and in order: "
                        f"{all(m.watched.in_order and m.watched.events == m.run.events for m in big)}; final "
                        f"snapshot {median([m.snapshot_bytes for m in big]) / 1e3:.0f} KB, and the state built "
                        f"from the pushes equals it: {all(m.watched.matches for m in big)}; rows sent again "
                        f"unchanged {median([w.resent for w in watched]) / 1e3:.0f} KB; by part (KB): "
                        + ", ".join(
                            f"{part} {median([w.by_part.get(part, 0) for w in watched]) / 1e3:.0f}"
                            for part in sorted(watched[0].by_part, key=lambda p: -watched[0].by_part[p])[:6]
                        ),
                        "≤ 3 MB",
                        sent <= 3e6,
                        median([m.load for m in big]),
                    ),
                )
            )
        self.sections.append(section)

    def overhead(self, stack: Any, owner: Any, pool: Any) -> None:
        from bench.probes import RunMeter, interpreter_ms

        self.warm(stack, owner, pool)
        stack.fakes.prepare(ZERO)
        observed = []
        speeds = []  # the interpreter loop's time just before each run: the machine's state for it
        for rep in range(self.args.overhead_reps):
            speeds.append(interpreter_ms())
            with RunMeter(stack, [p.pid for p in pool.processes]) as meter:
                measured = self.engine_run(stack, owner, 5, 5, ZERO)
            cpu = meter.used
            observed.append((measured, cpu))
            kinds = meter.sql_kinds
            self.record(
                "overhead 5x5", {**measured.as_dict(), "cpu": cpu, "sql_kinds": kinds, "interpreter_ms": speeds[-1]}
            )
            self.say(f"overhead rep {rep + 1}: {measured.run.wall:.2f} s for {measured.run.tasks} tasks, cpu {cpu}")
        loads = median([m.load for m, _ in observed])
        waiting = [m.lock.mean_waiting for m, _ in observed]
        busy = [m.lock.mean_busy for m, _ in observed]
        runs = [(m.run, cpu) for m, cpu in observed]
        tasks = runs[0][0].tasks
        sql_kinds = [(kind, n) for kind, n in kinds.items() if not kind.startswith("redis ")]
        redis_kinds = [(kind.removeprefix("redis "), n) for kind, n in kinds.items() if kind.startswith("redis ")]

        def per_task(key: str) -> float:
            return median([c[key] / r.tasks for r, c in runs])

        per_task_wall = [r.wall / r.tasks * 1000 for r, _ in runs]
        cores = os.cpu_count() or 1
        rate = median([r.tasks / r.wall / cores for r, _ in runs])
        per_run = [cpu_per_task(c, r.tasks) for r, c in runs]
        cpu_ms = {name: median([ms[name] for ms in per_run]) for name in CPU_PROCESSES}
        total_ms = median([sum(ms.values()) for ms in per_run])
        run_counts = [(sum(c[k] for k in CPU_PROCESSES), c["tasks_run"]) for _, c in runs]
        per_run_task = median([used / n * 1000 for used, n in run_counts if n] or [float("nan")])
        section = Section("Overhead at zero latency, (5,5)")
        section.rows += [
            Row(
                "wall time per task",
                f"{median(per_task_wall):.1f} ms",
                f"{median([r.wall for r, _ in runs]):.1f} s for {tasks} tasks "
                f"({runs[0][0].queries} queries, {runs[0][0].websites} pages)",
                "≤ 10 ms",
                median(per_task_wall) <= 10,
                loads,
            ),
            self.target(
                "cpu",
                Row(
                    "tasks per second per core",
                    f"{rate:.1f}/s",
                    f"{tasks} tasks / wall time / {cores} cores (every process of the stack on this machine)",
                    load=loads,
                ),
            ),
            self.target(
                "cpu",
                Row(
                    "CPU per task, all processes",
                    f"{total_ms:.1f} ms",
                    f"{describe_cpu(cpu_ms)}, over the engine's count of {tasks} tasks (each run: "
                    + ", ".join(
                        f"{sum(ms.values()):.1f} ms with the interpreter loop at {speed:.0f} ms"
                        for ms, speed in zip(per_run, speeds, strict=True)
                    )
                    + "); the "
                    f"workers started {median([c['tasks_run'] for _, c in runs]):.0f} Celery tasks (reviews, report "
                    f"outline, sections and assembly, and duplicates, included): {per_run_task:.1f} ms each",
                    f"≤ {CPU_TARGET_MS:g} ms",
                    total_ms <= CPU_TARGET_MS,
                    loads,
                ),
            ),
            self.target(
                "statements",
                Row(
                    "database commits per task",
                    f"{per_task('commits'):.1f}",
                    f"{median([c['sessions'] for _, c in runs]):.0f} new database sessions per research",
                    load=loads,
                ),
            ),
            self.target(
                "statements",
                Row(
                    "SQL statements per task",
                    f"{per_task('sql'):.1f}",
                    f"{median([c['sql'] for _, c in runs]):.0f} statements the workers sent through Django "
                    "(bench/instrument.py: every execute, savepoints included; BEGIN and COMMIT not); most "
                    "frequent in the last run, per task: "
                    + ", ".join(f"{kind} {n / tasks:.1f}" for kind, n in sql_kinds[:6]),
                    load=loads,
                ),
            ),
            self.target(
                "statements",
                Row(
                    "Redis commands per task",
                    f"{per_task('redis'):.1f}",
                    f"the workers' (broker, locks, sequence keys, group sends, idle polls); one websocket "
                    f"client's consumer and the start {per_task('runner_redis'):.1f}; the whole Redis server "
                    f"{per_task('redis_server'):.1f} (shared with other runs: an upper bound); most frequent in the "
                    "last run, per task: " + ", ".join(f"{kind} {n / tasks:.1f}" for kind, n in redis_kinds[:6]),
                    load=loads,
                ),
            ),
            Row(
                "thread switches per task, workers",
                f"{per_task('switches'):.1f}",
                "context switches of the workers' threads (/proc: a wait for the interpreter lock, a socket or a "
                "lock, or preemption); each run: "
                + ", ".join(f"{c['switches'] / r.tasks:.1f}" for r, c in runs)
                + ". A count, so it moves less with the machine's speed than CPU does",
                load=loads,
            ),
            Row(
                "events recorded per second",
                f"{median([r.events / r.wall for r, _ in runs]):.0f}/s",
                f"{runs[0][0].events} events per research",
            ),
            Row(
                "tasks waiting on the research row",
                f"{median(waiting):.1f}",
                f"of {median(busy):.1f} busy backends on average",
            ),
        ]
        self.sections.append(section)

    def many(self, stack: Any, pool: Any) -> None:
        from bench.many import create_users, run_batch, slot_seconds
        from bench.probes import ConnectionSampler, RunMeter

        breadth, depth = self.args.many_shape
        count, users = self.args.many, create_users(self.args.many_users)
        self.warm(stack, users[0], pool)
        stack.fakes.prepare(self.latencies)
        solo = self.engine_run(stack, users[0], breadth, depth, self.latencies)
        self.record("many solo", solo.as_dict())
        self.say(f"many: ({breadth},{depth}) alone {solo.run.wall:.2f} s; now {count} at once")
        stack.fakes.prepare(self.latencies)
        with (
            RunMeter(stack, [p.pid for p in pool.processes]) as meter,
            ConnectionSampler(stack.database_url, stack.database_name) as connections,
        ):
            batch = run_batch(users, count, breadth, depth, self.latencies, self.args.timeout)
        used, tasks, wall, at = meter.used, batch.tasks, batch.wall, load()
        walls = [r.wall for r in batch.runs]
        self.record(
            "many batch",
            {
                "runs": [asdict(r) for r in batch.runs],
                "owners": batch.owners,
                "wall": wall,
                "start_spread": batch.start_spread,
                "share_cutoff": batch.share_cutoff,
                "shares": batch.shares,
                "connections": connections.samples,
                "used": used,
                "load": at,
            },
        )
        self.say(f"many: {count} researches in {wall:.1f} s, slowest {max(walls):.1f} s, used {used}")
        slots = self.args.workers * self.args.concurrency
        bound = max(solo.run.ideal, sum(slot_seconds(r, self.latencies) for r in batch.runs) / slots)
        per_user = [batch.user_walls(u) for u in range(batch.users)]
        means = [statistics.mean(w) for w in per_user]
        section = Section(
            f"Many researches at once: {count} × ({breadth},{depth}) from {batch.users} users, started together "
            f"({self.args.workers} workers × {self.args.concurrency} threads, latencies as in the critical part)"
        )
        cpu = cpu_per_task(used, tasks)
        section.rows += [
            Row(
                "one research alone",
                f"{solo.run.wall:.1f} s",
                f"ideal {solo.run.ideal:.1f} s; {solo.run.tasks} tasks, {solo.run.events} events; one websocket "
                f"client received {solo.watched.bytes / 1e6:.2f} MB in {solo.watched.messages} messages, "
                f"{solo.watched.bytes / solo.snapshot_bytes:.1f}× the final snapshot "
                f"({solo.snapshot_bytes / 1e3:.0f} KB)",
                load=solo.load,
            ),
            Row(
                "throughput",
                f"{count / wall * 60:.1f} researches/min",
                f"{tasks / wall * 60:.0f} tasks/min: {tasks} tasks in {wall:.1f} s (first start → last research "
                f"done; the starts took {batch.start_spread:.2f} s); no scheduler under {bound:.1f} s on {slots} "
                "slots (the calls' latency-seconds / slots)",
                load=at,
            ),
            Row(
                "slowest research / one alone",
                f"{max(walls) / solo.run.wall:.2f}×",
                f"slowest {max(walls):.1f} s, mean {statistics.mean(walls):.1f} s, fastest {min(walls):.1f} s; "
                f"alone {solo.run.wall:.1f} s (ideal {solo.run.ideal:.1f} s)",
                load=at,
            ),
            Row(
                "each user's share of the tasks done while every user had work",
                f"{min(batch.shares):.1%}–{max(batch.shares):.1%}",
                f"fair: {1 / batch.users:.1%} each; up to {batch.share_cutoff:.1f} s, when the first user had all "
                f"its researches done; per user "
                + ", ".join(f"{t:.0f}" for t in batch.tasks_by_cutoff)
                + " tasks (estimated from each research's events recorded by then)",
                load=at,
            ),
            Row(
                "each user's completion time, mean / max",
                f"{min(means):.1f}–{max(means):.1f} s mean",
                "per user (mean/max): "
                + ", ".join(f"{m:.1f}/{max(w):.1f}" for m, w in zip(means, per_user, strict=True)),
                load=at,
            ),
            Row(
                "PostgreSQL connections to the bench database",
                f"peak {connections.peak}, mean {connections.mean:.1f}",
                f"pg_stat_activity every 0.25 s during the batch; {slots} worker threads, each keeping its own "
                "connection, plus this runner's and its probes'",
                load=at,
            ),
            Row(
                "CPU per task",
                f"{sum(cpu.values()):.1f} ms all processes",
                f"{describe_cpu(cpu)}; {used['commits'] / tasks:.1f} commits per task",
                load=at,
            ),
            Row(
                "SQL statements / Redis commands per task",
                f"{used['sql'] / tasks:.1f} / {used['redis'] / tasks:.1f}",
                f"the workers' ({used['redis'] / wall:.0f} Redis commands/s, {used['sql'] / wall:.0f} statements/s "
                f"over the batch); the whole Redis server {used['redis_server'] / wall:.0f} commands/s (shared)",
                load=at,
            ),
        ]
        self.sections.append(section)

    def reference(self, stack: Any) -> None:
        from bench import reference

        if not self.engine_runs:
            raise SystemExit("the reference part compares with the critical part: run both")
        query = self.latencies.search + self.latencies.page + self.latencies.analysis
        section = Section("Against reference schedulers (same fakes, same latencies)")
        targets = {
            ("level-synchronous-4", (4, 3)): 1.5,
            ("per-branch-2", (4, 3)): 3.0,
            ("level-synchronous-4", (5, 5)): 4.0,
            ("per-branch-2", (5, 5)): 8.0,
        }
        for shape in [s for s in ((4, 3), (5, 5)) if s in self.engine_runs]:
            ours = median([m.run.wall for m in self.engine_runs[shape]])
            for name, scheduler in reference.SCHEDULERS.items():
                walls, loads = [], []
                for _ in range(self.args.ref_reps):
                    stack.fakes.prepare(self.latencies)
                    run = scheduler(reference.Calls(stack.fakes.llm.url, stack.fakes.searx.url), *shape)
                    walls.append(run.wall)
                    loads.append(load())
                    self.record(f"reference {name} {shape[0]}x{shape[1]}", {**asdict(run), "load": loads[-1]})
                    self.say(f"reference {name} {shape}: {run.wall:.2f} s")
                model = reference.model_time(name, *shape, self.latencies.plan, query, self.latencies.report)
                ideal = self.engine_runs[shape][0].run.ideal
                target = targets[(name, shape)]
                speedup = median(walls) / ours
                row = Row(
                    f"({shape[0]},{shape[1]}) vs {name}",
                    f"{speedup:.2f}× faster",
                    f"it {median(walls):.1f} s ({median(walls) / ideal:.2f}× the ideal; pure latencies {model:.1f} "
                    f"s), engine {ours:.1f} s; at most {model / ideal:.2f}× for a scheduler at the ideal {ideal:.1f} s",
                    f"≥ {target:g}×",
                    speedup >= target,
                    median(loads),
                )
                section.rows.append(self.target(f"reference {shape[0]}x{shape[1]}", row))
        self.sections.append(section)

    def scaling(self, stack: Any, owner: Any) -> None:
        from bench.engine import tree_bound

        stack.fakes.prepare(self.latencies)
        walls: dict[int, list[float]] = {}
        loads: dict[int, list[float]] = {}
        last: dict[int, Any] = {}  # bench.engine.EngineRun, the last of each count
        for count in self.args.scaling_workers:
            with stack.workers(count, self.args.scaling_concurrency, f"bench-s{count}-"):
                for rep in range(self.args.scaling_reps):
                    measured = self.engine_run(stack, owner, 4, 3, self.latencies)
                    walls.setdefault(count, []).append(measured.run.wall)
                    loads.setdefault(count, []).append(measured.load)
                    last[count] = measured.run
                    self.record(f"scaling {count}", measured.as_dict())
                    self.say(f"scaling {count} workers rep {rep + 1}: {measured.run.wall:.2f} s")
        lowest = self.args.scaling_workers[0]
        base = median(walls[lowest])
        # The bounds of the tree the first count built (the trees are alike: same fakes, same shape).
        tree = last[lowest]
        first = tree_bound(tree, self.latencies, lowest * self.args.scaling_concurrency)
        section = Section(
            f"Worker scaling, (4,3), workers of {self.args.scaling_concurrency} threads each (speed-up over {lowest})"
        )
        for count in self.args.scaling_workers:
            speedup = base / median(walls[count])
            slots = count * self.args.scaling_concurrency
            bound = tree_bound(tree, self.latencies, slots)
            row = Row(
                f"{count} worker{'s' if count > 1 else ''}",
                f"{speedup:.2f}×",
                f"{median(walls[count]):.1f} s; no scheduler under {bound:.1f} s on {slots} slots "
                f"(best speed-up {first / bound:.2f}×)",
                "≥ 3.65× at 4" if count == 4 else "",
                speedup >= 3.65 if count == 4 else None,
                median(loads[count]),
            )
            section.rows.append(row)
            if count == 4:
                self.target("scaling", replace(row, figure=f"(4,3) on {lowest} → 4 workers"))
        self.sections.append(section)

    def scale(self, stack: Any, owner: Any) -> None:
        """The overhead part's zero-latency (5,5) on each of --scale-workers worker processes: what more processes
        buy when CPU and the research row, not latency, are the limit."""
        from bench.probes import RunMeter

        concurrency, cores = self.args.scale_concurrency, os.cpu_count() or 1
        observed: dict[int, list[tuple[Measured, dict[str, float]]]] = {}
        skipped: dict[int, str] = {}
        for count in self.args.scale_workers:
            needed = count * concurrency + 5  # a connection per worker thread, and the runner's and probes'
            free, most = free_connections(stack.database_url)
            if needed > free:
                skipped[count] = (
                    f"its {count * concurrency} threads and the runner need about {needed} PostgreSQL connections; "
                    f"{free} of max_connections {most} are free"
                )
                self.say(f"scale {count} workers skipped: {skipped[count]}")
                continue
            with stack.workers(count, concurrency, f"bench-scale{count}-") as pool:
                self.warm(stack, owner, pool)
                stack.fakes.prepare(ZERO)
                for rep in range(self.args.scale_reps):
                    with RunMeter(stack, [p.pid for p in pool.processes]) as meter:
                        measured = self.engine_run(stack, owner, 5, 5, ZERO)
                    observed.setdefault(count, []).append((measured, meter.used))
                    self.record(
                        f"scale {count}",
                        {**measured.as_dict(), "workers": count, "concurrency": concurrency, "cpu": meter.used},
                    )
                    self.say(
                        f"scale {count} workers rep {rep + 1}: {measured.run.wall:.2f} s for {measured.run.tasks} "
                        f"tasks, {measured.lock.mean_waiting:.1f} of {measured.lock.mean_busy:.1f} busy backends "
                        f"waiting on the research row, cpu {meter.used}"
                    )

        def rate(count: int) -> float:
            return median([m.run.tasks / m.run.wall for m, _ in observed[count]])

        def waiting(count: int) -> tuple[float, float, float]:
            """Mean busy backends, how many of them wait on the research row, and that as a share."""
            busy = median([m.lock.mean_busy for m, _ in observed[count]])
            held = median([m.lock.mean_waiting for m, _ in observed[count]])
            return busy, held, held / busy if busy else 0.0

        def cores_busy(count: int) -> float:
            """Cores the stack kept busy: tasks a second times the CPU each took, every process of the stack."""
            per_task = median([sum(cpu_per_task(used, m.run.tasks).values()) for m, used in observed[count]])
            return rate(count) * per_task / 1000

        counts = [c for c in self.args.scale_workers if c in observed]
        lowest = counts[0] if counts else 0
        section = Section(
            f"Scale: zero-latency (5,5) on {', '.join(map(str, self.args.scale_workers))} workers of {concurrency} "
            f"threads each ({cores} cores; speed-up in tasks/s over {lowest} worker{'s' if lowest != 1 else ''})"
        )
        for count in self.args.scale_workers:
            name = f"{count} worker{'s' if count != 1 else ''}"
            if count in skipped:
                section.rows.append(Row(name, "skipped", skipped[count]))
                continue
            runs = observed[count]
            per_run = [cpu_per_task(used, m.run.tasks) for m, used in runs]
            cpu = {process: median([ms[process] for ms in per_run]) for process in CPU_PROCESSES}
            busy, held, share = waiting(count)
            section.rows.append(
                Row(
                    name,
                    f"{rate(count):.1f} tasks/s, {rate(count) / rate(lowest):.2f}×",
                    f"{median([m.run.wall for m, _ in runs]):.1f} s for {runs[0][0].run.tasks} tasks; {busy:.1f} busy "
                    f"PostgreSQL backends on average, {held:.1f} of them waiting on the research row ({share:.0%}); "
                    f"CPU per task {median([sum(ms.values()) for ms in per_run]):.1f} ms: {describe_cpu(cpu)}; "
                    f"{cores_busy(count):.1f} of the {cores} cores busy",
                    load=median([m.load for m, _ in runs]),
                )
            )
        if 4 in observed:
            at = median([m.load for m, _ in observed[4]])
            busy, held, share = waiting(4)
            section.rows.append(
                self.target(
                    "scale",
                    Row(
                        "(5,5) at zero latency on 4 workers: busy backends waiting on the research row",
                        f"{share:.0%}",
                        f"{held:.1f} of {busy:.1f} busy PostgreSQL backends on average ({concurrency} threads per "
                        "worker)",
                        "≤ 10 %",
                        share <= 0.10,
                        at,
                    ),
                )
            )
            speedup = rate(4) / rate(lowest)
            section.rows.append(
                self.target(
                    "scale",
                    Row(
                        f"(5,5) at zero latency on {lowest} → 4 workers",
                        f"{speedup:.2f}×",
                        f"{rate(4):.1f} against {rate(lowest):.1f} tasks/s; this machine has {cores} cores"
                        + ("" if cores >= 8 else ": the target is for 8 or more, not judged here")
                        + f"; {lowest} worker{'s' if lowest != 1 else ''} kept {cores_busy(lowest):.1f} of them busy, "
                        f"so at the same CPU per task the cores allow at most {cores / cores_busy(lowest):.2f}×"
                        + ("" if lowest == 1 else f"; the target is from 1 worker, not {lowest}"),
                        "≥ 3.0× (on 8+ cores)",
                        speedup >= 3.0 if cores >= 8 and lowest == 1 else None,
                        at,
                    ),
                )
            )
        self.sections.append(section)

    def adaptive(self, stack: Any, owner: Any) -> None:
        from bench.adaptive import MODES, REQUESTS, run_one, verdict

        shape = (4, 3)
        runs: dict[tuple[str, str], list[Any]] = {}
        with stack.workers(self.args.workers, self.args.concurrency, "bench-adaptive-"):
            for rep in range(self.args.adaptive_reps):
                for request in REQUESTS:
                    for mode in MODES:
                        run = run_one(stack, owner, self.latencies, request, mode, shape, self.args.timeout)
                        if run.status != "completed":
                            raise RuntimeError(f"adaptive bench: {request} {mode} ended {run.status}")
                        runs.setdefault((request, mode), []).append(run)
                        self.record(f"adaptive {request} {mode}", run.as_dict())
                        self.say(
                            f"adaptive rep {rep + 1} {request} {mode}: {run.wall:.1f} s, {run.calls} calls, "
                            f"${run.cost_usd:.4f}, depth {run.depth_reached}"
                        )
        section = Section(f"Adaptive against fixed mode, (4,3), latencies {self.latencies.describe()}")
        for (request, mode), measured in runs.items():
            section.rows.append(
                Row(
                    f"{request}, {mode}",
                    f"{median([r.calls for r in measured]):.0f} calls",
                    f"${median([r.cost_usd for r in measured]):.4f}; {median([r.tokens for r in measured]):,.0f} "
                    f"tokens; {median([r.wall for r in measured]):.1f} s; {measured[0].queries} queries, depth "
                    f"{measured[0].depth_reached}, {measured[0].gap_rounds} gap rounds",
                )
            )
        saved, extra = verdict(runs, median)
        section.rows.append(
            Row("simple request: calls saved by adaptive", f"{saved:.0%}", "", "≥ 30 %", saved >= 0.30, load())
        )
        section.rows.append(
            Row(
                "extra cost of adaptive, mean of both requests",
                f"{extra:+.0%}",
                "",
                "≤ +10 %",
                extra <= 0.10,
                load(),
            )
        )
        self.sections.append(section)

    def snapshots(self, owner: Any) -> None:
        from bench.probes import wait_until_quiet
        from bench.snapshots import build_tree, measure_delta, measure_snapshot

        section = Section(
            "Snapshots and deltas (research/live/snapshot.py build_snapshot, research/live/delta.py read_push)"
        )
        small_id, big_id = build_tree(owner, 2, 2), build_tree(owner, 5, 5)
        # One read at a time, timed by the clock: anything the parts before left running (a pool's workers winding
        # down, PostgreSQL's autovacuum after their writes) would be in these figures; the row says what was waited.
        waited, share = wait_until_quiet()
        self.say(f"snapshots: waited {waited:.0f} s for a quiet machine (CPU {share:.0%} busy)")
        section.rows.append(
            Row(
                "before measuring",
                f"waited {waited:.0f} s",
                f"until this machine's CPU was busy less than 20 % of a second, at most 60 s: {share:.0%} busy",
                load=load(),
            )
        )
        small = measure_snapshot("built (2,2) × 7", small_id)
        big = measure_snapshot("built (5,5) × 7", big_id)
        figures = [small, big]
        if self.real_5x5:
            figures.append(measure_snapshot("engine's (5,5) research", self.real_5x5))
        for fig in figures:
            at_size = fig.queries == 110
            row = Row(
                f"{fig.label}: {fig.queries} queries, {fig.websites} pages",
                f"{fig.build_ms:.1f} ms",
                f"{fig.json_bytes / 1000:.0f} KB JSON, {fig.sql_queries} SQL queries",
                "≤ 50 ms, constant queries" if at_size else "",
                (fig.build_ms <= 50 and fig.sql_queries == small.sql_queries) if at_size else None,
                load(),
            )
            section.rows.append(self.target("snapshots", row) if at_size else row)
            self.record("snapshot", {**asdict(fig), "load": load()})
        delta = measure_delta("delta of one event at 110 × 7", big_id)
        section.rows.append(
            self.target(
                "snapshots",
                Row(
                    delta.label,
                    f"{delta.build_ms:.1f} ms",
                    f"the push's events and delta read as the pusher does (research/live/delta.py read_push): one "
                    f"website analysed; {delta.json_bytes / 1000:.1f} KB JSON, {delta.sql_queries} SQL queries",
                    "≤ 5 ms",
                    delta.build_ms <= 5,
                    load(),
                ),
            )
        )
        self.record("delta", {**asdict(delta), "load": load()})
        self.sections.append(section)

    def resilience(self, stack: Any, owner: Any) -> None:
        from bench import resilience
        from bench.many import create_users

        began = time.monotonic()
        fair = resilience.fairness(stack, owner, create_users(1)[0])
        self.record("resilience fairness", {**asdict(fair), "load": load()})
        self.say(f"fairness: 1x1 alone {fair.alone:.1f} s, beside a 6x3 {fair.beside:.1f} s")
        fair_load = load()
        recovered = resilience.recovery(stack, owner)
        self.record("resilience recovery", {**asdict(recovered), "load": load()})
        cost = recovered.killed - recovered.undisturbed
        self.say(f"recovery: 3x3 undisturbed {recovered.undisturbed:.1f} s, a worker killed {recovered.killed:.1f} s")
        section = Section(
            f"Fairness and recovery (the figures of tests/test_faults.py, on the bench stack; "
            f"{time.monotonic() - began:.0f} s)"
        )
        section.rows += [
            self.target(
                "fairness",
                Row(
                    f"another user's 1x1 beside a 6x3 with {fair.backlog} steps waiting, one worker of 4 slots",
                    f"{fair.beside:.1f} s",
                    f"1x1 alone {fair.alone:.1f} s; the 6x3 still running when it was done: {fair.large_running}; "
                    f"latencies {resilience.FAIRNESS.describe()}",
                    f"≤ 3 × alone + 10 s ({fair.bound:.1f} s)",
                    fair.holds,
                    fair_load,
                ),
            ),
            self.target(
                "recovery",
                Row(
                    "a 3x3 with one of two workers killed (SIGKILL) mid-run, production leases",
                    f"{recovered.killed:.1f} s",
                    f"undisturbed {recovered.undisturbed:.1f} s: the kill cost {cost:.1f} s (a lease of 60 s, a sweep "
                    f"every 15 s); complete and exact; latencies {resilience.RECOVERY.describe()}",
                    f"≤ undisturbed + 90 s ({recovered.bound:.1f} s)",
                    recovered.holds,
                    load(),
                ),
            ),
        ]
        self.sections.append(section)

    def partitions(self, stack: Any, owner: Any) -> None:
        from bench import partitions

        began = time.monotonic()
        section = Section("Hosts cut off (bench/partitions.py, production leases; {} s)")
        for cut in partitions.CUTS:
            found = partitions.cut_off(stack, owner, cut)
            self.record(f"partition {cut}", {**asdict(found), "delay": found.delay, "load": load()})
            self.say(f"partition, {cut}: undisturbed {found.undisturbed:.1f} s, delay {found.delay:.1f} s")
            row = Row(
                f"a 3x3, one of two hosts cut off: {cut}",
                f"{found.delay:.1f} s",
                f"undisturbed {found.undisturbed:.1f} s, cut off {found.disturbed:.1f} s; host B stayed cut off "
                f"{found.cut_for:.1f} s, until host A had finished; its late steps changed nothing: "
                f"{found.unchanged}; latencies {partitions.LATENCIES.describe()}",
                f"delay ≤ a lease ({partitions.LEASE} s), nothing changed late",
                found.holds,
                load(),
            )
            section.rows.append(self.target("partitions", row))
        section.title = section.title.format(round(time.monotonic() - began))
        self.sections.append(section)

    def extraction(self) -> None:
        from bench import extraction

        section = Section("Main text (tests/corpus: segment precision, recall, F1; characters per page)")
        for name, part, score in extraction.table():
            self.record(f"extraction {name} {part}", asdict(score))
            self.say(f"extraction {name}, {part}: {score.describe()}")
            holds = None
            target = ""
            if name == "trafilatura (page_text today)" and part == "held-out":
                target = "F1 ≥ 0.90, precision ≥ 0.88, no page failing"
                holds = score.f1 >= 0.90 and score.precision >= 0.88 and not score.failed
            row = Row(
                f"{name}, {part} ({score.pages} pages)",
                f"P {score.precision:.3f} R {score.recall:.3f} F1 {score.f1:.3f}",
                f"{score.chars_per_page:,.0f} chars/page, {score.seconds_per_page * 1000:.1f} ms/page, "
                f"{len(score.failed)} failed",
                target,
                holds,
                load(),
            )
            section.rows.append(self.target("extraction", row) if target else row)
        self.sections.append(section)

    def quality(self, stack: Any, owner: Any) -> None:
        from bench.quality.part import SHAPE, measure

        result = measure(stack, owner, self.args.timeout, self.say)
        share, extractive, loopback = result.share, result.extractive, result.loopback
        described = {c.id: c for c in result.benchmark.checkpoints}
        for run in (extractive, loopback):
            self.record(
                f"quality {run.engine}",
                {
                    "research_id": run.research_id,
                    "status": run.status,
                    "wall": run.wall,
                    "queries": run.queries,
                    "analysed": sorted(run.analysed),
                    "verdicts": [asdict(v) for v in run.verdicts],
                    "markdown": run.markdown,
                    "load": load(),
                },
            )
        self.record("quality reach", [asdict(r) for r in result.reach])
        shape = f"({SHAPE[0]},{SHAPE[1]})"
        section = Section(
            f"Quality: a {shape} due-diligence research over a document share ({len(share.files)} files), "
            f"extractive engine, graded against {len(described)} checkpoints (bench/quality/)"
        )
        for verdict in extractive.verdicts:
            checkpoint = described[verdict.checkpoint]
            cited = ", ".join(dict.fromkeys(share.path_of(url) for url in verdict.urls)) or "nothing"
            detail = f"cites {cited}; current in {checkpoint.source}"
            if verdict.stale:
                detail += f"; stale {', '.join(verdict.stale)}"
            if verdict.verdict == "partial":
                detail += f"; found {', '.join(verdict.found) or 'a stale figure in uncited text'}"
            section.rows.append(Row(f"{verdict.checkpoint}: {checkpoint.description}", verdict.verdict, detail))
        counts = {name: sum(1 for v in extractive.verdicts if v.verdict == name) for name in VERDICTS}
        correct = counts["correct"] / len(extractive.verdicts)
        section.rows.append(
            Row(
                "totals",
                " / ".join(f"{counts[name]} {name}" for name in VERDICTS),
                f"{correct:.0%} correct; {len(extractive.analysed)} of the share's files analysed, "
                f"{len(extractive.analysed & result.benchmark.outdated)} of them outdated; research "
                f"{extractive.status} in {extractive.wall:.0f} s",
                load=load(),
            )
        )
        self.sections.append(section)
        section = Section(
            f"Quality: where each checkpoint's current passage got to, the same {shape} research with the loopback "
            "model (a figure-first analyst; a writer that copies its findings)"
        )
        for reach in result.reach:
            sources = ", ".join(reach.figure_sources) or "nothing"
            section.rows.append(
                Row(
                    f"{reach.checkpoint}: in a writer prompt",
                    "yes" if reach.in_writer_prompt else "no",
                    f"source analysed: {'yes' if reach.analysed else 'no'}; on a page shown to the analyst: "
                    f"{'yes' if reach.shown_to_analyst else 'no'}; stale figure in a writer prompt: "
                    f"{', '.join(reach.stale_in_writer_prompt) or 'none'}; the report: {reach.verdict}, the current "
                    f"figure cited from {sources}"
                    + ("; **only from archived or superseded files**" if reach.only_outdated else ""),
                )
            )
        reached = sum(1 for r in result.reach if r.in_writer_prompt)
        only_outdated = sum(1 for r in result.reach if r.only_outdated)
        section.rows.append(
            Row(
                "totals",
                f"{reached} of {len(result.reach)} in a writer prompt",
                f"{sum(1 for r in result.reach if r.analysed)} sources analysed; "
                f"{sum(1 for r in result.reach if r.stale_in_writer_prompt)} checkpoints with a stale figure in a "
                f"writer prompt; {only_outdated} current figures cited only from archived or superseded files; "
                f"research {loopback.status} in {loopback.wall:.0f} s",
                load=load(),
            )
        )
        self.sections.append(section)

    # --- all of it ---

    def run(self) -> None:
        from bench.probes import interpreter_ms, wait_until_quiet

        before = interpreter_ms()
        self.say(f"interpreter speed: a fixed loop took {before:.0f} ms of CPU")
        self.run_parts()
        wait_until_quiet(max_wait=30)
        after = interpreter_ms()
        self.raw["interpreter_ms"] = {"start": before, "end": after}
        row = Row(
            "a fixed pure-Python loop, CPU time",
            f"{before:.0f} ms at the start, {after:.0f} ms at the end",
            "2 million additions, the median of 5 runs (bench/probes.py interpreter_ms): the machine is virtual and "
            "its speed moves by the hour; CPU per task and wall times move with it",
        )
        self.sections.append(Section("This machine's speed", [row]))

    def run_parts(self) -> None:
        parts = self.args.parts
        if "extraction" in parts:
            self.extraction()
        if not set(parts) - {"extraction"}:
            return  # no research runs: no stack to start
        from bench import engine
        from bench.stack import Stack

        with Stack() as stack:
            self.say(f"stack ready: database {stack.database_name}, redis {stack.redis_url}")
            owner = engine.create_user()
            if {"critical", "overhead", "many", "reference"} & set(parts):
                with stack.workers(self.args.workers, self.args.concurrency, "bench-main-") as pool:
                    if "critical" in parts or "reference" in parts:
                        self.critical(stack, owner)
                        self.warm_pools.append(pool)  # its runs warmed it
                    if "overhead" in parts:
                        self.overhead(stack, owner, pool)
                    if "many" in parts:
                        self.many(stack, pool)
            if "reference" in parts:
                self.reference(stack)
            if "scaling" in parts:
                self.scaling(stack, owner)
            if "scale" in parts:
                self.scale(stack, owner)
            if "snapshots" in parts:
                self.snapshots(owner)
            if "adaptive" in parts:
                self.adaptive(stack, owner)
            if "resilience" in parts:
                self.resilience(stack, owner)
            if "partitions" in parts:
                self.partitions(stack, owner)
            if "quality" in parts:
                self.quality(stack, owner)

    def targets_section(self) -> Section:
        """Every target's row the parts measured, in TARGET_ORDER: each shape's target ratio (wall / ideal, or wall /
        bound) with the reference models beside it."""
        section = Section("Targets")
        for group in (*TARGET_ORDER, *sorted(set(self.targets) - set(TARGET_ORDER))):
            section.rows += self.targets.get(group, [])
        return section

    def table(self) -> str:
        lines = []
        for section in [*self.sections, self.targets_section()]:
            lines += ["", f"## {section.title}", "", "| figure | value | detail | target | holds | load |"]
            lines.append("|---|---|---|---|---|---|")
            for row in section.rows:
                holds = "" if row.holds is None else ("yes" if row.holds else "**no**")
                shown_load = "" if row.load is None else f"{row.load:.1f}"
                lines.append(f"| {row.figure} | {row.value} | {row.detail} | {row.target} | {holds} | {shown_load} |")
        return "\n".join(lines)


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__.split("\n\n")[0])
    add: Callable[..., Any] = parser.add_argument
    add("--parts", nargs="+", choices=PARTS, default=list(DEFAULT_PARTS), help="parts to run (default: all)")
    add("--reps", type=int, default=3, help="repetitions of each critical-path shape (default 3)")
    add("--big-reps", type=int, default=2, help="repetitions of the (5,5) critical-path run (default 2)")
    add("--ref-reps", type=int, default=1, help="repetitions of each reference run (default 1: they are sleeps)")
    add("--overhead-reps", type=int, default=2, help="repetitions of the zero-latency run (default 2)")
    add("--scaling-reps", type=int, default=1, help="repetitions per worker count (default 1)")
    add("--workers", type=int, default=4, help="worker processes for critical/overhead (default 4)")
    add("--concurrency", type=int, default=16, help="threads per worker for critical/overhead (default 16)")
    add("--scaling-workers", type=int, nargs="+", default=[1, 2, 4, 8], help="worker counts (default 1 2 4 8)")
    add("--scaling-concurrency", type=int, default=2, help="threads per worker when scaling (default 2)")
    add("--scale-workers", type=int, nargs="+", default=[1, 2, 4, 8], help="scale: worker counts (default 1 2 4 8)")
    add("--scale-concurrency", type=int, default=16, help="threads per worker in the scale part (default 16)")
    add("--scale-reps", type=int, default=1, help="repetitions per worker count in the scale part (default 1)")
    add("--shapes", type=_shape, nargs="+", default=list(SHAPES), help="critical-path shapes, e.g. 4x3 5x5")
    add("--many", type=int, default=20, help="researches the many part starts at once (default 20)")
    add("--many-users", type=int, default=5, help="users they are shared by, round-robin (default 5)")
    add("--many-shape", type=_shape, default=(3, 3), help="the shape of each of them (default 3x3)")
    add("--adaptive-reps", type=int, default=1, help="repetitions of each adaptive-bench run (default 1)")
    add("--timeout", type=float, default=900, help="seconds one research may take (default 900)")
    defaults = Latencies()
    for name in ("plan", "search", "page", "analysis", "report"):
        add(f"--{name}", type=float, default=getattr(defaults, name), help=f"{name} latency, s")
    add("--json", type=Path, default=None, help="where to write the raw runs (default var/bench/bench-<time>.json)")
    return parser.parse_args(argv)


def _shape(text: str) -> tuple[int, int]:
    breadth, _, depth = text.partition("x")
    return int(breadth), int(depth)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    logging.basicConfig(level=logging.WARNING)
    bench = Bench(args)
    began = time.monotonic()
    try:
        bench.run()
    finally:
        bench.raw["seconds"] = time.monotonic() - began
        bench.raw["sections"] = [asdict(s) for s in bench.sections]
        path = args.json or OUT_DIR / f"bench-{time.strftime('%Y%m%d-%H%M%S')}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(bench.raw, indent=1, default=str))
        print(bench.table())
        print(f"\n{time.monotonic() - began:.0f} s in all; raw runs in {path}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
